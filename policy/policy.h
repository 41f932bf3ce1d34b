/*
 * policy: the immutable policy model (SPEC section 3).
 *
 * A policy is loaded once from YAML (policy_load/policy_parse), validated in
 * full, and never changes afterwards: every thread may read it without locks.
 * A reload builds a new policy and swaps the pointer; the old one is freed
 * when its last reader is done (the server owns that reference counting).
 *
 * All pointers returned by lookups, and all strings inside the structures
 * below, live exactly as long as the policy.
 */
#ifndef GPUGATE_POLICY_H
#define GPUGATE_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct diag;

/* Size caps: a policy beyond these is refused with a located error. */
#define POLICY_MAX_FILE_BYTES (16u << 20)
#define POLICY_MAX_GPUS_PER_NODE 1024
#define POLICY_MAX_QUOTA 1000000
#define POLICY_MAX_GRACE_SECONDS 86400
#define POLICY_MAX_TOLERATION_SECONDS 31536000
/* A class's description: one line, shown in tables (bytes, as UTF-8). */
#define POLICY_MAX_DESCRIPTION 256

enum policy_sharing {
	POLICY_SHARING_EXCLUSIVE,
	POLICY_SHARING_MIG,
	POLICY_SHARING_TIME_SLICING,
	POLICY_SHARING_MPS,
	POLICY_SHARING__COUNT
};

enum policy_mode {
	POLICY_MODE_ENFORCE,
	POLICY_MODE_WARN,
	POLICY_MODE_AUDIT,
};

/*
 * reclaimWithinCohort: what a tenant's request that fits its nominal quota
 * does when part of that quota is lent out to borrowers (Kueue's names and
 * meanings).  Any: admitted, and that many units are reclaimed from the
 * cohort's borrowing workloads; LowerPriority: the same, from workloads of
 * lower priority only; Never: denied while the units are lent out.
 */
enum policy_reclaim {
	POLICY_RECLAIM_ANY,
	POLICY_RECLAIM_LOWER_PRIORITY,
	POLICY_RECLAIM_NEVER,
};

/* "Any", "LowerPriority", "Never". */
const char *policy_reclaim_name(enum policy_reclaim r);

enum policy_raw_requests {
	POLICY_RAW_REJECT,
	POLICY_RAW_ALLOW,
};

/*
 * settings.admissionWarnings: what an admitted workload is told.  Problems
 * (borrowed quota, checkpoint hooks, a missing claim, a rule warn mode lets
 * pass, ...) always warn; the success line ("gpugate: train-large -> 8 x
 * h100-80gb for tenant research (8/32 in use)") only with ALL, so that
 * `kubectl apply --warnings-as-errors` of a workload that fits succeeds.
 */
enum policy_admission_warnings {
	POLICY_WARNINGS_PROBLEMS,
	POLICY_WARNINGS_ALL,
};

enum policy_topology_mode {
	POLICY_TOPOLOGY_NONE,
	POLICY_TOPOLOGY_REQUIRED,
	POLICY_TOPOLOGY_PREFERRED,
};

/* "exclusive", "mig", "time-slicing", "mps". */
const char *policy_sharing_name(enum policy_sharing s);
/* "enforce", "warn", "audit". */
const char *policy_mode_name(enum policy_mode m);

struct policy_kv {
	const char *key;
	const char *value;
};

/* A Kubernetes toleration; absent string fields are "" (never NULL). */
struct policy_toleration {
	const char *key;
	const char *op;     /* "Exists" or "Equal" */
	const char *value;
	const char *effect; /* "", "NoSchedule", "PreferNoSchedule", "NoExecute" */
	bool has_seconds;
	int64_t seconds;
};

/*
 * A flavor's dra block (docs/policy.md, "DRA flavors"): its classes get
 * their devices through a ResourceClaimTemplate gpugate keeps
 * (policy/dra-template.h), which asks for devices of device_class that
 * driver publishes and whose attributes and capacity match.
 */
/* dra.sharedCapacity: devices that allow multiple allocations, shared by
 * one of their capacities (Kubernetes' consumable capacity): a unit of
 * the flavor is per_unit of that capacity. */
struct policy_dra_share {
	const char *name;        /* the capacity, as the driver names it */
	const char *per_unit;    /* a quantity, as written */
	int64_t per_unit_value;  /* ... its whole value (> 0) */
	unsigned units_per_device; /* what a claim of a whole device counts */
};

struct policy_dra {
	const char *device_class;           /* dra.deviceClassName */
	const char *driver;                 /* dra.driver */
	const struct policy_kv *attributes; /* name = string value */
	size_t n_attributes;
	const struct policy_kv *min_capacity; /* name = quantity, as written */
	size_t n_min_capacity;
	const char *const *selectors;       /* extra CEL expressions */
	size_t n_selectors;
	/* DeviceTolerations put in the template's request (effect "" for
	 * every effect). */
	const struct policy_toleration *tolerations;
	size_t n_tolerations;
	const struct policy_dra_share *shared; /* NULL: whole devices */
	/* 6 base-32 characters of a hash of the block: what the template's
	 * spec depends on besides the count, so that a change of the block
	 * makes new template names (a template's spec is immutable). */
	char hash[7];
};

struct policy_flavor {
	unsigned index; /* position in the policy, 0-based */
	const char *name;
	/* The extended resource its pods ask for; NULL for a DRA flavor,
	 * whose pods name a claim template instead (dra). */
	const char *resource;
	const struct policy_dra *dra; /* NULL: not served through DRA */
	/* What its units are called in messages: resource, or for a DRA
	 * flavor "<deviceClassName> devices" (the pool counts devices). */
	const char *units;
	enum policy_sharing sharing;
	const struct policy_kv *node_selector;
	size_t n_node_selector;
	const struct policy_toleration *tolerations;
	size_t n_tolerations;
	unsigned gpus_per_node;
	/* deviceClassNames: the DRA DeviceClasses whose devices are this
	 * flavor's units (policy/dra.h); a class maps to one flavor at most. */
	const char *const *device_classes;
	size_t n_device_classes;
};

/* idle: {below, for, action} on a class or a tenant (SPEC section 10,
 * policy/idle.h). */
struct policy_idle {
	const char *below_text;  /* "5%", as written */
	double below;            /* the ratio, 0..1 */
	const char *for_text;    /* "30m", as written */
	int64_t for_s;
	int action;              /* enum idle_action */
};

struct policy_class {
	unsigned index;
	const char *name;
	const char *description;          /* "" when absent */
	const struct policy_flavor *flavor;
	unsigned gpus;                    /* default count per pod */
	unsigned max_gpus;                /* == gpus when absent */
	const char *cpu;                  /* NULL when absent */
	const char *memory;               /* NULL when absent */
	enum policy_topology_mode topology_mode;
	const char *topology_key;         /* NULL when no topology rule */
	const char *priority_class_name;  /* NULL when absent */
	bool preemptible;
	/* gang: a Job of it starts all or nothing (SPEC section 9,
	 * policy/gang.h). */
	bool gang;
	const struct policy_idle *idle;   /* NULL: none (the tenant's, if any) */
};

/* No limit, for borrowing_limit and lending_limit. */
#define POLICY_NO_LIMIT (-1)

struct policy_quota {
	const struct policy_flavor *flavor;
	int64_t nominal;
	int64_t borrowing_limit; /* POLICY_NO_LIMIT when absent */
	int64_t lending_limit;   /* POLICY_NO_LIMIT when absent */
};

struct policy_tenant {
	unsigned index;
	const char *name;
	const char *const *namespaces; /* exact names or shell globs */
	size_t n_namespaces;
	const char *cohort;            /* NULL when in no cohort */
	int cohort_index;              /* -1 when in no cohort */
	bool all_classes;              /* the file lists no classes: all allowed */
	const struct policy_class *const *classes; /* else: the allowed ones */
	size_t n_classes;
	unsigned sharing_mask;         /* bit (1u << enum policy_sharing) */
	enum policy_mode mode;         /* settings.mode unless overridden */
	enum policy_reclaim reclaim;   /* reclaimWithinCohort, default Any */
	/* kueue.quotaOwner: for the workloads Kueue queues
	 * (kueue.x-k8s.io/queue-name), Kueue's quota decides and gpugate
	 * only counts and warns; default gpugate. */
	bool kueue_owns_quota;
	/* kueue.localQueue: stamped as kueue.x-k8s.io/queue-name on the
	 * tenant's class Jobs that name no queue; NULL: none. */
	const char *local_queue;
	/* Quota by flavor index; NULL entry: no quota for that flavor. */
	const struct policy_quota *const *quota_by_flavor;
	const struct policy_quota *quota; /* in file order */
	size_t n_quota;
	const struct policy_idle *idle;   /* NULL: none */
};

/* settings.gangStart (SPEC section 9): auto takes the first route the
 * cluster serves; the others force one (podgroup is route 2); off: none. */
enum policy_gang_start {
	POLICY_GANG_AUTO,
	POLICY_GANG_WORKLOAD,
	POLICY_GANG_PODGROUP,
	POLICY_GANG_GATES,
	POLICY_GANG_OFF,
};
#define POLICY_GANG_TIMEOUT_DEFAULT 300

/* settings.classLabel and gpusLabel when the policy names none; the
 * webhook registrations name these (manifests/webhooks.yaml). */
#define POLICY_DEFAULT_CLASS_LABEL "gpugate.io/class"
#define POLICY_DEFAULT_GPUS_LABEL "gpugate.io/gpus"

struct policy_settings {
	const char *class_label;
	const char *gpus_label;
	enum policy_raw_requests raw_gpu_requests;
	enum policy_mode mode;
	enum policy_admission_warnings admission_warnings;
	/* gpuDeviceClassNames: DeviceClasses that are GPUs even when no
	 * flavor maps them (a claim of one is a raw GPU request). */
	const char *const *gpu_device_classes;
	size_t n_gpu_device_classes;
	/* settings.exemptions: system components gpugate never judges (the
	 * GPU stack's own pods).  Namespaces, and ServiceAccounts as
	 * "namespace/name". */
	const char *const *exempt_namespaces;
	size_t n_exempt_namespaces;
	const char *const *exempt_service_accounts;
	size_t n_exempt_service_accounts;
	/* gangStart: which route gang start takes (SPEC section 9). */
	enum policy_gang_start gang_start;
	/* gangTimeoutSeconds: a gang released by route gates whose pods are
	 * not all running after this long is gated again. */
	int64_t gang_timeout_seconds;
};

/*
 * checkpoint.claim: the claims gpugate keeps (controllers/claim-sync.h).  With
 * create, the Lease holder creates claim_name in every namespace of a
 * tenant where it is missing, labelled app.kubernetes.io/managed-by=gpugate;
 * it never changes or deletes a claim.
 */
struct policy_checkpoint_claim {
	bool create;
	const char *storage_class; /* NULL: the cluster's default StorageClass */
	const char *size;          /* spec.resources.requests.storage */
	const char *const *access_modes;
	size_t n_access_modes;
};

/* The namespaces exempt when settings.exemptions is absent: those the
 * NVIDIA GPU Operator (and its older operand namespace, and OpenShift's),
 * NVSentinel, NVIDIA's DRA driver and a standalone DCGM exporter install
 * into by default.  The webhook registrations exclude the same list
 * (manifests/webhooks.yaml, the chart's webhook.excludeNamespaces). */
#define POLICY_DEFAULT_EXEMPT_NAMESPACES                                   \
	"gpu-operator", "gpu-operator-resources", "nvidia-gpu-operator",   \
		"nvsentinel", "nvidia-dra-driver-gpu", "dcgm-exporter"

enum policy_exemption {
	POLICY_NOT_EXEMPT,
	POLICY_EXEMPT_NAMESPACE,
	POLICY_EXEMPT_SERVICE_ACCOUNT,
};


struct policy_checkpoint {
	int64_t grace_period_seconds;
	/* How long a reclaim waits for a victim's checkpoint report. */
	int64_t timeout_seconds;
	const char *mount_path;
	const char *claim_name; /* template with {tenant}/{namespace}; NULL: emptyDir */
	const char *const *pre_stop; /* command argv; n_pre_stop == 0: none */
	size_t n_pre_stop;
	const struct policy_kv *env;
	size_t n_env;
	struct policy_checkpoint_claim claim;
};

/*
 * health: the signals of the health systems a cluster runs that take a
 * node out of the pool (policy/pool.h; docs/policy.md "health").  A value
 * or effect of NULL matches any.
 */
struct policy_health_taint {
	const char *key;
	const char *value;
	const char *effect;
};

struct policy_health_condition {
	const char *type;
	const char *status; /* "True", "False" or "Unknown" */
};

struct policy_health {
	const struct policy_health_taint *taints;
	size_t n_taints;
	const struct policy_health_condition *conditions;
	size_t n_conditions;
	const struct policy_kv *labels; /* key=value */
	size_t n_labels;
	/* The loop (policy/health.h, docs/design/health-loop.md). */
	int on_unhealthy;               /* enum health_on_unhealthy */
	/* returnAfter: the validation label (key NULL: none; value NULL: any
	 * value) and the settle time (0: none). */
	const char *return_label_key;
	const char *return_label_value;
	int64_t return_settle_s;
	/* Labels that say another system drains the node (value NULL: any). */
	const struct policy_kv *drained_by;
	size_t n_drained_by;
};

struct policy;

/*
 * Loads and validates a policy file.  On success stores a new policy in *out
 * and returns 0.  On failure returns -1 and adds every error found to d, each
 * one line "FILE:LINE: message".
 */
int policy_load(const char *path, struct policy **out, struct diag *d);

/* The same from memory; name is used in messages in place of a file name. */
int policy_parse(const char *name, const char *text, size_t len,
		 struct policy **out, struct diag *d);

/*
 * policy_load() and policy_parse() that also add to w (may be NULL) the
 * findings that do not make the policy invalid, each one line
 * "FILE:LINE: warning: message" (docs/policy.md, "Warnings"): what
 * `gpugate check` prints.  Nothing is added to w when the policy is
 * invalid.  A policy with warnings costs a second walk of the document
 * (to locate them): not for reloads.
 */
int policy_load_warn(const char *path, struct policy **out, struct diag *d,
		     struct diag *w);
int policy_parse_warn(const char *name, const char *text, size_t len,
		      struct policy **out, struct diag *d, struct diag *w);

void policy_free(struct policy *p);

const char *policy_source(const struct policy *p); /* file name given to load */
const struct policy_settings *policy_settings(const struct policy *p);
const struct policy_checkpoint *policy_checkpoint(const struct policy *p);
const struct policy_health *policy_health(const struct policy *p);
/* A number no other policy of this process has had: what a cache keyed by
 * a policy keys on (its address may be reused once it is freed). */
uint64_t policy_serial(const struct policy *p);

/*
 * The checkpoint claim name of a tenant's workload in namespace ns: tmpl
 * (policy_checkpoint()->claim_name) with every {tenant} and {namespace}
 * replaced.  Writes at most size - 1 bytes and a NUL to out (size > 0) and
 * returns the length of the whole name, like snprintf: size or more means
 * out holds a cut name.  The result may still not be a valid object name;
 * the caller checks it.
 */
size_t policy_claim_name(const char *tmpl, const char *tenant, const char *ns,
			 char *out, size_t size);

/*
 * The checkpoint claim of tenant t's workloads in namespace ns, the one
 * rule admission (which mounts it) and the claim controller (which creates
 * it, controllers/claim-sync.h) share: checkpoint.claimName filled in, written
 * to out (size > 253).  POLICY_CLAIM_OK: out is a valid claim name; else
 * out is "" and the status says why there is none.
 */
enum policy_claim_status {
	POLICY_CLAIM_OK,
	POLICY_CLAIM_NONE,     /* no checkpoint.claimName: an emptyDir */
	POLICY_CLAIM_TOO_LONG, /* over the 253 characters of a name */
	POLICY_CLAIM_INVALID,  /* no valid name (a namespace no apiserver sends) */
};
enum policy_claim_status policy_checkpoint_claim(const struct policy *p,
						 const struct policy_tenant *t,
						 const char *ns, char *out,
						 size_t size);

size_t policy_flavor_count(const struct policy *p);
const struct policy_flavor *policy_flavor_at(const struct policy *p, size_t i);
/* Whether a flavor of p is served through DRA (policy_flavor.dra): its
 * pool needs the DRA kinds (usage/inventory.h inventory_dra_known). */
bool policy_has_dra_flavor(const struct policy *p);
const struct policy_flavor *policy_flavor_find(const struct policy *p,
					       const char *name);
/*
 * Every DeviceClass C may be asked for as a container resource named
 * deviceclass.resource.kubernetes.io/C (Kubernetes 1.34+, KEP-5004: the
 * scheduler serves it through a ResourceClaim it makes for the pod).
 */
#define POLICY_DEVICE_CLASS_PREFIX "deviceclass.resource.kubernetes.io/"

/* The device class of such a name, or NULL when resource is not one. */
const char *policy_implicit_device_class(const char *resource);

/*
 * The flavors whose extended resource is this name (in file order); for
 * deviceclass.resource.kubernetes.io/C, the flavor that lists C in its
 * deviceClassNames (there is at most one).
 */
size_t policy_flavors_for_resource(const struct policy *p, const char *resource,
				   const struct policy_flavor **out, size_t max);
/* True when some flavor uses this extended resource name, or maps the
 * device class it names (above). */
bool policy_is_flavor_resource(const struct policy *p, const char *resource);

/* The flavor whose deviceClassNames lists this DRA DeviceClass, or NULL. */
const struct policy_flavor *policy_flavor_for_device_class(const struct policy *p,
							   const char *device_class);
/* True when the DeviceClass is a GPU one: a flavor maps it, or it is in
 * settings.gpuDeviceClassNames. */
bool policy_is_gpu_device_class(const struct policy *p, const char *device_class);

size_t policy_class_count(const struct policy *p);
const struct policy_class *policy_class_at(const struct policy *p, size_t i);
const struct policy_class *policy_class_find(const struct policy *p,
					     const char *name);

size_t policy_tenant_count(const struct policy *p);
/* The longest idle `for` of p's classes and tenants, in seconds; 0: p has
 * no idle rule at all (then nothing is queried; policy/idle.h). */
int64_t policy_idle_window_s(const struct policy *p);
const struct policy_tenant *policy_tenant_at(const struct policy *p, size_t i);
const struct policy_tenant *policy_tenant_find(const struct policy *p,
					       const char *name);
/* The first tenant (file order) with a namespace entry matching ns, or NULL. */
const struct policy_tenant *policy_tenant_for_namespace(const struct policy *p,
							const char *ns);

/* Whether a pod in namespace ns running as ServiceAccount sa (NULL or ""
 * for "default") is exempt, and by which list. */
enum policy_exemption policy_exempt(const struct policy *p, const char *ns,
				    const char *sa);

size_t policy_cohort_count(const struct policy *p);
const char *policy_cohort_name(const struct policy *p, size_t i);

bool policy_tenant_allows_class(const struct policy_tenant *t,
				const struct policy_class *c);
bool policy_tenant_allows_sharing(const struct policy_tenant *t,
				  enum policy_sharing s);
const struct policy_quota *policy_tenant_quota(const struct policy_tenant *t,
					       const struct policy_flavor *f);
/*
 * True when tenant t can use class c at all: the class is allowed, its
 * sharing mode is allowed, and t has quota for its flavor.  The one rule
 * behind "may use: ..." in denials, `gpugate classes` and the tenants of
 * a GPUClass object.
 */
bool policy_tenant_can_use(const struct policy_tenant *t,
			   const struct policy_class *c);

#endif
