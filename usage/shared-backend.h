/*
 * shared-backend: the usage backend of several replicas (issue #14;
 * docs/design/shared-usage-store.md), beside the memory backend of one
 * (usage/memory-backend.c, usage_memory_new()).
 *
 * Usage is what the API watch shows (observed: every replica sees the same,
 * a few milliseconds apart) plus what was admitted at /validate and is not
 * shown yet (reserved).  This backend keeps the observed part in a memory
 * ledger of its own, fed by the feed like the memory backend, and the
 * reserved part in one document per quota domain (a cohort, or a tenant in
 * none) that every replica reads and writes by compare-and-swap: a
 * decision at /validate reads the document, judges the claim against
 * observed usage plus the records no watch has shown yet, and writes its
 * record only on the version it read.  Two replicas can then never both
 * hand out the last units.
 *
 * The document (usage/reservations.h) and its storage are this backend's
 * seam with the Kubernetes API: the storage is injected (struct
 * usage_shared_io; gpugate serve uses kube/shared-io.c, a ConfigMap
 * through kube_cas_update(), its JSON kube/reservations-json.c), so that
 * this file does no I/O and is tested without a server.  When the
 * storage cannot be read or written in time, or this replica's watch is
 * down, a claim that would reserve is answered QUOTA_UNAVAILABLE (denied
 * in every mode: fail closed for quota); /mutate's peeks and every request
 * that holds no quota are served from the local ledger as before.
 *
 * Every decision that reserves is made on the document, under its
 * compare-and-swap, a pod taking a slot of its Job's gang too (issue #26:
 * usage_gang_takes(), the memory backend's rule, over the riders the
 * ledger shows plus the riding records).  What a record adds is
 * resv_judge()'s verdict on what this replica's watch shows of its uid (at
 * which generation, active or not, deleted), of its name (another uid:
 * the create was refused) and of its kind's last list: only pending
 * records count.
 *
 * Records leave the document only through usage_shared_prune(), which one
 * replica at a time (the leader, kube/lease.h) calls, by the same verdict:
 * records shown at their generation for grace_ms, and records that count
 * for nothing (deleted, refused, not in a later list, never shown within
 * the TTL).
 */
#ifndef GPUGATE_USAGE_SHARED_BACKEND_H
#define GPUGATE_USAGE_SHARED_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct policy;
struct resv_doc;
struct usage_store;

/* Changes doc as the caller decided; true: write it, false: leave it. */
typedef bool usage_shared_fn(void *ctx, struct resv_doc *doc);

struct usage_shared_io {
	/*
	 * One read-decide-write of the document of quota domain `domain` (a
	 * name from resv_domain_name()): reads it (absent: empty), calls
	 * fn(ctx, doc), writes doc when fn says so, on the version read; a
	 * write refused as stale starts over from the read (fn runs again:
	 * only its last run counts).  0 when fn's last run stood (written,
	 * or nothing to write); -1 with one line in err when the document
	 * could not be read, decoded or written (a write may then have
	 * happened: records are keyed by uid, so that only over-counts).
	 * Called from any thread.
	 */
	int (*transact)(void *io, const char *domain, usage_shared_fn *fn,
			void *ctx, char *err, size_t errsz);
	void *io;
};

struct usage_shared_config {
	struct usage_shared_io io;
	const char *replica;         /* who reserves (copied; a pod name) */
	uint64_t reservation_ttl_ms; /* never-shown records go (0: 60 s) */
	uint64_t grace_ms;           /* shown this long: records go (0: 5 s) */
	uint64_t (*now_ms)(void);    /* wall clock, ms; NULL: CLOCK_REALTIME */
};

/* NULL when out of memory or cfg has no transact. */
struct usage_store *usage_shared_new(const struct usage_shared_config *cfg);

/*
 * The leader's clean-up of every quota domain of p (see above).  Returns
 * how many records were removed; *failed counts the domains whose
 * document could not be cleaned (err: the last reason).
 */
size_t usage_shared_prune(struct usage_store *u, const struct policy *p,
			  size_t *failed, char *err, size_t errsz);

#endif
