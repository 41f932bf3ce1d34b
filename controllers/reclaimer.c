/*
 * The reclaimer's round, in the order of controllers/reclaimer.h: collect the
 * observed workloads, then per cohort and flavor pick, signal, release or
 * abandon; then resume.  Decisions are policy/quota.c and policy/reclaim.c
 * (pure); this file is the reading and the writing.
 */
#include "controllers/reclaimer.h"

#include "base/arena.h"
#include "base/diag.h"
#include "base/grow.h"
#include "base/log.h"
#include "base/strmap.h"
#include "base/text.h"
#include "base/wallclock.h"
#include "kube/client.h"
#include "policy/decide.h"
#include "policy/health.h"
#include "policy/idle.h"
#include "policy/policy.h"
#include "policy/pool.h"
#include "policy/quota.h"
#include "policy/reclaim.h"
#include "usage/inventory.h"
#include "usage/usage.h"
#include "webhook/charge.h"
#include "controllers/events.h"
#include "controllers/idle-board.h"
#include "controllers/state-map.h"
#include "controllers/victims.h"
#include "controllers/worker.h"
#include "metrics/metrics.h"
#include "webhook/holder.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controllers/reclaimer-int.h"


/* Room for one more workload: the array grows with the cluster (a round
 * that took WORKLOADS_MAX at once held 3.4 MB of it whatever the cluster,
 * docs/benchmarks.md "Memory since then").  False at WORKLOADS_MAX (the
 * rest wait for the next round) or out of memory (seen_oom: no round). */
static bool seen_room(struct round *rd)
{
	void *items = rd->seen;
	bool ok = grow_room(&items, &rd->cap, rd->n, WORKLOADS_MAX, sizeof(*rd->seen),
			    &rd->seen_oom);

	rd->seen = items;
	return ok;
}

static void collect(void *ctx, const struct usage_workload *w)
{
	struct round *rd = ctx;
	const struct policy_tenant *t = policy_tenant_find(rd->p, w->tenant);
	const struct policy_flavor *f = policy_flavor_find(rd->p, w->flavor);
	struct seen *s;

	/* Every tenant's: the health loop takes workloads of tenants in no
	 * cohort too (the cohorts' pick looks at their members only). */
	if (!t || !f || !seen_room(rd))
		return;
	s = &rd->seen[rd->n];
	memset(s, 0, sizeof(*s));
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
	rc = kube_patch(rd->r->w.kube, path, KUBE_PATCH_MERGE, body, WRITE_TIMEOUT_MS, NULL,
			&d);
	json_decref(body);
	if (rc != 0 && rc != 404) {
		char q[600];

		metrics_reclaim(rd->r->cfg.metrics, METRICS_RECLAIM_FAILED);
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
	if (kube_get_json(rd->r->w.kube, path, WRITE_TIMEOUT_MS, &list, &d) != 0) {
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

	if (s->bad) {
		snprintf(buf, size, "%lld %s off failing node %s (%s)", (long long)s->w.units,
			 s->flavor->name, s->bad->node, s->bad->why);
		return;
	}
	if (s->idle) {
		char since[32];

		events_time(s->idle->since_ms / 1000, since, sizeof(since));
		snprintf(buf, size, "%lld %s idle since %s, %s", (long long)s->w.units,
			 s->flavor->name, since, s->idle->why);
		return;
	}
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
	const struct seen *l = victim->bad || victim->idle ? NULL : lender_of(rd, victim);
	struct events_object o;
	char msg[700];

	if (!l)
		return;
	o = object_of(&l->w);
	snprintf(msg, sizeof(msg), "taking back %lld %s lent in cohort %s: %s %s %s/%s",
		 (long long)victim->w.units, victim->flavor->name, victim->tenant->cohort, what,
		 victim->w.kind == USAGE_JOBS ? "job" : "pod", victim->w.namespace,
		 victim->w.name);
	events_write(rd->r->w.kube, rd->r->identity, &o, "GPUReclaim", "Normal", msg,
		     rd->now_ms / 1000);
}

/* ---- the state ConfigMap ------------------------------------------------ */

static struct rec *rec_add(struct round *rd, const char *uid, const struct reclaim_record *r)
{
	struct rec *x;
	size_t idx;

	if (!rd->recs || strmap_get(&rd->rec_by_uid, uid, &idx) || rd->nrec >= RECORDS_MAX)
		return NULL;
	x = &rd->recs[rd->nrec];
	*x = (struct rec){.uid = arena_strdup(&rd->a, uid), .r = *r};
	if (!x->uid || strmap_put(&rd->rec_by_uid, x->uid, rd->nrec, NULL) != 0)
		return NULL;
	rd->nrec++;
	if (strmap_get(&rd->seen_by_uid, uid, &idx)) {
		x->s = &rd->seen[idx];
		rd->seen[idx].rec = x;
	}
	return x;
}

static void rec_drop(struct round *rd, struct rec *x)
{
	if (!x || x->gone)
		return;
	x->gone = true;
	strmap_del(&rd->rec_by_uid, x->uid, NULL);
	if (x->s)
		x->s->rec = NULL;
	x->s = NULL;
	rd->dirty = true;
}

static size_t live_records(const struct round *rd)
{
	size_t n = 0;

	for (size_t i = 0; i < rd->nrec; i++)
		n += !rd->recs[i].gone;
	return n;
}

/* Reads the records; -1 when they cannot be read (the round does nothing:
 * without them no time is known). */
static int state_load(struct round *rd)
{
	json_t *data, *v;
	const char *key;
	struct diag d;
	int rc;

	diag_init(&d);
	rc = state_map_read(rd->r->w.kube, rd->r->namespace, STATE_NAME, WRITE_TIMEOUT_MS,
			    &rd->state, &d);
	if (rc != 0) {
		char q[600];

		log_event(LOG_WARN, "msg=\"reclaim state not read; nothing done this round\" "
				    "configmap=%s error=\"%s\"",
			  STATE_NAME, log_quote(diag_text(&d), q, sizeof(q)));
		return -1;
	}
	if (!rd->state)
		return 0;
	data = json_object_get(rd->state, "data");
	json_object_foreach(data, key, v) {
		struct reclaim_record r;

		if (reclaim_record_parse(json_string_value(v), &r) < 0 ||
		    !rec_add(rd, key, &r)) {
			log_event(LOG_WARN, "msg=\"reclaim state: record dropped\" uid=%s "
					    "detail=\"not a record, or too many\"", key);
			rd->dirty = true;
		}
	}
	return 0;
}

/* Writes the records when they changed: replaced at the version read, or
 * created.  0 when there was nothing to write or it was written. */
static int state_save(struct round *rd)
{
	char text[600];
	json_t *data;
	struct diag d;
	int rc;

	if (!rd->dirty)
		return 0;
	data = json_object();
	for (size_t i = 0; data && i < rd->nrec; i++) {
		if (rd->recs[i].gone)
			continue;
		if (reclaim_record_format(&rd->recs[i].r, text, sizeof(text)) >= sizeof(text))
			continue; /* a tenant name of hundreds of bytes: not kept */
		json_object_set_new(data, rd->recs[i].uid, json_string(text));
	}
	diag_init(&d);
	rc = state_map_write(rd->r->w.kube, rd->r->namespace, STATE_NAME, rd->state, data,
			     WRITE_TIMEOUT_MS, &d);
	if (rc != 0) {
		char q[600];

		metrics_reclaim(rd->r->cfg.metrics, METRICS_RECLAIM_FAILED);
		log_event(LOG_WARN, "msg=\"reclaim state not written; nothing done this "
				    "round\" configmap=%s error=\"%s\"",
			  STATE_NAME, log_quote(diag_text(&d), q, sizeof(q)));
		return -1;
	}
	return 0;
}

/* A record whose workload is missing: rounds in a row, the process's own. */
struct miss {
	unsigned rounds;
	char uid[];
};

/* Drops the records whose workload has been missing for PRUNE_ROUNDS
 * rounds of this process (gone, or a suspended Job that holds nothing);
 * counting rounds of this process lets a restarted one's watch fill the
 * ledger first. */
static void state_prune(struct round *rd)
{
	struct strmap *m = &rd->r->misses;
	struct miss **stale;
	size_t pos = 0, v, n = 0;
	const char *key;

	for (size_t i = 0; i < rd->nrec; i++) {
		struct rec *x = &rd->recs[i];
		struct miss *ms;
		size_t len;

		if (x->gone)
			continue;
		if (!policy_tenant_find(rd->p, x->r.tenant)) {
			/* Another gpugate's (another policy's): its own to drop,
			 * unless nobody has for a week. */
			if (rd->now_ms - x->r.signalled_ms > STALE_MS)
				rec_drop(rd, x);
			continue;
		}
		if (x->s) {
			if (strmap_del(m, x->uid, &v))
				free((struct miss *)(uintptr_t)v);
			continue;
		}
		if (strmap_get(m, x->uid, &v)) {
			ms = (struct miss *)(uintptr_t)v;
			if (++ms->rounds >= PRUNE_ROUNDS) {
				strmap_del(m, x->uid, NULL);
				free(ms);
				rec_drop(rd, x);
			}
			continue;
		}
		len = strlen(x->uid);
		ms = malloc(sizeof(*ms) + len + 1);
		if (!ms)
			continue;
		ms->rounds = 1;
		memcpy(ms->uid, x->uid, len + 1);
		if (strmap_put(m, ms->uid, (size_t)(uintptr_t)ms, NULL) != 0)
			free(ms);
	}
	/* The counts of uids that have no record any more. */
	stale = calloc(m->len ? m->len : 1, sizeof(*stale));
	if (!stale)
		return;
	while (strmap_next(m, &pos, &key, &v))
		if (!strmap_get(&rd->rec_by_uid, key, NULL))
			stale[n++] = (struct miss *)(uintptr_t)v;
	for (size_t i = 0; i < n; i++) {
		strmap_del(m, stale[i]->uid, NULL);
		free(stale[i]);
	}
	free(stale);
}

static struct act *act_add(struct round *rd, enum act_kind kind, struct seen *s)
{
	struct act *a;

	if (rd->nact == rd->capact) {
		size_t cap = rd->capact ? 2 * rd->capact : 32;
		struct act *n = realloc(rd->acts, cap * sizeof(*n));

		if (!n)
			return NULL;
		rd->acts = n;
		rd->capact = cap;
	}
	a = &rd->acts[rd->nact++];
	*a = (struct act){.kind = kind, .s = s};
	return a;
}

/* ---- the steps ---------------------------------------------------------- */

static void signal_victim(struct round *rd, struct seen *s, int64_t signalled_ms)
{
	const struct usage_workload *w = &s->w;
	struct events_object o = object_of(w);
	char path[600], when[32], why[300], msg[600];
	json_t *ann;

	events_time(signalled_ms / 1000, when, sizeof(when));
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
	metrics_reclaim(rd->r->cfg.metrics, METRICS_RECLAIM_SIGNALLED);
	if (s->bad && s->hold)
		snprintf(msg, sizeof(msg),
			 "checkpoint requested: node %s is failing (%s); write the checkpoint "
			 "now and annotate %s=<time>: %s, gpugate does not suspend or evict "
			 "it",
			 s->bad->node, s->bad->why, STAMP_CHECKPOINT_DONE,
			 s->bad->drained_by ? "another system drains the node" : "by policy");
	else if (s->idle)
		snprintf(msg, sizeof(msg),
			 "checkpoint requested: gpugate takes back %s (the idle rule says "
			 "reclaim); write the checkpoint and annotate %s=<time>, or it is %s "
			 "in %lld s; gpugate does not bring it back: use the GPUs, or %s",
			 why, STAMP_CHECKPOINT_DONE,
			 w->kind == USAGE_JOBS ? "suspended" : "evicted",
			 (long long)policy_checkpoint(rd->p)->timeout_seconds,
			 w->kind == USAGE_JOBS ? "resume the Job yourself once it will"
					       : "create the pod again once it will");
	else if (s->bad)
		snprintf(msg, sizeof(msg),
			 "checkpoint requested: node %s is failing (%s); write the checkpoint "
			 "and annotate %s=<time>, or it is %s in %lld s%s",
			 s->bad->node, s->bad->why, STAMP_CHECKPOINT_DONE,
			 w->kind == USAGE_JOBS ? "suspended" : "evicted",
			 (long long)policy_checkpoint(rd->p)->timeout_seconds,
			 w->kind == USAGE_JOBS ? " and resumed on another node" : "");
	else
		snprintf(msg, sizeof(msg),
			 "checkpoint requested: gpugate takes back %s (lent GPUs come back); "
			 "write the checkpoint and annotate %s=<time>, or it is %s in %lld s",
			 why, STAMP_CHECKPOINT_DONE,
			 w->kind == USAGE_JOBS ? "suspended" : "evicted",
			 (long long)policy_checkpoint(rd->p)->timeout_seconds);
	events_write(rd->r->w.kube, rd->r->identity, &o, "GPUReclaim", "Warning", msg,
		     rd->now_ms / 1000);
	tell_lender(rd, s, "checkpoint requested of");
	log_event(LOG_INFO, "msg=\"checkpoint requested\" workload=%s/%s for=\"%s\"",
		  w->namespace, w->name, why);
}

/* The Eviction API, its grace capped; the status. */
static int evict(struct round *rd, const struct usage_workload *w, int64_t grace_s)
{
	char epath[700];
	struct diag d;
	json_t *ev = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:I, s:{s:s}}}",
			       "apiVersion", "policy/v1", "kind", "Eviction", "metadata",
			       "name", w->name, "namespace", w->namespace, "deleteOptions",
			       "gracePeriodSeconds", (json_int_t)grace_s, "preconditions", "uid",
			       w->uid);
	int rc;

	snprintf(epath, sizeof(epath), "/api/v1/namespaces/%s/pods/%s/eviction",
		 w->namespace, w->name);
	diag_init(&d);
	rc = ev ? kube_create(rd->r->w.kube, epath, ev, WRITE_TIMEOUT_MS, NULL, &d) : -1;
	json_decref(ev);
	if (rc == 429) {
		log_event(LOG_INFO, "msg=\"eviction blocked\" pod=%s/%s detail=\"a "
				    "PodDisruptionBudget allows no disruption now; deleted once "
				    "checkpoint.gracePeriodSeconds (%lld s) have passed\"",
			  w->namespace, w->name,
			  (long long)policy_checkpoint(rd->p)->grace_period_seconds);
	} else if (rc != 0 && rc != 404) {
		char q[600];

		metrics_reclaim(rd->r->cfg.metrics, METRICS_RECLAIM_FAILED);
		log_event(LOG_WARN, "msg=\"reclaim step failed\" step=evict path=%s "
				    "error=\"%s\"",
			  epath, log_quote(diag_text(&d), q, sizeof(q)));
	}
	return rc;
}

/* What a release is for, in the Events' words. */
static const char *release_to(const struct seen *s)
{
	return s->bad ? "to move" : s->idle ? "to free" : "to return";
}

static void released_event(struct round *rd, struct seen *s, bool reported, int rc)
{
	const struct usage_workload *w = &s->w;
	struct events_object o = object_of(w);
	char why[300], msg[700];
	const char *to = release_to(s);
	/* A Job suspended for idleness is its owner's to resume: resumed at
	 * once it would hold the same GPUs idle again. */
	const char *after = s->idle ? "gpugate does not resume it: resume it (spec.suspend: "
				      "false) when it will use its GPUs"
				    : "gpugate resumes it when it fits again";

	purpose(rd, s, why, sizeof(why));
	metrics_reclaim_released(
		rd->r->cfg.metrics, reported,
		s->rec ? (double)(rd->now_ms - s->rec->r.signalled_ms) / 1000.0 : 0.0);
	if (w->kind == USAGE_JOBS && reported)
		snprintf(msg, sizeof(msg),
			 "checkpointed and suspended %s %s; %s", to, why, after);
	else if (w->kind == USAGE_JOBS)
		snprintf(msg, sizeof(msg),
			 "checkpoint not reported within %lld s: suspended %s %s; %s",
			 (long long)policy_checkpoint(rd->p)->timeout_seconds, to, why, after);
	else if (rc == 429)
		snprintf(msg, sizeof(msg),
			 "%s: evicting %s %s, but a PodDisruptionBudget allows no "
			 "disruption; gpugate deletes the pod in %lld s if it still does "
			 "not (reclaim does not honour a tenant's budget longer)",
			 reported ? "checkpointed" : "checkpoint not reported in time", to, why,
			 (long long)policy_checkpoint(rd->p)->grace_period_seconds);
	else
		snprintf(msg, sizeof(msg),
			 "%s and evicted %s %s; a bare pod does not come back (run "
			 "it as a Job)",
			 reported ? "checkpointed" : "checkpoint not reported in time", to, why);
	events_write(rd->r->w.kube, rd->r->identity, &o,
		     s->idle ? IDLE_RECLAIMED_EVENT : "GPUReclaim", "Warning", msg,
		     rd->now_ms / 1000);
	tell_lender(rd, s, w->kind == USAGE_JOBS ? "suspended" : "evicted");
	log_event(LOG_INFO, "msg=\"reclaimed\" workload=%s/%s how=%s reported=%s for=\"%s\"",
		  w->namespace, w->name, w->kind == USAGE_JOBS ? "suspended" : "evicted",
		  reported ? "true" : "false", why);
}

static void suspend(struct round *rd, struct act *a)
{
	const struct usage_workload *w = &a->s->w;
	char path[600];
	int rc;

	snprintf(path, sizeof(path), kind_path(w), w->namespace, w->name);
	rc = patch(rd, path,
		   json_pack("{s:{s:{s:s}}, s:{s:b}}", "metadata", "labels", RECLAIMER_LABEL,
			     a->s->idle ? IDLE_RECLAIMED_VALUE : "true", "spec", "suspend", 1),
		   "suspend");
	if (rc == 0 && a->first)
		released_event(rd, a->s, a->reported, 0);
}

/* DELETE with gracePeriodSeconds capped (and the uid as precondition): the
 * pod held on past its grace, a PodDisruptionBudget, or a long grace. */
static void delete_pod(struct round *rd, struct act *a)
{
	const struct usage_workload *w = &a->s->w;
	struct events_object o = object_of(w);
	char path[700], msg[600], why[300];
	struct diag d;
	int rc;

	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s?gracePeriodSeconds=%lld",
		 w->namespace, w->name, (long long)a->grace_s);
	diag_init(&d);
	rc = kube_delete(rd->r->w.kube, path, w->uid, NULL, WRITE_TIMEOUT_MS, NULL, &d);
	if (rc == 404 || rc == 409)
		return; /* gone, or another pod of that name */
	if (rc != 0) {
		char q[600];

		metrics_reclaim(rd->r->cfg.metrics, METRICS_RECLAIM_FAILED);
		log_event(LOG_WARN, "msg=\"reclaim step failed\" step=delete path=%s "
				    "error=\"%s\"",
			  path, log_quote(diag_text(&d), q, sizeof(q)));
		return;
	}
	metrics_reclaim(rd->r->cfg.metrics, METRICS_RECLAIM_DELETED);
	purpose(rd, a->s, why, sizeof(why));
	snprintf(msg, sizeof(msg),
		 "deleted with a grace period of %lld s %s %s: it was still "
		 "running %lld s after its release (no controller deleted it, a "
		 "PodDisruptionBudget refused its eviction, or its grace period was "
		 "longer than checkpoint.gracePeriodSeconds)",
		 (long long)a->grace_s, release_to(a->s), why,
		 (long long)policy_checkpoint(rd->p)->grace_period_seconds);
	events_write(rd->r->w.kube, rd->r->identity, &o, "GPUReclaim", "Warning", msg,
		     rd->now_ms / 1000);
	log_event(LOG_INFO, "msg=\"reclaim deleted a pod\" pod=%s/%s grace_s=%lld",
		  w->namespace, w->name, (long long)a->grace_s);
}

static void abandon_victim(struct round *rd, struct seen *s, const struct act *a)
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
		metrics_reclaim(rd->r->cfg.metrics, METRICS_RECLAIM_ABANDONED);
		log_event(LOG_INFO, "msg=\"reclaim abandoned\" workload=%s/%s detail=\"%s\"",
			  w->namespace, w->name,
			  a->health ? "its node is back in the pool, or it left the node"
			  : a->idle ? "it is busy again, or its utilization cannot be read"
				    : "the cohort no longer holds more than its quota");
	}
	json_decref(ann);
}

static void resume(struct round *rd, struct act *a)
{
	char jpath[600];

	snprintf(jpath, sizeof(jpath), "/apis/batch/v1/namespaces/%s/jobs/%s", a->ns, a->name);
	if (patch(rd, jpath,
		  json_pack("{s:{s:{s:n}, s:{s:n, s:n, s:n}}, s:{s:b}}", "metadata", "labels",
			    RECLAIMER_LABEL, "annotations", STAMP_CHECKPOINT_REQUESTED,
			    STAMP_CHECKPOINT_DONE, RECLAIMER_FOR, "spec", "suspend", 0),
		  "resume") == 0) {
		struct usage_workload w = {.kind = USAGE_JOBS, .namespace = a->ns,
					   .name = a->name};
		struct events_object o = object_of(&w);

		metrics_reclaim(rd->r->cfg.metrics, METRICS_RECLAIM_RESUMED);
		events_write(rd->r->w.kube, rd->r->identity, &o, "GPUReclaim", "Normal",
			     a->health ? "resumed: its pods start again, from the checkpoint "
					 "volume, away from the failing node (gpugate's taint "
					 "keeps new pods off it)"
				       : "resumed: its GPUs fit the quota again; its pods start "
					 "from the checkpoint volume",
			     rd->now_ms / 1000);
		log_event(LOG_INFO, "msg=\"resumed\" job=%s/%s", a->ns, a->name);
	}
}

static void act_run(struct round *rd, struct act *a)
{
	int rc;

	switch (a->kind) {
	case ACT_SIGNAL:
		signal_victim(rd, a->s, a->rec->r.signalled_ms);
		break;
	case ACT_SUSPEND:
		suspend(rd, a);
		break;
	case ACT_EVICT:
		rc = evict(rd, &a->s->w, a->grace_s);
		if (a->first)
			released_event(rd, a->s, a->reported, rc);
		break;
	case ACT_DELETE:
		delete_pod(rd, a);
		break;
	case ACT_ABANDON:
		abandon_victim(rd, a->s, a);
		break;
	case ACT_RESUME:
		resume(rd, a);
		break;
	}
}

/*
 * A Job is released: it and (of_job) each of its pods get released_ms now,
 * so that a pod no controller deletes is deleted after the grace.  One
 * list; a pod beyond RECORDS_MAX is left to be picked on its own.
 */
static void release_job(struct round *rd, struct seen *s)
{
	char path[900];
	json_t *list = NULL, *pod;
	struct diag d;
	size_t i;

	s->rec->r.released_ms = rd->now_ms;
	rd->dirty = true;
	if (!reclaim_spend(rd))
		return;
	snprintf(path, sizeof(path),
		 "/api/v1/namespaces/%s/pods?labelSelector=batch.kubernetes.io%%2Fcontroller-uid%%3D%s",
		 s->w.namespace, s->w.uid);
	diag_init(&d);
	if (kube_get_json(rd->r->w.kube, path, WRITE_TIMEOUT_MS, &list, &d) != 0)
		return;
	json_array_foreach(json_object_get(list, "items"), i, pod) {
		const json_t *meta = json_object_get(pod, "metadata");
		const char *uid = json_string_value(json_object_get(meta, "uid"));
		struct reclaim_record r = {.signalled_ms = s->rec->r.signalled_ms,
					   .released_ms = rd->now_ms, .of_job = true,
					   .tenant = s->tenant->name};

		if (uid)
			rec_add(rd, uid, &r);
	}
	json_decref(list);
}

/* A released pod's facts, read from the API (one GET): false when it is
 * gone, another pod has its name, or the read failed. */
static bool pod_facts(struct round *rd, const struct seen *s, struct reclaim_facts *f)
{
	char path[600];
	json_t *pod = NULL, *meta, *v;
	struct diag d;
	const char *uid;

	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s", s->w.namespace,
		 s->w.name);
	diag_init(&d);
	if (kube_get_json(rd->r->w.kube, path, WRITE_TIMEOUT_MS, &pod, &d) != 0)
		return false;
	meta = json_object_get(pod, "metadata");
	uid = json_string_value(json_object_get(meta, "uid"));
	if (!uid || strcmp(uid, s->w.uid) != 0) {
		json_decref(pod);
		return false;
	}
	*f = (struct reclaim_facts){.done_ms = s->w.done_ms, .deletion_grace_s = -1,
				    .own_grace_s = -1};
	f->terminating = json_object_get(meta, "deletionTimestamp") != NULL;
	v = json_object_get(meta, "deletionGracePeriodSeconds");
	if (json_is_integer(v))
		f->deletion_grace_s = json_integer_value(v);
	v = json_object_get(json_object_get(pod, "spec"), "terminationGracePeriodSeconds");
	if (json_is_integer(v))
		f->own_grace_s = json_integer_value(v);
	json_decref(pod);
	return true;
}

/* A released pod is carried to the end, picked or not: evicted again,
 * deleted after the grace, its long grace cut. */
static void released_pods(struct round *rd)
{
	const struct policy_checkpoint *ck = policy_checkpoint(rd->p);

	for (size_t i = 0; i < rd->nrec; i++) {
		struct rec *x = &rd->recs[i];
		struct reclaim_facts f;
		enum reclaim_step step;
		int64_t grace;
		struct act *a;

		if (x->gone || !x->r.released_ms || !x->s || x->s->w.kind != USAGE_PODS)
			continue;
		if (!reclaim_spend(rd) || !pod_facts(rd, x->s, &f))
			continue;
		step = reclaim_next(&x->r, &f, rd->now_ms, ck->timeout_seconds,
				    ck->grace_period_seconds, NULL, &grace);
		if (step != RECLAIM_EVICT && step != RECLAIM_DELETE)
			continue;
		a = act_add(rd, step == RECLAIM_EVICT ? ACT_EVICT : ACT_DELETE, x->s);
		if (a)
			a->grace_s = grace;
	}
}

/* A picked victim without a record, or not yet released: its step. */
static void step_victim(struct round *rd, struct seen *s)
{
	const struct policy_checkpoint *ck = policy_checkpoint(rd->p);
	struct reclaim_facts f = {.job = s->w.kind == USAGE_JOBS, .done_ms = s->w.done_ms,
				  .deletion_grace_s = -1, .own_grace_s = -1};
	bool reported = false;
	int64_t grace;
	struct act *a;
	enum reclaim_step step = reclaim_next(s->rec ? &s->rec->r : NULL, &f, rd->now_ms,
					      ck->timeout_seconds, ck->grace_period_seconds,
					      &reported, &grace);

	/* Held (the health loop: another system drains the node, or policy
	 * says signal): asked, never released by gpugate. */
	if (s->hold && s->rec && !s->rec->r.released_ms &&
	    (step == RECLAIM_SUSPEND || step == RECLAIM_EVICT))
		step = RECLAIM_WAIT;
	switch (step) {
	case RECLAIM_SIGNAL: {
		/* To the second, as the annotation and the report are. */
		struct reclaim_record r = {.signalled_ms = rd->now_ms / 1000 * 1000,
					   .tenant = s->tenant->name,
					   .for_health = s->bad != NULL,
					   .for_idle = s->idle != NULL};
		struct rec *x = rec_add(rd, s->w.uid, &r);

		if (!x) {
			log_event(LOG_WARN, "msg=\"reclaim state full\" workload=%s/%s "
					    "detail=\"waits for a round with room\"",
				  s->w.namespace, s->w.name);
			return;
		}
		rd->dirty = true;
		if ((a = act_add(rd, ACT_SIGNAL, s)))
			a->rec = x;
		return;
	}
	case RECLAIM_SUSPEND:
		if (!s->rec->r.released_ms) {
			release_job(rd, s);
			if ((a = act_add(rd, ACT_SUSPEND, s))) {
				a->first = true;
				a->reported = reported;
			}
		} else if (reclaim_spend(rd)) {
			act_add(rd, ACT_SUSPEND, s); /* again: it is still charged */
		}
		return;
	case RECLAIM_EVICT:
		if (!s->rec->r.released_ms) {
			s->rec->r.released_ms = rd->now_ms;
			rd->dirty = true;
			if ((a = act_add(rd, ACT_EVICT, s))) {
				a->first = true;
				a->reported = reported;
				a->grace_s = grace;
			}
		}
		return; /* released: released_pods() */
	case RECLAIM_DELETE:
	case RECLAIM_WAIT:
		return;
	}
}

static void cohort_round(struct round *rd, int cohort, const struct policy_flavor *f)
{
	struct usage_names names;
	struct usage_view uv;
	struct victims_workload *ws = calloc(rd->n ? rd->n : 1, sizeof(*ws));
	struct victims v;

	if (!ws)
		return;
	usage_names_view(&names, rd->p, rd->r->cfg.usage, &uv);
	for (size_t i = 0; i < rd->n; i++)
		ws[i] = (struct victims_workload){&rd->seen[i].w, rd->seen[i].tenant,
						  rd->seen[i].flavor,
						  rd->seen[i].rec != NULL};
	if (victims_choose(rd->p, cohort, f, &uv, ws, rd->n, &v) < 0) {
		free(ws);
		return;
	}
	free(ws);
	for (size_t k = 0; k < v.n_picked; k++) {
		struct seen *s = &rd->seen[v.picked[k]];

		if (s->picked)
			continue; /* the health loop's this round: stepped there */
		s->picked = true;
		step_victim(rd, s);
	}
	for (size_t k = 0; k < v.n_candidates; k++) {
		struct seen *s = &rd->seen[v.candidates[k]];

		if (s->picked || !s->rec)
			continue;
		if (!s->rec->r.released_ms) {
			/* Not needed any more: the request is taken back. */
			rec_drop(rd, s->rec);
			act_add(rd, ACT_ABANDON, s);
		} else if (s->w.kind == USAGE_JOBS) {
			/* A Job released and running again that the cohort no
			 * longer needs: it runs. */
			rec_drop(rd, s->rec);
		}
	}
	if (v.deficit > 0 && !v.covered)
		log_event(LOG_WARN, "msg=\"reclaim short\" cohort=%s flavor=%s deficit=%lld "
				    "detail=\"not enough preemptible borrowing workloads (of lower "
				    "priority) to take back\"",
			  policy_cohort_name(rd->p, (size_t)cohort), f->name,
			  (long long)v.deficit);
	victims_release(&v);
}

/* Resumes the reclaimed Jobs whose gang fits again: one a round (the next
 * is weighed once the watch counts this one).  Its record, if any, is
 * dropped first, so that it is not suspended again. */
static void resume_round(struct round *rd)
{
	static const char path[] =
		"/apis/batch/v1/jobs?labelSelector=" "gpugate.io%2Freclaimed";
	json_t *list = NULL, *items, *job;
	struct usage_names names;
	struct usage_view uv;
	struct diag d;
	size_t i;
	bool health;

	diag_init(&d);
	if (kube_get_json(rd->r->w.kube, path, WRITE_TIMEOUT_MS, &list, &d) != 0)
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
		struct act *ac;

		const char *label = json_string_value(json_object_get(
			json_object_get(json_object_get(job, "metadata"), "labels"),
			RECLAIMER_LABEL));

		if (!json_is_true(json_object_get(spec, "suspend")))
			continue;
		/* Suspended for idleness: its owner resumes it. */
		if (label && strcmp(label, IDLE_RECLAIMED_VALUE) == 0)
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
		health = false;
		for (size_t k = 0; k < rd->nrec; k++)
			if (!rd->recs[k].gone && it.uid && strcmp(rd->recs[k].uid, it.uid) == 0) {
				health = health || rd->recs[k].r.for_health;
				rec_drop(rd, &rd->recs[k]);
			}
		ac = act_add(rd, ACT_RESUME, NULL);
		if (ac) {
			ac->health = health;
			ac->ns = arena_strdup(&rd->a, it.namespace);
			ac->name = arena_strdup(&rd->a, it.name);
			if (!ac->ns || !ac->name)
				rd->nact--;
		}
		arena_release(&a);
		break;
	}
	json_decref(list);
}

/* The loop's requests whose workload is no longer on a failing node (it
 * came back, or the pod left) and was not released: taken back. */
static void health_abandon(struct round *rd)
{
	if (rd->bad_partial)
		return; /* an unread node may still hold them */
	for (size_t i = 0; i < rd->nrec; i++) {
		struct rec *x = &rd->recs[i];
		struct seen *s = x->s;
		struct act *a;

		if (x->gone || !x->r.for_health || x->r.released_ms || x->r.of_job || !s ||
		    s->picked)
			continue;
		rec_drop(rd, x);
		if ((a = act_add(rd, ACT_ABANDON, s)))
			a->health = true;
	}
}

/* Idle GPUs' requests whose workload the idle board no longer wants (busy
 * again, or a round that could not read Prometheus) and that were not
 * released: taken back.  Before the board's first round nothing is known. */
static void idle_abandon(struct round *rd)
{
	if (!rd->idle_known)
		return;
	for (size_t i = 0; i < rd->nrec; i++) {
		struct rec *x = &rd->recs[i];
		struct seen *s = x->s;
		struct act *a;

		if (x->gone || !x->r.for_idle || x->r.released_ms || x->r.of_job || !s ||
		    s->picked)
			continue;
		rec_drop(rd, x);
		if ((a = act_add(rd, ACT_ABANDON, s)))
			a->idle = true;
	}
}

/* The victims the sources marked (the health loop's, idle GPUs'), stepped
 * before any cohort picks. */
static void sources_step(struct round *rd)
{
	for (size_t i = 0; i < rd->n; i++)
		if (rd->seen[i].picked && (rd->seen[i].bad || rd->seen[i].idle))
			step_victim(rd, &rd->seen[i]);
}

/* Whether some cohort holds more than its quota on some flavor. */
static bool any_deficit(const struct round *rd)
{
	struct usage_names names;
	struct usage_view uv;

	usage_names_view(&names, rd->p, rd->r->cfg.usage, &uv);
	for (size_t c = 0; c < policy_cohort_count(rd->p); c++)
		for (size_t f = 0; f < policy_flavor_count(rd->p); f++)
			if (quota_cohort_deficit(rd->p, (int)c, policy_flavor_at(rd->p, f),
						 &uv) > 0)
				return true;
	return false;
}

static void round_once(struct reclaimer *r)
{
	struct round rd = {.r = r, .budget = ACTIONS_MAX};
	struct holder_ref *ref;

	rd.p = holder_acquire(r->cfg.policy, &ref);
	strmap_init(&rd.seen_by_uid);
	strmap_init(&rd.rec_by_uid);
	arena_init(&rd.a);
	if (!rd.p)
		goto out;
	rd.now_ms = r->cfg.now_ms ? r->cfg.now_ms() : wall_ms();
	reclaim_health_scan(&rd);
	reclaim_idle_read(&rd);
	/* No cohort, no health loop, nothing idle: nothing to take back or
	 * resume. */
	if (!policy_cohort_count(rd.p) && !rd.health_on && !rd.n_idle && r->known_empty)
		goto out;
	rd.recs = calloc(RECORDS_MAX, sizeof(*rd.recs));
	if (!rd.recs)
		goto out;
	usage_each_workload(r->cfg.usage, collect, &rd);
	if (rd.seen_oom)
		goto out;
	for (size_t i = 0; i < rd.n; i++)
		if (strmap_put(&rd.seen_by_uid, rd.seen[i].w.uid, i, NULL) < 0)
			goto out;
	if (r->known_empty && !rd.n_bad && !rd.n_idle && !any_deficit(&rd))
		goto resume; /* nothing recorded, nothing to take back */
	if (state_load(&rd) < 0)
		goto out;
	rd.loaded = true;
	state_prune(&rd);
	/* The health loop first: a workload on a failing node is its victim
	 * before idle GPUs' and any cohort's (the cohorts' pick counts it as
	 * signalled). */
	reclaim_health_pick(&rd);
	reclaim_idle_pick(&rd);
	sources_step(&rd);
	for (size_t c = 0; c < policy_cohort_count(rd.p); c++)
		for (size_t f = 0; f < policy_flavor_count(rd.p); f++)
			cohort_round(&rd, (int)c, policy_flavor_at(rd.p, f));
	health_abandon(&rd);
	idle_abandon(&rd);
	released_pods(&rd);
resume:
	resume_round(&rd);
	/* Recorded first, done after: a restart finds every step it must
	 * carry on, and never a time it must guess. */
	if (state_save(&rd) < 0)
		goto out;
	if (rd.loaded)
		r->known_empty = !live_records(&rd);
	for (size_t i = 0; i < rd.nact; i++)
		act_run(&rd, &rd.acts[i]);
	if (rd.dirty)
		log_event(LOG_DEBUG, "msg=\"reclaim state written\" records=%zu",
			  live_records(&rd));
out:
	json_decref(rd.state);
	free(rd.acts);
	free(rd.recs);
	strmap_release(&rd.seen_by_uid);
	strmap_release(&rd.rec_by_uid);
	arena_release(&rd.a);
	free(rd.seen);
	holder_release(ref);
}

/* While leading: a round, then the next after interval_ms. */
static unsigned turn(void *arg)
{
	struct reclaimer *r = arg;

	round_once(r);
	return r->cfg.interval_ms;
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
	snprintf(r->namespace, sizeof(r->namespace), "%s",
		 cfg->namespace && cfg->namespace[0] ? cfg->namespace : "gpugate");
	strmap_init(&r->misses);
	strmap_init(&r->told);
	if (worker_start(&r->w,
			 &(struct worker_config){.name = "reclaimer", .kube = cfg->kube,
						 .turn = turn, .arg = r,
						 .first_ms = r->cfg.interval_ms,
						 .idle_ms = r->cfg.interval_ms,
						 .leading = cfg->leading,
						 .leading_ctx = cfg->leading_ctx},
			 d) < 0) {
		strmap_release(&r->misses);
		strmap_release(&r->told);
		free(r);
		return -1;
	}
	if (cfg->metrics)
		metrics_reclaims_on(cfg->metrics);
	*out = r;
	return 0;
}

void reclaimer_stop(struct reclaimer *r)
{
	if (!r)
		return;
	worker_stop(&r->w);
	strmap_release_freeing(&r->misses);
	strmap_release_freeing(&r->told);
	free(r);
}
