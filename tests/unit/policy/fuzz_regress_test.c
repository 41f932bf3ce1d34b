/*
 * Reproducers of what the policy fuzz harness (tests/fuzz/policy_fuzz.c)
 * found.  The input files are kept in the fuzz corpus too
 * (tests/fuzz/corpus/policy/crash-*), so that tests/fuzz/run.sh replays them.
 */
#include "base/diag.h"
#include "policy/policy.h"

#include <criterion/criterion.h>
#include <string.h>

/*
 * Every error is one line "FILE:LINE: message" (policy.h).  Each diag
 * line must start with the file name, and there must be exactly as many
 * lines as messages.
 */
static void assert_one_line_each(const char *yaml)
{
	struct policy *p = NULL;
	struct diag d;
	const char *text, *line;
	unsigned lines = 0;

	diag_init(&d);
	cr_assert_eq(policy_parse("t.yaml", yaml, strlen(yaml), &p, &d), -1);
	cr_assert_null(p);
	text = diag_text(&d);
	for (line = text; *line; line = strchr(line, '\n') + 1) {
		cr_assert(strncmp(line, "t.yaml:", 7) == 0,
			  "a message spans lines:\n%s", text);
		lines++;
	}
	cr_assert_eq(lines, diag_count(&d), "%s", text);
}

/*
 * tests/fuzz/corpus/policy/crash-error-message-spans-lines: a plain
 * scalar folded over lines ("m\n-") quoted in the "is not a whole number"
 * message (policy/schema.c) puts a raw newline in the middle of the
 * message, so its second half is a line without FILE:LINE.
 */
Test(fuzz_regress, policy_error_quoting_a_multiline_scalar_stays_one_line)
{
	assert_one_line_each("version: m\n\n -");
}

/* The same through validate.c: a quoted env entry with "\n" in it. */
Test(fuzz_regress, policy_error_quoting_a_newline_in_env_stays_one_line)
{
	assert_one_line_each("version: 1\nflavors: []\nclasses: []\ntenants: []\n"
			     "checkpoint:\n  env: [\"A\\nB=1\"]\n");
}
