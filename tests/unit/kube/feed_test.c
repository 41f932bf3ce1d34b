/*
 * The usage feed (kube/feed.c) where no API answers: what it tells the
 * store before anything is listed.  What it does with a live API runs in
 * tests/integration/test_watch.py and tests/e2e.
 */
#include "base/diag.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/feed.h"
#include "usage/backend.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

/* A usage store that records what it was told. */
struct recorder {
	struct usage_store store;
	atomic_int calls;
	atomic_bool first_was_not_watching;
	atomic_int charges;
};

static void rec_set_watching(struct usage_store *u, bool up)
{
	struct recorder *r = (struct recorder *)u;

	if (atomic_fetch_add(&r->calls, 1) == 0)
		atomic_store(&r->first_was_not_watching, !up);
}

static void rec_observe(struct usage_store *u, const struct usage_item *it)
{
	(void)it;
	atomic_fetch_add(&((struct recorder *)u)->calls, 1);
}

static void rec_forget(struct usage_store *u, const char *uid)
{
	(void)uid;
	atomic_fetch_add(&((struct recorder *)u)->calls, 1);
}

static void rec_relist(struct usage_store *u, enum usage_kind kind)
{
	(void)kind;
	atomic_fetch_add(&((struct recorder *)u)->calls, 1);
}

static const struct usage_backend recorder_backend = {
	.name = "recorder",
	.observe = rec_observe,
	.forget = rec_forget,
	.relist_begin = rec_relist,
	.relist_end = rec_relist,
	.set_watching = rec_set_watching,
};

static int count_charge(void *ctx, const json_t *obj, enum usage_kind kind,
			struct arena *a, struct usage_item *out)
{
	(void)obj, (void)kind, (void)a, (void)out;
	atomic_fetch_add(&((struct recorder *)ctx)->charges, 1);
	return -1;
}

/* The feed's "cannot list" lines are not this test's business. */
static void quiet(void)
{
	int fd = open("/dev/null", O_WRONLY);

	cr_assert_geq(fd, 0);
	dup2(fd, STDERR_FILENO);
	close(fd);
}

TestSuite(feed, .init = quiet);

Test(feed, tells_the_store_it_is_not_watched_before_anything_else)
{
	struct recorder r = {.store = {.be = &recorder_backend}};
	struct kube_config kc = {.server = (char *)"https://127.0.0.1:1",
				 .insecure = true};
	struct feed_config fc = {.kube = &kc, .usage = &r.store,
				 .charge = count_charge, .charge_ctx = &r};
	struct feed *f;
	struct diag d;

	diag_init(&d);
	cr_assert_eq(feed_start(&fc, &f, &d), 0, "%s", diag_text(&d));
	cr_assert_geq(atomic_load(&r.calls), 1, "told at start, not later");
	cr_assert(atomic_load(&r.first_was_not_watching));
	usleep(700 * 1000); /* two failed lists of each kind */
	cr_assert_not(feed_synced(f));
	cr_assert_not(feed_connected(f));
	feed_stop(f);
	cr_assert_eq(atomic_load(&r.calls), 1, "nothing but the watching state");
	cr_assert_eq(atomic_load(&r.charges), 0);
}

Test(feed, refuses_a_config_without_store_or_charge_rule)
{
	struct recorder r = {.store = {.be = &recorder_backend}};
	struct kube_config kc = {.server = (char *)"https://127.0.0.1:1"};
	struct feed_config fc = {.kube = &kc, .usage = &r.store};
	struct feed *f = NULL;
	struct diag d;

	diag_init(&d);
	cr_assert_eq(feed_start(&fc, &f, &d), -1);
	cr_assert_null(f);
	cr_assert_str_eq(diag_text(&d), "feed: no usage store or no charge rule\n");
	cr_assert_eq(atomic_load(&r.calls), 0);
	feed_stop(NULL);
}
