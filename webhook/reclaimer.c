/*
 * The reclaimer's round, in the order of webhook/reclaimer.h: collect the
 * observed workloads, then per cohort and flavor pick, signal, release or
 * abandon; then resume.  Decisions are policy/quota.c and policy/reclaim.c
 * (pure); this file is the reading and the writing.
 */
#include "webhook/reclaimer.h"

#include "base/arena.h"
#include "base/diag.h"
#include "base/log.h"
#include "base/nap.h"
#include "base/text.h"
#include "kube/client.h"
#include "policy/decide.h"
#include "policy/policy.h"
#include "policy/quota.h"
#include "policy/reclaim.h"
#include "usage/usage.h"
#include "webhook/charge.h"
#include "webhook/events.h"
#include "webhook/holder.h"

#include <jansson.h>
#include <stdint.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WRITE_TIMEOUT_MS 5000
/* Workloads a round looks at, at most (the rest wait for the next). */
#define WORKLOADS_MAX 20000

struct reclaimer {
	struct reclaimer_config cfg;
	char identity[256];
	struct kube *kube;
	struct nap nap;
	pthread_t thread;
	pthread_mutex_t mu; /* stats */
	struct reclaimer_stats stats;
};

/* A workload as a round sees it, copied out of the store's lock. */
struct seen {
	struct usage_workload w;   /* strings into the round's arena */
	const struct policy_tenant *tenant;
	const struct policy_flavor *flavor;
	bool picked;
};

struct round {
	struct reclaimer *r;
	const struct policy *p;
	struct arena a;
	struct seen *seen;
	size_t n, cap;
	int64_t now_ms;
};

static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void count(struct reclaimer *r, uint64_t *field)
{
	pthread_mutex_lock(&r->mu);
	(*field)++;
	pthread_mutex_unlock(&r->mu);
}

static void collect(void *ctx, const struct usage_workload *w)
{
	struct round *rd = ctx;
	const struct policy_tenant *t = policy_tenant_find(rd->p, w->tenant);
	const struct policy_flavor *f = policy_flavor_find(rd->p, w->flavor);
	struct seen *s;

	if (!t || !f || !t->cohort || rd->n == rd->cap)
		return;
	s = &rd->seen[rd->n];
	s->w = *w;
	s->w.uid = arena_strdup(&rd->a, w->uid);
	s->w.namespace = arena_strdup(&rd->a, w->namespace);
	s->w.name = arena_strdup(&rd->a, w->name ? w->name : "");
	s->w.tenant = t->name;
	s->w.flavor = f->name;
	s->tenant = t;
	s->flavor = f;
	s->picked = false;
	if (s->w.uid && s->w.namespace && s->w.name)
		rd->n++;
}

static const char *kind_path(const struct usage_workload *w)
{
	return w->kind == USAGE_JOBS ? "/apis/batch/v1/namespaces/%s/jobs/%s"
				     : "/api/v1/namespaces/%s/pods/%s";
}

static struct events_object object_of(const struct usage_workload *w)
{
	return (struct events_object){
		w->kind == USAGE_JOBS ? "batch/v1" : "v1",
		w->kind == USAGE_JOBS ? "Job" : "Pod", w->namespace, w->name, w->uid};
}

/* A merge patch of path; 0, 404 (gone: nothing to do), or the failure. */
static int patch(struct round *rd, const char *path, json_t *body, const char *what)
{
	struct diag d;
	int rc;

	if (!body)
		return -1;
	diag_init(&d);
	rc = kube_patch(rd->r->kube, path, KUBE_PATCH_MERGE, body, WRITE_TIMEOUT_MS, NULL,
			&d);
	json_decref(body);
	if (rc != 0 && rc != 404) {
		char q[600];

		count(rd->r, &rd->r->stats.failed);
		log_event(LOG_WARN, "msg=\"reclaim step failed\" step=%s path=%s error=\"%s\"",
			  what, path, log_quote(diag_text(&d), q, sizeof(q)));
	}
	return rc;
}

/* The annotations (value NULL: removed) on the pods of Job w. */
static void annotate_pods(struct round *rd, const struct usage_workload *w,
			  json_t *annotations)
{
	char path[900];
	json_t *list = NULL, *items, *pod;
	struct diag d;
	size_t i;

	snprintf(path, sizeof(path),
		 "/api/v1/namespaces/%s/pods?labelSelector=batch.kubernetes.io%%2Fcontroller-uid%%3D%s",
		 w->namespace, w->uid);
	diag_init(&d);
	if (kube_get_json(rd->r->kube, path, WRITE_TIMEOUT_MS, &list, &d) != 0) {
		json_decref(annotations);
		return;
	}
	items = json_object_get(list, "items");
	json_array_foreach(items, i, pod) {
		const json_t *meta = json_object_get(pod, "metadata");
		const char *name = json_string_value(json_object_get(meta, "name"));
		char ppath[600];

		if (!name || json_object_get(meta, "deletionTimestamp"))
			continue;
		snprintf(ppath, sizeof(ppath), "/api/v1/namespaces/%s/pods/%s", w->namespace,
			 name);
		patch(rd, ppath, json_pack("{s:{s:O}}", "metadata", "annotations", annotations),
		      "annotate pod");
	}
	json_decref(list);
	json_decref(annotations);
}

/* "8 h100-80gb for tenant research" (or "for cohort lab" when no single
 * lender). */
static void purpose(const struct round *rd, const struct seen *s, char *buf, size_t size)
{
	const struct policy_tenant *lender = NULL;
	struct usage_names names;
	struct usage_view uv;
	size_t lenders = 0;

	usage_names_view(&names, rd->p, rd->r->cfg.usage, &uv);
	for (size_t i = 0; i < policy_tenant_count(rd->p); i++) {
		const struct policy_tenant *m = policy_tenant_at(rd->p, i);
		const struct policy_quota *q = policy_tenant_quota(m, s->flavor);

		if (m->cohort_index != s->tenant->cohort_index || !q || m == s->tenant)
			continue;
		if (uv.used(uv.ctx, m->index, s->flavor->index) <= q->nominal) {
			lender = m;
			lenders++;
		}
	}
	if (lenders == 1)
		snprintf(buf, size, "%lld %s for tenant %s", (long long)s->w.units,
			 s->flavor->name, lender->name);
	else
		snprintf(buf, size, "%lld %s for cohort %s", (long long)s->w.units,
			 s->flavor->name, s->tenant->cohort);
}

/* The lender's newest workload of s's flavor and cohort (the one that
 * waits for the units, most likely), NULL when none is known. */
static const struct seen *lender_of(const struct round *rd, const struct seen *s)
{
	struct usage_names names;
	struct usage_view uv;
	const struct seen *best = NULL;

	usage_names_view(&names, rd->p, rd->r->cfg.usage, &uv);
	for (size_t i = 0; i < rd->n; i++) {
		const struct seen *o = &rd->seen[i];
		const struct policy_quota *q = policy_tenant_quota(o->tenant, s->flavor);

		if (o->flavor != s->flavor || o->tenant == s->tenant || o->w.owned ||
		    o->tenant->cohort_index != s->tenant->cohort_index || !q ||
		    uv.used(uv.ctx, o->tenant->index, s->flavor->index) > q->nominal)
			continue;
		if (!best || o->w.created_ms > best->w.created_ms)
			best = o;
	}
	return best;
}

/* An Event on the lender's workload: what is being done for it. */
static void tell_lender(struct round *rd, const struct seen *victim, const char *what)
{
	const struct seen *l = lender_of(rd, victim);
	struct events_object o;
	char msg[700];

	if (!l)
		return;
	o = object_of(&l->w);
	snprintf(msg, sizeof(msg), "taking back %lld %s lent in cohort %s: %s %s %s/%s",
		 (long long)victim->w.units, victim->flavor->name, victim->tenant->cohort, what,
		 victim->w.kind == USAGE_JOBS ? "job" : "pod", victim->w.namespace,
		 victim->w.name);
	events_write(rd->r->kube, rd->r->identity, &o, "GPUReclaim", "Normal", msg,
		     rd->now_ms / 1000);
}

static void signal_victim(struct round *rd, struct seen *s)
{
	const struct usage_workload *w = &s->w;
	struct events_object o = object_of(w);
	char path[600], when[32], why[300], msg[600];
	json_t *ann;

	events_time(rd->now_ms / 1000, when, sizeof(when));
	purpose(rd, s, why, sizeof(why));
	snprintf(path, sizeof(path), kind_path(w), w->namespace, w->name);
	ann = json_pack("{s:s, s:s}", STAMP_CHECKPOINT_REQUESTED, when, RECLAIMER_FOR, why);
	if (!ann)
		return;
	if (patch(rd, path, json_pack("{s:{s:O}}", "metadata", "annotations", ann),
		  "signal") != 0) {
		json_decref(ann);
		return;
	}
	if (w->kind == USAGE_JOBS)
		annotate_pods(rd, w, json_incref(ann));
	json_decref(ann);
	count(rd->r, &rd->r->stats.signalled);
	snprintf(msg, sizeof(msg),
		 "checkpoint requested: gpugate takes back %s (lent GPUs come back); write "
		 "the checkpoint and annotate %s=<time>, or it is %s in %lld s",
		 why, STAMP_CHECKPOINT_DONE, w->kind == USAGE_JOBS ? "suspended" : "evicted",
		 (long long)policy_checkpoint(rd->p)->timeout_seconds);
	events_write(rd->r->kube, rd->r->identity, &o, "GPUReclaim", "Warning", msg,
		     rd->now_ms / 1000);
	tell_lender(rd, s, "checkpoint requested of");
	log_event(LOG_INFO, "msg=\"checkpoint requested\" workload=%s/%s for=\"%s\"",
		  w->namespace, w->name, why);
}

static void release_victim(struct round *rd, struct seen *s, bool reported)
{
	const struct usage_workload *w = &s->w;
	struct events_object o = object_of(w);
	char path[600], why[300], msg[700];
	struct diag d;
	int rc;

	purpose(rd, s, why, sizeof(why));
	snprintf(path, sizeof(path), kind_path(w), w->namespace, w->name);
	if (w->kind == USAGE_JOBS) {
		rc = patch(rd, path,
			   json_pack("{s:{s:{s:s}}, s:{s:b}}", "metadata", "labels",
				     RECLAIMER_LABEL, "true", "spec", "suspend", 1),
			   "suspend");
	} else {
		char epath[700];
		json_t *ev = json_pack("{s:s, s:s, s:{s:s, s:s}}", "apiVersion", "policy/v1",
				       "kind", "Eviction", "metadata", "name", w->name,
				       "namespace", w->namespace);

		snprintf(epath, sizeof(epath), "/api/v1/namespaces/%s/pods/%s/eviction",
			 w->namespace, w->name);
		diag_init(&d);
		rc = ev ? kube_create(rd->r->kube, epath, ev, WRITE_TIMEOUT_MS, NULL, &d) : -1;
		json_decref(ev);
		if (rc == 429) {
			/* A PodDisruptionBudget: next round. */
			log_event(LOG_INFO, "msg=\"eviction blocked\" pod=%s/%s detail=\"a "
					    "PodDisruptionBudget allows no disruption now\"",
				  w->namespace, w->name);
			return;
		}
		if (rc != 0 && rc != 404) {
			char q[600];

			count(rd->r, &rd->r->stats.failed);
			log_event(LOG_WARN, "msg=\"reclaim step failed\" step=evict path=%s "
					    "error=\"%s\"",
				  epath, log_quote(diag_text(&d), q, sizeof(q)));
		}
	}
	if (rc != 0)
		return;
	pthread_mutex_lock(&rd->r->mu);
	if (reported)
		rd->r->stats.checkpointed++;
	else
		rd->r->stats.timed_out++;
	if (w->kind == USAGE_JOBS)
		rd->r->stats.suspended++;
	else
		rd->r->stats.evicted++;
	rd->r->stats.wait_seconds += (double)(rd->now_ms - w->signalled_ms) / 1000.0;
	rd->r->stats.waits++;
	pthread_mutex_unlock(&rd->r->mu);
	if (w->kind == USAGE_JOBS && reported)
		snprintf(msg, sizeof(msg),
			 "checkpointed and suspended to return %s; gpugate resumes it when "
			 "it fits again",
			 why);
	else if (w->kind == USAGE_JOBS)
		snprintf(msg, sizeof(msg),
			 "checkpoint not reported within %lld s: suspended to return %s; "
			 "gpugate resumes it when it fits again",
			 (long long)policy_checkpoint(rd->p)->timeout_seconds, why);
	else
		snprintf(msg, sizeof(msg),
			 "%s and evicted to return %s; a bare pod does not come back (run "
			 "it as a Job)",
			 reported ? "checkpointed" : "checkpoint not reported in time", why);
	events_write(rd->r->kube, rd->r->identity, &o, "GPUReclaim", "Warning", msg,
		     rd->now_ms / 1000);
	tell_lender(rd, s, w->kind == USAGE_JOBS ? "suspended" : "evicted");
	log_event(LOG_INFO, "msg=\"reclaimed\" workload=%s/%s how=%s reported=%s for=\"%s\"",
		  w->namespace, w->name, w->kind == USAGE_JOBS ? "suspended" : "evicted",
		  reported ? "true" : "false", why);
}

static void abandon_victim(struct round *rd, struct seen *s)
{
	const struct usage_workload *w = &s->w;
	char path[600];
	json_t *ann = json_pack("{s:n, s:n}", STAMP_CHECKPOINT_REQUESTED, RECLAIMER_FOR);

	if (!ann)
		return;
	snprintf(path, sizeof(path), kind_path(w), w->namespace, w->name);
	if (patch(rd, path, json_pack("{s:{s:O}}", "metadata", "annotations", ann),
		  "abandon") == 0) {
		if (w->kind == USAGE_JOBS)
			annotate_pods(rd, w, json_incref(ann));
		count(rd->r, &rd->r->stats.abandoned);
		log_event(LOG_INFO, "msg=\"reclaim abandoned\" workload=%s/%s detail=\"the "
				    "cohort no longer holds more than its quota\"",
			  w->namespace, w->name);
	}
	json_decref(ann);
}

/*
 * LowerPriority: victims must rank below the lender.  The lenders are the
 * members within their nominal quota; when every one of them says
 * LowerPriority, the bound is the highest priority among their workloads
 * (the one waiting for the units is among them).  Any lender with Any:
 * no bound.
 */
static bool priority_bound(const struct round *rd, int cohort, const struct policy_flavor *f,
			   const struct usage_view *uv, int32_t *below)
{
	bool bound = false, any = false;

	*below = INT32_MIN;
	for (size_t i = 0; i < policy_tenant_count(rd->p); i++) {
		const struct policy_tenant *m = policy_tenant_at(rd->p, i);
		const struct policy_quota *q = policy_tenant_quota(m, f);

		if (m->cohort_index != cohort || !q ||
		    uv->used(uv->ctx, m->index, f->index) > q->nominal)
			continue;
		if (m->reclaim == POLICY_RECLAIM_LOWER_PRIORITY)
			bound = true;
		else if (m->reclaim == POLICY_RECLAIM_ANY)
			any = true;
	}
	if (!bound || any)
		return false;
	for (size_t i = 0; i < rd->n; i++) {
		const struct seen *s = &rd->seen[i];
		const struct policy_quota *q = policy_tenant_quota(s->tenant, f);

		if (s->flavor == f && s->tenant->cohort_index == cohort && q &&
		    uv->used(uv->ctx, s->tenant->index, f->index) <= q->nominal &&
		    s->w.priority > *below)
			*below = s->w.priority;
	}
	return true;
}

static void cohort_round(struct round *rd, int cohort, const struct policy_flavor *f)
{
	struct usage_names names;
	struct usage_view uv;
	struct reclaim_candidate *cand;
	size_t *idx, *picked, n = 0, np;
	int64_t deficit, timeout_ms;
	int32_t below;
	bool has_below, covered = false;

	usage_names_view(&names, rd->p, rd->r->cfg.usage, &uv);
	deficit = quota_cohort_deficit(rd->p, cohort, f, &uv);
	cand = calloc(rd->n ? rd->n : 1, sizeof(*cand));
	idx = calloc(rd->n ? rd->n : 1, sizeof(*idx));
	picked = calloc(rd->n ? rd->n : 1, sizeof(*picked));
	if (!cand || !idx || !picked)
		goto out;
	for (size_t i = 0; i < rd->n; i++) {
		const struct seen *s = &rd->seen[i];

		if (s->flavor != f || s->tenant->cohort_index != cohort ||
		    !usage_reclaim_candidate(&s->w, s->tenant->index, &cand[n]))
			continue;
		idx[n++] = i;
	}
	np = 0;
	if (deficit > 0) {
		has_below = priority_bound(rd, cohort, f, &uv, &below);
		np = reclaim_pick(rd->p, cohort, f, &uv, cand, n, has_below, below, picked, n,
				  &covered);
	}
	timeout_ms = policy_checkpoint(rd->p)->timeout_seconds * 1000;
	for (size_t k = 0; k < np; k++) {
		struct seen *s = &rd->seen[idx[picked[k]]];

		s->picked = true;
		if (s->w.owned)
			continue; /* its Job is released: it is on its way out */
		if (!s->w.signalled_ms)
			signal_victim(rd, s);
		else if (s->w.done_ms && s->w.done_ms >= s->w.signalled_ms)
			release_victim(rd, s, true);
		else if (rd->now_ms - s->w.signalled_ms >= timeout_ms)
			release_victim(rd, s, false);
	}
	for (size_t k = 0; k < n; k++) {
		struct seen *s = &rd->seen[idx[k]];

		if (s->w.signalled_ms && !s->picked && !s->w.owned)
			abandon_victim(rd, s);
	}
	if (deficit > 0 && !covered)
		log_event(LOG_WARN, "msg=\"reclaim short\" cohort=%s flavor=%s deficit=%lld "
				    "detail=\"not enough preemptible borrowing workloads (of lower "
				    "priority) to take back\"",
			  policy_cohort_name(rd->p, (size_t)cohort), f->name, (long long)deficit);
out:
	free(cand);
	free(idx);
	free(picked);
}

/* Resumes the reclaimed Jobs whose gang fits again. */
static void resume_round(struct round *rd)
{
	static const char path[] =
		"/apis/batch/v1/jobs?labelSelector=" "gpugate.io%2Freclaimed";
	json_t *list = NULL, *items, *job;
	struct usage_names names;
	struct usage_view uv;
	struct diag d;
	size_t i;

	diag_init(&d);
	if (kube_get_json(rd->r->kube, path, WRITE_TIMEOUT_MS, &list, &d) != 0)
		return;
	usage_names_view(&names, rd->p, rd->r->cfg.usage, &uv);
	items = json_object_get(list, "items");
	json_array_foreach(items, i, job) {
		const json_t *spec = json_object_get(job, "spec");
		struct usage_item it;
		const struct policy_tenant *t;
		const struct policy_flavor *f;
		struct quota_result q;
		struct arena a;
		char jpath[600];

		if (!json_is_true(json_object_get(spec, "suspend")))
			continue;
		arena_init(&a);
		if (charge_item(rd->p, job, USAGE_JOBS, &a, &it) < 0 || !it.tenant) {
			arena_release(&a);
			continue;
		}
		t = policy_tenant_find(rd->p, it.tenant);
		f = policy_flavor_find(rd->p, it.flavor);
		if (!t || !f || it.units <= 0 ||
		    quota_cohort_deficit(rd->p, t->cohort_index, f, &uv) > 0) {
			arena_release(&a);
			continue;
		}
		quota_decide(rd->p, t, f, it.units, true, &uv, &q);
		if (!((q.position == QUOTA_NOMINAL && q.reclaim == 0) ||
		      q.position == QUOTA_BORROWED)) {
			arena_release(&a);
			continue;
		}
		snprintf(jpath, sizeof(jpath), "/apis/batch/v1/namespaces/%s/jobs/%s",
			 it.namespace, it.name);
		if (patch(rd, jpath,
			  json_pack("{s:{s:{s:n}, s:{s:n, s:n, s:n}}, s:{s:b}}", "metadata",
				    "labels", RECLAIMER_LABEL, "annotations",
				    STAMP_CHECKPOINT_REQUESTED, STAMP_CHECKPOINT_DONE,
				    RECLAIMER_FOR, "spec", "suspend", 0),
			  "resume") == 0) {
			struct usage_workload w = {.uid = it.uid, .kind = USAGE_JOBS,
						   .namespace = it.namespace, .name = it.name};
			struct events_object o = object_of(&w);

			count(rd->r, &rd->r->stats.resumed);
			events_write(rd->r->kube, rd->r->identity, &o, "GPUReclaim", "Normal",
				     "resumed: its GPUs fit the quota again; its pods start from "
				     "the checkpoint volume",
				     rd->now_ms / 1000);
			log_event(LOG_INFO, "msg=\"resumed\" job=%s/%s", it.namespace, it.name);
			/* One a round: the next is weighed once the watch
			 * counts this one. */
			arena_release(&a);
			break;
		}
		arena_release(&a);
	}
	json_decref(list);
}

static void round_once(struct reclaimer *r)
{
	struct round rd = {.r = r};
	struct holder_ref *ref;

	rd.p = holder_acquire(r->cfg.policy, &ref);
	if (!rd.p || !policy_cohort_count(rd.p))
		goto out;
	rd.now_ms = r->cfg.now_ms ? r->cfg.now_ms() : wall_ms();
	rd.cap = WORKLOADS_MAX;
	rd.seen = calloc(rd.cap, sizeof(*rd.seen));
	if (!rd.seen)
		goto out;
	arena_init(&rd.a);
	usage_each_workload(r->cfg.usage, collect, &rd);
	for (size_t c = 0; c < policy_cohort_count(rd.p); c++)
		for (size_t f = 0; f < policy_flavor_count(rd.p); f++)
			cohort_round(&rd, (int)c, policy_flavor_at(rd.p, f));
	resume_round(&rd);
	arena_release(&rd.a);
	free(rd.seen);
out:
	holder_release(ref);
}

static void *run(void *arg)
{
	struct reclaimer *r = arg;

	while (!r->nap.stop) {
		nap_sleep(&r->nap, r->cfg.interval_ms);
		if (r->nap.stop)
			break;
		if (r->cfg.leading && !r->cfg.leading(r->cfg.leading_ctx))
			continue;
		round_once(r);
	}
	return NULL;
}

int reclaimer_start(const struct reclaimer_config *cfg, struct reclaimer **out,
		    struct diag *d)
{
	struct reclaimer *r = calloc(1, sizeof(*r));

	if (!r) {
		diag_addf(d, "out of memory");
		return -1;
	}
	r->cfg = *cfg;
	if (!r->cfg.interval_ms)
		r->cfg.interval_ms = 2000;
	snprintf(r->identity, sizeof(r->identity), "%s", cfg->identity ? cfg->identity : "");
	pthread_mutex_init(&r->mu, NULL);
	nap_init(&r->nap);
	r->kube = kube_new(cfg->kube, d);
	if (!r->kube || pthread_create(&r->thread, NULL, run, r) != 0) {
		if (r->kube)
			diag_addf(d, "reclaimer: cannot start its thread");
		kube_free(r->kube);
		nap_release(&r->nap);
		pthread_mutex_destroy(&r->mu);
		free(r);
		return -1;
	}
	*out = r;
	return 0;
}

void reclaimer_stats(struct reclaimer *r, struct reclaimer_stats *out)
{
	if (!r) {
		*out = (struct reclaimer_stats){0};
		return;
	}
	pthread_mutex_lock(&r->mu);
	*out = r->stats;
	pthread_mutex_unlock(&r->mu);
}

void reclaimer_stop(struct reclaimer *r)
{
	if (!r)
		return;
	nap_stop(&r->nap);
	pthread_join(r->thread, NULL);
	kube_free(r->kube);
	nap_release(&r->nap);
	pthread_mutex_destroy(&r->mu);
	free(r);
}
