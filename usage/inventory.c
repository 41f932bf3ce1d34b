#include "usage/inventory-impl.h"

#include "policy/policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct inventory *inventory_new(void)
{
	struct inventory *inv = calloc(1, sizeof(*inv));

	if (!inv)
		return NULL;
	pthread_mutex_init(&inv->mu, NULL);
	strmap_init(&inv->slot_by_name);
	strmap_init(&inv->pod_by_uid);
	for (size_t k = 0; k < DRA_KINDS; k++)
		strmap_init(&inv->dra[k].index);
	inv->dra_serial = inv->slice_serial = 1; /* built_of 0: never built */
	arena_init(&inv->dev_arena);
	return inv;
}

static void slot_free(struct slot *s)
{
	arena_release(&s->arena);
	arena_release(&s->dev_arena);
	for (size_t i = 0; i < s->n_alloc; i++)
		free(s->alloc[i].resource);
	free(s->alloc);
	free(s->member);
	free(s->name);
	free(s);
}

static void pod_free(struct pod *p)
{
	arena_release(&p->wait_arena);
	for (size_t i = 0; i < p->n_asks; i++)
		free((char *)p->asks[i].resource);
	free(p->asks);
	free(p->node);
	free(p->uid);
	free(p);
}


void inventory_free(struct inventory *inv)
{
	if (!inv)
		return;
	for (size_t i = 0; i < inv->n_slots; i++)
		slot_free(inv->slots[i]);
	for (size_t i = 0; i < inv->n_pods; i++)
		pod_free(inv->pods[i]);
	free(inv->slots);
	free(inv->pods);
	free(inv->cand);
	free(inv->members);
	for (size_t k = 0; k < DRA_KINDS; k++)
		inv_dra_table_release(&inv->dra[k]);
	arena_release(&inv->dev_arena);
	strmap_release(&inv->slot_by_name);
	strmap_release(&inv->pod_by_uid);
	pthread_mutex_destroy(&inv->mu);
	free(inv);
}

/* ---- slots --------------------------------------------------------- */

static struct slot *slot_get(struct inventory *inv, const char *name)
{
	struct slot *s = inv_slot_find(inv, name);

	if (s)
		return s;
	if (inv_grow((void **)&inv->slots, &inv->cap_slots, inv->n_slots + 1,
		 sizeof(*inv->slots)) < 0)
		return NULL;
	s = calloc(1, sizeof(*s));
	if (!s || !(s->name = strdup(name))) {
		free(s);
		return NULL;
	}
	arena_init(&s->arena);
	arena_init(&s->dev_arena);
	if (strmap_put(&inv->slot_by_name, s->name, inv->n_slots, NULL) < 0) {
		slot_free(s);
		return NULL;
	}
	inv->slots[inv->n_slots++] = s;
	return s;
}

/* Drops s when it holds neither a node nor any allocation. */
static void slot_drop_if_empty(struct inventory *inv, struct slot *s)
{
	size_t i, last;

	if (s->has_node || s->n_alloc)
		return;
	if (!strmap_del(&inv->slot_by_name, s->name, &i))
		return;
	last = --inv->n_slots;
	if (i != last) {
		inv->slots[i] = inv->slots[last];
		strmap_del(&inv->slot_by_name, inv->slots[i]->name, NULL);
		strmap_put(&inv->slot_by_name, inv->slots[i]->name, i, NULL);
	}
	slot_free(s);
}

/* Adds sign x asks to the node's sums. */
static int slot_add(struct slot *s, const struct inventory_ask *asks, size_t n,
		    int sign)
{
	for (size_t k = 0; k < n; k++) {
		size_t i;

		for (i = 0; i < s->n_alloc; i++)
			if (strcmp(s->alloc[i].resource, asks[k].resource) == 0)
				break;
		if (i == s->n_alloc) {
			if (sign < 0)
				continue; /* never added (out of memory then) */
			if (inv_grow((void **)&s->alloc, &s->cap_alloc, s->n_alloc + 1,
				 sizeof(*s->alloc)) < 0)
				return -1;
			s->alloc[i].resource = strdup(asks[k].resource);
			if (!s->alloc[i].resource)
				return -1;
			s->alloc[i].units = 0;
			s->n_alloc++;
		}
		s->alloc[i].units += sign * asks[k].units;
		if (s->alloc[i].units <= 0) {
			free(s->alloc[i].resource);
			s->alloc[i] = s->alloc[--s->n_alloc];
		}
	}
	return 0;
}

static int64_t slot_allocated(const struct slot *s, const char *res)
{
	for (size_t i = 0; i < s->n_alloc; i++)
		if (strcmp(s->alloc[i].resource, res) == 0)
			return s->alloc[i].units;
	return 0;
}

/* ---- nodes --------------------------------------------------------- */

static int copy_node(struct arena *a, const struct pool_node *n, struct pool_node *out)
{
	struct pool_label *l = arena_calloc(a, n->n_labels + 1, sizeof(*l));
	struct pool_resource *r = arena_calloc(a, n->n_resources + 1, sizeof(*r));
	struct pool_taint *t = arena_calloc(a, n->n_taints + 1, sizeof(*t));
	struct pool_condition *c = arena_calloc(a, n->n_conditions + 1, sizeof(*c));

	*out = *n;
	out->name = arena_strdup(a, n->name);
	if (!l || !r || !t || !c || !out->name)
		return -1;
	if (n->health_record && !(out->health_record = arena_strdup(a, n->health_record)))
		return -1;
	for (size_t i = 0; i < n->n_labels; i++) {
		l[i].key = arena_strdup(a, n->labels[i].key);
		l[i].value = arena_strdup(a, n->labels[i].value);
		if (!l[i].key || !l[i].value)
			return -1;
	}
	for (size_t i = 0; i < n->n_resources; i++) {
		r[i] = n->resources[i];
		r[i].allocated = 0;
		if (!(r[i].name = arena_strdup(a, n->resources[i].name)))
			return -1;
	}
	for (size_t i = 0; i < n->n_taints; i++) {
		t[i].key = arena_strdup(a, n->taints[i].key);
		t[i].value = arena_strdup(a, n->taints[i].value);
		t[i].effect = arena_strdup(a, n->taints[i].effect);
		if (!t[i].key || !t[i].value || !t[i].effect)
			return -1;
	}
	for (size_t i = 0; i < n->n_conditions; i++) {
		c[i].type = arena_strdup(a, n->conditions[i].type);
		c[i].status = arena_strdup(a, n->conditions[i].status);
		c[i].reason = arena_strdup(a, n->conditions[i].reason);
		if (!c[i].type || !c[i].status || !c[i].reason)
			return -1;
	}
	out->labels = l;
	out->resources = r;
	out->taints = t;
	out->conditions = c;
	return 0;
}

int inventory_node_put(struct inventory *inv, const struct pool_node *n)
{
	struct arena a;
	struct pool_node copy;
	struct slot *s;
	int rc = -1;

	arena_init(&a);
	if (copy_node(&a, n, &copy) < 0) {
		arena_release(&a);
		return -1;
	}
	pthread_mutex_lock(&inv->mu);
	s = slot_get(inv, n->name);
	if (s) {
		arena_release(&s->arena);
		s->arena = a;
		s->node = copy;
		s->node.name = s->name;
		s->node.devices = s->devices;
		s->node.n_devices = s->n_devices;
		if (!s->has_node) {
			inv->n_nodes++;
			inv->dra_serial++; /* its devices are built again */
		}
		s->has_node = true;
		s->stale = false;
		s->member_of = 0; /* membership is computed again */
		rc = 0;
	} else {
		arena_release(&a);
	}
	pthread_mutex_unlock(&inv->mu);
	return rc;
}

static void node_forget(struct inventory *inv, struct slot *s)
{
	if (!s->has_node)
		return;
	arena_release(&s->arena);
	arena_init(&s->arena);
	memset(&s->node, 0, sizeof(s->node));
	s->has_node = false;
	s->member_of = 0;
	inv->n_nodes--;
	slot_drop_if_empty(inv, s);
}

void inventory_node_delete(struct inventory *inv, const char *name)
{
	struct slot *s;

	pthread_mutex_lock(&inv->mu);
	s = inv_slot_find(inv, name);
	if (s)
		node_forget(inv, s);
	pthread_mutex_unlock(&inv->mu);
}

/* ---- pods ---------------------------------------------------------- */

/* Takes p's units off its node. */
static void pod_unbind(struct inventory *inv, struct pod *p)
{
	struct slot *s = p->node ? inv_slot_find(inv, p->node) : NULL;

	if (s) {
		slot_add(s, p->asks, p->n_asks, -1);
		slot_drop_if_empty(inv, s);
	}
}

static void pod_remove(struct inventory *inv, size_t i)
{
	struct pod *p = inv->pods[i];
	size_t last = --inv->n_pods;

	strmap_del(&inv->pod_by_uid, p->uid, NULL);
	if (i != last) {
		inv->pods[i] = inv->pods[last];
		strmap_del(&inv->pod_by_uid, inv->pods[i]->uid, NULL);
		strmap_put(&inv->pod_by_uid, inv->pods[i]->uid, i, NULL);
	}
	pod_unbind(inv, p);
	pod_free(p);
}

static int copy_waiting(struct pod *p, const struct inventory_waiting *w)
{
	struct arena *a = &p->wait_arena;

	p->wait = *w;
	p->wait.uid = arena_strdup(a, w->uid ? w->uid : "");
	p->wait.namespace = arena_strdup(a, w->namespace ? w->namespace : "");
	p->wait.name = arena_strdup(a, w->name ? w->name : "");
	p->wait.tenant = arena_strdup(a, w->tenant ? w->tenant : "");
	p->wait.flavor = arena_strdup(a, w->flavor ? w->flavor : "");
	p->wait.scheduler = arena_strdup(a, w->scheduler ? w->scheduler : "");
	p->wait.gang = arena_strdup(a, w->gang ? w->gang : "");
	p->wait.gang_route = arena_strdup(a, w->gang_route ? w->gang_route : "");
	p->wait.class_name = arena_strdup(a, w->class_name ? w->class_name : "");
	p->waiting = true;
	return p->wait.uid && p->wait.namespace && p->wait.name && p->wait.tenant &&
			       p->wait.flavor && p->wait.scheduler && p->wait.gang &&
			       p->wait.gang_route && p->wait.class_name
		       ? 0
		       : -1;
}

static int copy_running(struct pod *p, const struct inventory_running *r)
{
	struct arena *a = &p->wait_arena;

	p->run = *r;
	p->run.uid = arena_strdup(a, r->uid ? r->uid : "");
	p->run.namespace = arena_strdup(a, r->namespace ? r->namespace : "");
	p->run.name = arena_strdup(a, r->name ? r->name : "");
	p->run.tenant = arena_strdup(a, r->tenant ? r->tenant : "");
	p->run.flavor = arena_strdup(a, r->flavor ? r->flavor : "");
	p->running = true;
	return p->run.uid && p->run.namespace && p->run.name && p->run.tenant &&
			       p->run.flavor
		       ? 0
		       : -1;
}

static struct pod *pod_new(const char *uid, const char *node,
			   const struct inventory_ask *asks, size_t n)
{
	struct pod *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	arena_init(&p->wait_arena);
	p->uid = strdup(uid);
	p->node = node ? strdup(node) : NULL;
	p->asks = n ? calloc(n, sizeof(*p->asks)) : NULL;
	if (!p->uid || (node && !p->node) || (n && !p->asks)) {
		pod_free(p);
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		p->asks[i].units = asks[i].units;
		p->asks[i].resource = strdup(asks[i].resource);
		p->n_asks = i + 1;
		if (!p->asks[i].resource) {
			pod_free(p);
			return NULL;
		}
	}
	return p;
}

int inventory_pod_put(struct inventory *inv, const struct inventory_placement *pl)
{
	struct pod *p = pod_new(pl->uid, pl->node, pl->asks, pl->n_asks);
	struct slot *s;
	size_t i;
	int rc = 0;

	if (p && ((pl->waiting && copy_waiting(p, pl->waiting) < 0) ||
		  (pl->running && copy_running(p, pl->running) < 0))) {
		pod_free(p);
		p = NULL;
	}
	pthread_mutex_lock(&inv->mu);
	if (strmap_get(&inv->pod_by_uid, pl->uid, &i))
		pod_remove(inv, i);
	if (!p)
		goto oom;
	if (p->node && p->n_asks) {
		s = slot_get(inv, p->node);
		if (!s || slot_add(s, p->asks, p->n_asks, 1) < 0) {
			if (s) {
				slot_add(s, p->asks, p->n_asks, -1);
				slot_drop_if_empty(inv, s);
			}
			goto oom;
		}
	}
	if (inv_grow((void **)&inv->pods, &inv->cap_pods, inv->n_pods + 1,
		 sizeof(*inv->pods)) < 0 ||
	    strmap_put(&inv->pod_by_uid, p->uid, inv->n_pods, NULL) < 0) {
		pod_unbind(inv, p);
		goto oom;
	}
	inv->pods[inv->n_pods++] = p;
	pthread_mutex_unlock(&inv->mu);
	return 0;
oom:
	if (p)
		pod_free(p);
	rc = -1;
	pthread_mutex_unlock(&inv->mu);
	return rc;
}

void inventory_pod_delete(struct inventory *inv, const char *uid)
{
	size_t i;

	pthread_mutex_lock(&inv->mu);
	if (strmap_get(&inv->pod_by_uid, uid, &i))
		pod_remove(inv, i);
	pthread_mutex_unlock(&inv->mu);
}

void inventory_running_each(struct inventory *inv,
			    void (*fn)(void *ctx, const struct inventory_running *r),
			    void *ctx)
{
	pthread_mutex_lock(&inv->mu);
	for (size_t i = 0; i < inv->n_pods; i++)
		if (inv->pods[i]->running)
			fn(ctx, &inv->pods[i]->run);
	pthread_mutex_unlock(&inv->mu);
}

size_t inventory_waiting_list(struct inventory *inv, int64_t before,
			      struct inventory_waiting *out, size_t max,
			      struct arena *a)
{
	size_t n = 0;

	pthread_mutex_lock(&inv->mu);
	for (size_t i = 0; i < inv->n_pods && n < max; i++) {
		const struct pod *p = inv->pods[i];
		struct inventory_waiting *w = &out[n];

		if (!p->waiting || p->wait.since > before)
			continue;
		*w = p->wait;
		w->uid = arena_strdup(a, p->wait.uid);
		w->namespace = arena_strdup(a, p->wait.namespace);
		w->name = arena_strdup(a, p->wait.name);
		w->tenant = arena_strdup(a, p->wait.tenant);
		w->flavor = arena_strdup(a, p->wait.flavor);
		w->scheduler = arena_strdup(a, p->wait.scheduler);
		w->gang = arena_strdup(a, p->wait.gang);
		w->gang_route = arena_strdup(a, p->wait.gang_route);
		w->class_name = arena_strdup(a, p->wait.class_name);
		if (w->uid && w->namespace && w->name && w->tenant && w->flavor &&
		    w->scheduler && w->gang && w->gang_route && w->class_name)
			n++;
	}
	pthread_mutex_unlock(&inv->mu);
	return n;
}


/* ---- relists ------------------------------------------------------- */

void inventory_relist_begin(struct inventory *inv, enum inventory_kind kind)
{
	pthread_mutex_lock(&inv->mu);
	inv->relisting[kind] = true;
	if (kind == INVENTORY_NODES)
		for (size_t i = 0; i < inv->n_slots; i++)
			inv->slots[i]->stale = inv->slots[i]->has_node;
	else if (kind == INVENTORY_PODS)
		for (size_t i = 0; i < inv->n_pods; i++)
			inv->pods[i]->stale = true;
	else
		for (size_t i = 0; i < inv_dra_table(inv, kind)->n; i++)
			inv_dra_table(inv, kind)->e[i]->stale = true;
	pthread_mutex_unlock(&inv->mu);
}

void inventory_relist_end(struct inventory *inv, enum inventory_kind kind)
{
	pthread_mutex_lock(&inv->mu);
	if (inv->relisting[kind]) {
		if (kind == INVENTORY_NODES) {
			/* node_forget may swap-remove: walk from the end. */
			for (size_t i = inv->n_slots; i-- > 0;)
				if (i < inv->n_slots && inv->slots[i]->stale) {
					inv->slots[i]->stale = false;
					node_forget(inv, inv->slots[i]);
				}
		} else if (kind == INVENTORY_PODS) {
			for (size_t i = inv->n_pods; i-- > 0;)
				if (inv->pods[i]->stale)
					pod_remove(inv, i);
		} else if (inv_dra_table_drop(inv_dra_table(inv, kind), false)) {
			inv_dra_changed(inv, kind);
		}
	}
	if (kind >= INVENTORY_SLICES)
		inv->not_served[kind] = false;
	inv->relisting[kind] = false;
	inv->synced[kind] = true;
	pthread_mutex_unlock(&inv->mu);
}

bool inventory_synced(struct inventory *inv)
{
	bool s;

	pthread_mutex_lock(&inv->mu);
	s = inv->synced[INVENTORY_NODES] && inv->synced[INVENTORY_PODS];
	pthread_mutex_unlock(&inv->mu);
	return s;
}

size_t inventory_nodes(struct inventory *inv)
{
	size_t n;

	pthread_mutex_lock(&inv->mu);
	n = inv->n_nodes;
	pthread_mutex_unlock(&inv->mu);
	return n;
}

size_t inventory_pods(struct inventory *inv)
{
	size_t n;

	pthread_mutex_lock(&inv->mu);
	n = inv->n_pods;
	pthread_mutex_unlock(&inv->mu);
	return n;
}

/* ---- views --------------------------------------------------------- */

/* Is s's node in flavor f of p (cached per policy and, stamp not 0, per
 * slices: dra_stamp)? */
static bool member(struct inventory *inv, struct slot *s, const struct policy *p,
		   const struct policy_flavor *f, uint64_t stamp)
{
	size_t n = policy_flavor_count(p);

	if (!s->has_node)
		return false;
	if (s->member_of != policy_serial(p) || s->n_member != n ||
	    s->member_slices != stamp) {
		unsigned char *m;

		/* out of memory: decide without the cache */
		if (stamp && inv_devices_ensure(inv) < 0)
			return pool_node_in_flavor(&s->node, f);
		if (!(m = realloc(s->member, n ? n : 1)))
			return pool_node_in_flavor(&s->node, f);
		for (size_t i = 0; i < n; i++)
			m[i] = pool_node_in_flavor(&s->node, policy_flavor_at(p, i));
		s->member = m;
		s->n_member = n;
		s->member_of = policy_serial(p);
		s->member_slices = stamp;
	}
	return f->index < s->n_member && s->member[f->index];
}

bool inventory_node_label(struct inventory *inv, const char *node, const char *key,
			  char *out, size_t size)
{
	const char *v = NULL;
	struct slot *s;

	pthread_mutex_lock(&inv->mu);
	s = inv_slot_find(inv, node);
	if (s && s->has_node)
		v = pool_node_label(&s->node, key);
	if (v)
		snprintf(out, size, "%s", v);
	pthread_mutex_unlock(&inv->mu);
	return v != NULL;
}

const struct policy_flavor *inventory_node_flavor(struct inventory *inv,
						  const struct policy *p,
						  const char *node)
{
	const struct policy_flavor *f = NULL;
	struct slot *s;
	uint64_t stamp;

	pthread_mutex_lock(&inv->mu);
	s = inv_slot_find(inv, node);
	stamp = inv_dra_stamp(inv, p);
	for (size_t i = 0; s && !f && i < policy_flavor_count(p); i++)
		if (member(inv, s, p, policy_flavor_at(p, i), stamp))
			f = policy_flavor_at(p, i);
	pthread_mutex_unlock(&inv->mu);
	return f;
}

/* Under mu: v for f, over the scratch buffers.  -1 when out of memory. */
static int view(struct inventory *inv, const struct policy *p,
		const struct policy_flavor *f, const struct policy_health *h,
		struct pool_view *v)
{
	uint64_t stamp = inv_dra_stamp(inv, p);
	size_t n = 0;

	if (inv_grow((void **)&inv->cand, &inv->cap_scratch, inv->n_slots + 1,
		 sizeof(*inv->cand)) < 0)
		return -1;
	/* members is as long as cand: inv_grow() moved cap_scratch already. */
	{
		void *m = realloc(inv->members, inv->cap_scratch * sizeof(*inv->members));

		if (!m)
			return -1;
		inv->members = m;
	}
	/* A DRA flavor's units are the devices: built now if they changed. */
	if (f->dra && inv_devices_ensure(inv) < 0)
		return -1;
	for (size_t i = 0; i < inv->n_slots; i++) {
		struct slot *s = inv->slots[i];

		if (!member(inv, s, p, f, stamp))
			continue;
		for (size_t k = 0; k < s->node.n_resources; k++) {
			struct pool_resource *r = (struct pool_resource *)&s->node.resources[k];

			r->allocated = slot_allocated(s, r->name);
		}
		inv->cand[n++] = &s->node;
	}
	pool_view_build(inv->cand, n, f, h, inv->members, v);
	return 0;
}

void inventory_fit(struct inventory *inv, const struct policy *p,
		   const struct policy_flavor *f, int64_t per_pod, int64_t pods,
		   const char *topology_key, struct pool_check *out)
{
	inventory_fit_in(inv, p, f, per_pod, pods, topology_key, NULL, out);
}

void inventory_fit_in(struct inventory *inv, const struct policy *p,
		      const struct policy_flavor *f, int64_t per_pod, int64_t pods,
		      const char *topology_key, const char *domain, struct pool_check *out)
{
	struct pool_view v;
	bool known;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&inv->mu);
	/* A cluster without a single Node (a control plane alone) says
	 * nothing about its pool; a DRA flavor's needs every DRA kind; a
	 * resource that a DeviceClass serves may come from devices no node
	 * advertises. */
	known = inv->synced[INVENTORY_NODES] && inv->synced[INVENTORY_PODS] &&
		inv->n_nodes > 0;
	if (f->dra)
		known = known && inv_dra_known(inv);
	else if (f->resource && inv_class_serves(inv, f->resource))
		known = false;
	if (known && view(inv, p, f, policy_health(p), &v) == 0)
		pool_check_build_in(&v, per_pod, pods, topology_key, domain, out);
	pthread_mutex_unlock(&inv->mu);
}

int inventory_each(struct inventory *inv, const struct policy *p,
		   void (*fn)(void *ctx, const struct pool_view *v), void *ctx)
{
	int rc = 0;

	pthread_mutex_lock(&inv->mu);
	for (size_t i = 0; i < policy_flavor_count(p) && rc == 0; i++) {
		struct pool_view v;

		if (view(inv, p, policy_flavor_at(p, i), policy_health(p), &v) < 0)
			rc = -1;
		else
			fn(ctx, &v);
	}
	pthread_mutex_unlock(&inv->mu);
	return rc;
}

void inventory_each_node(struct inventory *inv, const struct policy *p,
			 void (*fn)(void *ctx, const struct pool_node *n,
				    const struct policy_flavor *f, enum pool_exclusion e,
				    const char *why),
			 void *ctx)
{
	char why[160];
	uint64_t stamp;

	pthread_mutex_lock(&inv->mu);
	stamp = inv_dra_stamp(inv, p);
	if (stamp)
		inv_devices_ensure(inv); /* fn sees each node's devices */
	for (size_t i = 0; i < inv->n_slots; i++) {
		struct slot *s = inv->slots[i];
		const struct policy_flavor *f = NULL;
		enum pool_exclusion e = POOL_USABLE;

		if (!s->has_node)
			continue;
		for (size_t k = 0; !f && k < policy_flavor_count(p); k++)
			if (member(inv, s, p, policy_flavor_at(p, k), stamp))
				f = policy_flavor_at(p, k);
		why[0] = '\0';
		if (f)
			e = pool_node_exclusion(&s->node, f, policy_health(p), why, sizeof(why));
		fn(ctx, &s->node, f, e, why);
	}
	pthread_mutex_unlock(&inv->mu);
}

struct summaries {
	struct pool_summary *v;
	size_t n, max;
};

static void summarize_one(void *ctx, const struct pool_view *v)
{
	struct summaries *s = ctx;

	if (s->n < s->max)
		pool_summarize(v, &s->v[s->n++]);
}

long inventory_summaries(struct inventory *inv, const struct policy *p,
			 struct pool_summary *out, size_t max)
{
	struct summaries s = {out, 0, max};

	if (inventory_each(inv, p, summarize_one, &s) < 0)
		return -1;
	return (long)s.n;
}
