/*
 * claim-templates: the template keeper, the ResourceClaimTemplates through
 * which the classes of DRA flavors get their devices (docs/design/dra.md,
 * D1; docs/operations.md, "Claim templates").
 *
 * A thread of gpugate serve (API mode), beside admission and never inside
 * it: /mutate names a template in a pod and never waits for it (a pod
 * whose template is missing waits in the resourceclaim controller, which
 * picks it up when the template appears).  Every interval_s, and at once
 * when the policy is swapped, it lists the ResourceClaimTemplates of the
 * cluster and the Namespaces, and plans the round
 * (controllers/claim-templates-plan.h):
 *
 *   - every replica publishes on the board (usage/template-board.h)
 *     whether templates are served and which names gpugate wants are
 *     taken by templates not labelled gpugate's, for its admission;
 *   - the replica that leads (the Lease of several replicas) creates the
 *     wanted templates that are missing (claim_templates_object()) and
 *     deletes gpugate's that are no longer wanted, once no non-terminal
 *     pod of their namespace names them and they are older than
 *     CLAIM_TEMPLATES_GRACE_S (the namespace's pods are listed only then).
 *
 * A template not labelled app.kubernetes.io/managed-by=gpugate is never
 * changed or deleted; one gpugate made is never updated (its spec is
 * immutable): a change of the flavor's dra block makes new names.  A
 * create answered 409 AlreadyExists is taken.  When resource.k8s.io/v1
 * resourceclaimtemplates is not served (404) nothing else is done: said
 * once, on the board and in the metrics.
 *
 * Nothing is fatal: a refused list or write is logged (again only when the
 * error changes) and tried again the next round.  It logs (logfmt):
 *
 *   info  msg="claim template created" template=NS/NAME class=C count=N
 *   info  msg="claim template deleted" template=NS/NAME
 *   warn  msg="claim template taken" template=NS/NAME detail="..."   once
 *   warn  msg="claim templates not served" detail="..."              once
 *   warn  msg="claim templates not kept" error="..."
 *
 * Metrics: gpugate_dra_templates{state="kept"|"taken"|"garbage"} and
 * gpugate_dra_templates_served (metrics/metrics.h).
 *
 * RBAC: list on namespaces; get, list, watch, create, delete on
 * resourceclaimtemplates (never update); list on pods
 * (manifests/rbac.yaml).
 */
#ifndef GPUGATE_CLAIM_TEMPLATES_H
#define GPUGATE_CLAIM_TEMPLATES_H

#include <jansson.h>
#include <stdbool.h>

struct diag;
struct holder;
struct kube_config;
struct metrics;
struct policy_class;
struct template_board;

/* The API's collection of the templates. */
#define CLAIM_TEMPLATES_API "/apis/resource.k8s.io/v1"
/* The labels and annotation a template carries (besides
 * CLAIM_SYNC_OWNER_LABEL): the resourceclaim controller copies the
 * annotation into every claim made from the template, and the charge
 * reads the flavor from it. */
#define CLAIM_TEMPLATES_CLASS_LABEL "gpugate.io/class"
#define CLAIM_TEMPLATES_FLAVOR_LABEL "gpugate.io/flavor"

struct claim_templates_config {
	const struct kube_config *kube;
	struct holder *policy;
	struct template_board *board; /* what admission reads */
	struct metrics *metrics;      /* NULL: none */
	unsigned interval_s;          /* between rounds; 0: 10 */
	bool (*leading)(void *ctx);   /* NULL: always */
	void *leading_ctx;
};

struct claim_templates;

int claim_templates_start(const struct claim_templates_config *cfg,
			  struct claim_templates **out, struct diag *d);
/* Stops the thread and frees s: within a second, or when the request in
 * flight ends (each is given at most 10 s).  NULL is a no-op. */
void claim_templates_stop(struct claim_templates *s);

/*
 * The ResourceClaimTemplate gpugate keeps in namespace ns for count
 * devices of class c (of a DRA flavor), named `name`
 * (dra_template_name()); NULL when c's flavor has no dra block, its CEL
 * does not fit, or out of memory.  The caller owns it.
 */
json_t *claim_templates_object(const struct policy_class *c, unsigned count,
			       const char *ns, const char *name);

#endif
