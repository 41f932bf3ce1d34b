/*
 * events: one Kubernetes Event (core/v1) about one object, as gpugate
 * writes them (source and reportingComponent "gpugate"), for
 * `kubectl describe`.  Used by the waiter (GPUWaiting) and the reclaimer
 * (GPUReclaim) and the health controller (GPUNodeUnhealthy...).
 */
#ifndef GPUGATE_EVENTS_H
#define GPUGATE_EVENTS_H

#include <stdint.h>

struct kube;

/* The object an Event is about. */
struct events_object {
	const char *api_version; /* "v1", "batch/v1" */
	const char *kind;        /* "Pod", "Job" */
	const char *namespace;   /* NULL: cluster-scoped (a "Node"): the Event
				  * goes to namespace "default" */
	const char *name;
	const char *uid;
};

/*
 * Writes an Event of reason and type ("Normal", "Warning") with message
 * about o, at `now` (Unix seconds), from reporting instance identity.  0,
 * or -1 with a log line (msg="event not written") when the API refused it
 * or did not answer within 5 s.
 */
int events_write(struct kube *k, const char *identity, const struct events_object *o,
		 const char *reason, const char *type, const char *message, int64_t now);

/* Unix seconds t as Kubernetes writes times ("2026-12-02T16:27:18Z"). */
void events_time(int64_t t, char *out, unsigned size);

#endif
