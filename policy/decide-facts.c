/*
 * decide: what the rules read of a workload's facts: labels of a pod or
 * its Job or template, a container's units of a resource, the flavor
 * resources it names, a count label.
 */
#include "policy/decide-int.h"

#include "policy/k8s.h"
#include "policy/kinds.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* ---- facts helpers ---------------------------------------------------- */

const char *decide_kind_name(const struct workload *wl)
{
	return wl->def->kind;
}

const char *decide_label(const struct workload *wl, const char *key)
{
	const char *v = wl_get(wl->pod.labels, wl->pod.n_labels, key);

	if (!v && (wl->kind == WL_JOB || wl->kind == WL_TEMPLATE))
		v = wl_get(wl->labels, wl->n_labels, key);
	return v;
}

const char *decide_annotation(const struct workload *wl,
					 const char *key)
{
	const char *v = wl_get(wl->pod.annotations, wl->pod.n_annotations, key);

	if (!v && (wl->kind == WL_JOB || wl->kind == WL_TEMPLATE))
		v = wl_get(wl->annotations, wl->n_annotations, key);
	return v;
}

/* Units of a resource in a container: its limit, else its request. */
bool decide_container_units(const struct wl_container *ct, const char *res,
			    int64_t *units, const char **raw)
{
	const char *q = NULL;

	for (size_t i = 0; i < ct->n_limits && !q; i++)
		if (strcmp(ct->limits[i].name, res) == 0)
			q = ct->limits[i].quantity ? ct->limits[i].quantity : "";
	for (size_t i = 0; i < ct->n_requests && !q; i++)
		if (strcmp(ct->requests[i].name, res) == 0)
			q = ct->requests[i].quantity ? ct->requests[i].quantity : "";
	if (raw)
		*raw = q;
	if (!q)
		return false;
	if (k8s_quantity_whole(q, units) < 0)
		*units = -1;
	return true;
}

bool decide_has_resource(const struct wl_resource *r, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(r[i].name, name) == 0)
			return true;
	return false;
}

/* Whole decimal 1..max without sign or leading zero. */
bool decide_parse_count(const char *s, unsigned max, unsigned *out)
{
	unsigned v = 0;

	if (!s || !*s || (s[0] == '0'))
		return false;
	for (const char *c = s; *c; c++) {
		if (*c < '0' || *c > '9')
			return false;
		v = v * 10 + (unsigned)(*c - '0');
		if (v > max)
			return false;
	}
	*out = v;
	return v >= 1;
}
