/*
 * cluster-check: what `gpugate check --kubeconfig` finds when it holds a
 * valid policy against a cluster, decided on plain values (the shell
 * reads the cluster).  Findings are warnings: the policy is valid, the
 * cluster is missing something it needs.
 */
#ifndef GPUGATE_CLUSTER_CHECK_H
#define GPUGATE_CLUSTER_CHECK_H

#include <stdbool.h>
#include <stddef.h>

struct diag;
struct policy;
struct pool_summary;
struct usage_view;

/*
 * One warning line in w for each class whose priorityClassName is not
 * among the n PriorityClass names the cluster has: the apiserver refuses
 * every pod that names a missing PriorityClass, so every workload of
 * that class would be refused after gpugate admitted it.  Returns how
 * many were found.
 *
 *   FILE: warning: class "C": PriorityClass "P" does not exist in the
 *   cluster, and the apiserver refuses pods that name it; create it ...
 */
unsigned cluster_check_priority_classes(const struct policy *p,
					const char *const *names, size_t n,
					struct diag *w);

/*
 * The effective capacity (policy/capacity.h) of the n flavors summarised
 * in s (the cluster's pool) under usage u (NULL: nothing used): one
 * warning line in w for each flavor no node of the cluster serves, and
 * for each whose nominal quotas sum to more than its usable nodes hold
 * (their allocatable), naming the tenants whose nominal quota is not
 * backed now (at most CLUSTER_CHECK_MAX_NAMED, then how many more).  A
 * DRA flavor's units are its devices (ResourceSlices), weighed only when
 * dra_known (the DRA kinds were listed: usage/inventory.h
 * inventory_dra_known), else one warning says they are not.  Returns how
 * many were found.
 *
 *   FILE: warning: flavor F: no node of the cluster carries its node
 *   labels and offers R
 *   FILE: warning: flavor F: no node of the cluster carries its node
 *   labels and has a device of driver D that matches its dra attributes
 *   and minCapacity (kubectl get resourceslices)
 *   FILE: warning: flavor F: the cluster's ResourceSlices,
 *   DeviceTaintRules, ResourceClaims or DeviceClasses could not be
 *   listed: its devices are not weighed
 *   FILE: warning: flavor F: the tenants' nominal quota sums to 64, the
 *   usable nodes offer 48 R: over-committed by 16 (33 %) (excluded nodes
 *   not counted); not backed now: tenant research 8 of its nominal 32
 *   (docs/quota.md, "Effective capacity")
 */
#define CLUSTER_CHECK_MAX_NAMED 8
unsigned cluster_check_capacity(const struct policy *p, const struct pool_summary *s,
				size_t n, const struct usage_view *u, bool dra_known,
				struct diag *w);

/* A DRA DeviceClass of the cluster: its name, and the extended resource it
 * serves (spec.extendedResourceName), or NULL. */
struct cluster_device_class {
	const char *name;
	const char *extended_resource;
};

/*
 * The cluster's n DeviceClasses against the policy (docs/quota.md, "What
 * each door costs"): one warning line in w for each class that serves a
 * flavor's resource through DRA but that no flavor of that resource lists
 * in deviceClassNames (the kube-scheduler's claim for such pods asks for
 * that class: a raw GPU request, or none of gpugate's), or that another
 * flavor lists (its claims cannot ride on their pods: charged twice); and
 * for each deviceClassNames entry the cluster has no DeviceClass of.
 * Returns how many were found.
 *
 *   FILE: warning: DeviceClass "C" serves nvidia.com/gpu through DRA
 *   (extendedResourceName), which flavor F uses, but F does not list "C" in
 *   deviceClassNames: the claims the kube-scheduler makes for such pods ...
 */
unsigned cluster_check_device_classes(const struct policy *p,
				      const struct cluster_device_class *dcs,
				      size_t n, struct diag *w);

#endif
