/*
 * The leader backend (usage/leader-backend.c): who decides a reserving
 * claim (this replica, the leader by a forward, nobody), the fence under
 * the ledger's lock, and that everything else is the ledger's.
 */
#include "policy/decide.h"
#include "policy/policy.h"
#include "policy/quota.h"
#include "usage/leader-backend.h"
#include "usage/usage.h"
#include "tests/unit/test_policy.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static const char policy_yaml[] =
	"version: 1\n"
	"flavors:\n"
	"  - {name: h100, resource: nvidia.com/gpu, sharing: exclusive, gpusPerNode: 8}\n"
	"classes:\n"
	"  - {name: one, flavor: h100, gpus: 1, maxGpus: 8}\n"
	"tenants:\n"
	"  - name: a\n"
	"    namespaces: [a]\n"
	"    quota: [{flavor: h100, nominal: 8}]\n";

static struct policy *P;

/* What role() answers: a script of answers, the last one repeated. */
struct script {
	enum usage_role roles[4];
	size_t n, at;
	const char *who;
	unsigned asked;
	/* forward() */
	unsigned forwarded;
	int forward_rc;
	enum quota_position forward_pos;
	char last_who[64];
	bool last_force;
};

static struct script S;

static enum usage_role role(void *ctx, char *who, size_t size)
{
	struct script *s = ctx;
	enum usage_role r = s->roles[s->at < s->n ? s->at : s->n - 1];

	s->at++;
	s->asked++;
	snprintf(who, size, "%s", s->who ? s->who : "");
	return r;
}

static int forward(void *ctx, const char *who, const struct policy *p,
		   const struct workload *wl, const struct quota_claim *c, bool force,
		   struct quota_result *out, char *why, size_t size)
{
	struct script *s = ctx;

	(void)p;
	(void)wl;
	s->forwarded++;
	snprintf(s->last_who, sizeof(s->last_who), "%s", who);
	s->last_force = force;
	if (s->forward_rc < 0) {
		snprintf(why, size, "connection refused");
		return -1;
	}
	memset(out, 0, sizeof(*out));
	out->position = s->forward_pos;
	out->requested = c->units;
	return 0;
}

static struct usage_store *new_store(void)
{
	struct usage_leader_config cfg = {
		.memory = {.reservation_ttl_ms = 60000},
		.role = role, .forward = forward, .ctx = &S,
	};
	struct usage_store *u = usage_leader_new(&cfg);

	cr_assert_not_null(u);
	return u;
}

static void setup(void)
{
	P = test_policy(policy_yaml);
	memset(&S, 0, sizeof(S));
	S.roles[0] = USAGE_ROLE_LEAD;
	S.n = 1;
}

static void teardown(void)
{
	policy_free(P);
}

TestSuite(leader_backend, .init = setup, .fini = teardown);

struct req {
	struct workload wl;
	struct quota_claim claim;
};

static void make_req(struct req *r, const char *uid, int64_t units)
{
	memset(r, 0, sizeof(*r));
	r->wl.kind = WL_POD;
	r->wl.op = WL_CREATE;
	r->wl.namespace = "a";
	r->wl.name = uid;
	r->wl.uid = uid;
	r->wl.request_uid = "r";
	r->claim.needed = true;
	r->claim.tenant = policy_tenant_for_namespace(P, "a");
	r->claim.flavor = policy_flavor_find(P, "h100");
	r->claim.units = units;
	r->claim.per_pod = (unsigned)units;
	r->claim.pods = 1;
}

static enum quota_position ask(struct usage_store *u, const char *uid,
				  int64_t units, bool reserve, struct quota_result *out)
{
	struct req r;

	make_req(&r, uid, units);
	usage_decide(u, P, &r.wl, &r.claim, reserve, false, out);
	return out->position;
}

Test(leader_backend, the_leader_decides_on_its_ledger_and_never_over_admits)
{
	struct usage_store *u = new_store();
	struct quota_result out;

	cr_assert_str_eq(usage_backend_name(u), "leader");
	cr_assert_eq(ask(u, "p1", 6, true, &out), QUOTA_NOMINAL);
	cr_assert_eq(usage_used(u, "a", "h100"), 6);
	cr_assert_eq(ask(u, "p2", 4, true, &out), QUOTA_OVER);
	cr_assert_eq(ask(u, "p3", 2, true, &out), QUOTA_NOMINAL);
	cr_assert_eq(usage_used(u, "a", "h100"), 8);
	cr_assert_eq(S.forwarded, 0);
	usage_free(u);
}

Test(leader_backend, a_follower_forwards_reserving_claims_and_peeks_on_its_own)
{
	struct usage_store *u = new_store();
	struct quota_result out;

	S.roles[0] = USAGE_ROLE_FOLLOW;
	S.who = "10.0.0.5:8443";
	S.forward_pos = QUOTA_BORROWED;
	cr_assert_eq(ask(u, "p1", 6, true, &out), QUOTA_BORROWED);
	cr_assert_eq(S.forwarded, 1);
	cr_assert_str_eq(S.last_who, "10.0.0.5:8443");
	cr_assert_eq(out.requested, 6);
	/* The follower holds nothing itself: the leader does. */
	cr_assert_eq(usage_used(u, "a", "h100"), 0);
	/* A peek is answered from its own ledger, no forward. */
	cr_assert_eq(ask(u, "p2", 8, false, &out), QUOTA_NOMINAL);
	cr_assert_eq(S.forwarded, 1);
	usage_free(u);
}

Test(leader_backend, a_forward_that_fails_is_unavailable_and_says_to_whom)
{
	struct usage_store *u = new_store();
	struct quota_result out;

	S.roles[0] = USAGE_ROLE_FOLLOW;
	S.who = "10.0.0.5:8443";
	S.forward_rc = -1;
	cr_assert_eq(ask(u, "p1", 1, true, &out), QUOTA_UNAVAILABLE);
	cr_assert(strstr(out.reason, "10.0.0.5:8443") != NULL, "%s", out.reason);
	cr_assert(strstr(out.reason, "connection refused") != NULL, "%s", out.reason);
	usage_free(u);
}

Test(leader_backend, nobody_leading_is_unavailable_with_the_reason)
{
	struct usage_store *u = new_store();
	struct quota_result out;

	S.roles[0] = USAGE_ROLE_NONE;
	S.who = "a new leader waits 5 s before deciding";
	cr_assert_eq(ask(u, "p1", 1, true, &out), QUOTA_UNAVAILABLE);
	cr_assert_str_eq(out.reason, "a new leader waits 5 s before deciding");
	cr_assert_eq(usage_used(u, "a", "h100"), 0);
	cr_assert_eq(S.forwarded, 0);
	/* Peeks go on. */
	cr_assert_eq(ask(u, "p1", 1, false, &out), QUOTA_NOMINAL);
	usage_free(u);
}

Test(leader_backend, a_leader_that_lost_the_lease_before_the_lock_decides_nothing)
{
	struct usage_store *u = new_store();
	struct quota_result out;

	/* LEAD when asked before the lock, FOLLOW when the fence asks under
	 * it: the decision is refused, nothing is held, nothing forwarded. */
	S.roles[0] = USAGE_ROLE_LEAD;
	S.roles[1] = USAGE_ROLE_FOLLOW;
	S.n = 2;
	S.who = "10.0.0.6:8443";
	cr_assert_eq(ask(u, "p1", 1, true, &out), QUOTA_UNAVAILABLE);
	cr_assert(strstr(out.reason, "does not lead") != NULL, "%s", out.reason);
	cr_assert_eq(S.asked, 2);
	cr_assert_eq(S.forwarded, 0);
	cr_assert_eq(usage_used(u, "a", "h100"), 0);
	cr_assert_eq(usage_entries(u), 0);
	usage_free(u);
}

Test(leader_backend, the_leaders_side_of_a_forward_is_fenced_and_never_forwards)
{
	struct usage_store *u = new_store();
	struct quota_result out;
	struct req r;

	make_req(&r, "p1", 8);
	usage_leader_reserve(u, P, &r.wl, &r.claim, false, &out);
	cr_assert_eq(out.position, QUOTA_NOMINAL);
	cr_assert_eq(usage_used(u, "a", "h100"), 8);
	/* Leadership moved: a forward that arrives late is refused, not sent
	 * on (no loop between two replicas that each think the other leads). */
	S.roles[0] = USAGE_ROLE_FOLLOW;
	S.who = "10.0.0.7:8443";
	make_req(&r, "p2", 1);
	usage_leader_reserve(u, P, &r.wl, &r.claim, false, &out);
	cr_assert_eq(out.position, QUOTA_UNAVAILABLE);
	cr_assert_eq(S.forwarded, 0);
	cr_assert_eq(usage_used(u, "a", "h100"), 8);
	usage_free(u);
}

Test(leader_backend, the_leaders_side_refuses_a_store_of_another_backend)
{
	struct usage_store *u = usage_memory_new(NULL);
	struct quota_result out;
	struct req r;

	make_req(&r, "p1", 1);
	usage_leader_reserve(u, P, &r.wl, &r.claim, false, &out);
	cr_assert_eq(out.position, QUOTA_UNAVAILABLE);
	cr_assert_eq(usage_used(u, "a", "h100"), 0);
	usage_free(u);
}

Test(leader_backend, what_the_watch_shows_goes_to_the_ledger_on_every_replica)
{
	struct usage_store *u = new_store();
	struct usage_item it = {.uid = "u1", .kind = USAGE_PODS, .namespace = "a",
				.name = "w", .tenant = "a", .flavor = "h100",
				.per_pod = 3, .slots = 1, .units = 3, .active = true};
	struct quota_result out;

	S.roles[0] = USAGE_ROLE_FOLLOW;
	S.who = "x:1";
	usage_observe(u, &it);
	cr_assert_eq(usage_used(u, "a", "h100"), 3);
	cr_assert_eq(usage_entries(u), 1);
	/* The follower's peek counts it. */
	cr_assert_eq(ask(u, "p9", 6, false, &out), QUOTA_OVER);
	usage_forget(u, "u1");
	cr_assert_eq(usage_used(u, "a", "h100"), 0);
	usage_free(u);
}

Test(leader_backend, a_config_without_role_or_forward_is_refused)
{
	struct usage_leader_config cfg = {.role = role};

	cr_assert_null(usage_leader_new(&cfg));
	cfg = (struct usage_leader_config){.forward = forward};
	cr_assert_null(usage_leader_new(&cfg));
	cr_assert_null(usage_leader_new(NULL));
}

Test(leader_backend, a_leader_that_lost_the_lease_while_deciding_does_not_admit)
{
	struct usage_store *u = new_store();
	struct quota_result out;

	/* LEAD before the lock and under it, FOLLOW once decided (a pause in
	 * the decision past the renew deadline): denied, the units stay
	 * counted here until they expire, never given twice. */
	S.roles[0] = USAGE_ROLE_LEAD;
	S.roles[1] = USAGE_ROLE_LEAD;
	S.roles[2] = USAGE_ROLE_FOLLOW;
	S.n = 3;
	S.who = "10.0.0.6:8443";
	cr_assert_eq(ask(u, "p1", 2, true, &out), QUOTA_UNAVAILABLE);
	cr_assert(strstr(out.reason, "lost the lead while deciding") != NULL, "%s", out.reason);
	cr_assert_eq(S.asked, 3);
	cr_assert_eq(S.forwarded, 0);
	usage_free(u);
}
