#include "base/strmap.h"

#include "base/hash.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct strmap_slot {
	const char *key; /* NULL: empty */
	size_t hash;
	size_t value;
};

void strmap_init(struct strmap *m)
{
	m->slots = NULL;
	m->cap = 0;
	m->len = 0;
}

void strmap_release(struct strmap *m)
{
	free(m->slots);
	strmap_init(m);
}

size_t strmap_hash(const char *s)
{
	return (size_t)hash_fnv1a(HASH_FNV1A_SEED, s);
}

static struct strmap_slot *find(const struct strmap_slot *slots, size_t cap,
				const char *key, size_t h)
{
	size_t i = h & (cap - 1);

	for (;;) {
		const struct strmap_slot *s = &slots[i];

		if (!s->key || (s->hash == h && strcmp(s->key, key) == 0))
			return (struct strmap_slot *)s;
		i = (i + 1) & (cap - 1);
	}
}

static int grow(struct strmap *m)
{
	size_t cap = m->cap ? m->cap * 2 : 16;
	struct strmap_slot *slots;

	if (cap > SIZE_MAX / sizeof(*slots))
		return -1;
	slots = calloc(cap, sizeof(*slots));
	if (!slots)
		return -1;
	for (size_t i = 0; i < m->cap; i++) {
		if (m->slots[i].key)
			*find(slots, cap, m->slots[i].key, m->slots[i].hash) =
				m->slots[i];
	}
	free(m->slots);
	m->slots = slots;
	m->cap = cap;
	return 0;
}

int strmap_put(struct strmap *m, const char *key, size_t value, size_t *old)
{
	size_t h = strmap_hash(key);
	struct strmap_slot *s;

	/* Keep the load factor under 3/4 so probes stay short. */
	if ((m->len + 1) * 4 > m->cap * 3 && grow(m) < 0)
		return -1;
	s = find(m->slots, m->cap, key, h);
	if (s->key) {
		if (old)
			*old = s->value;
		return 1;
	}
	s->key = key;
	s->hash = h;
	s->value = value;
	m->len++;
	return 0;
}

bool strmap_get(const struct strmap *m, const char *key, size_t *value)
{
	const struct strmap_slot *s;

	if (!m->cap)
		return false;
	s = find(m->slots, m->cap, key, strmap_hash(key));
	if (!s->key)
		return false;
	if (value)
		*value = s->value;
	return true;
}

bool strmap_del(struct strmap *m, const char *key, size_t *old)
{
	struct strmap_slot *s;
	size_t i, j, mask = m->cap - 1;

	if (!m->cap)
		return false;
	s = find(m->slots, m->cap, key, strmap_hash(key));
	if (!s->key)
		return false;
	if (old)
		*old = s->value;
	/* Close the gap: a later key of the run moves into it unless its home
	 * slot lies cyclically in (gap, its slot]. */
	i = (size_t)(s - m->slots);
	for (j = (i + 1) & mask; m->slots[j].key; j = (j + 1) & mask) {
		size_t home = m->slots[j].hash & mask;

		if (i <= j ? (i < home && home <= j) : (i < home || home <= j))
			continue;
		m->slots[i] = m->slots[j];
		i = j;
	}
	m->slots[i].key = NULL;
	m->len--;
	return true;
}

bool strmap_next(const struct strmap *m, size_t *pos, const char **key,
		 size_t *value)
{
	for (; *pos < m->cap; (*pos)++) {
		const struct strmap_slot *s = &m->slots[*pos];

		if (s->key) {
			*key = s->key;
			if (value)
				*value = s->value;
			(*pos)++;
			return true;
		}
	}
	return false;
}

void strmap_release_freeing(struct strmap *m)
{
	size_t pos = 0, v;
	const char *key;

	while (strmap_next(m, &pos, &key, &v))
		free((void *)(uintptr_t)v);
	strmap_release(m);
}
