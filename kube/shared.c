/*
 * The shared backend of kube/shared.h: observations in a memory ledger of
 * its own, reservations in the domain documents, which uids the watch has
 * shown (and since when) in one map.
 */
#include "kube/shared.h"

#include "base/diag.h"
#include "base/strmap.h"
#include "base/text.h"
#include "policy/decide.h"
#include "policy/policy.h"
#include "policy/quota.h"
#include "kube/reservations.h"
#include "usage/backend.h"
#include "usage/usage.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TTL_MS_DEFAULT 60000u
#define GRACE_MS_DEFAULT 5000u

/* A uid the watch has shown. */
struct seen {
	uint64_t since_ms;  /* first shown */
	uint64_t gone_ms;   /* forgotten (deleted, or holds nothing); 0: not */
	char uid[];
};

struct shared {
	struct usage_store store; /* first: the seam points here */
	struct usage_shared_config cfg;
	char replica[RESV_NAME_MAX + 1];
	struct usage_store *local; /* what the watch shows */
	pthread_mutex_t mu;        /* seen, watching */
	struct strmap seen;        /* uid -> struct seen */
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

/* ---- decisions ------------------------------------------------------------ */

struct decision_ctx {
	struct shared *s;
	const struct policy *p;
	const struct quota_claim *c;
	bool force;
	const struct resv *r;          /* the record to add */
	struct quota_result *out;
	struct resv_doc *doc;          /* during fn */
	bool full;                     /* the document refused the record */
	char why[160];
};

/* Records the caller counts already: shown by the watch (or gone after
 * that), and the one being decided (a retried request replaces it). */
static bool counted(void *ctx, const struct resv *r)
{
	struct decision_ctx *x = ctx;

	return strcmp(r->uid, x->r->uid) == 0 || seen_get(x->s, r->uid) != NULL;
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
	return pos == QUOTA_NOMINAL || pos == QUOTA_BORROWED;
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
	quota_decide(x->p, x->c->tenant, x->c->flavor, x->c->units,
		     x->c->may_borrow, &view, x->out);
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
	struct resv r;
	char domain[RESV_DOMAIN_NAME_SIZE], err[200];
	bool watching;

	/* A peek (/mutate, dry runs), and a pod its Job's gang covers: the
	 * local ledger answers (a gang is known once its Job is shown). */
	usage_decide(s->local, p, wl, c, false, force, out);
	if (!reserve || out->position == QUOTA_COVERED)
		return;
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

static bool observed_since(void *ctx, const char *uid, uint64_t *since)
{
	const struct seen *e = seen_get(ctx, uid);

	if (!e)
		return false;
	*since = e->since_ms;
	return true;
}

static bool prune_on(void *ctx, struct resv_doc *doc)
{
	struct prune_ctx *x = ctx;
	struct shared *s = x->s;

	pthread_mutex_lock(&s->mu);
	x->removed = resv_doc_prune(doc, observed_since, s, s->cfg.now_ms(),
				    s->cfg.grace_ms, s->cfg.reservation_ttl_ms);
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

static void sh_observe(struct usage_store *u, const struct usage_item *it)
{
	struct shared *s = shared_of(u);
	struct seen *e;

	usage_observe(s->local, it);
	pthread_mutex_lock(&s->mu);
	e = seen_get(s, it->uid);
	if (e) {
		e->gone_ms = 0;
	} else {
		size_t n = strlen(it->uid);

		e = calloc(1, sizeof(*e) + n + 1);
		if (e) {
			memcpy(e->uid, it->uid, n + 1);
			e->since_ms = s->cfg.now_ms();
			if (strmap_put(&s->seen, e->uid, (size_t)(uintptr_t)e, NULL) != 0)
				free(e); /* out of memory: the record counts on */
		}
	}
	pthread_mutex_unlock(&s->mu);
}

static void sh_forget(struct usage_store *u, const char *uid)
{
	struct shared *s = shared_of(u);
	struct seen *e;

	usage_forget(s->local, uid);
	pthread_mutex_lock(&s->mu);
	e = seen_get(s, uid);
	if (e && !e->gone_ms)
		e->gone_ms = s->cfg.now_ms();
	pthread_mutex_unlock(&s->mu);
}

static void sh_relist_begin(struct usage_store *u, enum usage_kind kind)
{
	usage_relist_begin(shared_of(u)->local, kind);
}

static void sh_relist_end(struct usage_store *u, enum usage_kind kind)
{
	usage_relist_end(shared_of(u)->local, kind);
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

static void sh_free(struct usage_store *u)
{
	struct shared *s = shared_of(u);
	size_t pos = 0, v;
	const char *key;

	usage_free(s->local);
	while (strmap_next(&s->seen, &pos, &key, &v))
		free((void *)(uintptr_t)v);
	strmap_release(&s->seen);
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
