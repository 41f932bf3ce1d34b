/*
 * apply: carries out a decision's plan on the JSON object.
 *
 * The object is changed in place (callers pass a deep copy and diff it
 * against the original to get the JSON Patch, webhook/patch.h).  Every step
 * "ensures": it sets what is absent or different and leaves alone what the
 * user wrote, so applying the plan of an object that already went through
 * gpugate changes nothing (SPEC section 4: mutation is idempotent).
 */
#ifndef GPUGATE_APPLY_H
#define GPUGATE_APPLY_H

#include "policy/decide.h"

#include <jansson.h>

struct diag;

/* Returns 0, or -1 when out of memory or the object is not shaped as
 * expected (message in d). */
int apply_plan(json_t *object, const struct workload *wl,
	       const struct plan *pl, const struct policy *p, struct diag *d);

/*
 * The copy apply_plan() works on for wl (its kind says where the pod
 * template sits, policy/kinds.h): the containers it may change are copied
 * (shallowly), everything else is shared with object by reference count,
 * so that copying and diffing cost the size of what may change.  object is
 * never modified through the copy.  NULL when out of memory.
 */
json_t *apply_copy(const json_t *object, const struct workload *wl);

#endif
