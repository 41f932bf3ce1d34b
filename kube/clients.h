/*
 * clients: a small pool of API clients that any thread may borrow.
 *
 * A struct kube serves one thread at a time (kube/client.h).  Work done
 * while an admission review waits (the shared usage store's documents, the
 * parent a kubectl scale is about) borrows one here, so that concurrent
 * admissions neither queue behind one connection nor open a new one each
 * time: a client given back keeps its connection for the next borrower.
 */
#ifndef GPUGATE_KUBE_CLIENTS_H
#define GPUGATE_KUBE_CLIENTS_H

#include <stddef.h>

struct diag;
struct kube;
struct kube_config;

/* The clients of one pool, at most. */
#define KUBE_CLIENTS_MAX 8

struct kube_clients;

/* Clients of cfg (which must outlive the pool).  NULL with a message when
 * out of memory. */
struct kube_clients *kube_clients_new(const struct kube_config *cfg, struct diag *d);
void kube_clients_free(struct kube_clients *c);

/* An idle client, a new one while fewer than KUBE_CLIENTS_MAX exist, else
 * the next one given back (the caller waits).  NULL with a message when a
 * new one could not be made. */
struct kube *kube_clients_borrow(struct kube_clients *c, struct diag *d);
void kube_clients_give_back(struct kube_clients *c, struct kube *k);

#endif
