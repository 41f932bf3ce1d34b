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
	/* DRA (resource.k8s.io/v1, docs/design/dra.md D3): optional kinds,
	 * each either listed or not served (inventory_not_served). */
	INVENTORY_SLICES,        /* ResourceSlices */
	INVENTORY_TAINT_RULES,   /* DeviceTaintRules */
	INVENTORY_CLAIMS,        /* ResourceClaims' allocations */
	INVENTORY_DEVICE_CLASSES,/* DeviceClasses' extendedResourceName */
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

/* ---- DRA ------------------------------------------------------------ */

/*
 * A ResourceSlice as the pool needs it (webhook/dra-facts.h reads it).
 * Its devices' driver and pool are the slice's; their taints the slice's
 * own (rule NULL); allocated is ignored (claims say it).  Copied in.
 */
struct inventory_slice {
	const char *name;        /* metadata.name: the key */
	const char *driver;      /* spec.driver */
	const char *pool;        /* spec.pool.name */
	int64_t generation;      /* spec.pool.generation */
	int64_t slice_count;     /* spec.pool.resourceSliceCount */
	const char *node;        /* spec.nodeName; NULL: not node-local
				  * (allNodes, nodeSelector, perDeviceNodeSelection:
				  * on no node's pool) */
	const struct pool_device *devices;
	size_t n_devices;
	/* spec.sharedCounters (a slice has these or devices, never both):
	 * driver and pool the slice's, users none. */
	const struct pool_counter_set *counter_sets;
	size_t n_counter_sets;
};
int inventory_slice_put(struct inventory *inv, const struct inventory_slice *s);
void inventory_slice_delete(struct inventory *inv, const char *name);

/* A DeviceTaintRule: its taint applies to every device of every slice
 * that its selector's set fields match (driver, pool, device; NULL: any;
 * a rule without deviceSelector matches nothing). */
struct inventory_taint_rule {
	const char *name;
	bool has_selector;
	const char *driver, *pool, *device;
	struct pool_taint taint;
};
int inventory_taint_rule_put(struct inventory *inv, const struct inventory_taint_rule *r);
void inventory_taint_rule_delete(struct inventory *inv, const char *name);

/* The devices a ResourceClaim's status.allocation.devices.results name
 * (n 0: none, as before allocation: forgets what uid held). */
struct inventory_claim_device {
	const char *driver, *pool, *device;
	/* consumedCapacity of a share of a device that allows multiple
	 * allocations: names qualified as pool_device.capacity's, quantities
	 * as written (none for a whole device). */
	const struct pool_label *consumed;
	size_t n_consumed;
};
int inventory_claim_put(struct inventory *inv, const char *uid,
			const struct inventory_claim_device *d, size_t n);
void inventory_claim_delete(struct inventory *inv, const char *uid);

/* A DeviceClass and the extended resource it serves through DRA
 * (spec.extendedResourceName; NULL: none).  Pods asking for a flavor's
 * resource that a DeviceClass serves may get it from devices the nodes
 * do not advertise: the pool of such a flavor is not known. */
int inventory_device_class_put(struct inventory *inv, const char *name,
			       const char *extended_resource);
void inventory_device_class_delete(struct inventory *inv, const char *name);

/* The API does not serve kind (404 to its list): nothing of it is known,
 * what was is dropped, and it counts as listed.  A later relist_end of
 * the kind makes it served again. */
void inventory_not_served(struct inventory *inv, enum inventory_kind kind);

/* A whole list of kind replaces what was known of it: what was not put
 * between begin and end is dropped at end.  The first end of each kind
 * makes it synced. */
void inventory_relist_begin(struct inventory *inv, enum inventory_kind kind);
void inventory_relist_end(struct inventory *inv, enum inventory_kind kind);
/* Nodes and pods have been listed once (the DRA kinds do not count). */
bool inventory_synced(struct inventory *inv);
/* The DRA kinds have each been listed once or found not served, and
 * ResourceSlices are served: a DRA flavor's pool can be known. */
bool inventory_dra_known(struct inventory *inv);
/* The DRA kinds have each been listed once or found not served: what
 * inventory_dra_known() says will not change by waiting (a one-shot
 * reader stops waiting here). */
bool inventory_dra_settled(struct inventory *inv);

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
 * plane alone), or out of memory: nothing is known; for a DRA flavor
 * also while !inventory_dra_known(); for a flavor whose resource a
 * DeviceClass serves through DRA (extendedResourceName), always.
 * A DRA flavor's units are its devices (struct pool_member).
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
