/*
 * waiter: why a pod waits, as an Event on the pod (`kubectl describe pod`
 * shows it under Events: reason GPUWaiting, from gpugate).
 *
 * A thread of gpugate serve (API mode).  Every interval it takes the GPU
 * pods that have waited for a node longer than `after` (usage/inventory.h
 * keeps them, from the watch), asks the pool why (policy/decide.h
 * decide_waiting: no node of the flavor, every node excluded for health,
 * none could ever hold it, no room now and who holds the flavor, or the
 * scheduler's own message) and writes one Event per pod: again only when
 * the reason changes, or every `repeat` with the same one; at most
 * max_per_round Events a round.  Only while `leading` says so (the Lease of
 * several replicas), so that one replica writes.
 */
#ifndef GPUGATE_WAITER_H
#define GPUGATE_WAITER_H

#include <stdbool.h>

struct diag;
struct holder;
struct inventory;
struct kube_config;
struct usage_store;

struct waiter_config {
	const struct kube_config *kube;
	struct holder *policy;
	struct inventory *inventory;
	struct usage_store *usage;
	const char *identity;        /* reportingInstance of the Events */
	unsigned after_s;            /* waited at least this long; 0: 60 */
	unsigned interval_s;         /* between rounds; 0: 10 */
	unsigned repeat_s;           /* the same reason again after; 0: 600 */
	unsigned max_per_round;      /* 0: 50 */
	bool (*leading)(void *ctx);  /* NULL: always */
	void *leading_ctx;
};

struct waiter;

int waiter_start(const struct waiter_config *cfg, struct waiter **out, struct diag *d);
/* Stops the thread (within a second) and frees w.  NULL is a no-op. */
void waiter_stop(struct waiter *w);

#endif
