/*
 * pool: what GPUs a flavor has, which nodes are excluded and why, and
 * whether a request can be placed — pure, from node facts (webhook/
 * node-facts.c reads them from the API) and the policy.
 *
 * A node belongs to a flavor when it carries every label of the flavor's
 * nodeSelector and offers its resource (status.capacity or allocatable
 * names it: a device plugin that lost every device still lists it, at 0).
 * It is excluded, for the first reason that applies:
 *
 *   health     a taint, condition or label that policy health names
 *              (NVSentinel's quarantine taint, a node-problem-detector
 *              condition, ...): the repair comes first;
 *   validating its signal is gone but gpugate's marks (policy/health.h)
 *              are still on: it comes back once health.returnAfter
 *              says so (the health controller then removes them);
 *   NotReady   its Ready condition is not True;
 *   cordoned   spec.unschedulable;
 *   tainted    a NoSchedule or NoExecute taint that the flavor's
 *              tolerations do not cover (gpugate's own health taint is
 *              never this: it is health or validating).
 *
 * What a node holds: capacity and allocatable of the flavor's resource
 * (a device plugin lowers allocatable when a device turns unhealthy),
 * allocated (the units that bound, non-terminal pods ask for, Terminating
 * ones included), free = allocatable - allocated (>= 0).
 */
#ifndef GPUGATE_POLICY_POOL_H
#define GPUGATE_POLICY_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct policy;
struct policy_flavor;
struct policy_health;

struct pool_taint {
	const char *key;
	const char *value;  /* "" when absent */
	const char *effect; /* "NoSchedule", "PreferNoSchedule", "NoExecute" */
};

struct pool_condition {
	const char *type;
	const char *status; /* "True", "False", "Unknown" */
	const char *reason; /* "" when absent */
};

struct pool_label {
	const char *key;
	const char *value;
};

/* One extended resource of a node: whole units. */
struct pool_resource {
	const char *name;
	int64_t capacity;    /* -1 when status.capacity does not name it */
	int64_t allocatable; /* -1 when status.allocatable does not name it */
	int64_t allocated;   /* what its bound pods ask for (the inventory's sum) */
};

/*
 * A DRA device on a node (docs/design/dra.md D3): a device of a
 * ResourceSlice whose spec.nodeName is the node, of a pool whose slices
 * are all seen at its newest generation (an incomplete or outdated pool
 * offers nothing, as the scheduler's allocator reads it).  The inventory
 * (usage/inventory.h) puts them on its copy of the node when it builds a
 * view; webhook/node-facts.c leaves them empty.
 */
struct pool_device_taint {
	struct pool_taint taint; /* effect "NoSchedule", "NoExecute" or "None" */
	const char *rule;        /* the DeviceTaintRule's name; NULL: the slice's */
};

/* What a device consumes of one counter set of its pool
 * (consumesCounters[]: counterSet and counters, values as written). */
struct pool_counter_use {
	const char *set;
	const struct pool_label *counters; /* name -> quantity */
	size_t n_counters;
};

struct pool_device;

/*
 * A counter set of a DRA pool (a slice's spec.sharedCounters[]: KEP-4815
 * partitionable devices), as the node whose devices consume from it sees
 * it: its counters' values as written ("98", "40Gi"), and the devices of
 * the pool that a claim holds and that consume from it, wherever they are
 * (the scheduler's allocator subtracts every allocated device of the
 * pool).  A full GPU and its MIG partitions consume the same set, so a
 * held GPU leaves nothing for its partitions and a held partition leaves
 * too little for the GPU.
 */
struct pool_counter_set {
	const char *driver, *pool, *name;
	const struct pool_label *counters;
	size_t n_counters;
	const struct pool_device *const *users; /* held devices consuming it */
	size_t n_users;
};

struct pool_device {
	const char *driver, *pool, *name;
	/* Attribute names qualified ("gpu.nvidia.com/productName": a name
	 * without a domain is the driver's); the value as text, and whether
	 * it is a string attribute (only those match a flavor's attributes:
	 * the template's CEL compares strings). */
	const struct pool_label *attributes;
	const bool *attribute_is_string; /* n_attributes of them */
	size_t n_attributes;
	/* Capacity names qualified the same way, values as written
	 * ("80Gi"). */
	const struct pool_label *capacity;
	size_t n_capacity;
	/* The slice's taints, then those of every DeviceTaintRule whose
	 * selector (driver, pool, device; absent: any) matches. */
	const struct pool_device_taint *taints;
	size_t n_taints;
	bool allocated; /* a claim's status.allocation.devices.results names it */
	/* allowMultipleAllocations: the scheduler allocates shares of its
	 * capacity (a flavor with dra.sharedCapacity counts those); consumed
	 * (NULL: nothing) is, per capacity[i], the whole quantity the
	 * allocated shares consume (their consumedCapacity summed). */
	bool multi_alloc;
	const int64_t *consumed;
	/* consumesCounters: from counter sets of its own pool (at most 2). */
	const struct pool_counter_use *consumes;
	size_t n_consumes;
};

/* A node as the API shows it (strings borrowed from wherever the caller
 * keeps them). */
struct pool_node {
	const char *name;
	const struct pool_label *labels;
	size_t n_labels;
	const struct pool_resource *resources;
	size_t n_resources;
	const struct pool_taint *taints;
	size_t n_taints;
	const struct pool_condition *conditions;
	size_t n_conditions;
	bool ready;         /* condition Ready is True */
	bool unschedulable; /* spec.unschedulable */
	/* gpugate's record (annotation gpugate.io/health, policy/health.h),
	 * NULL when absent. */
	const char *health_record;
	/* Its DRA devices (every driver's), for DRA flavors, and the counter
	 * sets of their pools. */
	const struct pool_device *devices;
	size_t n_devices;
	const struct pool_counter_set *counter_sets;
	size_t n_counter_sets;
};

enum pool_exclusion {
	POOL_USABLE,
	POOL_HEALTH,
	POOL_VALIDATING,
	POOL_NOT_READY,
	POOL_CORDONED,
	POOL_TAINTED,
};
#define POOL_EXCLUSIONS (POOL_TAINTED + 1)

/* "usable", "health", "validating", "NotReady", "cordoned", "tainted". */
const char *pool_exclusion_name(enum pool_exclusion e);


/*
 * A health signal as policy health writes it: "key", "key=value", and for
 * taints also "key:Effect" and "key=value:Effect" (with_effect).  Splits s
 * (no copy): the key is s[0, key_len); has_value and the value; effect
 * (NoSchedule, PreferNoSchedule or NoExecute, a suffix of s) or NULL.
 * Validation of the parts is the caller's.
 */
struct pool_signal {
	size_t key_len;
	bool has_value;
	const char *value;
	size_t value_len;
	const char *effect;
};
void pool_signal_split(const char *s, bool with_effect, struct pool_signal *out);

/* The label value of key on n, or NULL. */
const char *pool_node_label(const struct pool_node *n, const char *key);

/* The resource res of n, or NULL when n does not offer it. */
const struct pool_resource *pool_node_resource(const struct pool_node *n,
					       const char *res);

/* True when n carries f's node labels and offers its resource; for a DRA
 * flavor (f->dra), when it carries the labels and has at least one device
 * of the flavor (pool_device_in_flavor), whatever its taints. */
bool pool_node_in_flavor(const struct pool_node *n, const struct policy_flavor *f);

/*
 * True when device d is DRA flavor f's: its driver is f->dra->driver,
 * every dra.attributes entry names a string attribute of d with that very
 * value, and every dra.minCapacity entry a capacity of d at least that
 * quantity (names without a domain are the driver's).  dra.selectors and
 * the DeviceClass's own selectors are CEL, which gpugate does not
 * evaluate: the pool is an upper bound where they narrow further
 * (pool_view.approximate).  For a flavor shared by capacity
 * (dra.sharedCapacity) also: d allows multiple allocations and has that
 * capacity.  False for a flavor without dra.
 */
bool pool_device_in_flavor(const struct pool_device *d, const struct policy_flavor *f);

/*
 * What device d (of DRA flavor f) counts in f's units: *units it holds,
 * *used of them allocated.  A whole device: 1, and 1 when a claim's
 * allocation names it.  A device shared by capacity:
 * floor(capacity / perUnit), and of those what no new share fits in any
 * more: units - floor((capacity - consumed) / perUnit), consumed being
 * what its shares' consumedCapacity sums to.
 */
void pool_device_units(const struct pool_device *d, const struct policy_flavor *f,
		       int64_t *units, int64_t *used);

/*
 * Why device d is out of DRA flavor f's pool: the first of its taints with
 * effect NoSchedule or NoExecute that f->dra->tolerations do not tolerate
 * (the scheduler's rule), as `taint K=V:NoExecute` or `DeviceTaintRule
 * NAME: taint K=V:NoSchedule` in why (size > 0).  Returns false (why "")
 * when none: effect None is informational.
 */
bool pool_device_tainted(const struct pool_device *d, const struct policy_flavor *f,
			 char *why, size_t size);

/*
 * Whether device d of node n cannot be had for its counters (the
 * scheduler's allocator, checkAvailableCounters): for some counter C of a
 * set S that d consumes, S's value of C is less than what the held
 * devices of S (S.users) consume of C plus what d does.  The reason in
 * why (size > 0), naming the first held device that consumes C:
 * `counter set gpu-0-counter-set: memory-slice-3 used by gpu-0`; a set
 * or counter that n does not carry blocks too (`counter set S not
 * published`, `counter set S has no counter C`: the scheduler holds such
 * a pool invalid).  False (why "") when d consumes no counters or they
 * suffice.  A held device (d->allocated) is judged like any other: the
 * caller asks for devices that are not.
 */
bool pool_device_blocked(const struct pool_node *n, const struct pool_device *d,
			 char *why, size_t size);

/*
 * Why n is excluded for f (POOL_USABLE when it is not), with the signal in
 * why (size > 0; "" when usable): `taint nvsentinel=fatal:NoSchedule`,
 * `condition GpuXidError=True (reason Xid79)`, `label K=V`, `Ready=Unknown`,
 * `taint K=V:NoExecute`; validating: `after condition GpuXidError=True,
 * cleared 2026-12-05T11:00:00Z` (the record's signal and time) or `taint
 * gpugate.io/unhealthy=validating:NoSchedule` (a taint without a record).
 */
enum pool_exclusion pool_node_exclusion(const struct pool_node *n,
					const struct policy_flavor *f,
					const struct policy_health *h,
					char *why, size_t size);

/*
 * One node of a flavor, as the view shows it.  For a DRA flavor the units
 * are its devices of the flavor: capacity all of them, allocatable those
 * not tainted (as a device plugin lowers allocatable for a sick device),
 * allocated the allocatable ones a claim holds, blocked the allocatable
 * ones no claim holds whose counters are used up (pool_device_blocked: a
 * MIG partition of a held GPU), free the rest (allocatable - allocated -
 * blocked); devices_tainted the tainted ones (allocated or not) and
 * device_why the first one's device and reason ("gpu-3: taint
 * K=V:NoExecute"); devices_blocked and blocked_why the same for counters
 * ("mig-0-1g-0: counter set gpu-0-counter-set: memory-slice-0 used by
 * gpu-0").
 */
struct pool_member {
	const struct pool_node *node;
	enum pool_exclusion exclusion;
	char why[160];
	int64_t capacity, allocatable, allocated, free;
	int64_t devices_tainted;
	char device_why[160];
	int64_t devices_blocked;
	char blocked_why[160];
};

/* A flavor's nodes.  The totals count usable nodes only. */
struct pool_view {
	const struct policy_flavor *flavor;
	struct pool_member *members; /* the caller's array */
	size_t n_members;            /* nodes of the flavor */
	size_t n_usable;
	int64_t capacity, allocatable, allocated, free;
	int64_t largest_allocatable; /* of one usable node; 0 when none */
	int64_t largest_free;
	const char *largest_allocatable_node; /* NULL when none */
	const char *largest_free_node;
	/* DRA flavors: tainted devices and devices blocked by counters of
	 * the usable nodes; approximate when the counts are an upper bound:
	 * CEL that gpugate does not evaluate narrows the devices
	 * (dra.selectors), or free devices of a usable node compete for the
	 * same counters (two MIG partitions on one memory slice, a free GPU
	 * and its free partitions, whatever their flavors: not all of them
	 * can be had at once). */
	int64_t devices_tainted, devices_blocked;
	bool approximate;
	bool devices_compete; /* the second reason for approximate */
};

/*
 * Fills v for flavor f from the nodes (all of the cluster's), using
 * members (room for n_nodes entries).  Pure: reads the nodes, f and h.
 */
void pool_view_build(const struct pool_node *const *nodes, size_t n_nodes,
		     const struct policy_flavor *f, const struct policy_health *h,
		     struct pool_member *members, struct pool_view *v);

/* A flavor at a glance (metrics, the pool report). */
struct pool_summary {
	const struct policy_flavor *flavor;
	size_t nodes[POOL_EXCLUSIONS]; /* by enum pool_exclusion */
	int64_t capacity;      /* status.capacity of every node of the flavor */
	int64_t allocatable, allocated, free, largest_free; /* usable nodes */
	int64_t excluded;      /* capacity of the excluded nodes */
	int64_t devices_tainted; /* DRA: tainted devices of the usable nodes */
	int64_t devices_blocked; /* DRA: blocked by counters, of the usable nodes */
	bool approximate;        /* pool_view.approximate */
};

void pool_summarize(const struct pool_view *v, struct pool_summary *out);

enum pool_verdict {
	POOL_FITS,        /* there is room now */
	POOL_UNKNOWN,     /* no node of the flavor in the cluster (yet: an
			   * autoscaler may add one) */
	POOL_NONE_USABLE, /* every node of the flavor is excluded, or none
			   * offers a unit (allocatable 0 everywhere: a device
			   * plugin restarting): advisory only, so that a broken
			   * health feed cannot stop every GPU pod at the door */
	POOL_NEVER_FITS,  /* no usable node could hold one pod (or the gang in
			   * one domain), even empty */
	POOL_NOT_NOW,     /* it could, but there is no room now */
};

/* "fits", "unknown", "none-usable", "never-fits", "not-now". */
const char *pool_verdict_name(enum pool_verdict v);

struct pool_fit {
	enum pool_verdict verdict;
	int64_t per_pod;
	int64_t pods;                /* 1, or the gang's pods */
	/* Pods that fit now / when every usable node is empty, in the best
	 * topology domain (topology: one domain; else the whole flavor). */
	int64_t fit_now, fit_empty;
	const char *domain;          /* the best domain's label value, or NULL */
	size_t n_domains;            /* with a topology key: domains seen */
	size_t n_excluded;           /* nodes of the flavor that are excluded */
};

#define POOL_NAME_LEN 254
#define POOL_MAX_EXCLUDED 4

/* What the pool says about one request, copied out of a view (the
 * inventory builds it under its lock; decide-pool.c words it). */
struct pool_check {
	bool known;                  /* false: nothing else is set */
	struct pool_fit fit;         /* fit.domain points into domain below */
	size_t n_nodes, n_usable;
	int64_t allocatable, free;   /* of the usable nodes */
	int64_t largest_allocatable, largest_free;
	char largest_allocatable_node[POOL_NAME_LEN];
	char largest_free_node[POOL_NAME_LEN];
	char domain[64];             /* the best topology domain, or "" */
	/* The first excluded nodes, with why. */
	size_t n_excluded;           /* all of them */
	struct {
		char node[POOL_NAME_LEN];
		enum pool_exclusion exclusion;
		char why[160];
	} excluded[POOL_MAX_EXCLUDED];
};

/*
 * Fills *out from view v: pool_fit of pods pods of per_pod units (in one
 * domain of topology_key when not NULL), the totals and the excluded
 * nodes.  Pure.
 */
void pool_check_build(const struct pool_view *v, int64_t per_pod, int64_t pods,
		      const char *topology_key, struct pool_check *out);
/* The same within one given domain of topology_key (domain not NULL: only
 * the nodes whose label topology_key has that value count, as when a
 * gang's first pods are bound there; NULL: every domain, as above). */
void pool_check_build_in(const struct pool_view *v, int64_t per_pod, int64_t pods,
			 const char *topology_key, const char *domain,
			 struct pool_check *out);

/*
 * Whether pods pods of per_pod units each can be placed on v's usable
 * nodes, all in one domain of topology_key when it is not NULL (a required
 * topology), else anywhere.  A pod fits a node when per_pod <= its free
 * units (now) or its allocatable (empty).  Pure.
 */
void pool_fit(const struct pool_view *v, int64_t per_pod, int64_t pods,
	      const char *topology_key, struct pool_fit *out);
/*
 * pool_fit within one domain: with topology_key and domain not NULL, only
 * the usable nodes whose label topology_key is domain count (a domain no
 * usable node has: nothing fits there, never-fits); domain NULL is
 * pool_fit.  Pure.
 */
void pool_fit_in(const struct pool_view *v, int64_t per_pod, int64_t pods,
		 const char *topology_key, const char *domain, struct pool_fit *out);

#endif
