/* claim-templates: the template keeper (controllers/claim-templates.h). */
#include "controllers/claim-templates.h"

#include "base/diag.h"
#include "base/grow.h"
#include "base/log.h"
#include "base/text.h"
#include "controllers/claim-sync.h"
#include "controllers/claim-templates-plan.h"
#include "controllers/worker.h"
#include "kube/client.h"
#include "metrics/metrics.h"
#include "policy/dra-template.h"
#include "policy/policy.h"
#include "usage/template-board.h"
#include "webhook/holder.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One request; a template is never urgent (admission does not wait). */
#define SYNC_TIMEOUT_MS 10000u
/* app.kubernetes.io/managed-by=gpugate, as a query parameter. */
#define OWNER_SELECTOR "app.kubernetes.io%2Fmanaged-by%3Dgpugate"
/* The most templates and namespaces one round reads. */
#define MAX_SEEN 200000u

struct claim_templates {
	struct claim_templates_config cfg;
	struct worker w;
	/* The thread's own. */
	bool done;           /* a round was made since leading (or not) */
	bool done_leading;   /* ... as the leader */
	uint64_t done_gen;   /* for the policy of this generation */
	unsigned waited_s;   /* seconds since */
	bool said_unserved;  /* "not served" was logged */
};

/* ---- the object --------------------------------------------------------- */

/* {key, operator, value, effect, tolerationSeconds}: the fields written. */
static json_t *toleration(const struct policy_toleration *t)
{
	json_t *o = json_object();

	if (!o)
		return NULL;
	if ((t->key[0] && json_object_set_new(o, "key", json_string(t->key)) < 0) ||
	    (t->op[0] && json_object_set_new(o, "operator", json_string(t->op)) < 0) ||
	    (t->value[0] && json_object_set_new(o, "value", json_string(t->value)) < 0) ||
	    (t->effect[0] && json_object_set_new(o, "effect", json_string(t->effect)) < 0) ||
	    (t->has_seconds && json_object_set_new(o, "tolerationSeconds",
						   json_integer(t->seconds)) < 0)) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* [{cel: {expression}}]: gpugate's selector first, then the flavor's own. */
static json_t *selectors(const struct policy_dra *d)
{
	char cel[DRA_TEMPLATE_CEL_MAX];
	json_t *a = json_array();

	if (!a || dra_template_cel(d, cel, sizeof(cel)) < 0 ||
	    json_array_append_new(a, json_pack("{s:{s:s}}", "cel", "expression", cel)) < 0)
		goto fail;
	for (size_t i = 0; i < d->n_selectors; i++)
		if (json_array_append_new(a, json_pack("{s:{s:s}}", "cel", "expression",
							d->selectors[i])) < 0)
			goto fail;
	return a;
fail:
	json_decref(a);
	return NULL;
}

/* The request's exactly{}: count devices, or for a shared flavor one
 * device's share of count units (capacity.requests). */
static json_t *exactly(const struct policy_dra *d, unsigned count)
{
	json_t *sel = selectors(d), *tol = NULL, *e;
	char share[64];

	if (!sel)
		return NULL;
	if (d->shared && dra_share_quantity(d->shared, count, share, sizeof(share)) < 0) {
		json_decref(sel);
		return NULL;
	}
	/* json_pack takes sel ("o"), also when it fails. */
	e = json_pack("{s:s, s:s, s:I, s:o}", "deviceClassName", d->device_class,
		      "allocationMode", "ExactCount", "count",
		      (json_int_t)(d->shared ? 1 : count), "selectors", sel);
	if (e && d->shared &&
	    json_object_set_new(e, "capacity", json_pack("{s:{s:s}}", "requests",
							  d->shared->name, share)) < 0) {
		json_decref(e);
		return NULL;
	}
	if (!e || !d->n_tolerations)
		return e;
	tol = json_array();
	for (size_t i = 0; tol && i < d->n_tolerations; i++)
		if (json_array_append_new(tol, toleration(&d->tolerations[i])) < 0) {
			json_decref(tol);
			tol = NULL;
		}
	if (!tol || json_object_set_new(e, "tolerations", tol) < 0) {
		json_decref(e);
		return NULL;
	}
	return e;
}

json_t *claim_templates_object(const struct policy_class *c, unsigned count,
			       const char *ns, const char *name)
{
	const struct policy_flavor *f = c->flavor;
	json_t *ex;

	if (!f->dra || !(ex = exactly(f->dra, count)))
		return NULL;
	return json_pack(
		"{s:s, s:s,"
		" s:{s:s, s:s, s:{s:s, s:s, s:s}},"
		" s:{s:{s:{s:s, s:s}, s:{s:s}},"
		"    s:{s:{s:[{s:s, s:o}]}}}}",
		"apiVersion", "resource.k8s.io/v1", "kind", "ResourceClaimTemplate",
		"metadata", "name", name, "namespace", ns, "labels",
		CLAIM_SYNC_OWNER_LABEL, CLAIM_SYNC_OWNER, CLAIM_TEMPLATES_CLASS_LABEL,
		c->name, CLAIM_TEMPLATES_FLAVOR_LABEL, f->name,
		"spec", "metadata", "labels", CLAIM_SYNC_OWNER_LABEL, CLAIM_SYNC_OWNER,
		CLAIM_TEMPLATES_CLASS_LABEL, c->name, "annotations",
		CLAIM_TEMPLATES_FLAVOR_LABEL, f->name,
		"spec", "devices", "requests", "name", DRA_TEMPLATE_REQUEST, "exactly", ex);
}

/* ---- what a round reads -------------------------------------------------- */

static const char *meta_string(const json_t *item, const char *key)
{
	return json_string_value(json_object_get(json_object_get(item, "metadata"), key));
}

static bool owner_labelled(const json_t *item)
{
	const char *v = json_string_value(json_object_get(
		json_object_get(json_object_get(item, "metadata"), "labels"),
		CLAIM_SYNC_OWNER_LABEL));

	return v && strcmp(v, CLAIM_SYNC_OWNER) == 0;
}

/* What one round read: the lists (which the plan's strings point into),
 * and the plan's inputs. */
struct round {
	json_t *templates, *namespaces;
	struct claim_templates_ns *ns;
	size_t n_ns, cap_ns;
	struct claim_templates_seen *seen;
	size_t n_seen, cap_seen;
};

static void round_release(struct round *r)
{
	json_decref(r->templates);
	json_decref(r->namespaces);
	free(r->ns);
	free(r->seen);
}

static int read_namespaces(struct round *r)
{
	const json_t *item;
	size_t i;
	bool oom = false;

	json_array_foreach(json_object_get(r->namespaces, "items"), i, item) {
		const char *name = meta_string(item, "name");
		const char *phase = json_string_value(
			json_object_get(json_object_get(item, "status"), "phase"));

		if (!name)
			continue;
		if (!grow_room((void **)&r->ns, &r->cap_ns, r->n_ns, MAX_SEEN,
			       sizeof(*r->ns), &oom))
			return oom ? -1 : 0;
		r->ns[r->n_ns++] = (struct claim_templates_ns){
			.name = name, .active = !phase || strcmp(phase, "Active") == 0};
	}
	return 0;
}

static int read_templates(struct round *r)
{
	const json_t *item;
	size_t i;
	bool oom = false;

	json_array_foreach(json_object_get(r->templates, "items"), i, item) {
		const char *ns = meta_string(item, "namespace");
		const char *name = meta_string(item, "name");

		if (!ns || !name)
			continue;
		if (!grow_room((void **)&r->seen, &r->cap_seen, r->n_seen, MAX_SEEN,
			       sizeof(*r->seen), &oom))
			return oom ? -1 : 0;
		r->seen[r->n_seen++] = (struct claim_templates_seen){
			.ns = ns, .name = name, .uid = meta_string(item, "uid"),
			.ours = owner_labelled(item),
			.created_s = text_unix_time(meta_string(item, "creationTimestamp"))};
	}
	return 0;
}

/* ---- what a round does --------------------------------------------------- */

static void failed(struct claim_templates *s, const char *text)
{
	worker_failed(&s->w, "claim templates not kept", text);
}

static bool policy_has_dra(const struct policy *p)
{
	for (size_t i = 0; i < policy_class_count(p); i++)
		if (policy_class_at(p, i)->flavor->dra)
			return true;
	return false;
}

/* The template list said 404: said once, on the board and the metrics. */
static void unserved(struct claim_templates *s, const struct policy *p)
{
	template_board_served_set(s->cfg.board, TEMPLATES_NOT_SERVED);
	metrics_dra_templates(s->cfg.metrics, false, 0, 0, 0);
	if (s->said_unserved)
		return;
	s->said_unserved = true;
	log_event(policy_has_dra(p) ? LOG_WARN : LOG_INFO,
		  "msg=\"claim templates not served\" detail=\"the cluster serves no "
		  "resource.k8s.io/v1 resourceclaimtemplates: pods of DRA classes "
		  "are denied\"");
}

static void taken(struct claim_templates *s, const char *ns, const char *name)
{
	if (template_board_taken_put(s->cfg.board, ns, name) == 1)
		log_event(LOG_WARN, "msg=\"claim template taken\" template=%s/%s "
				    "detail=\"not labelled " CLAIM_SYNC_OWNER_LABEL "="
				    CLAIM_SYNC_OWNER ": left alone, the namespace's pods "
				    "of its class are denied\"", ns, name);
}

/* A create answered 409 AlreadyExists: made since the list (by the
 * leader before this one, or by a user).  1 when it is gpugate's, 0 when
 * taken, -1 when it could not be read (in d). */
static int already(struct claim_templates *s, const struct claim_templates_create *c,
		   const char *collection, struct diag *d)
{
	char path[600];
	json_t *obj = NULL;
	int rc;

	snprintf(path, sizeof(path), "%s/%s", collection, c->name);
	if (kube_get_json(s->w.kube, path, SYNC_TIMEOUT_MS, &obj, d) != 0)
		return -1;
	rc = owner_labelled(obj) ? 1 : 0;
	json_decref(obj);
	if (!rc)
		taken(s, c->ns, c->name);
	return rc;
}

/* One template: 1 created (or found gpugate's), 0 taken (409), -1
 * refused (in d). */
static int create_one(struct claim_templates *s, const struct claim_templates_create *c,
		      struct diag *d)
{
	json_t *obj = claim_templates_object(c->cls, c->count, c->ns, c->name);
	char path[400];
	int rc;

	if (!obj) {
		diag_addf(d, "claim template %s: its object could not be made", c->name);
		return -1;
	}
	snprintf(path, sizeof(path), CLAIM_TEMPLATES_API "/namespaces/%s/resourceclaimtemplates",
		 c->ns);
	rc = kube_create(s->w.kube, path, obj, SYNC_TIMEOUT_MS, NULL, d);
	json_decref(obj);
	if (rc == 409)
		return already(s, c, path, d);
	if (rc != 0)
		return -1;
	log_event(LOG_INFO, "msg=\"claim template created\" template=%s/%s class=%s count=%u",
		  c->ns, c->name, c->cls->name, c->count);
	return 1;
}

/* The template names the non-terminal pods of namespace ns name, into
 * *used (strings in *list); -1 when the pods could not be listed. */
static int pods_using(struct claim_templates *s, const char *ns, json_t **list,
		      const char ***used, size_t *n_used, struct diag *d)
{
	char path[200];
	const json_t *pod, *rc;
	size_t i, k, cap = 0;
	bool oom = false;

	*used = NULL;
	*n_used = 0;
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods", ns);
	if (kube_get_json(s->w.kube, path, SYNC_TIMEOUT_MS, list, d) != 0)
		return -1;
	json_array_foreach(json_object_get(*list, "items"), i, pod) {
		const char *phase = json_string_value(
			json_object_get(json_object_get(pod, "status"), "phase"));

		if (phase && (strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0))
			continue;
		json_array_foreach(json_object_get(json_object_get(pod, "spec"),
						   "resourceClaims"), k, rc) {
			const char *t = json_string_value(
				json_object_get(rc, "resourceClaimTemplateName"));

			if (!t)
				continue;
			if (!grow_room((void **)used, &cap, *n_used, MAX_SEEN,
				       sizeof(**used), &oom)) {
				diag_addf(d, "namespace %s: too many pods", ns);
				return -1;
			}
			(*used)[(*n_used)++] = t;
		}
	}
	return 0;
}

/* Whether garbage i is the first old one of its namespace. */
static bool first_old(const struct claim_templates_plan *pl, size_t i)
{
	for (size_t k = 0; k < i; k++)
		if (!pl->garbage[k].young &&
		    strcmp(pl->garbage[k].t->ns, pl->garbage[i].t->ns) == 0)
			return false;
	return true;
}

/* The garbage of the plan that is old enough and unused: deleted (the
 * uid as precondition: never a template made again under the name).
 * Returns how many are left; -1 in *rc when something failed (in d). */
static size_t collect(struct claim_templates *s, const struct claim_templates_plan *pl,
		      int *rc, struct diag *d)
{
	size_t left = pl->n_garbage;

	for (size_t i = 0; i < pl->n_garbage && !worker_stopping(&s->w); i++) {
		const struct claim_templates_garbage *g = &pl->garbage[i];
		json_t *pods = NULL;
		const char **used = NULL;
		size_t n_used = 0;

		/* This namespace's first old garbage: its pods, listed once
		 * for all of its garbage. */
		if (g->young || !first_old(pl, i))
			continue;
		if (pods_using(s, g->t->ns, &pods, &used, &n_used, d) < 0) {
			*rc = -1;
			json_decref(pods);
			free(used);
			continue;
		}
		for (size_t k = i; k < pl->n_garbage; k++) {
			const struct claim_templates_garbage *h = &pl->garbage[k];
			char path[600];
			int st;

			if (strcmp(h->t->ns, g->t->ns) != 0 ||
			    !claim_templates_deletable(h, used, n_used))
				continue;
			snprintf(path, sizeof(path),
				 CLAIM_TEMPLATES_API "/namespaces/%s/resourceclaimtemplates/%s",
				 h->t->ns, h->t->name);
			st = kube_delete(s->w.kube, path, h->t->uid, NULL,
					 SYNC_TIMEOUT_MS, NULL, d);
			if (st == 0 || st == 404) {
				left--;
				if (st == 0)
					log_event(LOG_INFO, "msg=\"claim template deleted\" "
							    "template=%s/%s", h->t->ns, h->t->name);
			} else if (st != 409) { /* 409: made again meanwhile */
				*rc = -1;
			}
		}
		json_decref(pods);
		free(used);
	}
	return left;
}

static void sync_once(struct claim_templates *s, const struct policy *p, bool write)
{
	struct round r = {0};
	struct claim_templates_plan pl = {0};
	struct diag d;
	size_t kept, left;
	int rc = 0, st;

	diag_init(&d);
	/* Without a DRA class nothing is wanted, so only gpugate's own can
	 * be garbage: the list is theirs alone. */
	st = kube_get_json(s->w.kube,
			   policy_has_dra(p) ? CLAIM_TEMPLATES_API "/resourceclaimtemplates"
					     : CLAIM_TEMPLATES_API "/resourceclaimtemplates"
							"?labelSelector=" OWNER_SELECTOR,
			   SYNC_TIMEOUT_MS, &r.templates, &d);
	if (st == 404) {
		unserved(s, p);
		goto out;
	}
	if (st != 0 || kube_get_json(s->w.kube, "/api/v1/namespaces", SYNC_TIMEOUT_MS,
				     &r.namespaces, &d) != 0) {
		failed(s, diag_text(&d));
		goto out;
	}
	if (s->said_unserved)
		log_event(LOG_INFO, "msg=\"claim templates served\"");
	s->said_unserved = false;
	template_board_served_set(s->cfg.board, TEMPLATES_SERVED);
	if (read_namespaces(&r) < 0 || read_templates(&r) < 0 ||
	    claim_templates_plan(p, r.ns, r.n_ns, r.seen, r.n_seen, (int64_t)time(NULL),
				 &pl) < 0) {
		failed(s, "out of memory");
		goto out;
	}
	template_board_taken_begin(s->cfg.board);
	for (size_t i = 0; i < pl.n_taken; i++)
		taken(s, pl.taken[i]->ns, pl.taken[i]->name);
	kept = pl.kept;
	for (size_t i = 0; write && i < pl.n_create && !worker_stopping(&s->w); i++) {
		int one = create_one(s, &pl.create[i], &d);

		if (one < 0)
			rc = -1; /* the others still go */
		else
			kept += (size_t)one;
	}
	template_board_taken_end(s->cfg.board);
	left = write ? collect(s, &pl, &rc, &d) : pl.n_garbage;
	metrics_dra_templates(s->cfg.metrics, true, kept,
			      template_board_taken_count(s->cfg.board), left);
	if (rc < 0)
		failed(s, diag_text(&d));
	else
		worker_recovered(&s->w);
out:
	claim_templates_plan_release(&pl);
	round_release(&r);
}

/* ---- the loop ------------------------------------------------------------ */

/* A round of p when one is due: at once after a policy swap or a change of
 * leading, else every interval_s. */
static void maybe_round(struct claim_templates *s, bool leading)
{
	uint64_t gen = holder_generation(s->cfg.policy);
	struct holder_ref *ref;
	const struct policy *p;

	if (s->done && s->done_leading == leading && gen == s->done_gen &&
	    s->waited_s < s->cfg.interval_s) {
		s->waited_s++;
		return;
	}
	p = holder_acquire(s->cfg.policy, &ref);
	if (p)
		sync_once(s, p, leading);
	holder_release(ref);
	s->done = true;
	s->done_leading = leading;
	s->done_gen = gen;
	s->waited_s = 1; /* the second slept next */
}

/* Another replica leads: this one only reads, for its admission. */
static void idle(void *arg)
{
	maybe_round(arg, false);
}

static unsigned turn(void *arg)
{
	maybe_round(arg, true);
	return 1000;
}

int claim_templates_start(const struct claim_templates_config *cfg,
			  struct claim_templates **out, struct diag *d)
{
	struct claim_templates *s = calloc(1, sizeof(*s));

	if (!s) {
		diag_addf(d, "out of memory");
		return -1;
	}
	s->cfg = *cfg;
	if (!s->cfg.interval_s)
		s->cfg.interval_s = 10;
	if (worker_start(&s->w,
			 &(struct worker_config){.name = "claim-templates", .kube = cfg->kube,
						 .turn = turn, .idle = idle, .arg = s,
						 .idle_ms = 1000, .leading = cfg->leading,
						 .leading_ctx = cfg->leading_ctx},
			 d) < 0) {
		free(s);
		return -1;
	}
	*out = s;
	return 0;
}

void claim_templates_stop(struct claim_templates *s)
{
	if (!s)
		return;
	worker_stop(&s->w);
	free(s);
}
