/* usage/template-board.c: what the template keeper publishes for
 * admission: served or not, and the taken names of the last round. */
#include "usage/template-board.h"

#include <criterion/criterion.h>

Test(template_board, a_round_replaces_the_last_and_says_what_is_new)
{
	struct template_board *b = template_board_new();

	cr_assert_not_null(b);
	cr_assert_eq(template_board_served(b), TEMPLATES_UNKNOWN);
	template_board_served_set(b, TEMPLATES_NOT_SERVED);
	cr_assert_eq(template_board_served(b), TEMPLATES_NOT_SERVED);
	template_board_taken_begin(b);
	cr_assert_eq(template_board_taken_put(b, "research", "gpugate.train.2.aaaaaa"), 1);
	cr_assert_eq(template_board_taken_put(b, "research", "gpugate.train.2.aaaaaa"), 0,
		     "twice in a round: once");
	cr_assert_not(template_board_taken(b, "research", "gpugate.train.2.aaaaaa"),
		      "not published before the round ends");
	template_board_taken_end(b);
	cr_assert(template_board_taken(b, "research", "gpugate.train.2.aaaaaa"));
	cr_assert_not(template_board_taken(b, "web", "gpugate.train.2.aaaaaa"));
	cr_assert_eq(template_board_taken_count(b), 1);
	/* The next round: still taken (not new), another one gone. */
	template_board_taken_begin(b);
	cr_assert_eq(template_board_taken_put(b, "research", "gpugate.train.2.aaaaaa"), 0);
	cr_assert_eq(template_board_taken_put(b, "web", "gpugate.x"), 1);
	template_board_taken_end(b);
	template_board_taken_begin(b);
	template_board_taken_end(b);
	cr_assert_not(template_board_taken(b, "research", "gpugate.train.2.aaaaaa"),
		      "given back: no longer taken");
	cr_assert_eq(template_board_taken_count(b), 0);
	template_board_free(b);
	cr_assert_not(template_board_taken(NULL, "a", "b"));
	cr_assert_eq(template_board_served(NULL), TEMPLATES_UNKNOWN);
	template_board_free(NULL);
}
