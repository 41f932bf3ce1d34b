/*
 * holder: the current policy, shared by all server threads and swapped on
 * reload.
 *
 * A reader takes a reference for the length of one request; a reload puts
 * a new policy in place and the old one is freed when its last reader lets
 * go.  Readers never wait for a reload, and a reload never waits for
 * readers.
 */
#ifndef GPUGATE_HOLDER_H
#define GPUGATE_HOLDER_H

#include <stdint.h>

struct policy;
struct holder;
struct holder_ref;

/* Takes ownership of p (which may be NULL: nothing loaded yet). */
struct holder *holder_new(struct policy *p);
void holder_free(struct holder *h);

/* The current policy (NULL when none) and a reference to release. */
const struct policy *holder_acquire(struct holder *h, struct holder_ref **ref);
void holder_release(struct holder_ref *ref);

/* Takes ownership of p and makes it current. */
void holder_swap(struct holder *h, struct policy *p);

/* Incremented by every swap. */
uint64_t holder_generation(struct holder *h);

#endif
