/*
 * reach: can a pod be scheduled onto the GPU nodes the policy describes?
 *
 * A flavor says how its nodes are reached: the resource the device plugin
 * advertises there, the node labels (nodeSelector) and the taints (the
 * tolerations gpugate adds).  A pod can reach GPU nodes when
 *
 *   - a container or init container asks for a flavor's resource;
 *   - it has a class label (the caller knows: REACH_CLASS);
 *   - one of its tolerations tolerates the taint of a flavor toleration
 *     (reach_tolerates());
 *   - its nodeSelector has one of a flavor's nodeSelector entries,
 *     key and value.
 *
 * This is what the policy can tell, not what the scheduler will do: the
 * nodes of a flavor without tolerations take any pod that does not select
 * other nodes, and nodeAffinity is not looked at (docs/policy.md, "Pods
 * that can reach GPU nodes").  spec.nodeName needs the cluster's nodes:
 * the caller's (policy/decide-security.c, REACH_NODE_NAME).
 *
 * Pure: the policy and the pod facts in, a verdict and its cause out.
 */
#ifndef GPUGATE_REACH_H
#define GPUGATE_REACH_H

#include "policy/policy.h"
#include "policy/workload.h"

#include <stdbool.h>

enum reach_cause {
	REACH_NONE,
	REACH_CLASS,         /* set by the caller: the pod has a class label */
	REACH_RESOURCE,      /* a container asks for a flavor resource */
	REACH_TOLERATION,    /* a toleration tolerates a flavor's taint */
	REACH_NODE_SELECTOR, /* a nodeSelector entry of a flavor */
	REACH_NODE_NAME,     /* set by the caller: spec.nodeName is a GPU node */
};

/* Why a pod can reach GPU nodes: the first cause found. */
struct reach {
	enum reach_cause cause;
	const char *class_name;                 /* REACH_CLASS */
	const char *resource;                   /* REACH_RESOURCE */
	const struct policy_flavor *flavor;     /* TOLERATION, NODE_SELECTOR */
	const struct policy_toleration *taint;  /* TOLERATION: the flavor's */
	const struct policy_kv *selector;       /* NODE_SELECTOR: its entry */
	const char *node;                       /* NODE_NAME */
};

/*
 * True when the pod can reach a flavor's nodes by its resources,
 * tolerations or nodeSelector (in that order, flavors in file order); the
 * first cause is stored in *why when why is not NULL (cause REACH_NONE
 * when false).  A class label is the caller's to check.
 */
bool reach_gpu_nodes(const struct policy *p, const struct wl_pod *pod,
		     struct reach *why);

/*
 * True when pod toleration t tolerates the taint that flavor toleration ft
 * stands for, by Kubernetes' matching: operator Exists with an empty key
 * tolerates every taint, Exists with a key any value of that key, Equal
 * (or no operator) key and value; an empty effect matches every effect.
 * What the flavor leaves open counts as a match: its Exists stands for a
 * taint of any value, its empty effect for any effect.  A pod operator
 * gpugate does not know matches when the key does (the rules that use
 * this are security rules: in doubt, the pod can reach).  A flavor
 * toleration without a key names no taint: nothing matches it.
 */
bool reach_tolerates(const struct wl_toleration *t,
		     const struct policy_toleration *ft);

#endif
