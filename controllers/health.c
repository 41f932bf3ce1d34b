/*
 * The health controller's round (controllers/health.h): the reading and
 * the writing; the decisions are policy/health.c (pure).
 */
#include "controllers/health.h"

#include "base/diag.h"
#include "base/log.h"
#include "base/strmap.h"
#include "base/text.h"
#include "base/wallclock.h"
#include "kube/client.h"
#include "policy/health.h"
#include "policy/policy.h"
#include "policy/pool.h"
#include "usage/inventory.h"
#include "webhook/holder.h"
#include "controllers/events.h"
#include "controllers/worker.h"
#include "metrics/metrics.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WRITE_TIMEOUT_MS 5000
/* The signal as the record keeps it, at most (the annotation stays small
 * and the Event messages readable). */
#define WHY_MAX 200
/* Refusals remembered (to log each once): beyond, all are logged. */
#define SAID_MAX 4096

struct health_controller {
	struct health_controller_config cfg;
	char identity[256];
	struct worker w;
	/* "node\tcause" of each refusal logged: said once; the thread's own. */
	struct strmap said;
};

/* One node to act on this round, copied out under the inventory's lock. */
struct item {
	char name[254];
	char flavor[64];          /* "" : no node of any flavor */
	enum health_node_step step;
	/* What the inventory showed, to check the Node read is no newer: the
	 * record's hash (any length: a hand-written one too) and the taint's
	 * value (63 bytes at most, by the API's validation). */
	bool has_record_text, has_taint;
	size_t record_hash;
	char taint_value[64];
	/* The record, parsed (has_record), its why in rec_why. */
	bool has_record;
	struct health_record rec;
	char rec_why[WHY_MAX + 1];
	char why[160];            /* the pool's: the signal now */
	char wait[200];           /* validate: what it waits for ("" none) */
};

struct round {
	struct health_controller *h;
	const struct policy *p;
	int64_t now_ms;
	struct item *items;
	size_t n, cap;
	bool oom;
};

static const char *str(const json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

/* ---- pure parts ---------------------------------------------------------- */

void health_why_clean(const char *why, char *out, size_t size)
{
	const char *src = why && why[0] ? why : "unknown";

	if (!size)
		return;
	snprintf(out, size, "%s", src);
	text_clean(out); /* control characters (a newline) become spaces */
	if (strlen(src) >= size && strlen(out) > 4)
		text_clip(out, strlen(out) - 1); /* cut: say so */
}

json_t *health_patch_build(const json_t *node, const char *taint_value,
			   const char *record, bool drop_record)
{
	const json_t *meta = json_object_get(node, "metadata");
	const char *rv = str(meta, "resourceVersion");
	json_t *patch, *taints, *t;
	size_t i;

	if (!rv || !rv[0])
		return NULL;
	taints = json_array();
	patch = json_pack("{s:{s:s}, s:{}}", "metadata", "resourceVersion", rv, "spec");
	if (!taints || !patch)
		goto oom;
	json_array_foreach(json_object_get(json_object_get(node, "spec"), "taints"), i, t) {
		const char *key = str(t, "key");

		if (key && strcmp(key, HEALTH_TAINT) == 0)
			continue;
		if (json_array_append(taints, (json_t *)t) < 0)
			goto oom;
	}
	if (taint_value &&
	    json_array_append_new(taints, json_pack("{s:s, s:s, s:s}", "key", HEALTH_TAINT,
						    "value", taint_value, "effect",
						    HEALTH_TAINT_EFFECT)) < 0)
		goto oom;
	if (json_object_set_new(json_object_get(patch, "spec"), "taints",
				json_array_size(taints) ? json_incref(taints) : json_null()) < 0)
		goto oom;
	if (record || drop_record) {
		json_t *ann = json_object();

		if (!ann || json_object_set_new(json_object_get(patch, "metadata"),
						"annotations", ann) < 0 ||
		    json_object_set_new(ann, HEALTH_RECORD,
					record ? json_string(record) : json_null()) < 0)
			goto oom;
	}
	json_decref(taints);
	return patch;
oom:
	json_decref(taints);
	json_decref(patch);
	return NULL;
}

/* ---- the nodes, under the inventory's lock ------------------------------ */

static void copy(char *dst, size_t size, const char *src)
{
	snprintf(dst, size, "%s", src ? src : "");
}

static void collect(void *ctx, const struct pool_node *n, const struct policy_flavor *f,
		    enum pool_exclusion e, const char *why)
{
	struct round *rd = ctx;
	bool signal = f && e == POOL_HEALTH;
	struct health_marks m;
	enum health_node_step step;
	struct item *x;

	if (!signal && !health_marked(n))
		return;
	health_marks_read(n, &m);
	step = f ? health_node_next(policy_health(rd->p), n, &m, signal, rd->now_ms)
		 : HEALTH_RETURN;
	if (step == HEALTH_KEEP)
		return;
	if (rd->n == rd->cap) {
		size_t cap = rd->cap ? rd->cap * 2 : 16;
		struct item *v = realloc(rd->items, cap * sizeof(*v));

		if (!v) {
			rd->oom = true;
			return;
		}
		rd->items = v;
		rd->cap = cap;
	}
	x = &rd->items[rd->n++];
	memset(x, 0, sizeof(*x));
	copy(x->name, sizeof(x->name), n->name);
	copy(x->flavor, sizeof(x->flavor), f ? f->name : NULL);
	x->step = step;
	x->has_record_text = n->health_record != NULL;
	x->record_hash = n->health_record ? strmap_hash(n->health_record) : 0;
	x->has_taint = m.taint_value != NULL;
	copy(x->taint_value, sizeof(x->taint_value), m.taint_value);
	if (m.has_record) {
		x->has_record = true;
		x->rec = m.record;
		health_why_clean(m.record.why, x->rec_why, sizeof(x->rec_why));
		x->rec.why = x->rec_why;
	}
	copy(x->why, sizeof(x->why), why);
	/* What a validating node will wait for, from the moment it clears. */
	if (step == HEALTH_VALIDATE)
		health_return(policy_health(rd->p), n, rd->now_ms, rd->now_ms, x->wait,
			      sizeof(x->wait));
}

/* ---- acting --------------------------------------------------------------- */

static const char *step_name(enum health_node_step s)
{
	switch (s) {
	case HEALTH_KEEP: return "keep";
	case HEALTH_MARK_OUT: return "mark_out";
	case HEALTH_VALIDATE: return "validate";
	case HEALTH_RETURN: return "return";
	case HEALTH_FIX_TAINT: return "fix_taint";
	}
	return "?";
}

static enum metrics_health_step metric_of(enum health_node_step s)
{
	switch (s) {
	case HEALTH_MARK_OUT: return METRICS_HEALTH_MARK_OUT;
	case HEALTH_VALIDATE: return METRICS_HEALTH_VALIDATE;
	case HEALTH_RETURN: return METRICS_HEALTH_RETURN;
	default: return METRICS_HEALTH_FIX_TAINT;
	}
}

/* Whether the Node read still carries the marks the inventory showed: if
 * not, the watch is behind (or another writer was quicker) and the step
 * was decided on old facts. */
static bool same_marks(const struct item *x, const json_t *node)
{
	const char *rec = str(json_object_get(json_object_get(node, "metadata"),
					      "annotations"),
			      HEALTH_RECORD);
	const char *taint = NULL;
	const json_t *t;
	size_t i;

	json_array_foreach(json_object_get(json_object_get(node, "spec"), "taints"), i, t)
		if (str(t, "key") && strcmp(str(t, "key"), HEALTH_TAINT) == 0) {
			taint = str(t, "value") ? str(t, "value") : "";
			break;
		}
	if ((rec != NULL) != x->has_record_text || (rec && strmap_hash(rec) != x->record_hash))
		return false;
	return (taint != NULL) == x->has_taint && (!taint || strcmp(taint, x->taint_value) == 0);
}

/* A refusal of node x's write: logged once per node and cause. */
static void refused(struct health_controller *h, const struct item *x, int status,
		    const char *text)
{
	char key[300], q[600];
	bool said;

	snprintf(key, sizeof(key), "%s\t%d", x->name, status);
	said = strmap_get(&h->said, key, NULL);
	metrics_health_step(h->cfg.metrics, METRICS_HEALTH_FAILED);
	if (said)
		return;
	if (h->said.len < SAID_MAX) {
		char *k = strdup(key); /* the map borrows its keys */

		if (k && strmap_put(&h->said, k, (size_t)(uintptr_t)k, NULL) != 0)
			free(k);
	}
	log_event(LOG_WARN,
		  "msg=\"node health marks not written; the pool excludes the node anyway\" "
		  "node=%s step=%s status=%d error=\"%s\"%s",
		  x->name, step_name(x->step), status, log_quote(text, q, sizeof(q)),
		  status == 403 ? " hint=\"gpugate's ClusterRole needs nodes patch\"" : "");
}

/* Forgets the refusals said of node x (its write went through). */
static void accepted(struct health_controller *h, const struct item *x)
{
	size_t pos = 0, v;
	const char *key;
	size_t len = strlen(x->name);
	char *gone[8]; /* a node has a cause or two */
	size_t n = 0;

	while (n < 8 && strmap_next(&h->said, &pos, &key, &v))
		if (strncmp(key, x->name, len) == 0 && key[len] == '\t')
			gone[n++] = (char *)(uintptr_t)v;
	for (size_t i = 0; i < n; i++) {
		strmap_del(&h->said, gone[i], NULL);
		free(gone[i]);
	}
}

static void event(struct round *rd, const json_t *node, const struct item *x,
		  const char *reason, const char *type, const char *msg)
{
	const json_t *meta = json_object_get(node, "metadata");
	struct events_object o = {"v1", "Node", NULL, x->name, str(meta, "uid")};

	events_write(rd->h->w.kube, rd->h->identity, &o, reason, type, msg,
		     rd->now_ms / 1000);
}

/* The step's marks: the record text (NULL: removed or untouched, by
 * *drop) and the taint's value (NULL: removed). */
static const char *marks_of(const struct round *rd, const struct item *x, char *rec,
			    size_t size, bool *drop, const char **taint)
{
	struct health_record r = x->rec;
	char why[WHY_MAX + 1];

	*drop = false;
	switch (x->step) {
	case HEALTH_MARK_OUT:
		health_why_clean(x->why, why, sizeof(why));
		if (x->has_record && x->rec.cleared_ms != 0)
			r = (struct health_record){.out_ms = x->rec.out_ms, .cleared_ms = 0,
						   .times = x->rec.times + 1, .why = why};
		else
			r = (struct health_record){.out_ms = rd->now_ms, .cleared_ms = 0,
						   .times = 1, .why = why};
		*taint = HEALTH_TAINT_OUT;
		break;
	case HEALTH_VALIDATE:
		/* A clock behind the record's: cleared no earlier than out. */
		r.cleared_ms = rd->now_ms > r.out_ms ? rd->now_ms : r.out_ms;
		*taint = HEALTH_TAINT_VALIDATING;
		break;
	case HEALTH_FIX_TAINT:
		*taint = x->rec.cleared_ms ? HEALTH_TAINT_VALIDATING : HEALTH_TAINT_OUT;
		return NULL; /* the record stays as it is */
	default:
		*taint = NULL;
		*drop = true;
		return NULL;
	}
	if (health_record_format(&r, rec, size) >= size)
		return NULL;
	return rec;
}

/* The Event of step x, written once the patch went through. */
static void tell(struct round *rd, const json_t *node, const struct item *x,
		 const char *rec_text)
{
	char msg[1024], dur[32], q[400];
	struct health_record r;

	switch (x->step) {
	case HEALTH_MARK_OUT:
		if (health_record_parse(rec_text, &r) < 0)
			r.times = 1;
		snprintf(msg, sizeof(msg),
			 "out of the GPU pool for flavor %s: %s; taint %s=%s:%s keeps new work "
			 "off until it is validated",
			 x->flavor, x->why, HEALTH_TAINT, HEALTH_TAINT_OUT, HEALTH_TAINT_EFFECT);
		event(rd, node, x, "GPUNodeUnhealthy", "Warning", msg);
		log_event(LOG_WARN, "msg=\"node out of the pool for health\" node=%s flavor=%s "
				    "why=\"%s\" times=%lld",
			  x->name, x->flavor, log_quote(x->why, q, sizeof(q)), (long long)r.times);
		break;
	case HEALTH_VALIDATE:
		snprintf(msg, sizeof(msg), "health signal gone (was %s); validating: %s%s",
			 x->rec_why, x->wait[0] ? "waits for " : "back on the next round",
			 x->wait);
		event(rd, node, x, "GPUNodeValidating", "Normal", msg);
		log_event(LOG_INFO, "msg=\"node validating\" node=%s flavor=%s waits=\"%s\"",
			  x->name, x->flavor, log_quote(x->wait, q, sizeof(q)));
		break;
	case HEALTH_RETURN:
		if (!x->flavor[0])
			snprintf(msg, sizeof(msg),
				 "no longer a node of any GPU flavor: gpugate's taint and record "
				 "removed%s%s%s",
				 x->has_record ? " (was " : "", x->has_record ? x->rec_why : "",
				 x->has_record ? ")" : "");
		else if (!x->has_record)
			snprintf(msg, sizeof(msg),
				 "back in the GPU pool for flavor %s (gpugate's taint without its "
				 "record: taken as validated)",
				 x->flavor);
		else {
			text_duration((rd->now_ms - x->rec.out_ms) / 1000, dur, sizeof(dur));
			snprintf(msg, sizeof(msg),
				 "back in the GPU pool for flavor %s after %s out (%s)", x->flavor,
				 dur, x->rec_why);
		}
		event(rd, node, x, "GPUNodeReturned", "Normal", msg);
		log_event(LOG_INFO, "msg=\"node back in the pool\" node=%s flavor=%s",
			  x->name, x->flavor[0] ? x->flavor : "-");
		break;
	default:
		log_event(LOG_INFO, "msg=\"gpugate's node taint put back\" node=%s value=%s",
			  x->name, x->rec.cleared_ms ? HEALTH_TAINT_VALIDATING : HEALTH_TAINT_OUT);
		break;
	}
}

static void act(struct round *rd, const struct item *x)
{
	struct health_controller *h = rd->h;
	char path[400], rec[WHY_MAX + 96];
	const char *rec_text, *taint;
	json_t *node = NULL, *patch = NULL;
	struct diag d;
	bool drop;
	int rc;

	snprintf(path, sizeof(path), "/api/v1/nodes/%s", x->name);
	diag_init(&d);
	rc = kube_get_json(h->w.kube, path, WRITE_TIMEOUT_MS, &node, &d);
	if (rc == 404)
		return;
	if (rc != 0) {
		refused(h, x, rc, diag_text(&d));
		return;
	}
	if (!same_marks(x, node)) {
		log_event(LOG_DEBUG, "msg=\"node marks changed since the inventory's view; "
				     "next round\" node=%s",
			  x->name);
		goto out;
	}
	rec_text = marks_of(rd, x, rec, sizeof(rec), &drop, &taint);
	patch = health_patch_build(node, taint, rec_text, drop);
	if (!patch)
		goto out;
	diag_init(&d);
	rc = kube_patch(h->w.kube, path, KUBE_PATCH_MERGE, patch, WRITE_TIMEOUT_MS, NULL, &d);
	if (rc == 409) {
		/* Another writer between the GET and the PATCH: read again next
		 * round, decide again. */
		log_event(LOG_DEBUG, "msg=\"node changed under the health write; next round\" "
				     "node=%s",
			  x->name);
		goto out;
	}
	if (rc == 404)
		goto out;
	if (rc != 0) {
		refused(h, x, rc, diag_text(&d));
		goto out;
	}
	accepted(h, x);
	metrics_health_step(h->cfg.metrics, metric_of(x->step));
	tell(rd, node, x, rec_text);
out:
	json_decref(patch);
	json_decref(node);
}

static void round_once(struct health_controller *h)
{
	struct round rd = {.h = h};
	struct holder_ref *ref;

	if (!inventory_synced(h->cfg.inventory))
		return;
	rd.p = holder_acquire(h->cfg.policy, &ref);
	if (!rd.p)
		goto out;
	rd.now_ms = h->cfg.now_ms ? h->cfg.now_ms() : wall_ms();
	inventory_each_node(h->cfg.inventory, rd.p, collect, &rd);
	if (rd.oom)
		log_event(LOG_WARN, "msg=\"health round: out of memory; some nodes next "
				    "round\"");
	for (size_t i = 0; i < rd.n && !worker_stopping(&h->w); i++)
		act(&rd, &rd.items[i]);
out:
	free(rd.items);
	holder_release(ref);
}

/* While leading: a round, then the next after interval_ms. */
static unsigned turn(void *arg)
{
	struct health_controller *h = arg;

	round_once(h);
	return h->cfg.interval_ms;
}

int health_controller_start(const struct health_controller_config *cfg,
			    struct health_controller **out, struct diag *d)
{
	struct health_controller *h = calloc(1, sizeof(*h));

	if (!h) {
		diag_addf(d, "out of memory");
		return -1;
	}
	h->cfg = *cfg;
	if (!h->cfg.interval_ms)
		h->cfg.interval_ms = 2000;
	snprintf(h->identity, sizeof(h->identity), "%s", cfg->identity ? cfg->identity : "");
	strmap_init(&h->said);
	if (worker_start(&h->w,
			 &(struct worker_config){.name = "health", .kube = cfg->kube,
						 .turn = turn, .arg = h,
						 .first_ms = h->cfg.interval_ms,
						 .idle_ms = h->cfg.interval_ms,
						 .leading = cfg->leading,
						 .leading_ctx = cfg->leading_ctx},
			 d) < 0) {
		strmap_release(&h->said);
		free(h);
		return -1;
	}
	if (cfg->metrics)
		metrics_health_on(cfg->metrics);
	*out = h;
	return 0;
}

void health_controller_stop(struct health_controller *h)
{
	if (!h)
		return;
	worker_stop(&h->w);
	strmap_release_freeing(&h->said);
	free(h);
}
