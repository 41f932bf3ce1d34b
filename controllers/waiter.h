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
#include <stddef.h>
#include <stdint.h>

struct diag;
struct holder;
struct inventory;
struct inventory_waiting;
struct kube_config;
struct policy;
struct policy_flavor;
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

/*
 * The pure part of a round, for each waiting pod of a flavor f of p:
 *
 * waiter_reason() is what the pod is told, one line into message (size >
 * 0): why the pool has no room for one pod of pod->per_pod units of f
 * (inv: no node of the flavor, every node excluded, none could ever hold
 * it, no room now and who holds the flavor, from usage when not NULL),
 * else the scheduler's message (pod->scheduler); "" when the pool has
 * room and the scheduler said nothing yet (nothing is written).  It reads
 * inv and usage under their locks, nothing else.
 *
 * waiter_due() says whether that reason (its hash) is written at now
 * (Unix seconds): when it differs from the one last written for the pod
 * (said, at said_at; 0: none), or repeat_s have passed since.
 */
void waiter_reason(const struct policy *p, const struct policy_flavor *f,
		   struct inventory *inv, struct usage_store *usage,
		   const struct inventory_waiting *pod, char *message, size_t size);
bool waiter_due(uint64_t said, int64_t said_at, uint64_t reason, int64_t now,
		unsigned repeat_s);

/*
 * A pod of a gang that waits to start all together (SPEC section 9: the
 * gang label and the gate gpugate.io/gang, or the route workload or
 * podgroup): waiter_is_gang() says so, and waiter_gang_reason() is what
 * it is told instead of waiter_reason()'s one-pod reason:
 *
 *   waits for its gang <id> (route <r>): <k> of <n> pods fit now, best
 *   domain <key>=<value>; short: <what>
 *   waits for its gang <id> (route <r>): all <n> pods fit now; starting
 *
 * n is gang_pods, the gang's pods that wait (the round counts them);
 * topology_key the class's when its topology is required (NULL: none;
 * then no domain is named); short: the nodes of per_pod units free that
 * are missing, or why the flavor cannot hold the gang.  Reads inv and
 * usage under their locks.
 */
bool waiter_is_gang(const struct inventory_waiting *pod);
void waiter_gang_reason(const struct policy *p, const struct policy_flavor *f,
			struct inventory *inv, struct usage_store *usage,
			const struct inventory_waiting *pod, int64_t gang_pods,
			const char *topology_key, char *message, size_t size);

#endif
