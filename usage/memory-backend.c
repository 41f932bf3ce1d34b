/*
 * The memory backend of usage/usage.h: this process's ledger.  Entries
 * (workloads holding quota) by uid, running sums by (tenant, flavor), Job
 * families (a Job and the pods it holds for); one mutex around all of it.
 */
#include "usage/usage.h"

#include "base/strmap.h"
#include "base/text.h"
#include "policy/decide.h"
#include "policy/policy.h"
#include "policy/quota.h"
#include "usage/backend.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- the three maps: keys live in the values ------------------------- */

static void *table_get(const struct strmap *t, const char *key)
{
	size_t v;

	return strmap_get(t, key, &v) ? (void *)(uintptr_t)v : NULL;
}

/* Inserts key (which must be absent); -1 when out of memory. */
static int table_put(struct strmap *t, const char *key, void *val)
{
	return strmap_put(t, key, (size_t)(uintptr_t)val, NULL) == 0 ? 0 : -1;
}

static void table_del(struct strmap *t, const char *key)
{
	strmap_del(t, key, NULL);
}

/* Frees every value, then the map. */
static void table_free_all(struct strmap *t)
{
	strmap_release_freeing(t);
}

/* ---- entries ------------------------------------------------------------ */

struct sum {
	int64_t used;
	size_t refs;        /* entries pointing here */
	const char *tenant; /* after key[] */
	const char *flavor; /* after tenant */
	char key[];         /* "tenant\x1f" "flavor", then tenant, flavor */
};

struct family;

struct entry {
	struct sum *sum;
	/* A Job's own family, a pod's Job's, or a claim's pod's (of_pod). */
	struct family *family;
	struct family *claims;         /* a pod's: the claims that name it */
	/* A pod's DRA facts (usage_item): malloc'd, or NULL. */
	char *extended_claim;
	char *named_claims;
	struct entry *prev, *next;     /* siblings: the pods of one Job */
	int64_t per_pod;               /* a pod's units; a Job's per pod */
	int64_t slots;                 /* a Job's gang; 1 for a pod */
	int64_t charged;               /* what it adds to sum->used now */
	int64_t generation;            /* a reservation's metadata.generation */
	uint64_t expires_ms;           /* 0: never (observed, or embedded) */
	uint64_t made_ms;              /* a reservation: when it was made */
	bool named;                    /* ledger names maps name_key to it */
	char *name_key;                /* "kind\x1fnamespace\x1fname", or NULL */
	uint64_t seen;                 /* relist generation it was seen in */
	bool is_job;
	bool rides;                    /* a pod its Job's gang covers */
	enum usage_kind kind;          /* is_job: USAGE_JOBS */
	bool observed;
	/* What a reclaim reads, from the last observation (usage_item). */
	int32_t priority;
	bool preemptible;
	int64_t created_ms, signalled_ms, done_ms;
	const char *name;              /* into uid[] */
	const char *namespace;         /* into uid[] */
	char uid[];                    /* then the name, then the namespace */
};

/*
 * A Job and the pods that name it (charge rule: controller ownerReference
 * and controller-uid label).  A pod rides on the gang when it is in the
 * Job's namespace and holds the Job's flavor and per-pod units; the Job
 * then holds max(slots, riders) x per_pod for all of them, so that pods
 * beyond the gang (a replacement while the old pod terminates, a lowered
 * parallelism, a forged ownerReference) are charged, and nothing more.
 */
struct family {
	struct entry *job;             /* NULL until the Job is known */
	struct entry *pods;            /* its pods the ledger holds */
	int64_t riders;                /* pods that ride on the gang */
	/* A pod and the claims that may ride on it (policy/charge.h): job is
	 * the pod, pods its claims; at most one rides (claims_settle()).
	 * Kept in their own map, so that no uid an ownerReference names can
	 * make a claim a Job's pod or a pod a pod's claim. */
	bool of_pod;
	char job_uid[];
};

struct ledger {
	struct usage_store store; /* first: the seam points here */
	pthread_mutex_t mu;
	struct usage_memory_config cfg;
	struct strmap entries;  /* uid -> entry */
	struct strmap sums;     /* "tenant\x1fflavor" -> usage */
	struct strmap families; /* job uid -> family */
	struct strmap claim_families; /* pod uid -> family (of_pod) */
	struct strmap names;    /* name_key -> the observed entry of that name */
	uint64_t generation[USAGE_KINDS]; /* relist generation, by kind */
	bool watching;          /* usage_set_watching() */
	uint64_t watching_since; /* when it last came up (now_ms) */
};

static struct ledger *ledger_of(struct usage_store *u)
{
	return (struct ledger *)u;
}

static uint64_t monotonic_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sum_key(char *buf, size_t size, const char *tenant,
		      const char *flavor)
{
	text_cat(buf, size, tenant, "\x1f", flavor, NULL);
}

static struct sum *sum_ref(struct ledger *l, const char *tenant,
			       const char *flavor)
{
	char key[600];
	struct sum *u;
	size_t tl = strlen(tenant), fl = strlen(flavor);

	sum_key(key, sizeof(key), tenant, flavor);
	u = table_get(&l->sums, key);
	if (!u) {
		u = calloc(1, sizeof(*u) + 2 * (tl + fl + 2));
		if (!u)
			return NULL;
		memcpy(u->key, tenant, tl);
		u->key[tl] = '\x1f';
		memcpy(u->key + tl + 1, flavor, fl + 1);
		u->tenant = u->key + tl + fl + 2;
		memcpy((char *)u->tenant, tenant, tl + 1);
		u->flavor = u->tenant + tl + 1;
		memcpy((char *)u->flavor, flavor, fl + 1);
		if (table_put(&l->sums, u->key, u) < 0) {
			free(u);
			return NULL;
		}
	}
	u->refs++;
	return u;
}

static void sum_unref(struct ledger *l, struct sum *u)
{
	/* No entry left: every charge was taken back, used is 0. */
	if (--u->refs == 0) {
		table_del(&l->sums, u->key);
		free(u);
	}
}

/* Makes e add `units` to its sum. */
static void set_charge(struct entry *e, int64_t units)
{
	e->sum->used += units - e->charged;
	e->charged = units;
}

static struct strmap *families_of(struct ledger *l, bool of_pod)
{
	return of_pod ? &l->claim_families : &l->families;
}

static struct family *family_get(struct ledger *l, const char *job_uid, bool of_pod)
{
	struct strmap *map = families_of(l, of_pod);
	struct family *f = table_get(map, job_uid);
	size_t n = strlen(job_uid);

	if (f)
		return f;
	f = calloc(1, sizeof(*f) + n + 1);
	if (!f)
		return NULL;
	memcpy(f->job_uid, job_uid, n + 1);
	f->of_pod = of_pod;
	if (table_put(map, f->job_uid, f) < 0) {
		free(f);
		return NULL;
	}
	if (of_pod) {
		/* The pod may be known already. */
		struct entry *pod = table_get(&l->entries, job_uid);

		if (pod && pod->kind == USAGE_PODS && !pod->claims) {
			pod->claims = f;
			f->job = pod;
		}
	}
	return f;
}

static void family_maybe_free(struct ledger *l, struct family *f)
{
	if (f && !f->job && !f->pods) {
		table_del(families_of(l, f->of_pod), f->job_uid);
		free(f);
	}
}

static void holding_of(const struct entry *e, struct usage_holding *out)
{
	*out = (struct usage_holding){.namespace = e->namespace,
				      .tenant = e->sum->tenant,
				      .flavor = e->sum->flavor,
				      .per_pod = e->per_pod};
}

/* Whether pod entry k fits the gang of Job entry job (usage_gang_fits()). */
static bool fits_gang(const struct entry *job, const struct entry *k)
{
	struct usage_holding jh, ph;

	if (!job)
		return false;
	holding_of(job, &jh);
	holding_of(k, &ph);
	return usage_gang_fits(&jh, &ph);
}

static void charge_job(struct family *f)
{
	struct entry *j = f->job;

	if (j)
		set_charge(j, (f->riders > j->slots ? f->riders : j->slots) * j->per_pod);
}

/* Whether pod entry pod names the claim called name itself
 * (spec.resourceClaims). */
static bool names_claim(const struct entry *pod, const char *name)
{
	const char *p = pod->named_claims;
	size_t n = strlen(name);

	if (!p || !n)
		return false;
	while ((p = strstr(p, name)) != NULL) {
		if (p > pod->named_claims && p[-1] == '\x1f' && p[n] == '\x1f')
			return true;
		p++;
	}
	return false;
}

/* Claim a is the pod's earlier (creation, then name) than b. */
static bool earlier(const struct entry *a, const struct entry *b)
{
	if (!b)
		return true;
	if (a->created_ms != b->created_ms)
		return a->created_ms < b->created_ms;
	return strcmp(a->name, b->name) < 0;
}

/*
 * The pod's claims (f->of_pod): which one rides, what each holds.  The
 * one its status names, else (not written yet) the earliest, as
 * Kubernetes' ResourceQuota picks it; never one the pod names itself.
 */
static void claims_settle(struct family *f)
{
	const struct entry *pod = f->job, *chosen = NULL;
	struct usage_holding ph, kh;

	for (struct entry *k = f->pods; pod && k; k = k->next)
		if (pod->extended_claim ? strcmp(k->name, pod->extended_claim) == 0
					: earlier(k, chosen))
			chosen = k;
	if (chosen && names_claim(pod, chosen->name))
		chosen = NULL;
	if (pod)
		holding_of(pod, &ph);
	f->riders = 0;
	for (struct entry *k = f->pods; k; k = k->next) {
		k->rides = k == chosen;
		f->riders += k->rides;
		holding_of(k, &kh);
		set_charge(k, usage_claim_ride(k->rides ? &ph : NULL, &kh));
	}
}

/* Who rides, and what each entry of f adds: after the Job came or went. */
static void family_settle(struct family *f)
{
	if (f->of_pod) {
		claims_settle(f);
		return;
	}
	f->riders = 0;
	for (struct entry *k = f->pods; k; k = k->next) {
		k->rides = fits_gang(f->job, k);
		f->riders += k->rides;
		set_charge(k, k->rides ? 0 : k->per_pod);
	}
	charge_job(f);
}

/*
 * Adds an entry.  parent_uid: a pod's Job (its gang may hold it), a claim's
 * pod (it may ride on it); NULL for a Job.
 */
static struct entry *entry_add(struct ledger *l, const char *uid,
			       enum usage_kind kind, const char *name,
			       const char *ns, const char *tenant,
			       const char *flavor, int64_t per_pod, int64_t slots,
			       const char *parent_uid, int64_t created_ms)
{
	size_t ul = strlen(uid), nl = strlen(name ? name : ""),
	       sl = strlen(ns ? ns : "");
	struct entry *e = calloc(1, sizeof(*e) + ul + nl + sl + 3);
	bool is_job = kind == USAGE_JOBS;

	if (!e)
		return NULL;
	memcpy(e->uid, uid, ul + 1);
	e->name = e->uid + ul + 1;
	memcpy(e->uid + ul + 1, name ? name : "", nl + 1);
	e->namespace = e->name + nl + 1;
	memcpy(e->uid + ul + nl + 2, ns ? ns : "", sl + 1);
	e->is_job = is_job;
	e->kind = kind;
	e->created_ms = created_ms;
	if (name && name[0]) {
		char k[2] = {(char)('0' + (int)kind), '\0'};
		size_t kl = 2 + sl + 1 + nl + 1;

		e->name_key = malloc(kl);
		if (e->name_key)
			text_cat(e->name_key, kl, k, "\x1f", ns ? ns : "", "\x1f", name, NULL);
	}
	e->per_pod = per_pod > 0 ? per_pod : 0;
	e->slots = is_job ? (slots > 0 ? slots : 0) : 1;
	e->sum = sum_ref(l, tenant, flavor);
	if (!e->sum || table_put(&l->entries, e->uid, e) < 0) {
		if (e->sum)
			sum_unref(l, e->sum);
		free(e->name_key);
		free(e);
		return NULL;
	}
	if (kind == USAGE_PODS) {
		/* Its claims may have come first. */
		e->claims = table_get(&l->claim_families, uid);
		if (e->claims && !e->claims->job)
			e->claims->job = e;
		else
			e->claims = NULL;
	}
	if (is_job) {
		e->family = family_get(l, uid, false);
		if (e->family) {
			e->family->job = e;
			family_settle(e->family);
			return e;
		}
	} else if (parent_uid && parent_uid[0]) {
		e->family = family_get(l, parent_uid, kind == USAGE_CLAIMS);
		if (e->family) {
			e->next = e->family->pods;
			if (e->next)
				e->next->prev = e;
			e->family->pods = e;
			if (kind == USAGE_CLAIMS) {
				claims_settle(e->family);
				return e;
			}
			e->rides = fits_gang(e->family->job, e);
			e->family->riders += e->rides;
			charge_job(e->family);
		}
	}
	set_charge(e, e->rides ? 0 : e->per_pod * e->slots);
	if (e->claims)
		claims_settle(e->claims);
	return e;
}

static void entry_remove(struct ledger *l, struct entry *e)
{
	struct family *f = e->family;

	set_charge(e, 0);
	if (f && e->is_job) {
		f->job = NULL;
		family_settle(f); /* its pods may still run: they hold quota now */
	} else if (f) {
		if (e->prev)
			e->prev->next = e->next;
		else
			f->pods = e->next;
		if (e->next)
			e->next->prev = e->prev;
		f->riders -= e->rides;
		if (f->of_pod)
			claims_settle(f);
		else
			charge_job(f);
	}
	family_maybe_free(l, f);
	if (e->claims) {
		/* Its claims hold all their devices now. */
		e->claims->job = NULL;
		claims_settle(e->claims);
		family_maybe_free(l, e->claims);
	}
	free(e->extended_claim);
	free(e->named_claims);
	if (e->named)
		table_del(&l->names, e->name_key);
	table_del(&l->entries, e->uid);
	sum_unref(l, e->sum);
	free(e->name_key);
	free(e);
}

/* The watch shows e under its name (the newest object of that name). */
static void name_entry(struct ledger *l, struct entry *e)
{
	struct entry *old;

	if (e->named || !e->name_key)
		return;
	old = table_get(&l->names, e->name_key);
	if (old) {
		table_del(&l->names, old->name_key);
		old->named = false;
	}
	e->named = table_put(&l->names, e->name_key, e) == 0;
}

/* ---- admission ------------------------------------------------------- */

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
	struct sum *u;

	if (!t || !f)
		return 0;
	sum_key(key, sizeof(key), t->name, f->name);
	u = table_get(&v->l->sums, key);
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

/* Whether a new pod of claim c in namespace ns would ride on the gang of
 * its Job (which must be known): usage_gang_takes(). */
static bool covered(const struct family *f, const char *ns,
		    const struct quota_claim *c)
{
	struct usage_holding jh, ph = {.namespace = ns, .tenant = c->tenant->name,
				       .flavor = c->flavor->name,
				       .per_pod = (int64_t)c->per_pod};

	if (!f || !f->job)
		return false;
	holding_of(f->job, &jh);
	return usage_gang_takes(&jh, f->job->slots, f->riders, &ph);
}

/*
 * What claim c of wl would hold beside its pod (usage_claim_ride()): a
 * claim that rides holds what its devices exceed the pod's units by, any
 * other all of them.  A new claim rides when its pod is known and has no
 * other claim (it would be the latest, claims_settle()), or when the
 * pod's status names it; a claim asked again (have) holds what it holds.
 */
static int64_t claim_would_hold(struct ledger *l, const struct workload *wl,
				const struct quota_claim *c, const struct entry *have)
{
	const struct family *f;
	const struct entry *pod;
	const char *name = wl->name ? wl->name : "";
	struct usage_holding ph, kh = {.namespace = wl->namespace,
				       .tenant = c->tenant->name,
				       .flavor = c->flavor->name,
				       .per_pod = c->units};

	if (wl->kind != WL_CLAIM)
		return c->units;
	if (have)
		return have->charged;
	if (!c->owner_pod_uid)
		return c->units;
	f = table_get(&l->claim_families, c->owner_pod_uid);
	pod = f ? f->job : table_get(&l->entries, c->owner_pod_uid);
	if (!pod || pod->kind != USAGE_PODS ||
	    (pod->extended_claim ? strcmp(name, pod->extended_claim) != 0
				 : f && f->pods) ||
	    names_claim(pod, name))
		return c->units;
	holding_of(pod, &ph);
	return usage_claim_ride(&ph, &kh);
}

/* What the feed will list a workload reserved at /validate as. */
static enum usage_kind kind_of(const struct workload *wl)
{
	return wl->kind == WL_JOB     ? USAGE_JOBS
	       : wl->kind == WL_CLAIM ? USAGE_CLAIMS
				      : USAGE_PODS;
}

static void mem_decide(struct usage_store *u, const struct policy *p,
		       const struct workload *wl, const struct quota_claim *c,
		       bool reserve, bool force, struct quota_result *out)
{
	struct ledger *l = ledger_of(u);
	struct view_ctx vc = {.l = l, .p = p};
	struct usage_view view = {.ctx = &vc, .used = view_used};
	struct family *fam = NULL;
	struct entry *have;
	bool is_job = wl->kind == WL_JOB;
	int64_t units;
	char key[400];

	workload_key(wl, key, sizeof(key));
	pthread_mutex_lock(&l->mu);
	if (reserve && l->cfg.may_reserve) {
		char why[sizeof(out->reason)] = "";

		/* Under the lock: nothing is decided by a replica that lost the
		 * right to between the check and the decision. */
		if (!l->cfg.may_reserve(l->cfg.fence_ctx, why, sizeof(why))) {
			pthread_mutex_unlock(&l->mu);
			memset(out, 0, sizeof(*out));
			out->position = QUOTA_UNAVAILABLE;
			snprintf(out->reason, sizeof(out->reason), "%s", why);
			return;
		}
	}
	have = table_get(&l->entries, key);
	if (wl->kind == WL_POD && c->owner_job_uid)
		fam = table_get(&l->families, c->owner_job_uid);
	units = claim_would_hold(l, wl, c, have);
	if ((have && have->rides && have->charged == 0) ||
	    (!have && covered(fam, wl->namespace, c)) ||
	    (wl->kind == WL_CLAIM && c->owner_pod_uid && units == 0)) {
		/* A pod its Job's gang holds, a claim its pod's units cover:
		 * nothing more to charge. */
		memset(out, 0, sizeof(*out));
		out->position = QUOTA_COVERED;
		out->holder = wl->kind == WL_CLAIM ? wl->owner_pod : wl->owner_job;
	} else {
		/* Asked again for what it already holds (a retried request):
		 * judge it without its own units, and do not count it twice. */
		int64_t held = have ? have->charged : 0;

		if (have)
			set_charge(have, 0);
		quota_decide(p, c->tenant, c->flavor, units, c->may_borrow, &view,
			     out);
		if (have)
			set_charge(have, held);
	}
	if (have && reserve && (admitted(out->position) || force) &&
	    wl->generation > have->generation) {
		/* A Job resumed before the watch showed it suspended: its
		 * entry stands for the new generation, and the older
		 * observations on their way must not remove it. */
		have->generation = wl->generation;
		have->observed = false;
		have->made_ms = l->cfg.now_ms();
		if (l->cfg.reservation_ttl_ms)
			have->expires_ms = have->made_ms + l->cfg.reservation_ttl_ms;
	} else if (!have && reserve && (admitted(out->position) || force)) {
		/* A claim reserved now is its pod's latest until the watch
		 * shows when it was made. */
		struct entry *e = entry_add(l, key, kind_of(wl), wl->name, wl->namespace,
					    c->tenant->name, c->flavor->name,
					    c->per_pod, is_job ? c->pods : 1,
					    wl->kind == WL_CLAIM ? c->owner_pod_uid
					    : is_job	 ? NULL
							 : c->owner_job_uid,
					    wl->kind == WL_CLAIM ? INT64_MAX : 0);

		if (e) {
			e->generation = wl->generation;
			e->made_ms = l->cfg.now_ms();
			if (l->cfg.reservation_ttl_ms)
				e->expires_ms = e->made_ms + l->cfg.reservation_ttl_ms;
		}
	}
	pthread_mutex_unlock(&l->mu);
}

static void mem_release(struct usage_store *u, const struct policy *p,
			const struct workload *wl)
{
	struct ledger *l = ledger_of(u);
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

/* ---- what the cluster shows ------------------------------------------------------------- */

/* The entry an observation may ride on: a pod's Job, a claim's pod. */
static const char *parent_of(const struct usage_item *it)
{
	return it->kind == USAGE_JOBS     ? NULL
	       : it->kind == USAGE_CLAIMS ? it->owner_pod_uid
					  : it->owner_job_uid;
}

/* Whether entry e holds what observation it says. */
static bool same_holding(const struct entry *e, const struct usage_item *it)
{
	char key[600];
	const char *fam = e->family && !e->is_job ? e->family->job_uid : NULL;
	bool it_job = it->kind == USAGE_JOBS;
	const char *owner = parent_of(it);

	sum_key(key, sizeof(key), it->tenant, it->flavor);
	return strcmp(key, e->sum->key) == 0 && e->kind == it->kind &&
	       e->per_pod == it->per_pod &&
	       e->slots == (it_job ? it->slots : 1) &&
	       strcmp(e->namespace, it->namespace ? it->namespace : "") == 0 &&
	       (fam && owner ? strcmp(fam, owner) == 0 : !fam == !(owner && owner[0]));
}

/* *dst becomes a copy of src (NULL: none); true when it changed.  Out of
 * memory it becomes NULL (the pod then covers no claim by name). */
static bool set_text(char **dst, const char *src)
{
	if (*dst && src && strcmp(*dst, src) == 0)
		return false;
	if (!*dst && !src)
		return false;
	free(*dst);
	*dst = src ? strdup(src) : NULL;
	return true;
}

static void mem_observe(struct usage_store *u, const struct usage_item *it)
{
	struct ledger *l = ledger_of(u);
	struct entry *e;

	pthread_mutex_lock(&l->mu);
	e = table_get(&l->entries, it->uid);
	if (e && !e->observed && it->generation < e->generation) {
		/* Older than what was reserved (a Job resumed at /validate, the
		 * watch still shows it suspended): the reservation stands. */
		pthread_mutex_unlock(&l->mu);
		return;
	}
	if (e && (!it->active || !same_holding(e, it))) {
		/* Gone out of use, or what it holds changed: re-add it from the
		 * observation. */
		entry_remove(l, e);
		e = NULL;
	}
	if (!e && it->active)
		e = entry_add(l, it->uid, it->kind, it->name, it->namespace,
			      it->tenant, it->flavor, it->per_pod,
			      it->kind == USAGE_JOBS ? it->slots : 1,
			      parent_of(it), it->created_ms);
	if (e) {
		bool resettle = e->created_ms != it->created_ms;

		e->observed = true;
		e->expires_ms = 0;
		name_entry(l, e);
		e->generation = it->generation;
		e->seen = l->generation[it->kind];
		e->priority = it->priority;
		e->preemptible = it->preemptible;
		e->created_ms = it->created_ms;
		e->signalled_ms = it->signalled_ms;
		e->done_ms = it->done_ms;
		if (e->kind == USAGE_PODS) {
			resettle = set_text(&e->extended_claim, it->extended_claim) |
				   set_text(&e->named_claims, it->named_claims);
			if (resettle && e->claims)
				claims_settle(e->claims);
		} else if (e->kind == USAGE_CLAIMS && resettle && e->family) {
			claims_settle(e->family);
		}
	}
	pthread_mutex_unlock(&l->mu);
}

static void mem_forget(struct usage_store *u, const char *uid)
{
	struct ledger *l = ledger_of(u);
	struct entry *e;

	pthread_mutex_lock(&l->mu);
	e = table_get(&l->entries, uid);
	if (e)
		entry_remove(l, e);
	pthread_mutex_unlock(&l->mu);
}

static void mem_relist_begin(struct usage_store *u, enum usage_kind kind)
{
	struct ledger *l = ledger_of(u);

	pthread_mutex_lock(&l->mu);
	l->generation[kind]++;
	pthread_mutex_unlock(&l->mu);
}

/* Collects the entries matching pred, then removes them: removal while
 * walking the map would move entries under the walker. */
static size_t remove_where(struct ledger *l,
			   bool (*pred)(const struct ledger *l, const struct entry *e,
					const void *arg),
			   const void *arg)
{
	struct entry **doomed;
	size_t n = 0, pos = 0, v;
	const char *key;

	doomed = malloc((l->entries.len ? l->entries.len : 1) * sizeof(*doomed));
	if (!doomed)
		return 0;
	while (strmap_next(&l->entries, &pos, &key, &v))
		if (pred(l, (const struct entry *)(uintptr_t)v, arg))
			doomed[n++] = (struct entry *)(uintptr_t)v;
	for (size_t i = 0; i < n; i++)
		entry_remove(l, doomed[i]);
	free(doomed);
	return n;
}

static bool stale(const struct ledger *l, const struct entry *e, const void *arg)
{
	enum usage_kind kind = *(const enum usage_kind *)arg;

	return e->observed && e->kind == kind && e->seen != l->generation[kind];
}

static void mem_relist_end(struct usage_store *u, enum usage_kind kind)
{
	struct ledger *l = ledger_of(u);

	pthread_mutex_lock(&l->mu);
	remove_where(l, stale, &kind);
	pthread_mutex_unlock(&l->mu);
}

static void mem_set_watching(struct usage_store *u, bool up)
{
	struct ledger *l = ledger_of(u);

	pthread_mutex_lock(&l->mu);
	if (up && !l->watching)
		l->watching_since = l->cfg.now_ms();
	l->watching = up;
	pthread_mutex_unlock(&l->mu);
}

/*
 * A reservation's TTL runs from when it was made or the watch came up,
 * whichever is later (expires_ms is made + TTL).  Sooner, grace_ms after
 * it was made, when the watch shows its name under another uid: the
 * apiserver refused the create (AlreadyExists), as the shared store
 * judges it (usage/reservations.h, resv_judge()).
 */
static bool expired(const struct ledger *l, const struct entry *e, const void *arg)
{
	uint64_t now = *(const uint64_t *)arg;
	uint64_t since = l->watching_since + l->cfg.reservation_ttl_ms;
	const struct entry *holder;

	if (e->observed || !e->expires_ms)
		return false;
	if ((e->expires_ms > since ? e->expires_ms : since) <= now)
		return true;
	holder = e->name_key ? table_get(&l->names, e->name_key) : NULL;
	return holder && holder != e && now >= e->made_ms &&
	       now - e->made_ms >= l->cfg.grace_ms;
}

static size_t mem_expire(struct usage_store *u)
{
	struct ledger *l = ledger_of(u);
	uint64_t now = l->cfg.now_ms();
	size_t n = 0;

	pthread_mutex_lock(&l->mu);
	if (l->watching)
		n = remove_where(l, expired, &now);
	pthread_mutex_unlock(&l->mu);
	return n;
}

static int64_t mem_used(struct usage_store *u, const char *tenant,
			const char *flavor)
{
	struct ledger *l = ledger_of(u);
	char key[600];
	struct sum *sm;
	int64_t v;

	sum_key(key, sizeof(key), tenant, flavor);
	pthread_mutex_lock(&l->mu);
	sm = table_get(&l->sums, key);
	v = sm ? sm->used : 0;
	pthread_mutex_unlock(&l->mu);
	return v;
}

static size_t mem_entries(struct usage_store *u)
{
	struct ledger *l = ledger_of(u);
	size_t n;

	pthread_mutex_lock(&l->mu);
	n = l->entries.len;
	pthread_mutex_unlock(&l->mu);
	return n;
}

/* The sum's tenant and flavor names ("tenant\x1fflavor"). */
static bool split_key(const char *key, char *tenant, size_t size, const char **flavor)
{
	const char *sep = strchr(key, '\x1f');
	size_t tl = sep ? (size_t)(sep - key) : 0;

	if (!sep || tl >= size)
		return false;
	memcpy(tenant, key, tl);
	tenant[tl] = '\0';
	*flavor = sep + 1;
	return true;
}

static void mem_foreach(struct usage_store *u, usage_sum_fn fn, void *ctx)
{
	struct ledger *l = ledger_of(u);
	size_t pos = 0, v;
	const char *key;

	pthread_mutex_lock(&l->mu);
	while (strmap_next(&l->sums, &pos, &key, &v)) {
		const struct sum *sm = (const struct sum *)(uintptr_t)v;
		char tenant[300];
		const char *flavor;

		if (!split_key(sm->key, tenant, sizeof(tenant), &flavor))
			continue;
		fn(ctx, tenant, flavor, sm->used);
	}
	pthread_mutex_unlock(&l->mu);
}

/* A Job's priority: its template's, or that of its riding pods (the
 * Priority admission plugin resolved their priorityClassName), the
 * highest. */
static int32_t job_priority(const struct entry *e)
{
	int32_t prio = e->priority;

	if (!e->family)
		return prio;
	for (const struct entry *pod = e->family->pods; pod; pod = pod->next)
		if (pod->rides && pod->priority > prio)
			prio = pod->priority;
	return prio;
}

/* A Job's report: its own, else the latest of its riding pods' when every
 * one of them has reported; 0 when some has not. */
static int64_t job_done(const struct entry *e)
{
	int64_t latest = 0;

	if (e->done_ms || !e->family || !e->family->riders)
		return e->done_ms;
	for (const struct entry *pod = e->family->pods; pod; pod = pod->next) {
		if (!pod->rides)
			continue;
		if (!pod->done_ms)
			return 0;
		if (pod->done_ms > latest)
			latest = pod->done_ms;
	}
	return latest;
}

static void mem_each_workload(struct usage_store *u, usage_workload_fn fn, void *ctx)
{
	struct ledger *l = ledger_of(u);
	size_t pos = 0, v;
	const char *key;

	pthread_mutex_lock(&l->mu);
	while (strmap_next(&l->entries, &pos, &key, &v)) {
		const struct entry *e = (const struct entry *)(uintptr_t)v;
		struct usage_workload w;
		char tenant[300];

		if (!e->observed || e->charged <= 0 || e->rides ||
		    e->kind == USAGE_CLAIMS ||
		    !split_key(e->sum->key, tenant, sizeof(tenant), &w.flavor))
			continue;
		w.uid = e->uid;
		w.kind = e->kind;
		w.namespace = e->namespace;
		w.name = e->name;
		w.tenant = tenant;
		w.units = e->charged;
		w.priority = e->is_job ? job_priority(e) : e->priority;
		w.created_ms = e->created_ms;
		w.preemptible = e->preemptible;
		w.signalled_ms = e->signalled_ms;
		w.done_ms = e->is_job ? job_done(e) : e->done_ms;
		w.pods = e->is_job && e->family ? (size_t)e->family->riders : 0;
		w.owned = !e->is_job && e->family;
		fn(ctx, &w);
	}
	pthread_mutex_unlock(&l->mu);
}

static bool mem_gang(struct usage_store *u, const char *job_uid,
		     struct usage_gang *out)
{
	struct ledger *l = ledger_of(u);
	struct family *f;
	bool found = false;

	pthread_mutex_lock(&l->mu);
	f = table_get(&l->families, job_uid);
	if (f && f->job) {
		const struct entry *j = f->job;

		snprintf(out->namespace, sizeof(out->namespace), "%s", j->namespace);
		snprintf(out->tenant, sizeof(out->tenant), "%s", j->sum->tenant);
		snprintf(out->flavor, sizeof(out->flavor), "%s", j->sum->flavor);
		out->per_pod = j->per_pod;
		out->slots = j->slots;
		out->riders = f->riders;
		found = true;
	}
	pthread_mutex_unlock(&l->mu);
	return found;
}

static void mem_free(struct usage_store *u)
{
	struct ledger *l = ledger_of(u);

	size_t pos = 0, v;
	const char *key;

	strmap_release(&l->names); /* its keys and values are the entries' */
	while (strmap_next(&l->entries, &pos, &key, &v)) {
		struct entry *e = (struct entry *)(uintptr_t)v;

		free(e->name_key);
		free(e->extended_claim);
		free(e->named_claims);
	}
	table_free_all(&l->entries);
	table_free_all(&l->sums);
	table_free_all(&l->families);
	table_free_all(&l->claim_families);
	pthread_mutex_destroy(&l->mu);
	free(l);
}

static const struct usage_backend memory_backend = {
	.name = "memory",
	.decide = mem_decide,
	.release = mem_release,
	.observe = mem_observe,
	.forget = mem_forget,
	.relist_begin = mem_relist_begin,
	.relist_end = mem_relist_end,
	.set_watching = mem_set_watching,
	.expire = mem_expire,
	.used = mem_used,
	.entries = mem_entries,
	.foreach = mem_foreach,
	.each_workload = mem_each_workload,
	.gang = mem_gang,
	.free = mem_free,
};

struct usage_store *usage_memory_new(const struct usage_memory_config *cfg)
{
	struct ledger *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	l->store.be = &memory_backend;
	if (cfg)
		l->cfg = *cfg;
	if (!l->cfg.now_ms)
		l->cfg.now_ms = monotonic_ms;
	if (!l->cfg.grace_ms)
		l->cfg.grace_ms = 5000;
	l->watching = true;
	pthread_mutex_init(&l->mu, NULL);
	return &l->store;
}
