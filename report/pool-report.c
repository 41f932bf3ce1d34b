#include "report/pool-report.h"

#include "base/arena.h"
#include "base/strbuf.h"
#include "base/strmap.h"
#include "base/text.h"
#include "policy/capacity.h"
#include "policy/health.h"
#include "policy/idle.h"
#include "policy/policy.h"
#include "policy/pool.h"
#include "policy/quota.h"
#include "usage/inventory.h"
#include "usage/usage.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct build {
	json_t *flavors;
	bool oom;
	const struct policy *p;
	int64_t now_ms;
	bool dra_known; /* inventory_dra_known(), read before inventory_each */
};

static void add(json_t *obj, const char *key, json_t *v, bool *oom)
{
	if (!v || json_object_set_new(obj, key, v) < 0)
		*oom = true;
}

/* "2026-12-05T11:00:00Z" of ms since the epoch. */
static void rfc3339(int64_t ms, char *buf, size_t size)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	if (!gmtime_r(&t, &tm) || !strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(buf, size, "%lld", (long long)(ms / 1000));
}

/* A node out for health or validating, by gpugate's record: since when,
 * how many times, and what a validating one waits for. */
static void health_json(json_t *n, const struct pool_member *m, const struct build *b,
			bool *oom)
{
	struct health_marks hm;
	char at[32], wait[256];

	if (m->exclusion != POOL_HEALTH && m->exclusion != POOL_VALIDATING)
		return;
	health_marks_read(m->node, &hm);
	if (!hm.has_record)
		return;
	rfc3339(hm.record.out_ms, at, sizeof(at));
	add(n, "outSince", json_string(at), oom);
	add(n, "outSeconds",
	    json_integer(b->now_ms > hm.record.out_ms ? (b->now_ms - hm.record.out_ms) / 1000
						      : 0),
	    oom);
	if (hm.record.times > 1)
		add(n, "times", json_integer(hm.record.times), oom);
	if (m->exclusion == POOL_VALIDATING && hm.record.cleared_ms &&
	    !health_return(policy_health(b->p), m->node, hm.record.cleared_ms, b->now_ms,
			   wait, sizeof(wait)) &&
	    wait[0])
		add(n, "waitsFor", json_string(wait), oom);
}

static json_t *node_json(const struct pool_member *m, const struct build *b, bool *oom)
{
	json_t *n = json_object();

	if (!n) {
		*oom = true;
		return NULL;
	}
	add(n, "name", json_string(m->node->name), oom);
	add(n, "state", json_string(pool_exclusion_name(m->exclusion)), oom);
	if (m->why[0])
		add(n, "why", json_string(m->why), oom);
	add(n, "capacity", json_integer(m->capacity), oom);
	add(n, "allocatable", json_integer(m->allocatable), oom);
	add(n, "allocated", json_integer(m->allocated), oom);
	add(n, "free", json_integer(m->free), oom);
	if (m->devices_tainted > 0) {
		add(n, "devicesTainted", json_integer(m->devices_tainted), oom);
		add(n, "deviceWhy", json_string(m->device_why), oom);
	}
	if (m->devices_blocked > 0) {
		add(n, "devicesBlocked", json_integer(m->devices_blocked), oom);
		add(n, "blockedWhy", json_string(m->blocked_why), oom);
	}
	health_json(n, m, b, oom);
	return n;
}

static void flavor_json(void *ctx, const struct pool_view *v)
{
	struct build *b = ctx;
	struct pool_summary s;
	json_t *f = json_object(), *states = json_object(), *nodes = json_array();

	if (!f || !states || !nodes) {
		json_decref(f);
		json_decref(states);
		json_decref(nodes);
		b->oom = true;
		return;
	}
	pool_summarize(v, &s);
	add(f, "name", json_string(v->flavor->name), &b->oom);
	if (v->flavor->dra) {
		/* Units are devices (policy/pool.h struct pool_member), known
		 * once the DRA kinds are (usage/inventory.h). */
		add(f, "deviceClassName", json_string(v->flavor->dra->device_class), &b->oom);
		/* ... or shares of a device's capacity (dra.sharedCapacity) */
		add(f, "units", json_string(v->flavor->dra->shared ? v->flavor->units
								   : "devices"),
		    &b->oom);
		add(f, "known", json_boolean(b->dra_known), &b->oom);
		add(f, "devicesTainted", json_integer(s.devices_tainted), &b->oom);
		add(f, "devicesBlocked", json_integer(s.devices_blocked), &b->oom);
		add(f, "approximate", json_boolean(v->approximate), &b->oom);
		add(f, "devicesCompete", json_boolean(v->devices_compete), &b->oom);
	} else
		add(f, "resource", json_string(v->flavor->resource), &b->oom);
	add(f, "sharing", json_string(policy_sharing_name(v->flavor->sharing)), &b->oom);
	add(f, "nodes", json_integer((json_int_t)v->n_members), &b->oom);
	add(f, "usable", json_integer((json_int_t)v->n_usable), &b->oom);
	for (int e = POOL_USABLE; e <= POOL_TAINTED; e++)
		add(states, pool_exclusion_name((enum pool_exclusion)e),
		    json_integer((json_int_t)s.nodes[e]), &b->oom);
	add(f, "states", states, &b->oom);
	add(f, "capacity", json_integer(s.capacity), &b->oom);
	add(f, "allocatable", json_integer(s.allocatable), &b->oom);
	add(f, "allocated", json_integer(s.allocated), &b->oom);
	add(f, "free", json_integer(s.free), &b->oom);
	add(f, "largestFree", json_integer(s.largest_free), &b->oom);
	if (v->largest_free_node)
		add(f, "largestFreeNode", json_string(v->largest_free_node), &b->oom);
	add(f, "excludedUnits", json_integer(s.excluded), &b->oom);
	for (size_t i = 0; i < v->n_members; i++) {
		json_t *n = node_json(&v->members[i], b, &b->oom);

		if (n && json_array_append_new(nodes, n) < 0)
			b->oom = true;
	}
	add(f, "nodeList", nodes, &b->oom);
	if (json_array_append_new(b->flavors, f) < 0)
		b->oom = true;
}

/* The pool's summaries (policy order), when inv has listed Nodes and
 * Pods: what effective capacity is computed from. */
struct pool_caps {
	struct pool_summary *s; /* NULL: the pool is not known */
	size_t n;
	struct usage_names names;
	struct usage_view view;
};

static void caps_init(struct pool_caps *c, const struct policy *p,
		      struct inventory *inv, struct usage_store *u, bool *oom)
{
	size_t cap = policy_flavor_count(p);
	long n;

	memset(c, 0, sizeof(*c));
	usage_names_view(&c->names, p, u, &c->view);
	if (!inv || !inventory_synced(inv))
		return;
	c->s = calloc(cap + 1, sizeof(*c->s));
	n = c->s ? inventory_summaries(inv, p, c->s, cap) : -1;
	if (n < 0) {
		free(c->s);
		c->s = NULL;
		*oom = true;
		return;
	}
	c->n = (size_t)n;
}

static const struct pool_summary *caps_summary(const struct pool_caps *c,
					       const struct policy_flavor *f)
{
	for (size_t i = 0; i < c->n; i++)
		if (c->s[i].flavor == f)
			return &c->s[i];
	return NULL;
}

/* "effective" of flavor f (pool known): capacity_of() as JSON. */
static json_t *effective_json(const struct policy *p, const struct pool_caps *c,
			      const struct policy_flavor *f, bool *oom)
{
	size_t nt = policy_tenant_count(p), n = 0;
	struct capacity_tenant *ct = calloc(nt + 1, sizeof(*ct));
	struct capacity_flavor cf;
	json_t *e = json_object(), *ts = json_array();

	if (!ct || !e || !ts) {
		free(ct);
		json_decref(e);
		json_decref(ts);
		*oom = true;
		return NULL;
	}
	capacity_of(p, f, caps_summary(c, f), &c->view, &cf, ct, &n);
	add(e, "known", json_boolean(cf.known), oom);
	add(e, "usable", json_integer(cf.usable), oom);
	add(e, "promised", json_integer(cf.promised), oom);
	add(e, "unbacked", json_integer(cf.unbacked), oom);
	for (size_t i = 0; i < n; i++) {
		json_t *t = json_pack("{s:s, s:I, s:I, s:I, s:I}", "tenant",
				      ct[i].tenant->name, "nominal",
				      (json_int_t)ct[i].nominal, "used",
				      (json_int_t)ct[i].used, "reclaimable",
				      (json_int_t)ct[i].reclaimable, "short",
				      (json_int_t)ct[i].short_by);

		if (!t || json_array_append_new(ts, t) < 0)
			*oom = true;
	}
	add(e, "tenants", ts, oom);
	free(ct);
	return e;
}

/* Per tenant and flavor: used, nominal, borrowed (used above nominal) and
 * lent (the cohort's borrowing attributed to lenders in policy order). */
static json_t *tenants_json(const struct policy *p, const struct pool_caps *caps,
			    struct usage_store *u, bool *oom)
{
	size_t nt = policy_tenant_count(p), nf = policy_flavor_count(p);
	int64_t *used = calloc(nt * nf + 1, sizeof(*used));
	int64_t *lent = calloc(nt * nf + 1, sizeof(*lent));
	int64_t *shortby = calloc(nt * nf + 1, sizeof(*shortby));
	struct capacity_tenant *ct = calloc(nt + 1, sizeof(*ct));
	json_t *out = json_array();

	if (!used || !lent || !shortby || !ct || !out) {
		*oom = true;
		goto done;
	}
	/* What the pool backs of each nominal quota: -1 where not known. */
	for (size_t f = 0; f < nf; f++) {
		const struct policy_flavor *fl = policy_flavor_at(p, f);
		struct capacity_flavor cf;
		size_t n = 0;

		for (size_t t = 0; t < nt; t++)
			shortby[t * nf + f] = -1;
		if (!caps->s)
			continue;
		capacity_of(p, fl, caps_summary(caps, fl), &caps->view, &cf, ct, &n);
		for (size_t i = 0; i < n && cf.known; i++)
			shortby[ct[i].tenant->index * nf + f] = ct[i].short_by;
	}
	for (size_t t = 0; t < nt; t++)
		for (size_t f = 0; f < nf; f++)
			used[t * nf + f] = u ? usage_used(u, policy_tenant_at(p, t)->name,
							  policy_flavor_at(p, f)->name)
					     : 0;
	for (size_t c = 0; c < policy_cohort_count(p); c++)
		for (size_t f = 0; f < nf; f++) {
			int64_t borrowed = 0;

			for (size_t t = 0; t < nt; t++) {
				const struct policy_tenant *x = policy_tenant_at(p, t);
				const struct policy_quota *q =
					policy_tenant_quota(x, policy_flavor_at(p, f));

				if (q && x->cohort_index == (int)c && used[t * nf + f] > q->nominal)
					borrowed += used[t * nf + f] - q->nominal;
			}
			for (size_t t = 0; t < nt && borrowed > 0; t++) {
				const struct policy_tenant *x = policy_tenant_at(p, t);
				const struct policy_quota *q =
					policy_tenant_quota(x, policy_flavor_at(p, f));
				int64_t spare, give;

				if (!q || x->cohort_index != (int)c)
					continue;
				spare = q->nominal - used[t * nf + f];
				if (q->lending_limit != POLICY_NO_LIMIT && spare > q->lending_limit)
					spare = q->lending_limit;
				give = spare < borrowed ? spare : borrowed;
				if (give > 0) {
					lent[t * nf + f] = give;
					borrowed -= give;
				}
			}
		}
	for (size_t t = 0; t < nt; t++) {
		const struct policy_tenant *x = policy_tenant_at(p, t);
		json_t *o = json_object(), *qs = json_array();

		if (!o || !qs) {
			json_decref(o);
			json_decref(qs);
			*oom = true;
			break;
		}
		add(o, "name", json_string(x->name), oom);
		if (x->cohort)
			add(o, "cohort", json_string(x->cohort), oom);
		for (size_t i = 0; i < x->n_quota; i++) {
			const struct policy_quota *q = &x->quota[i];
			size_t k = t * nf + q->flavor->index;
			json_t *e = json_object();

			if (!e) {
				*oom = true;
				break;
			}
			add(e, "flavor", json_string(q->flavor->name), oom);
			add(e, "used", json_integer(used[k]), oom);
			add(e, "nominal", json_integer(q->nominal), oom);
			add(e, "borrowed", json_integer(used[k] > q->nominal
								? used[k] - q->nominal
								: 0), oom);
			add(e, "lent", json_integer(lent[k]), oom);
			if (shortby[k] >= 0) {
				add(e, "backed", json_integer(q->nominal - shortby[k]), oom);
				add(e, "notBacked", json_integer(shortby[k]), oom);
			}
			if (json_array_append_new(qs, e) < 0)
				*oom = true;
		}
		add(o, "quota", qs, oom);
		if (json_array_append_new(out, o) < 0)
			*oom = true;
	}
done:
	free(used);
	free(lent);
	free(shortby);
	free(ct);
	return out;
}

json_t *pool_report_tenants(const struct policy *p, struct inventory *inv,
			    struct usage_store *u)
{
	bool oom = false;
	struct pool_caps caps;
	json_t *t;

	caps_init(&caps, p, inv, u, &oom);
	t = tenants_json(p, &caps, u, &oom);
	free(caps.s);
	if (oom) {
		json_decref(t);
		return NULL;
	}
	return t;
}

json_t *pool_report(const struct policy *p, struct inventory *inv,
		    struct usage_store *u)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return pool_report_at(p, inv, u, (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
}

/* ---- idle GPUs ----------------------------------------------------------- */

struct idle_row {
	const char *ns, *name, *tenant, *flavor; /* into the scan's arena */
	int64_t units, since;
};

struct idle_scan {
	const struct policy *p;
	struct arena a;
	struct idle_row *rows;
	size_t n, cap;
	struct idle_share *share;      /* per tenant index; NULL: no utils */
	const struct idle_util *utils;
	struct strmap by_key;          /* "ns/pod" -> index into utils */
	bool oom;
};

static void idle_scan_pod(void *ctx, const struct inventory_running *r)
{
	struct idle_scan *sc = ctx;
	const struct policy_tenant *t = policy_tenant_find(sc->p, r->tenant);
	struct idle_row *x;

	if (!t)
		return;
	if (sc->share) {
		char key[600];
		size_t i;

		snprintf(key, sizeof(key), "%s/%s", r->namespace, r->name);
		idle_share_add(&sc->share[t->index], r->per_pod,
			       strmap_get(&sc->by_key, key, &i) ? &sc->utils[i] : NULL);
	}
	if (r->idle_since <= 0)
		return;
	if (sc->n == sc->cap) {
		size_t cap = sc->cap ? sc->cap * 2 : 16;
		struct idle_row *v = realloc(sc->rows, cap * sizeof(*v));

		if (!v) {
			sc->oom = true;
			return;
		}
		sc->rows = v;
		sc->cap = cap;
	}
	x = &sc->rows[sc->n];
	*x = (struct idle_row){arena_strdup(&sc->a, r->namespace), arena_strdup(&sc->a, r->name),
			       t->name, arena_strdup(&sc->a, r->flavor), r->per_pod,
			       r->idle_since};
	if (!x->ns || !x->name || !x->flavor)
		sc->oom = true;
	else
		sc->n++;
}

static int idle_row_cmp(const void *a, const void *b)
{
	const struct idle_row *x = a, *y = b;
	int c = strcmp(x->ns, y->ns);

	return c ? c : strcmp(x->name, y->name);
}

/* "idle" and each tenant's "busyShare" onto report r. */
static void idle_json(json_t *r, const struct policy *p, struct inventory *inv,
		      int64_t now_ms, const struct idle_util *utils, size_t nu, bool *oom)
{
	struct idle_scan sc = {.p = p, .utils = utils};
	json_t *list = json_array(), *t;
	size_t i;

	arena_init(&sc.a);
	strmap_init(&sc.by_key);
	if (!list)
		goto fail;
	if (utils) {
		sc.share = calloc(policy_tenant_count(p) + 1, sizeof(*sc.share));
		if (!sc.share)
			goto fail;
		for (i = 0; i < nu; i++) {
			char key[600], *k;

			snprintf(key, sizeof(key), "%s/%s", utils[i].namespace, utils[i].pod);
			k = arena_strdup(&sc.a, key);
			if (!k || strmap_put(&sc.by_key, k, i, NULL) < 0)
				goto fail;
		}
	}
	if (inv && inventory_synced(inv))
		inventory_running_each(inv, idle_scan_pod, &sc);
	if (sc.oom)
		goto fail;
	if (sc.n)
		qsort(sc.rows, sc.n, sizeof(*sc.rows), idle_row_cmp);
	for (i = 0; i < sc.n; i++) {
		const struct idle_row *x = &sc.rows[i];
		json_t *o = json_object();
		char at[32];

		if (!o || json_array_append_new(list, o) < 0)
			goto fail;
		rfc3339(x->since * 1000, at, sizeof(at));
		add(o, "namespace", json_string(x->ns), oom);
		add(o, "pod", json_string(x->name), oom);
		add(o, "tenant", json_string(x->tenant), oom);
		add(o, "flavor", json_string(x->flavor), oom);
		add(o, "units", json_integer(x->units), oom);
		add(o, "since", json_string(at), oom);
		add(o, "idleSeconds",
		    json_integer(now_ms / 1000 > x->since ? now_ms / 1000 - x->since : 0), oom);
	}
	json_array_foreach(json_object_get(r, "tenants"), i, t) {
		const struct policy_tenant *x = policy_tenant_find(
			p, json_string_value(json_object_get(t, "name")));
		double share = sc.share && x ? idle_share_of(&sc.share[x->index]) : -1;

		add(t, "busyShare", share < 0 ? json_null() : json_real(share), oom);
	}
	add(r, "idle", list, oom);
	list = NULL;
	goto out;
fail:
	*oom = true;
	json_decref(list);
out:
	free(sc.rows);
	free(sc.share);
	strmap_release(&sc.by_key);
	arena_release(&sc.a);
}

json_t *pool_report_at(const struct policy *p, struct inventory *inv,
		       struct usage_store *u, int64_t now_ms)
{
	return pool_report_idle(p, inv, u, now_ms, NULL, 0);
}

json_t *pool_report_idle(const struct policy *p, struct inventory *inv,
			 struct usage_store *u, int64_t now_ms,
			 const struct idle_util *utils, size_t nu)
{
	struct build b = {.flavors = json_array(), .p = p, .now_ms = now_ms};
	json_t *r = json_object(), *f;
	bool synced = inv && inventory_synced(inv);
	struct pool_caps caps;
	size_t i;

	if (!r || !b.flavors) {
		json_decref(r);
		json_decref(b.flavors);
		return NULL;
	}
	add(r, "synced", json_boolean(synced), &b.oom);
	b.dra_known = synced && inventory_dra_known(inv);
	if (synced && inventory_each(inv, p, flavor_json, &b) < 0)
		b.oom = true;
	/* Outside the inventory's lock: the usage store has its own. */
	caps_init(&caps, p, synced ? inv : NULL, u, &b.oom);
	json_array_foreach(b.flavors, i, f) {
		const struct policy_flavor *fl = policy_flavor_find(
			p, json_string_value(json_object_get(f, "name")));

		if (fl && caps.s)
			add(f, "effective", effective_json(p, &caps, fl, &b.oom), &b.oom);
	}
	add(r, "flavors", b.flavors, &b.oom);
	add(r, "tenants", tenants_json(p, &caps, u, &b.oom), &b.oom);
	free(caps.s);
	if (!b.oom)
		idle_json(r, p, synced ? inv : NULL, now_ms, utils, nu, &b.oom);
	if (b.oom) {
		json_decref(r);
		return NULL;
	}
	return r;
}

static long long num(const json_t *o, const char *key)
{
	return (long long)json_integer_value(json_object_get(o, key));
}

static const char *text(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s ? s : "-";
}

/* Per flavor that promises quota, what backs it (policy/capacity.h),
 * and the tenants whose nominal is not backed now. */
static void effective_text(const json_t *flavors, struct strbuf *out)
{
	const json_t *f, *e, *t;
	size_t i, k;
	bool first = true;

	json_array_foreach(flavors, i, f) {
		long long excluded = num(f, "excludedUnits");

		e = json_object_get(f, "effective");
		if (!e || num(e, "promised") <= 0)
			continue;
		strbuf_addf(out, "%s%s: effective: ", first ? "\n" : "", text(f, "name"));
		first = false;
		if (!json_is_true(json_object_get(e, "known"))) {
			strbuf_addf(out, "%lld promised, no node of the flavor seen: not "
					 "known\n",
				    num(e, "promised"));
			continue;
		}
		if (num(e, "unbacked") > 0)
			strbuf_addf(out, "%lld of %lld promised usable", num(e, "usable"),
				    num(e, "promised"));
		else
			strbuf_addf(out, "%lld usable back the %lld promised",
				    num(e, "usable"), num(e, "promised"));
		if (excluded > 0)
			strbuf_addf(out, " (%lld on excluded nodes)", excluded);
		if (num(e, "unbacked") > 0)
			strbuf_addf(out, ": %lld not backed", num(e, "unbacked"));
		strbuf_addf(out, "\n");
		json_array_foreach(json_object_get(e, "tenants"), k, t) {
			if (num(t, "short") <= 0)
				continue;
			strbuf_addf(out, "  tenant %s: nominal %lld, holds %lld, %lld free "
					 "now",
				    text(t, "tenant"), num(t, "nominal"), num(t, "used"),
				    num(f, "free"));
			if (num(t, "reclaimable") > 0)
				strbuf_addf(out, ", %lld borrowed by its cohort",
					    num(t, "reclaimable"));
			strbuf_addf(out, ": %lld of its nominal not backed\n",
				    num(t, "short"));
		}
	}
}

/* The DRA flavors: units are devices, whether the pool is known or an
 * upper bound, and the nodes with tainted devices (none: nothing). */
static void devices_text(const json_t *flavors, struct strbuf *out)
{
	const json_t *f, *n;
	size_t i, k;
	bool head = false;

	json_array_foreach(flavors, i, f) {
		if (!json_object_get(f, "units"))
			continue;
		if (!head) {
			strbuf_addf(out, "\nDEVICES (DRA flavors: ResourceSlices, "
					 "DeviceTaintRules, claims)\n");
			head = true;
		}
		strbuf_addf(out, "%s: units are %s", text(f, "name"), text(f, "units"));
		if (!json_is_true(json_object_get(f, "known")))
			strbuf_addf(out, ", not known (ResourceSlices not listed or not "
					 "served)\n");
		else {
			if (json_is_true(json_object_get(f, "devicesCompete")))
				strbuf_addf(out, ", an upper bound (free devices compete "
						 "for counters: not all can be had at once)");
			else if (json_is_true(json_object_get(f, "approximate")))
				strbuf_addf(out, ", an upper bound (dra.selectors are CEL "
						 "gpugate does not evaluate)");
			strbuf_addf(out, "; %lld tainted", num(f, "devicesTainted"));
			if (num(f, "devicesBlocked") > 0)
				strbuf_addf(out, ", %lld blocked by counters",
					    num(f, "devicesBlocked"));
			strbuf_addf(out, "\n");
		}
		json_array_foreach(json_object_get(f, "nodeList"), k, n) {
			if (num(n, "devicesTainted") > 0)
				strbuf_addf(out, "  %-20s %lld tainted (%s)\n", text(n, "name"),
					    num(n, "devicesTainted"), text(n, "deviceWhy"));
			if (num(n, "devicesBlocked") > 0)
				strbuf_addf(out, "  %-20s %lld blocked by counters (%s)\n",
					    text(n, "name"), num(n, "devicesBlocked"),
					    text(n, "blockedWhy"));
		}
	}
}

/* The nodes gpugate took out for health, since when (none: nothing). */
static void out_for_health(const json_t *flavors, struct strbuf *out)
{
	const json_t *f, *n;
	size_t i, k;
	bool head = false;

	json_array_foreach(flavors, i, f)
		json_array_foreach(json_object_get(f, "nodeList"), k, n) {
			char dur[32];

			if (!json_object_get(n, "outSince"))
				continue;
			if (!head) {
				strbuf_addf(out, "\nOUT FOR HEALTH (gpugate's record on the "
						 "node)\n%-20s %-20s %-10s  %s\n",
					    "NODE", "FLAVOR", "STATE", "SINCE");
				head = true;
			}
			text_duration(num(n, "outSeconds"), dur, sizeof(dur));
			strbuf_addf(out, "%-20s %-20s %-10s  %s (out %s", text(n, "name"),
				    text(f, "name"), text(n, "state"), text(n, "outSince"), dur);
			if (num(n, "times") > 1)
				strbuf_addf(out, ", out %lld times before it came back",
					    num(n, "times"));
			strbuf_addf(out, ")");
			if (json_object_get(n, "waitsFor"))
				strbuf_addf(out, "; waits for %s", text(n, "waitsFor"));
			else if (strcmp(text(n, "state"), "health") == 0)
				strbuf_addf(out, ": %s", text(n, "why"));
			strbuf_addf(out, "\n");
		}
}

/* The pods gpugate found idle, and each tenant's busy share when known. */
static void idle_text(const json_t *report, struct strbuf *out)
{
	const json_t *x, *t;
	size_t i;
	bool head = false;

	json_array_foreach(json_object_get(report, "idle"), i, x) {
		char who[300], dur[32];

		if (!head) {
			strbuf_addf(out, "\nIDLE (gpugate.io/idle-since on the pod)\n"
					 "%-40s %-16s %-16s %5s  %-20s  %s\n",
				    "NAMESPACE/POD", "TENANT", "FLAVOR", "UNITS", "IDLE SINCE",
				    "FOR");
			head = true;
		}
		snprintf(who, sizeof(who), "%s/%s", text(x, "namespace"), text(x, "pod"));
		text_duration(num(x, "idleSeconds"), dur, sizeof(dur));
		strbuf_addf(out, "%-40s %-16s %-16s %5lld  %-20s  %s\n", who, text(x, "tenant"),
			    text(x, "flavor"), num(x, "units"), text(x, "since"), dur);
	}
	head = false;
	json_array_foreach(json_object_get(report, "tenants"), i, t)
		if (json_is_number(json_object_get(t, "busyShare")))
			head = true;
	if (!head)
		return; /* no data at all (gpugate pool: no Prometheus read) */
	strbuf_addf(out, "\nBUSY (last hour, of the GPUs each tenant holds now)\n%-20s %6s\n",
		    "TENANT", "BUSY");
	json_array_foreach(json_object_get(report, "tenants"), i, t) {
		const json_t *b = json_object_get(t, "busyShare");

		if (json_is_number(b))
			strbuf_addf(out, "%-20s %5.1f%%\n", text(t, "name"),
				    json_number_value(b) * 100.0);
		else
			strbuf_addf(out, "%-20s %6s\n", text(t, "name"), "n/a");
	}
}

int pool_report_text(const json_t *report, struct strbuf *out)
{
	const json_t *flavors = json_object_get(report, "flavors");
	const json_t *tenants = json_object_get(report, "tenants");
	const json_t *f, *t, *q, *n;
	size_t i, k;

	if (!json_is_true(json_object_get(report, "synced")))
		strbuf_addf(out, "the pool is not known yet (Nodes and Pods not listed)\n");
	else {
		strbuf_addf(out, "%-20s %5s %6s %8s %9s %5s %12s  %s\n", "FLAVOR", "NODES",
			    "USABLE", "CAPACITY", "ALLOCATED", "FREE", "LARGEST-FREE",
			    "EXCLUDED");
		json_array_foreach(flavors, i, f) {
			size_t shown = 0;

			strbuf_addf(out, "%-20s %5lld %6lld %8lld %9lld %5lld %12lld  ",
				    text(f, "name"), num(f, "nodes"), num(f, "usable"),
				    num(f, "capacity"), num(f, "allocated"), num(f, "free"),
				    num(f, "largestFree"));
			json_array_foreach(json_object_get(f, "nodeList"), k, n) {
				if (strcmp(text(n, "state"), "usable") == 0)
					continue;
				if (shown++ == 3) {
					strbuf_addf(out, ", ...");
					break;
				}
				/* As admission words it (policy/decide-pool.c): the
				 * signal for health and taints, else the state. */
				strbuf_addf(out, "%s%s (%s)", shown > 1 ? ", " : "",
					    text(n, "name"),
					    strcmp(text(n, "state"), "health") == 0 ||
							    strcmp(text(n, "state"),
								   "tainted") == 0
						    ? text(n, "why")
						    : text(n, "state"));
			}
			strbuf_addf(out, "%s\n", shown ? "" : "-");
		}
		effective_text(flavors, out);
		devices_text(flavors, out);
	}
	out_for_health(flavors, out);
	strbuf_addf(out, "\n%-20s %-20s %6s %8s %9s %6s\n", "TENANT", "FLAVOR", "USED",
		    "NOMINAL", "BORROWED", "LENT");
	json_array_foreach(tenants, i, t)
		json_array_foreach(json_object_get(t, "quota"), k, q)
			strbuf_addf(out, "%-20s %-20s %6lld %8lld %9lld %6lld\n",
				    text(t, "name"), text(q, "flavor"), num(q, "used"),
				    num(q, "nominal"), num(q, "borrowed"), num(q, "lent"));
	idle_text(report, out);
	return strbuf_failed(out) ? -1 : 0;
}
