/*
 * workload: the facts of one workload (policy/workload.h); wl_get() reads
 * one of its key/value lists.
 */
#include "policy/workload.h"

#include <string.h>

const char *wl_get(const struct wl_kv *kv, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (kv[i].key && strcmp(kv[i].key, key) == 0)
			return kv[i].value;
	return NULL;
}
