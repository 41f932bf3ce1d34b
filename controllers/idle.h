/*
 * idle: idle GPUs (SPEC section 10; docs/design/idle-gpus.md).  A thread
 * of gpugate serve (API mode), a row of the controllers table, leader-only.
 *
 * Every --idle-interval (default 60 s), when the policy has an idle rule
 * or --prometheus-url is given (metering):
 *
 *   read      the utilization of every pod from the cluster's Prometheus
 *             (kube/prom.h): the queries of policy/idle.h (over policy_idle_window_s) for
 *             DCGM_FI_PROF_GR_ENGINE_ACTIVE, and for DCGM_FI_DEV_GPU_UTIL
 *             where the first has no series for a pod; a round that
 *             cannot read it judges nothing (gpugate_prometheus_up 0,
 *             logged once per change);
 *   pods      the Running pods (one paged list), each to its workload
 *             (usage/usage.h: tenant, flavor, units, its Job), its class
 *             (the class label) and its rule (policy/idle.h idle_rule);
 *   judge     each pod (idle_judge), each Job (idle_judge_job over its
 *             running pods);
 *   warn      an idle pod or Job: the Event GPUIdle (Warning) on the pod
 *             and on its Job, once per idle spell; the annotation
 *             gpugate.io/idle-since on them, taken off when busy again;
 *             the gauge gpugate_idle_gpus{tenant,flavor};
 *   reclaim   an idle workload under action reclaim is published on the
 *             idle board (controllers/idle-board.h): the reclaimer takes
 *             it back by its checkpoint path, and says GPUIdleReclaimed;
 *   meter     gpugate_gpu_seconds_total{tenant,flavor} grows by the units
 *             held times the seconds since the last round;
 *             gpugate_gpu_busy_seconds_total by the same times the pod's
 *             mean utilization over them (no data: nothing);
 *   publish   the round on the board, with each pod's mean over the last
 *             hour (GET /pool's busy share).
 */
#ifndef GPUGATE_IDLE_H
#define GPUGATE_IDLE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct diag;
struct holder;
struct idle_board;
struct kube_config;
struct metrics;
struct prom_config;
struct usage_store;

struct idle_config {
	const struct kube_config *kube;
	const struct prom_config *prom;  /* NULL: no Prometheus (nothing idle) */
	struct holder *policy;
	struct usage_store *usage;
	struct idle_board *board;
	struct metrics *metrics;         /* NULL: not counted */
	const char *identity;            /* reportingInstance of the Events */
	unsigned interval_ms;            /* between rounds; 0: 60000 */
	bool (*leading)(void *ctx);      /* NULL: always */
	void *leading_ctx;
	/* The usage store was listed from the API (NULL: always): before,
	 * a round does nothing, or it would take the annotation off pods
	 * whose workloads it does not know yet. */
	bool (*synced)(void *ctx);
	void *synced_ctx;
	int64_t (*now_ms)(void);         /* wall clock, ms; NULL: the real one */
};

struct idle_controller;

int idle_start(const struct idle_config *cfg, struct idle_controller **out,
	       struct diag *d);
/* ---- the pure parts (unit-tested) ------------------------------------- */

struct policy_idle;

/* since_ms as the annotation says it: "2026-12-05T14:00:00Z" (RFC 3339,
 * UTC, seconds), into buf (size >= 21). */
void idle_since_text(int64_t since_ms, char *buf, size_t size);
/* Where the Event GPUIdle goes: a bare pod, a Job, a pod of that Job. */
enum idle_event_on { IDLE_ON_POD, IDLE_ON_JOB, IDLE_ON_JOB_POD };
/* Its message: "its GPUs were below 5% for 30m (highest 2.1%) since
 * <time>: use them, or release them (...)", and under action reclaim what
 * gpugate does (a Job and its pods: the Job is suspended). */
void idle_event_text(char *buf, size_t size, const struct policy_idle *rule, double peak,
		     int64_t since_ms, enum idle_event_on on);
/* The merge patch of the annotation: since, or NULL to take it off. */
json_t *idle_since_patch(const char *since);

/* Stops the thread (within a second) and frees c.  NULL is a no-op. */
void idle_stop(struct idle_controller *c);

#endif
