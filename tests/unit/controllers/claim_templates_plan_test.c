/*
 * controllers/claim-templates-plan.c: one round of the template keeper,
 * decided from the policy, the namespaces and the templates seen: which
 * templates it creates where, which names are taken, which of its own are
 * garbage and when they go.
 */
#include "controllers/claim-templates-plan.h"
#include "policy/dra-template.h"
#include "policy/policy.h"
#include "tests/unit/test_policy.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#define NOW 1000000

static const char POLICY[] =
	"version: 1\n"
	"flavors:\n"
	"  - name: h100-dra\n"
	"    sharing: exclusive\n"
	"    gpusPerNode: 8\n"
	"    dra:\n"
	"      deviceClassName: gpu.nvidia.com\n"
	"      driver: gpu.nvidia.com\n"
	"      attributes: [\"productName=NVIDIA H100 80GB HBM3\"]\n"
	"  - {name: l4, resource: nvidia.com/gpu.shared, sharing: time-slicing, gpusPerNode: 8}\n"
	"classes:\n"
	"  - {name: train, flavor: h100-dra, gpus: 2, maxGpus: 4}\n"
	"  - {name: one, flavor: h100-dra, gpus: 1}\n"
	"  - {name: shared, flavor: l4, gpus: 1}\n"
	"tenants:\n"
	"  - {name: research, namespaces: [research, \"research-*\"], classes: [train, shared],\n"
	"     quota: [{flavor: h100-dra, nominal: 16}, {flavor: l4, nominal: 4}]}\n"
	"  - {name: all, namespaces: [all], quota: [{flavor: h100-dra, nominal: 16}]}\n";

static struct policy *P;

static void setup(void)
{
	P = test_policy(POLICY);
}

static void teardown(void)
{
	policy_free(P);
}

TestSuite(claim_templates_plan, .init = setup, .fini = teardown);

/* The name of class cls for count n, in a static buffer of 4. */
static const char *name_of(const char *cls, unsigned n)
{
	static char names[4][DRA_TEMPLATE_NAME_MAX];
	static unsigned next;
	char *buf = names[next++ % 4];

	cr_assert(dra_template_name(policy_class_find(P, cls), n, buf, DRA_TEMPLATE_NAME_MAX));
	return buf;
}

static void plan(const struct claim_templates_ns *ns, size_t n_ns,
		 const struct claim_templates_seen *seen, size_t n_seen,
		 struct claim_templates_plan *out)
{
	cr_assert_eq(claim_templates_plan(P, ns, n_ns, seen, n_seen, NOW, out), 0);
	cr_assert_not(out->cut);
}

static bool creates(const struct claim_templates_plan *pl, const char *ns, const char *name)
{
	for (size_t i = 0; i < pl->n_create; i++)
		if (strcmp(pl->create[i].ns, ns) == 0 && strcmp(pl->create[i].name, name) == 0)
			return true;
	return false;
}

Test(claim_templates_plan, every_count_of_every_dra_class_a_tenant_may_use)
{
	const struct claim_templates_ns ns[] = {
		{"research", true}, {"research-a", true}, {"all", true}, {"web", true},
	};
	struct claim_templates_plan pl;

	plan(ns, 4, NULL, 0, &pl);
	/* research and research-a: train 2, 3, 4 (not "one": not its class;
	 * not "shared": no DRA flavor); all (every class): train 2..4, one 1. */
	cr_assert_eq(pl.n_create, 3 + 3 + 4);
	for (unsigned n = 2; n <= 4; n++) {
		cr_assert(creates(&pl, "research", name_of("train", n)));
		cr_assert(creates(&pl, "research-a", name_of("train", n)));
		cr_assert(creates(&pl, "all", name_of("train", n)));
	}
	cr_assert(creates(&pl, "all", name_of("one", 1)));
	cr_assert_not(creates(&pl, "research", name_of("one", 1)));
	cr_assert_eq(pl.create[0].cls, policy_class_find(P, "train"));
	cr_assert_eq(pl.create[0].count, 2);
	cr_assert_eq(pl.n_taken + pl.n_garbage + pl.kept, 0);
	claim_templates_plan_release(&pl);
}

Test(claim_templates_plan, nothing_in_a_namespace_that_is_not_active)
{
	const struct claim_templates_ns ns[] = {{"research", false}};
	const struct claim_templates_seen seen[] = {
		{"research", "gpugate.train.2.stale0", true, NOW - 3600, NULL},
	};
	struct claim_templates_plan pl;

	plan(ns, 1, seen, 1, &pl);
	cr_assert_eq(pl.n_create + pl.n_taken + pl.n_garbage + pl.kept, 0,
		     "a Terminating namespace takes its templates with it");
	claim_templates_plan_release(&pl);
}

Test(claim_templates_plan, kept_and_taken)
{
	const struct claim_templates_ns ns[] = {{"research", true}};
	struct claim_templates_seen seen[] = {
		{"research", NULL, true, NOW - 10, NULL},  /* train 2: gpugate's */
		{"research", NULL, false, NOW - 10, NULL}, /* train 3: a stranger's */
		/* A stranger's of a name gpugate does not want: none of its
		 * business. */
		{"research", "gpugate.nope.1.abcdef", false, NOW - 10, NULL},
		{"research", "my-template", false, NOW - 10, NULL},
		/* In a namespace not listed: nothing. */
		{"elsewhere", NULL, true, NOW - 3600, NULL},
	};
	struct claim_templates_plan pl;

	seen[0].name = name_of("train", 2);
	seen[1].name = name_of("train", 3);
	seen[4].name = name_of("train", 4);
	plan(ns, 1, seen, 5, &pl);
	cr_assert_eq(pl.kept, 1);
	cr_assert_eq(pl.n_taken, 1);
	cr_assert_eq(pl.taken[0], &seen[1]);
	cr_assert_eq(pl.n_create, 1, "only train 4: 3 is taken, never made");
	cr_assert(creates(&pl, "research", name_of("train", 4)));
	cr_assert_eq(pl.n_garbage, 0);
	claim_templates_plan_release(&pl);
}

Test(claim_templates_plan, garbage_a_stale_hash_a_class_left_a_namespace_left)
{
	const struct claim_templates_ns ns[] = {{"research", true}, {"web", true}};
	char stale[DRA_TEMPLATE_NAME_MAX];
	struct claim_templates_seen seen[] = {
		{"research", NULL, true, NOW - 3600, NULL}, /* an earlier dra block */
		{"research", NULL, true, NOW - 3600, NULL}, /* class one: not research's */
		{"web", NULL, true, NOW - 3600, NULL},      /* web is no tenant's */
		{"research", "gpugate.gone.2.abcdef", true, NOW - 3600, NULL}, /* class gone */
		{"research", "gpugate.train.9.abcdef", true, NOW - 3600, NULL}, /* count gone */
		/* Labelled gpugate's, but not gpugate's name: not touched. */
		{"research", "mine", true, NOW - 3600, NULL},
	};
	struct claim_templates_plan pl;

	snprintf(stale, sizeof(stale), "gpugate.train.2.%s",
		 strcmp(policy_class_find(P, "train")->flavor->dra->hash, "aaaaaa") ? "aaaaaa"
										 : "bbbbbb");
	seen[0].name = stale;
	seen[1].name = name_of("one", 1);
	seen[2].name = name_of("train", 2);
	plan(ns, 2, seen, 6, &pl);
	cr_assert_eq(pl.n_garbage, 5);
	for (size_t i = 0; i < 5; i++) {
		cr_assert_eq(pl.garbage[i].t, &seen[i]);
		cr_assert_not(pl.garbage[i].young);
	}
	cr_assert_eq(pl.kept + pl.n_taken, 0);
	cr_assert(creates(&pl, "research", name_of("train", 2)),
		  "the stale one's successor");
	claim_templates_plan_release(&pl);
}

Test(claim_templates_plan, garbage_goes_when_old_and_unused)
{
	const struct claim_templates_ns ns[] = {{"web", true}};
	struct claim_templates_seen seen[] = {
		{"web", "gpugate.train.2.aaaaaa", true, NOW - CLAIM_TEMPLATES_GRACE_S, NULL},
		{"web", "gpugate.train.3.aaaaaa", true, NOW - CLAIM_TEMPLATES_GRACE_S + 1, NULL},
		{"web", "gpugate.train.4.aaaaaa", true, 0, NULL}, /* age unknown */
	};
	const char *const used[] = {"other", "gpugate.train.2.aaaaaa"};
	struct claim_templates_plan pl;

	plan(ns, 1, seen, 3, &pl);
	cr_assert_eq(pl.n_garbage, 3);
	cr_assert_not(pl.garbage[0].young, "65 s old: old enough");
	cr_assert(pl.garbage[1].young, "64 s: kept this round");
	cr_assert(pl.garbage[2].young, "an unknown age is never a guess to delete on");
	cr_assert(claim_templates_deletable(&pl.garbage[0], used, 1));
	cr_assert_not(claim_templates_deletable(&pl.garbage[0], used, 2),
		      "a non-terminal pod names it");
	cr_assert_not(claim_templates_deletable(&pl.garbage[1], NULL, 0));
	cr_assert_not(claim_templates_deletable(&pl.garbage[2], NULL, 0));
	claim_templates_plan_release(&pl);
}

Test(claim_templates_plan, a_policy_without_dra_wants_nothing)
{
	struct policy *p = test_policy(
		"version: 1\n"
		"flavors: [{name: l4, resource: nvidia.com/gpu, sharing: exclusive, "
		"gpusPerNode: 8}]\n"
		"classes: [{name: small, flavor: l4, gpus: 1}]\n"
		"tenants: [{name: t, namespaces: [t], quota: [{flavor: l4, nominal: 1}]}]\n");
	const struct claim_templates_ns ns[] = {{"t", true}};
	const struct claim_templates_seen seen[] = {
		{"t", "gpugate.train.2.aaaaaa", true, NOW - 3600, NULL},
	};
	struct claim_templates_plan pl;

	cr_assert_eq(claim_templates_plan(p, ns, 1, seen, 1, NOW, &pl), 0);
	cr_assert_eq(pl.n_create, 0);
	cr_assert_eq(pl.n_garbage, 1, "a DRA flavor gone: its templates are garbage");
	claim_templates_plan_release(&pl);
	policy_free(p);
}
