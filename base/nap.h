/*
 * nap: a stop flag and the sleeps it cuts short, for a thread that loops
 * until another thread tells it to end (base/thread.h runs such a loop).
 *
 * The thread sleeps with nap_sleep() between tries and passes &n->stop to
 * the calls that look at a flag themselves (kube_request(), kube_watch());
 * another thread calls nap_stop(), which wakes a sleep at once, or
 * nap_wake(), which ends only the sleep under way (or the next one).
 */
#ifndef GPUGATE_NAP_H
#define GPUGATE_NAP_H

#include <pthread.h>
#include <stdbool.h>

struct nap {
	volatile bool stop; /* set by nap_stop(), never cleared */
	bool woken;         /* under mu: nap_wake() since the last sleep */
	pthread_mutex_t mu; /* with cv: the sleeps */
	pthread_cond_t cv;
};

/* Caller's storage; the sleeps run on CLOCK_MONOTONIC (a jump of the wall
 * clock neither stretches nor shortens them). */
void nap_init(struct nap *n);
void nap_release(struct nap *n);

/* Sleeps ms, or less when stopped (at once when already) or woken (at
 * once when woken since the last sleep; the wake is used up). */
void nap_sleep(struct nap *n, unsigned ms);

/* Sets stop and wakes the sleeper; from any thread. */
void nap_stop(struct nap *n);

/* Ends the sleep under way, or else the next one, once; stop is left
 * alone.  From any thread. */
void nap_wake(struct nap *n);

#endif
