/*
 * busy: each GPU pod's hour from Prometheus (report/busy.h).
 */
#include "report/busy.h"

#include "base/diag.h"
#include "base/strmap.h"
#include "kube/prom.h"
#include "policy/idle.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void busy_free(struct idle_util *u, size_t n)
{
	for (size_t i = 0; u && i < n; i++) {
		free((char *)u[i].namespace);
		free((char *)u[i].pod);
	}
	free(u);
}

/* Adds v's samples of pods not yet in seen (a ratio in 0..1 only). */
static int take(const struct prom_vector *v, struct strmap *seen, struct idle_util **out,
		size_t *n, size_t *cap)
{
	for (size_t i = 0; i < v->n; i++) {
		const struct prom_sample *s = &v->v[i];
		struct idle_util *u;
		char *key;
		size_t len;

		if (s->value < 0 || s->value > 1)
			continue; /* garbage: no figure rather than a wrong one */
		len = strlen(s->namespace) + strlen(s->pod) + 2;
		if (!(key = malloc(len)))
			return -1;
		snprintf(key, len, "%s/%s", s->namespace, s->pod);
		if (strmap_get(seen, key, NULL)) {
			free(key);
			continue;
		}
		if (*n == *cap) {
			size_t c = *cap ? 2 * *cap : 64;
			struct idle_util *m = realloc(*out, c * sizeof(*m));

			if (!m) {
				free(key);
				return -1;
			}
			*out = m;
			*cap = c;
		}
		u = &(*out)[*n];
		u->namespace = strdup(s->namespace);
		u->pod = strdup(s->pod);
		u->hour = s->value;
		/* The key is its own value: strmap_release_freeing() frees it. */
		if (!u->namespace || !u->pod ||
		    strmap_put(seen, key, (size_t)(uintptr_t)key, NULL) != 0) {
			free((char *)u->namespace);
			free((char *)u->pod);
			free(key);
			return -1;
		}
		(*n)++;
	}
	return 0;
}

int busy_read(struct prom *p, int64_t now_ms, struct idle_util **out, size_t *n,
	      struct diag *d)
{
	static const char *const metrics[] = {IDLE_METRIC_PROF, IDLE_METRIC_UTIL};
	struct idle_util *u = NULL;
	size_t nu = 0, cap = 0;
	struct strmap seen;
	int rc = 0;

	strmap_init(&seen);
	for (size_t m = 0; m < 2 && rc == 0; m++) {
		struct prom_vector v = {0};
		enum prom_error why;
		char q[1024];

		if (idle_query_text(q, sizeof(q), IDLE_Q_RECENT, metrics[m], 0,
				    IDLE_SHARE_WINDOW_S) < 0 ||
		    prom_query(p, q, now_ms, &v, &why, d) < 0) {
			rc = -1;
			break;
		}
		if (take(&v, &seen, &u, &nu, &cap) < 0) {
			diag_addf(d, "out of memory");
			rc = -1;
		}
		prom_vector_release(&v);
	}
	strmap_release_freeing(&seen);
	if (rc < 0) {
		busy_free(u, nu);
		return -1;
	}
	*out = u;
	*n = nu;
	return 0;
}
