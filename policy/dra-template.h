/*
 * dra-template: the ResourceClaimTemplates through which the classes of a
 * DRA flavor get their devices (docs/design/dra.md, D1).  Pure: names,
 * and the text of what a template asks for; the keeper
 * (controllers/claim-templates.c) writes the objects, /mutate
 * (policy/decide-plan.c) names them in pods, the charge
 * (policy/charge.c) reads the class and count back from the name.
 *
 * One template per namespace, class and count:
 *
 *   gpugate.<class>.<count>.<hash>
 *
 * <class> is the class name when it is a DNS label (lower-case letters,
 * digits, '-', at most 63), else "c-" and 12 base-32 characters of a hash
 * of it; <hash> is the flavor's dra.hash.  A pod's entry
 * DRA_TEMPLATE_ENTRY in spec.resourceClaims names it, and its GPU
 * container uses that entry (resources.claims).
 */
#ifndef GPUGATE_POLICY_DRA_TEMPLATE_H
#define GPUGATE_POLICY_DRA_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>

struct policy;
struct policy_class;
struct policy_dra;

/* The pod's spec.resourceClaims entry (and container claim) gpugate owns. */
#define DRA_TEMPLATE_ENTRY "gpugate-gpu"
/* Every template name gpugate makes starts so; nobody else may use it. */
#define DRA_TEMPLATE_PREFIX "gpugate."
/* The one request of a template's spec.spec.devices.requests. */
#define DRA_TEMPLATE_REQUEST "gpu"
/* A name: "gpugate." + 63 + "." + 3 + "." + 6, and the NUL. */
#define DRA_TEMPLATE_NAME_MAX 96
/* The most devices a template asks for (a claim's allocation results). */
#define DRA_TEMPLATE_COUNT_MAX 32
/* The CEL selector: 16 attributes of 64 + capacities + the driver. */
#define DRA_TEMPLATE_CEL_MAX 4096

/*
 * The template name of class c (of a DRA flavor) for count devices a pod,
 * in buf (DRA_TEMPLATE_NAME_MAX); false when c's flavor is no DRA flavor.
 */
bool dra_template_name(const struct policy_class *c, unsigned count, char *buf,
		       size_t size);

/*
 * The class and count a template name stands for under p: the class
 * whose name (or "c-" hash) it carries, of a DRA flavor, and a count
 * within the class's range; NULL otherwise (not gpugate's form, an
 * unknown class, a count out of range).  *current: the hash is the
 * flavor's today (false: made under an earlier dra block).
 */
const struct policy_class *dra_template_parse(const struct policy *p,
					      const char *name, unsigned *count,
					      bool *current);

/* Whether name has gpugate's prefix (a template nobody else may write). */
bool dra_template_is_gpugates(const char *name);

/*
 * The CEL expression of d's device selector, in buf: the driver, each
 * attribute's string equality, each minimum capacity (compareTo), joined
 * by &&; d's extra selectors are separate entries of the request, not
 * part of it.  Returns its length, or -1 when it does not fit.
 *
 *   device.driver == 'gpu.nvidia.com' &&
 *   device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3' &&
 *   device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0
 */
int dra_template_cel(const struct policy_dra *d, char *buf, size_t size);

/*
 * What a pod's share of units asks of a shared flavor's capacity (the
 * template's capacity.requests, docs/policy.md "DRA flavors"): units x
 * perUnit, in buf, in perUnit's suffix where perUnit is a whole number
 * with one ("10Gi" x 3: "30Gi"), else as a plain number.  Its length, or
 * -1 when it does not fit or overflows.
 *
 * A shared flavor's CEL selector (dra_template_cel) also asks for
 * devices that allow multiple allocations:
 *   ... && device.allowMultipleAllocations
 */
struct policy_dra_share;
int dra_share_quantity(const struct policy_dra_share *sh, unsigned units, char *buf,
		       size_t size);

#endif
