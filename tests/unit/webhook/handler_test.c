/*
 * The join point (webhook/handler.c) where the golden cases cannot reach:
 * answers that are not a review.  The reviews themselves are in
 * tests/golden (golden_test.c).
 */
#include "base/log.h"
#include "webhook/handler.h"
#include "webhook/holder.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

Test(handler, no_policy_loaded_is_503)
{
	/* serve never starts without a policy: this is the guard behind it. */
	static const char review[] =
		"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
		"\"request\":{\"uid\":\"u-1\",\"kind\":{\"group\":\"\",\"version\":"
		"\"v1\",\"kind\":\"Pod\"},\"operation\":\"CREATE\",\"namespace\":"
		"\"research\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"Pod\","
		"\"spec\":{\"containers\":[{\"name\":\"m\"}]}}}}";
	struct holder *empty = holder_new(NULL);
	struct handler h = {.policy = empty};
	struct handler_reply r;

	log_set_level(LOG_ERROR);
	cr_assert_not_null(empty);
	handler_admit(&h, HANDLER_MUTATE, review, strlen(review), &r);
	cr_assert_eq(r.status, 503);
	cr_assert_str_eq(r.content_type, "text/plain; charset=utf-8");
	cr_assert_str_eq(r.body, "gpugate: no policy loaded\n");
	cr_assert_eq(r.len, strlen(r.body));
	free(r.body);
	holder_free(empty);
}
