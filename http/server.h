/*
 * server: HTTPS with libmicrohttpd (GnuTLS, tls.c), a thread pool over epoll.  One
 * thread of gpugate's accepts and hands each connection to libmicrohttpd,
 * which spreads them evenly over the workers (server.c, "accepting").
 *
 * Routes (SPEC section 8; the query string is ignored):
 *   POST /mutate, POST /validate   AdmissionReview, application/json
 *   GET  /healthz                   alive
 *   GET  /readyz                    ready (server_config.ready callback)
 *   GET  /metrics                   Prometheus text
 *
 * Input limits: a POST must say its Content-Length (411 otherwise: a
 * chunked body could only be refused after reading it); one over body_cap
 * is refused with 413 before any of it is read; a body that is not
 * application/json gets 415; idle or stalled connections are
 * closed after conn_timeout seconds; one client address may hold at most
 * per_ip_limit connections.
 *
 * The certificate is served through a GnuTLS callback, so that
 * server_set_certificate() replaces it for new handshakes without a restart
 * and without dropping a connection.
 */
#ifndef GPUGATE_SERVER_H
#define GPUGATE_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct diag;
struct handler;
struct strbuf;

#define SERVER_BODY_CAP_DEFAULT (6u << 20) /* >= 3 MiB, <= 8 MiB */
#define SERVER_MAX_THREADS 256

/* Fills why (a short line per unmet condition) and returns true when ready. */
typedef bool (*server_ready_fn)(void *ctx, struct strbuf *why);
/* Renders /metrics; returns 0 with a malloc'd body. */
typedef int (*server_metrics_fn)(void *ctx, char **out, size_t *len);

struct server_config {
	const char *host;            /* numeric address; "0.0.0.0" or "::" for all */
	uint16_t port;               /* 0: an ephemeral port (see server_port) */
	unsigned threads;            /* 0: one per CPU */
	size_t body_cap;             /* 0: SERVER_BODY_CAP_DEFAULT */
	unsigned conn_timeout;       /* seconds; 0: 30 */
	unsigned conn_limit;         /* 0: 1024 */
	unsigned per_ip_limit;       /* 0: 256 */
	struct handler *handler;
	server_ready_fn ready;
	server_metrics_fn metrics;
	void *ctx;                   /* for ready and metrics */
};

struct server;

/*
 * Starts serving with the PEM certificate chain and key given in memory.
 * Returns 0 and the server in *out, or -1 with a message.
 */
int server_start(const struct server_config *cfg, const char *cert_pem,
		 const char *key_pem, struct server **out, struct diag *d);

/* Replaces the certificate for new handshakes.  -1 (old one kept) when the
 * PEM does not parse. */
int server_set_certificate(struct server *s, const char *cert_pem,
			   const char *key_pem, struct diag *d);

uint16_t server_port(const struct server *s);

/* Requests in progress right now. */
unsigned server_in_flight(const struct server *s);

/*
 * Requests begun on each worker thread, to see how evenly the connections
 * are spread: workers are numbered 0 .. server_worker_count() - 1 in the
 * order they first served; one that has served nothing counts 0.
 */
unsigned server_worker_count(const struct server *s);
uint64_t server_worker_requests(const struct server *s, unsigned i);

/*
 * Graceful stop: stop accepting, let requests in progress finish (at most
 * grace_ms), close idle keep-alive connections, free everything.
 */
void server_stop(struct server *s, unsigned grace_ms);

#endif
