/*
 * charge: what a Pod or Job holds of quota, from its spec alone (SPEC
 * section 5).  The one home of the rule: admission (decide.c, at
 * /validate), the usage feed (kube/feed.c through webhook/charge.c) and
 * explain all ask it, so that what gpugate reserves and what it counts
 * from the watch can never disagree.
 *
 * Pure: the policy and the workload facts in, the charge out.
 *
 * What an object holds is derived from its spec, never from labels a user
 * or a status writer could set or remove:
 *
 *   tenant   from its namespace;
 *   flavor   from the first extended resource its containers, then its
 *            init containers, name that some flavor uses (of that
 *            resource's flavors, the one with the most node selector
 *            entries that the pod's nodeSelector all matches, else the
 *            first one), whether or not it has a class;
 *   per pod  that resource as the scheduler counts it: for each container
 *            its limit, else its request; then the larger of the sum of
 *            the regular containers and native sidecars (init containers
 *            with restartPolicy Always, which run for the pod's life) and,
 *            for each classic init container, its own units plus the
 *            sidecars started before it;
 *   slots    1 for a Pod; min(parallelism, completions) for a Job;
 *   active   a Pod until it is Succeeded or Failed (terminating pods still
 *            hold their GPUs); a Job while it is neither suspended (its pods
 *            are deleted; resuming it is an admission point) nor finished (a
 *            Complete or Failed condition), and only when units > 0.
 *
 * A pod may ride on its Job's gang (owner_job_uid) only when its
 * controller ownerReference names a Job and the job controller's label
 * batch.kubernetes.io/controller-uid says the same uid: anybody can write
 * an ownerReference, the label is what the job controller's own selector
 * matches.  Whether the gang really covers it (same namespace, flavor and
 * per-pod units, within the Job's slots) is the ledger's to decide, since
 * it needs the Job and its other pods.
 *
 * Claims that ride on their pod (DRA, docs/design/dra.md D2).  A pod that
 * asks for a flavor's extended resource, or for
 * deviceclass.resource.kubernetes.io/C where a flavor lists C in its
 * deviceClassNames, is charged for it as above, whether a device plugin or
 * DRA serves it; where DRA does, the scheduler makes a ResourceClaim for
 * the pod's extended resources (annotation
 * resource.kubernetes.io/extended-resource-claim "true", a controller
 * ownerReference to the Pod).  That claim rides on its pod (owner_pod_uid)
 * when it has both and its status.reservedFor names no other consumer.
 * Whether the pod really covers it is the ledger's to decide
 * (usage_claim_ride()): the pod must exist in the claim's namespace, hold
 * the claim's flavor, not name the claim itself in spec.resourceClaims,
 * and the claim must be the one its status names (or, before that is
 * written, its earliest such claim: Kubernetes' ResourceQuota's rule).
 * A riding claim holds what its devices exceed the pod's units by; any
 * other claim holds all its devices.  So a forged annotation or owner
 * buys at most what the pod already pays for.
 */
#ifndef GPUGATE_POLICY_CHARGE_H
#define GPUGATE_POLICY_CHARGE_H

#include <stdbool.h>
#include <stdint.h>

struct policy;
struct policy_flavor;
struct policy_tenant;
struct wl_container;
struct wl_pod;
struct workload;

/* What the resourceclaim controller writes on a claim it makes for a pod
 * from a template: the pod's entry; and what gpugate's templates add to
 * every claim made from them (policy/dra-template.h): their flavor. */
#define CHARGE_POD_CLAIM_ANNOTATION "resource.kubernetes.io/pod-claim-name"
#define CHARGE_FLAVOR_ANNOTATION "gpugate.io/flavor"

/* The job controller's label on the pods it creates: the Job's uid. */
#define CHARGE_CONTROLLER_UID_LABEL "batch.kubernetes.io/controller-uid"

struct charge {
	/* Both set, or both NULL: outside every tenant, or no flavor
	 * resource (then the rest is 0 and active false). */
	const struct policy_tenant *tenant;
	const struct policy_flavor *flavor;
	int64_t per_pod;   /* units one pod holds */
	int64_t slots;     /* pods: 1 for a Pod, the gang's size for a Job */
	int64_t units;     /* per_pod x slots: what it holds while active */
	bool active;       /* it holds units now */
	/* It also names a flavor resource of another flavor (denied at
	 * admission; charged for the first one only). */
	bool two_flavors;
	const char *owner_job_uid; /* a pod that may ride on its Job's gang */
	/* A claim that may ride on its pod (below); NULL otherwise. */
	const char *owner_pod_uid;
};

/*
 * The charge of wl (kind WL_POD or WL_JOB; WL_CLAIM:
 * charge_claim(); any other kind holds nothing) under p, in *out.  The
 * tenant and flavor point into p, owner_job_uid into wl's strings.
 */
void charge_decide(const struct policy *p, const struct workload *wl,
		   struct charge *out);

/*
 * The one flavor a pod of spec pod asking for resource res can run on: when
 * res is one flavor's, that flavor; when several flavors share it, the one
 * charge_decide() charges, provided the pod's nodeSelector has all of that
 * flavor's nodeSelector entries and, for every other flavor of res, one of
 * its keys with another value (so that the scheduler cannot put it on the
 * other flavor's nodes).  NULL otherwise: the pod could run on nodes of a
 * flavor it is not charged for.
 */
const struct policy_flavor *charge_selected_flavor(const struct policy *p,
						   const struct wl_pod *pod,
						   const char *res);

/*
 * The charge of a ResourceClaim (wl->kind WL_CLAIM) in *out
 * (policy/charge.h): the tenant of its namespace, its flavor and units;
 * active while it asks for any, until it is deleted.  Nothing outside
 * every tenant, or without a mapped device class.
 */
void charge_claim(const struct policy *p, const struct workload *wl,
		  struct charge *out);

/*
 * The DRA flavor of a claim made from one of gpugate's templates: its
 * annotation resource.kubernetes.io/pod-claim-name is DRA_TEMPLATE_ENTRY
 * and gpugate.io/flavor names a DRA flavor of p; NULL otherwise.  Such a
 * claim holds the devices of that flavor's device class it asks for, and
 * may ride on its pod.  The annotations can be forged: a forged claim is
 * charged its devices, and rides only as its pod's claim.
 */
const struct policy_flavor *charge_template_claim_flavor(const struct policy *p,
							 const struct workload *wl);

/*
 * The first flavor resource (a resource some flavor of p uses) container ct
 * names, in its limits, then its requests, other than other_than (NULL:
 * any); NULL when it names none.  The one scan of a container for GPU
 * resources: the charge and every rule of admission read it.
 */
const char *charge_container_resource(const struct policy *p,
				      const struct wl_container *ct,
				      const char *other_than);

/* The same over a pod: its containers, then its init containers. */
const char *charge_pod_resource(const struct policy *p, const struct wl_pod *pod,
				const char *other_than);

/*
 * Whether a pod in status.phase phase (NULL: not known yet) is done:
 * Succeeded or Failed, its containers stopped and its GPUs free.  A pod
 * being deleted is not done until then (terminating pods still hold
 * their GPUs).  The one test of it: the charge, the usage feed and the
 * node view (webhook/node-facts.c) ask it.
 */
bool charge_pod_terminal(const char *phase);

/* The pods a Job's gang covers: min(parallelism, completions), >= 0. */
int64_t charge_job_slots(const struct workload *wl);

/*
 * The units of resource res one pod of spec pod holds, by the scheduler's
 * rule above; 0 when it asks for none.  Malformed quantities count 0 (the
 * apiserver rejects them before any pod exists).
 */
int64_t charge_pod_units(const struct wl_pod *pod, const char *res);

#endif
