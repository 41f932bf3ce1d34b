/* The string hash map (policy/strmap.c). */
#include "policy/strmap.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

Test(strmap, puts_gets_and_refuses_duplicates)
{
	struct strmap m;
	size_t v = 0;

	strmap_init(&m);
	cr_assert_not(strmap_get(&m, "a", &v));
	cr_assert_eq(strmap_put(&m, "a", 1, NULL), 0);
	cr_assert_eq(strmap_put(&m, "a", 2, &v), 1);
	cr_assert_eq(v, 1);
	cr_assert(strmap_get(&m, "a", &v));
	cr_assert_eq(v, 1);
	strmap_release(&m);
}

Test(strmap, grows_past_many_keys)
{
	enum { N = 50000 };
	static char keys[N][16];
	struct strmap m;

	strmap_init(&m);
	for (size_t i = 0; i < N; i++) {
		snprintf(keys[i], sizeof(keys[i]), "k%zu", i);
		cr_assert_eq(strmap_put(&m, keys[i], i, NULL), 0);
	}
	cr_assert_eq(m.len, N);
	for (size_t i = 0; i < N; i++) {
		size_t v;

		cr_assert(strmap_get(&m, keys[i], &v));
		cr_assert_eq(v, i);
	}
	cr_assert_not(strmap_get(&m, "k50000", NULL));
	strmap_release(&m);
}
