/*
 * snapshot: the cluster as gpugate serve sees it, once, for the commands
 * that read it and exit (`gpugate pool`, `gpugate check --kubeconfig`):
 * the feed (kube/feed.h) lists Pods, Jobs, ResourceClaims and Nodes into a
 * usage store and an inventory under the same charge rule and the same
 * readers as the server, and stops once everything was listed.
 */
#ifndef GPUGATE_SNAPSHOT_H
#define GPUGATE_SNAPSHOT_H

#include <jansson.h>
#include <stddef.h>

struct diag;
struct holder;
struct inventory;
struct kube_config;
struct usage_store;

struct snapshot {
	struct usage_store *usage;
	struct inventory *inventory;
};

/*
 * Lists the cluster of kube under the policy of holder into *out, waiting
 * at most timeout_ms for every list.  -1 with a message when the feed
 * cannot start or the lists do not finish in time (what failed is logged).
 *
 * SNAPSHOT_FORBIDDEN at once, with snapshot_forbidden()'s message, when
 * the API answers 403 to one of the lists (asked once each, limit=1,
 * before the feed starts): the credentials lack a permission, and the
 * feed would retry it until the timeout.  Any other answer (401, 5xx, no
 * answer) is left to the feed, as before.  cmd ("pool", "explain") and ns
 * (the namespace the caller named, or NULL) are for the message.
 */
#define SNAPSHOT_FORBIDDEN (-2)
int snapshot_take(const struct kube_config *kube, struct holder *holder,
		  unsigned timeout_ms, struct snapshot *out, struct diag *d);
int snapshot_take_as(const struct kube_config *kube, struct holder *holder,
		     unsigned timeout_ms, const char *cmd, const char *ns,
		     struct snapshot *out, struct diag *d);

/*
 * The message of a 403 to the list of resource (as RBAC names it: "nodes",
 * "pods", "jobs.batch", ...) across the cluster, for `gpugate cmd`, into
 * out: what is missing, what the command needs, and what a tenant reads
 * instead in namespace ns (NULL: a placeholder).  Pure.
 */
void snapshot_forbidden(const char *cmd, const char *resource, const char *ns,
			char *out, size_t size);
void snapshot_release(struct snapshot *s);

/*
 * What a tenant may read when the cluster's lists are forbidden: the
 * GPUQuota objects of namespace ns (report/quotas.h), their items into
 * *items (a new reference, maybe empty).  -1 with a message saying why
 * they cannot be read either.
 */
int snapshot_quotas(const struct kube_config *kube, const char *ns,
		    unsigned timeout_ms, json_t **items, struct diag *d);

#endif
