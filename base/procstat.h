/*
 * procstat: the standard process_* metrics of Prometheus client libraries
 * on Linux, parsed from the text of /proc files.  Pure: the caller reads
 * the files (metrics/process.c, at scrape time only) and hands the text
 * over; tests hand fixture text.
 *
 * What each value is, as client_golang and the Python client define it:
 *   cpu_seconds          utime + stime of /proc/self/stat, over CLK_TCK
 *   resident_bytes       rss (pages) of /proc/self/stat x page size
 *   virtual_bytes        vsize (bytes) of /proc/self/stat
 *   start_time_seconds   btime of /proc/stat + starttime (ticks) / CLK_TCK
 *   max_fds              the soft "Max open files" of /proc/self/limits
 *                        ("unlimited": PROCSTAT_UNLIMITED)
 *   open_fds             the entries of /proc/self/fd (counted by the caller)
 */
#ifndef GPUGATE_PROCSTAT_H
#define GPUGATE_PROCSTAT_H

#include <stdint.h>

#define PROCSTAT_UNLIMITED UINT64_MAX

struct procstat {
	double cpu_seconds;
	double start_time_seconds;
	uint64_t resident_bytes;
	uint64_t virtual_bytes;
	uint64_t open_fds;
	uint64_t max_fds;
};

/*
 * The fields of /proc/self/stat that ps needs: the command name, in
 * parentheses, may hold spaces and ')' itself, so fields are counted from
 * its last ')'.  clk_tck and page_size are sysconf()'s (> 0).  Sets
 * cpu_seconds, resident_bytes, virtual_bytes, and start_time_seconds as
 * seconds after boot; 0, or -1 when the text is not such a line.
 */
int procstat_parse_stat(const char *text, long clk_tck, long page_size,
			struct procstat *out);

/* The "btime N" line of /proc/stat (boot time, Unix seconds): 0, or -1
 * when there is none. */
int procstat_parse_boot_time(const char *text, int64_t *btime);

/* The soft limit of the "Max open files" line of /proc/self/limits: 0, or
 * -1 when there is none. */
int procstat_parse_max_fds(const char *text, uint64_t *max_fds);

#endif
