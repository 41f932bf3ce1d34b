/*
 * kube: a small Kubernetes API client on libcurl (OpenSSL).
 *
 * Reads a kubeconfig (its current context: server, CA, client certificate,
 * token or token file) or the in-cluster service account, and does the two
 * things gpugate needs: GET a JSON document, and stream a watch line by
 * line.  One struct kube per thread (libcurl handles are not shared).
 */
#ifndef GPUGATE_KUBE_H
#define GPUGATE_KUBE_H

#include <stdbool.h>
#include <stddef.h>

struct diag;

struct kube_config {
	char *server;          /* "https://host:port", no trailing slash */
	char *ca_pem;          /* NULL: the system trust store */
	bool insecure;         /* insecure-skip-tls-verify */
	char *cert_pem;        /* client certificate, or NULL */
	char *key_pem;         /* its key */
	char *token;           /* bearer token, or NULL */
	char *token_file;      /* re-read on every connection, or NULL */
	char *source;          /* where it came from, for messages */
};

/* Loads the current context of a kubeconfig file.  Paths inside it are
 * relative to its directory. */
int kube_config_load(const char *path, struct kube_config *out, struct diag *d);

/* The pod's service account: KUBERNETES_SERVICE_HOST/PORT and
 * /var/run/secrets/kubernetes.io/serviceaccount (root overrides the
 * directory, for tests; NULL for the real one). */
int kube_config_in_cluster(const char *root, struct kube_config *out,
			   struct diag *d);

void kube_config_release(struct kube_config *c);

struct kube;

/* The config is copied. */
struct kube *kube_new(const struct kube_config *cfg, struct diag *d);
void kube_free(struct kube *k);

/*
 * GET server+path (path starts with "/", query included).  On a response,
 * returns 0 with *status and the body (caller frees; NUL-terminated).  -1
 * when no response arrived (connection refused, TLS failure, timeout).
 * Bodies are capped at max_body bytes (-1 beyond).
 */
int kube_get(struct kube *k, const char *path, size_t max_body, long *status,
	     char **body, size_t *len, struct diag *d);

/*
 * Streams a watch: on_line() gets every line (one JSON event, without the
 * newline) until the server ends the stream, *stop becomes true, or
 * on_line() returns non-zero.  Returns 0 when the stream ended normally,
 * -1 on a transport error, and the HTTP status when it was not 200.
 * Stalled streams (nothing for idle_seconds) count as transport errors.
 */
int kube_watch(struct kube *k, const char *path, unsigned idle_seconds,
	       int (*on_line)(void *ctx, const char *line, size_t len),
	       void *ctx, volatile bool *stop, struct diag *d);

#endif
