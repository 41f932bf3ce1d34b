#include "kube/clients.h"

#include "base/diag.h"
#include "kube/client.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

struct kube_clients {
	const struct kube_config *kube;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct kube *idle[KUBE_CLIENTS_MAX];
	size_t n_idle, n_made;
};

struct kube_clients *kube_clients_new(const struct kube_config *cfg, struct diag *d)
{
	struct kube_clients *c = calloc(1, sizeof(*c));

	if (!c) {
		diag_addf(d, "out of memory");
		return NULL;
	}
	c->kube = cfg;
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	return c;
}

void kube_clients_free(struct kube_clients *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n_idle; i++)
		kube_free(c->idle[i]);
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

struct kube *kube_clients_borrow(struct kube_clients *c, struct diag *d)
{
	struct kube *k = NULL;
	bool make = false;

	pthread_mutex_lock(&c->mu);
	while (!c->n_idle && c->n_made >= KUBE_CLIENTS_MAX)
		pthread_cond_wait(&c->cv, &c->mu);
	if (c->n_idle)
		k = c->idle[--c->n_idle];
	else
		make = true, c->n_made++;
	pthread_mutex_unlock(&c->mu);
	if (make) {
		k = kube_new(c->kube, d);
		if (!k) {
			pthread_mutex_lock(&c->mu);
			c->n_made--;
			pthread_cond_signal(&c->cv);
			pthread_mutex_unlock(&c->mu);
		}
	}
	return k;
}

void kube_clients_give_back(struct kube_clients *c, struct kube *k)
{
	pthread_mutex_lock(&c->mu);
	c->idle[c->n_idle++] = k;
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->mu);
}
