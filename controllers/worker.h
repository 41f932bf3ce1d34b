/*
 * worker: what a background controller of gpugate serve owns besides its
 * own state: its thread (base/thread.h: the loop, the tick, the stop), its
 * API client, the turns it sits out while another replica leads, and the
 * last error it logged.  A controller is then its turn: the work of one
 * tick.
 *
 *   static unsigned turn(void *arg)        only while leading
 *   {
 *       struct reclaimer *r = arg;
 *       ... r->w.kube ...
 *       return r->cfg.interval_ms;         ms until the next turn
 *   }
 *
 *   struct worker_config wc = {.name = "reclaimer", .kube = cfg->kube,
 *       .turn = turn, .arg = r, .first_ms = 2000, .idle_ms = 2000,
 *       .leading = cfg->leading, .leading_ctx = cfg->leading_ctx};
 *   if (worker_start(&r->w, &wc, d) < 0) ...
 *
 * Each turn first asks leading(leading_ctx) (NULL: always leading, one
 * replica); while it says no, the worker calls idle(arg) instead of turn
 * (to forget what a leader must read again when it leads again) and
 * sleeps idle_ms.
 */
#ifndef GPUGATE_WORKER_H
#define GPUGATE_WORKER_H

#include "base/thread.h"

#include <stdbool.h>
#include <stdint.h>

struct diag;
struct kube;
struct kube_config;

struct worker_config {
	const char *name;                /* "class-sync": in its errors */
	const struct kube_config *kube;  /* the thread's own client is made of it */
	/* A turn while leading: ms until the next (0: at once). */
	unsigned (*turn)(void *arg);
	/* A turn while another replica leads; may be NULL. */
	void (*idle)(void *arg);
	void *arg;
	unsigned first_ms;               /* before the first turn; 0: none */
	unsigned idle_ms;                /* after an idle turn */
	bool (*leading)(void *ctx);      /* NULL: always leading */
	void *leading_ctx;
};

struct worker {
	struct worker_config cfg;
	struct kube *kube;   /* the thread's own client */
	struct thread thread;
	uint64_t last_error; /* hash of the error last logged; 0: none */
};

/*
 * In caller's storage: a client for cfg->kube, then the thread.  -1 with
 * a message naming cfg->name when either cannot be made; *w is then
 * released.
 */
int worker_start(struct worker *w, const struct worker_config *cfg, struct diag *d);

/* Stops the thread (wakes its sleep; a request in flight ends first),
 * joins it and releases *w. */
void worker_stop(struct worker *w);

/* True once a stop was asked: a turn that writes many objects ends. */
bool worker_stopping(const struct worker *w);

/* Logs `warn msg="<what>" error="<text>"`, when text is not the error
 * logged last (a failure retried every few seconds is said once). */
void worker_failed(struct worker *w, const char *what, const char *text);

/* The last write went through: the next error is logged again. */
void worker_recovered(struct worker *w);

/* The seconds before the next try of a round that failed, failed_before
 * rounds having failed in a row before it: 2, 4, 8, 16, 32, never more
 * than cap_s (a CRD just created answers 429 for a moment). */
unsigned worker_retry_s(unsigned failed_before, unsigned cap_s);

#endif
