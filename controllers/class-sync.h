/*
 * class-sync: the GPUClass objects of the cluster kept equal to the
 * policy's classes, so that users see them with `kubectl get gpuclasses`
 * (manifests/crd-gpuclasses.yaml; docs/operations.md, "GPUClass objects").
 *
 * A thread of gpugate serve (API mode).  Once a second it looks whether
 * the policy was swapped (holder_generation()); then, and every resync_s
 * anyway (to repair an object someone deleted), it lists the GPUClass
 * objects labelled app.kubernetes.io/managed-by=gpugate and creates,
 * replaces (at the resourceVersion listed) and deletes (with uid and
 * resourceVersion preconditions) what classes_plan_make() says.  Objects
 * without that label are never touched: a class whose name is taken by
 * one is not published, with a warning.  Only while `leading` says so (the
 * Lease of several replicas), so that one replica writes.
 *
 * Nothing here is fatal: a missing CustomResourceDefinition (404 on the
 * list), a refused write or an unreachable API is logged once (again only
 * when the error changes) and retried after 2, 4, 8 and 16 s, then every
 * retry_s.  It logs (logfmt):
 *
 *   info  msg="gpuclasses synced" created=N updated=N deleted=N unchanged=N
 *         (only when something was written)
 *   warn  msg="gpuclasses not synced: the GPUClass CustomResourceDefinition
 *         is not installed" crd=gpuclasses.gpugate.io
 *   warn  msg="gpuclasses not synced" error="..."
 *   warn  msg="class not published as a GPUClass" class=C reason="..."
 *   info  msg="gpuclasses: the CustomResourceDefinition is there now"
 *
 * RBAC: get, list, create, update and delete on gpuclasses.gpugate.io
 * (manifests/rbac.yaml).
 */
#ifndef GPUGATE_CLASS_SYNC_H
#define GPUGATE_CLASS_SYNC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct classes_plan;
struct diag;
struct holder;
struct kube_config;
struct policy;

struct class_sync_config {
	const struct kube_config *kube;
	struct holder *policy;
	unsigned resync_s;           /* sync even when nothing changed; 0: 300 */
	unsigned retry_s;            /* at most between tries after failures; 0: 30 */
	bool (*leading)(void *ctx);  /* NULL: always */
	void *leading_ctx;
};

struct class_sync;

int class_sync_start(const struct class_sync_config *cfg, struct class_sync **out,
		     struct diag *d);
/* Stops the thread and frees s: within a second, or when the request in
 * flight ends (each is given at most 10 s).  NULL is a no-op. */
void class_sync_stop(struct class_sync *s);

/*
 * The pure part of a sync.  class_sync_plan(): what to create, replace
 * and delete (report/classes.h classes_plan_make(), in that order) to
 * make the objects of list (the API's answer to the list of the owned
 * GPUClass objects: {"items": [...]}) the policy's classes; 0 with *out
 * (classes_plan_release() it), or -1 with the error logged in err: "the
 * list of gpuclasses has no items", "out of memory".
 *
 * A failed sync is tried again after worker_retry_s(failures, retry_s).
 */
int class_sync_plan(const struct policy *p, const json_t *list, struct classes_plan *out,
		    char *err, size_t size);

#endif
