/*
 * quotas: a tenant's quota as its team reads it, `kubectl get gpuquota -n
 * NS` (manifests/crd-gpuquotas.yaml; docs/users.md, "How much of my quota
 * do I use?").  Pure: the GPUQuota objects wanted for a policy and its
 * usage, and the plan that makes the cluster's objects match them
 * (controllers/quota-sync.h writes it).
 *
 * One object per namespace of a tenant (each namespace of the cluster that
 * policy_tenant_for_namespace() gives a tenant, globs included), named
 * after the tenant, with what the tenant uses of its quota: the same
 * numbers for each of its namespaces, because quota is the tenant's, not
 * the namespace's.  Tenants whose name is not a valid
 * object name (capitals, '_') have none.  Only the status says anything;
 * the spec is empty.
 */
#ifndef GPUGATE_QUOTAS_H
#define GPUGATE_QUOTAS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct policy;

/* The GPUQuota API: namespaced, same group and version as GPUClass. */
#define QUOTAS_API_VERSION "gpugate.io/v1alpha1"
#define QUOTAS_KIND "GPUQuota"
/* Every namespace's objects (list) ... */
#define QUOTAS_ALL "/apis/gpugate.io/v1alpha1/gpuquotas"
/* ... and one namespace's collection: printf with the namespace. */
#define QUOTAS_COLLECTION_FMT "/apis/gpugate.io/v1alpha1/namespaces/%s/gpuquotas"

/*
 * Counts one waiting pod (usage/inventory.h inventory_waiting: admitted,
 * not yet on a node) of tenant asking per_pod units of flavor into acc, an
 * object {tenant: {flavor: {"pods": N, "gpus": N}}}.  -1 when out of
 * memory.
 */
int quotas_waiting_add(json_t *acc, const char *tenant, const char *flavor,
		       int64_t per_pod);

/*
 * The status of a tenant's GPUQuota objects, keys in this order:
 *   tenant, cohort (when in one),
 *   flavors [{flavor, nominal, used, borrowed, lent, waitingPods,
 *             waitingGPUs, backed, notBacked}] (the tenant's quota
 *             entries, file order; backed and notBacked only when the
 *             report entry has them: the pool is known, policy/capacity.h),
 *   used      "h100 12/32 (+4 borrowed), l4 0/8 (2 lent) (8 not backed)":
 *             the column
 *   waiting   waiting pods, all flavors: the column
 *   updated   the now given (RFC 3339)
 * tenant_report: one entry of pool_report_tenants() (name, cohort, quota
 * [{flavor, used, nominal, borrowed, lent[, backed, notBacked]}]); waiting: as
 * quotas_waiting_add() fills it, or NULL.  NULL when out of memory.
 */
json_t *quotas_status_new(const json_t *tenant_report, const json_t *waiting,
			  const char *now);

/*
 * The objects wanted for policy p: an object keyed "NAMESPACE/NAME", each
 * {apiVersion, kind, metadata {name, namespace, labels {managed-by:
 * gpugate}}, status}, from the tenants of tenants_report (the array of
 * pool_report_tenants()) and waiting (or NULL), for the namespaces of
 * `namespaces` (an array of names: the cluster's) that the policy gives a
 * tenant.  namespaces NULL (they could not be listed): the namespace
 * entries of the tenants that name one namespace, not a glob.  NULL when
 * out of memory.
 */
json_t *quotas_wanted_new(const struct policy *p, const json_t *tenants_report,
			  const json_t *namespaces, const json_t *waiting,
			  const char *now);

/* Two statuses say the same, whatever their `updated`. */
int quotas_status_same(const json_t *a, const json_t *b);

/*
 * What makes the cluster's objects match wanted.  Pure: known is the
 * objects gpugate keeps as last listed or written (each with metadata
 * name, namespace, uid, resourceVersion, and status); every array of the
 * plan is a new reference.
 *
 *   create     wanted objects with no known one: POST, then PUT the
 *              status (the status subresource ignores it on create)
 *   update     wanted objects whose known status says something else,
 *              with the known one's resourceVersion and uid: PUT /status
 *   remove     known objects not wanted (a namespace or tenant no longer
 *              in the policy), as known: DELETE with uid and
 *              resourceVersion as preconditions
 *   unchanged  how many known objects already say what is wanted
 *
 * Returns 0, or -1 when out of memory (nothing to release then).
 */
struct quotas_plan {
	json_t *create, *update, *remove;
	size_t unchanged;
};

int quotas_plan_make(const json_t *wanted, const json_t *known,
		     struct quotas_plan *out);
void quotas_plan_release(struct quotas_plan *pl);

/*
 * The GPUQuota objects of a list (its items) as a table for a terminal:
 * one row per tenant and flavor, TENANT FLAVOR USED NOMINAL BORROWED LENT
 * WAITING (pods) UPDATED.  -1 when out of memory.
 */
struct strbuf;
int quotas_text(const json_t *items, struct strbuf *out);

/*
 * What the GPUQuota objects items say is used, into store u: one held
 * item per tenant and flavor with used > 0 (uid "gpuquota/TENANT/FLAVOR"),
 * so that quota is judged against it when the cluster's workloads cannot
 * be listed (`gpugate explain --kubeconfig` as a tenant).  A tenant read
 * twice (its objects in several namespaces say the same) counts once.
 * Returns how many items were observed.
 */
struct usage_store;
size_t quotas_observe(struct usage_store *u, const json_t *items);

/* "NAMESPACE/NAME" of an object into out (empty when it has neither). */
void quotas_key(const json_t *obj, char *out, size_t size);

#endif
