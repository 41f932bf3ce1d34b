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

/* The feed's callbacks (struct feed_config): the same; pod_placement_cb's
 * ctx is the policy holder (struct holder *, may be NULL). */
int node_facts_cb(void *ctx, const json_t *obj, struct arena *a, struct pool_node *out);
int pod_placement_cb(void *ctx, const json_t *obj, struct arena *a,
		     struct inventory_placement *out);

#endif
