/* TEMPORARY: the brief's API, replaced by the pick branch at merge. */
#ifndef GPUGATE_RECLAIM_H
#define GPUGATE_RECLAIM_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
struct policy;
struct policy_flavor;
struct usage_view;
struct reclaim_candidate {
	const char *uid;
	unsigned tenant;
	int64_t units;
	int32_t priority;
	int64_t admitted_ms;
	bool preemptible;
	bool signalled;
};
int64_t reclaim_deficit(const struct policy *p, int cohort_index, const struct policy_flavor *f, const struct usage_view *u);
size_t reclaim_pick(const struct policy *p, int cohort_index, const struct policy_flavor *f, const struct usage_view *u, const struct reclaim_candidate *c, size_t n, bool has_below, int32_t below_priority, size_t *picked, size_t cap, bool *covered);
#endif
