/*
 * DRA claims that ride on their pod in the memory usage backend
 * (policy/charge.h, usage_claim_ride()): the scheduler's claim for a pod's
 * extended resources holds what its devices exceed the pod's units by;
 * only the claim the pod's status names (or, before that, its earliest)
 * rides; never one the pod names itself; a claim without its pod holds
 * everything.
 */
#include "base/diag.h"
#include "policy/decide.h"
#include "usage/usage.h"
#include "tests/unit/test_policy.h"

#include <criterion/criterion.h>
#include <string.h>

static const char policy_yaml[] =
	"version: 1\n"
	"flavors:\n"
	"  - {name: h100, resource: nvidia.com/gpu, sharing: exclusive, gpusPerNode: 8,\n"
	"     deviceClassNames: [gpu.nvidia.com]}\n"
	"  - {name: l4, resource: nvidia.com/gpu.shared, sharing: time-slicing,\n"
	"     gpusPerNode: 8, deviceClassNames: [l4.example.com]}\n"
	"classes: []\n"
	"tenants:\n"
	"  - {name: a, namespaces: [a, a2], quota: [{flavor: h100, nominal: 10},\n"
	"                                   {flavor: l4, nominal: 10}]}\n";

static struct policy *P;

static void setup(void)
{
	P = test_policy(policy_yaml);
}

static void teardown(void)
{
	policy_free(P);
}

TestSuite(ledger_ride, .init = setup, .fini = teardown);

static struct usage_item pod(const char *uid, int64_t units)
{
	return (struct usage_item){.uid = uid, .kind = USAGE_PODS, .namespace = "a",
				   .name = uid, .tenant = "a", .flavor = "h100",
				   .per_pod = units, .slots = 1, .units = units,
				   .active = true};
}

/* The scheduler's claim `name` for pod pod_uid, made at created_ms. */
static struct usage_item claim(const char *uid, const char *name,
			       const char *pod_uid, int64_t units, int64_t created_ms)
{
	return (struct usage_item){.uid = uid, .kind = USAGE_CLAIMS, .namespace = "a",
				   .name = name, .tenant = "a", .flavor = "h100",
				   .per_pod = units, .slots = 1, .units = units,
				   .active = true, .owner_pod_uid = pod_uid,
				   .created_ms = created_ms};
}

/* A Job of 2 pods of 2 GPUs. */
static struct usage_item job_of_two(const char *uid)
{
	return (struct usage_item){.uid = uid, .kind = USAGE_JOBS, .namespace = "a",
				   .name = uid, .tenant = "a", .flavor = "h100",
				   .per_pod = 2, .slots = 2, .units = 4, .active = true};
}

static struct usage_store *ledger(void)
{
	struct usage_store *l = usage_memory_new(NULL);

	cr_assert_not_null(l);
	return l;
}

Test(ledger_ride, the_schedulers_claim_is_charged_once_with_its_pod)
{
	struct usage_store *l = ledger();
	struct usage_item p = pod("p", 2), c = claim("c", "p-extended-resources-x", "p", 2, 10);

	usage_observe(l, &p);
	usage_observe(l, &c);
	cr_assert_eq(usage_used(l, "a", "h100"), 2, "not 4: the claim rides");
	/* The claim first, then its pod (a relist lists claims on their own). */
	usage_forget(l, "p");
	cr_assert_eq(usage_used(l, "a", "h100"), 2, "without its pod, all of it");
	usage_observe(l, &p);
	cr_assert_eq(usage_used(l, "a", "h100"), 2);
	usage_forget(l, "c");
	cr_assert_eq(usage_used(l, "a", "h100"), 2, "the pod alone");
	usage_observe(l, &c);
	usage_forget(l, "p");
	usage_forget(l, "c");
	cr_assert_eq(usage_used(l, "a", "h100"), 0);
	cr_assert_eq(usage_entries(l), 0);
	usage_free(l);
}

Test(ledger_ride, a_claim_beyond_its_pod_holds_the_excess)
{
	struct usage_store *l = ledger();
	struct usage_item p = pod("p", 2), c = claim("c", "c", "p", 5, 10);

	usage_observe(l, &p);
	usage_observe(l, &c);
	cr_assert_eq(usage_used(l, "a", "h100"), 5, "2 for the pod, 3 beyond it");
	usage_free(l);
}

Test(ledger_ride, only_one_claim_rides_on_a_pod)
{
	struct usage_store *l = ledger();
	struct usage_item p = pod("p", 2);
	struct usage_item forged = claim("f", "forged", "p", 2, 5);
	struct usage_item real = claim("c", "p-extended-resources-x", "p", 2, 10);

	usage_observe(l, &p);
	usage_observe(l, &forged);
	usage_observe(l, &real);
	cr_assert_eq(usage_used(l, "a", "h100"), 4,
		     "the earliest rides (the forged one), the other holds its 2");
	/* The scheduler writes the pod's status: its claim rides now. */
	p.extended_claim = "p-extended-resources-x";
	usage_observe(l, &p);
	cr_assert_eq(usage_used(l, "a", "h100"), 4, "the forged one holds its 2 now");
	usage_forget(l, "f");
	cr_assert_eq(usage_used(l, "a", "h100"), 2);
	/* The status names a claim that is not there: nothing rides. */
	p.extended_claim = "gone";
	usage_observe(l, &p);
	cr_assert_eq(usage_used(l, "a", "h100"), 4);
	usage_free(l);
}

Test(ledger_ride, a_claim_the_pod_names_itself_never_rides)
{
	struct usage_store *l = ledger();
	struct usage_item p = pod("p", 2), c = claim("c", "mine", "p", 2, 10);

	p.named_claims = "\x1fother\x1fmine\x1f";
	usage_observe(l, &p);
	usage_observe(l, &c);
	cr_assert_eq(usage_used(l, "a", "h100"), 4,
		     "a device plugin's 2 and the claim's 2 are 4 GPUs");
	/* A name that only contains it is another claim. */
	p.named_claims = "\x1fmine2\x1fxmine\x1f";
	usage_observe(l, &p);
	cr_assert_eq(usage_used(l, "a", "h100"), 2);
	usage_free(l);
}

Test(ledger_ride, a_claim_rides_only_in_its_pods_namespace_and_flavor)
{
	struct usage_store *l = ledger();
	struct usage_item p = pod("p", 2);
	struct usage_item other_ns = claim("c1", "c1", "p", 2, 10);
	struct usage_item other_flavor = claim("c2", "c2", "q", 2, 10);
	struct usage_item q = pod("q", 2);

	other_ns.namespace = "a2";
	other_flavor.flavor = "l4";
	usage_observe(l, &p);
	usage_observe(l, &other_ns);
	cr_assert_eq(usage_used(l, "a", "h100"), 4);
	usage_observe(l, &q);
	usage_observe(l, &other_flavor);
	cr_assert_eq(usage_used(l, "a", "h100"), 6);
	cr_assert_eq(usage_used(l, "a", "l4"), 2);
	usage_free(l);
}

Test(ledger_ride, a_job_is_no_pod_to_ride_on)
{
	struct usage_store *l = ledger();
	struct usage_item job = job_of_two("j");
	struct usage_item c = claim("c", "c", "j", 2, 10);
	struct usage_item p = pod("p", 2);

	usage_observe(l, &job);
	usage_observe(l, &c);
	cr_assert_eq(usage_used(l, "a", "h100"), 6, "the claim names a Job's uid");
	/* A pod whose Job is a claim's uid rides on nothing either. */
	p.owner_job_uid = "c";
	usage_observe(l, &p);
	cr_assert_eq(usage_used(l, "a", "h100"), 8);
	usage_free(l);
}

Test(ledger_ride, a_pod_riding_on_its_job_still_covers_its_claim)
{
	struct usage_store *l = ledger();
	struct usage_item job = job_of_two("j");
	struct usage_item p = pod("p", 2), c = claim("c", "c", "p", 2, 10);

	p.owner_job_uid = "j";
	usage_observe(l, &job);
	usage_observe(l, &p);
	usage_observe(l, &c);
	cr_assert_eq(usage_used(l, "a", "h100"), 4, "the gang holds the pod and its claim");
	usage_free(l);
}

/* /validate of the scheduler's claim for pod pod_uid. */
static struct quota_result decide_claim(struct usage_store *l, const char *uid,
					const char *pod_uid, int64_t units)
{
	struct workload wl = {.kind = WL_CLAIM, .op = WL_CREATE, .namespace = "a",
			      .name = "", .uid = uid, .request_uid = uid,
			      .owner_pod = "p", .owner_pod_uid = pod_uid};
	struct quota_claim c = {
		.needed = true, .tenant = policy_tenant_find(P, "a"),
		.flavor = policy_flavor_find(P, "h100"), .units = units,
		.per_pod = (unsigned)units, .pods = 1, .owner_pod_uid = pod_uid,
	};
	struct quota_result q;

	usage_decide(l, P, &wl, &c, true, false, &q);
	return q;
}

Test(ledger_ride, the_schedulers_claim_is_admitted_on_its_pods_units)
{
	struct usage_store *l = ledger();
	struct usage_item p = pod("p", 8), full = pod("x", 2);
	struct quota_result q;

	usage_observe(l, &p);
	usage_observe(l, &full);
	cr_assert_eq(usage_used(l, "a", "h100"), 10, "the tenant is at its quota");
	q = decide_claim(l, "c", "p", 8);
	cr_assert_eq(q.position, QUOTA_COVERED, "its pod holds its 8");
	cr_assert_str_eq(q.holder, "p");
	cr_assert_eq(usage_used(l, "a", "h100"), 10);
	/* A second one for the same pod is no longer the pod's. */
	q = decide_claim(l, "c2", "p", 8);
	cr_assert_eq(q.position, QUOTA_OVER);
	cr_assert_eq(q.requested, 8);
	/* One beyond the pod's units asks the excess. */
	usage_forget(l, "c");
	usage_forget(l, "x");
	q = decide_claim(l, "c3", "p", 10);
	cr_assert_eq(q.position, QUOTA_NOMINAL);
	cr_assert_eq(q.requested, 2);
	cr_assert_eq(usage_used(l, "a", "h100"), 10);
	/* Without its pod in the ledger, a claim asks for all of it. */
	q = decide_claim(l, "c4", "nobody", 1);
	cr_assert_eq(q.position, QUOTA_OVER);
	cr_assert_eq(q.requested, 1);
	usage_free(l);
}
