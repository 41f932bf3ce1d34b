/*
 * k8s: Kubernetes name and quantity syntax, as the apiserver validates it.
 *
 * Pure functions on NUL-terminated strings; nothing allocates.
 */
#ifndef GPUGATE_K8S_H
#define GPUGATE_K8S_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* RFC 1123 label: [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most 63 bytes. */
bool k8s_dns_label_valid(const char *s);

/*
 * RFC 1123 subdomain as the apiserver checks it (object names, label key
 * prefixes): dot-separated labels, at most 253 bytes in all; unlike DNS,
 * a label may be longer than 63 bytes.
 */
bool k8s_dns_subdomain_valid(const char *s);

/* The longest qualified name: a 253-byte prefix, '/', a 63-byte name. */
#define K8S_QUALIFIED_NAME_MAX (253 + 1 + 63)

/*
 * Qualified name, as used by label keys and resource names:
 * [prefix/]name, prefix a DNS subdomain, name at most 63 bytes of
 * [A-Za-z0-9._-] that starts and ends alphanumeric.
 */
bool k8s_qualified_name_valid(const char *s);

/* Label value: empty, or at most 63 bytes like the name part above. */
bool k8s_label_value_valid(const char *s);

/* Environment variable name: [-._a-zA-Z][-._a-zA-Z0-9]*. */
bool k8s_env_name_valid(const char *s);

/*
 * Resource quantity ("500m", "96", "1000Gi", "1e3").  Negative quantities
 * are refused (no request may be negative).
 */
bool k8s_quantity_valid(const char *s);

/*
 * A quantity that denotes a whole number of units ("8", "2k", "1e2"):
 * stores it in *out and returns 0; returns -1 when s is not a quantity, is
 * fractional ("1500m", "0.5"), or does not fit in int64_t.
 */
int k8s_quantity_whole(const char *s, int64_t *out);

/*
 * Compares quantities a and b exactly ("81559Mi" and "80Gi", "1.5k" and
 * "1500", "100m" and "0.1"): *cmp < 0, 0 or > 0 as a is less than, equal
 * to or more than b.  Returns 0, or -1 when either is not a quantity.
 */
int k8s_quantity_cmp(const char *a, const char *b, int *cmp);

/*
 * Compares the exact sum of n quantities with b, as k8s_quantity_cmp does
 * ("40Gi" against "5Gi" seven times and "5Gi"): term(ctx, i) gives the
 * i-th (NULL: none, it adds nothing).  Returns 0, or -1 when a term or b
 * is not a quantity.  No allocation.
 */
int k8s_quantity_sum_cmp(size_t n, const char *(*term)(void *ctx, size_t i), void *ctx,
			 const char *b, int *cmp);

/*
 * A DRA attribute or capacity name (a dra block's, policy/policy.h) as
 * resource.k8s.io qualifies it: one with a domain ("example.com/rack") is
 * that domain's, one without ("productName") the driver's.  The template's
 * CEL indexes by the domain (policy/dra-template.h); a ResourceSlice's
 * device names it "<domain>/<id>" (policy/pool.h).
 */
struct k8s_dra_name {
	const char *domain; /* domain_len bytes, not NUL-terminated */
	size_t domain_len;
	const char *id;
};
void k8s_dra_name_split(const char *driver, const char *name,
			struct k8s_dra_name *out);

#endif
