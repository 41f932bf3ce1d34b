/*
 * charge (JSON): a Pod, Job or ResourceClaim object as the API shows it ->
 * struct usage_item, through the facts (webhook/facts.c) and the pure
 * charge rule (policy/charge.h, which says what an object holds).
 *
 * The usage feed (kube/feed.h) calls charge_item_current() on every object
 * it lists or is told about; kube/ knows neither the policy nor the facts,
 * so the daemon hands it this function and the policy holder.
 */
#ifndef GPUGATE_WEBHOOK_CHARGE_H
#define GPUGATE_WEBHOOK_CHARGE_H

#include "usage/usage.h"

#include <jansson.h>
#include <stdbool.h>

struct arena;
struct policy;

/*
 * What obj (a Pod, Job or ResourceClaim: kind) holds under p, in *out:
 * strings borrowed from obj and p, arrays from a.  Returns 0; -1 when obj
 * is not an object with metadata.uid.  An object gpugate cannot read (no
 * namespace, a field of the wrong type), outside every tenant or without a
 * flavor resource holds nothing: 0 with out->active false and no tenant.
 */
int charge_item(const struct policy *p, const json_t *obj, enum usage_kind kind,
		struct arena *a, struct usage_item *out);
/* The same, with the cluster's PriorityClasses (NULL: none known), from
 * which a Job's priority (its reclaim rank) is its template's class's
 * (policy/decide.h decide_priority()). */
struct priority_view;
int charge_item_with(const struct policy *p, const json_t *obj,
		     enum usage_kind kind, const struct priority_view *pv,
		     struct arena *a, struct usage_item *out);

/*
 * charge_item() under the current policy of holder (a struct holder *):
 * the feed's charge callback (struct feed_config).  The tenant and flavor
 * names are copied into a, so that *out stays valid after a policy reload
 * frees the policy it was computed under.  -1 also when no policy is
 * loaded or a runs out of memory.
 */
int charge_item_current(void *holder, const json_t *obj, enum usage_kind kind,
			struct arena *a, struct usage_item *out);

/* charge_item_current() with PriorityClasses too: source is a struct
 * charge_source (gpugate serve in API mode). */
struct holder;
struct priorities;
struct charge_source {
	struct holder *holder;
	struct priorities *priorities; /* NULL: none known */
};
int charge_item_source(void *source, const json_t *obj, enum usage_kind kind,
		       struct arena *a, struct usage_item *out);

#endif
