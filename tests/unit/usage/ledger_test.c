/*
 * The memory usage backend (usage/memory-backend.c), through the seam
 * (usage/usage.h): reservations, Job gangs, release,
 * observations, relists, expiry, and concurrent creates that must never
 * over-admit.
 */
#include "base/diag.h"
#include "policy/decide.h"
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
	"    cohort: lab\n"
	"    quota: [{flavor: h100, nominal: 10, borrowingLimit: 4}]\n"
	"  - name: b\n"
	"    namespaces: [b]\n"
	"    cohort: lab\n"
	"    quota: [{flavor: h100, nominal: 6, lendingLimit: 6}]\n";

static struct policy *P;
static uint64_t fake_now;

static uint64_t now_ms(void)
{
	return fake_now;
}

static void setup(void)
{
	P = test_policy(policy_yaml);
	fake_now = 1000;
}

static void teardown(void)
{
	policy_free(P);
}

TestSuite(ledger, .init = setup, .fini = teardown);

struct req {
	struct workload wl;
	struct quota_claim claim;
};

static void make_req(struct req *r, const char *ns, const char *uid,
		     enum wl_kind kind, int64_t units, const char *owner_uid)
{
	memset(r, 0, sizeof(*r));
	r->wl.kind = kind;
	r->wl.op = WL_CREATE;
	r->wl.namespace = ns;
	r->wl.name = uid;
	r->wl.uid = uid;
	r->wl.request_uid = "r";
	r->wl.owner_job_uid = owner_uid;
	r->wl.owner_job = owner_uid ? "the-job" : NULL;
	r->claim.owner_job_uid = owner_uid;
	r->claim.needed = true;
	r->claim.tenant = policy_tenant_for_namespace(P, ns);
	r->claim.flavor = policy_flavor_find(P, "h100");
	r->claim.units = units;
	r->claim.per_pod = (unsigned)units;
	r->claim.pods = 1;
	r->claim.may_borrow = true;
}

static enum quota_position reserve(struct usage_store *l, const char *ns,
				   const char *uid, enum wl_kind kind,
				   int64_t units, const char *owner)
{
	struct quota_result out;
	struct req r;

	make_req(&r, ns, uid, kind, units, owner);
	usage_decide(l, P, &r.wl, &r.claim, true, false, &out);
	return out.position;
}

/* A Job of `pods` pods of per_pod units each. */
static enum quota_position reserve_job(struct usage_store *l, const char *ns,
				       const char *uid, int64_t pods,
				       int64_t per_pod)
{
	struct quota_result out;
	struct req r;

	make_req(&r, ns, uid, WL_JOB, pods * per_pod, NULL);
	r.claim.per_pod = (unsigned)per_pod;
	r.claim.pods = pods;
	usage_decide(l, P, &r.wl, &r.claim, true, false, &out);
	return out.position;
}

static void release(struct usage_store *l, const char *ns, const char *uid,
		    enum wl_kind kind)
{
	struct req r;

	make_req(&r, ns, uid, kind, 0, NULL);
	usage_release(l, P, &r.wl);
}

Test(ledger, reserves_until_full_then_borrows_then_refuses)
{
	struct usage_store *l = usage_memory_new(NULL);

	cr_assert_eq(reserve(l, "a", "p1", WL_POD, 8, NULL), QUOTA_NOMINAL);
	cr_assert_eq(reserve(l, "a", "p2", WL_POD, 2, NULL), QUOTA_NOMINAL);
	cr_assert_eq(usage_used(l, "a", "h100"), 10);
	cr_assert_eq(reserve(l, "a", "p3", WL_POD, 4, NULL), QUOTA_BORROWED);
	cr_assert_eq(usage_used(l, "a", "h100"), 14);
	/* borrowing limit 4 reached */
	cr_assert_eq(reserve(l, "a", "p4", WL_POD, 1, NULL), QUOTA_OVER);
	cr_assert_eq(usage_used(l, "a", "h100"), 14, "a refusal holds nothing");
	/* b lent 4 of its 6.  Its nominal stays its own, but (#26) with
	 * reclaimWithinCohort Any a lender is promised only what the
	 * reclaimer can take back, and a reservation no watch has shown is
	 * no victim (embedded mode has no reclaimer at all): not now, and
	 * nothing held. */
	cr_assert_eq(reserve(l, "b", "q1", WL_POD, 6, NULL), QUOTA_RECLAIM_SHORT);
	cr_assert_eq(usage_used(l, "b", "h100"), 0, "a refusal holds nothing");
	/* a's borrowing pod goes: b's nominal is free again. */
	release(l, "a", "p3", WL_POD);
	cr_assert_eq(reserve(l, "b", "q1", WL_POD, 6, NULL), QUOTA_NOMINAL);
	cr_assert_eq(reserve(l, "b", "q2", WL_POD, 1, NULL), QUOTA_OVER,
		     "b is in no position to borrow: a lends nothing it uses");
	usage_free(l);
}

Test(ledger, delete_releases_in_embedded_mode)
{
	struct usage_store *l = usage_memory_new(NULL);

	cr_assert_eq(reserve(l, "a", "p1", WL_POD, 8, NULL), QUOTA_NOMINAL);
	cr_assert_eq(reserve(l, "a", "p2", WL_POD, 8, NULL), QUOTA_OVER);
	release(l, "a", "p1", WL_POD);
	cr_assert_eq(usage_used(l, "a", "h100"), 0);
	cr_assert_eq(usage_entries(l), 0);
	cr_assert_eq(reserve(l, "a", "p2", WL_POD, 8, NULL), QUOTA_NOMINAL);
	usage_free(l);
}

Test(ledger, a_retried_admission_is_not_counted_twice)
{
	struct usage_store *l = usage_memory_new(NULL);

	cr_assert_eq(reserve(l, "a", "p1", WL_POD, 8, NULL), QUOTA_NOMINAL);
	cr_assert_eq(reserve(l, "a", "p1", WL_POD, 8, NULL), QUOTA_NOMINAL);
	cr_assert_eq(usage_used(l, "a", "h100"), 8);
	usage_free(l);
}

Test(ledger, job_pods_are_admitted_against_the_job)
{
	struct usage_store *l = usage_memory_new(NULL);

	cr_assert_eq(reserve_job(l, "a", "job-1", 2, 4), QUOTA_NOMINAL);
	cr_assert_eq(reserve(l, "a", "pod-1", WL_POD, 4, "job-1"), QUOTA_COVERED);
	cr_assert_eq(reserve(l, "a", "pod-2", WL_POD, 4, "job-1"), QUOTA_COVERED);
	cr_assert_eq(usage_used(l, "a", "h100"), 8, "the gang is charged once");
	/* The Job is deleted; its pods still run until they are deleted. */
	release(l, "a", "job-1", WL_JOB);
	cr_assert_eq(usage_used(l, "a", "h100"), 8);
	release(l, "a", "pod-1", WL_POD);
	release(l, "a", "pod-2", WL_POD);
	cr_assert_eq(usage_used(l, "a", "h100"), 0);
	cr_assert_eq(usage_entries(l), 0);
	usage_free(l);
}

Test(ledger, a_gang_covers_its_slots_of_its_own_size_in_its_namespace_only)
{
	struct usage_store *l = usage_memory_new(NULL);

	cr_assert_eq(reserve_job(l, "a", "job-1", 2, 1), QUOTA_NOMINAL);
	cr_assert_eq(usage_used(l, "a", "h100"), 2);
	/* Another count than the gang's: a bare pod, whoever it names. */
	cr_assert_eq(reserve(l, "a", "big", WL_POD, 8, "job-1"), QUOTA_NOMINAL);
	cr_assert_eq(usage_used(l, "a", "h100"), 10);
	cr_assert_eq(reserve(l, "a", "pod-1", WL_POD, 1, "job-1"), QUOTA_COVERED);
	cr_assert_eq(reserve(l, "a", "pod-2", WL_POD, 1, "job-1"), QUOTA_COVERED);
	cr_assert_eq(usage_used(l, "a", "h100"), 10);
	/* Beyond the gang (a replacement while pod-1 terminates): charged. */
	cr_assert_eq(reserve(l, "a", "pod-3", WL_POD, 1, "job-1"), QUOTA_BORROWED);
	cr_assert_eq(usage_used(l, "a", "h100"), 11);
	/* Another namespace naming the Job: its own tenant pays. */
	cr_assert_eq(reserve(l, "b", "theirs", WL_POD, 1, "job-1"), QUOTA_NOMINAL);
	cr_assert_eq(usage_used(l, "b", "h100"), 1);
	/* pod-1 is gone: pod-3 takes its slot. */
	release(l, "a", "pod-1", WL_POD);
	cr_assert_eq(usage_used(l, "a", "h100"), 10);
	release(l, "a", "pod-3", WL_POD);
	cr_assert_eq(usage_used(l, "a", "h100"), 10, "the gang still holds 2");
	usage_free(l);
}

Test(ledger, lowering_a_gang_frees_units_only_when_its_pods_are_gone)
{
	struct usage_store *l = usage_memory_new(NULL);
	struct usage_item j = {.uid = "j", .kind = USAGE_JOBS, .namespace = "a",
			       .name = "j", .tenant = "a", .flavor = "h100",
			       .per_pod = 2, .slots = 4, .units = 8, .active = true};
	struct usage_item pods[4];

	usage_observe(l, &j);
	for (int i = 0; i < 4; i++) {
		static const char *const uids[] = {"p0", "p1", "p2", "p3"};

		pods[i] = (struct usage_item){.uid = uids[i], .namespace = "a",
					      .name = uids[i], .tenant = "a",
					      .flavor = "h100", .per_pod = 2,
					      .slots = 1, .units = 2, .active = true,
					      .owner_job_uid = "j"};
		usage_observe(l, &pods[i]);
	}
	cr_assert_eq(usage_used(l, "a", "h100"), 8);
	j.slots = 2;
	j.units = 4;
	usage_observe(l, &j);
	cr_assert_eq(usage_used(l, "a", "h100"), 8, "four pods still run");
	usage_forget(l, "p3");
	cr_assert_eq(usage_used(l, "a", "h100"), 6);
	usage_forget(l, "p2");
	cr_assert_eq(usage_used(l, "a", "h100"), 4);
	/* Suspended: the Job holds nothing, its terminating pods do. */
	j.active = false;
	usage_observe(l, &j);
	cr_assert_eq(usage_used(l, "a", "h100"), 4);
	usage_forget(l, "p0");
	usage_forget(l, "p1");
	cr_assert_eq(usage_used(l, "a", "h100"), 0);
	cr_assert_eq(usage_entries(l), 0);
	usage_free(l);
}

Test(ledger, a_resumed_job_is_not_undone_by_an_older_suspended_observation)
{
	struct usage_memory_config cfg = {.reservation_ttl_ms = 30000, .now_ms = now_ms};
	struct usage_store *l = usage_memory_new(&cfg);
	struct usage_item old = {.uid = "job-1", .kind = USAGE_JOBS, .namespace = "a",
				 .name = "job-1", .tenant = "a", .flavor = "h100",
				 .per_pod = 4, .slots = 2, .units = 8,
				 .active = false, .generation = 1};
	struct quota_result out;
	struct req r;

	make_req(&r, "a", "job-1", WL_JOB, 8, NULL);
	r.claim.per_pod = 4;
	r.claim.pods = 2;
	r.wl.generation = 2; /* the resume */
	usage_decide(l, P, &r.wl, &r.claim, true, false, &out);
	cr_assert_eq(out.position, QUOTA_NOMINAL);
	usage_observe(l, &old);
	cr_assert_eq(usage_used(l, "a", "h100"), 8, "the resume's reservation stands");
	old.generation = 2;
	old.active = true;
	usage_observe(l, &old);
	cr_assert_eq(usage_used(l, "a", "h100"), 8);
	old.generation = 3;
	old.active = false; /* suspended again */
	usage_observe(l, &old);
	cr_assert_eq(usage_used(l, "a", "h100"), 0);
	/* Resumed again (generation 5) while the watch still shows it active
	 * (3 was never seen: say 2), then suspended (4): the resume stands. */
	old.generation = 2;
	old.active = true;
	usage_observe(l, &old);
	r.wl.generation = 5;
	usage_decide(l, P, &r.wl, &r.claim, true, false, &out);
	cr_assert_eq(out.position, QUOTA_NOMINAL);
	old.generation = 4;
	old.active = false;
	usage_observe(l, &old);
	cr_assert_eq(usage_used(l, "a", "h100"), 8, "the watch is behind the resume");
	usage_free(l);
}

Test(ledger, a_pod_whose_job_is_unknown_is_charged)
{
	struct usage_store *l = usage_memory_new(NULL);

	cr_assert_eq(reserve(l, "a", "pod-1", WL_POD, 4, "job-x"), QUOTA_NOMINAL);
	cr_assert_eq(usage_used(l, "a", "h100"), 4);
	usage_free(l);
}

static struct usage_item item(const char *uid, bool job, const char *tenant,
			       int64_t units, bool active, const char *owner)
{
	struct usage_item it = {
		.uid = uid, .kind = job ? USAGE_JOBS : USAGE_PODS, .namespace = tenant,
		.name = uid, .tenant = tenant, .flavor = "h100", .per_pod = units,
		.slots = 1, .units = units, .active = active, .owner_job_uid = owner,
	};
	return it;
}

Test(ledger, observations_track_the_cluster)
{
	struct usage_memory_config cfg = {.reservation_ttl_ms = 30000, .now_ms = now_ms};
	struct usage_store *l = usage_memory_new(&cfg);
	struct usage_item it;

	cr_assert_eq(reserve(l, "a", "p1", WL_POD, 4, NULL), QUOTA_NOMINAL);
	/* API mode: DELETE admissions do not release, the watch does. */
	release(l, "a", "p1", WL_POD);
	cr_assert_eq(usage_used(l, "a", "h100"), 4);
	it = item("p1", false, "a", 4, true, NULL);
	usage_observe(l, &it);
	fake_now += 60000;
	cr_assert_eq(usage_expire(l), 0, "observed: no expiry");
	/* The pod succeeds: it holds nothing. */
	it = item("p1", false, "a", 4, false, NULL);
	usage_observe(l, &it);
	cr_assert_eq(usage_used(l, "a", "h100"), 0);
	/* A Job observed before gpugate knew it (restart), then its pods. */
	it = item("j1", true, "a", 4, true, NULL);
	it.slots = 2;
	it.units = 8;
	usage_observe(l, &it);
	it = item("j1-a", false, "a", 4, true, "j1");
	usage_observe(l, &it);
	cr_assert_eq(usage_used(l, "a", "h100"), 8);
	usage_forget(l, "j1");
	cr_assert_eq(usage_used(l, "a", "h100"), 4, "its remaining pod now counts");
	usage_forget(l, "j1-a");
	cr_assert_eq(usage_used(l, "a", "h100"), 0);
	usage_free(l);
}

Test(ledger, reservations_expire_when_the_object_never_appears)
{
	struct usage_memory_config cfg = {.reservation_ttl_ms = 30000, .now_ms = now_ms};
	struct usage_store *l = usage_memory_new(&cfg);

	cr_assert_eq(reserve(l, "a", "p1", WL_POD, 4, NULL), QUOTA_NOMINAL);
	fake_now += 29999;
	cr_assert_eq(usage_expire(l), 0);
	fake_now += 1;
	cr_assert_eq(usage_expire(l), 1);
	cr_assert_eq(usage_used(l, "a", "h100"), 0);
	usage_free(l);
}

Test(ledger, reservations_wait_while_the_watch_is_down)
{
	struct usage_memory_config cfg = {.reservation_ttl_ms = 30000, .now_ms = now_ms};
	struct usage_store *l = usage_memory_new(&cfg);

	cr_assert_eq(reserve(l, "a", "p1", WL_POD, 4, NULL), QUOTA_NOMINAL);
	fake_now += 10000;
	usage_set_watching(l, false);
	fake_now += 600000;
	cr_assert_eq(usage_expire(l), 0, "nothing expires while the watch is down");
	cr_assert_eq(usage_used(l, "a", "h100"), 4);
	usage_set_watching(l, true);
	fake_now += 29999;
	cr_assert_eq(usage_expire(l), 0, "a whole TTL after the watch is back");
	fake_now += 1;
	cr_assert_eq(usage_expire(l), 1);
	cr_assert_eq(usage_used(l, "a", "h100"), 0);
	/* Made while the watch is up again: its own TTL counts. */
	cr_assert_eq(reserve(l, "a", "p2", WL_POD, 2, NULL), QUOTA_NOMINAL);
	fake_now += 29999;
	cr_assert_eq(usage_expire(l), 0);
	fake_now += 1;
	cr_assert_eq(usage_expire(l), 1);
	usage_free(l);
}

Test(ledger, relist_forgets_objects_deleted_while_unwatched)
{
	struct usage_memory_config cfg = {.reservation_ttl_ms = 30000, .now_ms = now_ms};
	struct usage_store *l = usage_memory_new(&cfg);
	struct usage_item a = item("p1", false, "a", 2, true, NULL);
	struct usage_item b = item("p2", false, "a", 3, true, NULL);

	usage_observe(l, &a);
	usage_observe(l, &b);
	cr_assert_eq(reserve(l, "a", "p3", WL_POD, 1, NULL), QUOTA_NOMINAL);
	usage_relist_begin(l, USAGE_PODS);
	usage_observe(l, &b);
	usage_relist_end(l, USAGE_PODS);
	cr_assert_eq(usage_used(l, "a", "h100"), 4, "p1 gone; p3 still reserved");
	usage_free(l);
}

Test(ledger, observation_with_new_units_replaces_the_old)
{
	struct usage_store *l = usage_memory_new(NULL);
	struct usage_item it = item("j", true, "a", 4, true, NULL);

	it.slots = 2;
	usage_observe(l, &it);
	cr_assert_eq(usage_used(l, "a", "h100"), 8);
	it.slots = 1; /* parallelism scaled down, no pod left */
	usage_observe(l, &it);
	cr_assert_eq(usage_used(l, "a", "h100"), 4);
	usage_free(l);
}

/* ---- concurrency -------------------------------------------------------- */

struct racer {
	struct usage_store *l;
	int id;
	int admitted;
};

static void *race(void *arg)
{
	struct racer *r = arg;

	for (int i = 0; i < 200; i++) {
		char uid[32];
		enum quota_position pos;

		snprintf(uid, sizeof(uid), "t%d-%d", r->id, i);
		pos = reserve(r->l, "a", uid, WL_POD, 1, NULL);
		if (pos == QUOTA_NOMINAL || pos == QUOTA_BORROWED)
			r->admitted++;
	}
	return NULL;
}

Test(ledger, concurrent_creates_never_over_admit)
{
	struct usage_store *l = usage_memory_new(NULL);
	struct racer r[8];
	pthread_t th[8];
	int total = 0;

	for (int i = 0; i < 8; i++) {
		r[i] = (struct racer){.l = l, .id = i};
		pthread_create(&th[i], NULL, race, &r[i]);
	}
	for (int i = 0; i < 8; i++) {
		pthread_join(th[i], NULL);
		total += r[i].admitted;
	}
	/* nominal 10 + borrowing limit 4 (b lends up to 6) */
	cr_assert_eq(total, 14);
	cr_assert_eq(usage_used(l, "a", "h100"), 14);
	cr_assert_eq(usage_entries(l), 14);
	usage_free(l);
}

/* What the reclaimer reads (usage_each_workload): observed workloads that
 * hold units, a Job's gang whole, the facts of the last observation. */
struct listed {
	struct usage_workload w[8];
	char uid[8][32];
	size_t n;
};

static void list_one(void *ctx, const struct usage_workload *w)
{
	struct listed *l = ctx;

	cr_assert_lt(l->n, 8);
	snprintf(l->uid[l->n], sizeof(l->uid[0]), "%s", w->uid);
	l->w[l->n] = *w;
	l->w[l->n].uid = l->uid[l->n];
	l->w[l->n].namespace = l->w[l->n].name = l->w[l->n].tenant = l->w[l->n].flavor =
		NULL; /* not kept past the call */
	l->n++;
}

/* The listed workload uid, or one with uid "" when it was not listed. */
static const struct usage_workload *listed_find(const struct listed *l, const char *uid)
{
	static const struct usage_workload none = {.uid = ""};

	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->uid[i], uid) == 0)
			return &l->w[i];
	return &none;
}

Test(ledger, each_workload_lists_what_holds_units_now)
{
	struct usage_memory_config cfg = {.reservation_ttl_ms = 30000, .now_ms = now_ms};
	struct usage_store *l = usage_memory_new(&cfg);
	struct usage_item it;
	struct listed got = {0};
	const struct usage_workload *w;

	/* A reservation is not listed: it has no object to write to yet. */
	cr_assert_eq(reserve(l, "a", "r1", WL_POD, 1, NULL), QUOTA_NOMINAL);
	it = item("j1", true, "a", 4, true, NULL);
	it.slots = 2;
	it.units = 8;
	it.priority = -5;
	it.created_ms = 1700000000000;
	it.preemptible = true;
	it.signalled_ms = 1700000100000;
	usage_observe(l, &it);
	it = item("j1-a", false, "a", 4, true, "j1");
	it.done_ms = 1700000200000;
	it.priority = 100; /* resolved from the template's priorityClassName */
	usage_observe(l, &it);
	it = item("j1-b", false, "a", 4, true, "j1");
	usage_observe(l, &it);
	it = item("p1", false, "b", 2, true, NULL);
	it.priority = 7;
	usage_observe(l, &it);
	it = item("gone", false, "b", 2, false, NULL);
	usage_observe(l, &it);
	usage_each_workload(l, list_one, &got);
	cr_assert_eq(got.n, 2, "the Job and the bare pod, not its riders: %zu", got.n);
	w = listed_find(&got, "j1");
	cr_assert_str_eq(w->uid, "j1");
	cr_expect_eq(w->kind, USAGE_JOBS);
	cr_expect_eq(w->units, 8);
	cr_expect_eq(w->pods, 2);
	cr_expect_eq(w->priority, 100, "its pods' priority, the highest");
	cr_expect_eq(w->created_ms, 1700000000000);
	cr_expect(w->preemptible);
	cr_expect_eq(w->signalled_ms, 1700000100000);
	cr_expect_eq(w->done_ms, 0, "one of its two pods has not reported");
	cr_expect(!w->owned);
	w = listed_find(&got, "p1");
	cr_assert_str_eq(w->uid, "p1");
	cr_expect_eq(w->priority, 7);
	cr_expect(!w->preemptible);

	/* The second pod reports: the Job has, at the later time. */
	it = item("j1-b", false, "a", 4, true, "j1");
	it.done_ms = 1700000300000;
	it.priority = 100;
	usage_observe(l, &it);
	got.n = 0;
	usage_each_workload(l, list_one, &got);
	cr_expect_eq(listed_find(&got, "j1")->done_ms, 1700000300000);

	/* Suspended: the Job holds nothing, its pods hold theirs, owned. */
	it = item("j1", true, "a", 4, false, NULL);
	usage_observe(l, &it);
	got.n = 0;
	usage_each_workload(l, list_one, &got);
	cr_expect_eq(got.n, 3);
	cr_expect_str_eq(listed_find(&got, "j1")->uid, "");
	cr_expect(listed_find(&got, "j1-a")->owned);
	cr_expect_eq(listed_find(&got, "j1-a")->units, 4);
	usage_free(l);
}

/* The one rule of a Job's gang (usage_gang_fits/usage_gang_takes), which
 * the memory and shared backends both decide by. */
Test(ledger, the_gang_rule_is_namespace_tenant_flavor_size_and_a_free_slot)
{
	const struct usage_holding job = {"ns", "a", "h100", 2};
	static const struct {
		struct usage_holding pod;
		bool fits;
	} cases[] = {
		{{"ns", "a", "h100", 2}, true},  {{"ns2", "a", "h100", 2}, false},
		{{"ns", "b", "h100", 2}, false}, {{"ns", "a", "a100", 2}, false},
		{{"ns", "a", "h100", 1}, false}, {{"ns", "a", "h100", 3}, false},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cr_expect_eq(usage_gang_fits(&job, &cases[i].pod), cases[i].fits, "%zu", i);
		cr_expect_eq(usage_gang_takes(&job, 2, 1, &cases[i].pod), cases[i].fits,
			     "%zu", i);
		cr_expect_not(usage_gang_takes(&job, 2, 2, &cases[i].pod), "%zu: full", i);
	}
}

Test(ledger, gang_reports_a_known_jobs_slots_and_riders)
{
	struct usage_store *l = usage_memory_new(NULL);
	struct usage_item job = {.uid = "j", .kind = USAGE_JOBS, .namespace = "a",
				 .name = "j", .tenant = "a", .flavor = "h100",
				 .per_pod = 2, .slots = 3, .units = 6, .active = true};
	struct usage_item pod = {.uid = "p", .kind = USAGE_PODS, .namespace = "a",
				 .name = "p", .tenant = "a", .flavor = "h100",
				 .per_pod = 2, .slots = 1, .units = 2, .active = true,
				 .owner_job_uid = "j"};
	struct usage_gang g;

	cr_assert_not(usage_gang(l, "j", &g));
	usage_observe(l, &job);
	usage_observe(l, &pod);
	cr_assert(usage_gang(l, "j", &g));
	cr_expect_str_eq(g.namespace, "a");
	cr_expect_str_eq(g.tenant, "a");
	cr_expect_str_eq(g.flavor, "h100");
	cr_expect_eq(g.per_pod, 2);
	cr_expect_eq(g.slots, 3);
	cr_expect_eq(g.riders, 1);
	pod.active = false; /* Succeeded */
	usage_observe(l, &pod);
	cr_assert(usage_gang(l, "j", &g));
	cr_expect_eq(g.riders, 0);
	usage_free(l);
}
