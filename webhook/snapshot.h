/*
 * snapshot: the cluster as gpugate serve sees it, once, for the commands
 * that read it and exit (`gpugate pool`, `gpugate check --kubeconfig`):
 * the feed (kube/feed.h) lists Pods, Jobs, ResourceClaims and Nodes into a
 * usage store and an inventory under the same charge rule and the same
 * readers as the server, and stops once everything was listed.
 */
#ifndef GPUGATE_SNAPSHOT_H
#define GPUGATE_SNAPSHOT_H

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
 */
int snapshot_take(const struct kube_config *kube, struct holder *holder,
		  unsigned timeout_ms, struct snapshot *out, struct diag *d);
void snapshot_release(struct snapshot *s);

#endif
