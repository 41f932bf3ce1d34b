/*
 * watch: keeps the ledger true to the cluster (SPEC section 5).
 *
 * Two threads, one for Pods and one for Jobs, each lists the objects
 * gpugate stamped (label selector gpugate.io/tenant) page by page, then
 * watches from the list's resourceVersion with bookmarks.  A watch that
 * ends is resumed from the last version seen (an event's or a bookmark's);
 * "410 Gone" (the version is too old) starts a new list; failed lists and
 * broken watches are retried with exponential backoff (0.5 s doubling to
 * 30 s), back to 0.5 s after every whole list and every watch that opened.
 * Every relist replaces what the ledger had observed of that kind.
 *
 * A watch counts as connected once the server answered it 200 (before its
 * first event), until it ends.  The ledger is told (ledger_set_watching)
 * whether both are: reservations expire only while they are.  Stopping
 * interrupts a list or a watch within about a second.
 *
 * What an object holds is the charge rule's (policy/charge.h, through
 * webhook/charge.c).
 */
#ifndef GPUGATE_WATCH_H
#define GPUGATE_WATCH_H

#include <stdbool.h>

struct diag;
struct holder;
struct kube_config;
struct usage_store;

struct watch_config {
	const struct kube_config *kube; /* copied */
	struct usage_store *ledger;
	struct holder *policy;
	unsigned idle_seconds;          /* 0: 180 */
};

struct watch;

int watch_start(const struct watch_config *cfg, struct watch **out,
		struct diag *d);
/* True once Pods and Jobs have each been listed completely. */
bool watch_synced(struct watch *w);
/* True while both watches are connected (answered 200, not ended). */
bool watch_connected(struct watch *w);
void watch_stop(struct watch *w);

#endif
