/*
 * claim-templates-plan: what the template keeper (controllers/
 * claim-templates.h) does in one round, decided from plain values: the
 * policy, the Namespaces and the ResourceClaimTemplates it listed, the
 * clock.  Pure: no JSON, no API, no clock of its own; unit-tested without
 * a server (tests/unit/controllers/claim_templates_plan_test.c).
 *
 * Wanted: in every active namespace of a tenant, for every class the
 * tenant may use whose flavor has a dra block, and every count from
 * class->gpus to class->max_gpus, the template dra_template_name() names
 * (docs/design/dra.md, D1; every count at once, not on demand:
 * "What came out differently").
 *
 * Each template seen is one of:
 *
 *   kept     gpugate's (labelled app.kubernetes.io/managed-by=gpugate, a
 *            gpugate.* name) and wanted
 *   taken    wanted, but not labelled gpugate's: never touched; the pods
 *            that would name it are denied (usage/template-board.h)
 *   garbage  gpugate's and not wanted (the dra block changed: a stale
 *            hash; the class or the count left the policy; the namespace
 *            left its tenant, or the class the tenant): deleted once no
 *            non-terminal pod of its namespace names it and it is older
 *            than CLAIM_TEMPLATES_GRACE_S
 *   (none)   anything else: somebody else's, and no name gpugate wants
 *
 * and every wanted name not seen is to be created.  Nothing is planned
 * in a namespace that is not active (a Terminating one refuses new
 * objects and takes its templates with it).
 */
#ifndef GPUGATE_CLAIM_TEMPLATES_PLAN_H
#define GPUGATE_CLAIM_TEMPLATES_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/dra-template.h"

struct policy;
struct policy_class;

/* How old a template must be before it is garbage: the webhook's timeout
 * (5 s) and a minute, so that a pod admitted a moment ago naming it has
 * reached the pod listing (docs/design/dra.md, "Updated with the policy"). */
#define CLAIM_TEMPLATES_GRACE_S 65
/* Caps of one round: a plan past them is cut (the next round goes on). */
#define CLAIM_TEMPLATES_MAX_STEPS 100000

struct claim_templates_ns {
	const char *name;
	bool active; /* status.phase Active (or absent) */
};

struct claim_templates_seen {
	const char *ns;
	const char *name;
	bool ours;         /* labelled app.kubernetes.io/managed-by=gpugate */
	int64_t created_s; /* metadata.creationTimestamp, Unix seconds; 0: unknown */
	const char *uid;   /* the delete's precondition; NULL: none */
};

struct claim_templates_create {
	const char *ns;                 /* borrowed from the namespaces given */
	const struct policy_class *cls; /* of a DRA flavor */
	unsigned count;
	char name[DRA_TEMPLATE_NAME_MAX];
};

struct claim_templates_garbage {
	const struct claim_templates_seen *t; /* borrowed from the seen given */
	bool young; /* not yet CLAIM_TEMPLATES_GRACE_S old: kept this round */
};

struct claim_templates_plan {
	struct claim_templates_create *create;
	size_t n_create, cap_create;
	/* Into the seen given. */
	const struct claim_templates_seen **taken;
	size_t n_taken, cap_taken;
	struct claim_templates_garbage *garbage;
	size_t n_garbage, cap_garbage;
	size_t kept;
	bool cut; /* a cap was reached: the rest next round */
};

/*
 * The round's plan into *out (released by claim_templates_plan_release(),
 * also after a failure): -1 only when out of memory.  now_s: the clock,
 * Unix seconds.
 */
int claim_templates_plan(const struct policy *p, const struct claim_templates_ns *ns,
			 size_t n_ns, const struct claim_templates_seen *seen,
			 size_t n_seen, int64_t now_s, struct claim_templates_plan *out);

void claim_templates_plan_release(struct claim_templates_plan *pl);

/*
 * Whether garbage g goes now: old enough, and no non-terminal pod of its
 * namespace names it (used: the spec.resourceClaims[].
 * resourceClaimTemplateName of those pods, n_used of them).
 */
bool claim_templates_deletable(const struct claim_templates_garbage *g,
			       const char *const *used, size_t n_used);

#endif
