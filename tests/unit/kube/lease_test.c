/*
 * Leader election (kube/lease.c) against tests/integration/fakekube.py over
 * TLS, started for each test (fakekube_proc.c).  Short terms: duration
 * 600 ms (written as leaseDurationSeconds 1, so others wait 1 s), renew
 * deadline 400 ms, retry 100 ms.  Where expiry is the point, the replica
 * runs on a fake monotonic clock the test moves.
 */
#include "base/diag.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/lease.h"
#include "tests/unit/kube/fakekube_proc.h"
#include "tests/unit/kube/log_capture.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LEASES "/apis/coordination.k8s.io/v1/namespaces/gpugate/leases"
#define LEASE LEASES "/gpugate-leader"
#define SHORT_MS 5000
#define DURATION_MS 600
#define DEADLINE_MS 400
#define RETRY_MS 100

static struct fakekube F;
static struct kube *K;
static unsigned retry_ms = RETRY_MS; /* of the next run() */
static unsigned duration_ms = DURATION_MS, deadline_ms = DEADLINE_MS; /* ditto */
static const char *run_address;      /* of the next run(); NULL: none */

static void start(void)
{
	struct diag d;

	diag_init(&d);
	cr_assert_eq(fakekube_start(&F, &d), 0, "the fake API did not start: %s",
		     diag_text(&d));
	K = kube_new(&F.cfg, &d);
	cr_assert_not_null(K, "%s", diag_text(&d));
	log_capture_start();
}

static void stop(void)
{
	log_capture_stop();
	kube_free(K);
	K = NULL;
	fakekube_stop(&F);
}

TestSuite(lease, .init = start, .fini = stop, .timeout = 60);

static long long mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* The fake clock of the tests that move time themselves. */
static _Atomic uint64_t fake_now = 1000000;

static uint64_t fake_clock(void)
{
	return atomic_load(&fake_now);
}

struct replica {
	struct lease *l;
	char id[16];
	atomic_int elected, lost; /* on_change(true), on_change(false) */
	atomic_bool wrong_order;  /* not true, false, true, ... */
};

static void on_change(void *ctx, bool leading)
{
	struct replica *r = ctx;
	int e = atomic_load(&r->elected), l = atomic_load(&r->lost);

	if (leading ? e != l : e != l + 1)
		atomic_store(&r->wrong_order, true);
	atomic_fetch_add(leading ? &r->elected : &r->lost, 1);
}

static void run(struct replica *r, const char *id, uint64_t (*now)(void))
{
	struct lease_config c = {
		.kube = &F.cfg, .namespace = "gpugate", .name = "gpugate-leader",
		.identity = id, .duration_ms = duration_ms,
		.renew_deadline_ms = deadline_ms, .retry_ms = retry_ms,
		.on_change = on_change, .ctx = r, .now_ms = now,
		.address = run_address,
	};
	struct diag d;

	snprintf(r->id, sizeof(r->id), "%s", id);
	atomic_init(&r->elected, 0);
	atomic_init(&r->lost, 0);
	atomic_init(&r->wrong_order, false);
	diag_init(&d);
	cr_assert_eq(lease_start(&c, &r->l, &d), 0, "%s", diag_text(&d));
}

static void end(struct replica *r)
{
	lease_stop(r->l);
	r->l = NULL;
	cr_assert_not(atomic_load(&r->wrong_order), "%s: callbacks out of order", r->id);
}

/*
 * Samples lease_leading() of the n replicas every 2 ms until who leads
 * (an index; -1: nobody) or timeout_ms; fails when two lead at once.
 * Returns the milliseconds it took, or -1 on the timeout.
 */
static long long until_leader(struct replica *rs, int n, int who,
			      long long timeout_ms)
{
	long long t0 = mono_ms(), now;

	do {
		int leaders = 0, leader = -1;

		for (int i = 0; i < n; i++)
			if (rs[i].l && lease_leading(rs[i].l)) {
				leaders++;
				leader = i;
			}
		cr_assert_leq(leaders, 1, "%d replicas lead at once", leaders);
		now = mono_ms();
		if (leader == who || (who == -2 && leader >= 0))
			return now - t0;
		sleep_ms(2);
	} while (now - t0 < timeout_ms);
	return -1;
}
#define ANYONE (-2)

/* Until l sees holder want (NULL: nobody) or timeout_ms pass: an observer
 * follows on its own polling, which a loaded machine delays. */
static bool until_holder(struct lease *l, const char *want, long long timeout_ms)
{
	long long t0 = mono_ms();
	char who[64];

	do {
		bool held = lease_holder(l, who, sizeof(who));

		if (want ? held && strcmp(who, want) == 0 : !held)
			return true;
		sleep_ms(5);
	} while (mono_ms() - t0 < timeout_ms);
	return false;
}

/* The callback runs on the lease thread just after lease_leading() turns:
 * waits up to timeout_ms for the count to reach want, returns it. */
static int until_count(atomic_int *count, int want, long long timeout_ms)
{
	long long t0 = mono_ms();

	while (atomic_load(count) != want && mono_ms() - t0 < timeout_ms)
		sleep_ms(2);
	return atomic_load(count);
}

static json_t *get_lease(void)
{
	json_t *obj = NULL;
	struct diag d;

	diag_init(&d);
	cr_assert_eq(kube_get_json(K, LEASE, SHORT_MS, &obj, &d), 0, "%s",
		     diag_text(&d));
	return obj;
}

static const char *spec_str(const json_t *lease, const char *key)
{
	const char *s = json_string_value(json_object_get(json_object_get(lease, "spec"), key));

	return s ? s : "(none)";
}

static long long spec_int(const json_t *lease, const char *key)
{
	return json_integer_value(json_object_get(json_object_get(lease, "spec"), key));
}

/* "2006-01-02T15:04:05.000000Z" */
static bool is_micro_time(const char *s)
{
	static const char shape[] = "dddd-dd-ddTdd:dd:dd.ddddddZ";

	if (strlen(s) != sizeof(shape) - 1)
		return false;
	for (size_t i = 0; shape[i]; i++)
		if (shape[i] == 'd' ? !(s[i] >= '0' && s[i] <= '9') : s[i] != shape[i])
			return false;
	return true;
}

/* Makes the Lease as pod-dead held it (leaseDurationSeconds 1, 4
 * transitions); the times in it are far in the future: they say nothing. */
static void create_dead_lease(void)
{
	json_t *lease = json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:i, s:s, s:s, s:i}}",
				  "apiVersion", "coordination.k8s.io/v1", "kind", "Lease",
				  "metadata", "name", "gpugate-leader",
				  "spec", "holderIdentity", "pod-dead",
				  "leaseDurationSeconds", 1,
				  "acquireTime", "2999-01-01T00:00:00.000000Z",
				  "renewTime", "2999-01-01T00:00:00.000000Z",
				  "leaseTransitions", 4);
	struct diag d;

	diag_init(&d);
	cr_assert_eq(kube_create(K, LEASES, lease, SHORT_MS, NULL, &d), 0, "%s",
		     diag_text(&d));
	json_decref(lease);
}

/* Writes the Lease as a holder would (test's own client, at the version
 * read): holder, renewTime and transitions. */
static void write_lease(const char *holder, const char *renew, long long transitions)
{
	json_t *obj = get_lease(), *spec = json_object_get(obj, "spec");
	struct diag d;

	json_object_set_new(spec, "holderIdentity", json_string(holder));
	json_object_set_new(spec, "renewTime", json_string(renew));
	json_object_set_new(spec, "leaseTransitions", json_integer(transitions));
	diag_init(&d);
	cr_assert_eq(kube_replace(K, LEASE, obj, SHORT_MS, NULL, &d), 0, "%s",
		     diag_text(&d));
	json_decref(obj);
}

/* ---- configuration ------------------------------------------------------ */

Test(lease_config, refuses_what_cannot_work)
{
	struct kube_config kc = {0};
	struct lease_config c = {.kube = &kc, .namespace = "gpugate",
				 .name = "gpugate-leader", .identity = "pod-a"};
	struct lease *l = NULL;
	struct diag d;

	c.retry_ms = 10000; /* not under the default renew deadline */
	diag_init(&d);
	cr_assert_eq(lease_start(&c, &l, &d), -1);
	cr_assert_str_eq(diag_text(&d), "lease gpugate/gpugate-leader: want retry "
					"(10000 ms) < renew deadline (10000 ms) < "
					"duration (15000 ms)\n");
	c.retry_ms = 0;
	c.identity = "pod a";
	diag_init(&d);
	cr_assert_eq(lease_start(&c, &l, &d), -1);
	cr_assert_str_eq(diag_text(&d), "lease gpugate/gpugate-leader: the identity "
					"must be 1 to 253 letters, digits, '-', '.', "
					"'_' or ':'\n");
	c.identity = "pod-a";
	c.name = "Leader";
	diag_init(&d);
	cr_assert_eq(lease_start(&c, &l, &d), -1);
	cr_assert_str_eq(diag_text(&d), "lease: the namespace and the name must be "
					"1 to 253 lower case letters, digits, '-' or "
					"'.'\n");
	cr_assert_null(l);
	lease_stop(NULL);
}

/* ---- one replica -------------------------------------------------------- */

Test(lease, one_replica_makes_an_absent_lease_and_renews_it)
{
	struct replica a;
	json_t *obj;
	char first_renew[40], *log;

	/* A stop releases only a Lease renewed within the renew deadline: 4 s
	 * here, so that a loaded machine (CI runs this beside the integration
	 * tests, and under ASan) cannot starve the renewals past it and skip
	 * the release this test is about (it did with 400 ms). */
	duration_ms = 6000;
	deadline_ms = 4000;
	run(&a, "pod-a", NULL);
	cr_assert_geq(until_leader(&a, 1, 0, 3000), 0, "pod-a never led");
	cr_assert_eq(until_count(&a.elected, 1, 500), 1);
	obj = get_lease();
	cr_assert_str_eq(spec_str(obj, "holderIdentity"), "pod-a");
	cr_assert_eq(spec_int(obj, "leaseDurationSeconds"), 6);
	cr_assert_eq(spec_int(obj, "leaseTransitions"), 0);
	cr_assert(is_micro_time(spec_str(obj, "acquireTime")), "%s",
		  spec_str(obj, "acquireTime"));
	cr_assert(is_micro_time(spec_str(obj, "renewTime")), "%s",
		  spec_str(obj, "renewTime"));
	snprintf(first_renew, sizeof(first_renew), "%s", spec_str(obj, "renewTime"));
	json_decref(obj);

	sleep_ms(3 * RETRY_MS);
	obj = get_lease();
	cr_assert_str_neq(spec_str(obj, "renewTime"), first_renew, "not renewed");
	cr_assert_eq(spec_int(obj, "leaseTransitions"), 0);
	json_decref(obj);
	cr_assert(lease_leading(a.l));
	cr_assert_eq(fakekube_must_stat(&F, "POST"), 1);
	cr_assert_geq(fakekube_must_stat(&F, "PUT"), 2);
	cr_assert_eq(fakekube_must_stat(&F, "PUT 409"), 0);

	end(&a);
	cr_assert_eq(atomic_load(&a.lost), 1);
	obj = get_lease();
	cr_assert_str_eq(spec_str(obj, "holderIdentity"), "");
	json_decref(obj);
	log = log_captured();
	cr_assert_eq(log_count(log, "msg=\"leader elected\" lease=gpugate/gpugate-leader "
				    "identity=pod-a transitions=0"), 1, "%s", log);
	cr_assert_eq(log_count(log, "msg=\"leader lost\" lease=gpugate/gpugate-leader "
				    "identity=pod-a reason=\"stopped\""), 1, "%s", log);
	cr_assert_eq(log_count(log, "msg=\"lease released\" lease=gpugate/gpugate-leader "
				    "identity=pod-a"), 1, "%s", log);
	free(log);
}

/* ---- several replicas ---------------------------------------------------- */

Test(lease, of_three_replicas_exactly_one_leads)
{
	struct replica rs[3];
	long long t0;
	int leader = -1, changes = 0;

	run(&rs[0], "pod-a", NULL);
	run(&rs[1], "pod-b", NULL);
	run(&rs[2], "pod-c", NULL);
	cr_assert_geq(until_leader(rs, 3, ANYONE, 3000), 0, "nobody led");
	/* 1.5 s of samples every 2 ms: one leader, always the same. */
	t0 = mono_ms();
	while (mono_ms() - t0 < 1500) {
		int now = -1, n = 0;

		for (int i = 0; i < 3; i++)
			if (lease_leading(rs[i].l)) {
				n++;
				now = i;
			}
		cr_assert_eq(n, 1, "%d replicas lead", n);
		if (now != leader)
			changes++;
		leader = now;
		sleep_ms(2);
	}
	cr_assert_eq(changes, 1, "the leader changed %d times", changes - 1);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(atomic_load(&rs[i].elected), i == leader, "%s", rs[i].id);
	for (int i = 0; i < 3; i++)
		end(&rs[i]);
}

Test(lease, a_stopped_leader_hands_over_at_once)
{
	struct replica rs[2];
	int first, second;
	long long t0, stop_ms, took;
	json_t *obj;

	run(&rs[0], "pod-a", NULL);
	run(&rs[1], "pod-b", NULL);
	cr_assert_geq(until_leader(rs, 2, ANYONE, 3000), 0, "nobody led");
	first = lease_leading(rs[0].l) ? 0 : 1;
	second = 1 - first;
	cr_assert_not(lease_leading(rs[second].l));

	t0 = mono_ms();
	end(&rs[first]);
	stop_ms = mono_ms() - t0;
	cr_assert_lt(stop_ms, 1000, "lease_stop took %lld ms", stop_ms);
	/* Released: taken at the next try (100 ms + jitter), not after the
	 * 1 s a silent holder is given. */
	took = until_leader(rs, 2, second, 3000);
	cr_assert_geq(took, 0, "%s never led", rs[second].id);
	cr_assert_lt(took + stop_ms, 600, "took over after %lld ms", took + stop_ms);
	obj = get_lease();
	cr_assert_str_eq(spec_str(obj, "holderIdentity"), rs[second].id);
	cr_assert_eq(spec_int(obj, "leaseTransitions"), 1);
	json_decref(obj);
	end(&rs[second]);
}

/*
 * The leader's renews fail (500, or no answer: its PUTs hang), the
 * others' writes do not (the fault matches the leader's identity in the
 * body): it stops leading within the renew deadline, and another takes
 * over once the record has been still for its duration.
 */
static void leader_cut_off(const char *how, const char *error)
{
	struct replica rs[2];
	char f[256], *log;
	long long t0, gone, took;

	run(&rs[0], "pod-a", NULL);
	cr_assert_geq(until_leader(rs, 1, 0, 3000), 0, "pod-a never led");
	run(&rs[1], "pod-b", NULL);
	sleep_ms(2 * RETRY_MS); /* pod-b has seen pod-a hold it */

	snprintf(f, sizeof(f),
		 "{\"method\": \"PUT\", \"path\": \"" LEASE "\", "
		 "\"body\": \"\\\"holderIdentity\\\":\\\"pod-a\\\"\", %s}", how);
	fakekube_must_fault(&F, f);
	t0 = mono_ms();
	gone = until_leader(rs, 2, -1, 3000);
	cr_assert_geq(gone, 0, "pod-a went on leading");
	cr_assert_lt(gone, DEADLINE_MS + 150, "pod-a led %lld ms on", gone);
	/* on_change(false) at the deadline, not at the next answer */
	while (atomic_load(&rs[0].lost) == 0 && mono_ms() - t0 < DEADLINE_MS + 300)
		sleep_ms(2);
	cr_assert_eq(atomic_load(&rs[0].lost), 1, "no on_change(false)");

	took = until_leader(rs, 2, 1, 3000);
	cr_assert_geq(took, 0, "pod-b never led");
	took += gone;
	/* pod-b waits 1 s from the last change it saw (at most a retry
	 * before the fault), plus a try's jitter. */
	cr_assert_geq(took, 1000 - 2 * RETRY_MS, "pod-b took over after %lld ms", took);
	cr_assert_lt(took, 1000 + 5 * RETRY_MS, "pod-b took over after %lld ms", took);
	/* ... and keeps it: pod-a sees pod-b hold it. */
	cr_assert_eq(until_leader(rs, 2, 0, 500), -1, "pod-a led again");
	cr_assert(lease_leading(rs[1].l));
	cr_assert_eq(atomic_load(&rs[0].elected), 1);

	log = log_captured();
	cr_assert_eq(log_count(log, "msg=\"leader lost\" lease=gpugate/gpugate-leader "
				    "identity=pod-a reason=\"renew deadline\""),
		     1, "%s", log);
	cr_assert_geq(log_count(log, error), 1, "%s", log);
	cr_assert_eq(log_count(log, "msg=\"leader elected\" lease=gpugate/gpugate-leader "
				    "identity=pod-b transitions=1"), 1, "%s", log);
	free(log);
	end(&rs[1]);
	end(&rs[0]);
}

Test(lease, a_leader_whose_renews_fail_steps_down_within_the_deadline)
{
	leader_cut_off("\"status\": 500", "500 InternalError: scripted failure");
}

Test(lease, a_leader_whose_renews_hang_steps_down_within_the_deadline)
{
	leader_cut_off("\"delay\": 3", "no answer within");
}

/*
 * lease_leading() reads the clock, not the thread: with the leader's renew
 * hanging, it turns false the moment renew_deadline has passed since the
 * last renew (the fake clock moved), while the thread still waits for
 * the answer; on_change(false) follows when the request times out.
 */
Test(lease, leading_ends_at_the_deadline_while_a_renew_hangs)
{
	struct replica a;
	long long t0;

	run(&a, "pod-a", fake_clock);
	cr_assert_geq(until_leader(&a, 1, 0, 3000), 0, "pod-a never led");
	fakekube_must_fault(&F, "{\"method\": \"PUT\", \"path\": \"" LEASE "\", \"delay\": 3}");
	sleep_ms(RETRY_MS + 50); /* a renew hangs */
	atomic_fetch_add(&fake_now, DEADLINE_MS - 1);
	cr_assert(lease_leading(a.l));
	atomic_fetch_add(&fake_now, 1);
	cr_assert_not(lease_leading(a.l));
	cr_assert_eq(atomic_load(&a.lost), 0, "the thread did not wait");
	t0 = mono_ms();
	while (atomic_load(&a.lost) == 0 && mono_ms() - t0 < 1000)
		sleep_ms(2);
	cr_assert_eq(atomic_load(&a.lost), 1, "no on_change(false)");
	fakekube_clear_faults(&F, NULL);
	end(&a);
}

Test(lease, a_leader_that_sees_another_holder_steps_down_at_once)
{
	struct replica a;
	long long gone;
	char *log;

	run(&a, "pod-a", NULL);
	cr_assert_geq(until_leader(&a, 1, 0, 3000), 0, "pod-a never led");
	write_lease("pod-x", "2026-01-01T00:00:00.000000Z", 1);
	gone = until_leader(&a, 1, -1, 1000);
	cr_assert_geq(gone, 0, "pod-a went on leading");
	cr_assert_lt(gone, 2 * RETRY_MS + 50, "pod-a led %lld ms on", gone);
	cr_assert_eq(until_count(&a.lost, 1, 500), 1);
	end(&a);
	/* It did not lead when stopped: the Lease stays pod-x's. */
	json_t *obj = get_lease();
	cr_assert_str_eq(spec_str(obj, "holderIdentity"), "pod-x");
	json_decref(obj);
	log = log_captured();
	cr_assert_eq(log_count(log, "msg=\"leader lost\" lease=gpugate/gpugate-leader "
				    "identity=pod-a reason=\"taken\" holder=\"pod-x\""),
		     1, "%s", log);
	cr_assert_eq(log_count(log, "msg=\"lease released\""), 0, "%s", log);
	free(log);
}

/*
 * A Lease whose record changes is never taken, however long the fake
 * clock runs; one whose record stops changing is taken exactly its
 * leaseDurationSeconds after the replica saw the last change.  The times
 * in the record say nothing (here: far in the future).
 */
Test(lease, a_dead_holders_lease_is_taken_after_its_duration)
{
	struct replica a;
	char renew[40];
	json_t *obj;

	create_dead_lease();
	run(&a, "pod-a", fake_clock);

	/* Alive: it renews while the clock runs 700 ms a step. */
	for (int i = 0; i < 3; i++) {
		sleep_ms(3 * RETRY_MS);
		cr_assert_not(lease_leading(a.l));
		snprintf(renew, sizeof(renew), "2999-01-01T00:00:0%d.000000Z", i + 1);
		write_lease("pod-dead", renew, 4);
		sleep_ms(3 * RETRY_MS); /* seen */
		atomic_fetch_add(&fake_now, 700);
	}
	/* Dead: nothing changes any more.  999 ms after the last change it
	 * saw, it still waits; at 1000 it takes it. */
	atomic_fetch_add(&fake_now, 299);
	sleep_ms(3 * RETRY_MS);
	cr_assert_not(lease_leading(a.l));
	cr_assert_eq(atomic_load(&a.elected), 0);
	atomic_fetch_add(&fake_now, 1);
	cr_assert_geq(until_leader(&a, 1, 0, 1000), 0, "pod-a never took it");
	obj = get_lease();
	cr_assert_str_eq(spec_str(obj, "holderIdentity"), "pod-a");
	cr_assert_eq(spec_int(obj, "leaseTransitions"), 5);
	cr_assert_str_neq(spec_str(obj, "acquireTime"), "2999-01-01T00:00:00.000000Z");
	json_decref(obj);
	end(&a);
}

/* A write refused as stale is followed by a read at once, not by a
 * step down or a wait of a period (300 ms here). */
Test(lease, a_conflict_reads_again_at_once)
{
	struct replica a;
	long long t0 = mono_ms(), took;

	retry_ms = 300;
	fakekube_must_fault(&F, "{\"method\": \"POST\", \"path\": \"" LEASES "\", \"status\": 409, "
	      "\"reason\": \"AlreadyExists\", \"times\": 1}");
	run(&a, "pod-a", NULL);
	took = until_leader(&a, 1, 0, 3000);
	cr_assert_geq(took, 0, "pod-a never led");
	cr_assert_lt(mono_ms() - t0, 300, "led after %lld ms", mono_ms() - t0);
	cr_assert_eq(fakekube_must_stat(&F, "POST 409"), 1);
	cr_assert_eq(fakekube_must_stat(&F, "POST 201"), 1);
	cr_assert_eq(fakekube_must_stat(&F, "GET 404"), 2);

	/* Two renews in a row refused: the third round of the same try
	 * renews, well within the 400 ms deadline. */
	fakekube_must_fault(&F, "{\"method\": \"PUT\", \"path\": \"" LEASE "\", \"status\": 409, "
	      "\"times\": 2}");
	t0 = mono_ms();
	while (mono_ms() - t0 < 700) {
		cr_assert(lease_leading(a.l), "stepped down after %lld ms",
			  mono_ms() - t0);
		sleep_ms(2);
	}
	cr_assert_eq(fakekube_must_stat(&F, "PUT 409"), 2);
	cr_assert_geq(fakekube_must_stat(&F, "PUT 200"), 1);
	cr_assert_eq(atomic_load(&a.lost), 0, "a conflict made it step down");
	end(&a);
}

/* ---- who holds it (lease_holder, observe_only) ---------------------------- */

/* #26: a replica that keeps usage in memory must know when another replica
 * holds its Lease, or when replicas of the shared store hold theirs. */
Test(lease, a_contender_and_an_observer_know_who_holds_the_lease)
{
	struct replica a, b;
	struct lease_config oc = {
		.kube = &F.cfg, .namespace = "gpugate", .name = "gpugate-leader",
		.identity = "pod-watch", .duration_ms = DURATION_MS,
		.renew_deadline_ms = DEADLINE_MS, .retry_ms = RETRY_MS,
		.observe_only = true,
	};
	struct lease *watch;
	struct diag d;
	char who[64];
	json_t *obj;

	/* An absent Lease: the observer sees nobody and makes none. */
	diag_init(&d);
	cr_assert_eq(lease_start(&oc, &watch, &d), 0, "%s", diag_text(&d));
	sleep_ms(3 * RETRY_MS);
	cr_assert_not(lease_holder(watch, who, sizeof(who)));
	cr_assert_str_eq(who, "");
	cr_assert_not(lease_leading(watch));
	{
		json_t *none = NULL;

		diag_init(&d);
		cr_assert_eq(kube_get_json(K, LEASE, SHORT_MS, &none, &d), 404,
			     "an observer never writes: %s", diag_text(&d));
		json_decref(none);
	}

	run(&a, "pod-a", NULL);
	cr_assert_geq(until_leader(&a, 1, 0, SHORT_MS), 0);
	run(&b, "pod-b", NULL);
	sleep_ms(3 * RETRY_MS);
	/* The holder sees no other; the other contender and the observer
	 * see pod-a. */
	cr_assert_not(lease_holder(a.l, who, sizeof(who)));
	cr_assert(lease_holder(b.l, who, sizeof(who)));
	cr_assert_str_eq(who, "pod-a");
	cr_assert(until_holder(watch, "pod-a", SHORT_MS));

	/* Released: pod-b takes it, and the observer follows. */
	end(&a);
	cr_assert_geq(until_leader(&b, 1, 0, SHORT_MS), 0);
	sleep_ms(3 * RETRY_MS);
	cr_assert_not(lease_holder(b.l, who, sizeof(who)));
	cr_assert(until_holder(watch, "pod-b", SHORT_MS));
	obj = get_lease();
	cr_assert_str_eq(spec_str(obj, "holderIdentity"), "pod-b");
	json_decref(obj);

	/* Stopped: released, nobody holds it. */
	end(&b);
	cr_assert(until_holder(watch, NULL, SHORT_MS));
	lease_stop(watch);
}

/* A holder that stops renewing is nobody's after its term, as the
 * observer sees it on its own clock. */
Test(lease, an_observer_lets_a_silent_holder_go_after_its_term)
{
	struct lease_config oc = {
		.kube = &F.cfg, .namespace = "gpugate", .name = "gpugate-leader",
		.identity = "pod-watch", .duration_ms = DURATION_MS,
		.renew_deadline_ms = DEADLINE_MS, .retry_ms = RETRY_MS,
		.observe_only = true, .now_ms = fake_clock,
	};
	struct lease *watch;
	struct diag d;
	char who[64];

	create_dead_lease();
	diag_init(&d);
	cr_assert_eq(lease_start(&oc, &watch, &d), 0, "%s", diag_text(&d));
	sleep_ms(3 * RETRY_MS);
	cr_assert(lease_holder(watch, who, sizeof(who)));
	cr_assert_str_eq(who, "pod-dead");
	atomic_fetch_add(&fake_now, 999);
	cr_assert(lease_holder(watch, who, sizeof(who)));
	atomic_fetch_add(&fake_now, 1);
	cr_assert_not(lease_holder(watch, who, sizeof(who)));
	sleep_ms(3 * RETRY_MS);
	cr_assert_not(lease_holder(watch, who, sizeof(who)), "silent: still nobody's");
	{
		json_t *obj = get_lease();

		cr_assert_str_eq(spec_str(obj, "holderIdentity"), "pod-dead");
		json_decref(obj);
	}
	lease_stop(watch);
}

/* Issue #32: the holder publishes where it is reached, and only the
 * holder's address is believed (a holder that publishes none leaves the
 * last one's annotation behind: it must not be taken for its). */
Test(lease, the_holders_address_is_published_and_only_the_holders)
{
	struct replica a, b;
	char who[64], addr[64];
	json_t *obj, *ann;

	run_address = "10.0.0.5:8443";
	run(&a, "pod-a", NULL);
	run_address = NULL;
	cr_assert_geq(until_leader(&a, 1, 0, SHORT_MS), 0);
	run(&b, "pod-b", NULL);
	sleep_ms(3 * RETRY_MS);
	cr_assert(lease_holder_address(b.l, who, sizeof(who), addr, sizeof(addr)));
	cr_assert_str_eq(who, "pod-a");
	cr_assert_str_eq(addr, "10.0.0.5:8443");
	/* The holder itself has no other holder. */
	cr_assert_not(lease_holder_address(a.l, who, sizeof(who), addr, sizeof(addr)));
	cr_assert_str_eq(addr, "");
	obj = get_lease();
	ann = json_object_get(json_object_get(obj, "metadata"), "annotations");
	cr_assert_str_eq(json_string_value(json_object_get(ann, LEASE_ADDRESS_ANNOTATION)),
			 "10.0.0.5:8443");
	cr_assert_str_eq(json_string_value(json_object_get(ann, LEASE_IDENTITY_ANNOTATION)),
			 "pod-a");
	json_decref(obj);

	/* pod-b, which publishes nothing, takes it: pod-a sees pod-b and no
	 * address, and the annotations are gone. */
	end(&a);
	cr_assert_geq(until_leader(&b, 1, 0, SHORT_MS), 0);
	run(&a, "pod-a", NULL);
	sleep_ms(3 * RETRY_MS);
	cr_assert(lease_holder_address(a.l, who, sizeof(who), addr, sizeof(addr)));
	cr_assert_str_eq(who, "pod-b");
	cr_assert_str_eq(addr, "");
	obj = get_lease();
	ann = json_object_get(json_object_get(obj, "metadata"), "annotations");
	cr_assert_null(json_object_get(ann, LEASE_ADDRESS_ANNOTATION));
	json_decref(obj);
	end(&b);
	end(&a);
}
