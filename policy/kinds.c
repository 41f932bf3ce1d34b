/*
 * kinds: the table (see kinds.h).  The order is the documentation's.
 */
#include <string.h>

#include "policy/kinds.h"

/* The webhooks of manifests/webhooks.yaml that serve workloads (the policy
 * ConfigMap's, policy.gpugate.io, serves none). */
static const struct kind_webhook WEBHOOKS[] = {
	{"mutate.gpugate.io", "/mutate"},
	{"mutate-templates.gpugate.io", "/mutate"},
	{"validate.gpugate.io", "/validate"},
	{"validate-templates.gpugate.io", "/validate"},
	{"release.gpugate.io", "/validate"},
};

#define MUTATE (&WEBHOOKS[0])
#define MUTATE_TEMPLATES (&WEBHOOKS[1])
#define VALIDATE (&WEBHOOKS[2])
#define VALIDATE_TEMPLATES (&WEBHOOKS[3])
#define RELEASE (&WEBHOOKS[4])
#define CU (KIND_CREATE | KIND_UPDATE)

/* A Pod and a Job: mapped at creation, judged and charged at /validate,
 * their stamps held through status writes, released on DELETE (embedded
 * mode); a Pod's ephemeral containers (kubectl debug) are judged too. */
static const struct kind_hook POD_HOOKS[] = {
	{MUTATE, "", KIND_CREATE},
	{VALIDATE, "", CU},
	{VALIDATE, "ephemeralcontainers", KIND_UPDATE},
	{VALIDATE, "status", KIND_UPDATE},
	{RELEASE, "", KIND_DELETE},
	{NULL, NULL, 0},
};
static const struct kind_hook JOB_HOOKS[] = {
	{MUTATE, "", KIND_CREATE},
	{VALIDATE, "", CU},
	{VALIDATE, "status", KIND_UPDATE},
	{RELEASE, "", KIND_DELETE},
	{NULL, NULL, 0},
};
/* A controller's pod template: judged and mapped at kubectl apply. */
static const struct kind_hook TEMPLATE_HOOKS[] = {
	{MUTATE_TEMPLATES, "", CU},
	{VALIDATE_TEMPLATES, "", CU},
	{NULL, NULL, 0},
};
/* ... and kubectl scale judged against the parent's template. */
static const struct kind_hook SCALED_HOOKS[] = {
	{MUTATE_TEMPLATES, "", CU},
	{VALIDATE_TEMPLATES, "", CU},
	{VALIDATE_TEMPLATES, "scale", KIND_UPDATE},
	{NULL, NULL, 0},
};
/* DRA: gpugate changes neither; a claim is charged, a claim template only
 * judged (the claims made from it are charged), and its UPDATE held to
 * gpugate's label on gpugate's templates (policy/decide-dra.c; DELETE is
 * not hooked: the keeper makes a deleted one again). */
static const struct kind_hook CLAIM_HOOKS[] = {
	{VALIDATE, "", KIND_CREATE},
	{RELEASE, "", KIND_DELETE},
	{NULL, NULL, 0},
};
static const struct kind_hook CLAIM_TEMPLATE_HOOKS[] = {
	{VALIDATE, "", CU},
	{NULL, NULL, 0},
};

static const char *const NO_PATH[] = {NULL};
static const char *const SPEC_TEMPLATE[] = {"spec", "template", NULL};
static const char *const CRON_TEMPLATE[] = {"spec", "jobTemplate", "spec", "template", NULL};

/* The Deployment's row below: a ReplicaSet's template_owner. */
#define DEPLOYMENT (&KINDS[2])

static const struct kind_def KINDS[] = {
	{"", "v1", "Pod", "pods", "v1", WL_POD, NO_PATH, KIND_PODS_ONE, true, POD_HOOKS, NULL},
	{"batch", "v1", "Job", "jobs", "batch/v1", WL_JOB, SPEC_TEMPLATE, KIND_PODS_PARALLELISM,
	 true, JOB_HOOKS, NULL},
	{"apps", "v1", "Deployment", "deployments", "apps/v1", WL_TEMPLATE, SPEC_TEMPLATE,
	 KIND_PODS_REPLICAS, false, SCALED_HOOKS, NULL},
	{"apps", "v1", "StatefulSet", "statefulsets", "apps/v1", WL_TEMPLATE, SPEC_TEMPLATE,
	 KIND_PODS_REPLICAS, false, SCALED_HOOKS, NULL},
	{"apps", "v1", "ReplicaSet", "replicasets", "apps/v1", WL_TEMPLATE, SPEC_TEMPLATE,
	 KIND_PODS_REPLICAS, false, SCALED_HOOKS, DEPLOYMENT},
	{"apps", "v1", "DaemonSet", "daemonsets", "apps/v1", WL_TEMPLATE, SPEC_TEMPLATE,
	 KIND_PODS_PER_NODE, false, TEMPLATE_HOOKS, NULL},
	{"batch", "v1", "CronJob", "cronjobs", "batch/v1", WL_TEMPLATE, CRON_TEMPLATE,
	 KIND_PODS_JOB, false, TEMPLATE_HOOKS, NULL},
	/* DRA: with matchPolicy Equivalent the apiserver converts v1beta1 and
	 * v1beta2 objects to v1 for the webhook. */
	{"resource.k8s.io", "v1", "ResourceClaim", "resourceclaims", "resource.k8s.io/v1",
	 WL_CLAIM, NULL, KIND_PODS_NONE, true, CLAIM_HOOKS, NULL},
	{"resource.k8s.io", "v1", "ResourceClaimTemplate", "resourceclaimtemplates",
	 "resource.k8s.io/v1", WL_CLAIM_TEMPLATE, NULL, KIND_PODS_NONE, false,
	 CLAIM_TEMPLATE_HOOKS, NULL},
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
		if (strcmp(KINDS[i].kind, kind) == 0 && strcmp(KINDS[i].group, group) == 0 &&
		    strcmp(KINDS[i].version, version) == 0)
			return &KINDS[i];
	return NULL;
}

const struct kind_def *kinds_by_api(const char *api_version, const char *kind)
{
	for (size_t i = 0; api_version && kind && i < N_KINDS; i++)
		if (strcmp(KINDS[i].kind, kind) == 0 &&
		    strcmp(KINDS[i].api_version, api_version) == 0)
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

const struct kind_def *kinds_scaled(const char *group, const char *resource)
{
	for (size_t i = 0; group && resource && i < N_KINDS; i++)
		if (strcmp(KINDS[i].group, group) == 0 &&
		    strcmp(KINDS[i].resource, resource) == 0 && kinds_hook(&KINDS[i], NULL, "scale"))
			return &KINDS[i];
	return NULL;
}

const struct kind_hook *kinds_hook(const struct kind_def *k, const char *webhook,
				   const char *sub)
{
	for (const struct kind_hook *h = k ? k->hooks : NULL; h && h->webhook; h++)
		if (strcmp(h->subresource, sub) == 0 &&
		    (!webhook || strcmp(h->webhook->name, webhook) == 0))
			return h;
	return NULL;
}

const struct kind_webhook *kinds_webhooks(size_t *n)
{
	*n = sizeof(WEBHOOKS) / sizeof(WEBHOOKS[0]);
	return WEBHOOKS;
}
