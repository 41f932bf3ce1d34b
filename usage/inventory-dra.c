/* The inventory's DRA part: ResourceSlices, DeviceTaintRules,
 * ResourceClaims' allocations and DeviceClasses, and the devices they
 * put on the nodes' views (docs/design/dra.md D3). */
#include "usage/inventory-impl.h"

#include "policy/k8s.h"
#include "policy/policy.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
	if (inv_grow((void **)&t->e, &t->cap, t->n + 1, sizeof(*t->e)) < 0 ||
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
bool inv_dra_table_drop(struct dra_table *t, bool all)
{
	bool any = false;

	for (size_t i = t->n; i-- > 0;)
		if (all || t->e[i]->stale) {
			dra_table_remove_at(t, i);
			any = true;
		}
	return any;
}

void inv_dra_table_release(struct dra_table *t)
{
	inv_dra_table_drop(t, true);
	free(t->e);
	strmap_release(&t->index);
}

struct dra_table *inv_dra_table(struct inventory *inv, enum inventory_kind kind)
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
	s->node.counter_sets = NULL;
	s->node.n_counter_sets = 0;
}

static void detach_all(struct inventory *inv)
{
	for (size_t i = 0; inv->attached && i < inv->n_slots; i++)
		slot_detach(inv->slots[i]);
	inv->attached = false;
	arena_release(&inv->dev_arena);
	arena_init(&inv->dev_arena);
}

/* Under mu: kind's entries changed.  Slices and rules take the slots'
 * devices with them (those point at their strings); claims only what
 * the devices say. */
void inv_dra_changed(struct inventory *inv, enum inventory_kind kind)
{
	if (kind == INVENTORY_DEVICE_CLASSES)
		return;
	inv->dra_serial++;
	if (kind == INVENTORY_SLICES)
		inv->slice_serial++;
	if (kind != INVENTORY_CLAIMS)
		detach_all(inv);
}

/* Puts an entry of kind for key, copied by copy (false: out of memory)
 * from `from` into its arena, outside the lock.  -1 when out of memory. */
static int dra_put(struct inventory *inv, enum inventory_kind kind, const char *key,
		   bool (*copy)(struct dra_entry *e, const void *from), const void *from)
{
	struct dra_entry *e = dra_entry_new(key);
	int rc = -1;

	if (!e || !copy(e, from)) {
		dra_entry_free(e);
		return -1;
	}
	pthread_mutex_lock(&inv->mu);
	if (dra_table_take(inv_dra_table(inv, kind), e) == 0) {
		inv_dra_changed(inv, kind);
		rc = 0;
	}
	pthread_mutex_unlock(&inv->mu);
	return rc;
}

static void dra_delete(struct inventory *inv, enum inventory_kind kind, const char *key)
{
	struct dra_table *t = inv_dra_table(inv, kind);
	size_t i;

	pthread_mutex_lock(&inv->mu);
	if (strmap_get(&t->index, key, &i)) {
		dra_table_remove_at(t, i);
		inv_dra_changed(inv, kind);
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

static bool copy_uses(struct arena *a, const struct pool_counter_use *u, size_t n,
		      const struct pool_counter_use **out)
{
	struct pool_counter_use *c = arena_calloc(a, n + 1, sizeof(*c));

	*out = c;
	for (size_t i = 0; c && i < n; i++) {
		c[i].n_counters = u[i].n_counters;
		if (!(c[i].set = arena_strdup(a, u[i].set)) ||
		    !copy_labels(a, u[i].counters, u[i].n_counters, &c[i].counters))
			return false;
	}
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
	out->consumed = NULL; /* the claims' (devices_ensure) */
	out->name = arena_strdup(a, d->name);
	if (!is_string || !t || !out->name ||
	    !copy_labels(a, d->attributes, d->n_attributes, &out->attributes) ||
	    !copy_labels(a, d->capacity, d->n_capacity, &out->capacity) ||
	    !copy_uses(a, d->consumes, d->n_consumes, &out->consumes))
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

static bool copy_slice(struct dra_entry *e, const void *from)
{
	const struct inventory_slice *s = from;
	struct inventory_slice *c = &e->u.slice;
	struct pool_device *d = arena_calloc(&e->arena, s->n_devices + 1, sizeof(*d));
	bool ok = d != NULL;

	*c = *s;
	c->name = e->key;
	c->driver = dup_or_null(&e->arena, s->driver ? s->driver : "", &ok);
	c->pool = dup_or_null(&e->arena, s->pool ? s->pool : "", &ok);
	c->node = dup_or_null(&e->arena, s->node, &ok);
	struct pool_counter_set *cs =
		arena_calloc(&e->arena, s->n_counter_sets + 1, sizeof(*cs));

	ok = ok && cs;
	for (size_t i = 0; ok && i < s->n_devices; i++)
		ok = copy_device(&e->arena, c, &s->devices[i], &d[i]);
	for (size_t i = 0; ok && i < s->n_counter_sets; i++) {
		cs[i] = (struct pool_counter_set){.driver = c->driver, .pool = c->pool,
						  .n_counters = s->counter_sets[i].n_counters};
		ok = (cs[i].name = arena_strdup(&e->arena, s->counter_sets[i].name)) &&
		     copy_labels(&e->arena, s->counter_sets[i].counters,
				 s->counter_sets[i].n_counters, &cs[i].counters);
	}
	c->devices = d;
	c->counter_sets = cs;
	return ok;
}

int inventory_slice_put(struct inventory *inv, const struct inventory_slice *s)
{
	return dra_put(inv, INVENTORY_SLICES, s->name, copy_slice, s);
}

void inventory_slice_delete(struct inventory *inv, const char *name)
{
	dra_delete(inv, INVENTORY_SLICES, name);
}

static bool copy_rule(struct dra_entry *e, const void *from)
{
	const struct inventory_taint_rule *r = from;
	struct inventory_taint_rule *c = &e->u.rule;
	bool ok = true;

	*c = *r;
	c->name = e->key;
	c->driver = dup_or_null(&e->arena, r->driver, &ok);
	c->pool = dup_or_null(&e->arena, r->pool, &ok);
	c->device = dup_or_null(&e->arena, r->device, &ok);
	return ok && copy_taint(&e->arena, &r->taint, &c->taint);
}

int inventory_taint_rule_put(struct inventory *inv, const struct inventory_taint_rule *r)
{
	return dra_put(inv, INVENTORY_TAINT_RULES, r->name, copy_rule, r);
}

void inventory_taint_rule_delete(struct inventory *inv, const char *name)
{
	dra_delete(inv, INVENTORY_TAINT_RULES, name);
}

struct claim_devices {
	const struct inventory_claim_device *d;
	size_t n;
};

static bool copy_claim(struct dra_entry *e, const void *from)
{
	const struct claim_devices *h = from;
	struct inventory_claim_device *c = arena_calloc(&e->arena, h->n, sizeof(*c));
	bool ok = c != NULL;

	for (size_t i = 0; ok && i < h->n; i++) {
		c[i].driver = dup_or_null(&e->arena, h->d[i].driver, &ok);
		c[i].pool = dup_or_null(&e->arena, h->d[i].pool, &ok);
		c[i].device = dup_or_null(&e->arena, h->d[i].device, &ok);
		c[i].n_consumed = h->d[i].n_consumed;
		ok = ok && copy_labels(&e->arena, h->d[i].consumed, h->d[i].n_consumed,
				       &c[i].consumed);
	}
	e->u.claim.d = c;
	e->u.claim.n = h->n;
	return ok;
}

int inventory_claim_put(struct inventory *inv, const char *uid,
			const struct inventory_claim_device *d, size_t n)
{
	if (n == 0) {
		inventory_claim_delete(inv, uid);
		return 0;
	}
	return dra_put(inv, INVENTORY_CLAIMS, uid, copy_claim,
		       &(struct claim_devices){d, n});
}

void inventory_claim_delete(struct inventory *inv, const char *uid)
{
	dra_delete(inv, INVENTORY_CLAIMS, uid);
}

static bool copy_class(struct dra_entry *e, const void *from)
{
	bool ok = true;

	e->u.resource = dup_or_null(&e->arena, from, &ok);
	return ok;
}

int inventory_device_class_put(struct inventory *inv, const char *name,
			       const char *extended_resource)
{
	return dra_put(inv, INVENTORY_DEVICE_CLASSES, name, copy_class, extended_resource);
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
	if (inv_dra_table_drop(inv_dra_table(inv, kind), true))
		inv_dra_changed(inv, kind);
	inv->not_served[kind] = true;
	inv->relisting[kind] = false;
	inv->synced[kind] = true;
	pthread_mutex_unlock(&inv->mu);
}

/* Under mu: every DRA kind listed or not served, and slices served. */
bool inv_dra_known(const struct inventory *inv)
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
	known = inv_dra_known(inv);
	pthread_mutex_unlock(&inv->mu);
	return known;
}

bool inventory_dra_settled(struct inventory *inv)
{
	bool settled = true;

	pthread_mutex_lock(&inv->mu);
	for (int k = INVENTORY_SLICES; k < INVENTORY_KINDS; k++)
		settled = settled && inv->synced[k];
	pthread_mutex_unlock(&inv->mu);
	return settled;
}

/* Under mu: whether a DeviceClass serves resource through DRA. */
bool inv_class_serves(struct inventory *inv, const char *resource)
{
	const struct dra_table *t = inv_dra_table(inv, INVENTORY_DEVICE_CLASSES);

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
 * it, of how many; its counter sets at it (in inv->dev_arena), and
 * whether it is invalid as the scheduler's allocator holds it (a counter
 * set named twice, a device consuming a set or counter not published):
 * such a pool offers nothing. */
struct pool_gen {
	int64_t generation, seen, count;
	struct pool_counter_set *sets;
	size_t n_sets;
	bool invalid;
};

/* A claim's result that names a device; next: the device's next one
 * (SIZE_MAX: none). */
struct held_result {
	const struct inventory_claim_device *d;
	size_t next;
};

/* What one build reads: each pool's newest generation, and the devices
 * claims hold (keys in a; held maps a device to its first result). */
struct dra_build {
	struct arena a;
	struct strmap pools, held;
	struct pool_gen *gens;
	size_t n_gens;
	struct held_result *results;
	size_t n_results;
};

static int build_index(struct inventory *inv, struct dra_build *b)
{
	const struct dra_table *slices = inv_dra_table(inv, INVENTORY_SLICES);
	const struct dra_table *claims = inv_dra_table(inv, INVENTORY_CLAIMS);
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
			b->gens[k] = (struct pool_gen){.generation = s->generation, .count = s->slice_count};
			if (!(stored = arena_strdup(&b->a, key)) ||
			    strmap_put(&b->pools, stored, k, NULL) < 0)
				return -1;
		}
		g = &b->gens[k];
		if (s->generation > g->generation)
			*g = (struct pool_gen){.generation = s->generation, .count = s->slice_count};
		if (s->generation == g->generation)
			g->seen++;
	}
	for (size_t i = 0; i < claims->n; i++)
		b->n_results += claims->e[i]->u.claim.n;
	b->results = calloc(b->n_results + 1, sizeof(*b->results));
	if (!b->results)
		return -1;
	b->n_results = 0;
	for (size_t i = 0; i < claims->n; i++)
		for (size_t k = 0; k < claims->e[i]->u.claim.n; k++) {
			const struct inventory_claim_device *d = &claims->e[i]->u.claim.d[k];
			struct held_result *r = &b->results[b->n_results];
			size_t first;
			char *stored;

			if (!device_key(key, sizeof(key), d->driver, d->pool, d->device))
				continue;
			*r = (struct held_result){d, SIZE_MAX};
			if (strmap_get(&b->held, key, &first)) {
				/* Shares of one device: chained after the first. */
				r->next = b->results[first].next;
				b->results[first].next = b->n_results++;
				continue;
			}
			if (!(stored = arena_strdup(&b->a, key)) ||
			    strmap_put(&b->held, stored, b->n_results++, NULL) < 0)
				return -1;
		}
	return 0;
}

/* What the shares of device d (allocated: its first result at first)
 * consume of each of its capacities, summed in a; NULL when d allows a
 * single allocation, or out of memory (then *ok false). */
static const int64_t *consumed_of(const struct dra_build *b, size_t first,
				  const struct pool_device *d, struct arena *a, bool *ok)
{
	int64_t *sum;

	if (!d->multi_alloc || !d->n_capacity)
		return NULL;
	if (!(sum = arena_calloc(a, d->n_capacity, sizeof(*sum)))) {
		*ok = false;
		return NULL;
	}
	for (size_t r = first; r != SIZE_MAX; r = b->results[r].next) {
		const struct inventory_claim_device *c = b->results[r].d;

		for (size_t i = 0; i < d->n_capacity; i++) {
			int64_t whole, q = 0;

			if (k8s_quantity_whole(d->capacity[i].value, &whole) < 0)
				whole = INT64_MAX / 2;
			/* The scheduler writes every capacity of a shared
			 * device, zeros too; a share without any (or one gpugate
			 * cannot read) is counted as the whole device. */
			if (!c->n_consumed)
				q = whole;
			for (size_t k = 0; k < c->n_consumed; k++)
				if (strcmp(c->consumed[k].key, d->capacity[i].key) == 0) {
					if (k8s_quantity_whole(c->consumed[k].value, &q) < 0 || q < 0)
						q = whole;
					break;
				}
			sum[i] = q > INT64_MAX / 2 - sum[i] ? INT64_MAX / 2 : sum[i] + q;
		}
	}
	return sum;
}

/* The pool of slice s when s is of its newest generation and the pool
 * complete at it, else NULL. */
static struct pool_gen *slice_pool(const struct dra_build *b,
				   const struct inventory_slice *s)
{
	char key[1024];
	size_t k;

	if (!device_key(key, sizeof(key), s->driver, s->pool, NULL) ||
	    !strmap_get(&b->pools, key, &k))
		return NULL;
	if (b->gens[k].generation != s->generation || b->gens[k].seen != b->gens[k].count)
		return NULL;
	return &b->gens[k];
}

/* Whether slice s offers its devices to its node's slot: node-local, of
 * its pool's newest generation, the pool complete and valid at it. */
static struct slot *slice_slot(struct inventory *inv, const struct dra_build *b,
			       const struct inventory_slice *s)
{
	const struct pool_gen *g;
	struct slot *slot;

	if (!s->node || !(slot = inv_slot_find(inv, s->node)) || !slot->has_node)
		return NULL;
	if (!(g = slice_pool(b, s)) || g->invalid)
		return NULL;
	return slot;
}

static struct pool_counter_set *set_find(const struct pool_gen *g, const char *name)
{
	for (size_t i = 0; i < g->n_sets; i++)
		if (strcmp(g->sets[i].name, name) == 0)
			return &g->sets[i];
	return NULL;
}

static bool held(const struct dra_build *b, const struct pool_device *d)
{
	char key[1024];

	return device_key(key, sizeof(key), d->driver, d->pool, d->name) &&
	       strmap_get(&b->held, key, NULL);
}

/* Whether what d consumes names sets of g and counters of theirs. */
static bool uses_valid(const struct pool_gen *g, const struct pool_device *d)
{
	for (size_t i = 0; i < d->n_consumes; i++) {
		const struct pool_counter_set *cs = set_find(g, d->consumes[i].set);

		if (!cs)
			return false;
		for (size_t k = 0; k < d->consumes[i].n_counters; k++) {
			bool found = false;

			for (size_t c = 0; c < cs->n_counters && !found; c++)
				found = strcmp(cs->counters[c].key,
					       d->consumes[i].counters[k].key) == 0;
			if (!found)
				return false;
		}
	}
	return true;
}

/* Under mu: each current pool's counter sets (a shallow copy, strings the
 * slices'), its validity, and each set's users: the held devices of the
 * pool that consume from it, wherever they are (the allocator's
 * checkAvailableCounters).  Pass by pass over the current slices: sets,
 * validity, users counted, users put. */
static int build_counters(struct inventory *inv, struct dra_build *b)
{
	const struct dra_table *slices = inv_dra_table(inv, INVENTORY_SLICES);

	for (int pass = 0; pass < 5; pass++) {
		for (size_t i = 0; i < slices->n; i++) {
			const struct inventory_slice *sl = &slices->e[i]->u.slice;
			struct pool_gen *g = slice_pool(b, sl);

			if (!g)
				continue;
			if (pass == 0) {
				g->n_sets += sl->n_counter_sets;
				continue;
			}
			if (pass == 1) {
				for (size_t k = 0; k < sl->n_counter_sets; k++) {
					if (set_find(g, sl->counter_sets[k].name))
						g->invalid = true;
					g->sets[g->n_sets++] = sl->counter_sets[k];
					g->sets[g->n_sets - 1].users = NULL;
					g->sets[g->n_sets - 1].n_users = 0;
				}
				continue;
			}
			for (size_t k = 0; k < sl->n_devices; k++) {
				const struct pool_device *d = &sl->devices[k];

				if (pass == 2 && !uses_valid(g, d))
					g->invalid = true;
				if (pass < 3 || g->invalid || !held(b, d))
					continue;
				for (size_t u = 0; u < d->n_consumes; u++) {
					struct pool_counter_set *cs =
						set_find(g, d->consumes[u].set);

					if (pass == 3)
						cs->n_users++;
					else /* the array is ours, in dev_arena */
						((const struct pool_device **)cs->users)
							[cs->n_users++] = d;
				}
			}
		}
		/* Room for what the pass counted, for the next to fill. */
		for (size_t k = 0; k < b->n_gens && (pass == 0 || pass == 3); k++) {
			struct pool_gen *g = &b->gens[k];

			if (pass == 0) {
				if (g->n_sets && !(g->sets = arena_calloc(&inv->dev_arena,
									  g->n_sets,
									  sizeof(*g->sets))))
					return -1;
				g->n_sets = 0;
				continue;
			}
			for (size_t c = 0; c < g->n_sets; c++) {
				struct pool_counter_set *cs = &g->sets[c];

				if (cs->n_users &&
				    !(cs->users = arena_calloc(&inv->dev_arena, cs->n_users,
							       sizeof(*cs->users))))
					return -1;
				cs->n_users = 0;
			}
		}
	}
	return 0;
}

/* Under mu: slot s's node carries the counter sets of the pools of its
 * devices (a shallow copy in its dev_arena). */
static int slot_counter_sets(const struct dra_build *b, struct slot *s)
{
	const struct pool_gen **pools;
	struct pool_counter_set *sets;
	size_t n_pools = 0, n = 0;

	if (!s->n_devices)
		return 0;
	if (!(pools = arena_calloc(&s->dev_arena, s->n_devices, sizeof(*pools))))
		return -1;
	for (size_t i = 0; i < s->n_devices; i++) {
		const struct pool_gen *g;
		size_t k = 0, at;
		char buf[1024];

		if (!device_key(buf, sizeof(buf), s->devices[i].driver, s->devices[i].pool,
				NULL) ||
		    !strmap_get(&b->pools, buf, &at))
			continue;
		g = &b->gens[at];
		while (k < n_pools && pools[k] != g)
			k++;
		if (k == n_pools) {
			pools[n_pools++] = g;
			n += g->n_sets;
		}
	}
	if (!n)
		return 0;
	if (!(sets = arena_calloc(&s->dev_arena, n, sizeof(*sets))))
		return -1;
	n = 0;
	for (size_t k = 0; k < n_pools; k++)
		for (size_t c = 0; c < pools[k]->n_sets; c++)
			sets[n++] = pools[k]->sets[c];
	s->node.counter_sets = sets;
	s->node.n_counter_sets = n;
	return 0;
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
	const struct dra_table *rules = inv_dra_table(inv, INVENTORY_TAINT_RULES);
	struct pool_device *out = &s->devices[s->n_devices];
	struct pool_device_taint *t;
	size_t n = d->n_taints, first;
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
			 strmap_get(&b->held, key, &first);
	if (out->allocated) {
		bool ok = true;

		out->consumed = consumed_of(b, first, d, &s->dev_arena, &ok);
		if (!ok)
			return -1;
	}
	s->n_devices++;
	return 0;
}

/* Under mu: the slots' devices as of dra_serial, built when they are not
 * (docs/design/dra.md D3).  -1 when out of memory (no slot has any). */
int inv_devices_ensure(struct inventory *inv)
{
	const struct dra_table *slices = inv_dra_table(inv, INVENTORY_SLICES);
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
	if (build_index(inv, &b) < 0 || build_counters(inv, &b) < 0 ||
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
		if (slot_counter_sets(&b, inv->slots[k]) < 0)
			goto out;
	}
	inv->built_of = inv->dra_serial;
	rc = 0;
out:
	if (rc < 0)
		detach_all(inv);
	free(count);
	free(b.gens);
	free(b.results);
	strmap_release(&b.pools);
	strmap_release(&b.held);
	arena_release(&b.a);
	return rc;
}

/* Under mu: what flavor membership under p depends on besides the
 * policy: 0 for a policy without DRA flavors, else the slices' serial. */
uint64_t inv_dra_stamp(const struct inventory *inv, const struct policy *p)
{
	for (size_t i = 0; i < policy_flavor_count(p); i++)
		if (policy_flavor_at(p, i)->dra)
			return inv->slice_serial;
	return 0;
}
