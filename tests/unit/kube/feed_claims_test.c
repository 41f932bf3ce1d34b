/*
 * The feed's third informer, on DRA ResourceClaims (kube/feed.c), against
 * tests/integration/fakekube.py: claims that come and go reach the store
 * as claims, and an API that does not serve resource.k8s.io/v1 (404) does
 * not hold readiness back.  Pods and Jobs against a scripted API are
 * tests/integration/test_watch.py.
 */
#include "base/diag.h"
#include "kube/config.h"
#include "kube/feed.h"
#include "tests/unit/kube/fakekube_proc.h"
#include "tests/unit/kube/log_capture.h"
#include "usage/backend.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A usage store that records what it was told, by kind. */
struct recorder {
	struct usage_store store;
	pthread_mutex_t mu;
	int begins[USAGE_KINDS], ends[USAGE_KINDS];
	int observed_claims, forgotten;
	char last_uid[64];
};

static struct recorder R;
static struct fakekube F;

static struct recorder *rec(struct usage_store *u)
{
	return (struct recorder *)u;
}

static void rec_observe(struct usage_store *u, const struct usage_item *it)
{
	pthread_mutex_lock(&rec(u)->mu);
	if (it->kind == USAGE_CLAIMS) {
		rec(u)->observed_claims++;
		snprintf(rec(u)->last_uid, sizeof(rec(u)->last_uid), "%s", it->uid);
	}
	pthread_mutex_unlock(&rec(u)->mu);
}

static void rec_forget(struct usage_store *u, const char *uid)
{
	pthread_mutex_lock(&rec(u)->mu);
	if (strcmp(uid, rec(u)->last_uid) == 0)
		rec(u)->forgotten++;
	pthread_mutex_unlock(&rec(u)->mu);
}

static void rec_begin(struct usage_store *u, enum usage_kind kind)
{
	pthread_mutex_lock(&rec(u)->mu);
	rec(u)->begins[kind]++;
	pthread_mutex_unlock(&rec(u)->mu);
}

static void rec_end(struct usage_store *u, enum usage_kind kind)
{
	pthread_mutex_lock(&rec(u)->mu);
	rec(u)->ends[kind]++;
	pthread_mutex_unlock(&rec(u)->mu);
}

static const struct usage_backend recorder_backend = {
	.name = "recorder",
	.observe = rec_observe,
	.forget = rec_forget,
	.relist_begin = rec_begin,
	.relist_end = rec_end,
};

/* Every object holds one unit of something, under the kind it came as. */
static int charge_all(void *ctx, const json_t *obj, enum usage_kind kind,
		      struct arena *a, struct usage_item *out)
{
	(void)ctx, (void)a;
	memset(out, 0, sizeof(*out));
	out->uid = json_string_value(
		json_object_get(json_object_get(obj, "metadata"), "uid"));
	if (!out->uid)
		return -1;
	out->kind = kind;
	out->tenant = "t";
	out->flavor = "f";
	out->units = 1;
	out->active = true;
	return 0;
}

/* How often needle was logged so far. */
static size_t logged(const char *needle)
{
	char *log = log_captured();
	size_t n = log_count(log, needle);

	free(log);
	return n;
}

static void start(void)
{
	struct diag d;

	memset(&R, 0, sizeof(R));
	R.store.be = &recorder_backend;
	pthread_mutex_init(&R.mu, NULL);
	diag_init(&d);
	cr_assert_eq(fakekube_start(&F, &d), 0, "the fake API did not start: %s",
		     diag_text(&d));
	log_capture_start();
}

static void stop(void)
{
	log_capture_stop();
	fakekube_stop(&F);
	pthread_mutex_destroy(&R.mu);
}

TestSuite(feed_claims, .init = start, .fini = stop, .timeout = 60);

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Polls check() for up to 15 s. */
static bool within(bool (*check)(struct feed *), struct feed *f)
{
	for (double end = now_s() + 15; now_s() < end; usleep(20 * 1000))
		if (check(f))
			return true;
	return false;
}

static int locked(const int *v)
{
	int n;

	pthread_mutex_lock(&R.mu);
	n = *v;
	pthread_mutex_unlock(&R.mu);
	return n;
}

static bool claim_observed(struct feed *f)
{
	(void)f;
	return locked(&R.observed_claims) > 0;
}

static bool claim_forgotten(struct feed *f)
{
	(void)f;
	return locked(&R.forgotten) > 0;
}

static struct feed *start_feed(unsigned unserved_retry_ms)
{
	struct feed_config fc = {.kube = &F.cfg, .usage = &R.store,
				 .charge = charge_all,
				 .unserved_retry_ms = unserved_retry_ms};
	struct feed *f;
	struct diag d;

	diag_init(&d);
	cr_assert_eq(feed_start(&fc, &f, &d), 0, "%s", diag_text(&d));
	return f;
}

static const char claim[] =
	"{\"apiVersion\": \"resource.k8s.io/v1\", \"kind\": \"ResourceClaim\","
	" \"metadata\": {\"name\": \"c\", \"namespace\": \"research\","
	" \"uid\": \"uid-claim-c\"}, \"spec\": {\"devices\": {\"requests\": []}}}";

Test(feed_claims, claims_are_listed_and_watched_as_claims)
{
	struct feed *f = start_feed(0);
	struct diag d;

	cr_assert(within(feed_synced, f), "pods, jobs and claims listed");
	cr_assert(within(feed_connected, f), "three watches open");
	cr_assert_eq(locked(&R.ends[USAGE_CLAIMS]), 1, "one whole list of claims");
	diag_init(&d);
	cr_assert_eq(fakekube_event(&F, "claims", "ADDED", claim, &d), 0, "%s",
		     diag_text(&d));
	cr_assert(within(claim_observed, f));
	cr_assert_str_eq(R.last_uid, "uid-claim-c");
	cr_assert_eq(fakekube_event(&F, "claims", "DELETED", claim, &d), 0, "%s",
		     diag_text(&d));
	cr_assert(within(claim_forgotten, f));
	feed_stop(f);
	cr_assert_eq(logged("msg=\"usage synced\" kind=claims entries=0"), 1);
	cr_assert_eq(logged("not served"), 0);
}

Test(feed_claims, an_api_without_resource_claims_does_not_hold_readiness_back)
{
	struct feed *f;
	struct diag d;
	double t0;

	diag_init(&d);
	cr_assert_eq(fakekube_serve(&F, "claims", false, &d), 0, "%s", diag_text(&d));
	f = start_feed(300);
	cr_assert(within(feed_synced, f), "synced without claims");
	cr_assert(within(feed_connected, f), "nothing of claims to miss");
	cr_assert_eq(locked(&R.begins[USAGE_CLAIMS]), 1, "an empty relist");
	cr_assert_eq(locked(&R.ends[USAGE_CLAIMS]), 1);
	/* Asked again every 300 ms, logged once. */
	t0 = now_s();
	while (now_s() < t0 + 1.0)
		usleep(50 * 1000);
	cr_assert_eq(logged("msg=\"not served\" kind=claims "
			    "path=/apis/resource.k8s.io/v1/resourceclaims retry_s=0"),
		     1);
	cr_assert_eq(logged("cannot list"), 0, "a 404 here is no failure");
	cr_assert_eq(locked(&R.ends[USAGE_CLAIMS]), 1, "said once, not every time");
	/* The API serves them now: listed and watched from the next try on. */
	cr_assert_eq(fakekube_serve(&F, "claims", true, &d), 0, "%s", diag_text(&d));
	cr_assert_eq(fakekube_event(&F, "claims", "ADDED", claim, &d), 0, "%s",
		     diag_text(&d));
	cr_assert(within(claim_observed, f), "the claim, from the list or the watch");
	cr_assert(feed_synced(f) && within(feed_connected, f));
	feed_stop(f);
	cr_assert_eq(logged("msg=\"relisted\" kind=claims"), 1);
	cr_assert_eq(logged("msg=\"usage synced\" kind=claims entries=0"), 1);
}
