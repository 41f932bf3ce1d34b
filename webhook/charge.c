#include "webhook/charge.h"

#include "base/arena.h"
#include "base/diag.h"
#include "base/text.h"
#include "policy/decide.h"
#include "policy/kinds.h"
#include "policy/charge.h"
#include "policy/policy.h"
#include "policy/workload.h"
#include "usage/priorities.h"
#include "usage/usage.h"
#include "webhook/facts.h"
#include "webhook/holder.h"

#include <string.h>

/* The row of what the feed lists as kind. */
static const struct kind_def *row_of(enum usage_kind kind)
{
	switch (kind) {
	case USAGE_JOBS:
		return kinds_find("batch", "v1", "Job");
	case USAGE_CLAIMS:
		return kinds_find("resource.k8s.io", "v1", "ResourceClaim");
	default:
		return kinds_find("", "v1", "Pod");
	}
}

static const char *string_at(const json_t *obj, const char *a, const char *b)
{
	return json_string_value(json_object_get(json_object_get(obj, a), b));
}

/* What a reclaim reads of obj (docs/design/reclaim.md): priority (a Pod's
 * spec.priority, a Job's template's class's), creation, the preemptible
 * stamp and the checkpoint annotations. */
static void reclaim_facts(const json_t *obj, enum usage_kind kind,
			  const struct workload *wl, const struct priority_view *pv,
			  struct usage_item *out)
{
	const json_t *meta = json_object_get(obj, "metadata");
	const json_t *pod_meta = meta;
	const char *pre;

	if (kind == USAGE_JOBS)
		pod_meta = json_object_get(
			json_object_get(json_object_get(obj, "spec"), "template"),
			"metadata");
	out->priority = decide_priority(wl, NULL, pv);
	out->created_ms =
		text_unix_time(json_string_value(json_object_get(meta, "creationTimestamp"))) *
		1000;
	pre = string_at(pod_meta, "labels", STAMP_PREEMPTIBLE);
	if (!pre && pod_meta != meta)
		pre = string_at(meta, "labels", STAMP_PREEMPTIBLE);
	out->preemptible = pre && strcmp(pre, "true") == 0;
	out->signalled_ms =
		text_unix_time(string_at(meta, "annotations", STAMP_CHECKPOINT_REQUESTED)) * 1000;
	out->done_ms = text_unix_time(string_at(meta, "annotations", STAMP_CHECKPOINT_DONE)) *
		       1000;
}

/* "\x1fa\x1fb\x1f": the claims a pod names itself (usage_item); NULL
 * when none (or out of memory: the pod then covers a claim it names, which
 * its own spec keeps off the scheduler's claim anyway). */
static const char *named_claims(const struct workload *wl, struct arena *a)
{
	const struct wl_pod *pod = &wl->pod;
	size_t len = 2, named = 0;
	char *out, *o;

	for (size_t i = 0; i < pod->n_claims; i++)
		if (pod->claims[i].claim) {
			len += strlen(pod->claims[i].claim) + 1;
			named++;
		}
	if (!named)
		return NULL;
	out = arena_alloc(a, len);
	if (!out)
		return NULL;
	o = out;
	*o++ = '\x1f';
	for (size_t i = 0; i < pod->n_claims; i++) {
		size_t n;

		if (!pod->claims[i].claim)
			continue;
		n = strlen(pod->claims[i].claim);
		memcpy(o, pod->claims[i].claim, n);
		o += n;
		*o++ = '\x1f';
	}
	*o = '\0';
	return out;
}

int charge_item(const struct policy *p, const json_t *obj, enum usage_kind kind,
		struct arena *a, struct usage_item *out)
{
	return charge_item_with(p, obj, kind, NULL, a, out);
}

int charge_item_with(const struct policy *p, const json_t *obj,
		     enum usage_kind kind, const struct priority_view *pv,
		     struct arena *a, struct usage_item *out)
{
	const json_t *meta = json_object_get(obj, "metadata");
	const char *uid = json_string_value(json_object_get(meta, "uid"));
	const struct kind_def *def = row_of(kind);
	struct workload wl = {.kind = def->wl, .def = def, .op = WL_CREATE};
	struct charge ch;
	struct diag d;

	memset(out, 0, sizeof(*out));
	if (!json_is_object(obj) || !uid)
		return -1;
	out->uid = uid;
	out->kind = kind;
	out->namespace = json_string_value(json_object_get(meta, "namespace"));
	out->name = json_string_value(json_object_get(meta, "name"));
	diag_init(&d);
	wl.namespace = out->namespace;
	if (!out->namespace || facts_extract(obj, &wl, a, &d) < 0)
		return 0; /* holds nothing gpugate can read */
	charge_decide(p, &wl, &ch);
	if (!ch.tenant)
		return 0;
	out->tenant = ch.tenant->name;
	out->flavor = ch.flavor->name;
	out->owner_job_uid = ch.owner_job_uid;
	out->owner_pod_uid = ch.owner_pod_uid;
	if (kind == USAGE_PODS) {
		/* The claim its status names for its GPUs: the scheduler's,
		 * or the one made from gpugate's template. */
		out->extended_claim = wl.extended_claim ? wl.extended_claim
							: wl.template_claim;
		out->named_claims = named_claims(&wl, a);
	} else if (kind == USAGE_CLAIMS) {
		/* Which of a pod's claims is its earliest (usage_claim_ride()). */
		out->created_ms = text_unix_time(json_string_value(
					  json_object_get(meta, "creationTimestamp"))) *
				  1000;
	}
	out->per_pod = ch.per_pod;
	out->slots = ch.slots;
	out->units = ch.units;
	out->active = ch.active;
	out->generation = wl.generation;
	if (kind != USAGE_CLAIMS && out->active)
		reclaim_facts(obj, kind, &wl, pv, out);
	return 0;
}

int charge_item_current(void *holder, const json_t *obj, enum usage_kind kind,
			struct arena *a, struct usage_item *out)
{
	struct charge_source src = {.holder = holder};

	return charge_item_source(&src, obj, kind, a, out);
}

int charge_item_source(void *source, const json_t *obj, enum usage_kind kind,
		       struct arena *a, struct usage_item *out)
{
	const struct charge_source *src = source;
	struct holder_ref *ref;
	const struct policy *p = holder_acquire(src->holder, &ref);
	struct priority_view pv;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	if (src->priorities)
		priorities_view(src->priorities, &pv);
	if (!p || charge_item_with(p, obj, kind, src->priorities ? &pv : NULL, a,
				   out) < 0)
		goto out;
	/* The names live in p, which a reload may free once ref is let go. */
	if (out->tenant) {
		out->tenant = arena_strdup(a, out->tenant);
		out->flavor = arena_strdup(a, out->flavor);
		if (!out->tenant || !out->flavor)
			goto out;
	}
	rc = 0;
out:
	holder_release(ref);
	return rc;
}
