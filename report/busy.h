/*
 * busy: each GPU pod's mean utilization over the last hour, read from the
 * cluster's Prometheus for `gpugate pool --prometheus-url` (a tenant's busy
 * share, policy/idle.h idle_share_of).  gpugate serve's GET /pool has the
 * same figures from the idle controller's rounds (controllers/idle.h).
 *
 * DCGM_FI_PROF_GR_ENGINE_ACTIVE first, DCGM_FI_DEV_GPU_UTIL for the pods
 * the first has no series for (SPEC section 10), the queries of
 * policy/idle.c (IDLE_Q_RECENT over IDLE_SHARE_WINDOW_S).
 */
#ifndef GPUGATE_REPORT_BUSY_H
#define GPUGATE_REPORT_BUSY_H

#include <stddef.h>
#include <stdint.h>

struct diag;
struct idle_util;
struct prom;

/* The pods' hours at now_ms (0: Prometheus' now) into *out (free it with
 * busy_free()): 0, or -1 with a message in d (nothing in *out). */
int busy_read(struct prom *p, int64_t now_ms, struct idle_util **out, size_t *n,
	      struct diag *d);
void busy_free(struct idle_util *u, size_t n);

#endif
