#include "tests/unit/kube/log_capture.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char log_path[64];
static int saved_stderr = -1;

void log_capture_start(void)
{
	int fd;

	snprintf(log_path, sizeof(log_path), "/tmp/gpugate-log-XXXXXX");
	fd = mkstemp(log_path);
	cr_assert_geq(fd, 0);
	fflush(stderr);
	saved_stderr = dup(STDERR_FILENO);
	cr_assert_eq(dup2(fd, STDERR_FILENO), STDERR_FILENO);
	close(fd);
}

char *log_captured(void)
{
	FILE *f = fopen(log_path, "r");
	char *buf = calloc(1, 1 << 16);
	size_t n;

	cr_assert_not_null(f);
	cr_assert_not_null(buf);
	n = fread(buf, 1, (1 << 16) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

size_t log_count(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

void log_capture_stop(void)
{
	if (saved_stderr >= 0) {
		dup2(saved_stderr, STDERR_FILENO);
		close(saved_stderr);
		saved_stderr = -1;
		unlink(log_path);
	}
}
