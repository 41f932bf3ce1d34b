/*
 * kinds: the one table of the workload kinds gpugate admits.
 *
 * Every place that needs to know a kind reads this table: the review codec
 * (which kind a request is), the handler (the object's apiVersion, the
 * parent of a scale), the facts (where the pod template sits, how its pods
 * are counted, a pod's controlling Job, a template's controller), the plan
 * applier (where it writes), the decision (through struct workload's def:
 * the kind's name in its texts, how its pods are counted), and `make test`,
 * which holds the webhook rules of manifests/webhooks.yaml and of the chart
 * to the rows' hooks (tests/unit/webhook/webhook_rules_test.c).  No code
 * but this table names a pod-template kind (scripts/check-house.py).
 *
 * Adding a kind whose pods are charged one by one (a controller with a pod
 * template, like LeaderWorkerSet) is a row here and its resources in the
 * webhook rules (and RBAC for a scale); docs/internals.md, "How to add a
 * kind, a controller, a backend, a rule" ("A workload kind"), says the
 * rest.
 */
#ifndef GPUGATE_KINDS_H
#define GPUGATE_KINDS_H

#include <stdbool.h>
#include <stddef.h>

#include "policy/workload.h"

/* How many pods a kind runs at once, as the decision counts them (for a
 * template kind: webhook/facts.c, template_facts(), into struct workload's
 * replicas; policy/decide-plan.c and decide-pool.c, its texts and pool). */
enum kind_pods {
	KIND_PODS_ONE,         /* a Pod: itself */
	KIND_PODS_PARALLELISM, /* a Job: its gang (parallelism, completions) */
	KIND_PODS_REPLICAS,    /* spec.replicas pods of its template, not a gang */
	/* A DaemonSet: one pod per matching node; how many is not known at
	 * admission (replicas 0). */
	KIND_PODS_PER_NODE,
	/* A CronJob: the pods of one Job at a time, min(parallelism,
	 * completions) of the Job template's spec beside the pod template: a
	 * gang, as a Job's; each Job is charged when it is created. */
	KIND_PODS_JOB,
	KIND_PODS_NONE,        /* a ResourceClaim or template: no pods */
};

/* The operations of a webhook rule, as bits. */
enum kind_op {
	KIND_CREATE = 1u << 0,
	KIND_UPDATE = 1u << 1,
	KIND_DELETE = 1u << 2,
};

/* One of gpugate's webhooks, as manifests/webhooks.yaml and the chart
 * register it. */
struct kind_webhook {
	const char *name; /* "mutate.gpugate.io" */
	const char *path; /* the endpoint it calls: "/mutate", "/validate" */
};

/*
 * One registration of a kind: the apiserver sends requests for the kind's
 * resource (or for its subresource) with these operations to this webhook.
 * The webhook rules must be exactly the hooks of the rows (plus the policy
 * ConfigMap's webhook, which is no workload): `make test` compares them.
 */
struct kind_hook {
	const struct kind_webhook *webhook; /* NULL ends a row's list */
	/* "" for the object itself; "status", "ephemeralcontainers", or
	 * "scale": kubectl scale and a HorizontalPodAutoscaler reach the kind
	 * through its scale subresource, which gpugate judges against the
	 * parent (kinds_scaled()). */
	const char *subresource;
	unsigned ops; /* enum kind_op bits */
};

struct kind_def {
	const char *group;    /* API group; "" for the core group */
	const char *version;  /* "v1" */
	const char *kind;     /* "Deployment" */
	const char *resource; /* its plural resource name: "deployments" */
	const char *api_version; /* apiVersion of its objects: "apps/v1" */
	enum wl_kind wl;      /* how the decision judges it */
	/* Where its pod template sits, as object members from the object
	 * itself, NULL-terminated: {"spec", "template", NULL}; an empty list
	 * for a Pod (the object is the pod); NULL for a kind without pods. */
	const char *const *pod_template;
	enum kind_pods pods;
	/* It holds quota itself at admission (a Pod, a Job's whole gang, a
	 * ResourceClaim); otherwise its pods are charged one by one when they
	 * are created and it only has its template judged. */
	bool holds_quota;
	/* The webhooks it is registered for, ended by {NULL}. */
	const struct kind_hook *hooks;
	/* A WL_TEMPLATE kind whose objects are made, template and all, by a
	 * controller of another template kind, the row named here (a
	 * ReplicaSet's, by a Deployment): such an object, controlled by one of
	 * those (its controller ownerReference), has its template judged at
	 * the controller and is not changed (struct workload's
	 * template_owned).  NULL for every other kind. */
	const struct kind_def *template_owner;
};

/* Every kind, in a fixed order; *n is the number of rows. */
const struct kind_def *kinds_all(size_t *n);

/* The row of group/version/kind (an AdmissionReview's request.kind), or
 * NULL when gpugate does not admit it. */
const struct kind_def *kinds_find(const char *group, const char *version,
				  const char *kind);

/* The row of an object's apiVersion and kind ("batch/v1", "Job"; as an
 * ownerReference names its owner), or NULL. */
const struct kind_def *kinds_by_api(const char *api_version, const char *kind);

/* The row of a pod-template controller, by its kind name alone ("CronJob"),
 * or NULL.  Names are unique among the WL_TEMPLATE rows. */
const struct kind_def *kinds_template(const char *kind);

/* The row of the resource a scale subresource names (group, "deployments"),
 * or NULL when that kind has no scale gpugate judges (no "scale" hook). */
const struct kind_def *kinds_scaled(const char *group, const char *resource);

/* The hook of row k for subresource sub ("" for the object itself) at
 * webhook (any webhook when NULL), or NULL. */
const struct kind_hook *kinds_hook(const struct kind_def *k, const char *webhook,
				   const char *sub);

/* gpugate's webhooks that serve workloads; *n is their number. */
const struct kind_webhook *kinds_webhooks(size_t *n);

#endif
