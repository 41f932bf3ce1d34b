/*
 * Golden cases (tests/golden/NAME/): a request, the policy, the expected
 * response, as data.  For each directory, found at run time:
 *
 *   review.json     an AdmissionReview as the kube-apiserver sends it
 *   endpoint        "mutate" or "validate"
 *   policy.yaml     optional; else policy/examples/gpu-cluster.yaml
 *   expected.json   the response review, with response.patch decoded from
 *                   base64 into the JSON Patch array it carries
 *
 * The case goes through handler_admit() (no metrics, no quota source: the
 * ledger is empty), once as served and once with the whole review built
 * (handler.read_all); the two answers must be the same bytes, and the
 * decoded response must equal expected.json
 * (json_equal: key order does not matter, array order does).  A reply that
 * is not JSON is compared as {"httpStatus": N, "body": "..."}.
 *
 * GOLDEN_UPDATE=1 rewrites expected.json from what the code answers now;
 * the diff must then be read and judged (tests/golden/README.md).
 *
 * Runs from the repository root, like the rest of the unit tests.
 */
#include "base/base64.h"
#include "base/diag.h"
#include "base/log.h"
#include "policy/policy.h"
#include "webhook/handler.h"
#include "webhook/holder.h"

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define GOLDEN_DIR "tests/golden"
#define DEFAULT_POLICY "policy/examples/gpu-cluster.yaml"
#define MAX_CASES 512
#define MIN_CASES 12

struct golden_case {
	char name[200];
};

static bool is_dir(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool is_file(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct golden_case *)a)->name,
		      ((const struct golden_case *)b)->name);
}

/* Case directories (those holding a review.json), sorted; -1 when the
 * golden directory cannot be read. */
static int scan(struct golden_case *out, size_t max, size_t *n)
{
	DIR *d = opendir(GOLDEN_DIR);
	struct dirent *e;
	char path[512];

	*n = 0;
	if (!d)
		return -1;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.' || strlen(e->d_name) >= sizeof(out->name))
			continue;
		snprintf(path, sizeof(path), GOLDEN_DIR "/%s/review.json", e->d_name);
		if (!is_file(path) || *n >= max)
			continue;
		snprintf(out[*n].name, sizeof(out->name), "%s", e->d_name);
		(*n)++;
	}
	closedir(d);
	qsort(out, *n, sizeof(*out), by_name);
	return 0;
}

static void free_cases(struct criterion_test_params *crp)
{
	cr_free(crp->params);
}

ParameterizedTestParameters(golden, cases)
{
	struct golden_case found[MAX_CASES];
	struct golden_case *cases;
	size_t n = 0;

	if (scan(found, MAX_CASES, &n) < 0 || n == 0)
		return cr_make_param_array(struct golden_case, NULL, 0, NULL);
	cases = cr_malloc(n * sizeof(*cases));
	if (!cases)
		return cr_make_param_array(struct golden_case, NULL, 0, NULL);
	memcpy(cases, found, n * sizeof(*cases));
	return cr_make_param_array(struct golden_case, cases, n, free_cases);
}

/* A test that cannot fail is a defect: an empty or unreadable golden
 * directory must not pass silently. */
Test(golden, directory_has_cases)
{
	struct golden_case found[MAX_CASES];
	size_t n = 0;

	cr_assert_eq(scan(found, MAX_CASES, &n), 0,
		     "cannot read " GOLDEN_DIR " (run from the repository root): %s",
		     strerror(errno));
	cr_assert_geq(n, MIN_CASES, "only %zu golden cases in " GOLDEN_DIR, n);
}

/* ---- helpers ------------------------------------------------------------ */

static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long size;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) >= 0 &&
	    fseek(f, 0, SEEK_SET) == 0) {
		buf = malloc((size_t)size + 1);
		if (buf && fread(buf, 1, (size_t)size, f) != (size_t)size) {
			free(buf);
			buf = NULL;
		}
		if (buf) {
			buf[size] = '\0';
			*len = (size_t)size;
		}
	}
	fclose(f);
	return buf;
}

/* The first word of the endpoint file. */
static int read_endpoint(const char *dir, enum handler_endpoint *ep)
{
	char path[512], word[32] = "";
	FILE *f;

	snprintf(path, sizeof(path), "%s/endpoint", dir);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%31s", word) != 1)
		word[0] = '\0';
	fclose(f);
	if (strcmp(word, "mutate") == 0)
		*ep = HANDLER_MUTATE;
	else if (strcmp(word, "validate") == 0)
		*ep = HANDLER_VALIDATE;
	else
		return -1;
	return 0;
}

/* The reply as the comparable JSON document (new reference); NULL with a
 * reason in why. */
static json_t *decode_reply(const struct handler_reply *r, char *why, size_t whysz)
{
	json_error_t err;
	json_t *doc, *resp, *patch_str;

	if (r->status != 200 || !r->content_type ||
	    strncmp(r->content_type, "application/json", 16) != 0)
		return json_pack("{s:i,s:s%}", "httpStatus", r->status, "body",
				 r->body ? r->body : "", r->body ? r->len : 0);
	doc = json_loadb(r->body, r->len, JSON_REJECT_DUPLICATES, &err);
	if (!doc) {
		snprintf(why, whysz, "the response is not JSON: %s", err.text);
		return NULL;
	}
	resp = json_object_get(doc, "response");
	patch_str = json_object_get(resp, "patch");
	if (patch_str) {
		size_t len = 0;
		char *raw = NULL;

		if (json_is_string(patch_str))
			base64_decode(json_string_value(patch_str),
				      json_string_length(patch_str), BASE64_STRICT,
				      &raw, &len);
		json_t *patch;

		if (!raw) {
			snprintf(why, whysz, "response.patch is not base64");
			json_decref(doc);
			return NULL;
		}
		patch = json_loadb(raw, len, JSON_REJECT_DUPLICATES, &err);
		free(raw);
		if (!json_is_array(patch)) {
			snprintf(why, whysz, "response.patch is not a JSON array: %s",
				 patch ? "other JSON" : err.text);
			json_decref(patch);
			json_decref(doc);
			return NULL;
		}
		json_object_set_new(resp, "patch", patch);
	}
	return doc;
}

static int write_json(const char *path, const json_t *v)
{
	char *text = json_dumps(v, JSON_INDENT(2) | JSON_ENSURE_ASCII);
	FILE *f;
	int rc = -1;

	if (!text)
		return -1;
	f = fopen(path, "w");
	if (f) {
		rc = fputs(text, f) < 0 || fputc('\n', f) == EOF ? -1 : 0;
		if (fclose(f) != 0)
			rc = -1;
	}
	free(text);
	return rc;
}

/* ---- the case ----------------------------------------------------------- */

ParameterizedTest(struct golden_case *c, golden, cases)
{
	char dir[256], path[512], why[300] = "";
	struct policy *p = NULL;
	struct holder *holder;
	struct diag d;
	enum handler_endpoint ep;
	struct handler h = {0};
	struct handler_reply reply, whole;
	json_t *got, *want;
	json_error_t err;
	char *body;
	size_t len = 0;
	const char *update = getenv("GOLDEN_UPDATE");

	log_set_level(LOG_ERROR);
	snprintf(dir, sizeof(dir), GOLDEN_DIR "/%s", c->name);
	cr_assert(is_dir(dir), "%s: not a directory", dir);

	snprintf(path, sizeof(path), "%s/policy.yaml", dir);
	if (!is_file(path))
		snprintf(path, sizeof(path), "%s", DEFAULT_POLICY);
	diag_init(&d);
	cr_assert_eq(policy_load(path, &p, &d), 0, "%s: policy %s: %s", c->name, path,
		     diag_text(&d));
	holder = holder_new(p);
	cr_assert_not_null(holder);

	cr_assert_eq(read_endpoint(dir, &ep), 0,
		     "%s: endpoint must hold the word mutate or validate", c->name);
	snprintf(path, sizeof(path), "%s/review.json", dir);
	body = read_file(path, &len);
	cr_assert_not_null(body, "%s: cannot read %s", c->name, path);

	h.policy = holder;
	h.metrics = NULL;
	h.usage = NULL;
	/* The parts of a review no rule reads are not built (review.c): with
	 * the whole review built, the answer must be the same, byte for
	 * byte.  A rule that reads a left-out field differs here. */
	h.read_all = true;
	handler_admit(&h, ep, body, len, &whole);
	cr_assert_not_null(whole.body, "%s: no reply body", c->name);
	h.read_all = false;
	handler_admit(&h, ep, body, len, &reply);
	cr_assert_not_null(reply.body, "%s: no reply body", c->name);
	cr_assert(reply.status == whole.status && reply.len == whole.len &&
			  memcmp(reply.body, whole.body, reply.len) == 0,
		  "%s: the answer depends on what review.c leaves unread:\n"
		  "read all:  %d %.*s\nas served: %d %.*s",
		  c->name, whole.status, (int)whole.len, whole.body, reply.status,
		  (int)reply.len, reply.body);
	free(whole.body);
	got = decode_reply(&reply, why, sizeof(why));
	cr_assert_not_null(got, "%s: %s\n%.*s", c->name, why, (int)reply.len, reply.body);

	snprintf(path, sizeof(path), "%s/expected.json", dir);
	if (update && strcmp(update, "1") == 0) {
		cr_assert_eq(write_json(path, got), 0, "%s: cannot write %s", c->name, path);
		cr_log_info("golden %s: rewrote %s", c->name, path);
	} else {
		want = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
		if (!want)
			cr_assert_fail("%s: %s: %s (line %d); GOLDEN_UPDATE=1 writes it",
				       c->name, path, err.text, err.line);
		if (!json_equal(got, want)) {
			char *g = json_dumps(got, JSON_INDENT(2));
			char *w = json_dumps(want, JSON_INDENT(2));

			fprintf(stderr,
				"\n==== golden %s: response differs from expected.json\n"
				"---- got:\n%s\n---- expected (%s):\n%s\n====\n",
				c->name, g ? g : "?", path, w ? w : "?");
			free(g);
			free(w);
			json_decref(want);
			cr_assert_fail("golden %s: the response differs from %s (both "
				       "printed on stderr)",
				       c->name, path);
		}
		json_decref(want);
	}
	json_decref(got);
	free(reply.body);
	free(body);
	holder_free(holder);
}
