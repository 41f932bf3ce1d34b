/*
 * strmap: an open-addressing (linear probing) hash map from C strings to
 * size_t values, the one hash map of the tree.
 *
 * Keys are borrowed: the caller keeps them alive as long as the map (the
 * policy points them into its arena, the usage ledger into its entries).
 * Used for name lookups in the policy, the source-position index of the
 * loader, and the usage ledger's entries (which are deleted, too).  A
 * pointer value is stored as (size_t)(uintptr_t)p.
 */
#ifndef GPUGATE_STRMAP_H
#define GPUGATE_STRMAP_H

#include <stdbool.h>
#include <stddef.h>

struct strmap_slot;

struct strmap {
	struct strmap_slot *slots;
	size_t cap; /* power of two, or 0 */
	size_t len;
};

void strmap_init(struct strmap *m);
void strmap_release(struct strmap *m);
/* strmap_release() of a map whose every value is a pointer from malloc():
 * each is freed first (a key that points into its value goes with it). */
void strmap_release_freeing(struct strmap *m);

/*
 * Inserts key -> value.  Returns 0 when inserted, 1 when the key was there
 * already (the map is unchanged and *old, if not NULL, gets its value), and
 * -1 when out of memory.
 */
int strmap_put(struct strmap *m, const char *key, size_t value, size_t *old);

/* True and *value set when key is present. */
bool strmap_get(const struct strmap *m, const char *key, size_t *value);

/*
 * Removes key.  Returns true (and *old, if not NULL, gets its value) when it
 * was there.  Other keys stay where a lookup finds them (backward-shift
 * deletion: no tombstones, probes stay short).
 */
bool strmap_del(struct strmap *m, const char *key, size_t *old);

/*
 * Iteration: start with *pos = 0; each call gives the next key and value
 * and returns true, false at the end.  The map must not change during a
 * walk (collect first, then delete).
 */
bool strmap_next(const struct strmap *m, size_t *pos, const char **key,
		 size_t *value);

/* FNV-1a, exposed for callers that hash other names the same way. */
size_t strmap_hash(const char *s);

#endif
