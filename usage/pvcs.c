/* pvcs: the PersistentVolumeClaims the feed shows (usage/pvcs.h). */
#include "usage/pvcs.h"

#include "base/strmap.h"
#include "policy/decide.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct pvc {
	bool many_nodes;
	bool seen; /* put since relist_begin */
	char key[]; /* "namespace/name" */
};

struct pvcs {
	pthread_mutex_t mu;
	struct strmap by_key; /* key -> struct pvc * */
	bool synced;
};

struct pvcs *pvcs_new(void)
{
	struct pvcs *pv = calloc(1, sizeof(*pv));

	if (!pv)
		return NULL;
	pthread_mutex_init(&pv->mu, NULL);
	strmap_init(&pv->by_key);
	return pv;
}

static void free_all(struct pvcs *pv)
{
	size_t pos = 0, v;
	const char *key;

	while (strmap_next(&pv->by_key, &pos, &key, &v))
		free((void *)(uintptr_t)v);
}

void pvcs_free(struct pvcs *pv)
{
	if (!pv)
		return;
	free_all(pv);
	strmap_release(&pv->by_key);
	pthread_mutex_destroy(&pv->mu);
	free(pv);
}

/* "ns/name" into buf; false when it does not fit (no such claim: names are
 * at most 253 characters). */
static bool key_of(char *buf, size_t size, const char *ns, const char *name)
{
	size_t a = strlen(ns), b = strlen(name);

	if (a + b + 2 > size)
		return false;
	memcpy(buf, ns, a);
	buf[a] = '/';
	memcpy(buf + a + 1, name, b + 1);
	return true;
}

int pvcs_put(struct pvcs *pv, const char *ns, const char *name, bool many_nodes)
{
	char key[600];
	size_t v;
	struct pvc *c;
	int rc = 0;

	if (!pv || !ns || !name || !key_of(key, sizeof(key), ns, name))
		return -1;
	pthread_mutex_lock(&pv->mu);
	if (strmap_get(&pv->by_key, key, &v)) {
		c = (struct pvc *)(uintptr_t)v;
	} else {
		c = malloc(sizeof(*c) + strlen(key) + 1);
		if (c) {
			strcpy(c->key, key);
			if (strmap_put(&pv->by_key, c->key, (size_t)(uintptr_t)c, NULL) < 0) {
				free(c);
				c = NULL;
			}
		}
	}
	if (c) {
		c->many_nodes = many_nodes;
		c->seen = true;
	} else {
		rc = -1;
	}
	pthread_mutex_unlock(&pv->mu);
	return rc;
}

void pvcs_delete(struct pvcs *pv, const char *ns, const char *name)
{
	char key[600];
	size_t v;

	if (!pv || !ns || !name || !key_of(key, sizeof(key), ns, name))
		return;
	pthread_mutex_lock(&pv->mu);
	if (strmap_del(&pv->by_key, key, &v))
		free((void *)(uintptr_t)v);
	pthread_mutex_unlock(&pv->mu);
}

void pvcs_relist_begin(struct pvcs *pv)
{
	size_t pos = 0, v;
	const char *key;

	if (!pv)
		return;
	pthread_mutex_lock(&pv->mu);
	while (strmap_next(&pv->by_key, &pos, &key, &v))
		((struct pvc *)(uintptr_t)v)->seen = false;
	pthread_mutex_unlock(&pv->mu);
}

void pvcs_relist_end(struct pvcs *pv)
{
	size_t pos = 0, v, n = 0;
	const char *key;
	struct pvc **gone;

	if (!pv)
		return;
	pthread_mutex_lock(&pv->mu);
	/* Collect first: the map must not change during a walk. */
	gone = calloc(pv->by_key.len ? pv->by_key.len : 1, sizeof(*gone));
	while (gone && strmap_next(&pv->by_key, &pos, &key, &v))
		if (!((struct pvc *)(uintptr_t)v)->seen)
			gone[n++] = (struct pvc *)(uintptr_t)v;
	for (size_t i = 0; i < n; i++) {
		strmap_del(&pv->by_key, gone[i]->key, NULL);
		free(gone[i]);
	}
	free(gone);
	pv->synced = true;
	pthread_mutex_unlock(&pv->mu);
}

size_t pvcs_count(struct pvcs *pv)
{
	size_t n;

	if (!pv)
		return 0;
	pthread_mutex_lock(&pv->mu);
	n = pv->by_key.len;
	pthread_mutex_unlock(&pv->mu);
	return n;
}

static enum pvc_state view_state(const void *ctx, const char *ns, const char *name)
{
	struct pvcs *pv = (struct pvcs *)ctx;
	enum pvc_state st = PVC_UNKNOWN;
	char key[600];
	size_t v;

	if (!key_of(key, sizeof(key), ns, name))
		return PVC_MISSING;
	pthread_mutex_lock(&pv->mu);
	if (pv->synced)
		st = !strmap_get(&pv->by_key, key, &v) ? PVC_MISSING
		     : ((struct pvc *)(uintptr_t)v)->many_nodes ? PVC_MANY_NODES
								   : PVC_ONE_NODE;
	pthread_mutex_unlock(&pv->mu);
	return st;
}

void pvcs_view(struct pvcs *pv, struct pvc_view *out)
{
	out->ctx = pv;
	out->state = view_state;
}
