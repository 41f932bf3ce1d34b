#include "controllers/worker.h"

#include "base/diag.h"
#include "base/hash.h"
#include "base/log.h"
#include "kube/client.h"

#include <string.h>

/* The turn of base/thread.h: the controller's, or idle while another
 * replica leads. */
static unsigned worker_turn(void *arg)
{
	struct worker *w = arg;

	if (w->cfg.leading && !w->cfg.leading(w->cfg.leading_ctx)) {
		if (w->cfg.idle)
			w->cfg.idle(w->cfg.arg);
		return w->cfg.idle_ms;
	}
	return w->cfg.turn(w->cfg.arg);
}

int worker_start(struct worker *w, const struct worker_config *cfg, struct diag *d)
{
	memset(w, 0, sizeof(*w));
	w->cfg = *cfg;
	w->kube = kube_new(cfg->kube, d);
	if (!w->kube)
		return -1;
	if (thread_start(&w->thread,
			 &(struct thread_config){.name = cfg->name, .turn = worker_turn,
						 .arg = w, .first_ms = cfg->first_ms},
			 d) < 0) {
		kube_free(w->kube);
		w->kube = NULL;
		return -1;
	}
	return 0;
}

void worker_stop(struct worker *w)
{
	thread_stop(&w->thread);
	kube_free(w->kube);
	w->kube = NULL;
}

bool worker_stopping(const struct worker *w)
{
	return thread_stopping(&w->thread);
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

void worker_recovered(struct worker *w)
{
	w->last_error = 0;
}

unsigned worker_retry_s(unsigned failed_before, unsigned cap_s)
{
	unsigned wait = 2u << (failed_before < 4 ? failed_before : 4);

	return wait < cap_s ? wait : cap_s;
}
