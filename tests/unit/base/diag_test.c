/* The bounded diagnostics sink (base/diag.c). */
#include "base/diag.h"

#include <criterion/criterion.h>
#include <string.h>

Test(diag, keeps_lines_in_order)
{
	struct diag d;
	char first[64];

	diag_init(&d);
	cr_assert_str_eq(diag_text(&d), "");
	diag_addf(&d, "a:%d: one", 1);
	diag_addf(&d, "a:%d: two\n", 2);
	cr_assert_eq(diag_count(&d), 2);
	cr_assert_str_eq(diag_text(&d), "a:1: one\na:2: two\n");
	diag_first(&d, first, sizeof(first));
	cr_assert_str_eq(first, "a:1: one");
	diag_first(&d, first, 4);
	cr_assert_str_eq(first, "a:1");
}

Test(diag, is_bounded_and_counts_what_it_drops)
{
	struct diag d;
	const char *text;

	diag_init(&d);
	for (int i = 0; i < 10000; i++)
		diag_addf(&d, "line %05d of a long list of problems", i);
	text = diag_text(&d);
	cr_assert_eq(diag_count(&d), 10000);
	cr_assert_lt(strlen(text), sizeof(d.buf));
	cr_assert(strstr(text, "line 00000 of") == text);
	cr_assert_not_null(strstr(text, "... and "));
	cr_assert_gt(d.dropped, 9000);
}

Test(diag, null_sink_discards)
{
	diag_addf(NULL, "nothing %s", "here");
	cr_assert_eq(diag_count(NULL), 0);
}
