/*
 * priorities: the cluster's PriorityClasses (scheduling.k8s.io/v1), kept
 * by the feed (kube/feed.h) and read at admission: the priority a Job's
 * pods will run at is its template's priorityClassName (or the class's, or
 * the globalDefault one), which only these resolve.  What
 * reclaimWithinCohort LowerPriority compares (policy/decide.h
 * decide_request_priority()) and what a Job's reclaim rank is.
 *
 * Thread-safe (one mutex).  A cluster has a few dozen classes at most: a
 * lookup is a scan.
 */
#ifndef GPUGATE_PRIORITIES_H
#define GPUGATE_PRIORITIES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct priority_view;
struct priorities;

/* NULL when out of memory. */
struct priorities *priorities_new(void);
/* NULL is a no-op. */
void priorities_free(struct priorities *pr);

/* ADDED/MODIFIED (or listed): class `name` is `value`, the globalDefault
 * one or not.  -1: out of memory, or more than PRIORITIES_MAX classes. */
#define PRIORITIES_MAX 4096
int priorities_put(struct priorities *pr, const char *name, int32_t value,
		   bool global_default);
/* DELETED. */
void priorities_delete(struct priorities *pr, const char *name);
/* A relist: classes not put again between begin and end are dropped. */
void priorities_relist_begin(struct priorities *pr);
void priorities_relist_end(struct priorities *pr);

/* The value of class `name`; name NULL: of the globalDefault class.
 * false when there is no such class (pr NULL: none is known). */
bool priorities_value(struct priorities *pr, const char *name, int32_t *out);
/* How many classes are known. */
size_t priorities_count(struct priorities *pr);

/* The decision's read-only view of pr (pr NULL: knows none). */
void priorities_view(struct priorities *pr, struct priority_view *out);

#endif
