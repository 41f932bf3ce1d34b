/*
 * arena: a bump allocator for data that is freed all at once.
 *
 * The immutable policy keeps every string and array in one arena, so that
 * policy_free() is a handful of free() calls however large the policy is.
 * Allocations are 16-byte aligned and zeroed.  Not thread-safe: an arena is
 * filled by one thread before it is shared read-only.
 */
#ifndef GPUGATE_ARENA_H
#define GPUGATE_ARENA_H

#include <stddef.h>

struct arena_chunk;

struct arena {
	struct arena_chunk *head;
	size_t total; /* bytes handed out, for memory accounting */
};

void arena_init(struct arena *a);
void arena_release(struct arena *a);

/* Returns zeroed memory, or NULL when out of memory or n overflows. */
void *arena_alloc(struct arena *a, size_t n);
/* Array of count elements of size bytes each, zeroed; NULL on overflow. */
void *arena_calloc(struct arena *a, size_t count, size_t size);
char *arena_strdup(struct arena *a, const char *s);
char *arena_strndup(struct arena *a, const char *s, size_t n);

#endif
