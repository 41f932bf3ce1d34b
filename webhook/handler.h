/*
 * handler: the one place where a request meets the decision.
 *
 *   body -> review_decode [-> the parent of a scale, from the API]
 *        -> facts_extract -> decide_prepare
 *        -> usage store (peek at /mutate, reserve at /validate) -> decide_quota
 *        -> apply_plan + patch_diff_write (/mutate) -> review_encode
 *
 * handler_evaluate() is the same pipeline without HTTP and metrics; `gpugate
 * explain` uses it too, so that what explain prints is what the server does.
 */
#ifndef GPUGATE_HANDLER_H
#define GPUGATE_HANDLER_H

#include "base/arena.h"
#include "base/strbuf.h"
#include "policy/decide.h"
#include "webhook/review.h"

#include <jansson.h>
#include <stddef.h>

enum handler_endpoint { HANDLER_MUTATE, HANDLER_VALIDATE };

struct inventory;
struct priorities;
struct pvcs;
struct template_board;
struct usage_store;

/*
 * Whether this replica may decide quota now: false with one line in why
 * (size bytes), which the denial quotes ("cannot reserve quota for tenant
 * T now (WHY)").  gpugate serve with --usage-store memory refuses while
 * another replica may be deciding too (daemon/daemon.c).  Any thread.
 */
struct handler_quota_gate {
	bool (*open)(void *ctx, char *why, size_t size);
	void *ctx;
};

struct evaluation {
	/* In, set after evaluation_init(): the cluster's PriorityClasses
	 * (NULL: none known; a pod's spec.priority still is). */
	const struct priority_view *priorities;
	/* In: the cluster's PersistentVolumeClaims (NULL: none known). */
	const struct pvc_view *pvcs;
	/* In: the object a scale subresource request is about (the
	 * Deployment of a deployments/scale), as the API had it (NULL: not
	 * read; owned: evaluation_release() drops it); and when reading it
	 * failed, why. */
	json_t *parent;
	char parent_error[256];
	/* In: may this replica decide quota (NULL: always)? */
	const struct handler_quota_gate *quota_gate;
	/* In: gang start (decide_input's gang_served, self_user,
	 * self_namespace; 0 and NULL: nothing known). */
	unsigned gang_served;
	const char *self_user;
	const char *self_namespace;
	/* In: the claim-template keeper's board (NULL: nothing known). */
	struct template_board *templates;
	struct arena arena;       /* the workload's arrays */
	struct workload wl;
	struct workload old;      /* UPDATE: the object before */
	struct decision dec;
	json_t *mutated;          /* /mutate: the object after the plan, or NULL */
	struct strbuf patch;      /* /mutate: the RFC 6902 patch as JSON text */
	long patch_ops;           /* its operations (0: nothing to patch) */
	bool bad_request;         /* the review's object is malformed */
	char error[512];          /* why, when bad_request */
};

void evaluation_init(struct evaluation *ev);
void evaluation_release(struct evaluation *ev);

/*
 * Evaluates one decoded review.  u is where usage lives (NULL: nothing in
 * use; usage/usage.h); inv the cluster's GPU nodes (NULL: the pool is not
 * known and nothing is said of it; usage/inventory.h).  Returns 0, or -1
 * when out of memory.  ev->bad_request marks a malformed object.
 */
int handler_evaluate(const struct policy *p, const struct review *rv,
		     enum handler_endpoint ep, struct usage_store *u,
		     struct inventory *inv, struct evaluation *ev);

struct holder;
struct metrics;

/*
 * Where the object of a subresource request is read from (API mode): get()
 * returns the object at URL path (the caller's reference), or NULL with
 * one line in err (no answer in time, 404, 403, ...).  Called on the
 * request's thread while the apiserver waits: it must be quick.
 */
struct handler_parents {
	json_t *(*get)(void *ctx, const char *path, char *err, size_t errsz);
	void *ctx;
};

struct handler {
	struct holder *policy;
	struct metrics *metrics;     /* may be NULL */
	struct usage_store *usage;   /* may be NULL: nothing in use */
	/* The cluster's GPU nodes (API mode); NULL: the pool is not known,
	 * and admission says nothing about it. */
	struct inventory *inventory;
	/* The cluster's PriorityClasses (API mode; usage/priorities.h); NULL:
	 * none known. */
	struct priorities *priorities;
	/* The cluster's PersistentVolumeClaims (API mode; usage/pvcs.h);
	 * NULL: none known. */
	struct pvcs *pvcs;
	/* API mode: where a kubectl scale's Deployment, StatefulSet or
	 * ReplicaSet is read, to judge the new replicas against its pod
	 * template.  NULL: a scale is let through unjudged (its pods still
	 * meet the quota one by one). */
	const struct handler_parents *parents;
	/* May this replica decide quota now?  NULL: always. */
	const struct handler_quota_gate *quota_gate;
	/* Gang start (policy/gang.h): what the cluster serves, as the probe
	 * (controllers/gang-probe.h) last found it (NULL: nothing known);
	 * who gpugate is to the apiserver (its username, NULL: not known)
	 * and its namespace: only gpugate takes its gang gate off a pod. */
	const _Atomic unsigned *gang_served;
	const char *self_user;
	const char *self_namespace;
	/* What the claim-template keeper found (API mode); NULL: nothing
	 * known, no DRA class is denied for it. */
	struct template_board *templates;
	/* Build the whole review, even the parts no rule reads
	 * (review_decode_all()): for tests that compare the two. */
	bool read_all;
};

struct handler_reply {
	int status;                  /* HTTP status */
	char *body;                  /* malloc'd, caller frees */
	size_t len;
	const char *content_type;
};

/* Answers one POST to /mutate or /validate.  Always fills out. */
void handler_admit(struct handler *h, enum handler_endpoint ep,
		   const char *body, size_t len, struct handler_reply *out);

struct http_request;
struct http_reply;

/*
 * handler_admit() as route callbacks (http/server.h, http_handler_fn) for
 * POST /mutate and POST /validate, routes with HTTP_ROUTE_JSON; ctx is the
 * struct handler.
 */
void handler_route_mutate(void *ctx, const struct http_request *req,
			  struct http_reply *out);
void handler_route_validate(void *ctx, const struct http_request *req,
			    struct http_reply *out);

#endif
