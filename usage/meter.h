/*
 * meter: GPU-seconds per tenant and flavor, from the pods' own run times
 * (gpugate_gpu_seconds_total; docs/operations.md "Metering").
 *
 * A GPU pod of a tenant (the charge rule: tenant, flavor, units per pod)
 * runs from status.startTime until it is Succeeded or Failed (the latest
 * container finishedAt; the time it was seen so when none is given) or is
 * gone (the DELETED event, or the relist that no longer lists it).  It is
 * charged units x the seconds of that run that fall after the meter's
 * start (this process's): what ran before was a predecessor's to count,
 * and a Prometheus counter resets with the process anyway (increase()
 * spans resets).  Times come from pod status, so a watch gap neither
 * loses nor stretches a run that status describes; a pod that is gone is
 * charged once, when it goes, and never again (a terminal pod listed after
 * a restart ended before the meter started: nothing).
 *
 * Thread-safe (one mutex).  Times are Unix seconds.
 */
#ifndef GPUGATE_METER_H
#define GPUGATE_METER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What the meter needs of one pod (webhook/node-facts.c pod_run). */
struct meter_pod {
	const char *uid;
	const char *tenant, *flavor; /* NULL: not a GPU pod of a tenant */
	int64_t units;               /* per pod */
	int64_t start;               /* status.startTime; 0: not started */
	int64_t end;                 /* when it finished; 0: still running */
};

struct meter;

/* now: the clock (NULL: time()); the meter starts counting at its now(). */
struct meter *meter_new(int64_t (*now)(void));
void meter_free(struct meter *m);

/* A pod as listed or watched (ADDED, MODIFIED).  A pod with no tenant is
 * forgotten (it may have had one under another policy: it is closed). */
void meter_put(struct meter *m, const struct meter_pod *p);
/* DELETED: charged up to its end, or now, and forgotten. */
void meter_gone(struct meter *m, const char *uid);
/* A whole list of pods: those not put between begin and end are gone. */
void meter_relist_begin(struct meter *m);
void meter_relist_end(struct meter *m);

typedef void (*meter_fn)(void *ctx, const char *tenant, const char *flavor,
			 double gpu_seconds);
/* The totals so far, one call per tenant and flavor seen, in no order. */
void meter_foreach(struct meter *m, meter_fn fn, void *ctx);

size_t meter_pods(struct meter *m);

#endif
