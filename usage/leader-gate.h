/*
 * leader-gate: when a replica of `--usage-store leader` may decide quota
 * (issue #32; docs/design/replicas-speed.md, "Fencing"), pure: the
 * caller brings the Lease's facts and the clock.
 *
 * A replica decides only while it holds the Lease (lease_leading(): it
 * renewed it less than renew_deadline ago on its own clock), and a new
 * holder only after two more things:
 *
 *   - grace_ms (G, 5 s) since it took the Lease: the old leader stopped
 *     deciding at its renew deadline, before this one could take the Lease
 *     (lease_duration > renew_deadline); every create it admitted then
 *     reaches the apiserver within the webhook's timeout, so after G it is
 *     stored or refused;
 *   - a whole list of pods, Jobs and claims begun after that (the feed's
 *     resync, kube/feed.h): everything stored is then in its ledger.
 *
 * Losing the Lease at any moment (a fact that says not leading) closes
 * the gate; taking it again starts the wait again.
 *
 *   leader_gate_changed()  the Lease's callback: leading turned
 *   leader_gate_step()     once a second: moves the wait on; says when to
 *                          ask for the resync (again)
 *   leader_gate_role()     any request: who decides (usage/leader-backend.h)
 *
 * Thread-safe (one lock, never held while calling out).
 */
#ifndef GPUGATE_USAGE_LEADER_GATE_H
#define GPUGATE_USAGE_LEADER_GATE_H

#include "usage/leader-backend.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* G: see above. */
#define LEADER_GATE_GRACE_MS 5000u

/* What the Leases say now (the caller's reads; strings for the call). */
struct leader_gate_facts {
	const char *lease;    /* "NS/NAME", for messages */
	bool leading;         /* lease_leading() */
	const char *holder;   /* another replica holds it: its identity; NULL: none */
	const char *address;  /* its published address; NULL or "": none */
	const char *error;    /* why the Lease could not be read or taken; NULL */
	/* Non-NULL: nobody may decide, why (replicas of the shared store hold
	 * their Lease and decide on their own). */
	const char *blocked;
};

enum leader_gate_state {
	LEADER_GATE_IDLE,      /* not leading */
	LEADER_GATE_WAITING,   /* leading since since_ms, waiting out G */
	LEADER_GATE_RESYNCING, /* G is over; waiting for the whole list */
	LEADER_GATE_OPEN,      /* deciding */
};

/* What leader_gate_step() asks of the caller. */
enum leader_gate_ask {
	LEADER_GATE_NOTHING,
	LEADER_GATE_RESYNC_NEW,   /* ask for a resync (fresh tickets) */
	LEADER_GATE_RESYNC_AGAIN, /* the pending one: ask again, same tickets */
	LEADER_GATE_OPENED,       /* it just opened: say so */
	LEADER_GATE_CLOSED,       /* it just closed (was open): say so */
};

struct leader_gate {
	pthread_mutex_t mu;
	enum leader_gate_state state;
	uint64_t since_ms;
	uint64_t grace_ms;
};

/* grace_ms 0: LEADER_GATE_GRACE_MS. */
void leader_gate_init(struct leader_gate *g, uint64_t grace_ms);
void leader_gate_destroy(struct leader_gate *g);

/* The Lease's callback: leading turned at now_ms. */
void leader_gate_changed(struct leader_gate *g, bool leading, uint64_t now_ms);

/*
 * Once a second with the facts and whether the resync last asked for is
 * served (false when none was asked).
 */
enum leader_gate_ask leader_gate_step(struct leader_gate *g,
				      const struct leader_gate_facts *f,
				      uint64_t now_ms, bool resynced);

/*
 * Who decides a reserving claim now: LEAD (open), FOLLOW (another holds
 * the Lease and published an address: into who), NONE (why, one line,
 * into who: blocked; leading but waiting; a holder without an address; no
 * holder).
 */
enum usage_role leader_gate_role(struct leader_gate *g,
				 const struct leader_gate_facts *f,
				 uint64_t now_ms, char *who, size_t size);

/* The state now (metrics, /readyz, tests). */
enum leader_gate_state leader_gate_state(struct leader_gate *g);

#endif
