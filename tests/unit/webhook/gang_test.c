/*
 * Gang start at the door (SPEC section 9, policy/gang.h): the route a Job
 * of a gang class takes for what the cluster serves, what each route
 * writes (through the handler, as the apiserver sees it: the patch), that
 * a Job someone else starts is left alone, and what /validate refuses of
 * a gang's Job and pods.
 */
#include "base/base64.h"
#include "base/diag.h"
#include "base/log.h"
#include "policy/gang.h"
#include "policy/policy.h"
#include "webhook/handler.h"
#include "webhook/holder.h"
#include "webhook/patch.h"
#include "tests/unit/test_policy.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GANG_POLICY                                                          \
	"version: 1\n"                                                       \
	"%s"                                                                 \
	"flavors:\n"                                                         \
	"  - name: h100\n"                                                   \
	"    resource: nvidia.com/gpu\n"                                     \
	"    sharing: exclusive\n"                                           \
	"    nodeSelector: [\"nvidia.com/gpu.product=H100\"]\n"              \
	"    gpusPerNode: 8\n"                                               \
	"classes:\n"                                                         \
	"  - name: train-large\n"                                            \
	"    flavor: h100\n"                                                 \
	"    gpus: 8\n"                                                      \
	"    gang: true\n"                                                   \
	"    topology: {key: nvidia.com/gpu.clique, mode: required}\n"       \
	"  - name: train-loose\n"                                            \
	"    flavor: h100\n"                                                 \
	"    gpus: 8\n"                                                      \
	"    gang: true\n"                                                   \
	"  - name: train-split\n"                                            \
	"    flavor: h100\n"                                                 \
	"    gpus: 8\n"                                                      \
	"tenants:\n"                                                         \
	"  - name: research\n"                                               \
	"    namespaces: [research]\n"                                       \
	"    quota:\n"                                                       \
	"      - {flavor: h100, nominal: 64}\n"

#define ALL_SERVED                                                           \
	(GANG_SERVES_KNOWN | GANG_SERVES_JOB_SCHEDULING | GANG_SERVES_PODGROUP | \
	 GANG_SERVES_TOPOLOGY | GANG_SERVES_CONTROLLER)

struct gang_env {
	struct holder *pol;
	_Atomic unsigned served;
	struct handler h;
};

static void env_init(struct gang_env *e, const char *settings, unsigned served)
{
	char yaml[4096];

	log_set_level(LOG_ERROR);
	snprintf(yaml, sizeof(yaml), GANG_POLICY, settings);
	e->pol = holder_new(test_policy(yaml));
	cr_assert_not_null(e->pol);
	e->served = served;
	e->h = (struct handler){.policy = e->pol, .gang_served = &e->served,
			       .self_user = "system:admin",
			       .self_namespace = "gpugate"};
}

struct answer {
	bool allowed;
	char message[1024];
	json_t *patched; /* /mutate: the object after the patch (owned) */
};

/* Sends a review of kind `kind` ("Job" or "Pod") to ep, as `user`. */
static void admit(struct gang_env *e, enum handler_endpoint ep, const char *kind,
		  const char *op, const char *user, const char *object,
		  const char *old, struct answer *a)
{
	struct handler_reply r;
	json_t *resp, *out, *patch, *obj;
	const char *p64, *msg;
	char *review, *plain = NULL;
	size_t n;
	struct diag d;

	cr_assert_gt(asprintf(&review,
			      "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":"
			      "\"AdmissionReview\",\"request\":{\"uid\":\"u-g\","
			      "\"kind\":{\"group\":\"%s\",\"version\":\"v1\",\"kind\":"
			      "\"%s\"},\"namespace\":\"research\",\"operation\":\"%s\","
			      "\"userInfo\":{\"username\":\"%s\",\"groups\":[\"g\"]},"
			      "\"object\":%s%s%s,\"dryRun\":false}}",
			      strcmp(kind, "Job") == 0 ? "batch" : "", kind, op, user,
			      object, old ? ",\"oldObject\":" : "", old ? old : ""),
		     0);
	handler_admit(&e->h, ep, review, strlen(review), &r);
	free(review);
	cr_assert_eq(r.status, 200, "%d %s", r.status, r.body);
	resp = json_loadb(r.body, r.len, 0, NULL);
	free(r.body);
	cr_assert_not_null(resp);
	out = json_object_get(resp, "response");
	memset(a, 0, sizeof(*a));
	a->allowed = json_is_true(json_object_get(out, "allowed"));
	msg = json_string_value(
		json_object_get(json_object_get(out, "status"), "message"));
	snprintf(a->message, sizeof(a->message), "%s", msg ? msg : "");
	p64 = json_string_value(json_object_get(out, "patch"));
	obj = json_loads(object, 0, NULL);
	cr_assert_not_null(obj);
	if (p64) {
		cr_assert_eq(base64_decode(p64, strlen(p64), BASE64_STRICT, &plain, &n), 0);
		patch = json_loadb(plain, n, 0, NULL);
		free(plain);
		diag_init(&d);
		a->patched = patch_apply(obj, patch, &d);
		cr_assert_not_null(a->patched, "%s", diag_text(&d));
		json_decref(patch);
		json_decref(obj);
	} else {
		a->patched = obj;
	}
	json_decref(resp);
}

#define JOB(name, par, comp, tmpl_spec_extra, labels, ann)                       \
	"{\"apiVersion\":\"batch/v1\",\"kind\":\"Job\",\"metadata\":{\"name\":"  \
	"\"" name "\",\"namespace\":\"research\",\"labels\":{" labels "}"         \
	ann "},\"spec\":{\"parallelism\":" par ",\"completions\":" comp           \
	",\"template\":{\"metadata\":{},\"spec\":{\"restartPolicy\":\"Never\","   \
	"\"containers\":[{\"name\":\"m\",\"image\":\"x\"}]" tmpl_spec_extra "}}}}"

#define CLASS(c) "\"gpugate.io/class\":\"" c "\""

static const char *at(const json_t *o, const char *ptr)
{
	json_t *v = (json_t *)o;
	char buf[256], *save = NULL, *tok;

	snprintf(buf, sizeof(buf), "%s", ptr);
	for (tok = strtok_r(buf, "/", &save); tok && v; tok = strtok_r(NULL, "/", &save)) {
		for (char *c = tok; *c; c++)
			if (*c == '~')
				*c = '/';
		v = json_is_array(v) ? json_array_get(v, (size_t)atoi(tok))
				     : json_object_get(v, tok);
	}
	if (!v)
		return NULL;
	if (json_is_string(v))
		return json_string_value(v);
	if (json_is_integer(v)) {
		static char num[32];

		snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(v));
		return num;
	}
	return "<value>";
}

static void mutate_job(struct gang_env *e, const char *job, struct answer *a)
{
	admit(e, HANDLER_MUTATE, "Job", "CREATE", "alice", job, NULL, a);
	cr_assert(a->allowed, "%s", a->message);
}

/* Mutating what /mutate made changes nothing (a re-invocation). */
static void expect_stable(struct gang_env *e, const json_t *once)
{
	struct answer b;
	char *text = json_dumps(once, JSON_COMPACT);

	admit(e, HANDLER_MUTATE, "Job", "CREATE", "alice", text, NULL, &b);
	free(text);
	cr_assert(json_equal(b.patched, once), "a second /mutate changed the Job");
	json_decref(b.patched);
}

Test(gang, workload_route_writes_the_job_scheduling_and_topology)
{
	struct gang_env e;
	struct answer a;

	env_init(&e, "", ALL_SERVED);
	mutate_job(&e, JOB("t", "3", "3", "", CLASS("train-large"), ""), &a);
	cr_assert_str_eq(at(a.patched, "spec/scheduling/schedulingPolicy/gang/minCount"), "3");
	cr_assert_str_eq(at(a.patched,
			    "spec/scheduling/schedulingConstraints/topology/0/key"),
			 "nvidia.com/gpu.clique");
	cr_assert_str_eq(at(a.patched, "metadata/annotations/gpugate.io~gang-route"),
			 "workload");
	cr_assert_str_eq(at(a.patched,
			    "spec/template/metadata/annotations/gpugate.io~gang-route"),
			 "workload");
	cr_assert_null(at(a.patched, "spec/template/spec/schedulingGates"));
	cr_assert(strstr(at(a.patched, "metadata/annotations/gpugate.io~decision"),
			 "; gang start: workload"));
	expect_stable(&e, a.patched);
	json_decref(a.patched);

	/* Without the topology gate in the apiserver, no constraint: the
	 * pods' required affinity keeps them in one clique. */
	e.served = ALL_SERVED & ~GANG_SERVES_TOPOLOGY;
	mutate_job(&e, JOB("t", "3", "3", "", CLASS("train-large"), ""), &a);
	cr_assert_null(at(a.patched, "spec/scheduling/schedulingConstraints"));
	cr_assert_not_null(at(a.patched, "spec/template/spec/affinity/podAffinity"));
	json_decref(a.patched);
	holder_free(e.pol);
}

Test(gang, gates_route_gates_the_template)
{
	struct gang_env e;
	struct answer a;

	env_init(&e, "", GANG_SERVES_KNOWN | GANG_SERVES_CONTROLLER);
	mutate_job(&e, JOB("t", "3", "3", "", CLASS("train-large"), ""), &a);
	cr_assert_str_eq(at(a.patched, "spec/template/spec/schedulingGates/0/name"),
			 GANG_GATE);
	cr_assert_null(at(a.patched, "spec/scheduling"));
	cr_assert_str_eq(at(a.patched, "metadata/annotations/gpugate.io~gang-route"),
			 "gates");
	expect_stable(&e, a.patched);
	json_decref(a.patched);

	/* Before the probe answered, gpugate's controller is still there. */
	e.served = GANG_SERVES_CONTROLLER;
	mutate_job(&e, JOB("t", "3", "3", "", CLASS("train-loose"), ""), &a);
	cr_assert_str_eq(at(a.patched, "spec/template/spec/schedulingGates/0/name"),
			 GANG_GATE);
	json_decref(a.patched);
	holder_free(e.pol);
}

Test(gang, podgroup_route_names_the_gang_id)
{
	struct gang_env e;
	struct answer a;
	const char *id;

	env_init(&e, "", GANG_SERVES_KNOWN | GANG_SERVES_PODGROUP | GANG_SERVES_CONTROLLER);
	mutate_job(&e, JOB("t", "4", "4", "", CLASS("train-loose"), ""), &a);
	id = at(a.patched, "spec/template/metadata/labels/gpugate.io~gang");
	cr_assert_not_null(id);
	cr_assert_str_eq(at(a.patched, "spec/template/spec/schedulingGroup/podGroupName"), id);
	cr_assert_str_eq(at(a.patched, "metadata/annotations/gpugate.io~gang-route"),
			 "podgroup");
	expect_stable(&e, a.patched);
	json_decref(a.patched);
	holder_free(e.pol);
}

Test(gang, auto_takes_gates_when_not_all_pods_run_at_once)
{
	struct gang_env e;
	struct answer a;

	env_init(&e, "", ALL_SERVED);
	/* 6 completions, 3 at a time: the last pods would wait for a
	 * minCount of 3 on the scheduler's routes. */
	mutate_job(&e, JOB("t", "3", "6", "", CLASS("train-large"), ""), &a);
	cr_assert_str_eq(at(a.patched, "metadata/annotations/gpugate.io~gang-route"),
			 "gates");
	json_decref(a.patched);
	holder_free(e.pol);
}

Test(gang, settings_pick_the_route)
{
	struct gang_env e;
	struct answer a;

	env_init(&e, "settings:\n  gangStart: gates\n", ALL_SERVED);
	mutate_job(&e, JOB("t", "3", "3", "", CLASS("train-large"), ""), &a);
	cr_assert_str_eq(at(a.patched, "metadata/annotations/gpugate.io~gang-route"),
			 "gates");
	json_decref(a.patched);
	holder_free(e.pol);

	env_init(&e, "settings:\n  gangStart: 'off'\n", ALL_SERVED);
	mutate_job(&e, JOB("t", "3", "3", "", CLASS("train-large"), ""), &a);
	cr_assert_null(at(a.patched, "metadata/annotations/gpugate.io~gang-route"));
	cr_assert(strstr(at(a.patched, "metadata/annotations/gpugate.io~decision"),
			 "; gang start off (settings.gangStart)"));
	json_decref(a.patched);
	holder_free(e.pol);

	/* Forced podgroup where it is not served: nothing, and it says so. */
	env_init(&e, "settings:\n  gangStart: podgroup\n",
		 GANG_SERVES_KNOWN | GANG_SERVES_CONTROLLER);
	mutate_job(&e, JOB("t", "3", "3", "", CLASS("train-large"), ""), &a);
	cr_assert_null(at(a.patched, "spec/template/spec/schedulingGroup"));
	cr_assert(strstr(at(a.patched, "metadata/annotations/gpugate.io~decision"),
			 "gang start none (settings.gangStart podgroup: not served here)"));
	json_decref(a.patched);
	holder_free(e.pol);
}

Test(gang, no_gang_start_without_a_gang)
{
	struct gang_env e;
	struct answer a;

	env_init(&e, "", ALL_SERVED);
	/* One pod: nothing to start together. */
	mutate_job(&e, JOB("t", "1", "1", "", CLASS("train-large"), ""), &a);
	cr_assert_null(at(a.patched, "spec/scheduling"));
	cr_assert(strstr(at(a.patched, "metadata/annotations/gpugate.io~decision"),
			 "gang start none (one pod)"));
	json_decref(a.patched);
	/* A class without gang: split as the scheduler places them. */
	mutate_job(&e, JOB("t", "3", "3", "", CLASS("train-split"), ""), &a);
	cr_assert_null(at(a.patched, "spec/scheduling"));
	cr_assert_null(at(a.patched, "metadata/annotations/gpugate.io~gang-route"));
	cr_assert_null(strstr(at(a.patched, "metadata/annotations/gpugate.io~decision"),
			      "gang"));
	json_decref(a.patched);
	/* Without the API nobody would release a gate. */
	e.served = 0;
	mutate_job(&e, JOB("t", "3", "3", "", CLASS("train-large"), ""), &a);
	cr_assert_null(at(a.patched, "spec/template/spec/schedulingGates"));
	cr_assert(strstr(at(a.patched, "metadata/annotations/gpugate.io~decision"),
			 "gang start none (no route: gpugate runs without the API)"));
	json_decref(a.patched);
	holder_free(e.pol);
}

Test(gang, a_job_someone_else_starts_is_left_to_it)
{
	struct gang_env e;
	struct answer a;

	env_init(&e, "", ALL_SERVED);
	mutate_job(&e, JOB("t", "3", "3", ",\"schedulerName\":\"volcano\"",
			   CLASS("train-large"), ""),
		   &a);
	cr_assert_null(at(a.patched, "spec/scheduling"));
	cr_assert_null(at(a.patched, "metadata/annotations/gpugate.io~gang-route"));
	cr_assert(strstr(at(a.patched, "metadata/annotations/gpugate.io~decision"),
			 "gang start left to scheduler volcano"));
	json_decref(a.patched);

	mutate_job(&e, JOB("t", "3", "3", ",\"schedulingGates\":[{\"name\":\"other\"}]",
			   CLASS("train-large"), ""),
		   &a);
	cr_assert_str_eq(at(a.patched, "spec/template/spec/schedulingGates/0/name"), "other");
	cr_assert_null(at(a.patched, "spec/template/spec/schedulingGates/1"));
	cr_assert(strstr(at(a.patched, "metadata/annotations/gpugate.io~decision"),
			 "left to scheduling gate other"));
	json_decref(a.patched);

	mutate_job(&e, JOB("t", "3", "3",
			   ",\"schedulingGroup\":{\"podGroupName\":\"mine\"}",
			   CLASS("train-large"), ""),
		   &a);
	cr_assert(strstr(at(a.patched, "metadata/annotations/gpugate.io~decision"),
			 "left to PodGroup mine"));
	json_decref(a.patched);

	/* A route stamp the user wrote that this cluster would drop is not
	 * taken: the Job gets the route that runs. */
	e.served = GANG_SERVES_KNOWN | GANG_SERVES_CONTROLLER;
	mutate_job(&e, JOB("t", "3", "3", "", CLASS("train-large"),
			   ",\"annotations\":{\"gpugate.io/gang-route\":\"workload\"}"),
		   &a);
	cr_assert_str_eq(at(a.patched, "metadata/annotations/gpugate.io~gang-route"),
			 "gates");
	json_decref(a.patched);
	holder_free(e.pol);
}

#define GATED_POD(gates, node)                                                  \
	"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"t-0\","  \
	"\"namespace\":\"research\",\"uid\":\"p-1\",\"labels\":{"                  \
	"\"gpugate.io/class\":\"train-large\",\"gpugate.io/tenant\":\"research\"," \
	"\"gpugate.io/flavor\":\"h100\",\"gpugate.io/gang\":\"g-0123456789abcdef\"}," \
	"\"annotations\":{\"gpugate.io/gang-route\":\"gates\"},"                  \
	"\"ownerReferences\":[{\"apiVersion\":\"batch/v1\",\"kind\":\"Job\","     \
	"\"name\":\"t\",\"uid\":\"j-1\",\"controller\":true}]},\"spec\":{"        \
	"\"containers\":[{\"name\":\"m\",\"image\":\"x\",\"resources\":{"         \
	"\"limits\":{\"nvidia.com/gpu\":\"8\"}}}]" gates node "}}"

#define THE_GATE ",\"schedulingGates\":[{\"name\":\"gpugate.io/gang\"}]"

Test(gang, only_gpugate_takes_the_gate_off)
{
	struct gang_env e;
	struct answer a;

	env_init(&e, "", GANG_SERVES_KNOWN | GANG_SERVES_CONTROLLER);
	admit(&e, HANDLER_VALIDATE, "Pod", "UPDATE", "alice", GATED_POD("", ""),
	      GATED_POD(THE_GATE, ""), &a);
	cr_assert_not(a.allowed);
	cr_assert_str_eq(a.message,
			 "gpugate: scheduling gate gpugate.io/gang is removed by gpugate "
			 "only, when the whole gang has room: the pod waits for its gang "
			 "(kubectl describe pod says why)");
	json_decref(a.patched);
	/* gpugate, as the apiserver knows it... */
	admit(&e, HANDLER_VALIDATE, "Pod", "UPDATE", "system:admin", GATED_POD("", ""),
	      GATED_POD(THE_GATE, ""), &a);
	cr_assert(a.allowed, "%s", a.message);
	json_decref(a.patched);
	/* ...or a ServiceAccount of its namespace; not of another. */
	admit(&e, HANDLER_VALIDATE, "Pod", "UPDATE", "system:serviceaccount:gpugate:gpugate",
	      GATED_POD("", ""), GATED_POD(THE_GATE, ""), &a);
	cr_assert(a.allowed, "%s", a.message);
	json_decref(a.patched);
	admit(&e, HANDLER_VALIDATE, "Pod", "UPDATE",
	      "system:serviceaccount:gpugate-evil:gpugate", GATED_POD("", ""),
	      GATED_POD(THE_GATE, ""), &a);
	cr_assert_not(a.allowed);
	json_decref(a.patched);
	holder_free(e.pol);
}

Test(gang, a_gang_pod_names_no_node_and_gets_its_gate)
{
	struct gang_env e;
	struct answer a;

	env_init(&e, "", GANG_SERVES_KNOWN | GANG_SERVES_CONTROLLER);
	admit(&e, HANDLER_VALIDATE, "Pod", "CREATE", "alice", GATED_POD("", ",\"nodeName\":\"n1\""),
	      NULL, &a);
	cr_assert_not(a.allowed);
	cr_assert(strstr(a.message, "cannot name spec.nodeName"), "%s", a.message);
	json_decref(a.patched);
	/* Made by hand for the Job, without the template's route stamp: its
	 * class says gang. */
	admit(&e, HANDLER_VALIDATE, "Pod", "CREATE", "alice",
	      "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"x\","
	      "\"namespace\":\"research\",\"labels\":{\"gpugate.io/class\":"
	      "\"train-large\"},\"ownerReferences\":[{\"apiVersion\":\"batch/v1\","
	      "\"kind\":\"Job\",\"name\":\"t\",\"uid\":\"j-1\",\"controller\":true}]},"
	      "\"spec\":{\"nodeName\":\"n1\",\"containers\":[{\"name\":\"m\","
	      "\"image\":\"x\"}]}}",
	      NULL, &a);
	cr_assert_not(a.allowed);
	cr_assert_str_eq(a.message,
			 "gpugate: a pod of a gang (Job t) cannot name spec.nodeName: its "
			 "gang starts all at once through the scheduler; leave nodeName unset");
	json_decref(a.patched);
	/* A Job's pod made without the gate its template carries gets it. */
	admit(&e, HANDLER_MUTATE, "Pod", "CREATE", "alice", GATED_POD("", ""), NULL, &a);
	cr_assert(a.allowed, "%s", a.message);
	cr_assert_str_eq(at(a.patched, "spec/schedulingGates/0/name"), GANG_GATE);
	json_decref(a.patched);
	admit(&e, HANDLER_MUTATE, "Pod", "CREATE", "alice", GATED_POD(THE_GATE, ""), NULL, &a);
	cr_assert_null(at(a.patched, "spec/schedulingGates/1"));
	json_decref(a.patched);
	holder_free(e.pol);
}

#define STAMPED_JOB(min, route)                                                  \
	"{\"apiVersion\":\"batch/v1\",\"kind\":\"Job\",\"metadata\":{\"name\":"     \
	"\"t\",\"namespace\":\"research\",\"uid\":\"j-1\",\"labels\":{"              \
	"\"gpugate.io/class\":\"train-large\",\"gpugate.io/tenant\":\"research\","   \
	"\"gpugate.io/flavor\":\"h100\",\"gpugate.io/gang\":\"g-0123456789abcdef\"}" \
	route "},\"spec\":{\"parallelism\":3,\"completions\":3,\"scheduling\":{"     \
	"\"schedulingPolicy\":{\"gang\":{\"minCount\":" min "}}},\"template\":{"     \
	"\"metadata\":{\"labels\":{\"gpugate.io/class\":\"train-large\"}},\"spec\":{" \
	"\"restartPolicy\":\"Never\",\"containers\":[{\"name\":\"m\",\"image\":"     \
	"\"x\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"8\"}}}]}}}}"

#define ROUTE_W ",\"annotations\":{\"gpugate.io/gang-route\":\"workload\"}"

Test(gang, a_stamped_job_keeps_its_min_count_and_route)
{
	struct gang_env e;
	struct answer a;

	env_init(&e, "", ALL_SERVED);
	admit(&e, HANDLER_VALIDATE, "Job", "UPDATE", "alice", STAMPED_JOB("1", ROUTE_W),
	      STAMPED_JOB("3", ROUTE_W), &a);
	cr_assert_not(a.allowed);
	cr_assert_str_eq(a.message,
			 "gpugate: spec.scheduling.schedulingPolicy.gang.minCount cannot "
			 "be lowered (it is 3): the Job starts all or nothing (its class "
			 "says gang)");
	json_decref(a.patched);
	admit(&e, HANDLER_VALIDATE, "Job", "UPDATE", "alice", STAMPED_JOB("3", ""),
	      STAMPED_JOB("3", ROUTE_W), &a);
	cr_assert_not(a.allowed);
	cr_assert(strstr(a.message, "annotation gpugate.io/gang-route is set by gpugate"),
		  "%s", a.message);
	json_decref(a.patched);
	/* Unchanged: allowed. */
	admit(&e, HANDLER_VALIDATE, "Job", "UPDATE", "alice",
	      JOB("t", "3", "3", "", CLASS("train-large"), ""),
	      JOB("t", "3", "3", THE_GATE, CLASS("train-large"), ""), &a);
	cr_assert_not(a.allowed);
	cr_assert(strstr(a.message, "cannot be removed from the Job's pod template"),
		  "%s", a.message);
	json_decref(a.patched);
	admit(&e, HANDLER_VALIDATE, "Job", "UPDATE", "alice", STAMPED_JOB("3", ROUTE_W),
	      STAMPED_JOB("3", ROUTE_W), &a);
	cr_assert(a.allowed, "%s", a.message);
	json_decref(a.patched);
	holder_free(e.pol);
}

Test(gang, policy_checks_the_gang_settings)
{
	struct policy *p;
	char yaml[4096];

	log_set_level(LOG_ERROR);
	snprintf(yaml, sizeof(yaml), GANG_POLICY,
		 "settings:\n  gangStart: podgroup\n  gangTimeoutSeconds: 45\n");
	p = test_policy(yaml);
	cr_assert_eq(policy_settings(p)->gang_start, POLICY_GANG_PODGROUP);
	cr_assert_eq(policy_settings(p)->gang_timeout_seconds, 45);
	cr_assert(policy_class_find(p, "train-large")->gang);
	cr_assert_not(policy_class_find(p, "train-split")->gang);
	policy_free(p);
	snprintf(yaml, sizeof(yaml), GANG_POLICY, "");
	p = test_policy(yaml);
	cr_assert_eq(policy_settings(p)->gang_start, POLICY_GANG_AUTO);
	cr_assert_eq(policy_settings(p)->gang_timeout_seconds, POLICY_GANG_TIMEOUT_DEFAULT);
	policy_free(p);
}

Test(gang, route_names_and_auto)
{
	enum gang_route r;

	cr_assert_str_eq(gang_route_name(GANG_PODGROUP), "podgroup");
	cr_assert(gang_route_parse("gates", &r));
	cr_assert_eq(r, GANG_GATES);
	cr_assert_not(gang_route_parse("Gates", &r));
	cr_assert_not(gang_route_parse(NULL, &r));
	cr_assert_eq(gang_auto_route(0), GANG_NONE);
	cr_assert_eq(gang_auto_route(GANG_SERVES_PODGROUP), GANG_NONE);
	cr_assert_eq(gang_auto_route(GANG_SERVES_PODGROUP | GANG_SERVES_CONTROLLER),
		     GANG_PODGROUP);
	cr_assert_eq(gang_auto_route(ALL_SERVED), GANG_WORKLOAD);
	cr_assert_eq(gang_auto_route(GANG_SERVES_CONTROLLER), GANG_GATES);
}
