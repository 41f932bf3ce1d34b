#include "base/arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_DEFAULT (64u * 1024u)
/* The first chunk is small and each next one twice the last, up to
 * CHUNK_DEFAULT: a per-request arena (a few hundred bytes of workload
 * facts) must not cost a 64 KiB calloc() -- zeroing it, and glibc
 * consolidating its free lists when a chunk that large is freed. */
#define CHUNK_FIRST 1024u
#define ALIGN 16u

struct arena_chunk {
	struct arena_chunk *next;
	size_t cap;
	size_t used;
	_Alignas(16) unsigned char data[];
};

void arena_init(struct arena *a)
{
	a->head = NULL;
	a->total = 0;
}

void arena_release(struct arena *a)
{
	struct arena_chunk *c = a->head;

	while (c) {
		struct arena_chunk *next = c->next;

		free(c);
		c = next;
	}
	a->head = NULL;
	a->total = 0;
}

void *arena_alloc(struct arena *a, size_t n)
{
	struct arena_chunk *c = a->head;
	size_t need;
	void *p;

	if (n > SIZE_MAX / 2)
		return NULL;
	need = (n + ALIGN - 1) & ~(size_t)(ALIGN - 1);
	if (need == 0)
		need = ALIGN;
	if (!c || c->cap - c->used < need) {
		size_t next = a->head ? a->head->cap * 2 : CHUNK_FIRST;
		size_t cap;

		if (next > CHUNK_DEFAULT)
			next = CHUNK_DEFAULT;
		cap = need > next ? need : next;

		c = calloc(1, sizeof(*c) + cap);
		if (!c)
			return NULL;
		c->cap = cap;
		/* A big one-off allocation must not waste the current chunk. */
		if (a->head && need > next) {
			c->next = a->head->next;
			a->head->next = c;
		} else {
			c->next = a->head;
			a->head = c;
		}
	}
	p = c->data + c->used;
	c->used += need;
	a->total += need;
	return p;
}

void *arena_calloc(struct arena *a, size_t count, size_t size)
{
	if (size && count > SIZE_MAX / 2 / size)
		return NULL;
	return arena_alloc(a, count * size);
}

char *arena_strndup(struct arena *a, const char *s, size_t n)
{
	char *p = arena_alloc(a, n + 1);

	if (p) {
		memcpy(p, s, n);
		p[n] = '\0';
	}
	return p;
}

char *arena_strdup(struct arena *a, const char *s)
{
	return arena_strndup(a, s, strlen(s));
}
