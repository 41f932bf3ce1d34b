/*
 * quota-leader: `gpugate serve --usage-store leader` (issue #32, the
 * shipped default; docs/design/replicas-speed.md), the edge around the
 * pure parts: the leader usage backend (usage/leader-backend.h), its start
 * gate (usage/leader-gate.h), the peer client (kube/peer.h) and the wire
 * (webhook/leader-wire.h).
 *
 *   - Lease gpugate-memory of the namespace (the one --usage-store memory
 *     uses, so that the two modes never both decide): its holder decides
 *     quota, once its gate opened; it publishes its address there.
 *   - Lease gpugate-leader watched: while replicas of --usage-store shared
 *     hold it (an upgrade in progress), nobody here decides.
 *   - The others forward a reserving claim to the holder: POST
 *     /peer/decide (quota_leader_route()), bearer token from the TLS key.
 *
 * It logs:
 *   info  msg="quota leader" lease=NS/gpugate-memory address=A
 *   info  msg="quota decisions on" usage_store=leader lease=NS/N
 *   warn  msg="quota decisions off" usage_store=leader lease=NS/N
 *   warn  msg="peer refused" error="..."   (a bad token or body, once a minute)
 */
#ifndef GPUGATE_DAEMON_QUOTA_LEADER_H
#define GPUGATE_DAEMON_QUOTA_LEADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct diag;
struct feed;
struct holder;
struct http_reply;
struct http_request;
struct kube_config;
struct strbuf;
struct usage_store;

#define QUOTA_LEADER_LEASE "gpugate-memory"
#define QUOTA_SHARED_LEASE "gpugate-leader"

struct quota_leader_config {
	const struct kube_config *kube; /* outlives it */
	const char *namespace;          /* copied */
	const char *identity;           /* copied */
	struct holder *policy;          /* outlives it */
	uint64_t reservation_ttl_ms;
};

struct quota_leader;

/* The store is made here: quota_leader_usage().  NULL with d. */
struct quota_leader *quota_leader_new(const struct quota_leader_config *cfg,
				      struct diag *d);

/* The leader store (the caller frees it, before quota_leader_free()). */
struct usage_store *quota_leader_usage(struct quota_leader *q);

/* The feed the gate asks to list again (set before quota_leader_start()). */
void quota_leader_set_feed(struct quota_leader *q, struct feed *f);

/*
 * The key material of this replica's certificate pair (PEM as read):
 * the pin and token the forwards and the route use.  Called at start and
 * on every reload.  -1 with d (the old ones kept).
 */
int quota_leader_set_keys(struct quota_leader *q, const char *cert_pem,
			  size_t cert_len, const char *key_pem, size_t key_len,
			  struct diag *d);

/* Starts the Leases, publishing address ("host:port"). */
int quota_leader_start(struct quota_leader *q, const char *address, struct diag *d);

/* Once a second: the gate. */
void quota_leader_tick(struct quota_leader *q);

/* This replica holds Lease gpugate-memory (the leader-only controllers). */
bool quota_leader_leading(struct quota_leader *q);

/* What /metrics says of it (metrics/metrics.h). */
struct quota_leader_stats {
	bool deciding;                 /* leads and its gate is open */
	uint64_t answered, failed;     /* forwards */
	double answered_seconds;       /* their round trips, summed */
};
void quota_leader_stats(struct quota_leader *q, struct quota_leader_stats *out);

/* /readyz: the Leases were read at least once (else a line in why). */
bool quota_leader_ready(struct quota_leader *q, struct strbuf *why);

/* POST /peer/decide; ctx: the struct quota_leader. */
void quota_leader_route(void *ctx, const struct http_request *req,
			struct http_reply *out);

/* Stops the Leases, releasing the one held so that another replica takes
 * it at once (no decision here after it returns).  NULL: no-op. */
void quota_leader_stop_leases(struct quota_leader *q);

/* Stops the Leases if still running and frees q.  NULL: no-op. */
void quota_leader_free(struct quota_leader *q);

#endif
