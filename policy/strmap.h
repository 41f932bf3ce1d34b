/*
 * strmap: an open-addressing hash map from C strings to size_t values.
 *
 * Keys are borrowed: the caller keeps them alive as long as the map (the
 * policy points them into its arena).  Used for name lookups in the policy
 * and for the source-position index of the loader.
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

/*
 * Inserts key -> value.  Returns 0 when inserted, 1 when the key was there
 * already (the map is unchanged and *old, if not NULL, gets its value), and
 * -1 when out of memory.
 */
int strmap_put(struct strmap *m, const char *key, size_t value, size_t *old);

/* True and *value set when key is present. */
bool strmap_get(const struct strmap *m, const char *key, size_t *value);

/* FNV-1a, exposed for callers that hash other names the same way. */
size_t strmap_hash(const char *s);

#endif
