/*
 * feed: keeps a usage store true to the cluster (SPEC section 5).
 *
 * Two informers (kube/informer.h), two threads: all Pods (/api/v1/pods)
 * and all Jobs (/apis/batch/v1/jobs).  No label selector: what the store
 * counts must not depend on a label that a status writer (pods/status,
 * jobs/status) can remove, so every object is read and the charge rule,
 * from the spec, decides what it holds; objects that hold nothing cost a
 * lookup and are not kept.  What they see goes into the store:
 *
 *   listed, ADDED, MODIFIED   the charge callback says what the object
 *                             holds: usage_observe() while it is active,
 *                             else usage_forget()
 *   DELETED                   usage_forget(metadata.uid)
 *   a whole list of a kind    usage_relist_begin/end(store, jobs): it
 *                             replaces what the store had observed of it
 *   connected or not          usage_set_watching(store, both connected):
 *                             reservations expire only while both are
 *
 * The store is told it is not watched at start, before any thread runs;
 * the two threads change the watching state under one lock, so they never
 * leave it stale.  The first whole list of each kind is logged
 * (msg="usage synced" kind=pods entries=N).
 *
 * The feed knows neither the policy nor what an object holds: the caller
 * gives it the charge rule (webhook/charge.h charge_item_current with the
 * policy holder, in gpugate serve).
 */
#ifndef GPUGATE_FEED_H
#define GPUGATE_FEED_H

#include <jansson.h>
#include <stdbool.h>

struct arena;
struct diag;
struct kube_config;
struct usage_item;
struct usage_store;

struct feed_config {
	const struct kube_config *kube; /* copied */
	struct usage_store *usage;      /* borrowed; outlives the feed */
	/*
	 * What obj (a Pod, or a Job when is_job) holds, in *out: 0, or -1 to
	 * leave the object out (no uid, no policy).  Strings must live as long
	 * as obj and a (the feed releases a after the store was told).  Called
	 * from both threads at once.
	 */
	int (*charge)(void *ctx, const json_t *obj, bool is_job, struct arena *a,
		      struct usage_item *out);
	void *charge_ctx;
	unsigned idle_seconds;          /* a silent watch is broken; 0: 180 */
};

struct feed;

/* Starts both informers.  -1 with a message when cfg has no usage store or
 * no charge rule, or an informer cannot start. */
int feed_start(const struct feed_config *cfg, struct feed **out,
	       struct diag *d);
/* True once Pods and Jobs have each been listed completely. */
bool feed_synced(struct feed *f);
/* True while both watches are connected (answered 200, not ended). */
bool feed_connected(struct feed *f);
/* Stops both threads (within about a second) and frees f.  NULL is a
 * no-op. */
void feed_stop(struct feed *f);

#endif
