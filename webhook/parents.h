/*
 * parents: reads, while an admission review waits, the object a scale
 * subresource request is about (the Deployment of a deployments/scale),
 * for handler_admit() (webhook/handler.h, struct handler_parents).
 *
 * One GET per judged scale (only a raise of replicas is judged, and the
 * webhook registration sends no other), on a client borrowed from a small
 * pool (kube/clients.h), bounded by PARENTS_TIMEOUT_MS: well within the
 * webhook's timeoutSeconds, so that a slow apiserver costs an unjudged
 * scale (let through with a warning), never a timed-out review.
 */
#ifndef GPUGATE_PARENTS_H
#define GPUGATE_PARENTS_H

#include <jansson.h>
#include <stddef.h>

struct diag;
struct kube_config;
struct parents;

#define PARENTS_TIMEOUT_MS 2000u

/* Reads through cfg (which must outlive it).  NULL with a message when
 * out of memory. */
struct parents *parents_new(const struct kube_config *cfg, struct diag *d);
void parents_free(struct parents *p);

/* struct handler_parents's get, ctx a struct parents. */
json_t *parents_get(void *ctx, const char *path, char *err, size_t errsz);

#endif
