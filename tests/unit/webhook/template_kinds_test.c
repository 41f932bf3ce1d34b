/*
 * Issue #28: a pod-template kind is its row of policy/kinds.c.  For every
 * WL_TEMPLATE row of the table, whatever it is, an object of that kind
 * built from the row alone (its apiVersion, kind and pod_template path) is
 * read and judged by the generic code: the review decoder finds the row,
 * the facts read the template where the row says and count the pods as
 * its `pods` says, /mutate maps the template in place, and a controller of
 * its template_owner's kind leaves it to that controller.  No row is named
 * here; scripts/check-house.py holds the product code to the same (no
 * string literal names a pod-template kind outside policy/kinds.c).
 */
#include "base/arena.h"
#include "base/base64.h"
#include "base/diag.h"
#include "base/log.h"
#include "policy/kinds.h"
#include "webhook/facts.h"
#include "webhook/handler.h"
#include "webhook/holder.h"
#include "webhook/review.h"
#include "tests/unit/test_policy.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The count fields of every kind_pods a template row may have, beside its
 * pod template: 3 replicas; a Job template's parallelism 4 of completions
 * 2, so 2 pods at once. */
#define REPLICAS 3
#define PARALLELISM 4
#define COMPLETIONS 2

/* The pods the decision counts for row k's object (struct workload's
 * replicas). */
static int64_t pods_of(const struct kind_def *k)
{
	switch (k->pods) {
	case KIND_PODS_REPLICAS:
		return REPLICAS;
	case KIND_PODS_JOB:
		return COMPLETIONS < PARALLELISM ? COMPLETIONS : PARALLELISM;
	case KIND_PODS_PER_NODE:
		return 0; /* one per node: not known */
	default:
		cr_assert_fail("%s: kind_pods %d is not a template's", k->kind, k->pods);
		return -1;
	}
}

/* The decision line's count of the pods for row k ("3 pods x "). */
static const char *pods_text(const struct kind_def *k)
{
	switch (k->pods) {
	case KIND_PODS_REPLICAS:
		return "3 pods x ";
	case KIND_PODS_JOB:
		return "Jobs of 2 pods x ";
	default:
		return "1 pod per node x ";
	}
}

/* An object of row k in namespace product-inference: a class
 * inference-mig pod template at k->pod_template, the count fields beside
 * it, and, when owner is not NULL, a controller ownerReference to an
 * object of that kind (caller frees). */
static json_t *object_of(const struct kind_def *k, const struct kind_def *owner)
{
	json_t *obj = json_pack("{s:s, s:s, s:{s:s, s:s}}", "apiVersion", k->api_version,
				"kind", k->kind, "metadata", "name", "w", "namespace",
				"product-inference");
	json_t *holder = obj, *tmpl;
	const char *const *m = k->pod_template;

	cr_assert(obj && m && m[0], "%s", k->kind);
	for (; m[1]; m++) {
		json_t *next = json_object();

		json_object_set_new(holder, m[0], next);
		holder = next;
	}
	json_object_set_new(holder, "selector",
			    json_pack("{s:{s:s}}", "matchLabels", "app", "w"));
	if (k->pods == KIND_PODS_REPLICAS)
		json_object_set_new(holder, "replicas", json_integer(REPLICAS));
	if (k->pods == KIND_PODS_JOB) {
		json_object_set_new(holder, "parallelism", json_integer(PARALLELISM));
		json_object_set_new(holder, "completions", json_integer(COMPLETIONS));
	}
	tmpl = json_pack("{s:{s:{s:s, s:s}}, s:{s:[{s:s, s:s}]}}", "metadata", "labels",
			 "app", "w", "gpugate.io/class", "inference-mig", "spec",
			 "containers", "name", "main", "image", "probe");
	json_object_set_new(holder, m[0], tmpl);
	if (owner)
		json_object_set_new(json_object_get(obj, "metadata"), "ownerReferences",
				    json_pack("[{s:s, s:s, s:s, s:s, s:b}]", "apiVersion",
					      owner->api_version, "kind", owner->kind, "name",
					      "o", "uid", "uid-o", "controller", 1));
	return obj;
}

/* A CREATE AdmissionReview of object, of row k (caller frees). */
static char *review_of(const struct kind_def *k, json_t *object)
{
	json_t *rv = json_pack(
		"{s:s, s:s, s:{s:s, s:{s:s, s:s, s:s}, s:{s:s, s:s, s:s}, s:s, s:s, s:s, "
		"s:O, s:b}}",
		"apiVersion", "admission.k8s.io/v1", "kind", "AdmissionReview", "request",
		"uid", "u-kind", "kind", "group", k->group, "version", k->version, "kind",
		k->kind, "resource", "group", k->group, "version", k->version, "resource",
		k->resource, "namespace", "product-inference", "name", "w", "operation",
		"CREATE", "object", object, "dryRun", 0);
	char *text = json_dumps(rv, JSON_COMPACT);

	cr_assert_not_null(text);
	json_decref(rv);
	return text;
}

Test(template_kinds, the_table_has_template_rows)
{
	size_t n, templates = 0;
	const struct kind_def *all = kinds_all(&n);

	for (size_t i = 0; i < n; i++)
		templates += all[i].wl == WL_TEMPLATE;
	cr_assert_gt(templates, 0);
}

/* The review finds the row, and the facts read the template where the row
 * says and count its pods as the row says. */
Test(template_kinds, every_template_row_is_read_by_its_row)
{
	size_t n_rows;
	const struct kind_def *all = kinds_all(&n_rows);

	for (const struct kind_def *k = all; k < all + n_rows; k++) {
		if (k->wl != WL_TEMPLATE)
			continue;
		json_t *obj = object_of(k, NULL);
		char *text = review_of(k, obj), err[256];
		struct review rv;
		struct workload wl = {0};
		struct arena a;
		struct diag d;

		cr_assert_eq(review_decode(text, strlen(text), &rv, err, sizeof(err)), 0,
			     "%s: %s", k->kind, err);
		cr_expect_eq(rv.def, k, "%s", k->kind);
		cr_expect_eq(rv.kind, WL_TEMPLATE, "%s", k->kind);
		wl.kind = rv.kind;
		wl.def = rv.def;
		arena_init(&a);
		diag_init(&d);
		cr_assert_eq(facts_extract(rv.object, &wl, &a, &d), 0, "%s: %s", k->kind,
			     diag_text(&d));
		cr_expect_eq(wl.def, k, "%s", k->kind);
		cr_expect_eq(wl.replicas, pods_of(k), "%s", k->kind);
		cr_expect_eq(wl.pod.n_containers, 1, "%s", k->kind);
		cr_expect_str_eq(wl.pod.containers[0].name, "main", "%s", k->kind);
		cr_expect_str_eq(wl_get(wl.pod.labels, wl.pod.n_labels, "gpugate.io/class"),
				 "inference-mig", "%s", k->kind);
		cr_expect_not(wl.template_owned, "%s", k->kind);
		arena_release(&a);
		review_release(&rv);
		free(text);
		json_decref(obj);
	}
}

/* The JSON Patch of /mutate's answer to object of row k; NULL when none
 * (caller frees). */
static json_t *mutate(struct handler *h, const struct kind_def *k, json_t *obj)
{
	char *text = review_of(k, obj), *patch = NULL;
	struct handler_reply r;
	json_error_t e;
	json_t *resp, *out, *p, *ops = NULL;
	size_t len;

	handler_admit(h, HANDLER_MUTATE, text, strlen(text), &r);
	free(text);
	cr_assert_eq(r.status, 200, "%s: %d %s", k->kind, r.status, r.body);
	resp = json_loadb(r.body, r.len, 0, &e);
	free(r.body);
	cr_assert_not_null(resp, "%s", e.text);
	out = json_object_get(resp, "response");
	cr_assert(json_is_true(json_object_get(out, "allowed")), "%s: %s", k->kind,
		  json_string_value(json_object_get(json_object_get(out, "status"),
						    "message")));
	p = json_object_get(out, "patch");
	if (p) {
		cr_assert_eq(base64_decode(json_string_value(p), json_string_length(p),
					   BASE64_STRICT, &patch, &len),
			     0);
		ops = json_loadb(patch, len, 0, &e);
		cr_assert_not_null(ops, "%s", e.text);
		free(patch);
	}
	json_decref(resp);
	return ops;
}

/* The value of the op of patch at path, or NULL. */
static const json_t *op_at(const json_t *patch, const char *path)
{
	size_t i;
	const json_t *op;

	json_array_foreach(patch, i, op)
		if (strcmp(json_string_value(json_object_get(op, "path")), path) == 0)
			return json_object_get(op, "value");
	return NULL;
}

/* /mutate maps the template where the row says, and the decision counts
 * its pods as the row says; an object made by a controller of its
 * template_owner's kind is left to that controller's template. */
Test(template_kinds, every_template_row_is_mapped_where_its_row_says)
{
	struct holder *policy;
	struct handler h;
	size_t n_rows;
	const struct kind_def *all = kinds_all(&n_rows);

	log_set_level(LOG_ERROR);
	policy = holder_new(test_policy_file("policy/examples/gpu-cluster.yaml"));
	cr_assert_not_null(policy);
	h = (struct handler){.policy = policy};

	for (const struct kind_def *k = all; k < all + n_rows; k++) {
		if (k->wl != WL_TEMPLATE)
			continue;
		json_t *obj = object_of(k, NULL), *patch = mutate(&h, k, obj);
		char base[128] = "", path[192], want[256];
		const json_t *decision;
		size_t n = 0;

		for (const char *const *m = k->pod_template; *m; m++)
			n += (size_t)snprintf(base + n, sizeof(base) - n, "/%s", *m);
		cr_assert_not_null(patch, "%s: not mapped", k->kind);
		snprintf(path, sizeof(path), "%s/spec/containers/0/resources", base);
		cr_expect_str_eq(json_string_value(json_object_get(json_object_get(
					 op_at(patch, path), "limits"), "nvidia.com/mig-1g.10gb")),
				 "1", "%s: %s", k->kind, path);
		snprintf(path, sizeof(path), "%s/metadata/labels/gpugate.io~1flavor", base);
		cr_expect_str_eq(json_string_value(op_at(patch, path)), "a100-1g.10gb",
				 "%s: %s", k->kind, path);
		decision = json_object_get(op_at(patch, "/metadata/annotations"),
					   "gpugate.io/decision");
		snprintf(want, sizeof(want),
			 "inference-mig: %s1 x a100-1g.10gb for tenant product; each %s is "
			 "charged when it is created",
			 pods_text(k), k->pods == KIND_PODS_JOB ? "Job" : "pod");
		cr_expect_str_eq(json_string_value(decision), want, "%s", k->kind);
		json_decref(patch);
		json_decref(obj);

		if (k->template_owner) {
			obj = object_of(k, k->template_owner);
			patch = mutate(&h, k, obj);
			cr_expect_null(patch, "%s controlled by a %s: changed", k->kind,
				       k->template_owner->kind);
			json_decref(patch);
			json_decref(obj);
		}
	}
	holder_free(policy);
}
