/* base/grow.h: an array that grows by doubling, up to its cap. */
#include "base/grow.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>

Test(grow, doubles_from_256_up_to_the_cap)
{
	int *items = NULL;
	void *p = NULL;
	size_t cap = 0, n;
	bool oom = false;

	for (n = 0; n < 1000; n++) {
		p = items;
		cr_assert(grow_room(&p, &cap, n, 1000, sizeof(*items), &oom), "%zu", n);
		items = p;
		items[n] = (int)n; /* room for it */
		cr_assert_geq(cap, n + 1);
	}
	cr_assert_eq(cap, 1000, "256, 512, then the cap");
	p = items;
	cr_assert_not(grow_room(&p, &cap, n, 1000, sizeof(*items), &oom), "full");
	cr_assert_not(oom, "full is not out of memory");
	cr_assert_eq(p, items);
	for (n = 0; n < 1000; n++)
		cr_assert_eq(items[n], (int)n, "kept across reallocs");
	free(items);
}

Test(grow, out_of_memory_keeps_what_it_had)
{
	void *p = NULL;
	size_t cap = 0;
	bool oom = false;

	/* 256 of these do not fit in a size_t: no realloc of a wrapped size. */
	cr_assert_not(grow_room(&p, &cap, 0, SIZE_MAX / 2, SIZE_MAX / 200, &oom));
	cr_assert(oom);
	cr_assert_null(p);
	cr_assert_eq(cap, 0);
}
