/*
 * nap: a stop flag and the sleeps it cuts short, for a thread that loops
 * until another thread tells it to end (kube/informer.c, kube/lease.c).
 *
 * The thread sleeps with nap_sleep() between tries and passes &n->stop to
 * the calls that look at a flag themselves (kube_request(), kube_watch());
 * another thread calls nap_stop(), which wakes a sleep at once.
 */
#ifndef GPUGATE_NAP_H
#define GPUGATE_NAP_H

#include <pthread.h>
#include <stdbool.h>

struct nap {
	volatile bool stop; /* set by nap_stop(), never cleared */
	pthread_mutex_t mu; /* with cv: the sleeps */
	pthread_cond_t cv;
};

/* Caller's storage; the sleeps run on CLOCK_MONOTONIC (a jump of the wall
 * clock neither stretches nor shortens them). */
void nap_init(struct nap *n);
void nap_release(struct nap *n);

/* Sleeps ms, or less when stopped (at once when already). */
void nap_sleep(struct nap *n, unsigned ms);

/* Sets stop and wakes the sleeper; from any thread. */
void nap_stop(struct nap *n);

#endif
