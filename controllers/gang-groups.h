/*
 * gang-groups: route podgroup of gang start (SPEC section 9, route 2;
 * docs/design/gang-start.md "Route 2"): the Workload and the PodGroup
 * gpugate creates for a Job /mutate stamped `gpugate.io/gang-route:
 * podgroup`, whose pod template names the PodGroup in
 * spec.schedulingGroup.podGroupName (the Job controller then leaves both
 * to gpugate: manageNone, F2).  Pods created before the PodGroup wait in
 * the scheduler's PreEnqueue (F4): nothing binds until it exists.
 *
 * A thread of gpugate serve (API mode), leader-only (it writes).  Every
 * interval_ms (5 s), while the probe says the cluster serves PodGroups
 * (GANG_SERVES_PODGROUP) and some class of the policy has `gang: true`
 * (else a turn is two loads and nothing else), it lists
 *
 *   the Jobs gpugate stamped with a gang id (labelSelector gpugate.io/gang,
 *   a label /mutate writes on the Job itself; annotations cannot be
 *   selected on), in pages of 100, and, only when one of them is stamped
 *   podgroup and not finished, gpugate's PodGroups (labelSelector
 *   app.kubernetes.io/managed-by=gpugate);
 *
 * and for every such Job that has no PodGroup controlled by it
 * (gang_groups_plan()) creates the Workload, then the PodGroup, both named
 * the template's gpugate.io/gang label (the gang id) in the Job's
 * namespace, with a controller ownerReference to the Job (the garbage
 * collector deletes them with it).  minCount is min(parallelism,
 * completions); the topology constraint is written when the class (the
 * template's class label) requires one and the apiserver keeps it
 * (GANG_SERVES_TOPOLOGY).
 *
 * A name taken (409): the object is read; it is ours when its controller
 * ownerReference has the Job's uid.  Else the Job gets one Event, reason
 * GangConflict (Warning), and is left waiting: its pods name a PodGroup
 * that is not theirs, so they never start (fails closed, and says so).
 *
 * Nothing is fatal: a refused list or write is logged (again only when the
 * error changes) and tried again next turn.  It logs (logfmt):
 *
 *   info  msg="gang objects created" job=NS/NAME podgroup=G min_count=N
 *         topology=K
 *   warn  msg="gang objects not created" error="..."
 *
 * RBAC: list on batch jobs; get, list, create on scheduling.k8s.io
 * workloads and podgroups; create on events (manifests/rbac.yaml).
 */
#ifndef GPUGATE_GANG_GROUPS_H
#define GPUGATE_GANG_GROUPS_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct diag;
struct holder;
struct kube_config;
struct policy;

/* The one template of gpugate's Workloads, and the label of its objects. */
#define GANG_GROUPS_TEMPLATE "gang"
#define GANG_GROUPS_OWNER_LABEL "app.kubernetes.io/managed-by"
#define GANG_GROUPS_OWNER "gpugate"

struct gang_groups_config {
	const struct kube_config *kube;
	struct holder *policy;
	const _Atomic unsigned *served; /* the probe's GANG_SERVES_* */
	const char *identity;           /* Events' reportingInstance */
	unsigned interval_ms;           /* between turns; 0: 5000 */
	bool (*leading)(void *ctx);     /* NULL: always */
	void *leading_ctx;
};

struct gang_groups;

int gang_groups_start(const struct gang_groups_config *cfg, struct gang_groups **out,
		      struct diag *d);
/* Stops the thread and frees g (a request in flight ends first); NULL is a
 * no-op. */
void gang_groups_stop(struct gang_groups *g);

/* ---- pure --------------------------------------------------------------- */

/* What one Job needs; the strings are borrowed from the Job's JSON. */
struct gang_groups_want {
	const char *namespace;
	const char *job;            /* the Job's name */
	const char *uid;            /* the Job's uid */
	const char *gang;           /* the Workload's and PodGroup's name */
	int64_t min_count;          /* min(parallelism, completions) */
	const char *topology_key;   /* NULL: no topology constraint */
	const char *priority_class; /* the template's; NULL: none */
};

/*
 * Whether job (a batch/v1 Job as the API has it) is one gpugate makes
 * objects for: stamped podgroup (job's own annotation), not finished
 * (condition Complete or Failed True) nor being deleted, with a uid, a
 * gang id (its template's gpugate.io/gang label) and a gang of more than
 * one pod.  True with *out filled; p (may be NULL) and served give the
 * topology: p's class of the template's class label, required, and
 * GANG_SERVES_TOPOLOGY in served.
 */
bool gang_groups_want(const json_t *job, const struct policy *p, unsigned served,
		      struct gang_groups_want *out);

/*
 * The Jobs of `jobs` (a JobList) that need objects: gang_groups_want(),
 * and no PodGroup of `podgroups` (a PodGroupList; NULL: none) controlled
 * by the Job's uid.  At most max into out; returns how many.  -1 when out
 * of memory.
 */
long gang_groups_plan(const json_t *jobs, const json_t *podgroups,
		      const struct policy *p, unsigned served,
		      struct gang_groups_want *out, size_t max);

/* The Workload and the PodGroup for w (scheduling.k8s.io/v1beta1), the
 * caller's; NULL when out of memory. */
json_t *gang_groups_workload(const struct gang_groups_want *w);
json_t *gang_groups_podgroup(const struct gang_groups_want *w);

/* Whether obj's controller ownerReference is the Job of uid. */
bool gang_groups_ours(const json_t *obj, const char *uid);

#endif
