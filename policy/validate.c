/*
 * Semantic checks of a policy whose shape already fits the schema.
 *
 * Every check reports all of its findings (never only the first), each as
 * "FILE:LINE: thing \"name\": what is wrong", at the line of the field at
 * fault.  docs/policy.md lists every message with its cause and fix; the
 * unit tests assert each one verbatim.
 */
#include "policy/validate.h"

#include "base/diag.h"
#include "base/strmap.h"
#include "base/text.h"
#include "policy/dra.h"
#include "policy/idle.h"
#include "policy/k8s.h"
#include "policy/pool.h"
#include "policy/policy.h"
#include "policy/src.h"
#include "policy/srcpos.h"

#include <fnmatch.h>
#include <strings.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Labels and annotations that gpugate stamps (SPEC section 2). */
static const char *const stamped_keys[] = {
	"gpugate.io/tenant", "gpugate.io/flavor", "gpugate.io/preemptible",
	"gpugate.io/gang",   "gpugate.io/decision", "gpugate.io/borrowed",
};

struct vctx {
	const char *file;
	const struct src_policy *src;
	const struct srcpos *pos;
	struct diag *d;
	int errors;
	struct strmap flavors; /* name -> index */
	struct strmap classes;
	struct strmap tenants;
	struct strmap device_classes; /* DRA DeviceClass -> flavor << 16 | entry */
};

static void err(struct vctx *v, unsigned line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void err(struct vctx *v, unsigned line, const char *fmt, ...)
{
	char msg[900];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	diag_addf(v->d, "%s:%u: %s", v->file, line, msg);
	v->errors++;
}

static bool name_valid(const char *s)
{
	return s[0] && k8s_label_value_valid(s);
}

#define DEVICE_CLASS_RULE \
	"a DNS subdomain: lower-case letters, digits, '-' and '.'"

#define NAME_RULE                                                          \
	"at most 63 letters, digits, '-', '_' or '.', starting and ending " \
	"with a letter or digit"

/*
 * Registers name in map, reporting an invalid or duplicate name.  kind is
 * "flavor", "class" or "tenant"; list is the YAML key of its list.
 */
#define LINE() srcpos_line(v->pos, "%s[%u].name", list, i)
static void check_name(struct vctx *v, struct strmap *map, const char *kind,
		       const char *list, unsigned i, const char *name)
{
	size_t first;

	if (!name_valid(name)) {
		err(v, LINE(), "%s name \"%s\" is not valid (" NAME_RULE ")", kind,
		    name);
		return;
	}
	if (strmap_put(map, name, i, &first) == 1)
		err(v, LINE(), "duplicate %s \"%s\" (first defined at line %u)", kind,
		    name, srcpos_line(v->pos, "%s[%zu].name", list, first));
}
#undef LINE

static bool is_stamped_key(const char *key)
{
	for (size_t i = 0; i < sizeof(stamped_keys) / sizeof(stamped_keys[0]); i++)
		if (strcmp(key, stamped_keys[i]) == 0)
			return true;
	return false;
}

#define LINE() srcpos_line(v->pos, "settings.%s", field)
static void check_label_setting(struct vctx *v, const char *field,
				const char *value)
{

	if (!k8s_qualified_name_valid(value))
		err(v, LINE(), "settings: %s \"%s\" is not a valid label key", field,
		    value);
	else if (is_stamped_key(value))
		err(v, LINE(),
		    "settings: %s \"%s\" is a label gpugate stamps itself; choose "
		    "another key",
		    field, value);
}
#undef LINE

#define LINE() srcpos_line(v->pos, "settings.gpuDeviceClassNames[%u]", i)
static void check_gpu_device_classes(struct vctx *v,
				     const struct src_settings *s)
{
	for (unsigned i = 0; i < s->gpuDeviceClassNames_count; i++) {
		const char *dc = s->gpuDeviceClassNames[i];

		if (!k8s_dns_subdomain_valid(dc)) {
			err(v, LINE(),
			    "settings: gpuDeviceClassNames: \"%s\" is not a valid "
			    "DeviceClass name (" DEVICE_CLASS_RULE ")",
			    dc);
			continue;
		}
		for (unsigned j = 0; j < i; j++)
			if (strcmp(s->gpuDeviceClassNames[j], dc) == 0) {
				err(v, LINE(),
				    "settings: gpuDeviceClassNames lists \"%s\" twice",
				    dc);
				break;
			}
	}
}
#undef LINE

static void check_settings(struct vctx *v)
{
	const struct src_settings *s = v->src->settings;

	if (!s)
		return;
	if (s->classLabel)
		check_label_setting(v, "classLabel", s->classLabel);
	if (s->gpusLabel)
		check_label_setting(v, "gpusLabel", s->gpusLabel);
	if (strcmp(s->classLabel ? s->classLabel : "gpugate.io/class",
		   s->gpusLabel ? s->gpusLabel : "gpugate.io/gpus") == 0)
		err(v, srcpos_line(v->pos, "settings.gpusLabel"),
		    "settings: classLabel and gpusLabel must be different keys");
	if (s->gangTimeoutSeconds &&
	    (*s->gangTimeoutSeconds < 10 ||
	     *s->gangTimeoutSeconds > POLICY_MAX_GRACE_SECONDS))
		err(v, srcpos_line(v->pos, "settings.gangTimeoutSeconds"),
		    "settings: gangTimeoutSeconds %" PRId64
		    " must be between 10 and %d",
		    *s->gangTimeoutSeconds, POLICY_MAX_GRACE_SECONDS);
	check_gpu_device_classes(v, s);
}

/*
 * "key=value" for a node selector; checks both halves.  Returns the length
 * of the key or -1 when malformed (already reported).
 */
static int check_selector(struct vctx *v, unsigned line, const char *owner,
			  const char *kv)
{
	const char *eq = strchr(kv, '=');
	char key[K8S_QUALIFIED_NAME_MAX + 1];
	size_t klen;

	if (!eq || eq == kv) {
		err(v, line, "%s: nodeSelector \"%s\" is not of the form key=value",
		    owner, kv);
		return -1;
	}
	klen = (size_t)(eq - kv);
	if (klen >= sizeof(key)) {
		err(v, line,
		    "%s: nodeSelector key in \"%.60s...\" is too long (a label key "
		    "has at most %d characters)",
		    owner, kv, K8S_QUALIFIED_NAME_MAX);
		return -1;
	}
	memcpy(key, kv, klen);
	key[klen] = '\0';
	if (!k8s_qualified_name_valid(key)) {
		err(v, line, "%s: nodeSelector key \"%s\" is not a valid label key",
		    owner, key);
		return -1;
	}
	if (!k8s_label_value_valid(eq + 1)) {
		err(v, line,
		    "%s: nodeSelector value \"%s\" is not a valid label value",
		    owner, eq + 1);
		return -1;
	}
	return (int)klen;
}

/*
 * What the webhook registrations' matchConditions ("gpu-work",
 * charts/gpugate/templates/_helpers.tpl) leave out because every pod has
 * it: tolerations of node.kubernetes.io/ taints (the DefaultTolerationSeconds
 * plugin and the DaemonSet controller add them) and a nodeSelector of
 * kubernetes.io/os or kubernetes.io/arch.  A flavor that named them would
 * see pods the apiserver never sends.
 */
#define WEBHOOK_IGNORED_TAINTS "node.kubernetes.io/"

static bool webhook_ignored_selector(const char *kv, size_t klen)
{
	return (klen == 16 && strncmp(kv, "kubernetes.io/os", 16) == 0) ||
	       (klen == 18 && strncmp(kv, "kubernetes.io/arch", 18) == 0);
}

/* The tolerations at flavors[fi].<where> (tolerations, or a dra block's
 * device tolerations). */
#define LINE() srcpos_line(v->pos, "flavors[%u].%s[%u]", fi, where, t)
static void check_tolerations(struct vctx *v, unsigned fi, const char *owner,
			      const char *where, const struct src_toleration *tols,
			      unsigned n)
{
	for (unsigned t = 0; t < n; t++) {
		const struct src_toleration *tl = &tols[t];
		int op = tl->operator ? *tl->operator : SRC_OP_EQUAL;
		const char *key = tl->key ? tl->key : "";

		if (key[0] && !k8s_qualified_name_valid(key))
			err(v, LINE(), "%s: toleration key \"%s\" is not a valid label key",
			    owner, key);
		if (strncmp(key, WEBHOOK_IGNORED_TAINTS,
			    sizeof(WEBHOOK_IGNORED_TAINTS) - 1) == 0)
			err(v, LINE(),
			    "%s: toleration key \"%s\" is a taint Kubernetes sets "
			    "itself (" WEBHOOK_IGNORED_TAINTS "...), which every "
			    "DaemonSet pod tolerates and the webhooks are not sent "
			    "pods for: taint the GPU nodes with a key of your own "
			    "(e.g. nvidia.com/gpu) and tolerate that",
			    owner, key);
		if (op == SRC_OP_EXISTS && tl->value && tl->value[0])
			err(v, LINE(),
			    "%s: toleration with operator Exists must not have a value",
			    owner);
		if (op == SRC_OP_EQUAL && !key[0])
			err(v, LINE(),
			    "%s: toleration with operator Equal needs a key "
			    "(use operator Exists to tolerate every taint)",
			    owner);
		if (tl->value && !k8s_label_value_valid(tl->value))
			err(v, LINE(),
			    "%s: toleration value \"%s\" is not a valid label value",
			    owner, tl->value);
		if (tl->tolerationSeconds) {
			int64_t s = *tl->tolerationSeconds;
#define SLINE() srcpos_line(v->pos, "flavors[%u].%s[%u].tolerationSeconds", fi, where, t)

			if (!tl->effect || *tl->effect != SRC_EFFECT_NO_EXECUTE)
				err(v, SLINE(),
				    "%s: tolerationSeconds is only allowed with effect "
				    "NoExecute",
				    owner);
			else if (s < 0 || s > POLICY_MAX_TOLERATION_SECONDS)
				err(v, SLINE(),
				    "%s: tolerationSeconds %" PRId64
				    " must be between 0 and %d",
				    owner, s, POLICY_MAX_TOLERATION_SECONDS);
#undef SLINE
		}
	}
}
#undef LINE

/* A DRA DeviceClass names the units of one flavor at most. */
#define LINE() srcpos_line(v->pos, "flavors[%u].deviceClassNames[%u]", fi, k)
static void check_device_classes(struct vctx *v, unsigned fi, const char *owner,
				 const struct src_flavor *f)
{
	for (unsigned k = 0; k < f->deviceClassNames_count; k++) {
		const char *dc = f->deviceClassNames[k];
		size_t prev;

		if (!k8s_dns_subdomain_valid(dc)) {
			err(v, LINE(),
			    "%s: deviceClassNames: \"%s\" is not a valid DeviceClass "
			    "name (" DEVICE_CLASS_RULE ")",
			    owner, dc);
			continue;
		}
		if (strmap_put(&v->device_classes, dc, ((size_t)fi << 16) | k,
			       &prev) != 1)
			continue;
		if ((unsigned)(prev >> 16) == fi)
			err(v, LINE(), "%s: device class \"%s\" is listed twice",
			    owner, dc);
		else
			err(v, LINE(),
			    "%s: device class \"%s\" already maps to flavor \"%s\" "
			    "(line %u); a device class maps to one flavor at most",
			    owner, dc, v->src->flavors[prev >> 16].name,
			    srcpos_line(v->pos, "flavors[%zu].deviceClassNames[%zu]",
					prev >> 16, prev & 0xffff));
	}
}
#undef LINE

/* A DRA attribute or capacity name: a C identifier of at most 32, with an
 * optional domain (resource.k8s.io's QualifiedName). */
static bool dra_name_valid(const char *s, size_t n)
{
	const char *slash = memchr(s, '/', n);
	size_t start = 0;

	if (slash) {
		char domain[254];
		size_t dl = (size_t)(slash - s);

		if (dl == 0 || dl >= sizeof(domain))
			return false;
		memcpy(domain, s, dl);
		domain[dl] = '\0';
		if (!k8s_dns_subdomain_valid(domain))
			return false;
		start = dl + 1;
	}
	if (n - start < 1 || n - start > 32 ||
	    !(s[start] == '_' || (s[start] >= 'a' && s[start] <= 'z') ||
	      (s[start] >= 'A' && s[start] <= 'Z')))
		return false;
	for (size_t i = start; i < n; i++)
		if (!(s[i] == '_' || (s[i] >= 'a' && s[i] <= 'z') ||
		      (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9')))
			return false;
	return true;
}

/* A value written into a CEL string literal: printable, no ' or \. */
static bool dra_value_valid(const char *s)
{
	size_t n = strlen(s);

	if (n < 1 || n > 64)
		return false;
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f || *s == '\'' || *s == '\\')
			return false;
	return true;
}

/* attributes or minCapacity of a dra block: "name=value" entries. */
static void check_dra_pairs(struct vctx *v, unsigned fi, const char *owner,
			    const char *key, char *const *list, unsigned n,
			    bool quantity)
{
	for (unsigned k = 0; k < n; k++) {
		const char *kv = list[k], *eq = strchr(kv, '=');
		unsigned line = srcpos_line(v->pos, "flavors[%u].dra.%s[%u]", fi, key, k);
		size_t kl = eq ? (size_t)(eq - kv) : 0;

		if (!eq || !dra_name_valid(kv, kl)) {
			err(v, line,
			    "%s: dra.%s: \"%s\" is not name=value with a device "
			    "attribute name (a letter or _, then letters, digits or _, "
			    "at most 32; optionally domain/name)",
			    owner, key, kv);
			continue;
		}
		if (quantity ? !k8s_quantity_valid(eq + 1) : !dra_value_valid(eq + 1))
			err(v, line,
			    quantity ? "%s: dra.%s: \"%s\" is not a quantity (e.g. 80Gi)"
				     : "%s: dra.%s: \"%s\" must be 1 to 64 printable "
				       "characters without ' or \\",
			    owner, key, eq + 1);
		for (unsigned r = 0; r < k; r++)
			if (strncmp(list[r], kv, kl + 1) == 0) {
				err(v, line, "%s: dra.%s: \"%.*s\" is set twice", owner,
				    key, (int)kl, kv);
				break;
			}
	}
}

/* The most units one shared device may hold (dra.sharedCapacity). */
#define SHARED_UNITS_MAX 1000

/* A dra block's sharedCapacity, and the sharing it goes with: time-slicing
 * and mps through DRA share a device by its capacity, exclusive and mig
 * do not (docs/policy.md, "DRA flavors"). */
static void check_shared_capacity(struct vctx *v, unsigned fi, const char *owner,
				  const struct src_flavor *f)
{
	const struct src_shared_capacity *sc = f->dra->sharedCapacity;
	bool shares = f->sharing == POLICY_SHARING_TIME_SLICING ||
		      f->sharing == POLICY_SHARING_MPS;
	int64_t per_unit;

	if (shares && !sc) {
		err(v, srcpos_line(v->pos, "flavors[%u].sharing", fi),
		    "%s: sharing %s through DRA shares a device by its capacity: "
		    "add dra.sharedCapacity {name, perUnit, unitsPerDevice} (e.g. "
		    "{name: memory, perUnit: 10Gi, unitsPerDevice: 8})",
		    owner, policy_sharing_name((enum policy_sharing)f->sharing));
		return;
	}
	if (!sc)
		return;
	if (!shares)
		err(v, srcpos_line(v->pos, "flavors[%u].dra.sharedCapacity", fi),
		    "%s: dra.sharedCapacity shares a device, but sharing is %s: "
		    "use time-slicing or mps",
		    owner, policy_sharing_name((enum policy_sharing)f->sharing));
	if (!dra_name_valid(sc->name, strlen(sc->name)))
		err(v, srcpos_line(v->pos, "flavors[%u].dra.sharedCapacity.name", fi),
		    "%s: dra.sharedCapacity.name: \"%s\" is not a device capacity "
		    "name (a letter or _, then letters, digits or _, at most 32; "
		    "optionally domain/name)",
		    owner, sc->name);
	if (k8s_quantity_whole(sc->perUnit, &per_unit) < 0 || per_unit < 1)
		err(v, srcpos_line(v->pos, "flavors[%u].dra.sharedCapacity.perUnit", fi),
		    "%s: dra.sharedCapacity.perUnit: \"%s\" is not a whole quantity "
		    "above 0 (e.g. 10Gi)",
		    owner, sc->perUnit);
	else if (sc->unitsPerDevice >= 1 && sc->unitsPerDevice <= SHARED_UNITS_MAX &&
		 per_unit > INT64_MAX / sc->unitsPerDevice)
		err(v, srcpos_line(v->pos, "flavors[%u].dra.sharedCapacity.perUnit", fi),
		    "%s: dra.sharedCapacity: %" PRId64 " x %s is too large a "
		    "quantity", owner, sc->unitsPerDevice, sc->perUnit);
	if (sc->unitsPerDevice < 1 || sc->unitsPerDevice > SHARED_UNITS_MAX)
		err(v, srcpos_line(v->pos, "flavors[%u].dra.sharedCapacity.unitsPerDevice", fi),
		    "%s: dra.sharedCapacity.unitsPerDevice: %" PRId64 " is not 1 to %d",
		    owner, sc->unitsPerDevice, SHARED_UNITS_MAX);
}

/* The dra block of flavor fi (docs/policy.md, "DRA flavors"). */
static void check_dra(struct vctx *v, unsigned fi, const char *owner,
		      const struct src_flavor *f)
{
	const struct src_dra *d = f->dra;
	bool has_profile = false;

	if (!d)
		return;
	if (!k8s_dns_subdomain_valid(d->deviceClassName))
		err(v, srcpos_line(v->pos, "flavors[%u].dra.deviceClassName", fi),
		    "%s: dra.deviceClassName: \"%s\" is not a valid DeviceClass "
		    "name (" DEVICE_CLASS_RULE ")",
		    owner, d->deviceClassName);
	if (!k8s_dns_subdomain_valid(d->driver))
		err(v, srcpos_line(v->pos, "flavors[%u].dra.driver", fi),
		    "%s: dra.driver: \"%s\" is not a driver name (a DNS subdomain, "
		    "e.g. gpu.nvidia.com)",
		    owner, d->driver);
	check_dra_pairs(v, fi, owner, "attributes", d->attributes, d->attributes_count,
			false);
	check_dra_pairs(v, fi, owner, "minCapacity", d->minCapacity,
			d->minCapacity_count, true);
	check_tolerations(v, fi, owner, "dra.tolerations", d->tolerations,
			  d->tolerations_count);
	for (unsigned t = 0; t < d->tolerations_count; t++)
		if (d->tolerations[t].effect &&
		    *d->tolerations[t].effect == SRC_EFFECT_PREFER_NO_SCHEDULE)
			err(v, srcpos_line(v->pos, "flavors[%u].dra.tolerations[%u]", fi, t),
			    "%s: dra.tolerations: a device taint has no effect "
			    "PreferNoSchedule (NoSchedule or NoExecute)",
			    owner);
	for (unsigned k = 0; k < d->attributes_count; k++)
		if (strncmp(d->attributes[k], "profile=", 8) == 0)
			has_profile = true;
	if (f->sharing == POLICY_SHARING_MIG && !has_profile)
		err(v, srcpos_line(v->pos, "flavors[%u].dra", fi),
		    "%s: a mig flavor served through DRA names its partition's "
		    "profile (attributes: [\"profile=1g.10gb\"]): one flavor per "
		    "profile, its units are partitions",
		    owner);
	check_shared_capacity(v, fi, owner, f);
}

#define LINE() srcpos_line(v->pos, "flavors[%u].nodeSelector[%u]", i, s)
static void check_flavors(struct vctx *v)
{
	for (unsigned i = 0; i < v->src->flavors_count; i++) {
		const struct src_flavor *f = &v->src->flavors[i];
		char owner[300];

		snprintf(owner, sizeof(owner), "flavor \"%s\"", f->name);
		check_name(v, &v->flavors, "flavor", "flavors", i, f->name);
		if (f->dra && f->resource)
			err(v, srcpos_line(v->pos, "flavors[%u].resource", i),
			    "%s: a flavor served through DRA (dra) has no resource: "
			    "its pods get their devices through a claim template; "
			    "remove resource, or make a second flavor for the "
			    "device plugin's",
			    owner);
		else if (!f->dra && !f->resource)
			err(v, srcpos_line(v->pos, "flavors[%u]", i),
			    "%s: needs resource (the extended resource its GPUs "
			    "are, e.g. nvidia.com/gpu) or dra (a DeviceClass)",
			    owner);
		else if (f->resource && (!strchr(f->resource, '/') ||
					 !k8s_qualified_name_valid(f->resource)))
			err(v, srcpos_line(v->pos, "flavors[%u].resource", i),
			    "%s: resource \"%s\" is not an extended resource name "
			    "(expected domain/name, e.g. nvidia.com/gpu)",
			    owner, f->resource);
		for (unsigned s = 0; s < f->nodeSelector_count; s++) {
			int klen = check_selector(v, LINE(), owner, f->nodeSelector[s]);

			if (klen < 0)
				continue;
			if (webhook_ignored_selector(f->nodeSelector[s], (size_t)klen))
				err(v, LINE(),
				    "%s: nodeSelector key \"%.*s\" is on every node and "
				    "does not tell GPU nodes apart (a pod selecting it "
				    "would count as reaching them, and the webhooks are "
				    "not sent pods for it): select on a label of the GPU "
				    "nodes, e.g. nvidia.com/gpu.product",
				    owner, klen, f->nodeSelector[s]);
			for (unsigned r = 0; r < s; r++) {
				if (strncmp(f->nodeSelector[r], f->nodeSelector[s],
					    (size_t)klen + 1) == 0) {
					err(v, LINE(), "%s: nodeSelector key \"%.*s\" is set twice",
					    owner, klen, f->nodeSelector[s]);
					break;
				}
			}
		}
		check_tolerations(v, i, owner, "tolerations", f->tolerations,
				  f->tolerations_count);
		check_device_classes(v, i, owner, f);
		check_dra(v, i, owner, f);
		if (f->gpusPerNode < 1 || f->gpusPerNode > POLICY_MAX_GPUS_PER_NODE)
			err(v, srcpos_line(v->pos, "flavors[%u].gpusPerNode", i),
			    "%s: gpusPerNode %" PRId64 " must be between 1 and %d", owner,
			    f->gpusPerNode, POLICY_MAX_GPUS_PER_NODE);
	}
}
#undef LINE

/* "Did you mean" (text_nearest_consider(): the one rule). */
struct suggestion {
	struct text_nearest near;
	char text[320];   /* " (did you mean \"X\"?)", or "" */
};

static void suggest_consider(struct suggestion *s, const char *name,
			     const char *known)
{
	if (known && name_valid(known))
		text_nearest_consider(&s->near, name, known);
}

static const char *suggest_text(struct suggestion *s)
{
	return text_nearest_hint(&s->near, "", s->text, sizeof(s->text));
}

static const char *suggest_flavor(const struct vctx *v, const char *name,
				  struct suggestion *s)
{
	*s = (struct suggestion){0};
	for (unsigned i = 0; i < v->src->flavors_count; i++)
		suggest_consider(s, name, v->src->flavors[i].name);
	return suggest_text(s);
}

static const char *suggest_class(const struct vctx *v, const char *name,
				 struct suggestion *s)
{
	*s = (struct suggestion){0};
	for (unsigned i = 0; i < v->src->classes_count; i++)
		suggest_consider(s, name, v->src->classes[i].name);
	return suggest_text(s);
}

/* The flavor a class or quota names, or NULL (reported by the caller). */
static const struct src_flavor *flavor_named(const struct vctx *v,
					     const char *name)
{
	size_t i;

	if (!strmap_get(&v->flavors, name, &i))
		return NULL;
	return &v->src->flavors[i];
}

static bool flavor_gpus_valid(const struct src_flavor *f)
{
	return f->gpusPerNode >= 1 && f->gpusPerNode <= POLICY_MAX_GPUS_PER_NODE;
}

#define MLINE() srcpos_line(v->pos, "classes[%u].maxGpus", i)
#define GLINE() srcpos_line(v->pos, "classes[%u].gpus", i)
static void check_class_counts(struct vctx *v, unsigned i,
			       const struct src_class *c,
			       const struct src_flavor *f)
{

	if (c->gpus < 1) {
		err(v, GLINE(), "class \"%s\": gpus %" PRId64 " must be at least 1",
		    c->name, c->gpus);
		return;
	}
	if (f && flavor_gpus_valid(f) && c->gpus > f->gpusPerNode)
		err(v, GLINE(),
		    "class \"%s\": gpus %" PRId64 " exceeds gpusPerNode %" PRId64
		    " of flavor \"%s\"",
		    c->name, c->gpus, f->gpusPerNode, f->name);
	if (!c->maxGpus)
		return;
	if (*c->maxGpus < c->gpus)
		err(v, MLINE(),
		    "class \"%s\": gpus %" PRId64 " is greater than maxGpus %" PRId64,
		    c->name, c->gpus, *c->maxGpus);
	else if (f && flavor_gpus_valid(f) && *c->maxGpus > f->gpusPerNode)
		err(v, MLINE(),
		    "class \"%s\": maxGpus %" PRId64 " exceeds gpusPerNode %" PRId64
		    " of flavor \"%s\"",
		    c->name, *c->maxGpus, f->gpusPerNode, f->name);
}

/* A class of a DRA flavor: one claim holds its devices, and a claim is
 * allocated at most DRA_ALL_DEVICES (resource.k8s.io's
 * AllocationResultsMaxSize). */
static void check_class_dra(struct vctx *v, unsigned i, const struct src_class *c,
			    const struct src_flavor *f)
{
	int64_t most = c->maxGpus ? *c->maxGpus : c->gpus;

	if (f && f->dra && f->dra->sharedCapacity) {
		/* A pod's share is on one device. */
		if (f->dra->sharedCapacity->unitsPerDevice >= 1 &&
		    most > f->dra->sharedCapacity->unitsPerDevice)
			err(v, srcpos_line(v->pos, c->maxGpus ? "classes[%u].maxGpus"
							      : "classes[%u].gpus", i),
			    "class \"%s\": %" PRId64 " units a pod, but a pod's share "
			    "of flavor \"%s\" is on one device, which holds %" PRId64
			    " (dra.sharedCapacity.unitsPerDevice)",
			    c->name, most, f->name, f->dra->sharedCapacity->unitsPerDevice);
		return;
	}
	if (f && f->dra && most > DRA_ALL_DEVICES)
		err(v, srcpos_line(v->pos, c->maxGpus ? "classes[%u].maxGpus"
						      : "classes[%u].gpus", i),
		    "class \"%s\": %" PRId64 " devices a pod, but one DRA claim is "
		    "allocated at most %d (flavor \"%s\" is served through DRA)",
		    c->name, most, DRA_ALL_DEVICES, f->name);
}
#undef MLINE
#undef GLINE

/* Shown in a table row (gpugate classes, kubectl get gpuclasses): one
 * line, not a document. */
static void check_description(struct vctx *v, unsigned i,
			      const struct src_class *c)
{
	const char *s = c->description;
	unsigned line = srcpos_line(v->pos, "classes[%u].description", i);

	if (!s)
		return;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p < 0x20 || *p == 0x7f) {
			err(v, line,
			    "class \"%s\": description must be one line of text (no "
			    "newline, tab or other control character)",
			    c->name);
			return;
		}
	if (strlen(s) > POLICY_MAX_DESCRIPTION)
		err(v, line,
		    "class \"%s\": description is %zu bytes long (at most %d)",
		    c->name, strlen(s), POLICY_MAX_DESCRIPTION);
}

/* idle: {below, for, action} of a class or a tenant: who ("class \"x\""),
 * and where ("classes", i). */
static void check_idle(struct vctx *v, const char *kind, const char *name,
		       const char *list, unsigned i, const struct src_idle *s)
{
	double below;
	int64_t for_s;

	if (!s)
		return;
	if (idle_parse_below(s->below, &below) != 0)
		err(v, srcpos_line(v->pos, "%s[%u].idle.below", list, i),
		    "%s \"%s\": idle.below \"%s\" is not a percent above 0 and at "
		    "most 100 (e.g. \"5%%\" or \"2.5%%\")",
		    kind, name, s->below);
	if (idle_parse_for(s->for_text, &for_s) != 0)
		err(v, srcpos_line(v->pos, "%s[%u].idle.for", list, i),
		    "%s \"%s\": idle.for \"%s\" is not a duration (whole s, m, h "
		    "or d, e.g. \"30m\" or \"1h30m\")",
		    kind, name, s->for_text);
	else if (for_s < IDLE_FOR_MIN_S || for_s > IDLE_FOR_MAX_S)
		err(v, srcpos_line(v->pos, "%s[%u].idle.for", list, i),
		    "%s \"%s\": idle.for \"%s\" is out of range (1m..7d: below a "
		    "minute the exporter's samples are too few to judge)",
		    kind, name, s->for_text);
}

static void check_classes(struct vctx *v)
{
	for (unsigned i = 0; i < v->src->classes_count; i++) {
		const struct src_class *c = &v->src->classes[i];
		const struct src_flavor *f = flavor_named(v, c->flavor);
		struct suggestion sg;

		check_name(v, &v->classes, "class", "classes", i, c->name);
		if (!f)
			err(v, srcpos_line(v->pos, "classes[%u].flavor", i),
			    "class \"%s\": unknown flavor \"%s\"%s", c->name,
			    c->flavor, suggest_flavor(v, c->flavor, &sg));
		check_class_counts(v, i, c, f);
		check_class_dra(v, i, c, f);
		check_idle(v, "class", c->name, "classes", i, c->idle);
		if (c->cpu && !k8s_quantity_valid(c->cpu))
			err(v, srcpos_line(v->pos, "classes[%u].cpu", i),
			    "class \"%s\": cpu \"%s\" is not a Kubernetes quantity "
			    "(e.g. \"8\" or \"500m\")",
			    c->name, c->cpu);
		if (c->memory && !k8s_quantity_valid(c->memory))
			err(v, srcpos_line(v->pos, "classes[%u].memory", i),
			    "class \"%s\": memory \"%s\" is not a Kubernetes quantity "
			    "(e.g. \"64Gi\")",
			    c->name, c->memory);
		if (c->topology && !k8s_qualified_name_valid(c->topology->key))
			err(v, srcpos_line(v->pos, "classes[%u].topology.key", i),
			    "class \"%s\": topology key \"%s\" is not a valid label key",
			    c->name, c->topology->key);
		check_description(v, i, c);
		if (c->priorityClassName &&
		    !k8s_dns_subdomain_valid(c->priorityClassName))
			err(v, srcpos_line(v->pos, "classes[%u].priorityClassName", i),
			    "class \"%s\": priorityClassName \"%s\" is not a valid "
			    "object name",
			    c->name, c->priorityClassName);
	}
}

static bool is_glob(const char *s)
{
	return strpbrk(s, "*?[") != NULL;
}

/* A glob over namespace names: label characters and * ? [ ] ! only. */
static bool glob_valid(const char *s)
{
	if (strlen(s) > 253)
		return false;
	for (const char *p = s; *p; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9'))
			continue;
		if (!strchr("-*?[]!", *p))
			return false;
	}
	/* fnmatch reports a malformed bracket as "no match", never an error:
	 * an unbalanced '[' is the only malformation this alphabet allows. */
	return strchr(s, '[') == NULL || strchr(s, ']') != NULL;
}

struct ns_owner {
	unsigned tenant;
	unsigned entry;
};

/* The valid globs of the tenants checked so far, in tenant order, each
 * with the length of its literal prefix (the text before * ? [). */
struct glob_seen {
	const char *pattern;
	size_t prefix;
	unsigned tenant;
	unsigned entry;
};

struct globs_seen {
	struct glob_seen *g;
	size_t n, cap;
};

#define LINE() srcpos_line(v->pos, "tenants[%u].namespaces[%u]", ti, n)
static void check_namespaces(struct vctx *v, unsigned ti,
			     const struct src_tenant *t, struct strmap *literal,
			     struct globs_seen *gs)
{
	size_t earlier = gs->n; /* globs of tenants before this one */

	for (unsigned n = 0; n < t->namespaces_count; n++) {
		const char *ns = t->namespaces[n];
		size_t prev;

		if (is_glob(ns)) {
			if (!glob_valid(ns)) {
				err(v, LINE(),
				    "tenant \"%s\": namespace pattern \"%s\" is not a valid "
				    "glob (letters, digits, '-', '*', '?', '[...]')",
				    t->name, ns);
				continue;
			}
			if (gs->n == gs->cap) {
				size_t cap = gs->cap ? gs->cap * 2 : 64;
				struct glob_seen *g = realloc(gs->g, cap * sizeof(*g));

				if (!g) /* out of memory: the check gets weaker */
					continue;
				gs->g = g;
				gs->cap = cap;
			}
			gs->g[gs->n++] = (struct glob_seen){
				.pattern = ns, .prefix = strcspn(ns, "*?["),
				.tenant = ti, .entry = n};
			continue;
		}
		if (!k8s_dns_label_valid(ns)) {
			err(v, LINE(),
			    "tenant \"%s\": namespace \"%s\" is not a valid namespace "
			    "name",
			    t->name, ns);
			continue;
		}
		/* value: tenant index << 16 | entry index */
		if (strmap_put(literal, ns, ((size_t)ti << 16) | n, &prev) == 1) {
			unsigned pt = (unsigned)(prev >> 16), pn = prev & 0xffff;

			if (pt == ti)
				err(v, LINE(), "tenant \"%s\": namespace \"%s\" is listed twice",
				    t->name, ns);
			else
				err(v, LINE(),
				    "tenant \"%s\": namespace \"%s\" is already listed by "
				    "tenant \"%s\" (line %u)",
				    t->name, ns, v->src->tenants[pt].name,
				    srcpos_line(v->pos, "tenants[%u].namespaces[%u]", pt, pn));
			continue;
		}
		/* First match wins: an earlier tenant's pattern hides this entry.
		 * Only a name that starts with a glob's literal prefix can match
		 * it: most are ruled out by strncmp(), without fnmatch(). */
		for (size_t k = 0; k < earlier; k++) {
			const struct glob_seen *g = &gs->g[k];

			if (strncmp(g->pattern, ns, g->prefix) != 0 ||
			    fnmatch(g->pattern, ns, 0) != 0)
				continue;
			err(v, LINE(),
			    "tenant \"%s\": namespace \"%s\" is already matched by "
			    "pattern \"%s\" of tenant \"%s\" (line %u), which comes "
			    "first",
			    t->name, ns, g->pattern, v->src->tenants[g->tenant].name,
			    srcpos_line(v->pos, "tenants[%u].namespaces[%u]", g->tenant,
					g->entry));
			break;
		}
	}
}
#undef LINE

#define LINE() srcpos_line(v->pos, "tenants[%u].quota[%u]", ti, q)
static void check_quota(struct vctx *v, unsigned ti, const struct src_tenant *t)
{
	struct strmap seen;

	strmap_init(&seen);
	for (unsigned q = 0; q < t->quota_count; q++) {
		const struct src_quota *qu = &t->quota[q];
		size_t prev;
		struct suggestion sg;
		const struct {
			const char *field;
			const int64_t *value;
		} nums[] = {
			{"nominal", &qu->nominal},
			{"borrowingLimit", qu->borrowingLimit},
			{"lendingLimit", qu->lendingLimit},
		};

		if (!flavor_named(v, qu->flavor))
			err(v, srcpos_line(v->pos, "tenants[%u].quota[%u].flavor", ti, q),
			    "tenant \"%s\": quota for unknown flavor \"%s\"%s", t->name,
			    qu->flavor, suggest_flavor(v, qu->flavor, &sg));
		else if (strmap_put(&seen, qu->flavor, q, &prev) == 1)
			err(v, LINE(),
			    "tenant \"%s\": second quota entry for flavor \"%s\" (first "
			    "at line %u)",
			    t->name, qu->flavor,
			    srcpos_line(v->pos, "tenants[%u].quota[%zu]", ti, prev));
		for (size_t k = 0; k < sizeof(nums) / sizeof(nums[0]); k++) {
			if (!nums[k].value)
				continue;
			if (*nums[k].value < 0 || *nums[k].value > POLICY_MAX_QUOTA)
				err(v,
				    srcpos_line(v->pos, "tenants[%u].quota[%u].%s", ti, q,
						nums[k].field),
				    "tenant \"%s\": quota %s: %s %" PRId64
				    " must be between 0 and %d",
				    t->name, qu->flavor, nums[k].field, *nums[k].value,
				    POLICY_MAX_QUOTA);
		}
		if (qu->lendingLimit && *qu->lendingLimit > qu->nominal &&
		    qu->nominal >= 0)
			err(v, srcpos_line(v->pos, "tenants[%u].quota[%u].lendingLimit", ti, q),
			    "tenant \"%s\": quota %s: lendingLimit %" PRId64
			    " exceeds nominal %" PRId64,
			    t->name, qu->flavor, *qu->lendingLimit, qu->nominal);
		if (!t->cohort && (qu->borrowingLimit || qu->lendingLimit))
			err(v, LINE(),
			    "tenant \"%s\": quota %s: borrowingLimit and lendingLimit "
			    "need a cohort (the tenant is in none)",
			    t->name, qu->flavor);
	}
	strmap_release(&seen);
}
#undef LINE

static bool tenant_has_quota(const struct src_tenant *t, const char *flavor)
{
	for (unsigned q = 0; q < t->quota_count; q++)
		if (strcmp(t->quota[q].flavor, flavor) == 0)
			return true;
	return false;
}

#define LINE() srcpos_line(v->pos, "tenants[%u].classes[%u]", ti, c)
static void check_tenant_classes(struct vctx *v, unsigned ti,
				 const struct src_tenant *t)
{
	unsigned mask = 0;
	struct strmap seen;

	for (unsigned s = 0; s < t->sharing_count; s++) {
		unsigned bit = 1u << t->sharing[s];

		if (mask & bit)
			err(v, srcpos_line(v->pos, "tenants[%u].sharing[%u]", ti, s),
			    "tenant \"%s\": sharing mode %s is listed twice", t->name,
			    policy_sharing_name((enum policy_sharing)t->sharing[s]));
		mask |= bit;
	}
	if (!t->sharing_count)
		mask = ~0u;

	strmap_init(&seen);
	for (unsigned c = 0; c < t->classes_count; c++) {
		const char *name = t->classes[c];
		const struct src_class *cl;
		const struct src_flavor *f;
		size_t ci;
		struct suggestion sg;

		if (!strmap_get(&v->classes, name, &ci)) {
			err(v, LINE(), "tenant \"%s\": unknown class \"%s\"%s", t->name,
			    name, suggest_class(v, name, &sg));
			continue;
		}
		if (strmap_put(&seen, name, c, NULL) == 1) {
			err(v, LINE(), "tenant \"%s\": class \"%s\" is listed twice",
			    t->name, name);
			continue;
		}
		cl = &v->src->classes[ci];
		f = flavor_named(v, cl->flavor);
		if (!f)
			continue; /* reported with the class */
		if (!(mask & (1u << f->sharing)))
			err(v, LINE(),
			    "tenant \"%s\": class \"%s\" uses sharing mode %s, which "
			    "the tenant's sharing list does not allow",
			    t->name, name,
			    policy_sharing_name((enum policy_sharing)f->sharing));
		else if (!tenant_has_quota(t, f->name))
			err(v, LINE(),
			    "tenant \"%s\": class \"%s\" uses flavor \"%s\" but the "
			    "tenant has no quota for it",
			    t->name, name, f->name);
	}
	strmap_release(&seen);
}
#undef LINE

static void check_tenants(struct vctx *v)
{
	struct strmap literal;
	struct globs_seen gs = {0};

	strmap_init(&literal);
	for (unsigned i = 0; i < v->src->tenants_count; i++) {
		const struct src_tenant *t = &v->src->tenants[i];

		check_name(v, &v->tenants, "tenant", "tenants", i, t->name);
		check_namespaces(v, i, t, &literal, &gs);
		if (t->cohort && !name_valid(t->cohort))
			err(v, srcpos_line(v->pos, "tenants[%u].cohort", i),
			    "tenant \"%s\": cohort name \"%s\" is not valid (" NAME_RULE
			    ")",
			    t->name, t->cohort);
		if (!t->cohort && t->reclaimWithinCohort)
			err(v, srcpos_line(v->pos, "tenants[%u].reclaimWithinCohort", i),
			    "tenant \"%s\": reclaimWithinCohort needs a cohort (the "
			    "tenant is in none)",
			    t->name);
		if (t->kueue && t->kueue->localQueue &&
		    (!k8s_dns_subdomain_valid(t->kueue->localQueue) ||
		     !k8s_label_value_valid(t->kueue->localQueue)))
			err(v, srcpos_line(v->pos, "tenants[%u].kueue.localQueue", i),
			    "tenant \"%s\": localQueue \"%s\" is not a LocalQueue name (a "
			    "DNS subdomain of at most 63 characters: it is stamped as the "
			    "label kueue.x-k8s.io/queue-name)",
			    t->name, t->kueue->localQueue);
		check_quota(v, i, t);
		check_tenant_classes(v, i, t);
		check_idle(v, "tenant", t->name, "tenants", i, t->idle);
	}
	free(gs.g);
	strmap_release(&literal);
}

/*
 * A claim name is made for each tenant's workloads at admission: the
 * template must give a PersistentVolumeClaim name (a DNS subdomain, at
 * most 253 characters) with every tenant's name.  Any tenant may get the
 * checkpoint hooks (a preemptible class, or the gpugate.io/preemptible
 * label), so every one is tried.  The namespace is
 * not known here: a one-letter stand-in, as a namespace is a DNS label
 * that keeps a valid name valid unless it makes the name too long (warned
 * about at admission).
 */
#define LINE() srcpos_line(v->pos, "tenants[%u].name", i)
static void check_claim_tenants(struct vctx *v, const char *tmpl)
{
	char name[253 + 1], shown[1024];

	for (unsigned i = 0; i < v->src->tenants_count; i++) {
		const char *tenant = v->src->tenants[i].name;

		if (!name_valid(tenant))
			continue; /* reported with the tenant */
		if (policy_claim_name(tmpl, tenant, "n", name, sizeof(name)) >=
		    sizeof(name)) {
			err(v, LINE(),
			    "tenant \"%s\": checkpoint claimName \"%s\" makes a name "
			    "longer than the %zu characters of a PersistentVolumeClaim "
			    "name",
			    tenant, tmpl, sizeof(name) - 1);
		} else if (!k8s_dns_subdomain_valid(name)) {
			policy_claim_name(tmpl, tenant, "{namespace}", shown,
					  sizeof(shown));
			err(v, LINE(),
			    "tenant \"%s\": checkpoint claimName \"%s\" makes \"%s\", "
			    "which is not a valid PersistentVolumeClaim name "
			    "(lower-case letters, digits, '-' and '.')",
			    tenant, tmpl, shown);
		}
	}
}
#undef LINE

/* Placeholders are {tenant} and {namespace}; the rest must be a name. */
#define LINE() srcpos_line(v->pos, "checkpoint.claimName")
static void check_claim_name(struct vctx *v, const char *tmpl)
{
	char sample[253 + 1];

	for (const char *p = strchr(tmpl, '{'); p; p = strchr(p, '{')) {
		const char *close = strchr(p, '}');
		size_t n = close ? (size_t)(close - p + 1) : strlen(p);

		if (!(n == 8 && strncmp(p, "{tenant}", 8) == 0) &&
		    !(n == 11 && strncmp(p, "{namespace}", 11) == 0)) {
			err(v, LINE(),
			    "checkpoint: claimName \"%s\": unknown placeholder "
			    "\"%.*s\" (use {tenant} or {namespace})",
			    tmpl, (int)(n > 40 ? 40 : n), p);
			return;
		}
		p += n;
	}
	/* One-letter stand-ins: what is wrong whatever the names. */
	policy_claim_name(tmpl, "t", "n", sample, sizeof(sample));
	if (!k8s_dns_subdomain_valid(sample)) {
		err(v, LINE(),
		    "checkpoint: claimName \"%s\" does not make a valid claim name "
		    "(lower-case letters, digits, '-' and '.')",
		    tmpl);
		return;
	}
	check_claim_tenants(v, tmpl);
}
#undef LINE

/* A valid quantity (k8s_quantity_valid) whose number, before its suffix
 * or exponent, has no digit but 0: "0", "0.0", "0Gi", "0e3". */
static bool quantity_is_zero(const char *q)
{
	size_t number = strspn(q, "+0123456789.");

	return strspn(q, "+0.") == number;
}

/* checkpoint.claim: what gpugate creates must be a claim the apiserver
 * takes, and there must be a name to create. */
#define LINE(f) srcpos_line(v->pos, "checkpoint.claim" f)
static void check_checkpoint_claim(struct vctx *v, const struct src_checkpoint *c)
{
	const struct src_checkpoint_claim *cl = c->claim;

	if (!c->claimName)
		err(v, LINE(""),
		    "checkpoint: claim needs claimName, the name of the claims to "
		    "mount (e.g. \"{tenant}-checkpoints\")");
	if (cl->storageClassName && cl->storageClassName[0] &&
	    !k8s_dns_subdomain_valid(cl->storageClassName))
		err(v, LINE(".storageClassName"),
		    "checkpoint: claim.storageClassName \"%s\" is not a valid "
		    "StorageClass name (lower-case letters, digits, '-' and '.')",
		    cl->storageClassName);
	if (cl->size && (!k8s_quantity_valid(cl->size) || quantity_is_zero(cl->size)))
		err(v, LINE(".size"),
		    "checkpoint: claim.size \"%s\" is not a storage size (a "
		    "quantity above 0, e.g. 10Gi)",
		    cl->size);
	for (unsigned i = 0; i < cl->accessModes_count; i++)
		for (unsigned j = 0; j < i; j++)
			if (cl->accessModes[j] == cl->accessModes[i]) {
				err(v, LINE(".accessModes"),
				    "checkpoint: claim.accessModes lists an access "
				    "mode twice");
				return;
			}
}
#undef LINE

#define LINE() srcpos_line(v->pos, "checkpoint.env[%u]", i)
static void check_checkpoint(struct vctx *v)
{
	const struct src_checkpoint *c = v->src->checkpoint;

	if (!c)
		return;
	if (c->gracePeriodSeconds &&
	    (*c->gracePeriodSeconds < 0 ||
	     *c->gracePeriodSeconds > POLICY_MAX_GRACE_SECONDS))
		err(v, srcpos_line(v->pos, "checkpoint.gracePeriodSeconds"),
		    "checkpoint: gracePeriodSeconds %" PRId64
		    " must be between 0 and %d",
		    *c->gracePeriodSeconds, POLICY_MAX_GRACE_SECONDS);
	if (c->timeoutSeconds &&
	    (*c->timeoutSeconds < 1 || *c->timeoutSeconds > POLICY_MAX_GRACE_SECONDS))
		err(v, srcpos_line(v->pos, "checkpoint.timeoutSeconds"),
		    "checkpoint: timeoutSeconds %" PRId64 " must be between 1 and %d",
		    *c->timeoutSeconds, POLICY_MAX_GRACE_SECONDS);
	if (c->mountPath && (c->mountPath[0] != '/' || strchr(c->mountPath, ':') ||
			     strcmp(c->mountPath, "/") == 0))
		err(v, srcpos_line(v->pos, "checkpoint.mountPath"),
		    "checkpoint: mountPath \"%s\" must be an absolute path other "
		    "than / and without ':'",
		    c->mountPath);
	if (c->claimName)
		check_claim_name(v, c->claimName);
	if (c->claim)
		check_checkpoint_claim(v, c);
	for (unsigned i = 0; i < c->env_count; i++) {
		const char *kv = c->env[i];
		const char *eq = strchr(kv, '=');
		char name[256];
		size_t n;

		if (!eq || eq == kv) {
			err(v, LINE(), "checkpoint: env \"%s\" is not of the form NAME=value",
			    kv);
			continue;
		}
		n = (size_t)(eq - kv);
		if (n >= sizeof(name))
			n = sizeof(name) - 1;
		memcpy(name, kv, n);
		name[n] = '\0';
		if (!k8s_env_name_valid(name))
			err(v, LINE(),
			    "checkpoint: env name \"%s\" is not a valid variable name",
			    name);
		else if (strcmp(name, "GPUGATE_PREEMPTIBLE") == 0 ||
			 strcmp(name, "GPUGATE_CHECKPOINT_SIGNAL") == 0 ||
			 strcmp(name, "NVIDIA_VISIBLE_DEVICES") == 0 ||
			 strcmp(name, "NVIDIA_MIG_CONFIG_DEVICES") == 0 ||
			 strcmp(name, "NVIDIA_MIG_MONITOR_DEVICES") == 0)
			err(v, LINE(), "checkpoint: env \"%s\" is reserved", name);
		for (unsigned j = 0; j < i; j++)
			if (strncmp(c->env[j], kv, n + 1) == 0) {
				err(v, LINE(), "checkpoint: env \"%s\" is set twice", name);
				break;
			}
	}
}
#undef LINE

/*
 * health: one signal per entry.  kind is "taint", "condition" or "label";
 * a taint may end in :Effect, a condition's value is its status.
 */
static void check_signal(struct vctx *v, unsigned line, const char *kind,
			 const char *s)
{
	bool taint = strcmp(kind, "taint") == 0;
	bool condition = strcmp(kind, "condition") == 0;
	struct pool_signal sig;
	char key[K8S_QUALIFIED_NAME_MAX + 1], value[K8S_QUALIFIED_NAME_MAX + 1];

	pool_signal_split(s, taint, &sig);
	if (sig.key_len == 0 || sig.key_len >= sizeof(key) ||
	    (sig.has_value && sig.value_len >= sizeof(value))) {
		err(v, line, "health: %s \"%.60s\" is not of the form %s", kind, s,
		    taint ? "key[=value][:NoSchedule|PreferNoSchedule|NoExecute]"
			  : condition ? "Type[=True|False|Unknown]" : "key[=value]");
		return;
	}
	memcpy(key, s, sig.key_len);
	key[sig.key_len] = '\0';
	if (sig.has_value) {
		memcpy(value, sig.value, sig.value_len);
		value[sig.value_len] = '\0';
	}
	if (!k8s_qualified_name_valid(key)) {
		err(v, line, "health: %s \"%s\": \"%s\" is not a valid %s", kind, s,
		    key, condition ? "condition type" : taint ? "taint key" : "label key");
		return;
	}
	if (condition && sig.has_value && strcmp(value, "True") != 0 &&
	    strcmp(value, "False") != 0 && strcmp(value, "Unknown") != 0)
		err(v, line, "health: condition \"%s\": the status must be True, "
		    "False or Unknown", s);
	else if (!condition && sig.has_value && !k8s_label_value_valid(value))
		err(v, line, "health: %s \"%s\": \"%s\" is not a valid %s value",
		    kind, s, value, taint ? "taint" : "label");
}

static void check_signals(struct vctx *v, const char *field, const char *kind,
			  char *const *list, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		unsigned line = srcpos_line(v->pos, "health.%s[%u]", field, i);

		check_signal(v, line, kind, list[i]);
		for (unsigned j = 0; j < i; j++)
			if (strcmp(list[j], list[i]) == 0) {
				err(v, line, "health: %s \"%s\" is listed twice", kind,
				    list[i]);
				break;
			}
	}
}

/* The tenant (and its namespaces entry) whose namespaces include ns. */
static const struct src_tenant *tenant_of(const struct vctx *v, const char *ns,
					  const char **entry)
{
	for (unsigned t = 0; t < v->src->tenants_count; t++) {
		const struct src_tenant *tn = &v->src->tenants[t];

		for (unsigned n = 0; n < tn->namespaces_count; n++)
			if (fnmatch(tn->namespaces[n], ns, 0) == 0) {
				*entry = tn->namespaces[n];
				return tn;
			}
	}
	return NULL;
}

/* An exempt namespace is nobody's tenant namespace: its pods would hold
 * GPUs gpugate never counts. */
static void check_exempt_namespace(struct vctx *v, unsigned line,
				   const char *what, const char *ns)
{
	const char *entry = NULL;
	const struct src_tenant *t = tenant_of(v, ns, &entry);

	if (t)
		err(v, line,
		    "settings: exemptions: %s \"%s\" is in tenant \"%s\"'s "
		    "namespaces (\"%s\"): a tenant's pods are always judged and "
		    "counted; exempt only namespaces of cluster components",
		    what, ns, t->name, entry);
}

#define LINE(f) srcpos_line(v->pos, "settings.exemptions." f "[%u]", i)
static void check_exemptions(struct vctx *v)
{
	const struct src_exemptions *e =
		v->src->settings ? v->src->settings->exemptions : NULL;

	for (unsigned i = 0; e && i < e->namespaces_count; i++) {
		const char *ns = e->namespaces[i];

		if (!k8s_dns_label_valid(ns)) {
			err(v, LINE("namespaces"),
			    "settings: exemptions: namespace \"%s\" is not a valid "
			    "namespace name (lowercase letters, digits and '-', at "
			    "most 63)",
			    ns);
			continue;
		}
		for (unsigned j = 0; j < i; j++)
			if (strcmp(e->namespaces[j], ns) == 0) {
				err(v, LINE("namespaces"),
				    "settings: exemptions: namespace \"%s\" is listed "
				    "twice",
				    ns);
				break;
			}
		check_exempt_namespace(v, LINE("namespaces"), "namespace", ns);
	}
	for (unsigned i = 0; e && i < e->serviceAccounts_count; i++) {
		const char *sa = e->serviceAccounts[i];
		const char *slash = strchr(sa, '/');
		char ns[64];

		if (!slash || (size_t)(slash - sa) >= sizeof(ns)) {
			err(v, LINE("serviceAccounts"),
			    "settings: exemptions: serviceAccount \"%s\" is not of "
			    "the form namespace/name",
			    sa);
			continue;
		}
		memcpy(ns, sa, (size_t)(slash - sa));
		ns[slash - sa] = '\0';
		if (!k8s_dns_label_valid(ns) || !k8s_dns_subdomain_valid(slash + 1)) {
			err(v, LINE("serviceAccounts"),
			    "settings: exemptions: serviceAccount \"%s\" is not of "
			    "the form namespace/name (a namespace name and a "
			    "ServiceAccount name)",
			    sa);
			continue;
		}
		check_exempt_namespace(v, LINE("serviceAccounts"),
				       "serviceAccount's namespace", ns);
	}
}
#undef LINE

#define HEALTH_SETTLE_MAX_S (7 * 24 * 3600)

static void check_health(struct vctx *v)
{
	const struct src_health *h = v->src->health;

	if (!h)
		return;
	check_signals(v, "taints", "taint", h->taints, h->taints_count);
	check_signals(v, "conditions", "condition", h->conditions, h->conditions_count);
	check_signals(v, "labels", "label", h->labels, h->labels_count);
	check_signals(v, "drainedBy", "label", h->drainedBy, h->drainedBy_count);
	if (h->returnAfter) {
		const struct src_return_after *r = h->returnAfter;

		if (!r->validationLabel && !r->settleSeconds)
			err(v, srcpos_line(v->pos, "health.returnAfter"),
			    "health: returnAfter needs validationLabel, settleSeconds or "
			    "both (without it a node whose signal clears is back at once: "
			    "omit returnAfter for that)");
		if (r->validationLabel)
			check_signal(v, srcpos_line(v->pos, "health.returnAfter.validationLabel"),
				     "label", r->validationLabel);
		if (r->settleSeconds &&
		    (*r->settleSeconds < 0 || *r->settleSeconds > HEALTH_SETTLE_MAX_S))
			err(v, srcpos_line(v->pos, "health.returnAfter.settleSeconds"),
			    "health: returnAfter.settleSeconds %" PRId64
			    " is out of range (0..%d: at most a week)",
			    *r->settleSeconds, HEALTH_SETTLE_MAX_S);
	}
}

int validate_src(const char *file, const struct src_policy *src,
		 const struct srcpos *pos, struct diag *d)
{
	struct vctx v = {.file = file, .src = src, .pos = pos, .d = d};

	strmap_init(&v.flavors);
	strmap_init(&v.classes);
	strmap_init(&v.tenants);
	strmap_init(&v.device_classes);
	if (src->version != 1)
		err(&v, srcpos_line(pos, "version"),
		    "unsupported version %" PRId64 " (this gpugate reads version 1)",
		    src->version);
	check_settings(&v);
	check_flavors(&v);
	check_classes(&v);
	check_tenants(&v);
	check_checkpoint(&v);
	check_health(&v);
	check_exemptions(&v);
	strmap_release(&v.flavors);
	strmap_release(&v.classes);
	strmap_release(&v.tenants);
	strmap_release(&v.device_classes);
	return v.errors ? -1 : 0;
}
