/*
 * gang-start: route gates of gang start (SPEC section 9;
 * docs/design/gang-start.md "Route 3").  The pods of a Job stamped
 * gpugate.io/gang-route: gates are created with the scheduling gate
 * gpugate.io/gang; this controller takes the gates off all of them at
 * once, when every pod of the gang exists, none carries another gate, and
 * the flavor's usable nodes have room for all of them (in one domain of
 * the class's topology key when it is required, the domain of the pods
 * already bound when there are any: then each pod gets
 * spec.nodeSelector[key] = that domain in the same patch).
 *
 * A thread of gpugate serve (API mode), leader-only.  Every interval
 * (2 s), when the inventory shows a gated gang pod or the record holds a
 * gang: one LIST of the Jobs and one of the pods labelled gpugate.io/gang
 * (all namespaces), the pure rule (controllers/gang-rule.h) per Job of
 * route gates, the record written, then the patches.  Idle otherwise: no
 * request at all.
 *
 * The record, ConfigMap gpugate-gangs of gpugate's namespace (as
 * gpugate-reclaim: controllers/state-map.h), data[<job uid>] =
 * "r=<ms released> n=<regates> s=<0|1> t=<tenant>", written (PUT at the
 * version read; a 409 is no action this round) before acting:
 *
 *   release   r = now, then one JSON patch per gated pod (test and remove
 *             the gate at its index, add the nodeSelector key); a failed
 *             patch is tried again next round; Event GPUGangStarted on
 *             the Job once all are released;
 *   started   every pod it wants Running: the start is observed
 *             (gpugate_gang_start_seconds{route="gates"}) and the entry
 *             dropped;
 *   regate    released and not all Running after gangTimeoutSeconds:
 *             n+1, s=1, r=0, then the Job suspended (its pods go, not
 *             counted as failures: design Q3); with no pod left it is
 *             resumed and s cleared next round (the Job controller makes
 *             its pods again, gated by /mutate from the template); Event
 *             GPUGangRegated, gpugate_gang_regates_total{tenant};
 *   left      a Job suspended without s (its tenant's, Kueue's).
 *
 * A restart loses nothing: the gates are the cluster's, the record keeps
 * r and s.
 */
#ifndef GPUGATE_GANG_START_H
#define GPUGATE_GANG_START_H

#include <stdbool.h>
#include <stdint.h>

struct diag;
struct holder;
struct inventory;
struct kube_config;
struct metrics;

/* The record's ConfigMap, in gpugate's namespace. */
#define GANG_START_STATE "gpugate-gangs"

struct gang_start_config {
	const struct kube_config *kube;
	struct holder *policy;
	struct inventory *inventory;  /* nodes, what they hold, gated pods */
	struct metrics *metrics;      /* NULL: not counted */
	const char *identity;         /* reportingInstance of the Events */
	const char *namespace;        /* gpugate's; NULL: "gpugate" */
	unsigned interval_ms;         /* between rounds; 0: 2000 */
	bool (*leading)(void *ctx);   /* NULL: always */
	void *leading_ctx;
	int64_t (*now_ms)(void);      /* wall clock, ms; NULL: the real one */
};

struct gang_start;

int gang_start_start(const struct gang_start_config *cfg, struct gang_start **out,
		     struct diag *d);
/* Stops the thread (within a second) and frees g.  NULL is a no-op. */
void gang_start_stop(struct gang_start *g);

#endif
