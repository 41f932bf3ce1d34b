/*
 * charge: what a Pod or Job holds of quota, from its spec alone (SPEC
 * section 5).
 *
 * Pure: the policy and the workload facts in, the charge out.  The usage
 * feed (kube/feed.c, through webhook/charge.c) asks it about every object
 * the API shows; it is the one home of the rule, so that admission can ask
 * it too.
 *
 * What an object holds is derived from its spec, never from its labels
 * (the user could forge those): the tenant from its namespace, the flavor
 * from the first extended resource its containers name that some flavor
 * uses (the first of that resource's flavors whose node selector the pod
 * matches, else the first one), the units from its containers' limits
 * (else requests) of that resource, times parallelism for a Job.  Terminal
 * pods (Succeeded, Failed) and finished Jobs (a Complete or Failed
 * condition) hold nothing; a suspended Job keeps its gang: resuming it is
 * an UPDATE nobody judges, so it must still hold what it was admitted with.
 */
#ifndef GPUGATE_POLICY_CHARGE_H
#define GPUGATE_POLICY_CHARGE_H

#include <stdbool.h>
#include <stdint.h>

struct policy;
struct policy_flavor;
struct policy_tenant;
struct workload;

struct charge {
	/* Both set, or both NULL: outside every tenant, or no flavor
	 * resource (then units is 0 and active false). */
	const struct policy_tenant *tenant;
	const struct policy_flavor *flavor;
	int64_t units;  /* what it holds while active */
	bool active;    /* it holds units now: not terminal, units > 0 */
};

/*
 * The charge of wl (kind WL_POD or WL_JOB; WL_CLAIM: dra_charge() of
 * policy/dra.h; any other kind holds nothing) under p, in *out.  Reads
 * wl->namespace, the pod's containers and node selector, the phase (Pod)
 * and parallelism and job_finished (Job).  The tenant and flavor point
 * into p.
 */
void charge_decide(const struct policy *p, const struct workload *wl,
		   struct charge *out);

#endif
