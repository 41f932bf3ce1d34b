/*
 * The shared backend of usage/shared-backend.h: observations in a memory
 * ledger of its own, reservations in the domain documents, which uids the
 * watch has shown (and since when) in one map.
 */
#include "usage/shared-backend.h"

#include "base/diag.h"
#include "base/strmap.h"
#include "base/text.h"
#include "policy/decide.h"
#include "policy/policy.h"
#include "policy/quota.h"
#include "usage/backend.h"
#include "usage/reservations.h"
#include "usage/usage.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TTL_MS_DEFAULT 60000u
#define GRACE_MS_DEFAULT 5000u

/* A uid the watch has shown (or deleted). */
struct seen {
	uint64_t since_ms;   /* its newest generation first shown */
	uint64_t gone_ms;    /* deleted, or not relisted; 0: not */
	int64_t generation;  /* the newest shown */
	uint64_t relist;     /* the relist of its kind it was last shown in */
	enum usage_kind kind;
	bool active;         /* last shown holding quota */
	bool named;          /* names maps name_key to it */
	char *name_key;      /* "kind\x1fnamespace\x1fname", after uid; "" */
	char uid[];
};

struct shared {
	struct usage_store store; /* first: the seam points here */
	struct usage_shared_config cfg;
	char replica[RESV_NAME_MAX + 1];
	struct usage_store *local; /* what the watch shows */
	pthread_mutex_t mu;        /* all below */
	struct strmap seen;        /* uid -> struct seen */
	struct strmap names;       /* name_key -> the struct seen shown under it */
	uint64_t relist[USAGE_KINDS];    /* relist generation, by kind */
	uint64_t listed_ms[USAGE_KINDS]; /* when the last relist ended; 0 */
	bool watching;
};

static struct shared *shared_of(struct usage_store *u)
{
	return (struct shared *)u;
}

static uint64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static struct seen *seen_get(const struct shared *s, const char *uid)
{
	size_t v;

	return strmap_get(&s->seen, uid, &v) ? (struct seen *)(uintptr_t)v : NULL;
}

static void name_key(char *buf, size_t size, enum usage_kind kind,
		     const char *ns, const char *name)
{
	char k[2] = {(char)('0' + (int)kind), '\0'};

	text_cat(buf, size, k, "\x1f", ns ? ns : "", "\x1f", name ? name : "", NULL);
}

#define NAME_KEY_SIZE (4 + RESV_NAMESPACE_MAX + RESV_NAME_MAX + 2)

/* What this replica's watch shows of record r (under s->mu). */
static void sight_of(const struct shared *s, const struct resv *r,
		     struct resv_sight *out)
{
	const struct seen *e = seen_get(s, r->uid), *other;
	char key[NAME_KEY_SIZE];
	size_t v;

	memset(out, 0, sizeof(*out));
	if (e) {
		out->shown = true;
		out->gone = e->gone_ms != 0;
		out->active = e->active;
		out->generation = e->generation;
		out->since_ms = e->gone_ms ? e->gone_ms : e->since_ms;
	}
	name_key(key, sizeof(key), r->kind, r->namespace, r->name);
	if (strmap_get(&s->names, key, &v)) {
		other = (const struct seen *)(uintptr_t)v;
		out->name_taken = other != e && strcmp(other->uid, r->uid) != 0;
		out->name_freed_ms = out->name_taken ? other->gone_ms : 0;
	}
	out->listed_ms = s->listed_ms[r->kind];
}

/* The verdict on record r on this replica now (under s->mu). */
static enum resv_verdict judge(const struct shared *s, const struct resv *r,
			       bool *prune)
{
	struct resv_sight sight;

	sight_of(s, r, &sight);
	return resv_judge(r, &sight, s->cfg.now_ms(), s->cfg.grace_ms,
			  s->cfg.reservation_ttl_ms, prune);
}

/* ---- decisions ------------------------------------------------------------ */

struct decision_ctx {
	struct shared *s;
	const struct policy *p;
	const struct quota_claim *c;
	bool force;
	struct resv *r;                /* the record to add */
	const char *owner_job;         /* a pod's Job, by name */
	struct quota_result *out;
	struct resv_doc *doc;          /* during fn */
	bool full;                     /* the document refused the record */
	char why[160];
};

/* Records that add nothing to what the local ledger counts: the one
 * being decided (a retried request replaces it), and every record that is
 * not pending (shown, so counted by the ledger; or void). */
static bool counted(void *ctx, const struct resv *r)
{
	struct decision_ctx *x = ctx;

	return strcmp(r->uid, x->r->uid) == 0 || judge(x->s, r, NULL) != RESV_PENDING;
}

static int64_t view_used(const void *ctx, unsigned tenant, unsigned flavor)
{
	const struct decision_ctx *x = ctx;
	const struct policy_tenant *t = policy_tenant_at(x->p, tenant);
	const struct policy_flavor *f = policy_flavor_at(x->p, flavor);

	if (!t || !f)
		return 0;
	return usage_used(x->s->local, t->name, f->name) +
	       resv_doc_sum(x->doc, t->name, f->name, counted, (void *)x);
}

static bool admitted(enum quota_position pos)
{
	return pos == QUOTA_NOMINAL || pos == QUOTA_BORROWED || pos == QUOTA_COVERED;
}

/*
 * Whether the pod being decided takes a slot of its Job's gang
 * (usage_gang_takes(), the memory backend's rule): the gang as the local
 * ledger shows it (its riders shown), or as the Job's pending record
 * reserves it, plus the pending records of pods riding on it.  Under
 * s->mu, on the document read.
 */
static bool takes_a_slot(struct decision_ctx *x)
{
	const char *job = x->r->owner_job;
	struct usage_holding jh, ph = {.namespace = x->r->namespace,
				       .tenant = x->r->tenant,
				       .flavor = x->r->flavor,
				       .per_pod = x->r->per_pod};
	struct usage_gang g;
	const struct resv *jr;

	if (x->r->kind != USAGE_PODS || !job[0])
		return false;
	if (!usage_gang(x->s->local, job, &g)) {
		jr = resv_doc_find(x->doc, job);
		if (!jr || jr->kind != USAGE_JOBS || judge(x->s, jr, NULL) != RESV_PENDING)
			return false;
		snprintf(g.namespace, sizeof(g.namespace), "%s", jr->namespace);
		snprintf(g.tenant, sizeof(g.tenant), "%s", jr->tenant);
		snprintf(g.flavor, sizeof(g.flavor), "%s", jr->flavor);
		g.per_pod = jr->per_pod;
		g.slots = jr->slots;
		g.riders = 0;
	}
	for (size_t i = 0; i < x->doc->n; i++) {
		const struct resv *r = &x->doc->items[i];

		if (r->rides && strcmp(r->owner_job, job) == 0 &&
		    strcmp(r->uid, x->r->uid) != 0 && judge(x->s, r, NULL) == RESV_PENDING)
			g.riders++;
	}
	usage_gang_holding(&g, &jh);
	return usage_gang_takes(&jh, g.slots, g.riders, &ph);
}

static bool decide_on(void *ctx, struct resv_doc *doc)
{
	struct decision_ctx *x = ctx;
	struct usage_view view = {.ctx = x, .used = view_used};
	struct diag d;
	bool write;

	x->doc = doc;
	x->full = false;
	pthread_mutex_lock(&x->s->mu);
	x->r->rides = takes_a_slot(x);
	if (x->r->rides) {
		memset(x->out, 0, sizeof(*x->out));
		x->out->position = QUOTA_COVERED;
		x->out->holder = x->owner_job;
	} else {
		quota_decide(x->p, x->c->tenant, x->c->flavor, x->c->units,
			     x->c->may_borrow, &view, x->out);
	}
	pthread_mutex_unlock(&x->s->mu);
	x->doc = NULL;
	write = admitted(x->out->position) || x->force;
	if (!write)
		return false;
	diag_init(&d);
	if (resv_doc_add(doc, x->r, &d) < 0) {
		x->full = true;
		diag_first(&d, x->why, sizeof(x->why));
		return false;
	}
	return true;
}

static void unavailable(struct quota_result *out, const char *why)
{
	memset(out, 0, sizeof(*out));
	out->position = QUOTA_UNAVAILABLE;
	text_cat(out->reason, sizeof(out->reason), why, NULL);
	text_clean(out->reason);
}

/* The record of what wl will hold, as the claim says. */
static int record_of(struct shared *s, const struct workload *wl,
		     const struct quota_claim *c, struct resv *r, char *why,
		     size_t whysz)
{
	struct usage_item it = {
		.uid = wl->uid,
		.kind = wl->kind == WL_JOB     ? USAGE_JOBS
			: wl->kind == WL_CLAIM ? USAGE_CLAIMS
					       : USAGE_PODS,
		.namespace = wl->namespace,
		.name = wl->name,
		.tenant = c->tenant->name,
		.flavor = c->flavor->name,
		.per_pod = c->per_pod,
		.slots = wl->kind == WL_JOB ? c->pods : 1,
		.owner_job_uid = wl->kind == WL_POD ? c->owner_job_uid : NULL,
		.generation = wl->generation,
	};
	struct diag d;

	diag_init(&d);
	if (resv_set(r, &it, s->replica, (int64_t)s->cfg.now_ms(), &d) == 0)
		return 0;
	diag_first(&d, why, whysz);
	return -1;
}

static void sh_decide(struct usage_store *u, const struct policy *p,
		      const struct workload *wl, const struct quota_claim *c,
		      bool reserve, bool force, struct quota_result *out)
{
	struct shared *s = shared_of(u);
	struct decision_ctx x = {.s = s, .p = p, .c = c, .force = force, .out = out};
	struct quota_claim ridden;
	struct resv r;
	char domain[RESV_DOMAIN_NAME_SIZE], err[200];
	bool watching;

	/* A peek (/mutate, dry runs): the local ledger answers.  Everything
	 * that reserves, a pod taking a slot of its Job's gang included, is
	 * decided on the document, under its compare-and-swap. */
	usage_decide(s->local, p, wl, c, false, force, out);
	if (!reserve)
		return;
	if (wl->kind == WL_CLAIM && c->owner_pod_uid) {
		/* A claim riding on its pod (policy/charge.h): the pod's
		 * reservation or observation holds its units; the claim's
		 * record holds what exceeds them, as the ledger says. */
		if (out->position == QUOTA_COVERED)
			return;
		if (out->requested > 0 && out->requested < c->units) {
			ridden = *c;
			ridden.units = out->requested;
			ridden.per_pod = (unsigned)out->requested;
			c = &ridden;
			x.c = c;
		}
	}
	pthread_mutex_lock(&s->mu);
	watching = s->watching;
	pthread_mutex_unlock(&s->mu);
	if (!watching) {
		unavailable(out, "the Kubernetes API watch is down, so usage may be "
				 "stale");
		return;
	}
	if (!wl->uid || !wl->uid[0]) {
		unavailable(out, "the object has no metadata.uid to reserve under");
		return;
	}
	if (record_of(s, wl, c, &r, err, sizeof(err)) < 0) {
		unavailable(out, err);
		return;
	}
	x.r = &r;
	x.owner_job = wl->owner_job;
	resv_domain_name(c->tenant->cohort, c->tenant->name, domain, sizeof(domain));
	if (s->cfg.io.transact(s->cfg.io.io, domain, decide_on, &x, err,
			       sizeof(err)) < 0) {
		unavailable(out, err);
		return;
	}
	if (x.full)
		unavailable(out, x.why);
}

/* ---- the leader's clean-up -------------------------------------------------- */

struct prune_ctx {
	struct shared *s;
	size_t removed;
};

static bool prunable(void *ctx, const struct resv *r)
{
	bool prune = false;

	judge(ctx, r, &prune);
	return prune;
}

static bool prune_on(void *ctx, struct resv_doc *doc)
{
	struct prune_ctx *x = ctx;
	struct shared *s = x->s;

	pthread_mutex_lock(&s->mu);
	x->removed = resv_doc_drop(doc, prunable, s);
	pthread_mutex_unlock(&s->mu);
	return x->removed > 0;
}

static size_t prune_domain(struct shared *s, const char *cohort,
			   const char *tenant, size_t *failed, char *err,
			   size_t errsz)
{
	struct prune_ctx x = {.s = s};
	char domain[RESV_DOMAIN_NAME_SIZE];

	resv_domain_name(cohort, tenant, domain, sizeof(domain));
	if (s->cfg.io.transact(s->cfg.io.io, domain, prune_on, &x, err, errsz) < 0) {
		(*failed)++;
		return 0;
	}
	return x.removed;
}

size_t usage_shared_prune(struct usage_store *u, const struct policy *p,
			  size_t *failed, char *err, size_t errsz)
{
	struct shared *s = shared_of(u);
	size_t n = 0;

	*failed = 0;
	if (errsz)
		err[0] = '\0';
	for (size_t i = 0; i < policy_cohort_count(p); i++)
		n += prune_domain(s, policy_cohort_name(p, i), NULL, failed, err, errsz);
	for (size_t i = 0; i < policy_tenant_count(p); i++) {
		const struct policy_tenant *t = policy_tenant_at(p, i);

		if (!t->cohort)
			n += prune_domain(s, NULL, t->name, failed, err, errsz);
	}
	return n;
}

/* ---- what the cluster shows --------------------------------------------------- */

/* Stops names from pointing at e (under s->mu). */
static void unname(struct shared *s, struct seen *e)
{
	if (e->named) {
		strmap_del(&s->names, e->name_key, NULL);
		e->named = false;
	}
}

/* Makes the name of e point at e (under s->mu). */
static void name(struct shared *s, struct seen *e)
{
	size_t old;

	if (e->named || !e->name_key[0])
		return;
	if (strmap_get(&s->names, e->name_key, &old)) {
		struct seen *o = (struct seen *)(uintptr_t)old;

		unname(s, o);
	}
	if (strmap_put(&s->names, e->name_key, (size_t)(uintptr_t)e, NULL) == 0)
		e->named = true;
}

/* The entry of uid, made when absent (under s->mu); NULL: out of memory. */
static struct seen *seen_make(struct shared *s, const char *uid,
			      enum usage_kind kind, const char *ns,
			      const char *nm)
{
	struct seen *e = seen_get(s, uid);
	char key[NAME_KEY_SIZE] = "";
	size_t n, k;

	if (e)
		return e;
	if (nm && nm[0])
		name_key(key, sizeof(key), kind, ns, nm);
	n = strlen(uid);
	k = strlen(key);
	e = calloc(1, sizeof(*e) + n + 1 + k + 1);
	if (!e)
		return NULL;
	memcpy(e->uid, uid, n + 1);
	e->name_key = e->uid + n + 1;
	memcpy(e->name_key, key, k + 1);
	e->kind = kind;
	e->generation = -1;
	if (strmap_put(&s->seen, e->uid, (size_t)(uintptr_t)e, NULL) != 0) {
		free(e);
		return NULL; /* out of memory: the record counts on */
	}
	return e;
}

static void sh_observe(struct usage_store *u, const struct usage_item *it)
{
	struct shared *s = shared_of(u);
	struct seen *e;

	usage_observe(s->local, it);
	pthread_mutex_lock(&s->mu);
	e = seen_make(s, it->uid, it->kind, it->namespace, it->name);
	if (e) {
		/* An older generation than one shown (out of order) changes
		 * nothing but that the object is there. */
		if (it->generation > e->generation || e->gone_ms) {
			e->generation = it->generation;
			e->since_ms = s->cfg.now_ms();
		}
		if (it->generation >= e->generation)
			e->active = it->active;
		e->gone_ms = 0;
		e->relist = s->relist[it->kind];
		name(s, e);
	}
	pthread_mutex_unlock(&s->mu);
}

/* e is deleted (under s->mu).  Its name still points at it, until another
 * uid shows under it or e is forgotten: that the name was taken until then
 * is what tells a create refused as AlreadyExists (resv_judge()). */
static void gone(struct shared *s, struct seen *e)
{
	if (!e->gone_ms)
		e->gone_ms = s->cfg.now_ms();
	e->active = false;
}

static void sh_forget(struct usage_store *u, const char *uid)
{
	struct shared *s = shared_of(u);
	struct seen *e;

	usage_forget(s->local, uid);
	pthread_mutex_lock(&s->mu);
	/* Deleted before this replica showed it (a watch that came up late):
	 * known gone all the same. */
	e = seen_make(s, uid, USAGE_KINDS, NULL, NULL);
	if (e)
		gone(s, e);
	pthread_mutex_unlock(&s->mu);
}

static void sh_relist_begin(struct usage_store *u, enum usage_kind kind)
{
	struct shared *s = shared_of(u);

	usage_relist_begin(s->local, kind);
	pthread_mutex_lock(&s->mu);
	s->relist[kind]++;
	pthread_mutex_unlock(&s->mu);
}

/* A relist that did not show a uid of its kind: deleted meanwhile. */
static void sh_relist_end(struct usage_store *u, enum usage_kind kind)
{
	struct shared *s = shared_of(u);
	size_t pos = 0, v;
	const char *key;

	usage_relist_end(s->local, kind);
	pthread_mutex_lock(&s->mu);
	while (strmap_next(&s->seen, &pos, &key, &v)) {
		struct seen *e = (struct seen *)(uintptr_t)v;

		if (e->kind == kind && !e->gone_ms && e->relist != s->relist[kind])
			gone(s, e);
	}
	s->listed_ms[kind] = s->cfg.now_ms();
	pthread_mutex_unlock(&s->mu);
}

static void sh_set_watching(struct usage_store *u, bool up)
{
	struct shared *s = shared_of(u);

	usage_set_watching(s->local, up);
	pthread_mutex_lock(&s->mu);
	s->watching = up;
	pthread_mutex_unlock(&s->mu);
}

/*
 * Forgets the uids gone for longer than a record can live: a record is
 * pruned grace_ms after its object showed, or expires after the TTL, so a
 * uid gone for TTL + grace names no record any more.
 */
static size_t sh_expire(struct usage_store *u)
{
	struct shared *s = shared_of(u);
	uint64_t now = s->cfg.now_ms();
	uint64_t keep = s->cfg.reservation_ttl_ms + s->cfg.grace_ms;
	struct seen **doomed;
	size_t n = 0, pos = 0, v;
	const char *key;

	pthread_mutex_lock(&s->mu);
	doomed = malloc((s->seen.len ? s->seen.len : 1) * sizeof(*doomed));
	if (doomed) {
		while (strmap_next(&s->seen, &pos, &key, &v)) {
			struct seen *e = (struct seen *)(uintptr_t)v;

			if (e->gone_ms && now > e->gone_ms && now - e->gone_ms > keep)
				doomed[n++] = e;
		}
		for (size_t i = 0; i < n; i++) {
			unname(s, doomed[i]);
			strmap_del(&s->seen, doomed[i]->uid, NULL);
			free(doomed[i]);
		}
		free(doomed);
	}
	pthread_mutex_unlock(&s->mu);
	return n;
}

static int64_t sh_used(struct usage_store *u, const char *tenant,
		       const char *flavor)
{
	return usage_used(shared_of(u)->local, tenant, flavor);
}

static size_t sh_entries(struct usage_store *u)
{
	return usage_entries(shared_of(u)->local);
}

static void sh_foreach(struct usage_store *u, usage_sum_fn fn, void *ctx)
{
	usage_foreach(shared_of(u)->local, fn, ctx);
}

static void sh_each_workload(struct usage_store *u, usage_workload_fn fn, void *ctx)
{
	usage_each_workload(shared_of(u)->local, fn, ctx);
}

static bool sh_gang(struct usage_store *u, const char *job_uid,
		    struct usage_gang *out)
{
	return usage_gang(shared_of(u)->local, job_uid, out);
}

static void sh_free(struct usage_store *u)
{
	struct shared *s = shared_of(u);

	usage_free(s->local);
	strmap_release_freeing(&s->seen);
	strmap_release(&s->names);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

static const struct usage_backend shared_backend = {
	.name = "shared",
	.decide = sh_decide,
	.observe = sh_observe,
	.forget = sh_forget,
	.relist_begin = sh_relist_begin,
	.relist_end = sh_relist_end,
	.set_watching = sh_set_watching,
	.expire = sh_expire,
	.used = sh_used,
	.entries = sh_entries,
	.foreach = sh_foreach,
	.each_workload = sh_each_workload,
	.gang = sh_gang,
	.free = sh_free,
};

struct usage_store *usage_shared_new(const struct usage_shared_config *cfg)
{
	struct shared *s;

	if (!cfg || !cfg->io.transact)
		return NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->store.be = &shared_backend;
	s->cfg = *cfg;
	if (!s->cfg.now_ms)
		s->cfg.now_ms = wall_ms;
	if (!s->cfg.reservation_ttl_ms)
		s->cfg.reservation_ttl_ms = TTL_MS_DEFAULT;
	if (!s->cfg.grace_ms)
		s->cfg.grace_ms = GRACE_MS_DEFAULT;
	snprintf(s->replica, sizeof(s->replica), "%s",
		 cfg->replica && cfg->replica[0] ? cfg->replica : "gpugate");
	s->cfg.replica = s->replica;
	/* Observations only: never a reservation, so no TTL. */
	s->local = usage_memory_new(NULL);
	if (!s->local) {
		free(s);
		return NULL;
	}
	s->watching = true;
	pthread_mutex_init(&s->mu, NULL);
	return &s->store;
}
