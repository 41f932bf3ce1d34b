#include "policy/dra.h"

#include "policy/k8s.h"
#include "policy/policy.h"

#include <string.h>

/* Far above any quota (POLICY_MAX_QUOTA): sums of hand-made counts stop
 * here instead of wrapping. */
#define UNITS_CAP ((int64_t)1 << 40)

static void note(struct dra_where *w, const struct wl_device_request *req,
		 const struct wl_device_request *sub)
{
	if (w->device_class)
		return; /* the first one is reported */
	w->request = req->name ? req->name : "";
	w->subrequest = sub ? (sub->name ? sub->name : "") : NULL;
	w->device_class = (sub ? sub : req)->device_class;
}

int64_t dra_device_units(const struct policy_flavor *f, const struct wl_device_request *d)
{
	const struct policy_dra_share *sh = f && f->dra ? f->dra->shared : NULL;
	struct k8s_dra_name want, got;
	int64_t q;

	if (!sh)
		return 1;
	k8s_dra_name_split(f->dra->driver, sh->name, &want);
	for (size_t i = 0; i < d->n_capacity; i++) {
		k8s_dra_name_split(f->dra->driver, d->capacity[i].key, &got);
		if (got.domain_len != want.domain_len ||
		    memcmp(got.domain, want.domain, got.domain_len) != 0 ||
		    strcmp(got.id, want.id) != 0)
			continue;
		if (k8s_quantity_whole(d->capacity[i].value, &q) < 0 || q < 0)
			break; /* a fraction of a byte: not knowable, the most */
		q = q / sh->per_unit_value + (q % sh->per_unit_value != 0);
		return q < 1 ? 1 : q > UNITS_CAP ? UNITS_CAP : q;
	}
	return sh->units_per_device;
}

int64_t dra_part_units(const struct policy_flavor *f, const struct wl_device_request *d)
{
	int64_t count = d->mode == WL_ALLOCATE_ALL ? DRA_ALL_DEVICES : d->count;
	int64_t per = dra_device_units(f, d);

	return per > 0 && count > UNITS_CAP / per ? UNITS_CAP : count * per;
}

/*
 * One exactly part (sub NULL) or one firstAvailable entry: the devices it
 * asks of the claim's flavor, or -1 when it asks for none of them.
 */
static int64_t devices(const struct policy *p, const struct wl_device_request *req,
		       const struct wl_device_request *sub, struct dra_claim *out)
{
	const struct wl_device_request *d = sub ? sub : req;
	const struct policy_flavor *f;

	if (!d->device_class || !policy_is_gpu_device_class(p, d->device_class))
		return -1;
	if (!out->gpu) {
		out->gpu = true;
		note(&out->first_gpu, req, sub);
	}
	if (d->mode == WL_ALLOCATE_ALL)
		note(&out->all, req, sub);
	f = policy_flavor_for_device_class(p, d->device_class);
	if (!f) {
		note(&out->raw, req, sub);
		return -1;
	}
	if (!out->flavor) {
		out->flavor = f;
		out->device_class = d->device_class;
	}
	if (f != out->flavor) {
		if (!out->two_flavors.device_class)
			out->other_flavor = f;
		note(&out->two_flavors, req, sub);
		return -1;
	}
	return dra_part_units(f, d);
}

void dra_decide(const struct policy *p, const struct wl_device_request *reqs,
		size_t n, struct dra_claim *out)
{
	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < n; i++) {
		const struct wl_device_request *r = &reqs[i];
		int64_t u = -1;

		if (!r->n_first_available) {
			u = devices(p, r, NULL, out);
		} else {
			/* One of them is allocated: the largest is what it may
			 * hold. */
			for (size_t k = 0; k < r->n_first_available; k++) {
				int64_t s = devices(p, r, &r->first_available[k], out);

				if (s > u)
					u = s;
			}
		}
		if (u > 0)
			out->units = out->units + u > UNITS_CAP ? UNITS_CAP
								: out->units + u;
	}
}
