/*
 * The API client's verbs and its compare-and-swap (kube/client.c) against
 * tests/integration/fakekube.py, started for each test over TLS on an
 * ephemeral port (fakekube_proc.c).  When python3 or the fake cannot
 * start, every test here fails: none is skipped.
 */
#include "base/diag.h"
#include "kube/client.h"
#include "kube/config.h"
#include "tests/unit/kube/fakekube_proc.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NS "/api/v1/namespaces/gpugate"
#define CMS NS "/configmaps"
#define LEASES "/apis/coordination.k8s.io/v1/namespaces/gpugate/leases"
#define SHORT_MS 5000 /* the per-call timeout of requests that should pass */

static struct fakekube F;
static struct kube *K;

static void start(void)
{
	struct diag d;

	diag_init(&d);
	cr_assert_eq(fakekube_start(&F, &d), 0, "the fake API did not start: %s",
		     diag_text(&d));
	K = kube_new(&F.cfg, &d);
	cr_assert_not_null(K, "%s", diag_text(&d));
}

static void stop(void)
{
	kube_free(K);
	K = NULL;
	fakekube_stop(&F);
}

TestSuite(client, .init = start, .fini = stop, .timeout = 60);
TestSuite(cas, .init = start, .fini = stop, .timeout = 120);

static long long mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static json_t *parse(const char *text)
{
	json_error_t e;
	json_t *v = json_loads(text, 0, &e);

	cr_assert_not_null(v, "%s: %s", text, e.text);
	return v;
}

static const char *meta_str(const json_t *obj, const char *key)
{
	return json_string_value(json_object_get(json_object_get(obj, "metadata"), key));
}

static const char *data_str(const json_t *obj, const char *key)
{
	return json_string_value(json_object_get(json_object_get(obj, "data"), key));
}

/* Creates ConfigMap NAME with data {a: "1"}; returns it as the server has it. */
static json_t *create_cm(const char *name)
{
	char text[256];
	json_t *obj, *out = NULL;
	struct diag d;

	snprintf(text, sizeof(text),
		 "{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\","
		 " \"metadata\": {\"name\": \"%s\"}, \"data\": {\"a\": \"1\"}}",
		 name);
	obj = parse(text);
	diag_init(&d);
	cr_assert_eq(kube_create(K, CMS, obj, SHORT_MS, &out, &d), 0, "%s",
		     diag_text(&d));
	cr_assert_eq(diag_count(&d), 0);
	json_decref(obj);
	return out;
}

static enum kube_cas_verdict increment(void *ctx, json_t *obj, bool exists);

/* ---- the verbs ---------------------------------------------------------- */

Test(client, creates_reads_and_refuses_a_second_create)
{
	json_t *made = create_cm("quota-a"), *got = NULL, *again;
	struct diag d;

	cr_assert_not_null(meta_str(made, "resourceVersion"));
	cr_assert_not_null(meta_str(made, "uid"));
	cr_assert_str_eq(meta_str(made, "namespace"), "gpugate");

	diag_init(&d);
	cr_assert_eq(kube_get_json(K, CMS "/quota-a", SHORT_MS, &got, &d), 0, "%s",
		     diag_text(&d));
	cr_assert_str_eq(meta_str(got, "resourceVersion"), meta_str(made, "resourceVersion"));
	cr_assert_str_eq(data_str(got, "a"), "1");

	again = parse("{\"metadata\": {\"name\": \"quota-a\"}}");
	diag_init(&d);
	cr_assert_eq(kube_create(K, CMS, again, SHORT_MS, NULL, &d), 409);
	cr_assert_str_eq(diag_text(&d),
			 "POST " CMS ": 409 AlreadyExists: configmaps \"quota-a\" "
			 "already exists\n");

	json_decref(got);
	got = (json_t *)1;
	diag_init(&d);
	cr_assert_eq(kube_get_json(K, CMS "/nope", SHORT_MS, &got, &d), 404);
	cr_assert_null(got, "no object on a 404");
	cr_assert_str_eq(diag_text(&d), "GET " CMS "/nope: 404 NotFound: configmaps "
					"\"nope\" not found\n");
	json_decref(again);
	json_decref(made);
}

Test(client, replace_succeeds_only_at_the_version_read)
{
	json_t *made = create_cm("quota-a"), *v1 = NULL, *stale, *now = NULL;
	struct diag d;

	/* At the version read: written, with a new version. */
	json_object_set_new(json_object_get(made, "data"), "a", json_string("2"));
	diag_init(&d);
	cr_assert_eq(kube_replace(K, CMS "/quota-a", made, SHORT_MS, &v1, &d), 0, "%s",
		     diag_text(&d));
	cr_assert_str_neq(meta_str(v1, "resourceVersion"), meta_str(made, "resourceVersion"));
	cr_assert_str_eq(data_str(v1, "a"), "2");

	/* At the old version again: refused, with the apiserver's words. */
	stale = json_deep_copy(made);
	json_object_set_new(json_object_get(stale, "data"), "a", json_string("3"));
	diag_init(&d);
	cr_assert_eq(kube_replace(K, CMS "/quota-a", stale, SHORT_MS, NULL, &d), 409);
	cr_assert_str_eq(diag_text(&d),
			 "PUT " CMS "/quota-a: 409 Conflict: Operation cannot be "
			 "fulfilled on configmaps \"quota-a\": the object has been "
			 "modified; please apply your changes to the latest version "
			 "and try again\n");
	diag_init(&d);
	cr_assert_eq(kube_get_json(K, CMS "/quota-a", SHORT_MS, &now, &d), 0);
	cr_assert_str_eq(data_str(now, "a"), "2", "the stale write changed nothing");
	cr_assert_str_eq(meta_str(now, "resourceVersion"), meta_str(v1, "resourceVersion"));

	/* A replace of an object that is not there. */
	diag_init(&d);
	cr_assert_eq(kube_replace(K, CMS "/gone", stale, SHORT_MS, NULL, &d), 404);
	json_decref(made);
	json_decref(v1);
	json_decref(stale);
	json_decref(now);
}

Test(client, merge_and_json_patches)
{
	json_t *made = create_cm("quota-a"), *out = NULL, *patch;
	struct diag d;
	char text[256];

	patch = parse("{\"data\": {\"b\": \"2\", \"a\": null}}");
	diag_init(&d);
	cr_assert_eq(kube_patch(K, CMS "/quota-a", KUBE_PATCH_MERGE, patch, SHORT_MS,
				&out, &d),
		     0, "%s", diag_text(&d));
	cr_assert_null(data_str(out, "a"), "null removes a key (RFC 7386)");
	cr_assert_str_eq(data_str(out, "b"), "2");
	json_decref(patch);

	/* A merge patch that names a stale version is refused. */
	snprintf(text, sizeof(text),
		 "{\"metadata\": {\"resourceVersion\": \"%s\"}, \"data\": {\"c\": \"3\"}}",
		 meta_str(made, "resourceVersion"));
	patch = parse(text);
	diag_init(&d);
	cr_assert_eq(kube_patch(K, CMS "/quota-a", KUBE_PATCH_MERGE, patch, SHORT_MS,
				NULL, &d),
		     409);
	cr_assert(strstr(diag_text(&d), "409 Conflict: Operation cannot be fulfilled "
					"on configmaps \"quota-a\""),
		  "%s", diag_text(&d));
	json_decref(patch);

	patch = parse("[{\"op\": \"add\", \"path\": \"/data/c\", \"value\": \"3\"}]");
	json_decref(out);
	diag_init(&d);
	cr_assert_eq(kube_patch(K, CMS "/quota-a", KUBE_PATCH_JSON, patch, SHORT_MS,
				&out, &d),
		     0, "%s", diag_text(&d));
	cr_assert_str_eq(data_str(out, "c"), "3");
	cr_assert_str_eq(data_str(out, "b"), "2");
	json_decref(patch);
	json_decref(out);
	json_decref(made);
}

Test(client, delete_honours_its_preconditions)
{
	json_t *made = create_cm("quota-a"), *out = NULL;
	const char *uid = meta_str(made, "uid"), *rv = meta_str(made, "resourceVersion");
	char want[512];
	struct diag d;

	diag_init(&d);
	cr_assert_eq(kube_delete(K, CMS "/quota-a", NULL, "1", SHORT_MS, NULL, &d), 409);
	snprintf(want, sizeof(want),
		 "DELETE " CMS "/quota-a: 409 Conflict: Operation cannot be fulfilled "
		 "on configmaps \"quota-a\": Precondition failed: ResourceVersion in "
		 "precondition: 1, ResourceVersion in object meta: %s\n",
		 rv);
	cr_assert_str_eq(diag_text(&d), want);

	diag_init(&d);
	cr_assert_eq(kube_delete(K, CMS "/quota-a", "not-the-uid", rv, SHORT_MS, NULL, &d),
		     409);
	cr_assert(strstr(diag_text(&d), "Precondition failed: UID in precondition: "
					"not-the-uid, UID in object meta: "),
		  "%s", diag_text(&d));

	diag_init(&d);
	cr_assert_eq(kube_get_json(K, CMS "/quota-a", SHORT_MS, NULL, &d), 0,
		     "still there after refused deletes");

	diag_init(&d);
	cr_assert_eq(kube_delete(K, CMS "/quota-a", uid, rv, SHORT_MS, &out, &d), 0, "%s",
		     diag_text(&d));
	cr_assert_str_eq(json_string_value(json_object_get(out, "status")), "Success");
	diag_init(&d);
	cr_assert_eq(kube_get_json(K, CMS "/quota-a", SHORT_MS, NULL, &d), 404);
	diag_init(&d);
	cr_assert_eq(kube_delete(K, CMS "/quota-a", NULL, NULL, SHORT_MS, NULL, &d), 404);
	json_decref(out);
	json_decref(made);
}

Test(client, leases_are_objects_too)
{
	json_t *lease = parse("{\"apiVersion\": \"coordination.k8s.io/v1\", \"kind\": "
			      "\"Lease\", \"metadata\": {\"name\": \"gpugate-leader\"}, "
			      "\"spec\": {\"holderIdentity\": \"a\", "
			      "\"leaseDurationSeconds\": 15}}");
	json_t *made = NULL;
	struct diag d;

	diag_init(&d);
	cr_assert_eq(kube_create(K, LEASES, lease, SHORT_MS, &made, &d), 0, "%s",
		     diag_text(&d));
	json_object_set_new(json_object_get(lease, "metadata"), "resourceVersion",
			    json_string("1"));
	diag_init(&d);
	cr_assert_eq(kube_replace(K, LEASES "/gpugate-leader", lease, SHORT_MS, NULL, &d),
		     409);
	cr_assert(strstr(diag_text(&d), "on leases.coordination.k8s.io "
					"\"gpugate-leader\": the object has been "
					"modified"),
		  "%s", diag_text(&d));
	json_decref(lease);
	json_decref(made);
}

Test(client, the_status_of_an_answer_reaches_the_caller)
{
	struct kube_request req = {.method = "GET", .path = CMS "/x",
				   .timeout_ms = SHORT_MS};
	struct kube_response resp;
	struct diag d;

	fakekube_must_fault(&F, "{\"method\": \"GET\", \"status\": 429, \"message\": \"slow down\", "
	      "\"retry_after\": 2, \"times\": 1}");
	diag_init(&d);
	cr_assert_eq(kube_request(K, &req, &resp, &d), 429);
	cr_assert_eq(resp.status, 429);
	cr_assert_str_eq(resp.reason, "TooManyRequests");
	cr_assert_str_eq(resp.message, "slow down");
	cr_assert_eq(resp.retry_after_s, 2);
	cr_assert_str_eq(diag_text(&d), "GET " CMS "/x: 429 TooManyRequests: slow down\n");
	kube_response_release(&resp);

	/* A 2xx answer has no reason; the body is the caller's to read. */
	json_decref(create_cm("x"));
	diag_init(&d);
	cr_assert_eq(kube_request(K, &req, &resp, &d), 0, "%s", diag_text(&d));
	cr_assert_eq(resp.status, 200);
	cr_assert_str_eq(resp.reason, "");
	cr_assert_not_null(strstr(resp.body, "\"ConfigMap\""));
	kube_response_release(&resp);
	cr_assert_null(resp.body);
}

Test(client, a_per_call_timeout_ends_a_hung_request)
{
	long long t0;
	struct diag d;

	json_decref(create_cm("slow"));
	fakekube_must_fault(&F, "{\"method\": \"GET\", \"delay\": 5}");
	diag_init(&d);
	t0 = mono_ms();
	cr_assert_eq(kube_get_json(K, CMS "/slow", 300, NULL, &d), -1);
	cr_assert_lt(mono_ms() - t0, 2000, "took %lld ms", mono_ms() - t0);
	cr_assert_str_eq(diag_text(&d), "GET " CMS "/slow: no answer within 300 ms\n");
}

Test(client, a_dead_server_is_an_error_not_a_hang)
{
	struct kube_config c = {.server = (char *)"https://127.0.0.1:1",
				.insecure = true};
	struct kube_cas_result res;
	struct kube *dead;
	json_t *obj = parse("{\"metadata\": {\"name\": \"x\"}}");
	long long t0 = mono_ms();
	struct diag d;

	diag_init(&d);
	dead = kube_new(&c, &d);
	cr_assert_not_null(dead);
	cr_assert_eq(kube_create(dead, CMS, obj, SHORT_MS, NULL, &d), -1);
	cr_assert_eq(strncmp(diag_text(&d), "POST " CMS ": ", strlen("POST " CMS ": ")), 0,
		     "%s", diag_text(&d));
	diag_init(&d);
	cr_assert_eq(kube_cas_update(dead, CMS "/x", increment, NULL, NULL, &res, &d), -1);
	cr_assert_eq(res.outcome, KUBE_CAS_FAILED);
	cr_assert_eq(res.attempts, 1, "a refused connection is not retried");
	cr_assert_eq(res.status, 0);
	cr_assert_not(res.write_unknown, "nothing was sent");
	cr_assert_eq(strncmp(diag_text(&d), "GET " CMS "/x: ", strlen("GET " CMS "/x: ")), 0,
		     "%s", diag_text(&d));
	cr_assert_lt(mono_ms() - t0, 3000);
	kube_cas_result_release(&res);
	kube_free(dead);
	json_decref(obj);
}

/* ---- compare-and-swap --------------------------------------------------- */

/* data.n += 1, the object made when absent. */
static enum kube_cas_verdict increment(void *ctx, json_t *obj, bool exists)
{
	json_t *data = json_object_get(obj, "data");
	const char *v;
	char buf[32];

	(void)ctx;
	if (!exists) {
		json_object_set_new(obj, "apiVersion", json_string("v1"));
		json_object_set_new(obj, "kind", json_string("ConfigMap"));
	}
	if (!json_is_object(data)) {
		data = json_object();
		json_object_set_new(obj, "data", data);
	}
	v = json_string_value(json_object_get(data, "n"));
	snprintf(buf, sizeof(buf), "%ld", (v ? strtol(v, NULL, 10) : 0) + 1);
	json_object_set_new(data, "n", json_string(buf));
	return KUBE_CAS_WRITE;
}

static long counter(const char *path)
{
	json_t *obj = NULL;
	struct diag d;
	long n;

	diag_init(&d);
	cr_assert_eq(kube_get_json(K, path, SHORT_MS, &obj, &d), 0, "%s", diag_text(&d));
	n = strtol(data_str(obj, "n") ? data_str(obj, "n") : "-1", NULL, 10);
	json_decref(obj);
	return n;
}

Test(cas, creates_when_absent_then_updates)
{
	struct kube_cas_result res;
	struct diag d;

	diag_init(&d);
	cr_assert_eq(kube_cas_update(K, CMS "/counter", increment, NULL, NULL, &res, &d),
		     0, "%s", diag_text(&d));
	cr_assert_eq(res.outcome, KUBE_CAS_CREATED);
	cr_assert_eq(res.attempts, 1);
	cr_assert_eq(res.conflicts, 0);
	cr_assert_eq(res.status, 201);
	cr_assert_str_eq(meta_str(res.object, "name"), "counter", "named from the path");
	cr_assert_str_eq(meta_str(res.object, "namespace"), "gpugate");
	cr_assert_not_null(meta_str(res.object, "resourceVersion"));
	kube_cas_result_release(&res);

	cr_assert_eq(kube_cas_update(K, CMS "/counter", increment, NULL, NULL, &res, &d),
		     0, "%s", diag_text(&d));
	cr_assert_eq(res.outcome, KUBE_CAS_UPDATED);
	cr_assert_str_eq(data_str(res.object, "n"), "2");
	cr_assert_eq(res.status, 200);
	kube_cas_result_release(&res);
	cr_assert_eq(diag_count(&d), 0);
	cr_assert_eq(counter(CMS "/counter"), 2);
}

static enum kube_cas_verdict keep(void *ctx, json_t *obj, bool exists)
{
	(void)exists;
	json_object_set_new(obj, "scribble", json_true()); /* not written */
	return *(enum kube_cas_verdict *)ctx;
}

Test(cas, keep_and_abort_write_nothing)
{
	enum kube_cas_verdict v = KUBE_CAS_KEEP;
	struct kube_cas_result res;
	struct diag d;

	diag_init(&d);
	cr_assert_eq(kube_cas_update(K, CMS "/absent", keep, &v, NULL, &res, &d), 0);
	cr_assert_eq(res.outcome, KUBE_CAS_UNCHANGED);
	cr_assert_null(res.object, "absent, and left so");
	kube_cas_result_release(&res);

	json_decref(create_cm("quota-a"));
	cr_assert_eq(kube_cas_update(K, CMS "/quota-a", keep, &v, NULL, &res, &d), 0);
	cr_assert_eq(res.outcome, KUBE_CAS_UNCHANGED);
	cr_assert_str_eq(data_str(res.object, "a"), "1");
	cr_assert_null(json_object_get(res.object, "scribble"), "the object as read");
	kube_cas_result_release(&res);

	v = KUBE_CAS_ABORT;
	cr_assert_eq(kube_cas_update(K, CMS "/quota-a", keep, &v, NULL, &res, &d), 0);
	cr_assert_eq(res.outcome, KUBE_CAS_ABORTED);
	cr_assert_str_eq(kube_cas_outcome_name(res.outcome), "aborted");
	kube_cas_result_release(&res);
	cr_assert_eq(diag_count(&d), 0);
	cr_assert_eq(fakekube_must_stat(&F, "PUT"), 0);
	cr_assert_eq(fakekube_must_stat(&F, "POST"), 1, "the create_cm() only");
}

/*
 * Another writer gets in between the read and the write, and mutate even
 * drops the resourceVersion it was given: the write must still be refused
 * (not made unconditional) and the next round must see the other write.
 */
struct interloper {
	struct kube *other;
	int calls;
};

static enum kube_cas_verdict interloping(void *ctx, json_t *obj, bool exists)
{
	struct interloper *il = ctx;

	cr_assert(exists);
	if (il->calls++ == 0) {
		json_t *theirs = json_deep_copy(obj);
		struct diag d;

		json_object_set_new(json_object_get(theirs, "data"), "theirs",
				    json_string("yes"));
		diag_init(&d);
		cr_assert_eq(kube_replace(il->other, CMS "/quota-a", theirs, SHORT_MS,
					  NULL, &d),
			     0, "%s", diag_text(&d));
		json_decref(theirs);
	}
	json_object_del(json_object_get(obj, "metadata"), "resourceVersion");
	json_object_set_new(json_object_get(obj, "data"), "ours", json_string("yes"));
	return KUBE_CAS_WRITE;
}

Test(cas, no_lost_update_when_another_writer_gets_in_between)
{
	struct interloper il = {0};
	struct kube_cas_result res;
	struct diag d;

	diag_init(&d);
	il.other = kube_new(&F.cfg, &d);
	cr_assert_not_null(il.other);
	json_decref(create_cm("quota-a"));
	cr_assert_eq(kube_cas_update(K, CMS "/quota-a", interloping, &il, NULL, &res, &d),
		     0, "%s", diag_text(&d));
	cr_assert_eq(res.outcome, KUBE_CAS_UPDATED);
	cr_assert_eq(il.calls, 2, "mutate ran again on the re-read object");
	cr_assert_eq(res.attempts, 2);
	cr_assert_eq(res.conflicts, 1);
	cr_assert_str_eq(data_str(res.object, "theirs"), "yes", "their write kept");
	cr_assert_str_eq(data_str(res.object, "ours"), "yes");
	cr_assert_eq(fakekube_must_stat(&F, "PUT 409"), 1);
	kube_cas_result_release(&res);
	kube_free(il.other);
}

#define THREADS 4
#define INCREMENTS 25

struct worker {
	struct kube_config *cfg;
	pthread_barrier_t *go;
	unsigned conflicts, attempts, failures;
	char error[512];
};

static void *work(void *arg)
{
	struct worker *w = arg;
	struct kube_cas_opts opts = {.budget_ms = 30000, .max_attempts = 1000};
	struct diag d;
	struct kube *k;

	diag_init(&d);
	k = kube_new(w->cfg, &d);
	pthread_barrier_wait(w->go);
	for (int i = 0; k && i < INCREMENTS; i++) {
		struct kube_cas_result res;

		if (kube_cas_update(k, CMS "/counter", increment, NULL, &opts, &res, &d) < 0 ||
		    (res.outcome != KUBE_CAS_UPDATED && res.outcome != KUBE_CAS_CREATED))
			w->failures++;
		w->conflicts += res.conflicts;
		w->attempts += res.attempts;
		kube_cas_result_release(&res);
	}
	if (!k)
		w->failures = INCREMENTS;
	diag_first(&d, w->error, sizeof(w->error));
	kube_free(k);
	return NULL;
}

Test(cas, four_writers_lose_no_increment)
{
	pthread_t t[THREADS];
	struct worker w[THREADS];
	pthread_barrier_t go;
	unsigned conflicts = 0, attempts = 0;

	/* Reads that take a little longer widen the window between the read
	 * and the write, as a real apiserver's round trip does. */
	fakekube_must_fault(&F, "{\"method\": \"GET\", \"delay\": 0.002}");
	pthread_barrier_init(&go, NULL, THREADS);
	for (int i = 0; i < THREADS; i++) {
		w[i] = (struct worker){.cfg = &F.cfg, .go = &go};
		cr_assert_eq(pthread_create(&t[i], NULL, work, &w[i]), 0);
	}
	for (int i = 0; i < THREADS; i++) {
		pthread_join(t[i], NULL);
		cr_expect_eq(w[i].failures, 0, "writer %d: %s", i, w[i].error);
		conflicts += w[i].conflicts;
		attempts += w[i].attempts;
	}
	pthread_barrier_destroy(&go);
	cr_assert_eq(counter(CMS "/counter"), THREADS * INCREMENTS,
		     "no lost update (%u conflicts)", conflicts);
	cr_assert_gt(conflicts, 0, "the writers never collided: the test proves nothing");
	cr_log_info("%d increments by %d writers: %u conflicts", THREADS * INCREMENTS,
		    THREADS, conflicts);
	/* What the writers counted is what the server refused. */
	cr_assert_eq(conflicts, fakekube_must_stat(&F, "PUT 409") + fakekube_must_stat(&F, "POST 409"));
	cr_assert_eq(attempts, THREADS * INCREMENTS + conflicts);
	cr_assert_eq(fakekube_must_stat(&F, "POST 201"), 1, "created once");
}

Test(cas, the_budget_runs_out_under_endless_conflicts)
{
	struct kube_cas_opts opts = {.budget_ms = 400, .max_attempts = 1000,
				     .seed = 42};
	struct kube_cas_result res;
	long long t0, took;
	struct diag d;

	json_decref(create_cm("hot"));
	fakekube_must_fault(&F, "{\"method\": \"PUT\", \"status\": 409}");
	diag_init(&d);
	t0 = mono_ms();
	cr_assert_eq(kube_cas_update(K, CMS "/hot", increment, NULL, &opts, &res, &d), -1);
	took = mono_ms() - t0;
	cr_assert_eq(res.outcome, KUBE_CAS_EXHAUSTED, "%s: %s",
		     kube_cas_outcome_name(res.outcome), diag_text(&d));
	cr_assert_str_eq(kube_cas_outcome_name(res.outcome), "exhausted");
	cr_assert_gt(res.attempts, 2);
	cr_assert_eq(res.conflicts, res.attempts);
	cr_assert_eq(res.status, 409);
	cr_assert_not(res.write_unknown);
	cr_assert_null(res.object);
	cr_assert_leq(res.elapsed_ms, opts.budget_ms);
	cr_assert_lt(took, opts.budget_ms + 200, "took %lld ms", took);
	cr_assert_eq(fakekube_must_stat(&F, "PUT"), res.attempts);
	{
		char want[256];

		snprintf(want, sizeof(want), "cas " CMS "/hot: gave up after %u attempts in "
			 "%u ms (%u conflicts, 0 throttled): PUT " CMS "/hot: 409 "
			 "Conflict: Operation cannot be fulfilled: ",
			 res.attempts, res.elapsed_ms, res.conflicts);
		cr_assert_eq(strncmp(diag_text(&d), want, strlen(want)), 0, "%s",
			     diag_text(&d));
	}
	kube_cas_result_release(&res);
	cr_assert_eq(counter(CMS "/hot"), -1, "nothing written");
}

Test(cas, the_attempt_cap_ends_it_before_the_budget)
{
	struct kube_cas_opts opts = {.budget_ms = 20000, .max_attempts = 3};
	struct kube_cas_result res;
	long long t0 = mono_ms();
	struct diag d;

	json_decref(create_cm("hot"));
	fakekube_must_fault(&F, "{\"method\": \"PUT\", \"status\": 409}");
	diag_init(&d);
	cr_assert_eq(kube_cas_update(K, CMS "/hot", increment, NULL, &opts, &res, &d), -1);
	cr_assert_eq(res.outcome, KUBE_CAS_EXHAUSTED);
	cr_assert_eq(res.attempts, 3);
	cr_assert_eq(res.conflicts, 3);
	cr_assert_lt(mono_ms() - t0, 3000);
	cr_assert(strstr(diag_text(&d), "gave up after 3 attempts"), "%s", diag_text(&d));
	kube_cas_result_release(&res);
}

Test(cas, a_hung_server_is_cut_at_the_budget)
{
	struct kube_cas_opts opts = {.budget_ms = 500};
	struct kube_cas_result res;
	long long t0, took;
	struct diag d;

	json_decref(create_cm("slow"));
	fakekube_must_fault(&F, "{\"method\": \"PUT\", \"delay\": 5}");
	diag_init(&d);
	t0 = mono_ms();
	cr_assert_eq(kube_cas_update(K, CMS "/slow", increment, NULL, &opts, &res, &d), -1);
	took = mono_ms() - t0;
	cr_assert_eq(res.outcome, KUBE_CAS_FAILED, "no answer: the write may have happened");
	cr_assert(res.write_unknown);
	cr_assert_eq(res.attempts, 1);
	cr_assert_lt(took, opts.budget_ms + 200, "took %lld ms", took);
	cr_assert(strstr(diag_text(&d), "PUT " CMS "/slow: no answer within "), "%s",
		  diag_text(&d));
	kube_cas_result_release(&res);

	/* A read cut by the budget wrote nothing: exhausted, not failed. */
	fakekube_clear_faults(&F, NULL);
	fakekube_must_fault(&F, "{\"method\": \"GET\", \"delay\": 5}");
	diag_init(&d);
	t0 = mono_ms();
	cr_assert_eq(kube_cas_update(K, CMS "/slow", increment, NULL, &opts, &res, &d), -1);
	took = mono_ms() - t0;
	cr_assert_eq(res.outcome, KUBE_CAS_EXHAUSTED, "%s", diag_text(&d));
	cr_assert_not(res.write_unknown);
	cr_assert_lt(took, opts.budget_ms + 200, "took %lld ms", took);
	cr_assert(strstr(diag_text(&d), "gave up after 1 attempt in "), "%s", diag_text(&d));
	kube_cas_result_release(&res);
}

Test(cas, throttling_is_waited_out_within_the_budget)
{
	struct kube_cas_opts opts = {.budget_ms = 4000};
	struct kube_cas_result res;
	long long t0;
	struct diag d;

	json_decref(create_cm("quota-a"));
	fakekube_must_fault(&F, "{\"method\": \"PUT\", \"status\": 429, \"retry_after\": 1, \"times\": 1}");
	diag_init(&d);
	t0 = mono_ms();
	cr_assert_eq(kube_cas_update(K, CMS "/quota-a", increment, NULL, &opts, &res, &d),
		     0, "%s", diag_text(&d));
	cr_assert_eq(res.outcome, KUBE_CAS_UPDATED);
	cr_assert_eq(res.attempts, 2);
	cr_assert_eq(res.throttled, 1);
	cr_assert_eq(res.conflicts, 0);
	cr_assert_geq(mono_ms() - t0, 1000, "Retry-After: 1 was honoured");
	kube_cas_result_release(&res);

	/* A Retry-After longer than what is left: no wait, a give-up. */
	opts.budget_ms = 500;
	fakekube_must_fault(&F, "{\"method\": \"PUT\", \"status\": 429, \"retry_after\": 1, \"times\": 1}");
	t0 = mono_ms();
	cr_assert_eq(kube_cas_update(K, CMS "/quota-a", increment, NULL, &opts, &res, &d),
		     -1);
	cr_assert_eq(res.outcome, KUBE_CAS_EXHAUSTED);
	cr_assert_eq(res.status, 429);
	cr_assert_lt(mono_ms() - t0, 400);
	kube_cas_result_release(&res);
	cr_assert_eq(counter(CMS "/quota-a"), 1);
}

Test(cas, errors_are_not_retried_and_may_have_been_applied)
{
	struct kube_cas_result res;
	struct diag d;

	json_decref(create_cm("quota-a"));
	fakekube_must_fault(&F, "{\"method\": \"PUT\", \"status\": 500, \"times\": 1}");
	diag_init(&d);
	cr_assert_eq(kube_cas_update(K, CMS "/quota-a", increment, NULL, NULL, &res, &d), -1);
	cr_assert_eq(res.outcome, KUBE_CAS_FAILED);
	cr_assert_eq(res.status, 500);
	cr_assert(res.write_unknown, "a 5xx may come after the write");
	cr_assert_eq(res.attempts, 1);
	cr_assert_str_eq(diag_text(&d), "PUT " CMS "/quota-a: 500 InternalError: "
					"scripted failure\n");
	kube_cas_result_release(&res);
	cr_assert_eq(counter(CMS "/quota-a"), -1, "not applied");

	/* Applied, then the connection is cut: failed, and yet written. */
	fakekube_must_fault(&F, "{\"method\": \"PUT\", \"drop\": \"after\", \"times\": 1}");
	diag_init(&d);
	cr_assert_eq(kube_cas_update(K, CMS "/quota-a", increment, NULL, NULL, &res, &d), -1);
	cr_assert_eq(res.outcome, KUBE_CAS_FAILED);
	cr_assert_eq(res.attempts, 1);
	cr_assert_eq(res.status, 0, "no answer");
	cr_assert(res.write_unknown);
	cr_assert_str_eq(diag_text(&d), "PUT " CMS "/quota-a: the connection closed "
					"after the request was sent, without an answer\n");
	kube_cas_result_release(&res);
	cr_assert_eq(counter(CMS "/quota-a"), 1, "the write happened all the same");
}

Test(cas, refuses_what_is_not_an_object_path)
{
	static const char *const bad[] = {CMS "/", CMS "/x?dryRun=All", "configmaps/x", "/x"};
	struct kube_cas_result res;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct diag d;
		char want[256];

		diag_init(&d);
		cr_assert_eq(kube_cas_update(K, bad[i], increment, NULL, NULL, &res, &d), -1);
		cr_assert_eq(res.outcome, KUBE_CAS_FAILED);
		cr_assert_eq(res.attempts, 0);
		snprintf(want, sizeof(want), "cas %s: not the path of an object\n", bad[i]);
		cr_assert_str_eq(diag_text(&d), want);
		kube_cas_result_release(&res);
	}
	cr_assert_eq(fakekube_must_stat(&F, "GET"), 0);
}

/*
 * Leader election's shape: a Lease taken when absent or expired, renewed by
 * its holder, left alone by the others.
 */
struct candidate {
	const char *me;
	long now; /* seconds, the test's clock */
};

static enum kube_cas_verdict acquire(void *ctx, json_t *obj, bool exists)
{
	struct candidate *c = ctx;
	json_t *spec = json_object_get(obj, "spec");
	const char *holder = json_string_value(json_object_get(spec, "holderIdentity"));
	long renewed = (long)json_integer_value(json_object_get(spec, "x-renewed"));

	if (exists && holder && strcmp(holder, c->me) != 0 && c->now < renewed + 15)
		return KUBE_CAS_ABORT; /* held by another, not expired */
	if (!exists) {
		json_object_set_new(obj, "apiVersion", json_string("coordination.k8s.io/v1"));
		json_object_set_new(obj, "kind", json_string("Lease"));
	}
	if (!json_is_object(spec)) {
		spec = json_object();
		json_object_set_new(obj, "spec", spec);
	}
	json_object_set_new(spec, "holderIdentity", json_string(c->me));
	json_object_set_new(spec, "leaseDurationSeconds", json_integer(15));
	json_object_set_new(spec, "x-renewed", json_integer(c->now));
	return KUBE_CAS_WRITE;
}

Test(cas, a_lease_is_taken_renewed_and_respected)
{
	struct candidate a = {"gpugate-a", 100}, b = {"gpugate-b", 101};
	struct kube_cas_result res;
	struct diag d;

	diag_init(&d);
	cr_assert_eq(kube_cas_update(K, LEASES "/gpugate", acquire, &a, NULL, &res, &d), 0,
		     "%s", diag_text(&d));
	cr_assert_eq(res.outcome, KUBE_CAS_CREATED);
	kube_cas_result_release(&res);

	cr_assert_eq(kube_cas_update(K, LEASES "/gpugate", acquire, &b, NULL, &res, &d), 0);
	cr_assert_eq(res.outcome, KUBE_CAS_ABORTED, "b waits for a's lease");
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(res.object, "spec"),
							   "holderIdentity")),
			 "gpugate-a");
	kube_cas_result_release(&res);

	a.now = 110;
	cr_assert_eq(kube_cas_update(K, LEASES "/gpugate", acquire, &a, NULL, &res, &d), 0);
	cr_assert_eq(res.outcome, KUBE_CAS_UPDATED, "a renews");
	kube_cas_result_release(&res);

	b.now = 126; /* a did not renew for 16 s */
	cr_assert_eq(kube_cas_update(K, LEASES "/gpugate", acquire, &b, NULL, &res, &d), 0);
	cr_assert_eq(res.outcome, KUBE_CAS_UPDATED, "b takes the expired lease");
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(res.object, "spec"),
							   "holderIdentity")),
			 "gpugate-b");
	kube_cas_result_release(&res);
	cr_assert_eq(diag_count(&d), 0);
}

/* ---- the backoff (pure: no server) ------------------------------------- */

Test(cas_backoff, stays_within_its_bounds_and_doubles)
{
	struct kube_cas_opts o = {.backoff_min_ms = 8, .backoff_max_ms = 100};
	uint64_t rng = 7;

	for (unsigned retry = 0; retry < 12; retry++) {
		unsigned c = 8u << (retry < 4 ? retry : 4), lo = ~0u, hi = 0;

		if (c > 100)
			c = 100;
		for (int i = 0; i < 2000; i++) {
			unsigned w = kube_cas_backoff_ms(&o, retry, &rng);

			lo = w < lo ? w : lo;
			hi = w > hi ? w : hi;
		}
		cr_assert_eq(lo, c / 2, "retry %u: lowest %u, bound %u", retry, lo, c / 2);
		cr_assert_eq(hi, c, "retry %u: highest %u, bound %u", retry, hi, c);
	}
	/* Defaults: 5 ms doubling to 200 ms. */
	rng = 1;
	for (int i = 0; i < 100; i++) {
		cr_assert_leq(kube_cas_backoff_ms(NULL, 0, &rng), KUBE_CAS_BACKOFF_MIN_MS);
		cr_assert_leq(kube_cas_backoff_ms(NULL, 30, &rng), KUBE_CAS_BACKOFF_MAX_MS);
		cr_assert_geq(kube_cas_backoff_ms(NULL, 30, &rng), KUBE_CAS_BACKOFF_MAX_MS / 2);
	}
}

Test(cas_backoff, the_seed_decides_the_waits)
{
	uint64_t a = 42, b = 42, c = 43, zero = 0;
	unsigned same = 0, differ = 0;

	for (int i = 0; i < 64; i++) {
		unsigned wa = kube_cas_backoff_ms(NULL, 6, &a);

		same += wa == kube_cas_backoff_ms(NULL, 6, &b);
		differ += wa != kube_cas_backoff_ms(NULL, 6, &c);
	}
	cr_assert_eq(same, 64, "the same seed, the same waits");
	cr_assert_gt(differ, 32, "another seed, other waits");
	kube_cas_backoff_ms(NULL, 0, &zero);
	cr_assert_neq(zero, 0, "a zero state is replaced");
}

/* kube_get(), the lists' request, needs no fake to fail fast. */
Test(client_offline, a_dead_api_server_is_an_error_not_a_hang)
{
	struct kube_config c = {.server = (char *)"https://127.0.0.1:1",
				.insecure = true};
	struct kube *k;
	struct diag d;
	long status = 0;
	char *body = NULL;
	size_t len;

	diag_init(&d);
	k = kube_new(&c, &d);
	cr_assert_not_null(k);
	cr_assert_eq(kube_get(k, "/api/v1/pods", 1024, &status, &body, &len, NULL, &d), -1);
	cr_assert_null(body);
	cr_assert_not_null(strstr(diag_text(&d), "GET /api/v1/pods: "), "%s",
			   diag_text(&d));
	kube_free(k);
}
