/*
 * review: the AdmissionReview admission.k8s.io/v1 wire format.
 *
 * review_decode() parses a request body; review_encode() builds the
 * response the kube-apiserver accepts: apiVersion and kind echoed, the
 * request uid echoed, a JSONPatch (base64) only when there is one, a status
 * with code and message on denial, and one-line warnings.
 */
#ifndef GPUGATE_REVIEW_H
#define GPUGATE_REVIEW_H

#include "policy/workload.h"

struct kind_def;

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define REVIEW_API_VERSION "admission.k8s.io/v1"

struct review {
	json_t *root;            /* owned: the whole parsed body */
	const char *uid;         /* request.uid */
	enum wl_kind kind;       /* from request.kind (group/version/kind) */
	/* request.kind's row of the table (policy/kinds.h); NULL for a kind
	 * gpugate does not admit (kind is then WL_OTHER). */
	const struct kind_def *def;
	const char *kind_name;   /* request.kind.kind, "" when absent */
	enum wl_op op;
	const char *namespace;   /* request.namespace, "" when absent */
	const char *name;        /* request.name, "" when absent */
	const char *sub_resource; /* "" when absent */
	/* request.resource: its group ("" for the core group) and resource
	 * ("deployments"); "" when absent.  review_decode() reads it for a
	 * scale subresource request only ("" for every other). */
	const char *resource_group;
	const char *resource;
	bool dry_run;
	const char *user;        /* request.userInfo.username, NULL when absent */
	json_t *object;          /* borrowed from root; NULL when absent */
	json_t *old_object;      /* borrowed from root; NULL when absent */
};

/*
 * Parses body.  Returns 0; or -1 when the body is not an AdmissionReview
 * this server can answer (not JSON, not v1, no request.uid, ...) with a
 * one-line reason in err: the caller answers 400 with it.
 */
int review_decode(const char *body, size_t len, struct review *rv, char *err,
		  size_t errsz);

/*
 * review_decode() leaves out (reads as null) the parts of the objects no
 * rule reads (review.c lists them).  This one builds the whole body: for
 * tests that hold the two to the same answers.
 */
int review_decode_all(const char *body, size_t len, struct review *rv,
		      char *err, size_t errsz);

void review_release(struct review *rv);

struct review_response {
	bool allowed;
	int code;                  /* status.code when denied */
	const char *message;       /* status.message when denied */
	const char *const *warnings;
	size_t n_warnings;
	/* The JSON Patch as JSON text (an array of at least one operation),
	 * or NULL for none.  review_encode() sends it base64-encoded. */
	const char *patch;
	size_t patch_len;
};

/*
 * The response body (caller frees).  uid echoes rv->uid.  A patch is sent
 * only when it has an operation.  Returns NULL when out of memory.
 */
char *review_encode(const char *uid, const struct review_response *resp,
		    size_t *len);

#endif
