/*
 * server: HTTPS with libmicrohttpd (GnuTLS, tls.c), a thread pool over
 * epoll.  One thread of the server's accepts and hands each connection to
 * libmicrohttpd, which spreads them evenly over the workers (server.c,
 * "accepting").  The server knows no endpoint: the caller gives it a table
 * of routes (gpugate's is built in daemon/daemon.c).
 *
 * Routes.  A request is matched by its exact path, the query string
 * ignored ("/mutate?timeout=10s" is "/mutate"), and its method; a GET
 * route also answers HEAD (libmicrohttpd sends the head without the
 * body).  The first route in the table with that path and method is
 * called, on the worker thread that serves the connection, once the whole
 * request has been read.  The server itself answers, in text/plain:
 *
 *   404 "not found\n"                        no route has the path
 *   405 "method not allowed: use POST\n"     a route has the path, another
 *                                            method ("use GET or POST\n"
 *                                            when there are two), with an
 *                                            Allow header listing them
 *                                            ("GET, HEAD", RFC 9110)
 *
 * A GET or HEAD refused so is answered once its request is complete, and
 * the connection is kept alive; any other method is answered at once,
 * before a body is read, and the connection closed.
 *
 * Routes with HTTP_ROUTE_JSON take a body, under the input limits below,
 * and their answers of up to 8 KiB go out as one TLS record and one send.
 * Other routes take none: a body sent to them is read and dropped.
 *
 * Input limits: a JSON route's request must say its Content-Length (411
 * otherwise: a chunked body could only be refused after reading it); one
 * over body_cap is refused with 413 before any of it is read; a body that
 * is not application/json (parameters allowed) gets 415; these three
 * close the connection.  Idle or stalled connections are closed after
 * conn_timeout seconds; one client address may hold at most per_ip_limit
 * connections, all of them at most conn_limit.
 *
 * The certificate is served through a GnuTLS callback, so that
 * server_set_certificate() replaces it for new handshakes without a restart
 * and without dropping a connection.  It is process-wide (tls.h): run one
 * server per process.
 */
#ifndef GPUGATE_SERVER_H
#define GPUGATE_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct diag;

#define SERVER_BODY_CAP_DEFAULT (6u << 20) /* >= 3 MiB, <= 8 MiB */
#define SERVER_MAX_THREADS 256

struct http_request {
	const char *method; /* "GET", "HEAD", "POST", ... */
	const char *path;   /* without the query string */
	/* HTTP_ROUTE_JSON routes: the whole body, len bytes, not
	 * NUL-terminated; other routes: "" and 0.  Valid during the call. */
	const char *body;
	size_t len;
	/* HTTP_ROUTE_AUTHORIZATION routes: the Authorization header, NULL
	 * when absent; other routes: NULL (not looked up). */
	const char *authorization;
};

struct http_reply {
	unsigned status;
	const char *content_type; /* a string that outlives the server */
	char *body;		  /* malloc'd; the server takes ownership */
	size_t len;
};

/*
 * A route's callback: fills out (zeroed before the call).  Leaving
 * out->body NULL (out of memory) drops the connection without an answer.
 * Called from any worker thread, several at once.
 */
typedef void (*http_handler_fn)(void *ctx, const struct http_request *req,
				struct http_reply *out);

enum http_route_flags {
	/* The request carries an application/json body, read whole under
	 * the input limits before the callback is called; the answer (up to
	 * 8 KiB) is corked into one TLS record. */
	HTTP_ROUTE_JSON = 1u << 0,
	/* The route reads the Authorization header (http_request). */
	HTTP_ROUTE_AUTHORIZATION = 1u << 1,
};

struct http_route {
	const char *method; /* "GET" (and HEAD), "POST", ... */
	const char *path;   /* exact, e.g. "/mutate" */
	http_handler_fn handler;
	void *ctx;	/* handler's first argument */
	unsigned flags; /* enum http_route_flags */
};

/* Sets out to a text/plain; charset=utf-8 answer with a copy of text
 * (out->body NULL when out of memory). */
void http_reply_text(struct http_reply *out, unsigned status, const char *text);

struct server_config {
	const char *host;            /* numeric address; "0.0.0.0" or "::" for all */
	uint16_t port;               /* 0: an ephemeral port (see server_port) */
	unsigned threads;            /* 0: one per CPU */
	size_t body_cap;             /* 0: SERVER_BODY_CAP_DEFAULT */
	unsigned conn_timeout;       /* seconds; 0: 30 */
	unsigned conn_limit;         /* 0: 1024 */
	unsigned per_ip_limit;       /* 0: 256 */
	/* Copied by server_start(); the strings and ctx pointers must
	 * outlive the server. */
	const struct http_route *routes;
	size_t n_routes;
};

struct server;

/*
 * Starts serving with the PEM certificate chain and key given in memory.
 * Returns 0 and the server in *out, or -1 with a message.  *out is set
 * before the first request is accepted: a route may read it.
 */
int server_start(const struct server_config *cfg, const char *cert_pem,
		 const char *key_pem, struct server **out, struct diag *d);

/* Replaces the certificate for new handshakes.  -1 (old one kept) when the
 * PEM does not parse. */
int server_set_certificate(struct server *s, const char *cert_pem,
			   const char *key_pem, struct diag *d);

uint16_t server_port(const struct server *s);

/* Requests in progress right now (headers read, answer not yet sent). */
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
