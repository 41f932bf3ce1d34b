/*
 * leader-backend: the usage backend of several replicas where one decides
 * (issue #32; docs/design/replicas-speed.md, way A), the shipped default
 * (`--usage-store leader`).
 *
 * Every replica keeps a memory ledger (usage_memory_new()) fed by its own
 * watch: /mutate's peeks, metrics, the pool and the reclaimer read it as
 * with the memory backend.  A decision that reserves (/validate) is made by
 * one replica only, the one the caller's role() names:
 *
 *   USAGE_ROLE_LEAD     this replica: its ledger decides and holds the
 *                       units, under its lock, and only while role() still
 *                       says LEAD when the lock is held (the fence: a
 *                       leader paused between the check and the decision
 *                       decides nothing once it has lost the Lease)
 *   USAGE_ROLE_FOLLOW   another replica, at the address role() wrote into
 *                       who: the decision's inputs are forwarded to it
 *                       (forward(); gpugate serve sends them over HTTPS,
 *                       kube/peer.h), and its answer is the decision
 *   USAGE_ROLE_NONE     nobody may decide now (no leader known, a new
 *                       leader still waiting for its start gate): the
 *                       claim is answered QUOTA_UNAVAILABLE with role()'s
 *                       reason (denied in every mode: fail closed)
 *
 * The leader's side of a forward is usage_leader_reserve(): the same
 * decision as its own /validate, never forwarded again.
 *
 * This file does no I/O: role() and forward() are the caller's (the
 * daemon's Lease and start gate; the peer client), so it is tested
 * without a server.
 */
#ifndef GPUGATE_USAGE_LEADER_BACKEND_H
#define GPUGATE_USAGE_LEADER_BACKEND_H

#include "usage/usage.h"

#include <stdbool.h>
#include <stddef.h>

struct policy;
struct quota_claim;
struct quota_result;
struct workload;

enum usage_role { USAGE_ROLE_NONE, USAGE_ROLE_LEAD, USAGE_ROLE_FOLLOW };

/* The size of role()'s who buffer: an address, or a reason. */
#define USAGE_ROLE_WHO_MAX 320

struct usage_leader_config {
	/* The ledger every replica keeps (its now_ms, ttl and grace). */
	struct usage_memory_config memory;
	/*
	 * Who decides now.  FOLLOW: the leader's address ("host:port") in
	 * who; NONE: why nobody may, one line, in who.  Called from any
	 * thread, under the ledger's lock too (it must not call the store).
	 */
	enum usage_role (*role)(void *ctx, char *who, size_t size);
	/*
	 * The leader at `who` decides claim c of workload wl (reserving; force
	 * as usage_decide()).  0 with *out (its strings pointing into p and
	 * wl); -1 with one line in why when no decision came back (not sent,
	 * no answer in time, refused, not understood).  Any thread.
	 */
	int (*forward)(void *ctx, const char *who, const struct policy *p,
		       const struct workload *wl, const struct quota_claim *c,
		       bool force, struct quota_result *out, char *why,
		       size_t size);
	void *ctx;
};

/* NULL when out of memory or cfg lacks role or forward. */
struct usage_store *usage_leader_new(const struct usage_leader_config *cfg);

/*
 * The leader's decision of a forwarded claim: as usage_decide() with
 * reserve on this replica's ledger, when role() says LEAD under the
 * ledger's lock; else QUOTA_UNAVAILABLE ("this replica does not lead:
 * ...").  u must be a leader backend's store (else QUOTA_UNAVAILABLE).
 */
void usage_leader_reserve(struct usage_store *u, const struct policy *p,
			  const struct workload *wl, const struct quota_claim *c,
			  bool force, struct quota_result *out);

#endif
