#include "webhook/ledger.h"

#include "policy/decide.h"
#include "policy/policy.h"
#include "policy/quota.h"
#include "policy/strmap.h"
#include "policy/text.h"
#include "webhook/handler.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- a chained hash table with deletion; keys live in the values ------- */

struct node {
	struct node *next;
	size_t hash;
	const char *key;
	void *val;
};

struct table {
	struct node **b;
	size_t nb;
	size_t n;
};

static struct node **slot(const struct table *t, const char *key, size_t h)
{
	struct node **pp = &t->b[h & (t->nb - 1)];

	while (*pp && ((*pp)->hash != h || strcmp((*pp)->key, key) != 0))
		pp = &(*pp)->next;
	return pp;
}

static void *table_get(const struct table *t, const char *key)
{
	struct node **pp;

	if (!t->nb)
		return NULL;
	pp = slot(t, key, strmap_hash(key));
	return *pp ? (*pp)->val : NULL;
}

static int table_grow(struct table *t)
{
	size_t nb = t->nb ? t->nb * 2 : 64;
	struct node **b = calloc(nb, sizeof(*b));

	if (!b)
		return -1;
	for (size_t i = 0; i < t->nb; i++) {
		struct node *n = t->b[i];

		while (n) {
			struct node *next = n->next;

			n->next = b[n->hash & (nb - 1)];
			b[n->hash & (nb - 1)] = n;
			n = next;
		}
	}
	free(t->b);
	t->b = b;
	t->nb = nb;
	return 0;
}

/* Inserts key (which must be absent); -1 when out of memory. */
static int table_put(struct table *t, const char *key, void *val)
{
	struct node *n;
	size_t h = strmap_hash(key);

	if (t->n + 1 > t->nb && table_grow(t) < 0)
		return -1;
	n = malloc(sizeof(*n));
	if (!n)
		return -1;
	n->hash = h;
	n->key = key;
	n->val = val;
	n->next = t->b[h & (t->nb - 1)];
	t->b[h & (t->nb - 1)] = n;
	t->n++;
	return 0;
}

static void table_del(struct table *t, const char *key)
{
	struct node **pp, *n;

	if (!t->nb)
		return;
	pp = slot(t, key, strmap_hash(key));
	n = *pp;
	if (!n)
		return;
	*pp = n->next;
	free(n);
	t->n--;
}

static void table_release(struct table *t)
{
	for (size_t i = 0; i < t->nb; i++) {
		struct node *n = t->b[i];

		while (n) {
			struct node *next = n->next;

			free(n);
			n = next;
		}
	}
	free(t->b);
	t->b = NULL;
	t->nb = t->n = 0;
}

/* ---- entries ------------------------------------------------------------ */

struct usage {
	int64_t used;
	size_t refs; /* entries pointing here */
	char key[];  /* "tenant\x1f" "flavor" */
};

struct family;

struct entry {
	struct usage *usage;
	struct family *family;         /* a Job's own family, or a pod's Job's */
	struct entry *prev, *next;     /* siblings: the pods of one Job */
	int64_t units;
	uint64_t expires_ms;           /* 0: never (observed, or embedded) */
	uint64_t seen;                 /* relist generation it was seen in */
	bool is_job;
	bool charged;
	bool observed;
	const char *name;              /* into strings */
	char uid[];                    /* then the name */
};

struct family {
	struct entry *job;             /* NULL until the Job is known */
	struct entry *pods;            /* its pods the ledger holds */
	char job_uid[];
};

struct ledger {
	pthread_mutex_t mu;
	struct ledger_config cfg;
	struct table entries;  /* uid -> entry */
	struct table usages;   /* "tenant\x1fflavor" -> usage */
	struct table families; /* job uid -> family */
	uint64_t generation[2]; /* relist generation: [0] pods, [1] jobs */
	bool watching;          /* ledger_set_watching() */
	uint64_t watching_since; /* when it last came up (now_ms) */
	struct quota_source source;
};

static uint64_t monotonic_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void usage_key(char *buf, size_t size, const char *tenant,
		      const char *flavor)
{
	text_cat(buf, size, tenant, "\x1f", flavor, NULL);
}

static struct usage *usage_ref(struct ledger *l, const char *tenant,
			       const char *flavor)
{
	char key[600];
	struct usage *u;
	size_t tl = strlen(tenant), fl = strlen(flavor);

	usage_key(key, sizeof(key), tenant, flavor);
	u = table_get(&l->usages, key);
	if (!u) {
		u = calloc(1, sizeof(*u) + tl + fl + 2);
		if (!u)
			return NULL;
		memcpy(u->key, tenant, tl);
		u->key[tl] = '\x1f';
		memcpy(u->key + tl + 1, flavor, fl + 1);
		if (table_put(&l->usages, u->key, u) < 0) {
			free(u);
			return NULL;
		}
	}
	u->refs++;
	return u;
}

static void usage_unref(struct ledger *l, struct usage *u)
{
	/* No entry left: every charge was taken back, used is 0. */
	if (--u->refs == 0) {
		table_del(&l->usages, u->key);
		free(u);
	}
}

static void charge(struct entry *e)
{
	if (!e->charged) {
		e->usage->used += e->units;
		e->charged = true;
	}
}

static void uncharge(struct entry *e)
{
	if (e->charged) {
		e->usage->used -= e->units;
		e->charged = false;
	}
}

static struct family *family_get(struct ledger *l, const char *job_uid)
{
	struct family *f = table_get(&l->families, job_uid);
	size_t n = strlen(job_uid);

	if (f)
		return f;
	f = calloc(1, sizeof(*f) + n + 1);
	if (!f)
		return NULL;
	memcpy(f->job_uid, job_uid, n + 1);
	if (table_put(&l->families, f->job_uid, f) < 0) {
		free(f);
		return NULL;
	}
	return f;
}

static void family_maybe_free(struct ledger *l, struct family *f)
{
	if (f && !f->job && !f->pods) {
		table_del(&l->families, f->job_uid);
		free(f);
	}
}

/* A pod is charged unless its Job holds the quota for it. */
static void place(struct entry *e)
{
	if (e->is_job || !e->family || !e->family->job)
		charge(e);
	else
		uncharge(e);
}

static struct entry *entry_add(struct ledger *l, const char *uid, bool is_job,
			       const char *name, const char *tenant,
			       const char *flavor, int64_t units,
			       const char *owner_job_uid)
{
	size_t ul = strlen(uid), nl = strlen(name ? name : "");
	struct entry *e = calloc(1, sizeof(*e) + ul + nl + 2);

	if (!e)
		return NULL;
	memcpy(e->uid, uid, ul + 1);
	memcpy(e->uid + ul + 1, name ? name : "", nl + 1);
	e->name = e->uid + ul + 1;
	e->is_job = is_job;
	e->units = units > 0 ? units : 0;
	e->usage = usage_ref(l, tenant, flavor);
	if (!e->usage || table_put(&l->entries, e->uid, e) < 0) {
		if (e->usage)
			usage_unref(l, e->usage);
		free(e);
		return NULL;
	}
	if (is_job) {
		e->family = family_get(l, uid);
		if (e->family) {
			e->family->job = e;
			for (struct entry *k = e->family->pods; k; k = k->next)
				uncharge(k);
		}
	} else if (owner_job_uid && owner_job_uid[0]) {
		e->family = family_get(l, owner_job_uid);
		if (e->family) {
			e->next = e->family->pods;
			if (e->next)
				e->next->prev = e;
			e->family->pods = e;
		}
	}
	place(e);
	return e;
}

static void entry_remove(struct ledger *l, struct entry *e)
{
	struct family *f = e->family;

	uncharge(e);
	if (f && e->is_job) {
		f->job = NULL;
		for (struct entry *k = f->pods; k; k = k->next)
			place(k); /* its pods still run: they hold quota now */
	} else if (f) {
		if (e->prev)
			e->prev->next = e->next;
		else
			f->pods = e->next;
		if (e->next)
			e->next->prev = e->prev;
	}
	family_maybe_free(l, f);
	table_del(&l->entries, e->uid);
	usage_unref(l, e->usage);
	free(e);
}

/* ---- quota source ------------------------------------------------------- */

struct view_ctx {
	struct ledger *l;
	const struct policy *p;
};

static int64_t view_used(const void *ctx, unsigned tenant, unsigned flavor)
{
	const struct view_ctx *v = ctx;
	const struct policy_tenant *t = policy_tenant_at(v->p, tenant);
	const struct policy_flavor *f = policy_flavor_at(v->p, flavor);
	char key[600];
	struct usage *u;

	if (!t || !f)
		return 0;
	usage_key(key, sizeof(key), t->name, f->name);
	u = table_get(&v->l->usages, key);
	return u ? u->used : 0;
}

/* The ledger key of a workload: its uid, else namespace/name, else the
 * request (hand-made reviews without metadata.uid). */
static void workload_key(const struct workload *wl, char *buf, size_t size)
{
	if (wl->uid && wl->uid[0])
		text_cat(buf, size, wl->uid, NULL);
	else if (wl->name && wl->name[0])
		text_cat(buf, size, wl->namespace, "/", wl->name, NULL);
	else
		text_cat(buf, size, "request:", wl->request_uid, NULL);
}

static bool admitted(enum quota_position pos)
{
	return pos == QUOTA_NOMINAL || pos == QUOTA_BORROWED || pos == QUOTA_COVERED;
}

static void source_decide(void *ctx, const struct policy *p,
			  const struct workload *wl, const struct quota_claim *c,
			  bool reserve, bool force, struct quota_result *out)
{
	struct ledger *l = ctx;
	struct view_ctx vc = {.l = l, .p = p};
	struct usage_view view = {.ctx = &vc, .used = view_used};
	struct family *fam = NULL;
	struct entry *have;
	char key[400];

	workload_key(wl, key, sizeof(key));
	pthread_mutex_lock(&l->mu);
	have = table_get(&l->entries, key);
	/* Asked again for what it already holds (a retried request): judge it
	 * without its own units, and do not count it twice. */
	if (have)
		uncharge(have);
	if (wl->kind == WL_POD && wl->owner_job_uid)
		fam = table_get(&l->families, wl->owner_job_uid);
	quota_decide(p, c->tenant, c->flavor, c->units, c->may_borrow, &view, out);
	if (fam && fam->job) {
		/* A pod of a Job that holds its gang's quota. */
		out->position = QUOTA_COVERED;
		out->requested = 0;
	}
	if (have) {
		place(have);
	} else if (reserve && (admitted(out->position) || force)) {
		struct entry *e = entry_add(l, key, wl->kind == WL_JOB, wl->name,
					    c->tenant->name, c->flavor->name, c->units,
					    wl->owner_job_uid);

		if (e && l->cfg.reservation_ttl_ms)
			e->expires_ms = l->cfg.now_ms() + l->cfg.reservation_ttl_ms;
	}
	pthread_mutex_unlock(&l->mu);
	if (out->position == QUOTA_COVERED)
		out->holder = wl->owner_job;
}

static void source_release(void *ctx, const struct policy *p,
			   const struct workload *wl)
{
	struct ledger *l = ctx;
	struct entry *e;
	char key[400];

	(void)p;
	/* With an API, the watch tells when a deleted object is really gone
	 * (a terminating pod still holds its GPUs). */
	if (l->cfg.reservation_ttl_ms)
		return;
	workload_key(wl, key, sizeof(key));
	pthread_mutex_lock(&l->mu);
	e = table_get(&l->entries, key);
	if (e)
		entry_remove(l, e);
	pthread_mutex_unlock(&l->mu);
}

/* ---- public ------------------------------------------------------------- */

struct ledger *ledger_new(const struct ledger_config *cfg)
{
	struct ledger *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	if (cfg)
		l->cfg = *cfg;
	if (!l->cfg.now_ms)
		l->cfg.now_ms = monotonic_ms;
	l->watching = true;
	pthread_mutex_init(&l->mu, NULL);
	l->source.ctx = l;
	l->source.decide = source_decide;
	l->source.release = source_release;
	return l;
}

void ledger_free(struct ledger *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->entries.nb; i++)
		for (struct node *n = l->entries.b[i]; n; n = n->next)
			free(n->val);
	for (size_t i = 0; i < l->usages.nb; i++)
		for (struct node *n = l->usages.b[i]; n; n = n->next)
			free(n->val);
	for (size_t i = 0; i < l->families.nb; i++)
		for (struct node *n = l->families.b[i]; n; n = n->next)
			free(n->val);
	table_release(&l->entries);
	table_release(&l->usages);
	table_release(&l->families);
	pthread_mutex_destroy(&l->mu);
	free(l);
}

const struct quota_source *ledger_quota_source(struct ledger *l)
{
	return &l->source;
}

void ledger_observe(struct ledger *l, const struct ledger_item *it)
{
	struct entry *e;

	pthread_mutex_lock(&l->mu);
	e = table_get(&l->entries, it->uid);
	if (e && !it->active) {
		entry_remove(l, e);
		e = NULL;
	} else if (e) {
		char key[600];

		usage_key(key, sizeof(key), it->tenant, it->flavor);
		if (strcmp(key, e->usage->key) != 0 || e->units != it->units ||
		    e->is_job != it->is_job) {
			/* What it holds changed: re-add it from the observation. */
			entry_remove(l, e);
			e = NULL;
		}
	}
	if (!e && it->active)
		e = entry_add(l, it->uid, it->is_job, it->name, it->tenant,
			      it->flavor, it->units, it->owner_job_uid);
	if (e) {
		e->observed = true;
		e->expires_ms = 0;
		e->seen = l->generation[it->is_job];
	}
	pthread_mutex_unlock(&l->mu);
}

void ledger_forget(struct ledger *l, const char *uid)
{
	struct entry *e;

	pthread_mutex_lock(&l->mu);
	e = table_get(&l->entries, uid);
	if (e)
		entry_remove(l, e);
	pthread_mutex_unlock(&l->mu);
}

void ledger_relist_begin(struct ledger *l, bool jobs)
{
	pthread_mutex_lock(&l->mu);
	l->generation[jobs]++;
	pthread_mutex_unlock(&l->mu);
}

/* Collects the entries matching pred, then removes them: removal while
 * walking the table would unlink nodes under the walker. */
static size_t remove_where(struct ledger *l,
			   bool (*pred)(const struct ledger *l, const struct entry *e,
					const void *arg),
			   const void *arg)
{
	struct entry **doomed;
	size_t n = 0;

	doomed = malloc((l->entries.n ? l->entries.n : 1) * sizeof(*doomed));
	if (!doomed)
		return 0;
	for (size_t i = 0; i < l->entries.nb; i++)
		for (struct node *nd = l->entries.b[i]; nd; nd = nd->next)
			if (pred(l, nd->val, arg))
				doomed[n++] = nd->val;
	for (size_t i = 0; i < n; i++)
		entry_remove(l, doomed[i]);
	free(doomed);
	return n;
}

static bool stale(const struct ledger *l, const struct entry *e, const void *arg)
{
	bool jobs = *(const bool *)arg;

	return e->observed && e->is_job == jobs && e->seen != l->generation[jobs];
}

void ledger_relist_end(struct ledger *l, bool jobs)
{
	pthread_mutex_lock(&l->mu);
	remove_where(l, stale, &jobs);
	pthread_mutex_unlock(&l->mu);
}

void ledger_set_watching(struct ledger *l, bool up)
{
	pthread_mutex_lock(&l->mu);
	if (up && !l->watching)
		l->watching_since = l->cfg.now_ms();
	l->watching = up;
	pthread_mutex_unlock(&l->mu);
}

/* A reservation's TTL runs from when it was made or the watch came up,
 * whichever is later (expires_ms is made + TTL). */
static bool expired(const struct ledger *l, const struct entry *e, const void *arg)
{
	uint64_t now = *(const uint64_t *)arg;
	uint64_t since = l->watching_since + l->cfg.reservation_ttl_ms;

	return !e->observed && e->expires_ms &&
	       (e->expires_ms > since ? e->expires_ms : since) <= now;
}

size_t ledger_expire(struct ledger *l)
{
	uint64_t now = l->cfg.now_ms();
	size_t n = 0;

	pthread_mutex_lock(&l->mu);
	if (l->watching)
		n = remove_where(l, expired, &now);
	pthread_mutex_unlock(&l->mu);
	return n;
}

int64_t ledger_used(struct ledger *l, const char *tenant, const char *flavor)
{
	char key[600];
	struct usage *u;
	int64_t v;

	usage_key(key, sizeof(key), tenant, flavor);
	pthread_mutex_lock(&l->mu);
	u = table_get(&l->usages, key);
	v = u ? u->used : 0;
	pthread_mutex_unlock(&l->mu);
	return v;
}

size_t ledger_entries(struct ledger *l)
{
	size_t n;

	pthread_mutex_lock(&l->mu);
	n = l->entries.n;
	pthread_mutex_unlock(&l->mu);
	return n;
}

void ledger_foreach_usage(struct ledger *l, ledger_usage_fn fn, void *ctx)
{
	pthread_mutex_lock(&l->mu);
	for (size_t i = 0; i < l->usages.nb; i++)
		for (struct node *nd = l->usages.b[i]; nd; nd = nd->next) {
			const struct usage *u = nd->val;
			char tenant[300];
			const char *sep = strchr(u->key, '\x1f');
			size_t tl = sep ? (size_t)(sep - u->key) : 0;

			if (!sep || tl >= sizeof(tenant))
				continue;
			memcpy(tenant, u->key, tl);
			tenant[tl] = '\0';
			fn(ctx, tenant, sep + 1, u->used);
		}
	pthread_mutex_unlock(&l->mu);
}
