/*
 * facts: a Pod, Job, ResourceClaim, ResourceClaimTemplate or pod-template
 * controller (Deployment, StatefulSet, ReplicaSet, DaemonSet, CronJob) JSON
 * object ->
 * struct workload (policy/workload.h).
 *
 * Reads only the fields the rules need.  Strings are borrowed from the JSON
 * value, arrays are allocated in the caller's arena: both must outlive the
 * workload.  A field of the wrong JSON type is an error (the apiserver never
 * sends one, so it means a hand-made or hostile review).
 */
#ifndef GPUGATE_FACTS_H
#define GPUGATE_FACTS_H

#include "policy/workload.h"

#include <jansson.h>
#include <stdbool.h>

struct arena;
struct diag;

/*
 * Fills the object-derived fields of wl (kind must already be set to
 * WL_POD, WL_JOB, WL_CLAIM, WL_CLAIM_TEMPLATE or WL_TEMPLATE, and def to
 * its row, which for WL_TEMPLATE the object's own `kind` replaces; request
 * fields are left as they are).  Returns 0, or -1 with one message naming the field
 * ("spec.containers[1].env is not a list",
 * "spec.devices.requests[0].exactly.count is not a whole number of at
 * least 1").
 */
int facts_extract(const json_t *object, struct workload *wl, struct arena *a,
		  struct diag *d);

#endif
