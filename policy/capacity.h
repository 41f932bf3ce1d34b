/*
 * capacity: effective capacity — what the usable nodes of a flavor hold
 * against what the policy promises (the sum of its tenants' nominal
 * quotas), and which tenants' nominal quota is not backed now
 * (docs/quota.md "Effective capacity"; issue #30 item 5).
 *
 * When nodes leave the pool (health, validating, NotReady, cordoned,
 * tainted: policy/pool.h) the quotas do not shrink: a tenant may be
 * admitted on its nominal quota and still wait for a node.  This module
 * says so, with the numbers, for gpugate pool, gpugate check
 * --kubeconfig, the GPUQuota status and the metrics.
 *
 * The rule, per flavor f:
 *   usable    = allocatable units of the usable nodes (pool_summary
 *               .allocatable);
 *   promised  = the sum over tenants of their nominal quota of f;
 *   unbacked  = max(0, promised - usable): quota the pool cannot back.
 * Per tenant t with a nominal quota N of f, using U of it now (usage view,
 * what gpugate counts), with F = free units of f's usable nodes
 * (pool_summary.free) and B = what the other members of t's cohort hold
 * of f beyond their own nominal quota (0 outside a cohort; at most
 * pool_summary.allocated, the units held on usable nodes):
 *   short(t)  = max(0, (N - min(U, N)) - F - B): the part of its nominal
 *               quota t could not get now even if every free usable unit
 *               went to it and every borrowed unit came back to it
 *               (reclaimWithinCohort, or the borrowers ending: a unit lent
 *               out still backs the lender's quota).  t's nominal is "not
 *               backed now" when short(t) > 0; N - short(t) of it is
 *               backed.
 * Without B, a cohort that lends as designed would read as short on a
 * pool that has every node: short(t) > 0 means a node is missing (or
 * something outside the tenants holds the units), never just lending.
 * A flavor whose nodes gpugate has never seen (pool_summary.nodes all 0
 * and capacity 0: an autoscaler may add them, or the pool is not known)
 * is reported as unknown, never as unbacked.
 *
 * Pure: reads its arguments only; no I/O, no clock, no allocation.
 */
#ifndef GPUGATE_CAPACITY_H
#define GPUGATE_CAPACITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct policy;
struct policy_flavor;
struct policy_tenant;
struct pool_summary;
struct usage_view;

struct capacity_flavor {
	const struct policy_flavor *flavor;
	bool known;          /* the pool has seen a node of the flavor */
	int64_t capacity;    /* status.capacity of all its nodes */
	int64_t usable;      /* allocatable of its usable nodes */
	int64_t excluded;    /* capacity of its excluded nodes */
	int64_t free;        /* free units of its usable nodes */
	int64_t promised;    /* sum of the tenants' nominal quotas */
	int64_t unbacked;    /* max(0, promised - usable); 0 when !known */
	size_t n_short;      /* tenants with short > 0 */
};

struct capacity_tenant {
	const struct policy_tenant *tenant;
	int64_t nominal, used;
	int64_t reclaimable; /* B above; 0 when the flavor is !known */
	int64_t short_by;    /* short(t) above; 0 when the flavor is !known */
};

/*
 * The effective capacity of flavor f from its pool summary s (NULL: not
 * known) under usage u (NULL: nothing used).  tenants (room for
 * policy_tenant_count(p); may be NULL) gets, in policy order, every tenant
 * with a quota entry for f; *n_tenants (may be NULL) how many.
 */
void capacity_of(const struct policy *p, const struct policy_flavor *f,
		 const struct pool_summary *s, const struct usage_view *u,
		 struct capacity_flavor *out, struct capacity_tenant *tenants,
		 size_t *n_tenants);

#endif
