/*
 * idle-board: the idle controller's latest round, shared
 * (controllers/idle-board.h).
 */
#include "controllers/idle-board.h"

#include "policy/idle.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct idle_board {
	pthread_mutex_t mu;
	struct idle_want *wants;
	size_t n_wants;
	struct idle_util *utils;
	size_t n_utils;
	int64_t round_ms;
};

struct idle_board *idle_board_new(void)
{
	struct idle_board *b = calloc(1, sizeof(*b));

	if (b && pthread_mutex_init(&b->mu, NULL) != 0) {
		free(b);
		return NULL;
	}
	return b;
}

void idle_board_utils_free(struct idle_util *u, size_t n)
{
	for (size_t i = 0; u && i < n; i++) {
		free((char *)u[i].namespace);
		free((char *)u[i].pod);
	}
	free(u);
}

/* A deep copy of u[0..n): NULL when out of memory (n > 0). */
static struct idle_util *utils_copy(const struct idle_util *u, size_t n)
{
	struct idle_util *c = calloc(n ? n : 1, sizeof(*c));

	if (!c)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		c[i].hour = u[i].hour;
		c[i].namespace = strdup(u[i].namespace ? u[i].namespace : "");
		c[i].pod = strdup(u[i].pod ? u[i].pod : "");
		if (!c[i].namespace || !c[i].pod) {
			idle_board_utils_free(c, i + 1);
			return NULL;
		}
	}
	return c;
}

void idle_board_free(struct idle_board *b)
{
	if (!b)
		return;
	free(b->wants);
	idle_board_utils_free(b->utils, b->n_utils);
	pthread_mutex_destroy(&b->mu);
	free(b);
}

int idle_board_publish(struct idle_board *b, const struct idle_want *wants, size_t nw,
		       const struct idle_util *utils, size_t nu, int64_t now_ms)
{
	struct idle_want *w = malloc((nw ? nw : 1) * sizeof(*w));
	struct idle_util *u = utils_copy(utils, nu);
	struct idle_want *old_w;
	struct idle_util *old_u;
	size_t old_nu;
	int rc = 0;

	if (!w || !u) {
		free(w);
		idle_board_utils_free(u, nu);
		w = NULL;
		u = NULL;
		nw = nu = 0;
		rc = -1;
	} else if (nw) {
		memcpy(w, wants, nw * sizeof(*w));
	}
	pthread_mutex_lock(&b->mu);
	old_w = b->wants;
	old_u = b->utils;
	old_nu = b->n_utils;
	b->wants = w;
	b->n_wants = nw;
	b->utils = u;
	b->n_utils = nu;
	b->round_ms = now_ms;
	pthread_mutex_unlock(&b->mu);
	free(old_w);
	idle_board_utils_free(old_u, old_nu);
	return rc;
}

int idle_board_wants(struct idle_board *b, struct idle_want **out, size_t *n,
		     int64_t *round_ms)
{
	int rc = 0;

	pthread_mutex_lock(&b->mu);
	*n = b->n_wants;
	*round_ms = b->round_ms;
	*out = malloc((*n ? *n : 1) * sizeof(**out));
	if (!*out) {
		*n = 0;
		rc = -1;
	} else if (*n) {
		memcpy(*out, b->wants, *n * sizeof(**out));
	}
	pthread_mutex_unlock(&b->mu);
	return rc;
}

int idle_board_utils(struct idle_board *b, struct idle_util **out, size_t *n)
{
	int rc = 0;

	pthread_mutex_lock(&b->mu);
	*out = utils_copy(b->utils, b->n_utils);
	*n = *out ? b->n_utils : 0;
	if (!*out)
		rc = -1;
	pthread_mutex_unlock(&b->mu);
	return rc;
}
