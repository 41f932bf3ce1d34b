/*
 * admission_check: the invariants of one decoded AdmissionReview under one
 * policy, shared by review_fuzz.c and policy_fuzz.c.  Each violation calls
 * fuzz_fail(), which names it and aborts.
 *
 *   - handler_evaluate() at /mutate and /validate with the given quota
 *     source (NULL: nothing in use);
 *   - the response review_encode() builds for it exists (it fails only on
 *     out of memory, or on a message that is not valid UTF-8, which the
 *     server then answers with a 500);
 *   - a denial has a message, a bad request a reason;
 *   - request.object is left untouched;
 *   - a /mutate patch applies strictly (patch_apply) to request.object and
 *     gives exactly ev.mutated;
 *   - SPEC section 4, mutation is idempotent: the mutated object sent to
 *     /mutate again is admitted with no patch, and /validate admits it.
 */
#ifndef GPUGATE_FUZZ_ADMISSION_CHECK_H
#define GPUGATE_FUZZ_ADMISSION_CHECK_H

#include "base/diag.h"
#include "policy/policy.h"
#include "webhook/handler.h"
#include "webhook/patch.h"
#include "webhook/review.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fuzz_fail(const char *what)
{
	fprintf(stderr, "fuzz invariant violated: %s\n", what);
	abort();
}

/*
 * The response body handler_admit() would send for this evaluation (the
 * caller frees it), or NULL when review_encode() fails.
 */
static char *encode_like_admit(const struct review *rv,
			       const struct evaluation *ev, size_t *len)
{
	const char *warnings[DECIDE_MAX_WARNINGS];
	struct review_response resp = {0};
	char msg[600];

	if (ev->bad_request) {
		resp.allowed = false;
		resp.code = 400;
		snprintf(msg, sizeof(msg), "gpugate: %s", ev->error);
		resp.message = msg;
	} else {
		resp.allowed = ev->dec.allowed;
		resp.code = ev->dec.code;
		resp.message = ev->dec.message;
		for (size_t i = 0; i < ev->dec.n_warnings; i++)
			warnings[i] = ev->dec.warnings[i];
		resp.warnings = warnings;
		resp.n_warnings = ev->dec.n_warnings;
		if (ev->patch_ops > 0) {
			resp.patch = ev->patch.buf;
			resp.patch_len = ev->patch.len;
		}
	}
	return review_encode(rv->uid, &resp, len);
}

/*
 * The patch text the server sends is JSON, has as many operations as it
 * says, and is byte for byte json_dumps() of patch_diff(): the text writer
 * and the jansson builder walk the same diff.  Returns the parsed patch.
 */
static json_t *check_patch_text(const json_t *from, const json_t *to,
				const struct evaluation *ev)
{
	json_error_t jerr;
	json_t *parsed = json_loadb(ev->patch.buf, ev->patch.len, 0, &jerr);
	json_t *built = patch_diff(from, to);
	char *dumped = built ? json_dumps(built, JSON_COMPACT) : NULL;

	if (!built || !dumped)
		fuzz_fail("out of memory");
	if (!parsed) {
		fprintf(stderr, "patch: %s\nerror: %s\n", ev->patch.buf, jerr.text);
		fuzz_fail("the patch text is not JSON");
	}
	if (json_array_size(parsed) != (size_t)ev->patch_ops)
		fuzz_fail("the patch text has another number of operations");
	if (strcmp(dumped, ev->patch.buf) != 0) {
		fprintf(stderr, "text:  %s\njson:  %s\n", ev->patch.buf, dumped);
		fuzz_fail("patch_diff_write and patch_diff disagree");
	}
	free(dumped);
	json_decref(built);
	return parsed;
}

/* The response for this evaluation can be encoded. */
static void check_encodes(const struct review *rv, const struct evaluation *ev)
{
	size_t len;
	char *out = encode_like_admit(rv, ev, &len);

	if (!out) {
		fprintf(stderr, "message: %s\n",
			ev->bad_request ? ev->error : ev->dec.message);
		fuzz_fail("the response cannot be encoded (HTTP 500)");
	}
	free(out);
}

static void check_mutated_again(const struct policy *p, const struct review *rv,
				struct usage_store *q, json_t *mutated)
{
	struct review again = *rv;
	struct evaluation ev;

	again.object = mutated;
	evaluation_init(&ev);
	if (handler_evaluate(p, &again, HANDLER_MUTATE, q, NULL, &ev) < 0)
		fuzz_fail("out of memory");
	if (ev.bad_request) {
		fprintf(stderr, "error: %s\n", ev.error);
		fuzz_fail("the mutated object is a bad request at /mutate");
	}
	if (!ev.dec.allowed) {
		fprintf(stderr, "message: %s\n", ev.dec.message);
		fuzz_fail("the mutated object is denied at /mutate");
	}
	if (ev.patch_ops != 0) {
		fprintf(stderr, "second patch: %s\n", ev.patch.buf);
		fuzz_fail("mutation is not idempotent: /mutate patches its own "
			  "result again");
	}
	evaluation_release(&ev);

	evaluation_init(&ev);
	if (handler_evaluate(p, &again, HANDLER_VALIDATE, q, NULL, &ev) < 0)
		fuzz_fail("out of memory");
	if (ev.bad_request) {
		fprintf(stderr, "error: %s\n", ev.error);
		fuzz_fail("the mutated object is a bad request at /validate");
	}
	if (!ev.dec.allowed) {
		fprintf(stderr, "message: %s\n", ev.dec.message);
		fuzz_fail("the mutated object is denied at /validate");
	}
	check_encodes(&again, &ev);
	evaluation_release(&ev);
}

static void check_endpoint(const struct policy *p, const struct review *rv,
			   struct usage_store *q, enum handler_endpoint ep)
{
	json_t *before = rv->object ? json_deep_copy(rv->object) : NULL;
	struct evaluation ev;
	struct diag d;
	json_t *got, *patch;

	if (rv->object && !before)
		fuzz_fail("out of memory");
	evaluation_init(&ev);
	if (handler_evaluate(p, rv, ep, q, NULL, &ev) < 0)
		fuzz_fail("out of memory");
#ifdef FUZZ_TRACE /* -DFUZZ_TRACE: one line per evaluation on stderr */
	fprintf(stderr, "trace: %s quota=%s allowed=%d rule=%s patch=%zu %s%s\n",
		ep == HANDLER_MUTATE ? "mutate" : "validate",
		!q ? "none" : ev.dec.has_quota
			? quota_position_name(ev.dec.quota.position) : "-",
		ev.dec.allowed, ev.dec.rule ? ev.dec.rule : "-",
		ev.patch_ops > 0 ? (size_t)ev.patch_ops : 0, ev.bad_request ? ev.error : "",
		ev.dec.message);
#endif
	if (before && !json_equal(before, rv->object))
		fuzz_fail("handler_evaluate modified request.object");
	if (!ev.bad_request && !ev.dec.allowed && !ev.dec.message[0])
		fuzz_fail("a denial without a message");
	if (ev.bad_request && !ev.error[0])
		fuzz_fail("a bad request without a reason");
	check_encodes(rv, &ev);
	if (ev.patch.len) {
		if (ep != HANDLER_MUTATE || !ev.mutated || !rv->object ||
		    ev.bad_request || !ev.dec.allowed)
			fuzz_fail("a patch where none is expected");
		patch = check_patch_text(rv->object, ev.mutated, &ev);
		diag_init(&d);
		got = patch_apply(rv->object, patch, &d);
		json_decref(patch);
		if (!got) {
			fprintf(stderr, "%s", diag_text(&d));
			fuzz_fail("the patch does not apply to request.object");
		}
		if (!json_equal(got, ev.mutated))
			fuzz_fail("the patch does not give the mutated object");
		json_decref(got);
		check_mutated_again(p, rv, q, ev.mutated);
	}
	evaluation_release(&ev);
	json_decref(before);
}

/*
 * Both endpoints, as the apiserver calls them.  q is the usage store (NULL:
 * nothing in use); it must answer the same for the same request, as a
 * ledger that nobody else changes does.
 */
static void check_review(const struct policy *p, const struct review *rv,
			 struct usage_store *q)
{
	check_endpoint(p, rv, q, HANDLER_MUTATE);
	check_endpoint(p, rv, q, HANDLER_VALIDATE);
}

#endif
