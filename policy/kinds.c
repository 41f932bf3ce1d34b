/*
 * kinds: the table (see kinds.h).  The order is the documentation's.
 */
#include <string.h>

#include "policy/kinds.h"

static const char *const NO_PATH[] = {NULL};
static const char *const SPEC_TEMPLATE[] = {"spec", "template", NULL};
static const char *const CRON_TEMPLATE[] = {"spec", "jobTemplate", "spec", "template", NULL};

static const struct kind_def KINDS[] = {
	{"", "v1", "Pod", "pods", "v1", WL_POD, 0, NO_PATH, KIND_PODS_ONE, false, true},
	{"batch", "v1", "Job", "jobs", "batch/v1", WL_JOB, 0, SPEC_TEMPLATE,
	 KIND_PODS_PARALLELISM, false, true},
	{"apps", "v1", "Deployment", "deployments", "apps/v1", WL_TEMPLATE, WL_DEPLOYMENT,
	 SPEC_TEMPLATE, KIND_PODS_REPLICAS, true, false},
	{"apps", "v1", "StatefulSet", "statefulsets", "apps/v1", WL_TEMPLATE, WL_STATEFULSET,
	 SPEC_TEMPLATE, KIND_PODS_REPLICAS, true, false},
	{"apps", "v1", "ReplicaSet", "replicasets", "apps/v1", WL_TEMPLATE, WL_REPLICASET,
	 SPEC_TEMPLATE, KIND_PODS_REPLICAS, true, false},
	{"apps", "v1", "DaemonSet", "daemonsets", "apps/v1", WL_TEMPLATE, WL_DAEMONSET,
	 SPEC_TEMPLATE, KIND_PODS_PER_NODE, false, false},
	{"batch", "v1", "CronJob", "cronjobs", "batch/v1", WL_TEMPLATE, WL_CRONJOB,
	 CRON_TEMPLATE, KIND_PODS_JOB, false, false},
	/* DRA: with matchPolicy Equivalent the apiserver converts v1beta1 and
	 * v1beta2 objects to v1 for the webhook. */
	{"resource.k8s.io", "v1", "ResourceClaim", "resourceclaims", "resource.k8s.io/v1",
	 WL_CLAIM, 0, NULL, KIND_PODS_NONE, false, true},
	{"resource.k8s.io", "v1", "ResourceClaimTemplate", "resourceclaimtemplates",
	 "resource.k8s.io/v1", WL_CLAIM_TEMPLATE, 0, NULL, KIND_PODS_NONE, false, false},
};

#define N_KINDS (sizeof(KINDS) / sizeof(KINDS[0]))

const struct kind_def *kinds_all(size_t *n)
{
	*n = N_KINDS;
	return KINDS;
}

const struct kind_def *kinds_find(const char *group, const char *version,
				  const char *kind)
{
	for (size_t i = 0; group && version && kind && i < N_KINDS; i++)
		if (strcmp(KINDS[i].group, group) == 0 &&
		    strcmp(KINDS[i].version, version) == 0 &&
		    strcmp(KINDS[i].kind, kind) == 0)
			return &KINDS[i];
	return NULL;
}

const struct kind_def *kinds_template(const char *kind)
{
	for (size_t i = 0; kind && i < N_KINDS; i++)
		if (KINDS[i].wl == WL_TEMPLATE && strcmp(KINDS[i].kind, kind) == 0)
			return &KINDS[i];
	return NULL;
}

const struct kind_def *kinds_of_template(enum wl_template t)
{
	for (size_t i = 0; i < N_KINDS; i++)
		if (KINDS[i].wl == WL_TEMPLATE && KINDS[i].tmpl == t)
			return &KINDS[i];
	return &KINDS[2]; /* unreachable: every enum wl_template has its row */
}

const struct kind_def *kinds_scaled(const char *group, const char *resource)
{
	for (size_t i = 0; group && resource && i < N_KINDS; i++)
		if (KINDS[i].scale && strcmp(KINDS[i].group, group) == 0 &&
		    strcmp(KINDS[i].resource, resource) == 0)
			return &KINDS[i];
	return NULL;
}
