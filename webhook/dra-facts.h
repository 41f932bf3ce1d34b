/*
 * dra-facts: the DRA objects of resource.k8s.io/v1 that the pool reads
 * (docs/design/dra.md D3) -> the inventory's structs (usage/inventory.h),
 * for the feed (kube/feed.h): a ResourceSlice, a DeviceTaintRule, a
 * ResourceClaim's allocated devices, a DeviceClass's extended resource.
 *
 * Field names are those of k8s.io/api resource/v1 (types.go).  Strings
 * are borrowed from the JSON value, arrays and composed strings come from
 * the arena.  Each returns -1 when obj has no metadata.name (a claim: no
 * metadata.uid) or a field it needs has the wrong type; what it does not
 * understand inside a device (a list attribute, a capacity without a
 * value, a taint without a key) is skipped.
 */
#ifndef GPUGATE_DRA_FACTS_H
#define GPUGATE_DRA_FACTS_H

#include "usage/inventory.h"

#include <jansson.h>
#include <stddef.h>

struct arena;

/* The API's own limits (ResourceSliceMaxDevices, DeviceTaintsMaxLength,
 * ResourceSliceMaxAttributesAndCapacitiesPerDevice,
 * AllocationResultsMaxSize): a slice with more devices, a device with more
 * taints, attributes or capacities, or a claim with more results, is
 * refused. */
#define DRA_SLICE_MAX_DEVICES 128
#define DRA_DEVICE_MAX_TAINTS 16
#define DRA_DEVICE_MAX_ATTRIBUTES 32 /* attributes and capacities */
#define DRA_CLAIM_MAX_RESULTS 32
/* ... and of partitionable devices (ResourceSliceMaxCounterSets,
 * ResourceSliceMaxCountersPerCounterSet,
 * ResourceSliceMaxDeviceCounterConsumptionsPerDevice,
 * ResourceSliceMaxCountersPerDeviceCounterConsumption,
 * ResourceSliceMaxDevicesWithAdvancedFeatures: a slice of which a device
 * has taints or consumes counters holds at most 64 devices). */
#define DRA_SLICE_MAX_COUNTER_SETS 8
#define DRA_COUNTER_SET_MAX_COUNTERS 32
#define DRA_DEVICE_MAX_CONSUMES 2
#define DRA_CONSUMES_MAX_COUNTERS 32
#define DRA_SLICE_MAX_ADVANCED_DEVICES 64

/*
 * A ResourceSlice: spec.driver, spec.pool {name, generation,
 * resourceSliceCount}, spec.nodeName (NULL when absent or empty: allNodes,
 * nodeSelector or perDeviceNodeSelection), and spec.devices[] with their
 * attributes (names qualified: a name without '/' is "<driver>/<name>";
 * the value of string, int, bool or version as text, attribute_is_string
 * for "string" only), capacity (qualified the same way, the value as
 * written), taints {key, value, effect} (rule NULL) and consumesCounters
 * {counterSet, counters: NAME -> {value}}; and spec.sharedCounters
 * {name, counters: NAME -> {value}}.  Counter values are kept as written
 * and must be quantities ("98", "40Gi"); a slice over one of the limits
 * above, or with a counter that has no quantity, is refused.
 */
int dra_slice_facts(const json_t *obj, struct arena *a, struct inventory_slice *out);

/* A DeviceTaintRule: spec.deviceSelector {driver, pool, device} (absent
 * fields NULL; has_selector false without deviceSelector) and spec.taint
 * {key, value, effect}. */
int dra_taint_rule_facts(const json_t *obj, struct inventory_taint_rule *out);

/*
 * A ResourceClaim's allocated devices: status.allocation.devices.results[]
 * {driver, pool, device}, none before allocation.  A claim being deleted
 * still holds them until it is gone.  Results with adminAccess are left
 * out: such an allocation does not make the device unavailable.
 */
struct dra_claim {
	const char *uid;
	const struct inventory_claim_device *devices;
	size_t n_devices;
};
int dra_claim_facts(const json_t *obj, struct arena *a, struct dra_claim *out);

/* A DeviceClass: its name and spec.extendedResourceName (NULL: none). */
struct dra_class {
	const char *name;
	const char *extended_resource;
};
int dra_class_facts(const json_t *obj, struct dra_class *out);

/* The feed's readers (struct feed_config dra_put, dra_delete): obj of
 * kind (INVENTORY_CLAIMS, _SLICES, _TAINT_RULES, _DEVICE_CLASSES) read as
 * above and put into inv (-1: unreadable, or the inventory's -1), or its
 * last state dropped (by metadata.uid for a claim, else metadata.name). */
int dra_facts_put(struct inventory *inv, enum inventory_kind kind, const json_t *obj,
		  struct arena *a);
void dra_facts_delete(struct inventory *inv, enum inventory_kind kind, const json_t *obj);

#endif
