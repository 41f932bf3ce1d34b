/*
 * rules: the table of the rules a decision can name (policy/rules.h).
 * Every rule id set on a decision comes from here (decide_violate()).
 */
#include "policy/rules.h"

#include <stddef.h>
#include <string.h>

#define USERS "docs/users.md"

static const struct rules_row table[RULES__COUNT] = {
	[RULES_NO_TENANT] = {"no-tenant",
			     "the namespace belongs to a tenant of the policy",
			     USERS, "denials"},
	[RULES_CLASS_CONFLICT] = {"class-conflict",
				  "a Job's or template's class label and its pod "
				  "template's name the same class",
				  USERS, "denials"},
	[RULES_CLASS_UNKNOWN] = {"class-unknown", "the class named exists",
				 USERS, "which-classes-can-i-use"},
	[RULES_CLASS_NOT_ALLOWED] = {"class-not-allowed",
				     "the tenant may use the class named",
				     USERS, "which-classes-can-i-use"},
	[RULES_GPUS_INVALID] = {"gpus-invalid",
				"the GPU count label is a whole number from 1 to "
				"the class's maximum",
				USERS, "the-labels-you-set"},
	[RULES_GPUS_CONFLICT] = {"gpus-conflict",
				 "a GPU count written on the GPU container is the "
				 "class's",
				 USERS, "denials"},
	[RULES_SHARING] = {"sharing",
			   "the tenant may use the sharing mode of the flavor asked "
			   "for",
			   USERS, "denials"},
	[RULES_CONTAINER_UNKNOWN] = {"container-unknown",
				     "the pod has containers, and the GPU container "
				     "annotation names one of them",
				     USERS, "denials"},
	[RULES_TWO_FLAVORS] = {"two-flavors",
			       "a pod or claim uses one flavor only, in one "
			       "container",
			       USERS, "denials"},
	[RULES_RAW_REQUEST] = {"raw-request",
			       "GPUs asked for without a class (or by a device "
			       "class of no flavor) are allowed by "
			       "settings.rawGpuRequests",
			       USERS, "denials"},
	[RULES_RAW_FLAVOR] = {"raw-flavor",
			      "a raw request of a resource several flavors share "
			      "selects the nodes of exactly one",
			      USERS, "denials"},
	[RULES_SECURITY] = {"security",
			    "no container gets around the device plugin's GPU "
			    "isolation (privileged, NVIDIA_ variables, envFrom, "
			    "hostPath, device-list mounts, CDI annotations)",
			    USERS, "pods-that-can-reach-gpu-nodes"},
	[RULES_NODE_SELECTOR] = {"node-selector",
				 "the pod's nodeSelector agrees with its class's "
				 "flavor",
				 USERS, "denials"},
	[RULES_NOT_MUTATED] = {"not-mutated",
			       "at /validate, the pod still carries what /mutate "
			       "gave it",
			       USERS, "denials"},
	[RULES_QUOTA] = {"quota",
			 "the tenant's quota, with what its cohort lends, can hold "
			 "what the workload asks",
			 USERS, "how-much-of-my-quota-do-i-use"},
	[RULES_POOL] = {"pool",
			"some usable node (or topology domain) of the flavor could "
			"ever hold what the workload asks",
			USERS, "denied-it-could-never-be-placed"},
	[RULES_STAMP_CHANGED] = {"stamp-changed",
				 "an update leaves gpugate's labels and the job "
				 "controller's controller-uid as they are",
				 USERS, "denials"},
	[RULES_PARALLELISM_RAISED] = {"parallelism-raised",
				      "an update does not raise the pods a running "
				      "GPU Job runs at once",
				      USERS, "denials"},
	[RULES_JOB_TEMPLATE_CHANGED] = {"job-template-changed",
					"an update does not change the GPU request "
					"of a Job's pod template",
					USERS, "denials"},
	[RULES_ALLOCATION_ALL] = {"allocation-all",
				  "a ResourceClaim asks for a count of GPU devices, "
				  "not all of a class",
				  USERS, "gpus-through-dra-resourceclaims"},
	[RULES_GANG] = {"gang",
			"a gang starts all at once: its gate, its minCount and "
			"its route are gpugate's, and its pods do not name a node",
			USERS, "gang-start-all-or-nothing"},
	[RULES_POD_REQUEST_CHANGED] = {"pod-request-changed",
				       "an update leaves a pod's class and GPU count "
				       "labels as they are",
				       USERS, "denials"},
	[RULES_CLAIM_TEMPLATE] = {"claim-template",
				  "claim templates named gpugate.* are created, and "
				  "gpugate's label on them changed, by gpugate only",
				  USERS, "gpus-through-dra-resourceclaims"},
};

const struct rules_row *rules_row(enum rules_id r)
{
	return &table[r];
}

const char *rules_name(enum rules_id r)
{
	return table[r].id;
}

const struct rules_row *rules_find(const char *id)
{
	for (size_t i = 0; id && i < RULES__COUNT; i++)
		if (strcmp(table[i].id, id) == 0)
			return &table[i];
	return NULL;
}
