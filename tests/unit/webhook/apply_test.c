/*
 * The plan applier (webhook/apply.c) with the diff (webhook/patch.c):
 * parents created, nothing the user wrote clobbered, and idempotency — the
 * object gpugate produced, mutated again, yields an empty patch.
 */
#include "base/arena.h"
#include "base/diag.h"
#include "policy/kinds.h"
#include "codec/jsonmem.h"
#include "policy/decide.h"
#include "webhook/apply.h"
#include "webhook/facts.h"
#include "webhook/patch.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <string.h>

static struct policy *P;

static void setup(void)
{
	struct diag d;

	diag_init(&d);
	cr_assert_eq(policy_load("policy/examples/gpu-cluster.yaml", &P, &d), 0,
		     "%s", diag_text(&d));
}

static void teardown(void)
{
	policy_free(P);
}

TestSuite(apply, .init = setup, .fini = teardown);

/* What the cluster's claims say, for the tests that set it (NULL: not
 * known). */
static const struct pvc_view *claims;

/* Mutates obj as /mutate would and returns the new object (caller frees). */
static json_t *mutate(const char *ns, const json_t *obj, const char *name)
{
	struct arena a;
	struct workload wl = {0};
	struct decision dec;
	struct decide_input in = {.policy = P, .wl = &wl, .phase = DECIDE_MUTATE,
				  .pvcs = claims};
	const char *kind = json_string_value(json_object_get(obj, "kind"));
	json_t *out = json_deep_copy(obj);
	struct diag d;

	arena_init(&a);
	wl.def = strcmp(kind, "Job") == 0 ? kinds_find("batch", "v1", "Job")
					  : kinds_find("", "v1", "Pod");
	wl.kind = wl.def->wl;
	wl.op = WL_CREATE;
	wl.namespace = ns;
	wl.name = name;
	wl.uid = "";
	wl.request_uid = "req-1";
	diag_init(&d);
	cr_assert_eq(facts_extract(obj, &wl, &a, &d), 0, "%s", diag_text(&d));
	decide(&in, NULL, &dec);
	cr_assert(dec.allowed, "%s", dec.message);
	cr_assert_eq(apply_plan(out, &wl, &dec.plan, P, &d), 0, "%s",
		     diag_text(&d));
	arena_release(&a);
	return out;
}

static json_t *parse(const char *json)
{
	json_error_t e;
	json_t *v = json_loads(json, 0, &e);

	cr_assert_not_null(v, "bad test JSON: %s", e.text);
	return v;
}

/* Mutating twice changes nothing the second time; returns the first result. */
static json_t *mutate_idempotent(const char *ns, const char *json)
{
	json_t *obj = parse(json);
	json_t *once = mutate(ns, obj, "p");
	json_t *twice = mutate(ns, once, "p");
	json_t *patch = patch_diff(once, twice);
	char *dump = json_dumps(patch, JSON_COMPACT);

	cr_assert_eq(json_array_size(patch), 0, "second mutation changed: %s", dump);
	free(dump);
	json_decref(patch);
	json_decref(twice);
	json_decref(obj);
	return once;
}

Test(apply, creates_parents_for_a_bare_pod)
{
	json_t *out = mutate_idempotent(
		"research",
		"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"labels\":"
		"{\"gpugate.io/class\":\"train-large\"}},\"spec\":{\"containers\":"
		"[{\"name\":\"main\",\"image\":\"x\"}]}}");
	const json_t *spec = json_object_get(out, "spec");
	const json_t *tol = json_array_get(json_object_get(spec, "tolerations"), 0);

	cr_assert_str_eq(json_string_value(json_object_get(
				 json_object_get(json_object_get(json_array_get(
							 json_object_get(spec, "containers"), 0),
						 "resources"),
					 "limits"),
				 "nvidia.com/gpu")),
			 "8");
	cr_assert_str_eq(json_string_value(json_object_get(
				 json_object_get(spec, "nodeSelector"),
				 "nvidia.com/gpu.product")),
			 "NVIDIA-H100-80GB-HBM3");
	cr_assert_str_eq(json_string_value(json_object_get(tol, "key")),
			 "nvidia.com/gpu");
	cr_assert_str_eq(json_string_value(json_object_get(tol, "operator")),
			 "Exists");
	cr_assert_null(json_object_get(tol, "value"), "empty fields are omitted");
	cr_assert_str_eq(json_string_value(json_object_get(spec, "priorityClassName")),
			 "training");
	cr_assert_str_eq(json_string_value(json_object_get(
				 json_object_get(json_object_get(out, "metadata"),
						 "annotations"),
				 "gpugate.io/decision")),
			 "train-large: 8 x h100-80gb for tenant research; 8/32 in use");
	json_decref(out);
}

Test(apply, keeps_what_the_user_wrote)
{
	json_t *out = mutate_idempotent(
		"research",
		"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"labels\":"
		"{\"gpugate.io/class\":\"train-small\",\"app\":\"llm\"}},\"spec\":{"
		"\"nodeSelector\":{\"zone\":\"a\"},"
		"\"tolerations\":[{\"key\":\"nvidia.com/gpu\",\"operator\":\"Exists\","
		"\"effect\":\"NoSchedule\"},{\"key\":\"spot\",\"operator\":\"Exists\"}],"
		"\"volumes\":[{\"name\":\"data\",\"emptyDir\":{}}],"
		"\"terminationGracePeriodSeconds\":900,"
		"\"containers\":[{\"name\":\"main\",\"env\":[{\"name\":\"GPUGATE_"
		"CHECKPOINT_DIR\",\"value\":\"/mine\"}],\"volumeMounts\":[{\"name\":"
		"\"data\",\"mountPath\":\"/checkpoint\"}],\"resources\":{\"limits\":"
		"{\"cpu\":\"4\"},\"requests\":{\"memory\":\"8Gi\"}}}]}}");
	const json_t *spec = json_object_get(out, "spec");
	const json_t *ct = json_array_get(json_object_get(spec, "containers"), 0);
	const json_t *req = json_object_get(json_object_get(ct, "resources"), "requests");
	const json_t *env = json_object_get(ct, "env");
	const json_t *mounts = json_object_get(ct, "volumeMounts");

	cr_assert_str_eq(json_string_value(json_object_get(
				 json_object_get(json_object_get(out, "metadata"), "labels"),
				 "app")),
			 "llm");
	cr_assert_eq(json_object_size(json_object_get(spec, "nodeSelector")), 2);
	cr_assert_eq(json_array_size(json_object_get(spec, "tolerations")), 2,
		     "an identical toleration is not added twice");
	cr_assert_null(json_object_get(req, "cpu"),
		       "a cpu limit is a request: the class cpu is not added");
	cr_assert_str_eq(json_string_value(json_object_get(req, "memory")), "8Gi");
	/* env: the user's value wins, gpugate's variables are added once. */
	cr_assert_eq(json_array_size(env), 3);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(env, 0),
							   "value")),
			 "/mine");
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(env, 1),
							   "name")),
			 "GPUGATE_PREEMPTIBLE");
	/* The user's volume already sits at the mount path: no second mount;
	 * the signal's is added. */
	cr_assert_eq(json_array_size(mounts), 2);
	cr_assert_eq(json_integer_value(json_object_get(
			     spec, "terminationGracePeriodSeconds")),
		     600, "a longer grace period is cut to checkpoint.gracePeriodSeconds");
	cr_assert_eq(json_array_size(json_object_get(spec, "volumes")), 3);
	json_decref(out);
}

#define SIGNAL_VOLUME_JSON                                                     \
	"{\"name\":\"gpugate-signal\",\"downwardAPI\":{\"items\":[{\"path\":"   \
	"\"checkpoint-requested\",\"fieldRef\":{\"fieldPath\":"                 \
	"\"metadata.annotations['gpugate.io/checkpoint-requested']\"}}]}}"
#define SIGNAL_MOUNT_JSON                                                      \
	"{\"name\":\"gpugate-signal\",\"mountPath\":\"/etc/gpugate/signal\","   \
	"\"readOnly\":true}"
#define SIGNAL_ENV_JSON                                                        \
	"{\"name\":\"GPUGATE_CHECKPOINT_SIGNAL\",\"value\":"                    \
	"\"/etc/gpugate/signal/checkpoint-requested\"}"

/* item is in arr, as JSON text. */
static bool holds(const json_t *arr, const char *item)
{
	json_t *want = parse(item);
	bool found = false;
	size_t i;
	json_t *v;

	json_array_foreach(arr, i, v)
		if (json_equal(v, want))
			found = true;
	json_decref(want);
	return found;
}

static void assert_signal(const json_t *spec)
{
	const json_t *ct;
	size_t i;

	cr_assert(holds(json_object_get(spec, "volumes"), SIGNAL_VOLUME_JSON));
	json_array_foreach(json_object_get(spec, "containers"), i, ct) {
		cr_assert(holds(json_object_get(ct, "volumeMounts"), SIGNAL_MOUNT_JSON),
			  "container %zu", i);
		cr_assert(holds(json_object_get(ct, "env"), SIGNAL_ENV_JSON),
			  "container %zu", i);
	}
}

Test(apply, checkpoint_signal_on_a_pod)
{
	json_t *out = mutate_idempotent(
		"research",
		"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"labels\":"
		"{\"gpugate.io/class\":\"train-small\"},\"annotations\":{"
		"\"gpugate.io/checkpoint-requested\":\"2026-12-02T21:00:00Z\"}},"
		"\"spec\":{\"containers\":[{\"name\":\"main\"},{\"name\":\"side\"}]}}");
	const json_t *ann = json_object_get(json_object_get(out, "metadata"),
					    "annotations");

	assert_signal(json_object_get(out, "spec"));
	cr_assert_str_eq(json_string_value(json_object_get(
				 ann, "gpugate.io/checkpoint-requested")),
			 "2026-12-02T21:00:00Z", "not a stamp: kept");
	json_decref(out);
}

static enum pvc_state no_claim(const void *ctx, const char *ns, const char *name)
{
	(void)ctx, (void)ns, (void)name;
	return PVC_MISSING;
}

/* The claim research-checkpoints does not exist: the hooks, the signal,
 * and no checkpoint volume nor its mount (the pod would never start). */
Test(apply, a_missing_claim_leaves_out_the_checkpoint_volume_only)
{
	static const struct pvc_view missing = {.state = no_claim};
	json_t *out;
	const json_t *spec, *ct;
	size_t i;

	claims = &missing;
	out = mutate_idempotent(
		"research",
		"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"labels\":"
		"{\"gpugate.io/class\":\"train-small\"}},"
		"\"spec\":{\"containers\":[{\"name\":\"main\"},{\"name\":\"side\"}]}}");
	claims = NULL;
	spec = json_object_get(out, "spec");
	assert_signal(spec);
	cr_assert_eq(json_array_size(json_object_get(spec, "volumes")), 1,
		     "only the signal volume");
	json_array_foreach(json_object_get(spec, "containers"), i, ct) {
		cr_assert_eq(json_array_size(json_object_get(ct, "volumeMounts")), 1,
			     "container %zu: only the signal mount", i);
		cr_assert(holds(json_object_get(ct, "env"),
				"{\"name\":\"GPUGATE_PREEMPTIBLE\",\"value\":\"1\"}"),
			  "container %zu", i);
	}
	cr_assert_not_null(json_object_get(json_object_get(json_array_get(
		json_object_get(spec, "containers"), 0), "lifecycle"), "preStop"));
	json_decref(out);
}

/*
 * The signal's values are built once, in the first request that needs
 * them, and shared: they must not come from that request's arena
 * (codec/jsonmem.h), which the next request on the thread reuses.  (Under
 * AddressSanitizer jsonmem_install() keeps malloc(): this then checks
 * nothing more than the test above.)
 */
Test(apply, the_shared_signal_outlives_the_request_that_built_it)
{
	static const char pod[] =
		"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"labels\":"
		"{\"gpugate.io/class\":\"train-small\"}},\"spec\":{\"containers\":"
		"[{\"name\":\"main\"}]}}";
	json_t *obj, *out;
	char *first, *second, *text;

	jsonmem_install();
	jsonmem_begin();
	obj = parse(pod);
	out = mutate("research", obj, "p");
	text = json_dumps(out, JSON_COMPACT | JSON_SORT_KEYS);
	cr_assert_not_null(text);
	/* json_dumps() allocates in the arena too: keep a copy. */
	first = strdup(text);
	jsonmem_free(text);
	/* Freed as a request frees them: into the arena, or (ASan, where
	 * jsonmem keeps malloc) for real. */
	json_decref(out);
	json_decref(obj);
	jsonmem_end();
	/* The next request writes over the whole arena. */
	jsonmem_begin();
	for (int i = 0; i < 4000; i++)
		json_decref(json_string("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"));
	obj = parse(pod);
	out = mutate("research", obj, "p");
	second = json_dumps(out, JSON_COMPACT | JSON_SORT_KEYS);
	cr_assert_not_null(second);
	cr_assert_str_eq(second, first);
	assert_signal(json_object_get(out, "spec"));
	json_decref(out);
	json_decref(obj);
	jsonmem_free(second);
	jsonmem_end();
	free(first);
}

Test(apply, checkpoint_signal_on_a_job_template)
{
	json_t *out = mutate_idempotent(
		"research",
		"{\"apiVersion\":\"batch/v1\",\"kind\":\"Job\",\"metadata\":{\"name\":"
		"\"j\",\"labels\":{\"gpugate.io/class\":\"train-small\"}},\"spec\":{"
		"\"template\":{\"spec\":{\"restartPolicy\":\"Never\",\"containers\":"
		"[{\"name\":\"main\"}]}}}}");
	const json_t *tspec = json_object_get(
		json_object_get(json_object_get(out, "spec"), "template"), "spec");

	assert_signal(tspec);
	cr_assert_eq(json_array_size(json_object_get(tspec, "volumes")), 2);
	json_decref(out);
}

Test(apply, users_own_signal_volume_is_kept)
{
	json_t *out = mutate_idempotent(
		"research",
		"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"labels\":"
		"{\"gpugate.io/class\":\"train-small\"}},\"spec\":{\"volumes\":"
		"[{\"name\":\"gpugate-signal\",\"emptyDir\":{}}],\"containers\":"
		"[{\"name\":\"main\",\"volumeMounts\":[{\"name\":\"gpugate-signal\","
		"\"mountPath\":\"/mine\"}]}]}}");
	const json_t *spec = json_object_get(out, "spec");
	const json_t *vols = json_object_get(spec, "volumes");
	const json_t *ct = json_array_get(json_object_get(spec, "containers"), 0);

	cr_assert(holds(vols, "{\"name\":\"gpugate-signal\",\"emptyDir\":{}}"));
	cr_assert_not(holds(vols, SIGNAL_VOLUME_JSON), "never clobbered");
	cr_assert_eq(json_array_size(vols), 2, "theirs and gpugate-checkpoint");
	cr_assert(holds(json_object_get(ct, "volumeMounts"),
			"{\"name\":\"gpugate-signal\",\"mountPath\":\"/mine\"}"));
	cr_assert_not(holds(json_object_get(ct, "volumeMounts"), SIGNAL_MOUNT_JSON));
	cr_assert(holds(json_object_get(ct, "env"), SIGNAL_ENV_JSON));
	json_decref(out);
}

Test(apply, overwrites_forged_stamps)
{
	json_t *out = mutate_idempotent(
		"research",
		"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"labels\":"
		"{\"gpugate.io/class\":\"train-large\",\"gpugate.io/tenant\":\"product\","
		"\"gpugate.io/flavor\":\"free\",\"gpugate.io/gang\":\"g-0000000000000000\"},"
		"\"annotations\":{\"gpugate.io/borrowed\":\"0\"}},"
		"\"spec\":{\"containers\":[{\"name\":\"main\"}]}}");
	const json_t *labels = json_object_get(json_object_get(out, "metadata"),
					       "labels");
	const json_t *ann = json_object_get(json_object_get(out, "metadata"),
					    "annotations");

	cr_assert_str_eq(json_string_value(json_object_get(labels, "gpugate.io/tenant")),
			 "research");
	cr_assert_str_eq(json_string_value(json_object_get(labels, "gpugate.io/flavor")),
			 "h100-80gb");
	cr_assert_null(json_object_get(labels, "gpugate.io/gang"),
		       "a bare pod is in no gang");
	cr_assert_null(json_object_get(ann, "gpugate.io/borrowed"));
	json_decref(out);
}

Test(apply, strips_stamps_from_plain_pods)
{
	json_t *obj = parse("{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":"
			    "{\"labels\":{\"app\":\"web\",\"gpugate.io/tenant\":\"x\"},"
			    "\"annotations\":{\"gpugate.io/decision\":\"fake\"}},"
			    "\"spec\":{\"containers\":[{\"name\":\"web\"}]}}");
	json_t *out = mutate("web", obj, "p");
	json_t *patch = patch_diff(obj, out);
	char *dump = json_dumps(patch, JSON_COMPACT);

	cr_assert_str_eq(dump,
			 "[{\"op\":\"remove\",\"path\":\"/metadata/labels/gpugate.io~1"
			 "tenant\"},{\"op\":\"remove\",\"path\":\"/metadata/annotations/"
			 "gpugate.io~1decision\"}]");
	free(dump);
	json_decref(patch);
	json_decref(out);
	json_decref(obj);
}

Test(apply, job_template_and_failure_policy)
{
	json_t *out = mutate_idempotent(
		"research",
		"{\"apiVersion\":\"batch/v1\",\"kind\":\"Job\",\"metadata\":{\"name\":"
		"\"j\",\"labels\":{\"gpugate.io/class\":\"train-small\"}},\"spec\":{"
		"\"parallelism\":2,\"podFailurePolicy\":{\"rules\":[{\"action\":"
		"\"FailJob\",\"onExitCodes\":{\"operator\":\"In\",\"values\":[42]}}]},"
		"\"template\":{\"spec\":{\"restartPolicy\":\"Never\",\"containers\":"
		"[{\"name\":\"main\"}]}}}}");
	const json_t *spec = json_object_get(out, "spec");
	const json_t *rules = json_object_get(json_object_get(spec, "podFailurePolicy"),
					      "rules");
	const json_t *tmeta = json_object_get(json_object_get(spec, "template"),
					      "metadata");
	const json_t *rule = json_array_get(rules, 1);
	char *dump = json_dumps(rule, JSON_COMPACT | JSON_SORT_KEYS);

	cr_assert_eq(json_array_size(rules), 2, "appended, the user's rule kept");
	cr_assert_str_eq(dump,
			 "{\"action\":\"Ignore\",\"onPodConditions\":[{\"status\":"
			 "\"True\",\"type\":\"DisruptionTarget\"}]}");
	cr_assert_str_eq(json_string_value(json_object_get(
				 json_object_get(tmeta, "labels"), "gpugate.io/class")),
			 "train-small", "the class label reaches the pods");
	cr_assert_str_eq(json_string_value(json_object_get(
				 json_object_get(tmeta, "labels"),
				 "gpugate.io/preemptible")),
			 "true");
	cr_assert_str_eq(json_string_value(json_object_get(
				 json_object_get(json_object_get(out, "metadata"), "labels"),
				 "gpugate.io/tenant")),
			 "research", "the Job itself is stamped too");
	free(dump);
	json_decref(out);
}

Test(apply, priority_class_drops_the_resolved_priority)
{
	json_t *out = mutate_idempotent(
		"research",
		"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"labels\":"
		"{\"gpugate.io/class\":\"train-large\"}},\"spec\":{\"priority\":0,"
		"\"preemptionPolicy\":\"PreemptLowerPriority\",\"containers\":"
		"[{\"name\":\"main\"}]}}");
	const json_t *spec = json_object_get(out, "spec");

	cr_assert_str_eq(json_string_value(json_object_get(spec, "priorityClassName")),
			 "training");
	cr_assert_null(json_object_get(spec, "priority"));
	cr_assert_null(json_object_get(spec, "preemptionPolicy"));
	json_decref(out);
}

Test(apply, required_affinity_on_the_gang)
{
	json_t *out = mutate_idempotent(
		"research",
		"{\"apiVersion\":\"batch/v1\",\"kind\":\"Job\",\"metadata\":{\"name\":"
		"\"j\",\"labels\":{\"gpugate.io/class\":\"train-large\"}},\"spec\":{"
		"\"parallelism\":2,\"template\":{\"spec\":{\"restartPolicy\":\"Never\","
		"\"affinity\":{\"podAffinity\":{\"requiredDuringSchedulingIgnoredDuring"
		"Execution\":[{\"labelSelector\":{\"matchLabels\":{\"app\":\"db\"}},"
		"\"topologyKey\":\"zone\"}]}},\"containers\":[{\"name\":\"main\"}]}}}}");
	const json_t *tspec = json_object_get(
		json_object_get(json_object_get(out, "spec"), "template"), "spec");
	const json_t *terms = json_object_get(
		json_object_get(json_object_get(tspec, "affinity"), "podAffinity"),
		"requiredDuringSchedulingIgnoredDuringExecution");
	const json_t *gang = json_object_get(
		json_object_get(json_object_get(json_object_get(out, "spec"), "template"),
				"metadata"),
		"labels");
	const char *g = json_string_value(json_object_get(gang, "gpugate.io/gang"));
	const json_t *term = json_array_get(terms, 1);

	cr_assert_eq(json_array_size(terms), 2);
	cr_assert_not_null(g);
	cr_assert_str_eq(json_string_value(json_object_get(term, "topologyKey")),
			 "nvidia.com/gpu.clique");
	cr_assert_str_eq(json_string_value(json_object_get(
				 json_object_get(json_object_get(term, "labelSelector"),
						 "matchLabels"),
				 "gpugate.io/gang")),
			 g);
	json_decref(out);
}

Test(apply, failure_policy_needs_pod_replacement_policy_failed)
{
	/* The apiserver defaults TerminatingOrFailed, then refuses it next
	 * to a podFailurePolicy. */
	json_t *out = mutate_idempotent(
		"research",
		"{\"apiVersion\":\"batch/v1\",\"kind\":\"Job\",\"metadata\":{\"name\":"
		"\"j\",\"labels\":{\"gpugate.io/class\":\"train-small\"}},\"spec\":{"
		"\"podReplacementPolicy\":\"TerminatingOrFailed\",\"template\":{\"spec\":"
		"{\"restartPolicy\":\"Never\",\"containers\":[{\"name\":\"main\"}]}}}}");

	cr_assert_str_eq(json_string_value(json_object_get(
				 json_object_get(out, "spec"), "podReplacementPolicy")),
			 "Failed");
	json_decref(out);
}

/* ---- topology mode preferred ------------------------------------------- */

static void setup_preferred(void)
{
	static const char yaml[] =
		"version: 1\n"
		"flavors:\n"
		"  - {name: h100, resource: nvidia.com/gpu, sharing: exclusive,\n"
		"     nodeSelector: [\"gpu=h100\"], gpusPerNode: 8}\n"
		"classes:\n"
		"  - {name: spread, flavor: h100, gpus: 8,\n"
		"     topology: {key: topology.kubernetes.io/zone, mode: preferred}}\n"
		"tenants:\n"
		"  - {name: research, namespaces: [research],\n"
		"     quota: [{flavor: h100, nominal: 64}]}\n";
	struct diag d;

	diag_init(&d);
	cr_assert_eq(policy_parse("pref.yaml", yaml, strlen(yaml), &P, &d), 0, "%s",
		     diag_text(&d));
}

TestSuite(apply_preferred, .init = setup_preferred, .fini = teardown);

/* A Job of class "spread" with 2 pods; `affinity` is "" or the template's
 * "affinity":{...} member and a comma. */
#define SPREAD_JOB(affinity)                                                   \
	"{\"apiVersion\":\"batch/v1\",\"kind\":\"Job\",\"metadata\":{\"name\":\"j\","     \
	"\"labels\":{\"gpugate.io/class\":\"spread\"}},\"spec\":{\"parallelism\":2,"     \
	"\"template\":{\"spec\":{\"restartPolicy\":\"Never\"," affinity                \
	"\"containers\":[{\"name\":\"main\"}]}}}}"

#define PREFERRED "preferredDuringSchedulingIgnoredDuringExecution"

/* gpugate's preferred term for the gang of job (weight 100). */
static json_t *gang_term(const json_t *job)
{
	const char *gang = json_string_value(json_object_get(
		json_object_get(json_object_get(job, "metadata"), "labels"),
		"gpugate.io/gang"));
	char text[512];

	cr_assert_not_null(gang);
	snprintf(text, sizeof(text),
		 "{\"weight\":100,\"podAffinityTerm\":{\"labelSelector\":"
		 "{\"matchLabels\":{\"gpugate.io/gang\":\"%s\"}},\"topologyKey\":"
		 "\"topology.kubernetes.io/zone\"}}",
		 gang);
	return parse(text);
}

/* The one operation of patch on path; fails when there is none. */
static const json_t *op_at(const json_t *patch, const char *path)
{
	size_t i;
	const json_t *op;

	json_array_foreach(patch, i, op)
		if (strcmp(json_string_value(json_object_get(op, "path")), path) == 0)
			return op;
	cr_assert_fail("no operation on %s", path);
	return NULL;
}

static void expect_op(const json_t *patch, const char *path, const json_t *value)
{
	const json_t *op = op_at(patch, path);
	char *got = json_dumps(op, JSON_COMPACT), *want = json_dumps(value, JSON_COMPACT);

	cr_assert_str_eq(json_string_value(json_object_get(op, "op")), "add");
	cr_assert(json_equal(json_object_get(op, "value"), value), "%s\nwant value %s",
		  got, want);
	free(got);
	free(want);
}

Test(apply_preferred, weighted_affinity_on_the_gang)
{
	json_t *obj = parse(SPREAD_JOB(""));
	json_t *out = mutate_idempotent("research", SPREAD_JOB(""));
	json_t *patch = patch_diff(obj, out);
	json_t *term = gang_term(out);
	json_t *want = json_pack("{s:{s:[O]}}", "podAffinity", PREFERRED, term);

	/* A strict patch adds the missing parent whole, with weight 100 so
	 * that the gang outweighs ordinary preferences. */
	expect_op(patch, "/spec/template/spec/affinity", want);
	json_decref(want);
	json_decref(term);
	json_decref(patch);
	json_decref(out);
	json_decref(obj);
}

Test(apply_preferred, appended_after_the_users_terms)
{
	const char *text = SPREAD_JOB(
		"\"affinity\":{\"podAffinity\":{\"" PREFERRED "\":[{\"weight\":10,"
		"\"podAffinityTerm\":{\"labelSelector\":{\"matchLabels\":{\"app\":"
		"\"db\"}},\"topologyKey\":\"kubernetes.io/hostname\"}}]}},");
	json_t *obj = parse(text);
	json_t *out = mutate_idempotent("research", text);
	json_t *patch = patch_diff(obj, out);
	json_t *term = gang_term(out);
	const json_t *pa = json_object_get(json_object_get(json_object_get(
		json_object_get(json_object_get(out, "spec"), "template"), "spec"),
		"affinity"), "podAffinity");

	expect_op(patch,
		  "/spec/template/spec/affinity/podAffinity/" PREFERRED "/1", term);
	cr_assert_eq(json_array_size(json_object_get(pa, PREFERRED)), 2);
	cr_assert_eq(json_integer_value(json_object_get(
			     json_array_get(json_object_get(pa, PREFERRED), 0), "weight")),
		     10, "the user's term is kept as it was");
	cr_assert_null(json_object_get(pa, "requiredDuringSchedulingIgnoredDuringExecution"));
	json_decref(term);
	json_decref(patch);
	json_decref(out);
	json_decref(obj);
}

Test(apply_preferred, a_reweighted_gang_term_is_not_added_again)
{
	/* The term is found by what it selects, not by its weight: an object
	 * whose gang term another party re-weighted comes back unchanged. */
	json_t *out = mutate_idempotent("research", SPREAD_JOB(""));
	json_t *list = json_object_get(json_object_get(json_object_get(json_object_get(
		json_object_get(json_object_get(out, "spec"), "template"), "spec"),
		"affinity"), "podAffinity"), PREFERRED);
	json_t *again, *patch;

	json_object_set_new(json_array_get(list, 0), "weight", json_integer(50));
	again = mutate("research", out, "p");
	patch = patch_diff(out, again);
	cr_assert_eq(json_array_size(patch), 0);
	json_decref(patch);
	json_decref(again);
	json_decref(out);
}
