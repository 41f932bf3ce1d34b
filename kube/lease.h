/*
 * lease: leader election on a coordination.k8s.io/v1 Lease, so that one
 * replica at a time does work that must not be done twice (reconciling
 * reservations, reclaim) while every replica keeps serving admissions.
 * The protocol is client-go's (tools/leaderelection), so that a Lease is
 * read the same way by other tools:
 *
 *   - The Lease's spec is the record: holderIdentity, leaseDurationSeconds,
 *     acquireTime, renewTime (RFC 3339 micro time), leaseTransitions.
 *   - A replica takes the Lease when it does not exist (POST), when its
 *     holderIdentity is empty (released) or names this identity, or when
 *     its spec has not changed for longer than its leaseDurationSeconds as
 *     measured on this replica's monotonic clock from the moment it saw the
 *     spec change.  The times written in the record are never compared
 *     with the local clock: clock skew between replicas does not matter,
 *     only clock rate does.
 *   - Every write of an existing Lease is a PUT with the resourceVersion
 *     read; a 409 (Conflict, or AlreadyExists on the create) means that
 *     another replica wrote first: the Lease is read again at once.
 *   - The holder renews (renewTime) every retry period.  leaseTransitions
 *     grows by one whenever a different identity takes the Lease.
 *
 * One thread per lease.  It calls on_change(ctx, true) when this replica
 * starts leading, and on_change(ctx, false) as soon as it stops: a read
 * shows another holder, renewing failed for renew_deadline since the last
 * renew that succeeded (counted from when that renew was sent), or
 * lease_stop().  Both run on the lease's thread, one at a time, true and
 * false alternating, true first, each just after lease_leading() has
 * turned (another thread may see the new lease_leading() before the
 * callback has run).
 *
 * What it guarantees (docs/internals.md, "Leader election"): while
 * lease_leading() is true, this replica wrote the Lease as its holder less
 * than renew_deadline ago on its own clock, and no other replica using
 * this module on the same Lease takes it before duration has passed since
 * it saw that write.  duration - renew_deadline is the margin for clock
 * rates and for the time between a check of lease_leading() and the act
 * it guards.  What it does not: a leader that loses the Lease without
 * being able to tell (the API is unreachable) goes on believing it leads
 * until renew_deadline has passed, and an act started just before that
 * may land after another replica took over.  Writes a leader makes should
 * be compare-and-swap guarded anyway (kube_cas_update()).
 *
 * It logs (logfmt; lease=NAMESPACE/NAME):
 *
 *   info  msg="leader elected" lease=NS/N identity=ID transitions=T
 *   warn  msg="leader lost" lease=NS/N identity=ID reason="taken" holder="H"
 *   warn  msg="leader lost" lease=NS/N identity=ID reason="renew deadline"
 *         error="..."
 *   info  msg="leader lost" lease=NS/N identity=ID reason="stopped"
 *   info  msg="lease released" lease=NS/N identity=ID
 *   warn  msg="cannot release" lease=NS/N identity=ID error="..."
 *   warn  msg="lease unavailable" lease=NS/N identity=ID error="..."
 *         (the first failed attempt after one that worked)
 *
 * RBAC: get, create and update on leases in the Lease's namespace
 * (manifests/rbac.yaml).
 */
#ifndef GPUGATE_LEASE_H
#define GPUGATE_LEASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct diag;
struct kube_config;

/* Defaults of a zero field in struct lease_config (client-go's). */
#define LEASE_DURATION_MS 15000u
#define LEASE_RENEW_DEADLINE_MS 10000u
#define LEASE_RETRY_MS 2000u

struct lease_config {
	const struct kube_config *kube; /* copied */
	/* The Lease's namespace and name (lower case letters, digits, '-' and
	 * '.', at most 253 bytes) and this replica's identity (the pod name:
	 * letters, digits, '-', '.', '_' and ':', at most 253 bytes); all
	 * copied.  Replicas must have distinct identities. */
	const char *namespace, *name, *identity;
	/* How long others wait for a silent holder; written to the Lease as
	 * leaseDurationSeconds, rounded up to whole seconds (the Lease's
	 * unit), which is what every replica then waits. */
	unsigned duration_ms;
	/* How long the holder goes on leading while its renews fail. */
	unsigned renew_deadline_ms;
	/* How often the holder renews, and the others try (the others with
	 * up to 20 % jitter). */
	unsigned retry_ms;
	/* Called on the lease's thread; may be NULL. */
	void (*on_change)(void *ctx, bool leading);
	void *ctx;
	/* Milliseconds on a monotonic clock; NULL: CLOCK_MONOTONIC.  For
	 * tests; it decides expiry and lease_leading(), while waits and
	 * request timeouts run on the real clock. */
	uint64_t (*now_ms)(void);
	/* Only watch who holds the Lease: read it every retry period, never
	 * write it (no RBAC beyond get), never lead.  lease_holder() says
	 * whether someone does; a holder named like this identity counts. */
	bool observe_only;
	/* Where the other replicas reach this one ("host:port", at most
	 * LEASE_ADDRESS_MAX bytes; copied), written into the Lease's
	 * annotations whenever this replica writes it as the holder, so that
	 * lease_holder_address() of the others says where the leader is
	 * (issue #32: followers forward to it).  NULL: none (and any left by
	 * a holder before is taken off). */
	const char *address;
};

/* The annotations the holder's address goes in, with its identity (an
 * address is believed only when the identity is the holder's). */
#define LEASE_ADDRESS_ANNOTATION "gpugate.io/peer-address"
#define LEASE_IDENTITY_ANNOTATION "gpugate.io/peer-identity"
#define LEASE_ADDRESS_MAX 300

struct lease;

/*
 * Checks cfg and starts the thread, which tries to take the Lease at once.
 * Returns 0 with *out; -1 with one line in d when cfg is wrong (a missing
 * or malformed namespace, name or identity; not retry < renew_deadline <
 * duration once the defaults are in) or a resource runs out.
 */
int lease_start(const struct lease_config *cfg, struct lease **out,
		struct diag *d);

/*
 * True while this replica holds the Lease and renewed it less than
 * renew_deadline ago (on now_ms): no request is made, it may be called
 * from any thread as often as wanted.  It turns false when the deadline
 * passes even if the lease's thread is still waiting for an answer.
 */
bool lease_leading(struct lease *l);

/*
 * True when another replica holds the Lease (or, observe_only, anyone
 * does): the last read showed its identity, and its term (the Lease's
 * leaseDurationSeconds from when this replica saw the record last change)
 * has not run out on now_ms.  Its identity goes into holder (size > 0;
 * cut to fit).  False before the first read, while this replica holds it,
 * and when the Lease is absent, released or expired.  A read that fails
 * keeps what the last one showed until that term runs out.  Any thread.
 */
bool lease_holder(struct lease *l, char *holder, size_t size);

/*
 * lease_holder(), and the address the holder published with it
 * (lease_config.address) into address (asize > 0): "" when it published
 * none.  Any thread.
 */
bool lease_holder_address(struct lease *l, char *holder, size_t hsize,
			  char *address, size_t asize);

/* True once the first attempt to read (and take) the Lease has ended,
 * whatever its outcome: lease_holder() and lease_leading() then say what
 * it found.  Any thread. */
bool lease_tried(struct lease *l);

/* Why the last attempt to read or take the Lease failed, one line; "" when
 * it worked.  Any thread. */
void lease_error(struct lease *l, char *buf, size_t size);

/*
 * Stops the thread and frees l.  When this replica was leading, it calls
 * on_change(false) first, then releases the Lease (holderIdentity
 * emptied, renewTime now, at the version it last wrote) so that another
 * replica takes it at its next try instead of after duration.  Returns
 * within about a second (a request in flight is abandoned within a
 * second; the release is given at most a second).  No callback runs after
 * it returns.  NULL is a no-op.
 */
void lease_stop(struct lease *l);

#endif
