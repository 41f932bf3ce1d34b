#include "base/nap.h"

#include <time.h>

void nap_init(struct nap *n)
{
	pthread_condattr_t attr;

	n->stop = false;
	n->woken = false;
	pthread_mutex_init(&n->mu, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&n->cv, &attr);
	pthread_condattr_destroy(&attr);
}

void nap_release(struct nap *n)
{
	pthread_cond_destroy(&n->cv);
	pthread_mutex_destroy(&n->mu);
}

void nap_sleep(struct nap *n, unsigned ms)
{
	struct timespec until;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&n->mu);
	while (!n->stop && !n->woken &&
	       pthread_cond_timedwait(&n->cv, &n->mu, &until) == 0)
		;
	n->woken = false;
	pthread_mutex_unlock(&n->mu);
}

void nap_stop(struct nap *n)
{
	pthread_mutex_lock(&n->mu);
	n->stop = true;
	pthread_cond_broadcast(&n->cv);
	pthread_mutex_unlock(&n->mu);
}

void nap_wake(struct nap *n)
{
	pthread_mutex_lock(&n->mu);
	n->woken = true;
	pthread_cond_broadcast(&n->cv);
	pthread_mutex_unlock(&n->mu);
}
