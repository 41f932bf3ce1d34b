#include "report/snapshot.h"

#include "base/diag.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/feed.h"
#include "policy/policy.h"
#include "usage/inventory.h"
#include "usage/usage.h"
#include "report/quotas.h"
#include "webhook/charge.h"
#include "webhook/dra-facts.h"
#include "webhook/holder.h"
#include "webhook/node-facts.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static unsigned long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000u + (unsigned long long)ts.tv_nsec / 1000000u;
}

/* What the feed lists, as RBAC names it, and where. */
static const struct {
	const char *resource, *path;
} LISTS[] = {
	{"nodes", "/api/v1/nodes?limit=1"},
	{"pods", "/api/v1/pods?limit=1"},
	{"jobs.batch", "/apis/batch/v1/jobs?limit=1"},
	{"resourceclaims.resource.k8s.io", "/apis/resource.k8s.io/v1/resourceclaims?limit=1"},
};

void snapshot_forbidden(const char *cmd, const char *resource, const char *ns,
			char *out, size_t size)
{
	snprintf(out, size,
		 "forbidden: cannot list %s at the cluster scope (%s needs list on "
		 "nodes, pods, jobs.batch and resourceclaims.resource.k8s.io in all "
		 "namespaces); as a tenant, read your quota with: kubectl get "
		 "gpuquota -n %s",
		 resource, cmd, ns ? ns : "YOUR-NAMESPACE");
}

/* 0 when no list answers 403 (other answers are the feed's to handle);
 * SNAPSHOT_FORBIDDEN with the message when one does; -1 out of memory.
 * Within the command's deadline, and no further once the API does not
 * answer (a dead apiserver costs the feed's wait, not two). */
static int probe(const struct kube_config *kube, unsigned long long deadline,
		 const char *cmd, const char *ns, struct diag *d)
{
	struct diag ignored;
	struct kube *k = kube_new(kube, d);
	int rc = 0;

	if (!k)
		return -1;
	for (size_t i = 0; i < sizeof(LISTS) / sizeof(LISTS[0]) && rc == 0; i++) {
		unsigned long long now = now_ms();
		int st;

		if (now >= deadline)
			break;
		diag_init(&ignored);
		st = kube_get_json(k, LISTS[i].path, (unsigned)(deadline - now), NULL,
				   &ignored);
		if (st < 0)
			break;
		if (st == 403) {
			char msg[600];

			snapshot_forbidden(cmd, LISTS[i].resource, ns, msg, sizeof(msg));
			diag_addf(d, "%s", msg);
			rc = SNAPSHOT_FORBIDDEN;
		}
	}
	kube_free(k);
	return rc;
}

static bool has_dra_flavor(struct holder *holder)
{
	struct holder_ref *ref;
	const struct policy *p = holder ? holder_acquire(holder, &ref) : NULL;
	bool dra = p && policy_has_dra_flavor(p);

	if (holder)
		holder_release(ref);
	return dra;
}

int snapshot_take(const struct kube_config *kube, struct holder *holder,
		  unsigned timeout_ms, struct snapshot *out, struct diag *d)
{
	return snapshot_take_as(kube, holder, timeout_ms, "gpugate", NULL, out, d);
}

int snapshot_take_as(const struct kube_config *kube, struct holder *holder,
		     unsigned timeout_ms, const char *cmd, const char *ns,
		     struct snapshot *out, struct diag *d)
{
	struct feed_config fc = {.kube = kube, .charge = charge_item_current,
				 .charge_ctx = holder, .node = node_facts_cb,
				 .placement = pod_placement_cb,
				 .facts_ctx = holder};
	/* The DRA kinds only for a policy with a DRA flavor: no other reads
	 * them. */
	bool dra = has_dra_flavor(holder);
	struct feed *f = NULL;
	unsigned long long deadline = now_ms() + timeout_ms;

	memset(out, 0, sizeof(*out));
	{
		int rc = probe(kube, deadline, cmd, ns, d);

		if (rc < 0)
			return rc;
	}
	/* No reservations: only what the cluster holds. */
	out->usage = usage_memory_new(&(struct usage_memory_config){0});
	out->inventory = inventory_new();
	if (!out->usage || !out->inventory) {
		diag_addf(d, "out of memory");
		goto fail;
	}
	fc.usage = out->usage;
	fc.inventory = out->inventory;
	if (dra) {
		fc.dra_put = dra_facts_put;
		fc.dra_delete = dra_facts_delete;
	}
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
	/* A DRA flavor's pool needs the DRA kinds too: waited for while
	 * there is time, else its pool is shown not known; not served
	 * (404) is an answer too. */
	while (dra && !inventory_dra_settled(out->inventory) &&
	       now_ms() < deadline)
		nanosleep(&(struct timespec){0, 50 * 1000000L}, NULL);
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

int snapshot_quotas(const struct kube_config *kube, const char *ns,
		    unsigned timeout_ms, json_t **items, struct diag *d)
{
	struct kube *k = kube_new(kube, d);
	json_t *list = NULL;
	char path[300];
	int st;

	*items = NULL;
	if (!k)
		return -1;
	snprintf(path, sizeof(path), QUOTAS_COLLECTION_FMT, ns);
	st = kube_get_json(k, path, timeout_ms, &list, d);
	kube_free(k);
	if (st == 404)
		diag_addf(d, "the GPUQuota CustomResourceDefinition is not installed "
			     "(docs/operations.md, \"GPUQuota objects\")");
	else if (st == 403)
		diag_addf(d, "these credentials may not list gpuquotas.gpugate.io in "
			     "namespace %s either (the view role of the namespace grants it)",
			  ns);
	if (st != 0)
		return -1;
	*items = json_incref(json_object_get(list, "items"));
	json_decref(list);
	if (!json_is_array(*items)) {
		json_decref(*items);
		*items = NULL;
		diag_addf(d, "the list of gpuquotas has no items");
		return -1;
	}
	return 0;
}
