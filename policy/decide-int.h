/*
 * decide-int: what the parts of the decision share.  INTERNAL: included
 * only by policy/decide*.c; everything else reads policy/decide.h.
 *
 * The decision (policy/decide.h) is cut into parts, each a file:
 *
 *   decide.c           the entry points and the rule order (UPDATE, status,
 *                      ephemeral containers, the quota outcome)
 *   decide-msg.c       recording a violation, warnings, the lists messages name
 *   decide-facts.c     what the rules read of a workload's facts
 *   decide-security.c  the security rules
 *   decide-raw.c       a flavor resource without a class
 *   decide-class.c     a class
 *   decide-plan.c      stamps, the plan, the lines after quota
 *   decide-pool.c      the pool's rule and advice
 *   decide-dra.c       ResourceClaims and ResourceClaimTemplates
 *   decide-wait.c      why a pod waits (decide_waiting())
 *
 * Every function here follows the decision's conventions: a bool "true"
 * means the decision is final (denied in enforce mode); text goes into
 * caller buffers of the size given, cut, never overrun.
 */
#ifndef GPUGATE_DECIDE_INT_H
#define GPUGATE_DECIDE_INT_H

#include "policy/charge.h"
#include "policy/decide.h"
#include "policy/pool.h"
#include "policy/rules.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* More than any gang holds; small enough that decide_parse_count cannot
 * wrap. */
#define BORROWED_MAX 100000000u

/* One decision being made. */
struct ctx {
	const struct decide_input *in;
	const struct policy *p;
	const struct workload *wl;
	struct decision *out;
	struct charge charge; /* what wl holds (policy/charge.h) */
};

/* ---- decide-msg.c ------------------------------------------------------ */

/* Adds a warning (printf-style), cut to DECIDE_WARNING_LEN, one line of
 * valid UTF-8; nothing when the warnings are full. */
void decide_add_warning(struct decision *out, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * Records a violation of rule (its id from the table, policy/rules.h);
 * the first one wins.  Returns true when the
 * decision is final (enforce mode: denied).  In warn mode the text becomes
 * a warning at /validate; in audit mode it is only recorded.
 */
bool decide_violate(struct ctx *c, enum rules_id rule, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Appends s to a comma-separated list in buf, keeping it bounded. */
void decide_list_add(char *buf, size_t size, const char *s);
/* The classes tenant t can actually use: allowed, sharing ok, has quota
 * ("none" when none). */
void decide_usable_classes(const struct policy *p, const struct policy_tenant *t,
			   char *buf, size_t size);
/* " (did you mean \"C\"?)" for the class t can use that is nearest to
 * name, or "". */
const char *decide_nearest_usable_class(const struct policy *p,
					const struct policy_tenant *t,
					const char *name, char *buf, size_t size);
/* The sharing modes t may use ("none" when none). */
void decide_sharing_list(const struct policy_tenant *t, char *buf, size_t size);

/* ---- decide-facts.c ---------------------------------------------------- */

/* The pod's label key, else (a Job, a template) the object's; NULL: none. */
const char *decide_label(const struct workload *wl, const char *key);
/* The same for an annotation. */
const char *decide_annotation(const struct workload *wl, const char *key);
/* Units of resource res in ct: its limit, else its request.  false: ct
 * names it in neither; *units -1 when the quantity is no whole number;
 * *raw (when raw) the quantity as written. */
bool decide_container_units(const struct wl_container *ct, const char *res,
			    int64_t *units, const char **raw);
/* Whether the list r of n names resource name. */
bool decide_has_resource(const struct wl_resource *r, size_t n, const char *name);
/* Whole decimal 1..max without sign or leading zero, into *out. */
bool decide_parse_count(const char *s, unsigned max, unsigned *out);

/* ---- decide-security.c ------------------------------------------------- */

/* The security rules over every container of the pod (gpu_index: the
 * class's GPU container, or -1).  True when final. */
bool decide_check_security(struct ctx *c, long gpu_index);

/* ---- decide-raw.c, decide-class.c, decide-dra.c ------------------------ */

/* A flavor resource without a class: rules, then the quota claim. */
void decide_raw(struct ctx *c, const char *resource);
/* DRA classes (policy/decide-class-dra.c).  Every pod: gpugate's entry
 * and template names are gpugate's (rule class-conflict).  A class of a
 * DRA flavor: at /mutate, what the pod has already; at /validate, that it
 * carries the class's template.  True when denied. */
bool decide_dra_entries(struct ctx *c, const char *class_name);
bool decide_dra_class_mutate(struct ctx *c, size_t gpu, unsigned count);
bool decide_dra_class_mutated(struct ctx *c, size_t gpu);
/* deviceclass.resource.kubernetes.io/C of a GPU device class C: rule
 * gpus-invalid for a fraction of it, rule raw-request where no flavor maps
 * C (rawGpuRequests: reject); true when it denied. */
bool decide_raw_device_class(struct ctx *c);
/* A class: rules, mapping, then the quota claim. */
void decide_class(struct ctx *c, const char *class_name);
/* A ResourceClaim or ResourceClaimTemplate CREATE: rules and claim. */
void decide_claim(struct ctx *c);
/* A ResourceClaim's quota outcome q. */
void decide_claim_quota(struct ctx *c, const struct quota_result *q);

/* ---- decide-plan.c ----------------------------------------------------- */

/* What a tenant may hold at most, as a NEVER_FITS message says it. */
void decide_ceiling_text(const struct quota_result *q, char *buf, size_t size);
/* A pod template's quota ceiling (rule "quota"). */
void decide_template_ceiling(struct ctx *c);
/* The denial of QUOTA_LENT_OUT and QUOTA_RECLAIM_SHORT; req says what was
 * requested. */
void decide_lent_out(struct ctx *c, const struct quota_result *q, const char *tenant,
		     const char *flavor, const char *req);
/* "24/32 in use" and, when borrowing, the borrowed part. */
void decide_position_text(const struct ctx *c, char *buf, size_t size);
/* head, then tail, as the success line (and a warning with
 * settings.admissionWarnings all). */
void decide_add_success(struct ctx *c, char *head, const char *tail);
/* After the rules and quota: the plan (/mutate) or the lines /validate
 * says of what it admits. */
void decide_finish(struct ctx *c);

/* ---- decide-gang.c ----------------------------------------------------- */

/*
 * The gang-start route of Job wl of class cls (policy/gang.h), with
 * served what the cluster serves; gang_id is the Job's gang id.  GANG_NONE
 * with why ("none (one pod)", "left to scheduler X", ...) or why "" when
 * the class has no gang.
 */
enum gang_route decide_gang_route(const struct policy *p, const struct policy_class *cls,
				  const struct workload *wl, unsigned served,
				  const char *gang_id, char *why, size_t size);
/* The gang part of the plan at /mutate (a Job's route; a pod's gate). */
void decide_gang_plan(struct ctx *c);
/* /validate: what would start part of a gang early.  True when final. */
bool decide_gang_guard(struct ctx *c);
/*
 * Whether the request's user is gpugate itself: its user
 * (decide_input.self_user, learned by a SelfSubjectReview at start), or,
 * while that is not known, any ServiceAccount of its namespace.  Only
 * gpugate takes its gang gate off a pod and writes its claim templates.
 */
bool decide_gpugate_user(const struct decide_input *in);

/* ---- decide.c ---------------------------------------------------------- */

/* The usage store could not decide: denied in every mode (rule "quota"). */
void decide_unavailable(struct ctx *c, const struct quota_result *q);

/* ---- decide-pool.c ----------------------------------------------------- */

/* "; 2 nodes excluded: a (cordoned), ..." or "", at most room bytes. */
void decide_excluded_text(const struct pool_check *pc, char *buf, size_t size,
			  size_t room);
/* "all 4 nodes", or "the one node" (n == 1); returns buf. */
const char *decide_nodes_text(size_t n, const char *all, char *buf, size_t size);
/* A pod template against the pool (rule "pool"; a warning at /validate). */
void decide_template_pool(struct ctx *c);

#endif
