#include "usage/meter.h"

#include "base/strmap.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct run {
	char *uid; /* the key of by_uid */
	size_t total;    /* index into totals */
	int64_t units, start, end;
	int64_t from;    /* charged from no earlier than this (a move) */
	bool stale;
};

/* Closed GPU-seconds of one tenant and flavor. */
struct total {
	char *key; /* "tenant\x1fflavor" */
	char *tenant, *flavor;
	double closed;
};

struct meter {
	pthread_mutex_t mu;
	int64_t (*now)(void);
	int64_t t0;
	struct strmap by_uid, by_key;
	struct run **runs;
	size_t n_runs, cap_runs;
	struct total **totals;
	size_t n_totals, cap_totals;
};

static int64_t wall(void)
{
	return (int64_t)time(NULL);
}

struct meter *meter_new(int64_t (*now)(void))
{
	struct meter *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	pthread_mutex_init(&m->mu, NULL);
	m->now = now ? now : wall;
	m->t0 = m->now();
	strmap_init(&m->by_uid);
	strmap_init(&m->by_key);
	return m;
}

void meter_free(struct meter *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n_runs; i++) {
		free(m->runs[i]->uid);
		free(m->runs[i]);
	}
	for (size_t i = 0; i < m->n_totals; i++) {
		free(m->totals[i]->key);
		free(m->totals[i]->tenant);
		free(m->totals[i]->flavor);
		free(m->totals[i]);
	}
	free(m->runs);
	free(m->totals);
	strmap_release(&m->by_uid);
	strmap_release(&m->by_key);
	pthread_mutex_destroy(&m->mu);
	free(m);
}

static int grow(void **arr, size_t *cap, size_t need)
{
	size_t n = *cap ? *cap * 2 : 64;
	void *p;

	if (need <= *cap)
		return 0;
	p = realloc(*arr, n * sizeof(void *));
	if (!p)
		return -1;
	*arr = p;
	*cap = n;
	return 0;
}

/* The GPU-seconds of r that fall after the meter's start, up to now. */
static double charged(const struct meter *m, const struct run *r, int64_t now)
{
	int64_t from = r->start > m->t0 ? r->start : m->t0;

	if (r->from > from)
		from = r->from;
	int64_t to = r->end ? r->end : now;

	if (!r->start || to <= from)
		return 0;
	return (double)r->units * (double)(to - from);
}

static struct total *total_get(struct meter *m, const char *tenant, const char *flavor,
			       size_t *index)
{
	char key[600];
	struct total *t;
	size_t i;

	snprintf(key, sizeof(key), "%s\x1f%s", tenant, flavor);
	if (strmap_get(&m->by_key, key, &i)) {
		*index = i;
		return m->totals[i];
	}
	if (grow((void **)&m->totals, &m->cap_totals, m->n_totals + 1) < 0)
		return NULL;
	t = calloc(1, sizeof(*t));
	if (!t || !(t->key = strdup(key)) || !(t->tenant = strdup(tenant)) ||
	    !(t->flavor = strdup(flavor)) ||
	    strmap_put(&m->by_key, t->key, m->n_totals, NULL) < 0) {
		if (t) {
			free(t->key);
			free(t->tenant);
			free(t->flavor);
		}
		free(t);
		return NULL;
	}
	*index = m->n_totals;
	m->totals[m->n_totals++] = t;
	return t;
}

/* Charges run i once more (up to its end, or now) and forgets it. */
static void close_run(struct meter *m, size_t i, int64_t now)
{
	struct run *r = m->runs[i];
	size_t last = --m->n_runs;

	m->totals[r->total]->closed += charged(m, r, now);
	strmap_del(&m->by_uid, r->uid, NULL);
	if (i != last) {
		m->runs[i] = m->runs[last];
		strmap_del(&m->by_uid, m->runs[i]->uid, NULL);
		strmap_put(&m->by_uid, m->runs[i]->uid, i, NULL);
	}
	free(r->uid);
	free(r);
}

void meter_put(struct meter *m, const struct meter_pod *p)
{
	int64_t now = m->now(), moved = 0;
	struct run *r = NULL;
	size_t i, ti;

	pthread_mutex_lock(&m->mu);
	if (strmap_get(&m->by_uid, p->uid, &i)) {
		r = m->runs[i];
		/* Another tenant or flavor (a policy reload): the old one is
		 * charged up to now, the new one from now. */
		if (!p->tenant || !p->flavor ||
		    strcmp(m->totals[r->total]->tenant, p->tenant) != 0 ||
		    strcmp(m->totals[r->total]->flavor, p->flavor) != 0) {
			close_run(m, i, now);
			r = NULL;
			moved = now;
		}
	}
	if (!p->tenant || !p->flavor || p->units <= 0)
		goto out;
	if (!r) {
		struct total *t = total_get(m, p->tenant, p->flavor, &ti);

		if (!t || grow((void **)&m->runs, &m->cap_runs, m->n_runs + 1) < 0)
			goto out;
		r = calloc(1, sizeof(*r));
		if (!r || !(r->uid = strdup(p->uid)) ||
		    strmap_put(&m->by_uid, r->uid, m->n_runs, NULL) < 0) {
			if (r)
				free(r->uid);
			free(r);
			goto out;
		}
		r->total = ti;
		r->from = moved;
		m->runs[m->n_runs++] = r;
	}
	r->units = p->units;
	r->start = p->start;
	/* Finished: the first end seen stays (status does not move it). */
	if (!r->end)
		r->end = p->end;
	r->stale = false;
out:
	pthread_mutex_unlock(&m->mu);
}

void meter_gone(struct meter *m, const char *uid)
{
	size_t i;

	pthread_mutex_lock(&m->mu);
	if (strmap_get(&m->by_uid, uid, &i))
		close_run(m, i, m->now());
	pthread_mutex_unlock(&m->mu);
}

void meter_relist_begin(struct meter *m)
{
	pthread_mutex_lock(&m->mu);
	for (size_t i = 0; i < m->n_runs; i++)
		m->runs[i]->stale = true;
	pthread_mutex_unlock(&m->mu);
}

void meter_relist_end(struct meter *m)
{
	int64_t now = m->now();

	pthread_mutex_lock(&m->mu);
	for (size_t i = m->n_runs; i-- > 0;)
		if (m->runs[i]->stale)
			close_run(m, i, now);
	pthread_mutex_unlock(&m->mu);
}

void meter_foreach(struct meter *m, meter_fn fn, void *ctx)
{
	int64_t now = m->now();
	double *sum;

	pthread_mutex_lock(&m->mu);
	sum = calloc(m->n_totals + 1, sizeof(*sum));
	if (sum) {
		for (size_t i = 0; i < m->n_totals; i++)
			sum[i] = m->totals[i]->closed;
		for (size_t i = 0; i < m->n_runs; i++)
			sum[m->runs[i]->total] += charged(m, m->runs[i], now);
		for (size_t i = 0; i < m->n_totals; i++)
			fn(ctx, m->totals[i]->tenant, m->totals[i]->flavor, sum[i]);
	}
	pthread_mutex_unlock(&m->mu);
	free(sum);
}

size_t meter_pods(struct meter *m)
{
	size_t n;

	pthread_mutex_lock(&m->mu);
	n = m->n_runs;
	pthread_mutex_unlock(&m->mu);
	return n;
}
