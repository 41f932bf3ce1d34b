/*
 * libFuzzer driver for webhook/patch.c: the diff round trip and the strict
 * applier on hostile patches.
 *
 * Input: two JSON texts A and B separated by the first NUL byte.  Without a
 * NUL, the whole input is B and A is a fixed Pod.  When both parse:
 *
 *   - apply(A, diff(A, B)) must succeed and be json_equal to B, and the
 *     same the other way round; diff(A, A) must be empty; the diff may use
 *     add, remove and replace only; A must come out untouched;
 *   - B is also applied to A as a patch: any result, but no crash, no leak,
 *     and exactly one message when it fails.
 *
 * The whole input is also applied as a patch to the fixed Pod.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -I. webhook/patch.c \
 *       base/diag.c tests/fuzz/patch_fuzz.c -ljansson -o /tmp/pf
 *   /tmp/pf -max_total_time=300 /tmp/pf-corpus tests/fuzz/corpus/patch
 *
 * Reproducers of anything it found live in tests/unit/webhook/patch_test.c.
 */
#include "base/diag.h"
#include "webhook/patch.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char pod[] =
	"{\"apiVersion\":\"v1\",\"kind\":\"Pod\","
	"\"metadata\":{\"name\":\"train\",\"labels\":{\"gpugate.io/class\":"
	"\"a100\",\"a~b\":\"c\"},\"annotations\":{}},"
	"\"spec\":{\"containers\":[{\"name\":\"main\",\"env\":[{\"name\":\"A\","
	"\"value\":\"1\"}],\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"8\"}}},"
	"{\"name\":\"side\"}],\"tolerations\":[],\"priority\":0,\"x\":[[1,2],[]]}}";

static json_t *parse(const uint8_t *p, size_t n)
{
	return json_loadb((const char *)p, n, JSON_DECODE_ANY | JSON_ALLOW_NUL,
			  NULL);
}

static int only_add_remove_replace(const json_t *patch)
{
	for (size_t i = 0; i < json_array_size(patch); i++) {
		const char *op = json_string_value(
			json_object_get(json_array_get(patch, i), "op"));

		if (!op || (strcmp(op, "add") && strcmp(op, "remove") &&
			    strcmp(op, "replace")))
			return 0;
	}
	return 1;
}

/* Any outcome is fine, but a failure says exactly one thing. */
static void apply_any(const json_t *doc, const json_t *patch)
{
	struct diag d;
	json_t *got;

	diag_init(&d);
	got = patch_apply(doc, patch, &d);
	if (!got && diag_count(&d) != 1)
		abort();
	if (got && diag_count(&d) != 0)
		abort();
	json_decref(got);
}

static void round_trip(const json_t *a, const json_t *b)
{
	json_t *before = json_deep_copy(a);
	json_t *p = patch_diff(a, b), *self = patch_diff(a, a), *got;
	struct diag d;

	if (!before || !p || !self)
		abort(); /* out of memory is not expected here */
	if (json_array_size(self) != 0 || !only_add_remove_replace(p))
		abort();
	diag_init(&d);
	got = patch_apply(a, p, &d);
	if (!got || !json_equal(got, b) || !json_equal(a, before))
		abort();
	json_decref(got);
	json_decref(self);
	json_decref(p);
	json_decref(before);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, '\0', size);
	json_t *fixed = json_loads(pod, 0, NULL);
	json_t *whole = parse(data, size), *a = NULL, *b = NULL;

	if (!fixed)
		abort();
	if (whole)
		apply_any(fixed, whole);
	if (nul) {
		a = parse(data, (size_t)(nul - data));
		b = parse(nul + 1, size - (size_t)(nul - data) - 1);
	} else {
		a = json_incref(fixed);
		b = json_incref(whole);
	}
	if (a && b) {
		round_trip(a, b);
		round_trip(b, a);
		apply_any(a, b);
	}
	json_decref(b);
	json_decref(a);
	json_decref(whole);
	json_decref(fixed);
	return 0;
}
