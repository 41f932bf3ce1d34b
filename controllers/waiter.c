#include "controllers/waiter.h"

#include "base/arena.h"
#include "base/diag.h"
#include "base/hash.h"
#include "base/log.h"
#include "base/strmap.h"
#include "kube/client.h"
#include "policy/decide.h"
#include "policy/policy.h"
#include "policy/pool.h"
#include "policy/quota.h"
#include "usage/inventory.h"
#include "usage/usage.h"
#include "controllers/events.h"
#include "controllers/worker.h"
#include "webhook/holder.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WAITING_MAX 4096 /* pods looked at in one round */

/* What was last written for one pod. */
struct said {
	char *uid; /* the key of by_uid */
	uint64_t reason; /* hash of the message */
	int64_t at;      /* Unix seconds */
	bool seen;       /* still waiting in this round */
};

struct waiter {
	struct waiter_config cfg;
	struct worker wk;
	char identity[254];
	/* The thread's own. */
	struct strmap by_uid;
	struct said **said;
	size_t n_said, cap_said;
};


void waiter_reason(const struct policy *p, const struct policy_flavor *f,
		   struct inventory *inv, struct usage_store *usage,
		   const struct inventory_waiting *pod, char *message, size_t size)
{
	struct usage_names names;
	struct usage_view uv;
	struct pool_check pc;

	usage_names_view(&names, p, usage, &uv);
	inventory_fit(inv, p, f, pod->per_pod, 1, NULL, &pc);
	decide_waiting(p, f, pod->per_pod, &pc, usage ? &uv : NULL, pod->scheduler,
		       message, size);
}

bool waiter_is_gang(const struct inventory_waiting *pod)
{
	const char *r = pod->gang_route ? pod->gang_route : "";

	return pod->gang && pod->gang[0] &&
	       (pod->gang_gated || strcmp(r, "workload") == 0 || strcmp(r, "podgroup") == 0);
}

void waiter_gang_reason(const struct policy *p, const struct policy_flavor *f,
			struct inventory *inv, struct usage_store *usage,
			const struct inventory_waiting *pod, int64_t gang_pods,
			const char *topology_key, char *message, size_t size)
{
	const char *route = pod->gang_route && pod->gang_route[0] ? pod->gang_route : "gates";
	const struct pool_fit *fit;
	struct pool_check pc;
	char head[300], shortage[700], domain[400] = "";
	int64_t k;

	if (gang_pods < 1)
		gang_pods = 1;
	snprintf(head, sizeof(head), "waits for its gang %s (route %s)", pod->gang, route);
	inventory_fit(inv, p, f, pod->per_pod, gang_pods, topology_key, &pc);
	fit = &pc.fit;
	if (!pc.known) {
		snprintf(message, size, "%s: %lld pods; the pool is not known yet", head,
			 (long long)gang_pods);
		return;
	}
	if (fit->verdict == POOL_FITS) {
		snprintf(message, size, "%s: all %lld pods fit now; starting", head,
			 (long long)gang_pods);
		return;
	}
	k = fit->fit_now < gang_pods ? fit->fit_now : gang_pods;
	if (topology_key && fit->domain)
		snprintf(domain, sizeof(domain), ", best domain %s=%s", topology_key,
			 fit->domain);
	switch (fit->verdict) {
	case POOL_NOT_NOW:
		snprintf(shortage, sizeof(shortage), "%lld node%s with %lld %s free",
			 (long long)(gang_pods - k), gang_pods - k == 1 ? "" : "s",
			 (long long)pod->per_pod, f->units);
		break;
	case POOL_NEVER_FITS:
		if (topology_key)
			snprintf(shortage, sizeof(shortage),
				 "no %s domain of flavor %s can ever hold its %lld pods of "
				 "%lld %s (the largest holds %lld)",
				 topology_key, f->name, (long long)gang_pods,
				 (long long)pod->per_pod, f->units, (long long)fit->fit_empty);
		else
			snprintf(shortage, sizeof(shortage),
				 "the usable nodes of flavor %s can hold %lld of its %lld pods "
				 "of %lld %s, even empty",
				 f->name, (long long)fit->fit_empty, (long long)gang_pods,
				 (long long)pod->per_pod, f->units);
		break;
	default: {
		/* No node of the flavor, or none usable: the one-pod words. */
		struct inventory_waiting one = *pod;

		one.scheduler = "";
		waiter_reason(p, f, inv, usage, &one, shortage, sizeof(shortage));
		break;
	}
	}
	snprintf(message, size, "%s: %lld of %lld pods fit now%s; short: %s", head,
		 (long long)k, (long long)gang_pods, domain, shortage);
}

bool waiter_due(uint64_t said, int64_t said_at, uint64_t reason, int64_t now,
		unsigned repeat_s)
{
	return said != reason || now - said_at >= (int64_t)repeat_s;
}

static int write_event(struct waiter *w, const struct inventory_waiting *pod,
		       const char *message, int64_t now)
{
	const struct events_object o = {"v1", "Pod", pod->namespace, pod->name, pod->uid};

	return events_write(w->wk.kube, w->identity, &o, "GPUWaiting", "Warning", message,
			    now);
}

static struct said *said_get(struct waiter *w, const char *uid)
{
	size_t i;
	struct said *s;

	if (strmap_get(&w->by_uid, uid, &i))
		return w->said[i];
	if (w->n_said == w->cap_said) {
		size_t cap = w->cap_said ? 2 * w->cap_said : 64;
		struct said **p = realloc(w->said, cap * sizeof(*p));

		if (!p)
			return NULL;
		w->said = p;
		w->cap_said = cap;
	}
	s = calloc(1, sizeof(*s));
	if (!s || !(s->uid = strdup(uid)) ||
	    strmap_put(&w->by_uid, s->uid, w->n_said, NULL) < 0) {
		if (s)
			free(s->uid);
		free(s);
		return NULL;
	}
	w->said[w->n_said++] = s;
	return s;
}

/* Forgets the pods that no longer wait. */
static void said_prune(struct waiter *w)
{
	for (size_t i = w->n_said; i-- > 0;) {
		struct said *s = w->said[i];

		if (s->seen) {
			s->seen = false;
			continue;
		}
		strmap_del(&w->by_uid, s->uid, NULL);
		if (i != w->n_said - 1) {
			w->said[i] = w->said[w->n_said - 1];
			strmap_del(&w->by_uid, w->said[i]->uid, NULL);
			strmap_put(&w->by_uid, w->said[i]->uid, i, NULL);
		}
		w->n_said--;
		free(s->uid);
		free(s);
	}
}

/* The waiting pods of each gang that a pod of pods (n) belongs to, every
 * waiting pod counted, however young (gang id -> count, ids in a). */
static void count_gangs(struct waiter *w, const struct inventory_waiting *pods, size_t n,
			int64_t now, struct strmap *gangs, struct arena *a)
{
	struct inventory_waiting *all;
	size_t m, k;
	bool any = false;

	for (size_t i = 0; i < n && !any; i++)
		any = waiter_is_gang(&pods[i]);
	if (!any || !(all = calloc(WAITING_MAX, sizeof(*all))))
		return;
	m = inventory_waiting_list(w->cfg.inventory, now, all, WAITING_MAX, a);
	for (size_t i = 0; i < m; i++) {
		if (!waiter_is_gang(&all[i]))
			continue;
		if (strmap_get(gangs, all[i].gang, &k)) {
			strmap_del(gangs, all[i].gang, NULL);
			strmap_put(gangs, all[i].gang, k + 1, NULL);
		} else {
			strmap_put(gangs, all[i].gang, 1, NULL);
		}
	}
	free(all);
}

static void round_once(struct waiter *w)
{
	struct inventory_waiting *pods = calloc(WAITING_MAX, sizeof(*pods));
	int64_t now = (int64_t)time(NULL);
	unsigned written = 0;
	struct holder_ref *ref;
	const struct policy *p;
	struct strmap gangs;
	struct arena a;
	size_t n;

	if (!pods)
		return;
	arena_init(&a);
	n = inventory_waiting_list(w->cfg.inventory, now - (int64_t)w->cfg.after_s, pods,
				   WAITING_MAX, &a);
	strmap_init(&gangs);
	count_gangs(w, pods, n, now, &gangs, &a);
	p = holder_acquire(w->cfg.policy, &ref);
	for (size_t i = 0; p && i < n && written < w->cfg.max_per_round; i++) {
		const struct inventory_waiting *pod = &pods[i];
		const struct policy_flavor *f = policy_flavor_find(p, pod->flavor);
		char message[1024];
		uint64_t h;
		struct said *s;

		if (!f || !pod->since || pod->since > now - (int64_t)w->cfg.after_s)
			continue;
		if (waiter_is_gang(pod)) {
			const struct policy_class *c =
				pod->class_name[0] ? policy_class_find(p, pod->class_name) : NULL;
			size_t k = 1;

			strmap_get(&gangs, pod->gang, &k);
			waiter_gang_reason(p, f, w->cfg.inventory, w->cfg.usage, pod,
					   (int64_t)k,
					   c && c->topology_mode == POLICY_TOPOLOGY_REQUIRED
						   ? c->topology_key
						   : NULL,
					   message, sizeof(message));
		} else {
			waiter_reason(p, f, w->cfg.inventory, w->cfg.usage, pod, message,
				      sizeof(message));
		}
		s = said_get(w, pod->uid);
		if (!s)
			break;
		s->seen = true;
		if (!message[0])
			continue; /* room, and the scheduler said nothing yet */
		h = hash_fnv1a(HASH_FNV1A_SEED, message);
		if (!waiter_due(s->reason, s->at, h, now, w->cfg.repeat_s))
			continue;
		if (write_event(w, pod, message, now) == 0) {
			s->reason = h;
			s->at = now;
			written++;
		}
	}
	holder_release(ref);
	/* A pod not looked at this round (beyond max_per_round) keeps what
	 * was said of it only if it was seen: mark every listed pod. */
	for (size_t i = 0; i < n; i++) {
		size_t k;

		if (strmap_get(&w->by_uid, pods[i].uid, &k))
			w->said[k]->seen = true;
	}
	said_prune(w);
	strmap_release(&gangs);
	arena_release(&a);
	free(pods);
}

/* While leading: a round, then the next after interval_s. */
static unsigned turn(void *arg)
{
	struct waiter *w = arg;

	round_once(w);
	return w->cfg.interval_s * 1000u;
}

int waiter_start(const struct waiter_config *cfg, struct waiter **out, struct diag *d)
{
	struct waiter *w = calloc(1, sizeof(*w));

	if (!w) {
		diag_addf(d, "out of memory");
		return -1;
	}
	w->cfg = *cfg;
	if (!w->cfg.after_s)
		w->cfg.after_s = 60;
	if (!w->cfg.interval_s)
		w->cfg.interval_s = 10;
	if (!w->cfg.repeat_s)
		w->cfg.repeat_s = 600;
	if (!w->cfg.max_per_round)
		w->cfg.max_per_round = 50;
	snprintf(w->identity, sizeof(w->identity), "%s", cfg->identity ? cfg->identity : "");
	w->cfg.identity = w->identity;
	strmap_init(&w->by_uid);
	if (worker_start(&w->wk,
			 &(struct worker_config){.name = "waiter", .kube = cfg->kube,
						 .turn = turn, .arg = w,
						 .first_ms = w->cfg.interval_s * 1000u,
						 .idle_ms = w->cfg.interval_s * 1000u,
						 .leading = cfg->leading,
						 .leading_ctx = cfg->leading_ctx},
			 d) < 0) {
		strmap_release(&w->by_uid);
		free(w);
		return -1;
	}
	*out = w;
	return 0;
}

void waiter_stop(struct waiter *w)
{
	if (!w)
		return;
	worker_stop(&w->wk);
	for (size_t i = 0; i < w->n_said; i++) {
		free(w->said[i]->uid);
		free(w->said[i]);
	}
	free(w->said);
	strmap_release(&w->by_uid);
	free(w);
}
