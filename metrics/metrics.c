#include "metrics/metrics.h"
#include "metrics/metrics-int.h"

#include "base/procstat.h"
#include "base/strbuf.h"
#include "base/version.h"
#include "policy/capacity.h"
#include "policy/policy.h"
#include "policy/pool.h"
#include "policy/quota.h"
#include "usage/inventory.h"
#include "usage/meter.h"
#include "usage/usage.h"

#include <inttypes.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Admission latency buckets, seconds: the apiserver's default timeout is
 * 10s, and gpugate should answer in well under a millisecond. */
static const double buckets[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025,
				 0.005,  0.01,    0.025,  0.05,  0.1,
				 0.25,   0.5,     1,      2.5,   10};
#define N_BUCKETS (sizeof(buckets) / sizeof(buckets[0]))

struct histogram {
	atomic_uint_fast64_t bucket[N_BUCKETS]; /* non-cumulative */
	atomic_uint_fast64_t count;
	atomic_uint_fast64_t sum_ns;
};

/* Denials by tenant, flavor and rule: the names come from the policy (and
 * reloads), so the set is kept, under a lock (a denial is rare), in a list
 * of at most DENIALS_MAX series; more are counted in the last, "other". */
#define DENIALS_MAX 1024
struct denial {
	char tenant[64], flavor[64], rule[32];
	uint64_t count;
};

struct metrics {
	pthread_mutex_t denials_mu;
	struct denial *denials;
	size_t n_denials;
	atomic_uint_fast64_t requests[METRICS__ENDPOINTS][METRICS__KINDS]
				     [METRICS__RESULTS];
	struct histogram duration[METRICS__ENDPOINTS];
	atomic_uint_fast64_t policy_reloads[2]; /* [ok] */
	atomic_uint_fast64_t cert_reloads[2];
	/* The reclaimer's, under their lock (a step is rare), so that a
	 * release's count and wait are seen together. */
	atomic_bool reclaims_on;
	pthread_mutex_t reclaims_mu;
	uint64_t reclaims[METRICS__RECLAIMS];
	double reclaim_wait_sum;
	uint64_t reclaim_waits;
	/* The route auto picks, + 1 (0: never pushed). */
	atomic_int gang_route;
	/* The template keeper's: served + 1 (0: never pushed), and its
	 * counts, pushed together. */
	pthread_mutex_t dra_mu;
	int dra_served;
	uint64_t dra_templates[3];
	struct metrics_gangs *gangs; /* gang start's (metrics/gangs.c) */
	struct metrics_idle *idle;   /* idle GPUs' (metrics/idle.c) */
	/* The health controller's steps (metrics/health.c renders). */
	atomic_bool health_on;
	atomic_uint_fast64_t health_steps[METRICS__HEALTH_STEPS];
};

static const char *const endpoint_names[] = {"mutate", "validate"};
static const char *const kind_names[] = {"Pod", "Job", "other"};
static const char *const result_names[] = {"allowed", "denied", "warned",
					   "audited", "error"};

struct metrics *metrics_new(void)
{
	/* calloc zeroes the atomics: valid initial state for C11 atomics of
	 * integer type on every platform gpugate builds for. */
	struct metrics *m = calloc(1, sizeof(struct metrics));

	if (m) {
		pthread_mutex_init(&m->denials_mu, NULL);
		pthread_mutex_init(&m->reclaims_mu, NULL);
		pthread_mutex_init(&m->dra_mu, NULL);
		m->gangs = metrics_gangs_new();
		m->idle = metrics_idle_new();
		if (!m->gangs || !m->idle) {
			metrics_free(m);
			return NULL;
		}
	}
	return m;
}

void metrics_free(struct metrics *m)
{
	if (!m)
		return;
	pthread_mutex_destroy(&m->denials_mu);
	pthread_mutex_destroy(&m->reclaims_mu);
	pthread_mutex_destroy(&m->dra_mu);
	metrics_gangs_free(m->gangs);
	metrics_idle_free(m->idle);
	free(m->denials);
	free(m);
}

void metrics_idle_on(struct metrics *m, bool prom, const char *const *reasons, size_t n)
{
	if (m)
		metrics_idle_set_on(m->idle, prom, reasons, n);
}

void metrics_prometheus(struct metrics *m, bool up, const char *reason)
{
	if (m)
		metrics_idle_set_up(m->idle, up, reason);
}

void metrics_idle_gpus(struct metrics *m, const struct metrics_idle_row *rows, size_t n)
{
	if (m)
		metrics_idle_put_gpus(m->idle, rows, n);
}

void metrics_gpu_busy(struct metrics *m, const struct metrics_idle_row *rows, size_t n)
{
	if (m)
		metrics_idle_add_busy(m->idle, rows, n);
}

void metrics_denial(struct metrics *m, const char *tenant, const char *flavor,
		    const char *rule)
{
	struct denial d = {.count = 0};
	size_t i;

	metrics_label_copy(d.tenant, sizeof(d.tenant), tenant && tenant[0] ? tenant : "-");
	metrics_label_copy(d.flavor, sizeof(d.flavor), flavor && flavor[0] ? flavor : "-");
	metrics_label_copy(d.rule, sizeof(d.rule), rule && rule[0] ? rule : "-");
	pthread_mutex_lock(&m->denials_mu);
	if (!m->denials)
		m->denials = calloc(DENIALS_MAX, sizeof(*m->denials));
	for (i = 0; m->denials && i < m->n_denials; i++)
		if (strcmp(m->denials[i].tenant, d.tenant) == 0 &&
		    strcmp(m->denials[i].flavor, d.flavor) == 0 &&
		    strcmp(m->denials[i].rule, d.rule) == 0)
			break;
	if (m->denials && i == m->n_denials) {
		/* A new series; the last place is the one for all the rest. */
		if (m->n_denials == DENIALS_MAX - 1) {
			snprintf(d.tenant, sizeof(d.tenant), "other");
			snprintf(d.flavor, sizeof(d.flavor), "other");
			snprintf(d.rule, sizeof(d.rule), "other");
		}
		if (i < DENIALS_MAX) {
			m->denials[i] = d;
			m->n_denials++;
		} else {
			i = DENIALS_MAX - 1;
		}
	}
	if (m->denials)
		m->denials[i].count++;
	pthread_mutex_unlock(&m->denials_mu);
}

void metrics_admission(struct metrics *m, enum metrics_endpoint ep,
		       enum metrics_kind kind, enum metrics_result result,
		       double seconds)
{
	struct histogram *h = &m->duration[ep];
	size_t b = 0;

	atomic_fetch_add_explicit(&m->requests[ep][kind][result], 1,
				  memory_order_relaxed);
	while (b < N_BUCKETS && seconds > buckets[b])
		b++;
	if (b < N_BUCKETS)
		atomic_fetch_add_explicit(&h->bucket[b], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->sum_ns,
				  (uint_fast64_t)(seconds > 0 ? seconds * 1e9 : 0),
				  memory_order_relaxed);
}

void metrics_policy_reload(struct metrics *m, bool ok)
{
	atomic_fetch_add_explicit(&m->policy_reloads[ok], 1, memory_order_relaxed);
}

void metrics_cert_reload(struct metrics *m, bool ok)
{
	atomic_fetch_add_explicit(&m->cert_reloads[ok], 1, memory_order_relaxed);
}

void metrics_gangs_on(struct metrics *m)
{
	if (m)
		metrics_gangs_set_on(m->gangs);
}

void metrics_gangs_waiting(struct metrics *m, const char *route,
			   const struct metrics_gang_waiting *rows, size_t n)
{
	if (m)
		metrics_gangs_put_waiting(m->gangs, route, rows, n);
}

void metrics_gang_started(struct metrics *m, const char *route, double seconds)
{
	if (m)
		metrics_gangs_observe(m->gangs, route, seconds);
}

void metrics_gang_regated(struct metrics *m, const char *tenant)
{
	if (m)
		metrics_gangs_count_regate(m->gangs, tenant);
}

void metrics_health_on(struct metrics *m)
{
	if (m)
		atomic_store(&m->health_on, true);
}

void metrics_health_step(struct metrics *m, enum metrics_health_step step)
{
	if (m && step < METRICS__HEALTH_STEPS)
		atomic_fetch_add(&m->health_steps[step], 1);
}

void metrics_reclaims_on(struct metrics *m)
{
	if (m)
		atomic_store(&m->reclaims_on, true);
}

void metrics_reclaim(struct metrics *m, enum metrics_reclaim step)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->reclaims_mu);
	m->reclaims[step]++;
	pthread_mutex_unlock(&m->reclaims_mu);
}

void metrics_reclaim_released(struct metrics *m, bool reported, double wait_seconds)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->reclaims_mu);
	m->reclaims[reported ? METRICS_RECLAIM_CHECKPOINTED : METRICS_RECLAIM_TIMEOUT]++;
	m->reclaim_wait_sum += wait_seconds;
	m->reclaim_waits++;
	pthread_mutex_unlock(&m->reclaims_mu);
}

void metrics_gang_route(struct metrics *m, enum gang_route r)
{
	if (m)
		atomic_store(&m->gang_route, (int)r + 1);
}

static void render_gang_route(struct strbuf *sb, struct metrics *m)
{
	static const enum gang_route routes[] = {GANG_WORKLOAD, GANG_PODGROUP,
						 GANG_GATES};
	int now = atomic_load(&m->gang_route);

	if (!now)
		return;
	strbuf_addf(sb, "# HELP gpugate_gang_route The route of gang start that "
			"settings.gangStart auto picks from what the cluster "
			"serves (1), the others 0.\n"
			"# TYPE gpugate_gang_route gauge\n");
	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++)
		strbuf_addf(sb, "gpugate_gang_route{route=\"%s\"} %d\n",
			    gang_route_name(routes[i]), (int)routes[i] + 1 == now);
}

void metrics_dra_templates(struct metrics *m, bool served, size_t kept, size_t taken,
			   size_t garbage)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->dra_mu);
	m->dra_served = served ? 2 : 1;
	m->dra_templates[0] = kept;
	m->dra_templates[1] = taken;
	m->dra_templates[2] = garbage;
	pthread_mutex_unlock(&m->dra_mu);
}

static void render_dra_templates(struct strbuf *sb, struct metrics *m)
{
	static const char *const states[] = {"kept", "taken", "garbage"};
	uint64_t n[3];
	int served;

	pthread_mutex_lock(&m->dra_mu);
	served = m->dra_served;
	memcpy(n, m->dra_templates, sizeof(n));
	pthread_mutex_unlock(&m->dra_mu);
	if (!served)
		return;
	strbuf_addf(sb, "# HELP gpugate_dra_templates_served Whether the cluster serves "
			"resource.k8s.io/v1 resourceclaimtemplates (1) or not (0).\n"
			"# TYPE gpugate_dra_templates_served gauge\n"
			"gpugate_dra_templates_served %d\n", served - 1);
	if (served == 1)
		return;
	strbuf_addf(sb, "# HELP gpugate_dra_templates The claim templates of DRA "
			"classes: kept (gpugate's), taken (gpugate's names held by "
			"templates that are not gpugate's), garbage (gpugate's, no "
			"longer wanted, not deleted yet).\n"
			"# TYPE gpugate_dra_templates gauge\n");
	for (size_t i = 0; i < 3; i++)
		strbuf_addf(sb, "gpugate_dra_templates{state=\"%s\"} %llu\n", states[i],
			    (unsigned long long)n[i]);
}

static uint64_t load(atomic_uint_fast64_t *v)
{
	return (uint64_t)atomic_load_explicit(v, memory_order_relaxed);
}

/* One gauge per quota entry of the policy: its nominal, or what is used. */
static void render_quota(struct strbuf *sb, const struct metrics_state *st,
			 const char *name, const char *help, bool used)
{
	const struct policy *p = st->policy;

	strbuf_addf(sb, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name);
	for (size_t t = 0; p && t < policy_tenant_count(p); t++) {
		const struct policy_tenant *te = policy_tenant_at(p, t);

		for (size_t q = 0; q < te->n_quota; q++) {
			const char *flavor = te->quota[q].flavor->name;

			strbuf_addf(sb, "%s{tenant=\"%s\",flavor=\"%s\"} %" PRId64 "\n",
				    name, te->name, flavor,
				    used ? usage_used(st->usage, te->name, flavor)
					 : te->quota[q].nominal);
		}
	}
}

/* Quota per tenant and flavor, the usage store, the feed, the certificate. */
struct summaries {
	struct pool_summary *v;
	size_t n, cap;
};

/* One gauge per flavor of the summaries: value at offset off. */
static void pool_gauge(struct strbuf *sb, const struct summaries *s, const char *name,
		       const char *help, size_t off)
{
	strbuf_addf(sb, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name);
	for (size_t i = 0; i < s->n; i++)
		strbuf_addf(sb, "%s{flavor=\"%s\"} %lld\n", name, s->v[i].flavor->name,
			    (long long)*(const int64_t *)((const char *)&s->v[i] + off));
}

/*
 * Effective capacity (policy/capacity.h) of each flavor of the summaries:
 * usable, promised and unbacked units, and per tenant with a quota entry
 * for the flavor what of its nominal is not backed (0 while no node of
 * the flavor was seen: unknown is never unbacked).
 */
static void render_capacity(struct strbuf *sb, const struct metrics_state *st,
			    const struct summaries *s)
{
	static const char *const names[] = {"usable", "promised", "unbacked"};
	static const char *const helps[] = {
		"Allocatable units of the flavor's usable nodes: what backs its "
		"quota now.",
		"The tenants' nominal quotas of the flavor, summed: what the policy "
		"promises.",
		"Promised minus usable, when more is promised than the usable nodes "
		"hold (0 when no node of the flavor was ever seen).",
	};
	size_t nt = policy_tenant_count(st->policy), n;
	struct capacity_flavor *cf = calloc(s->n + 1, sizeof(*cf));
	struct capacity_tenant *ct = calloc(nt + 1, sizeof(*ct));
	struct usage_names un;
	struct usage_view view;

	if (!cf || !ct)
		goto out;
	usage_names_view(&un, st->policy, st->usage, &view);
	for (size_t i = 0; i < s->n; i++)
		capacity_of(st->policy, s->v[i].flavor, &s->v[i], &view, &cf[i], NULL, NULL);
	for (size_t k = 0; k < 3; k++) {
		strbuf_addf(sb, "# HELP gpugate_capacity_%s %s\n# TYPE gpugate_capacity_%s "
				"gauge\n",
			    names[k], helps[k], names[k]);
		for (size_t i = 0; i < s->n; i++)
			strbuf_addf(sb, "gpugate_capacity_%s{flavor=\"%s\"} %" PRId64 "\n",
				    names[k], s->v[i].flavor->name,
				    k == 0 ? cf[i].usable
					   : k == 1 ? cf[i].promised : cf[i].unbacked);
	}
	strbuf_addf(sb, "# HELP gpugate_tenant_unbacked Units of the tenant's nominal "
			"quota of the flavor it could not get now, even with every free "
			"usable unit and every unit its cohort borrows.\n"
			"# TYPE gpugate_tenant_unbacked gauge\n");
	for (size_t i = 0; i < s->n; i++) {
		capacity_of(st->policy, s->v[i].flavor, &s->v[i], &view, &cf[i], ct, &n);
		for (size_t t = 0; t < n; t++)
			strbuf_addf(sb, "gpugate_tenant_unbacked{tenant=\"%s\",flavor=\"%s\"} "
					"%" PRId64 "\n",
				    ct[t].tenant->name, s->v[i].flavor->name, ct[t].short_by);
	}
out:
	free(cf);
	free(ct);
}

/* DRA flavors only (the others have no devices: their output stays as
 * it was): the tainted devices of their usable nodes. */
static void render_devices_tainted(struct strbuf *sb, const struct summaries *s)
{
	bool head = false;

	for (size_t i = 0; i < s->n; i++) {
		if (!s->v[i].flavor->dra)
			continue;
		if (!head)
			strbuf_addf(sb, "# HELP gpugate_pool_devices_tainted DRA flavors: "
					"devices of the usable nodes with a taint (the "
					"ResourceSlice's or a DeviceTaintRule's, NoSchedule "
					"or NoExecute) the flavor does not tolerate: out of "
					"allocatable.\n"
					"# TYPE gpugate_pool_devices_tainted gauge\n");
		head = true;
		strbuf_addf(sb, "gpugate_pool_devices_tainted{flavor=\"%s\"} %" PRId64 "\n",
			    s->v[i].flavor->name, s->v[i].devices_tainted);
	}
}

/* DRA flavors only: the devices of their usable nodes that no claim
 * holds and whose counters held devices used up (policy/pool.h
 * pool_device_blocked). */
static void render_devices_blocked(struct strbuf *sb, const struct summaries *s)
{
	bool head = false;

	for (size_t i = 0; i < s->n; i++) {
		if (!s->v[i].flavor->dra)
			continue;
		if (!head)
			strbuf_addf(sb, "# HELP gpugate_pool_devices_blocked DRA flavors: "
					"devices of the usable nodes that no claim holds "
					"and that cannot be had for their counters (a MIG "
					"partition of a held GPU, the GPU of a held "
					"partition): in allocatable, out of free.\n"
					"# TYPE gpugate_pool_devices_blocked gauge\n");
		head = true;
		strbuf_addf(sb, "gpugate_pool_devices_blocked{flavor=\"%s\"} %" PRId64 "\n",
			    s->v[i].flavor->name, s->v[i].devices_blocked);
	}
}

static void render_pool(struct strbuf *sb, const struct metrics_state *st)
{
	struct summaries s = {.cap = policy_flavor_count(st->policy)};
	bool synced = inventory_synced(st->inventory);

	strbuf_addf(sb, "# HELP gpugate_pool_synced 1 once Nodes and Pods were "
			"listed: the pool is known.\n"
			"# TYPE gpugate_pool_synced gauge\n"
			"gpugate_pool_synced %d\n",
		    synced);
	if (policy_has_dra_flavor(st->policy))
		strbuf_addf(sb, "# HELP gpugate_pool_dra_known 1 once ResourceSlices, "
				"DeviceTaintRules, ResourceClaims and DeviceClasses were "
				"each listed (or found not served) and ResourceSlices are "
				"served: the pool of DRA flavors is known.\n"
				"# TYPE gpugate_pool_dra_known gauge\n"
				"gpugate_pool_dra_known %d\n",
			    inventory_dra_known(st->inventory));
	if (!synced || !s.cap)
		return;
	s.v = calloc(s.cap, sizeof(*s.v));
	{
		long n = s.v ? inventory_summaries(st->inventory, st->policy, s.v, s.cap)
			     : -1;

		if (n < 0) {
			free(s.v);
			return;
		}
		s.n = (size_t)n;
	}
	strbuf_addf(sb, "# HELP gpugate_pool_nodes Nodes of each flavor, by state: "
			"usable, or why excluded.\n"
			"# TYPE gpugate_pool_nodes gauge\n");
	for (size_t i = 0; i < s.n; i++)
		for (int e = POOL_USABLE; e <= POOL_TAINTED; e++)
			strbuf_addf(sb, "gpugate_pool_nodes{flavor=\"%s\",state=\"%s\"} "
					"%zu\n",
				    s.v[i].flavor->name,
				    pool_exclusion_name((enum pool_exclusion)e),
				    s.v[i].nodes[e]);
	pool_gauge(sb, &s, "gpugate_pool_capacity_units",
		   "Capacity of every node of the flavor, in units of its resource.",
		   offsetof(struct pool_summary, capacity));
	pool_gauge(sb, &s, "gpugate_pool_allocatable_units",
		   "Allocatable units of the usable nodes (a device plugin lowers it "
		   "for unhealthy devices).",
		   offsetof(struct pool_summary, allocatable));
	pool_gauge(sb, &s, "gpugate_pool_allocated_units",
		   "Units that bound pods which are not Succeeded or Failed ask for on "
		   "the usable nodes (Terminating ones included).",
		   offsetof(struct pool_summary, allocated));
	pool_gauge(sb, &s, "gpugate_pool_free_units",
		   "Allocatable minus allocated, summed over the usable nodes.",
		   offsetof(struct pool_summary, free));
	pool_gauge(sb, &s, "gpugate_pool_largest_free_units",
		   "The most units free on one usable node.",
		   offsetof(struct pool_summary, largest_free));
	pool_gauge(sb, &s, "gpugate_pool_excluded_units",
		   "Capacity of the excluded nodes (health, NotReady, cordoned, "
		   "tainted).",
		   offsetof(struct pool_summary, excluded));
	render_devices_tainted(sb, &s);
	render_devices_blocked(sb, &s);
	render_capacity(sb, st, &s);
	free(s.v);
}

static void meter_line(void *ctx, const char *tenant, const char *flavor,
		       double seconds)
{
	strbuf_addf(ctx, "gpugate_gpu_seconds_total{tenant=\"%s\",flavor=\"%s\"} %.0f\n",
		    tenant, flavor, seconds);
}

/* The process_* families every Prometheus client library exports on
 * Linux, same names, types and units. */
static void render_process(struct strbuf *sb, const struct procstat *ps)
{
	strbuf_addf(sb, "# HELP process_cpu_seconds_total Total user and system CPU "
			"time spent in seconds.\n"
			"# TYPE process_cpu_seconds_total counter\n"
			"process_cpu_seconds_total %.2f\n"
			"# HELP process_resident_memory_bytes Resident memory size in "
			"bytes.\n"
			"# TYPE process_resident_memory_bytes gauge\n"
			"process_resident_memory_bytes %" PRIu64 "\n"
			"# HELP process_virtual_memory_bytes Virtual memory size in "
			"bytes.\n"
			"# TYPE process_virtual_memory_bytes gauge\n"
			"process_virtual_memory_bytes %" PRIu64 "\n"
			"# HELP process_open_fds Number of open file descriptors.\n"
			"# TYPE process_open_fds gauge\n"
			"process_open_fds %" PRIu64 "\n"
			"# HELP process_max_fds Maximum number of open file "
			"descriptors.\n"
			"# TYPE process_max_fds gauge\n",
		    ps->cpu_seconds, ps->resident_bytes, ps->virtual_bytes,
		    ps->open_fds);
	if (ps->max_fds == PROCSTAT_UNLIMITED)
		strbuf_addf(sb, "process_max_fds +Inf\n");
	else
		strbuf_addf(sb, "process_max_fds %" PRIu64 "\n", ps->max_fds);
	strbuf_addf(sb, "# HELP process_start_time_seconds Start time of the process "
			"since unix epoch in seconds.\n"
			"# TYPE process_start_time_seconds gauge\n"
			"process_start_time_seconds %.2f\n",
		    ps->start_time_seconds);
}

static void render_state(struct strbuf *sb, struct metrics *m,
			 const struct metrics_state *st)
{
	render_quota(sb, st, "gpugate_quota_nominal",
		     "Nominal quota, in units of the flavor's resource.", false);
	render_quota(sb, st, "gpugate_quota_used",
		     "Quota in use (reserved or observed), in units of the "
		     "flavor's resource.",
		     true);
	strbuf_addf(sb, "# HELP gpugate_ledger_entries Workloads holding quota.\n"
			"# TYPE gpugate_ledger_entries gauge\n"
			"gpugate_ledger_entries %zu\n",
		    usage_entries(st->usage));
	if (st->inventory && st->policy)
		render_pool(sb, st);
	{
		uint64_t steps[METRICS__HEALTH_STEPS];
		struct timespec ts;
		bool pool = st->inventory && st->policy && inventory_synced(st->inventory);

		for (int i = 0; i < METRICS__HEALTH_STEPS; i++)
			steps[i] = atomic_load(&m->health_steps[i]);
		clock_gettime(CLOCK_REALTIME, &ts);
		metrics_health_render(sb, pool ? st->policy : NULL, pool ? st->inventory : NULL,
				      (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000,
				      atomic_load(&m->health_on), steps);
	}
	if (st->meter) {
		strbuf_addf(sb, "# HELP gpugate_gpu_seconds_total Units x seconds that "
				"tenants' GPU pods ran (from status.startTime to the end "
				"of their containers, or until gone), since this process "
				"started.\n"
				"# TYPE gpugate_gpu_seconds_total counter\n");
		meter_foreach(st->meter, meter_line, sb);
	}
	if (atomic_load(&m->reclaims_on)) {
		uint64_t rs[METRICS__RECLAIMS];
		double wait_sum;
		uint64_t waits;

		pthread_mutex_lock(&m->reclaims_mu);
		memcpy(rs, m->reclaims, sizeof(rs));
		wait_sum = m->reclaim_wait_sum;
		waits = m->reclaim_waits;
		pthread_mutex_unlock(&m->reclaims_mu);
		strbuf_addf(sb, "# HELP gpugate_reclaims_total Steps of reclaims of lent "
				"GPUs, by result: signalled (checkpoint requested), "
				"checkpointed or timeout (released after the workload's "
				"report, or without it), abandoned (no longer needed), "
				"deleted (a pod past its grace, a PodDisruptionBudget "
				"or a long grace), resumed, failed (a write the API "
				"refused).\n"
				"# TYPE gpugate_reclaims_total counter\n"
				"gpugate_reclaims_total{result=\"signalled\"} %llu\n"
				"gpugate_reclaims_total{result=\"checkpointed\"} %llu\n"
				"gpugate_reclaims_total{result=\"timeout\"} %llu\n"
				"gpugate_reclaims_total{result=\"abandoned\"} %llu\n"
				"gpugate_reclaims_total{result=\"deleted\"} %llu\n"
				"gpugate_reclaims_total{result=\"resumed\"} %llu\n"
				"gpugate_reclaims_total{result=\"failed\"} %llu\n"
				"# HELP gpugate_checkpoint_wait_seconds From the checkpoint "
				"request to the release of a reclaimed workload.\n"
				"# TYPE gpugate_checkpoint_wait_seconds summary\n"
				"gpugate_checkpoint_wait_seconds_sum %.3f\n"
				"gpugate_checkpoint_wait_seconds_count %llu\n",
			    (unsigned long long)rs[METRICS_RECLAIM_SIGNALLED],
			    (unsigned long long)rs[METRICS_RECLAIM_CHECKPOINTED],
			    (unsigned long long)rs[METRICS_RECLAIM_TIMEOUT],
			    (unsigned long long)rs[METRICS_RECLAIM_ABANDONED],
			    (unsigned long long)rs[METRICS_RECLAIM_DELETED],
			    (unsigned long long)rs[METRICS_RECLAIM_RESUMED],
			    (unsigned long long)rs[METRICS_RECLAIM_FAILED], wait_sum,
			    (unsigned long long)waits);
	}
	metrics_gangs_render(m->gangs, sb);
	if (st->api)
		strbuf_addf(sb, "# HELP gpugate_kube_watch_connected 1 while the "
				"Pod and Job watches are connected.\n"
				"# TYPE gpugate_kube_watch_connected gauge\n"
				"gpugate_kube_watch_connected %d\n"
				"# HELP gpugate_kube_synced 1 once usage was listed "
				"from the API.\n"
				"# TYPE gpugate_kube_synced gauge\n"
				"gpugate_kube_synced %d\n",
			    st->api_connected, st->api_synced);
	if (st->quota_leader)
		strbuf_addf(sb, "# HELP gpugate_quota_leader 1 while this replica "
				"decides quota reservations (--usage-store leader: it "
				"holds Lease gpugate-memory and its start gate is open; "
				"memory: it holds gpugate-memory; shared and embedded: "
				"always).\n"
				"# TYPE gpugate_quota_leader gauge\n"
				"gpugate_quota_leader %d\n",
			    st->quota_deciding);
	if (st->quota_forwards)
		strbuf_addf(sb, "# HELP gpugate_quota_forwards_total Quota decisions this "
				"replica forwarded to the leader, by result (failed: no "
				"answer in time, refused or not understood; denied).\n"
				"# TYPE gpugate_quota_forwards_total counter\n"
				"gpugate_quota_forwards_total{result=\"answered\"} %llu\n"
				"gpugate_quota_forwards_total{result=\"failed\"} %llu\n"
				"# HELP gpugate_quota_forward_seconds The round trip of "
				"the forwards the leader answered.\n"
				"# TYPE gpugate_quota_forward_seconds summary\n"
				"gpugate_quota_forward_seconds_sum %.6f\n"
				"gpugate_quota_forward_seconds_count %llu\n",
			    (unsigned long long)st->forwards_answered,
			    (unsigned long long)st->forwards_failed, st->forward_seconds_sum,
			    (unsigned long long)st->forwards_answered);
	/* A Unix time is a ..._timestamp_seconds (Prometheus naming); the
	 * old name stays for one release (docs/operations.md, "Metrics"). */
	strbuf_addf(sb, "# HELP gpugate_certificate_expiry_timestamp_seconds Unix "
			"time at which the serving certificate expires.\n"
			"# TYPE gpugate_certificate_expiry_timestamp_seconds gauge\n"
			"gpugate_certificate_expiry_timestamp_seconds %lld\n"
			"# HELP gpugate_certificate_expiry_seconds Deprecated: "
			"gpugate_certificate_expiry_timestamp_seconds.\n"
			"# TYPE gpugate_certificate_expiry_seconds gauge\n"
			"gpugate_certificate_expiry_seconds %lld\n"
			"# HELP gpugate_ready 1 while /readyz answers 200 (policy "
			"loaded, certificate valid, usage synced).\n"
			"# TYPE gpugate_ready gauge\n"
			"gpugate_ready %d\n",
		    st->cert_not_after, st->cert_not_after, st->ready);
	if (st->process)
		render_process(sb, st->process);
}

int metrics_render(struct metrics *m, const struct metrics_state *st,
		   char **out, size_t *len)
{
	char version[64], revision[64];
	struct strbuf sb;

	strbuf_init(&sb, 64u << 20);
	metrics_label_copy(version, sizeof(version), version_string());
	metrics_label_copy(revision, sizeof(revision), version_revision());
	strbuf_addf(&sb, "# HELP gpugate_build_info The version and source revision "
			 "of this build (always 1).\n"
			 "# TYPE gpugate_build_info gauge\n"
			 "gpugate_build_info{version=\"%s\",revision=\"%s\"} 1\n",
		    version, revision);
	strbuf_addf(&sb, "# HELP gpugate_admission_requests_total Admission "
			 "reviews answered, by endpoint, kind and result.\n"
			 "# TYPE gpugate_admission_requests_total counter\n");
	for (int e = 0; e < METRICS__ENDPOINTS; e++)
		for (int k = 0; k < METRICS__KINDS; k++)
			for (int r = 0; r < METRICS__RESULTS; r++)
				strbuf_addf(&sb,
					    "gpugate_admission_requests_total{endpoint="
					    "\"%s\",kind=\"%s\",result=\"%s\"} %llu\n",
					    endpoint_names[e], kind_names[k],
					    result_names[r],
					    (unsigned long long)load(&m->requests[e][k][r]));
	strbuf_addf(&sb, "# HELP gpugate_denials_total Admission requests denied, "
			 "by tenant, flavor and rule (\"-\": none).\n"
			 "# TYPE gpugate_denials_total counter\n");
	pthread_mutex_lock(&m->denials_mu);
	for (size_t i = 0; i < m->n_denials; i++)
		strbuf_addf(&sb,
			    "gpugate_denials_total{tenant=\"%s\",flavor=\"%s\",rule=\"%s\"} "
			    "%llu\n",
			    m->denials[i].tenant, m->denials[i].flavor, m->denials[i].rule,
			    (unsigned long long)m->denials[i].count);
	pthread_mutex_unlock(&m->denials_mu);
	strbuf_addf(&sb, "# HELP gpugate_admission_duration_seconds Time to "
			 "answer one review, from the full body to the response.\n"
			 "# TYPE gpugate_admission_duration_seconds histogram\n");
	for (int e = 0; e < METRICS__ENDPOINTS; e++) {
		struct histogram *h = &m->duration[e];
		uint64_t cum = 0;

		for (size_t b = 0; b < N_BUCKETS; b++) {
			cum += load(&h->bucket[b]);
			strbuf_addf(&sb,
				    "gpugate_admission_duration_seconds_bucket{"
				    "endpoint=\"%s\",le=\"%g\"} %llu\n",
				    endpoint_names[e], buckets[b],
				    (unsigned long long)cum);
		}
		strbuf_addf(&sb,
			    "gpugate_admission_duration_seconds_bucket{endpoint="
			    "\"%s\",le=\"+Inf\"} %llu\n"
			    "gpugate_admission_duration_seconds_sum{endpoint=\"%s\"} "
			    "%.9f\n"
			    "gpugate_admission_duration_seconds_count{endpoint="
			    "\"%s\"} %llu\n",
			    endpoint_names[e], (unsigned long long)load(&h->count),
			    endpoint_names[e], (double)load(&h->sum_ns) / 1e9,
			    endpoint_names[e], (unsigned long long)load(&h->count));
	}
	strbuf_addf(&sb,
		    "# HELP gpugate_policy_reloads_total Policy file reloads.\n"
		    "# TYPE gpugate_policy_reloads_total counter\n"
		    "gpugate_policy_reloads_total{result=\"success\"} %llu\n"
		    "gpugate_policy_reloads_total{result=\"failure\"} %llu\n"
		    "# HELP gpugate_certificate_reloads_total TLS certificate "
		    "reloads.\n"
		    "# TYPE gpugate_certificate_reloads_total counter\n"
		    "gpugate_certificate_reloads_total{result=\"success\"} %llu\n"
		    "gpugate_certificate_reloads_total{result=\"failure\"} %llu\n",
		    (unsigned long long)load(&m->policy_reloads[1]),
		    (unsigned long long)load(&m->policy_reloads[0]),
		    (unsigned long long)load(&m->cert_reloads[1]),
		    (unsigned long long)load(&m->cert_reloads[0]));
	render_gang_route(&sb, m);
	render_dra_templates(&sb, m);
	metrics_idle_render(m->idle, &sb);
	if (st) {
		render_state(&sb, m, st);
		if (st->workers)
			metrics_render_workers(&sb, st->worker_requests,
					       st->workers);
	}
	if (strbuf_failed(&sb)) {
		strbuf_release(&sb);
		return -1;
	}
	*out = strbuf_take(&sb, len);
	return *out ? 0 : -1;
}

void metrics_render_workers(struct strbuf *out, const uint64_t *requests,
			    unsigned n)
{
	strbuf_addf(out,
		    "# HELP gpugate_http_worker_requests_total HTTP requests "
		    "begun on each server worker thread (workers numbered in "
		    "the order they first served).\n"
		    "# TYPE gpugate_http_worker_requests_total counter\n");
	for (unsigned i = 0; i < n; i++)
		strbuf_addf(out,
			    "gpugate_http_worker_requests_total{worker=\"%u\"} "
			    "%" PRIu64 "\n",
			    i, requests[i]);
}
