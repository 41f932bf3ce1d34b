/*
 * feed: keeps a usage store true to the cluster (SPEC section 5).
 *
 * Three informers (kube/informer.h), three threads: all Pods
 * (/api/v1/pods), all Jobs (/apis/batch/v1/jobs) and all DRA
 * ResourceClaims (/apis/resource.k8s.io/v1/resourceclaims).  No label
 * selector: what the store counts must not depend on a label that a
 * status writer (pods/status, jobs/status) can remove, so every object is
 * read and the charge rule, from the spec, decides what it holds; objects
 * that hold nothing cost a lookup and are not kept.  What they see goes
 * into the store:
 *
 *   listed, ADDED, MODIFIED   the charge callback says what the object
 *                             holds: usage_observe() while it is active,
 *                             else usage_forget()
 *   DELETED                   usage_forget(metadata.uid)
 *   a whole list of a kind    usage_relist_begin/end(store, kind): it
 *                             replaces what the store had observed of it
 *   connected or not          usage_set_watching(store, all connected):
 *                             reservations expire only while all are
 *
 * The claims informer is optional: on a cluster whose API does not serve
 * resource.k8s.io/v1 (404 to the list) there are no claims, and it counts
 * as synced and connected (logged once: msg="not served" kind=claims); it
 * asks again every unserved_retry_ms.
 *
 * The store is told it is not watched at start, before any thread runs;
 * the threads change the watching state under one lock, so they never
 * leave it stale.  The first whole list of each kind is logged
 * (msg="usage synced" kind=pods entries=N).
 *
 * With a priorities table (usage/priorities.h), another informer lists
 * and watches every PriorityClass (scheduling.k8s.io/v1): the priority a
 * Job's pods will run at; with a claims table (usage/pvcs.h), one more
 * watches every PersistentVolumeClaim (does the checkpoint claim exist).
 * Like Nodes, these count for neither.
 *
 * With an inventory (usage/inventory.h), a fourth informer lists and
 * watches every Node, and every pod also goes to the inventory: where it is
 * bound and what it asks there.  Nodes count neither for feed_synced nor
 * for feed_connected: quota does not depend on them, and a cluster that
 * refuses to list Nodes (RBAC) only leaves the pool unknown (logged).
 *
 * With an inventory and the DRA readers (dra_put, dra_delete), three more
 * informers list and watch the pool's DRA kinds (docs/design/dra.md D3):
 * ResourceSlices, DeviceTaintRules and DeviceClasses
 * (/apis/resource.k8s.io/v1/...), and every ResourceClaim also goes to
 * the inventory (its allocated devices).  Like Nodes they count for
 * neither; like claims they are optional: a 404 to the list tells the
 * inventory the kind is not served (inventory_not_served: a DRA flavor's
 * pool is then not known) and the list is asked again every
 * unserved_retry_ms.  Their first whole list is logged
 * (msg="inventory synced" kind=resourceslices).
 *
 * The feed knows neither the policy nor what an object holds: the caller
 * gives it the charge rule (webhook/charge.h charge_item_current with the
 * policy holder, in gpugate serve) and, for the inventory, the readers of
 * webhook/node-facts.h.
 */
#ifndef GPUGATE_FEED_H
#define GPUGATE_FEED_H

#include "usage/inventory.h"
#include "usage/meter.h"
#include "usage/priorities.h"
#include "usage/pvcs.h"
#include "usage/usage.h"

#include <jansson.h>
#include <stdbool.h>

struct arena;
struct diag;
struct kube_config;

struct feed_config {
	const struct kube_config *kube; /* copied */
	struct usage_store *usage;      /* borrowed; outlives the feed */
	/*
	 * What obj (of kind: a Pod, Job or ResourceClaim) holds, in *out: 0,
	 * or -1 to leave the object out (no uid, no policy).  Strings must
	 * live as long as obj and a (the feed releases a after the store was
	 * told).  Called from every thread at once.
	 */
	int (*charge)(void *ctx, const json_t *obj, enum usage_kind kind,
		      struct arena *a, struct usage_item *out);
	void *charge_ctx;
	/* Optional: the inventory to keep, and how to read a Node and where a
	 * Pod is (both with the facts' rules; strings live as long as obj and
	 * the arena).  Called from the feed's threads. */
	struct inventory *inventory;
	int (*node)(void *ctx, const json_t *obj, struct arena *a,
		    struct pool_node *out);
	int (*placement)(void *ctx, const json_t *obj, struct arena *a,
			 struct inventory_placement *out);
	void *facts_ctx;
	/* Optional, with an inventory: how to put a DRA object of kind
	 * (INVENTORY_CLAIMS, _SLICES, _TAINT_RULES, _DEVICE_CLASSES) into it,
	 * -1 when it cannot (webhook/dra-facts.h dra_facts_put), and drop its
	 * last state (dra_facts_delete).  With them, ResourceSlices,
	 * DeviceTaintRules and DeviceClasses are watched, and claims go to
	 * the inventory too. */
	int (*dra_put)(struct inventory *inv, enum inventory_kind kind, const json_t *obj,
		       struct arena *a);
	void (*dra_delete)(struct inventory *inv, enum inventory_kind kind,
			   const json_t *obj);
	/* Optional: the PriorityClasses to keep (a fifth informer; counts
	 * neither for feed_synced nor for feed_connected: a cluster that
	 * refuses to list them only leaves Job priorities unknown). */
	struct priorities *priorities;
	/* Optional: the PersistentVolumeClaims to keep (usage/pvcs.h: does a
	 * workload's checkpoint claim exist); counts for neither either. */
	struct pvcs *pvcs;
	/* Optional: the meter (usage/meter.h), fed every pod through run. */
	struct meter *meter;
	int (*run)(void *ctx, const json_t *obj, struct arena *a,
		   struct meter_pod *out);
	unsigned idle_seconds;          /* a silent watch is broken; 0: 180 */
	unsigned unserved_retry_ms;     /* an optional kind not served: 0: 300000 */
};

struct feed;

/* Starts the informers.  -1 with a message when cfg has no usage store or
 * no charge rule, or an informer cannot start. */
int feed_start(const struct feed_config *cfg, struct feed **out,
	       struct diag *d);
/* True once Pods, Jobs and ResourceClaims have each been listed completely
 * (claims: or are not served). */
bool feed_synced(struct feed *f);
/*
 * Pods, Jobs and ResourceClaims listed whole again (informer_resync()),
 * the store told as on any relist: the tickets in *t.  A replica that
 * starts deciding quota alone (--usage-store leader) asks for it, and
 * asks again (the kinds not served yet, their pending tickets) until
 * feed_resynced()
 * says that a list begun after the first ask was read whole of every
 * kind: everything stored before is in its store.
 */
struct feed_resync {
	uint64_t ticket[USAGE_KINDS];
	bool asked; /* false (zeroed): the first feed_resync() asks every kind */
};
void feed_resync(struct feed *f, struct feed_resync *t);
bool feed_resynced(struct feed *f, const struct feed_resync *t);

/* True while every watch is connected (answered 200, not ended; claims:
 * or are not served). */
bool feed_connected(struct feed *f);
/* Stops the threads (at once: each watch's connection is cut; within
 * about a second at most) and frees f.  NULL is a no-op. */
void feed_stop(struct feed *f);

#endif
