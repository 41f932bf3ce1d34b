/*
 * health: the series of the health loop's nodes (policy/health.h,
 * controllers/health.h), written at scrape time:
 *
 *   gpugate_nodes_out_seconds{flavor}            gauge: how long the node
 *       of the flavor out longest has been out, by gpugate's record (its
 *       o=); 0 when none
 *   gpugate_node_out_since_seconds{flavor,node,state}
 *                                                gauge: Unix time the node
 *       went out; state health (its signal on) or validating; one series
 *       per node carrying the record
 *   gpugate_health_steps_total{step}             counter, the controller's
 *       steps (mark_out, validate, return, fix_taint, failed), once a
 *       health controller runs
 *
 * The gauges come from the Nodes (the record is on them), so any replica
 * shows them, leader or not.  Bounded: at most NODES_MAX node series (a
 * fleet that loses more at once has a bigger problem than a gauge).
 */
#include "metrics/metrics-int.h"
#include "metrics/metrics.h"

#include "base/strbuf.h"
#include "policy/health.h"
#include "policy/policy.h"
#include "policy/pool.h"
#include "usage/inventory.h"

#include <stdlib.h>
#include <string.h>

#define NODES_MAX 1024

struct out_node {
	size_t flavor;          /* index in the policy */
	char node[254];
	bool validating;
	int64_t out_ms;
};

struct outs {
	struct out_node *v;
	size_t n;
};

static void collect(void *ctx, const struct pool_node *n, const struct policy_flavor *f,
		    enum pool_exclusion e, const char *why)
{
	struct outs *o = ctx;
	struct health_marks m;
	struct out_node *x;

	(void)why;
	if (!f || !n->health_record || o->n == NODES_MAX)
		return;
	health_marks_read(n, &m);
	if (!m.has_record)
		return;
	x = &o->v[o->n++];
	x->flavor = f->index;
	metrics_label_copy(x->node, sizeof(x->node), n->name);
	x->validating = e != POOL_HEALTH;
	x->out_ms = m.record.out_ms;
}

static const char *const step_names[METRICS__HEALTH_STEPS] = {
	"mark_out", "validate", "return", "fix_taint", "failed"};

void metrics_health_render(struct strbuf *sb, const struct policy *p,
			   struct inventory *inv, int64_t now_ms, bool on,
			   const uint64_t steps[])
{
	struct outs o = {0};

	if (on) {
		strbuf_addf(sb, "# HELP gpugate_health_steps_total Steps of the health "
				"loop on nodes: mark_out (gpugate's taint and record put "
				"on), validate (signal gone), return (both removed), "
				"fix_taint (its taint put back), failed (a write the API "
				"refused).\n"
				"# TYPE gpugate_health_steps_total counter\n");
		for (int i = 0; i < METRICS__HEALTH_STEPS; i++)
			strbuf_addf(sb, "gpugate_health_steps_total{step=\"%s\"} %llu\n",
				    step_names[i], (unsigned long long)steps[i]);
	}
	if (!p || !inv || !policy_flavor_count(p))
		return;
	o.v = calloc(NODES_MAX, sizeof(*o.v));
	if (!o.v)
		return;
	inventory_each_node(inv, p, collect, &o);
	strbuf_addf(sb, "# HELP gpugate_nodes_out_seconds How long the node of the "
			"flavor out longest has been out of the pool for health, by "
			"gpugate's record (0: none).\n"
			"# TYPE gpugate_nodes_out_seconds gauge\n");
	for (size_t f = 0; f < policy_flavor_count(p); f++) {
		int64_t oldest = 0;
		char name[64];

		for (size_t i = 0; i < o.n; i++)
			if (o.v[i].flavor == f && now_ms - o.v[i].out_ms > oldest)
				oldest = now_ms - o.v[i].out_ms;
		metrics_label_copy(name, sizeof(name), policy_flavor_at(p, f)->name);
		strbuf_addf(sb, "gpugate_nodes_out_seconds{flavor=\"%s\"} %lld\n", name,
			    (long long)(oldest / 1000));
	}
	strbuf_addf(sb, "# HELP gpugate_node_out_since_seconds Unix time a node went out "
			"of the pool for health (gpugate's record), by state: health "
			"(its signal on) or validating.\n"
			"# TYPE gpugate_node_out_since_seconds gauge\n");
	for (size_t i = 0; i < o.n; i++) {
		char name[64];

		metrics_label_copy(name, sizeof(name), policy_flavor_at(p, o.v[i].flavor)->name);
		strbuf_addf(sb,
			    "gpugate_node_out_since_seconds{flavor=\"%s\",node=\"%s\","
			    "state=\"%s\"} %lld\n",
			    name, o.v[i].node, o.v[i].validating ? "validating" : "health",
			    (long long)(o.v[i].out_ms / 1000));
	}
	free(o.v);
}
