/*
 * The idle controller's round (controllers/idle.h): read, pods, judge,
 * warn, reclaim (publish the wants), meter, publish.  The rule is
 * policy/idle.c (pure); this file is the reading and the writing.
 */
#include "controllers/idle.h"

#include "base/arena.h"
#include "base/diag.h"
#include "base/grow.h"
#include "base/log.h"
#include "base/strmap.h"
#include "base/text.h"
#include "base/wallclock.h"
#include "kube/client.h"
#include "kube/prom.h"
#include "policy/decide.h"
#include "policy/idle.h"
#include "policy/policy.h"
#include "usage/usage.h"
#include "webhook/holder.h"
#include "controllers/events.h"
#include "controllers/idle-board.h"
#include "controllers/worker.h"
#include "metrics/metrics.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WRITE_TIMEOUT_MS 5000
/* Pods a page of the list holds: a page stays well under the client's
 * KUBE_OBJECT_MAX (4 MiB) with pods of up to 16 KiB. */
#define PAGE_PODS 250
/* Running pods a round looks at, at most (the rest wait: a fleet's GPU
 * pods are far fewer). */
#define PODS_MAX 50000
#define WORKLOADS_MAX 20000
/* Writes (patches and Events) a round makes, at most: the rest wait for
 * the next round. */
#define ACTIONS_MAX 64
/* Workloads remembered as warned, at most (then forgotten: at worst an
 * Event is said twice). */
#define WARNED_MAX 20000
/* The label the Job controller puts on a Job's pods: the Job's uid. */
#define JOB_UID_LABEL "batch.kubernetes.io/controller-uid"

struct warned {
	int64_t since_ms;
	bool seen;       /* idle this round */
	char uid[];
};

struct idle_controller {
	struct idle_config cfg;
	char identity[256];
	struct worker w;
	struct prom *prom;       /* NULL: no --prometheus-url */
	int64_t last_ms;         /* the previous round's now; 0: none */
	/* What the log last said of Prometheus: 0 nothing, 1 up, 2 down (and
	 * why), so that a failure every round is said once. */
	int said;
	enum prom_error said_why;
	bool said_no_prom;
	/* uid -> struct warned (malloc'd; its key inside it): the idle spells
	 * told (GPUIdle), and whose annotation gpugate wrote on the Job. */
	struct strmap warned;
};

/* A workload as the round sees it, copied out of the store's lock. */
struct wl {
	struct usage_workload w;   /* strings in the round's arena */
	const struct policy_tenant *t;
	int64_t per_pod;
	size_t head;               /* its first pod, SIZE_MAX: none */
	size_t n;                  /* its running pods */
	const struct policy_idle *rule;
	enum idle_verdict v;
	double peak;
	int64_t since_ms;
	bool annotated;            /* one of its pods carries the annotation */
};

/* A Running pod. */
struct pod {
	const char *uid, *ns, *name;
	const char *since;         /* the annotation's value, NULL: none */
	int64_t running_ms;
	size_t wl;                 /* SIZE_MAX: no workload of a tenant */
	size_t next;               /* the next pod of its workload */
	const struct policy_class *c;
	struct idle_series s;
	bool from_util;            /* s came from IDLE_METRIC_UTIL */
	bool has_recent, has_hour;
	double recent, hour;
	enum idle_verdict v;
};

struct round {
	struct idle_controller *c;
	const struct policy *p;
	struct arena a;
	int64_t now_ms;
	int64_t window_s;          /* the longest `for`; 0: no rule */
	int64_t recent_s;          /* the metering window */
	struct wl *wls;
	size_t nw, capw;
	struct strmap wl_by_uid;   /* uid -> index into wls */
	struct pod *pods;
	size_t np, capp;
	struct strmap pod_by_key;  /* "ns/name" -> index into pods */
	unsigned budget;
	bool partial;              /* not every pod was read */
	bool oom;                  /* an array could not grow */
};

/* Room for one more workload or pod (base/grow.h). */
static bool wl_room(struct round *rd)
{
	void *items = rd->wls;
	bool ok = grow_room(&items, &rd->capw, rd->nw, WORKLOADS_MAX, sizeof(*rd->wls),
			    &rd->oom);

	rd->wls = items;
	return ok;
}

static bool pod_room(struct round *rd)
{
	void *items = rd->pods;
	bool ok = grow_room(&items, &rd->capp, rd->np, PODS_MAX, sizeof(*rd->pods),
			    &rd->oom);

	rd->pods = items;
	return ok;
}

static const char *str(const json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

/* ---- pure parts ---------------------------------------------------------- */

void idle_since_text(int64_t since_ms, char *buf, size_t size)
{
	events_time(since_ms / 1000, buf, (unsigned)size);
}

void idle_event_text(char *buf, size_t size, const struct policy_idle *rule, double peak,
		     int64_t since_ms, enum idle_event_on on)
{
	char why[160], since[32];
	bool reclaim = rule->action == IDLE_ACTION_RECLAIM;
	bool job = on != IDLE_ON_POD;

	idle_describe(why, sizeof(why), rule, peak);
	idle_since_text(since_ms, since, sizeof(since));
	snprintf(buf, size,
		 "%s GPUs were %s since %s: use them, or release them (%s) so that "
		 "others can%s%s",
		 on == IDLE_ON_JOB ? "its pods'" : "its", why, since,
		 on == IDLE_ON_JOB ? "delete or suspend the Job"
		 : job		    ? "delete or suspend its Job"
				    : "delete the pod",
		 reclaim ? "; otherwise gpugate takes them back: it asks for a checkpoint "
			   "(annotation " STAMP_CHECKPOINT_REQUESTED "), then "
			 : "",
		 reclaim ? (job ? "suspends the Job" : "evicts the pod") : "");
}

json_t *idle_since_patch(const char *since)
{
	return json_pack("{s:{s:{s:o}}}", "metadata", "annotations", IDLE_SINCE_ANNOTATION,
			 since ? json_string(since) : json_null());
}

/* ---- the workloads, under the store's lock ------------------------------ */

static void collect(void *ctx, const struct usage_workload *w)
{
	struct round *rd = ctx;
	const struct policy_tenant *t = policy_tenant_find(rd->p, w->tenant);
	struct wl *x;

	if (!t || !w->flavor || !wl_room(rd))
		return;
	x = &rd->wls[rd->nw];
	memset(x, 0, sizeof(*x));
	x->w = *w;
	x->w.uid = arena_strdup(&rd->a, w->uid);
	x->w.namespace = arena_strdup(&rd->a, w->namespace);
	x->w.name = arena_strdup(&rd->a, w->name ? w->name : "");
	x->w.tenant = t->name;
	x->w.flavor = arena_strdup(&rd->a, w->flavor);
	x->t = t;
	x->head = SIZE_MAX;
	if (x->w.uid && x->w.namespace && x->w.name && x->w.flavor)
		rd->nw++;
}

/* ---- the pods ----------------------------------------------------------- */

/* s into out, percent-encoded for a query string: false when too long. */
static bool escape_into(char *out, size_t size, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = 0;

	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		bool plain = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
			     (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.' ||
			     ch == '~';

		if (n + (plain ? 1 : 3) >= size)
			return false;
		if (plain) {
			out[n++] = (char)ch;
		} else {
			out[n++] = '%';
			out[n++] = hex[ch >> 4];
			out[n++] = hex[ch & 15];
		}
	}
	out[n] = '\0';
	return true;
}

static void pod_add(struct round *rd, const json_t *obj)
{
	const json_t *meta = json_object_get(obj, "metadata");
	const json_t *labels = json_object_get(meta, "labels");
	const json_t *status = json_object_get(obj, "status");
	const char *class_label = policy_settings(rd->p)->class_label;
	const char *uid = str(meta, "uid"), *ns = str(meta, "namespace");
	const char *name = str(meta, "name"), *job = str(labels, JOB_UID_LABEL);
	const char *since = str(json_object_get(meta, "annotations"), IDLE_SINCE_ANNOTATION);
	const char *phase = str(status, "phase"), *cls;
	struct pod *x;
	char key[600], *k;
	size_t i;

	/* The field selector asked for Running ones; an API that ignores it
	 * (or a pod being deleted) is filtered here. */
	if (!uid || !ns || !name || !phase || strcmp(phase, "Running") != 0 ||
	    json_object_get(meta, "deletionTimestamp"))
		return;
	if (!pod_room(rd)) {
		rd->partial = true;
		return;
	}
	x = &rd->pods[rd->np];
	memset(x, 0, sizeof(*x));
	x->uid = arena_strdup(&rd->a, uid);
	x->ns = arena_strdup(&rd->a, ns);
	x->name = arena_strdup(&rd->a, name);
	x->since = since ? arena_strdup(&rd->a, since) : NULL;
	x->running_ms = text_unix_time(str(status, "startTime")) * 1000;
	cls = class_label ? str(labels, class_label) : NULL;
	x->c = cls ? policy_class_find(rd->p, cls) : NULL;
	x->wl = SIZE_MAX;
	x->next = SIZE_MAX;
	if (!x->uid || !x->ns || !x->name || (since && !x->since))
		return;
	/* Its workload: its Job's gang, else itself. */
	if ((job && strmap_get(&rd->wl_by_uid, job, &i) && rd->wls[i].w.kind == USAGE_JOBS) ||
	    strmap_get(&rd->wl_by_uid, uid, &i))
		x->wl = i;
	else if (!since)
		return; /* not a GPU pod of a tenant, nothing of gpugate's on it */
	snprintf(key, sizeof(key), "%s/%s", ns, name);
	k = arena_strdup(&rd->a, key);
	if (!k || strmap_put(&rd->pod_by_key, k, rd->np, NULL) < 0)
		return;
	if (x->wl != SIZE_MAX) {
		struct wl *w = &rd->wls[x->wl];

		x->next = w->head;
		w->head = rd->np;
		w->n++;
	}
	rd->np++;
}

/* The Running pods, page by page: 0, or -1 (logged by the worker). */
static int list_pods(struct round *rd)
{
	struct idle_controller *c = rd->c;
	char path[2400], cont[2048] = "";
	struct diag d;

	do {
		json_t *list = NULL, *item;
		const char *next;
		size_t i;

		snprintf(path, sizeof(path),
			 "/api/v1/pods?fieldSelector=status.phase%%3DRunning&limit=%d%s%s",
			 PAGE_PODS, cont[0] ? "&continue=" : "", cont);
		diag_init(&d);
		if (kube_get_json(c->w.kube, path, 0, &list, &d) != 0) {
			worker_failed(&c->w, "idle round: pods not listed", diag_text(&d));
			return -1;
		}
		json_array_foreach(json_object_get(list, "items"), i, item)
			pod_add(rd, item);
		next = str(json_object_get(list, "metadata"), "continue");
		if (!next || !next[0] || !escape_into(cont, sizeof(cont), next))
			cont[0] = '\0';
		json_decref(list);
	} while (cont[0] && !worker_stopping(&c->w));
	return 0;
}

/* ---- Prometheus --------------------------------------------------------- */

enum field { F_PEAK, F_FIRST, F_RECENT, F_HOUR };

/* One query's samples onto the pods: metric's answer to field, where the
 * pods have none yet (the second metric fills what the first left). */
static void take(struct round *rd, const struct prom_vector *v, enum field f, bool util)
{
	for (size_t i = 0; i < v->n; i++) {
		const struct prom_sample *s = &v->v[i];
		double x = s->value;
		char key[600];
		size_t k;
		struct pod *p;

		snprintf(key, sizeof(key), "%s/%s", s->namespace, s->pod);
		if (!strmap_get(&rd->pod_by_key, key, &k))
			continue;
		p = &rd->pods[k];
		switch (f) {
		case F_PEAK:
			/* A utilization outside 0..1 is garbage: never idle from it. */
			if (p->s.found || x < 0 || x > 1)
				break;
			p->s.found = true;
			p->s.peak = x;
			p->from_util = util;
			break;
		case F_FIRST:
			if (p->s.found && p->from_util == util && x > 0 && !p->s.first_ms)
				p->s.first_ms = (int64_t)(x * 1000);
			break;
		case F_RECENT:
			if (!p->has_recent && x >= 0 && x <= 1) {
				p->has_recent = true;
				p->recent = x;
			}
			break;
		case F_HOUR:
			if (!p->has_hour && x >= 0 && x <= 1) {
				p->has_hour = true;
				p->hour = x;
			}
			break;
		}
	}
}

/* Whether some pod of a workload lacks what metric PROF gave the others. */
static bool missing(const struct round *rd)
{
	for (size_t i = 0; i < rd->np; i++) {
		const struct pod *p = &rd->pods[i];

		if (p->wl == SIZE_MAX)
			continue;
		if ((rd->window_s && !p->s.found) || !p->has_recent || !p->has_hour)
			return true;
	}
	return false;
}

/* The queries of metric: 0, or -1 with *why. */
static int read_metric(struct round *rd, const char *metric, enum prom_error *why,
		       struct diag *d)
{
	static const enum idle_query qs[] = {IDLE_Q_PEAK, IDLE_Q_FIRST, IDLE_Q_RECENT,
					     IDLE_Q_RECENT};
	bool util = strcmp(metric, IDLE_METRIC_UTIL) == 0;

	for (int f = F_PEAK; f <= F_HOUR; f++) {
		struct prom_vector v = {0};
		char q[1024];

		if (f <= F_FIRST && !rd->window_s)
			continue; /* no rule: metering only */
		if (idle_query_text(q, sizeof(q), qs[f], metric, rd->window_s,
				    f == F_HOUR ? IDLE_SHARE_WINDOW_S : rd->recent_s) < 0)
			continue;
		if (prom_query(rd->c->prom, q, rd->now_ms, &v, why, d) < 0)
			return -1;
		take(rd, &v, (enum field)f, util);
		prom_vector_release(&v);
	}
	return 0;
}

/* Reads the utilizations; false when Prometheus could not be read (said
 * once per change, counted every time). */
static bool read_prom(struct round *rd)
{
	struct idle_controller *c = rd->c;
	enum prom_error why = PROM_OK;
	struct diag d;
	int rc;

	diag_init(&d);
	rc = read_metric(rd, IDLE_METRIC_PROF, &why, &d);
	if (rc == 0 && missing(rd))
		rc = read_metric(rd, IDLE_METRIC_UTIL, &why, &d);
	if (rc < 0) {
		char q[600];

		if (why == PROM_OK)
			why = PROM_GARBAGE;
		metrics_prometheus(c->cfg.metrics, false, prom_error_name(why));
		if (c->said != 2 || c->said_why != why)
			log_event(LOG_WARN,
				  "msg=\"prometheus not read: nothing is judged idle this round\" "
				  "reason=%s error=\"%s\"",
				  prom_error_name(why), log_quote(diag_text(&d), q, sizeof(q)));
		c->said = 2;
		c->said_why = why;
		return false;
	}
	metrics_prometheus(c->cfg.metrics, true, NULL);
	if (c->said == 2)
		log_event(LOG_INFO, "msg=\"prometheus read again\"");
	c->said = 1;
	return true;
}

/* ---- judging ------------------------------------------------------------ */

static void judge(struct round *rd)
{
	enum idle_verdict *vs = NULL;
	size_t cap = 0;

	for (size_t i = 0; i < rd->nw; i++) {
		struct wl *w = &rd->wls[i];
		size_t n = 0;
		int64_t since = 0;

		w->v = IDLE_NO_DATA;
		if (!w->n)
			continue;
		if (w->n > cap) {
			enum idle_verdict *g = realloc(vs, w->n * sizeof(*g));

			if (!g)
				continue;
			vs = g;
			cap = w->n;
		}
		for (size_t k = w->head; k != SIZE_MAX; k = rd->pods[k].next) {
			struct pod *p = &rd->pods[k];
			const struct policy_idle *rule = idle_rule(w->t, p->c);
			struct idle_pod ip = {.running_ms = p->running_ms, .s = p->s};
			int64_t t;

			if (!w->rule)
				w->rule = rule;
			p->v = idle_judge(rule, &ip, rd->window_s, rd->now_ms);
			vs[n++] = p->v;
			if (p->s.found && p->s.peak > w->peak)
				w->peak = p->s.peak;
			if (p->since) {
				w->annotated = true;
				t = text_unix_time(p->since) * 1000;
				if (t > since)
					since = t;
			}
		}
		w->v = idle_judge_job(vs, n);
		if (w->v != IDLE_IDLE)
			continue;
		/* Since: what gpugate said of this spell, else what its pods
		 * carry (a restart), else the start of `for`. */
		{
			size_t v;

			if (strmap_get(&rd->c->warned, w->w.uid, &v))
				since = ((struct warned *)(uintptr_t)v)->since_ms;
			else if (!since || since > rd->now_ms)
				since = rd->now_ms - w->rule->for_s * 1000;
			w->since_ms = since / 1000 * 1000;
		}
	}
	free(vs);
}

/* ---- warning ------------------------------------------------------------ */

static bool spend(struct round *rd)
{
	if (!rd->budget)
		return false;
	rd->budget--;
	return true;
}

static int patch(struct round *rd, const char *path, const char *since)
{
	json_t *body = idle_since_patch(since);
	struct diag d;
	int rc;

	if (!body)
		return -1;
	diag_init(&d);
	rc = kube_patch(rd->c->w.kube, path, KUBE_PATCH_MERGE, body, WRITE_TIMEOUT_MS, NULL,
			&d);
	json_decref(body);
	if (rc != 0 && rc != 404) {
		char q[600];

		log_event(LOG_WARN, "msg=\"idle annotation not written\" path=%s error=\"%s\"%s",
			  path, log_quote(diag_text(&d), q, sizeof(q)),
			  rc == 403 ? " hint=\"gpugate's ClusterRole needs pods and jobs patch\""
				    : "");
	}
	return rc;
}

static int patch_pod(struct round *rd, const struct pod *p, const char *since)
{
	char path[600];

	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s", p->ns, p->name);
	return patch(rd, path, since);
}

static int patch_job(struct round *rd, const struct wl *w, const char *since)
{
	char path[600];

	snprintf(path, sizeof(path), "/apis/batch/v1/namespaces/%s/jobs/%s", w->w.namespace,
		 w->w.name);
	return patch(rd, path, since);
}

static void remember(struct round *rd, const struct wl *w)
{
	struct strmap *m = &rd->c->warned;
	size_t len = strlen(w->w.uid) + 1, v;
	struct warned *x;

	if (strmap_get(m, w->w.uid, &v)) {
		x = (struct warned *)(uintptr_t)v;
		x->since_ms = w->since_ms;
		x->seen = true;
		return;
	}
	if (m->len >= WARNED_MAX) {
		strmap_release_freeing(m);
		strmap_init(m);
	}
	x = malloc(sizeof(*x) + len);
	if (!x)
		return;
	x->since_ms = w->since_ms;
	x->seen = true;
	memcpy(x->uid, w->w.uid, len);
	if (strmap_put(m, x->uid, (size_t)(uintptr_t)x, NULL) != 0)
		free(x);
}

/* An idle workload: the Events once per spell, the annotations. */
static void warn(struct round *rd, struct wl *w)
{
	struct idle_controller *c = rd->c;
	bool job = w->w.kind == USAGE_JOBS;
	char since[32], msg[1024];
	size_t v;
	struct warned *x = strmap_get(&c->warned, w->w.uid, &v) ? (void *)(uintptr_t)v : NULL;
	bool told = x && x->since_ms == w->since_ms;

	idle_since_text(w->since_ms, since, sizeof(since));
	for (size_t k = w->head; k != SIZE_MAX; k = rd->pods[k].next) {
		const struct pod *p = &rd->pods[k];

		if ((!p->since || strcmp(p->since, since) != 0) && spend(rd))
			patch_pod(rd, p, since);
	}
	if (told) {
		x->seen = true;
		return;
	}
	/* A new spell: the Job's annotation, then the Events. */
	if (job && (!spend(rd) || patch_job(rd, w, since) != 0))
		return; /* next round */
	idle_event_text(msg, sizeof(msg), w->rule, w->peak, w->since_ms,
			job ? IDLE_ON_JOB : IDLE_ON_POD);
	if (job) {
		struct events_object o = {"batch/v1", "Job", w->w.namespace, w->w.name,
					  w->w.uid};

		events_write(c->w.kube, c->identity, &o, IDLE_EVENT, "Warning", msg,
			     rd->now_ms / 1000);
	}
	for (size_t k = w->head; k != SIZE_MAX; k = rd->pods[k].next) {
		const struct pod *p = &rd->pods[k];
		struct events_object o = {"v1", "Pod", p->ns, p->name, p->uid};
		char pmsg[1024];

		if (!spend(rd))
			break;
		if (job)
			idle_event_text(pmsg, sizeof(pmsg), w->rule, p->s.peak, w->since_ms,
					IDLE_ON_JOB_POD);
		events_write(c->w.kube, c->identity, &o, IDLE_EVENT, "Warning",
			     job ? pmsg : msg, rd->now_ms / 1000);
	}
	remember(rd, w);
	log_event(LOG_INFO,
		  "msg=\"idle GPUs\" kind=%s namespace=%s name=%s tenant=%s flavor=%s units=%lld "
		  "since=%s action=%s",
		  job ? "Job" : "Pod", w->w.namespace, w->w.name, w->w.tenant, w->w.flavor,
		  (long long)w->w.units, since, idle_action_name(w->rule->action));
}

/* A workload no longer idle: gpugate's annotations off. */
static void unwarn(struct round *rd, struct wl *w)
{
	size_t v;
	bool told = strmap_get(&rd->c->warned, w->w.uid, &v);

	for (size_t k = w->head; k != SIZE_MAX; k = rd->pods[k].next)
		if (rd->pods[k].since && spend(rd))
			patch_pod(rd, &rd->pods[k], NULL);
	if (w->w.kind == USAGE_JOBS && (told || w->annotated)) {
		if (!spend(rd) || patch_job(rd, w, NULL) != 0)
			return; /* the memory stays: next round */
	}
	if (told) {
		struct warned *x = (struct warned *)(uintptr_t)v;

		strmap_del(&rd->c->warned, w->w.uid, NULL);
		free(x);
		log_event(LOG_INFO, "msg=\"GPUs busy again\" namespace=%s name=%s",
			  w->w.namespace, w->w.name);
	}
}

/* Forgets the warned workloads not idle this round that are gone (no
 * longer in the ledger: nothing to take the annotation off). */
static void forget(struct round *rd)
{
	struct strmap *m = &rd->c->warned;
	struct warned **gone = m->len ? calloc(m->len, sizeof(*gone)) : NULL;
	size_t pos = 0, n = 0, v, i;
	const char *key;

	if (!gone)
		return;
	while (strmap_next(m, &pos, &key, &v)) {
		struct warned *x = (struct warned *)(uintptr_t)v;

		if (!x->seen && !strmap_get(&rd->wl_by_uid, key, &i))
			gone[n++] = x;
		x->seen = false;
	}
	for (i = 0; i < n; i++) {
		strmap_del(m, gone[i]->uid, NULL);
		free(gone[i]);
	}
	free(gone);
}

/* ---- the round ---------------------------------------------------------- */

struct sum {
	const char *tenant, *flavor;
	double value;
};

static void add_sum(struct sum *v, size_t *n, const char *t, const char *f, double x)
{
	for (size_t i = 0; i < *n; i++)
		if (v[i].tenant == t && strcmp(v[i].flavor, f) == 0) {
			v[i].value += x;
			return;
		}
	v[(*n)++] = (struct sum){t, f, x};
}

static void push(struct metrics *m, const struct sum *v, size_t n, bool busy)
{
	struct metrics_idle_row *rows = n ? calloc(n, sizeof(*rows)) : NULL;

	if (n && !rows)
		return;
	for (size_t i = 0; i < n; i++)
		rows[i] = (struct metrics_idle_row){v[i].tenant, v[i].flavor, v[i].value};
	if (busy)
		metrics_gpu_busy(m, rows, n);
	else
		metrics_idle_gpus(m, rows, n);
	free(rows);
}

/* Meters the busy GPU time since the last round; the figures. */
static void meter(struct round *rd, struct sum *sums, size_t *ns)
{
	struct idle_controller *c = rd->c;
	int64_t gap = rd->now_ms - c->last_ms;

	*ns = 0;
	if (!c->last_ms || gap <= 0)
		return;
	/* A paused leader does not bill a burst. */
	if (gap > 2 * (int64_t)c->cfg.interval_ms)
		gap = 2 * (int64_t)c->cfg.interval_ms;
	for (size_t i = 0; i < rd->np; i++) {
		const struct pod *p = &rd->pods[i];
		const struct wl *w;

		if (p->wl == SIZE_MAX || !p->has_recent)
			continue;
		w = &rd->wls[p->wl];
		add_sum(sums, ns, w->w.tenant, w->w.flavor,
			(double)w->per_pod * (double)gap / 1000.0 * p->recent);
	}
}

static void publish(struct round *rd, bool ok)
{
	struct idle_controller *c = rd->c;
	struct idle_want *wants = NULL;
	struct idle_util *utils = NULL;
	struct sum *sums = NULL;
	size_t nw = 0, nu = 0, ns = 0;

	if (ok) {
		wants = calloc(rd->nw ? rd->nw : 1, sizeof(*wants));
		utils = calloc(rd->np ? rd->np : 1, sizeof(*utils));
		sums = calloc(rd->nw + rd->np + 1, sizeof(*sums));
		if (!wants || !utils || !sums)
			ok = false;
	}
	for (size_t i = 0; ok && i < rd->nw; i++) {
		const struct wl *w = &rd->wls[i];
		struct idle_want *x = &wants[nw];

		if (w->v != IDLE_IDLE)
			continue;
		add_sum(sums, &ns, w->w.tenant, w->w.flavor, (double)w->w.units);
		if (w->rule->action != IDLE_ACTION_RECLAIM)
			continue;
		snprintf(x->uid, sizeof(x->uid), "%s", w->w.uid);
		snprintf(x->namespace, sizeof(x->namespace), "%s", w->w.namespace);
		snprintf(x->name, sizeof(x->name), "%s", w->w.name);
		x->since_ms = w->since_ms;
		x->peak = w->peak;
		idle_describe(x->why, sizeof(x->why), w->rule, w->peak);
		nw++;
	}
	for (size_t i = 0; ok && i < rd->np; i++)
		if (rd->pods[i].wl != SIZE_MAX && rd->pods[i].has_hour)
			utils[nu++] = (struct idle_util){rd->pods[i].ns, rd->pods[i].name,
							 rd->pods[i].hour};
	push(c->cfg.metrics, sums, ns, false);
	if (ok) {
		meter(rd, sums, &ns);
		push(c->cfg.metrics, sums, ns, true);
	}
	if (c->cfg.board &&
	    idle_board_publish(c->cfg.board, wants, nw, utils, nu, rd->now_ms) < 0)
		log_event(LOG_WARN, "msg=\"idle round not published: out of memory\"");
	if (nw)
		log_event(LOG_DEBUG, "msg=\"idle workloads to take back\" count=%zu", nw);
	free(wants);
	free(utils);
	free(sums);
}

static void round_once(struct idle_controller *c)
{
	struct round rd = {.c = c, .budget = ACTIONS_MAX};
	struct holder_ref *ref;
	bool ok = false;

	rd.p = holder_acquire(c->cfg.policy, &ref);
	arena_init(&rd.a);
	strmap_init(&rd.wl_by_uid);
	strmap_init(&rd.pod_by_key);
	if (!rd.p || (c->cfg.synced && !c->cfg.synced(c->cfg.synced_ctx)))
		goto out;
	rd.now_ms = c->cfg.now_ms ? c->cfg.now_ms() : wall_ms();
	rd.window_s = policy_idle_window_s(rd.p);
	if (!c->prom) {
		/* No data: nothing is idle (SPEC 10). */
		if (rd.window_s && !c->said_no_prom)
			log_event(LOG_WARN, "msg=\"the policy has idle rules but gpugate serve "
					    "has no --prometheus-url: nothing is judged idle\"");
		c->said_no_prom = rd.window_s != 0;
		goto publish;
	}
	{
		int64_t gap = c->last_ms ? rd.now_ms - c->last_ms : (int64_t)c->cfg.interval_ms;

		if (gap > 2 * (int64_t)c->cfg.interval_ms)
			gap = 2 * (int64_t)c->cfg.interval_ms;
		rd.recent_s = (gap + 999) / 1000;
	}
	usage_each_workload(c->cfg.usage, collect, &rd);
	if (rd.oom)
		goto publish;
	for (size_t i = 0; i < rd.nw; i++) {
		struct wl *w = &rd.wls[i];
		struct usage_gang g;

		w->per_pod = w->w.units;
		if (w->w.kind == USAGE_JOBS && usage_gang(c->cfg.usage, w->w.uid, &g))
			w->per_pod = g.per_pod;
		if (strmap_put(&rd.wl_by_uid, w->w.uid, i, NULL) < 0)
			goto publish;
	}
	if (list_pods(&rd) < 0 || rd.oom)
		goto publish;
	worker_recovered(&c->w);
	if (rd.partial)
		log_event(LOG_WARN, "msg=\"idle round: more running pods than it reads; the "
				    "rest are not judged\" max=%d",
			  PODS_MAX);
	if (!read_prom(&rd))
		goto publish;
	ok = true;
	judge(&rd);
	for (size_t i = 0; i < rd.nw && !worker_stopping(&c->w); i++) {
		struct wl *w = &rd.wls[i];

		if (w->v == IDLE_IDLE)
			warn(&rd, w);
		else if (w->n)
			unwarn(&rd, w);
	}
	/* Pods of no workload of a tenant that carry the annotation (their
	 * tenant left the policy): it goes. */
	for (size_t i = 0; i < rd.np; i++)
		if (rd.pods[i].wl == SIZE_MAX && rd.pods[i].since && spend(&rd))
			patch_pod(&rd, &rd.pods[i], NULL);
	forget(&rd);
publish:
	if (rd.p)
		publish(&rd, ok);
	c->last_ms = rd.now_ms;
out:
	free(rd.wls);
	free(rd.pods);
	strmap_release(&rd.wl_by_uid);
	strmap_release(&rd.pod_by_key);
	arena_release(&rd.a);
	holder_release(ref);
}

/* While leading: a round, then the next after interval_ms. */
static unsigned turn(void *arg)
{
	struct idle_controller *c = arg;

	round_once(c);
	return c->cfg.interval_ms;
}

/* Another replica leads: its rounds meter and judge, not ours; what this
 * one found while it led is taken back once (no stale gauge, no stale
 * busy share in its GET /pool). */
static void sit_out(void *arg)
{
	struct idle_controller *c = arg;

	if (!c->last_ms)
		return;
	c->last_ms = 0;
	metrics_idle_gpus(c->cfg.metrics, NULL, 0);
	if (c->cfg.board)
		idle_board_publish(c->cfg.board, NULL, 0, NULL, 0,
				   c->cfg.now_ms ? c->cfg.now_ms() : wall_ms());
}

int idle_start(const struct idle_config *cfg, struct idle_controller **out,
	       struct diag *d)
{
	struct idle_controller *c = calloc(1, sizeof(*c));
	const char *reasons[PROM_ERROR__COUNT];
	size_t n = 0;

	if (!c) {
		diag_addf(d, "out of memory");
		return -1;
	}
	c->cfg = *cfg;
	if (!c->cfg.interval_ms)
		c->cfg.interval_ms = 60000;
	snprintf(c->identity, sizeof(c->identity), "%s", cfg->identity ? cfg->identity : "");
	strmap_init(&c->warned);
	if (cfg->prom && !(c->prom = prom_new(cfg->prom, d))) {
		free(c);
		return -1;
	}
	if (worker_start(&c->w,
			 &(struct worker_config){.name = "idle", .kube = cfg->kube,
						 .turn = turn, .idle = sit_out, .arg = c,
						 .first_ms = c->cfg.interval_ms < 2000
								     ? c->cfg.interval_ms
								     : 2000,
						 .idle_ms = c->cfg.interval_ms,
						 .leading = cfg->leading,
						 .leading_ctx = cfg->leading_ctx},
			 d) < 0) {
		prom_free(c->prom);
		free(c);
		return -1;
	}
	for (int e = PROM_OK + 1; e < PROM_ERROR__COUNT; e++)
		reasons[n++] = prom_error_name((enum prom_error)e);
	metrics_idle_on(cfg->metrics, cfg->prom != NULL, reasons, n);
	*out = c;
	return 0;
}

void idle_stop(struct idle_controller *c)
{
	if (!c)
		return;
	worker_stop(&c->w);
	prom_free(c->prom);
	strmap_release_freeing(&c->warned);
	free(c);
}
