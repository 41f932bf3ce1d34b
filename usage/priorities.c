/* priorities: the PriorityClasses the feed shows (usage/priorities.h). */
#include "usage/priorities.h"

#include "policy/decide.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct prio_class {
	char *name;
	int32_t value;
	bool global_default;
	bool seen; /* put since relist_begin */
};

struct priorities {
	pthread_mutex_t mu;
	struct prio_class *c;
	size_t n, cap;
};

struct priorities *priorities_new(void)
{
	struct priorities *pr = calloc(1, sizeof(*pr));

	if (pr)
		pthread_mutex_init(&pr->mu, NULL);
	return pr;
}

void priorities_free(struct priorities *pr)
{
	if (!pr)
		return;
	for (size_t i = 0; i < pr->n; i++)
		free(pr->c[i].name);
	free(pr->c);
	pthread_mutex_destroy(&pr->mu);
	free(pr);
}

static struct prio_class *find(struct priorities *pr, const char *name)
{
	for (size_t i = 0; i < pr->n; i++)
		if (strcmp(pr->c[i].name, name) == 0)
			return &pr->c[i];
	return NULL;
}

static void drop(struct priorities *pr, size_t i)
{
	free(pr->c[i].name);
	pr->c[i] = pr->c[--pr->n];
}

int priorities_put(struct priorities *pr, const char *name, int32_t value,
		   bool global_default)
{
	struct prio_class *c;
	int rc = 0;

	if (!pr || !name)
		return -1;
	pthread_mutex_lock(&pr->mu);
	c = find(pr, name);
	if (!c && pr->n == pr->cap) {
		size_t cap = pr->cap ? 2 * pr->cap : 16;
		struct prio_class *more =
			cap <= PRIORITIES_MAX ? realloc(pr->c, cap * sizeof(*more)) : NULL;

		if (more) {
			pr->c = more;
			pr->cap = cap;
		}
	}
	if (!c && pr->n < pr->cap) {
		char *copy = strdup(name);

		if (copy) {
			c = &pr->c[pr->n++];
			c->name = copy;
		}
	}
	if (c) {
		c->value = value;
		c->global_default = global_default;
		c->seen = true;
	} else {
		rc = -1;
	}
	pthread_mutex_unlock(&pr->mu);
	return rc;
}

void priorities_delete(struct priorities *pr, const char *name)
{
	if (!pr || !name)
		return;
	pthread_mutex_lock(&pr->mu);
	for (size_t i = 0; i < pr->n; i++)
		if (strcmp(pr->c[i].name, name) == 0) {
			drop(pr, i);
			break;
		}
	pthread_mutex_unlock(&pr->mu);
}

void priorities_relist_begin(struct priorities *pr)
{
	if (!pr)
		return;
	pthread_mutex_lock(&pr->mu);
	for (size_t i = 0; i < pr->n; i++)
		pr->c[i].seen = false;
	pthread_mutex_unlock(&pr->mu);
}

void priorities_relist_end(struct priorities *pr)
{
	if (!pr)
		return;
	pthread_mutex_lock(&pr->mu);
	for (size_t i = pr->n; i-- > 0;)
		if (!pr->c[i].seen)
			drop(pr, i);
	pthread_mutex_unlock(&pr->mu);
}

bool priorities_value(struct priorities *pr, const char *name, int32_t *out)
{
	bool found = false;

	if (!pr)
		return false;
	pthread_mutex_lock(&pr->mu);
	for (size_t i = 0; i < pr->n && !found; i++)
		if (name ? strcmp(pr->c[i].name, name) == 0 : pr->c[i].global_default) {
			*out = pr->c[i].value;
			found = true;
		}
	pthread_mutex_unlock(&pr->mu);
	return found;
}

size_t priorities_count(struct priorities *pr)
{
	size_t n;

	if (!pr)
		return 0;
	pthread_mutex_lock(&pr->mu);
	n = pr->n;
	pthread_mutex_unlock(&pr->mu);
	return n;
}

static bool view_value(const void *ctx, const char *name, int32_t *out)
{
	return priorities_value((struct priorities *)ctx, name, out);
}

void priorities_view(struct priorities *pr, struct priority_view *out)
{
	out->ctx = pr;
	out->value = view_value;
}
