/*
 * classes: the classes of a policy as users see them.  One JSON object per
 * class, the same for `gpugate classes -o json|yaml` and for the spec of
 * the GPUClass object that `gpugate serve` keeps for each class
 * (`kubectl get gpuclasses`, manifests/crd-gpuclasses.yaml): what the
 * class gives, and which tenants can use it (policy_tenant_can_use()).
 */
#ifndef GPUGATE_CLASSES_H
#define GPUGATE_CLASSES_H

#include <jansson.h>

struct policy;
struct policy_class;

/*
 * A new object, keys in this order, absent ones left out:
 *   description (when not empty), flavor, resource, sharing, gpus,
 *   maxGpus, preemptible, topology {key, mode} (when set),
 *   priorityClassName, cpu, memory (when set), tenants [names, file order].
 * NULL when out of memory.
 */
json_t *classes_spec_new(const struct policy *p, const struct policy_class *c);

/* The GPUClass API (manifests/crd-gpuclasses.yaml): cluster-scoped. */
#define CLASSES_API_VERSION "gpugate.io/v1alpha1"
#define CLASSES_COLLECTION "/apis/gpugate.io/v1alpha1/gpuclasses"
/* The label of the objects gpugate keeps, and its value: the others are
 * never changed nor deleted. */
#define CLASSES_OWNER_LABEL "app.kubernetes.io/managed-by"
#define CLASSES_OWNER "gpugate"

/*
 * The GPUClass object of class c: apiVersion, kind, metadata {name,
 * labels {CLASSES_OWNER_LABEL: CLASSES_OWNER}}, spec (classes_spec_new()).
 * NULL when out of memory.
 */
json_t *classes_object_new(const struct policy *p, const struct policy_class *c);

/*
 * What makes the GPUClass objects of the cluster match policy p.  Pure:
 * `owned` is the items of a list of the objects carrying the owner label
 * (each with metadata.name, uid and resourceVersion, and spec); every
 * array of the plan is a new reference.
 *
 *   create     objects to POST: classes with no owned object
 *   update     objects to PUT at their own path: classes whose owned
 *              object's spec differs, with that object's resourceVersion
 *              and uid (the write is refused when it changed since)
 *   remove     owned objects whose class the policy no longer has (or no
 *              longer publishes), as listed: DELETE them with their uid
 *              and resourceVersion as preconditions
 *   skipped    names of classes that cannot be objects: a class name may
 *              hold capitals or '_', an object name may not
 *   unchanged  how many owned objects already match
 *
 * Returns 0, or -1 when out of memory (nothing to release then).
 */
struct classes_plan {
	json_t *create, *update, *remove, *skipped;
	size_t unchanged;
};

int classes_plan_make(const struct policy *p, const json_t *owned,
		      struct classes_plan *out);
void classes_plan_release(struct classes_plan *pl);

#endif
