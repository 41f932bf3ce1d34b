/*
 * decide: the admission decision for one Pod or Job (SPEC sections 4-6).
 *
 * Pure: it reads the policy and the workload facts and fills a decision;
 * no I/O, no clock, no globals.  Quota is the one input that lives outside
 * (the usage ledger), so a decision is made in two steps that the handler
 * joins:
 *
 *   decide_prepare(in, dec)       rules, class mapping, the quota claim
 *   if (dec->claim.needed)
 *       ledger -> quota_result    peek at /mutate, reserve at /validate
 *       decide_quota(in, dec, q)  quota outcome, preemptibility, plan, warnings
 *
 * UPDATE is allowed without mutation, except that /validate refuses a
 * change to the labels gpugate stamped, a raise of what a running GPU Job
 * runs at once (min(parallelism, completions): its pods ride on its
 * reservation) and a change of its template's GPU request; resuming a Job
 * is judged like a create.
 *
 * Rules run in a fixed order (docs/internals.md); the first violation is
 * the one reported.  In enforce mode it denies; in warn mode the workload is
 * admitted and the text becomes a warning (from /validate only, so kubectl
 * prints it once); in audit mode it is only recorded.
 */
#ifndef GPUGATE_DECIDE_H
#define GPUGATE_DECIDE_H

#include "policy/gang.h"
#include "policy/policy.h"
#include "policy/quota.h"
#include "policy/workload.h"

#include <stdbool.h>
#include <stdint.h>

/* Stamped keys (SPEC section 2). */
#define STAMP_TENANT "gpugate.io/tenant"
#define STAMP_FLAVOR "gpugate.io/flavor"
#define STAMP_PREEMPTIBLE "gpugate.io/preemptible"
#define STAMP_GANG "gpugate.io/gang"
#define STAMP_DECISION "gpugate.io/decision"
#define STAMP_BORROWED "gpugate.io/borrowed"
#define ANNOTATION_CONTAINER "gpugate.io/container"
/* Kueue's queue label: the workload waits in that LocalQueue (suspended, or
 * a pod behind a scheduling gate) until Kueue admits it (docs/quota.md,
 * "Running with Kueue"). */
#define KUEUE_QUEUE_LABEL "kueue.x-k8s.io/queue-name"
/* The scheduling gate Kueue's pod integration puts on the pods it holds
 * (and removes when it admits them). */
#define KUEUE_ADMISSION_GATE "kueue.x-k8s.io/admission"
#define CHECKPOINT_VOLUME "gpugate-checkpoint"
/* The checkpoint signal (SPEC section 6): the reclaimer (controllers/reclaimer.h)
 * writes STAMP_CHECKPOINT_REQUESTED (an RFC 3339 UTC time) on a victim's pods; a
 * downward API volume shows it inside the containers as the file
 * SIGNAL_FILE, which is empty until then.  The workload answers with
 * STAMP_CHECKPOINT_DONE on its pod.  Neither is a stamp users are kept from
 * setting: a pod that sets the request on itself only signals itself. */
#define STAMP_CHECKPOINT_REQUESTED "gpugate.io/checkpoint-requested"
#define STAMP_CHECKPOINT_DONE "gpugate.io/checkpoint-done"
#define SIGNAL_VOLUME "gpugate-signal"
#define SIGNAL_MOUNT_PATH "/etc/gpugate/signal"
#define SIGNAL_ITEM "checkpoint-requested"
#define SIGNAL_FIELD_PATH "metadata.annotations['" STAMP_CHECKPOINT_REQUESTED "']"
#define SIGNAL_FILE SIGNAL_MOUNT_PATH "/" SIGNAL_ITEM
#define SIGNAL_ENV "GPUGATE_CHECKPOINT_SIGNAL"

#define DECIDE_MESSAGE_LEN 1024
#define DECIDE_WARNING_LEN 256
#define DECIDE_MAX_WARNINGS 6
/* kubectl prints warnings as they come: keep the success line short. */
#define DECIDE_SUCCESS_MAX 119

enum decide_phase {
	DECIDE_MUTATE,
	DECIDE_VALIDATE,
};

/*
 * The cluster's PriorityClasses (scheduling.k8s.io/v1), read only: the
 * value of class `name`, or with name NULL of the globalDefault one.
 * false: not known (no such class, or nobody watches them).
 */
struct priority_view {
	const void *ctx;
	bool (*value)(const void *ctx, const char *name, int32_t *out);
};

/*
 * The cluster's PersistentVolumeClaims, read only: what claim `name` in
 * namespace `ns` is (usage/pvcs.h).
 */
enum pvc_state {
	PVC_UNKNOWN,    /* nobody watches them, or not listed yet */
	PVC_MISSING,    /* no such claim */
	PVC_ONE_NODE,   /* exists; not ReadWriteMany */
	PVC_MANY_NODES, /* exists, ReadWriteMany: pods on several nodes mount it */
};
struct pvc_view {
	const void *ctx;
	enum pvc_state (*state)(const void *ctx, const char *ns, const char *name);
};

struct decide_input {
	const struct policy *policy;
	const struct workload *wl;
	enum decide_phase phase;
	const struct workload *old; /* UPDATE: the object before; else NULL */
	/* NULL: no PriorityClass is known (a pod's spec.priority still is). */
	const struct priority_view *priorities;
	/* NULL: no PersistentVolumeClaim is known (nothing is said of the
	 * checkpoint claim). */
	const struct pvc_view *pvcs;
	/* What the pool says of a pod template (WL_TEMPLATE: its pods are
	 * weighed here, since they hold no quota claim); NULL: the pool is
	 * not known and nothing is said of it. */
	const struct decide_pool_source *pool;
	/* Which flavor's node a pod's spec.nodeName is; NULL: no node is
	 * known (such a pod is then judged by what it selects alone). */
	const struct decide_node_source *nodes;
	/* What the cluster serves for gang start (GANG_SERVES_* of
	 * policy/gang.h); 0: nothing is known. */
	unsigned gang_served;
	/* Who gpugate is to the apiserver (its username; NULL: not known)
	 * and its namespace (NULL: not known): only gpugate takes its gang
	 * gate off a pod. */
	const char *self_user;
	const char *self_namespace;
	/* What gpugate's template keeper found (controllers/claim-templates.h):
	 * NULL, nothing known (a DRA class is then never denied for it). */
	const struct decide_template_source *templates;
};

/*
 * The claim templates of DRA classes, as the keeper last found them
 * (usage/template-board.h): whether the cluster serves them (DECIDE_*),
 * and whether template name in namespace ns is a stranger's.
 */
enum decide_templates_served {
	DECIDE_TEMPLATES_UNKNOWN,
	DECIDE_TEMPLATES_SERVED,
	DECIDE_TEMPLATES_NOT_SERVED,
};
struct decide_template_source {
	enum decide_templates_served (*served)(void *ctx);
	bool (*taken)(void *ctx, const char *ns, const char *name);
	void *ctx;
};

/*
 * The cluster's GPU nodes by name: the first flavor (in policy order)
 * whose node `node` is, or NULL when it is no flavor's or not known.  The
 * server reads its inventory (usage/inventory.h); tests a canned list.
 */
struct decide_node_source {
	const struct policy_flavor *(*flavor_of)(void *ctx, const char *node);
	void *ctx;
};

/*
 * Where a template's pods are weighed against the GPU nodes: fit() fills
 * *out as inventory_fit() does (usage/inventory.h) for pods pods of
 * per_pod units of flavor f, in one domain of topology_key when not NULL.
 * The server reads its inventory; tests give a canned pool_check.
 */
struct pool_check;
struct decide_pool_source {
	void (*fit)(void *ctx, const struct policy_flavor *f, int64_t per_pod,
		    int64_t pods, const char *topology_key, struct pool_check *out);
	void *ctx;
};

/* What the workload asks of the tenant's quota. */
struct quota_claim {
	bool needed;
	const struct policy_tenant *tenant;
	const struct policy_flavor *flavor;
	int64_t units;      /* pods x per_pod */
	unsigned per_pod;
	int64_t pods;       /* 1 for a Pod, parallelism for a Job */
	bool may_borrow;    /* the workload is (or will be made) preemptible */
	/* A pod that may ride on its Job's gang (policy/charge.h). */
	const char *owner_job_uid;
	/* A claim that may ride on its pod (policy/charge.h). */
	const char *owner_pod_uid;
	/* The priority its pods run at (decide_priority()): what
	 * reclaimWithinCohort LowerPriority compares. */
	int32_t priority;
	/* Kueue holds it and owns the tenant's quota (kueue.quotaOwner):
	 * counted, never refused for quota (the store holds it even when
	 * over; decide_quota() only warns).  Only where Kueue really holds
	 * the object: the resume of a suspended Job, a Pod behind
	 * KUEUE_ADMISSION_GATE; never for the queue label alone. */
	bool kueue_quota;
};

/*
 * What to change in the object.  The applier (webhook/apply.c) gives every
 * field "ensure" semantics: set when absent or different, never clobber what
 * the user wrote unless the field says so, so that applying a plan to an
 * object that already carries it changes nothing.
 */
struct plan {
	bool active;                 /* anything at all to apply */
	bool strip_stamps;           /* remove stamped keys the user set */
	char note[DECIDE_WARNING_LEN]; /* unmapped warn/audit record, or "" */

	/* Stamps only: a raw request (no class) charged to quota, so that
	 * the API watch finds it. */
	bool stamp_only;

	/* Class mapping (pod, or Job pod template). */
	bool map;
	size_t gpu_container;        /* index into wl->pod.containers */
	const char *resource;        /* limits[resource] = count; NULL: DRA */
	/* A class of a DRA flavor: spec.resourceClaims entry
	 * DRA_TEMPLATE_ENTRY names this template, and the GPU container uses
	 * it (policy/dra-template.h); "" otherwise. */
	char dra_template[96];
	unsigned count;
	const struct policy_flavor *flavor; /* nodeSelector, tolerations */
	const char *cpu;             /* requests.cpu to set, or NULL */
	const char *memory;          /* requests.memory to set, or NULL */
	const char *priority_class;  /* spec.priorityClassName to set, or NULL */
	/* A Job's kueue.x-k8s.io/queue-name to set where it has none (the
	 * tenant's kueue.localQueue), or NULL. */
	const char *queue_name;
	enum policy_topology_mode topology;
	const char *topology_key;
	char gang[24];               /* "" when not part of a gang */
	bool remove_gang;            /* a bare pod: drop a user-set gang label */
	/* Gang start (policy/gang.h): a Job's route (stamped on the Job and
	 * its template as STAMP_GANG_ROUTE), its gang's pods, and whether
	 * route workload writes the topology constraint (topology_key);
	 * GANG_NONE: nothing is written.  A pod of a Job on route gates
	 * gets GANG_GATE when it lacks it (gang_gate). */
	enum gang_route gang_route;
	int64_t gang_pods;
	bool gang_topology;
	bool gang_gate;

	/* Stamps. */
	const char *tenant;
	const char *class_label;     /* Job: copy the class label to the template */
	const char *class_name;
	const char *gpus_label;      /* Job: copy the gpus label, when set */
	const char *gpus_value;
	bool preemptible;
	char decision[DECIDE_WARNING_LEN];
	bool keep_decision;          /* a Job's pod: keep the template's record */
	int64_t borrowed;            /* > 0: annotation; else removed */

	/* Checkpoint hooks (SPEC section 6). */
	bool checkpoint;
	char claim_name[254];        /* "" for an emptyDir volume */
	/* The claim claim_name is known not to exist: no checkpoint volume
	 * and no mount of it (the pods would not start); the rest of the
	 * hooks stay. */
	bool no_volume;
	/* Preemptible without the hooks (it borrowed): no grace is added, but
	 * a longer terminationGracePeriodSeconds than grace_cap is lowered to
	 * it, so that a reclaim is not held for a grace the tenant chose. */
	bool cap_grace;
	int64_t grace_cap;
	bool set_pre_stop;
	int64_t grace;               /* terminationGracePeriodSeconds, exactly */
	bool add_failure_rule;       /* Job podFailurePolicy Ignore rule */
	/* The checkpoint signal: the SIGNAL_VOLUME downward API volume, its
	 * read-only mount at SIGNAL_MOUNT_PATH and SIGNAL_ENV=SIGNAL_FILE in
	 * every app container (each only where the user has none). */
	bool signal;
	/* Job: spec.podReplacementPolicy Failed when the user set none, so
	 * that a replacement pod waits until its predecessor has really
	 * stopped (and given back its GPUs) rather than being charged beside
	 * it while it terminates. */
	bool replace_when_failed;
};

struct decision {
	bool allowed;
	int code;                    /* HTTP-style status of a denial (403) */
	char message[DECIDE_MESSAGE_LEN]; /* the denial, or the violation text */
	const char *rule;            /* id of the violated rule (rules_name(),
				      * policy/rules.h), or NULL */
	bool violation;              /* a rule failed (denied, warned or audited) */
	/* settings.exemptions matched: nothing judged, nothing changed. */
	enum policy_exemption exempt;
	enum policy_mode mode;
	char warnings[DECIDE_MAX_WARNINGS][DECIDE_WARNING_LEN];
	size_t n_warnings;
	/* The success line of an admitted workload at /validate ("" when
	 * none), and whether it is one of the warnings (settings.
	 * admissionWarnings all): every other warning is a problem. */
	char success[DECIDE_WARNING_LEN];
	bool success_warned;

	const struct policy_tenant *tenant;
	const struct policy_class *cls;   /* NULL for raw requests */
	const struct policy_flavor *flavor;
	unsigned count;                   /* per pod */

	struct quota_claim claim;
	/* The LocalQueue the workload waits in (KUEUE_QUEUE_LABEL, or the one
	 * gpugate stamps); NULL: none.  A Job queued at /mutate is charged
	 * when Kueue admits it (unsuspends it), not at creation. */
	const char *queue;
	bool has_quota;
	struct quota_result quota;

	struct plan plan;
};

/*
 * The priority wl's pods run (or will run) at: a Pod's spec.priority (the
 * apiserver's Priority plugin resolved it before any webhook) unless
 * class_priority (the priorityClassName a class sets on pods that name
 * none; NULL: none) replaces it; else the value of the priorityClassName
 * (the pod's, a Job template's, or class_priority) in pv, or of the
 * globalDefault class when there is none; else 0.  A claim carries it
 * (quota_claim.priority); the watch ranks a Job's reclaim by it.
 */
int32_t decide_priority(const struct workload *wl, const char *class_priority,
			const struct priority_view *pv);

/* Adds text to out's warnings as the decision's own are added: cut to
 * DECIDE_WARNING_LEN, one line of valid UTF-8; nothing when they are full. */
void decide_note(struct decision *out, const char *text);

/* How many of dec's warnings are problems: all but the success line
 * (decision.success_warned).  gpugate explain counts such an object as
 * warned. */
size_t decide_problem_count(const struct decision *dec);

/* Step 1: rules, mapping and the quota claim. */
void decide_prepare(const struct decide_input *in, struct decision *out);

/* Step 2: the quota outcome (only when out->claim.needed). */
void decide_quota(const struct decide_input *in, struct decision *out,
		  const struct quota_result *q);

/*
 * Step 2 with the pool (policy/pool.h): pc is what the inventory says about
 * out->claim (NULL or not known: nothing is said).  When quota admits it,
 * a request no usable node could ever hold violates rule "pool" (denied
 * in enforce mode; a warning in warn mode; recorded in audit mode, in the
 * decision annotation like any rule); then decide_quota(); then, at
 * /validate, advice for what was admitted but has no room now
 * (fragmentation, excluded nodes, no node of the flavor yet).  A Job's
 * pods were weighed with their Job and are not checked again.
 * decide_pool_denies() tells before quota is reserved whether the pool
 * will deny (enforce mode), so that nothing is reserved for it.
 */
struct pool_check;
void decide_quota_pool(const struct decide_input *in, struct decision *out,
		       const struct quota_result *q, const struct pool_check *pc);
/* The topology key a gang of out must fit into one domain of (a class
 * with a required topology and more than one pod), or NULL. */
const char *decide_pool_topology(const struct decision *out);

/*
 * What the pool says of out->claim, after decide_prepare(), in *pc: asked
 * of in->pool (the one way the pool reaches the decision, for templates
 * and for the claims of Pods and Jobs alike) for the claim's pods, in one
 * domain of decide_pool_topology().  pc->known is false, and nothing else
 * set, when the pool is not known (in->pool NULL) or there is nothing it
 * weighs: no claim, a Job's pod (weighed with its Job), a ResourceClaim.
 * Then pass pc to decide_pool_denies(), decide_holds_units() and
 * decide_quota_pool().
 */
void decide_pool_check(const struct decide_input *in, const struct decision *out,
		       struct pool_check *pc);

/* The kind of a Job or a WL_TEMPLATE workload, as its row names it
 * ("Deployment"). */
const char *decide_kind_name(const struct workload *wl);
bool decide_pool_denies(const struct decide_input *in, const struct decision *out,
			const struct pool_check *pc);

/*
 * Whether the quota step holds (reserves) units for out->claim, rather
 * than only peeking: only at /validate, never for a dry run (dry_run: the
 * request's dryRun), and only for what will be admitted: out allowed so
 * far, and not about to be refused by the pool (decide_pool_denies(), pc
 * from decide_pool_check()).
 */
bool decide_holds_units(const struct decide_input *in, const struct decision *out,
			const struct pool_check *pc, bool dry_run);

/*
 * Why a pod of per_pod units of flavor f waits for a node, one line in out
 * (size > 0): what the pool says (pc, for one pod: no node of the flavor,
 * every node excluded, none could ever hold it, or no room now with who
 * holds the flavor, from u), else, when the pool has room or is not known,
 * the scheduler's own message ("" when it gave none: out is then "").
 */
struct usage_view;
void decide_waiting(const struct policy *p, const struct policy_flavor *f,
		    int64_t per_pod, const struct pool_check *pc,
		    const struct usage_view *u, const char *scheduler, char *out,
		    size_t size);

/*
 * An UPDATE of a Pod's ephemeralcontainers subresource (kubectl debug),
 * at /validate: in->wl is the whole Pod as it will be, its
 * spec.ephemeralContainers included.  Only the security rules run, over
 * every container (SPEC section 4); nothing is mapped or charged, so
 * out->plan stays inactive and out->claim unneeded.
 */
void decide_ephemeral(const struct decide_input *in, struct decision *out);

/*
 * An UPDATE of a Pod's or Job's status subresource (in->old set): a
 * status writer may change metadata too, so the stamped labels and a
 * pod's batch.kubernetes.io/controller-uid are held as on any update.
 * Nothing else is judged (the spec cannot change there); no plan, no
 * claim.
 */
void decide_status(const struct decide_input *in, struct decision *out);

/*
 * Convenience for callers without a ledger (explain, tests): runs both
 * steps with the given usage view (NULL: nothing in use).
 */
void decide(const struct decide_input *in, const struct usage_view *usage,
	    struct decision *out);
/* The same with what the pool says (NULL: nothing). */
void decide_with_pool(const struct decide_input *in, const struct usage_view *usage,
		      const struct pool_check *pc, struct decision *out);

#endif
