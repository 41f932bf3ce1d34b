/*
 * The facts walk (webhook/facts.c): what the isolation rules read of a pod
 * beyond its containers' resources: envFrom, ephemeral containers,
 * tolerations, init containers' restartPolicy.  The rules themselves are
 * tested on these facts in tests/unit/policy/decide_test.c.
 */
#include "base/arena.h"
#include "base/diag.h"
#include "policy/kinds.h"
#include "webhook/facts.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <string.h>

struct got {
	struct arena arena;
	json_t *obj;
	struct workload wl;
	struct diag d;
	int rc;
};

static void extract(struct got *g, enum wl_kind kind, const char *json)
{
	json_error_t e;

	memset(g, 0, sizeof(*g));
	arena_init(&g->arena);
	diag_init(&g->d);
	g->obj = json_loads(json, 0, &e);
	cr_assert_not_null(g->obj, "bad test JSON: %s", e.text);
	g->wl.kind = kind;
	g->wl.def = kind == WL_JOB ? kinds_find("batch", "v1", "Job") : kinds_find("", "v1", "Pod");
	g->rc = facts_extract(g->obj, &g->wl, &g->arena, &g->d);
}

static void release(struct got *g)
{
	arena_release(&g->arena);
	json_decref(g->obj);
}

static void assert_str(const char *got, const char *want)
{
	if (!want)
		cr_assert_null(got, "got \"%s\", want NULL", got);
	else
		cr_assert(got && strcmp(got, want) == 0, "got \"%s\", want \"%s\"",
			  got ? got : "(null)", want);
}

/* The facts of this object are refused with this one message. */
static void assert_malformed(enum wl_kind kind, const char *json,
			     const char *message)
{
	struct got g;

	extract(&g, kind, json);
	cr_assert_eq(g.rc, -1, "accepted: %s", json);
	cr_assert_str_eq(diag_text(&g.d), message);
	release(&g);
}

Test(facts, env_from_entries_with_their_source_and_prefix)
{
	struct got g;
	const struct wl_container *ct;

	extract(&g, WL_POD,
		"{\"spec\":{\"containers\":[{\"name\":\"m\",\"envFrom\":["
		"{\"configMapRef\":{\"name\":\"cm\"}},"
		"{\"secretRef\":{\"name\":\"s\"},\"prefix\":\"APP_\"},"
		"{\"prefix\":\"NV\"}]}]}}");
	cr_assert_eq(g.rc, 0, "%s", diag_text(&g.d));
	ct = &g.wl.pod.containers[0];
	cr_assert_eq(ct->n_env_from, 3);
	cr_assert_eq(ct->env_from[0].source, WL_ENV_CONFIG_MAP);
	assert_str(ct->env_from[0].name, "cm");
	assert_str(ct->env_from[0].prefix, NULL);
	cr_assert_eq(ct->env_from[1].source, WL_ENV_SECRET);
	assert_str(ct->env_from[1].name, "s");
	assert_str(ct->env_from[1].prefix, "APP_");
	cr_assert_eq(ct->env_from[2].source, WL_ENV_OTHER);
	assert_str(ct->env_from[2].name, NULL);
	assert_str(ct->env_from[2].prefix, "NV");
	release(&g);
}

Test(facts, malformed_env_from_is_named)
{
	assert_malformed(WL_POD,
			 "{\"spec\":{\"containers\":[{\"name\":\"m\",\"envFrom\":["
			 "{\"configMapRef\":{\"name\":\"cm\"}},{\"prefix\":7}]}]}}",
			 "spec.containers[0].envFrom[1].prefix is not a string\n");
	assert_malformed(WL_JOB,
			 "{\"spec\":{\"template\":{\"spec\":{\"initContainers\":[{"
			 "\"name\":\"i\",\"envFrom\":{}}]}}}}",
			 "spec.template.spec.initContainers[0].envFrom is not a list\n");
	assert_malformed(WL_POD,
			 "{\"spec\":{\"containers\":[{\"name\":\"m\",\"envFrom\":["
			 "{\"secretRef\":{\"name\":[]}}]}]}}",
			 "spec.containers[0].envFrom[0].secretRef.name is not a string\n");
}

Test(facts, ephemeral_containers_like_containers)
{
	struct got g;
	const struct wl_container *ct;

	extract(&g, WL_POD,
		"{\"spec\":{\"containers\":[{\"name\":\"m\"}],"
		"\"ephemeralContainers\":[{\"name\":\"debugger-1\","
		"\"targetContainerName\":\"m\",\"securityContext\":{\"privileged\":true},"
		"\"env\":[{\"name\":\"A\",\"value\":\"1\"}],"
		"\"envFrom\":[{\"secretRef\":{\"name\":\"s\"}}],"
		"\"volumeMounts\":[{\"name\":\"dev\",\"mountPath\":\"/dev\"}]}]}}");
	cr_assert_eq(g.rc, 0, "%s", diag_text(&g.d));
	cr_assert_eq(g.wl.pod.n_containers, 1);
	cr_assert_eq(g.wl.pod.n_ephemeral_containers, 1);
	ct = &g.wl.pod.ephemeral_containers[0];
	assert_str(ct->name, "debugger-1");
	cr_assert(ct->privileged);
	cr_assert_eq(ct->n_env, 1);
	cr_assert_eq(ct->n_env_from, 1);
	cr_assert_eq(ct->n_mounts, 1);
	assert_str(ct->mounts[0].volume, "dev");
	release(&g);
	assert_malformed(WL_POD, "{\"spec\":{\"ephemeralContainers\":[5]}}",
			 "spec.ephemeralContainers[0] is not an object\n");
}

Test(facts, tolerations_of_a_pod_and_a_job_template)
{
	struct got g;
	const struct wl_toleration *t;

	extract(&g, WL_POD,
		"{\"spec\":{\"tolerations\":[{\"key\":\"nvidia.com/gpu\","
		"\"operator\":\"Exists\",\"effect\":\"NoSchedule\"},"
		"{\"key\":\"dedicated\",\"value\":\"ml\",\"tolerationSeconds\":5},"
		"{\"operator\":\"Exists\"}]}}");
	cr_assert_eq(g.rc, 0, "%s", diag_text(&g.d));
	cr_assert_eq(g.wl.pod.n_tolerations, 3);
	t = g.wl.pod.tolerations;
	assert_str(t[0].key, "nvidia.com/gpu");
	assert_str(t[0].op, "Exists");
	assert_str(t[0].value, NULL);
	assert_str(t[0].effect, "NoSchedule");
	assert_str(t[1].key, "dedicated");
	assert_str(t[1].op, NULL);
	assert_str(t[1].value, "ml");
	assert_str(t[1].effect, NULL);
	assert_str(t[2].key, NULL);
	assert_str(t[2].op, "Exists");
	release(&g);
	extract(&g, WL_JOB,
		"{\"spec\":{\"template\":{\"spec\":{\"tolerations\":[{\"key\":\"k\","
		"\"operator\":\"Equal\",\"value\":\"v\"}]}}}}");
	cr_assert_eq(g.rc, 0, "%s", diag_text(&g.d));
	cr_assert_eq(g.wl.pod.n_tolerations, 1);
	assert_str(g.wl.pod.tolerations[0].value, "v");
	release(&g);
}

Test(facts, tolerations_of_the_wrong_type_are_left_to_the_applier)
{
	struct got g;

	/* apply_plan() reports a tolerations list it cannot extend. */
	extract(&g, WL_POD, "{\"spec\":{\"tolerations\":{}}}");
	cr_assert_eq(g.rc, 0, "%s", diag_text(&g.d));
	cr_assert_eq(g.wl.pod.n_tolerations, 0);
	release(&g);
	/* An entry that is not an object is left out; a field that is not a
	 * string reads as absent. */
	extract(&g, WL_POD,
		"{\"spec\":{\"tolerations\":[7,{\"key\":1,\"operator\":\"Exists\"}]}}");
	cr_assert_eq(g.rc, 0, "%s", diag_text(&g.d));
	cr_assert_eq(g.wl.pod.n_tolerations, 1);
	assert_str(g.wl.pod.tolerations[0].key, NULL);
	assert_str(g.wl.pod.tolerations[0].op, "Exists");
	release(&g);
}

Test(facts, restart_policy_of_init_containers)
{
	struct got g;

	extract(&g, WL_POD,
		"{\"spec\":{\"initContainers\":[{\"name\":\"proxy\",\"restartPolicy\":"
		"\"Always\"},{\"name\":\"setup\"}],\"containers\":[{\"name\":\"m\"}]}}");
	cr_assert_eq(g.rc, 0, "%s", diag_text(&g.d));
	cr_assert_eq(g.wl.pod.n_init_containers, 2);
	assert_str(g.wl.pod.init_containers[0].restart_policy, "Always");
	assert_str(g.wl.pod.init_containers[1].restart_policy, NULL);
	assert_str(g.wl.pod.containers[0].restart_policy, NULL);
	release(&g);
	assert_malformed(WL_POD,
			 "{\"spec\":{\"initContainers\":[{\"name\":\"p\","
			 "\"restartPolicy\":1}]}}",
			 "spec.initContainers[0].restartPolicy is not a string\n");
}
