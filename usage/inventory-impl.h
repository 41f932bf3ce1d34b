/* The inventory's insides, shared by its two files and nothing else:
 * usage/inventory.c (nodes, pods, relists, views) and
 * usage/inventory-dra.c (the DRA objects and the devices they put on
 * the nodes).  Callers use usage/inventory.h. */
#ifndef GPUGATE_USAGE_INVENTORY_IMPL_H
#define GPUGATE_USAGE_INVENTORY_IMPL_H

#include "usage/inventory.h"

#include "base/arena.h"
#include "base/strmap.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
/* What the pods bound to one node ask for of one resource. */
struct alloc {
	char *resource;
	int64_t units;
};

/* One node name: its Node object (when known) and its pods' sums. */
struct slot {
	char *name; /* the key of slot_by_name */
	bool has_node;
	bool stale; /* not put since relist_begin */
	struct arena arena; /* the node's copy */
	struct pool_node node;
	struct alloc *alloc;
	size_t n_alloc, cap_alloc;
	/* Flavor membership under the policy of serial member_of (0: none):
	 * one byte per flavor, n_member of them. */
	uint64_t member_of;
	unsigned char *member;
	size_t n_member;
	uint64_t member_slices; /* ... and of slices (0: a policy without DRA) */
	/* Its DRA devices as the last build made them (devices_ensure;
	 * arrays in dev_arena, strings the slices' and rules', so a change
	 * of those detaches them first); node.devices points here. */
	struct arena dev_arena;
	struct pool_device *devices;
	size_t n_devices;
};

struct pod {
	char *uid; /* the key of pod_by_uid */
	char *node; /* NULL: holds nothing on any node */
	struct inventory_ask *asks;
	size_t n_asks;
	bool stale;
	/* Waiting for a node: its facts, strings in wait_arena. */
	bool waiting;
	struct inventory_waiting wait;
	struct arena wait_arena;
	/* Running, of a tenant: its facts, strings in wait_arena too. */
	bool running;
	struct inventory_running run;
};

/* One DRA object (ResourceSlice, DeviceTaintRule, ResourceClaim,
 * DeviceClass), copied into its own arena. */
struct dra_entry {
	char *key; /* in arena */
	bool stale;
	struct arena arena;
	union {
		struct inventory_slice slice;
		struct inventory_taint_rule rule;
		struct {
			struct inventory_claim_device *d;
			size_t n;
		} claim;
		const char *resource; /* a DeviceClass's extended resource, or NULL */
	} u;
};

/* The entries of one DRA kind by key. */
struct dra_table {
	struct strmap index;
	struct dra_entry **e;
	size_t n, cap;
};

#define DRA_KINDS (INVENTORY_KINDS - INVENTORY_SLICES)

struct inventory {
	pthread_mutex_t mu;
	struct strmap slot_by_name;
	struct slot **slots;
	size_t n_slots, cap_slots;
	struct strmap pod_by_uid;
	struct pod **pods;
	size_t n_pods, cap_pods;
	size_t n_nodes; /* slots with has_node */
	bool relisting[INVENTORY_KINDS], synced[INVENTORY_KINDS];
	/* DRA: the kinds' entries (by kind - INVENTORY_SLICES), which are
	 * not served; dra_serial counts changes of slices, rules and claims
	 * (what the devices say), slice_serial of slices (which devices
	 * there are: flavor membership); the slots' devices are built at
	 * dra_serial built_of, lazily, for DRA flavors only. */
	struct dra_table dra[DRA_KINDS];
	bool not_served[INVENTORY_KINDS];
	uint64_t dra_serial, slice_serial, built_of;
	bool attached; /* some slot may have devices */
	/* What the slots' devices share, built with them: the pools'
	 * counter sets and their users. */
	struct arena dev_arena;
	/* Scratch for views, grown as needed (under mu). */
	const struct pool_node **cand;
	struct pool_member *members;
	size_t cap_scratch;
};
/* ---- helpers of both ------------------------------------------------ */

/* Grows *arr (of *cap elements of size) to hold need. */
static inline int inv_grow(void **arr, size_t *cap, size_t need, size_t size)
{
	size_t n = *cap ? *cap : 16;
	void *p;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	p = realloc(*arr, n * size);
	if (!p)
		return -1;
	*arr = p;
	*cap = n;
	return 0;
}

/* The slot of node name, or NULL. */
static inline struct slot *inv_slot_find(struct inventory *inv, const char *name)
{
	size_t i;

	return strmap_get(&inv->slot_by_name, name, &i) ? inv->slots[i] : NULL;
}

/* ---- inventory-dra.c (all under mu) ---------------------------------- */

/* The table of DRA kind (INVENTORY_SLICES and after). */
struct dra_table *inv_dra_table(struct inventory *inv, enum inventory_kind kind);
/* Drops the entries of t that are stale (all: every one).  Whether any
 * went. */
bool inv_dra_table_drop(struct dra_table *t, bool all);
void inv_dra_table_release(struct dra_table *t);
/* kind's entries changed: slices and rules take the slots' devices with
 * them (those point at their strings); claims only what they say. */
void inv_dra_changed(struct inventory *inv, enum inventory_kind kind);
/* Every DRA kind listed or not served, and slices served. */
bool inv_dra_known(const struct inventory *inv);
/* Whether a DeviceClass serves resource through DRA. */
bool inv_class_serves(struct inventory *inv, const char *resource);
/* The slots' devices as of dra_serial, built when they are not
 * (docs/design/dra.md D3).  -1 when out of memory (no slot has any). */
int inv_devices_ensure(struct inventory *inv);
/* What flavor membership under p depends on besides the policy: 0 for a
 * policy without DRA flavors, else the slices' serial. */
uint64_t inv_dra_stamp(const struct inventory *inv, const struct policy *p);

#endif
