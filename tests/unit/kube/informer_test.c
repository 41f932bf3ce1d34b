/*
 * The informer (kube/informer.c) where no API answers: what it asks for,
 * how it backs off, how soon it stops.  Against a scripted API it runs
 * under the feed in tests/integration/test_watch.py, and against a real
 * kube-apiserver in tests/e2e.
 */
#include "base/diag.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/informer.h"
#include "tests/unit/kube/log_capture.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
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
