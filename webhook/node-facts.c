#include "webhook/node-facts.h"

#include "base/arena.h"
#include "base/diag.h"
#include "base/text.h"
#include "policy/charge.h"
#include "policy/decide.h"
#include "policy/health.h"
#include "policy/idle.h"
#include "policy/k8s.h"
#include "policy/kinds.h"
#include "policy/policy.h"
#include "policy/workload.h"
#include "webhook/facts.h"
#include "webhook/holder.h"

#include <string.h>
#include <time.h>

static const char *str(const json_t *obj, const char *key)
{
	const char *s = json_string_value(json_object_get(obj, key));

	return s ? s : "";
}

/* Whole units of a quantity; -1 when absent or not whole. */
static int64_t units(const json_t *q)
{
	int64_t v;

	if (!json_is_string(q) || k8s_quantity_whole(json_string_value(q), &v) < 0)
		return -1;
	return v;
}

static int labels_of(const json_t *labels, struct arena *a, struct pool_node *out)
{
	struct pool_label *l;
	const char *k;
	json_t *v;
	size_t n = 0;

	if (!labels)
		return 0;
	if (!json_is_object(labels))
		return -1;
	l = arena_calloc(a, json_object_size(labels) + 1, sizeof(*l));
	if (!l)
		return -1;
	json_object_foreach((json_t *)labels, k, v)
		if (json_is_string(v))
			l[n++] = (struct pool_label){k, json_string_value(v)};
	out->labels = l;
	out->n_labels = n;
	return 0;
}

/* The extended resources of capacity and allocatable (names with a '/'). */
static int resources_of(const json_t *status, struct arena *a, struct pool_node *out)
{
	const json_t *cap = json_object_get(status, "capacity");
	const json_t *alloc = json_object_get(status, "allocatable");
	struct pool_resource *r;
	const char *k;
	json_t *v;
	size_t n = 0;

	if ((cap && !json_is_object(cap)) || (alloc && !json_is_object(alloc)))
		return -1;
	r = arena_calloc(a, json_object_size(cap) + json_object_size(alloc) + 1,
			 sizeof(*r));
	if (!r)
		return -1;
	json_object_foreach((json_t *)cap, k, v)
		if (strchr(k, '/'))
			r[n++] = (struct pool_resource){k, units(v),
							units(json_object_get(alloc, k)), 0};
	json_object_foreach((json_t *)alloc, k, v)
		if (strchr(k, '/') && !json_object_get(cap, k))
			r[n++] = (struct pool_resource){k, -1, units(v), 0};
	out->resources = r;
	out->n_resources = n;
	return 0;
}

static int taints_of(const json_t *taints, struct arena *a, struct pool_node *out)
{
	struct pool_taint *t;
	size_t i, n = 0;
	json_t *x;

	if (!taints)
		return 0;
	if (!json_is_array(taints))
		return -1;
	t = arena_calloc(a, json_array_size(taints) + 1, sizeof(*t));
	if (!t)
		return -1;
	json_array_foreach(taints, i, x)
		if (json_is_object(x) && json_string_value(json_object_get(x, "key")))
			t[n++] = (struct pool_taint){str(x, "key"), str(x, "value"),
						     str(x, "effect")};
	out->taints = t;
	out->n_taints = n;
	return 0;
}

static int conditions_of(const json_t *conds, struct arena *a, struct pool_node *out)
{
	struct pool_condition *c;
	size_t i, n = 0;
	json_t *x;

	if (!conds)
		return 0;
	if (!json_is_array(conds))
		return -1;
	c = arena_calloc(a, json_array_size(conds) + 1, sizeof(*c));
	if (!c)
		return -1;
	json_array_foreach(conds, i, x) {
		if (!json_is_object(x) || !json_string_value(json_object_get(x, "type")))
			continue;
		c[n] = (struct pool_condition){str(x, "type"), str(x, "status"),
					       str(x, "reason")};
		if (strcmp(c[n].type, "Ready") == 0)
			out->ready = strcmp(c[n].status, "True") == 0;
		n++;
	}
	out->conditions = c;
	out->n_conditions = n;
	return 0;
}

int node_facts(const json_t *obj, struct arena *a, struct pool_node *out)
{
	const json_t *meta = json_object_get(obj, "metadata");
	const json_t *spec = json_object_get(obj, "spec");
	const json_t *status = json_object_get(obj, "status");
	const json_t *unsched = json_object_get(spec, "unschedulable");

	memset(out, 0, sizeof(*out));
	out->name = json_string_value(json_object_get(meta, "name"));
	if (!out->name || (spec && !json_is_object(spec)) ||
	    (status && !json_is_object(status)) || (unsched && !json_is_boolean(unsched)))
		return -1;
	out->unschedulable = json_is_true(unsched);
	out->health_record = json_string_value(
		json_object_get(json_object_get(meta, "annotations"), HEALTH_RECORD));
	if (labels_of(json_object_get(meta, "labels"), a, out) < 0 ||
	    resources_of(status, a, out) < 0 ||
	    taints_of(json_object_get(spec, "taints"), a, out) < 0 ||
	    conditions_of(json_object_get(status, "conditions"), a, out) < 0)
		return -1;
	return 0;
}

/* Adds res to the asks (once) with its units under the scheduler's rule. */
static void ask(const struct wl_pod *pod, const char *res, struct inventory_ask *asks,
		size_t *n)
{
	int64_t u;

	if (!strchr(res, '/'))
		return;
	for (size_t i = 0; i < *n; i++)
		if (strcmp(asks[i].resource, res) == 0)
			return;
	u = charge_pod_units(pod, res);
	if (u > 0)
		asks[(*n)++] = (struct inventory_ask){res, u};
}

static void asks_of(const struct wl_container *cs, size_t n_cs, const struct wl_pod *pod,
		    struct inventory_ask *asks, size_t *n)
{
	for (size_t i = 0; i < n_cs; i++) {
		for (size_t k = 0; k < cs[i].n_limits; k++)
			ask(pod, cs[i].limits[k].name, asks, n);
		for (size_t k = 0; k < cs[i].n_requests; k++)
			ask(pod, cs[i].requests[k].name, asks, n);
	}
}

/* The message of condition PodScheduled=False (the scheduler's reason). */
static const char *scheduler_message(const json_t *status)
{
	const json_t *c;
	size_t i;

	json_array_foreach(json_object_get(status, "conditions"), i, c)
		if (strcmp(str(c, "type"), "PodScheduled") == 0 &&
		    strcmp(str(c, "status"), "False") == 0)
			return str(c, "message");
	return "";
}

/* A pod that is not bound and not finished: does it wait for a flavor's
 * units (the charge rule), and since when? */
static void waiting_of(const struct policy *p, const json_t *obj,
		       const struct workload *wl, struct arena *a,
		       struct inventory_placement *out)
{
	const json_t *meta = json_object_get(obj, "metadata");
	struct inventory_waiting *w;
	struct charge ch;

	if (!p || json_object_get(meta, "deletionTimestamp"))
		return;
	charge_decide(p, wl, &ch);
	if (!ch.flavor || ch.per_pod <= 0)
		return;
	w = arena_calloc(a, 1, sizeof(*w));
	if (!w)
		return;
	*w = (struct inventory_waiting){
		.uid = out->uid,
		.namespace = str(meta, "namespace"),
		.name = str(meta, "name"),
		.tenant = ch.tenant ? arena_strdup(a, ch.tenant->name) : "",
		.flavor = arena_strdup(a, ch.flavor->name),
		.per_pod = ch.per_pod,
		.since = text_unix_time(json_string_value(json_object_get(meta,
								      "creationTimestamp"))),
		.scheduler = scheduler_message(json_object_get(obj, "status")),
		.gang = str(json_object_get(meta, "labels"), STAMP_GANG),
		.gang_route = str(json_object_get(meta, "annotations"), STAMP_GANG_ROUTE),
		.class_name = str(json_object_get(meta, "labels"),
				  policy_settings(p)->class_label),
	};
	for (size_t i = 0; i < wl->pod.n_scheduling_gates; i++)
		if (strcmp(wl->pod.scheduling_gates[i], GANG_GATE) == 0)
			w->gang_gated = true;
	if (w->tenant && w->flavor)
		out->waiting = w;
}

/* A bound pod that runs: whose units (the charge rule), and gpugate's
 * idle annotation on it (the pool report's idle GPUs). */
static void running_of(const struct policy *p, const json_t *obj,
		       const struct workload *wl, const char *phase, struct arena *a,
		       struct inventory_placement *out)
{
	const json_t *meta = json_object_get(obj, "metadata");
	struct inventory_running *r;
	struct charge ch;

	if (!p || !phase || strcmp(phase, "Running") != 0)
		return;
	charge_decide(p, wl, &ch);
	if (!ch.tenant || !ch.flavor || ch.per_pod <= 0)
		return;
	r = arena_calloc(a, 1, sizeof(*r));
	if (!r)
		return;
	*r = (struct inventory_running){
		.uid = out->uid,
		.namespace = str(meta, "namespace"),
		.name = str(meta, "name"),
		.tenant = arena_strdup(a, ch.tenant->name),
		.flavor = arena_strdup(a, ch.flavor->name),
		.per_pod = ch.per_pod,
		.idle_since = text_unix_time(str(json_object_get(meta, "annotations"),
						 IDLE_SINCE_ANNOTATION)),
	};
	if (r->tenant && r->flavor)
		out->running = r;
}

int pod_placement(const struct policy *p, const json_t *obj, struct arena *a,
		  struct inventory_placement *out)
{
	const json_t *meta = json_object_get(obj, "metadata");
	const char *phase = json_string_value(
		json_object_get(json_object_get(obj, "status"), "phase"));
	bool done = charge_pod_terminal(phase);
	struct workload wl = {.kind = WL_POD, .def = kinds_find("", "v1", "Pod"),
			      .op = WL_CREATE};
	struct inventory_ask *asks;
	size_t max = 0, n = 0;
	struct diag d;

	memset(out, 0, sizeof(*out));
	out->uid = json_string_value(json_object_get(meta, "uid"));
	if (!out->uid)
		return -1;
	if (done)
		return 0;
	out->node = json_string_value(json_object_get(json_object_get(obj, "spec"),
						      "nodeName"));
	if (out->node && !out->node[0])
		out->node = NULL;
	diag_init(&d);
	wl.namespace = json_string_value(json_object_get(meta, "namespace"));
	if (!wl.namespace || facts_extract(obj, &wl, a, &d) < 0)
		return 0; /* gpugate cannot read it: it asks nothing */
	if (!out->node) {
		waiting_of(p, obj, &wl, a, out);
		return 0;
	}
	for (size_t i = 0; i < wl.pod.n_containers; i++)
		max += wl.pod.containers[i].n_limits + wl.pod.containers[i].n_requests;
	for (size_t i = 0; i < wl.pod.n_init_containers; i++)
		max += wl.pod.init_containers[i].n_limits +
		       wl.pod.init_containers[i].n_requests;
	if (!max)
		return 0;
	asks = arena_calloc(a, max, sizeof(*asks));
	if (!asks)
		return -1;
	asks_of(wl.pod.containers, wl.pod.n_containers, &wl.pod, asks, &n);
	asks_of(wl.pod.init_containers, wl.pod.n_init_containers, &wl.pod, asks, &n);
	out->asks = asks;
	out->n_asks = n;
	running_of(p, obj, &wl, phase, a, out);
	return 0;
}

/* The latest state.terminated.finishedAt of the containers; 0 when none. */
static int64_t finished_at(const json_t *status)
{
	static const char *const lists[] = {"containerStatuses", "initContainerStatuses"};
	int64_t latest = 0;

	for (size_t l = 0; l < 2; l++) {
		const json_t *c;
		size_t i;

		json_array_foreach(json_object_get(status, lists[l]), i, c) {
			int64_t t = text_unix_time(json_string_value(json_object_get(
				json_object_get(json_object_get(c, "state"), "terminated"),
				"finishedAt")));

			if (t > latest)
				latest = t;
		}
	}
	return latest;
}

int pod_run(const struct policy *p, const json_t *obj, struct arena *a,
	    struct meter_pod *out)
{
	const json_t *meta = json_object_get(obj, "metadata");
	const json_t *status = json_object_get(obj, "status");
	const char *phase = json_string_value(json_object_get(status, "phase"));
	struct workload wl = {.kind = WL_POD, .def = kinds_find("", "v1", "Pod"),
			      .op = WL_CREATE};
	struct charge ch;
	struct diag d;

	memset(out, 0, sizeof(*out));
	out->uid = json_string_value(json_object_get(meta, "uid"));
	if (!out->uid)
		return -1;
	wl.namespace = json_string_value(json_object_get(meta, "namespace"));
	diag_init(&d);
	if (!p || !wl.namespace || facts_extract(obj, &wl, a, &d) < 0)
		return 0;
	charge_decide(p, &wl, &ch);
	if (!ch.tenant || ch.per_pod <= 0)
		return 0;
	out->tenant = arena_strdup(a, ch.tenant->name);
	out->flavor = arena_strdup(a, ch.flavor->name);
	if (!out->tenant || !out->flavor)
		return -1;
	out->units = ch.per_pod;
	out->start = text_unix_time(json_string_value(json_object_get(status, "startTime")));
	if (charge_pod_terminal(phase)) {
		out->end = finished_at(status);
		if (!out->end)
			out->end = (int64_t)time(NULL); /* seen finished now */
	}
	return 0;
}

int pod_run_cb(void *ctx, const json_t *obj, struct arena *a, struct meter_pod *out)
{
	struct holder_ref *ref;
	const struct policy *p = ctx ? holder_acquire(ctx, &ref) : NULL;
	int rc = pod_run(p, obj, a, out);

	if (ctx)
		holder_release(ref);
	return rc;
}

int node_facts_cb(void *ctx, const json_t *obj, struct arena *a, struct pool_node *out)
{
	(void)ctx;
	return node_facts(obj, a, out);
}

int pod_placement_cb(void *ctx, const json_t *obj, struct arena *a,
		     struct inventory_placement *out)
{
	struct holder_ref *ref;
	const struct policy *p = ctx ? holder_acquire(ctx, &ref) : NULL;
	int rc = pod_placement(p, obj, a, out);

	/* The waiting facts' names were copied into a: the policy may go. */
	if (ctx)
		holder_release(ref);
	return rc;
}
