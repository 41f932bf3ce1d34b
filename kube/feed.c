#include "kube/feed.h"

#include "base/arena.h"
#include "base/diag.h"
#include "base/log.h"
#include "kube/informer.h"
#include "usage/usage.h"

#include <pthread.h>
#include <stdlib.h>

/* What the feed watches, by enum usage_kind: every object of each kind (no
 * label selector, see feed.h). */
static const struct {
	const char *name, *path;
	bool optional;
} watched[USAGE_KINDS] = {
	[USAGE_PODS] = {"pods", "/api/v1/pods", false},
	[USAGE_JOBS] = {"jobs", "/apis/batch/v1/jobs", false},
	/* A cluster without resource.k8s.io/v1 has no claims. */
	[USAGE_CLAIMS] = {"claims", "/apis/resource.k8s.io/v1/resourceclaims", true},
};

struct feed_kind {
	struct feed *f;
	enum usage_kind kind;
	struct informer *inf;
};

struct feed {
	struct feed_config cfg;
	struct feed_kind kinds[USAGE_KINDS];
	pthread_mutex_t mu;        /* up[] and the store's watching state */
	bool up[USAGE_KINDS];
};

static const char *kind_name(const struct feed_kind *k)
{
	return watched[k->kind].name;
}

static void on_object(void *ctx, const json_t *obj)
{
	struct feed_kind *k = ctx;
	struct feed *f = k->f;
	struct usage_item it;
	struct arena a;

	arena_init(&a);
	if (f->cfg.charge(f->cfg.charge_ctx, obj, k->kind, &a, &it) == 0) {
		if (it.active)
			usage_observe(f->cfg.usage, &it);
		else
			usage_forget(f->cfg.usage, it.uid);
	}
	arena_release(&a);
}

static void on_delete(void *ctx, const json_t *obj)
{
	struct feed_kind *k = ctx;
	const char *uid = json_string_value(
		json_object_get(json_object_get(obj, "metadata"), "uid"));

	if (uid)
		usage_forget(k->f->cfg.usage, uid);
}

static void on_relist_begin(void *ctx)
{
	struct feed_kind *k = ctx;

	usage_relist_begin(k->f->cfg.usage, k->kind);
}

static void on_relist_end(void *ctx, bool first)
{
	struct feed_kind *k = ctx;

	usage_relist_end(k->f->cfg.usage, k->kind);
	if (first)
		log_event(LOG_INFO, "msg=\"usage synced\" kind=%s entries=%zu",
			  kind_name(k), usage_entries(k->f->cfg.usage));
}

/* The store lets reservations expire only while every watch is open: the
 * flags and the store change together, under the lock, so that the
 * threads never leave the store with a stale state. */
static void on_connected(void *ctx, bool up)
{
	struct feed_kind *k = ctx;
	struct feed *f = k->f;
	bool all = true;

	pthread_mutex_lock(&f->mu);
	f->up[k->kind] = up;
	for (int i = 0; i < USAGE_KINDS; i++)
		all = all && f->up[i];
	usage_set_watching(f->cfg.usage, all);
	pthread_mutex_unlock(&f->mu);
}

int feed_start(const struct feed_config *cfg, struct feed **out,
	       struct diag *d)
{
	struct feed *f;

	if (!cfg->usage || !cfg->charge) {
		diag_addf(d, "feed: no usage store or no charge rule");
		return -1;
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		diag_addf(d, "out of memory");
		return -1;
	}
	f->cfg = *cfg;
	pthread_mutex_init(&f->mu, NULL);
	/* Nothing is watched yet: reservations wait. */
	usage_set_watching(cfg->usage, false);
	for (int i = 0; i < USAGE_KINDS; i++) {
		struct feed_kind *k = &f->kinds[i];
		struct informer_config ic = {
			.kube = cfg->kube,
			.name = watched[i].name,
			.path = watched[i].path,
			.idle_seconds = cfg->idle_seconds,
			.optional = watched[i].optional,
			.unserved_retry_ms = cfg->unserved_retry_ms,
			.on = {.object = on_object, .delete = on_delete,
			       .relist_begin = on_relist_begin,
			       .relist_end = on_relist_end,
			       .connected = on_connected, .ctx = k},
		};

		k->f = f;
		k->kind = (enum usage_kind)i;
		if (informer_start(&ic, &k->inf, d) < 0)
			goto fail;
	}
	*out = f;
	return 0;
fail:
	feed_stop(f);
	return -1;
}

bool feed_synced(struct feed *f)
{
	for (int i = 0; i < USAGE_KINDS; i++)
		if (!informer_synced(f->kinds[i].inf))
			return false;
	return true;
}

bool feed_connected(struct feed *f)
{
	for (int i = 0; i < USAGE_KINDS; i++)
		if (!informer_connected(f->kinds[i].inf))
			return false;
	return true;
}

void feed_stop(struct feed *f)
{
	if (!f)
		return;
	/* All at once: the stop takes about a second, not three. */
	for (int i = 0; i < USAGE_KINDS; i++)
		informer_cancel(f->kinds[i].inf);
	for (int i = 0; i < USAGE_KINDS; i++)
		informer_stop(f->kinds[i].inf);
	pthread_mutex_destroy(&f->mu);
	free(f);
}
