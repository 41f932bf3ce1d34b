/*
 * prom: the cluster's Prometheus, read through its HTTP query API (SPEC
 * section 10; docs/design/idle-gpus.md; docs/operations.md "Idle GPUs").
 *
 * One instant query at a time, `GET <url>/api/v1/query?query=Q&time=T`,
 * over libcurl: HTTPS with --prometheus-ca (else the system's CAs) or
 * plain HTTP, a bearer token read from --prometheus-bearer-token-file on
 * every query (a projected token is rotated), a time limit and a size
 * limit on the answer.  Only a vector answer is taken; each sample is
 * keyed by its `namespace` and `pod` labels (the DCGM exporter's
 * Kubernetes mode): a sample without both, or whose value is not a finite
 * number, is dropped.
 *
 * Used by the idle controller only (controllers/idle.h), in its thread:
 * never on an admission request's path.  Thread-compatible: one struct
 * prom per thread.
 */
#ifndef GPUGATE_KUBE_PROM_H
#define GPUGATE_KUBE_PROM_H

#include <stddef.h>
#include <stdint.h>

struct diag;

struct prom_config {
	const char *url;               /* "https://prometheus.monitoring:9090" */
	const char *bearer_token_file; /* NULL: no Authorization header */
	const char *ca_file;           /* NULL: the system's CAs */
	unsigned timeout_ms;           /* per query, connect included; 0: 10000 */
	size_t max_body;               /* an answer over this is refused; 0: 8 MiB */
};

#define PROM_TIMEOUT_MS 10000u
#define PROM_MAX_BODY (8u << 20)

/* Why a query gave nothing (the label of gpugate_prometheus_errors_total). */
enum prom_error {
	PROM_OK = 0,
	PROM_UNREACHABLE, /* "unreachable": DNS, connect refused, reset */
	PROM_TIMEOUT,     /* "timeout": no whole answer within timeout_ms */
	PROM_TLS,         /* "tls": the handshake, the CA, the name */
	PROM_AUTH,        /* "auth": 401/403, or the token file unreadable */
	PROM_HTTP,        /* "http": another non-2xx status */
	PROM_TOO_LARGE,   /* "too_large": the answer is over max_body */
	PROM_GARBAGE,     /* "garbage": not JSON, status not success, not a vector */
	PROM_ERROR__COUNT
};
const char *prom_error_name(enum prom_error e);

/* One sample of a vector answer. */
struct prom_sample {
	char *namespace;
	char *pod;
	double value;  /* finite */
};
struct prom_vector {
	struct prom_sample *v;
	size_t n;
};

struct prom;

/* A client for cfg (copied): NULL with a message in d when the URL is not
 * http(s) or curl cannot start.  Nothing is sent yet. */
struct prom *prom_new(const struct prom_config *cfg, struct diag *d);
void prom_free(struct prom *p);

/*
 * The instant query q at time_ms (Unix ms; 0: Prometheus' now) into *out
 * (prom_vector_release() it).  0, or -1 with *why (never PROM_OK) and a
 * message in d ("prometheus: timeout after 10000 ms at
 * https://prom:9090/api/v1/query").
 */
int prom_query(struct prom *p, const char *q, int64_t time_ms, struct prom_vector *out,
	       enum prom_error *why, struct diag *d);

/* The answer body[0, len) of an instant query as a vector (the pure part
 * of prom_query): 0, or -1 (PROM_GARBAGE) with a message in d. */
int prom_parse_vector(const char *body, size_t len, struct prom_vector *out,
		      struct diag *d);
void prom_vector_release(struct prom_vector *v);

#endif
