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
 * The copy of object to pass to apply_plan(): every object and array is
 * new, strings, numbers and metadata.managedFields are shared with object
 * (apply_plan() replaces values, never edits one in place, and never
 * touches managedFields, often a third of a Pod).  Both trees stay valid
 * on their own: sharing is by reference count.  NULL when out of memory.
 */
json_t *apply_copy(const json_t *object);

#endif
