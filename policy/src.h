/*
 * src: the policy file exactly as written, before validation.
 *
 * libcyaml fills these structures (schema.c holds the schema tables); the
 * validator checks them with source positions (srcpos.h); the model builder
 * turns them into the immutable policy.  Field names follow the YAML keys so
 * that the schema macros can name them.  Absent optional scalars are NULL
 * pointers; absent sequences have a count of 0.
 */
#ifndef GPUGATE_SRC_H
#define GPUGATE_SRC_H

#include <stdbool.h>
#include <stdint.h>

struct diag;
struct srcpos;

/* Enum values as libcyaml stores them; order matches policy.h enums. */
enum src_reclaim { SRC_RECLAIM_ANY, SRC_RECLAIM_LOWER_PRIORITY, SRC_RECLAIM_NEVER };
enum src_quota_owner { SRC_QUOTA_OWNER_GPUGATE, SRC_QUOTA_OWNER_KUEUE };
enum src_topology_mode { SRC_TOPOLOGY_REQUIRED, SRC_TOPOLOGY_PREFERRED };
/* A checkpoint claim must be writable: no ReadOnlyMany. */
enum src_access_mode {
	SRC_ACCESS_RWO, SRC_ACCESS_RWX, SRC_ACCESS_RWOP, SRC_ACCESS_COUNT
};
enum src_toleration_op { SRC_OP_EXISTS, SRC_OP_EQUAL };
enum src_effect {
	SRC_EFFECT_NO_SCHEDULE,
	SRC_EFFECT_PREFER_NO_SCHEDULE,
	SRC_EFFECT_NO_EXECUTE,
};

struct src_toleration {
	char *key;
	int *operator;
	char *value;
	int *effect;
	int64_t *tolerationSeconds;
};

/* A flavor's dra block (policy_dra). */
/* A DRA flavor's sharedCapacity: a device shared by its capacity. */
struct src_shared_capacity {
	char *name;                 /* a capacity of the devices, e.g. memory */
	char *perUnit;              /* a quantity: one unit of the flavor */
	int64_t unitsPerDevice;
};

struct src_dra {
	char *deviceClassName;
	char *driver;
	char **attributes;          /* "name=value" */
	unsigned attributes_count;
	char **minCapacity;         /* "name=quantity" */
	unsigned minCapacity_count;
	char **selectors;
	unsigned selectors_count;
	struct src_toleration *tolerations;
	unsigned tolerations_count;
	struct src_shared_capacity *sharedCapacity; /* NULL: whole devices */
};

struct src_flavor {
	char *name;
	char *resource;             /* NULL when absent (a DRA flavor) */
	struct src_dra *dra;
	int sharing;
	char **nodeSelector;
	unsigned nodeSelector_count;
	struct src_toleration *tolerations;
	unsigned tolerations_count;
	int64_t gpusPerNode;
	char **deviceClassNames;
	unsigned deviceClassNames_count;
};

struct src_topology {
	char *key;
	int mode;
};

struct src_idle {
	char *below;
	char *for_text;   /* the key "for" */
	int action;       /* enum idle_action */
};

struct src_class {
	char *name;
	char *description;
	char *flavor;
	int64_t gpus;
	int64_t *maxGpus;
	char *cpu;
	char *memory;
	struct src_topology *topology;
	char *priorityClassName;
	bool preemptible;
	bool gang;
	struct src_idle *idle;
};

struct src_quota {
	char *flavor;
	int64_t nominal;
	int64_t *borrowingLimit;
	int64_t *lendingLimit;
};

struct src_kueue {
	int *quotaOwner; /* enum src_quota_owner */
	char *localQueue;
};

struct src_tenant {
	char *name;
	char **namespaces;
	unsigned namespaces_count;
	char *cohort;
	char **classes;
	unsigned classes_count;
	int *sharing;
	unsigned sharing_count;
	int *mode;
	int *reclaimWithinCohort; /* enum src_reclaim */
	struct src_kueue *kueue;
	struct src_quota *quota;
	unsigned quota_count;
	struct src_idle *idle;
};

struct src_exemptions {
	char **namespaces;
	unsigned namespaces_count;
	char **serviceAccounts;
	unsigned serviceAccounts_count;
};

struct src_settings {
	char *classLabel;
	char *gpusLabel;
	int rawGpuRequests;
	int mode;
	int admissionWarnings; /* enum policy_admission_warnings */
	char **gpuDeviceClassNames;
	unsigned gpuDeviceClassNames_count;
	struct src_exemptions *exemptions; /* NULL: the default list */
	int gangStart;                 /* enum policy_gang_start */
	int64_t *gangTimeoutSeconds;
};

struct src_checkpoint_claim {
	bool *create;
	char *storageClassName;
	char *size;
	int *accessModes; /* enum src_access_mode */
	unsigned accessModes_count;
};

struct src_checkpoint {
	struct src_checkpoint_claim *claim;
	int64_t *gracePeriodSeconds;
	int64_t *timeoutSeconds;
	char *mountPath;
	char *claimName;
	char **preStop;
	unsigned preStop_count;
	char **env;
	unsigned env_count;
};

struct src_return_after {
	char *validationLabel;
	int64_t *settleSeconds;
};

struct src_health {
	bool *defaults;
	char **taints;
	unsigned taints_count;
	char **conditions;
	unsigned conditions_count;
	char **labels;
	unsigned labels_count;
	int onUnhealthy;             /* enum health_on_unhealthy */
	struct src_return_after *returnAfter;
	char **drainedBy;
	unsigned drainedBy_count;
};

struct src_policy {
	int64_t version;
	struct src_settings *settings;
	struct src_flavor *flavors;
	unsigned flavors_count;
	struct src_class *classes;
	unsigned classes_count;
	struct src_tenant *tenants;
	unsigned tenants_count;
	struct src_checkpoint *checkpoint;
	struct src_health *health;
};

/*
 * Checks the document's shape against the schema (unknown, duplicate and
 * missing keys, types, enum values, sizes), reporting every problem with
 * its line, and records the position of every key and entry in pos.
 * Returns 0 when the shape is right.
 */
int schema_check(const char *file, const char *text, size_t len,
		 struct srcpos *pos, struct diag *d);

/* Loads a document that passed schema_check.  -1 and a message on error. */
int schema_load(const char *file, const char *text, size_t len,
		struct src_policy **out, struct diag *d);

void schema_free(struct src_policy *src);

#endif
