#include "policy/pool.h"

#include "policy/health.h"
#include "policy/k8s.h"
#include "policy/policy.h"

#include "base/strmap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *pool_exclusion_name(enum pool_exclusion e)
{
	switch (e) {
	case POOL_USABLE: return "usable";
	case POOL_HEALTH: return "health";
	case POOL_VALIDATING: return "validating";
	case POOL_NOT_READY: return "NotReady";
	case POOL_CORDONED: return "cordoned";
	case POOL_TAINTED: return "tainted";
	}
	return "?";
}

const char *pool_verdict_name(enum pool_verdict v)
{
	switch (v) {
	case POOL_FITS: return "fits";
	case POOL_UNKNOWN: return "unknown";
	case POOL_NONE_USABLE: return "none-usable";
	case POOL_NEVER_FITS: return "never-fits";
	case POOL_NOT_NOW: return "not-now";
	}
	return "?";
}

void pool_signal_split(const char *s, bool with_effect, struct pool_signal *out)
{
	static const char *const effects[] = {"NoSchedule", "PreferNoSchedule",
					      "NoExecute"};
	size_t len = strlen(s);
	const char *eq;

	memset(out, 0, sizeof(*out));
	if (with_effect) {
		const char *colon = strrchr(s, ':');

		for (size_t i = 0; colon && i < sizeof(effects) / sizeof(effects[0]); i++)
			if (strcmp(colon + 1, effects[i]) == 0) {
				out->effect = colon + 1;
				len = (size_t)(colon - s);
			}
	}
	eq = memchr(s, '=', len);
	out->key_len = eq ? (size_t)(eq - s) : len;
	if (eq) {
		out->has_value = true;
		out->value = eq + 1;
		out->value_len = len - out->key_len - 1;
	}
}

const char *pool_node_label(const struct pool_node *n, const char *key)
{
	for (size_t i = 0; i < n->n_labels; i++)
		if (strcmp(n->labels[i].key, key) == 0)
			return n->labels[i].value;
	return NULL;
}

const struct pool_resource *pool_node_resource(const struct pool_node *n,
					       const char *res)
{
	for (size_t i = 0; i < n->n_resources; i++)
		if (strcmp(n->resources[i].name, res) == 0)
			return &n->resources[i];
	return NULL;
}

bool pool_node_in_flavor(const struct pool_node *n, const struct policy_flavor *f)
{
	for (size_t i = 0; i < f->n_node_selector; i++) {
		const char *v = pool_node_label(n, f->node_selector[i].key);

		if (!v || strcmp(v, f->node_selector[i].value) != 0)
			return false;
	}
	/* A DRA flavor's devices are not a node's extended resource. */
	if (f->dra) {
		for (size_t i = 0; i < n->n_devices; i++)
			if (pool_device_in_flavor(&n->devices[i], f))
				return true;
		return false;
	}
	return f->resource && pool_node_resource(n, f->resource) != NULL;
}

/* The entry of ls (n of them) whose qualified name is dra name `name`
 * under driver (k8s_dra_name_split), or -1. */
static long qualified(const struct pool_label *ls, size_t n, const char *driver,
		      const char *name)
{
	struct k8s_dra_name q;

	k8s_dra_name_split(driver, name, &q);
	for (size_t i = 0; i < n; i++) {
		const char *k = ls[i].key;

		if (strncmp(k, q.domain, q.domain_len) == 0 && k[q.domain_len] == '/' &&
		    strcmp(k + q.domain_len + 1, q.id) == 0)
			return (long)i;
	}
	return -1;
}

bool pool_device_in_flavor(const struct pool_device *d, const struct policy_flavor *f)
{
	const struct policy_dra *dra = f->dra;

	if (!dra || strcmp(d->driver, dra->driver) != 0)
		return false;
	for (size_t i = 0; i < dra->n_attributes; i++) {
		long k = qualified(d->attributes, d->n_attributes, dra->driver,
				   dra->attributes[i].key);

		if (k < 0 || !d->attribute_is_string[k] ||
		    strcmp(d->attributes[k].value, dra->attributes[i].value) != 0)
			return false;
	}
	for (size_t i = 0; i < dra->n_min_capacity; i++) {
		long k = qualified(d->capacity, d->n_capacity, dra->driver,
				   dra->min_capacity[i].key);
		int cmp;

		if (k < 0 ||
		    k8s_quantity_cmp(d->capacity[k].value, dra->min_capacity[i].value,
				     &cmp) < 0 ||
		    cmp < 0)
			return false;
	}
	/* Shared by capacity: a device the scheduler allocates more than
	 * once, that has the capacity (the template's selector and request
	 * say the same). */
	if (dra->shared && (!d->multi_alloc || qualified(d->capacity, d->n_capacity,
							  dra->driver, dra->shared->name) < 0))
		return false;
	return true;
}

void pool_device_units(const struct pool_device *d, const struct policy_flavor *f,
		       int64_t *units, int64_t *used)
{
	const struct policy_dra_share *sh = f->dra ? f->dra->shared : NULL;
	long k = sh ? qualified(d->capacity, d->n_capacity, f->dra->driver, sh->name) : -1;
	int64_t cap, left;

	*units = 1;
	*used = d->allocated ? 1 : 0;
	if (!sh)
		return;
	*units = *used = 0;
	if (k < 0 || sh->per_unit_value <= 0 ||
	    k8s_quantity_whole(d->capacity[k].value, &cap) < 0 || cap < 0)
		return;
	*units = cap / sh->per_unit_value;
	/* What new shares still fit: the capacity the allocations left, in
	 * whole units; the rest is used (a share rounded up by the
	 * device's requestPolicy uses what it takes). */
	left = d->consumed ? cap - d->consumed[k] : cap;
	left = left > 0 ? left / sh->per_unit_value : 0;
	*used = *units - (left < *units ? left : *units);
}

/* The scheduler's rule (TolerationsTolerateTaint, and resourceclaim's
 * ToleratesTaint for devices): an empty key with Exists tolerates every
 * taint; an empty effect every effect.  (An empty key with Equal, which
 * the validation refuses, tolerates nothing here.) */
static bool tolerated(const struct policy_toleration *xs, size_t n,
		      const struct pool_taint *t)
{
	for (size_t i = 0; i < n; i++) {
		const struct policy_toleration *x = &xs[i];
		bool exists = strcmp(x->op, "Exists") == 0;

		if (x->effect[0] && strcmp(x->effect, t->effect) != 0)
			continue;
		if (!x->key[0]) {
			if (exists)
				return true;
			continue;
		}
		if (strcmp(x->key, t->key) != 0)
			continue;
		if (exists || strcmp(x->value, t->value) == 0)
			return true;
	}
	return false;
}

/* A taint that keeps pods (or claims) away: NoSchedule or NoExecute. */
static bool repels(const struct pool_taint *t)
{
	return strcmp(t->effect, "NoSchedule") == 0 || strcmp(t->effect, "NoExecute") == 0;
}

static bool health_taint(const struct policy_health *h, const struct pool_taint *t)
{
	for (size_t i = 0; h && i < h->n_taints; i++) {
		const struct policy_health_taint *x = &h->taints[i];

		if (strcmp(x->key, t->key) == 0 &&
		    (!x->value || strcmp(x->value, t->value) == 0) &&
		    (!x->effect || strcmp(x->effect, t->effect) == 0))
			return true;
	}
	return false;
}

static void taint_text(const struct pool_taint *t, char *why, size_t size)
{
	snprintf(why, size, "taint %s%s%s:%s", t->key, t->value[0] ? "=" : "",
		 t->value, t->effect);
}

bool pool_device_tainted(const struct pool_device *d, const struct policy_flavor *f,
			 char *why, size_t size)
{
	why[0] = '\0';
	for (size_t i = 0; i < d->n_taints; i++) {
		const struct pool_device_taint *t = &d->taints[i];
		int n = 0;

		if (!repels(&t->taint) ||
		    (f->dra && tolerated(f->dra->tolerations, f->dra->n_tolerations,
					 &t->taint)))
			continue;
		if (t->rule)
			n = snprintf(why, size, "DeviceTaintRule %s: ", t->rule);
		if (n >= 0 && (size_t)n < size)
			taint_text(&t->taint, why + n, size - (size_t)n);
		return true;
	}
	return false;
}

/* ---- counters (KEP-4815 partitionable devices) ---------------------- */

static const struct pool_counter_set *counter_set_of(const struct pool_node *n,
						     const struct pool_device *d,
						     const char *name)
{
	for (size_t i = 0; i < n->n_counter_sets; i++) {
		const struct pool_counter_set *s = &n->counter_sets[i];

		if (strcmp(s->name, name) == 0 && strcmp(s->driver, d->driver) == 0 &&
		    strcmp(s->pool, d->pool) == 0)
			return s;
	}
	return NULL;
}

static const char *label_value(const struct pool_label *ls, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(ls[i].key, key) == 0)
			return ls[i].value;
	return NULL;
}

/* What device d consumes of counter `counter` of set `set`, or NULL. */
static const char *consumed(const struct pool_device *d, const char *set,
			    const char *counter)
{
	for (size_t i = 0; i < d->n_consumes; i++)
		if (strcmp(d->consumes[i].set, set) == 0)
			return label_value(d->consumes[i].counters,
					   d->consumes[i].n_counters, counter);
	return NULL;
}

/* The terms of one counter's sum: what some devices consume of it, then
 * an extra quantity (NULL: none). */
struct counter_terms {
	const struct pool_device *const *devs;
	size_t n_devs;
	const char *set, *counter, *extra;
};

static const char *counter_term(void *ctx, size_t i)
{
	const struct counter_terms *t = ctx;

	return i < t->n_devs ? consumed(t->devs[i], t->set, t->counter) : t->extra;
}

/* Whether what t sums exceeds value (an unreadable quantity does: the
 * apiserver validated them, so it is a bug to be seen, not room). */
static bool exceeds(struct counter_terms *t, const char *value)
{
	int cmp;

	return k8s_quantity_sum_cmp(t->n_devs + 1, counter_term, t, value, &cmp) < 0 ||
	       cmp > 0;
}

bool pool_device_blocked(const struct pool_node *n, const struct pool_device *d,
			 char *why, size_t size)
{
	why[0] = '\0';
	for (size_t i = 0; i < d->n_consumes; i++) {
		const struct pool_counter_use *u = &d->consumes[i];
		const struct pool_counter_set *s = counter_set_of(n, d, u->set);

		if (!s) {
			snprintf(why, size, "counter set %s not published", u->set);
			return true;
		}
		for (size_t k = 0; k < u->n_counters; k++) {
			const char *c = u->counters[k].key;
			const char *value = label_value(s->counters, s->n_counters, c);
			struct counter_terms t = {s->users, s->n_users, s->name, c,
						  u->counters[k].value};
			const char *by = "";

			if (!value) {
				snprintf(why, size, "counter set %s has no counter %s",
					 s->name, c);
				return true;
			}
			if (!exceeds(&t, value))
				continue;
			for (size_t j = 0; j < s->n_users && !by[0]; j++)
				if (consumed(s->users[j], s->name, c))
					by = s->users[j]->name;
			snprintf(why, size, "counter set %s: %s used by %s", s->name, c,
				 by[0] ? by : "(none: the device alone exceeds it)");
			return true;
		}
	}
	return false;
}

static bool consumes_set(const struct pool_device *d, const struct pool_counter_set *s)
{
	if (strcmp(d->driver, s->driver) != 0 || strcmp(d->pool, s->pool) != 0)
		return false;
	for (size_t i = 0; i < d->n_consumes; i++)
		if (strcmp(d->consumes[i].set, s->name) == 0)
			return true;
	return false;
}

/* Whether device o of n can still be had for flavor f's purposes: no
 * claim holds it, no taint f does not tolerate, its counters suffice. */
static bool can_be_had(const struct pool_node *n, const struct pool_device *o,
		       const struct policy_flavor *f)
{
	char why[8];

	return !o->allocated && !pool_device_tainted(o, f, why, sizeof(why)) &&
	       !pool_device_blocked(n, o, why, sizeof(why));
}

/* Whether the devices of n that consume set s and can still be had ask
 * together, with what s's users hold, more of one of s's counters than s
 * has: not all of them can be had at once.  Once per set and node (a
 * view's cost stays linear in the devices of a set). */
static bool oversubscribed(const struct pool_node *n, const struct pool_counter_set *s,
			   const struct policy_flavor *f)
{
	const struct pool_device **all;
	size_t k;
	bool over = false;

	all = malloc((s->n_users + n->n_devices + 1) * sizeof(*all));
	if (!all)
		return true; /* cannot tell: not promised exact */
	if (s->n_users)
		memcpy(all, s->users, s->n_users * sizeof(*all));
	k = s->n_users;
	for (size_t j = 0; j < n->n_devices; j++)
		if (consumes_set(&n->devices[j], s) && can_be_had(n, &n->devices[j], f))
			all[k++] = &n->devices[j];
	for (size_t c = 0; c < s->n_counters && !over; c++) {
		struct counter_terms t = {all, k, s->name, s->counters[c].key, NULL};

		over = exceeds(&t, s->counters[c].value);
	}
	free(all);
	return over;
}

/* Whether free devices of flavor f on n compete for counters: some set
 * that one of them consumes is oversubscribed (pool_view.approximate). */
static bool competes(const struct pool_node *n, const struct policy_flavor *f)
{
	for (size_t i = 0; i < n->n_counter_sets; i++) {
		const struct pool_counter_set *s = &n->counter_sets[i];
		bool mine = false;

		for (size_t j = 0; j < n->n_devices && !mine; j++)
			mine = consumes_set(&n->devices[j], s) &&
			       pool_device_in_flavor(&n->devices[j], f) &&
			       can_be_had(n, &n->devices[j], f);
		if (mine && oversubscribed(n, s, f))
			return true;
	}
	return false;
}

/* Why a node whose signal is gone is still out (pool.h). */
static void validating_text(const struct pool_node *n, char *why, size_t size)
{
	struct health_marks m;
	char at[32];
	time_t t;
	struct tm tm;

	health_marks_read(n, &m);
	if (!m.has_record) {
		snprintf(why, size, "taint %s=%s:%s", HEALTH_TAINT,
			 m.taint_value ? m.taint_value : "", HEALTH_TAINT_EFFECT);
		return;
	}
	t = (time_t)(m.record.cleared_ms / 1000);
	if (!m.record.cleared_ms || !gmtime_r(&t, &tm) ||
	    !strftime(at, sizeof(at), "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(why, size, "after %s", m.record.why);
	else
		snprintf(why, size, "after %s, cleared %s", m.record.why, at);
}

enum pool_exclusion pool_node_exclusion(const struct pool_node *n,
					const struct policy_flavor *f,
					const struct policy_health *h,
					char *why, size_t size)
{
	const char *ready = NULL;

	why[0] = '\0';
	for (size_t i = 0; i < n->n_taints; i++)
		if (health_taint(h, &n->taints[i])) {
			taint_text(&n->taints[i], why, size);
			return POOL_HEALTH;
		}
	for (size_t i = 0; i < n->n_conditions; i++) {
		const struct pool_condition *c = &n->conditions[i];

		if (strcmp(c->type, "Ready") == 0)
			ready = c->status;
		for (size_t k = 0; h && k < h->n_conditions; k++)
			if (strcmp(h->conditions[k].type, c->type) == 0 &&
			    strcmp(h->conditions[k].status, c->status) == 0) {
				snprintf(why, size, "condition %s=%s%s%s%s", c->type,
					 c->status, c->reason[0] ? " (reason " : "",
					 c->reason, c->reason[0] ? ")" : "");
				return POOL_HEALTH;
			}
	}
	for (size_t i = 0; h && i < h->n_labels; i++) {
		const char *v = pool_node_label(n, h->labels[i].key);

		if (v && (!h->labels[i].value || strcmp(v, h->labels[i].value) == 0)) {
			snprintf(why, size, "label %s=%s", h->labels[i].key, v);
			return POOL_HEALTH;
		}
	}
	if (health_marked(n)) {
		validating_text(n, why, size);
		return POOL_VALIDATING;
	}
	if (!n->ready) {
		snprintf(why, size, "Ready=%s", ready ? ready : "(none)");
		return POOL_NOT_READY;
	}
	if (n->unschedulable) {
		snprintf(why, size, "spec.unschedulable");
		return POOL_CORDONED;
	}
	for (size_t i = 0; i < n->n_taints; i++) {
		const struct pool_taint *t = &n->taints[i];

		if (repels(t) && !tolerated(f->tolerations, f->n_tolerations, t) &&
		    strcmp(t->key, HEALTH_TAINT) != 0) {
			taint_text(t, why, size);
			return POOL_TAINTED;
		}
	}
	return POOL_USABLE;
}

static int64_t at_least_zero(int64_t v)
{
	return v < 0 ? 0 : v;
}

/* The first device's reason after its name ("gpu-3: ..."), by the
 * judge that found it. */
static void first_why(char *out, size_t size, const struct pool_device *d,
		      bool (*judge)(const struct pool_node *n, const struct pool_device *d,
				    const struct policy_flavor *f, char *why, size_t size),
		      const struct pool_node *n, const struct policy_flavor *f)
{
	int at = snprintf(out, size, "%s: ", d->name);

	if (at >= 0 && (size_t)at < size)
		judge(n, d, f, out + at, size - (size_t)at);
}

static bool judge_tainted(const struct pool_node *n, const struct pool_device *d,
			  const struct policy_flavor *f, char *why, size_t size)
{
	(void)n;
	return pool_device_tainted(d, f, why, size);
}

static bool judge_blocked(const struct pool_node *n, const struct pool_device *d,
			  const struct policy_flavor *f, char *why, size_t size)
{
	(void)f;
	return pool_device_blocked(n, d, why, size);
}

/* A DRA flavor's units on n: its devices of f (pool_member); whether its
 * free devices compete for counters (*approximate). */
static void member_devices(const struct pool_node *n, const struct policy_flavor *f,
			   struct pool_member *m, bool *approximate)
{
	char why[sizeof(m->device_why)];
	int64_t blocked = 0; /* units of the blocked devices */

	for (size_t i = 0; i < n->n_devices; i++) {
		const struct pool_device *d = &n->devices[i];
		int64_t units, used;

		if (!pool_device_in_flavor(d, f))
			continue;
		pool_device_units(d, f, &units, &used);
		m->capacity += units;
		if (pool_device_tainted(d, f, why, sizeof(why))) {
			if (!m->devices_tainted++)
				first_why(m->device_why, sizeof(m->device_why), d,
					  judge_tainted, n, f);
			continue;
		}
		m->allocatable += units;
		m->allocated += used;
		if (!d->allocated && pool_device_blocked(n, d, why, sizeof(why))) {
			blocked += units;
			if (!m->devices_blocked++)
				first_why(m->blocked_why, sizeof(m->blocked_why), d,
					  judge_blocked, n, f);
		}
	}
	m->free = at_least_zero(m->allocatable - m->allocated - blocked);
	*approximate = m->free > 0 && competes(n, f);
}

void pool_view_build(const struct pool_node *const *nodes, size_t n_nodes,
		     const struct policy_flavor *f, const struct policy_health *h,
		     struct pool_member *members, struct pool_view *v)
{
	memset(v, 0, sizeof(*v));
	v->flavor = f;
	v->members = members;
	v->approximate = f->dra && f->dra->n_selectors > 0;
	for (size_t i = 0; i < n_nodes; i++) {
		const struct pool_node *n = nodes[i];
		const struct pool_resource *r = NULL;
		struct pool_member *m;

		if (!pool_node_in_flavor(n, f))
			continue;
		if (!f->dra && !(r = pool_node_resource(n, f->resource)))
			continue;
		m = &members[v->n_members++];
		m->node = n;
		m->exclusion = pool_node_exclusion(n, f, h, m->why, sizeof(m->why));
		m->devices_tainted = m->devices_blocked = 0;
		m->device_why[0] = m->blocked_why[0] = '\0';
		if (f->dra) {
			bool approximate = false;

			m->capacity = m->allocatable = m->allocated = 0;
			member_devices(n, f, m, &approximate);
			if (approximate && m->exclusion == POOL_USABLE)
				v->approximate = v->devices_compete = true;
		} else {
			m->capacity = at_least_zero(r->capacity);
			/* The kubelet reports allocatable beside capacity;
			 * without it the scheduler has nothing to place
			 * against. */
			m->allocatable = at_least_zero(r->allocatable);
			m->allocated = at_least_zero(r->allocated);
			m->free = at_least_zero(m->allocatable - m->allocated);
		}
		if (m->exclusion != POOL_USABLE)
			continue;
		v->n_usable++;
		v->capacity += m->capacity;
		v->allocatable += m->allocatable;
		v->allocated += m->allocated;
		v->free += m->free;
		v->devices_tainted += m->devices_tainted;
		v->devices_blocked += m->devices_blocked;
		if (!v->largest_allocatable_node || m->allocatable > v->largest_allocatable) {
			v->largest_allocatable = m->allocatable;
			v->largest_allocatable_node = n->name;
		}
		if (!v->largest_free_node || m->free > v->largest_free) {
			v->largest_free = m->free;
			v->largest_free_node = n->name;
		}
	}
}

struct domain {
	const char *name;
	int64_t now, empty;
};

/* Per domain of key among the usable members: the pods of per_pod units
 * each that it holds now and when empty.  Returns how many domains went
 * into ds (room for v->n_members), or -1 when out of memory. */
static long count_domains(const struct pool_view *v, int64_t per_pod,
			  const char *key, const char *only, struct domain *ds)
{
	struct strmap index;
	long n = 0;

	strmap_init(&index);
	for (size_t i = 0; i < v->n_members; i++) {
		const struct pool_member *m = &v->members[i];
		const char *d = m->exclusion == POOL_USABLE
					? pool_node_label(m->node, key)
					: NULL;
		size_t k;

		if (!d || (only && strcmp(d, only) != 0))
			continue;
		if (!strmap_get(&index, d, &k)) {
			k = (size_t)n;
			if (strmap_put(&index, d, k, NULL) < 0) {
				n = -1;
				break;
			}
			ds[n++] = (struct domain){.name = d};
		}
		ds[k].now += m->free / per_pod;
		ds[k].empty += m->allocatable / per_pod;
	}
	strmap_release(&index);
	return n;
}

void pool_fit(const struct pool_view *v, int64_t per_pod, int64_t pods,
	      const char *topology_key, struct pool_fit *out)
{
	pool_fit_in(v, per_pod, pods, topology_key, NULL, out);
}

void pool_fit_in(const struct pool_view *v, int64_t per_pod, int64_t pods,
		 const char *topology_key, const char *domain, struct pool_fit *out)
{
	memset(out, 0, sizeof(*out));
	out->per_pod = per_pod;
	out->pods = pods;
	out->n_excluded = v->n_members - v->n_usable;
	if (v->n_members == 0) {
		out->verdict = POOL_UNKNOWN;
		return;
	}
	if (per_pod <= 0 || pods <= 0) {
		out->verdict = POOL_FITS;
		return;
	}
	if (!topology_key) {
		for (size_t i = 0; i < v->n_members; i++) {
			const struct pool_member *m = &v->members[i];

			if (m->exclusion == POOL_USABLE) {
				out->fit_now += m->free / per_pod;
				out->fit_empty += m->allocatable / per_pod;
			}
		}
	} else {
		struct domain *ds = calloc(v->n_members ? v->n_members : 1, sizeof(*ds));
		long n = ds ? count_domains(v, per_pod, topology_key, domain, ds) : -1;

		if (n < 0) { /* advisory: say nothing rather than guess */
			free(ds);
			out->verdict = POOL_FITS;
			return;
		}
		/* The domain named is the one with the most room now; the
		 * verdict uses the most any one domain holds now and empty. */
		out->n_domains = (size_t)n;
		for (long k = 0; k < n; k++) {
			if (!out->domain || ds[k].now > out->fit_now) {
				out->domain = ds[k].name;
				out->fit_now = ds[k].now;
			}
			if (ds[k].empty > out->fit_empty)
				out->fit_empty = ds[k].empty;
		}
		free(ds);
	}
	/* No usable node, or none that offers a unit now (a device plugin
	 * restarting reports 0): advisory, never a denial. */
	if (v->n_usable == 0 || v->largest_allocatable == 0)
		out->verdict = POOL_NONE_USABLE;
	else if (out->fit_empty < pods)
		out->verdict = POOL_NEVER_FITS;
	else if (out->fit_now < pods)
		out->verdict = POOL_NOT_NOW;
	else
		out->verdict = POOL_FITS;
}

static void copy_name(char *dst, size_t size, const char *src)
{
	snprintf(dst, size, "%s", src ? src : "");
}

void pool_check_build(const struct pool_view *v, int64_t per_pod, int64_t pods,
		      const char *topology_key, struct pool_check *out)
{
	pool_check_build_in(v, per_pod, pods, topology_key, NULL, out);
}

void pool_check_build_in(const struct pool_view *v, int64_t per_pod, int64_t pods,
			 const char *topology_key, const char *domain,
			 struct pool_check *out)
{
	memset(out, 0, sizeof(*out));
	pool_fit_in(v, per_pod, pods, topology_key, domain, &out->fit);
	out->known = true;
	out->n_nodes = v->n_members;
	out->n_usable = v->n_usable;
	out->allocatable = v->allocatable;
	out->free = v->free;
	out->largest_allocatable = v->largest_allocatable;
	out->largest_free = v->largest_free;
	copy_name(out->largest_allocatable_node, sizeof(out->largest_allocatable_node),
		  v->largest_allocatable_node);
	copy_name(out->largest_free_node, sizeof(out->largest_free_node),
		  v->largest_free_node);
	copy_name(out->domain, sizeof(out->domain), out->fit.domain);
	out->fit.domain = out->fit.domain ? out->domain : NULL;
	for (size_t i = 0; i < v->n_members; i++) {
		const struct pool_member *m = &v->members[i];

		if (m->exclusion == POOL_USABLE)
			continue;
		if (out->n_excluded < POOL_MAX_EXCLUDED) {
			copy_name(out->excluded[out->n_excluded].node, POOL_NAME_LEN,
				  m->node->name);
			out->excluded[out->n_excluded].exclusion = m->exclusion;
			copy_name(out->excluded[out->n_excluded].why,
				  sizeof(out->excluded[0].why), m->why);
		}
		out->n_excluded++;
	}
}

void pool_summarize(const struct pool_view *v, struct pool_summary *out)
{
	memset(out, 0, sizeof(*out));
	out->flavor = v->flavor;
	out->allocatable = v->allocatable;
	out->allocated = v->allocated;
	out->free = v->free;
	out->largest_free = v->largest_free;
	out->devices_tainted = v->devices_tainted;
	out->devices_blocked = v->devices_blocked;
	out->approximate = v->approximate;
	for (size_t i = 0; i < v->n_members; i++) {
		const struct pool_member *m = &v->members[i];

		out->nodes[m->exclusion]++;
		out->capacity += m->capacity;
		if (m->exclusion != POOL_USABLE)
			out->excluded += m->capacity;
	}
}
