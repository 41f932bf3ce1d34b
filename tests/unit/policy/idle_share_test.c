/*
 * A tenant's busy share of what it holds (policy/idle.c idle_share_add,
 * idle_share_of): units weighted by each pod's mean over the last hour,
 * pods without data left out of both sums.
 */
#include "policy/idle.h"

#include <criterion/criterion.h>
#include <math.h>

Test(idle_share, units_weighted_by_each_pod_s_hour)
{
	struct idle_share s = {0};
	struct idle_util busy = {"ml", "a", 0.9}, idle = {"ml", "b", 0.01};

	/* 8 units at 90 %, 2 units at 1 %: (7.2 + 0.02) / 10. */
	idle_share_add(&s, 8, &busy);
	idle_share_add(&s, 2, &idle);
	cr_assert_float_eq(idle_share_of(&s), 0.722, 1e-12);
}

Test(idle_share, no_data_is_neither_busy_nor_idle)
{
	struct idle_share s = {0};
	struct idle_util half = {"ml", "a", 0.5};

	cr_assert_eq(idle_share_of(&s), -1, "nothing held: no share");
	idle_share_add(&s, 4, NULL);
	cr_assert_eq(idle_share_of(&s), -1, "held, but no data: no share (not 0)");
	idle_share_add(&s, 2, &half);
	cr_assert_float_eq(idle_share_of(&s), 0.5, 1e-12, "the 4 without data left out");
	cr_assert_eq(s.units, 2);
}

Test(idle_share, out_of_range_clamped_nan_and_empty_pods_left_out)
{
	struct idle_share s = {0};
	struct idle_util over = {"ml", "a", 1.7}, under = {"ml", "b", -0.2};
	struct idle_util nan_ = {"ml", "c", NAN}, one = {"ml", "d", 1.0};

	idle_share_add(&s, 1, &over);
	idle_share_add(&s, 1, &under);
	idle_share_add(&s, 5, &nan_);
	idle_share_add(&s, 0, &one);
	idle_share_add(&s, -3, &one);
	cr_assert_eq(s.units, 2);
	cr_assert_float_eq(idle_share_of(&s), 0.5, 1e-12);
}
