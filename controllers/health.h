/*
 * health: the node side of the health loop (policy/health.h;
 * docs/operations.md "The health loop").  gpugate's taint and record on a
 * Node of a flavor that carries a health signal, kept until the node is
 * validated, and the Node's Events.
 *
 * A thread of gpugate serve (API mode), leader-only.  Every interval
 * (2 s), once the inventory is synced: every Node the inventory knows is
 * looked at under the lock (inventory_each_node: its first flavor and why
 * it is excluded for it); health_node_next() says, for a node of a flavor,
 * what to do; a node that carries gpugate's marks and is no node of any
 * flavor any more (the policy changed) gets them removed.  Then, outside
 * the lock, node by node:
 *
 *   mark out    record o=now c=0 n=1 t=<the signal> (a signal back on a
 *               validating node: o kept, c=0, n+1, t the new signal), taint
 *               gpugate.io/unhealthy=health:NoSchedule; Event
 *               GPUNodeUnhealthy (Warning)
 *   validate    record c=now, taint value validating; Event
 *               GPUNodeValidating
 *   return      both marks removed; Event GPUNodeReturned
 *   fix taint   the taint put back with the record's value (someone
 *               removed or changed it); logged
 *
 * Each is ONE request per node: GET the Node, then a merge patch of
 * spec.taints (every taint of another key kept as it is, gpugate's own
 * replaced or dropped) and the annotation, carrying the Node's
 * metadata.resourceVersion: the apiserver applies it only at that version
 * (409 otherwise: the next round reads again), so another writer's taint
 * is never lost.  A Node whose marks differ from what the inventory showed
 * (the watch lags behind a write) is left for the next round.  A refusal
 * (403: the RBAC lacks nodes patch) is logged once per node and cause and
 * counted (gpugate_health_steps_total{step="failed"}); the pool excludes
 * the node anyway.
 */
#ifndef GPUGATE_CONTROLLERS_HEALTH_H
#define GPUGATE_CONTROLLERS_HEALTH_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct diag;
struct holder;
struct inventory;
struct kube_config;
struct metrics;

struct health_controller_config {
	const struct kube_config *kube;
	struct holder *policy;
	struct inventory *inventory;  /* the nodes, their marks and signals */
	struct metrics *metrics;      /* NULL: not counted */
	const char *identity;         /* reportingInstance of the Events */
	unsigned interval_ms;         /* between rounds; 0: 2000 */
	bool (*leading)(void *ctx);   /* NULL: always */
	void *leading_ctx;
	int64_t (*now_ms)(void);      /* wall clock, ms; NULL: the real one */
};

struct health_controller;

int health_controller_start(const struct health_controller_config *cfg,
			    struct health_controller **out, struct diag *d);
/* Stops the thread (within a second) and frees h.  NULL is a no-op. */
void health_controller_stop(struct health_controller *h);

/*
 * The merge patch of one step on node (a Node object as read): its
 * metadata.resourceVersion as the precondition; spec.taints rebuilt, every
 * taint whose key is not HEALTH_TAINT kept as it is (in its order), then
 * HEALTH_TAINT=taint_value:NoSchedule when taint_value is not NULL (NULL:
 * none; no taint left: null, the list removed); the annotation
 * HEALTH_RECORD set to record, removed (record NULL and drop_record), or
 * not touched (record NULL, !drop_record).  NULL when out of memory or the
 * Node has no resourceVersion.  Pure.
 */
json_t *health_patch_build(const json_t *node, const char *taint_value,
			   const char *record, bool drop_record);

/*
 * The signal as the record keeps it (t=): newlines and other control
 * characters become spaces, clipped to size - 1 bytes (at a character
 * boundary); "unknown" when empty.  Pure.
 */
void health_why_clean(const char *why, char *out, size_t size);

#endif
