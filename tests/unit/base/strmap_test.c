/* The string hash map (base/strmap.c). */
#include "base/strmap.h"

#include <criterion/criterion.h>
#include <stdbool.h>
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

/*
 * Deletion shifts later keys of a probe run back.  A reference model (a
 * plain array of present flags) is held against the map through a long
 * random mix of puts and deletes on a small key space, so that runs wrap
 * around the end of the table and deletes hit every position of a run.
 */
Test(strmap, deletes_keep_every_other_key_reachable)
{
	enum { K = 300, STEPS = 200000 };
	static char keys[K][8];
	bool present[K] = {false};
	struct strmap m;
	unsigned long long x = 88172645463325252ull;
	size_t len = 0;

	strmap_init(&m);
	for (size_t i = 0; i < K; i++)
		snprintf(keys[i], sizeof(keys[i]), "%zu", i);
	for (size_t step = 0; step < STEPS; step++) {
		size_t k, v;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		k = (size_t)(x % K);
		if (x >> 40 & 1) {
			cr_assert_eq(strmap_put(&m, keys[k], k, NULL), present[k] ? 1 : 0);
			len += !present[k];
			present[k] = true;
		} else {
			cr_assert_eq(strmap_del(&m, keys[k], &v), present[k]);
			if (present[k])
				cr_assert_eq(v, k);
			len -= present[k];
			present[k] = false;
		}
		if (step % 997 == 0)
			for (size_t i = 0; i < K; i++)
				cr_assert_eq(strmap_get(&m, keys[i], &v), present[i],
					     "key %zu at step %zu", i, step);
	}
	cr_assert_eq(m.len, len);
	strmap_release(&m);
}

Test(strmap, walks_every_key_once)
{
	static char keys[1000][8];
	bool seen[1000] = {false};
	struct strmap m;
	const char *key;
	size_t pos = 0, v, n = 0;

	strmap_init(&m);
	cr_assert_not(strmap_next(&m, &pos, &key, &v));
	for (size_t i = 0; i < 1000; i++) {
		snprintf(keys[i], sizeof(keys[i]), "%zu", i);
		cr_assert_eq(strmap_put(&m, keys[i], i, NULL), 0);
	}
	for (size_t i = 0; i < 1000; i += 3)
		cr_assert(strmap_del(&m, keys[i], NULL));
	pos = 0;
	while (strmap_next(&m, &pos, &key, &v)) {
		cr_assert_eq(key, keys[v]);
		cr_assert_not(seen[v]);
		seen[v] = true;
		n++;
	}
	for (size_t i = 0; i < 1000; i++)
		cr_assert_eq(seen[i], i % 3 != 0, "key %zu", i);
	cr_assert_eq(n, m.len);
	strmap_release(&m);
}
