/*
 * Reproducers of what the fuzz harnesses (tests/fuzz/) found in webhook/:
 * the request path, as the server answers it (handler_admit, the example
 * policy, no usage store).  The input files are
 * kept in the fuzz corpus too (tests/fuzz/corpus/NAME/crash-*), so that
 * tests/fuzz/run.sh replays them.
 */
#include "base/diag.h"
#include "base/log.h"
#include "codec/jsonmem.h"
#include "policy/policy.h"
#include "webhook/handler.h"
#include "webhook/holder.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define POLICY "policy/examples/gpu-cluster.yaml"

/* Sends body to ep and returns the decoded response review (or fails). */
static json_t *admit(enum handler_endpoint ep, const char *body)
{
	struct policy *p = NULL;
	struct holder *holder;
	struct handler h = {0};
	struct handler_reply reply;
	struct diag d;
	json_t *resp;

	log_set_level(LOG_ERROR);
	diag_init(&d);
	cr_assert_eq(policy_load(POLICY, &p, &d), 0, "%s", diag_text(&d));
	holder = holder_new(p);
	cr_assert_not_null(holder);
	h.policy = holder;
	handler_admit(&h, ep, body, strlen(body), &reply);
	cr_assert_eq(reply.status, 200, "HTTP %d: %.*s", reply.status,
		     (int)reply.len, reply.body ? reply.body : "");
	resp = json_loadb(reply.body, reply.len, 0, NULL);
	cr_assert_not_null(resp, "%.*s", (int)reply.len, reply.body);
	free(reply.body);
	holder_free(holder);
	return resp;
}

/*
 * tests/fuzz/corpus/review/crash-label-key-cut-inside-utf8: a label whose
 * value is not a string and whose key has a two-byte character at bytes
 * 60-61.  facts.c quotes the key as "%.60s", which cuts the character in
 * half; the message is then not UTF-8, jansson refuses it, review_encode()
 * returns NULL and the server answers 500 "gpugate: out of memory" instead
 * of the 400 denial that names the field.
 */
Test(fuzz_regress, malformed_label_key_cut_inside_utf8_is_a_400_denial)
{
	static const char body[] =
		"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
		"\"request\":{\"uid\":\"u\",\"kind\":{\"group\":\"\",\"version\":\"v1\","
		"\"kind\":\"Pod\"},\"operation\":\"CREATE\",\"object\":{\"metadata\":"
		"{\"labels\":{\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		"\xc3\xa9\":1}}}}}";
	enum handler_endpoint eps[] = {HANDLER_MUTATE, HANDLER_VALIDATE};

	for (size_t i = 0; i < 2; i++) {
		json_t *resp = admit(eps[i], body);
		json_t *r = json_object_get(resp, "response");
		const char *msg = json_string_value(
			json_object_get(json_object_get(r, "status"), "message"));

		cr_assert(json_is_false(json_object_get(r, "allowed")));
		cr_assert_eq(json_integer_value(json_object_get(
				     json_object_get(r, "status"), "code")),
			     400);
		cr_assert_not_null(msg);
		cr_assert(strncmp(msg, "gpugate: malformed Pod: metadata.labels[\"aaa",
				  44) == 0,
			  "%s", msg);
		cr_assert(strstr(msg, "is not a string"), "%s", msg);
		json_decref(resp);
	}
}
