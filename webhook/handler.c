#include "webhook/handler.h"

#include "base/diag.h"
#include "base/log.h"
#include "base/text.h"
#include "codec/jget.h"
#include "codec/jsonmem.h"
#include "http/server.h"
#include "policy/kinds.h"
#include "policy/pool.h"
#include "usage/inventory.h"
#include "usage/priorities.h"
#include "usage/pvcs.h"
#include "usage/template-board.h"
#include "usage/usage.h"
#include "webhook/apply.h"
#include "webhook/facts.h"
#include "webhook/holder.h"
#include "metrics/metrics.h"
#include "webhook/patch.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A patch is a few times the object at most, and the body is capped at
 * 6 MiB; this bound only stops a runaway. */
#define PATCH_MAX ((size_t)64 << 20)

void evaluation_init(struct evaluation *ev)
{
	memset(ev, 0, sizeof(*ev));
	arena_init(&ev->arena);
	strbuf_init(&ev->patch, PATCH_MAX);
}

void evaluation_release(struct evaluation *ev)
{
	json_decref(ev->mutated);
	json_decref(ev->parent);
	ev->parent = NULL;
	strbuf_release(&ev->patch);
	arena_release(&ev->arena);
	ev->mutated = NULL;
	ev->patch_ops = 0;
}

static void bad_request(struct evaluation *ev, const char *fmt, const char *a,
			const char *b)
{
	ev->bad_request = true;
	snprintf(ev->error, sizeof(ev->error), fmt, a, b);
}

/* request.object must be what request.kind says. */
static bool object_matches_kind(const struct review *rv, const json_t *obj)
{
	const char *kind = json_string_value(jget(obj, "kind"));
	const char *api = json_string_value(jget(obj, "apiVersion"));

	return (!kind || strcmp(kind, rv->kind_name) == 0) &&
	       (!api || strcmp(api, rv->def->api_version) == 0);
}

static int extract(const struct review *rv, const json_t *obj,
		   struct evaluation *ev)
{
	struct diag d;
	char first[400];

	ev->wl.kind = rv->kind;
	ev->wl.def = rv->def;
	ev->wl.op = rv->op;
	ev->wl.dry_run = rv->dry_run;
	ev->wl.request_uid = rv->uid;
	ev->wl.user = rv->user;
	ev->wl.namespace = rv->namespace;
	ev->wl.name = rv->name;
	ev->wl.uid = "";
	if (rv->kind == WL_OTHER || !obj)
		return 0;
	if (!object_matches_kind(rv, obj)) {
		bad_request(ev, "request.object is not a %s (request.kind says %s)",
			    rv->kind_name, rv->kind_name);
		return 0;
	}
	diag_init(&d);
	if (facts_extract(obj, &ev->wl, &ev->arena, &d) < 0) {
		diag_first(&d, first, sizeof(first));
		bad_request(ev, "malformed %s: %s", rv->kind_name, first);
	}
	return 0;
}

static int mutate(const struct policy *p, const struct review *rv,
		  struct evaluation *ev)
{
	struct diag d;

	ev->mutated = apply_copy(rv->object, &ev->wl);
	if (!ev->mutated)
		return -1;
	diag_init(&d);
	if (apply_plan(ev->mutated, &ev->wl, &ev->dec.plan, p, &d) < 0) {
		char first[400];

		diag_first(&d, first, sizeof(first));
		bad_request(ev, "cannot mutate the %s: %s", rv->kind_name, first);
		return 0;
	}
	ev->patch_ops = patch_diff_write(rv->object, ev->mutated, &ev->patch);
	return ev->patch_ops < 0 ? -1 : 0;
}

/*
 * kubectl debug: an UPDATE of subresource ephemeralcontainers of a Pod,
 * whose object is the whole Pod with its new spec.ephemeralContainers.
 * Judged at /validate only (the only webhook it is registered for).
 */
static bool is_ephemeral_update(const struct review *rv,
				enum handler_endpoint ep)
{
	return ep == HANDLER_VALIDATE && rv->kind == WL_POD &&
	       rv->op == WL_UPDATE && rv->object &&
	       strcmp(rv->sub_resource, "ephemeralcontainers") == 0;
}

/*
 * pods/status and jobs/status: a status writer can change labels too, so
 * the stamps are held there (decide_status()).  Judged at /validate only,
 * with the old object.
 */
static bool is_status_update(const struct review *rv, enum handler_endpoint ep)
{
	return ep == HANDLER_VALIDATE && (rv->kind == WL_POD || rv->kind == WL_JOB) &&
	       rv->op == WL_UPDATE && rv->object && rv->old_object &&
	       strcmp(rv->sub_resource, "status") == 0;
}

/* The inventory as the decision's pool source (policy/decide.h). */
struct inventory_pool {
	struct inventory *inv;
	const struct policy *policy;
};

static void inventory_pool_fit(void *ctx, const struct policy_flavor *f, int64_t per_pod,
			       int64_t pods, const char *topology_key,
			       struct pool_check *out)
{
	const struct inventory_pool *ip = ctx;

	inventory_fit(ip->inv, ip->policy, f, per_pod, pods, topology_key, out);
}

/* The inventory as the decision's node source (spec.nodeName). */
static const struct policy_flavor *inventory_node(void *ctx, const char *node)
{
	const struct inventory_pool *ip = ctx;

	return inventory_node_flavor(ip->inv, ip->policy, node);
}

/*
 * kubectl scale, and a HorizontalPodAutoscaler: an UPDATE of subresource
 * scale of a Deployment, StatefulSet or ReplicaSet.  Its object is an
 * autoscaling/v1 Scale (spec.replicas, no pod template), so the parent is
 * read from the API (handler_admit) and judged as a template with the new
 * replicas.  The kind of that parent, or NULL for any other request.
 */
static const char *scale_parent_kind(const struct review *rv, enum handler_endpoint ep)
{
	const struct kind_def *k;

	if (ep != HANDLER_VALIDATE || rv->op != WL_UPDATE || !rv->object ||
	    strcmp(rv->sub_resource, "scale") != 0)
		return NULL;
	k = kinds_scaled(rv->resource_group, rv->resource);
	return k ? k->kind : NULL;
}

/* A Scale's spec.replicas (absent: 0, the API omits it); -1 when it is not
 * a whole number. */
static int64_t scale_replicas(const json_t *scale)
{
	const json_t *n = jget(jget(scale, "spec"), "replicas");

	if (!n || json_is_null(n))
		return 0;
	return json_is_integer(n) && json_integer_value(n) >= 0 ? json_integer_value(n)
								 : -1;
}

/* Only a raise is judged: fewer pods never ask for more. */
static bool scale_raises(const struct review *rv)
{
	int64_t now = scale_replicas(rv->object);

	return now != 0 && now > (rv->old_object ? scale_replicas(rv->old_object) : 0);
}

/* A scale that cannot be judged (its parent could not be read, or does not
 * read): admitted, with a warning that says why. */
static void scale_unjudged(const struct review *rv, const char *kind, int64_t now,
			   const char *why, const struct decide_input *in,
			   struct evaluation *ev)
{
	char note[800];

	ev->wl.kind = WL_OTHER;
	decide_prepare(in, &ev->dec); /* allowed, nothing said */
	snprintf(note, sizeof(note),
		 "gpugate: the scale of %s \"%.63s\" to %" PRId64 " was not judged: %s; "
		 "its pods still meet the quota one by one",
		 kind, rv->name, now, why);
	decide_note(&ev->dec, note);
}

/* ev->wl from object, a template of kind `kind` scaled to `now` replicas;
 * false with why when it does not read. */
static bool scale_facts(const json_t *object, const struct review *rv, const char *kind,
			int64_t now, struct evaluation *ev, char *why, size_t size)
{
	struct diag d;
	char first[400];

	ev->wl = (struct workload){.kind = WL_TEMPLATE, .def = kinds_template(kind),
				   .op = WL_UPDATE, .namespace = rv->namespace,
				   .name = rv->name, .uid = ""};
	diag_init(&d);
	if (facts_extract(object, &ev->wl, &ev->arena, &d) < 0) {
		diag_first(&d, first, sizeof(first));
		snprintf(why, size, "the %s does not read: %.200s", kind, first);
		return false;
	}
	ev->wl.replicas = now;
	return true;
}

/*
 * A scale of a parent of kind `kind`: the parent's pod template (ev->parent,
 * as the API had it) with the Scale's replicas, judged as any change of a
 * template (decide_prepare: class, rules, the quota ceiling, the pool), as
 * /mutate would leave it: the API holds it mapped, unless it was written
 * while gpugate was down (mapping is idempotent).  Nothing is charged and
 * nothing patched.  Only a malformed Scale is refused for what it is; a
 * parent that cannot be read or judged lets the scale through with a
 * warning, as the webhook's failurePolicy Ignore would.
 */
static int judge_scale(const struct review *rv, const char *kind,
		       const struct decide_input *in, struct evaluation *ev)
{
	int64_t now = scale_replicas(rv->object);
	const char *uid = json_string_value(jget(jget(rv->object, "metadata"), "uid"));
	const char *puid = json_string_value(jget(jget(ev->parent, "metadata"), "uid"));
	const char *pkind = json_string_value(jget(ev->parent, "kind"));
	struct decide_input at_mutate = *in;
	char why[600];
	struct diag d;

	ev->wl.kind = WL_OTHER;
	ev->wl.op = rv->op;
	ev->wl.namespace = rv->namespace;
	ev->wl.name = rv->name;
	ev->wl.uid = "";
	if (now < 0) {
		bad_request(ev, "malformed Scale: spec.replicas is not a whole number%s%s",
			    "", "");
		return 0;
	}
	if (!scale_raises(rv) || (!ev->parent && !ev->parent_error[0])) {
		decide_prepare(in, &ev->dec); /* allowed, nothing said */
		return 0;
	}
	if (!ev->parent) {
		scale_unjudged(rv, kind, now, ev->parent_error, in, ev);
		return 0;
	}
	if (!pkind || strcmp(pkind, kind) != 0 || (uid && puid && strcmp(uid, puid) != 0)) {
		snprintf(why, sizeof(why),
			 "the API returned another object (kind %.40s, uid %.40s)",
			 pkind ? pkind : "none", puid ? puid : "none");
		scale_unjudged(rv, kind, now, why, in, ev);
		return 0;
	}
	if (!scale_facts(ev->parent, rv, kind, now, ev, why, sizeof(why))) {
		scale_unjudged(rv, kind, now, why, in, ev);
		return 0;
	}
	at_mutate.phase = DECIDE_MUTATE;
	decide_prepare(&at_mutate, &ev->dec);
	if (!ev->dec.allowed || !ev->dec.plan.active)
		return 0;
	ev->mutated = apply_copy(ev->parent, &ev->wl);
	if (!ev->mutated)
		return -1;
	diag_init(&d);
	if (apply_plan(ev->mutated, &ev->wl, &ev->dec.plan, in->policy, &d) < 0) {
		diag_first(&d, why, sizeof(why));
		scale_unjudged(rv, kind, now, why, in, ev);
		return 0;
	}
	if (!scale_facts(ev->mutated, rv, kind, now, ev, why, sizeof(why))) {
		scale_unjudged(rv, kind, now, why, in, ev);
		return 0;
	}
	decide_prepare(in, &ev->dec);
	return 0;
}

/* The keeper's board as the decision reads it. */
static enum decide_templates_served templates_served(void *ctx)
{
	switch (template_board_served(ctx)) {
	case TEMPLATES_SERVED:
		return DECIDE_TEMPLATES_SERVED;
	case TEMPLATES_NOT_SERVED:
		return DECIDE_TEMPLATES_NOT_SERVED;
	default:
		return DECIDE_TEMPLATES_UNKNOWN;
	}
}

static bool templates_taken(void *ctx, const char *ns, const char *name)
{
	return template_board_taken(ctx, ns, name);
}

int handler_evaluate(const struct policy *p, const struct review *rv,
		     enum handler_endpoint ep, struct usage_store *u,
		     struct inventory *inv, struct evaluation *ev)
{
	const json_t *obj = rv->object;
	struct inventory_pool ipool = {.inv = inv, .policy = p};
	struct decide_pool_source pool = {.fit = inventory_pool_fit, .ctx = &ipool};
	struct decide_node_source nodes = {.flavor_of = inventory_node, .ctx = &ipool};
	struct decide_template_source templates = {
		.served = templates_served, .taken = templates_taken, .ctx = ev->templates};
	struct decide_input in = {
		.policy = p,
		.wl = &ev->wl,
		.phase = ep == HANDLER_MUTATE ? DECIDE_MUTATE : DECIDE_VALIDATE,
		.priorities = ev->priorities,
		.pvcs = ev->pvcs,
		.pool = inv ? &pool : NULL,
		.nodes = inv ? &nodes : NULL,
		.gang_served = ev->gang_served,
		.self_user = ev->self_user,
		.self_namespace = ev->self_namespace,
		.templates = ev->templates ? &templates : NULL,
	};
	bool debug = is_ephemeral_update(rv, ep);
	bool status = is_status_update(rv, ep);
	const char *scale_of = scale_parent_kind(rv, ep);

	/* Subresources (binding, status) are not creations of a workload;
	 * the one that adds ephemeral containers and status writes are
	 * judged (below). */
	if (rv->sub_resource[0] && !debug && !status)
		obj = NULL;
	if (rv->op == WL_DELETE)
		obj = rv->old_object;
	if (rv->kind != WL_OTHER && rv->op == WL_CREATE && !obj &&
	    !rv->sub_resource[0]) {
		bad_request(ev, "CREATE of a %s without request.object%s",
			    rv->kind_name, "");
		return 0;
	}
	if (scale_of)
		return judge_scale(rv, scale_of, &in, ev);
	if (extract(rv, obj, ev) < 0)
		return -1;
	if (debug) {
		if (!ev->bad_request)
			decide_ephemeral(&in, &ev->dec);
		return 0;
	}
	if (!ev->bad_request && rv->op == WL_UPDATE && rv->old_object &&
	    rv->kind != WL_OTHER) {
		struct diag d;

		ev->old = ev->wl;
		ev->old.pod = (struct wl_pod){0};
		diag_init(&d);
		if (facts_extract(rv->old_object, &ev->old, &ev->arena, &d) < 0) {
			char first[400];

			diag_first(&d, first, sizeof(first));
			bad_request(ev, "malformed old %s: %s", rv->kind_name, first);
		}
		in.old = &ev->old;
	}
	if (ev->bad_request)
		return 0;
	if (status) {
		decide_status(&in, &ev->dec);
		return 0;
	}
	if (rv->sub_resource[0])
		ev->wl.kind = WL_OTHER;

	if (rv->op == WL_DELETE) {
		decide_prepare(&in, &ev->dec); /* allowed: deletes are never denied */
		if (ep == HANDLER_VALIDATE && !rv->dry_run && obj)
			usage_release(u, p, &ev->wl);
		return 0;
	}
	decide_prepare(&in, &ev->dec);
	if (ev->dec.claim.needed) {
		const struct quota_claim *c = &ev->dec.claim;
		struct quota_result qr;
		struct pool_check pc;
		bool reserve;

		/* The pool through in.pool (the inventory), as for templates. */
		decide_pool_check(&in, &ev->dec, &pc);
		reserve = decide_holds_units(&in, &ev->dec, &pc, rv->dry_run);
		memset(&qr, 0, sizeof(qr));
		if (ev->quota_gate &&
		    !ev->quota_gate->open(ev->quota_gate->ctx, qr.reason, sizeof(qr.reason)))
			qr.position = QUOTA_UNAVAILABLE;
		else
			usage_decide(u, p, &ev->wl, c, reserve,
				     ev->dec.mode != POLICY_MODE_ENFORCE || c->kueue_quota,
				     &qr);
		decide_quota_pool(&in, &ev->dec, &qr, &pc);
	}
	if (ep == HANDLER_MUTATE && ev->dec.allowed && ev->dec.plan.active &&
	    rv->object)
		return mutate(p, rv, ev);
	return 0;
}

/* ---- HTTP ------------------------------------------------------------- */

static double now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void reply_text(struct handler_reply *out, int status, const char *text)
{
	size_t n = strlen(text);

	out->status = status;
	out->content_type = "text/plain; charset=utf-8";
	out->body = malloc(n + 2);
	if (!out->body) {
		out->len = 0;
		return;
	}
	memcpy(out->body, text, n);
	out->body[n] = '\n';
	out->body[n + 1] = '\0';
	out->len = n + 1;
}

static enum metrics_kind metrics_kind_of(enum wl_kind k)
{
	return k == WL_POD ? METRICS_POD : k == WL_JOB ? METRICS_JOB : METRICS_OTHER;
}

static enum metrics_result result_of(const struct decision *dec,
				     const struct evaluation *ev)
{
	if (ev->bad_request)
		return METRICS_DENIED;
	if (!dec->allowed)
		return METRICS_DENIED;
	if (!dec->violation)
		return METRICS_ALLOWED;
	return dec->mode == POLICY_MODE_AUDIT ? METRICS_AUDITED : METRICS_WARNED;
}

static void log_decision(enum handler_endpoint ep, const struct review *rv,
			 const struct evaluation *ev)
{
	const struct decision *dec = &ev->dec;
	char msg[1100];
	const char *result;

	if (ev->bad_request) {
		log_event(LOG_WARN,
			  "msg=\"malformed review\" endpoint=%s uid=%s namespace=%s "
			  "kind=%s error=\"%s\"",
			  ep == HANDLER_MUTATE ? "mutate" : "validate", rv->uid,
			  rv->namespace, rv->kind_name,
			  log_quote(ev->error, msg, sizeof(msg)));
		return;
	}
	if (!dec->violation && !dec->cls)
		return; /* nothing gpugate cares about */
	result = !dec->allowed ? "denied"
		 : !dec->violation ? "admitted"
		 : dec->mode == POLICY_MODE_AUDIT ? "audited" : "warned";
	log_event(dec->violation ? LOG_INFO : LOG_DEBUG,
		  "msg=\"admission\" endpoint=%s uid=%s namespace=%s kind=%s "
		  "name=%s result=%s class=%s flavor=%s tenant=%s rule=%s "
		  "quota=%s dry_run=%s message=\"%s\"",
		  ep == HANDLER_MUTATE ? "mutate" : "validate", rv->uid,
		  rv->namespace, rv->kind_name,
		  ev->wl.name && ev->wl.name[0] ? ev->wl.name : "-", result,
		  dec->cls ? dec->cls->name : "-",
		  dec->flavor ? dec->flavor->name : "-",
		  dec->tenant ? dec->tenant->name : "-", dec->rule ? dec->rule : "-",
		  dec->has_quota ? quota_position_name(dec->quota.position) : "-",
		  rv->dry_run ? "true" : "false",
		  log_quote(dec->violation ? dec->message : "", msg, sizeof(msg)));
}

/* A name as the API allows it in a path (a DNS subdomain), so that what
 * the review says cannot steer the read elsewhere. */
static bool path_safe(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 253)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') ||
		      s[i] == '-' || s[i] == '.'))
			return false;
	return strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

/* The parent of a scale (one scale_parent_kind() names), into ev->parent
 * (or why not, ev->parent_error). */
static void read_parent(const struct handler_parents *src, const struct review *rv,
			struct evaluation *ev)
{
	const struct kind_def *k = kinds_scaled(rv->resource_group, rv->resource);
	char path[640];

	if (!path_safe(rv->namespace) || !path_safe(rv->name) || !path_safe(rv->resource)) {
		snprintf(ev->parent_error, sizeof(ev->parent_error),
			 "the request's namespace or name is not a Kubernetes name");
		return;
	}
	text_cat(path, sizeof(path), "/apis/", k->api_version, "/namespaces/", rv->namespace,
		 "/", k->resource, "/", rv->name, NULL);
	ev->parent = src->get(src->ctx, path, ev->parent_error, sizeof(ev->parent_error));
	if (!ev->parent) {
		char q[600];

		if (!ev->parent_error[0])
			snprintf(ev->parent_error, sizeof(ev->parent_error), "no answer");
		log_event(LOG_WARN, "msg=\"scale not judged\" resource=%s object=%s/%s "
				    "error=\"%s\"",
			  rv->resource, rv->namespace, rv->name,
			  log_quote(ev->parent_error, q, sizeof(q)));
	}
}

void handler_admit(struct handler *h, enum handler_endpoint ep,
		   const char *body, size_t len, struct handler_reply *out)
{
	double start = now_seconds();
	struct review rv;
	struct evaluation ev;
	struct holder_ref *ref = NULL;
	const struct policy *p;
	struct review_response resp = {0};
	const char *warnings[DECIDE_MAX_WARNINGS];
	struct priority_view prio;
	struct pvc_view claims;
	char err[400], msg[600];
	enum metrics_endpoint mep = ep == HANDLER_MUTATE ? METRICS_MUTATE
							 : METRICS_VALIDATE;

	memset(out, 0, sizeof(*out));
	jsonmem_begin();
	evaluation_init(&ev);
	if (h->priorities) {
		priorities_view(h->priorities, &prio);
		ev.priorities = &prio;
	}
	if (h->pvcs) {
		pvcs_view(h->pvcs, &claims);
		ev.pvcs = &claims;
	}
	ev.gang_served = h->gang_served ? *h->gang_served : 0;
	ev.self_user = h->self_user;
	ev.self_namespace = h->self_namespace;
	ev.templates = h->templates;
	if ((h->read_all ? review_decode_all : review_decode)(body, len, &rv, err,
							   sizeof(err)) < 0) {
		snprintf(msg, sizeof(msg), "gpugate: bad request: %s", err);
		reply_text(out, 400, msg);
		log_event(LOG_WARN, "msg=\"bad request\" endpoint=%s error=\"%s\"",
			  ep == HANDLER_MUTATE ? "mutate" : "validate",
			  log_quote(err, msg, sizeof(msg)));
		if (h->metrics)
			metrics_admission(h->metrics, mep, METRICS_OTHER, METRICS_ERROR,
					  now_seconds() - start);
		review_release(&rv);
		jsonmem_end();
		return;
	}
	p = holder_acquire(h->policy, &ref);
	if (!p) {
		reply_text(out, 503, "gpugate: no policy loaded");
		goto done;
	}
	ev.quota_gate = h->quota_gate;
	if (h->parents && scale_parent_kind(&rv, ep) && scale_raises(&rv))
		read_parent(h->parents, &rv, &ev);
	if (handler_evaluate(p, &rv, ep, h->usage, h->inventory, &ev) < 0) {
		reply_text(out, 500, "gpugate: out of memory");
		goto done;
	}
	if (ev.bad_request) {
		resp.allowed = false;
		resp.code = 400;
		snprintf(msg, sizeof(msg), "gpugate: %s", ev.error);
		resp.message = msg;
	} else {
		resp.allowed = ev.dec.allowed;
		resp.code = ev.dec.code;
		resp.message = ev.dec.message;
		for (size_t i = 0; i < ev.dec.n_warnings; i++)
			warnings[i] = ev.dec.warnings[i];
		resp.warnings = warnings;
		resp.n_warnings = ev.dec.n_warnings;
		if (ev.patch_ops > 0) {
			resp.patch = ev.patch.buf;
			resp.patch_len = ev.patch.len;
		}
	}
	out->body = review_encode(rv.uid, &resp, &out->len);
	if (!out->body) {
		reply_text(out, 500, "gpugate: out of memory");
		goto done;
	}
	out->status = 200;
	out->content_type = "application/json";
	log_decision(ep, &rv, &ev);
done:
	if (h->metrics) {
		enum metrics_result res = out->status == 200 ? result_of(&ev.dec, &ev)
							      : METRICS_ERROR;

		metrics_admission(h->metrics, mep, metrics_kind_of(rv.kind), res,
				  now_seconds() - start);
		if (res == METRICS_DENIED && !ev.bad_request)
			metrics_denial(h->metrics, ev.dec.tenant ? ev.dec.tenant->name : NULL,
				       ev.dec.flavor ? ev.dec.flavor->name : NULL,
				       ev.dec.rule);
	}
	holder_release(ref);
	if (jsonmem_discardable()) {
		/* All of the request's JSON is in the arena: drop it whole. */
		ev.mutated = NULL;
		ev.parent = NULL;
		rv.root = NULL;
	}
	evaluation_release(&ev);
	review_release(&rv);
	jsonmem_end();
}

static void route(void *ctx, enum handler_endpoint ep,
		  const struct http_request *req, struct http_reply *out)
{
	struct handler_reply reply;

	handler_admit(ctx, ep, req->body, req->len, &reply);
	out->status = (unsigned)reply.status;
	out->content_type = reply.content_type;
	out->body = reply.body;
	out->len = reply.len;
}

void handler_route_mutate(void *ctx, const struct http_request *req,
			  struct http_reply *out)
{
	route(ctx, HANDLER_MUTATE, req, out);
}

void handler_route_validate(void *ctx, const struct http_request *req,
			    struct http_reply *out)
{
	route(ctx, HANDLER_VALIDATE, req, out);
}
