/* template-board: what the template keeper found, for admission
 * (usage/template-board.h). */
#include "usage/template-board.h"

#include "base/strmap.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct template_board {
	pthread_mutex_t mu;
	enum template_served served;
	/* "ns/name" keys, each its own malloc'ed value: the last round's,
	 * and the one being published. */
	struct strmap taken, next;
};

struct template_board *template_board_new(void)
{
	struct template_board *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	pthread_mutex_init(&b->mu, NULL);
	strmap_init(&b->taken);
	strmap_init(&b->next);
	return b;
}

void template_board_free(struct template_board *b)
{
	if (!b)
		return;
	strmap_release_freeing(&b->taken);
	strmap_release_freeing(&b->next);
	pthread_mutex_destroy(&b->mu);
	free(b);
}

void template_board_served_set(struct template_board *b, enum template_served s)
{
	pthread_mutex_lock(&b->mu);
	b->served = s;
	pthread_mutex_unlock(&b->mu);
}

enum template_served template_board_served(struct template_board *b)
{
	enum template_served s;

	if (!b)
		return TEMPLATES_UNKNOWN;
	pthread_mutex_lock(&b->mu);
	s = b->served;
	pthread_mutex_unlock(&b->mu);
	return s;
}

/* "ns/name" into buf; false when it does not fit (names are at most 253
 * characters, namespaces 63). */
static bool key_of(char *buf, size_t size, const char *ns, const char *name)
{
	int n = ns && name ? snprintf(buf, size, "%s/%s", ns, name) : -1;

	return n > 0 && (size_t)n < size;
}

void template_board_taken_begin(struct template_board *b)
{
	pthread_mutex_lock(&b->mu);
	strmap_release_freeing(&b->next);
	strmap_init(&b->next);
	pthread_mutex_unlock(&b->mu);
}

int template_board_taken_put(struct template_board *b, const char *ns, const char *name)
{
	char key[400], *copy;
	int rc;

	if (!key_of(key, sizeof(key), ns, name))
		return -1;
	pthread_mutex_lock(&b->mu);
	if (strmap_get(&b->next, key, NULL)) {
		rc = 0;
	} else if (!(copy = strdup(key))) {
		rc = -1;
	} else if (strmap_put(&b->next, copy, (size_t)(uintptr_t)copy, NULL) < 0) {
		free(copy);
		rc = -1;
	} else {
		rc = strmap_get(&b->taken, key, NULL) ? 0 : 1;
	}
	pthread_mutex_unlock(&b->mu);
	return rc;
}

void template_board_taken_end(struct template_board *b)
{
	pthread_mutex_lock(&b->mu);
	strmap_release_freeing(&b->taken);
	b->taken = b->next;
	strmap_init(&b->next);
	pthread_mutex_unlock(&b->mu);
}

bool template_board_taken(struct template_board *b, const char *ns, const char *name)
{
	char key[400];
	bool taken;

	if (!b || !key_of(key, sizeof(key), ns, name))
		return false;
	pthread_mutex_lock(&b->mu);
	taken = strmap_get(&b->taken, key, NULL);
	pthread_mutex_unlock(&b->mu);
	return taken;
}

size_t template_board_taken_count(struct template_board *b)
{
	size_t n;

	if (!b)
		return 0;
	pthread_mutex_lock(&b->mu);
	n = b->taken.len;
	pthread_mutex_unlock(&b->mu);
	return n;
}
