/*
 * gangs: the series of gang start (SPEC section 9), pushed by its
 * controllers (controllers/gang-start.h) and written at scrape time:
 *
 *   gpugate_gangs_waiting{route,tenant,flavor}  gauge, replaced whole per
 *                                               route by each round
 *   gpugate_gang_start_seconds{route}           histogram
 *   gpugate_gang_regates_total{tenant}          counter
 *
 * One lock (a push is once a round or rarer).  Bounded: at most
 * GANG_ROWS waiting rows per route and GANG_TENANTS regate tenants (more
 * are counted in the last one, "other").
 */
#include "metrics/metrics-int.h"
#include "metrics/metrics.h"

#include "base/strbuf.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define GANG_ROWS 256
#define GANG_TENANTS 256

static const char *const routes[] = {"workload", "podgroup", "gates"};
#define N_ROUTES (sizeof(routes) / sizeof(routes[0]))
/* From release (or first pod) to all pods Running: seconds to an hour. */
static const double gang_buckets[] = {1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600};
#define N_GANG_BUCKETS (sizeof(gang_buckets) / sizeof(gang_buckets[0]))

struct waiting_row {
	char tenant[64], flavor[64];
	uint64_t gangs;
};

struct regates {
	char tenant[64];
	uint64_t count;
};

struct metrics_gangs {
	pthread_mutex_t mu;
	bool on;
	struct waiting_row waiting[N_ROUTES][GANG_ROWS];
	size_t n_waiting[N_ROUTES];
	uint64_t start_bucket[N_ROUTES][N_GANG_BUCKETS]; /* non-cumulative */
	uint64_t start_count[N_ROUTES];
	double start_sum[N_ROUTES];
	struct regates regates[GANG_TENANTS];
	size_t n_regates;
};

struct metrics_gangs *metrics_gangs_new(void)
{
	struct metrics_gangs *g = calloc(1, sizeof(*g));

	if (g)
		pthread_mutex_init(&g->mu, NULL);
	return g;
}

void metrics_gangs_free(struct metrics_gangs *g)
{
	if (!g)
		return;
	pthread_mutex_destroy(&g->mu);
	free(g);
}

static int route_index(const char *route)
{
	for (size_t i = 0; route && i < N_ROUTES; i++)
		if (strcmp(routes[i], route) == 0)
			return (int)i;
	return -1;
}

void metrics_gangs_set_on(struct metrics_gangs *g)
{
	pthread_mutex_lock(&g->mu);
	g->on = true;
	pthread_mutex_unlock(&g->mu);
}

void metrics_gangs_put_waiting(struct metrics_gangs *g, const char *route,
			       const struct metrics_gang_waiting *rows, size_t n)
{
	int r = route_index(route);

	if (r < 0)
		return;
	pthread_mutex_lock(&g->mu);
	g->n_waiting[r] = 0;
	for (size_t i = 0; i < n; i++) {
		char tenant[64], flavor[64];
		size_t k;

		metrics_label_copy(tenant, sizeof(tenant),
				   rows[i].tenant && rows[i].tenant[0] ? rows[i].tenant : "-");
		metrics_label_copy(flavor, sizeof(flavor),
				   rows[i].flavor && rows[i].flavor[0] ? rows[i].flavor : "-");
		for (k = 0; k < g->n_waiting[r]; k++)
			if (strcmp(g->waiting[r][k].tenant, tenant) == 0 &&
			    strcmp(g->waiting[r][k].flavor, flavor) == 0)
				break;
		if (k == g->n_waiting[r]) {
			if (k == GANG_ROWS)
				k--; /* the last row takes the rest */
			else {
				g->n_waiting[r]++;
				memcpy(g->waiting[r][k].tenant, tenant, sizeof(tenant));
				memcpy(g->waiting[r][k].flavor, flavor, sizeof(flavor));
				g->waiting[r][k].gangs = 0;
			}
		}
		g->waiting[r][k].gangs += rows[i].gangs;
	}
	pthread_mutex_unlock(&g->mu);
}

void metrics_gangs_observe(struct metrics_gangs *g, const char *route, double seconds)
{
	int r = route_index(route);
	size_t b = 0;

	if (r < 0)
		return;
	if (seconds < 0)
		seconds = 0;
	while (b < N_GANG_BUCKETS && seconds > gang_buckets[b])
		b++;
	pthread_mutex_lock(&g->mu);
	if (b < N_GANG_BUCKETS)
		g->start_bucket[r][b]++;
	g->start_count[r]++;
	g->start_sum[r] += seconds;
	pthread_mutex_unlock(&g->mu);
}

void metrics_gangs_count_regate(struct metrics_gangs *g, const char *tenant)
{
	char t[64];
	size_t k;

	metrics_label_copy(t, sizeof(t), tenant && tenant[0] ? tenant : "-");
	pthread_mutex_lock(&g->mu);
	for (k = 0; k < g->n_regates; k++)
		if (strcmp(g->regates[k].tenant, t) == 0)
			break;
	if (k == g->n_regates) {
		if (k == GANG_TENANTS) {
			k--;
			strcpy(g->regates[k].tenant, "other");
		} else {
			g->n_regates++;
			memcpy(g->regates[k].tenant, t, sizeof(t));
		}
	}
	g->regates[k].count++;
	pthread_mutex_unlock(&g->mu);
}

void metrics_gangs_render(struct metrics_gangs *g, struct strbuf *sb)
{
	if (!g)
		return;
	pthread_mutex_lock(&g->mu);
	if (!g->on) {
		pthread_mutex_unlock(&g->mu);
		return;
	}
	strbuf_addf(sb, "# HELP gpugate_gangs_waiting Gangs whose pods wait to start "
			"all together, by route, tenant and flavor.\n"
			"# TYPE gpugate_gangs_waiting gauge\n");
	for (size_t r = 0; r < N_ROUTES; r++)
		for (size_t k = 0; k < g->n_waiting[r]; k++)
			strbuf_addf(sb,
				    "gpugate_gangs_waiting{route=\"%s\",tenant=\"%s\","
				    "flavor=\"%s\"} %llu\n",
				    routes[r], g->waiting[r][k].tenant, g->waiting[r][k].flavor,
				    (unsigned long long)g->waiting[r][k].gangs);
	strbuf_addf(sb, "# HELP gpugate_gang_start_seconds From a gang's release (route "
			"gates) or its first pod to all its pods Running.\n"
			"# TYPE gpugate_gang_start_seconds histogram\n");
	for (size_t r = 0; r < N_ROUTES; r++) {
		uint64_t cum = 0;

		for (size_t b = 0; b < N_GANG_BUCKETS; b++) {
			cum += g->start_bucket[r][b];
			strbuf_addf(sb,
				    "gpugate_gang_start_seconds_bucket{route=\"%s\",le=\"%g\"} "
				    "%llu\n",
				    routes[r], gang_buckets[b], (unsigned long long)cum);
		}
		strbuf_addf(sb,
			    "gpugate_gang_start_seconds_bucket{route=\"%s\",le=\"+Inf\"} %llu\n"
			    "gpugate_gang_start_seconds_sum{route=\"%s\"} %.3f\n"
			    "gpugate_gang_start_seconds_count{route=\"%s\"} %llu\n",
			    routes[r], (unsigned long long)g->start_count[r], routes[r],
			    g->start_sum[r], routes[r], (unsigned long long)g->start_count[r]);
	}
	strbuf_addf(sb, "# HELP gpugate_gang_regates_total Released gangs gated again "
			"because their pods were not all Running in time.\n"
			"# TYPE gpugate_gang_regates_total counter\n");
	for (size_t k = 0; k < g->n_regates; k++)
		strbuf_addf(sb, "gpugate_gang_regates_total{tenant=\"%s\"} %llu\n",
			    g->regates[k].tenant, (unsigned long long)g->regates[k].count);
	pthread_mutex_unlock(&g->mu);
}
