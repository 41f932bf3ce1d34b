#include "webhook/review.h"

#include "policy/text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sanity caps on what the apiserver can send (its own limits are lower). */
#define MAX_UID_LEN 128
#define MAX_WARNING_LEN 256

static const char *str_or_empty(const json_t *obj, const char *key)
{
	const char *s = json_string_value(json_object_get(obj, key));

	return s ? s : "";
}

static int fail(char *err, size_t errsz, const char *msg)
{
	snprintf(err, errsz, "%s", msg);
	return -1;
}

static enum wl_kind kind_of(const json_t *gvk)
{
	const char *group = str_or_empty(gvk, "group");
	const char *version = str_or_empty(gvk, "version");
	const char *kind = str_or_empty(gvk, "kind");

	if (strcmp(group, "") == 0 && strcmp(version, "v1") == 0 &&
	    strcmp(kind, "Pod") == 0)
		return WL_POD;
	if (strcmp(group, "batch") == 0 && strcmp(version, "v1") == 0 &&
	    strcmp(kind, "Job") == 0)
		return WL_JOB;
	return WL_OTHER;
}

int review_decode(const char *body, size_t len, struct review *rv, char *err,
		  size_t errsz)
{
	json_error_t jerr;
	const json_t *req, *uid, *gvk, *dry, *op;
	const char *ops;

	memset(rv, 0, sizeof(*rv));
	/* Duplicate keys could make two parsers see two different objects. */
	/* \u0000 is valid JSON and valid in annotation values: allowed.  The
	 * facts read strings up to the first NUL, which is all a Kubernetes
	 * name, label or quantity can hold anyway. */
	rv->root = json_loadb(body, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL,
			      &jerr);
	if (!rv->root) {
		snprintf(err, errsz, "body is not valid JSON: %s (line %d, column %d)",
			 jerr.text, jerr.line, jerr.column);
		return -1;
	}
	if (!json_is_object(rv->root))
		return fail(err, errsz, "body is not a JSON object");
	if (strcmp(str_or_empty(rv->root, "kind"), "AdmissionReview") != 0)
		return fail(err, errsz, "kind is not AdmissionReview");
	if (strcmp(str_or_empty(rv->root, "apiVersion"), REVIEW_API_VERSION) != 0)
		return fail(err, errsz,
			    "apiVersion is not " REVIEW_API_VERSION
			    " (set admissionReviewVersions: [v1])");
	req = json_object_get(rv->root, "request");
	if (!json_is_object(req))
		return fail(err, errsz, "review has no request");
	uid = json_object_get(req, "uid");
	if (!json_is_string(uid) || json_string_length(uid) == 0)
		return fail(err, errsz, "review has no request.uid");
	if (json_string_length(uid) > MAX_UID_LEN)
		return fail(err, errsz, "request.uid is too long");
	rv->uid = json_string_value(uid);

	gvk = json_object_get(req, "kind");
	if (gvk && !json_is_object(gvk))
		return fail(err, errsz, "request.kind is not an object");
	rv->kind = kind_of(gvk);
	rv->kind_name = str_or_empty(gvk, "kind");

	op = json_object_get(req, "operation");
	ops = json_string_value(op);
	if (!ops)
		return fail(err, errsz, "review has no request.operation");
	if (strcmp(ops, "CREATE") == 0)
		rv->op = WL_CREATE;
	else if (strcmp(ops, "UPDATE") == 0)
		rv->op = WL_UPDATE;
	else if (strcmp(ops, "DELETE") == 0)
		rv->op = WL_DELETE;
	else if (strcmp(ops, "CONNECT") == 0)
		rv->op = WL_CONNECT;
	else
		return fail(err, errsz, "request.operation is not CREATE, UPDATE, "
					"DELETE or CONNECT");

	rv->namespace = str_or_empty(req, "namespace");
	rv->name = str_or_empty(req, "name");
	rv->sub_resource = str_or_empty(req, "subResource");
	dry = json_object_get(req, "dryRun");
	rv->dry_run = dry && json_is_true(dry);
	rv->object = json_object_get(req, "object");
	if (rv->object && json_is_null(rv->object))
		rv->object = NULL;
	rv->old_object = json_object_get(req, "oldObject");
	if (rv->old_object && json_is_null(rv->old_object))
		rv->old_object = NULL;
	if (rv->object && !json_is_object(rv->object))
		return fail(err, errsz, "request.object is not an object");
	return 0;
}

void review_release(struct review *rv)
{
	json_decref(rv->root);
	rv->root = NULL;
}

static const char b64chars[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static char *base64(const char *in, size_t len)
{
	size_t outlen = 4 * ((len + 2) / 3);
	char *out = malloc(outlen + 1);
	size_t o = 0;

	if (!out)
		return NULL;
	for (size_t i = 0; i < len; i += 3) {
		unsigned v = (unsigned char)in[i] << 16;

		if (i + 1 < len)
			v |= (unsigned char)in[i + 1] << 8;
		if (i + 2 < len)
			v |= (unsigned char)in[i + 2];
		out[o++] = b64chars[(v >> 18) & 63];
		out[o++] = b64chars[(v >> 12) & 63];
		out[o++] = i + 1 < len ? b64chars[(v >> 6) & 63] : '=';
		out[o++] = i + 2 < len ? b64chars[v & 63] : '=';
	}
	out[o] = '\0';
	return out;
}

/*
 * A bounded line of valid UTF-8: whatever the caller quoted, jansson (and
 * the apiserver) get a string they accept, so a message never turns into
 * an HTTP 500.
 */
static json_t *clean_string(const char *s, size_t max)
{
	char buf[2048];

	if (max > sizeof(buf))
		max = sizeof(buf);
	snprintf(buf, max, "%s", s);
	text_clean(buf);
	return json_string(buf);
}

static json_t *warning_string(const char *w)
{
	return clean_string(w, MAX_WARNING_LEN);
}

char *review_encode(const char *uid, const struct review_response *resp,
		    size_t *len)
{
	json_t *root = NULL, *r = NULL;
	char *patch = NULL, *b64 = NULL, *out = NULL;
	int failed = 0;

	root = json_object();
	r = json_object();
	if (!root || !r)
		goto out;
	failed |= json_object_set_new(root, "apiVersion",
				      json_string(REVIEW_API_VERSION));
	failed |= json_object_set_new(root, "kind", json_string("AdmissionReview"));
	failed |= json_object_set_new(r, "uid", json_string(uid));
	failed |= json_object_set_new(r, "allowed", json_boolean(resp->allowed));
	if (!resp->allowed) {
		json_t *st = json_object();

		failed |= !st;
		if (st) {
			failed |= json_object_set_new(st, "code",
						      json_integer(resp->code));
			failed |= json_object_set_new(
				st, "message",
				clean_string(resp->message ? resp->message : "denied",
					     2048));
			failed |= json_object_set_new(
				st, "reason",
				json_string(resp->code == 400 ? "BadRequest"
							      : "Forbidden"));
			failed |= json_object_set_new(r, "status", st);
		}
	}
	if (resp->allowed && resp->patch && json_array_size(resp->patch) > 0) {
		patch = json_dumps(resp->patch, JSON_COMPACT);
		b64 = patch ? base64(patch, strlen(patch)) : NULL;
		if (!b64)
			goto out;
		failed |= json_object_set_new(r, "patch", json_string(b64));
		failed |= json_object_set_new(r, "patchType", json_string("JSONPatch"));
	}
	if (resp->n_warnings) {
		json_t *w = json_array();

		failed |= !w;
		for (size_t i = 0; w && i < resp->n_warnings; i++)
			failed |= json_array_append_new(w, warning_string(resp->warnings[i]));
		failed |= json_object_set_new(r, "warnings", w);
	}
	failed |= json_object_set(root, "response", r);
	if (failed)
		goto out;
	out = json_dumps(root, JSON_COMPACT);
	if (out)
		*len = strlen(out);
out:
	json_decref(r);
	json_decref(root);
	free(patch);
	free(b64);
	return out;
}
