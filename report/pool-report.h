/*
 * pool-report: the pool at a glance (GET /pool, `gpugate pool`): per flavor
 * its nodes (usable, or why excluded), capacity, allocated, free and the
 * largest free on one node, node by node, and its effective capacity
 * (policy/capacity.h: what the usable nodes hold against the nominal
 * quotas promised, and the tenants whose nominal is not backed now); per
 * tenant and flavor what it uses, its nominal quota, what it borrows and
 * what it lends, and how much of that nominal the pool backs now.
 *
 * "lent" is an attribution: Kueue-style cohorts do not record who lends to
 * whom, so the units the cohort's members borrow are attributed to the
 * members with unused lendable quota in policy order.
 */
#ifndef GPUGATE_POOL_REPORT_H
#define GPUGATE_POOL_REPORT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct inventory;
struct policy;
struct strbuf;
struct usage_store;

/* The report as JSON (docs/operations.md "The pool"); NULL when out of
 * memory.  inv NULL or not synced: "synced": false and no flavors. */
json_t *pool_report(const struct policy *p, struct inventory *inv,
		    struct usage_store *u);
/* The same at now_ms (Unix ms; pool_report: the wall clock): a node out
 * for health or validating by gpugate's record (policy/health.h) shows
 * "outSince" (RFC 3339), "outSeconds", "times" (when more than 1) and, when
 * validating, "waitsFor" (health_return's words). */
json_t *pool_report_at(const struct policy *p, struct inventory *inv,
		       struct usage_store *u, int64_t now_ms);

/*
 * The same with idle GPUs (SPEC section 10): "idle", the Running pods that
 * carry gpugate.io/idle-since as the inventory saw them (namespace, pod,
 * tenant, flavor, units, since, idleSeconds), and per tenant "busyShare",
 * its busy share of what it holds now (policy/idle.h idle_share_of) from
 * utils[0..nu), each pod's mean over the last hour (the idle board's,
 * GET /pool): null when no unit it holds has data, and for every tenant
 * when utils is NULL (`gpugate pool` reads no Prometheus).
 */
struct idle_util;
json_t *pool_report_idle(const struct policy *p, struct inventory *inv,
			 struct usage_store *u, int64_t now_ms,
			 const struct idle_util *utils, size_t nu);

/* The report's "tenants" alone (what GPUQuota objects say,
 * report/quotas.h): NULL when out of memory.  inv NULL or not synced: no
 * "backed" and "notBacked" (policy/capacity.h). */
json_t *pool_report_tenants(const struct policy *p, struct inventory *inv,
			    struct usage_store *u);

/* The report as two tables for a terminal.  -1 when out of memory. */
int pool_report_text(const json_t *report, struct strbuf *out);

#endif
