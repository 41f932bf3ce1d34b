/*
 * jget: json_object_get() with the key's length worked out by the caller.
 * For a literal key the compiler folds the length, and jansson is spared a
 * strlen() a lookup (a class Pod's review takes about 165 lookups).
 */
#ifndef GPUGATE_JGET_H
#define GPUGATE_JGET_H

#include <jansson.h>
#include <string.h>

static inline json_t *jget(const json_t *obj, const char *key)
{
	return json_object_getn(obj, key, strlen(key));
}

#endif
