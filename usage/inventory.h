/*
 * inventory: the cluster's GPU nodes and what their pods hold, kept by the
 * feed (kube/feed.h watches Nodes and Pods) and read by admission, the
 * pool report and the waiting reasons (policy/pool.h decides).
 *
 * Thread-safe (one mutex).  Nodes are copied in; a pod is known by its uid,
 * the node it is bound to and what it asks for of each extended resource
 * (the scheduler's count, policy/charge.h charge_pod_units): a pod that is
 * not bound, or is Succeeded or Failed, holds nothing on any node and is
 * put with node NULL.  What a node has allocated is the sum over its pods,
 * whether the Node object is known yet or not.
 *
 * Readers never get pointers into the inventory: inventory_fit copies out
 * what a decision needs, inventory_each runs a callback under the lock.
 */
#ifndef GPUGATE_INVENTORY_H
#define GPUGATE_INVENTORY_H

#include "policy/pool.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct policy;
struct policy_flavor;

enum inventory_kind {
	INVENTORY_NODES,
	INVENTORY_PODS,
	INVENTORY_KINDS
};

/* What a pod asks of one extended resource. */
struct inventory_ask {
	const char *resource;
	int64_t units;
};

/* A pod as the inventory needs it (webhook/node-facts.c reads it). */
struct inventory_placement {
	const char *uid;
	const char *node; /* NULL: holds nothing on any node */
	const struct inventory_ask *asks;
	size_t n_asks;
};

struct inventory;

struct inventory *inventory_new(void);
void inventory_free(struct inventory *inv);

/* Puts (or replaces) node n, copying it; its resources' allocated fields
 * are ignored (the inventory sums its pods).  -1 when out of memory. */
int inventory_node_put(struct inventory *inv, const struct pool_node *n);
void inventory_node_delete(struct inventory *inv, const char *name);

/* Puts (or replaces) pod uid: bound to node (NULL: holds nothing on any
 * node) asking for asks.  -1 when out of memory (the pod is then
 * forgotten). */
int inventory_pod_put(struct inventory *inv, const char *uid, const char *node,
		      const struct inventory_ask *asks, size_t n_asks);
void inventory_pod_delete(struct inventory *inv, const char *uid);

/* A whole list of kind replaces what was known of it: what was not put
 * between begin and end is dropped at end.  The first end of each kind
 * makes it synced. */
void inventory_relist_begin(struct inventory *inv, enum inventory_kind kind);
void inventory_relist_end(struct inventory *inv, enum inventory_kind kind);
/* Both kinds have been listed once. */
bool inventory_synced(struct inventory *inv);

size_t inventory_nodes(struct inventory *inv);
size_t inventory_pods(struct inventory *inv);

/*
 * Whether pods pods of per_pod units of flavor f (of policy p) fit
 * (pool_fit, in one domain of topology_key when not NULL), under p's
 * health settings, into *out.  out->known false: the inventory has not
 * listed nodes and pods yet, the cluster has no Node at all (a control
 * plane alone), or out of memory: nothing is known.
 */
void inventory_fit(struct inventory *inv, const struct policy *p,
		   const struct policy_flavor *f, int64_t per_pod, int64_t pods,
		   const char *topology_key, struct pool_check *out);

/*
 * Calls fn once per flavor of p with its view (pool_view_build under
 * health), under the inventory's lock: fn must not call back into inv, and
 * must copy what it keeps.  Returns -1 when out of memory.
 */
int inventory_each(struct inventory *inv, const struct policy *p,
		   void (*fn)(void *ctx, const struct pool_view *v), void *ctx);

#endif
