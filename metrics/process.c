#include "metrics/process.h"

#include "base/diag.h"
#include "base/file.h"

#include <dirent.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* /proc/stat is long on a many-CPU machine (its intr line above all); the
 * boot time does not change, so it is read once. */
#define PROC_STAT_MAX (8u << 20)
#define PROC_SMALL_MAX (64u << 10)

static pthread_once_t boot_once = PTHREAD_ONCE_INIT;
static int64_t boot_time = -1;

static void read_boot_time(void)
{
	char *text = NULL;
	size_t len;
	int64_t bt;

	if (file_read("/proc/stat", PROC_STAT_MAX, 0, &text, &len, NULL) == 0 &&
	    procstat_parse_boot_time(text, &bt) == 0)
		boot_time = bt;
	free(text);
}

/* Entries of /proc/self/fd, the directory's own descriptor not counted. */
static int count_fds(uint64_t *n)
{
	DIR *dir = opendir("/proc/self/fd");
	struct dirent *e;

	if (!dir)
		return -1;
	*n = 0;
	while ((e = readdir(dir)))
		if (e->d_name[0] != '.')
			(*n)++;
	if (*n)
		(*n)--;
	closedir(dir);
	return 0;
}

int process_read(struct procstat *out)
{
	char *stat = NULL, *limits = NULL;
	size_t len;
	int rc = -1;

	pthread_once(&boot_once, read_boot_time);
	memset(out, 0, sizeof(*out));
	if (boot_time < 0 ||
	    file_read("/proc/self/stat", PROC_SMALL_MAX, 0, &stat, &len, NULL) < 0 ||
	    procstat_parse_stat(stat, sysconf(_SC_CLK_TCK), sysconf(_SC_PAGESIZE),
				out) < 0 ||
	    file_read("/proc/self/limits", PROC_SMALL_MAX, 0, &limits, &len, NULL) < 0 ||
	    procstat_parse_max_fds(limits, &out->max_fds) < 0 ||
	    count_fds(&out->open_fds) < 0)
		goto out;
	out->start_time_seconds += (double)boot_time;
	rc = 0;
out:
	free(stat);
	free(limits);
	return rc;
}
