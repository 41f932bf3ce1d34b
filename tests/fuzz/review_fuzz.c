/*
 * libFuzzer driver for the request path: webhook/review.c (decode and
 * encode), webhook/facts.c, policy/decide*.c, policy/quota.c, webhook/apply.c
 * and webhook/patch.c, joined by webhook/handler.c as the server joins them.
 *
 * Input: an HTTP request body.  With the example policy
 * (policy/examples/gpu-cluster.yaml, loaded once; run from the repository
 * root) and no quota source (nothing in use):
 *
 *   - handler_admit() at /mutate and /validate: the reply is 400 with
 *     review_decode()'s reason exactly when it refuses the body, else 200
 *     and, byte for byte, the body that handler_evaluate() and
 *     review_encode() give outside handler_admit's jsonmem arena; never
 *     500 (nothing here runs out of memory, so a 500 means a response that
 *     cannot be encoded, e.g. a message that is not UTF-8);
 *   - the same answer, byte for byte, with the whole review built
 *     (handler.read_all), not only what the rules read;
 *   - handler_evaluate() at both endpoints (no quota source, and again
 *     with the usage the input gives in "fuzzUsage", below), with the
 *     checks of
 *     admission_check.h: a denial carries a message; request.object is
 *     not modified; a /mutate patch applies strictly (patch_apply) to
 *     request.object and gives exactly ev.mutated (the round trip);
 *     idempotency (SPEC section 4): the mutated object sent again to
 *     /mutate is admitted with an empty patch, and /validate admits it;
 *   - a scale subresource review, against the parent the input gives
 *     ("fuzzParent", below): answered 200, never a patch.
 *
 * Any violation aborts.  Build and run with tests/fuzz/run.sh, or:
 *
 *   tests/fuzz/run.sh 60                  # all harnesses, 60 s each
 *   build/fuzz/review_fuzz crash-file     # reproduce one input
 */
#include "tests/fuzz/admission_check.h"

#include "base/diag.h"
#include "base/log.h"
#include "codec/jsonmem.h"
#include "policy/policy.h"
#include "usage/backend.h"
#include "webhook/handler.h"
#include "webhook/holder.h"
#include "webhook/patch.h"
#include "webhook/review.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POLICY_PATH "policy/examples/gpu-cluster.yaml"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct policy *pol;     /* owned by holder, never swapped */
static struct holder *holder;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static struct diag d;

	(void)argc;
	(void)argv;
	diag_init(&d);
	if (policy_load(POLICY_PATH, &pol, &d) < 0) {
		fprintf(stderr, "review_fuzz: %s (run from the repository root)\n%s",
			POLICY_PATH, diag_text(&d));
		exit(2);
	}
	holder = holder_new(pol);
	if (!holder)
		fuzz_fail("out of memory");
	/* As `gpugate serve` does: handler_admit() then allocates the
	 * request's JSON from a per-thread arena.  (jsonmem.c leaves it off
	 * when it sees AddressSanitizer; clang 14 does not define
	 * __SANITIZE_ADDRESS__, so with it the arena is on here.) */
	jsonmem_install();
	/* The handler logs every decision on stderr: only errors, unless
	 * REVIEW_FUZZ_LOG is set (then everything, which also runs the
	 * logging of decisions; slow and noisy). */
	log_set_level(getenv("REVIEW_FUZZ_LOG") ? LOG_DEBUG : LOG_ERROR);
	return 0;
}

/*
 * Usage from the input: a review may carry, next to "request", a member
 * "fuzzUsage": {"TENANT": {"FLAVOR": UNITS, ...}, ...} (gpugate ignores
 * members it does not know), read as what the ledger holds; and
 * "fuzzCovered": true, under which a Job's pod is covered by its Job's
 * reservation, as the ledger answers when it holds the Job.  Units are
 * clamped to 0..1e9, what a ledger can hold.
 */
struct fake_usage {
	struct usage_store store; /* first: a usage backend of its own */
	const struct policy *p;
	const json_t *usage;
	bool covered;
};

static int64_t fake_used(const void *ctx, unsigned tenant, unsigned flavor)
{
	const struct fake_usage *u = ctx;
	const struct policy_tenant *t = policy_tenant_at(u->p, tenant);
	const struct policy_flavor *f = policy_flavor_at(u->p, flavor);
	json_int_t n;

	if (!t || !f)
		fuzz_fail("usage asked for a tenant or flavor not in the policy");
	n = json_integer_value(
		json_object_get(json_object_get(u->usage, t->name), f->name));
	return n < 0 ? 0 : n > 1000000000 ? 1000000000 : (int64_t)n;
}

static void fake_decide(struct usage_store *store, const struct policy *p,
			const struct workload *wl, const struct quota_claim *c,
			bool reserve, bool force, struct quota_result *out)
{
	const struct fake_usage *u = (const struct fake_usage *)store;
	struct usage_view view = {.ctx = u, .used = fake_used};

	(void)reserve;
	(void)force;
	quota_decide(p, c->tenant, c->flavor, c->units, c->may_borrow, &view, out);
	if (u->covered && wl->kind == WL_POD && wl->owner_job_uid) {
		out->position = QUOTA_COVERED;
		out->requested = 0;
		out->holder = wl->owner_job;
	}
}

/* Answers decide only: the rest of the seam does nothing (usage/backend.h). */
static const struct usage_backend fake_backend = {
	.name = "fuzz",
	.decide = fake_decide,
};

/*
 * The HTTP answer: what handler_admit() sends (inside its jsonmem scope)
 * must be, byte for byte, the body built here from review_decode(),
 * handler_evaluate() and review_encode() with plain malloc().
 */
static void check_admit(enum handler_endpoint ep, const uint8_t *data,
			size_t size, const struct review *rv, bool decodes,
			const char *err)
{
	struct handler h = {.policy = holder, .metrics = NULL, .usage = NULL};
	struct handler_reply out;
	struct evaluation ev;
	char *want;
	size_t len;

	handler_admit(&h, ep, (const char *)data, size, &out);
	if (!out.body)
		fuzz_fail("reply without a body");
	if (!decodes) {
		char text[600];

		snprintf(text, sizeof(text), "gpugate: bad request: %s\n", err);
		if (out.status != 400 || strcmp(out.body, text) != 0)
			fuzz_fail("an undecodable review is not answered 400 with "
				  "its reason");
		free(out.body);
		return;
	}
	if (out.status != 200) {
		fprintf(stderr, "reply: HTTP %d: %.*s\n", out.status,
			(int)out.len, out.body);
		fuzz_fail("review answered with a status other than 200 (500: "
			  "the response could not be encoded)");
	}
	evaluation_init(&ev);
	if (handler_evaluate(pol, rv, ep, NULL, NULL, &ev) < 0)
		fuzz_fail("out of memory");
	want = encode_like_admit(rv, &ev, &len);
	if (!want || len != out.len || memcmp(want, out.body, len) != 0) {
		fprintf(stderr, "reply: %.*s\nwant:  %s\n", (int)out.len,
			out.body, want ? want : "(none)");
		fuzz_fail("handler_admit() answers other than handler_evaluate() "
			  "and review_encode()");
	}
	free(want);
	evaluation_release(&ev);
	free(out.body);
}

/*
 * What review.c leaves unread changes no answer: with the whole review built
 * (handler.read_all) the answer is the same, byte for byte.  The one
 * allowed difference: a key given twice inside a part left unread is
 * refused only by the reader that builds it (the other reads on, and may
 * answer or refuse a later error).
 */
static void check_read_all(enum handler_endpoint ep, const uint8_t *data,
			   size_t size)
{
	struct handler h = {.policy = holder, .metrics = NULL, .usage = NULL};
	struct handler_reply served, whole;

	handler_admit(&h, ep, (const char *)data, size, &served);
	h.read_all = true;
	handler_admit(&h, ep, (const char *)data, size, &whole);
	if (!served.body || !whole.body)
		fuzz_fail("reply without a body");
	if (whole.status == 400 && strstr(whole.body, "duplicate object key"))
		goto out; /* the served answer may be anything: a later error */
	if (served.status != whole.status || served.len != whole.len ||
	    memcmp(served.body, whole.body, served.len) != 0) {
		fprintf(stderr, "served:    HTTP %d: %.*s\nread all: HTTP %d: %.*s\n",
			served.status, (int)served.len, served.body, whole.status,
			(int)whole.len, whole.body);
		fuzz_fail("the answer depends on what review.c leaves unread");
	}
out:
	free(served.body);
	free(whole.body);
}

/*
 * kubectl scale: a Scale review is judged against its parent, which the
 * server reads from the API.  Here the parent is what the input gives in
 * "fuzzParent" (next to "request"; absent: the read fails, as a 403 or a
 * timeout would), so the parent is as hostile as the review.  Whatever it
 * is: answered 200 (400 only for a review that does not decode, checked
 * above), never a patch (a Scale is not mutated), the same answer with the
 * whole review built, and not a leak (ASan).
 */
static const json_t *fuzz_parent;

static json_t *fuzz_parent_get(void *ctx, const char *path, char *err, size_t errsz)
{
	(void)ctx;
	if (!path || path[0] != '/')
		fuzz_fail("the parent is read at a path that is not absolute");
	if (!fuzz_parent) {
		snprintf(err, errsz, "GET %s: 403 Forbidden: fuzz", path);
		return NULL;
	}
	return json_deep_copy(fuzz_parent);
}

static void check_scale(const uint8_t *data, size_t size)
{
	static const struct handler_parents src = {fuzz_parent_get, NULL};
	struct handler h = {.policy = holder, .parents = &src};
	struct handler_reply out[2];

	for (int ep = HANDLER_MUTATE; ep <= HANDLER_VALIDATE; ep++) {
		for (int all = 0; all < 2; all++) {
			h.read_all = all;
			handler_admit(&h, ep, (const char *)data, size, &out[all]);
			if (!out[all].body || out[all].status != 200)
				fuzz_fail("a scale review answered other than 200");
			if (strstr(out[all].body, "\"patch\""))
				fuzz_fail("a scale review answered with a patch");
		}
		if (out[0].len != out[1].len || memcmp(out[0].body, out[1].body, out[0].len))
			fuzz_fail("a scale's answer depends on what review.c leaves unread");
		free(out[0].body);
		free(out[1].body);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct review rv;
	char err[400];
	bool decodes;

	decodes = review_decode((const char *)data, size, &rv, err,
				sizeof(err)) == 0;
	if (!decodes && !err[0])
		fuzz_fail("refusal without a reason");
	check_admit(HANDLER_MUTATE, data, size, &rv, decodes, err);
	check_admit(HANDLER_VALIDATE, data, size, &rv, decodes, err);
	check_read_all(HANDLER_MUTATE, data, size);
	check_read_all(HANDLER_VALIDATE, data, size);
	if (decodes) {
		struct fake_usage u = {
			.store = {.be = &fake_backend},
			.p = pol,
			.usage = json_object_get(rv.root, "fuzzUsage"),
			.covered = json_is_true(json_object_get(rv.root, "fuzzCovered")),
		};
		check_review(pol, &rv, NULL);
		if (u.usage || u.covered)
			check_review(pol, &rv, &u.store);
		if (strcmp(rv.sub_resource, "scale") == 0) {
			fuzz_parent = json_object_get(rv.root, "fuzzParent");
			check_scale(data, size);
			fuzz_parent = NULL;
		}
	}
	review_release(&rv);
	return 0;
}
