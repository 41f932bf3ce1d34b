/* controllers/gang-groups.c: which Jobs get a Workload and a PodGroup
 * (route podgroup), and the two objects, without a server. */
#include "controllers/gang-groups.h"
#include "policy/gang.h"
#include "policy/policy.h"
#include "tests/unit/test_policy.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char policy_yaml[] =
	"version: 1\n"
	"flavors:\n"
	"  - {name: h100, resource: nvidia.com/gpu, sharing: exclusive, gpusPerNode: 8}\n"
	"classes:\n"
	"  - {name: train, flavor: h100, gpus: 8, gang: true,\n"
	"     topology: {key: nvidia.com/gpu.clique, mode: required}}\n"
	"  - {name: loose, flavor: h100, gpus: 8, gang: true,\n"
	"     topology: {key: nvidia.com/gpu.clique, mode: preferred}}\n"
	"tenants:\n"
	"  - {name: a, namespaces: [a], quota: [{flavor: h100, nominal: 64}]}\n";

static json_t *parse(const char *json)
{
	json_error_t e;
	json_t *v = json_loads(json, 0, &e);

	cr_assert_not_null(v, "bad test JSON: %s: %s", e.text, json);
	return v;
}

/* A Job as the API has it after /mutate chose route `route`. */
static char *job(const char *name, const char *uid, const char *route, int par,
		 int comp, const char *cls, const char *extra_status)
{
	char *out = malloc(2048);
	char comp_field[64] = "";

	if (comp >= 0)
		snprintf(comp_field, sizeof(comp_field), "\"completions\":%d,", comp);
	snprintf(out, 2048,
		 "{\"apiVersion\":\"batch/v1\",\"kind\":\"Job\",\"metadata\":{\"name\":"
		 "\"%s\",\"namespace\":\"a\",\"uid\":\"%s\",\"labels\":"
		 "{\"gpugate.io/gang\":\"g-%s\"},\"annotations\":"
		 "{\"gpugate.io/gang-route\":\"%s\"}},\"spec\":{\"parallelism\":%d,%s"
		 "\"template\":{\"metadata\":{\"labels\":{\"gpugate.io/gang\":\"g-%s\","
		 "\"gpugate.io/class\":\"%s\"}},\"spec\":{\"schedulingGroup\":"
		 "{\"podGroupName\":\"g-%s\"},\"containers\":[{\"name\":\"c\"}]}}},"
		 "\"status\":{%s}}",
		 name, uid, name, route, par, comp_field, name, cls, name,
		 extra_status ? extra_status : "");
	return out;
}

static bool want_of(const char *json, const struct policy *p, unsigned served,
		    struct gang_groups_want *w, json_t **keep)
{
	*keep = parse(json);
	return gang_groups_want(*keep, p, served, w);
}

Test(gang_groups, which_jobs_want_objects)
{
	struct policy *p = test_policy(policy_yaml);
	const unsigned all = GANG_SERVES_KNOWN | GANG_SERVES_CONTROLLER |
			     GANG_SERVES_PODGROUP | GANG_SERVES_TOPOLOGY;
	struct gang_groups_want w;
	json_t *o;
	char *j;

	j = job("j1", "u1", "podgroup", 4, 4, "train", NULL);
	cr_assert(want_of(j, p, all, &w, &o));
	cr_expect_str_eq(w.namespace, "a");
	cr_expect_str_eq(w.job, "j1");
	cr_expect_str_eq(w.uid, "u1");
	cr_expect_str_eq(w.gang, "g-j1");
	cr_expect_eq(w.min_count, 4);
	cr_expect_str_eq(w.topology_key, "nvidia.com/gpu.clique", "required, kept");
	cr_expect_null(w.priority_class);
	json_decref(o);
	free(j);

	j = job("j1", "u1", "podgroup", 4, 4, "train", NULL);
	cr_assert(want_of(j, p, all & ~GANG_SERVES_TOPOLOGY, &w, &o));
	cr_expect_null(w.topology_key, "the apiserver drops it: not written");
	json_decref(o);
	cr_assert(want_of(j, NULL, all, &w, &o));
	cr_expect_null(w.topology_key, "no policy: no class");
	json_decref(o);
	free(j);

	j = job("j2", "u2", "podgroup", 4, 4, "loose", NULL);
	cr_assert(want_of(j, p, all, &w, &o));
	cr_expect_null(w.topology_key, "preferred: no constraint");
	json_decref(o);
	free(j);

	j = job("j3", "u3", "podgroup", 4, 3, "nope", NULL);
	cr_assert(want_of(j, p, all, &w, &o));
	cr_expect_eq(w.min_count, 3, "min(parallelism, completions)");
	cr_expect_null(w.topology_key, "an unknown class");
	json_decref(o);
	free(j);

	j = job("j4", "u4", "podgroup", 3, -1, "train", NULL);
	cr_assert(want_of(j, p, all, &w, &o));
	cr_expect_eq(w.min_count, 3, "no completions: parallelism");
	json_decref(o);
	free(j);

	/* Not wanted. */
	j = job("j5", "u5", "gates", 4, 4, "train", NULL);
	cr_expect_not(want_of(j, p, all, &w, &o), "another route");
	json_decref(o);
	free(j);
	j = job("j6", "u6", "workload", 4, 4, "train", NULL);
	cr_expect_not(want_of(j, p, all, &w, &o), "the Job controller's");
	json_decref(o);
	free(j);
	j = job("j7", "u7", "podgroup", 4, 1, "train", NULL);
	cr_expect_not(want_of(j, p, all, &w, &o), "a gang of one");
	json_decref(o);
	free(j);
	j = job("j8", "u8", "podgroup", 4, 4, "train",
		"\"conditions\":[{\"type\":\"Complete\",\"status\":\"True\"}]");
	cr_expect_not(want_of(j, p, all, &w, &o), "finished");
	json_decref(o);
	free(j);
	j = job("j9", "u9", "podgroup", 4, 4, "train",
		"\"conditions\":[{\"type\":\"Failed\",\"status\":\"True\"}]");
	cr_expect_not(want_of(j, p, all, &w, &o), "failed");
	json_decref(o);
	free(j);
	j = job("j10", "u10", "podgroup", 4, 4, "train",
		"\"conditions\":[{\"type\":\"Suspended\",\"status\":\"True\"},"
		"{\"type\":\"Complete\",\"status\":\"False\"}]");
	cr_expect(want_of(j, p, all, &w, &o), "suspended is not finished");
	json_decref(o);
	free(j);
	cr_expect_not(want_of("{\"metadata\":{\"name\":\"x\",\"namespace\":\"a\","
			      "\"uid\":\"u\",\"annotations\":{\"gpugate.io/gang-route\":"
			      "\"podgroup\"}},\"spec\":{\"parallelism\":2}}",
			      p, all, &w, &o),
		      "no gang id on the template");
	json_decref(o);
	cr_expect_not(want_of("{\"metadata\":{\"name\":\"x\",\"namespace\":\"a\","
			      "\"uid\":\"u\",\"deletionTimestamp\":\"2026-12-05T00:00:00Z\","
			      "\"annotations\":{\"gpugate.io/gang-route\":\"podgroup\"}},"
			      "\"spec\":{\"parallelism\":2,\"template\":{\"metadata\":"
			      "{\"labels\":{\"gpugate.io/gang\":\"g-x\"}}}}}",
			      p, all, &w, &o),
		      "being deleted");
	json_decref(o);
	policy_free(p);
}

Test(gang_groups, the_plan_skips_jobs_whose_podgroup_is_ours)
{
	struct policy *p = test_policy(policy_yaml);
	char *a = job("j1", "u1", "podgroup", 2, 2, "train", NULL);
	char *b = job("j2", "u2", "podgroup", 2, 2, "train", NULL);
	char *c = job("j3", "u3", "gates", 2, 2, "train", NULL);
	char *d = job("j4", "u4", "podgroup", 2, 2, "train", NULL);
	char list[8192];
	json_t *jobs, *pgs;
	struct gang_groups_want w[8];
	long n;

	snprintf(list, sizeof(list), "{\"kind\":\"JobList\",\"items\":[%s,%s,%s,%s]}", a,
		 b, c, d);
	jobs = parse(list);
	n = gang_groups_plan(jobs, NULL, p, GANG_SERVES_PODGROUP, w, 8);
	cr_assert_eq(n, 3, "no PodGroups: every podgroup Job");
	cr_expect_str_eq(w[0].job, "j1");
	cr_expect_str_eq(w[1].job, "j2");
	cr_expect_str_eq(w[2].job, "j4");
	/* j2's exists (ours); a PodGroup named j4's gang but owned by no Job,
	 * and one with a non-controller reference to u4: j4 still wants. */
	pgs = parse("{\"kind\":\"PodGroupList\",\"items\":["
		    "{\"metadata\":{\"name\":\"g-j2\",\"namespace\":\"a\","
		    "\"ownerReferences\":[{\"kind\":\"Job\",\"uid\":\"u2\","
		    "\"controller\":true}]}},"
		    "{\"metadata\":{\"name\":\"g-j4\",\"namespace\":\"a\"}},"
		    "{\"metadata\":{\"name\":\"other\",\"namespace\":\"a\","
		    "\"ownerReferences\":[{\"kind\":\"Job\",\"uid\":\"u4\"}]}}]}");
	n = gang_groups_plan(jobs, pgs, p, GANG_SERVES_PODGROUP, w, 8);
	cr_assert_eq(n, 2);
	cr_expect_str_eq(w[0].job, "j1");
	cr_expect_str_eq(w[1].job, "j4");
	n = gang_groups_plan(jobs, pgs, p, GANG_SERVES_PODGROUP, w, 1);
	cr_expect_eq(n, 1, "at most max");
	n = gang_groups_plan(NULL, pgs, p, GANG_SERVES_PODGROUP, w, 8);
	cr_expect_eq(n, 0, "no Jobs");
	json_decref(pgs);
	json_decref(jobs);
	free(a);
	free(b);
	free(c);
	free(d);
	policy_free(p);
}

static void expect_json(json_t *got, const char *want)
{
	json_t *exp = parse(want);
	char *dump = json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS);

	cr_assert_not_null(got);
	cr_expect(json_equal(got, exp), "got %s", dump);
	free(dump);
	json_decref(exp);
	json_decref(got);
}

#define META                                                                     \
	"\"metadata\":{\"name\":\"g-3f2a\",\"namespace\":\"a\",\"labels\":"       \
	"{\"app.kubernetes.io/managed-by\":\"gpugate\"},\"ownerReferences\":"     \
	"[{\"apiVersion\":\"batch/v1\",\"kind\":\"Job\",\"name\":\"train\","      \
	"\"uid\":\"u-1\",\"controller\":true,\"blockOwnerDeletion\":false}]}"

Test(gang_groups, the_workload_and_the_podgroup)
{
	struct gang_groups_want w = {.namespace = "a", .job = "train", .uid = "u-1",
				     .gang = "g-3f2a", .min_count = 3};

	expect_json(gang_groups_workload(&w),
		    "{\"apiVersion\":\"scheduling.k8s.io/v1beta1\",\"kind\":\"Workload\","
		    META ",\"spec\":{\"controllerRef\":{\"apiGroup\":\"batch\",\"kind\":"
		    "\"Job\",\"name\":\"train\"},\"podGroupTemplates\":[{\"name\":"
		    "\"gang\",\"schedulingPolicy\":{\"gang\":{\"minCount\":3}}}]}}");
	expect_json(gang_groups_podgroup(&w),
		    "{\"apiVersion\":\"scheduling.k8s.io/v1beta1\",\"kind\":\"PodGroup\","
		    META ",\"spec\":{\"workloadRef\":{\"workloadName\":\"g-3f2a\","
		    "\"templateName\":\"gang\"},\"schedulingPolicy\":{\"gang\":"
		    "{\"minCount\":3}}}}");
	w.topology_key = "nvidia.com/gpu.clique";
	w.priority_class = "training";
	expect_json(gang_groups_workload(&w),
		    "{\"apiVersion\":\"scheduling.k8s.io/v1beta1\",\"kind\":\"Workload\","
		    META ",\"spec\":{\"controllerRef\":{\"apiGroup\":\"batch\",\"kind\":"
		    "\"Job\",\"name\":\"train\"},\"podGroupTemplates\":[{\"name\":"
		    "\"gang\",\"schedulingPolicy\":{\"gang\":{\"minCount\":3}},"
		    "\"schedulingConstraints\":{\"topology\":[{\"key\":"
		    "\"nvidia.com/gpu.clique\"}]},\"priorityClassName\":\"training\"}]}}");
	expect_json(gang_groups_podgroup(&w),
		    "{\"apiVersion\":\"scheduling.k8s.io/v1beta1\",\"kind\":\"PodGroup\","
		    META ",\"spec\":{\"workloadRef\":{\"workloadName\":\"g-3f2a\","
		    "\"templateName\":\"gang\"},\"schedulingPolicy\":{\"gang\":"
		    "{\"minCount\":3}},\"schedulingConstraints\":{\"topology\":[{\"key\":"
		    "\"nvidia.com/gpu.clique\"}]},\"priorityClassName\":\"training\"}}");
}

Test(gang_groups, ours_is_the_controller_reference)
{
	json_t *o = parse("{\"metadata\":{\"ownerReferences\":["
			  "{\"kind\":\"Workload\",\"uid\":\"w\"},"
			  "{\"kind\":\"Job\",\"uid\":\"u-1\",\"controller\":true}]}}");
	json_t *not = parse("{\"metadata\":{\"ownerReferences\":["
			    "{\"kind\":\"Job\",\"uid\":\"u-1\",\"controller\":false}]}}");

	cr_expect(gang_groups_ours(o, "u-1"));
	cr_expect_not(gang_groups_ours(o, "u-2"), "another Job's");
	cr_expect_not(gang_groups_ours(o, NULL));
	cr_expect_not(gang_groups_ours(not, "u-1"), "not its controller");
	cr_expect_not(gang_groups_ours(NULL, "u-1"));
	json_decref(o);
	json_decref(not);
}
