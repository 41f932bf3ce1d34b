/*
 * Whether /validate holds units (decide_holds_units()) and how the pool is
 * asked about a claim (decide_pool_check(), through the decision's pool
 * source): the rules the handler calls, from plain values.
 */
#include "policy/decide.h"
#include "policy/pool.h"
#include "tests/unit/test_policy.h"

#include <criterion/criterion.h>
#include <string.h>

static const char policy_yaml[] =
	"version: 1\n"
	"flavors:\n"
	"  - {name: h100, resource: nvidia.com/gpu, sharing: exclusive,\n"
	"     nodeSelector: [\"gpu=h100\"], gpusPerNode: 8}\n"
	"classes:\n"
	"  - {name: big, flavor: h100, gpus: 8, topology: {key: clique}}\n"
	"  - {name: small, flavor: h100, gpus: 1}\n"
	"tenants:\n"
	"  - {name: research, namespaces: [research],\n"
	"     quota: [{flavor: h100, nominal: 64}]}\n";

static struct policy *P;

static void setup(void)
{
	P = test_policy(policy_yaml);
}

static void teardown(void)
{
	policy_free(P);
}

TestSuite(decide_hold, .init = setup, .fini = teardown);

/* A pool source that records what it was asked and answers verdict. */
struct canned {
	int calls;
	const struct policy_flavor *f;
	int64_t per_pod, pods;
	const char *topology_key;
	enum pool_verdict verdict;
};

static void canned_fit(void *ctx, const struct policy_flavor *f, int64_t per_pod,
		       int64_t pods, const char *topology_key, struct pool_check *out)
{
	struct canned *c = ctx;

	c->calls++;
	c->f = f;
	c->per_pod = per_pod;
	c->pods = pods;
	c->topology_key = topology_key;
	memset(out, 0, sizeof(*out));
	out->known = true;
	out->fit.verdict = c->verdict;
}

/* An allowed decision in enforce mode claiming pods x per_pod of h100. */
static struct decision claim(int64_t pods, unsigned per_pod)
{
	struct decision dec;

	memset(&dec, 0, sizeof(dec));
	dec.allowed = true;
	dec.mode = POLICY_MODE_ENFORCE;
	dec.claim = (struct quota_claim){
		.needed = true,
		.flavor = policy_flavor_find(P, "h100"),
		.per_pod = per_pod,
		.pods = pods,
		.units = pods * per_pod,
	};
	return dec;
}

Test(decide_hold, units_are_held_at_validate_only_for_what_will_be_admitted)
{
	struct workload wl = {.kind = WL_POD, .op = WL_CREATE, .namespace = "research"};
	struct decide_input in = {.policy = P, .wl = &wl, .phase = DECIDE_VALIDATE};
	struct decision dec = claim(1, 8);
	struct pool_check unknown = {.known = false};
	struct pool_check never = {.known = true, .fit = {.verdict = POOL_NEVER_FITS}};
	struct pool_check fits = {.known = true, .fit = {.verdict = POOL_FITS}};

	cr_assert(decide_holds_units(&in, &dec, &unknown, false));
	cr_assert(decide_holds_units(&in, &dec, &fits, false));
	cr_assert_not(decide_holds_units(&in, &dec, &unknown, true), "a dry run holds nothing");
	cr_assert_not(decide_holds_units(&in, &dec, &never, false),
		      "nothing is held for what the pool is about to refuse");
	dec.mode = POLICY_MODE_WARN;
	cr_assert(decide_holds_units(&in, &dec, &never, false),
		  "in warn mode the pool does not refuse: it is admitted, and held");
	dec.mode = POLICY_MODE_ENFORCE;
	dec.claim.owner_job_uid = "job-uid";
	cr_assert(decide_holds_units(&in, &dec, &never, false),
		  "a Job's pod was weighed with its Job");
	dec = claim(1, 8);
	dec.allowed = false;
	cr_assert_not(decide_holds_units(&in, &dec, &unknown, false), "denied: nothing held");
	dec = claim(1, 8);
	in.phase = DECIDE_MUTATE;
	cr_assert_not(decide_holds_units(&in, &dec, &unknown, false), "/mutate only peeks");
}

Test(decide_hold, the_pool_is_asked_through_the_pool_source_for_pods_and_jobs)
{
	struct workload wl = {.kind = WL_POD, .op = WL_CREATE, .namespace = "research"};
	struct canned c = {.verdict = POOL_NOT_NOW};
	struct decide_pool_source src = {canned_fit, &c};
	struct decide_input in = {.policy = P, .wl = &wl, .phase = DECIDE_MUTATE};
	struct decision dec = claim(1, 8);
	struct pool_check pc;

	/* No pool: nothing is asked, nothing said. */
	decide_pool_check(&in, &dec, &pc);
	cr_assert_not(pc.known);

	in.pool = &src;
	decide_pool_check(&in, &dec, &pc);
	cr_assert_eq(c.calls, 1);
	cr_assert(pc.known);
	cr_assert_eq(pc.fit.verdict, POOL_NOT_NOW);
	cr_assert_eq(c.f, dec.claim.flavor);
	cr_assert_eq(c.per_pod, 8);
	cr_assert_eq(c.pods, 1);
	cr_assert_null(c.topology_key);

	/* A Job of a class with a topology: the gang, in one domain. */
	wl.kind = WL_JOB;
	dec = claim(4, 8);
	dec.cls = policy_class_find(P, "big");
	decide_pool_check(&in, &dec, &pc);
	cr_assert_eq(c.calls, 2);
	cr_assert_eq(c.pods, 4);
	cr_assert_eq(c.topology_key, decide_pool_topology(&dec));
	cr_assert_str_eq(c.topology_key, "clique");

	/* Nothing the pool weighs: not asked. */
	wl.kind = WL_POD;
	dec = claim(1, 8);
	dec.claim.owner_job_uid = "job-uid";
	decide_pool_check(&in, &dec, &pc);
	cr_assert_not(pc.known, "a Job's pod was weighed with its Job");
	dec = claim(1, 8);
	dec.claim.needed = false;
	decide_pool_check(&in, &dec, &pc);
	cr_assert_not(pc.known, "no claim");
	wl.kind = WL_CLAIM;
	dec = claim(1, 8);
	decide_pool_check(&in, &dec, &pc);
	cr_assert_not(pc.known, "a ResourceClaim has no node yet");
	cr_assert_eq(c.calls, 2);
}
