/*
 * gang-probe: what the apiserver serves for gang start (SPEC section 9;
 * docs/design/gang-start.md, F6), as the bits GANG_SERVES_* of
 * policy/gang.h that admission reads (decide_input.gang_served).
 *
 * A thread of gpugate serve (API mode) on every replica (not leader-only:
 * every replica's webhook needs the answer; it writes nothing, a dry run
 * stores nothing).  At start, every interval_s (600) and at once after a
 * policy reload (holder_generation()) it asks:
 *
 *   GET /apis/scheduling.k8s.io/v1beta1
 *       served when resources[].name holds "workloads" and "podgroups"
 *       (404: not served)                              GANG_SERVES_PODGROUP
 *   POST /apis/batch/v1/namespaces/<ns>/jobs?dryRun=All
 *       gang_probe_job_object(); served when the answer is 201 and
 *       still has spec.scheduling.schedulingPolicy.gang (an apiserver
 *       without WorkloadWithJob drops it silently; 422: not served)
 *                                                 GANG_SERVES_JOB_SCHEDULING
 *   POST /apis/scheduling.k8s.io/v1beta1/namespaces/<ns>/podgroups?dryRun=All
 *       only when podgroups are served: gang_probe_podgroup_object();
 *       served when schedulingConstraints.topology is kept (an apiserver
 *       without TopologyAwareWorkloadScheduling drops it)
 *                                                 GANG_SERVES_TOPOLOGY
 *
 * plus GANG_SERVES_KNOWN once any answer came, and GANG_SERVES_CONTROLLER
 * always (gpugate runs with an API: the gang-start controller runs).  An
 * answer that says nothing (no answer, 403, 409, 5xx) keeps that bit as
 * it was, is logged once (controllers/worker.h, worker_failed()) and is
 * asked again sooner (2, 4, ... 60 s).  The bits go to *served (an atomic
 * the daemon owns and the handler reads) and the route `auto` picks from
 * them to metrics (gpugate_gang_route{route}).  A change is logged once:
 *
 *   info msg="gang start served" workload=yes podgroup=no topology=no
 *        controller=yes auto=workload
 *   warn msg="gang start probe failed" error="..."
 *
 * RBAC: create on batch jobs in gpugate's namespace (the dry run), create
 * on scheduling.k8s.io podgroups there (manifests/rbac.yaml).
 */
#ifndef GPUGATE_GANG_PROBE_H
#define GPUGATE_GANG_PROBE_H

#include <jansson.h>
#include <stdatomic.h>

struct diag;
struct holder;
struct kube_config;
struct metrics;

/* The name of the dry-run objects. */
#define GANG_PROBE_NAME "gpugate-gang-probe"

struct gang_probe_config {
	const struct kube_config *kube;
	struct holder *policy;      /* its generation: a reload probes again */
	struct metrics *metrics;    /* gpugate_gang_route; may be NULL */
	const char *namespace;      /* gpugate's: where the dry runs go */
	_Atomic unsigned *served;   /* where the bits go */
	unsigned interval_s;        /* between probes; 0: 600 */
};

struct gang_probe;

int gang_probe_start(const struct gang_probe_config *cfg, struct gang_probe **out,
		     struct diag *d);
/* Stops the thread and frees p (a request in flight ends first); NULL is a
 * no-op. */
void gang_probe_stop(struct gang_probe *p);

/* ---- pure: the objects sent and what the answers say -------------------- */

/* What one answer says of its bit. */
enum gang_probe_answer {
	GANG_PROBE_UNKNOWN, /* no answer, or one that says nothing: keep the bit */
	GANG_PROBE_NO,
	GANG_PROBE_YES,
};

/* The dry-run Job: suspended, parallelism and completions 2,
 * spec.scheduling.schedulingPolicy.gang {minCount: 2}, one container
 * (image gpugate.invalid/probe), restartPolicy Never, no class label.  The
 * caller owns it; NULL when out of memory. */
json_t *gang_probe_job_object(void);
/* The dry-run PodGroup (scheduling.k8s.io/v1beta1): gang {minCount: 2},
 * schedulingConstraints.topology [{key: kubernetes.io/hostname}]. */
json_t *gang_probe_podgroup_object(void);

/* status: the HTTP status (-1: no answer); body: the answer (may be NULL). */
enum gang_probe_answer gang_probe_discovery(long status, const json_t *body);
enum gang_probe_answer gang_probe_job(long status, const json_t *body);
enum gang_probe_answer gang_probe_topology(long status, const json_t *body);

/*
 * The bits after one probe: prev changed by the three answers (YES sets,
 * NO clears, UNKNOWN keeps); no podgroups means no topology either;
 * GANG_SERVES_KNOWN once any answer (now or before) said something;
 * GANG_SERVES_CONTROLLER always.
 */
unsigned gang_probe_bits(unsigned prev, enum gang_probe_answer podgroup,
			 enum gang_probe_answer job, enum gang_probe_answer topology);

#endif
