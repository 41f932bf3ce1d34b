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

/*
 * A pod that waits for a node: not bound, not Succeeded or Failed, not
 * being deleted, and asking for a flavor's units (the charge rule's
 * tenant, flavor and per-pod count).  Why it waits is the waiter's to say
 * (controllers/waiter.h).
 */
struct inventory_waiting {
	const char *uid, *namespace, *name;
	const char *tenant;    /* "" outside every tenant */
	const char *flavor;
	int64_t per_pod;
	int64_t since;         /* metadata.creationTimestamp, Unix seconds; 0 unknown */
	const char *scheduler; /* the scheduler's message (condition PodScheduled
				* False), or "" */
	/* A pod of a gang (SPEC section 9): its gang id (label
	 * gpugate.io/gang), its route (annotation gpugate.io/gang-route) and
	 * its class (the policy's class label), each "" when absent; whether
	 * it carries the scheduling gate gpugate.io/gang (a gated pod waits
	 * like any other: unbound, not finished). */
	const char *gang, *gang_route, *class_name;
	bool gang_gated;
};

/*
 * A Running pod bound to a node and holding a tenant's units (the charge
 * rule), as the pool report's idle GPUs read it (SPEC section 10): who
 * holds what, and gpugate's annotation gpugate.io/idle-since on it.
 */
struct inventory_running {
	const char *uid, *namespace, *name;
	const char *tenant, *flavor;
	int64_t per_pod;
	int64_t idle_since;    /* the annotation, Unix seconds; 0: none */
};

/* A pod as the inventory needs it (webhook/node-facts.c reads it). */
struct inventory_placement {
	const char *uid;
	const char *node; /* NULL: holds nothing on any node */
	const struct inventory_ask *asks;
	size_t n_asks;
	const struct inventory_waiting *waiting; /* NULL unless it waits */
	const struct inventory_running *running; /* NULL unless it runs */
};

struct inventory;

struct inventory *inventory_new(void);
void inventory_free(struct inventory *inv);

/* Puts (or replaces) node n, copying it; its resources' allocated fields
 * are ignored (the inventory sums its pods).  -1 when out of memory. */
int inventory_node_put(struct inventory *inv, const struct pool_node *n);
void inventory_node_delete(struct inventory *inv, const char *name);

/* Puts (or replaces) pod pl->uid: bound to pl->node (NULL: holds nothing
 * on any node) asking for its asks, or waiting (pl->waiting).  -1 when out
 * of memory (the pod is then forgotten). */
int inventory_pod_put(struct inventory *inv, const struct inventory_placement *pl);
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
 * The waiting pods created at or before `before` (Unix seconds), at most
 * max of them (oldest first is not promised), copied into out with their
 * strings in a.  Returns how many.
 */
struct arena;
size_t inventory_waiting_list(struct inventory *inv, int64_t before,
			      struct inventory_waiting *out, size_t max,
			      struct arena *a);

/* Calls fn once per Running pod of a tenant (struct inventory_running),
 * under the inventory's lock: fn must not call back into inv and must
 * copy what it keeps. */
void inventory_running_each(struct inventory *inv,
			    void (*fn)(void *ctx, const struct inventory_running *r),
			    void *ctx);

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
/* The same within one domain of topology_key (pool_check_build_in; domain
 * NULL: any). */
void inventory_fit_in(struct inventory *inv, const struct policy *p,
		      const struct policy_flavor *f, int64_t per_pod, int64_t pods,
		      const char *topology_key, const char *domain, struct pool_check *out);

/* The label key of Node node into out (size > 0): false when the Node is
 * not known or has no such label (out untouched). */
bool inventory_node_label(struct inventory *inv, const char *node, const char *key,
			  char *out, size_t size);

/*
 * The first flavor of p (in policy order) whose node `node` is, by its
 * labels and resources (pool_node_in_flavor), or NULL when it is no
 * flavor's or the Node is not known.  Whatever its health: a node that
 * is excluded from the pool is still a GPU node.
 */
const struct policy_flavor *inventory_node_flavor(struct inventory *inv,
						  const struct policy *p,
						  const char *node);

/*
 * Calls fn once per flavor of p with its view (pool_view_build under
 * health), under the inventory's lock: fn must not call back into inv, and
 * must copy what it keeps.  Returns -1 when out of memory.
 */
int inventory_each(struct inventory *inv, const struct policy *p,
		   void (*fn)(void *ctx, const struct pool_view *v), void *ctx);

/*
 * Calls fn once per known Node (whatever its flavor) under the inventory's
 * lock, with the first flavor of p it is a node of (NULL: none) and, for
 * that flavor, why it is excluded (pool_node_exclusion under p's health;
 * POOL_USABLE and "" when f is NULL).  fn must not call back into inv, and
 * must copy what it keeps.  The health controller (controllers/health.h)
 * walks every node this way: the nodes of a flavor with a health signal,
 * and gpugate's marks left on nodes no flavor counts any more.
 */
void inventory_each_node(struct inventory *inv, const struct policy *p,
			 void (*fn)(void *ctx, const struct pool_node *n,
				    const struct policy_flavor *f, enum pool_exclusion e,
				    const char *why),
			 void *ctx);

/*
 * pool_summarize() of each flavor of p, into out (room for max, at least
 * policy_flavor_count(p)).  Returns how many, or -1 when out of memory.
 */
long inventory_summaries(struct inventory *inv, const struct policy *p,
			 struct pool_summary *out, size_t max);

#endif
