/*
 * ledger: who holds which quota right now (SPEC section 5).
 *
 * Every workload that holds quota is one entry, keyed by its uid: a bare
 * Pod holds its units, a Job holds parallelism x units for all its pods,
 * and the pods of a Job the ledger knows are not charged again.  Usage per
 * (tenant, flavor) is kept as a running sum, so a decision costs O(cohort
 * size), not O(workloads).
 *
 * Entries come from two places:
 *   - /validate reserves (ledger_quota_source): the quota arithmetic and the
 *     reservation happen under one lock, so concurrent creates never
 *     over-admit;
 *   - the Kubernetes API watch (watch.c) observes objects: a reservation
 *     becomes an observation when its object shows up, and expires if it
 *     never does (the create failed after /validate); terminal pods,
 *     finished Jobs and deleted objects hold nothing.
 * Without an API (embedded mode) reservations never expire and DELETE
 * admissions release them.
 *
 * Names, not policy indices, key the sums, so a policy reload keeps usage.
 * All functions are thread-safe.  The storage stays behind this interface:
 * sharing it between replicas (a Kubernetes object updated by
 * compare-and-swap) changes ledger.c only.
 */
#ifndef GPUGATE_LEDGER_H
#define GPUGATE_LEDGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct quota_source;

struct ledger_config {
	/* API mode: reservations expire unless observed within this many
	 * milliseconds; DELETE admissions are left to the watch.  0: embedded
	 * mode. */
	uint64_t reservation_ttl_ms;
	/* Milliseconds on a monotonic clock; NULL: CLOCK_MONOTONIC. */
	uint64_t (*now_ms)(void);
};

struct ledger;

struct ledger *ledger_new(const struct ledger_config *cfg);
void ledger_free(struct ledger *l);

/* The ledger as the handler's quota source (valid as long as l). */
const struct quota_source *ledger_quota_source(struct ledger *l);

/* One object as the API shows it. */
struct ledger_item {
	const char *uid;
	bool is_job;
	const char *namespace;
	const char *name;
	const char *tenant;        /* from the namespace, by the policy */
	const char *flavor;        /* from the resources and node selector */
	int64_t units;             /* what it holds while active */
	bool active;               /* false: terminal pod or finished Job */
	const char *owner_job_uid; /* a Job's pod: its Job, else NULL */
};

/* ADDED/MODIFIED (or a listed object). */
void ledger_observe(struct ledger *l, const struct ledger_item *it);
/* DELETED. */
void ledger_forget(struct ledger *l, const char *uid);

/*
 * A relist of one kind (pods or jobs): observations not repeated between
 * begin and end were deleted while nobody watched, and are forgotten.
 * Reservations not yet observed are kept (they expire on their own).
 */
void ledger_relist_begin(struct ledger *l, bool jobs);
void ledger_relist_end(struct ledger *l, bool jobs);

/*
 * The API watch is up (true) or down.  Only a watch that is up can tell a
 * create that failed after /validate from one that is slow to show, so a
 * reservation expires once the watch has been up for the whole TTL since
 * the reservation was made: while it is down nothing expires, and when it
 * comes back every pending reservation has a whole TTL again.  A new
 * ledger counts as up; the watch says when it is not.
 */
void ledger_set_watching(struct ledger *l, bool up);

/* Drops reservations whose object never showed up (see above); returns how
 * many.  Called about once a second. */
size_t ledger_expire(struct ledger *l);

/* Usage, for metrics and tests. */
int64_t ledger_used(struct ledger *l, const char *tenant, const char *flavor);
size_t ledger_entries(struct ledger *l);
typedef void (*ledger_usage_fn)(void *ctx, const char *tenant,
				const char *flavor, int64_t used);
void ledger_foreach_usage(struct ledger *l, ledger_usage_fn fn, void *ctx);

#endif
