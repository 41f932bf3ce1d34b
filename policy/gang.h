/*
 * gang: the words of gang start (SPEC section 9), shared by admission
 * (policy/decide-gang.c decides a Job's route, webhook/apply.c writes it),
 * the probe that finds what the apiserver serves (controllers/gang-probe.c)
 * and the controller that starts gangs (controllers/gang-start.c).
 *
 * A Job of a `gang: true` class whose gang (min(parallelism, completions))
 * has more than one pod starts all or nothing through one route, chosen
 * at its admission and stamped on it (STAMP_GANG_ROUTE), so that a later
 * change of what the cluster serves never changes a Job in flight:
 *
 *   workload   Job spec.scheduling.schedulingPolicy.gang (+ topology);
 *              the Job controller makes the Workload and PodGroup
 *   podgroup   gpugate makes the Workload and PodGroup (named after the
 *              gang id), the template names it in
 *              spec.schedulingGroup.podGroupName
 *   gates      the template carries the scheduling gate GANG_GATE; the
 *              gang-start controller removes it from every pod of the
 *              gang at once when the pool has room for all of them
 *
 * Pure: no I/O.
 */
#ifndef GPUGATE_GANG_H
#define GPUGATE_GANG_H

#include <stdbool.h>

/* The scheduling gate of route gates (the same name as the gang label). */
#define GANG_GATE "gpugate.io/gang"
/* The annotation on a Job (and its template, so that its pods carry it):
 * the route gpugate chose at admission, gang_route_name(). */
#define STAMP_GANG_ROUTE "gpugate.io/gang-route"
/* The scheduler every pod gets when it names none. */
#define GANG_DEFAULT_SCHEDULER "default-scheduler"

enum gang_route {
	GANG_NONE,     /* no gang start: pods start as the scheduler places them */
	GANG_WORKLOAD, /* route 1: Job spec.scheduling */
	GANG_PODGROUP, /* route 2: gpugate's Workload and PodGroup */
	GANG_GATES,    /* route 3: gpugate's scheduling gate */
};

/* "none", "workload", "podgroup", "gates". */
const char *gang_route_name(enum gang_route r);
/* The route named s (one of the names above); false: no such name. */
bool gang_route_parse(const char *s, enum gang_route *out);

/*
 * What the cluster serves, as the probe last found it (a bit set the
 * probe swaps in; the webhook reads it on every Job admission).
 */
enum {
	/* The probe has answered at least once; without it nothing else is
	 * known, and a Job of a gang class takes route gates when a
	 * controller runs to release them (GANG_SERVES_CONTROLLER), else
	 * none. */
	GANG_SERVES_KNOWN = 1u << 0,
	/* A dry-run Job kept spec.scheduling.schedulingPolicy.gang. */
	GANG_SERVES_JOB_SCHEDULING = 1u << 1,
	/* scheduling.k8s.io/v1beta1 lists workloads and podgroups. */
	GANG_SERVES_PODGROUP = 1u << 2,
	/* A dry-run PodGroup kept schedulingConstraints.topology (the
	 * apiserver has TopologyAwareWorkloadScheduling). */
	GANG_SERVES_TOPOLOGY = 1u << 3,
	/* gpugate runs the gang-start controller (it has an API client): the
	 * gates route, and route podgroup's objects, have someone to act. */
	GANG_SERVES_CONTROLLER = 1u << 4,
};

/* The route settings.gangStart auto takes with what is served: workload
 * when the Job field is kept, else podgroup when it is served and gpugate
 * runs its controller, else gates when it does, else none. */
enum gang_route gang_auto_route(unsigned served);

#endif
