/*
 * Warnings of `gpugate check` (policy/lint.c), asserted verbatim with their
 * lines: a policy that has them is still valid.
 */
#include "base/diag.h"
#include "policy/policy.h"

#include <criterion/criterion.h>
#include <string.h>

#define FLAVOR                                                             \
	"version: 1\n"                                                     \
	"flavors:\n"                                                       \
	"  - {name: h100, resource: nvidia.com/gpu, sharing: exclusive, "  \
	"gpusPerNode: 8}\n"                                                \
	"  - {name: l4, resource: nvidia.com/gpu.shared, sharing: mps, "   \
	"gpusPerNode: 8}\n"                                                \
	"classes: []\n"                                                    \
	"tenants:\n"
/* FLAVOR ends at line 6. */

static void expect_warnings(const char *yaml, const char *want)
{
	struct policy *p = NULL;
	struct diag d, w;

	diag_init(&d);
	diag_init(&w);
	cr_assert_eq(policy_parse_warn("t.yaml", yaml, strlen(yaml), &p, &d, &w), 0,
		     "%s", diag_text(&d));
	cr_expect_str_eq(diag_text(&w), want);
	policy_free(p);
}

Test(lint, borrowing_limit_the_cohort_can_never_lend)
{
	expect_warnings(
		FLAVOR
		"  - name: a\n"
		"    namespaces: [a]\n"
		"    cohort: lab\n"
		"    quota:\n"
		"      - {flavor: h100, nominal: 4, borrowingLimit: 16}\n"
		"      - flavor: l4\n"
		"        nominal: 0\n"
		"        borrowingLimit: 1\n"
		"  - name: b\n"
		"    namespaces: [b]\n"
		"    cohort: lab\n"
		"    quota: [{flavor: h100, nominal: 8, lendingLimit: 2, borrowingLimit: 7}]\n"
		"  - name: c\n"
		"    namespaces: [c]\n"
		"    cohort: lab\n"
		"    quota: [{flavor: h100, nominal: 3}]\n"
		"  - name: d\n"
		"    namespaces: [d]\n"
		"    cohort: other\n"
		"    quota: [{flavor: h100, nominal: 100, lendingLimit: 100}]\n",
		/* a: b lends 2, c all its 3 (d is in another cohort);
		 * l4: nobody has any; b: a's 4 and c's 3 make its 7 */
		"t.yaml:11: warning: tenant \"a\": quota h100: borrowingLimit 16 is "
		"more than cohort \"lab\" can ever lend: at most 5 (the other "
		"members' lendingLimit, else their nominal quota)\n"
		"t.yaml:14: warning: tenant \"a\": quota l4: borrowingLimit 1 is more "
		"than cohort \"lab\" can ever lend: at most 0 (the other members' "
		"lendingLimit, else their nominal quota)\n");
}

Test(lint, none_when_the_cohort_can_lend_the_limit)
{
	expect_warnings(FLAVOR
			"  - name: a\n"
			"    namespaces: [a]\n"
			"    cohort: lab\n"
			"    quota: [{flavor: h100, nominal: 4, borrowingLimit: 3}]\n"
			"  - name: b\n"
			"    namespaces: [b]\n"
			"    cohort: lab\n"
			"    quota: [{flavor: h100, nominal: 8, lendingLimit: 3}]\n"
			"  - name: c\n"
			"    namespaces: [c]\n"
			"    cohort: lab\n"
			"    quota: [{flavor: h100, nominal: 1}]\n",
			"");
}

Test(lint, none_for_an_invalid_policy)
{
	const char *yaml = FLAVOR "  - name: a\n    namespaces: [a]\n    cohort: lab\n"
				  "    quota: [{flavor: h100, nominal: 4, borrowingLimit: 16}]\n"
				  "  - {name: a, namespaces: [b]}\n";
	struct policy *p = NULL;
	struct diag d, w;

	diag_init(&d);
	diag_init(&w);
	cr_assert_eq(policy_parse_warn("t.yaml", yaml, strlen(yaml), &p, &d, &w), -1);
	cr_expect_str_eq(diag_text(&d),
			 "t.yaml:11: duplicate tenant \"a\" (first defined at line 7)\n");
	cr_expect_str_eq(diag_text(&w), "");
	cr_expect_null(p);
}

Test(lint, label_keys_outside_gpugate_io_need_the_webhooks_told)
{
	expect_warnings("version: 1\n"
			"settings:\n"
			"  classLabel: example.com/gpu-class\n"
			"  gpusLabel: gpugate.io/count\n"
			"flavors: []\nclasses: []\ntenants: []\n",
			"t.yaml:3: warning: settings: classLabel "
			"\"example.com/gpu-class\" is outside gpugate.io/: the webhooks "
			"are sent a pod for this label only when it is listed in their "
			"matchConditions (Helm: "
			"webhook.extraLabelKeys=[example.com/gpu-class])\n"
			"t.yaml:4: warning: settings: gpusLabel \"gpugate.io/count\" is "
			"not gpugate.io/gpus: the webhooks are sent a pod's update that "
			"changes this label only when it is listed in their "
			"matchConditions (Helm: webhook.extraLabelKeys=[gpugate.io/count])\n");
}

Test(lint, the_default_label_keys_need_nothing)
{
	expect_warnings("version: 1\n"
			"settings:\n"
			"  classLabel: gpugate.io/class\n"
			"  gpusLabel: gpugate.io/gpus\n"
			"flavors: []\nclasses: []\ntenants: []\n",
			"");
}
