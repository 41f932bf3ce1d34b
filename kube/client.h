/*
 * kube client: a small Kubernetes API client on libcurl (OpenSSL).
 *
 * Talks to the API server a struct kube_config (kube/config.h) describes:
 * GET a JSON document, and stream a watch line by line.  One struct kube
 * per thread (libcurl handles are not shared).
 */
#ifndef GPUGATE_KUBE_CLIENT_H
#define GPUGATE_KUBE_CLIENT_H

#include <stdbool.h>
#include <stddef.h>

struct diag;

struct kube_config;
struct kube;

/* The config is copied. */
struct kube *kube_new(const struct kube_config *cfg, struct diag *d);
void kube_free(struct kube *k);

/*
 * GET server+path (path starts with "/", query included).  On a response,
 * returns 0 with *status and the body (caller frees; NUL-terminated).  -1
 * when no response arrived (connection refused, TLS failure, 60 s timeout)
 * or *stop became true (checked about once a second, so that a hanging
 * server never delays shutdown; stop may be NULL).  Bodies are capped at
 * max_body bytes (-1 beyond).
 */
int kube_get(struct kube *k, const char *path, size_t max_body, long *status,
	     char **body, size_t *len, volatile bool *stop, struct diag *d);

/* What a watch calls back, all on the calling thread, with ctx. */
struct kube_stream {
	/* The server answered 200: the stream is open (it may stay idle for
	 * a while before the first event).  May be NULL. */
	void (*on_open)(void *ctx);
	/* Every line of the 200 stream (one JSON event, without the
	 * newline); non-zero ends the stream. */
	int (*on_line)(void *ctx, const char *line, size_t len);
	void *ctx;
};

/*
 * Streams a watch until the server ends it, *stop becomes true, or
 * on_line() returns non-zero.  Returns 0 in those cases, -1 on a transport
 * error (message in d), and the HTTP status when it was not 200 (on_open
 * and on_line are then never called).  Stalled streams (nothing for
 * idle_seconds) count as transport errors.
 */
int kube_watch(struct kube *k, const char *path, unsigned idle_seconds,
	       const struct kube_stream *cb, volatile bool *stop, struct diag *d);

#endif
