/*
 * claim-sync: the checkpoint claims gpugate creates (policy
 * checkpoint.claim.create; docs/policy.md "checkpoint.claim",
 * docs/operations.md "Checkpoint claims").
 *
 * A thread of gpugate serve (API mode), beside admission and never inside
 * it: an admission never waits for a claim (one that is missing is not
 * mounted, policy/decide-plan.c).  Every interval_s, and at once when the policy
 * is swapped (holder_generation()), while `leading` says so (the Lease of
 * several replicas: one replica writes), with checkpoint.claim.create on,
 * it lists the Namespaces and, in each active one that belongs to a tenant,
 * creates the claim policy_checkpoint_claim() names when the feed's claims
 * (usage/pvcs.h) say it is missing.  Nothing is done until the claims were
 * listed once (the view answers PVC_UNKNOWN), so a start never creates a
 * claim that exists.
 *
 * The claim is claim_sync_object(): labelled app.kubernetes.io/managed-by=
 * gpugate, its spec from checkpoint.claim.  It only ever creates: a claim
 * is never changed or deleted, gpugate's own included, and a name taken by
 * someone else's claim (409 AlreadyExists) is left alone.
 *
 * Nothing is fatal: a refused list or write is logged (again only when the
 * error changes) and tried again the next round.  It logs (logfmt):
 *
 *   info  msg="checkpoint claim created" claim=NS/NAME size=Q
 *         access_modes=M storage_class=S
 *   warn  msg="checkpoint claims not created" error="..."
 *
 * RBAC: list on namespaces, create on persistentvolumeclaims
 * (manifests/rbac.yaml).
 */
#ifndef GPUGATE_CLAIM_SYNC_H
#define GPUGATE_CLAIM_SYNC_H

#include <jansson.h>
#include <stdbool.h>

struct diag;
struct holder;
struct kube_config;
struct policy;
struct pvcs;

/* The label every claim gpugate creates carries, with this value. */
#define CLAIM_SYNC_OWNER_LABEL "app.kubernetes.io/managed-by"
#define CLAIM_SYNC_OWNER "gpugate"

struct claim_sync_config {
	const struct kube_config *kube;
	struct holder *policy;
	struct pvcs *pvcs;           /* the feed's claims: which exist */
	unsigned interval_s;         /* between rounds; 0: 10 */
	bool (*leading)(void *ctx);  /* NULL: always */
	void *leading_ctx;
};

struct claim_sync;

int claim_sync_start(const struct claim_sync_config *cfg, struct claim_sync **out,
		     struct diag *d);
/* Stops the thread and frees s: within a second, or when the request in
 * flight ends (each is given at most 10 s).  NULL is a no-op. */
void claim_sync_stop(struct claim_sync *s);

/*
 * The PersistentVolumeClaim gpugate creates as `name` in namespace ns
 * under p's checkpoint.claim (NULL when out of memory).  The caller owns
 * it.
 */
json_t *claim_sync_object(const struct policy *p, const char *ns, const char *name);

#endif
