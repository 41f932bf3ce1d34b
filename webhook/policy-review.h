/*
 * POST /validate-policy: the policy ConfigMap, checked where it is applied.
 *
 * The webhook policy.gpugate.io (manifests/webhooks.yaml) sends the
 * creation and every update of gpugate's policy ConfigMap here.  Its key
 * policy.yaml is checked exactly as `gpugate check` checks a file: an
 * invalid policy is refused at `kubectl apply` or `helm upgrade` with
 * every error, "policy.yaml:LINE: message" (docs/policy.md, "Every error");
 * warnings become admission warnings.  Nothing is loaded: the running
 * replicas take the new policy from their volume as before.
 */
#ifndef GPUGATE_POLICY_REVIEW_H
#define GPUGATE_POLICY_REVIEW_H

#include "http/server.h"

#include <stdbool.h>
#include <stddef.h>

/* The ConfigMap key gpugate reads its policy from. */
#define POLICY_REVIEW_KEY "policy.yaml"

/* What review_encode() sends of a message. */
#define POLICY_REVIEW_MESSAGE_LEN 2048
#define POLICY_REVIEW_MAX_WARNINGS 6
#define POLICY_REVIEW_WARNING_LEN 512

struct policy_verdict {
	bool allowed;
	char message[POLICY_REVIEW_MESSAGE_LEN]; /* why not, when refused */
	char warnings[POLICY_REVIEW_MAX_WARNINGS][POLICY_REVIEW_WARNING_LEN];
	size_t n_warnings;
	unsigned errors;
};

/*
 * The verdict on the object of a CREATE or UPDATE review (a ConfigMap, as
 * JSON; NULL: nothing to judge, allowed).  Pure: no I/O, any thread.
 */
void policy_review_judge(const void *configmap_json, struct policy_verdict *v);

/* The route (ctx unused). */
void policy_review_route(void *ctx, const struct http_request *req,
			 struct http_reply *out);

#endif
