#include "kube/feed.h"

#include "base/arena.h"
#include "base/diag.h"
#include "base/log.h"
#include "kube/informer.h"
#include "usage/usage.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* The kinds of usage, then Nodes (with an inventory only),
 * PriorityClasses (with a priorities table only), PersistentVolumeClaims
 * (with a claims table only) and the DRA kinds of the pool (with an
 * inventory and the DRA readers only). */
#define FEED_NODES USAGE_KINDS
#define FEED_PRIORITIES (USAGE_KINDS + 1)
#define FEED_PVCS (USAGE_KINDS + 2)
#define FEED_SLICES (USAGE_KINDS + 3)
#define FEED_TAINT_RULES (USAGE_KINDS + 4)
#define FEED_DEVICE_CLASSES (USAGE_KINDS + 5)
#define FEED_KINDS (USAGE_KINDS + 6)

/* What the feed watches, by enum usage_kind and FEED_*: every object of
 * each kind (no label selector, see feed.h). */
static const struct {
	const char *name, *path;
	bool optional;
} watched[FEED_KINDS] = {
	[USAGE_PODS] = {"pods", "/api/v1/pods", false},
	[USAGE_JOBS] = {"jobs", "/apis/batch/v1/jobs", false},
	/* A cluster without resource.k8s.io/v1 has no claims. */
	[USAGE_CLAIMS] = {"claims", "/apis/resource.k8s.io/v1/resourceclaims", true},
	[FEED_NODES] = {"nodes", "/api/v1/nodes", false},
	[FEED_PRIORITIES] = {"priorityclasses",
			     "/apis/scheduling.k8s.io/v1/priorityclasses", false},
	[FEED_PVCS] = {"persistentvolumeclaims", "/api/v1/persistentvolumeclaims", false},
	/* The DRA pool's kinds: optional as claims are. */
	[FEED_SLICES] = {"resourceslices", "/apis/resource.k8s.io/v1/resourceslices", true},
	[FEED_TAINT_RULES] = {"devicetaintrules",
			      "/apis/resource.k8s.io/v1/devicetaintrules", true},
	[FEED_DEVICE_CLASSES] = {"deviceclasses", "/apis/resource.k8s.io/v1/deviceclasses",
				 true},
};

struct feed_kind {
	struct feed *f;
	int kind; /* enum usage_kind, or FEED_NODES */
	struct informer *inf;
};

struct feed {
	struct feed_config cfg;
	struct feed_kind kinds[FEED_KINDS]; /* by kind; .inf NULL: not watched */
	pthread_mutex_t mu;        /* up[] and the store's watching state */
	bool up[USAGE_KINDS];
};

static const char *kind_name(const struct feed_kind *k)
{
	return watched[k->kind].name;
}

/* The inventory's kind that kind feeds; -1: none (no inventory, or a DRA
 * kind without the DRA readers). */
static int inventory_kind(const struct feed *f, int kind)
{
	bool dra = f->cfg.dra_put != NULL;

	if (!f->cfg.inventory)
		return -1;
	switch (kind) {
	case FEED_NODES:
		return INVENTORY_NODES;
	case USAGE_PODS:
		return INVENTORY_PODS;
	case USAGE_CLAIMS:
		return dra ? INVENTORY_CLAIMS : -1;
	case FEED_SLICES:
		return dra ? INVENTORY_SLICES : -1;
	case FEED_TAINT_RULES:
		return dra ? INVENTORY_TAINT_RULES : -1;
	case FEED_DEVICE_CLASSES:
		return dra ? INVENTORY_DEVICE_CLASSES : -1;
	default:
		return -1;
	}
}

/* A Node, a Pod or a DRA object (of the inventory's kind ik) into the
 * inventory. */
static void to_inventory(const struct feed_kind *k, int ik, const json_t *obj,
			 struct arena *a)
{
	struct feed *f = k->f;

	if (ik != INVENTORY_NODES && ik != INVENTORY_PODS) {
		const char *name = json_string_value(
			json_object_get(json_object_get(obj, "metadata"), "name"));

		if (f->cfg.dra_put(f->cfg.inventory, (enum inventory_kind)ik, obj, a) < 0)
			log_event(LOG_WARN, "msg=\"inventory: not kept (unreadable or out "
					    "of memory)\" kind=%s name=%s",
				  kind_name(k), name ? name : "-");
		return;
	}
	if (ik == INVENTORY_NODES) {
		struct pool_node n;

		if (f->cfg.node(f->cfg.facts_ctx, obj, a, &n) == 0 &&
		    inventory_node_put(f->cfg.inventory, &n) < 0)
			log_event(LOG_WARN, "msg=\"inventory: out of memory\" node=%s",
				  n.name);
	} else {
		struct inventory_placement pl;

		if (f->cfg.placement(f->cfg.facts_ctx, obj, a, &pl) < 0)
			return;
		/* A pod that neither holds units on a node nor waits for one
		 * is not kept. */
		if (!pl.waiting && (!pl.node || !pl.n_asks))
			inventory_pod_delete(f->cfg.inventory, pl.uid);
		else if (inventory_pod_put(f->cfg.inventory, &pl) < 0)
			log_event(LOG_WARN, "msg=\"inventory: out of memory\" pod=%s",
				  pl.uid);
	}
}

/* A PriorityClass: its name, value and whether it is the default. */
static void to_priorities(struct feed *f, const json_t *obj)
{
	const json_t *meta = json_object_get(obj, "metadata");
	const char *name = json_string_value(json_object_get(meta, "name"));
	const json_t *value = json_object_get(obj, "value");
	json_int_t v = json_integer_value(value);

	if (!name || !json_is_integer(value) || v < INT32_MIN || v > INT32_MAX)
		return;
	if (priorities_put(f->cfg.priorities, name, (int32_t)v,
			   json_is_true(json_object_get(obj, "globalDefault"))) < 0)
		log_event(LOG_WARN, "msg=\"priorities: out of memory or too many "
				    "classes\" class=%s", name);
}

/* A PersistentVolumeClaim: where it is, and whether pods on several nodes
 * may mount it (ReadWriteMany). */
static void to_pvcs(struct feed *f, const json_t *obj)
{
	const json_t *meta = json_object_get(obj, "metadata");
	const char *ns = json_string_value(json_object_get(meta, "namespace"));
	const char *name = json_string_value(json_object_get(meta, "name"));
	const json_t *modes = json_object_get(json_object_get(obj, "spec"), "accessModes");
	bool many = false;
	size_t i;
	json_t *m;

	json_array_foreach(modes, i, m)
		if (json_is_string(m) && strcmp(json_string_value(m), "ReadWriteMany") == 0)
			many = true;
	if (ns && name && pvcs_put(f->cfg.pvcs, ns, name, many) < 0)
		log_event(LOG_WARN, "msg=\"pvcs: out of memory\" claim=%s/%s", ns, name);
}

static void on_object(void *ctx, const json_t *obj)
{
	struct feed_kind *k = ctx;
	struct feed *f = k->f;
	int ik = inventory_kind(f, k->kind);
	struct usage_item it;
	struct arena a;

	if (k->kind == FEED_PRIORITIES) {
		to_priorities(f, obj);
		return;
	}
	if (k->kind == FEED_PVCS) {
		to_pvcs(f, obj);
		return;
	}
	arena_init(&a);
	if (k->kind < USAGE_KINDS &&
	    f->cfg.charge(f->cfg.charge_ctx, obj, (enum usage_kind)k->kind, &a, &it) == 0)
		/* Active or not: a finished pod, or a Job suspended at this
		 * generation, is shown holding nothing (usage_observe()). */
		usage_observe(f->cfg.usage, &it);
	if (ik >= 0)
		to_inventory(k, ik, obj, &a);
	if (f->cfg.meter && k->kind == USAGE_PODS) {
		struct meter_pod mp;

		if (f->cfg.run(f->cfg.facts_ctx, obj, &a, &mp) == 0)
			meter_put(f->cfg.meter, &mp);
	}
	arena_release(&a);
}

static void on_delete(void *ctx, const json_t *obj)
{
	struct feed_kind *k = ctx;
	struct inventory *inv = k->f->cfg.inventory;
	int ik = inventory_kind(k->f, k->kind);
	const json_t *meta = json_object_get(obj, "metadata");
	const char *uid = json_string_value(json_object_get(meta, "uid"));

	if (k->kind == FEED_PRIORITIES) {
		priorities_delete(k->f->cfg.priorities,
				  json_string_value(json_object_get(meta, "name")));
		return;
	}
	if (k->kind == FEED_PVCS) {
		pvcs_delete(k->f->cfg.pvcs,
			    json_string_value(json_object_get(meta, "namespace")),
			    json_string_value(json_object_get(meta, "name")));
		return;
	}
	if (k->kind == FEED_NODES) {
		const char *name = json_string_value(json_object_get(meta, "name"));

		if (name)
			inventory_node_delete(inv, name);
		return;
	}
	if (ik >= 0 && ik != INVENTORY_PODS)
		k->f->cfg.dra_delete(inv, (enum inventory_kind)ik, obj);
	if (!uid || k->kind >= USAGE_KINDS)
		return;
	usage_forget(k->f->cfg.usage, uid);
	if (ik == INVENTORY_PODS)
		inventory_pod_delete(inv, uid);
	if (k->f->cfg.meter && k->kind == USAGE_PODS)
		meter_gone(k->f->cfg.meter, uid);
}

static void on_relist_begin(void *ctx)
{
	struct feed_kind *k = ctx;
	int ik = inventory_kind(k->f, k->kind);

	if (k->kind == FEED_PRIORITIES) {
		priorities_relist_begin(k->f->cfg.priorities);
		return;
	}
	if (k->kind == FEED_PVCS) {
		pvcs_relist_begin(k->f->cfg.pvcs);
		return;
	}
	if (ik >= 0)
		inventory_relist_begin(k->f->cfg.inventory, (enum inventory_kind)ik);
	if (k->kind >= USAGE_KINDS)
		return;
	usage_relist_begin(k->f->cfg.usage, (enum usage_kind)k->kind);
	if (k->f->cfg.meter && k->kind == USAGE_PODS)
		meter_relist_begin(k->f->cfg.meter);
}

static void on_relist_end(void *ctx, bool first)
{
	struct feed_kind *k = ctx;
	struct inventory *inv = k->f->cfg.inventory;
	int ik = inventory_kind(k->f, k->kind);

	if (k->kind == FEED_PVCS) {
		pvcs_relist_end(k->f->cfg.pvcs);
		if (first)
			log_event(LOG_INFO, "msg=\"claims synced\" kind=persistentvolumeclaims "
					    "entries=%zu", pvcs_count(k->f->cfg.pvcs));
		return;
	}
	if (k->kind == FEED_PRIORITIES) {
		priorities_relist_end(k->f->cfg.priorities);
		if (first)
			log_event(LOG_INFO, "msg=\"priorities synced\" kind=priorityclasses "
					    "entries=%zu", priorities_count(k->f->cfg.priorities));
		return;
	}
	if (ik >= 0)
		inventory_relist_end(inv, (enum inventory_kind)ik);
	if (k->kind == FEED_NODES) {
		if (first)
			log_event(LOG_INFO, "msg=\"inventory synced\" kind=nodes "
					    "entries=%zu", inventory_nodes(inv));
		return;
	}
	if (k->kind >= USAGE_KINDS) {
		if (first)
			log_event(LOG_INFO, "msg=\"inventory synced\" kind=%s",
				  kind_name(k));
		return;
	}
	usage_relist_end(k->f->cfg.usage, (enum usage_kind)k->kind);
	if (k->f->cfg.meter && k->kind == USAGE_PODS)
		meter_relist_end(k->f->cfg.meter);
	if (first)
		log_event(LOG_INFO, "msg=\"usage synced\" kind=%s entries=%zu",
			  kind_name(k), usage_entries(k->f->cfg.usage));
}

/* An optional kind is not served (404): usage hears the empty relist
 * (there are no claims), the inventory that the kind is not served. */
static void on_not_served(void *ctx, bool first)
{
	struct feed_kind *k = ctx;
	int ik = inventory_kind(k->f, k->kind);

	if (k->kind < USAGE_KINDS) {
		on_relist_begin(ctx);
		on_relist_end(ctx, first);
	}
	if (ik >= 0)
		inventory_not_served(k->f->cfg.inventory, (enum inventory_kind)ik);
}

/* The store lets reservations expire only while every watch is open: the
 * flags and the store change together, under the lock, so that the
 * threads never leave the store with a stale state. */
static void on_connected(void *ctx, bool up)
{
	struct feed_kind *k = ctx;
	struct feed *f = k->f;
	bool all = true;

	if (k->kind >= USAGE_KINDS)
		return; /* quota waits for neither Nodes nor PriorityClasses */
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
	if (cfg->inventory && (!cfg->node || !cfg->placement)) {
		diag_addf(d, "feed: an inventory needs the node and placement readers");
		return -1;
	}
	if (cfg->dra_put && (!cfg->inventory || !cfg->dra_delete)) {
		diag_addf(d, "feed: the DRA readers need an inventory and both readers");
		return -1;
	}
	if (cfg->meter && !cfg->run) {
		diag_addf(d, "feed: a meter needs the run reader");
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
	for (int i = 0; i < FEED_KINDS; i++) {
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
			       .connected = on_connected,
			       .not_served = on_not_served, .ctx = k},
		};

		k->f = f;
		k->kind = i;
		if ((i == FEED_NODES && !cfg->inventory) ||
		    (i == FEED_PRIORITIES && !cfg->priorities) ||
		    (i == FEED_PVCS && !cfg->pvcs) ||
		    (i >= FEED_SLICES && inventory_kind(f, i) < 0))
			continue;
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

void feed_resync(struct feed *f, struct feed_resync *t)
{
	/* Asked again: only the kinds not served yet (a served kind asked
	 * again would get a new ticket, and the whole might never be). */
	for (int i = 0; i < USAGE_KINDS; i++)
		if (!t->asked || !informer_resynced(f->kinds[i].inf, t->ticket[i]))
			t->ticket[i] = informer_resync(f->kinds[i].inf);
	t->asked = true;
}

bool feed_resynced(struct feed *f, const struct feed_resync *t)
{
	if (!t->asked)
		return false;
	for (int i = 0; i < USAGE_KINDS; i++)
		if (!informer_resynced(f->kinds[i].inf, t->ticket[i]))
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
	/* All at once, each watch's connection cut (kube_interrupt()). */
	for (int i = 0; i < FEED_KINDS; i++)
		informer_cancel(f->kinds[i].inf);
	for (int i = 0; i < FEED_KINDS; i++)
		informer_stop(f->kinds[i].inf);
	pthread_mutex_destroy(&f->mu);
	free(f);
}
