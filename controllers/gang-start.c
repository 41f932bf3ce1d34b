/*
 * gang-start's round (controllers/gang-start.h): the reading and the
 * writing; the decisions are controllers/gang-rule.c (pure).
 */
#include "controllers/gang-start.h"

#include "base/arena.h"
#include "base/diag.h"
#include "base/hash.h"
#include "base/log.h"
#include "base/strmap.h"
#include "base/wallclock.h"
#include "kube/client.h"
#include "policy/decide.h"
#include "policy/gang.h"
#include "policy/policy.h"
#include "policy/pool.h"
#include "usage/inventory.h"
#include "usage/usage.h"
#include "webhook/charge.h"
#include "webhook/holder.h"
#include "controllers/events.h"
#include "controllers/gang-rule.h"
#include "controllers/state-map.h"
#include "controllers/worker.h"
#include "metrics/metrics.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WRITE_TIMEOUT_MS 5000
#define LIST_TIMEOUT_MS 20000
/* Gangs a round looks at, at most; records kept, at most. */
#define GANGS_MAX 2000
/* Gated pods the inventory is asked about to know whether to wake. */
#define PEEK_MAX 4096
#define CONTROLLER_UID "batch.kubernetes.io/controller-uid"

struct gang_start {
	struct gang_start_config cfg;
	char identity[256];
	char namespace[254];
	struct worker w;
	/* The record held nothing when last read or written: while the
	 * inventory shows no gated gang pod, a round reads nothing. */
	bool known_empty;
	/* Job uid -> struct said: the last GPUGangWaiting written on it;
	 * the thread's own. */
	struct strmap said;
};

struct said {
	uint64_t hash; /* of the message */
	bool seen;     /* still waiting this round */
	char uid[];
};

/* One gang of the round. */
struct gang {
	const json_t *job;           /* borrowed from the Jobs list */
	const char *uid, *ns, *name;
	json_t *pods;                /* array of its pods (borrowed refs) */
	struct gang_record rec;
	bool has_rec, rec_gone;
	char tenant[64];             /* rec.tenant's storage when set here */
	enum gang_step step;
	/* A release: the domain (NULL: none) and the topology key. */
	bool release;
	const char *domain, *key;
	bool regate, suspend, resume;
	const char *flavor;          /* arena */
	const char *why;             /* the wait, for the Job Event */
};

struct round {
	struct gang_start *g;
	const struct policy *p;
	struct arena a;
	int64_t now_ms;
	json_t *state, *jobs, *pods;
	struct gang *gangs;
	size_t n;
	bool dirty;
	/* Records of uids that are no Job of the list: kept as they are
	 * unless the Job is gone (an entry a list does not show). */
	json_t *others;
	/* Flavors with a released gang not yet bound (a second gang waits
	 * for the inventory to count the first). */
	struct strmap busy;
};

static const char *str(const json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

static int64_t num(const json_t *o, const char *k, int64_t dflt)
{
	const json_t *v = json_object_get(o, k);

	return json_is_integer(v) ? (int64_t)json_integer_value(v) : dflt;
}

/* The uid of the Job that controls pod, or NULL. */
static const char *job_of(const json_t *pod)
{
	const json_t *meta = json_object_get(pod, "metadata");
	const char *uid = str(json_object_get(meta, "labels"), CONTROLLER_UID);
	const json_t *o;
	size_t i;

	if (uid)
		return uid;
	json_array_foreach(json_object_get(meta, "ownerReferences"), i, o)
		if (json_is_true(json_object_get(o, "controller")) && str(o, "kind") &&
		    strcmp(str(o, "kind"), "Job") == 0)
			return str(o, "uid");
	return NULL;
}

static bool job_finished(const json_t *job)
{
	const json_t *c;
	size_t i;

	json_array_foreach(json_object_get(json_object_get(job, "status"), "conditions"), i, c) {
		const char *t = str(c, "type"), *s = str(c, "status");

		if (t && s && strcmp(s, "True") == 0 &&
		    (strcmp(t, "Complete") == 0 || strcmp(t, "Failed") == 0))
			return true;
	}
	return false;
}

/* The pod's facts for the rule; its gate's index in *gate_at (-1: none). */
static void pod_facts(const json_t *pod, const char *key, struct gang_pod *out,
		      long *gate_at)
{
	const json_t *meta = json_object_get(pod, "metadata");
	const json_t *spec = json_object_get(pod, "spec");
	const char *phase = str(json_object_get(pod, "status"), "phase");
	const char *node = str(spec, "nodeName");
	const json_t *gate;
	size_t i;

	memset(out, 0, sizeof(*out));
	*gate_at = -1;
	out->terminal = json_object_get(meta, "deletionTimestamp") ||
			(phase && (strcmp(phase, "Succeeded") == 0 ||
				   strcmp(phase, "Failed") == 0));
	out->bound = node && node[0];
	out->running = phase && strcmp(phase, "Running") == 0;
	json_array_foreach(json_object_get(spec, "schedulingGates"), i, gate) {
		const char *n = str(gate, "name");

		if (n && strcmp(n, GANG_GATE) == 0) {
			out->gated = true;
			*gate_at = (long)i;
		} else {
			out->other_gate = true;
		}
	}
	if (key)
		out->domain = str(json_object_get(spec, "nodeSelector"), key);
}

/* ---- the record --------------------------------------------------------- */

static int state_load(struct round *rd)
{
	struct diag d;
	int rc;

	diag_init(&d);
	rc = state_map_read(rd->g->w.kube, rd->g->namespace, GANG_START_STATE,
			    WRITE_TIMEOUT_MS, &rd->state, &d);
	if (rc != 0) {
		worker_failed(&rd->g->w, "gang record not read; nothing done this round",
			      diag_text(&d));
		return -1;
	}
	return 0;
}

static const char *rec_text(const struct round *rd, const char *uid)
{
	return str(json_object_get(rd->state, "data"), uid);
}

/* Writes the records: the round's gangs', and the others' as read. */
static int state_save(struct round *rd, size_t *left)
{
	json_t *data = json_object();
	const char *key;
	json_t *v;
	struct diag d;
	int rc;

	*left = 0;
	if (!data)
		return -1;
	json_object_foreach(rd->others, key, v) {
		json_object_set(data, key, v);
		(*left)++;
	}
	for (size_t i = 0; i < rd->n; i++) {
		const struct gang *x = &rd->gangs[i];
		char text[200];

		if (!x->has_rec || x->rec_gone)
			continue;
		if (gang_record_format(&x->rec, text, sizeof(text)) >= sizeof(text))
			continue;
		json_object_set_new(data, x->uid, json_string(text));
		(*left)++;
	}
	if (!rd->dirty) {
		json_decref(data);
		return 0;
	}
	diag_init(&d);
	rc = state_map_write(rd->g->w.kube, rd->g->namespace, GANG_START_STATE, rd->state,
			     data, WRITE_TIMEOUT_MS, &d);
	if (rc != 0) {
		worker_failed(&rd->g->w, "gang record not written; nothing done this round",
			      diag_text(&d));
		return -1;
	}
	return 0;
}

/* ---- the steps ---------------------------------------------------------- */

static struct events_object job_object(const struct gang *x)
{
	return (struct events_object){"batch/v1", "Job", x->ns, x->name, x->uid};
}

static void job_event(struct round *rd, const struct gang *x, const char *reason,
		      const char *type, const char *msg)
{
	struct events_object o = job_object(x);

	events_write(rd->g->w.kube, rd->g->identity, &o, reason, type, msg,
		     rd->now_ms / 1000);
}

/* A JSON pointer token of s (RFC 6901: ~ and / escaped). */
static void pointer_token(const char *s, char *out, size_t size)
{
	size_t n = 0;

	for (; *s && n + 3 < size; s++) {
		if (*s == '~' || *s == '/') {
			out[n++] = '~';
			out[n++] = *s == '~' ? '0' : '1';
		} else {
			out[n++] = *s;
		}
	}
	out[n] = '\0';
}

/* One pod's gate off (and its domain on): 0, or the failure. */
static int release_pod(struct round *rd, const struct gang *x, const json_t *pod)
{
	const json_t *spec = json_object_get(pod, "spec");
	const json_t *sel = json_object_get(spec, "nodeSelector");
	const char *name = str(json_object_get(pod, "metadata"), "name");
	struct gang_pod f;
	long at;
	char path[700], gpath[64], tok[300], q[600];
	json_t *ops;
	struct diag d;
	int rc;

	pod_facts(pod, x->key, &f, &at);
	if (!name || f.terminal || at < 0)
		return 0;
	snprintf(gpath, sizeof(gpath), "/spec/schedulingGates/%ld", at);
	ops = json_array();
	json_array_append_new(ops, json_pack("{s:s, s:s, s:s}", "op", "test", "path",
					     (snprintf(path, sizeof(path), "%s/name", gpath), path),
					     "value", GANG_GATE));
	if (x->domain && x->key && !(f.domain && strcmp(f.domain, x->domain) == 0)) {
		if (!json_is_object(sel)) {
			json_array_append_new(ops, json_pack("{s:s, s:s, s:{s:s}}", "op", "add",
							     "path", "/spec/nodeSelector",
							     "value", x->key, x->domain));
		} else {
			pointer_token(x->key, tok, sizeof(tok));
			snprintf(path, sizeof(path), "/spec/nodeSelector/%s", tok);
			json_array_append_new(ops, json_pack("{s:s, s:s, s:s}", "op", "add",
							     "path", path, "value", x->domain));
		}
	}
	json_array_append_new(ops, json_pack("{s:s, s:s}", "op", "remove", "path", gpath));
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s", x->ns, name);
	diag_init(&d);
	rc = kube_patch(rd->g->w.kube, path, KUBE_PATCH_JSON, ops, WRITE_TIMEOUT_MS, NULL, &d);
	json_decref(ops);
	if (rc != 0 && rc != 404)
		log_event(LOG_WARN, "msg=\"gang gate not removed; tried again next round\" "
				    "pod=%s/%s error=\"%s\"",
			  x->ns, name, log_quote(diag_text(&d), q, sizeof(q)));
	return rc == 404 ? 0 : rc;
}

static void release(struct round *rd, struct gang *x)
{
	size_t i, failed = 0, n = 0;
	json_t *pod;
	char msg[600];

	json_array_foreach(x->pods, i, pod) {
		struct gang_pod f;
		long at;

		pod_facts(pod, x->key, &f, &at);
		if (f.terminal || !f.gated)
			continue;
		n++;
		if (release_pod(rd, x, pod) != 0)
			failed++;
	}
	if (failed)
		return;
	if (x->domain)
		snprintf(msg, sizeof(msg), "gang released: the gates of its %zu waiting pods "
			 "are off, all in %s=%s", n, x->key, x->domain);
	else
		snprintf(msg, sizeof(msg), "gang released: the gates of its %zu waiting pods "
			 "are off", n);
	job_event(rd, x, "GPUGangStarted", "Normal", msg);
	log_event(LOG_INFO, "msg=\"gang released\" job=%s/%s pods=%zu domain=%s", x->ns,
		  x->name, n, x->domain ? x->domain : "-");
}

/* spec.suspend of the Job: 0 or the failure. */
static int suspend_job(struct round *rd, const struct gang *x, bool on)
{
	char path[600], q[600];
	json_t *body = json_pack("{s:{s:b}}", "spec", "suspend", on);
	struct diag d;
	int rc;

	snprintf(path, sizeof(path), "/apis/batch/v1/namespaces/%s/jobs/%s", x->ns, x->name);
	diag_init(&d);
	rc = kube_patch(rd->g->w.kube, path, KUBE_PATCH_MERGE, body, WRITE_TIMEOUT_MS, NULL,
			&d);
	json_decref(body);
	if (rc != 0 && rc != 404)
		log_event(LOG_WARN, "msg=\"gang job not %s; tried again next round\" job=%s/%s "
				    "error=\"%s\"",
			  on ? "suspended" : "resumed", x->ns, x->name,
			  log_quote(diag_text(&d), q, sizeof(q)));
	return rc;
}

/* What was said of Job uid, made when new; NULL when out of memory. */
static struct said *said_get(struct gang_start *g, const char *uid)
{
	size_t v, len = strlen(uid);
	struct said *sd;

	if (strmap_get(&g->said, uid, &v))
		return (struct said *)(uintptr_t)v;
	sd = calloc(1, sizeof(*sd) + len + 1);
	if (!sd)
		return NULL;
	memcpy(sd->uid, uid, len + 1);
	if (strmap_put(&g->said, sd->uid, (size_t)(uintptr_t)sd, NULL) != 0) {
		free(sd);
		return NULL;
	}
	return sd;
}

static void act(struct round *rd, struct gang *x)
{
	char msg[600];

	if (x->release)
		release(rd, x);
	if (x->regate || x->suspend) {
		if (suspend_job(rd, x, true) == 0 && x->regate) {
			snprintf(msg, sizeof(msg),
				 "gang gated again: its pods were not all Running %lld s "
				 "after their release; the Job is suspended and resumed, "
				 "and its pods wait for room together (regate %lld)",
				 (long long)policy_settings(rd->p)->gang_timeout_seconds,
				 (long long)x->rec.regates);
			job_event(rd, x, "GPUGangRegated", "Warning", msg);
			log_event(LOG_INFO, "msg=\"gang regated\" job=%s/%s regates=%lld",
				  x->ns, x->name, (long long)x->rec.regates);
		}
	}
	if (x->resume)
		suspend_job(rd, x, false);
	if (x->why) {
		uint64_t h = hash_fnv1a(HASH_FNV1A_SEED, x->why);
		struct said *sd = said_get(rd->g, x->uid);

		if (sd && sd->hash != h) {
			job_event(rd, x, "GPUGangWaiting", "Normal", x->why);
			sd->hash = h;
		}
		if (sd)
			sd->seen = true;
	}
}

/* Forgets what was said of Jobs that no longer wait. */
static void said_prune(struct gang_start *g)
{
	struct said **gone;
	size_t pos = 0, v, n = 0;
	const char *key;

	if (!g->said.len)
		return;
	gone = calloc(g->said.len, sizeof(*gone));
	if (!gone)
		return;
	while (strmap_next(&g->said, &pos, &key, &v)) {
		struct said *sd = (struct said *)(uintptr_t)v;

		if (!sd->seen)
			gone[n++] = sd;
		sd->seen = false;
	}
	for (size_t i = 0; i < n; i++) {
		strmap_del(&g->said, gone[i]->uid, NULL);
		free(gone[i]);
	}
	free(gone);
}

/* ---- the decision per gang ---------------------------------------------- */

/* The class's topology key when it is required, else NULL. */
static const char *required_key(const struct policy *p, const json_t *job)
{
	const char *cls = str(json_object_get(json_object_get(job, "metadata"), "labels"),
			      policy_settings(p)->class_label);
	const struct policy_class *c = cls ? policy_class_find(p, cls) : NULL;

	return c && c->topology_mode == POLICY_TOPOLOGY_REQUIRED ? c->topology_key : NULL;
}

static void gang_decide(struct round *rd, struct gang *x, struct strmap *waiting_rows,
		   struct metrics_gang_waiting *rows, size_t *n_rows)
{
	const json_t *spec = json_object_get(x->job, "spec");
	struct gang_job j = {
		.parallelism = num(spec, "parallelism", 1),
		.completions = num(spec, "completions", -1),
		.succeeded = num(json_object_get(x->job, "status"), "succeeded", 0),
		.suspended = json_is_true(json_object_get(spec, "suspend")),
		.finished = job_finished(x->job),
		.kueue = str(json_object_get(json_object_get(x->job, "metadata"), "labels"),
			     KUEUE_QUEUE_LABEL) != NULL,
	};
	struct gang_pod *pods = arena_calloc(&rd->a, json_array_size(x->pods) + 1,
					     sizeof(*pods));
	struct usage_item it;
	const struct policy_flavor *f = NULL;
	struct gang_count c;
	struct pool_check pc;
	size_t i, np = 0;
	json_t *pod;
	bool waits = false;

	if (!pods)
		return;
	x->key = required_key(rd->p, x->job);
	json_array_foreach(x->pods, i, pod) {
		struct gang_pod *gp = &pods[np++];
		const char *node = str(json_object_get(pod, "spec"), "nodeName");
		char label[256];
		long at;

		pod_facts(pod, x->key, gp, &at);
		/* Bound without the selector (before gpugate released it): its
		 * node's domain. */
		if (x->key && gp->bound && !gp->terminal && !gp->domain && node &&
		    inventory_node_label(rd->g->cfg.inventory, node, x->key, label,
					 sizeof(label)))
			gp->domain = arena_strdup(&rd->a, label);
	}
	gang_count(&j, pods, np, &c);
	if (charge_item(rd->p, x->job, USAGE_JOBS, &rd->a, &it) == 0 && it.flavor)
		f = policy_flavor_find(rd->p, it.flavor);
	x->flavor = f ? f->name : NULL;
	if (!f || !it.tenant || !it.tenant[0] || !policy_tenant_find(rd->p, it.tenant))
		return; /* not this policy's (several gpugates, or a reload): left */
	x->step = gang_next(x->has_rec ? &x->rec : NULL, &j, &c, rd->now_ms,
			    policy_settings(rd->p)->gang_timeout_seconds);
	switch (x->step) {
	case GANG_CHECK: {
		int64_t per_pod = it.per_pod;
		const char *domain = NULL;
		char why[400];

		waits = true;
		if (!f || per_pod <= 0)
			break;
		if (f && strmap_get(&rd->busy, f->name, NULL)) {
			x->why = "waits for its gang: another gang of its flavor was just "
				 "released and is not bound yet";
			break;
		}
		inventory_fit_in(rd->g->cfg.inventory, rd->p, f, per_pod, c.gated + c.pending,
				 x->key, c.domain, &pc);
		if (!gang_release_ok(&c, &pc, x->key != NULL, &domain)) {
			if (pc.known) {
				snprintf(why, sizeof(why),
					 "waits for its gang: %lld of %lld pods fit now%s%s%s%s",
					 (long long)(pc.fit.fit_now < c.gated + c.pending
							     ? pc.fit.fit_now
							     : c.gated + c.pending),
					 (long long)(c.gated + c.pending),
					 pc.fit.domain ? ", best domain " : "",
					 pc.fit.domain ? x->key : "", pc.fit.domain ? "=" : "",
					 pc.fit.domain ? pc.fit.domain : "");
				x->why = arena_strdup(&rd->a, why);
			}
			break;
		}
		waits = false;
		x->release = true;
		x->domain = domain ? arena_strdup(&rd->a, domain) : NULL;
		if (!x->has_rec) {
			x->has_rec = true;
			snprintf(x->tenant, sizeof(x->tenant), "%s",
				 it.tenant && it.tenant[0] ? it.tenant : "-");
			x->rec = (struct gang_record){.tenant = x->tenant};
		}
		x->rec.released_ms = rd->now_ms;
		rd->dirty = true;
		strmap_put(&rd->busy, f->name, 1, NULL);
		break;
	}
	case GANG_WAIT:
		waits = true;
		x->why = c.foreign_gate
				 ? "waits for its gang: a pod of it carries another scheduling "
				   "gate, whose owner releases it first"
				 : "waits for its gang: not every pod of it exists yet";
		break;
	case GANG_STARTED:
		if (x->rec.released_ms > 0)
			metrics_gang_started(rd->g->cfg.metrics, "gates",
					     (double)(rd->now_ms - x->rec.released_ms) / 1000.0);
		x->rec_gone = true;
		rd->dirty = true;
		break;
	case GANG_REGATE:
		x->rec.regates++;
		x->rec.suspended = true;
		x->rec.released_ms = 0;
		x->regate = true;
		rd->dirty = true;
		metrics_gang_regated(rd->g->cfg.metrics, x->rec.tenant);
		break;
	case GANG_RESET:
		x->rec.released_ms = 0;
		rd->dirty = true;
		break;
	case GANG_SUSPEND:
		x->suspend = true;
		break;
	case GANG_RESUME:
		x->resume = true;
		break;
	case GANG_CLEAR:
		x->rec.suspended = false;
		rd->dirty = true;
		break;
	case GANG_DROP:
		x->rec_gone = true;
		rd->dirty = true;
		break;
	case GANG_NOTHING:
	case GANG_LEAVE:
		break;
	}
	/* Released and some pods not bound yet: its flavor is busy. */
	if (x->has_rec && !x->rec_gone && x->rec.released_ms > 0 && c.pending > 0 && f)
		strmap_put(&rd->busy, f->name, 1, NULL);
	if (waits && f && *n_rows < GANGS_MAX) {
		char key[200];
		size_t k;

		snprintf(key, sizeof(key), "%s/%s", it.tenant ? it.tenant : "-", f->name);
		if (!strmap_get(waiting_rows, key, &k)) {
			const char *kk = arena_strdup(&rd->a, key);

			k = (*n_rows)++;
			rows[k] = (struct metrics_gang_waiting){
				arena_strdup(&rd->a, it.tenant ? it.tenant : "-"), f->name, 0};
			if (kk)
				strmap_put(waiting_rows, kk, k, NULL);
		}
		rows[k].gangs++;
	}
}

/* ---- the round ---------------------------------------------------------- */

/* Whether the inventory shows a gated pod of a gang (route gates). */
static bool gated_pods_wait(struct gang_start *g)
{
	struct inventory_waiting *w = calloc(PEEK_MAX, sizeof(*w));
	struct arena a;
	bool any = false;
	size_t n;

	if (!w)
		return true;
	arena_init(&a);
	n = inventory_waiting_list(g->cfg.inventory, INT64_MAX, w, PEEK_MAX, &a);
	for (size_t i = 0; i < n && !any; i++)
		any = w[i].gang_gated;
	arena_release(&a);
	free(w);
	return any;
}

static int list(struct round *rd, const char *path, json_t **out)
{
	struct diag d;

	diag_init(&d);
	if (kube_get_json(rd->g->w.kube, path, LIST_TIMEOUT_MS, out, &d) != 0) {
		worker_failed(&rd->g->w, "gang pods or jobs not listed", diag_text(&d));
		return -1;
	}
	return 0;
}

static void round_once(struct gang_start *g)
{
	struct round rd = {.g = g};
	struct holder_ref *ref;
	struct strmap by_uid, rows_by;
	struct metrics_gang_waiting *rows = NULL;
	size_t n_rows = 0, i, left = 0;
	bool busy;
	json_t *o, *v;
	const char *key;

	rd.p = holder_acquire(g->cfg.policy, &ref);
	arena_init(&rd.a);
	strmap_init(&by_uid);
	strmap_init(&rows_by);
	strmap_init(&rd.busy);
	if (!rd.p)
		goto out;
	rd.now_ms = g->cfg.now_ms ? g->cfg.now_ms() : wall_ms();
	busy = gated_pods_wait(g);
	if (g->known_empty && !busy) {
		metrics_gangs_waiting(g->cfg.metrics, "gates", NULL, 0);
		goto out;
	}
	if (state_load(&rd) < 0)
		goto out;
	if (!busy && json_object_size(json_object_get(rd.state, "data")) == 0) {
		/* Nothing gated, nothing recorded: nothing to list. */
		g->known_empty = true;
		metrics_gangs_waiting(g->cfg.metrics, "gates", NULL, 0);
		goto out;
	}
	if (list(&rd, "/apis/batch/v1/jobs?labelSelector=gpugate.io%2Fgang", &rd.jobs) < 0 ||
	    list(&rd, "/api/v1/pods?labelSelector=gpugate.io%2Fgang", &rd.pods) < 0)
		goto out;
	rd.gangs = calloc(GANGS_MAX, sizeof(*rd.gangs));
	rows = calloc(GANGS_MAX, sizeof(*rows));
	rd.others = json_object();
	if (!rd.gangs || !rows || !rd.others)
		goto out;
	json_array_foreach(json_object_get(rd.jobs, "items"), i, o) {
		const json_t *meta = json_object_get(o, "metadata");
		const char *route = str(json_object_get(meta, "annotations"), STAMP_GANG_ROUTE);
		struct gang *x;
		const char *text;

		if (!route || strcmp(route, "gates") != 0 || !str(meta, "uid") ||
		    rd.n == GANGS_MAX)
			continue;
		x = &rd.gangs[rd.n];
		*x = (struct gang){.job = o, .uid = str(meta, "uid"),
				   .ns = str(meta, "namespace"), .name = str(meta, "name"),
				   .pods = json_array()};
		if (!x->ns || !x->name || !x->pods ||
		    strmap_put(&by_uid, x->uid, rd.n, NULL) != 0) {
			json_decref(x->pods);
			continue;
		}
		text = rec_text(&rd, x->uid);
		if (text) {
			if (gang_record_parse(text, &x->rec) == 0)
				x->has_rec = true;
			else
				rd.dirty = true; /* not a record: dropped */
		}
		rd.n++;
	}
	json_array_foreach(json_object_get(rd.pods, "items"), i, o) {
		const char *uid = job_of(o);
		size_t k;

		if (uid && strmap_get(&by_uid, uid, &k))
			json_array_append(rd.gangs[k].pods, o);
	}
	/* Records of Jobs the list does not show: gone (or another
	 * gpugate's, whose policy knows the tenant): kept only when this
	 * policy does not know the tenant. */
	json_object_foreach(json_object_get(rd.state, "data"), key, v) {
		struct gang_record r;

		if (strmap_get(&by_uid, key, NULL))
			continue;
		if (gang_record_parse(json_string_value(v), &r) == 0 &&
		    !policy_tenant_find(rd.p, r.tenant) && strcmp(r.tenant, "-") != 0)
			json_object_set(rd.others, key, v);
		else
			rd.dirty = true;
	}
	for (i = 0; i < rd.n; i++)
		gang_decide(&rd, &rd.gangs[i], &rows_by, rows, &n_rows);
	/* Recorded first, done after: a restart finds r and s. */
	if (state_save(&rd, &left) < 0)
		goto out;
	worker_recovered(&g->w);
	g->known_empty = left == 0;
	for (i = 0; i < rd.n && !worker_stopping(&g->w); i++)
		act(&rd, &rd.gangs[i]);
	metrics_gangs_waiting(g->cfg.metrics, "gates", rows, n_rows);
	said_prune(g);
out:
	for (i = 0; rd.gangs && i < rd.n; i++)
		json_decref(rd.gangs[i].pods);
	free(rd.gangs);
	free(rows);
	json_decref(rd.others);
	json_decref(rd.state);
	json_decref(rd.jobs);
	json_decref(rd.pods);
	strmap_release(&by_uid);
	strmap_release(&rows_by);
	strmap_release(&rd.busy);
	arena_release(&rd.a);
	holder_release(ref);
}

/* While leading: a round, then the next after interval_ms. */
static unsigned turn(void *arg)
{
	struct gang_start *g = arg;

	round_once(g);
	return g->cfg.interval_ms;
}

/* Another replica leads: what was said is its to say. */
static void idle(void *arg)
{
	struct gang_start *g = arg;

	g->known_empty = false;
}

int gang_start_start(const struct gang_start_config *cfg, struct gang_start **out,
		     struct diag *d)
{
	struct gang_start *g = calloc(1, sizeof(*g));

	if (!g) {
		diag_addf(d, "out of memory");
		return -1;
	}
	g->cfg = *cfg;
	if (!g->cfg.interval_ms)
		g->cfg.interval_ms = 2000;
	snprintf(g->identity, sizeof(g->identity), "%s", cfg->identity ? cfg->identity : "");
	snprintf(g->namespace, sizeof(g->namespace), "%s",
		 cfg->namespace && cfg->namespace[0] ? cfg->namespace : "gpugate");
	strmap_init(&g->said);
	if (worker_start(&g->w,
			 &(struct worker_config){.name = "gang-start", .kube = cfg->kube,
						 .turn = turn, .idle = idle, .arg = g,
						 .first_ms = g->cfg.interval_ms,
						 .idle_ms = g->cfg.interval_ms,
						 .leading = cfg->leading,
						 .leading_ctx = cfg->leading_ctx},
			 d) < 0) {
		strmap_release(&g->said);
		free(g);
		return -1;
	}
	if (cfg->metrics)
		metrics_gangs_on(cfg->metrics);
	*out = g;
	return 0;
}

void gang_start_stop(struct gang_start *g)
{
	if (!g)
		return;
	worker_stop(&g->w);
	strmap_release_freeing(&g->said);
	free(g);
}
