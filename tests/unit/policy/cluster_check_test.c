/* A valid policy held against what a cluster has (policy/cluster-check.c). */
#include "base/diag.h"
#include "policy/cluster-check.h"
#include "policy/policy.h"
#include "tests/unit/test_policy.h"

#include <criterion/criterion.h>

static const char POLICY[] =
	"version: 1\n"
	"flavors:\n"
	"  - {name: h100, resource: nvidia.com/gpu, sharing: exclusive, gpusPerNode: 8}\n"
	"classes:\n"
	"  - {name: big, flavor: h100, gpus: 8, priorityClassName: training}\n"
	"  - {name: urgent, flavor: h100, gpus: 1, priorityClassName: critical}\n"
	"  - {name: plain, flavor: h100, gpus: 1}\n"
	"  - {name: also-big, flavor: h100, gpus: 4, priorityClassName: training}\n"
	"tenants: [{name: t, namespaces: [t]}]\n";

static struct policy *parse(void)
{
	return test_policy(POLICY);
}

Test(cluster_check, warns_about_each_class_whose_priority_class_is_missing)
{
	static const char *const has[] = {"system-cluster-critical", "critical",
					  "system-node-critical"};
	struct policy *p = parse();
	struct diag w;

	diag_init(&w);
	cr_assert_eq(cluster_check_priority_classes(p, has, 3, &w), 2);
	cr_assert_str_eq(
		diag_text(&w),
		"t.yaml: warning: class \"big\": PriorityClass \"training\" does not "
		"exist in the cluster, and the apiserver refuses pods that name it; "
		"create it (docs/operations.md, \"PriorityClasses\") or remove "
		"priorityClassName from the class\n"
		"t.yaml: warning: class \"also-big\": PriorityClass \"training\" does "
		"not exist in the cluster, and the apiserver refuses pods that name "
		"it; create it (docs/operations.md, \"PriorityClasses\") or remove "
		"priorityClassName from the class\n");
	policy_free(p);
}

Test(cluster_check, nothing_to_say_when_every_priority_class_exists)
{
	static const char *const has[] = {"training", "critical"};
	struct policy *p = parse();
	struct diag w;

	diag_init(&w);
	cr_assert_eq(cluster_check_priority_classes(p, has, 2, &w), 0);
	cr_assert_eq(diag_count(&w), 0);
	cr_assert_eq(cluster_check_priority_classes(p, NULL, 0, &w), 3,
		     "a cluster without any: all three named");
	policy_free(p);
}
