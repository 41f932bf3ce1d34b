/*
 * metrics: every line of Prometheus text gpugate writes (GET /metrics).
 *
 * Counters and histograms of the admission pipeline live here, lock-free:
 * every counter is an atomic, updated from any server thread.  Label sets
 * are small and fixed (endpoint x kind x result), so they are plain
 * arrays, not maps; denials by tenant, flavor and rule, whose names come
 * from the policy, are a short list under a lock (a denial is rare).  What other modules know (quota from the policy and the
 * usage store, the feed's state, the certificate, the server's workers) is
 * handed over as plain values at scrape time (struct metrics_state) and
 * written here too: no other file writes exposition text.  What the
 * controllers do (the reclaimer's steps) they push here as they do it:
 * metrics reads nothing of theirs.
 */
#ifndef GPUGATE_METRICS_H
#define GPUGATE_METRICS_H

#include "policy/gang.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum metrics_endpoint { METRICS_MUTATE, METRICS_VALIDATE, METRICS__ENDPOINTS };
enum metrics_kind { METRICS_POD, METRICS_JOB, METRICS_OTHER, METRICS__KINDS };
enum metrics_result {
	METRICS_ALLOWED,  /* admitted, no rule violated */
	METRICS_DENIED,   /* denied by a rule (enforce) */
	METRICS_WARNED,   /* admitted with a violation (warn mode) */
	METRICS_AUDITED,  /* admitted with a violation (audit mode) */
	METRICS_ERROR,    /* malformed review: 4xx */
	METRICS__RESULTS
};

struct metrics;
struct strbuf;

struct metrics *metrics_new(void);
void metrics_free(struct metrics *m);

void metrics_admission(struct metrics *m, enum metrics_endpoint ep,
		       enum metrics_kind kind, enum metrics_result result,
		       double seconds);
/* A denial (result METRICS_DENIED) by tenant, flavor and rule (NULL or
 * "": "-"): gpugate_denials_total. */
void metrics_denial(struct metrics *m, const char *tenant, const char *flavor,
		    const char *rule);
void metrics_policy_reload(struct metrics *m, bool ok);
void metrics_cert_reload(struct metrics *m, bool ok);

/*
 * The reclaimer's steps (controllers/reclaimer.h), pushed by it as it
 * takes them: gpugate_reclaims_total{result} and
 * gpugate_checkpoint_wait_seconds.  Both families are written once
 * metrics_reclaims_on() was called (a reclaimer runs), from 0.  Any
 * thread; m NULL: nothing counted.
 */
enum metrics_reclaim {
	METRICS_RECLAIM_SIGNALLED,    /* a checkpoint requested */
	METRICS_RECLAIM_CHECKPOINTED, /* released after the workload reported */
	METRICS_RECLAIM_TIMEOUT,      /* released after checkpoint.timeoutSeconds */
	METRICS_RECLAIM_ABANDONED,    /* a request taken back */
	METRICS_RECLAIM_DELETED,      /* a pod deleted: its grace, a PDB, a long grace */
	METRICS_RECLAIM_RESUMED,      /* a Job resumed */
	METRICS_RECLAIM_FAILED,       /* a write the API refused (retried) */
	METRICS__RECLAIMS
};
void metrics_reclaims_on(struct metrics *m);
void metrics_reclaim(struct metrics *m, enum metrics_reclaim step);
/* A victim released: CHECKPOINTED (reported) or TIMEOUT counted, and
 * wait_seconds (from its checkpoint request; 0 when unknown) observed,
 * all at once (a scrape sees none or all of it). */
void metrics_reclaim_released(struct metrics *m, bool reported, double wait_seconds);

/*
 * gpugate_gang_route{route}: 1 for the route settings.gangStart auto picks
 * now (policy/gang.h, gang_auto_route(); GANG_NONE: none), 0 for the
 * others (workload, podgroup, gates).  Pushed by the gang-start probe
 * (controllers/gang-probe.h) as it learns what the cluster serves; the
 * family is written once pushed.  Any thread; m NULL: nothing.
 */
void metrics_gang_route(struct metrics *m, enum gang_route r);

/*
 * The template keeper (controllers/claim-templates.h), pushed once a
 * round: gpugate_dra_templates_served (1: resource.k8s.io/v1
 * resourceclaimtemplates is served, 0: not) and, while served,
 * gpugate_dra_templates{state}: kept (gpugate's, wanted), taken (names
 * gpugate wants held by templates not labelled gpugate's) and garbage
 * (gpugate's, no longer wanted, not deleted yet).  Written once pushed.
 * Any thread; m NULL: nothing.
 */
void metrics_dra_templates(struct metrics *m, bool served, size_t kept, size_t taken,
			   size_t garbage);

/*
 * Gang start (SPEC section 9; controllers/gang-start.h), written once
 * metrics_gangs_on() was called (a gang-start controller runs):
 * gpugate_gangs_waiting{route,tenant,flavor}, replaced whole for one
 * route ("workload", "podgroup", "gates"; another name is ignored) by
 * each push; gpugate_gang_start_seconds{route}, one observation a gang;
 * gpugate_gang_regates_total{tenant}.  Any thread; m NULL: nothing.
 */
struct metrics_gang_waiting {
	const char *tenant, *flavor;
	uint64_t gangs;
};
void metrics_gangs_on(struct metrics *m);
void metrics_gangs_waiting(struct metrics *m, const char *route,
			   const struct metrics_gang_waiting *rows, size_t n);
void metrics_gang_started(struct metrics *m, const char *route, double seconds);
void metrics_gang_regated(struct metrics *m, const char *tenant);

/*
 * The health loop's node controller (controllers/health.h), pushed as it
 * takes its steps: gpugate_health_steps_total{step}, written once
 * metrics_health_on() was called (a health controller runs), from 0.  The
 * gauges of the nodes gpugate took out (gpugate_nodes_out_seconds{flavor},
 * gpugate_node_out_since_seconds{flavor,node,state}) are read from the
 * inventory's nodes at scrape time (metrics/health.c), on any replica.
 * Any thread; m NULL: nothing counted.
 */
enum metrics_health_step {
	METRICS_HEALTH_MARK_OUT,  /* taint and record put on */
	METRICS_HEALTH_VALIDATE,  /* signal gone: validating */
	METRICS_HEALTH_RETURN,    /* both marks removed */
	METRICS_HEALTH_FIX_TAINT, /* the taint put back */
	METRICS_HEALTH_FAILED,    /* a write the API refused (403: RBAC) */
	METRICS__HEALTH_STEPS
};
void metrics_health_on(struct metrics *m);
void metrics_health_step(struct metrics *m, enum metrics_health_step step);

/*
 * Idle GPUs (SPEC section 10; controllers/idle.h), pushed by the idle
 * controller once a round (metrics/idle.c), written once
 * metrics_idle_on() was called (an idle controller runs):
 * gpugate_prometheus_up (only when prom: --prometheus-url is given, and
 * once a round pushed it),
 * gpugate_prometheus_errors_total{reason} (reasons[0..n) shown from 0),
 * gpugate_idle_gpus{tenant,flavor} (replaced whole by each push) and
 * gpugate_gpu_busy_seconds_total{tenant,flavor} (each push adds).
 * gpugate_gpu_seconds_total, the units x seconds held, is the meter's
 * (usage/meter.h).  Any thread; m NULL: nothing.
 */
struct metrics_idle_row {
	const char *tenant, *flavor;
	double value;
};
void metrics_idle_on(struct metrics *m, bool prom, const char *const *reasons, size_t n);
/* A round read Prometheus (up), or could not, for reason (counted). */
void metrics_prometheus(struct metrics *m, bool up, const char *reason);
void metrics_idle_gpus(struct metrics *m, const struct metrics_idle_row *rows, size_t n);
void metrics_gpu_busy(struct metrics *m, const struct metrics_idle_row *rows, size_t n);

struct inventory;
struct meter;
struct procstat;
struct policy;
struct usage_store;

/* What a scrape shows beside the counters, gathered by its caller. */
struct metrics_state {
	/* gpugate_quota_nominal and gpugate_quota_used for every quota entry
	 * of this policy, used read from usage (may be NULL: 0); no quota
	 * lines when policy is NULL. */
	const struct policy *policy;
	struct usage_store *usage;
	/* gpugate_pool_*: the flavors' nodes and units (usage/inventory.h),
	 * when not NULL (API mode) and policy is set. */
	struct inventory *inventory;
	/* gpugate_gpu_seconds_total (usage/meter.h), when not NULL. */
	struct meter *meter;
	/* gpugate_kube_watch_connected and gpugate_kube_synced, in API mode. */
	bool api;
	bool api_connected;
	bool api_synced;
	/* gpugate_certificate_expiry_timestamp_seconds (Unix time), and the
	 * same under its deprecated name gpugate_certificate_expiry_seconds. */
	long long cert_not_after;
	/* gpugate_ready: what /readyz answers (1: 200). */
	bool ready;
	/* process_* (metrics/process.h), when not NULL. */
	const struct procstat *process;
	/* gpugate_http_worker_requests_total: requests begun on each server
	 * worker, in the order the workers first served; none when 0. */
	const uint64_t *worker_requests;
	unsigned workers;
	/* gpugate_quota_leader when quota_leader: quota_deciding, whether
	 * this replica decides quota reservations now (daemon/daemon.c says
	 * per --usage-store).  --usage-store leader (daemon/quota-leader.h),
	 * when quota_forwards: gpugate_quota_forwards_total{result=
	 * "answered"|"failed"} and gpugate_quota_forward_seconds (a summary
	 * of the answered ones). */
	bool quota_leader;
	bool quota_deciding;
	bool quota_forwards;
	uint64_t forwards_answered, forwards_failed;
	double forward_seconds_sum;
};

/* The whole exposition; caller frees *out.  st may be NULL (counters and
 * gpugate_build_info only).  -1 when out of memory. */
int metrics_render(struct metrics *m, const struct metrics_state *st,
		   char **out, size_t *len);

/*
 * gpugate_http_worker_requests_total, one line per server worker: how
 * evenly the connections are spread.  requests[i] is what worker i began
 * (http/server.h, server_worker_requests()), n the number of workers.
 */
void metrics_render_workers(struct strbuf *out, const uint64_t *requests,
			    unsigned n);

#endif
