#include "webhook/snapshot.h"

#include "base/diag.h"
#include "kube/config.h"
#include "kube/feed.h"
#include "usage/inventory.h"
#include "usage/usage.h"
#include "webhook/charge.h"
#include "webhook/node-facts.h"

#include <string.h>
#include <time.h>

static unsigned long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000u + (unsigned long long)ts.tv_nsec / 1000000u;
}

int snapshot_take(const struct kube_config *kube, struct holder *holder,
		  unsigned timeout_ms, struct snapshot *out, struct diag *d)
{
	struct feed_config fc = {.kube = kube, .charge = charge_item_current,
				 .charge_ctx = holder, .node = node_facts_cb,
				 .placement = pod_placement_cb,
				 .facts_ctx = holder};
	struct feed *f = NULL;
	unsigned long long deadline = now_ms() + timeout_ms;

	memset(out, 0, sizeof(*out));
	/* No reservations: only what the cluster holds. */
	out->usage = usage_memory_new(&(struct usage_memory_config){0});
	out->inventory = inventory_new();
	if (!out->usage || !out->inventory) {
		diag_addf(d, "out of memory");
		goto fail;
	}
	fc.usage = out->usage;
	fc.inventory = out->inventory;
	if (feed_start(&fc, &f, d) < 0)
		goto fail;
	while (!(feed_synced(f) && inventory_synced(out->inventory))) {
		if (now_ms() >= deadline) {
			diag_addf(d, "%s: the Pods, Jobs, ResourceClaims and Nodes were not "
				     "all listed within %u s (see the log above)",
				  kube->server, timeout_ms / 1000);
			feed_stop(f);
			goto fail;
		}
		nanosleep(&(struct timespec){0, 50 * 1000000L}, NULL);
	}
	feed_stop(f);
	return 0;
fail:
	snapshot_release(out);
	return -1;
}

void snapshot_release(struct snapshot *s)
{
	inventory_free(s->inventory);
	usage_free(s->usage);
	memset(s, 0, sizeof(*s));
}
