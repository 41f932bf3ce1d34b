/*
 * controller: the thread of a background controller of gpugate serve
 * (webhook/class-sync.h, webhook/claim-sync.h): its Kubernetes client, its
 * stop flag and sleeps (base/nap.h), started and stopped in one place.
 *
 * The controller embeds a struct controller and passes its own run
 * function; run loops until ctl->nap.stop, sleeping with nap_sleep() and
 * giving &ctl->nap.stop to the calls that look at it.
 */
#ifndef GPUGATE_CONTROLLER_H
#define GPUGATE_CONTROLLER_H

#include "base/nap.h"

#include <pthread.h>

struct diag;
struct kube;
struct kube_config;

struct controller {
	struct kube *kube;
	struct nap nap;
	pthread_t thread;
};

/* Makes the client from kc and starts run(arg) on a thread of its own.
 * -1 (why in d, with name): nothing was started and nothing is held. */
int controller_start(struct controller *ctl, const char *name,
		     const struct kube_config *kc, void *(*run)(void *), void *arg,
		     struct diag *d);
/* Stops the thread (within a second, or when its request in flight ends)
 * and frees what controller_start() made. */
void controller_stop(struct controller *ctl);

#endif
