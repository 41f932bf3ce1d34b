/*
 * workload: the plain facts about a Pod or a Job that the decision needs.
 *
 * The review codec (webhook/facts.c) fills these from the AdmissionReview
 * JSON; the decision engine (decide.h) reads them and nothing else.  All
 * strings and arrays are borrowed from the decoder, which keeps them alive
 * until the decision has been encoded.  Absent strings are NULL; absent
 * lists have a count of 0.
 */
#ifndef GPUGATE_WORKLOAD_H
#define GPUGATE_WORKLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum wl_kind {
	WL_OTHER, /* any other kind: allowed untouched */
	WL_POD,
	WL_JOB,
	WL_CLAIM,          /* resource.k8s.io/v1 ResourceClaim (DRA) */
	WL_CLAIM_TEMPLATE, /* resource.k8s.io/v1 ResourceClaimTemplate */
	/* A controller with a pod template (Deployment, CronJob, ...: its
	 * row, struct workload's def, says which): judged and mapped at the
	 * door; its pods are charged one by one. */
	WL_TEMPLATE,
};

/* A row of the table of kinds (policy/kinds.h). */
struct kind_def;

enum wl_op {
	WL_CREATE,
	WL_UPDATE,
	WL_DELETE,
	WL_CONNECT,
};

struct wl_kv {
	const char *key;
	const char *value; /* NULL for env entries that use valueFrom */
};

struct wl_resource {
	const char *name;     /* "nvidia.com/gpu", "cpu", ... */
	const char *quantity; /* as written; NULL when not a string or number */
};

struct wl_mount {
	const char *volume;   /* volumeMounts[].name */
	const char *path;     /* volumeMounts[].mountPath */
	const char *sub_path; /* subPath (or subPathExpr, unexpanded), or NULL */
};

/* Where an envFrom entry takes its variables from. */
enum wl_env_source {
	WL_ENV_OTHER,      /* neither configMapRef nor secretRef */
	WL_ENV_CONFIG_MAP, /* configMapRef */
	WL_ENV_SECRET,     /* secretRef */
};

/* One envFrom entry: every key K of the source becomes variable prefix+K. */
struct wl_env_from {
	enum wl_env_source source;
	const char *name;   /* configMapRef.name or secretRef.name, or NULL */
	const char *prefix; /* NULL when absent (same as "") */
};

/* A pod toleration (spec.tolerations[]); absent fields are NULL. */
struct wl_toleration {
	const char *key;
	const char *op;     /* "Exists", "Equal", or NULL (means Equal) */
	const char *value;
	const char *effect; /* NULL: every effect */
};

struct wl_container {
	const char *name;
	const struct wl_resource *limits;
	size_t n_limits;
	const struct wl_resource *requests;
	size_t n_requests;
	const struct wl_kv *env;
	size_t n_env;
	const struct wl_mount *mounts;
	size_t n_mounts;
	bool privileged;
	bool has_pre_stop;
	const char *const *pre_stop_exec; /* lifecycle.preStop.exec.command */
	size_t n_pre_stop_exec;
	const struct wl_env_from *env_from;
	size_t n_env_from;
	/* restartPolicy of an init container ("Always": a native sidecar),
	 * NULL when absent. */
	const char *restart_policy;
	/* resources.claims[].name: the pod's resourceClaims entries it uses. */
	const char *const *claims;
	size_t n_claims;
};

/* An entry of a pod's spec.resourceClaims: exactly one of claim and
 * template is set (the other NULL; both NULL when it is malformed). */
struct wl_pod_claim {
	const char *name;          /* the entry's name */
	const char *claim;         /* resourceClaimName */
	const char *template_name; /* resourceClaimTemplateName */
};

struct wl_volume {
	const char *name;
	const char *host_path; /* hostPath.path, or NULL */
	/* A downwardAPI volume of exactly one item: its path and
	 * fieldRef.fieldPath (NULL when absent); both NULL otherwise. */
	const char *downward_path;
	const char *downward_field;
};

/* ---- DRA: the device requests of a ResourceClaim's spec ---------------- */

enum wl_allocation {
	WL_ALLOCATE_COUNT, /* allocationMode ExactCount (the default): count */
	WL_ALLOCATE_ALL,   /* allocationMode All: every matching device */
};

/*
 * One entry of spec.devices.requests (of a ResourceClaimTemplate:
 * spec.spec.devices.requests): its exactly part in device_class, mode and
 * count, or its firstAvailable subrequests (the same fields each; their
 * own first_available is empty).
 */
struct wl_device_request {
	const char *name;
	const char *device_class; /* deviceClassName; NULL when absent */
	enum wl_allocation mode;
	int64_t count;            /* 1 when absent; >= 1 */
	/* capacity.requests: capacity name = quantity, as written (a share
	 * of each device, for devices that allow multiple allocations) */
	const struct wl_kv *capacity;
	size_t n_capacity;
	const struct wl_device_request *first_available;
	size_t n_first_available;
};

/* The pod: a Pod's own metadata and spec, or a Job's spec.template. */
struct wl_pod {
	const struct wl_kv *labels;
	size_t n_labels;
	const struct wl_kv *annotations;
	size_t n_annotations;
	const struct wl_container *containers;
	size_t n_containers;
	const struct wl_container *init_containers;
	size_t n_init_containers;
	const struct wl_volume *volumes;
	size_t n_volumes;
	const struct wl_kv *node_selector;
	size_t n_node_selector;
	const char *priority_class_name;
	bool has_priority;          /* spec.priority is set */
	int32_t priority;           /* its value (has_priority) */
	bool has_grace;
	int64_t grace;              /* terminationGracePeriodSeconds */
	const char *restart_policy;
	/* spec.ephemeralContainers (kubectl debug): they never ask for
	 * resources; name, env, envFrom, volumeMounts and privileged are
	 * set. */
	const struct wl_container *ephemeral_containers;
	size_t n_ephemeral_containers;
	const struct wl_toleration *tolerations;
	size_t n_tolerations;
	/* spec.nodeName: set at creation, the pod skips the scheduler (and
	 * the taints it honours); NULL when absent. */
	const char *node_name;
	/* spec.schedulingGates[].name. */
	const char *const *scheduling_gates;
	size_t n_scheduling_gates;
	/* spec.serviceAccountName (else the deprecated spec.serviceAccount);
	 * NULL when absent: "default". */
	const char *service_account;
	/* spec.schedulerName; NULL when absent (the default scheduler). */
	const char *scheduler_name;
	/* spec.schedulingGroup.podGroupName; NULL when absent. */
	const char *pod_group_name;
	/* spec.resourceClaims (DRA). */
	const struct wl_pod_claim *claims;
	size_t n_claims;
};

struct workload {
	enum wl_kind kind;
	/* The kind's row of the table (policy/kinds.h; def->wl is kind): its
	 * name, where its pod template sits, how its pods are counted.  Set
	 * with kind for every kind but WL_OTHER, where it is NULL. */
	const struct kind_def *def;
	enum wl_op op;
	bool dry_run;
	const char *request_uid;
	/* request.userInfo.username: who asks; NULL when absent. */
	const char *user;
	const char *namespace;
	const char *name;          /* "" on CREATE with generateName */
	const char *uid;           /* metadata.uid; "" at /mutate on CREATE */
	int64_t generation;        /* metadata.generation, 0 when absent */

	/* The object's own metadata (for a Pod, the same as pod.labels). */
	const struct wl_kv *labels;
	size_t n_labels;
	const struct wl_kv *annotations;
	size_t n_annotations;

	struct wl_pod pod;

	/* Job only. */
	int64_t parallelism;       /* 1 when absent */
	bool has_completions;      /* spec.completions is set */
	int64_t completions;
	bool job_finished;         /* a Complete or Failed condition is True */
	bool job_suspended;        /* spec.suspend: its pods are gone */
	size_t n_failure_rules;    /* spec.podFailurePolicy.rules */
	bool has_disruption_rule;  /* an Ignore rule on DisruptionTarget */
	/* spec.scheduling (workload-aware scheduling, policy/gang.h): present
	 * at all; its schedulingPolicy is gang; gang.minCount (0: absent). */
	bool has_scheduling;
	bool scheduling_gang;
	int64_t gang_min_count;

	/* WL_TEMPLATE only. */
	/* The pods it runs at once, as def->pods counts them: spec.replicas
	 * (1 when absent); a CronJob (KIND_PODS_JOB), its Job's
	 * min(parallelism, completions); a DaemonSet (KIND_PODS_PER_NODE), 0
	 * (one per node: not known). */
	int64_t replicas;
	/* Controlled by an object of the kind def->template_owner names (a
	 * ReplicaSet by a Deployment): its template is the controller's,
	 * judged there, and not to be changed (the Deployment controller
	 * finds its ReplicaSets by comparing templates). */
	bool template_owned;

	/* Pod only. */
	const char *phase;         /* status.phase, NULL when absent */
	const char *owner_job;     /* controller ownerReference of kind Job */
	const char *owner_job_uid;
	/* DRA (policy/charge.h, "claims that ride on their pod"): the claim
	 * the scheduler made for the pod's extended resources
	 * (status.extendedResourceClaimStatus.resourceClaimName), and the
	 * claim the resourceclaim controller made from gpugate's template
	 * (status.resourceClaimStatuses[] of entry DRA_TEMPLATE_ENTRY); NULL
	 * until written.  The claims the pod names itself are pod.claims. */
	const char *extended_claim;
	const char *template_claim;

	/* ResourceClaim and ResourceClaimTemplate only (policy/dra.h). */
	const struct wl_device_request *device_requests;
	size_t n_device_requests;

	/* ResourceClaim only: its controller ownerReference of kind Pod
	 * (apiVersion v1), NULL when none; the annotation
	 * resource.kubernetes.io/extended-resource-claim is "true" (the
	 * scheduler's claim for a pod's extended resources); status.reservedFor
	 * names a consumer other than that pod. */
	const char *owner_pod;
	const char *owner_pod_uid;
	bool extended_resource_claim;
	bool reserved_for_others;
};

/* The value of key in a label/annotation list, or NULL. */
const char *wl_get(const struct wl_kv *kv, size_t n, const char *key);

#endif
