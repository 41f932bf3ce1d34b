/*
 * shared-io: where the shared usage backend (usage/shared-backend.h) keeps
 * its documents: one ConfigMap per quota domain in gpugate's namespace,
 * read and written with kube_cas_update() (kube/client.h), decoded and
 * encoded by kube/reservations-json.h.  It is the struct usage_shared_io
 * that gpugate serve hands the backend.
 *
 * Any thread may call kube_shared_io_transact(): each call borrows one of
 * a small pool of API clients (kube/clients.h).
 */
#ifndef GPUGATE_KUBE_SHARED_IO_H
#define GPUGATE_KUBE_SHARED_IO_H

#include "usage/shared-backend.h"

#include <stddef.h>

struct diag;
struct kube_config;
struct kube_shared_io;

/* The documents of namespace ns (copied); budget_ms bounds each transact
 * (0: KUBE_CAS_BUDGET_MS).  NULL with a message when out of memory. */
struct kube_shared_io *kube_shared_io_new(const struct kube_config *cfg,
					  const char *ns, unsigned budget_ms,
					  struct diag *d);
void kube_shared_io_free(struct kube_shared_io *io);

/* struct usage_shared_io's transact, io a struct kube_shared_io. */
int kube_shared_io_transact(void *io, const char *domain, usage_shared_fn *fn,
			    void *ctx, char *err, size_t errsz);

#endif
