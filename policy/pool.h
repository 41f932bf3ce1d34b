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

/* True when n carries f's node labels and offers its resource. */
bool pool_node_in_flavor(const struct pool_node *n, const struct policy_flavor *f);

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

/* One node of a flavor, as the view shows it. */
struct pool_member {
	const struct pool_node *node;
	enum pool_exclusion exclusion;
	char why[160];
	int64_t capacity, allocatable, allocated, free;
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
