/*
 * The idle controller's pure parts (controllers/idle.c): the annotation's
 * time, its merge patch, and the words of the Event GPUIdle.
 */
#include "controllers/idle.h"
#include "policy/idle.h"
#include "policy/policy.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static const int64_t SINCE = 1796479200000LL; /* 2026-12-05T14:00:00Z */

Test(idle_controller, the_annotation_is_rfc3339_utc_in_seconds)
{
	char buf[32];

	idle_since_text(SINCE + 999, buf, sizeof(buf));
	cr_assert_str_eq(buf, "2026-12-05T14:00:00Z");
}

Test(idle_controller, the_patch_sets_or_takes_off_only_the_annotation)
{
	json_t *on = idle_since_patch("2026-12-05T14:00:00Z");
	json_t *off = idle_since_patch(NULL);
	char *a = json_dumps(on, JSON_COMPACT | JSON_SORT_KEYS);
	char *b = json_dumps(off, JSON_COMPACT | JSON_SORT_KEYS);

	cr_assert_str_eq(a, "{\"metadata\":{\"annotations\":{\"gpugate.io/idle-since\":"
			    "\"2026-12-05T14:00:00Z\"}}}");
	cr_assert_str_eq(b, "{\"metadata\":{\"annotations\":{\"gpugate.io/idle-since\":null}}}");
	free(a);
	free(b);
	json_decref(on);
	json_decref(off);
}

Test(idle_controller, the_event_says_what_was_seen_and_what_to_do)
{
	struct policy_idle warn = {"5%", 0.05, "30m", 1800, IDLE_ACTION_WARN};
	struct policy_idle reclaim = {"5%", 0.05, "30m", 1800, IDLE_ACTION_RECLAIM};
	char buf[1024];

	idle_event_text(buf, sizeof(buf), &warn, 0.021, SINCE, IDLE_ON_POD);
	cr_assert_str_eq(buf, "its GPUs were below 5% for 30m (highest 2.1%) since "
			      "2026-12-05T14:00:00Z: use them, or release them (delete the "
			      "pod) so that others can");
	idle_event_text(buf, sizeof(buf), &reclaim, 0.021, SINCE, IDLE_ON_JOB);
	cr_assert_str_eq(buf, "its pods' GPUs were below 5% for 30m (highest 2.1%) since "
			      "2026-12-05T14:00:00Z: use them, or release them (delete or "
			      "suspend the Job) so that others can; otherwise gpugate takes "
			      "them back: it asks for a checkpoint (annotation "
			      "gpugate.io/checkpoint-requested), then suspends the Job");
	idle_event_text(buf, sizeof(buf), &reclaim, 0, SINCE, IDLE_ON_POD);
	cr_assert(strstr(buf, "(highest 0.0%)"));
	cr_assert(strstr(buf, "then evicts the pod"), "%s", buf);
	/* A pod of a Job: the Job is what is suspended, and what to release
	 * (a deleted pod comes back). */
	idle_event_text(buf, sizeof(buf), &reclaim, 0.01, SINCE, IDLE_ON_JOB_POD);
	cr_assert_str_eq(buf, "its GPUs were below 5% for 30m (highest 1.0%) since "
			      "2026-12-05T14:00:00Z: use them, or release them (delete or "
			      "suspend its Job) so that others can; otherwise gpugate takes "
			      "them back: it asks for a checkpoint (annotation "
			      "gpugate.io/checkpoint-requested), then suspends the Job");
}
