/* The PriorityClasses table (usage/priorities.c): put, delete, relist, the
 * globalDefault class, and the decision's view of it. */
#include "policy/decide.h"
#include "usage/priorities.h"

#include <criterion/criterion.h>
#include <stdio.h>

Test(priorities, put_replace_delete_and_the_default)
{
	struct priorities *pr = priorities_new();
	struct priority_view pv;
	int32_t v = 0;

	cr_assert_not_null(pr);
	cr_expect_not(priorities_value(pr, NULL, &v), "no default yet");
	cr_assert_eq(priorities_put(pr, "training", 1000, false), 0);
	cr_assert_eq(priorities_put(pr, "batch", -10, true), 0);
	cr_expect(priorities_value(pr, "training", &v));
	cr_expect_eq(v, 1000);
	cr_expect(priorities_value(pr, NULL, &v));
	cr_expect_eq(v, -10);
	/* MODIFIED: the new value, and no longer the default. */
	cr_assert_eq(priorities_put(pr, "batch", 7, false), 0);
	cr_expect(priorities_value(pr, "batch", &v));
	cr_expect_eq(v, 7);
	cr_expect_not(priorities_value(pr, NULL, &v));
	priorities_delete(pr, "training");
	cr_expect_not(priorities_value(pr, "training", &v));
	cr_expect_eq(priorities_count(pr), 1);
	priorities_view(pr, &pv);
	cr_expect(pv.value(pv.ctx, "batch", &v));
	cr_expect_eq(v, 7);
	cr_expect_not(pv.value(pv.ctx, "nope", &v));
	priorities_free(pr);
	cr_expect_not(priorities_value(NULL, "batch", &v), "NULL knows none");
}

Test(priorities, a_relist_drops_what_it_did_not_show)
{
	struct priorities *pr = priorities_new();
	int32_t v;

	for (int i = 0; i < 40; i++) {
		char name[16];

		snprintf(name, sizeof(name), "c%d", i);
		cr_assert_eq(priorities_put(pr, name, i, i == 3), 0);
	}
	priorities_relist_begin(pr);
	cr_assert_eq(priorities_put(pr, "c5", 55, false), 0);
	cr_assert_eq(priorities_put(pr, "new", 1, true), 0);
	priorities_relist_end(pr);
	cr_expect_eq(priorities_count(pr), 2);
	cr_expect(priorities_value(pr, "c5", &v));
	cr_expect_eq(v, 55);
	cr_expect_not(priorities_value(pr, "c3", &v));
	cr_expect(priorities_value(pr, NULL, &v));
	cr_expect_eq(v, 1);
	priorities_free(pr);
}
