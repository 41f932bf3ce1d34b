/*
 * node-facts: a Node object -> struct pool_node (policy/pool.h), and a Pod
 * object -> where it is bound and what it asks there (usage/inventory.h),
 * for the inventory the feed keeps (kube/feed.h).
 *
 * What a pod asks of each extended resource is the scheduler's count,
 * the one rule of policy/charge.h (charge_pod_units) that quota uses too.
 * Strings are borrowed from the JSON value, arrays come from the arena.
 */
#ifndef GPUGATE_NODE_FACTS_H
#define GPUGATE_NODE_FACTS_H

#include "policy/pool.h"
#include "usage/inventory.h"
#include "usage/meter.h"

#include <jansson.h>

struct arena;

/*
 * The facts of a Node: its name, every label, its extended resources
 * (names with a '/': capacity and allocatable in whole units, -1 when a
 * side does not name it or is not a whole number), taints, conditions,
 * Ready, spec.unschedulable.  -1 when obj has no metadata.name or a field
 * has the wrong type.
 */
int node_facts(const json_t *obj, struct arena *a, struct pool_node *out);

/*
 * Where a Pod is and what it asks there: uid, node (spec.nodeName; NULL
 * when it is not bound or is Succeeded or Failed: it holds nothing on a
 * node) and its asks (the extended resources with units > 0); for a pod
 * that is not bound, not finished and not being deleted, and asks for a
 * flavor's units under p (the charge rule), what waiting says
 * (struct inventory_waiting; p NULL: nothing).  -1 when obj has no
 * metadata.uid.  A pod gpugate cannot read asks nothing.
 */
struct policy;
int pod_placement(const struct policy *p, const json_t *obj, struct arena *a,
		  struct inventory_placement *out);

/*
 * How long a Pod has run, for the meter (usage/meter.h): its tenant,
 * flavor and units per pod under p (the charge rule; NULL tenant: not a
 * GPU pod of a tenant), status.startTime, and for a Succeeded or Failed
 * pod its end (the latest container finishedAt, else now).  -1 when obj
 * has no metadata.uid.
 */
int pod_run(const struct policy *p, const json_t *obj, struct arena *a,
	    struct meter_pod *out);

/* The feed's callbacks (struct feed_config): the same; pod_placement_cb's
 * and pod_run_cb's ctx is the policy holder (struct holder *, may be
 * NULL). */
int pod_run_cb(void *ctx, const json_t *obj, struct arena *a, struct meter_pod *out);
int node_facts_cb(void *ctx, const json_t *obj, struct arena *a, struct pool_node *out);
int pod_placement_cb(void *ctx, const json_t *obj, struct arena *a,
		     struct inventory_placement *out);

#endif
