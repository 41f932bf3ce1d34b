/* The one bounded file reader (base/file.c). */
#include "base/diag.h"
#include "base/file.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64];

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/gpugate-file-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(file, .init = setup, .fini = teardown);

static const char *write_bytes(const char *name, size_t n)
{
	static char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	cr_assert_not_null(f);
	for (size_t i = 0; i < n; i++)
		fputc('a' + (int)(i % 26), f);
	fclose(f);
	return path;
}

Test(file, reads_a_file_up_to_its_cap)
{
	const char *path = write_bytes("ten", 10);
	struct diag d;
	char *buf;
	size_t len;

	diag_init(&d);
	cr_assert_eq(file_read(path, 10, 0, &buf, &len, &d), 0, "%s", diag_text(&d));
	cr_assert_eq(len, 10);
	cr_assert_str_eq(buf, "abcdefghij");
	free(buf);
	cr_assert_eq(file_read(path, 200000, FILE_SECRET, &buf, &len, &d), 0);
	cr_assert_str_eq(buf, "abcdefghij");
	file_free_secret(buf, len);
	path = write_bytes("empty", 0);
	cr_assert_eq(file_read(path, 10, 0, &buf, &len, &d), 0);
	cr_assert_eq(len, 0);
	cr_assert_str_eq(buf, "");
	free(buf);
}

Test(file, refuses_what_is_over_the_cap_or_unreadable)
{
	const char *path = write_bytes("eleven", 11);
	char want[256];
	struct diag d;
	char *buf = (char *)"x";
	size_t len = 7;

	diag_init(&d);
	cr_assert_eq(file_read(path, 10, 0, &buf, &len, &d), FILE_ERR);
	cr_assert_null(buf);
	cr_assert_eq(len, 0);
	snprintf(want, sizeof(want), "%s: larger than 10 bytes\n", path);
	cr_assert_str_eq(diag_text(&d), want);

	diag_init(&d);
	snprintf(want, sizeof(want), "%s/missing", dir);
	cr_assert_eq(file_read(want, 10, 0, &buf, &len, &d), FILE_ERR);
	strcat(want, ": cannot open: No such file or directory\n");
	cr_assert_str_eq(diag_text(&d), want);

	diag_init(&d);
	cr_assert_eq(file_read(dir, 10, 0, &buf, &len, &d), FILE_ERR);
	snprintf(want, sizeof(want), "%s: cannot read: Is a directory\n", dir);
	cr_assert_str_eq(diag_text(&d), want);
}

/* Not a regular file: the size is not known up front, the cap still holds. */
Test(file, caps_what_has_no_size)
{
	struct diag d;
	char *buf;
	size_t len;

	diag_init(&d);
	cr_assert_eq(file_read("/dev/zero", 100000, 0, &buf, &len, &d), FILE_ERR);
	cr_assert_str_eq(diag_text(&d), "/dev/zero: larger than 100000 bytes\n");
	diag_init(&d);
	cr_assert_eq(file_read("/dev/zero", 100000, FILE_TRUNCATE, &buf, &len, &d), 0);
	cr_assert_eq(len, 100001);
	free(buf);
}

Test(file, truncate_returns_one_byte_past_the_cap)
{
	const char *path = write_bytes("big", 300000);
	struct diag d;
	char *buf;
	size_t len;

	diag_init(&d);
	cr_assert_eq(file_read(path, 70000, FILE_TRUNCATE, &buf, &len, &d), 0);
	cr_assert_eq(len, 70001);
	cr_assert_eq(buf[70000], 'a' + 70000 % 26);
	cr_assert_eq(buf[70001], '\0');
	free(buf);
}

Test(file, a_dash_is_standard_input_only_when_asked)
{
	const char *path = write_bytes("in", 5);
	struct diag d;
	char *buf;
	size_t len;

	cr_assert_not_null(freopen(path, "rb", stdin));
	diag_init(&d);
	cr_assert_eq(file_read("-", 10, FILE_STDIN_DASH, &buf, &len, &d), 0);
	cr_assert_str_eq(buf, "abcde");
	free(buf);
	cr_assert_eq(file_read("-", 10, 0, &buf, &len, &d), FILE_ERR);
	cr_assert_str_eq(diag_text(&d), "-: cannot open: No such file or directory\n");
}
