/*
 * metrics: counters and histograms in Prometheus text format.
 *
 * Lock-free: every counter is an atomic, updated from any server thread.
 * Label sets are small and fixed (endpoint x kind x result), so they are
 * plain arrays, not maps.  Gauges that come from elsewhere (quota) are
 * appended at scrape time by a callback.
 */
#ifndef GPUGATE_METRICS_H
#define GPUGATE_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum metrics_endpoint { METRICS_MUTATE, METRICS_VALIDATE, METRICS__ENDPOINTS };
enum metrics_kind { METRICS_POD, METRICS_JOB, METRICS_OTHER, METRICS__KINDS };
enum metrics_result {
	METRICS_ALLOWED,  /* admitted, no rule violated */
	METRICS_DENIED,   /* denied by a rule (enforce) */
	METRICS_WARNED,   /* admitted with a violation (warn mode) */
	METRICS_AUDITED,  /* admitted with a violation (audit mode) */
	METRICS_ERROR,    /* malformed review: 4xx */
	METRICS__RESULTS
};

struct metrics;
struct strbuf;

struct metrics *metrics_new(void);
void metrics_free(struct metrics *m);

void metrics_admission(struct metrics *m, enum metrics_endpoint ep,
		       enum metrics_kind kind, enum metrics_result result,
		       double seconds);
void metrics_policy_reload(struct metrics *m, bool ok);
void metrics_cert_reload(struct metrics *m, bool ok);

/* Extra lines (already in exposition format) appended to a scrape. */
typedef void (*metrics_extra_fn)(void *ctx, struct strbuf *out);

/* The whole exposition; caller frees *out.  -1 when out of memory. */
int metrics_render(struct metrics *m, metrics_extra_fn extra, void *ctx,
		   char **out, size_t *len);

/*
 * gpugate_http_worker_requests_total, one line per server worker: how
 * evenly the connections are spread.  requests[i] is what worker i began
 * (http/server.h, server_worker_requests()), n the number of workers.
 */
void metrics_render_workers(struct strbuf *out, const uint64_t *requests,
			    unsigned n);

#endif
