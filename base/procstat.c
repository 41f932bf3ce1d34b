#include "base/procstat.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* An unsigned decimal field at *p, which moves past it and the spaces
 * after it; -1 when there is none. */
static int field(const char **p, unsigned long long *v)
{
	char *end;

	if (**p < '0' || **p > '9')
		return -1;
	errno = 0;
	*v = strtoull(*p, &end, 10);
	if (errno || (*end != ' ' && *end != '\n' && *end != '\0'))
		return -1;
	*p = end;
	while (**p == ' ')
		(*p)++;
	return 0;
}

/* Skips one field of any text (state is a letter). */
static int skip(const char **p)
{
	if (!**p || **p == ' ' || **p == '\n')
		return -1;
	while (**p && **p != ' ' && **p != '\n')
		(*p)++;
	while (**p == ' ')
		(*p)++;
	return 0;
}

int procstat_parse_stat(const char *text, long clk_tck, long page_size,
			struct procstat *out)
{
	/* proc(5): field 3 is state, right after the ')' of comm. */
	enum { UTIME = 14, STIME = 15, STARTTIME = 22, VSIZE = 23, RSS = 24 };
	const char *p = strrchr(text, ')');
	unsigned long long v[RSS + 1] = {0};

	if (!p || p[1] != ' ' || clk_tck <= 0 || page_size <= 0)
		return -1;
	p += 2;
	if (skip(&p) < 0) /* 3: state */
		return -1;
	for (int f = 4; f <= RSS; f++) {
		unsigned long long n;

		if (*p == '-') { /* signed fields (priority, nice...) */
			p++;
		}
		if (field(&p, &n) < 0)
			return -1;
		v[f] = n;
	}
	out->cpu_seconds = (double)(v[UTIME] + v[STIME]) / (double)clk_tck;
	out->start_time_seconds = (double)v[STARTTIME] / (double)clk_tck;
	out->virtual_bytes = v[VSIZE];
	out->resident_bytes = v[RSS] * (unsigned long long)page_size;
	return 0;
}

/* The line of text that starts with key, or NULL. */
static const char *line_with(const char *text, const char *key)
{
	size_t n = strlen(key);

	for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
		if (strncmp(l, key, n) == 0)
			return l + n;
	return NULL;
}

int procstat_parse_boot_time(const char *text, int64_t *btime)
{
	const char *p = line_with(text, "btime ");
	unsigned long long v;

	if (!p || field(&p, &v) < 0 || v > INT64_MAX)
		return -1;
	*btime = (int64_t)v;
	return 0;
}

int procstat_parse_max_fds(const char *text, uint64_t *max_fds)
{
	const char *p = line_with(text, "Max open files");
	unsigned long long v;

	if (!p)
		return -1;
	while (*p == ' ')
		p++;
	if (strncmp(p, "unlimited", 9) == 0 && (p[9] == ' ' || p[9] == '\n' || !p[9])) {
		*max_fds = PROCSTAT_UNLIMITED;
		return 0;
	}
	if (field(&p, &v) < 0)
		return -1;
	*max_fds = v;
	return 0;
}
