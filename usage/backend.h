/*
 * usage/backend.h: what a usage store implements (usage/usage.h is what
 * callers see).  A backend embeds struct usage_store as the first member of
 * its own state and points it at its table of operations; usage.c
 * dispatches every call through it.  An operation left NULL does nothing
 * (decide then answers as if nothing were in use).
 */
#ifndef GPUGATE_USAGE_BACKEND_H
#define GPUGATE_USAGE_BACKEND_H

#include "usage/usage.h"

struct usage_backend {
	const char *name;
	void (*decide)(struct usage_store *u, const struct policy *p,
		       const struct workload *wl, const struct quota_claim *claim,
		       bool reserve, bool force, struct quota_result *out);
	void (*release)(struct usage_store *u, const struct policy *p,
			const struct workload *wl);
	void (*observe)(struct usage_store *u, const struct usage_item *it);
	void (*forget)(struct usage_store *u, const char *uid);
	void (*relist_begin)(struct usage_store *u, enum usage_kind kind);
	void (*relist_end)(struct usage_store *u, enum usage_kind kind);
	void (*set_watching)(struct usage_store *u, bool up);
	size_t (*expire)(struct usage_store *u);
	int64_t (*used)(struct usage_store *u, const char *tenant,
			const char *flavor);
	size_t (*entries)(struct usage_store *u);
	void (*foreach)(struct usage_store *u, usage_sum_fn fn, void *ctx);
	void (*each_workload)(struct usage_store *u, usage_workload_fn fn, void *ctx);
	bool (*gang)(struct usage_store *u, const char *job_uid,
		     struct usage_gang *out);
	void (*free)(struct usage_store *u);
};

struct usage_store {
	const struct usage_backend *be;
};

#endif
