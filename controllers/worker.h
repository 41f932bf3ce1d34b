/*
 * worker: what a background controller of gpugate serve that writes API
 * objects owns besides its own state (webhook/class-sync.h,
 * webhook/quota-sync.h): its API client, its thread and the nap that stops
 * it, and the last error it logged.  Start, stop and join written once.
 */
#ifndef GPUGATE_WORKER_H
#define GPUGATE_WORKER_H

#include "base/nap.h"

#include <pthread.h>
#include <stdint.h>

struct diag;
struct kube;
struct kube_config;

struct worker {
	struct kube *kube;   /* the thread's own client */
	struct nap nap;      /* nap.stop: end the loop */
	pthread_t thread;
	uint64_t last_error; /* hash of the error last logged; 0: none */
};

/*
 * In caller's storage: a client for kube, then run(arg) on a new thread
 * (it loops until w->nap.stop).  -1 with a message naming `name` when
 * either cannot be made; *w is then released.
 */
int worker_start(struct worker *w, const struct kube_config *kube,
		 void *(*run)(void *), void *arg, const char *name, struct diag *d);
/* Stops the thread (wakes its nap; a request in flight ends first), joins
 * it and releases *w. */
void worker_stop(struct worker *w);

/* Logs `warn msg="<what>" error="<text>"`, when text is not the error
 * logged last (a failure retried every few seconds is said once). */
void worker_failed(struct worker *w, const char *what, const char *text);

#endif
