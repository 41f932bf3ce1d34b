#include "usage/inventory.h"

#include "base/arena.h"
#include "base/strmap.h"
#include "policy/policy.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What the pods bound to one node ask for of one resource. */
struct alloc {
	char *resource;
	int64_t units;
};

/* One node name: its Node object (when known) and its pods' sums. */
struct slot {
	char *name; /* the key of slot_by_name */
	bool has_node;
	bool stale; /* not put since relist_begin */
	struct arena arena; /* the node's copy */
	struct pool_node node;
	struct alloc *alloc;
	size_t n_alloc, cap_alloc;
	/* Flavor membership under the policy of serial member_of (0: none):
	 * one byte per flavor, n_member of them. */
	uint64_t member_of;
	unsigned char *member;
	size_t n_member;
	uint64_t member_slices; /* ... and of slices (0: a policy without DRA) */
	/* Its DRA devices as the last build made them (devices_ensure;
	 * arrays in dev_arena, strings the slices' and rules', so a change
	 * of those detaches them first); node.devices points here. */
	struct arena dev_arena;
	struct pool_device *devices;
	size_t n_devices;
};

struct pod {
	char *uid; /* the key of pod_by_uid */
	char *node; /* NULL: holds nothing on any node */
	struct inventory_ask *asks;
	size_t n_asks;
	bool stale;
	/* Waiting for a node: its facts, strings in wait_arena. */
	bool waiting;
	struct inventory_waiting wait;
	struct arena wait_arena;
	/* Running, of a tenant: its facts, strings in wait_arena too. */
	bool running;
	struct inventory_running run;
};

/* One DRA object (ResourceSlice, DeviceTaintRule, ResourceClaim,
 * DeviceClass), copied into its own arena. */
struct dra_entry {
	char *key; /* in arena */
	bool stale;
	struct arena arena;
	union {
		struct inventory_slice slice;
		struct inventory_taint_rule rule;
		struct {
			struct inventory_claim_device *d;
			size_t n;
		} claim;
		const char *resource; /* a DeviceClass's extended resource, or NULL */
	} u;
};

/* The entries of one DRA kind by key. */
struct dra_table {
	struct strmap index;
	struct dra_entry **e;
	size_t n, cap;
};

#define DRA_KINDS (INVENTORY_KINDS - INVENTORY_SLICES)

struct inventory {
	pthread_mutex_t mu;
	struct strmap slot_by_name;
	struct slot **slots;
	size_t n_slots, cap_slots;
	struct strmap pod_by_uid;
	struct pod **pods;
	size_t n_pods, cap_pods;
	size_t n_nodes; /* slots with has_node */
	bool relisting[INVENTORY_KINDS], synced[INVENTORY_KINDS];
	/* DRA: the kinds' entries (by kind - INVENTORY_SLICES), which are
	 * not served; dra_serial counts changes of slices, rules and claims
	 * (what the devices say), slice_serial of slices (which devices
	 * there are: flavor membership); the slots' devices are built at
	 * dra_serial built_of, lazily, for DRA flavors only. */
	struct dra_table dra[DRA_KINDS];
	bool not_served[INVENTORY_KINDS];
	uint64_t dra_serial, slice_serial, built_of;
	bool attached; /* some slot may have devices */
	/* Scratch for views, grown as needed (under mu). */
	const struct pool_node **cand;
	struct pool_member *members;
	size_t cap_scratch;
};

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

static void dra_table_release(struct dra_table *t);

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
		dra_table_release(&inv->dra[k]);
	strmap_release(&inv->slot_by_name);
	strmap_release(&inv->pod_by_uid);
	pthread_mutex_destroy(&inv->mu);
	free(inv);
}

/* Grows *arr (of *cap elements of size) to hold need. */
static int grow(void **arr, size_t *cap, size_t need, size_t size)
{
	size_t n = *cap ? *cap : 16;
	void *p;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	p = realloc(*arr, n * size);
	if (!p)
		return -1;
	*arr = p;
	*cap = n;
	return 0;
}

/* ---- slots --------------------------------------------------------- */

static struct slot *slot_find(struct inventory *inv, const char *name)
{
	size_t i;

	return strmap_get(&inv->slot_by_name, name, &i) ? inv->slots[i] : NULL;
}

static struct slot *slot_get(struct inventory *inv, const char *name)
{
	struct slot *s = slot_find(inv, name);

	if (s)
		return s;
	if (grow((void **)&inv->slots, &inv->cap_slots, inv->n_slots + 1,
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
			if (grow((void **)&s->alloc, &s->cap_alloc, s->n_alloc + 1,
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
	s = slot_find(inv, name);
	if (s)
		node_forget(inv, s);
	pthread_mutex_unlock(&inv->mu);
}

/* ---- pods ---------------------------------------------------------- */

/* Takes p's units off its node. */
static void pod_unbind(struct inventory *inv, struct pod *p)
{
	struct slot *s = p->node ? slot_find(inv, p->node) : NULL;

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
	if (grow((void **)&inv->pods, &inv->cap_pods, inv->n_pods + 1,
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

/* ---- DRA objects --------------------------------------------------- */

static void dra_entry_free(struct dra_entry *e)
{
	if (!e)
		return;
	arena_release(&e->arena);
	free(e);
}

static struct dra_entry *dra_entry_new(const char *key)
{
	struct dra_entry *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	arena_init(&e->arena);
	if (!(e->key = arena_strdup(&e->arena, key))) {
		dra_entry_free(e);
		return NULL;
	}
	return e;
}

/* Takes e in place of the entry of its key, if any.  -1 when out of
 * memory (e is freed; what was known of the key is kept). */
static int dra_table_take(struct dra_table *t, struct dra_entry *e)
{
	size_t i;

	if (strmap_get(&t->index, e->key, &i)) {
		strmap_del(&t->index, t->e[i]->key, NULL);
		dra_entry_free(t->e[i]);
		t->e[i] = e;
		strmap_put(&t->index, e->key, i, NULL); /* a slot was just freed */
		return 0;
	}
	if (grow((void **)&t->e, &t->cap, t->n + 1, sizeof(*t->e)) < 0 ||
	    strmap_put(&t->index, e->key, t->n, NULL) < 0) {
		dra_entry_free(e);
		return -1;
	}
	t->e[t->n++] = e;
	return 0;
}

static void dra_table_remove_at(struct dra_table *t, size_t i)
{
	size_t last = --t->n;

	strmap_del(&t->index, t->e[i]->key, NULL);
	dra_entry_free(t->e[i]);
	if (i != last) {
		t->e[i] = t->e[last];
		strmap_del(&t->index, t->e[i]->key, NULL);
		strmap_put(&t->index, t->e[i]->key, i, NULL);
	}
}

/* Drops the entries of t that are stale (all: every one).  Whether any
 * went. */
static bool dra_table_drop(struct dra_table *t, bool all)
{
	bool any = false;

	for (size_t i = t->n; i-- > 0;)
		if (all || t->e[i]->stale) {
			dra_table_remove_at(t, i);
			any = true;
		}
	return any;
}

static void dra_table_release(struct dra_table *t)
{
	dra_table_drop(t, true);
	free(t->e);
	strmap_release(&t->index);
}

static struct dra_table *dra_table(struct inventory *inv, enum inventory_kind kind)
{
	return &inv->dra[kind - INVENTORY_SLICES];
}

static void slot_detach(struct slot *s)
{
	arena_release(&s->dev_arena);
	arena_init(&s->dev_arena);
	s->devices = NULL;
	s->n_devices = 0;
	s->node.devices = NULL;
	s->node.n_devices = 0;
}

static void detach_all(struct inventory *inv)
{
	for (size_t i = 0; inv->attached && i < inv->n_slots; i++)
		slot_detach(inv->slots[i]);
	inv->attached = false;
}

/* Under mu: kind's entries changed.  Slices and rules take the slots'
 * devices with them (those point at their strings); claims only what
 * the devices say. */
static void dra_changed(struct inventory *inv, enum inventory_kind kind)
{
	if (kind == INVENTORY_DEVICE_CLASSES)
		return;
	inv->dra_serial++;
	if (kind == INVENTORY_SLICES)
		inv->slice_serial++;
	if (kind != INVENTORY_CLAIMS)
		detach_all(inv);
}

/* Puts e (of kind) under mu, or frees it when the copy failed (-1). */
static int dra_put(struct inventory *inv, enum inventory_kind kind,
		   struct dra_entry *e, bool copied)
{
	int rc = -1;

	if (!copied) {
		dra_entry_free(e);
		return -1;
	}
	pthread_mutex_lock(&inv->mu);
	if (dra_table_take(dra_table(inv, kind), e) == 0) {
		dra_changed(inv, kind);
		rc = 0;
	}
	pthread_mutex_unlock(&inv->mu);
	return rc;
}

static void dra_delete(struct inventory *inv, enum inventory_kind kind, const char *key)
{
	struct dra_table *t = dra_table(inv, kind);
	size_t i;

	pthread_mutex_lock(&inv->mu);
	if (strmap_get(&t->index, key, &i)) {
		dra_table_remove_at(t, i);
		dra_changed(inv, kind);
	}
	pthread_mutex_unlock(&inv->mu);
}

static const char *dup_or_null(struct arena *a, const char *s, bool *ok)
{
	char *c = s ? arena_strdup(a, s) : NULL;

	if (s && !c)
		*ok = false;
	return c;
}

static bool copy_taint(struct arena *a, const struct pool_taint *t, struct pool_taint *out)
{
	out->key = arena_strdup(a, t->key);
	out->value = arena_strdup(a, t->value ? t->value : "");
	out->effect = arena_strdup(a, t->effect);
	return out->key && out->value && out->effect;
}

static bool copy_labels(struct arena *a, const struct pool_label *l, size_t n,
			const struct pool_label **out)
{
	struct pool_label *c = arena_calloc(a, n + 1, sizeof(*c));

	*out = c;
	for (size_t i = 0; c && i < n; i++)
		if (!(c[i].key = arena_strdup(a, l[i].key)) ||
		    !(c[i].value = arena_strdup(a, l[i].value)))
			return false;
	return c != NULL;
}

/* d of slice s into out, strings in a. */
static bool copy_device(struct arena *a, const struct inventory_slice *s,
			const struct pool_device *d, struct pool_device *out)
{
	bool *is_string = arena_calloc(a, d->n_attributes + 1, sizeof(*is_string));
	struct pool_device_taint *t = arena_calloc(a, d->n_taints + 1, sizeof(*t));

	*out = *d;
	out->driver = s->driver;
	out->pool = s->pool;
	out->allocated = false;
	out->name = arena_strdup(a, d->name);
	if (!is_string || !t || !out->name ||
	    !copy_labels(a, d->attributes, d->n_attributes, &out->attributes) ||
	    !copy_labels(a, d->capacity, d->n_capacity, &out->capacity))
		return false;
	if (d->attribute_is_string)
		memcpy(is_string, d->attribute_is_string,
		       d->n_attributes * sizeof(*is_string));
	for (size_t i = 0; i < d->n_taints; i++)
		if (!copy_taint(a, &d->taints[i].taint, &t[i].taint))
			return false;
	out->attribute_is_string = is_string;
	out->taints = t;
	return true;
}

int inventory_slice_put(struct inventory *inv, const struct inventory_slice *s)
{
	struct dra_entry *e = dra_entry_new(s->name);
	struct inventory_slice *c;
	struct pool_device *d;
	bool ok = e != NULL;

	if (!ok)
		return -1;
	c = &e->u.slice;
	*c = *s;
	c->name = e->key;
	c->driver = dup_or_null(&e->arena, s->driver ? s->driver : "", &ok);
	c->pool = dup_or_null(&e->arena, s->pool ? s->pool : "", &ok);
	c->node = dup_or_null(&e->arena, s->node, &ok);
	d = arena_calloc(&e->arena, s->n_devices + 1, sizeof(*d));
	ok = ok && d;
	for (size_t i = 0; ok && i < s->n_devices; i++)
		ok = copy_device(&e->arena, c, &s->devices[i], &d[i]);
	c->devices = d;
	return dra_put(inv, INVENTORY_SLICES, e, ok);
}

void inventory_slice_delete(struct inventory *inv, const char *name)
{
	dra_delete(inv, INVENTORY_SLICES, name);
}

int inventory_taint_rule_put(struct inventory *inv, const struct inventory_taint_rule *r)
{
	struct dra_entry *e = dra_entry_new(r->name);
	struct inventory_taint_rule *c;
	bool ok = e != NULL;

	if (!ok)
		return -1;
	c = &e->u.rule;
	*c = *r;
	c->name = e->key;
	c->driver = dup_or_null(&e->arena, r->driver, &ok);
	c->pool = dup_or_null(&e->arena, r->pool, &ok);
	c->device = dup_or_null(&e->arena, r->device, &ok);
	ok = ok && copy_taint(&e->arena, &r->taint, &c->taint);
	return dra_put(inv, INVENTORY_TAINT_RULES, e, ok);
}

void inventory_taint_rule_delete(struct inventory *inv, const char *name)
{
	dra_delete(inv, INVENTORY_TAINT_RULES, name);
}

int inventory_claim_put(struct inventory *inv, const char *uid,
			const struct inventory_claim_device *d, size_t n)
{
	struct dra_entry *e;
	struct inventory_claim_device *c;
	bool ok = true;

	if (n == 0) {
		inventory_claim_delete(inv, uid);
		return 0;
	}
	if (!(e = dra_entry_new(uid)))
		return -1;
	c = arena_calloc(&e->arena, n, sizeof(*c));
	ok = c != NULL;
	for (size_t i = 0; ok && i < n; i++) {
		c[i].driver = dup_or_null(&e->arena, d[i].driver, &ok);
		c[i].pool = dup_or_null(&e->arena, d[i].pool, &ok);
		c[i].device = dup_or_null(&e->arena, d[i].device, &ok);
	}
	e->u.claim.d = c;
	e->u.claim.n = n;
	return dra_put(inv, INVENTORY_CLAIMS, e, ok);
}

void inventory_claim_delete(struct inventory *inv, const char *uid)
{
	dra_delete(inv, INVENTORY_CLAIMS, uid);
}

int inventory_device_class_put(struct inventory *inv, const char *name,
			       const char *extended_resource)
{
	struct dra_entry *e = dra_entry_new(name);
	bool ok = e != NULL;

	if (!ok)
		return -1;
	e->u.resource = dup_or_null(&e->arena, extended_resource, &ok);
	return dra_put(inv, INVENTORY_DEVICE_CLASSES, e, ok);
}

void inventory_device_class_delete(struct inventory *inv, const char *name)
{
	dra_delete(inv, INVENTORY_DEVICE_CLASSES, name);
}

void inventory_not_served(struct inventory *inv, enum inventory_kind kind)
{
	if (kind < INVENTORY_SLICES || kind >= INVENTORY_KINDS)
		return;
	pthread_mutex_lock(&inv->mu);
	if (dra_table_drop(dra_table(inv, kind), true))
		dra_changed(inv, kind);
	inv->not_served[kind] = true;
	inv->relisting[kind] = false;
	inv->synced[kind] = true;
	pthread_mutex_unlock(&inv->mu);
}

/* Under mu: every DRA kind listed or not served, and slices served. */
static bool dra_known(const struct inventory *inv)
{
	for (int k = INVENTORY_SLICES; k < INVENTORY_KINDS; k++)
		if (!inv->synced[k])
			return false;
	return !inv->not_served[INVENTORY_SLICES];
}

bool inventory_dra_known(struct inventory *inv)
{
	bool known;

	pthread_mutex_lock(&inv->mu);
	known = dra_known(inv);
	pthread_mutex_unlock(&inv->mu);
	return known;
}

/* Under mu: whether a DeviceClass serves resource through DRA. */
static bool class_serves(struct inventory *inv, const char *resource)
{
	const struct dra_table *t = dra_table(inv, INVENTORY_DEVICE_CLASSES);

	for (size_t i = 0; i < t->n; i++)
		if (t->e[i]->u.resource && strcmp(t->e[i]->u.resource, resource) == 0)
			return true;
	return false;
}

/* ---- DRA devices of the nodes -------------------------------------- */

/* The key of a device (of a pool of a driver) in buf; false when it does
 * not fit (no such name is valid). */
static bool device_key(char *buf, size_t size, const char *driver, const char *pool,
		       const char *device)
{
	int n = snprintf(buf, size, "%s\x1f%s\x1f%s", driver ? driver : "",
			 pool ? pool : "", device ? device : "");

	return n >= 0 && (size_t)n < size;
}

/* The newest generation of a pool and how many of its slices are seen at
 * it, of how many. */
struct pool_gen {
	int64_t generation, seen, count;
};

/* What one build reads: each pool's newest generation, and the devices
 * claims hold (keys in a). */
struct dra_build {
	struct arena a;
	struct strmap pools, held;
	struct pool_gen *gens;
	size_t n_gens;
};

static int build_index(struct inventory *inv, struct dra_build *b)
{
	const struct dra_table *slices = dra_table(inv, INVENTORY_SLICES);
	const struct dra_table *claims = dra_table(inv, INVENTORY_CLAIMS);
	char key[1024];

	b->gens = calloc(slices->n + 1, sizeof(*b->gens));
	if (!b->gens)
		return -1;
	for (size_t i = 0; i < slices->n; i++) {
		const struct inventory_slice *s = &slices->e[i]->u.slice;
		struct pool_gen *g;
		size_t k;
		char *stored;

		if (!device_key(key, sizeof(key), s->driver, s->pool, NULL))
			continue;
		if (!strmap_get(&b->pools, key, &k)) {
			k = b->n_gens++;
			b->gens[k] = (struct pool_gen){s->generation, 0, s->slice_count};
			if (!(stored = arena_strdup(&b->a, key)) ||
			    strmap_put(&b->pools, stored, k, NULL) < 0)
				return -1;
		}
		g = &b->gens[k];
		if (s->generation > g->generation)
			*g = (struct pool_gen){s->generation, 0, s->slice_count};
		if (s->generation == g->generation)
			g->seen++;
	}
	for (size_t i = 0; i < claims->n; i++)
		for (size_t k = 0; k < claims->e[i]->u.claim.n; k++) {
			const struct inventory_claim_device *d = &claims->e[i]->u.claim.d[k];
			char *stored;

			if (!device_key(key, sizeof(key), d->driver, d->pool, d->device))
				continue;
			if (!(stored = arena_strdup(&b->a, key)) ||
			    strmap_put(&b->held, stored, 0, NULL) < 0)
				return -1;
		}
	return 0;
}

/* Whether slice s offers its devices to its node's slot: node-local, of
 * its pool's newest generation, the pool complete at it. */
static struct slot *slice_slot(struct inventory *inv, const struct dra_build *b,
			       const struct inventory_slice *s)
{
	char key[1024];
	struct slot *slot;
	size_t k;

	if (!s->node || !(slot = slot_find(inv, s->node)) || !slot->has_node)
		return NULL;
	if (!device_key(key, sizeof(key), s->driver, s->pool, NULL) ||
	    !strmap_get(&b->pools, key, &k))
		return NULL;
	if (b->gens[k].generation != s->generation || b->gens[k].seen != b->gens[k].count)
		return NULL;
	return slot;
}

static bool rule_matches(const struct inventory_taint_rule *r,
			 const struct pool_device *d)
{
	return r->has_selector && (!r->driver || strcmp(r->driver, d->driver) == 0) &&
	       (!r->pool || strcmp(r->pool, d->pool) == 0) &&
	       (!r->device || strcmp(r->device, d->name) == 0);
}

/* Device d of a slice as slot s shows it: the rules' taints after the
 * slice's, allocated when a claim holds it. */
static int build_device(struct inventory *inv, const struct dra_build *b,
			struct slot *s, const struct pool_device *d)
{
	const struct dra_table *rules = dra_table(inv, INVENTORY_TAINT_RULES);
	struct pool_device *out = &s->devices[s->n_devices];
	struct pool_device_taint *t;
	size_t n = d->n_taints;
	char key[1024];

	for (size_t i = 0; i < rules->n; i++)
		n += rule_matches(&rules->e[i]->u.rule, d);
	*out = *d;
	if (n > d->n_taints) {
		if (!(t = arena_calloc(&s->dev_arena, n, sizeof(*t))))
			return -1;
		memcpy(t, d->taints, d->n_taints * sizeof(*t));
		n = d->n_taints;
		for (size_t i = 0; i < rules->n; i++)
			if (rule_matches(&rules->e[i]->u.rule, d))
				t[n++] = (struct pool_device_taint){
					rules->e[i]->u.rule.taint, rules->e[i]->key};
		out->taints = t;
		out->n_taints = n;
	}
	out->allocated = device_key(key, sizeof(key), d->driver, d->pool, d->name) &&
			 strmap_get(&b->held, key, NULL);
	s->n_devices++;
	return 0;
}

/* Under mu: the slots' devices as of dra_serial, built when they are not
 * (docs/design/dra.md D3).  -1 when out of memory (no slot has any). */
static int devices_ensure(struct inventory *inv)
{
	const struct dra_table *slices = dra_table(inv, INVENTORY_SLICES);
	struct dra_build b = {0};
	size_t *count = NULL;
	int rc = -1;

	if (inv->built_of == inv->dra_serial)
		return 0;
	arena_init(&b.a);
	strmap_init(&b.pools);
	strmap_init(&b.held);
	detach_all(inv);
	inv->attached = true;
	if (build_index(inv, &b) < 0 ||
	    !(count = calloc(inv->n_slots + 1, sizeof(*count))))
		goto out;
	/* How many devices each slot gets, then the devices. */
	for (size_t i = 0; i < slices->n; i++) {
		struct slot *s = slice_slot(inv, &b, &slices->e[i]->u.slice);
		size_t k;

		if (s && strmap_get(&inv->slot_by_name, s->name, &k))
			count[k] += slices->e[i]->u.slice.n_devices;
	}
	for (size_t k = 0; k < inv->n_slots; k++)
		if (count[k] && !(inv->slots[k]->devices = arena_calloc(
					  &inv->slots[k]->dev_arena, count[k],
					  sizeof(struct pool_device))))
			goto out;
	for (size_t i = 0; i < slices->n; i++) {
		const struct inventory_slice *sl = &slices->e[i]->u.slice;
		struct slot *s = slice_slot(inv, &b, sl);

		for (size_t k = 0; s && k < sl->n_devices; k++)
			if (build_device(inv, &b, s, &sl->devices[k]) < 0)
				goto out;
	}
	for (size_t k = 0; k < inv->n_slots; k++) {
		inv->slots[k]->node.devices = inv->slots[k]->devices;
		inv->slots[k]->node.n_devices = inv->slots[k]->n_devices;
	}
	inv->built_of = inv->dra_serial;
	rc = 0;
out:
	if (rc < 0)
		detach_all(inv);
	free(count);
	free(b.gens);
	strmap_release(&b.pools);
	strmap_release(&b.held);
	arena_release(&b.a);
	return rc;
}

/* Under mu: what flavor membership under p depends on besides the
 * policy: 0 for a policy without DRA flavors, else the slices' serial. */
static uint64_t dra_stamp(const struct inventory *inv, const struct policy *p)
{
	for (size_t i = 0; i < policy_flavor_count(p); i++)
		if (policy_flavor_at(p, i)->dra)
			return inv->slice_serial;
	return 0;
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
		for (size_t i = 0; i < dra_table(inv, kind)->n; i++)
			dra_table(inv, kind)->e[i]->stale = true;
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
		} else if (dra_table_drop(dra_table(inv, kind), false)) {
			dra_changed(inv, kind);
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
		if (stamp && devices_ensure(inv) < 0)
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
	s = slot_find(inv, node);
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
	s = slot_find(inv, node);
	stamp = dra_stamp(inv, p);
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
	uint64_t stamp = dra_stamp(inv, p);
	size_t n = 0;

	if (grow((void **)&inv->cand, &inv->cap_scratch, inv->n_slots + 1,
		 sizeof(*inv->cand)) < 0)
		return -1;
	/* members is as long as cand: grow() moved cap_scratch already. */
	{
		void *m = realloc(inv->members, inv->cap_scratch * sizeof(*inv->members));

		if (!m)
			return -1;
		inv->members = m;
	}
	/* A DRA flavor's units are the devices: built now if they changed. */
	if (f->dra && devices_ensure(inv) < 0)
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
		known = known && dra_known(inv);
	else if (f->resource && class_serves(inv, f->resource))
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
	stamp = dra_stamp(inv, p);
	if (stamp)
		devices_ensure(inv); /* fn sees each node's devices */
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
