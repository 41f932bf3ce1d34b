/*
 * The decision for DRA ResourceClaims and ResourceClaimTemplates
 * (policy/decide-dra.c): every rule and every message, verbatim.
 * Claims are written as JSON and turned into facts by webhook/facts.c, as
 * in decide_test.c; what a claim holds is tests/unit/policy/dra_test.c.
 */
#include "base/arena.h"
#include "base/diag.h"
#include "policy/kinds.h"
#include "policy/decide.h"
#include "webhook/facts.h"
#include "tests/unit/test_policy.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

static const char policy_yaml[] =
	"version: 1\n"
	"flavors:\n"
	"  - {name: h100, resource: nvidia.com/gpu, sharing: exclusive,\n"
	"     gpusPerNode: 8, deviceClassNames: [gpu.nvidia.com, h100.example.com]}\n"
	"  - {name: mig, resource: nvidia.com/mig-1g.10gb, sharing: mig,\n"
	"     gpusPerNode: 56, deviceClassNames: [mig-1g.example.com]}\n"
	"  - {name: a100, resource: nvidia.com/gpu.a100, sharing: exclusive,\n"
	"     gpusPerNode: 8, deviceClassNames: [a100.example.com]}\n"
	"classes: []\n"
	"tenants:\n"
	"  - name: research\n"
	"    namespaces: [research]\n"
	"    cohort: lab\n"
	"    sharing: [exclusive]\n"
	"    quota: [{flavor: h100, nominal: 16, borrowingLimit: 8}]\n"
	"  - name: product\n"
	"    namespaces: [product]\n"
	"    cohort: lab\n"
	"    quota: [{flavor: h100, nominal: 8}, {flavor: mig, nominal: 14}]\n"
	"  - name: solo\n"
	"    namespaces: [solo]\n"
	"    quota: [{flavor: h100, nominal: 2}]\n"
	"  - name: sandbox\n"
	"    namespaces: [sandbox]\n"
	"    mode: warn\n"
	"    quota: [{flavor: h100, nominal: 1}]\n";

enum { T_RESEARCH, T_PRODUCT, T_SOLO, T_SANDBOX, N_T };
enum { F_H100, F_MIG, F_A100, N_F };

static struct policy *P;
static int64_t used[N_T][N_F];

static int64_t used_fn(const void *ctx, unsigned t, unsigned f)
{
	(void)ctx;
	return used[t][f];
}

static const struct usage_view usage = {.ctx = NULL, .used = used_fn};

static void setup(void)
{
	P = test_policy(policy_yaml);
	memset(used, 0, sizeof(used));
}

static void teardown(void)
{
	policy_free(P);
}

TestSuite(decide_dra, .init = setup, .fini = teardown);

struct run {
	struct arena arena;
	json_t *obj;
	struct workload wl;
	struct decision dec;
};

/* A claim (kind "ResourceClaim") or a template in ns whose
 * spec.devices.requests is the JSON list `requests`, decided at phase. */
static void run(struct run *r, const char *kind, const char *ns,
		const char *requests, enum decide_phase phase)
{
	bool tmpl = strcmp(kind, "ResourceClaimTemplate") == 0;
	char json[4096];
	struct diag d;
	struct decide_input in = {.policy = P, .wl = &r->wl, .phase = phase};
	json_error_t err;

	snprintf(json, sizeof(json),
		 "{\"apiVersion\": \"resource.k8s.io/v1\", \"kind\": \"%s\","
		 " \"metadata\": {\"name\": \"c\", \"namespace\": \"%s\"},"
		 " \"spec\": %s{\"devices\": {\"requests\": %s}}%s}",
		 kind, ns, tmpl ? "{\"spec\": " : "", requests, tmpl ? "}" : "");
	r->obj = json_loads(json, 0, &err);
	cr_assert_not_null(r->obj, "%s: %s", err.text, json);
	arena_init(&r->arena);
	memset(&r->wl, 0, sizeof(r->wl));
	r->wl.def = kinds_find("resource.k8s.io", "v1",
			       tmpl ? "ResourceClaimTemplate" : "ResourceClaim");
	r->wl.kind = r->wl.def->wl;
	r->wl.op = WL_CREATE;
	r->wl.namespace = ns;
	r->wl.name = "c";
	r->wl.uid = "uid-c";
	r->wl.request_uid = "req-1";
	diag_init(&d);
	cr_assert_eq(facts_extract(r->obj, &r->wl, &r->arena, &d), 0, "%s",
		     diag_text(&d));
	decide(&in, &usage, &r->dec);
}

static void done(struct run *r)
{
	json_decref(r->obj);
	arena_release(&r->arena);
}

#define EXACTLY(cls, n)                                                        \
	"{\"name\": \"gpu\", \"exactly\": {\"deviceClassName\": \"" cls "\","  \
	" \"allocationMode\": \"ExactCount\", \"count\": " #n "}}"
#define TWO_H100 "[" EXACTLY("gpu.nvidia.com", 2) "]"

static void expect_denied(struct run *r, const char *rule, const char *message)
{
	cr_assert_not(r->dec.allowed, "admitted: %s", r->dec.message);
	cr_assert_eq(r->dec.code, 403);
	cr_assert_str_eq(r->dec.rule, rule);
	cr_assert_str_eq(r->dec.message, message);
	cr_assert_not(r->dec.plan.active);
}

static void expect_admitted_untouched(struct run *r)
{
	cr_assert(r->dec.allowed, "%s", r->dec.message);
	cr_assert_not(r->dec.violation, "%s", r->dec.message);
	cr_assert_not(r->dec.claim.needed);
	cr_assert_eq(r->dec.n_warnings, 0, "%s", r->dec.warnings[0]);
	cr_assert_not(r->dec.plan.active);
}

Test(decide_dra, a_claim_of_a_mapped_class_is_charged_like_a_bare_pod)
{
	struct run r;

	used[T_RESEARCH][F_H100] = 5;
	run(&r, "ResourceClaim", "research", TWO_H100, DECIDE_VALIDATE);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	cr_assert(r.dec.claim.needed);
	cr_assert_str_eq(r.dec.claim.tenant->name, "research");
	cr_assert_str_eq(r.dec.claim.flavor->name, "h100");
	cr_assert_eq(r.dec.claim.units, 2);
	cr_assert_eq(r.dec.claim.per_pod, 2);
	cr_assert_eq(r.dec.claim.pods, 1);
	cr_assert_not(r.dec.claim.may_borrow, "claims use nominal quota only");
	cr_assert_eq(r.dec.quota.position, QUOTA_NOMINAL);
	cr_assert_not(r.dec.plan.active, "gpugate changes no claim");
	cr_assert_eq(r.dec.n_warnings, 0, "no problem: the success line is no warning");
	cr_assert_str_eq(r.dec.success,
			 "gpugate: claim -> 2 x h100 for tenant research (7/16 in use)");
	done(&r);
	/* /mutate (if registered) peeks the same, and prints nothing. */
	run(&r, "ResourceClaim", "research", TWO_H100, DECIDE_MUTATE);
	cr_assert(r.dec.allowed && r.dec.claim.needed);
	cr_assert_eq(r.dec.n_warnings, 0);
	done(&r);
}

Test(decide_dra, the_defaults_are_one_device_of_exact_count)
{
	struct run r;

	run(&r, "ResourceClaim", "research",
	    "[{\"name\": \"a\", \"exactly\": {\"deviceClassName\": \"gpu.nvidia.com\"}},"
	    " {\"name\": \"b\", \"firstAvailable\": ["
	    "   {\"name\": \"big\", \"deviceClassName\": \"h100.example.com\", \"count\": 4},"
	    "   {\"name\": \"nic\", \"deviceClassName\": \"nic.example.com\", \"count\": 9}]}]",
	    DECIDE_VALIDATE);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	cr_assert_eq(r.dec.claim.units, 1 + 4);
	done(&r);
}

Test(decide_dra, over_quota_claims_do_not_borrow)
{
	struct run r;

	used[T_RESEARCH][F_H100] = 15;
	run(&r, "ResourceClaim", "research", TWO_H100, DECIDE_VALIDATE);
	expect_denied(&r, "quota",
		      "gpugate: tenant \"research\" is over its h100 quota: requested 2 "
		      "(claim, device class gpu.nvidia.com), in use 15 of nominal 16, "
		      "claims do not borrow from cohort \"lab\"");
	done(&r);
	used[T_SOLO][F_H100] = 1;
	run(&r, "ResourceClaim", "solo", TWO_H100, DECIDE_VALIDATE);
	expect_denied(&r, "quota",
		      "gpugate: tenant \"solo\" is over its h100 quota: requested 2 "
		      "(claim, device class gpu.nvidia.com), in use 1 of nominal 2, no "
		      "cohort to borrow from");
	done(&r);
}

Test(decide_dra, a_claim_beyond_nominal_can_never_be_admitted)
{
	struct run r;

	run(&r, "ResourceClaim", "research", "[" EXACTLY("gpu.nvidia.com", 17) "]",
	    DECIDE_VALIDATE);
	expect_denied(&r, "quota",
		      "gpugate: claim can never be admitted: needs 17 h100, tenant "
		      "\"research\" may hold at most 16 (nominal 16; claims do not "
		      "borrow)");
	done(&r);
	run(&r, "ResourceClaim", "solo", "[" EXACTLY("gpu.nvidia.com", 3) "]",
	    DECIDE_VALIDATE);
	expect_denied(&r, "quota",
		      "gpugate: claim can never be admitted: needs 3 h100, tenant "
		      "\"solo\" may hold at most 2 (nominal 2)");
	done(&r);
}

Test(decide_dra, a_tenant_without_quota_for_the_flavor)
{
	struct run r;

	run(&r, "ResourceClaim", "research", "[" EXACTLY("a100.example.com", 1) "]",
	    DECIDE_VALIDATE);
	expect_denied(&r, "quota",
		      "gpugate: tenant \"research\" has no quota for flavor a100 "
		      "(device class a100.example.com); ask the platform team for quota");
	done(&r);
}

Test(decide_dra, an_unmapped_gpu_class_is_a_raw_request)
{
	struct policy *saved = P;
	struct run r;

	run(&r, "ResourceClaim", "research", "[" EXACTLY("mig.nvidia.com", 1) "]",
	    DECIDE_VALIDATE);
	expect_denied(&r, "raw-request",
		      "gpugate: this claim asks for devices of class \"mig.nvidia.com\", "
		      "which maps to no GPU flavor; use a device class tenant "
		      "\"research\" may use: gpu.nvidia.com, h100.example.com");
	done(&r);
	run(&r, "ResourceClaim", "solo", "[" EXACTLY("tpu.example.com", 1) "]",
	    DECIDE_VALIDATE);
	expect_admitted_untouched(&r); /* not a GPU class of this policy */
	done(&r);

	/* rawGpuRequests: allow admits it, uncharged: it has no flavor. */
	P = test_policy("version: 1\nsettings:\n  rawGpuRequests: allow\n"
		  "  gpuDeviceClassNames: [tpu.example.com]\n"
		  "flavors: []\nclasses: []\n"
		  "tenants: [{name: solo, namespaces: [solo]}]\n");
	run(&r, "ResourceClaim", "solo", "[" EXACTLY("tpu.example.com", 4) "]",
	    DECIDE_VALIDATE);
	expect_admitted_untouched(&r);
	done(&r);
	run(&r, "ResourceClaim", "web", "[" EXACTLY("tpu.example.com", 4) "]",
	    DECIDE_VALIDATE);
	expect_denied(&r, "no-tenant",
		      "gpugate: namespace \"web\" belongs to no tenant, so it cannot use "
		      "device class \"tpu.example.com\"; ask the platform team to add it "
		      "to a tenant in the gpugate policy");
	done(&r);
	policy_free(P);
	P = saved;
}

Test(decide_dra, a_namespace_without_tenant_may_not_ask_for_gpus)
{
	struct run r;

	run(&r, "ResourceClaim", "web", TWO_H100, DECIDE_VALIDATE);
	expect_denied(&r, "no-tenant",
		      "gpugate: namespace \"web\" belongs to no tenant, so it cannot use "
		      "device class \"gpu.nvidia.com\"; ask the platform team to add it "
		      "to a tenant in the gpugate policy");
	done(&r);
	run(&r, "ResourceClaim", "web",
	    "[{\"name\": \"nic\", \"exactly\": {\"deviceClassName\": \"nic.example.com\"}}]",
	    DECIDE_VALIDATE);
	expect_admitted_untouched(&r);
	done(&r);
}

Test(decide_dra, all_devices_of_a_gpu_class_cannot_be_bounded)
{
	struct run r;

	run(&r, "ResourceClaim", "research",
	    "[{\"name\": \"every\", \"exactly\": {\"deviceClassName\": \"gpu.nvidia.com\","
	    " \"allocationMode\": \"All\"}}]",
	    DECIDE_VALIDATE);
	expect_denied(&r, "allocation-all",
		      "gpugate: request \"every\" asks for all devices of class "
		      "\"gpu.nvidia.com\" (allocationMode All), which cannot be counted "
		      "against quota; ask for a number of devices (allocationMode "
		      "ExactCount with a count)");
	done(&r);
	run(&r, "ResourceClaimTemplate", "research",
	    "[{\"name\": \"any\", \"firstAvailable\": ["
	    "  {\"name\": \"two\", \"deviceClassName\": \"gpu.nvidia.com\", \"count\": 2},"
	    "  {\"name\": \"rest\", \"deviceClassName\": \"gpu.nvidia.com\","
	    "   \"allocationMode\": \"All\"}]}]",
	    DECIDE_VALIDATE);
	expect_denied(&r, "allocation-all",
		      "gpugate: request \"any/rest\" asks for all devices of class "
		      "\"gpu.nvidia.com\" (allocationMode All), which cannot be counted "
		      "against quota; ask for a number of devices (allocationMode "
		      "ExactCount with a count)");
	done(&r);
}

Test(decide_dra, a_claim_may_use_one_flavor_only)
{
	struct run r;

	run(&r, "ResourceClaim", "product",
	    "[" EXACTLY("gpu.nvidia.com", 1) ", " EXACTLY("mig-1g.example.com", 2) "]",
	    DECIDE_VALIDATE);
	expect_denied(&r, "two-flavors",
		      "gpugate: this claim asks for devices of two flavors (class "
		      "\"gpu.nvidia.com\" of h100 and class \"mig-1g.example.com\" of "
		      "mig); a claim may use one flavor only");
	done(&r);
	run(&r, "ResourceClaimTemplate", "product",
	    "[{\"name\": \"any\", \"firstAvailable\": ["
	    "  {\"name\": \"slices\", \"deviceClassName\": \"mig-1g.example.com\", \"count\": 7},"
	    "  {\"name\": \"whole\", \"deviceClassName\": \"h100.example.com\"}]}]",
	    DECIDE_VALIDATE);
	expect_denied(&r, "two-flavors",
		      "gpugate: this claim template asks for devices of two flavors "
		      "(class \"mig-1g.example.com\" of mig and class "
		      "\"h100.example.com\" of h100); a claim may use one flavor only");
	done(&r);
}

Test(decide_dra, a_sharing_mode_the_tenant_may_not_use)
{
	struct run r;

	run(&r, "ResourceClaim", "research", "[" EXACTLY("mig-1g.example.com", 1) "]",
	    DECIDE_VALIDATE);
	expect_denied(&r, "sharing",
		      "gpugate: device class \"mig-1g.example.com\" is a mig GPU class, "
		      "which tenant \"research\" may not use (allowed sharing: "
		      "exclusive)");
	done(&r);
}

Test(decide_dra, a_template_is_judged_and_holds_nothing)
{
	struct run r;

	used[T_RESEARCH][F_H100] = 16; /* full: a template holds nothing */
	run(&r, "ResourceClaimTemplate", "research", TWO_H100, DECIDE_VALIDATE);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	cr_assert_not(r.dec.violation);
	cr_assert_not(r.dec.claim.needed, "its claims are charged, not it");
	cr_assert_not(r.dec.has_quota);
	cr_assert_not(r.dec.plan.active);
	cr_assert_eq(r.dec.n_warnings, 0);
	cr_assert_str_eq(r.dec.success,
			 "gpugate: claim template -> 2 x h100 per claim for tenant "
			 "research (each claim made from it is charged)");
	done(&r);
	run(&r, "ResourceClaimTemplate", "research", "[" EXACTLY("gpu.nvidia.com", 17) "]",
	    DECIDE_VALIDATE);
	expect_denied(&r, "quota",
		      "gpugate: the claims of this template can never be admitted: each "
		      "needs 17 h100, tenant \"research\" may hold at most 16 (nominal "
		      "16; claims do not borrow)");
	done(&r);
	run(&r, "ResourceClaimTemplate", "research", "[" EXACTLY("mig.nvidia.com", 1) "]",
	    DECIDE_VALIDATE);
	expect_denied(&r, "raw-request",
		      "gpugate: this claim template asks for devices of class "
		      "\"mig.nvidia.com\", which maps to no GPU flavor; use a device "
		      "class tenant \"research\" may use: gpu.nvidia.com, "
		      "h100.example.com");
	done(&r);
	run(&r, "ResourceClaimTemplate", "research", "[" EXACTLY("a100.example.com", 1) "]",
	    DECIDE_VALIDATE);
	expect_denied(&r, "quota",
		      "gpugate: tenant \"research\" has no quota for flavor a100 "
		      "(device class a100.example.com); ask the platform team for quota");
	done(&r);
}

Test(decide_dra, warn_mode_admits_and_still_charges)
{
	struct run r;

	used[T_SANDBOX][F_H100] = 1;
	run(&r, "ResourceClaim", "sandbox", "[" EXACTLY("gpu.nvidia.com", 1) "]",
	    DECIDE_VALIDATE);
	cr_assert(r.dec.allowed);
	cr_assert(r.dec.violation);
	cr_assert_str_eq(r.dec.rule, "quota");
	cr_assert(r.dec.claim.needed, "admitted with GPUs: charged");
	cr_assert_eq(r.dec.claim.units, 1);
	cr_assert_eq(r.dec.n_warnings, 1);
	cr_assert_str_eq(r.dec.warnings[0],
			 "gpugate: tenant \"sandbox\" is over its h100 quota: requested 1 "
			 "(claim, device class gpu.nvidia.com), in use 1 of nominal 1, no "
			 "cohort to borrow from");
	cr_assert_str_eq(r.dec.success,
			 "gpugate: claim -> 1 x h100 for tenant sandbox (2/1 in use)");
	done(&r);
	/* All in warn mode: admitted, and counted as the most a claim holds. */
	run(&r, "ResourceClaim", "sandbox",
	    "[{\"name\": \"every\", \"exactly\": {\"deviceClassName\": \"gpu.nvidia.com\","
	    " \"allocationMode\": \"All\"}}]",
	    DECIDE_VALIDATE);
	cr_assert(r.dec.allowed);
	cr_assert_str_eq(r.dec.rule, "allocation-all");
	cr_assert(r.dec.claim.needed);
	cr_assert_eq(r.dec.claim.units, 32);
	done(&r);
}

Test(decide_dra, only_creations_are_judged)
{
	struct run r;

	run(&r, "ResourceClaim", "web", TWO_H100, DECIDE_VALIDATE);
	cr_assert_not(r.dec.allowed);
	done(&r);
	for (enum wl_op op = WL_UPDATE; op <= WL_CONNECT; op++) {
		struct decide_input in = {.policy = P, .wl = &r.wl,
					  .phase = DECIDE_VALIDATE, .old = &r.wl};

		run(&r, "ResourceClaim", "web", TWO_H100, DECIDE_VALIDATE);
		r.wl.op = op;
		decide(&in, &usage, &r.dec);
		expect_admitted_untouched(&r);
		done(&r);
	}
}

Test(decide_dra, malformed_device_requests_are_bad_input)
{
	static const struct {
		const char *requests, *error;
	} cases[] = {
		{"[{\"name\": \"a\", \"exactly\": {\"deviceClassName\": \"gpu.nvidia.com\","
		 " \"count\": 0}}]",
		 "spec.devices.requests[0].exactly.count is not a whole number of at "
		 "least 1"},
		{"[{\"name\": \"a\", \"firstAvailable\": [{\"deviceClassName\": \"x\","
		 " \"allocationMode\": \"Some\"}]}]",
		 "spec.devices.requests[0].firstAvailable[0].allocationMode is not "
		 "ExactCount or All"},
		{"[{\"name\": \"a\", \"exactly\": [1]}]",
		 "spec.devices.requests[0].exactly is not an object"},
		{"{}", "spec.devices.requests is not a list"},
		{"[7]", "spec.devices.requests[0] is not an object"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char json[1024], want[256];
		struct workload wl = {.kind = WL_CLAIM,
				      .def = kinds_find("resource.k8s.io", "v1", "ResourceClaim")};
		struct arena a;
		struct diag d;
		json_t *obj;

		snprintf(json, sizeof(json),
			 "{\"spec\": {\"devices\": {\"requests\": %s}}}", cases[i].requests);
		obj = json_loads(json, 0, NULL);
		cr_assert_not_null(obj);
		arena_init(&a);
		diag_init(&d);
		cr_assert_eq(facts_extract(obj, &wl, &a, &d), -1, "%s", json);
		snprintf(want, sizeof(want), "%s\n", cases[i].error);
		cr_assert_str_eq(diag_text(&d), want, "%s", json);
		arena_release(&a);
		json_decref(obj);
	}
}

/* The kube-scheduler's claim of 4 GPUs for pod "p"'s extended resources:
 * it may ride on the pod (policy/charge.h); the store says how much of it
 * the pod covers, and the message says what is left. */
Test(decide_dra, the_schedulers_claim_asks_what_its_pod_does_not_hold)
{
	static const char json[] =
		"{\"apiVersion\": \"resource.k8s.io/v1\", \"kind\": \"ResourceClaim\","
		" \"metadata\": {\"generateName\": \"p-extended-resources-\","
		"  \"namespace\": \"research\", \"uid\": \"uid-c\","
		"  \"annotations\": {\"resource.kubernetes.io/extended-resource-claim\": \"true\"},"
		"  \"ownerReferences\": [{\"apiVersion\": \"v1\", \"kind\": \"Pod\","
		"   \"name\": \"p\", \"uid\": \"uid-p\", \"controller\": true}]},"
		" \"spec\": {\"devices\": {\"requests\": [" EXACTLY("gpu.nvidia.com", 4) "]}}}";
	struct run r;
	struct diag d;
	struct decide_input in = {.policy = P, .wl = &r.wl, .phase = DECIDE_VALIDATE};
	struct quota_result q = {.position = QUOTA_OVER, .requested = 2, .used = 15,
				 .nominal = 16, .cohort = "lab"};

	r.obj = json_loads(json, 0, NULL);
	cr_assert_not_null(r.obj);
	arena_init(&r.arena);
	memset(&r.wl, 0, sizeof(r.wl));
	r.wl.def = kinds_find("resource.k8s.io", "v1", "ResourceClaim");
	r.wl.kind = r.wl.def->wl;
	r.wl.op = WL_CREATE;
	r.wl.namespace = "research";
	r.wl.request_uid = "req-1";
	diag_init(&d);
	cr_assert_eq(facts_extract(r.obj, &r.wl, &r.arena, &d), 0, "%s", diag_text(&d));
	decide(&in, &usage, &r.dec);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	cr_assert_eq(r.dec.claim.units, 4, "the store makes it what the pod leaves");
	cr_assert_str_eq(r.dec.claim.owner_pod_uid, "uid-p");
	decide_quota(&in, &r.dec, &q);
	expect_denied(&r, "quota",
		      "gpugate: tenant \"research\" is over its h100 quota: requested 2 "
		      "(claim, device class gpu.nvidia.com: 2 of its 4 devices, pod \"p\" "
		      "holds the other 2), in use 15 of nominal 16, claims do not borrow "
		      "from cohort \"lab\"");
	/* Covered whole by its pod: admitted, and the line says by whom. */
	memset(&r.dec, 0, sizeof(r.dec));
	decide(&in, &usage, &r.dec);
	q = (struct quota_result){.position = QUOTA_COVERED, .holder = "p"};
	decide_quota(&in, &r.dec, &q);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	cr_assert_str_eq(r.dec.success,
			 "gpugate: claim -> 4 x h100 for tenant research (held by pod p)");
	done(&r);
}

/* ---- gpugate's claim templates: only gpugate writes them --------------- */

/* A template named name, labelled gpugate's or not, written by user as op
 * (old: labelled as before, for an UPDATE), decided at /validate. */
struct guard {
	struct run now, before;
};

static void guard_one(struct run *r, const char *ns, const char *name, bool labelled)
{
	char json[2048];
	struct diag d;
	json_error_t err;

	snprintf(json, sizeof(json),
		 "{\"apiVersion\": \"resource.k8s.io/v1\", \"kind\": \"ResourceClaimTemplate\","
		 " \"metadata\": {\"name\": \"%s\", \"namespace\": \"%s\"%s},"
		 " \"spec\": {\"spec\": {\"devices\": {\"requests\": %s}}}}",
		 name, ns,
		 labelled ? ", \"labels\": {\"app.kubernetes.io/managed-by\": \"gpugate\"}" : "",
		 TWO_H100);
	r->obj = json_loads(json, 0, &err);
	cr_assert_not_null(r->obj, "%s: %s", err.text, json);
	arena_init(&r->arena);
	memset(&r->wl, 0, sizeof(r->wl));
	r->wl.def = kinds_find("resource.k8s.io", "v1", "ResourceClaimTemplate");
	r->wl.kind = r->wl.def->wl;
	r->wl.namespace = ns;
	r->wl.name = name;
	diag_init(&d);
	cr_assert_eq(facts_extract(r->obj, &r->wl, &r->arena, &d), 0, "%s",
		     diag_text(&d));
}

static void guard_run(struct guard *g, const char *ns, const char *name, enum wl_op op,
		      const char *user, bool labelled, bool was_labelled)
{
	struct decide_input in = {.policy = P, .wl = &g->now.wl, .phase = DECIDE_VALIDATE,
				  .self_user = "system:serviceaccount:gpugate:gpugate",
				  .self_namespace = "gpugate"};

	guard_one(&g->now, ns, name, labelled);
	guard_one(&g->before, ns, name, was_labelled);
	g->now.wl.op = op;
	g->now.wl.user = user;
	if (op == WL_UPDATE)
		in.old = &g->before.wl;
	decide(&in, &usage, &g->now.dec);
}

static void guard_done(struct guard *g)
{
	done(&g->now);
	done(&g->before);
}

#define ALICE "alice@example.com"
#define SELF "system:serviceaccount:gpugate:gpugate"

Test(decide_dra, a_template_named_gpugate_dot_is_gpugates_to_create)
{
	struct guard g;

	guard_run(&g, "research", "gpugate.train.2.abc123", WL_CREATE, ALICE, true, false);
	expect_denied(&g.now, "claim-template",
		      "gpugate: claim template names starting with gpugate. are "
		      "gpugate's; choose another name");
	guard_done(&g);
	/* Unlabelled, and in a namespace of no tenant: the name decides. */
	guard_run(&g, "web", "gpugate.x", WL_CREATE, ALICE, false, false);
	cr_assert_not(g.now.dec.allowed);
	cr_assert_str_eq(g.now.dec.rule, "claim-template");
	guard_done(&g);
	/* gpugate itself: admitted, and not judged as a user's template
	 * (gpu.nvidia.com would be checked against the tenant's quota). */
	guard_run(&g, "research", "gpugate.train.2.abc123", WL_CREATE, SELF, true, false);
	expect_admitted_untouched(&g.now);
	cr_assert_null(g.now.dec.flavor, "not judged");
	guard_done(&g);
	/* gpugate's user not known: a ServiceAccount of its namespace is it. */
	{
		struct decide_input in = {.policy = P, .wl = &g.now.wl,
					  .phase = DECIDE_VALIDATE, .self_namespace = "gpugate"};

		guard_one(&g.now, "research", "gpugate.train.2.abc123", true);
		guard_one(&g.before, "research", "x", false);
		g.now.wl.op = WL_CREATE;
		g.now.wl.user = "system:serviceaccount:gpugate:other";
		decide(&in, &usage, &g.now.dec);
		expect_admitted_untouched(&g.now);
		guard_done(&g);
	}
	/* Another name: judged as any template (the claim rules). */
	guard_run(&g, "research", "gpugate-like", WL_CREATE, ALICE, false, false);
	cr_assert(g.now.dec.allowed, "%s", g.now.dec.message);
	cr_assert_not_null(g.now.dec.flavor, "judged: its devices are h100's");
	cr_assert_str_eq(g.now.dec.flavor->name, "h100");
	guard_done(&g);
}

Test(decide_dra, gpugates_label_on_a_template_is_gpugates_to_change)
{
	static const char msg[] =
		"gpugate: the label app.kubernetes.io/managed-by=gpugate of claim template "
		"\"gpugate.train.2.abc123\" is gpugate's to set; leave it as it was";
	struct guard g;

	/* Removed from gpugate's template. */
	guard_run(&g, "research", "gpugate.train.2.abc123", WL_UPDATE, ALICE, false, true);
	expect_denied(&g.now, "claim-template", msg);
	guard_done(&g);
	/* Added to a stranger's template of gpugate's name. */
	guard_run(&g, "research", "gpugate.train.2.abc123", WL_UPDATE, ALICE, true, false);
	expect_denied(&g.now, "claim-template", msg);
	guard_done(&g);
	/* Removed from any template labelled gpugate's. */
	guard_run(&g, "research", "mine", WL_UPDATE, ALICE, false, true);
	cr_assert_str_eq(g.now.dec.rule, "claim-template");
	guard_done(&g);
	/* Left as it was, or by gpugate, or added to another name: admitted. */
	guard_run(&g, "research", "gpugate.train.2.abc123", WL_UPDATE, ALICE, true, true);
	expect_admitted_untouched(&g.now);
	guard_done(&g);
	guard_run(&g, "research", "gpugate.train.2.abc123", WL_UPDATE, SELF, false, true);
	expect_admitted_untouched(&g.now);
	guard_done(&g);
	guard_run(&g, "research", "mine", WL_UPDATE, ALICE, true, false);
	expect_admitted_untouched(&g.now);
	guard_done(&g);
	/* Deleting stays allowed (the keeper makes it again). */
	guard_run(&g, "research", "gpugate.train.2.abc123", WL_DELETE, ALICE, true, true);
	expect_admitted_untouched(&g.now);
	guard_done(&g);
}

Test(decide_dra, warn_mode_warns_of_a_template_named_gpugate_dot)
{
	struct guard g;

	guard_run(&g, "sandbox", "gpugate.x", WL_CREATE, ALICE, false, false);
	cr_assert(g.now.dec.allowed);
	cr_assert_str_eq(g.now.dec.rule, "claim-template");
	cr_assert_str_eq(g.now.dec.warnings[0],
			 "gpugate: claim template names starting with gpugate. are "
			 "gpugate's; choose another name");
	guard_done(&g);
}
