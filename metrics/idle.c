/*
 * idle: the series of idle GPUs (SPEC section 10), pushed by the idle
 * controller (controllers/idle.h) once a round and written at scrape time:
 *
 *   gpugate_prometheus_up                       gauge: the last round read
 *       the cluster's Prometheus (1) or could not (0); only when
 *       --prometheus-url is given, once a round ran (a replica that never
 *       led has no answer)
 *   gpugate_prometheus_errors_total{reason}     counter: rounds that could
 *       not read it, by why (kube/prom.h prom_error_name())
 *   gpugate_idle_gpus{tenant,flavor}            gauge: units of the idle
 *       workloads, replaced whole by each round
 *   gpugate_gpu_busy_seconds_total{tenant,flavor}
 *                                               counter: units x seconds
 *       held, weighted by the pods' utilization (the leader's rounds)
 *
 * Written once metrics_idle_on() was called (an idle controller runs).
 * One lock (a push is once a round).  Bounded: at most IDLE_ROWS rows of
 * each tenant-and-flavor family (more are dropped: a policy of more than
 * 1,024 tenant-and-flavor pairs is not one gpugate is built for) and
 * IDLE_REASONS reasons.
 */
#include "metrics/metrics-int.h"
#include "metrics/metrics.h"

#include "base/strbuf.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define IDLE_ROWS 1024
#define IDLE_REASONS 16

struct row {
	char tenant[64], flavor[64];
	double value;
};

struct reason {
	char name[32];
	uint64_t count;
};

struct metrics_idle {
	pthread_mutex_t mu;
	bool on, prom, up, known; /* known: a round said up or down */
	struct reason reasons[IDLE_REASONS];
	size_t n_reasons;
	struct row *idle;    /* IDLE_ROWS */
	size_t n_idle;
	struct row *busy;    /* IDLE_ROWS */
	size_t n_busy;
};

struct metrics_idle *metrics_idle_new(void)
{
	struct metrics_idle *g = calloc(1, sizeof(*g));

	if (!g)
		return NULL;
	g->idle = calloc(IDLE_ROWS, sizeof(*g->idle));
	g->busy = calloc(IDLE_ROWS, sizeof(*g->busy));
	if (!g->idle || !g->busy) {
		metrics_idle_free(g);
		return NULL;
	}
	pthread_mutex_init(&g->mu, NULL);
	return g;
}

void metrics_idle_free(struct metrics_idle *g)
{
	if (!g)
		return;
	if (g->idle && g->busy)
		pthread_mutex_destroy(&g->mu);
	free(g->idle);
	free(g->busy);
	free(g);
}

/* The reason named name, added when new (NULL: no room). */
static struct reason *reason_of(struct metrics_idle *g, const char *name)
{
	char label[32];

	metrics_label_copy(label, sizeof(label), name && name[0] ? name : "other");
	for (size_t i = 0; i < g->n_reasons; i++)
		if (strcmp(g->reasons[i].name, label) == 0)
			return &g->reasons[i];
	if (g->n_reasons == IDLE_REASONS)
		return NULL;
	memcpy(g->reasons[g->n_reasons].name, label, sizeof(label));
	g->reasons[g->n_reasons].count = 0;
	return &g->reasons[g->n_reasons++];
}

static struct row *row_of(struct row *v, size_t *n, const char *tenant, const char *flavor)
{
	char t[64], f[64];

	metrics_label_copy(t, sizeof(t), tenant && tenant[0] ? tenant : "-");
	metrics_label_copy(f, sizeof(f), flavor && flavor[0] ? flavor : "-");
	for (size_t i = 0; i < *n; i++)
		if (strcmp(v[i].tenant, t) == 0 && strcmp(v[i].flavor, f) == 0)
			return &v[i];
	if (*n == IDLE_ROWS)
		return NULL;
	memcpy(v[*n].tenant, t, sizeof(t));
	memcpy(v[*n].flavor, f, sizeof(f));
	v[*n].value = 0;
	return &v[(*n)++];
}

void metrics_idle_set_on(struct metrics_idle *g, bool prom, const char *const *reasons,
			 size_t n)
{
	pthread_mutex_lock(&g->mu);
	g->on = true;
	g->prom = prom;
	for (size_t i = 0; i < n; i++)
		reason_of(g, reasons[i]);
	pthread_mutex_unlock(&g->mu);
}

void metrics_idle_set_up(struct metrics_idle *g, bool up, const char *reason)
{
	struct reason *r;

	pthread_mutex_lock(&g->mu);
	g->up = up;
	g->known = true;
	if (!up && (r = reason_of(g, reason)))
		r->count++;
	pthread_mutex_unlock(&g->mu);
}

void metrics_idle_put_gpus(struct metrics_idle *g, const struct metrics_idle_row *rows,
			   size_t n)
{
	pthread_mutex_lock(&g->mu);
	g->n_idle = 0;
	for (size_t i = 0; i < n; i++) {
		struct row *r = row_of(g->idle, &g->n_idle, rows[i].tenant, rows[i].flavor);

		if (r)
			r->value += rows[i].value;
	}
	pthread_mutex_unlock(&g->mu);
}

void metrics_idle_add_busy(struct metrics_idle *g, const struct metrics_idle_row *rows,
			   size_t n)
{
	pthread_mutex_lock(&g->mu);
	for (size_t i = 0; i < n; i++) {
		struct row *r = row_of(g->busy, &g->n_busy, rows[i].tenant, rows[i].flavor);

		if (r && rows[i].value > 0)
			r->value += rows[i].value;
	}
	pthread_mutex_unlock(&g->mu);
}

void metrics_idle_render(struct metrics_idle *g, struct strbuf *sb)
{
	pthread_mutex_lock(&g->mu);
	if (!g->on)
		goto out;
	if (g->prom && g->known)
		strbuf_addf(sb, "# HELP gpugate_prometheus_up 1 when the idle controller's "
				"last round read the cluster's Prometheus, 0 when it could "
				"not (then nothing is idle).\n"
				"# TYPE gpugate_prometheus_up gauge\n"
				"gpugate_prometheus_up %d\n",
			    g->up ? 1 : 0);
	strbuf_addf(sb, "# HELP gpugate_prometheus_errors_total Rounds of the idle "
			"controller that could not read the cluster's Prometheus, by "
			"reason.\n"
			"# TYPE gpugate_prometheus_errors_total counter\n");
	for (size_t i = 0; i < g->n_reasons; i++)
		strbuf_addf(sb, "gpugate_prometheus_errors_total{reason=\"%s\"} %llu\n",
			    g->reasons[i].name, (unsigned long long)g->reasons[i].count);
	strbuf_addf(sb, "# HELP gpugate_idle_gpus Units held by workloads whose GPUs "
			"are idle (below their rule's threshold for its duration), by "
			"tenant and flavor.\n"
			"# TYPE gpugate_idle_gpus gauge\n");
	for (size_t i = 0; i < g->n_idle; i++)
		strbuf_addf(sb, "gpugate_idle_gpus{tenant=\"%s\",flavor=\"%s\"} %.0f\n",
			    g->idle[i].tenant, g->idle[i].flavor, g->idle[i].value);
	strbuf_addf(sb, "# HELP gpugate_gpu_busy_seconds_total Units x seconds the "
			"tenants' running GPU pods held, weighted by their GPUs' "
			"utilization from Prometheus (no data: nothing), counted by "
			"the leading replica's idle rounds.\n"
			"# TYPE gpugate_gpu_busy_seconds_total counter\n");
	for (size_t i = 0; i < g->n_busy; i++)
		strbuf_addf(sb,
			    "gpugate_gpu_busy_seconds_total{tenant=\"%s\",flavor=\"%s\"} %.3f\n",
			    g->busy[i].tenant, g->busy[i].flavor, g->busy[i].value);
out:
	pthread_mutex_unlock(&g->mu);
}
