/*
 * The decision engine (policy/decide.c): one test per rule and per
 * mutation, with every user-facing message asserted verbatim.
 *
 * Workloads are written as JSON and turned into facts by webhook/facts.c,
 * which keeps the cases readable; the engine itself sees only the facts.
 */
#include "base/arena.h"
#include "base/diag.h"
#include "policy/decide.h"
#include "policy/kinds.h"
#include "webhook/apply.h"
#include "webhook/facts.h"
#include "tests/unit/test_policy.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <string.h>

static const char policy_yaml[] =
	"version: 1\n"
	"flavors:\n"
	"  - name: h100\n"
	"    resource: nvidia.com/gpu\n"
	"    sharing: exclusive\n"
	"    nodeSelector: [\"gpu=h100\"]\n"
	"    tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]\n"
	"    gpusPerNode: 8\n"
	"  - name: mig-1g\n"
	"    resource: nvidia.com/mig-1g.10gb\n"
	"    sharing: mig\n"
	"    nodeSelector: [\"gpu=a100\"]\n"
	"    gpusPerNode: 56\n"
	"  - name: l4\n"
	"    resource: nvidia.com/gpu.shared\n"
	"    sharing: time-slicing\n"
	"    gpusPerNode: 16\n"
	"classes:\n"
	"  - {name: big, flavor: h100, gpus: 8, cpu: \"96\", memory: 1000Gi,\n"
	"     topology: {key: clique}, priorityClassName: training}\n"
	"  - {name: small, flavor: h100, gpus: 1, maxGpus: 4, preemptible: true}\n"
	"  - {name: mig, flavor: mig-1g, gpus: 1, maxGpus: 2}\n"
	"  - {name: shared, flavor: l4, gpus: 1}\n"
	"tenants:\n"
	"  - name: research\n"
	"    namespaces: [research]\n"
	"    cohort: lab\n"
	"    classes: [big, small, shared]\n"
	"    sharing: [exclusive, time-slicing]\n"
	"    quota:\n"
	"      - {flavor: h100, nominal: 16, borrowingLimit: 8}\n"
	"      - {flavor: l4, nominal: 4}\n"
	"  - name: product\n"
	"    namespaces: [product]\n"
	"    cohort: lab\n"
	"    sharing: [exclusive, mig]\n"
	"    quota:\n"
	"      - {flavor: h100, nominal: 8, lendingLimit: 4}\n"
	"      - {flavor: mig-1g, nominal: 14}\n"
	"  - name: lender\n"
	"    namespaces: [lender]\n"
	"    cohort: lab\n"
	"    classes: [small]\n"
	"    quota: [{flavor: h100, nominal: 32}]\n"
	"  - name: solo\n"
	"    namespaces: [solo]\n"
	"    quota: [{flavor: h100, nominal: 2}]\n"
	"  - name: sandbox\n"
	"    namespaces: [sandbox]\n"
	"    mode: warn\n"
	"    quota: [{flavor: l4, nominal: 2}, {flavor: h100, nominal: 1}]\n"
	"  - name: watch\n"
	"    namespaces: [watch]\n"
	"    mode: audit\n"
	"    quota: [{flavor: h100, nominal: 1}]\n"
	"checkpoint:\n"
	"  gracePeriodSeconds: 600\n"
	"  claimName: \"{tenant}-ckpt\"\n"
	"  preStop: [\"/bin/sh\", \"-c\", \"checkpoint\"]\n"
	"  env: [\"CKPT=/checkpoint\"]\n";

enum { T_RESEARCH, T_PRODUCT, T_LENDER, T_SOLO, T_SANDBOX, T_WATCH, N_T };
enum { F_H100, F_MIG, F_L4, N_F };

static struct policy *P;
static int64_t used[N_T][N_F];

static int64_t used_fn(const void *ctx, unsigned t, unsigned f)
{
	(void)ctx;
	return used[t][f];
}

static const struct usage_view usage = {.ctx = NULL, .used = used_fn};

/* The cluster's PriorityClasses, for the tests that set them: training
 * 1000, urgent 5000, and (default_prio) a globalDefault class. */
static bool has_default;
static int32_t default_prio;

static bool prio_fn(const void *ctx, const char *name, int32_t *out)
{
	(void)ctx;
	if (!name) {
		*out = default_prio;
		return has_default;
	}
	if (strcmp(name, "training") == 0)
		*out = 1000;
	else if (strcmp(name, "urgent") == 0)
		*out = 5000;
	else
		return false;
	return true;
}

static const struct priority_view prios = {.ctx = NULL, .value = prio_fn};
static const struct priority_view *run_prios;

/* The cluster's claims, for the tests that set them: one answer for all. */
static enum pvc_state pvc_answer;

static enum pvc_state pvc_fn(const void *ctx, const char *ns, const char *name)
{
	(void)ctx;
	(void)ns;
	cr_expect_str_eq(name, "research-ckpt");
	return pvc_answer;
}

static const struct pvc_view pvcs = {.ctx = NULL, .state = pvc_fn};
static const struct pvc_view *run_pvcs;

static void setup(void)
{
	P = test_policy(policy_yaml);
	memset(used, 0, sizeof(used));
	run_prios = NULL;
	run_pvcs = NULL;
	has_default = false;
}

static void teardown(void)
{
	policy_free(P);
}

TestSuite(decide, .init = setup, .fini = teardown);

struct run {
	struct arena arena;
	json_t *obj;
	struct workload wl;
	struct decision dec;
};

static void run_obj(struct run *r, const char *ns, json_t *obj,
		    enum decide_phase phase)
{
	struct diag d;
	const char *kind = json_string_value(json_object_get(obj, "kind"));
	const struct kind_def *def = !kind ? NULL
				     : strcmp(kind, "Job") == 0 ? kinds_find("batch", "v1", "Job")
				     : strcmp(kind, "Pod") == 0 ? kinds_find("", "v1", "Pod")
								: kinds_template(kind);
	struct decide_input in = {.policy = P, .wl = &r->wl, .phase = phase,
				  .priorities = run_prios, .pvcs = run_pvcs};

	arena_init(&r->arena);
	r->obj = obj;
	memset(&r->wl, 0, sizeof(r->wl));
	r->wl.def = def;
	r->wl.kind = def ? def->wl : WL_OTHER;
	r->wl.op = WL_CREATE;
	r->wl.namespace = ns;
	r->wl.name = "";
	r->wl.uid = "";
	r->wl.request_uid = "req-1";
	diag_init(&d);
	if (r->wl.kind != WL_OTHER)
		cr_assert_eq(facts_extract(obj, &r->wl, &r->arena, &d), 0, "%s",
			     diag_text(&d));
	decide(&in, &usage, &r->dec);
}

/* Decides the object given as JSON text. */
static void run(struct run *r, const char *ns, const char *json,
		enum decide_phase phase)
{
	json_error_t e;
	json_t *obj = json_loads(json, 0, &e);

	cr_assert_not_null(obj, "bad test JSON: %s: %s", e.text, json);
	run_obj(r, ns, obj, phase);
}

static void done(struct run *r)
{
	arena_release(&r->arena);
	json_decref(r->obj);
}

/* /mutate, the plan applied, then /validate on the result. */
static void mutate_validate(struct run *m, struct run *v, const char *ns,
			    const char *json)
{
	struct diag d;
	json_t *copy;

	run(m, ns, json, DECIDE_MUTATE);
	cr_assert(m->dec.allowed, "%s", m->dec.message);
	copy = json_deep_copy(m->obj);
	diag_init(&d);
	cr_assert_eq(apply_plan(copy, &m->wl, &m->dec.plan, P, &d), 0, "%s",
		     diag_text(&d));
	run_obj(v, ns, copy, DECIDE_VALIDATE);
}

/* What a security denial adds in a namespace of no tenant (decide.c,
 * exemption_hint), for a pod of the "default" ServiceAccount. */
#define EXEMPT_HINT(ns)                                                    \
	"; if this is a cluster component (the GPU Operator's, NVSentinel's, " \
	"a DCGM exporter), exempt it: settings.exemptions.namespaces [\"" ns   \
	"\"] or serviceAccounts [\"" ns "/default\"] (docs/policy.md, "       \
	"\"exemptions\")"

#define POD(labels, spec)                                                \
	"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\"," \
	"\"labels\":{" labels "}},\"spec\":" spec "}"
#define ONE_CONTAINER "{\"containers\":[{\"name\":\"main\",\"image\":\"x\"}]}"
#define JOB(par, labels, tspec)                                          \
	"{\"apiVersion\":\"batch/v1\",\"kind\":\"Job\",\"metadata\":{\"name\":" \
	"\"train\",\"labels\":{" labels "}},\"spec\":{\"parallelism\":" par    \
	",\"template\":{\"spec\":" tspec "}}}"
/* A pod whose one container has these limits, and no class. */
#define RAW_POD(limits)                                                    \
	POD("\"app\":\"x\"", "{\"containers\":[{\"name\":\"m\",\"resources\":" \
			     "{\"limits\":{" limits "}}}]}")
#define NEVER_SPEC                                                       \
	"{\"restartPolicy\":\"Never\",\"containers\":[{\"name\":\"main\","      \
	"\"image\":\"x\"}]}"

/* Runs the test on a policy of its own; returns the suite's, for restore(). */
static struct policy *use_policy(const char *yaml)
{
	struct policy *saved = P;

	P = test_policy(yaml);
	return saved;
}

static void restore(struct policy *saved)
{
	policy_free(P);
	P = saved;
}

static void expect_denied(struct run *r, const char *rule, const char *message)
{
	cr_assert_not(r->dec.allowed, "admitted; expected: %s", message);
	cr_assert_eq(r->dec.code, 403);
	cr_assert_str_eq(r->dec.rule, rule);
	cr_assert_str_eq(r->dec.message, message);
}

/* ---- mapping ------------------------------------------------------------ */

Test(decide, maps_a_class_pod)
{
	struct run r;

	run(&r, "research", POD("\"gpugate.io/class\":\"small\",\"gpugate.io/gpus\":\"2\"",
				ONE_CONTAINER),
	    DECIDE_MUTATE);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	cr_assert_not(r.dec.violation);
	cr_assert(r.dec.plan.active && r.dec.plan.map);
	cr_assert_str_eq(r.dec.plan.resource, "nvidia.com/gpu");
	cr_assert_eq(r.dec.plan.count, 2);
	cr_assert_str_eq(r.dec.plan.flavor->name, "h100");
	cr_assert_str_eq(r.dec.plan.tenant, "research");
	cr_assert_eq(r.dec.plan.gpu_container, 0);
	cr_assert_str_eq(r.dec.plan.decision,
			 "small: 2 x h100 for tenant research; 2/16 in use");
	cr_assert(r.dec.plan.remove_gang, "a bare pod has no gang");
	cr_assert_eq(r.dec.plan.gang[0], '\0');
	cr_assert_null(r.dec.plan.priority_class);
	cr_assert_eq(r.dec.n_warnings, 0, "the success line comes from /validate");
	cr_assert_eq(r.dec.claim.units, 2);
	cr_assert_eq(r.dec.quota.position, QUOTA_NOMINAL);
	done(&r);
}

Test(decide, default_count_is_the_class_gpus)
{
	struct run r;

	run(&r, "research", POD("\"gpugate.io/class\":\"big\"", ONE_CONTAINER),
	    DECIDE_MUTATE);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	cr_assert_eq(r.dec.plan.count, 8);
	cr_assert_str_eq(r.dec.plan.cpu, "96");
	cr_assert_str_eq(r.dec.plan.memory, "1000Gi");
	cr_assert_str_eq(r.dec.plan.priority_class, "training");
	cr_assert_eq(r.dec.plan.topology, POLICY_TOPOLOGY_NONE,
		     "topology is for Jobs with parallelism > 1");
	cr_assert_not(r.dec.plan.preemptible);
	cr_assert_not(r.dec.plan.checkpoint);
	done(&r);
}

Test(decide, keeps_the_pods_own_priority_class)
{
	struct run r;

	run(&r, "research",
	    POD("\"gpugate.io/class\":\"big\"",
		"{\"priorityClassName\":\"urgent\",\"containers\":[{\"name\":\"m\"}]}"),
	    DECIDE_MUTATE);
	cr_assert(r.dec.allowed);
	cr_assert_null(r.dec.plan.priority_class);
	done(&r);
}

/*
 * /mutate, the plan applied, /validate: the success line (a warning only
 * with settings.admissionWarnings all, which the test policy leaves at
 * problems), and the one problem kubectl prints (NULL: none).
 */
static void expect_success_line(const char *json, const char *line,
				const char *problem)
{
	struct run m, v;

	mutate_validate(&m, &v, "research", json);
	cr_assert(v.dec.allowed, "%s", v.dec.message);
	cr_assert_str_eq(v.dec.success, line);
	cr_assert_not(v.dec.success_warned);
	cr_assert_eq(v.dec.n_warnings, problem ? 1 : 0);
	cr_assert_eq(decide_problem_count(&v.dec), problem ? 1 : 0);
	if (problem) {
		cr_assert_str_eq(v.dec.warnings[0], problem);
		cr_assert_lt(strlen(problem), 120);
	}
	cr_assert_not(v.dec.plan.active, "/validate never mutates");
	done(&m);
	done(&v);
}

Test(decide, success_line_at_validate)
{
	expect_success_line(
		POD("\"gpugate.io/class\":\"small\",\"gpugate.io/gpus\":\"2\"",
		    ONE_CONTAINER),
		"gpugate: small -> 2 x h100 for tenant research (2/16 in use)",
		NULL /* preemptible as its class says: no problem */);
}

Test(decide, success_line_of_a_job)
{
	expect_success_line(JOB("2", "\"gpugate.io/class\":\"big\"", NEVER_SPEC),
			    "gpugate: big -> 2 pods x 8 x h100 for tenant research "
			    "(16/16 in use)",
			    NULL);
}

Test(decide, success_line_when_borrowing)
{
	used[T_RESEARCH][F_H100] = 12;
	used[T_PRODUCT][F_H100] = 2; /* lends min(4, 8 - 2) = 4 */
	used[T_LENDER][F_H100] = 32;
	expect_success_line(POD("\"gpugate.io/class\":\"big\"", ONE_CONTAINER),
			    "gpugate: big -> 8 x h100 for tenant research (20/16 in "
			    "use, 4 borrowed from lab)",
			    "gpugate: borrowed 4 h100 from cohort lab: gpugate takes "
			    "them back when a lender needs them (no checkpoint hooks)");
}

Test(decide, a_preemptible_class_that_borrows_is_told_once)
{
	used[T_RESEARCH][F_H100] = 15;
	expect_success_line(
		POD("\"gpugate.io/class\":\"small\",\"gpugate.io/gpus\":\"2\"",
		    ONE_CONTAINER),
		"gpugate: small -> 2 x h100 for tenant research (17/16 in use, 1 "
		"borrowed from lab)",
		"gpugate: borrowed 1 h100 from cohort lab: gpugate takes them back "
		"when a lender needs them, after a checkpoint");
}

/* settings.admissionWarnings all: the success line is a warning too, the
 * first, and no problem. */
Test(decide, admission_warnings_all_adds_the_success_line)
{
	char yaml[sizeof(policy_yaml) + 64];
	struct policy *problems = P;
	struct run m, v;

	snprintf(yaml, sizeof(yaml), "%ssettings: {admissionWarnings: all}\n",
		 policy_yaml);
	P = test_policy(yaml);
	cr_assert_eq(policy_settings(P)->admission_warnings, POLICY_WARNINGS_ALL);
	mutate_validate(&m, &v, "research",
			POD("\"gpugate.io/class\":\"big\"", ONE_CONTAINER));
	cr_assert_eq(v.dec.n_warnings, 1);
	cr_assert(v.dec.success_warned);
	cr_assert_str_eq(v.dec.warnings[0],
			 "gpugate: big -> 8 x h100 for tenant research (8/16 in use)");
	cr_assert_str_eq(v.dec.success, v.dec.warnings[0]);
	cr_assert_eq(decide_problem_count(&v.dec), 0);
	done(&m);
	done(&v);
	/* A problem still warns, after the line. */
	used[T_RESEARCH][F_H100] = 16;
	mutate_validate(&m, &v, "research",
			POD("\"gpugate.io/class\":\"small\"", ONE_CONTAINER));
	cr_assert_eq(v.dec.n_warnings, 2);
	cr_assert_str_eq(v.dec.warnings[1],
			 "gpugate: borrowed 1 h100 from cohort lab: gpugate takes them "
			 "back when a lender needs them, after a checkpoint");
	cr_assert_eq(decide_problem_count(&v.dec), 1);
	done(&m);
	done(&v);
	policy_free(P);
	P = problems;
}

#define JOBS_POD                                                              \
	"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"train-x\","  \
	"\"labels\":{\"gpugate.io/class\":\"big\"},\"ownerReferences\":[{"          \
	"\"apiVersion\":\"batch/v1\",\"kind\":\"Job\",\"name\":\"train\",\"uid\":"     \
	"\"u-9\",\"controller\":true}]},\"spec\":" ONE_CONTAINER "}"

Test(decide, jobs_pod_is_held_by_its_job)
{
	/* The ledger answers QUOTA_COVERED for the pod of a Job that holds
	 * the units (usage/memory-backend.c). */
	const struct quota_result held = {.position = QUOTA_COVERED,
					  .requested = 8,
					  .nominal = 16,
					  .holder = "train"};
	struct decide_input in = {.policy = P};
	struct run m, v;

	mutate_validate(&m, &v, "research", JOBS_POD);
	in.wl = &m.wl;
	in.phase = DECIDE_MUTATE;
	decide_prepare(&in, &m.dec);
	decide_quota(&in, &m.dec, &held);
	cr_assert(m.dec.allowed, "%s", m.dec.message);
	cr_assert_str_eq(m.dec.plan.decision,
			 "big: 8 x h100 for tenant research; held by job train");
	in.wl = &v.wl;
	in.phase = DECIDE_VALIDATE;
	decide_prepare(&in, &v.dec);
	decide_quota(&in, &v.dec, &held);
	cr_assert(v.dec.allowed, "%s", v.dec.message);
	cr_assert_eq(v.dec.n_warnings, 0, "a Job's pod is no problem");
	cr_assert_str_eq(v.dec.success,
			 "gpugate: big -> 8 x h100 for tenant research (held by job "
			 "train)");
	done(&m);
	done(&v);
}

Test(decide, job_gets_gang_topology_and_template_labels)
{
	struct run r, r2;

	run(&r, "research", JOB("2", "\"gpugate.io/class\":\"big\"", NEVER_SPEC),
	    DECIDE_MUTATE);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	cr_assert_eq(r.dec.claim.units, 16);
	cr_assert_eq(r.dec.claim.pods, 2);
	cr_assert_eq(r.dec.plan.topology, POLICY_TOPOLOGY_REQUIRED);
	cr_assert_str_eq(r.dec.plan.topology_key, "clique");
	cr_assert_eq(strlen(r.dec.plan.gang), 18);
	cr_assert_eq(strncmp(r.dec.plan.gang, "g-", 2), 0);
	cr_assert_str_eq(r.dec.plan.class_label, "gpugate.io/class");
	cr_assert_str_eq(r.dec.plan.class_name, "big");
	cr_assert_str_eq(r.dec.plan.decision,
			 "big: 2 pods x 8 x h100 for tenant research; 16/16 in use");
	/* Same Job name, same gang: the id is derived, not random. */
	run(&r2, "research", JOB("2", "\"gpugate.io/class\":\"big\"", NEVER_SPEC),
	    DECIDE_MUTATE);
	cr_assert_str_eq(r.dec.plan.gang, r2.dec.plan.gang);
	done(&r);
	done(&r2);
}

Test(decide, job_with_parallelism_one_has_no_affinity)
{
	struct run r;

	run(&r, "research", JOB("1", "\"gpugate.io/class\":\"big\"", NEVER_SPEC),
	    DECIDE_MUTATE);
	cr_assert(r.dec.allowed);
	cr_assert_eq(r.dec.plan.topology, POLICY_TOPOLOGY_NONE);
	done(&r);
}

Test(decide, job_pod_keeps_the_template_gang)
{
	struct run r;

	run(&r, "research",
	    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"train-x\","
	    "\"labels\":{\"gpugate.io/class\":\"big\",\"gpugate.io/gang\":"
	    "\"g-0123456789abcdef\"},\"ownerReferences\":[{\"apiVersion\":\"batch/v1\","
	    "\"kind\":\"Job\",\"name\":\"train\",\"uid\":\"u-9\",\"controller\":true}]},"
	    "\"spec\":" ONE_CONTAINER "}",
	    DECIDE_MUTATE);
	cr_assert(r.dec.allowed);
	cr_assert_str_eq(r.dec.plan.gang, "g-0123456789abcdef");
	cr_assert_not(r.dec.plan.remove_gang);
	done(&r);
}

Test(decide, named_container_gets_the_gpus)
{
	struct run r;

	run(&r, "research",
	    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"labels\":"
	    "{\"gpugate.io/class\":\"big\"},\"annotations\":{\"gpugate.io/container\":"
	    "\"trainer\"}},\"spec\":{\"containers\":[{\"name\":\"proxy\"},{\"name\":"
	    "\"trainer\"}]}}",
	    DECIDE_MUTATE);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	cr_assert_eq(r.dec.plan.gpu_container, 1);
	done(&r);
}

/* ---- rules -------------------------------------------------------------- */

Test(decide, unknown_class)
{
	struct run r;

	run(&r, "research", POD("\"gpugate.io/class\":\"huge\"", ONE_CONTAINER),
	    DECIDE_MUTATE);
	expect_denied(&r, "class-unknown",
		      "gpugate: unknown GPU class \"huge\"; tenant \"research\" may "
		      "use: big, small, shared");
	done(&r);
}

Test(decide, unknown_class_offers_the_nearest_class_the_tenant_may_use)
{
	struct run r;

	run(&r, "research", POD("\"gpugate.io/class\":\"smal\"", ONE_CONTAINER),
	    DECIDE_MUTATE);
	expect_denied(&r, "class-unknown",
		      "gpugate: unknown GPU class \"smal\" (did you mean \"small\"?); "
		      "tenant \"research\" may use: big, small, shared");
	done(&r);
	run(&r, "research", POD("\"gpugate.io/class\":\"Big\"", ONE_CONTAINER),
	    DECIDE_MUTATE);
	expect_denied(&r, "class-unknown",
		      "gpugate: unknown GPU class \"Big\" (did you mean \"big\"?); "
		      "tenant \"research\" may use: big, small, shared");
	done(&r);
	/* "mg" is one edit from class mig, which research may not use: not
	 * offered (it would only be denied next). */
	run(&r, "research", POD("\"gpugate.io/class\":\"mg\"", ONE_CONTAINER),
	    DECIDE_MUTATE);
	expect_denied(&r, "class-unknown",
		      "gpugate: unknown GPU class \"mg\"; tenant \"research\" may "
		      "use: big, small, shared");
	done(&r);
}

Test(decide, class_not_allowed_for_tenant)
{
	struct run r;

	run(&r, "research", POD("\"gpugate.io/class\":\"mig\"", ONE_CONTAINER),
	    DECIDE_MUTATE);
	expect_denied(&r, "class-not-allowed",
		      "gpugate: class \"mig\" is not allowed for tenant \"research\"; "
		      "allowed: big, small, shared");
	done(&r);
}

Test(decide, namespace_without_tenant)
{
	struct run r;

	run(&r, "web", POD("\"gpugate.io/class\":\"big\"", ONE_CONTAINER),
	    DECIDE_MUTATE);
	expect_denied(&r, "no-tenant",
		      "gpugate: namespace \"web\" belongs to no tenant, so it cannot "
		      "use GPU class \"big\"; ask the platform team to add it to a "
		      "tenant in the gpugate policy");
	done(&r);
}

Test(decide, gpus_label_must_be_in_range)
{
	static const char *const bad[] = {"9", "0", "abc", "04", "-1", ""};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char json[512], want[256];
		struct run r;

		snprintf(json, sizeof(json),
			 POD("\"gpugate.io/class\":\"small\",\"gpugate.io/gpus\":\"%s\"",
			     ONE_CONTAINER),
			 bad[i]);
		run(&r, "research", json, DECIDE_MUTATE);
		snprintf(want, sizeof(want),
			 "gpugate: label gpugate.io/gpus=\"%s\" must be a whole number "
			 "from 1 to 4 for class small",
			 bad[i]);
		expect_denied(&r, "gpus-invalid", want);
		done(&r);
	}
}

Test(decide, sharing_mode_not_allowed)
{
	struct run r;

	run(&r, "product", POD("\"gpugate.io/class\":\"shared\"", ONE_CONTAINER),
	    DECIDE_MUTATE);
	expect_denied(&r, "sharing",
		      "gpugate: class \"shared\" uses time-slicing GPUs, which tenant "
		      "\"product\" may not use (allowed sharing: exclusive, mig)");
	done(&r);
}

Test(decide, raw_request_is_rejected_with_the_classes_to_use)
{
	struct run r;

	run(&r, "research",
	    POD("\"app\":\"x\"", "{\"containers\":[{\"name\":\"m\",\"resources\":"
				 "{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}"),
	    DECIDE_MUTATE);
	expect_denied(&r, "raw-request",
		      "gpugate: this workload asks for nvidia.com/gpu directly; "
		      "request GPUs with a class instead: set label gpugate.io/class "
		      "to one of: big, small, shared");
	done(&r);
}

Test(decide, raw_request_without_tenant)
{
	struct run r;

	run(&r, "web",
	    POD("\"app\":\"x\"", "{\"containers\":[{\"name\":\"m\",\"resources\":"
				 "{\"limits\":{\"nvidia.com/mig-1g.10gb\":\"1\"}}}]}"),
	    DECIDE_MUTATE);
	expect_denied(&r, "no-tenant",
		      "gpugate: namespace \"web\" belongs to no tenant, so it cannot "
		      "use nvidia.com/mig-1g.10gb; ask the platform team to add it to "
		      "a tenant in the gpugate policy");
	done(&r);
}

Test(decide, two_flavors_in_one_pod)
{
	struct run r;

	run(&r, "research",
	    POD("\"gpugate.io/class\":\"big\"",
		"{\"containers\":[{\"name\":\"main\"},{\"name\":\"side\",\"resources\":"
		"{\"limits\":{\"nvidia.com/gpu.shared\":\"1\"}}}]}"),
	    DECIDE_MUTATE);
	expect_denied(&r, "two-flavors",
		      "gpugate: container \"side\" asks for nvidia.com/gpu.shared, "
		      "but class big gives this pod h100 (nvidia.com/gpu) only: remove "
		      "that request");
	done(&r);
}

Test(decide, only_the_gpu_container_gets_the_resource)
{
	struct run r;

	run(&r, "research",
	    POD("\"gpugate.io/class\":\"big\"",
		"{\"containers\":[{\"name\":\"main\"},{\"name\":\"side\",\"resources\":"
		"{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}"),
	    DECIDE_MUTATE);
	expect_denied(&r, "two-flavors",
		      "gpugate: container \"side\" also asks for nvidia.com/gpu; with "
		      "class big only container \"main\" gets accelerators: remove "
		      "that request or name it in annotation gpugate.io/container");
	done(&r);
}

Test(decide, init_container_may_not_ask_for_gpus)
{
	struct run r;

	run(&r, "research",
	    POD("\"gpugate.io/class\":\"big\"",
		"{\"initContainers\":[{\"name\":\"prep\",\"resources\":{\"limits\":"
		"{\"nvidia.com/gpu\":\"1\"}}}],\"containers\":[{\"name\":\"main\"}]}"),
	    DECIDE_MUTATE);
	expect_denied(&r, "two-flavors",
		      "gpugate: init container \"prep\" asks for nvidia.com/gpu; with "
		      "class big only container \"main\" gets accelerators: remove "
		      "that request");
	done(&r);
}

Test(decide, raw_two_flavors_when_allowed)
{
	/* The same rule holds for raw requests; exercised through a policy
	 * that allows them. */
	static const char yaml[] =
		"version: 1\nsettings: {rawGpuRequests: allow}\nflavors:\n"
		"  - {name: a, resource: x.io/a, sharing: exclusive, gpusPerNode: 8}\n"
		"  - {name: b, resource: x.io/b, sharing: exclusive, gpusPerNode: 8}\n"
		"classes: []\ntenants:\n"
		"  - {name: t, namespaces: [t], quota: [{flavor: a, nominal: 4}]}\n";
	struct policy *saved = use_policy(yaml);
	struct run r;

	run(&r, "t", RAW_POD("\"x.io/a\":\"1\",\"x.io/b\":\"1\""), DECIDE_MUTATE);
	expect_denied(&r, "two-flavors",
		      "gpugate: this workload asks for resources of two flavors "
		      "(x.io/a and x.io/b); a pod may use one flavor only");
	done(&r);
	/* One flavor, allowed, is charged against the tenant's quota. */
	run(&r, "t", RAW_POD("\"x.io/a\":\"3\""), DECIDE_VALIDATE);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	cr_assert(r.dec.claim.needed);
	cr_assert_eq(r.dec.claim.units, 3);
	cr_assert_not(r.dec.plan.active);
	done(&r);
	run(&r, "t", RAW_POD("\"x.io/a\":\"5\""), DECIDE_VALIDATE);
	expect_denied(&r, "quota",
		      "gpugate: pod can never be admitted: needs 5 a, tenant \"t\" "
		      "may hold at most 4 (nominal 4)");
	done(&r);
	/* /mutate stamps it like a class workload so that the watch finds it. */
	run(&r, "t", RAW_POD("\"x.io/a\":\"3\""), DECIDE_MUTATE);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	cr_assert(r.dec.plan.stamp_only);
	cr_assert_str_eq(r.dec.plan.decision,
			 "no class: 3 x a (x.io/a) for tenant t; 3/4 in use");
	done(&r);
	restore(saved);
}

Test(decide, raw_request_of_a_sharing_mode_not_allowed)
{
	/* Allowed raw requests follow the tenant's sharing list too. */
	static const char yaml[] =
		"version: 1\nsettings: {rawGpuRequests: allow}\nflavors:\n"
		"  - {name: h100, resource: nvidia.com/gpu, sharing: exclusive, "
		"gpusPerNode: 8}\n"
		"  - {name: l4, resource: nvidia.com/gpu.shared, sharing: time-slicing, "
		"gpusPerNode: 16}\n"
		"classes: []\ntenants:\n"
		"  - {name: t, namespaces: [t], sharing: [exclusive, mig],\n"
		"     quota: [{flavor: h100, nominal: 4}, {flavor: l4, nominal: 4}]}\n";
	struct policy *saved = use_policy(yaml);
	struct run r;

	run(&r, "t", RAW_POD("\"nvidia.com/gpu.shared\":\"1\""), DECIDE_MUTATE);
	expect_denied(&r, "sharing",
		      "gpugate: nvidia.com/gpu.shared is a time-slicing GPU resource, "
		      "which tenant \"t\" may not use (allowed sharing: exclusive, mig)");
	done(&r);
	restore(saved);
}

Test(decide, privileged_gpu_container)
{
	struct run r;

	run(&r, "research",
	    POD("\"gpugate.io/class\":\"big\"",
		"{\"containers\":[{\"name\":\"main\",\"securityContext\":"
		"{\"privileged\":true}}]}"),
	    DECIDE_MUTATE);
	expect_denied(&r, "security",
		      "gpugate: container \"main\" is privileged; a privileged GPU "
		      "container bypasses the device plugin's isolation: remove "
		      "securityContext.privileged");
	done(&r);
}

Test(decide, nvidia_visible_devices)
{
	struct run r;

	run(&r, "research",
	    POD("\"gpugate.io/class\":\"big\"",
		"{\"containers\":[{\"name\":\"main\",\"env\":[{\"name\":"
		"\"NVIDIA_VISIBLE_DEVICES\",\"value\":\"all\"}]}]}"),
	    DECIDE_MUTATE);
	expect_denied(&r, "security",
		      "gpugate: container \"main\" sets NVIDIA_VISIBLE_DEVICES, which "
		      "bypasses the device plugin's GPU isolation: remove it and ask "
		      "for GPUs with a class");
	done(&r);
	/* A container without GPUs may hide devices, not reveal them. */
	run(&r, "research",
	    POD("\"app\":\"web\"",
		"{\"containers\":[{\"name\":\"web\",\"env\":[{\"name\":"
		"\"NVIDIA_VISIBLE_DEVICES\",\"value\":\"void\"}]}]}"),
	    DECIDE_MUTATE);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	done(&r);
	run(&r, "research",
	    POD("\"app\":\"web\"",
		"{\"containers\":[{\"name\":\"web\",\"env\":[{\"name\":"
		"\"NVIDIA_MIG_CONFIG_DEVICES\",\"value\":\"all\"}]}]}"),
	    DECIDE_MUTATE);
	expect_denied(&r, "security",
		      "gpugate: container \"web\" sets NVIDIA_MIG_CONFIG_DEVICES, "
		      "which bypasses the device plugin's GPU isolation: remove it "
		      "and ask for GPUs with a class");
	done(&r);
	/* Outside tenant namespaces, non-GPU pods are not gpugate's business. */
	run(&r, "kube-system",
	    POD("\"app\":\"plugin\"",
		"{\"containers\":[{\"name\":\"plugin\",\"env\":[{\"name\":"
		"\"NVIDIA_VISIBLE_DEVICES\",\"value\":\"all\"}]}]}"),
	    DECIDE_MUTATE);
	cr_assert(r.dec.allowed);
	done(&r);
}

Test(decide, host_device_mounts)
{
	struct run r;

	run(&r, "research",
	    POD("\"gpugate.io/class\":\"big\"",
		"{\"volumes\":[{\"name\":\"dev\",\"hostPath\":{\"path\":"
		"\"/dev/nvidia0\"}}],\"containers\":[{\"name\":\"main\","
		"\"volumeMounts\":[{\"name\":\"dev\",\"mountPath\":\"/dev/nvidia0\"}]}]}"),
	    DECIDE_MUTATE);
	expect_denied(&r, "security",
		      "gpugate: container \"main\" mounts host path /dev/nvidia0 "
		      "(volume \"dev\"), which bypasses the device plugin's GPU "
		      "isolation: remove the hostPath volume");
	done(&r);
}

/* ---- isolation over the whole pod ----------------------------------------
 * Pods that can reach GPU nodes (a class, a flavor resource, a flavor's
 * taint tolerated, a flavor's node label selected: policy/reach.h), in
 * every namespace.  Suite policy: h100 tolerates nvidia.com/gpu and selects
 * gpu=h100; mig-1g selects gpu=a100; "web" belongs to no tenant. */

#define PRIV "\"securityContext\":{\"privileged\":true}"
#define GPU_TOLERATION                                                    \
	"\"tolerations\":[{\"key\":\"nvidia.com/gpu\",\"operator\":\"Exists\"," \
	"\"effect\":\"NoSchedule\"}]"

/* A pod whose only container "app" takes its env from configMap "cfg"
 * with this prefix field ("" for none). */
static void run_env_from(struct run *r, const char *labels, const char *prefix)
{
	char json[1024];

	snprintf(json, sizeof(json),
		 "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":"
		 "\"p\",\"labels\":{%s}},\"spec\":{\"containers\":[{\"name\":"
		 "\"app\",\"envFrom\":[{\"configMapRef\":{\"name\":\"cfg\"}%s}]}]}}",
		 labels, prefix);
	run(r, "research", json, DECIDE_MUTATE);
}

/* The ephemeralcontainers subresource: the whole pod at /validate. */
static void run_ephemeral(struct run *r, const char *ns, const char *json)
{
	json_error_t e;
	struct diag d;
	struct decide_input in = {.policy = P, .wl = &r->wl,
				  .phase = DECIDE_VALIDATE};

	arena_init(&r->arena);
	r->obj = json_loads(json, 0, &e);
	cr_assert_not_null(r->obj, "bad test JSON: %s: %s", e.text, json);
	memset(&r->wl, 0, sizeof(r->wl));
	r->wl.kind = WL_POD;
	r->wl.def = kinds_find("", "v1", "Pod");
	r->wl.op = WL_UPDATE;
	r->wl.namespace = ns;
	diag_init(&d);
	cr_assert_eq(facts_extract(r->obj, &r->wl, &r->arena, &d), 0, "%s",
		     diag_text(&d));
	decide_ephemeral(&in, &r->dec);
}

Test(decide, privileged_sidecar_of_a_class_pod)
{
	struct run r;

	run(&r, "research",
	    POD("\"gpugate.io/class\":\"small\"",
		"{\"containers\":[{\"name\":\"main\"},{\"name\":\"net\"," PRIV "}]}"),
	    DECIDE_MUTATE);
	expect_denied(&r, "security",
		      "gpugate: container \"net\" is privileged and the pod can "
		      "reach GPU nodes (it asks for class small); a privileged "
		      "container sees every GPU on the node: remove "
		      "securityContext.privileged");
	done(&r);
	/* A native sidecar is an init container. */
	run(&r, "research",
	    POD("\"gpugate.io/class\":\"small\"",
		"{\"initContainers\":[{\"name\":\"proxy\",\"restartPolicy\":"
		"\"Always\"," PRIV "}],\"containers\":[{\"name\":\"main\"}]}"),
	    DECIDE_MUTATE);
	expect_denied(&r, "security",
		      "gpugate: init container \"proxy\" is privileged and the pod "
		      "can reach GPU nodes (it asks for class small); a privileged "
		      "container sees every GPU on the node: remove "
		      "securityContext.privileged");
	done(&r);
}

Test(decide, privileged_container_of_a_raw_gpu_pod)
{
	struct policy *saved = use_policy(
		"version: 1\n"
		"settings: {rawGpuRequests: allow}\n"
		"flavors:\n"
		"  - {name: h100, resource: nvidia.com/gpu, sharing: exclusive,\n"
		"     gpusPerNode: 8}\n"
		"classes: []\n"
		"tenants: [{name: t, namespaces: [t], quota: [{flavor: h100, nominal: 8}]}]\n");
	struct run r;

	run(&r, "t",
	    POD("\"app\":\"x\"",
		"{\"containers\":[{\"name\":\"m\",\"resources\":{\"limits\":"
		"{\"nvidia.com/gpu\":\"1\"}}},{\"name\":\"agent\"," PRIV "}]}"),
	    DECIDE_MUTATE);
	expect_denied(&r, "security",
		      "gpugate: container \"agent\" is privileged and the pod can "
		      "reach GPU nodes (it asks for nvidia.com/gpu); a privileged "
		      "container sees every GPU on the node: remove "
		      "securityContext.privileged");
	done(&r);
	restore(saved);
}

Test(decide, privileged_only_in_a_pod_that_tolerates_a_flavor_taint)
{
	struct run r;

	/* No tenant, no class, no GPU request: the toleration is enough. */
	run(&r, "web",
	    POD("\"app\":\"x\"",
		"{" GPU_TOLERATION ",\"containers\":[{\"name\":\"agent\"," PRIV "}]}"),
	    DECIDE_MUTATE);
	expect_denied(&r, "security",
		      "gpugate: container \"agent\" is privileged and the pod can "
		      "reach GPU nodes (it tolerates the nvidia.com/gpu taint of "
		      "flavor h100); a privileged container sees every GPU on the "
		      "node: remove securityContext.privileged" EXEMPT_HINT("web"));
	done(&r);
	/* Tolerating everything tolerates that taint too. */
	run(&r, "web",
	    POD("\"app\":\"x\"",
		"{\"tolerations\":[{\"operator\":\"Exists\"}],\"containers\":"
		"[{\"name\":\"agent\"," PRIV "}]}"),
	    DECIDE_VALIDATE);
	cr_assert_not(r.dec.allowed);
	cr_assert_str_eq(r.dec.rule, "security");
	done(&r);
	/* Another taint, another node label: no GPU node, privileged is the
	 * pod's business, in a tenant's namespace or not. */
	for (size_t i = 0; i < 2; i++) {
		static const char *const namespaces[] = {"research", "web"};

		run(&r, namespaces[i],
		    POD("\"app\":\"x\"",
			"{\"nodeSelector\":{\"gpu\":\"none\"},\"tolerations\":[{\"key\":"
			"\"node-role.kubernetes.io/infra\",\"operator\":\"Exists\"}],"
			"\"initContainers\":[{\"name\":\"setup\"," PRIV "}],"
			"\"containers\":[{\"name\":\"agent\"," PRIV "}]}"),
		    DECIDE_MUTATE);
		cr_expect(r.dec.allowed, "%s: %s", namespaces[i], r.dec.message);
		done(&r);
	}
}

Test(decide, privileged_pod_that_selects_a_flavor_node_label)
{
	struct run r;

	run(&r, "web",
	    POD("\"app\":\"x\"",
		"{\"nodeSelector\":{\"gpu\":\"a100\"},\"containers\":[{\"name\":"
		"\"agent\"," PRIV "}]}"),
	    DECIDE_MUTATE);
	expect_denied(&r, "security",
		      "gpugate: container \"agent\" is privileged and the pod can "
		      "reach GPU nodes (its nodeSelector gpu=a100 selects flavor "
		      "mig-1g); a privileged container sees every GPU on the node: "
		      "remove securityContext.privileged" EXEMPT_HINT("web"));
	done(&r);
}

Test(decide, outside_tenants_a_reaching_pod_gets_every_rule)
{
	struct run r;

	run(&r, "web",
	    POD("\"app\":\"x\"",
		"{" GPU_TOLERATION ",\"containers\":[{\"name\":\"m\",\"env\":[{"
		"\"name\":\"NVIDIA_VISIBLE_DEVICES\",\"value\":\"all\"}]}]}"),
	    DECIDE_MUTATE);
	expect_denied(&r, "security",
		      "gpugate: container \"m\" sets NVIDIA_VISIBLE_DEVICES, which "
		      "bypasses the device plugin's GPU isolation: remove it and ask "
		      "for GPUs with a class" EXEMPT_HINT("web"));
	done(&r);
	run(&r, "web",
	    POD("\"app\":\"x\"",
		"{\"nodeSelector\":{\"gpu\":\"h100\"},\"volumes\":[{\"name\":\"dev\","
		"\"hostPath\":{\"path\":\"/dev\"}}],\"containers\":[{\"name\":\"m\","
		"\"volumeMounts\":[{\"name\":\"dev\",\"mountPath\":\"/host/dev\"}]}]}"),
	    DECIDE_MUTATE);
	expect_denied(&r, "security",
		      "gpugate: container \"m\" mounts host path /dev (volume \"dev\"), "
		      "which bypasses the device plugin's GPU isolation: remove the "
		      "hostPath volume" EXEMPT_HINT("web"));
	done(&r);
	/* Hiding devices is still harmless in a container without GPUs. */
	run(&r, "web",
	    POD("\"app\":\"x\"",
		"{" GPU_TOLERATION ",\"containers\":[{\"name\":\"m\",\"env\":[{"
		"\"name\":\"NVIDIA_VISIBLE_DEVICES\",\"value\":\"none\"}]}]}"),
	    DECIDE_MUTATE);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	done(&r);
}

Test(decide, outside_tenants_the_settings_mode_applies)
{
	struct policy *saved = use_policy(
		"version: 1\n"
		"settings: {mode: warn}\n"
		"flavors:\n"
		"  - {name: h100, resource: nvidia.com/gpu, sharing: exclusive,\n"
		"     nodeSelector: [\"gpu=h100\"], gpusPerNode: 8}\n"
		"classes: []\n"
		"tenants: []\n");
	struct run r;

	run(&r, "web",
	    POD("\"app\":\"x\"",
		"{\"nodeSelector\":{\"gpu\":\"h100\"},\"containers\":[{\"name\":"
		"\"agent\"," PRIV "}]}"),
	    DECIDE_VALIDATE);
	cr_assert(r.dec.allowed);
	cr_assert(r.dec.violation);
	cr_assert_eq(r.dec.mode, POLICY_MODE_WARN);
	cr_assert_eq(r.dec.n_warnings, 1);
	cr_assert_str_eq(r.dec.warnings[0],
			 "gpugate: container \"agent\" is privileged and the pod can "
			 "reach GPU nodes (its nodeSelector gpu=h100 selects flavor "
			 "h100); a privileged container sees every GPU on the node: "
			 "remove securityContext.privileged");
	done(&r);
	restore(saved);
}

Test(decide, nvidia_mig_monitor_devices)
{
	struct run r;

	run(&r, "research",
	    POD("\"gpugate.io/class\":\"big\"",
		"{\"containers\":[{\"name\":\"main\",\"env\":[{\"name\":"
		"\"NVIDIA_MIG_MONITOR_DEVICES\",\"value\":\"all\"}]}]}"),
	    DECIDE_MUTATE);
	expect_denied(&r, "security",
		      "gpugate: container \"main\" sets NVIDIA_MIG_MONITOR_DEVICES, "
		      "which bypasses the device plugin's GPU isolation: remove it "
		      "and ask for GPUs with a class");
	done(&r);
}

Test(decide, env_from_that_could_set_nvidia_variables)
{
	static const char *const denied[][2] = {
		{"", "without a prefix"},
		{",\"prefix\":\"\"", "without a prefix"},
		{",\"prefix\":\"NV\"", "with prefix \"NV\""},
		{",\"prefix\":\"NVIDIA_\"", "with prefix \"NVIDIA_\""},
		{",\"prefix\":\"NVIDIA_X\"", "with prefix \"NVIDIA_X\""},
	};
	static const char *const allowed[] = {
		",\"prefix\":\"APP_\"", ",\"prefix\":\"NVX\"", ",\"prefix\":\"nvidia_\"",
		",\"prefix\":\"XNVIDIA_\"",
	};

	for (size_t i = 0; i < sizeof(denied) / sizeof(denied[0]); i++) {
		struct run r;
		char want[DECIDE_MESSAGE_LEN];

		snprintf(want, sizeof(want),
			 "gpugate: container \"app\" takes env from configMap \"cfg\" "
			 "%s and the pod can reach GPU nodes (it asks for class "
			 "small); its keys could make variables that start with "
			 "NVIDIA_, such as NVIDIA_VISIBLE_DEVICES, which bypasses the "
			 "device plugin's GPU isolation: set a prefix that does not "
			 "start with NVIDIA_ (e.g. prefix: APP_)",
			 denied[i][1]);
		run_env_from(&r, "\"gpugate.io/class\":\"small\"", denied[i][0]);
		expect_denied(&r, "security", want);
		done(&r);
	}
	for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++) {
		struct run r;

		run_env_from(&r, "\"gpugate.io/class\":\"small\"", allowed[i]);
		cr_expect(r.dec.allowed, "%s: %s", allowed[i], r.dec.message);
		done(&r);
	}
	/* A pod that cannot reach GPU nodes keeps what it had. */
	{
		struct run r;

		run_env_from(&r, "\"app\":\"x\"", "");
		cr_assert(r.dec.allowed, "%s", r.dec.message);
		done(&r);
	}
}

Test(decide, env_from_a_secret_in_an_init_container)
{
	struct run r;

	run(&r, "research",
	    POD("\"gpugate.io/class\":\"small\"",
		"{\"initContainers\":[{\"name\":\"fetch\",\"envFrom\":[{\"prefix\":"
		"\"APP_\",\"configMapRef\":{\"name\":\"a\"}},{\"secretRef\":{"
		"\"name\":\"creds\"},\"prefix\":\"NVIDIA\"}]}],"
		"\"containers\":[{\"name\":\"main\"}]}"),
	    DECIDE_MUTATE);
	expect_denied(&r, "security",
		      "gpugate: init container \"fetch\" takes env from secret "
		      "\"creds\" with prefix \"NVIDIA\" and the pod can reach GPU "
		      "nodes (it asks for class small); its keys could make "
		      "variables that start with NVIDIA_, such as "
		      "NVIDIA_VISIBLE_DEVICES, which bypasses the device plugin's "
		      "GPU isolation: set a prefix that does not start with NVIDIA_ "
		      "(e.g. prefix: APP_)");
	done(&r);
}

#define DEBUG_POD(labels, spec_extra, ephemeral)                            \
	POD(labels, "{" spec_extra "\"containers\":[{\"name\":\"main\","       \
		    "\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}],"   \
		    "\"ephemeralContainers\":[" ephemeral "]}")

Test(decide, privileged_ephemeral_container)
{
	struct run r;

	run_ephemeral(&r, "research",
		      DEBUG_POD("\"gpugate.io/class\":\"small\"", "",
				"{\"name\":\"debugger-x\",\"targetContainerName\":"
				"\"main\"," PRIV "}"));
	expect_denied(&r, "security",
		      "gpugate: ephemeral container \"debugger-x\" is privileged and "
		      "the pod can reach GPU nodes (it asks for class small); a "
		      "privileged container sees every GPU on the node: remove "
		      "securityContext.privileged (kubectl debug --profile=sysadmin "
		      "sets it)");
	cr_assert_not(r.dec.plan.active);
	cr_assert_not(r.dec.claim.needed);
	done(&r);
	/* Unprivileged, it may debug. */
	run_ephemeral(&r, "research",
		      DEBUG_POD("\"gpugate.io/class\":\"small\"", "",
				"{\"name\":\"debugger-x\"}"));
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	cr_assert_not(r.dec.violation);
	cr_assert_eq(r.dec.n_warnings, 0);
	done(&r);
	/* So may a privileged one, in a pod that cannot reach GPU nodes. */
	for (size_t i = 0; i < 2; i++) {
		static const char *const namespaces[] = {"research", "web"};

		run_ephemeral(&r, namespaces[i],
			      POD("\"app\":\"x\"",
				  "{\"containers\":[{\"name\":\"main\"}],"
				  "\"ephemeralContainers\":[{\"name\":\"dbg\"," PRIV "}]}"));
		cr_expect(r.dec.allowed, "%s: %s", namespaces[i], r.dec.message);
		done(&r);
	}
}

Test(decide, ephemeral_container_env_and_host_path)
{
	struct run r;

	run_ephemeral(&r, "web",
		      DEBUG_POD("\"app\":\"x\"", "",
				"{\"name\":\"dbg\",\"env\":[{\"name\":"
				"\"NVIDIA_VISIBLE_DEVICES\",\"value\":\"all\"}]}"));
	expect_denied(&r, "security",
		      "gpugate: ephemeral container \"dbg\" sets "
		      "NVIDIA_VISIBLE_DEVICES, which bypasses the device plugin's GPU "
		      "isolation: remove it and ask for GPUs with a class"
		      EXEMPT_HINT("web"));
	done(&r);
	run_ephemeral(&r, "web",
		      DEBUG_POD("\"app\":\"x\"",
				"\"volumes\":[{\"name\":\"root\",\"hostPath\":{\"path\":"
				"\"/\"}}],",
				"{\"name\":\"dbg\",\"volumeMounts\":[{\"name\":\"root\","
				"\"mountPath\":\"/host\"}]}"));
	expect_denied(&r, "security",
		      "gpugate: ephemeral container \"dbg\" mounts host path / (volume "
		      "\"root\"), which bypasses the device plugin's GPU isolation: "
		      "remove the hostPath volume" EXEMPT_HINT("web"));
	done(&r);
	run_ephemeral(&r, "web",
		      DEBUG_POD("\"app\":\"x\"", "",
				"{\"name\":\"dbg\",\"envFrom\":[{\"secretRef\":{"
				"\"name\":\"s\"}}]}"));
	expect_denied(&r, "security",
		      "gpugate: ephemeral container \"dbg\" takes env from secret "
		      "\"s\" without a prefix and the pod can reach GPU nodes (it asks "
		      "for nvidia.com/gpu); its keys could make variables that start "
		      "with NVIDIA_, such as NVIDIA_VISIBLE_DEVICES, which bypasses "
		      "the device plugin's GPU isolation: set a prefix that does not "
		      "start with NVIDIA_ (e.g. prefix: APP_)" EXEMPT_HINT("web"));
	done(&r);
}

Test(decide, ephemeral_container_in_warn_and_audit_modes)
{
	struct run r;

	/* Tenant sandbox warns: admitted, the denial text as a warning. */
	run_ephemeral(&r, "sandbox",
		      DEBUG_POD("\"gpugate.io/class\":\"small\"", "",
				"{\"name\":\"dbg\"," PRIV "}"));
	cr_assert(r.dec.allowed);
	cr_assert_eq(r.dec.n_warnings, 1);
	cr_assert_str_eq(r.dec.warnings[0], r.dec.message);
	cr_assert_not(r.dec.plan.active);
	done(&r);
	run_ephemeral(&r, "watch",
		      DEBUG_POD("\"gpugate.io/class\":\"small\"", "",
				"{\"name\":\"dbg\"," PRIV "}"));
	cr_assert(r.dec.allowed);
	cr_assert(r.dec.violation);
	cr_assert_eq(r.dec.n_warnings, 0);
	done(&r);
}

Test(decide, conflicting_node_selector)
{
	struct run r;

	run(&r, "research",
	    POD("\"gpugate.io/class\":\"big\"",
		"{\"nodeSelector\":{\"gpu\":\"a100\"},\"containers\":[{\"name\":\"m\"}]}"),
	    DECIDE_MUTATE);
	expect_denied(&r, "node-selector",
		      "gpugate: nodeSelector gpu=a100 conflicts with flavor h100, "
		      "which needs gpu=h100: remove it, the class chooses the nodes");
	done(&r);
}

Test(decide, unknown_gpu_container)
{
	struct run r;

	run(&r, "research",
	    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"labels\":"
	    "{\"gpugate.io/class\":\"big\"},\"annotations\":{\"gpugate.io/container\":"
	    "\"trainer\"}},\"spec\":{\"containers\":[{\"name\":\"a\"},{\"name\":"
	    "\"b\"}]}}",
	    DECIDE_MUTATE);
	expect_denied(&r, "container-unknown",
		      "gpugate: annotation gpugate.io/container names container "
		      "\"trainer\", but the pod has no such container (containers: "
		      "a, b)");
	done(&r);
}

Test(decide, pod_without_containers)
{
	struct run r;

	run(&r, "research", POD("\"gpugate.io/class\":\"big\"", "{\"containers\":[]}"),
	    DECIDE_MUTATE);
	expect_denied(&r, "container-unknown", "gpugate: the pod has no containers");
	done(&r);
}

Test(decide, job_and_template_disagree)
{
	struct run r;

	run(&r, "research",
	    "{\"apiVersion\":\"batch/v1\",\"kind\":\"Job\",\"metadata\":{\"labels\":"
	    "{\"gpugate.io/class\":\"big\"}},\"spec\":{\"template\":{\"metadata\":"
	    "{\"labels\":{\"gpugate.io/class\":\"small\"}},\"spec\":" NEVER_SPEC "}}}",
	    DECIDE_MUTATE);
	expect_denied(&r, "class-conflict",
		      "gpugate: the Job asks for class \"big\" but its pod template "
		      "asks for class \"small\"; use one");
	done(&r);
}

Test(decide, validate_refuses_an_unmutated_class_pod)
{
	struct run r;

	run(&r, "research", POD("\"gpugate.io/class\":\"big\"", ONE_CONTAINER),
	    DECIDE_VALIDATE);
	expect_denied(&r, "not-mutated",
		      "gpugate: the pod lacks nodeSelector gpu=h100 of flavor h100: "
		      "it was changed after gpugate's mutation, or the mutating "
		      "webhook is not registered");
	done(&r);
	run(&r, "research",
	    POD("\"gpugate.io/class\":\"big\"",
		"{\"nodeSelector\":{\"gpu\":\"h100\"},\"containers\":[{\"name\":"
		"\"main\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"4\"}}}]}"),
	    DECIDE_VALIDATE);
	expect_denied(&r, "not-mutated",
		      "gpugate: container \"main\" has nvidia.com/gpu 4 but class big "
		      "gives 8: it was changed after gpugate's mutation, or the "
		      "mutating webhook is not registered");
	done(&r);
	run(&r, "research",
	    POD("\"gpugate.io/class\":\"big\"",
		"{\"nodeSelector\":{\"gpu\":\"h100\"},\"containers\":[{\"name\":"
		"\"main\"}]}"),
	    DECIDE_VALIDATE);
	expect_denied(&r, "not-mutated",
		      "gpugate: container \"main\" has nvidia.com/gpu none but class big "
		      "gives 8: it was changed after gpugate's mutation, or the "
		      "mutating webhook is not registered");
	done(&r);
}

/* ---- quota -------------------------------------------------------------- */

Test(decide, over_quota_with_a_cohort)
{
	struct run r;

	used[T_RESEARCH][F_H100] = 12;
	used[T_PRODUCT][F_H100] = 6; /* lends min(4, 8 - 6) = 2 */
	used[T_LENDER][F_H100] = 32;
	run(&r, "research", POD("\"gpugate.io/class\":\"big\"", ONE_CONTAINER),
	    DECIDE_MUTATE);
	expect_denied(&r, "quota",
		      "gpugate: tenant \"research\" is over its h100 quota: requested "
		      "8 (class big), in use 12 of nominal 16, cohort \"lab\" can "
		      "lend 2");
	done(&r);
}

/* Preemptible (gpugate may take it back: the label), yet no checkpoint
 * hook the user did not ask for: its class is not preemptible. */
Test(decide, borrowed_quota_makes_the_pod_preemptible_without_hooks)
{
	struct run r;

	used[T_RESEARCH][F_H100] = 12;
	used[T_PRODUCT][F_H100] = 2; /* lends min(4, 8 - 2) = 4 */
	used[T_LENDER][F_H100] = 32;
	run(&r, "research", POD("\"gpugate.io/class\":\"big\"", ONE_CONTAINER),
	    DECIDE_MUTATE);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	cr_assert_eq(r.dec.quota.position, QUOTA_BORROWED);
	cr_assert_eq(r.dec.plan.borrowed, 4);
	cr_assert(r.dec.plan.preemptible);
	cr_assert_not(r.dec.plan.checkpoint);
	cr_assert_not(r.dec.plan.signal);
	cr_assert_not(r.dec.plan.set_pre_stop);
	cr_assert_eq(r.dec.plan.grace, 0);
	cr_assert(r.dec.plan.cap_grace, "a reclaim is not held for a grace it chose");
	cr_assert_eq(r.dec.plan.grace_cap, 600);
	cr_assert_str_eq(r.dec.plan.claim_name, "");
	cr_assert_eq(r.dec.n_warnings, 0, "said at /validate");
	cr_assert_str_eq(r.dec.plan.decision,
			 "big: 8 x h100 for tenant research; 20/16 in use, 4 borrowed "
			 "from lab");
	done(&r);
}

/* Found by the review fuzzer (tests/fuzz/corpus/review/
 * crash-job-of-nothing-over-nominal): a Job that runs no pod at once, of a
 * tenant already over its nominal quota, is in the borrowed position but
 * borrows nothing.  It was stamped preemptible without a borrowed count,
 * and its reinvocation then injected the checkpoint hooks. */
Test(decide, a_job_of_nothing_over_nominal_borrows_nothing)
{
	struct run r;

	used[T_RESEARCH][F_H100] = 20;
	run(&r, "research", JOB("0", "\"gpugate.io/class\":\"big\"", ONE_CONTAINER),
	    DECIDE_MUTATE);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	cr_assert_eq(r.dec.plan.borrowed, 0);
	cr_assert_not(r.dec.plan.preemptible);
	cr_assert_not(r.dec.plan.checkpoint);
	cr_assert_eq(r.dec.n_warnings, 0);
	done(&r);
}

/* product asks for its whole nominal 8 while research borrows 4 of the 4
 * product may lend (lender uses all of its own). */
static void lend_out_product(void)
{
	used[T_RESEARCH][F_H100] = 20;
	used[T_LENDER][F_H100] = 32;
}

Test(decide, lent_quota_is_reclaimed_by_default)
{
	struct run r;

	lend_out_product();
	run(&r, "product", POD("\"gpugate.io/class\":\"big\"", ONE_CONTAINER),
	    DECIDE_MUTATE);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	cr_assert_eq(r.dec.quota.position, QUOTA_NOMINAL);
	cr_assert_eq(r.dec.quota.reclaim, 4);
	cr_assert_str_eq(r.dec.plan.decision,
			 "big: 8 x h100 for tenant product; 8/8 in use, reclaims 4 lent "
			 "in lab");
	done(&r);
}

Test(decide, lent_quota_with_reclaim_never_waits)
{
	static const char at[] = "    cohort: lab\n    sharing: [exclusive, mig]\n";
	char yaml[sizeof(policy_yaml) + 64];
	const char *cut = strstr(policy_yaml, at);
	struct run r;

	cr_assert(cut);
	snprintf(yaml, sizeof(yaml), "%.*s    reclaimWithinCohort: Never\n%s",
		 (int)(cut - policy_yaml), policy_yaml, cut);
	policy_free(P);
	P = test_policy(yaml);
	lend_out_product();
	run(&r, "product", POD("\"gpugate.io/class\":\"big\"", ONE_CONTAINER),
	    DECIDE_MUTATE);
	expect_denied(&r, "quota",
		      "gpugate: tenant \"product\" cannot have its lent h100 quota back "
		      "now: requested 8 (class big), in use 0 of nominal 8, and 4 of "
		      "those units are lent out in cohort \"lab\" (tenant \"research\" "
		      "borrows 4); with reclaimWithinCohort Never it waits until they "
		      "are returned");
	cr_assert_eq(r.dec.quota.position, QUOTA_LENT_OUT);
	done(&r);
}

Test(decide, the_claim_carries_the_priority_its_pods_run_at)
{
	struct run r;

	run_prios = &prios;
	/* A pod's spec.priority: the apiserver resolved it already. */
	run(&r, "research",
	    POD("\"gpugate.io/class\":\"small\"",
		"{\"priority\":77,\"priorityClassName\":\"mine\",\"containers\":"
		"[{\"name\":\"m\"}]}"),
	    DECIDE_MUTATE);
	cr_assert(r.dec.claim.needed);
	cr_expect_eq(r.dec.claim.priority, 77);
	done(&r);
	/* Class big sets priorityClassName training on a pod without one:
	 * the apiserver will resolve it again, so spec.priority is stale. */
	run(&r, "research",
	    POD("\"gpugate.io/class\":\"big\"",
		"{\"priority\":0,\"containers\":[{\"name\":\"m\"}]}"),
	    DECIDE_MUTATE);
	cr_expect_eq(r.dec.claim.priority, 1000);
	done(&r);
	/* A Job's template: its class, resolved; a number written in the
	 * template is no priority (the apiserver refuses such pods). */
	run(&r, "research",
	    JOB("2", "\"gpugate.io/class\":\"small\"",
		"{\"priorityClassName\":\"urgent\",\"priority\":999999,"
		"\"containers\":[{\"name\":\"m\"}]}"),
	    DECIDE_MUTATE);
	cr_expect_eq(r.dec.claim.priority, 5000);
	done(&r);
	/* No class: the globalDefault one, else 0; an unknown class: 0. */
	run(&r, "research", JOB("2", "\"gpugate.io/class\":\"small\"", ONE_CONTAINER),
	    DECIDE_MUTATE);
	cr_expect_eq(r.dec.claim.priority, 0);
	done(&r);
	has_default = true;
	default_prio = -5;
	run(&r, "research", JOB("2", "\"gpugate.io/class\":\"small\"", ONE_CONTAINER),
	    DECIDE_MUTATE);
	cr_expect_eq(r.dec.claim.priority, -5);
	done(&r);
	run(&r, "research",
	    JOB("2", "\"gpugate.io/class\":\"small\"",
		"{\"priorityClassName\":\"gone\",\"containers\":[{\"name\":\"m\"}]}"),
	    DECIDE_MUTATE);
	cr_expect_eq(r.dec.claim.priority, 0);
	done(&r);
	/* Nobody watches PriorityClasses (embedded mode): 0. */
	run_prios = NULL;
	run(&r, "research",
	    JOB("2", "\"gpugate.io/class\":\"small\"",
		"{\"priorityClassName\":\"urgent\",\"containers\":[{\"name\":\"m\"}]}"),
	    DECIDE_MUTATE);
	cr_expect_eq(r.dec.claim.priority, 0);
	done(&r);
}

Test(decide, lower_priority_short_names_the_bound_and_what_is_below)
{
	struct decide_input in;
	struct quota_result q;
	struct run r;

	lend_out_product();
	run(&r, "product", POD("\"gpugate.io/class\":\"big\"", ONE_CONTAINER),
	    DECIDE_MUTATE);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	/* What usage_decide() says when the borrowers below the request's
	 * priority cannot give the units back. */
	q = r.dec.quota;
	q.position = QUOTA_RECLAIM_SHORT;
	q.below = 1000;
	q.reclaimable = 1;
	in = (struct decide_input){.policy = P, .wl = &r.wl, .phase = DECIDE_MUTATE};
	decide_prepare(&in, &r.dec);
	decide_quota(&in, &r.dec, &q);
	expect_denied(&r, "quota",
		      "gpugate: tenant \"product\" cannot have its lent h100 quota back "
		      "now: requested 8 (class big), in use 0 of nominal 8, and 4 of "
		      "those units are lent out in cohort \"lab\" (tenant \"research\" "
		      "borrows 4); with reclaimWithinCohort LowerPriority only workloads "
		      "of priority below 1000 are taken back, and they hold 1; it waits "
		      "until the units are returned");
	done(&r);
}

#define DEPLOY(kind, replicas, labels, owner)                                  \
	"{\"apiVersion\":\"apps/v1\",\"kind\":\"" kind "\",\"metadata\":{\"name\":"   \
	"\"d\"" owner "},\"spec\":{\"replicas\":" replicas ",\"template\":{"         \
	"\"metadata\":{\"labels\":{" labels "}},\"spec\":" ONE_CONTAINER "}}}"

Test(decide, a_deployment_reserves_nothing_and_is_judged_whole)
{
	struct run r;

	/* research may hold 16 + 8 = 24 of h100: 3 x 8 fits, 4 x 8 never. */
	used[T_RESEARCH][F_H100] = 24; /* what others hold now does not count */
	run(&r, "research", DEPLOY("Deployment", "3", "\"gpugate.io/class\":\"big\"", ""),
	    DECIDE_MUTATE);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	cr_expect_not(r.dec.claim.needed, "its pods are charged, not it");
	cr_expect_str_eq(r.dec.plan.decision,
			 "big: 3 pods x 8 x h100 for tenant research; each pod is charged "
			 "when it is created");
	done(&r);
	run(&r, "research", DEPLOY("StatefulSet", "4", "\"gpugate.io/class\":\"big\"", ""),
	    DECIDE_MUTATE);
	expect_denied(&r, "quota",
		      "gpugate: StatefulSet \"d\" can never run all its replicas: needs 32 "
		      "h100 (4 replicas x 8), tenant \"research\" may hold at most 24 "
		      "(nominal 16 + borrowing limit 8)");
	done(&r);
	/* The rules of a pod hold for its template. */
	run(&r, "research", DEPLOY("DaemonSet", "1", "\"gpugate.io/class\":\"mig\"", ""),
	    DECIDE_MUTATE);
	expect_denied(&r, "class-not-allowed",
		      "gpugate: class \"mig\" is not allowed for tenant \"research\"; "
		      "allowed: big, small, shared");
	done(&r);
}

Test(decide, a_replicaset_of_a_deployment_is_left_to_the_deployment)
{
	struct run r;

	/* Its template is the Deployment's, judged there; mapping it anew
	 * would make the Deployment controller miss its own ReplicaSet. */
	run(&r, "research",
	    DEPLOY("ReplicaSet", "9", "\"gpugate.io/class\":\"big\"",
		   ",\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":"
		   "\"Deployment\",\"name\":\"d\",\"uid\":\"u\",\"controller\":true}]"),
	    DECIDE_MUTATE);
	cr_expect(r.dec.allowed);
	cr_expect_not(r.dec.plan.active);
	done(&r);
	/* On its own it is judged like a Deployment. */
	run(&r, "research", DEPLOY("ReplicaSet", "9", "\"gpugate.io/class\":\"big\"", ""),
	    DECIDE_MUTATE);
	cr_expect_not(r.dec.allowed);
	done(&r);
}

Test(decide, borrowing_limit_binds)
{
	struct run r;

	/* Already borrowing 4 of its limit 8; the cohort could lend 32. */
	used[T_RESEARCH][F_H100] = 20;
	run(&r, "research", POD("\"gpugate.io/class\":\"big\"", ONE_CONTAINER),
	    DECIDE_MUTATE);
	expect_denied(&r, "quota",
		      "gpugate: tenant \"research\" is over its h100 quota: requested "
		      "8 (class big), in use 20 of nominal 16, borrowing limit 8 leaves "
		      "4");
	done(&r);
}

Test(decide, over_quota_without_a_cohort)
{
	struct run r;

	used[T_SOLO][F_H100] = 1;
	run(&r, "solo",
	    POD("\"gpugate.io/class\":\"small\",\"gpugate.io/gpus\":\"2\"",
		ONE_CONTAINER),
	    DECIDE_MUTATE);
	expect_denied(&r, "quota",
		      "gpugate: tenant \"solo\" is over its h100 quota: requested 2 "
		      "(class small), in use 1 of nominal 2, no cohort to borrow from");
	done(&r);
}

Test(decide, job_that_can_never_fit)
{
	struct run r;

	run(&r, "research", JOB("4", "\"gpugate.io/class\":\"big\"", NEVER_SPEC),
	    DECIDE_MUTATE);
	expect_denied(&r, "quota",
		      "gpugate: job can never be admitted: needs 32 h100 (parallelism "
		      "4 x 8), tenant \"research\" may hold at most 24 (nominal 16 + "
		      "borrowing limit 8)");
	done(&r);
	/* No borrowing limit: the ceiling is what the cohort can ever lend. */
	run(&r, "product", JOB("8", "\"gpugate.io/class\":\"big\"", NEVER_SPEC),
	    DECIDE_MUTATE);
	expect_denied(&r, "quota",
		      "gpugate: job can never be admitted: needs 64 h100 (parallelism "
		      "8 x 8), tenant \"product\" may hold at most 56 (nominal 8 + 48 "
		      "that cohort \"lab\" can lend)");
	done(&r);
}

Test(decide, pod_that_can_never_fit)
{
	struct run r;

	run(&r, "solo", POD("\"gpugate.io/class\":\"big\"", ONE_CONTAINER),
	    DECIDE_MUTATE);
	expect_denied(&r, "quota",
		      "gpugate: pod can never be admitted: needs 8 h100, tenant "
		      "\"solo\" may hold at most 2 (nominal 2)");
	done(&r);
}

Test(decide, tenant_without_quota_for_the_flavor)
{
	struct run r;

	/* product may use every class, but has no quota for l4 and may not
	 * use time-slicing: the sharing rule comes first; solo has neither
	 * a sharing list nor l4 quota. */
	run(&r, "solo", POD("\"gpugate.io/class\":\"shared\"", ONE_CONTAINER),
	    DECIDE_MUTATE);
	expect_denied(&r, "quota",
		      "gpugate: tenant \"solo\" has no quota for flavor l4 (class "
		      "shared); ask the platform team for quota");
	done(&r);
}

/* /validate again, on the object /mutate (m) made, with today's usage. */
static void revalidate(struct run *m, struct run *v, const char *ns)
{
	struct diag d;
	json_t *copy = json_deep_copy(m->obj);

	diag_init(&d);
	cr_assert_eq(apply_plan(copy, &m->wl, &m->dec.plan, P, &d), 0, "%s",
		     diag_text(&d));
	run_obj(v, ns, copy, DECIDE_VALIDATE);
}

Test(decide, validate_refuses_borrowing_for_a_workload_not_made_preemptible)
{
	struct run m, v;

	/* Mutated while nominal quota was free... */
	mutate_validate(&m, &v, "research",
			POD("\"gpugate.io/class\":\"big\"", ONE_CONTAINER));
	cr_assert(v.dec.allowed);
	done(&v);
	/* ...validated after others took it: it would have to borrow. */
	used[T_RESEARCH][F_H100] = 12;
	revalidate(&m, &v, "research");
	expect_denied(&v, "quota",
		      "gpugate: tenant \"research\" now needs 4 borrowed h100 for this "
		      "pod, but it was not made preemptible when it was mutated (the "
		      "quota changed in between); retry the request");
	done(&m);
	done(&v);
}

/* The other direction: /mutate made it preemptible, /validate finds another
 * amount to borrow.  Admitted, with one line that says what changed. */
static void expect_quota_changed(struct run *v, const char *success,
				 const char *notice, const char *warning)
{
	cr_assert(v->dec.allowed, "%s", v->dec.message);
	cr_assert_str_eq(v->dec.success, success);
	cr_assert_eq(v->dec.n_warnings, 2);
	cr_assert_str_eq(v->dec.warnings[0], notice);
	cr_assert_str_eq(v->dec.warnings[1], warning);
	cr_assert_lt(strlen(warning), 120);
}

Test(decide, validate_admits_a_borrower_that_now_fits_nominal_quota)
{
	struct run m, v;

	used[T_RESEARCH][F_H100] = 12;
	used[T_PRODUCT][F_H100] = 2; /* lends min(4, 8 - 2) = 4 */
	used[T_LENDER][F_H100] = 32;
	mutate_validate(&m, &v, "research",
			POD("\"gpugate.io/class\":\"big\"", ONE_CONTAINER));
	cr_assert_eq(m.dec.plan.borrowed, 4);
	cr_assert_eq(v.dec.n_warnings, 1, "the same 4 borrowed: only that it borrows");
	done(&v);
	/* Others finished in between: it fits the nominal quota now. */
	used[T_RESEARCH][F_H100] = 0;
	revalidate(&m, &v, "research");
	cr_assert_str_eq(v.dec.success,
			 "gpugate: big -> 8 x h100 for tenant research (8/16 in use)");
	cr_assert_eq(v.dec.n_warnings, 1);
	cr_assert_str_eq(v.dec.warnings[0], "gpugate: quota changed after mutation: now 0 borrowed "
			 "(annotation says 4); it stays preemptible");
	done(&v);
	/* Or it borrows more: 14 + 8 - 16 = 6, lent 4 + 2. */
	used[T_RESEARCH][F_H100] = 14;
	used[T_LENDER][F_H100] = 30;
	revalidate(&m, &v, "research");
	expect_quota_changed(&v,
			     "gpugate: big -> 8 x h100 for tenant research (22/16 in use, "
			     "6 borrowed from lab)",
			     "gpugate: borrowed 6 h100 from cohort lab: gpugate takes them "
			     "back when a lender needs them (no checkpoint hooks)",
			     "gpugate: quota changed after mutation: now 6 borrowed "
			     "(annotation says 4); it stays preemptible");
	done(&m);
	done(&v);
}

Test(decide, validate_admits_a_preemptible_class_that_now_borrows)
{
	struct run m, v;

	/* Class small is preemptible: mutated on nominal quota, without the
	 * annotation, it may borrow at /validate. */
	mutate_validate(&m, &v, "research",
			POD("\"gpugate.io/class\":\"small\",\"gpugate.io/gpus\":\"2\"",
			    ONE_CONTAINER));
	cr_assert_eq(m.dec.plan.borrowed, 0);
	done(&v);
	used[T_RESEARCH][F_H100] = 15;
	revalidate(&m, &v, "research");
	expect_quota_changed(&v,
			     "gpugate: small -> 2 x h100 for tenant research (17/16 in use, "
			     "1 borrowed from lab)",
			     "gpugate: borrowed 1 h100 from cohort lab: gpugate takes them "
			     "back when a lender needs them, after a checkpoint",
			     "gpugate: quota changed after mutation: now 1 borrowed (no "
			     "annotation); it stays preemptible");
	done(&m);
	done(&v);
}

/* ---- enforcement modes -------------------------------------------------- */

Test(decide, warn_mode_admits_and_warns_from_validate_only)
{
	struct run m, v;

	used[T_SANDBOX][F_L4] = 2;
	run(&m, "sandbox", POD("\"gpugate.io/class\":\"shared\"", ONE_CONTAINER),
	    DECIDE_MUTATE);
	cr_assert(m.dec.allowed);
	cr_assert(m.dec.violation);
	cr_assert_eq(m.dec.n_warnings, 0);
	cr_assert_str_eq(m.dec.plan.decision,
			 "warn: tenant \"sandbox\" is over its l4 quota: requested 1 "
			 "(class shared), in use 2 of nominal 2, no cohort to borrow "
			 "from");
	done(&m);
	mutate_validate(&m, &v, "sandbox",
			POD("\"gpugate.io/class\":\"shared\"", ONE_CONTAINER));
	cr_assert(v.dec.allowed);
	cr_assert_eq(v.dec.n_warnings, 1);
	cr_assert_str_eq(v.dec.warnings[0],
			 "gpugate: tenant \"sandbox\" is over its l4 quota: requested 1 "
			 "(class shared), in use 2 of nominal 2, no cohort to borrow "
			 "from");
	cr_assert_eq(decide_problem_count(&v.dec), 1, "a warn-mode breach is a problem");
	cr_assert_str_eq(v.dec.success,
			 "gpugate: shared -> 1 x l4 for tenant sandbox (3/2 in use)");
	done(&m);
	done(&v);
}

Test(decide, warn_mode_records_a_violation_with_nothing_to_map)
{
	struct run r;

	run(&r, "sandbox", POD("\"gpugate.io/class\":\"huge\"", ONE_CONTAINER),
	    DECIDE_MUTATE);
	cr_assert(r.dec.allowed);
	cr_assert_not(r.dec.plan.map);
	cr_assert_eq(r.dec.n_warnings, 0, "warn-mode texts come from /validate");
	cr_assert_str_eq(r.dec.plan.note,
			 "warn: unknown GPU class \"huge\"; tenant \"sandbox\" may "
			 "use: big, small, shared");
	done(&r);
	run(&r, "sandbox", POD("\"gpugate.io/class\":\"huge\"", ONE_CONTAINER),
	    DECIDE_VALIDATE);
	cr_assert(r.dec.allowed);
	cr_assert_eq(r.dec.n_warnings, 1);
	cr_assert_str_eq(r.dec.warnings[0],
			 "gpugate: unknown GPU class \"huge\"; tenant \"sandbox\" may "
			 "use: big, small, shared");
	done(&r);
}

Test(decide, audit_mode_admits_silently)
{
	struct run r;

	run(&r, "watch", POD("\"gpugate.io/class\":\"huge\"", ONE_CONTAINER),
	    DECIDE_MUTATE);
	cr_assert(r.dec.allowed);
	cr_assert(r.dec.violation);
	cr_assert_str_eq(r.dec.rule, "class-unknown");
	cr_assert_eq(r.dec.n_warnings, 0);
	cr_assert_not(r.dec.plan.map, "nothing to map for an unknown class");
	cr_assert(r.dec.plan.active, "the record is still written");
	cr_assert_str_eq(r.dec.plan.note,
			 "audit: would deny: unknown GPU class \"huge\"; tenant "
			 "\"watch\" may use: big, small");
	done(&r);
	used[T_WATCH][F_H100] = 1;
	run(&r, "watch", POD("\"gpugate.io/class\":\"small\"", ONE_CONTAINER),
	    DECIDE_MUTATE);
	cr_assert(r.dec.allowed);
	cr_assert(r.dec.plan.map, "mapping still happens in audit mode");
	cr_assert_str_eq(r.dec.plan.decision,
			 "audit: would deny: tenant \"watch\" is over its h100 quota: "
			 "requested 1 (class small), in use 1 of nominal 1, no cohort to "
			 "borrow from");
	cr_assert_eq(r.dec.n_warnings, 0);
	done(&r);
}

/* ---- checkpoint hooks --------------------------------------------------- */

Test(decide, preemptible_job_gets_hooks_and_a_failure_rule)
{
	struct run r;

	run(&r, "research", JOB("2", "\"gpugate.io/class\":\"small\"", NEVER_SPEC),
	    DECIDE_MUTATE);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	cr_assert(r.dec.plan.preemptible);
	cr_assert(r.dec.plan.checkpoint);
	cr_assert(r.dec.plan.set_pre_stop);
	cr_assert_eq(r.dec.plan.grace, 600);
	cr_assert_str_eq(r.dec.plan.claim_name, "research-ckpt");
	cr_assert(r.dec.plan.add_failure_rule);
	cr_assert_eq(r.dec.n_warnings, 0);
	done(&r);
}

Test(decide, on_failure_job_gets_a_warning_instead_of_a_rule)
{
	static const struct {
		const char *spec, *shown;
	} cases[] = {
		{"{\"restartPolicy\":\"OnFailure\",\"containers\":[{\"name\":\"m\"}]}",
		 "OnFailure"},
		{"{\"containers\":[{\"name\":\"m\"}]}", "(unset)"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char json[512], want[256];
		struct run r;

		snprintf(json, sizeof(json),
			 JOB("1", "\"gpugate.io/class\":\"small\"", "%s"),
			 cases[i].spec);
		run(&r, "research", json, DECIDE_MUTATE);
		snprintf(want, sizeof(want),
			 "gpugate: restartPolicy %s lets preemptions count against "
			 "backoffLimit; use restartPolicy Never so that gpugate can add "
			 "a podFailurePolicy",
			 cases[i].shown);
		cr_assert(r.dec.allowed);
		cr_assert_not(r.dec.plan.add_failure_rule);
		cr_assert_eq(r.dec.n_warnings, 1);
		cr_assert_str_eq(r.dec.warnings[0], want);
		done(&r);
	}
}

Test(decide, full_pod_failure_policy_gets_a_warning_instead_of_a_rule)
{
	/* The apiserver allows 20 rules: there is no room for gpugate's. */
	char json[4096];
	size_t n;
	struct run r;

	n = (size_t)snprintf(json, sizeof(json),
			     "{\"apiVersion\":\"batch/v1\",\"kind\":\"Job\",\"metadata\":"
			     "{\"labels\":{\"gpugate.io/class\":\"small\"}},\"spec\":{"
			     "\"podFailurePolicy\":{\"rules\":[");
	for (int i = 0; i < 20; i++)
		n += (size_t)snprintf(json + n, sizeof(json) - n,
				      "%s{\"action\":\"FailJob\",\"onExitCodes\":{"
				      "\"operator\":\"In\",\"values\":[%d]}}",
				      i ? "," : "", i + 1);
	snprintf(json + n, sizeof(json) - n,
		 "]},\"template\":{\"spec\":" NEVER_SPEC "}}}");
	run(&r, "research", json, DECIDE_MUTATE);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	cr_assert(r.dec.plan.checkpoint);
	cr_assert_not(r.dec.plan.add_failure_rule);
	cr_assert_eq(r.dec.n_warnings, 1);
	cr_assert_str_eq(r.dec.warnings[0],
			 "gpugate: podFailurePolicy already has 20 rules; preemptions "
			 "will count against backoffLimit");
	done(&r);
}

/*
 * The claim name is checked for every tenant by gpugate check; at
 * admission only the namespace can still spoil it.  P is replaced by a
 * policy whose one tenant owns every namespace (teardown frees it).
 */
static void use_claim_policy(const char *claim_name)
{
	char yaml[1024];
	struct diag d;

	snprintf(yaml, sizeof(yaml),
		 "version: 1\n"
		 "flavors: [{name: h100, resource: nvidia.com/gpu, sharing: exclusive, "
		 "gpusPerNode: 8}]\n"
		 "classes: [{name: small, flavor: h100, gpus: 1, preemptible: true}]\n"
		 "tenants: [{name: anyone, namespaces: [\"*\"], "
		 "quota: [{flavor: h100, nominal: 8}]}]\n"
		 "checkpoint: {claimName: \"%s\"}\n",
		 claim_name);
	policy_free(P);
	P = NULL;
	diag_init(&d);
	cr_assert_eq(policy_parse("t.yaml", yaml, strlen(yaml), &P, &d), 0, "%s",
		     diag_text(&d));
}

#define NS63 "n23456789-123456789-123456789-123456789-123456789-123456789-123"

struct claim_case {
	const char *tmpl;
	const char *ns;
	const char *claim;   /* "": an emptyDir volume */
	const char *warning; /* NULL: none */
};

Test(decide, claim_name_depends_on_the_namespace)
{
	static const struct claim_case cases[] = {
		/* 63 + 12 characters: longer than a DNS label, a valid name. */
		{"{namespace}-checkpoints", NS63, NS63 "-checkpoints", NULL},
		/* 4 x 63 + 3 = 255 characters, over the 253 of a name. */
		{"{namespace}.{namespace}.{namespace}.{namespace}", NS63, "",
		 "gpugate: checkpoint claim name for namespace " NS63 " is longer "
		 "than the 253 characters of a PersistentVolumeClaim name; using an "
		 "emptyDir volume"},
		/* No apiserver sends such a namespace; gpugate explain
		 * --namespace takes what it is given. */
		{"{namespace}-checkpoints", "Team_A", "",
		 "gpugate: checkpoint claim name \"Team_A-checkpoints\" for "
		 "namespace Team_A is not a valid PersistentVolumeClaim name; using "
		 "an emptyDir volume"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct claim_case *k = &cases[i];
		struct run r;

		use_claim_policy(k->tmpl);
		run(&r, k->ns, POD("\"gpugate.io/class\":\"small\"", ONE_CONTAINER),
		    DECIDE_MUTATE);
		cr_assert(r.dec.allowed, "%s", r.dec.message);
		cr_assert(r.dec.plan.checkpoint);
		cr_assert_str_eq(r.dec.plan.claim_name, k->claim, "case %zu", i);
		cr_assert_eq(r.dec.n_warnings, k->warning ? 1 : 0, "case %zu", i);
		if (k->warning)
			cr_assert_str_eq(r.dec.warnings[0], k->warning);
		done(&r);
	}
}

Test(decide, existing_disruption_rule_is_not_added_twice)
{
	struct run r;

	run(&r, "research",
	    "{\"apiVersion\":\"batch/v1\",\"kind\":\"Job\",\"metadata\":{\"labels\":"
	    "{\"gpugate.io/class\":\"small\"}},\"spec\":{\"podFailurePolicy\":"
	    "{\"rules\":[{\"action\":\"Ignore\",\"onPodConditions\":[{\"type\":"
	    "\"DisruptionTarget\"}]}]},\"template\":{\"spec\":" NEVER_SPEC "}}}",
	    DECIDE_MUTATE);
	cr_assert(r.dec.allowed);
	cr_assert_not(r.dec.plan.add_failure_rule);
	done(&r);
}

Test(decide, users_own_prestop_is_kept_with_a_warning)
{
	struct run r;

	run(&r, "research",
	    POD("\"gpugate.io/class\":\"small\"",
		"{\"containers\":[{\"name\":\"main\",\"lifecycle\":{\"preStop\":"
		"{\"exec\":{\"command\":[\"save\"]}}}}]}"),
	    DECIDE_MUTATE);
	cr_assert(r.dec.allowed);
	cr_assert_not(r.dec.plan.set_pre_stop);
	cr_assert_eq(r.dec.n_warnings, 1);
	cr_assert_str_eq(r.dec.warnings[0],
			 "gpugate: container \"main\" keeps its own preStop hook; make "
			 "sure it checkpoints within 600s");
	done(&r);
	/* gpugate's own hook (a re-applied object) is not the user's. */
	run(&r, "research",
	    POD("\"gpugate.io/class\":\"small\"",
		"{\"containers\":[{\"name\":\"main\",\"lifecycle\":{\"preStop\":"
		"{\"exec\":{\"command\":[\"/bin/sh\",\"-c\",\"checkpoint\"]}}}}]}"),
	    DECIDE_MUTATE);
	cr_assert_eq(r.dec.n_warnings, 0);
	done(&r);
}

Test(decide, user_may_opt_into_preemptible)
{
	struct run r;

	run(&r, "research",
	    POD("\"gpugate.io/class\":\"big\",\"gpugate.io/preemptible\":\"true\"",
		ONE_CONTAINER),
	    DECIDE_MUTATE);
	cr_assert(r.dec.allowed);
	cr_assert(r.dec.plan.preemptible);
	cr_assert(r.dec.plan.checkpoint);
	done(&r);
}

/* ---- what gpugate leaves alone ------------------------------------------ */

Test(decide, other_kinds_and_operations_pass)
{
	struct run r;

	run(&r, "research",
	    "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"labels\":"
	    "{\"gpugate.io/class\":\"huge\"}}}",
	    DECIDE_MUTATE);
	cr_assert(r.dec.allowed);
	cr_assert_not(r.dec.plan.active);
	done(&r);
	run(&r, "web", POD("\"app\":\"nginx\"", ONE_CONTAINER), DECIDE_MUTATE);
	cr_assert(r.dec.allowed);
	cr_assert_not(r.dec.plan.active);
	cr_assert_not(r.dec.claim.needed);
	done(&r);
}

Test(decide, forged_stamps_on_a_plain_pod_are_stripped)
{
	struct run r;

	run(&r, "research",
	    POD("\"app\":\"x\",\"gpugate.io/tenant\":\"product\"", ONE_CONTAINER),
	    DECIDE_MUTATE);
	cr_assert(r.dec.allowed);
	cr_assert(r.dec.plan.active);
	cr_assert(r.dec.plan.strip_stamps);
	cr_assert_not(r.dec.plan.map);
	done(&r);
}

Test(decide, checkpoint_signal_annotations_are_not_stamps)
{
	struct run r;

	/* A plain pod: nothing to strip, nothing to do. */
	run(&r, "research",
	    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"annotations\":"
	    "{\"" STAMP_CHECKPOINT_REQUESTED "\":\"2026-12-02T21:00:00Z\",\""
	    STAMP_CHECKPOINT_DONE "\":\"2026-12-02T21:01:00Z\"}},\"spec\":"
	    ONE_CONTAINER "}",
	    DECIDE_MUTATE);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	cr_assert_not(r.dec.plan.strip_stamps);
	cr_assert_not(r.dec.plan.active);
	done(&r);
	/* A class pod: mapped, admitted, not stripped. */
	run(&r, "research",
	    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"labels\":"
	    "{\"gpugate.io/class\":\"small\"},\"annotations\":{\""
	    STAMP_CHECKPOINT_REQUESTED "\":\"2026-12-02T21:00:00Z\"}},\"spec\":"
	    ONE_CONTAINER "}",
	    DECIDE_MUTATE);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	cr_assert(r.dec.plan.map);
	cr_assert_not(r.dec.plan.strip_stamps);
	done(&r);
}

Test(decide, preemptible_work_gets_the_checkpoint_signal)
{
	struct run r;

	run(&r, "research", POD("\"gpugate.io/class\":\"small\"", ONE_CONTAINER),
	    DECIDE_MUTATE);
	cr_assert(r.dec.plan.checkpoint);
	cr_assert(r.dec.plan.signal);
	cr_assert_eq(r.dec.n_warnings, 0);
	done(&r);
	run(&r, "research",
	    "{\"apiVersion\":\"batch/v1\",\"kind\":\"Job\",\"metadata\":{\"labels\":"
	    "{\"gpugate.io/class\":\"small\"}},\"spec\":{\"template\":{\"spec\":"
	    NEVER_SPEC "}}}",
	    DECIDE_MUTATE);
	cr_assert(r.dec.plan.signal, "the Job's pod template");
	done(&r);
	run(&r, "research", POD("\"gpugate.io/class\":\"big\"", ONE_CONTAINER),
	    DECIDE_MUTATE);
	cr_assert_not(r.dec.plan.checkpoint);
	cr_assert_not(r.dec.plan.signal, "not preemptible: no signal");
	done(&r);
}

Test(decide, users_own_signal_volume_and_mount_are_kept_with_a_warning)
{
	struct run r;

	run(&r, "research",
	    POD("\"gpugate.io/class\":\"small\"",
		"{\"volumes\":[{\"name\":\"gpugate-signal\",\"emptyDir\":{}}],"
		"\"containers\":[{\"name\":\"main\"}]}"),
	    DECIDE_MUTATE);
	cr_assert(r.dec.plan.signal);
	cr_assert_eq(r.dec.n_warnings, 1);
	cr_assert_str_eq(r.dec.warnings[0],
			 "gpugate: the pod keeps its own volume \"gpugate-signal\"; "
			 "/etc/gpugate/signal/checkpoint-requested may not show "
			 "checkpoint requests");
	done(&r);
	run(&r, "research",
	    POD("\"gpugate.io/class\":\"small\"",
		"{\"volumes\":[{\"name\":\"cfg\",\"emptyDir\":{}}],"
		"\"containers\":[{\"name\":\"main\",\"volumeMounts\":[{\"name\":"
		"\"cfg\",\"mountPath\":\"/etc/gpugate/signal\"}]}]}"),
	    DECIDE_MUTATE);
	cr_assert_eq(r.dec.n_warnings, 1);
	cr_assert_str_eq(r.dec.warnings[0],
			 "gpugate: container \"main\" keeps its own mount of "
			 "\"gpugate-signal\" or at /etc/gpugate/signal; it may not see "
			 "checkpoint requests");
	done(&r);
	/* gpugate's own volume and mount (a re-applied object, a Job's pod)
	 * are not the user's. */
	run(&r, "research",
	    POD("\"gpugate.io/class\":\"small\"",
		"{\"volumes\":[{\"name\":\"gpugate-signal\",\"downwardAPI\":{"
		"\"items\":[{\"path\":\"checkpoint-requested\",\"fieldRef\":{"
		"\"apiVersion\":\"v1\",\"fieldPath\":\"metadata.annotations["
		"'gpugate.io/checkpoint-requested']\"}}]}}],"
		"\"containers\":[{\"name\":\"main\",\"volumeMounts\":[{\"name\":"
		"\"gpugate-signal\",\"mountPath\":\"/etc/gpugate/signal\","
		"\"readOnly\":true}]}]}"),
	    DECIDE_MUTATE);
	cr_assert_eq(r.dec.n_warnings, 0, "%s", r.dec.warnings[0]);
	done(&r);
}

Test(decide, update_may_not_touch_the_stamps)
{
	struct run old, now;
	struct decide_input in = {.policy = P, .phase = DECIDE_VALIDATE};

	run(&old, "research",
	    POD("\"gpugate.io/class\":\"big\",\"gpugate.io/tenant\":\"research\"",
		ONE_CONTAINER),
	    DECIDE_VALIDATE);
	run(&now, "research", POD("\"gpugate.io/class\":\"big\"", ONE_CONTAINER),
	    DECIDE_VALIDATE);
	now.wl.op = WL_UPDATE;
	in.wl = &now.wl;
	in.old = &old.wl;
	decide_prepare(&in, &now.dec);
	expect_denied(&now, "stamp-changed",
		      "gpugate: label gpugate.io/tenant is set by gpugate and cannot "
		      "be changed or removed (it is \"research\")");
	/* Any other change is the user's business. */
	in.old = &now.wl;
	decide_prepare(&in, &now.dec);
	cr_assert(now.dec.allowed);
	cr_assert_not(now.dec.plan.active);
	/* ...and /mutate never judges an UPDATE. */
	in.old = &old.wl;
	in.phase = DECIDE_MUTATE;
	decide_prepare(&in, &now.dec);
	cr_assert(now.dec.allowed);
	/* Adding one is refused too: a forged stamp would skew accounting. */
	old.wl.op = WL_UPDATE;
	in.wl = &old.wl;
	in.old = &now.wl;
	in.phase = DECIDE_VALIDATE;
	decide_prepare(&in, &old.dec);
	expect_denied(&old, "stamp-changed",
		      "gpugate: label gpugate.io/tenant is set by gpugate and cannot "
		      "be added by an update");
	done(&old);
	done(&now);
}

/* A pod mounting host path `host` (with `sub` as subPath, when not NULL). */
static void run_host_path(struct run *r, const char *host, const char *sub)
{
	char json[768];

	snprintf(json, sizeof(json),
		 POD("\"app\":\"x\"",
		     "{\"volumes\":[{\"name\":\"v\",\"hostPath\":{\"path\":\"%s\"}}],"
		     "\"containers\":[{\"name\":\"m\",\"volumeMounts\":[{\"name\":"
		     "\"v\",\"mountPath\":\"/mnt\"%s%s%s}]}]}"),
		 host, sub ? ",\"subPath\":\"" : "", sub ? sub : "", sub ? "\"" : "");
	run(r, "research", json, DECIDE_MUTATE);
}

Test(decide, host_device_paths_are_normalized)
{
	static const char *const denied[][2] = {
		{"//dev/nvidia0", NULL}, {"/dev/./nvidia0", NULL},
		{"/dev/.", NULL},        {"/", "dev/nvidia0"},
		{"/var/../dev", NULL},   {"/", NULL},
		{"/dev", "nvidia-uvm"},  {"/opt", "../dev/nvidiactl"},
	};
	static const char *const allowed[][2] = {
		{"/data", NULL}, {"/dev/shm", NULL}, {"/devices", NULL},
		{"/dev", "null"},
	};

	for (size_t i = 0; i < sizeof(denied) / sizeof(denied[0]); i++) {
		struct run r;

		run_host_path(&r, denied[i][0], denied[i][1]);
		cr_expect_not(r.dec.allowed, "%s + %s", denied[i][0],
			      denied[i][1] ? denied[i][1] : "-");
		done(&r);
	}
	for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++) {
		struct run r;

		run_host_path(&r, allowed[i][0], allowed[i][1]);
		cr_expect(r.dec.allowed, "%s: %s", allowed[i][0], r.dec.message);
		done(&r);
	}
	{
		struct run r;

		run(&r, "research",
		    POD("\"app\":\"x\"",
			"{\"volumes\":[{\"name\":\"root\",\"hostPath\":{\"path\":\"/\"}}],"
			"\"containers\":[{\"name\":\"m\",\"volumeMounts\":[{\"name\":"
			"\"root\",\"mountPath\":\"/mnt\",\"subPath\":\"dev/nvidia0\"}]}]}"),
		    DECIDE_MUTATE);
		expect_denied(&r, "security",
			      "gpugate: container \"m\" mounts host path / with subPath "
			      "dev/nvidia0 (volume \"root\"), which bypasses the device "
			      "plugin's GPU isolation: remove the hostPath volume");
		done(&r);
	}
}

/* A Job of 8 nvidia.com/gpu per pod as /mutate leaves it; extra: more of
 * its spec ("\"completions\":1,"), labels: its labels. */
#define GPU_JOB(par, extra, labels)                                           \
	"{\"apiVersion\":\"batch/v1\",\"kind\":\"Job\",\"metadata\":{\"name\":" \
	"\"train\",\"labels\":{" labels "}},\"spec\":{" extra                    \
	"\"parallelism\":" par ",\"template\":{\"spec\":{\"restartPolicy\":"     \
	"\"Never\",\"containers\":[{\"name\":\"main\",\"resources\":{\"limits\":" \
	"{\"nvidia.com/gpu\":\"8\"}}}]}}}}"
#define JOB_STAMPS "\"gpugate.io/class\":\"big\",\"gpugate.io/tenant\":\"research\""

/* decide_prepare() of the UPDATE old -> now at /validate, into now.dec. */
static void run_update(struct run *old, struct run *now, const char *was,
		       const char *will)
{
	struct decide_input in = {.policy = P, .phase = DECIDE_VALIDATE};

	run(old, "research", was, DECIDE_VALIDATE);
	run(now, "research", will, DECIDE_VALIDATE);
	now->wl.op = WL_UPDATE;
	in.wl = &now->wl;
	in.old = &old->wl;
	decide_prepare(&in, &now->dec);
}

Test(decide, update_may_not_raise_a_gpu_jobs_parallelism)
{
	struct run old, now;

	run_update(&old, &now, GPU_JOB("2", "", JOB_STAMPS), GPU_JOB("4", "", JOB_STAMPS));
	expect_denied(&now, "parallelism-raised",
		      "gpugate: the parallelism of a GPU Job cannot be raised (from 2 "
		      "to 4): its gang was admitted for 2; create a new Job instead");
	done(&old);
	done(&now);
	/* Lowering it is fine: the watch releases the difference. */
	run_update(&old, &now, GPU_JOB("4", "", JOB_STAMPS), GPU_JOB("2", "", JOB_STAMPS));
	cr_assert(now.dec.allowed, "%s", now.dec.message);
	done(&old);
	done(&now);
}

/* #26: an elastic Indexed Job (completions may change with parallelism)
 * admitted as a gang of 1 must not grow to 8 by its completions. */
Test(decide, update_may_not_raise_a_gpu_jobs_completions)
{
	struct run old, now;

	run_update(&old, &now,
		   GPU_JOB("8", "\"completionMode\":\"Indexed\",\"completions\":1,",
			   JOB_STAMPS),
		   GPU_JOB("8", "\"completionMode\":\"Indexed\",\"completions\":8,",
			   JOB_STAMPS));
	expect_denied(&now, "parallelism-raised",
		      "gpugate: a GPU Job cannot be made to run more pods at once "
		      "(from 1 to 8: parallelism 8, completions 8): its gang was "
		      "admitted for 1; create a new Job instead");
	done(&old);
	done(&now);
	/* Both up together, 1 to 4 pods at once. */
	run_update(&old, &now, GPU_JOB("1", "\"completions\":1,", JOB_STAMPS),
		   GPU_JOB("4", "\"completions\":4,", JOB_STAMPS));
	expect_denied(&now, "parallelism-raised",
		      "gpugate: the parallelism of a GPU Job cannot be raised (from 1 "
		      "to 4): its gang was admitted for 1; create a new Job instead");
	done(&old);
	done(&now);
	/* More parallelism than completions runs no more pods: admitted. */
	run_update(&old, &now, GPU_JOB("2", "\"completions\":2,", JOB_STAMPS),
		   GPU_JOB("4", "\"completions\":2,", JOB_STAMPS));
	cr_assert(now.dec.allowed, "%s", now.dec.message);
	done(&old);
	done(&now);
}

/* What a Job can hold is its template's charge, not its labels: a
 * jobs/status writer who removed the stamps does not open the door. */
Test(decide, a_jobs_raise_is_denied_without_its_stamps)
{
	struct run old, now;

	run_update(&old, &now, GPU_JOB("1", "", "\"app\":\"x\""),
		   GPU_JOB("8", "", "\"app\":\"x\""));
	cr_assert_not(now.dec.allowed);
	cr_assert_str_eq(now.dec.rule, "parallelism-raised");
	done(&old);
	done(&now);
	/* A Job without GPUs may grow as it likes. */
	run_update(&old, &now, JOB("1", "\"app\":\"x\"", NEVER_SPEC),
		   JOB("8", "\"app\":\"x\"", NEVER_SPEC));
	cr_assert(now.dec.allowed, "%s", now.dec.message);
	done(&old);
	done(&now);
}

/* A suspended Job holds nothing: it may grow, and its resume is judged
 * whole, with the new size. */
Test(decide, a_suspended_job_may_grow_and_its_resume_is_judged_whole)
{
	struct run m, v, old, now;
	struct decide_input in = {.policy = P, .phase = DECIDE_VALIDATE};
	json_t *was, *will;

	/* The Job as /mutate leaves it (class big: 8 GPUs a pod), suspended;
	 * then parallelism 2, suspended or resumed. */
	mutate_validate(&m, &v, "research",
			JOB("1", "\"gpugate.io/class\":\"big\"", NEVER_SPEC));
	cr_assert(v.dec.allowed, "%s", v.dec.message);
	for (int resume = 0; resume < 2; resume++) {
		was = json_deep_copy(v.obj);
		json_object_set_new(json_object_get(was, "spec"), "suspend", json_true());
		will = json_deep_copy(was);
		json_object_set_new(json_object_get(will, "spec"), "parallelism",
				    json_integer(2));
		json_object_set_new(json_object_get(will, "spec"), "suspend",
				    json_boolean(!resume));
		run_obj(&old, "research", was, DECIDE_VALIDATE);
		run_obj(&now, "research", will, DECIDE_VALIDATE);
		now.wl.op = WL_UPDATE;
		in.wl = &now.wl;
		in.old = &old.wl;
		decide_prepare(&in, &now.dec);
		cr_assert(now.dec.allowed, "%s", now.dec.message);
		cr_assert_eq(now.dec.claim.needed, resume == 1);
		if (resume)
			cr_assert_eq(now.dec.claim.units, 16, "the gang of 2 x 8");
		done(&old);
		done(&now);
	}
	done(&m);
	done(&v);
}

/* ---- isolation after CREATE (#26 item 5) -------------------------------- */

/* The toolkit's volume-mounts device list: any mount there is a way to
 * GPUs, in a class pod's sidecar as in a pod without GPUs. */
Test(decide, a_mount_at_the_toolkits_device_list_is_denied)
{
	static const char *const paths[] = {
		"/var/run/nvidia-container-devices/all",
		"/var/run/nvidia-container-devices",
		"//var/run/./nvidia-container-devices/GPU-0",
		"/run/nvidia-container-devices/0",
	};
	struct run r;
	char json[1024];

	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		snprintf(json, sizeof(json),
			 POD("\"app\":\"x\"",
			     "{\"volumes\":[{\"name\":\"null\",\"hostPath\":{\"path\":"
			     "\"/dev/null\"}}],\"containers\":[{\"name\":\"m\","
			     "\"volumeMounts\":[{\"name\":\"null\",\"mountPath\":\"%s\"}]}]}"),
			 paths[i]);
		run(&r, "research", json, DECIDE_VALIDATE);
		cr_assert_not(r.dec.allowed, "%s admitted", paths[i]);
		cr_assert_str_eq(r.dec.rule, "security");
		if (i == 0)
			cr_assert_str_eq(r.dec.message,
					 "gpugate: container \"m\" mounts volume \"null\" at "
					 "/var/run/nvidia-container-devices/all, where the "
					 "NVIDIA container toolkit reads which GPUs to give a "
					 "container (/var/run/nvidia-container-devices), which "
					 "bypasses the device plugin's GPU isolation: mount it "
					 "elsewhere, and ask for GPUs with a class");
		done(&r);
	}
	/* A class pod's sidecar, with an emptyDir. */
	run(&r, "research",
	    POD("\"gpugate.io/class\":\"small\"",
		"{\"volumes\":[{\"name\":\"e\",\"emptyDir\":{}}],\"containers\":["
		"{\"name\":\"main\"},{\"name\":\"side\",\"volumeMounts\":[{\"name\":"
		"\"e\",\"mountPath\":\"/var/run/nvidia-container-devices/all\"}]}]}"),
	    DECIDE_MUTATE);
	cr_assert_not(r.dec.allowed);
	cr_assert(strstr(r.dec.message, "container \"side\" mounts volume \"e\""), "%s",
		  r.dec.message);
	done(&r);
	/* Neighbours are fine: /var/run, /run, a name that only begins alike. */
	run(&r, "research",
	    POD("\"app\":\"x\"",
		"{\"volumes\":[{\"name\":\"e\",\"emptyDir\":{}}],\"containers\":["
		"{\"name\":\"m\",\"volumeMounts\":[{\"name\":\"e\",\"mountPath\":"
		"\"/var/run\"},{\"name\":\"e\",\"mountPath\":\"/run\"},{\"name\":"
		"\"e\",\"mountPath\":\"/var/run/nvidia-container-devices-x\"}]}]}"),
	    DECIDE_VALIDATE);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	done(&r);
}

Test(decide, a_cdi_annotation_naming_a_gpu_is_denied)
{
	struct run r;

	run(&r, "research",
	    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\","
	    "\"annotations\":{\"cdi.k8s.io/x\":\"vendor.com/net=eth0, nvidia.com/gpu=all\"}},"
	    "\"spec\":{\"containers\":[{\"name\":\"m\"}]}}",
	    DECIDE_VALIDATE);
	expect_denied(&r, "security",
		      "gpugate: annotation cdi.k8s.io/x asks the container runtime for "
		      "CDI device nvidia.com/gpu=all, which bypasses the device plugin's "
		      "GPU isolation: remove the annotation and ask for GPUs with a class");
	done(&r);
	/* In a Job's pod template too, and in a class pod. */
	run(&r, "research",
	    "{\"apiVersion\":\"batch/v1\",\"kind\":\"Job\",\"metadata\":{\"name\":\"j\"},"
	    "\"spec\":{\"template\":{\"metadata\":{\"labels\":{\"gpugate.io/class\":"
	    "\"small\"},\"annotations\":{\"cdi.k8s.io/gpu\":\"nvidia.com/mig=0:1\"}},"
	    "\"spec\":{\"restartPolicy\":\"Never\",\"containers\":[{\"name\":\"m\"}]}}}}",
	    DECIDE_MUTATE);
	cr_assert_not(r.dec.allowed);
	cr_assert_str_eq(r.dec.rule, "security");
	done(&r);
	/* Another vendor's device, or another annotation, is not gpugate's. */
	run(&r, "research",
	    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\","
	    "\"annotations\":{\"cdi.k8s.io/x\":\"vendor.com/net=eth0\",\"a\":"
	    "\"nvidia.com/gpu=all\"}},\"spec\":{\"containers\":[{\"name\":\"m\"}]}}",
	    DECIDE_VALIDATE);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	done(&r);
}

/* The cluster's nodes for the nodeName tests: gpu-0 is an h100 node. */
static const struct policy_flavor *node_flavor(void *ctx, const char *node)
{
	(void)ctx;
	return strcmp(node, "gpu-0") == 0 ? policy_flavor_find(P, "h100") : NULL;
}

static void run_named(struct run *r, const char *ns, const char *node, bool privileged,
		      enum wl_op op, const struct workload *old)
{
	struct decide_node_source nodes = {.flavor_of = node_flavor};
	struct decide_input in = {.policy = P, .wl = &r->wl, .phase = DECIDE_VALIDATE,
				  .nodes = &nodes, .old = old};
	char json[512];

	snprintf(json, sizeof(json),
		 "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\"},"
		 "\"spec\":{\"nodeName\":\"%s\",\"containers\":[{\"name\":\"m\","
		 "\"securityContext\":{\"privileged\":%s}}]}}",
		 node, privileged ? "true" : "false");
	run(r, ns, json, DECIDE_VALIDATE);
	r->wl.op = op;
	decide_prepare(&in, &r->dec);
}

/* A pod that names its node skips the scheduler and the GPU taint: it can
 * reach GPU nodes when that node is one, in any namespace. */
Test(decide, a_pod_that_names_a_gpu_node_meets_the_security_rules)
{
	struct run r;

	run_named(&r, "elsewhere", "gpu-0", true, WL_CREATE, NULL);
	expect_denied(&r, "security",
		      "gpugate: container \"m\" is privileged and the pod can reach GPU "
		      "nodes (its nodeName gpu-0 is a node of flavor h100); a privileged "
		      "container sees every GPU on the node: remove "
		      "securityContext.privileged" EXEMPT_HINT("elsewhere"));
	done(&r);
	run_named(&r, "elsewhere", "cpu-0", true, WL_CREATE, NULL);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	done(&r);
}

/* #26: a gated pod, admitted with no GPU selector, then given the GPU
 * taint's toleration (and its gates removed): the UPDATE is judged. */
Test(decide, a_pod_update_that_lets_it_reach_gpu_nodes_meets_the_security_rules)
{
	struct run old, now;
	struct decide_input in = {.policy = P, .phase = DECIDE_VALIDATE};

	run(&old, "elsewhere",
	    POD("\"app\":\"x\"",
		"{\"schedulingGates\":[{\"name\":\"x/y\"}],\"containers\":[{\"name\":"
		"\"m\",\"securityContext\":{\"privileged\":true}}]}"),
	    DECIDE_VALIDATE);
	cr_assert(old.dec.allowed, "%s", old.dec.message);
	run(&now, "elsewhere",
	    POD("\"app\":\"x\"",
		"{\"nodeSelector\":{\"gpu\":\"h100\"},\"tolerations\":[{\"key\":"
		"\"nvidia.com/gpu\",\"operator\":\"Exists\"}],\"containers\":[{\"name\":"
		"\"m\",\"securityContext\":{\"privileged\":true}}]}"),
	    DECIDE_VALIDATE);
	now.wl.op = WL_UPDATE;
	in.wl = &now.wl;
	in.old = &old.wl;
	decide_prepare(&in, &now.dec);
	expect_denied(&now, "security",
		      "gpugate: container \"m\" is privileged and the pod can reach GPU "
		      "nodes (it tolerates the nvidia.com/gpu taint of flavor h100); a "
		      "privileged container sees every GPU on the node: remove "
		      "securityContext.privileged" EXEMPT_HINT("elsewhere"));
	done(&old);
	done(&now);
	/* An update that keeps it away from GPU nodes is fine. */
	run(&old, "elsewhere",
	    POD("\"app\":\"x\"", "{\"containers\":[{\"name\":\"m\",\"securityContext\":"
				 "{\"privileged\":true}}]}"),
	    DECIDE_VALIDATE);
	run(&now, "elsewhere",
	    POD("\"app\":\"y\"", "{\"containers\":[{\"name\":\"m\",\"securityContext\":"
				 "{\"privileged\":true}}]}"),
	    DECIDE_VALIDATE);
	now.wl.op = WL_UPDATE;
	in.wl = &now.wl;
	in.old = &old.wl;
	decide_prepare(&in, &now.dec);
	cr_assert(now.dec.allowed, "%s", now.dec.message);
	done(&old);
	done(&now);
}

/* jobs/status and pods/status: a status writer can change labels too. */
Test(decide, a_status_update_may_not_touch_the_stamps)
{
	struct run old, now;
	struct decide_input in = {.policy = P, .phase = DECIDE_VALIDATE};

	run(&old, "research", GPU_JOB("1", "", JOB_STAMPS), DECIDE_VALIDATE);
	run(&now, "research", GPU_JOB("1", "", "\"gpugate.io/class\":\"big\""),
	    DECIDE_VALIDATE);
	now.wl.op = WL_UPDATE;
	in.wl = &now.wl;
	in.old = &old.wl;
	decide_status(&in, &now.dec);
	expect_denied(&now, "stamp-changed",
		      "gpugate: label gpugate.io/tenant is set by gpugate and cannot be "
		      "changed or removed (it is \"research\")");
	done(&now);
	/* The job controller's own status writes change no stamp. */
	run(&now, "research", GPU_JOB("1", "", JOB_STAMPS), DECIDE_VALIDATE);
	now.wl.op = WL_UPDATE;
	in.wl = &now.wl;
	decide_status(&in, &now.dec);
	cr_assert(now.dec.allowed, "%s", now.dec.message);
	cr_assert_not(now.dec.claim.needed);
	cr_assert_eq(now.dec.n_warnings, 0);
	done(&old);
	done(&now);
}

/* Two flavors share nvidia.com/gpu; a raw request must select one by
 * its own keys and rule the other's nodes out. */
static const char shared_resource_yaml[] =
	"version: 1\n"
	"settings: {rawGpuRequests: allow}\n"
	"flavors:\n"
	"  - name: a100\n"
	"    resource: nvidia.com/gpu\n"
	"    sharing: exclusive\n"
	"    gpusPerNode: 8\n"
	"    nodeSelector: [\"nvidia.com/gpu.product=A100\"]\n"
	"  - name: h100\n"
	"    resource: nvidia.com/gpu\n"
	"    sharing: exclusive\n"
	"    gpusPerNode: 8\n"
	"    nodeSelector: [\"nvidia.com/gpu.product=H100\", \"pool=hopper\"]\n"
	"classes:\n"
	"  - {name: a, flavor: a100, gpus: 1}\n"
	"tenants:\n"
	"  - name: t\n"
	"    namespaces: [t]\n"
	"    quota: [{flavor: a100, nominal: 8}, {flavor: h100, nominal: 8}]\n";

Test(decide, a_raw_request_on_a_shared_resource_must_select_one_flavor)
{
	struct policy *saved = use_policy(shared_resource_yaml);
	static const char *const denied[] = {
		"{}",
		"{\"nvidia.com/gpu.family\":\"hopper\"}",
		"{\"pool\":\"hopper\"}",
	};
	struct run r;
	char json[512];

	for (size_t i = 0; i < sizeof(denied) / sizeof(denied[0]); i++) {
		snprintf(json, sizeof(json),
			 POD("\"app\":\"x\"",
			     "{\"nodeSelector\":%s,\"containers\":[{\"name\":\"m\","
			     "\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"8\"}}}]}"),
			 denied[i]);
		run(&r, "t", json, DECIDE_VALIDATE);
		expect_denied(&r, "raw-flavor",
			      "gpugate: this workload asks for nvidia.com/gpu, which "
			      "several flavors share, and its nodeSelector does not select "
			      "exactly one of them: set the nodeSelector of one (a100: "
			      "nvidia.com/gpu.product=A100; h100: nvidia.com/gpu.product=H100 "
			      "pool=hopper), or ask for GPUs with a class");
		done(&r);
	}
	run(&r, "t",
	    POD("\"app\":\"x\"",
		"{\"nodeSelector\":{\"nvidia.com/gpu.product\":\"H100\",\"pool\":"
		"\"hopper\"},\"containers\":[{\"name\":\"m\",\"resources\":{\"limits\":"
		"{\"nvidia.com/gpu\":\"8\"}}}]}"),
	    DECIDE_VALIDATE);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	cr_assert_str_eq(r.dec.claim.flavor->name, "h100");
	done(&r);
	run(&r, "t",
	    POD("\"app\":\"x\"",
		"{\"nodeSelector\":{\"nvidia.com/gpu.product\":\"A100\"},\"containers\":"
		"[{\"name\":\"m\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"8\"}}}]}"),
	    DECIDE_VALIDATE);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	cr_assert_str_eq(r.dec.claim.flavor->name, "a100");
	done(&r);
	restore(saved);
}

/* ---- accounting integrity (#13) ------------------------------------------ */

Test(decide, a_user_count_other_than_the_class_is_denied_not_replaced)
{
	struct run r;

	run(&r, "research",
	    POD("\"gpugate.io/class\":\"small\"",
		"{\"containers\":[{\"name\":\"main\",\"resources\":{\"limits\":"
		"{\"nvidia.com/gpu\":\"4\"}}}]}"),
	    DECIDE_MUTATE);
	expect_denied(&r, "gpus-conflict",
		      "gpugate: container \"main\" asks for 4 nvidia.com/gpu but class "
		      "small gives 1: remove that request, or set label "
		      "gpugate.io/gpus: \"4\"");
	done(&r);
	run(&r, "research",
	    POD("\"gpugate.io/class\":\"small\"",
		"{\"containers\":[{\"name\":\"main\",\"resources\":{\"limits\":"
		"{\"nvidia.com/gpu\":\"5\"}}}]}"),
	    DECIDE_MUTATE);
	expect_denied(&r, "gpus-conflict",
		      "gpugate: container \"main\" asks for 5 nvidia.com/gpu but class "
		      "small gives 1 (at most 4 with label gpugate.io/gpus): remove "
		      "that request");
	done(&r);
	/* The class's own count, written by the user: kept. */
	run(&r, "research",
	    POD("\"gpugate.io/class\":\"small\",\"gpugate.io/gpus\":\"4\"",
		"{\"containers\":[{\"name\":\"main\",\"resources\":{\"limits\":"
		"{\"nvidia.com/gpu\":\"4\"}}}]}"),
	    DECIDE_MUTATE);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	done(&r);
}

Test(decide, warn_mode_relaxes_the_verdict_never_the_accounting)
{
	struct run r;

	/* sandbox is in warn mode; raw requests are rejected by default. */
	run(&r, "sandbox", RAW_POD("\"nvidia.com/gpu\":\"8\""), DECIDE_VALIDATE);
	cr_assert(r.dec.allowed);
	cr_assert(r.dec.violation);
	cr_assert(r.dec.claim.needed, "admitted with GPUs: charged");
	cr_assert_eq(r.dec.claim.units, 8);
	cr_assert_str_eq(r.dec.claim.flavor->name, "h100");
	done(&r);
	/* A pod of two flavors could be charged for one: denied in any mode. */
	run(&r, "sandbox",
	    POD("\"app\":\"x\"",
		"{\"containers\":[{\"name\":\"m\",\"resources\":{\"limits\":"
		"{\"nvidia.com/gpu\":\"1\",\"nvidia.com/gpu.shared\":\"1\"}}}]}"),
	    DECIDE_VALIDATE);
	cr_assert_not(r.dec.allowed);
	cr_assert_str_eq(r.dec.rule, "two-flavors");
	done(&r);
}

Test(decide, init_containers_and_sidecars_are_charged_at_validate)
{
	struct policy *saved = use_policy(
		"version: 1\n"
		"settings: {rawGpuRequests: allow}\n"
		"flavors:\n"
		"  - {name: h100, resource: nvidia.com/gpu, sharing: exclusive, gpusPerNode: 8}\n"
		"classes:\n"
		"  - {name: one, flavor: h100, gpus: 1}\n"
		"tenants:\n"
		"  - {name: t, namespaces: [t], quota: [{flavor: h100, nominal: 8}]}\n");
	struct run r;

	run(&r, "t",
	    POD("\"app\":\"x\"",
		"{\"initContainers\":[{\"name\":\"side\",\"restartPolicy\":\"Always\","
		"\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"4\"}}}],"
		"\"containers\":[{\"name\":\"m\",\"resources\":{\"limits\":"
		"{\"nvidia.com/gpu\":\"2\"}}}]}"),
	    DECIDE_VALIDATE);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	cr_assert_eq(r.dec.claim.units, 6);
	done(&r);
	run(&r, "t",
	    POD("\"app\":\"x\"",
		"{\"initContainers\":[{\"name\":\"side\",\"restartPolicy\":\"Always\","
		"\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"8\"}}}],"
		"\"containers\":[{\"name\":\"m\",\"resources\":{\"limits\":"
		"{\"nvidia.com/gpu\":\"2\"}}}]}"),
	    DECIDE_VALIDATE);
	expect_denied(&r, "quota",
		      "gpugate: pod can never be admitted: needs 10 h100, tenant \"t\" "
		      "may hold at most 8 (nominal 8)");
	done(&r);
	restore(saved);
}

#define SUSPENDED_JOB(labels, count)                                       \
	"{\"apiVersion\":\"batch/v1\",\"kind\":\"Job\",\"metadata\":{\"name\":"  \
	"\"train\",\"generation\":1,\"labels\":{\"gpugate.io/tenant\":"         \
	"\"research\"}},\"spec\":{\"parallelism\":2,\"suspend\":%s,"            \
	"\"template\":{\"metadata\":{\"labels\":{" labels "}},\"spec\":{"       \
	"\"restartPolicy\":\"Never\",\"nodeSelector\":{\"gpu\":\"h100\"},"    \
	"\"containers\":[{\"name\":\"main\",\"resources\":{\"limits\":"          \
	"{\"nvidia.com/gpu\":\"" count "\"},\"requests\":{\"nvidia.com/gpu\":"  \
	"\"" count "\"}}}]}}}}"

static void run_job_update(struct run *old, struct run *now, const char *was,
			   const char *is)
{
	struct decide_input in = {.policy = P, .phase = DECIDE_VALIDATE};

	run(old, "research", was, DECIDE_VALIDATE);
	run(now, "research", is, DECIDE_VALIDATE);
	now->wl.op = WL_UPDATE;
	in.wl = &now->wl;
	in.old = &old->wl;
	decide_prepare(&in, &now->dec);
}

Test(decide, a_suspended_job_holds_nothing_and_its_resume_is_judged)
{
	char sus[2048], go[2048], big[2048];
	struct run old, now;

	snprintf(sus, sizeof(sus), SUSPENDED_JOB("\"gpugate.io/class\":\"small\"", "1"),
		 "true");
	snprintf(go, sizeof(go), SUSPENDED_JOB("\"gpugate.io/class\":\"small\"", "1"),
		 "false");
	run(&now, "research", sus, DECIDE_VALIDATE);
	cr_assert(now.dec.allowed, "%s", now.dec.message);
	cr_assert_not(now.dec.claim.needed, "suspended: nothing to reserve");
	done(&now);
	run(&now, "research", sus, DECIDE_MUTATE);
	cr_assert(now.dec.allowed, "%s", now.dec.message);
	cr_assert_not(now.dec.claim.needed);
	cr_assert(strstr(now.dec.plan.decision, "suspended: quota is checked when it "
						"is resumed"),
		  "%s", now.dec.plan.decision);
	done(&now);
	/* Resuming: its gang is a claim, like a create. */
	run_job_update(&old, &now, sus, go);
	cr_assert(now.dec.allowed, "%s", now.dec.message);
	cr_assert(now.dec.claim.needed);
	cr_assert_eq(now.dec.claim.units, 2);
	cr_assert_eq(now.dec.claim.pods, 2);
	done(&old);
	done(&now);
	/* Its template's GPU request cannot change, suspended or not. */
	snprintf(big, sizeof(big), SUSPENDED_JOB("\"gpugate.io/class\":\"big\"", "1"),
		 "true");
	run_job_update(&old, &now, sus, big);
	expect_denied(&now, "job-template-changed",
		      "gpugate: label gpugate.io/class of a Job cannot be changed by an "
		      "update (it is \"small\"): its gang was judged for it; create a "
		      "new Job instead");
	done(&old);
	done(&now);
	snprintf(big, sizeof(big), SUSPENDED_JOB("\"gpugate.io/class\":\"small\"", "4"),
		 "true");
	run_job_update(&old, &now, sus, big);
	expect_denied(&now, "job-template-changed",
		      "gpugate: the pod template's GPU request cannot be changed by an "
		      "update (it is 1 nvidia.com/gpu per pod, now 4 nvidia.com/gpu): "
		      "its gang was judged for it; create a new Job instead");
	done(&old);
	done(&now);
}

Test(decide, the_job_controllers_label_cannot_be_removed_from_a_pod)
{
	struct run old, now;
	struct decide_input in = {.policy = P, .phase = DECIDE_VALIDATE};

	run(&old, "research",
	    POD("\"batch.kubernetes.io/controller-uid\":\"u1\"", ONE_CONTAINER),
	    DECIDE_VALIDATE);
	run(&now, "research", POD("\"app\":\"x\"", ONE_CONTAINER), DECIDE_VALIDATE);
	now.wl.op = WL_UPDATE;
	in.wl = &now.wl;
	in.old = &old.wl;
	decide_prepare(&in, &now.dec);
	expect_denied(&now, "stamp-changed",
		      "gpugate: label batch.kubernetes.io/controller-uid is set by the "
		      "job controller and cannot be changed or removed (it is \"u1\"): "
		      "it says which Job's quota holds the pod");
	done(&old);
	done(&now);
}

/* A pod UPDATE (status: true, of pods/status) from labels `was` to `is`. */
static void run_pod_update(struct run *old, struct run *now, const char *was,
			   const char *is, bool status)
{
	char a[512], b[512];
	struct decide_input in = {.policy = P, .phase = DECIDE_VALIDATE};

	snprintf(a, sizeof(a), POD("%s", ONE_CONTAINER), was);
	snprintf(b, sizeof(b), POD("%s", ONE_CONTAINER), is);
	run(old, "research", a, DECIDE_VALIDATE);
	run(now, "research", b, DECIDE_VALIDATE);
	now->wl.op = WL_UPDATE;
	in.wl = &now->wl;
	in.old = &old->wl;
	if (status)
		decide_status(&in, &now->dec);
	else
		decide_prepare(&in, &now->dec);
}

#define CLASS_POD "\"gpugate.io/class\":\"small\",\"gpugate.io/tenant\":\"research\""

/* The class and GPU-count labels of a pod are what it was admitted,
 * charged and is judged for (idle GPUs: its class's idle rule): an update
 * cannot change, remove or add them, through the pod or its status. */
Test(decide, a_pods_class_and_gpus_labels_cannot_change)
{
	struct run old, now;

	for (int status = 0; status < 2; status++) {
		run_pod_update(&old, &now, CLASS_POD,
			       "\"gpugate.io/class\":\"big\",\"gpugate.io/tenant\":"
			       "\"research\"",
			       status);
		expect_denied(&now, "pod-request-changed",
			      "gpugate: label gpugate.io/class of a pod cannot be changed "
			      "or removed by an update (it is \"small\"): the pod was "
			      "admitted and charged for it, and is judged by it while it "
			      "runs; create a new pod instead");
		done(&old);
		done(&now);
		run_pod_update(&old, &now, CLASS_POD, "\"gpugate.io/tenant\":\"research\"",
			       status);
		expect_denied(&now, "pod-request-changed",
			      "gpugate: label gpugate.io/class of a pod cannot be changed "
			      "or removed by an update (it is \"small\"): the pod was "
			      "admitted and charged for it, and is judged by it while it "
			      "runs; create a new pod instead");
		done(&old);
		done(&now);
		run_pod_update(&old, &now, "\"app\":\"x\"",
			       "\"app\":\"x\",\"gpugate.io/class\":\"small\"", status);
		expect_denied(&now, "pod-request-changed",
			      "gpugate: label gpugate.io/class cannot be added to a pod by "
			      "an update: the pod was admitted and charged without it; "
			      "create a new pod instead");
		done(&old);
		done(&now);
		run_pod_update(&old, &now, CLASS_POD ",\"gpugate.io/gpus\":\"2\"",
			       CLASS_POD ",\"gpugate.io/gpus\":\"4\"", status);
		expect_denied(&now, "pod-request-changed",
			      "gpugate: label gpugate.io/gpus of a pod cannot be changed "
			      "or removed by an update (it is \"2\"): the pod was "
			      "admitted and charged for it, and is judged by it while it "
			      "runs; create a new pod instead");
		done(&old);
		done(&now);
		run_pod_update(&old, &now, CLASS_POD, CLASS_POD ",\"gpugate.io/gpus\":\"2\"",
			       status);
		expect_denied(&now, "pod-request-changed",
			      "gpugate: label gpugate.io/gpus cannot be added to a pod by "
			      "an update: the pod was admitted and charged without it; "
			      "create a new pod instead");
		done(&old);
		done(&now);
		/* Any other label is the user's business. */
		run_pod_update(&old, &now, CLASS_POD ",\"gpugate.io/gpus\":\"2\"",
			       CLASS_POD ",\"gpugate.io/gpus\":\"2\",\"team\":\"vision\"",
			       status);
		cr_assert(now.dec.allowed, "%s", now.dec.message);
		cr_assert_null(now.dec.rule);
		done(&old);
		done(&now);
	}
}

/* Renamed by the policy, the labels are held under their names. */
Test(decide, a_pods_renamed_class_label_cannot_change)
{
	struct policy *saved = use_policy(
		"version: 1\n"
		"settings: {classLabel: example.com/class, gpusLabel: example.com/gpus}\n"
		"flavors:\n"
		"  - {name: h100, resource: nvidia.com/gpu, sharing: exclusive, gpusPerNode: 8}\n"
		"classes:\n"
		"  - {name: small, flavor: h100, gpus: 1}\n"
		"  - {name: big, flavor: h100, gpus: 8}\n"
		"tenants:\n"
		"  - {name: research, namespaces: [research], quota: [{flavor: h100, nominal: 8}]}\n");
	struct run old, now;

	run_pod_update(&old, &now, "\"example.com/class\":\"small\"",
		       "\"example.com/class\":\"big\"", false);
	expect_denied(&now, "pod-request-changed",
		      "gpugate: label example.com/class of a pod cannot be changed or "
		      "removed by an update (it is \"small\"): the pod was admitted and "
		      "charged for it, and is judged by it while it runs; create a new "
		      "pod instead");
	done(&old);
	done(&now);
	run_pod_update(&old, &now, "\"example.com/class\":\"small\"",
		       "\"example.com/class\":\"small\",\"example.com/gpus\":\"1\"",
		       true);
	expect_denied(&now, "pod-request-changed",
		      "gpugate: label example.com/gpus cannot be added to a pod by an "
		      "update: the pod was admitted and charged without it; create a "
		      "new pod instead");
	done(&old);
	done(&now);
	/* The default names are anybody's labels then. */
	run_pod_update(&old, &now, "\"example.com/class\":\"small\"",
		       "\"example.com/class\":\"small\",\"gpugate.io/class\":\"big\"",
		       false);
	cr_assert(now.dec.allowed, "%s", now.dec.message);
	done(&old);
	done(&now);
	restore(saved);
}

/* jobs/status: a status writer may rewrite a Job's labels too. */
Test(decide, a_status_update_may_not_change_a_jobs_class)
{
	struct run old, now;
	struct decide_input in = {.policy = P, .phase = DECIDE_VALIDATE};

	run(&old, "research", GPU_JOB("1", "", JOB_STAMPS), DECIDE_VALIDATE);
	run(&now, "research",
	    GPU_JOB("1", "", "\"gpugate.io/class\":\"small\",\"gpugate.io/tenant\":"
			     "\"research\""),
	    DECIDE_VALIDATE);
	now.wl.op = WL_UPDATE;
	in.wl = &now.wl;
	in.old = &old.wl;
	decide_status(&in, &now.dec);
	expect_denied(&now, "job-template-changed",
		      "gpugate: label gpugate.io/class of a Job cannot be changed by an "
		      "update (it is \"big\"): its gang was judged for it; create a new "
		      "Job instead");
	done(&old);
	done(&now);
}

Test(decide, a_raw_request_never_borrows_and_says_so)
{
	struct policy *saved = use_policy(
		"version: 1\n"
		"settings: {rawGpuRequests: allow}\n"
		"flavors:\n"
		"  - {name: h100, resource: nvidia.com/gpu, sharing: exclusive, gpusPerNode: 8}\n"
		"classes:\n"
		"  - {name: one, flavor: h100, gpus: 1}\n"
		"tenants:\n"
		"  - {name: t, namespaces: [t], cohort: c, quota: [{flavor: h100, nominal: 2}]}\n"
		"  - {name: u, namespaces: [u], cohort: c, quota: [{flavor: h100, nominal: 8}]}\n");
	struct run r;

	run(&r, "t", RAW_POD("\"nvidia.com/gpu\":\"4\""), DECIDE_VALIDATE);
	expect_denied(&r, "quota",
		      "gpugate: tenant \"t\" is over its h100 quota: requested 4 (class "
		      "none), in use 0 of nominal 2; a pod without a class never borrows "
		      "(gpugate cannot make it preemptible): ask for GPUs with a class");
	done(&r);
	restore(saved);
}

/* ---- Kueue (docs/quota.md "Running with Kueue") ----------------------- */

/* research owns its quota through Kueue and queues its Jobs in "rq". */
static void kueue_research(void)
{
	static const char at[] = "  - name: research\n    namespaces: [research]\n";
	char yaml[sizeof(policy_yaml) + 128];
	const char *cut = strstr(policy_yaml, at);

	cr_assert(cut);
	snprintf(yaml, sizeof(yaml), "%.*s%s    kueue: {quotaOwner: kueue, localQueue: rq}\n%s",
		 (int)(cut - policy_yaml), policy_yaml, at, cut + strlen(at));
	policy_free(P);
	P = test_policy(yaml);
}

Test(decide, a_job_queued_in_kueue_is_charged_when_kueue_admits_it)
{
	struct run r;

	used[T_RESEARCH][F_H100] = 24; /* all research may ever hold */
	run(&r, "research",
	    JOB("2", "\"gpugate.io/class\":\"small\",\"kueue.x-k8s.io/queue-name\":\"q\"",
		ONE_CONTAINER),
	    DECIDE_MUTATE);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	cr_expect_not(r.dec.claim.needed, "Kueue suspends it: nothing held now");
	cr_expect_str_eq(r.dec.plan.decision,
			 "small: 2 pods x 1 x h100 for tenant research; queued in Kueue "
			 "LocalQueue q: charged when Kueue admits it");
	cr_expect_null(r.dec.plan.queue_name, "its own queue is kept");
	done(&r);
}

Test(decide, a_tenants_local_queue_is_stamped_on_its_jobs)
{
	struct run r;
	struct diag d;
	json_t *copy;

	kueue_research();
	run(&r, "research", JOB("2", "\"gpugate.io/class\":\"small\"", ONE_CONTAINER),
	    DECIDE_MUTATE);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	cr_expect_str_eq(r.dec.plan.queue_name, "rq");
	cr_expect_not(r.dec.claim.needed);
	diag_init(&d);
	copy = json_deep_copy(r.obj); /* the facts borrow r.obj's strings */
	cr_assert_eq(apply_plan(copy, &r.wl, &r.dec.plan, P, &d), 0, "%s", diag_text(&d));
	cr_expect_str_eq(json_string_value(json_object_get(
				 json_object_get(json_object_get(copy, "metadata"), "labels"),
				 "kueue.x-k8s.io/queue-name")),
			 "rq");
	json_decref(copy);
	done(&r);
	/* A pod is Kueue's only with its own label: nothing stamped. */
	run(&r, "research", POD("\"gpugate.io/class\":\"small\"", ONE_CONTAINER),
	    DECIDE_MUTATE);
	cr_expect_null(r.dec.plan.queue_name);
	cr_expect(r.dec.claim.needed);
	done(&r);
}

Test(decide, when_kueue_owns_the_quota_its_admission_is_never_refused)
{
	char sus[2048], go[2048];
	struct run old, now;
	struct quota_result q;
	struct decide_input in;

	snprintf(sus, sizeof(sus),
		 SUSPENDED_JOB("\"gpugate.io/class\":\"small\",\"kueue.x-k8s.io/queue-name\":"
			       "\"rq\"", "1"),
		 "true");
	snprintf(go, sizeof(go),
		 SUSPENDED_JOB("\"gpugate.io/class\":\"small\",\"kueue.x-k8s.io/queue-name\":"
			       "\"rq\"", "1"),
		 "false");
	/* gpugate owns research's quota: Kueue's resume is judged by it. */
	run_job_update(&old, &now, sus, go);
	cr_assert(now.dec.claim.needed);
	cr_expect_not(now.dec.claim.kueue_quota);
	done(&old);
	done(&now);
	/* Kueue owns it: over gpugate's numbers is a warning, and counted. */
	kueue_research();
	run_job_update(&old, &now, sus, go);
	cr_assert(now.dec.claim.needed);
	cr_assert(now.dec.claim.kueue_quota);
	used[T_RESEARCH][F_H100] = 24;
	quota_decide(P, now.dec.claim.tenant, now.dec.claim.flavor, now.dec.claim.units, true,
		     &usage, &q);
	cr_assert_eq(q.position, QUOTA_OVER);
	in = (struct decide_input){.policy = P, .wl = &now.wl, .phase = DECIDE_VALIDATE,
				   .old = &old.wl};
	decide_quota(&in, &now.dec, &q);
	cr_expect(now.dec.allowed, "%s", now.dec.message);
	cr_expect_eq(now.dec.mode, POLICY_MODE_WARN);
	cr_expect_geq(now.dec.n_warnings, 1);
	cr_expect(strstr(now.dec.warnings[0], "is over its h100 quota"), "%s",
		  now.dec.warnings[0]);
	done(&old);
	done(&now);
}

/* #26: the queue label is anybody's to write.  Kueue's word on quota
 * counts only where Kueue really holds the workload. */
Test(decide, kueues_quota_is_trusted_only_where_kueue_holds_the_workload)
{
	struct run r;

	kueue_research();
	used[T_RESEARCH][F_H100] = 24; /* all research may ever hold */
	/* A bare pod with the label alone: gpugate's quota, refused. */
	run(&r, "research",
	    POD("\"gpugate.io/class\":\"small\",\"kueue.x-k8s.io/queue-name\":\"rq\"",
		ONE_CONTAINER),
	    DECIDE_MUTATE);
	cr_assert(r.dec.claim.needed);
	cr_expect_not(r.dec.claim.kueue_quota);
	cr_expect_not(r.dec.allowed);
	cr_expect_str_eq(r.dec.rule, "quota");
	done(&r);
	/* Behind Kueue's scheduling gate (its pod integration put it there):
	 * Kueue's, counted and warned about, never refused. */
	run(&r, "research",
	    POD("\"gpugate.io/class\":\"small\",\"kueue.x-k8s.io/queue-name\":\"rq\"",
		"{\"schedulingGates\":[{\"name\":\"example.com/other\"},"
		"{\"name\":\"kueue.x-k8s.io/admission\"}],"
		"\"containers\":[{\"name\":\"main\",\"image\":\"x\"}]}"),
	    DECIDE_MUTATE);
	cr_assert(r.dec.claim.needed);
	cr_expect(r.dec.claim.kueue_quota);
	cr_expect(r.dec.allowed, "%s", r.dec.message);
	done(&r);
	/* Another gate is not Kueue's. */
	run(&r, "research",
	    POD("\"gpugate.io/class\":\"small\",\"kueue.x-k8s.io/queue-name\":\"rq\"",
		"{\"schedulingGates\":[{\"name\":\"example.com/other\"}],"
		"\"containers\":[{\"name\":\"main\",\"image\":\"x\"}]}"),
	    DECIDE_MUTATE);
	cr_expect_not(r.dec.claim.kueue_quota);
	cr_expect_not(r.dec.allowed);
	done(&r);
}

Test(decide, a_job_created_running_is_not_kueues_whatever_its_label)
{
	struct run m, v;

	kueue_research();
	/* Kueue's webhook would have suspended a Job it manages before
	 * /validate: one that arrives running is gpugate's to charge. */
	mutate_validate(&m, &v, "research",
			JOB("1", "\"gpugate.io/class\":\"small\",\"kueue.x-k8s.io/"
				 "queue-name\":\"rq\"", ONE_CONTAINER));
	cr_assert(v.dec.claim.needed);
	cr_expect_not(v.dec.claim.kueue_quota);
	done(&m);
	done(&v);
}

/* ---- the checkpoint claim --------------------------------------------- */

#define JOBS_SMALL_POD                                                        \
	"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"train-x\","  \
	"\"labels\":{\"gpugate.io/class\":\"small\"},\"ownerReferences\":[{"        \
	"\"apiVersion\":\"batch/v1\",\"kind\":\"Job\",\"name\":\"train\",\"uid\":"     \
	"\"u-9\",\"controller\":true}]},\"spec\":" ONE_CONTAINER "}"

static bool warned(const struct run *r, const char *text)
{
	for (size_t i = 0; i < r->dec.n_warnings; i++)
		if (strcmp(r->dec.warnings[i], text) == 0)
			return true;
	return false;
}

#define MISSING_CLAIM                                                            \
	"gpugate: checkpoint volume not mounted: PersistentVolumeClaim "              \
	"\"research-ckpt\" does not exist in namespace research; what is written to " \
	"/checkpoint is lost with the pod; create it or set checkpoint.claim.create"
#define ONE_NODE_CLAIM                                                           \
	"gpugate: checkpoint volume: PersistentVolumeClaim \"research-ckpt\" is not " \
	"ReadWriteMany; pods on different nodes cannot all mount it"

Test(decide, a_missing_or_single_node_checkpoint_claim_is_said)
{
	struct run r;

	/* Nobody watches claims: nothing is said. */
	run(&r, "research", POD("\"gpugate.io/class\":\"small\"", ONE_CONTAINER),
	    DECIDE_MUTATE);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	cr_expect_not(warned(&r, MISSING_CLAIM));
	cr_expect_not(r.dec.plan.no_volume, "not known: mounted as the policy says");
	done(&r);
	run_pvcs = &pvcs;
	pvc_answer = PVC_UNKNOWN; /* not listed yet */
	run(&r, "research", POD("\"gpugate.io/class\":\"small\"", ONE_CONTAINER),
	    DECIDE_MUTATE);
	cr_expect_not(r.dec.plan.no_volume);
	cr_expect_eq(r.dec.n_warnings, 0);
	done(&r);
	/* Missing: the hooks without the volume, and why. */
	pvc_answer = PVC_MISSING;
	run(&r, "research", POD("\"gpugate.io/class\":\"small\"", ONE_CONTAINER),
	    DECIDE_MUTATE);
	cr_expect(warned(&r, MISSING_CLAIM), "%zu warnings", r.dec.n_warnings);
	cr_expect(r.dec.plan.checkpoint && r.dec.plan.signal && r.dec.plan.set_pre_stop);
	cr_expect(r.dec.plan.no_volume);
	done(&r);
	/* A Job's pod: planned the same, said once (by its Job). */
	run(&r, "research", JOBS_SMALL_POD, DECIDE_MUTATE);
	cr_expect(r.dec.plan.no_volume);
	cr_expect_not(warned(&r, MISSING_CLAIM));
	done(&r);
	/* ReadWriteOnce: enough for one pod, not for a Job of two. */
	pvc_answer = PVC_ONE_NODE;
	run(&r, "research", POD("\"gpugate.io/class\":\"small\"", ONE_CONTAINER),
	    DECIDE_MUTATE);
	cr_expect_eq(r.dec.n_warnings, 0);
	done(&r);
	run(&r, "research", JOB("2", "\"gpugate.io/class\":\"small\"", ONE_CONTAINER),
	    DECIDE_MUTATE);
	cr_expect(warned(&r, ONE_NODE_CLAIM));
	done(&r);
	pvc_answer = PVC_MANY_NODES;
	run(&r, "research", JOB("2", "\"gpugate.io/class\":\"small\"", ONE_CONTAINER),
	    DECIDE_MUTATE);
	cr_expect_not(warned(&r, ONE_NODE_CLAIM));
	done(&r);
	/* Not preemptible: no checkpoint volume, nothing to say. */
	pvc_answer = PVC_MISSING;
	run(&r, "research", POD("\"gpugate.io/class\":\"big\"", ONE_CONTAINER),
	    DECIDE_MUTATE);
	cr_expect_not(warned(&r, MISSING_CLAIM));
	done(&r);
}

/* A Deployment of class small in research: its template's labels (the
 * tenant stamp or not) and its container's limits. */
#define SMALL_DEPLOY(labels, limits)                                         \
	"{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{"   \
	"\"name\":\"serve\"},\"spec\":{\"replicas\":1,\"template\":{"          \
	"\"metadata\":{\"labels\":{\"gpugate.io/class\":\"small\"," labels     \
	"}},\"spec\":{\"containers\":[{\"name\":\"m\",\"resources\":{"         \
	"\"limits\":{" limits "}}}]}}}}"

static void run_template_update(struct run *old, struct run *now, const char *was,
				const char *is)
{
	struct decide_input in = {.policy = P, .phase = DECIDE_MUTATE};

	run(old, "research", was, DECIDE_MUTATE);
	run(now, "research", is, DECIDE_MUTATE);
	now->wl.op = WL_UPDATE;
	in.wl = &now->wl;
	in.old = &old->wl;
	decide_prepare(&in, &now->dec);
}

Test(decide, kubectl_apply_can_change_the_gpus_of_a_template_gpugate_mapped)
{
	struct run old, now;

	/* gpugate mapped it with 1 (its stamp, its limit); the user's apply
	 * changes the label to 2 and keeps the limit it never set. */
	run_template_update(&old, &now,
			    SMALL_DEPLOY("\"gpugate.io/gpus\":\"1\",\"gpugate.io/tenant\":"
					 "\"research\"", "\"nvidia.com/gpu\":\"1\""),
			    SMALL_DEPLOY("\"gpugate.io/gpus\":\"2\",\"gpugate.io/tenant\":"
					 "\"research\"", "\"nvidia.com/gpu\":\"1\""));
	cr_assert(now.dec.allowed, "%s", now.dec.message);
	cr_assert_eq(now.dec.plan.count, 2);
	done(&old);
	done(&now);
	/* A count the user changes is still theirs: it must be the class's. */
	run_template_update(&old, &now,
			    SMALL_DEPLOY("\"gpugate.io/gpus\":\"1\",\"gpugate.io/tenant\":"
					 "\"research\"", "\"nvidia.com/gpu\":\"1\""),
			    SMALL_DEPLOY("\"gpugate.io/gpus\":\"2\",\"gpugate.io/tenant\":"
					 "\"research\"", "\"nvidia.com/gpu\":\"3\""));
	expect_denied(&now, "gpus-conflict",
		      "gpugate: container \"m\" asks for 3 nvidia.com/gpu but class small "
		      "gives 2: remove that request, or set label gpugate.io/gpus: \"3\"");
	done(&old);
	done(&now);
	/* Never mapped by gpugate (no stamp): the count is the user's. */
	run_template_update(&old, &now,
			    SMALL_DEPLOY("\"gpugate.io/gpus\":\"1\"", "\"nvidia.com/gpu\":\"1\""),
			    SMALL_DEPLOY("\"gpugate.io/gpus\":\"2\"", "\"nvidia.com/gpu\":\"1\""));
	cr_assert_not(now.dec.allowed);
	cr_assert_str_eq(now.dec.rule, "gpus-conflict");
	done(&old);
	done(&now);
}

/* #27: the GPU stack's own pods (the device plugin, the DCGM exporter) are
 * privileged and tolerate the GPU taint by design: in the namespaces
 * exempt by default, nothing is judged and nothing changes. */
#define DEVICE_PLUGIN                                                       \
	POD("\"app\":\"nvidia-device-plugin-daemonset\"",                   \
	    "{\"serviceAccountName\":\"nvidia-device-plugin\"," GPU_TOLERATION \
	    ",\"volumes\":[{\"name\":\"dp\",\"hostPath\":{\"path\":\"/dev\"}}]," \
	    "\"containers\":[{\"name\":\"plugin\"," PRIV ",\"env\":[{\"name\":"  \
	    "\"NVIDIA_VISIBLE_DEVICES\",\"value\":\"all\"}],\"volumeMounts\":"   \
	    "[{\"name\":\"dp\",\"mountPath\":\"/dev\"}]}]}")

Test(decide, the_gpu_stacks_namespaces_are_exempt_by_default)
{
	static const char *const exempt[] = {"gpu-operator", "gpu-operator-resources",
					     "nvidia-gpu-operator", "nvsentinel",
					     "nvidia-dra-driver-gpu", "dcgm-exporter"};
	struct run r;

	for (size_t i = 0; i < sizeof(exempt) / sizeof(exempt[0]); i++)
		for (int phase = DECIDE_MUTATE; phase <= DECIDE_VALIDATE; phase++) {
			run(&r, exempt[i], DEVICE_PLUGIN, (enum decide_phase)phase);
			cr_expect(r.dec.allowed, "%s: %s", exempt[i], r.dec.message);
			cr_expect_eq(r.dec.exempt, POLICY_EXEMPT_NAMESPACE, "%s", exempt[i]);
			cr_expect_not(r.dec.violation, "%s", exempt[i]);
			cr_expect_eq(r.dec.n_warnings, 0, "%s", exempt[i]);
			done(&r);
		}
	/* Anywhere else the same pod is denied, and told how to exempt it. */
	run(&r, "monitoring", DEVICE_PLUGIN, DECIDE_MUTATE);
	cr_assert_not(r.dec.allowed);
	cr_expect_eq(r.dec.exempt, POLICY_NOT_EXEMPT);
	cr_expect(strstr(r.dec.message,
			 "exempt it: settings.exemptions.namespaces [\"monitoring\"] or "
			 "serviceAccounts [\"monitoring/nvidia-device-plugin\"]"),
		  "%s", r.dec.message);
	done(&r);
}

Test(decide, exemptions_as_written_replace_the_defaults)
{
	struct policy *saved = use_policy(
		"version: 1\n"
		"settings:\n"
		"  exemptions:\n"
		"    namespaces: [gpu-ops]\n"
		"    serviceAccounts: [monitoring/dcgm-exporter]\n"
		"flavors:\n"
		"  - {name: h100, resource: nvidia.com/gpu, sharing: exclusive,\n"
		"     nodeSelector: [\"gpu=h100\"], tolerations: [{key: nvidia.com/gpu,\n"
		"     operator: Exists}], gpusPerNode: 8}\n"
		"classes: []\n"
		"tenants: []\n");
	struct run r;

	run(&r, "gpu-ops", DEVICE_PLUGIN, DECIDE_VALIDATE);
	cr_expect(r.dec.allowed, "%s", r.dec.message);
	cr_expect_eq(r.dec.exempt, POLICY_EXEMPT_NAMESPACE);
	done(&r);
	/* The defaults are replaced, not added to. */
	run(&r, "gpu-operator", DEVICE_PLUGIN, DECIDE_VALIDATE);
	cr_expect_not(r.dec.allowed);
	done(&r);
	/* A ServiceAccount is exempt in its own namespace only. */
	run(&r, "monitoring",
	    POD("\"app\":\"dcgm\"", "{\"serviceAccountName\":\"dcgm-exporter\","
				   GPU_TOLERATION ",\"containers\":[{\"name\":"
				   "\"exporter\"," PRIV "}]}"),
	    DECIDE_VALIDATE);
	cr_expect(r.dec.allowed, "%s", r.dec.message);
	cr_expect_eq(r.dec.exempt, POLICY_EXEMPT_SERVICE_ACCOUNT);
	done(&r);
	run(&r, "monitoring",
	    POD("\"app\":\"dcgm\"", "{\"serviceAccountName\":\"other\","
				   GPU_TOLERATION ",\"containers\":[{\"name\":"
				   "\"exporter\"," PRIV "}]}"),
	    DECIDE_VALIDATE);
	cr_expect_not(r.dec.allowed);
	done(&r);
	run(&r, "elsewhere",
	    POD("\"app\":\"dcgm\"", "{\"serviceAccountName\":\"dcgm-exporter\","
				   GPU_TOLERATION ",\"containers\":[{\"name\":"
				   "\"exporter\"," PRIV "}]}"),
	    DECIDE_VALIDATE);
	cr_expect_not(r.dec.allowed);
	done(&r);
	restore(saved);
	/* An empty exemptions mapping exempts nothing. */
	saved = use_policy("version: 1\nsettings: {exemptions: {}}\n"
			   "flavors:\n"
			   "  - {name: h100, resource: nvidia.com/gpu, sharing: exclusive,\n"
			   "     tolerations: [{key: nvidia.com/gpu, operator: Exists}],\n"
			   "     gpusPerNode: 8}\n"
			   "classes: []\ntenants: []\n");
	run(&r, "gpu-operator", DEVICE_PLUGIN, DECIDE_VALIDATE);
	cr_expect_not(r.dec.allowed);
	cr_expect_eq(r.dec.exempt, POLICY_NOT_EXEMPT);
	done(&r);
	restore(saved);
}

/* deviceclass.resource.kubernetes.io/C (KEP-5004): a GPU device class that
 * no flavor maps, asked for by name, is a raw request; any other device
 * class is none of gpugate's business.  (A mapped one is its flavor's
 * resource: tests/unit/webhook/charge_claims_test.c.) */
Test(decide, an_unmapped_gpu_device_class_asked_for_by_name_is_a_raw_request)
{
	struct run r;

	run(&r, "research",
	    POD("\"app\":\"x\"",
		"{\"containers\":[{\"name\":\"m\",\"resources\":{\"requests\":"
		"{\"deviceclass.resource.kubernetes.io/mig.nvidia.com\":\"1\"}}}]}"),
	    DECIDE_MUTATE);
	expect_denied(&r, "raw-request",
		      "gpugate: this workload asks for "
		      "deviceclass.resource.kubernetes.io/mig.nvidia.com, a GPU device "
		      "class that maps to no flavor; request GPUs with a class instead: "
		      "set label gpugate.io/class to one of: big, small, shared");
	done(&r);
	/* With a class too: the class gives the pod its GPUs, not this. */
	run(&r, "research",
	    POD("\"gpugate.io/class\":\"small\"",
		"{\"initContainers\":[{\"name\":\"i\",\"resources\":{\"limits\":"
		"{\"deviceclass.resource.kubernetes.io/gpu.nvidia.com\":\"1\"}}}],"
		"\"containers\":[{\"name\":\"m\"}]}"),
	    DECIDE_MUTATE);
	cr_assert_not(r.dec.allowed);
	cr_assert_str_eq(r.dec.rule, "raw-request");
	done(&r);
	run(&r, "research",
	    POD("\"app\":\"x\"",
		"{\"containers\":[{\"name\":\"m\",\"resources\":{\"requests\":"
		"{\"deviceclass.resource.kubernetes.io/nic.example.com\":\"1\"}}}]}"),
	    DECIDE_MUTATE);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	cr_assert_not(r.dec.claim.needed);
	done(&r);
}

/* A fraction of a GPU device class asked for by name: the apiserver takes
 * it, the scheduler never serves it (its PreBind fails again and again). */
Test(decide, a_fraction_of_a_gpu_device_class_is_refused)
{
	struct run r;

	run(&r, "research",
	    POD("\"app\":\"x\"",
		"{\"containers\":[{\"name\":\"m\",\"resources\":{\"requests\":"
		"{\"deviceclass.resource.kubernetes.io/gpu.nvidia.com\":\"1500m\"}}}]}"),
	    DECIDE_MUTATE);
	expect_denied(&r, "gpus-invalid",
		      "gpugate: container \"m\" asks for 1500m of "
		      "deviceclass.resource.kubernetes.io/gpu.nvidia.com: devices come "
		      "whole (1, 2, ...); the scheduler cannot serve a fraction and the "
		      "pod would never start");
	done(&r);
	/* Not a GPU class: none of gpugate's business. */
	run(&r, "research",
	    POD("\"app\":\"x\"",
		"{\"containers\":[{\"name\":\"m\",\"resources\":{\"requests\":"
		"{\"deviceclass.resource.kubernetes.io/nic.example.com\":\"500m\"}}}]}"),
	    DECIDE_MUTATE);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	done(&r);
}
