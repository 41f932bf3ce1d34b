#include "policy/srcpos.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void srcpos_init(struct srcpos *p)
{
	arena_init(&p->arena);
	strmap_init(&p->map);
}

void srcpos_release(struct srcpos *p)
{
	strmap_release(&p->map);
	arena_release(&p->arena);
}

int srcpos_add(struct srcpos *p, const char *path, unsigned line)
{
	char *key;

	if (strmap_get(&p->map, path, NULL))
		return 0;
	key = arena_strdup(&p->arena, path);
	if (!key)
		return -1;
	return strmap_put(&p->map, key, line, NULL) < 0 ? -1 : 0;
}

unsigned srcpos_line(const struct srcpos *p, const char *fmt, ...)
{
	char path[512];
	va_list ap;
	size_t n;

	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	for (;;) {
		size_t line;

		if (strmap_get(&p->map, path, &line))
			return (unsigned)line;
		/* Drop the last ".key" or "[i]" and try the parent. */
		n = strlen(path);
		while (n > 0 && path[n - 1] != '.' && path[n - 1] != '[')
			n--;
		if (n == 0)
			return 0;
		path[n - 1] = '\0';
	}
}
