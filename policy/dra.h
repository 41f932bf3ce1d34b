/*
 * dra: what a Dynamic Resource Allocation claim asks for, in the policy's
 * flavors (docs/quota.md, "GPUs asked for through DRA").
 *
 * A Pod that gets GPUs through DRA names ResourceClaims in
 * spec.resourceClaims; each claim asks for devices of DeviceClasses.  As
 * Kubernetes' own ResourceQuota does (pkg/quota/v1/evaluator/core,
 * resource_claims.go), gpugate counts the devices on the ResourceClaim
 * object, per device class, and nothing on the pod: a claim holds its
 * devices from its creation until it is deleted, whichever pods share it.
 * A ResourceClaimTemplate holds nothing: the resourceclaim controller makes
 * one ResourceClaim from it for each pod, and that claim is charged.
 *
 * A device class is a GPU class when a flavor lists it in deviceClassNames
 * (its devices are that flavor's units) or settings.gpuDeviceClassNames
 * names it (a raw GPU request: no flavor to charge).  Per request of
 * spec.devices.requests:
 *
 *   exactly          count devices of its class, or for a flavor shared by
 *                    capacity count x dra_device_units() (allocationMode All:
 *                    DRA_ALL_DEVICES, the most a claim is allocated, as
 *                    ResourceQuota counts it; a rule refuses All on GPU
 *                    classes, so this only counts what warn and audit
 *                    modes admit)
 *   firstAvailable   the largest count among its subrequests of the
 *                    claim's flavor: whichever is allocated, no more
 *
 * A claim has one flavor, the first one its requests map to; requests of
 * another flavor are reported (two_flavors) and not counted.
 *
 * Pure: the policy and the facts in, the answer out.  policy/decide-dra.c
 * turns the problems into rules and messages; charge_claim()
 * (policy/charge.h) charges what a claim holds from dra_decide().
 */
#ifndef GPUGATE_POLICY_DRA_H
#define GPUGATE_POLICY_DRA_H

#include "policy/workload.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct policy;
struct policy_flavor;

/* resource.k8s.io's AllocationResultsMaxSize: the most devices one claim
 * can be allocated, and what an allocationMode All request counts for. */
#define DRA_ALL_DEVICES 32

/* Where in spec.devices.requests: a request, or one of its subrequests. */
struct dra_where {
	const char *request;    /* the request's name ("" when absent) */
	const char *subrequest; /* the firstAvailable entry's name, or NULL */
	const char *device_class;
};

struct dra_claim {
	bool gpu;                  /* some request names a GPU device class */
	struct dra_where first_gpu; /* the first of them */

	/* The flavor of the first request of a mapped device class, with
	 * that class; NULL when none maps. */
	const struct policy_flavor *flavor;
	const char *device_class;
	int64_t units;             /* devices of flavor asked for (above) */

	/* The first of each problem; a NULL device_class: none. */
	struct dra_where raw;      /* a GPU device class no flavor maps */
	struct dra_where all;      /* allocationMode All on a GPU class */
	struct dra_where two_flavors; /* a request of a second flavor */
	const struct policy_flavor *other_flavor; /* ... that flavor */
};

/*
 * The units of flavor f that one device of request d holds: 1, or for a
 * flavor shared by capacity (dra.sharedCapacity) the device's share:
 * ceil(capacity.requests[name] / perUnit), and unitsPerDevice where d asks
 * for no such capacity or for a fraction of a unit's quantity (the
 * scheduler then gives it the device's whole capacity, or a share gpugate
 * cannot know before allocation).  A request of a shared flavor's class
 * counts count x this.
 */
int64_t dra_device_units(const struct policy_flavor *f, const struct wl_device_request *d);

/* The units of flavor f one request part d (an exactly part, or one
 * firstAvailable entry, of f's class) asks for: its devices (All:
 * DRA_ALL_DEVICES) x dra_device_units(), capped far above any quota. */
int64_t dra_part_units(const struct policy_flavor *f, const struct wl_device_request *d);

/* What the n requests (struct workload.device_requests) ask for under p. */
void dra_decide(const struct policy *p, const struct wl_device_request *reqs,
		size_t n, struct dra_claim *out);

#endif
