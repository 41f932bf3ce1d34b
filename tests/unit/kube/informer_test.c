/*
 * The informer (kube/informer.c) where no API answers: what it asks for,
 * how it backs off, how soon it stops; and against the fake API
 * (tests/integration/fakekube.py, fakekube_proc.h): pages of any shape,
 * watches that answer errors.  Under the feed it runs in
 * tests/integration/test_watch.py, and against a real kube-apiserver in
 * tests/e2e.
 */
#include "base/diag.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/informer.h"
#include "tests/unit/kube/fakekube_proc.h"
#include "tests/unit/kube/log_capture.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A listening socket on 127.0.0.1 that never accepts (the kernel completes
 * the TCP handshake, nobody answers the TLS one).  Returns its fd. */
static int silent_listener(unsigned *port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	cr_assert_geq(fd, 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(listen(fd, 8), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	*port = ntohs(sa.sin_port);
	return fd;
}

/* A port on 127.0.0.1 that nothing listens on (bound, then closed). */
static unsigned dead_port(void)
{
	unsigned port;

	close(silent_listener(&port));
	return port;
}

/* What the callbacks saw. */
struct seen {
	atomic_int objects, deletes, begins, ends, ups;
};

static void seen_object(void *ctx, const json_t *obj)
{
	(void)obj;
	atomic_fetch_add(&((struct seen *)ctx)->objects, 1);
}

static void seen_delete(void *ctx, const json_t *obj)
{
	(void)obj;
	atomic_fetch_add(&((struct seen *)ctx)->deletes, 1);
}

static void seen_begin(void *ctx)
{
	atomic_fetch_add(&((struct seen *)ctx)->begins, 1);
}

static void seen_end(void *ctx, bool first)
{
	(void)first;
	atomic_fetch_add(&((struct seen *)ctx)->ends, 1);
}

static void seen_connected(void *ctx, bool up)
{
	(void)up;
	atomic_fetch_add(&((struct seen *)ctx)->ups, 1);
}

static struct informer_config config(struct kube_config *kc, char *server,
				     struct seen *s)
{
	*kc = (struct kube_config){.server = server, .insecure = true,
				   .token = (char *)"t"};
	return (struct informer_config){
		.kube = kc, .name = "nodes", .path = "/api/v1/nodes",
		.on = {.object = seen_object, .delete = seen_delete,
		       .relist_begin = seen_begin, .relist_end = seen_end,
		       .connected = seen_connected, .ctx = s},
	};
}

static void nothing_was_seen(struct seen *s)
{
	cr_assert_eq(atomic_load(&s->objects) + atomic_load(&s->deletes) +
			     atomic_load(&s->begins) + atomic_load(&s->ends) +
			     atomic_load(&s->ups),
		     0, "no callback without an answer");
}

TestSuite(informer, .fini = log_capture_stop);

/* ---- tests --------------------------------------------------------------- */

Test(informer, refuses_a_config_it_cannot_serve)
{
	static char long_selector[1100];
	static const struct {
		const char *name, *path, *label;
		const char *error;
	} cases[] = {
		{NULL, "/api/v1/nodes", NULL, "informer: no name\n"},
		{"nodes", "api/v1/nodes", NULL,
		 "informer nodes: the path must start with /, have no query and be "
		 "at most 1024 bytes\n"},
		{"nodes", "/api/v1/nodes?watch=1", NULL,
		 "informer nodes: the path must start with /, have no query and be "
		 "at most 1024 bytes\n"},
		{"nodes", "/api/v1/nodes", long_selector,
		 "informer nodes: labelSelector over 1024 bytes\n"},
	};
	struct kube_config kc;
	struct seen s = {0};

	memset(long_selector, 'a', sizeof(long_selector) - 1);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct informer_config c = config(&kc, (char *)"https://127.0.0.1:1", &s);
		struct informer *inf = NULL;
		struct diag d;

		c.name = cases[i].name;
		c.path = cases[i].path;
		c.label_selector = cases[i].label;
		diag_init(&d);
		cr_expect_eq(informer_start(&c, &inf, &d), -1, "case %zu", i);
		cr_expect_null(inf, "case %zu", i);
		cr_expect_str_eq(diag_text(&d), cases[i].error, "case %zu", i);
	}
	informer_stop(NULL);
}

Test(informer, retries_a_dead_api_with_backoff_and_its_selectors)
{
	char server[64];
	struct kube_config kc;
	struct seen s = {0};
	struct informer_config c;
	struct informer *inf;
	struct diag d;
	char *log = NULL;
	double t0, took;

	snprintf(server, sizeof(server), "https://127.0.0.1:%u", dead_port());
	c = config(&kc, server, &s);
	c.label_selector = "gpugate.io/tenant";
	c.field_selector = "status.phase=Running";
	c.page_size = 7;
	log_capture_start();
	diag_init(&d);
	cr_assert_eq(informer_start(&c, &inf, &d), 0, "%s", diag_text(&d));
	/* Failures at about 0 s, 0.5 s and 1.5 s; the next one at 3.5 s. */
	for (int i = 0; i < 100; i++) {
		free(log);
		log = log_captured();
		if (log_count(log, "msg=\"cannot list\"") >= 3)
			break;
		usleep(50 * 1000);
	}
	cr_assert_eq(log_count(log, "msg=\"cannot list\""), 3, "%s", log);
	cr_assert_not_null(strstr(log, "level=warn msg=\"cannot list\" kind=nodes "
				       "error=\"GET /api/v1/nodes?labelSelector="
				       "gpugate.io%2Ftenant&fieldSelector=status.phase"
				       "%3DRunning&limit=7: "),
			   "%s", log);
	cr_assert_not_null(strstr(log, "\" retry_ms=500\n"), "%s", log);
	cr_assert_not_null(strstr(log, "\" retry_ms=1000\n"), "%s", log);
	cr_assert_not_null(strstr(log, "\" retry_ms=2000\n"), "%s", log);
	cr_assert_not(informer_synced(inf));
	cr_assert_not(informer_connected(inf));
	nothing_was_seen(&s);
	/* It is in its 2 s wait now: a stop ends it at once. */
	t0 = now_s();
	informer_stop(inf);
	took = now_s() - t0;
	cr_assert_lt(took, 0.5, "stopped after %.2f s", took);
	free(log);
}

Test(informer, stops_within_a_second_while_a_list_hangs)
{
	char server[64];
	struct kube_config kc;
	struct seen s = {0};
	struct informer_config c;
	struct informer *inf;
	struct diag d;
	unsigned port;
	int fd = silent_listener(&port);
	char *log;
	double t0, took;

	snprintf(server, sizeof(server), "https://127.0.0.1:%u", port);
	c = config(&kc, server, &s);
	log_capture_start();
	diag_init(&d);
	cr_assert_eq(informer_start(&c, &inf, &d), 0, "%s", diag_text(&d));
	usleep(300 * 1000);
	cr_assert_not(informer_synced(inf));
	t0 = now_s();
	informer_stop(inf);
	took = now_s() - t0;
	cr_assert_lt(took, 1.6, "stopped after %.2f s", took);
	nothing_was_seen(&s);
	log = log_captured();
	cr_assert_eq(log_count(log, "cannot list"), 0, "a stop is no failure: %s", log);
	free(log);
	close(fd);
}

Test(informer, several_are_stopped_in_about_a_second_in_all)
{
	char server[64];
	struct kube_config kc;
	struct seen s = {0};
	struct informer *inf[3];
	unsigned port;
	int fd = silent_listener(&port);
	double t0, took;

	snprintf(server, sizeof(server), "https://127.0.0.1:%u", port);
	for (int i = 0; i < 3; i++) {
		struct informer_config c = config(&kc, server, &s);
		struct diag d;

		diag_init(&d);
		cr_assert_eq(informer_start(&c, &inf[i], &d), 0, "%s", diag_text(&d));
	}
	usleep(300 * 1000);
	t0 = now_s();
	for (int i = 0; i < 3; i++)
		informer_cancel(inf[i]);
	for (int i = 0; i < 3; i++)
		informer_stop(inf[i]);
	took = now_s() - t0;
	cr_assert_lt(took, 1.6, "three stopped after %.2f s", took);
	close(fd);
}

/* ---- against the fake API (tests/integration/fakekube.py) ---------------- */

static struct fakekube F;

static void fake_start(void)
{
	struct diag d;

	diag_init(&d);
	cr_assert_eq(fakekube_start(&F, &d), 0, "the fake API did not start: %s",
		     diag_text(&d));
}

static void fake_stop(void)
{
	log_capture_stop();
	fakekube_stop(&F);
}

static void call(const char *json)
{
	struct diag d;

	diag_init(&d);
	cr_assert_eq(fakekube_call(&F, json, &d), 0, "%s: %s", json, diag_text(&d));
}

/* What the object callback saw, in order. */
struct record {
	pthread_mutex_t mu;
	int n;
	char names[16][64];
	bool managed_fields;    /* some object still had metadata.managedFields */
	char spec_s[64];        /* spec.s of the first object that had one */
	struct seen counts;
};

static void record_object(void *ctx, const json_t *obj)
{
	struct record *r = ctx;
	const json_t *meta = json_object_get(obj, "metadata");
	const char *name = json_string_value(json_object_get(meta, "name"));
	const char *s = json_string_value(
		json_object_get(json_object_get(obj, "spec"), "s"));

	pthread_mutex_lock(&r->mu);
	if (r->n < 16)
		snprintf(r->names[r->n], sizeof(r->names[0]), "%s", name ? name : "?");
	r->n++;
	if (json_object_get(meta, "managedFields"))
		r->managed_fields = true;
	if (s && !r->spec_s[0])
		snprintf(r->spec_s, sizeof(r->spec_s), "%s", s);
	pthread_mutex_unlock(&r->mu);
}

static int recorded(struct record *r)
{
	int n;

	pthread_mutex_lock(&r->mu);
	n = r->n;
	pthread_mutex_unlock(&r->mu);
	return n;
}

static void record_begin(void *ctx)
{
	atomic_fetch_add(&((struct record *)ctx)->counts.begins, 1);
}

static void record_end(void *ctx, bool first)
{
	(void)first;
	atomic_fetch_add(&((struct record *)ctx)->counts.ends, 1);
}

static struct informer_config fake_config(const char *name, unsigned page_size,
					  struct record *r)
{
	return (struct informer_config){
		.kube = &F.cfg, .name = name, .path = "/api/v1/pods",
		.page_size = page_size,
		.on = {.object = record_object, .relist_begin = record_begin,
		       .relist_end = record_end, .ctx = r},
	};
}

/* Polls cond every 20 ms, for up to ms. */
#define WAIT_FOR(ms, cond)                                                     \
	do {                                                                   \
		for (int w_ = 0; w_ < (ms) / 20 && !(cond); w_++)              \
			usleep(20 * 1000);                                     \
	} while (0)

TestSuite(informer_api, .init = fake_start, .fini = fake_stop, .timeout = 60);

/* A page is read one item at a time (kube/informer.c, "a page, one item at
 * a time"): members in any order, white space anywhere, strings that hold
 * brackets and quotes, values nobody reads; metadata.managedFields is left
 * out of every object. */
Test(informer_api, reads_pages_of_any_shape_one_item_at_a_time)
{
	static const char page1[] =
		" {\n \"items\" : [\n"
		"  {\"metadata\": {\"name\": \"a\", \"uid\": \"u-a\", \"managedFields\": "
		"[{\"manager\": \"x\", \"fieldsV1\": {\"f:spec\": {\"{\": {}}}}]},\n"
		"   \"spec\": {\"s\": \"]}\\\"\\\\[{\", \"n\": [1, [2, {\"x\": null}], -0.5e3]}} ,\n"
		"  {\"metadata\":{\"name\":\"b\",\"uid\":\"u-b\"}}\t] ,\r\n"
		" \"kind\": \"PodList\", \"other\": [1, \"x]\", {\"y\": true}], \"n\": -1.5e3,"
		" \"t\": true, \"z\": null,\n"
		" \"metadata\": { \"resourceVersion\": \"77\", \"continue\": \"page-2\" } }\n";
	static const char page2[] =
		"{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":"
		"{\"resourceVersion\":\"77\"},\"items\":[{\"metadata\":{\"name\":\"c\","
		"\"uid\":\"u-c\"}}]}";
	struct record r = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct informer_config c = fake_config("pods", 13, &r);
	struct informer *inf;
	json_t *args;
	char *text;
	struct diag d;

	for (int i = 0; i < 2; i++) {
		args = json_pack("{s:s, s:[s, s, s]}", "call", "raw_list", "args", "pods",
				 "13", i ? page2 : page1);
		text = json_dumps(args, 0);
		call(text);
		free(text);
		json_decref(args);
	}
	diag_init(&d);
	cr_assert_eq(informer_start(&c, &inf, &d), 0, "%s", diag_text(&d));
	WAIT_FOR(10000, informer_synced(inf));
	cr_assert(informer_synced(inf));
	cr_assert_eq(recorded(&r), 3);
	cr_expect_str_eq(r.names[0], "a");
	cr_expect_str_eq(r.names[1], "b");
	cr_expect_str_eq(r.names[2], "c");
	cr_expect_str_eq(r.spec_s, "]}\"\\[{");
	cr_expect_not(r.managed_fields, "managedFields is not built");
	cr_expect_eq(atomic_load(&r.counts.begins), 1);
	cr_expect_eq(atomic_load(&r.counts.ends), 1);
	diag_init(&d);
	cr_expect_eq(fakekube_stat(&F, "LIST pods", &d), 2,
		     "the continue token was read after the items %s", diag_text(&d));
	informer_stop(inf);
}

/* Every page that is not a list fails the list (and the next one is read);
 * each informer asks with its own page size, so that it gets its own bad
 * page. */
Test(informer_api, refuses_pages_that_are_not_lists)
{
	static char long_token[5200];
	static const struct {
		const char *body, *error;
	} cases[] = {
		{"[]", "not a list"},
		{"{}", "not a list"},
		{"{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"1\"}}", "not a list"},
		{"{\"items\":{}}", "not a list"},
		{"{\"items\":[{\"a\":1} {\"b\":2}]}", "not a list"},
		{"{\"items\":[]} {}", "not a list"},
		{"{\"items\":[{\"a\":\"b", "not a list"},
		{"{\"items\":[],\"items\":[]}", "not a list"},
		{"{\"items\":[{\"a\":1,\"a\":2}]}",
		 "item 0 of the page: duplicate object key \\\"a\\\" (line 1, column 8)"},
		{"{\"items\":[{\"a\":1},{\"b\":tru}]}", "item 1 of the page: invalid literal (line 1, column 6)"},
		{"{\"metadata\":{\"resourceVersion\":}, \"items\":[]}", "not a list"},
		{long_token, "continue token too long"},
	};
	enum { N = sizeof(cases) / sizeof(cases[0]) };
	struct record r[N];
	struct informer *inf[N];
	char *log = NULL;

	snprintf(long_token, sizeof(long_token), "{\"metadata\":{\"continue\":\"%05000d\"},"
						 "\"items\":[]}", 0);
	log_capture_start();
	for (int i = 0; i < N; i++) {
		char name[16], limit[16];
		struct informer_config c;
		json_t *args;
		char *text;
		struct diag d;

		memset(&r[i], 0, sizeof(r[i]));
		pthread_mutex_init(&r[i].mu, NULL);
		snprintf(name, sizeof(name), "bad%d", i);
		snprintf(limit, sizeof(limit), "%d", 100 + i);
		args = json_pack("{s:s, s:[s, s, s]}", "call", "raw_list", "args", "pods",
				 limit, cases[i].body);
		text = json_dumps(args, 0);
		call(text);
		free(text);
		json_decref(args);
		c = fake_config(name, 100 + (unsigned)i, &r[i]);
		diag_init(&d);
		cr_assert_eq(informer_start(&c, &inf[i], &d), 0, "%s", diag_text(&d));
	}
	/* Each fails once, then lists the fake's (empty) pods 0.5 s later. */
	for (int i = 0; i < N; i++) {
		WAIT_FOR(10000, informer_synced(inf[i]));
		cr_expect(informer_synced(inf[i]), "informer %d", i);
	}
	log = log_captured();
	for (int i = 0; i < N; i++) {
		char want[200];

		snprintf(want, sizeof(want),
			 "level=warn msg=\"cannot list\" kind=bad%d error=\"%s\" retry_ms=500\n",
			 i, cases[i].error);
		cr_expect_not_null(strstr(log, want), "case %d: no line %s in:\n%s", i, want, log);
		cr_expect_eq(atomic_load(&r[i].counts.ends), 1, "case %d", i);
	}
	cr_expect_eq(log_count(log, "msg=\"cannot list\""), N, "%s", log);
	for (int i = 0; i < N; i++)
		informer_cancel(inf[i]);
	for (int i = 0; i < N; i++)
		informer_stop(inf[i]);
	free(log);
}

/* An API that answers every watch with an ERROR event (not 410) is asked
 * again with the backoff of a failed connection, not at once; a watch that
 * opens and stays open resets it. */
Test(informer_api, backs_off_watches_that_answer_errors)
{
	struct record r = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct informer_config c = fake_config("pods", 0, &r);
	struct informer *inf;
	struct diag d;
	char *log = NULL;
	double t0, took;
	const char *a, *b, *e;
	size_t third;

	call("{\"call\": \"error_watches\", \"args\": [\"pods\", 500]}");
	log_capture_start();
	diag_init(&d);
	t0 = now_s();
	cr_assert_eq(informer_start(&c, &inf, &d), 0, "%s", diag_text(&d));
	/* Errors at about 0 s, 0.5 s and 1.5 s; the next watch at 3.5 s. */
	WAIT_FOR(8000, (free(log), log = log_captured(), log_count(log, "msg=\"watch error\"") >= 3));
	took = now_s() - t0;
	cr_assert_eq(log_count(log, "msg=\"watch error\""), 3, "%s", log);
	cr_expect_geq(took, 1.3, "three errors after %.2f s", took);
	diag_init(&d);
	cr_expect_eq(fakekube_stat(&F, "WATCH pods", &d), 3, "%s", diag_text(&d));
	a = strstr(log, "level=warn msg=\"watch error\" kind=pods code=500 retry_ms=500\n");
	b = strstr(log, "level=warn msg=\"watch error\" kind=pods code=500 retry_ms=1000\n");
	e = strstr(log, "level=warn msg=\"watch error\" kind=pods code=500 retry_ms=2000\n");
	cr_assert(a && b && e && a < b && b < e, "%s", log);
	third = (size_t)(e - log); /* log is read again below */
	cr_expect(informer_synced(inf), "the list was read");

	/* The API mends: the next watch opens and stays open. */
	call("{\"call\": \"error_watches\", \"args\": [\"pods\", null]}");
	WAIT_FOR(5000, informer_connected(inf));
	cr_assert(informer_connected(inf));
	call("{\"call\": \"event\", \"args\": [\"pods\", \"ADDED\", "
	     "{\"metadata\": {\"name\": \"x\", \"namespace\": \"n\", \"uid\": \"u-x\"}}]}");
	WAIT_FOR(5000, recorded(&r) == 1);
	cr_assert_eq(recorded(&r), 1);

	/* Open, it reset the backoff: cut, it is retried after 0.5 s; the
	 * watch that then fails at once continues from there (1 s). */
	call("{\"call\": \"error_watches\", \"args\": [\"pods\", 500]}");
	call("{\"call\": \"drop\", \"args\": [\"pods\"]}");
	WAIT_FOR(5000, (free(log), log = log_captured(), log_count(log, "msg=\"watch error\"") >= 4));
	cr_assert_eq(log_count(log, "msg=\"watch error\""), 4, "%s", log);
	cr_expect(strstr(log, "msg=\"watch broke\" kind=pods status=-1") &&
			  strstr(strstr(log, "msg=\"watch broke\" kind=pods status=-1"),
				 "retry_ms=500\n"),
		  "%s", log);
	cr_expect_not_null(strstr(log + third + 1, "msg=\"watch error\" kind=pods "
						    "code=500 retry_ms=1000\n"),
			   "%s", log);
	informer_stop(inf);
	free(log);
}

/* Issue #32: a new leader asks for a whole list before it decides; the
 * watch open then is cut, the list is read whole, and only then is the
 * ticket served; a ticket asked again while pending is the same one. */
Test(informer_api, a_resync_lists_again_and_serves_its_ticket_after)
{
	struct record r = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct informer_config c = fake_config("pods", 50, &r);
	struct informer *inf;
	struct diag d;
	uint64_t t1, t2, t3;
	long lists;

	diag_init(&d);
	cr_assert_eq(informer_start(&c, &inf, &d), 0, "%s", diag_text(&d));
	WAIT_FOR(10000, informer_synced(inf) && informer_connected(inf));
	cr_assert(informer_connected(inf));
	cr_assert_eq(atomic_load(&r.counts.begins), 1);
	diag_init(&d);
	lists = fakekube_stat(&F, "LIST pods", &d);
	t1 = informer_resync(inf);
	t2 = informer_resync(inf);
	cr_assert_eq(t1, t2, "a pending ticket is asked again, not a new one");
	WAIT_FOR(10000, informer_resynced(inf, t1));
	cr_assert(informer_resynced(inf, t1));
	cr_assert_eq(atomic_load(&r.counts.begins), 2);
	cr_assert_eq(atomic_load(&r.counts.ends), 2);
	diag_init(&d);
	cr_assert_eq(fakekube_stat(&F, "LIST pods", &d), lists + 1, "%s", diag_text(&d));
	/* Served: the next ask is a new ticket, not served before its list. */
	WAIT_FOR(10000, informer_connected(inf));
	t3 = informer_resync(inf);
	cr_assert_gt(t3, t1);
	WAIT_FOR(10000, informer_resynced(inf, t3));
	cr_assert(informer_resynced(inf, t3));
	cr_assert_eq(atomic_load(&r.counts.begins), 3);
	informer_stop(inf);
}
