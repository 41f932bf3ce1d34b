/*
 * pvcs: the cluster's PersistentVolumeClaims, as far as gpugate needs them:
 * which exist, in which namespace, and which can be mounted by many nodes
 * at once (ReadWriteMany).  Kept by the feed (kube/feed.h) and read at
 * admission: a preemptible workload gets the checkpoint volume, a claim
 * named by the policy (checkpoint.claimName, "{tenant}-checkpoints"), and
 * its pods do not start while that claim is missing, or (several pods on
 * several nodes) cannot all mount it.  policy/decide-plan.c warns then.
 *
 * Thread-safe (one mutex); a lookup is a hash probe.
 */
#ifndef GPUGATE_PVCS_H
#define GPUGATE_PVCS_H

#include <stdbool.h>
#include <stddef.h>

struct pvc_view;
struct pvcs;

/* NULL when out of memory. */
struct pvcs *pvcs_new(void);
/* NULL is a no-op. */
void pvcs_free(struct pvcs *pv);

/* ADDED/MODIFIED (or listed).  -1: out of memory. */
int pvcs_put(struct pvcs *pv, const char *ns, const char *name, bool many_nodes);
/* DELETED. */
void pvcs_delete(struct pvcs *pv, const char *ns, const char *name);
/* A relist: claims not put again between begin and end are dropped. */
void pvcs_relist_begin(struct pvcs *pv);
void pvcs_relist_end(struct pvcs *pv);
/* How many claims are known.  Until the first whole list (relist_end),
 * the view answers PVC_UNKNOWN. */
size_t pvcs_count(struct pvcs *pv);

/* The decision's read-only view (policy/decide.h struct pvc_view). */
void pvcs_view(struct pvcs *pv, struct pvc_view *out);

#endif
