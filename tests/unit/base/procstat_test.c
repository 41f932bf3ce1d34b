/* The process_* metrics from /proc text (base/procstat.c). */
#include "base/procstat.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>

/* A real line of /proc/self/stat (Linux 6.1), with a command name that
 * holds a space and a ')' of its own: fields are counted from the last ')'. */
static const char stat_line[] =
	"4242 (gpu) gate) S 1 4242 4242 0 -1 4194560 2817 0 0 0 "
	"250 125 0 0 20 0 9 0 "
	"123400 "           /* 22 starttime, ticks after boot */
	"1073741824 "       /* 23 vsize, bytes */
	"2560 "             /* 24 rss, pages */
	"18446744073709551615 94 95 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n";

Test(procstat, stat_line_from_the_last_parenthesis)
{
	struct procstat ps = {0};

	cr_assert_eq(procstat_parse_stat(stat_line, 100, 4096, &ps), 0);
	cr_expect_float_eq(ps.cpu_seconds, 3.75, 1e-9); /* (250 + 125) / 100 */
	cr_expect_float_eq(ps.start_time_seconds, 1234.0, 1e-9);
	cr_expect_eq(ps.virtual_bytes, 1073741824u);
	cr_expect_eq(ps.resident_bytes, 2560u * 4096u);
}

Test(procstat, refuses_what_is_not_a_stat_line)
{
	static const char *const bad[] = {
		"",
		"4242 gpugate S 1",                 /* no parentheses */
		"4242 (gpugate) S 1 2 3",           /* too short */
		"4242 (gpugate)S 1 4242 4242 0 -1", /* no space after ')' */
		"4242 (gpugate) S 1 4242 x 0 -1 4194560 2817 0 0 0 250 125 0 0 20 0 9 0 "
		"123400 1073741824 2560 0\n",       /* a field not a number */
	};
	struct procstat ps = {0};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_eq(procstat_parse_stat(bad[i], 100, 4096, &ps), -1, "case %zu", i);
	cr_expect_eq(procstat_parse_stat(stat_line, 0, 4096, &ps), -1);
	cr_expect_eq(procstat_parse_stat(stat_line, 100, 0, &ps), -1);
}

Test(procstat, boot_time_from_proc_stat)
{
	int64_t bt = 0;

	cr_assert_eq(procstat_parse_boot_time("cpu  1 2 3 4\ncpu0 1 2 3 4\n"
					      "intr 12 0 0 1\nctxt 99\n"
					      "btime 1764900000\nprocesses 7\n",
					      &bt),
		     0);
	cr_expect_eq(bt, 1764900000);
	cr_expect_eq(procstat_parse_boot_time("cpu 1 2\nctxt 99\n", &bt), -1);
	/* "btime" only at the start of a line */
	cr_expect_eq(procstat_parse_boot_time("cpu 1 btime 5\n", &bt), -1);
	cr_expect_eq(procstat_parse_boot_time("btime x\n", &bt), -1);
}

Test(procstat, max_fds_is_the_soft_limit)
{
	static const char head[] =
		"Limit                     Soft Limit           Hard Limit           Units     \n"
		"Max cpu time              unlimited            unlimited            seconds   \n";
	char text[512];
	uint64_t n = 0;

	snprintf(text, sizeof(text), "%sMax open files            1024                 "
				     "1048576              files     \n", head);
	cr_assert_eq(procstat_parse_max_fds(text, &n), 0);
	cr_expect_eq(n, 1024u);
	snprintf(text, sizeof(text), "%sMax open files            unlimited            "
				     "unlimited            files     \n", head);
	cr_assert_eq(procstat_parse_max_fds(text, &n), 0);
	cr_expect_eq(n, PROCSTAT_UNLIMITED);
	cr_expect_eq(procstat_parse_max_fds(head, &n), -1);
}
