/*
 * The policy schema (SPEC section 3) as libcyaml tables, and a shape checker
 * that walks the YAML document against those same tables.
 *
 * Why a checker of our own in front of libcyaml: libcyaml stops at the first
 * problem and locates it at the enclosing mapping, while a policy admin
 * wants every problem at its own line in one run.  The checker reads the
 * schema tables, so the schema is written once; libcyaml then loads a
 * document that is known to fit.  It is also stricter where libcyaml is
 * lenient: booleans must be true/false (libcyaml takes any other word as
 * true), integers must be plain decimal (libcyaml reads "010" as octal).
 *
 * This is the only file that knows libcyaml.
 */
#include "base/diag.h"
#include "policy/k8s.h"
#include "policy/src.h"
#include "policy/srcpos.h"

#include <cyaml/cyaml.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define NAME_MAX_LEN 253
/* Label keys and resource names: [prefix/]name, a validator checks them. */
#define KEY_MAX_LEN K8S_QUALIFIED_NAME_MAX
#define TEXT_MAX_LEN 4096
#define LIST_MAX 10000
/* DRA DeviceClass names of one flavor, and settings.gpuDeviceClassNames. */
#define DEVICE_CLASSES_MAX 64
/* settings.exemptions.namespaces and .serviceAccounts. */
#define EXEMPTIONS_MAX 256

/* Aliases can make a small file expand enormously ("billion laughs"). */
#define WALK_MAX_NODES 2000000ul

static const cyaml_strval_t sharing_strings[] = {
	{"exclusive", 0}, {"mig", 1}, {"time-slicing", 2}, {"mps", 3},
};
static const cyaml_strval_t mode_strings[] = {
	{"enforce", 0}, {"warn", 1}, {"audit", 2},
};
/* Kueue's names (ClusterQueue preemption.reclaimWithinCohort). */
static const cyaml_strval_t reclaim_strings[] = {
	{"Any", SRC_RECLAIM_ANY},
	{"LowerPriority", SRC_RECLAIM_LOWER_PRIORITY},
	{"Never", SRC_RECLAIM_NEVER},
};
static const cyaml_strval_t raw_strings[] = {
	{"reject", 0}, {"allow", 1},
};
static const cyaml_strval_t gang_start_strings[] = {
	{"auto", 0}, {"workload", 1}, {"podgroup", 2}, {"gates", 3},
	{"off", 4}, /* enum policy_gang_start */
};

static const cyaml_strval_t on_unhealthy_strings[] = {
	{"checkpoint", 0}, {"signal", 1}, {"none", 2}, /* enum health_on_unhealthy */
};

static const cyaml_strval_t admission_warnings_strings[] = {
	{"problems", 0}, {"all", 1}, /* enum policy_admission_warnings */
};
static const cyaml_strval_t topology_mode_strings[] = {
	{"required", SRC_TOPOLOGY_REQUIRED}, {"preferred", SRC_TOPOLOGY_PREFERRED},
};
static const cyaml_strval_t operator_strings[] = {
	{"Exists", SRC_OP_EXISTS}, {"Equal", SRC_OP_EQUAL},
};
static const cyaml_strval_t effect_strings[] = {
	{"NoSchedule", SRC_EFFECT_NO_SCHEDULE},
	{"PreferNoSchedule", SRC_EFFECT_PREFER_NO_SCHEDULE},
	{"NoExecute", SRC_EFFECT_NO_EXECUTE},
};

static const cyaml_schema_value_t name_entry = {
	CYAML_VALUE_STRING(CYAML_FLAG_POINTER, char, 1, NAME_MAX_LEN),
};
static const cyaml_schema_value_t text_entry = {
	CYAML_VALUE_STRING(CYAML_FLAG_POINTER, char, 0, TEXT_MAX_LEN),
};
static const cyaml_schema_value_t sharing_entry = {
	CYAML_VALUE_ENUM(CYAML_FLAG_DEFAULT, int, sharing_strings,
			 CYAML_ARRAY_LEN(sharing_strings)),
};

static const cyaml_schema_field_t exemptions_fields[] = {
	CYAML_FIELD_SEQUENCE("namespaces", CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
			     struct src_exemptions, namespaces, &name_entry, 0,
			     EXEMPTIONS_MAX),
	CYAML_FIELD_SEQUENCE("serviceAccounts",
			     CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
			     struct src_exemptions, serviceAccounts, &name_entry, 0,
			     EXEMPTIONS_MAX),
	CYAML_FIELD_END,
};

static const cyaml_schema_field_t settings_fields[] = {
	CYAML_FIELD_STRING_PTR("classLabel", CYAML_FLAG_OPTIONAL,
			       struct src_settings, classLabel, 1, KEY_MAX_LEN),
	CYAML_FIELD_STRING_PTR("gpusLabel", CYAML_FLAG_OPTIONAL,
			       struct src_settings, gpusLabel, 1, KEY_MAX_LEN),
	CYAML_FIELD_ENUM("rawGpuRequests", CYAML_FLAG_OPTIONAL,
			 struct src_settings, rawGpuRequests, raw_strings,
			 CYAML_ARRAY_LEN(raw_strings)),
	CYAML_FIELD_ENUM("mode", CYAML_FLAG_OPTIONAL, struct src_settings, mode,
			 mode_strings, CYAML_ARRAY_LEN(mode_strings)),
	CYAML_FIELD_ENUM("admissionWarnings", CYAML_FLAG_OPTIONAL,
			 struct src_settings, admissionWarnings,
			 admission_warnings_strings,
			 CYAML_ARRAY_LEN(admission_warnings_strings)),
	/* At least one entry: absent means the default list, and libcyaml
	 * cannot tell an empty list from an absent one. */
	CYAML_FIELD_SEQUENCE("gpuDeviceClassNames",
			     CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
			     struct src_settings, gpuDeviceClassNames, &name_entry,
			     1, DEVICE_CLASSES_MAX),
	/* Present, even empty ({}): exactly what it lists. */
	CYAML_FIELD_MAPPING_PTR("exemptions", CYAML_FLAG_OPTIONAL,
				struct src_settings, exemptions, exemptions_fields),
	CYAML_FIELD_ENUM("gangStart", CYAML_FLAG_OPTIONAL, struct src_settings,
			 gangStart, gang_start_strings,
			 CYAML_ARRAY_LEN(gang_start_strings)),
	CYAML_FIELD_INT_PTR("gangTimeoutSeconds", CYAML_FLAG_OPTIONAL,
			    struct src_settings, gangTimeoutSeconds),
	CYAML_FIELD_END,
};

static const cyaml_schema_field_t toleration_fields[] = {
	CYAML_FIELD_STRING_PTR("key", CYAML_FLAG_OPTIONAL, struct src_toleration,
			       key, 0, KEY_MAX_LEN),
	CYAML_FIELD_ENUM_PTR("operator", CYAML_FLAG_OPTIONAL,
			     struct src_toleration, operator, operator_strings,
			     CYAML_ARRAY_LEN(operator_strings)),
	CYAML_FIELD_STRING_PTR("value", CYAML_FLAG_OPTIONAL,
			       struct src_toleration, value, 0, NAME_MAX_LEN),
	CYAML_FIELD_ENUM_PTR("effect", CYAML_FLAG_OPTIONAL, struct src_toleration,
			     effect, effect_strings,
			     CYAML_ARRAY_LEN(effect_strings)),
	CYAML_FIELD_INT_PTR("tolerationSeconds", CYAML_FLAG_OPTIONAL,
			    struct src_toleration, tolerationSeconds),
	CYAML_FIELD_END,
};
static const cyaml_schema_value_t toleration_entry = {
	CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct src_toleration,
			    toleration_fields),
};

/* A flavor's dra block: at most 16 attributes and capacities, 8 extra
 * selectors of 1 KiB, 16 device tolerations (docs/policy.md). */
static const cyaml_schema_value_t cel_entry = {
	CYAML_VALUE_STRING(CYAML_FLAG_POINTER, char, 1, 1024),
};
static const cyaml_schema_field_t shared_capacity_fields[] = {
	CYAML_FIELD_STRING_PTR("name", CYAML_FLAG_POINTER, struct src_shared_capacity,
			       name, 1, KEY_MAX_LEN),
	CYAML_FIELD_STRING_PTR("perUnit", CYAML_FLAG_POINTER, struct src_shared_capacity,
			       perUnit, 1, NAME_MAX_LEN),
	CYAML_FIELD_INT("unitsPerDevice", CYAML_FLAG_DEFAULT, struct src_shared_capacity,
			unitsPerDevice),
	CYAML_FIELD_END,
};
static const cyaml_schema_field_t dra_fields[] = {
	CYAML_FIELD_STRING_PTR("deviceClassName", CYAML_FLAG_POINTER, struct src_dra,
			       deviceClassName, 1, NAME_MAX_LEN),
	CYAML_FIELD_STRING_PTR("driver", CYAML_FLAG_POINTER, struct src_dra, driver, 1,
			       NAME_MAX_LEN),
	CYAML_FIELD_SEQUENCE("attributes", CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
			     struct src_dra, attributes, &text_entry, 0, 16),
	CYAML_FIELD_SEQUENCE("minCapacity", CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
			     struct src_dra, minCapacity, &text_entry, 0, 16),
	CYAML_FIELD_SEQUENCE("selectors", CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
			     struct src_dra, selectors, &cel_entry, 0, 8),
	CYAML_FIELD_SEQUENCE("tolerations", CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
			     struct src_dra, tolerations, &toleration_entry, 0, 16),
	CYAML_FIELD_MAPPING_PTR("sharedCapacity", CYAML_FLAG_OPTIONAL, struct src_dra,
				sharedCapacity, shared_capacity_fields),
	CYAML_FIELD_END,
};

static const cyaml_schema_field_t flavor_fields[] = {
	CYAML_FIELD_STRING_PTR("name", CYAML_FLAG_POINTER, struct src_flavor,
			       name, 1, NAME_MAX_LEN),
	CYAML_FIELD_STRING_PTR("resource", CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
			       struct src_flavor, resource, 1, KEY_MAX_LEN),
	CYAML_FIELD_MAPPING_PTR("dra", CYAML_FLAG_OPTIONAL,
				struct src_flavor, dra, dra_fields),
	CYAML_FIELD_ENUM("sharing", CYAML_FLAG_DEFAULT, struct src_flavor,
			 sharing, sharing_strings,
			 CYAML_ARRAY_LEN(sharing_strings)),
	CYAML_FIELD_SEQUENCE("nodeSelector",
			     CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
			     struct src_flavor, nodeSelector, &text_entry, 0, 64),
	CYAML_FIELD_SEQUENCE("tolerations",
			     CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
			     struct src_flavor, tolerations, &toleration_entry,
			     0, 64),
	CYAML_FIELD_INT("gpusPerNode", CYAML_FLAG_DEFAULT, struct src_flavor,
			gpusPerNode),
	CYAML_FIELD_SEQUENCE("deviceClassNames",
			     CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
			     struct src_flavor, deviceClassNames, &name_entry, 0,
			     DEVICE_CLASSES_MAX),
	CYAML_FIELD_END,
};
static const cyaml_schema_value_t flavor_entry = {
	CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct src_flavor, flavor_fields),
};

static const cyaml_schema_field_t topology_fields[] = {
	CYAML_FIELD_STRING_PTR("key", CYAML_FLAG_POINTER, struct src_topology,
			       key, 1, KEY_MAX_LEN),
	CYAML_FIELD_ENUM("mode", CYAML_FLAG_OPTIONAL, struct src_topology, mode,
			 topology_mode_strings,
			 CYAML_ARRAY_LEN(topology_mode_strings)),
	CYAML_FIELD_END,
};

static const cyaml_strval_t idle_action_strings[] = {
	{"warn", 0}, {"reclaim", 1}, /* enum idle_action */
};
static const cyaml_schema_field_t idle_fields[] = {
	CYAML_FIELD_STRING_PTR("below", CYAML_FLAG_POINTER, struct src_idle, below, 1, 64),
	CYAML_FIELD_STRING_PTR("for", CYAML_FLAG_POINTER, struct src_idle, for_text, 1, 64),
	CYAML_FIELD_ENUM("action", CYAML_FLAG_OPTIONAL, struct src_idle, action,
			 idle_action_strings, CYAML_ARRAY_LEN(idle_action_strings)),
	CYAML_FIELD_END,
};

static const cyaml_schema_field_t class_fields[] = {
	CYAML_FIELD_STRING_PTR("name", CYAML_FLAG_POINTER, struct src_class,
			       name, 1, NAME_MAX_LEN),
	CYAML_FIELD_STRING_PTR("description", CYAML_FLAG_OPTIONAL,
			       struct src_class, description, 0, TEXT_MAX_LEN),
	CYAML_FIELD_STRING_PTR("flavor", CYAML_FLAG_POINTER, struct src_class,
			       flavor, 1, NAME_MAX_LEN),
	CYAML_FIELD_INT("gpus", CYAML_FLAG_DEFAULT, struct src_class, gpus),
	CYAML_FIELD_INT_PTR("maxGpus", CYAML_FLAG_OPTIONAL, struct src_class,
			    maxGpus),
	CYAML_FIELD_STRING_PTR("cpu", CYAML_FLAG_OPTIONAL, struct src_class, cpu,
			       1, 64),
	CYAML_FIELD_STRING_PTR("memory", CYAML_FLAG_OPTIONAL, struct src_class,
			       memory, 1, 64),
	CYAML_FIELD_MAPPING_PTR("topology",
				CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
				struct src_class, topology, topology_fields),
	CYAML_FIELD_STRING_PTR("priorityClassName", CYAML_FLAG_OPTIONAL,
			       struct src_class, priorityClassName, 1,
			       NAME_MAX_LEN),
	CYAML_FIELD_BOOL("preemptible", CYAML_FLAG_OPTIONAL, struct src_class,
			 preemptible),
	CYAML_FIELD_BOOL("gang", CYAML_FLAG_OPTIONAL, struct src_class, gang),
	CYAML_FIELD_MAPPING_PTR("idle", CYAML_FLAG_OPTIONAL, struct src_class, idle,
				idle_fields),
	CYAML_FIELD_END,
};
static const cyaml_schema_value_t class_entry = {
	CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct src_class, class_fields),
};

static const cyaml_schema_field_t quota_fields[] = {
	CYAML_FIELD_STRING_PTR("flavor", CYAML_FLAG_POINTER, struct src_quota,
			       flavor, 1, NAME_MAX_LEN),
	CYAML_FIELD_INT("nominal", CYAML_FLAG_DEFAULT, struct src_quota, nominal),
	CYAML_FIELD_INT_PTR("borrowingLimit", CYAML_FLAG_OPTIONAL,
			    struct src_quota, borrowingLimit),
	CYAML_FIELD_INT_PTR("lendingLimit", CYAML_FLAG_OPTIONAL,
			    struct src_quota, lendingLimit),
	CYAML_FIELD_END,
};
static const cyaml_schema_value_t quota_entry = {
	CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct src_quota, quota_fields),
};

/* Who owns the quota of the workloads Kueue queues (docs/quota.md). */
static const cyaml_strval_t quota_owner_strings[] = {
	{"gpugate", SRC_QUOTA_OWNER_GPUGATE},
	{"kueue", SRC_QUOTA_OWNER_KUEUE},
};

static const cyaml_schema_field_t kueue_fields[] = {
	CYAML_FIELD_ENUM_PTR("quotaOwner", CYAML_FLAG_OPTIONAL, struct src_kueue,
			     quotaOwner, quota_owner_strings,
			     CYAML_ARRAY_LEN(quota_owner_strings)),
	CYAML_FIELD_STRING_PTR("localQueue", CYAML_FLAG_OPTIONAL, struct src_kueue,
			       localQueue, 1, NAME_MAX_LEN),
	CYAML_FIELD_END,
};

static const cyaml_schema_field_t tenant_fields[] = {
	CYAML_FIELD_STRING_PTR("name", CYAML_FLAG_POINTER, struct src_tenant,
			       name, 1, NAME_MAX_LEN),
	CYAML_FIELD_SEQUENCE("namespaces", CYAML_FLAG_POINTER, struct src_tenant,
			     namespaces, &name_entry, 1, 1000),
	CYAML_FIELD_STRING_PTR("cohort", CYAML_FLAG_OPTIONAL, struct src_tenant,
			       cohort, 1, NAME_MAX_LEN),
	CYAML_FIELD_SEQUENCE("classes", CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
			     struct src_tenant, classes, &name_entry, 1,
			     LIST_MAX),
	CYAML_FIELD_SEQUENCE("sharing", CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
			     struct src_tenant, sharing, &sharing_entry, 1, 4),
	CYAML_FIELD_ENUM_PTR("mode", CYAML_FLAG_OPTIONAL, struct src_tenant, mode,
			     mode_strings, CYAML_ARRAY_LEN(mode_strings)),
	CYAML_FIELD_ENUM_PTR("reclaimWithinCohort", CYAML_FLAG_OPTIONAL,
			     struct src_tenant, reclaimWithinCohort, reclaim_strings,
			     CYAML_ARRAY_LEN(reclaim_strings)),
	CYAML_FIELD_MAPPING_PTR("kueue", CYAML_FLAG_OPTIONAL, struct src_tenant, kueue,
				kueue_fields),
	CYAML_FIELD_SEQUENCE("quota", CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
			     struct src_tenant, quota, &quota_entry, 0, 1000),
	CYAML_FIELD_MAPPING_PTR("idle", CYAML_FLAG_OPTIONAL, struct src_tenant, idle,
				idle_fields),
	CYAML_FIELD_END,
};
static const cyaml_schema_value_t tenant_entry = {
	CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct src_tenant, tenant_fields),
};

static const cyaml_strval_t access_mode_strings[] = {
	{"ReadWriteOnce", SRC_ACCESS_RWO},
	{"ReadWriteMany", SRC_ACCESS_RWX},
	{"ReadWriteOncePod", SRC_ACCESS_RWOP},
};
static const cyaml_schema_value_t access_mode_entry = {
	CYAML_VALUE_ENUM(CYAML_FLAG_DEFAULT, int, access_mode_strings,
			 CYAML_ARRAY_LEN(access_mode_strings)),
};
static const cyaml_schema_field_t checkpoint_claim_fields[] = {
	CYAML_FIELD_BOOL_PTR("create", CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
			     struct src_checkpoint_claim, create),
	/* "" is a claim of no StorageClass (bound to a PersistentVolume made
	 * for it); absent, the cluster's default class. */
	CYAML_FIELD_STRING_PTR("storageClassName", CYAML_FLAG_OPTIONAL,
			       struct src_checkpoint_claim, storageClassName, 0,
			       NAME_MAX_LEN),
	CYAML_FIELD_STRING_PTR("size", CYAML_FLAG_OPTIONAL,
			       struct src_checkpoint_claim, size, 1, NAME_MAX_LEN),
	CYAML_FIELD_SEQUENCE("accessModes", CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
			     struct src_checkpoint_claim, accessModes,
			     &access_mode_entry, 1, 3),
	CYAML_FIELD_END,
};

static const cyaml_schema_field_t checkpoint_fields[] = {
	CYAML_FIELD_MAPPING_PTR("claim", CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
				struct src_checkpoint, claim,
				checkpoint_claim_fields),
	CYAML_FIELD_INT_PTR("gracePeriodSeconds", CYAML_FLAG_OPTIONAL,
			    struct src_checkpoint, gracePeriodSeconds),
	CYAML_FIELD_INT_PTR("timeoutSeconds", CYAML_FLAG_OPTIONAL,
			    struct src_checkpoint, timeoutSeconds),
	CYAML_FIELD_STRING_PTR("mountPath", CYAML_FLAG_OPTIONAL,
			       struct src_checkpoint, mountPath, 1, TEXT_MAX_LEN),
	CYAML_FIELD_STRING_PTR("claimName", CYAML_FLAG_OPTIONAL,
			       struct src_checkpoint, claimName, 1, NAME_MAX_LEN),
	CYAML_FIELD_SEQUENCE("preStop", CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
			     struct src_checkpoint, preStop, &text_entry, 0, 64),
	CYAML_FIELD_SEQUENCE("env", CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
			     struct src_checkpoint, env, &text_entry, 0, 256),
	CYAML_FIELD_END,
};

/* Health signals: taints, conditions and labels named one per entry. */
#define HEALTH_SIGNALS_MAX 256
static const cyaml_schema_field_t return_after_fields[] = {
	CYAML_FIELD_STRING_PTR("validationLabel", CYAML_FLAG_OPTIONAL,
			       struct src_return_after, validationLabel, 1, TEXT_MAX_LEN),
	CYAML_FIELD_INT_PTR("settleSeconds", CYAML_FLAG_OPTIONAL,
			    struct src_return_after, settleSeconds),
	CYAML_FIELD_END,
};
static const cyaml_schema_field_t health_fields[] = {
	CYAML_FIELD_BOOL_PTR("defaults", CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
			     struct src_health, defaults),
	CYAML_FIELD_SEQUENCE("taints", CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
			     struct src_health, taints, &text_entry, 0,
			     HEALTH_SIGNALS_MAX),
	CYAML_FIELD_SEQUENCE("conditions", CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
			     struct src_health, conditions, &text_entry, 0,
			     HEALTH_SIGNALS_MAX),
	CYAML_FIELD_SEQUENCE("labels", CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
			     struct src_health, labels, &text_entry, 0,
			     HEALTH_SIGNALS_MAX),
	CYAML_FIELD_ENUM("onUnhealthy", CYAML_FLAG_OPTIONAL, struct src_health,
			 onUnhealthy, on_unhealthy_strings,
			 CYAML_ARRAY_LEN(on_unhealthy_strings)),
	CYAML_FIELD_MAPPING_PTR("returnAfter", CYAML_FLAG_OPTIONAL,
				struct src_health, returnAfter, return_after_fields),
	CYAML_FIELD_SEQUENCE("drainedBy", CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
			     struct src_health, drainedBy, &text_entry, 0,
			     HEALTH_SIGNALS_MAX),
	CYAML_FIELD_END,
};

static const cyaml_schema_field_t policy_fields[] = {
	CYAML_FIELD_INT("version", CYAML_FLAG_DEFAULT, struct src_policy,
			version),
	CYAML_FIELD_MAPPING_PTR("settings",
				CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
				struct src_policy, settings, settings_fields),
	CYAML_FIELD_SEQUENCE("flavors", CYAML_FLAG_POINTER, struct src_policy,
			     flavors, &flavor_entry, 0, LIST_MAX),
	CYAML_FIELD_SEQUENCE("classes", CYAML_FLAG_POINTER, struct src_policy,
			     classes, &class_entry, 0, LIST_MAX),
	CYAML_FIELD_SEQUENCE("tenants", CYAML_FLAG_POINTER, struct src_policy,
			     tenants, &tenant_entry, 0, LIST_MAX),
	CYAML_FIELD_MAPPING_PTR("checkpoint",
				CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
				struct src_policy, checkpoint,
				checkpoint_fields),
	CYAML_FIELD_MAPPING_PTR("health",
				CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
				struct src_policy, health, health_fields),
	CYAML_FIELD_END,
};

static const cyaml_schema_value_t policy_schema = {
	CYAML_VALUE_MAPPING(CYAML_FLAG_POINTER, struct src_policy,
			    policy_fields),
};

/* ---- shape checker ---------------------------------------------------- */

/*
 * Where the walk is, as a stack of keys and list indices: rendered as text
 * ("tenants[1].quota[0]") only for a message or a recorded position, which
 * keeps the walk of a valid policy free of string formatting.
 */
struct seg {
	const char *key; /* NULL: a list index */
	size_t index;
};

#define WALK_MAX_DEPTH 32 /* the schema is 5 levels deep */

struct walk {
	const char *file;
	yaml_document_t *doc;
	struct srcpos *pos; /* NULL: check only, record nothing */
	struct diag *d;
	unsigned long nodes;
	int errors;
	bool oom;
	bool too_big;
	struct seg segs[WALK_MAX_DEPTH];
	size_t nseg;
};

static unsigned line_of(const yaml_node_t *n)
{
	return (unsigned)n->start_mark.line + 1;
}

static void fail(struct walk *w, const yaml_node_t *n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void render_path(const struct walk *w, char *out, size_t size)
{
	size_t o = 0;

	out[0] = '\0';
	for (size_t i = 0; i < w->nseg && o + 1 < size; i++) {
		int n = w->segs[i].key
				? snprintf(out + o, size - o, "%s%s", i ? "." : "",
					   w->segs[i].key)
				: snprintf(out + o, size - o, "[%zu]", w->segs[i].index);

		if (n < 0)
			break;
		o += (size_t)n;
	}
}

static void fail(struct walk *w, const yaml_node_t *n, const char *fmt, ...)
{
	char msg[768], path[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	w->errors++;
	render_path(w, path, sizeof(path));
	if (path[0])
		diag_addf(w->d, "%s:%u: %s: %s", w->file, line_of(n), path, msg);
	else
		diag_addf(w->d, "%s:%u: %s", w->file, line_of(n), msg);
}

static bool path_push(struct walk *w, const char *key, size_t index)
{
	if (w->nseg == WALK_MAX_DEPTH)
		return false;
	w->segs[w->nseg++] = (struct seg){.key = key, .index = index};
	return true;
}

static void path_pop(struct walk *w)
{
	w->nseg--;
}

static void record(struct walk *w, const yaml_node_t *n)
{
	char path[512];

	if (!w->pos)
		return;
	render_path(w, path, sizeof(path));
	if (srcpos_add(w->pos, path, line_of(n)) < 0)
		w->oom = true;
}

static const char *node_kind(const yaml_node_t *n)
{
	switch (n->type) {
	case YAML_MAPPING_NODE:
		return "a mapping";
	case YAML_SEQUENCE_NODE:
		return "a list";
	case YAML_SCALAR_NODE:
		return n->data.scalar.length ? "a scalar" : "an empty value";
	default:
		return "nothing";
	}
}

static bool scalar_is(const yaml_node_t *n, const char *s)
{
	size_t len = strlen(s);

	return n->data.scalar.length == len &&
	       memcmp(n->data.scalar.value, s, len) == 0;
}

/* Plain decimal: -?(0|[1-9][0-9]*), within [min, max]. */
static bool parse_decimal(const yaml_node_t *n, int64_t min, int64_t max)
{
	const char *s = (const char *)n->data.scalar.value;
	size_t len = n->data.scalar.length, i = 0;
	int64_t v = 0;
	bool neg = false;

	if (len && s[0] == '-') {
		neg = true;
		i = 1;
	}
	if (i == len || (s[i] == '0' && len - i > 1))
		return false;
	for (; i < len; i++) {
		int dgt;

		if (s[i] < '0' || s[i] > '9')
			return false;
		dgt = s[i] - '0';
		if (!neg && v > (INT64_MAX - dgt) / 10)
			return false;
		if (neg && v < (INT64_MIN + dgt) / 10)
			return false;
		v = neg ? v * 10 - dgt : v * 10 + dgt;
	}
	return v >= min && v <= max;
}

static void walk_value(struct walk *w, yaml_node_t *n,
		       const cyaml_schema_value_t *sv);

static void walk_mapping(struct walk *w, yaml_node_t *n,
			 const cyaml_schema_field_t *fields)
{
	uint64_t seen = 0;
	size_t nfields = 0;

	while (fields[nfields].key)
		nfields++;
	for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
	     p < n->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yaml_document_get_node(w->doc, p->key);
		yaml_node_t *v = yaml_document_get_node(w->doc, p->value);
		size_t i;

		if (!k || !v)
			continue;
		if (k->type != YAML_SCALAR_NODE) {
			fail(w, k, "keys must be plain words, found %s",
			     node_kind(k));
			continue;
		}
		for (i = 0; i < nfields; i++)
			if (scalar_is(k, fields[i].key))
				break;
		if (i == nfields) {
			char allowed[512];
			size_t off = 0;

			allowed[0] = '\0';
			for (size_t j = 0; j < nfields && off < sizeof(allowed); j++) {
				int m = snprintf(allowed + off, sizeof(allowed) - off,
						 "%s%s", j ? ", " : "", fields[j].key);
				if (m > 0)
					off += (size_t)m;
			}
			fail(w, k, "unknown key \"%.*s\" (expected one of: %s)",
			     (int)(k->data.scalar.length > 64 ? 64 : k->data.scalar.length),
			     (const char *)k->data.scalar.value, allowed);
			continue;
		}
		if (seen & (1ull << i)) {
			fail(w, k, "duplicate key \"%s\"", fields[i].key);
			continue;
		}
		seen |= 1ull << i;
		if (!path_push(w, fields[i].key, 0))
			continue; /* deeper than any schema: already refused */
		record(w, k);
		walk_value(w, v, &fields[i].value);
		path_pop(w);
	}
	for (size_t i = 0; i < nfields; i++) {
		if (!(seen & (1ull << i)) &&
		    !(fields[i].value.flags & CYAML_FLAG_OPTIONAL))
			fail(w, n, "missing required key \"%s\"", fields[i].key);
	}
}

static void walk_scalar(struct walk *w, yaml_node_t *n,
			const cyaml_schema_value_t *sv)
{
	const char *s = (const char *)n->data.scalar.value;
	size_t len = n->data.scalar.length;
	const int show = len > 64 ? 64 : (int)len;

	switch (sv->type) {
	case CYAML_STRING:
		if (memchr(s, '\0', len))
			fail(w, n, "contains a NUL character");
		else if (len < sv->string.min)
			fail(w, n, "must not be empty");
		else if (len > sv->string.max)
			fail(w, n, "is %zu characters long, at most %u allowed", len,
			     sv->string.max);
		break;
	case CYAML_INT: {
		int64_t lo = sv->data_size >= 8 ? INT64_MIN : INT_MIN;
		int64_t hi = sv->data_size >= 8 ? INT64_MAX : INT_MAX;

		if (!parse_decimal(n, lo, hi))
			fail(w, n, "\"%.*s\" is not a whole number", show, s);
		break;
	}
	case CYAML_BOOL:
		if (!scalar_is(n, "true") && !scalar_is(n, "false"))
			fail(w, n, "\"%.*s\" is not true or false", show, s);
		break;
	case CYAML_ENUM: {
		char allowed[256];
		size_t off = 0;

		for (uint32_t i = 0; i < sv->enumeration.count; i++)
			if (scalar_is(n, sv->enumeration.strings[i].str))
				return;
		allowed[0] = '\0';
		for (uint32_t i = 0; i < sv->enumeration.count; i++) {
			int m = snprintf(allowed + off, sizeof(allowed) - off, "%s%s",
					 i ? ", " : "", sv->enumeration.strings[i].str);
			if (m > 0 && (size_t)m < sizeof(allowed) - off)
				off += (size_t)m;
		}
		fail(w, n, "\"%.*s\" is not one of: %s", show, s, allowed);
		break;
	}
	default:
		/* Unreachable with today's schema (strings, integers, booleans
		 * and enums only): it refuses a value of a type added to the
		 * tables later without a check here, rather than pass it. */
		fail(w, n, "unsupported value");
		break;
	}
}

static void walk_value(struct walk *w, yaml_node_t *n,
		       const cyaml_schema_value_t *sv)
{
	if (w->too_big || w->oom)
		return;
	if (++w->nodes > WALK_MAX_NODES) {
		w->too_big = true;
		fail(w, n, "the document is too large (more than %lu values after "
			   "expanding aliases)", WALK_MAX_NODES);
		return;
	}
	switch (sv->type) {
	case CYAML_MAPPING:
		if (n->type != YAML_MAPPING_NODE) {
			fail(w, n, "expected a mapping, found %s", node_kind(n));
			return;
		}
		walk_mapping(w, n, sv->mapping.fields);
		return;
	case CYAML_SEQUENCE:
	case CYAML_SEQUENCE_FIXED: {
		size_t count, i = 0;

		if (n->type != YAML_SEQUENCE_NODE) {
			fail(w, n, "expected a list, found %s", node_kind(n));
			return;
		}
		count = (size_t)(n->data.sequence.items.top -
				 n->data.sequence.items.start);
		if (count < sv->sequence.min) {
			fail(w, n, "must have at least %u entr%s", sv->sequence.min,
			     sv->sequence.min == 1 ? "y" : "ies");
		} else if (sv->sequence.max != CYAML_UNLIMITED &&
			   count > sv->sequence.max) {
			fail(w, n, "has %zu entries, at most %u allowed", count,
			     sv->sequence.max);
			return;
		}
		for (yaml_node_item_t *it = n->data.sequence.items.start;
		     it < n->data.sequence.items.top; it++, i++) {
			yaml_node_t *e = yaml_document_get_node(w->doc, *it);

			if (!e)
				continue;
			if (!path_push(w, NULL, i))
				continue;
			record(w, e);
			walk_value(w, e, sv->sequence.entry);
			path_pop(w);
		}
		return;
	}
	default:
		if (n->type != YAML_SCALAR_NODE) {
			fail(w, n, "expected a single value, found %s", node_kind(n));
			return;
		}
		walk_scalar(w, n, sv);
		return;
	}
}

int schema_check(const char *file, const char *text, size_t len,
		 struct srcpos *pos, struct diag *d)
{
	yaml_parser_t parser;
	yaml_document_t doc, extra;
	struct walk w = {.file = file, .doc = &doc, .pos = pos, .d = d};
	yaml_node_t *root;
	int rc = -1;

	if (!yaml_parser_initialize(&parser)) {
		diag_addf(d, "%s: out of memory", file);
		return -1;
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	if (!yaml_parser_load(&parser, &doc)) {
		diag_addf(d, "%s:%zu: YAML syntax error: %s%s%s", file,
			  parser.problem_mark.line + 1,
			  parser.problem ? parser.problem : "unreadable",
			  parser.context ? " " : "",
			  parser.context ? parser.context : "");
		yaml_parser_delete(&parser);
		return -1;
	}
	root = yaml_document_get_root_node(&doc);
	if (!root) {
		diag_addf(d, "%s:1: the file is empty", file);
		goto out;
	}
	walk_value(&w, root, &policy_schema);
	if (w.oom) {
		diag_addf(d, "%s: out of memory", file);
		goto out;
	}
	/* libcyaml reads the first document only: a second one would be lost. */
	if (yaml_parser_load(&parser, &extra)) {
		yaml_node_t *r2 = yaml_document_get_root_node(&extra);

		if (r2) {
			diag_addf(d, "%s:%u: only one YAML document is allowed", file,
				  line_of(r2));
			w.errors++;
		}
		yaml_document_delete(&extra);
	} else {
		diag_addf(d, "%s:%zu: YAML syntax error: %s", file,
			  parser.problem_mark.line + 1,
			  parser.problem ? parser.problem : "unreadable");
		w.errors++;
	}
	rc = w.errors ? -1 : 0;
out:
	yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
	return rc;
}

/* ---- loading ---------------------------------------------------------- */

struct log_sink {
	char first[512];
	bool have;
};

static void log_first_error(cyaml_log_t level, void *ctx, const char *fmt,
			    va_list args)
{
	struct log_sink *s = ctx;
	size_t n;

	if (level < CYAML_LOG_ERROR || s->have)
		return;
	vsnprintf(s->first, sizeof(s->first), fmt, args);
	n = strlen(s->first);
	while (n && s->first[n - 1] == '\n')
		s->first[--n] = '\0';
	s->have = true;
}

static cyaml_config_t config_for(struct log_sink *sink)
{
	cyaml_config_t cfg = {
		.log_fn = log_first_error,
		.log_ctx = sink,
		.mem_fn = cyaml_mem,
		.log_level = CYAML_LOG_ERROR,
		.flags = CYAML_CFG_DEFAULT,
	};
	return cfg;
}

int schema_load(const char *file, const char *text, size_t len,
		struct src_policy **out, struct diag *d)
{
	struct log_sink sink = {.have = false};
	cyaml_config_t cfg = config_for(&sink);
	struct src_policy *src = NULL;
	cyaml_err_t err;

	err = cyaml_load_data((const uint8_t *)text, len, &cfg, &policy_schema,
			      (cyaml_data_t **)&src, NULL);
	if (err != CYAML_OK || !src) {
		diag_addf(d, "%s: cannot load policy: %s", file,
			  sink.have ? sink.first : cyaml_strerror(err));
		if (src)
			schema_free(src);
		return -1;
	}
	*out = src;
	return 0;
}

void schema_free(struct src_policy *src)
{
	struct log_sink sink = {.have = false};
	cyaml_config_t cfg = config_for(&sink);

	if (src)
		cyaml_free(&cfg, &policy_schema, src, 0);
}
