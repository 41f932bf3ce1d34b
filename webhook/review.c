#include "webhook/review.h"

#include "base/base64.h"

#include "base/strbuf.h"
#include "base/text.h"
#include "codec/jget.h"
#include "codec/jsonfast.h"
#include "codec/jsonout.h"
#include "policy/kinds.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sanity caps on what the apiserver can send (its own limits are lower). */
#define MAX_UID_LEN 128
#define MAX_WARNING_LEN 256

static const char *str_or_empty(const json_t *obj, const char *key)
{
	const char *s = json_string_value(jget(obj, key));

	return s ? s : "";
}

static int fail(char *err, size_t errsz, const char *msg)
{
	snprintf(err, errsz, "%s", msg);
	return -1;
}

/* The table's row of request.kind (group/version/kind), or NULL. */
static const struct kind_def *kind_of(const json_t *gvk)
{
	return kinds_find(str_or_empty(gvk, "group"), str_or_empty(gvk, "version"),
			  str_or_empty(gvk, "kind"));
}

/*
 * What gpugate never reads is checked to be JSON but not built, and left
 * out of its object: the objects' managedFields, about a third of a review,
 * in small objects; the request's userInfo (but its username), options and resource
 * descriptions (request.kind is what says what the object is; a scale
 * subresource request, which needs request.resource to know what it
 * scales, is decoded again whole: it is rare and small); and, in a
 * Pod's spec or a Job's pod template, the container, volume and pod fields
 * that neither the facts nor apply_plan() touch.  Building the latter cost
 * about a tenth of a class Pod's /mutate (docs/benchmarks.md).
 *
 * Nothing here may be read by a rule or written by apply_plan(): the patch
 * is computed against the object as read, in which a skipped member is
 * absent.  The golden cases and the review fuzz harness run every review
 * both ways (review_decode_all() builds everything) and require the same
 * answer, byte for byte.  A rule that comes to need one of these must take
 * it off this list.
 */
#define UNREAD_POD_SPEC(spec)                                                  \
	spec "/containers|initContainers|ephemeralContainers/[]/"                \
	     "image|command|args|workingDir|ports|livenessProbe|"                \
	     "readinessProbe|startupProbe|terminationMessagePath|"               \
	     "terminationMessagePolicy|imagePullPolicy|resizePolicy|stdin|"      \
	     "stdinOnce|tty",                                                    \
	spec "/containers|initContainers|ephemeralContainers/[]/"                \
	     "env/[]/valueFrom",                                                 \
	spec "/volumes/[]/projected|configMap|secret|emptyDir|"                  \
	     "persistentVolumeClaim|csi|ephemeral|nfs|image",                    \
	spec "/dnsPolicy|dnsConfig|"                                             \
	     "automountServiceAccountToken|enableServiceLinks|"                  \
	     "imagePullSecrets|readinessGates|topologySpreadConstraints|"        \
	     "hostAliases|securityContext|hostname|subdomain|os"

static const char *const unread[] = {
	"request/object|oldObject/metadata/managedFields",
	"request/userInfo/uid|groups|extra",
	"request/options|resource|requestKind|requestResource",
	UNREAD_POD_SPEC("request/object|oldObject/spec"),
	UNREAD_POD_SPEC("request/object|oldObject/spec/template/spec"),
	NULL,
};

static struct jsonfast_skip *unread_set;
static pthread_once_t unread_once = PTHREAD_ONCE_INIT;

/* Built once, shared by every thread; NULL (everything is built, which is
 * slower but the same answer) only when memory ran out. */
static void unread_init(void)
{
	char err[256];

	unread_set = jsonfast_skip_new(unread, err, sizeof(err));
}

static int decode(const char *body, size_t len, struct review *rv,
		  const struct jsonfast_skip *skip, char *err, size_t errsz);

int review_decode(const char *body, size_t len, struct review *rv, char *err,
		  size_t errsz)
{
	pthread_once(&unread_once, unread_init);
	if (decode(body, len, rv, unread_set, err, errsz) < 0)
		return -1;
	if (unread_set && strcmp(rv->sub_resource, "scale") == 0) {
		/* Building request.resource costs every review about 1 % of
		 * a class Pod's /mutate; only a Scale needs it. */
		review_release(rv);
		return decode(body, len, rv, NULL, err, errsz);
	}
	return 0;
}

int review_decode_all(const char *body, size_t len, struct review *rv,
		      char *err, size_t errsz)
{
	return decode(body, len, rv, NULL, err, errsz);
}

static int decode(const char *body, size_t len, struct review *rv,
		  const struct jsonfast_skip *skip, char *err, size_t errsz)
{
	char jerr[256];
	const json_t *req, *uid, *gvk, *dry, *op;
	const char *ops;

	memset(rv, 0, sizeof(*rv));
	/*
	 * jsonfast reads what json_loadb(JSON_REJECT_DUPLICATES |
	 * JSON_ALLOW_NUL) would, about three times faster.  Duplicate keys are
	 * refused: they could make two parsers see two different objects.
	 * \u0000 is valid JSON and valid in annotation values: allowed; the
	 * facts read strings up to the first NUL, which is all a Kubernetes
	 * name, label or quantity can hold anyway.
	 */
	rv->root = jsonfast_parse_skip(body, len, skip, jerr, sizeof(jerr));
	if (!rv->root) {
		snprintf(err, errsz, "body is not valid JSON: %s", jerr);
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
	req = jget(rv->root, "request");
	if (!json_is_object(req))
		return fail(err, errsz, "review has no request");
	uid = jget(req, "uid");
	if (!json_is_string(uid) || json_string_length(uid) == 0)
		return fail(err, errsz, "review has no request.uid");
	if (json_string_length(uid) > MAX_UID_LEN)
		return fail(err, errsz, "request.uid is too long");
	rv->uid = json_string_value(uid);

	gvk = jget(req, "kind");
	if (gvk && !json_is_object(gvk))
		return fail(err, errsz, "request.kind is not an object");
	rv->def = kind_of(gvk);
	rv->kind = rv->def ? rv->def->wl : WL_OTHER;
	rv->kind_name = str_or_empty(gvk, "kind");

	op = jget(req, "operation");
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
	{
		const json_t *res = jget(req, "resource");

		rv->resource_group = str_or_empty(res, "group");
		rv->resource = str_or_empty(res, "resource");
	}
	rv->user = json_string_value(jget(jget(req, "userInfo"), "username"));
	dry = jget(req, "dryRun");
	rv->dry_run = dry && json_is_true(dry);
	rv->object = jget(req, "object");
	if (rv->object && json_is_null(rv->object))
		rv->object = NULL;
	rv->old_object = jget(req, "oldObject");
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

static void put_cstring(struct strbuf *sb, const char *s)
{
	jsonout_string(sb, s, strlen(s));
}

/*
 * A bounded line of valid UTF-8: whatever the caller quoted, the apiserver
 * gets a string it accepts (the same cleaning as before: text_clean()).
 */
static void put_clean(struct strbuf *sb, const char *s, size_t max)
{
	char buf[2048];

	if (max > sizeof(buf))
		max = sizeof(buf);
	snprintf(buf, max, "%s", s);
	text_clean(buf);
	put_cstring(sb, buf);
}

/*
 * Written as text, not built as a jansson tree and dumped: the same bytes
 * as json_dumps(JSON_COMPACT) of that tree, at a fraction of the cost (the
 * base64 patch alone is kilobytes that jansson would copy byte by byte).
 */
char *review_encode(const char *uid, const struct review_response *resp,
		    size_t *len)
{
	struct strbuf sb;
	char num[24];
	char *out;

	strbuf_init(&sb, (size_t)64 << 20);
	strbuf_add(&sb, "{\"apiVersion\":\"" REVIEW_API_VERSION
			"\",\"kind\":\"AdmissionReview\",\"response\":{\"uid\":",
		   sizeof("{\"apiVersion\":\"" REVIEW_API_VERSION
			  "\",\"kind\":\"AdmissionReview\",\"response\":{\"uid\":") - 1);
	put_cstring(&sb, uid);
	if (!resp->allowed) {
		strbuf_add(&sb, ",\"allowed\":false,\"status\":{\"code\":", 34);
		snprintf(num, sizeof(num), "%d", resp->code);
		strbuf_add(&sb, num, strlen(num));
		strbuf_add(&sb, ",\"message\":", 11);
		put_clean(&sb, resp->message ? resp->message : "denied", 2048);
		strbuf_add(&sb, ",\"reason\":", 10);
		put_cstring(&sb, resp->code == 400 ? "BadRequest" : "Forbidden");
		strbuf_add(&sb, "}", 1);
	} else {
		strbuf_add(&sb, ",\"allowed\":true", 15);
	}
	if (resp->allowed && resp->patch && resp->patch_len > 0) {
		strbuf_add(&sb, ",\"patch\":\"", 10);
		base64_encode(&sb, resp->patch, resp->patch_len);
		strbuf_add(&sb, "\",\"patchType\":\"JSONPatch\"", 25);
	}
	if (resp->n_warnings) {
		strbuf_add(&sb, ",\"warnings\":[", 13);
		for (size_t i = 0; i < resp->n_warnings; i++) {
			if (i)
				strbuf_add(&sb, ",", 1);
			put_clean(&sb, resp->warnings[i], MAX_WARNING_LEN);
		}
		strbuf_add(&sb, "]", 1);
	}
	strbuf_add(&sb, "}}", 2);
	if (strbuf_failed(&sb)) {
		strbuf_release(&sb);
		return NULL;
	}
	out = strbuf_take(&sb, len);
	return out;
}
