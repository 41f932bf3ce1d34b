/*
 * quota-sync: the GPUQuota objects of the cluster kept equal to what each
 * tenant uses of its quota, so that a team reads it with `kubectl get
 * gpuquota -n NS` (manifests/crd-gpuquotas.yaml, report/quotas.h;
 * docs/operations.md, "GPUQuota objects").
 *
 * A thread of gpugate serve (API mode, every --usage-store).  Every
 * interval_ms (2 s) while `leading` says so (the Lease of several
 * replicas: one replica writes) and once `synced` says the usage was
 * listed, it computes the objects wanted (quotas_wanted_new(): the pool
 * report's tenant numbers, report/pool-report.h, and the pods waiting for
 * a node, usage/inventory.h) and writes only those whose status changed
 * since it last listed or wrote them (quotas_plan_make()): many admissions
 * in 2 s are one write, no change is no write.  It lists the objects
 * labelled app.kubernetes.io/managed-by=gpugate (all namespaces), and the
 * Namespaces (which ones the policy gives a tenant, globs included; when
 * they may not be listed, said once, the tenants' exact names), at start,
 * every resync_s, after a failed write and when it becomes the writer
 * again, to repair what someone else changed and delete the objects of
 * namespaces the policy no longer gives a tenant.  A create in a namespace
 * that does not exist (404) is not tried again before the next list.
 *
 * Writes: POST to the namespace's collection and then PUT .../status (the
 * status subresource ignores status on create); PUT .../status with the
 * resourceVersion known; DELETE with uid and resourceVersion
 * preconditions.  Nothing here is fatal: a missing CustomResourceDefinition
 * (404 on the list), a refused write or an unreachable API is logged once
 * (again only when the error changes) and retried after 2, 4, 8 and 16 s,
 * then every 30 s.  It logs (logfmt):
 *
 *   info  msg="gpuquotas synced" created=N updated=N deleted=N unchanged=N
 *         (only when something was written)
 *   warn  msg="gpuquotas not synced: the GPUQuota CustomResourceDefinition
 *         is not installed" crd=gpuquotas.gpugate.io
 *   warn  msg="gpuquotas not synced" error="..."
 *
 * RBAC: list, create, delete on gpuquotas.gpugate.io, update on
 * gpuquotas/status, list on namespaces (manifests/rbac.yaml).
 */
#ifndef GPUGATE_QUOTA_SYNC_H
#define GPUGATE_QUOTA_SYNC_H

#include <stdbool.h>

struct diag;
struct holder;
struct inventory;
struct kube_config;
struct usage_store;

struct quota_sync_config {
	const struct kube_config *kube;
	struct holder *policy;
	struct usage_store *usage;
	struct inventory *inventory; /* the waiting pods; NULL: none counted */
	unsigned interval_ms;        /* at most one round per; 0: 2000 */
	unsigned resync_s;           /* list again even when all went well; 0: 60 */
	bool (*synced)(void *ctx);   /* the usage was listed; NULL: always */
	bool (*leading)(void *ctx);  /* NULL: always */
	void *ctx;                   /* of both */
};

struct quota_sync;

int quota_sync_start(const struct quota_sync_config *cfg, struct quota_sync **out,
		     struct diag *d);
/* Stops the thread and frees s: within a second, or when the request in
 * flight ends (each is given at most 10 s).  NULL is a no-op. */
void quota_sync_stop(struct quota_sync *s);

#endif
