/* controllers/worker.c: a controller's thread on base/thread.h, its
 * leader-only turns and its log-once error. */
#include "base/diag.h"
#include "controllers/worker.h"
#include "kube/config.h"
#include "tests/unit/kube/log_capture.h"

#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long long mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct ctl {
	atomic_int turns, idles;
	atomic_bool leading;
	struct worker w;
	atomic_bool had_client; /* a turn found its API client */
};

static unsigned turn(void *arg)
{
	struct ctl *c = arg;

	if (c->w.kube)
		atomic_store(&c->had_client, true);
	atomic_fetch_add(&c->turns, 1);
	return 5;
}

static void idle(void *arg)
{
	struct ctl *c = arg;

	atomic_fetch_add(&c->idles, 1);
}

static bool leading(void *ctx)
{
	struct ctl *c = ctx;

	return atomic_load(&c->leading);
}

static bool wait_for(atomic_int *v, int n)
{
	for (long long until = mono_ms() + 2000; mono_ms() < until; usleep(1000))
		if (atomic_load(v) >= n)
			return true;
	return atomic_load(v) >= n;
}

/* A client of an API nobody serves: the worker never calls it here. */
static char server[] = "https://127.0.0.1:9";
static char source[] = "test";
static const struct kube_config kc = {.server = server, .insecure = true,
				      .source = source};

static void start(struct ctl *c, bool (*lead)(void *), unsigned idle_ms)
{
	struct diag d;

	diag_init(&d);
	cr_assert_eq(worker_start(&c->w,
				  &(struct worker_config){.name = "test", .kube = &kc,
							  .turn = turn, .idle = idle,
							  .arg = c, .idle_ms = idle_ms,
							  .leading = lead,
							  .leading_ctx = c},
				  &d),
		     0, "%s", diag_text(&d));
}

Test(worker, turns_only_while_leading_and_idles_otherwise)
{
	struct ctl *c = calloc(1, sizeof(*c));

	start(c, leading, 5);
	cr_assert(wait_for(&c->idles, 3), "not leading: idle turns");
	cr_assert_eq(atomic_load(&c->turns), 0, "not leading: no turn");
	atomic_store(&c->leading, true);
	cr_assert(wait_for(&c->turns, 3), "leading: turns");
	cr_assert(atomic_load(&c->had_client), "a turn has its API client");
	atomic_store(&c->leading, false);
	{
		int idles = atomic_load(&c->idles);

		cr_assert(wait_for(&c->idles, idles + 2), "not leading again: idle");
	}
	{
		int turns = atomic_load(&c->turns);

		usleep(30000);
		cr_assert_eq(atomic_load(&c->turns), turns, "no turn while not leading");
	}
	worker_stop(&c->w);
	cr_assert_null(c->w.kube, "the client freed");
	free(c);
}

Test(worker, without_a_lease_every_turn_is_a_leaders)
{
	struct ctl *c = calloc(1, sizeof(*c));

	start(c, NULL, 5);
	cr_assert(wait_for(&c->turns, 3));
	cr_assert_eq(atomic_load(&c->idles), 0);
	worker_stop(&c->w);
	free(c);
}

Test(worker, a_stop_ends_an_idle_sleep_at_once)
{
	struct ctl *c = calloc(1, sizeof(*c));
	long long t0, took;

	start(c, leading, 60000);
	cr_assert(wait_for(&c->idles, 1));
	usleep(20000);
	cr_assert_not(worker_stopping(&c->w));
	t0 = mono_ms();
	worker_stop(&c->w);
	took = mono_ms() - t0;
	cr_assert_lt(took, 200, "worker_stop took %lld ms", took);
	cr_assert_eq(atomic_load(&c->idles), 1);
	free(c);
}

Test(worker, an_error_is_logged_once_until_it_changes_or_recovers)
{
	struct worker w;
	char *log;

	memset(&w, 0, sizeof(w));
	log_capture_start();
	worker_failed(&w, "things not synced", "GET /x: 500");
	worker_failed(&w, "things not synced", "GET /x: 500");
	worker_failed(&w, "things not synced", "GET /x: 503");
	worker_recovered(&w);
	worker_failed(&w, "things not synced", "GET /x: 503");
	log = log_captured();
	log_capture_stop();
	cr_assert_eq(log_count(log, "level=warn msg=\"things not synced\" "
				    "error=\"GET /x: 500\"\n"), 1, "%s", log);
	cr_assert_eq(log_count(log, "level=warn msg=\"things not synced\" "
				    "error=\"GET /x: 503\"\n"), 2, "%s", log);
	free(log);
}
