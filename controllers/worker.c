#include "controllers/worker.h"

#include "base/diag.h"
#include "base/hash.h"
#include "base/log.h"
#include "kube/client.h"

#include <string.h>

int worker_start(struct worker *w, const struct kube_config *kube,
		 void *(*run)(void *), void *arg, const char *name, struct diag *d)
{
	memset(w, 0, sizeof(*w));
	nap_init(&w->nap);
	w->kube = kube_new(kube, d);
	if (!w->kube || pthread_create(&w->thread, NULL, run, arg) != 0) {
		if (w->kube)
			diag_addf(d, "%s: cannot start its thread", name);
		kube_free(w->kube);
		nap_release(&w->nap);
		return -1;
	}
	return 0;
}

void worker_stop(struct worker *w)
{
	nap_stop(&w->nap);
	pthread_join(w->thread, NULL);
	kube_free(w->kube);
	nap_release(&w->nap);
}

void worker_failed(struct worker *w, const char *what, const char *text)
{
	uint64_t h = hash_fnv1a(HASH_FNV1A_SEED, text);
	char q[800];

	if (h != w->last_error)
		log_event(LOG_WARN, "msg=\"%s\" error=\"%s\"", what,
			  log_quote(text, q, sizeof(q)));
	w->last_error = h;
}
