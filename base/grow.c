#include "base/grow.h"

#include <stdint.h>
#include <stdlib.h>

bool grow_room(void **items, size_t *cap, size_t n, size_t max, size_t elem,
	       bool *oom)
{
	size_t want;
	void *p;

	if (n < *cap)
		return true;
	if (*cap >= max)
		return false;
	want = *cap ? 2 * *cap : 256;
	if (want > max)
		want = max;
	p = elem && want > SIZE_MAX / elem ? NULL : realloc(*items, want * elem);
	if (!p) {
		*oom = true;
		return false;
	}
	*items = p;
	*cap = want;
	return true;
}
