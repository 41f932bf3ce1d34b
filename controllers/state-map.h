/*
 * state-map: a ConfigMap of gpugate's own namespace in which a controller
 * keeps its records (gpugate-reclaim, docs/design/reclaim.md "State";
 * gpugate-gangs, docs/design/gang-start.md "Route 3"): read once a round,
 * written whole at the version read, before the round acts.  Tenants
 * bound to `edit` in their namespaces cannot touch it.
 */
#ifndef GPUGATE_STATE_MAP_H
#define GPUGATE_STATE_MAP_H

#include <jansson.h>

struct diag;
struct kube;

/*
 * GETs ConfigMap name of namespace ns: 0 with *cm (the object; NULL when
 * there is none: 404), or the failure (an HTTP status, -1: no answer)
 * with a message in d and *cm NULL.
 */
int state_map_read(struct kube *k, const char *ns, const char *name,
		   unsigned timeout_ms, json_t **cm, struct diag *d);

/*
 * Writes data (a JSON object of strings; the reference is taken) as the
 * ConfigMap's data: PUT at the resourceVersion of read (the object
 * state_map_read gave), or POST when read is NULL.  Labelled
 * app.kubernetes.io/managed-by=gpugate.  0, or the failure (409: another
 * writer came first; the caller does nothing this round) with d.
 */
int state_map_write(struct kube *k, const char *ns, const char *name,
		    const json_t *read, json_t *data, unsigned timeout_ms, struct diag *d);

#endif
