#include "webhook/holder.h"

#include "policy/policy.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

struct holder_ref {
	struct policy *p;
	atomic_int refs;
};

struct holder {
	pthread_mutex_t mu;
	struct holder_ref *cur;
	uint64_t generation;
};

static struct holder_ref *ref_new(struct policy *p)
{
	struct holder_ref *r = malloc(sizeof(*r));

	if (!r)
		return NULL;
	r->p = p;
	atomic_init(&r->refs, 1); /* the holder's own reference */
	return r;
}

struct holder *holder_new(struct policy *p)
{
	struct holder *h = calloc(1, sizeof(*h));

	if (!h)
		return NULL;
	h->cur = ref_new(p);
	if (!h->cur) {
		free(h);
		return NULL;
	}
	pthread_mutex_init(&h->mu, NULL);
	return h;
}

void holder_release(struct holder_ref *ref)
{
	if (ref && atomic_fetch_sub(&ref->refs, 1) == 1) {
		policy_free(ref->p);
		free(ref);
	}
}

void holder_free(struct holder *h)
{
	if (!h)
		return;
	holder_release(h->cur);
	pthread_mutex_destroy(&h->mu);
	free(h);
}

const struct policy *holder_acquire(struct holder *h, struct holder_ref **ref)
{
	struct holder_ref *r;

	pthread_mutex_lock(&h->mu);
	r = h->cur;
	atomic_fetch_add(&r->refs, 1);
	pthread_mutex_unlock(&h->mu);
	*ref = r;
	return r->p;
}

void holder_swap(struct holder *h, struct policy *p)
{
	struct holder_ref *r = ref_new(p), *old;

	if (!r) {
		/* Out of memory: keep serving the old policy. */
		policy_free(p);
		return;
	}
	pthread_mutex_lock(&h->mu);
	old = h->cur;
	h->cur = r;
	h->generation++;
	pthread_mutex_unlock(&h->mu);
	holder_release(old);
}

uint64_t holder_generation(struct holder *h)
{
	uint64_t g;

	pthread_mutex_lock(&h->mu);
	g = h->generation;
	pthread_mutex_unlock(&h->mu);
	return g;
}
