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

#endif
