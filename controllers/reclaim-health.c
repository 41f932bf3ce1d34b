/*
 * reclaim-health: the health loop's victims (docs/design/health-loop.md;
 * controllers/reclaimer-int.h).  Every preemptible workload with a pod on
 * a node out of the pool for health is the reclaimer's victim before any
 * cohort's; a non-preemptible pod there is told, once, that its node
 * fails.
 */
#include "controllers/reclaimer-int.h"

#include "base/arena.h"
#include "base/diag.h"
#include "base/log.h"
#include "base/strmap.h"
#include "controllers/events.h"
#include "kube/client.h"
#include "policy/health.h"
#include "policy/policy.h"
#include "policy/pool.h"
#include "usage/inventory.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct bad_scan {
	struct round *rd;
	const struct policy_health *h;
};

/* The nodes of each flavor that are out for health, once each. */
static void bad_scan_view(void *ctx, const struct pool_view *v)
{
	struct bad_scan *bs = ctx;
	struct round *rd = bs->rd;

	for (size_t i = 0; i < v->n_members && rd->n_bad < BAD_NODES_MAX; i++) {
		const struct pool_member *m = &v->members[i];
		struct bad_node *b;
		char by[300];
		bool known = false;

		if (m->exclusion != POOL_HEALTH)
			continue;
		for (size_t k = 0; k < rd->n_bad && !known; k++)
			known = strcmp(rd->bad[k].node, m->node->name) == 0;
		if (known)
			continue;
		b = &rd->bad[rd->n_bad];
		b->node = arena_strdup(&rd->a, m->node->name);
		b->why = arena_strdup(&rd->a, m->why);
		/* NULL for a DRA flavor: its pods hold devices through claims. */
		b->resource = v->flavor->resource ? arena_strdup(&rd->a, v->flavor->resource)
						  : NULL;
		b->drained_by = health_drained_by_other(bs->h, m->node, by, sizeof(by))
					? arena_strdup(&rd->a, by)
					: NULL;
		if (b->node && b->why && (b->resource || !v->flavor->resource))
			rd->n_bad++;
	}
}

/* Fills rd->bad: nothing without the pool, or under onUnhealthy none. */
void reclaim_health_scan(struct round *rd)
{
	struct bad_scan bs = {rd, policy_health(rd->p)};

	rd->n_bad = 0;
	rd->health_on = rd->r->cfg.inventory && bs.h && bs.h->on_unhealthy != HEALTH_ON_NONE;
	if (!rd->health_on)
		return;
	rd->bad = arena_calloc(&rd->a, BAD_NODES_MAX, sizeof(*rd->bad));
	if (!rd->bad || inventory_each(rd->r->cfg.inventory, rd->p, bad_scan_view, &bs) < 0)
		rd->bad_partial = true;
	if (rd->n_bad == BAD_NODES_MAX)
		rd->bad_partial = true; /* maybe more */
}

/* Whether a container list asks for resource (requests or limits). */
static bool asks_resource(const json_t *containers, const char *resource)
{
	const json_t *c;
	size_t i;

	json_array_foreach(containers, i, c) {
		const json_t *r = json_object_get(c, "resources");

		if (json_object_get(json_object_get(r, "limits"), resource) ||
		    json_object_get(json_object_get(r, "requests"), resource))
			return true;
	}
	return false;
}

/* Whether a pod (its spec) holds units of a failing node's flavor: asks
 * for its resource, or for a DRA flavor (resource NULL) names a claim
 * (its devices on that node come through one). */
static bool holds_units(const json_t *spec, const char *resource)
{
	if (!resource)
		return json_array_size(json_object_get(spec, "resourceClaims")) > 0;
	return asks_resource(json_object_get(spec, "containers"), resource) ||
	       asks_resource(json_object_get(spec, "initContainers"), resource);
}

/* A Warning Event on a pod that gpugate does not checkpoint, once. */
static void tell_failing(struct round *rd, const struct bad_node *b, const json_t *meta,
			 const char *why_not)
{
	const char *uid = json_string_value(json_object_get(meta, "uid"));
	struct events_object o = {"v1", "Pod",
				  json_string_value(json_object_get(meta, "namespace")),
				  json_string_value(json_object_get(meta, "name")), uid};
	struct strmap *told = &rd->r->told;
	char key[600], msg[800];
	char *k;

	if (!uid || !o.namespace || !o.name)
		return;
	snprintf(key, sizeof(key), "%s@%s", uid, b->node);
	if (strmap_get(told, key, NULL) || !reclaim_spend(rd))
		return;
	if (told->len >= TOLD_MAX) {
		strmap_release_freeing(told);
		strmap_init(told);
	}
	if ((k = strdup(key)) && strmap_put(told, k, (size_t)(uintptr_t)k, NULL) != 0)
		free(k);
	snprintf(msg, sizeof(msg),
		 "node %s is failing (%s) and is out of the GPU pool; %s, so gpugate does "
		 "not checkpoint it: save your work, it may be drained",
		 b->node, b->why, why_not);
	events_write(rd->r->w.kube, rd->r->identity, &o, "GPUNodeFailing", "Warning", msg,
		     rd->now_ms / 1000);
	log_event(LOG_INFO, "msg=\"told a pod its node fails\" pod=%s/%s node=%s", o.namespace,
		  o.name, b->node);
}

/* The pods bound to failing node b: their workloads are the loop's
 * victims (preemptible) or are told (the others). */
static void bad_node_round(struct round *rd, const struct bad_node *b)
{
	const struct policy_health *h = policy_health(rd->p);
	char path[600];
	json_t *list = NULL, *pod;
	struct diag d;
	size_t i, idx;

	if (!reclaim_spend(rd)) {
		rd->bad_partial = true;
		return;
	}
	snprintf(path, sizeof(path), "/api/v1/pods?fieldSelector=spec.nodeName%%3D%s", b->node);
	diag_init(&d);
	if (kube_get_json(rd->r->w.kube, path, WRITE_TIMEOUT_MS, &list, &d) != 0) {
		rd->bad_partial = true;
		return;
	}
	json_array_foreach(json_object_get(list, "items"), i, pod) {
		const json_t *meta = json_object_get(pod, "metadata");
		const json_t *spec = json_object_get(pod, "spec");
		const char *phase = json_string_value(
			json_object_get(json_object_get(pod, "status"), "phase"));
		const char *job = json_string_value(
			json_object_get(json_object_get(meta, "labels"), JOB_UID_LABEL));
		const char *uid = json_string_value(json_object_get(meta, "uid"));
		struct seen *s = NULL;

		if (!uid || json_object_get(meta, "deletionTimestamp") ||
		    (phase && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed"))) ||
		    !holds_units(spec, b->resource))
			continue;
		if ((job && strmap_get(&rd->seen_by_uid, job, &idx)) ||
		    strmap_get(&rd->seen_by_uid, uid, &idx))
			s = &rd->seen[idx];
		/* A pod of no tenant is not gpugate's to tell (the GPU
		 * Operator's validator, another gpugate's tenants). */
		if (!s)
			continue;
		if (!s->w.preemptible) {
			tell_failing(rd, b, meta,
				     "it is not preemptible (gpugate.io/preemptible)");
			continue;
		}
		if (s->picked)
			continue; /* another of its pods, or another failing node */
		s->picked = true;
		s->bad = b;
		s->hold = b->drained_by || h->on_unhealthy == HEALTH_ON_SIGNAL;
	}
	json_decref(list);
}

void reclaim_health_pick(struct round *rd)
{
	for (size_t i = 0; i < rd->n_bad; i++)
		bad_node_round(rd, &rd->bad[i]);
}
