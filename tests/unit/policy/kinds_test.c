/*
 * The table of workload kinds (policy/kinds.c): every lookup finds each
 * row, the rows are unique by every key a lookup takes, and each row is
 * consistent in itself.  tests/unit/webhook/webhook_rules_test.c holds the webhook
 * registrations to the rows' hooks.
 */
#include "policy/kinds.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

Test(kinds, every_lookup_finds_every_row)
{
	size_t n;
	const struct kind_def *all = kinds_all(&n);

	cr_assert_gt(n, 0);
	for (size_t i = 0; i < n; i++) {
		const struct kind_def *k = &all[i];

		cr_expect_eq(kinds_find(k->group, k->version, k->kind), k, "%s", k->kind);
		cr_expect_eq(kinds_by_api(k->api_version, k->kind), k, "%s", k->kind);
		if (k->wl == WL_TEMPLATE) {
			cr_expect_eq(kinds_template(k->kind), k, "%s", k->kind);
		} else {
			cr_expect_null(kinds_template(k->kind), "%s", k->kind);
		}
		cr_expect_eq(kinds_scaled(k->group, k->resource),
			     kinds_hook(k, NULL, "scale") ? k : NULL, "%s", k->kind);
	}
}

Test(kinds, what_is_not_admitted_is_not_found)
{
	cr_expect_null(kinds_find("apps", "v1", "ControllerRevision"));
	cr_expect_null(kinds_find("apps", "v1beta1", "Deployment"));
	cr_expect_null(kinds_find("", "v1", "Job")); /* the group counts */
	cr_expect_null(kinds_find(NULL, "v1", "Pod"));
	cr_expect_null(kinds_find("", NULL, "Pod"));
	cr_expect_null(kinds_find("", "v1", NULL));
	cr_expect_null(kinds_by_api("batch/v1beta1", "CronJob"));
	cr_expect_null(kinds_by_api("apps/v1", "Job"));
	cr_expect_null(kinds_by_api(NULL, "Job"));
	cr_expect_null(kinds_by_api("batch/v1", NULL));
	cr_expect_null(kinds_template("Job"));
	cr_expect_null(kinds_template("Pod"));
	cr_expect_null(kinds_template(NULL));
	/* A DaemonSet and a CronJob have no scale gpugate judges. */
	cr_expect_null(kinds_scaled("apps", "daemonsets"));
	cr_expect_null(kinds_scaled("batch", "cronjobs"));
	cr_expect_null(kinds_scaled("", "deployments"));
	cr_expect_null(kinds_scaled(NULL, "deployments"));
	cr_expect_null(kinds_scaled("apps", NULL));
	cr_expect_null(kinds_hook(NULL, NULL, ""));
}

Test(kinds, the_known_rows)
{
	const struct kind_def *pod = kinds_find("", "v1", "Pod");
	const struct kind_def *job = kinds_by_api("batch/v1", "Job");
	const struct kind_def *cron = kinds_template("CronJob");
	const struct kind_def *claim = kinds_find("resource.k8s.io", "v1", "ResourceClaim");

	cr_assert(pod && job && cron && claim);
	cr_expect_eq(pod->wl, WL_POD);
	cr_expect_null(pod->pod_template[0]);
	cr_expect(pod->holds_quota);
	cr_expect_eq(job->wl, WL_JOB);
	cr_expect_eq(job->pods, KIND_PODS_PARALLELISM);
	cr_expect_str_eq(cron->pod_template[1], "jobTemplate");
	cr_expect_eq(cron->pods, KIND_PODS_JOB);
	cr_expect(!cron->holds_quota);
	cr_expect_null(claim->pod_template);
	cr_expect_eq(kinds_scaled("apps", "statefulsets"), kinds_template("StatefulSet"));
	cr_expect_eq(kinds_template("DaemonSet")->pods, KIND_PODS_PER_NODE);
	/* A ReplicaSet a Deployment controls is judged at its Deployment. */
	cr_expect_eq(kinds_template("ReplicaSet")->template_owner, kinds_template("Deployment"));
	cr_expect_null(kinds_template("Deployment")->template_owner);
	cr_expect_str_eq(kinds_hook(pod, "validate.gpugate.io", "ephemeralcontainers")
				 ->webhook->path, "/validate");
	cr_expect_null(kinds_hook(job, NULL, "ephemeralcontainers"));
	cr_expect_eq(kinds_hook(pod, "mutate.gpugate.io", "")->ops, KIND_CREATE);
}

/* Every enum wl_kind but WL_OTHER has a row (WL_TEMPLATE several), and no
 * row is WL_OTHER. */
Test(kinds, every_enum_has_its_row)
{
	size_t n;
	const struct kind_def *all = kinds_all(&n);
	const enum wl_kind kinds[] = {WL_POD, WL_JOB, WL_CLAIM, WL_CLAIM_TEMPLATE, WL_TEMPLATE};

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		bool found = false;

		for (size_t j = 0; j < n; j++)
			found = found || all[j].wl == kinds[i];
		cr_expect(found, "wl_kind %d", kinds[i]);
	}
	for (size_t i = 0; i < n; i++)
		cr_expect_neq(all[i].wl, WL_OTHER, "%s", all[i].kind);
}

Test(kinds, rows_are_unique)
{
	size_t n;
	const struct kind_def *all = kinds_all(&n);

	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++) {
			const struct kind_def *a = &all[i], *b = &all[j];

			cr_expect(strcmp(a->group, b->group) != 0 ||
				  strcmp(a->version, b->version) != 0 ||
				  strcmp(a->kind, b->kind) != 0, "%s twice", a->kind);
			cr_expect(strcmp(a->group, b->group) != 0 ||
				  strcmp(a->resource, b->resource) != 0,
				  "resource %s twice", a->resource);
			cr_expect(a->wl == WL_TEMPLATE || a->wl != b->wl, "%s and %s", a->kind,
				  b->kind);
			cr_expect(a->wl != WL_TEMPLATE || b->wl != WL_TEMPLATE ||
				  strcmp(a->kind, b->kind) != 0, "%s and %s", a->kind, b->kind);
		}
}

Test(kinds, each_row_agrees_with_itself)
{
	size_t n, nw;
	const struct kind_def *all = kinds_all(&n);
	const struct kind_webhook *hooks = kinds_webhooks(&nw);

	for (size_t i = 0; i < n; i++) {
		const struct kind_def *k = &all[i];
		char api[128];
		size_t m = 0;

		snprintf(api, sizeof(api), "%s%s%s", k->group, k->group[0] ? "/" : "",
			 k->version);
		cr_expect_str_eq(k->api_version, api, "%s", k->kind);
		/* No pod template: no pods; the object itself: one pod. */
		while (k->pod_template && k->pod_template[m])
			m++;
		cr_expect_eq(!k->pod_template, k->pods == KIND_PODS_NONE, "%s", k->kind);
		cr_expect_eq(k->pod_template && m == 0, k->pods == KIND_PODS_ONE, "%s", k->kind);
		if (m)
			cr_expect_str_eq(k->pod_template[m - 1], "template", "%s", k->kind);
		cr_expect_eq(k->wl == WL_TEMPLATE, k->pod_template && m > 0 && !k->holds_quota,
			     "%s", k->kind);
		/* A template's owner is another template kind, not owned. */
		cr_expect(!k->template_owner ||
			  (k->wl == WL_TEMPLATE && k->template_owner->wl == WL_TEMPLATE &&
			   k->template_owner != k && !k->template_owner->template_owner),
			  "%s", k->kind);
		cr_expect_not_null(k->hooks, "%s", k->kind);
		cr_expect_not_null(k->hooks->webhook, "%s has no webhook", k->kind);
		for (const struct kind_hook *h = k->hooks; h && h->webhook; h++) {
			bool known = false;

			for (size_t w = 0; w < nw; w++)
				known = known || h->webhook == &hooks[w];
			cr_expect(known, "%s: webhook %s", k->kind, h->webhook->name);
			cr_expect(h->ops && !(h->ops & ~(unsigned)(KIND_CREATE | KIND_UPDATE |
								   KIND_DELETE)),
				  "%s: ops %u", k->kind, h->ops);
			cr_expect_eq(kinds_hook(k, h->webhook->name, h->subresource), h,
				     "%s: %s %s twice", k->kind, h->webhook->name,
				     h->subresource);
		}
	}
	for (size_t w = 0; w < nw; w++)
		cr_expect(strcmp(hooks[w].path, "/mutate") == 0 ||
			  strcmp(hooks[w].path, "/validate") == 0, "%s", hooks[w].name);
}
