/*
 * The immutable policy: built once from a validated src_policy, then only
 * read.  Everything lives in one arena; lookups by name use hash maps built
 * at load time so that a request costs O(1) however large the policy is.
 */
#include "policy/model.h"

#include "base/arena.h"
#include "base/hash.h"
#include "base/strmap.h"
#include "policy/health.h"
#include "policy/idle.h"
#include "policy/k8s.h"
#include "policy/policy.h"
#include "policy/pool.h"
#include "policy/src.h"

#include <stdatomic.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_GRACE_SECONDS 300
#define DEFAULT_CHECKPOINT_TIMEOUT_SECONDS 300
#define DEFAULT_MOUNT_PATH "/checkpoint"
#define DEFAULT_CLAIM_SIZE "10Gi"
/* NVIDIA's DRA driver: whole GPUs, and MIG partitions. */
static const char *const default_gpu_device_classes[] = {"gpu.nvidia.com",
							 "mig.nvidia.com"};

struct ns_glob {
	const char *pattern;
	size_t prefix; /* length of the literal text before the first * ? [ */
	unsigned tenant;
};

struct policy {
	struct arena arena;
	const char *source;
	struct policy_settings settings;
	struct policy_checkpoint checkpoint;
	struct policy_health health;
	uint64_t serial; /* unique in this process (policy_serial) */
	struct policy_flavor *flavors;
	size_t n_flavors;
	struct policy_class *classes;
	size_t n_classes;
	struct policy_tenant *tenants;
	size_t n_tenants;
	const char **cohorts;
	size_t n_cohorts;
	struct strmap flavor_by_name;
	struct strmap class_by_name;
	struct strmap tenant_by_name;
	struct strmap tenant_by_ns;   /* literal namespace -> tenant index */
	struct strmap flavor_by_res;  /* resource -> first flavor index */
	struct strmap flavor_by_device_class; /* DRA DeviceClass -> flavor index */
	struct strmap gpu_device_class;       /* settings.gpuDeviceClassNames */
	struct ns_glob *globs;        /* in tenant order */
	size_t n_globs;
};

const char *policy_sharing_name(enum policy_sharing s)
{
	static const char *const names[] = {"exclusive", "mig", "time-slicing",
					    "mps"};

	return (unsigned)s < POLICY_SHARING__COUNT ? names[s] : "unknown";
}

const char *policy_reclaim_name(enum policy_reclaim r)
{
	switch (r) {
	case POLICY_RECLAIM_ANY:
		return "Any";
	case POLICY_RECLAIM_LOWER_PRIORITY:
		return "LowerPriority";
	case POLICY_RECLAIM_NEVER:
		return "Never";
	}
	return "Any";
}

const char *policy_mode_name(enum policy_mode m)
{
	switch (m) {
	case POLICY_MODE_ENFORCE:
		return "enforce";
	case POLICY_MODE_WARN:
		return "warn";
	case POLICY_MODE_AUDIT:
		return "audit";
	}
	return "unknown";
}

/* ---- building --------------------------------------------------------- */

struct builder {
	struct policy *p;
	const struct src_policy *src;
	bool oom;
};

static const char *dup(struct builder *b, const char *s)
{
	char *r;

	if (!s)
		return NULL;
	r = arena_strdup(&b->p->arena, s);
	if (!r)
		b->oom = true;
	return r;
}

static void *alloc(struct builder *b, size_t count, size_t size)
{
	void *r = arena_calloc(&b->p->arena, count ? count : 1, size);

	if (!r)
		b->oom = true;
	return r;
}

static void put(struct builder *b, struct strmap *m, const char *key, size_t v)
{
	if (strmap_put(m, key, v, NULL) < 0)
		b->oom = true;
}

/* Splits "key=value" (validated) into two arena strings. */
static void split_kv(struct builder *b, const char *kv, struct policy_kv *out)
{
	const char *eq = strchr(kv, '=');

	out->key = arena_strndup(&b->p->arena, kv, (size_t)(eq - kv));
	out->value = dup(b, eq + 1);
	if (!out->key)
		b->oom = true;
}

/* A flavor's deviceClassNames (validated: each maps to one flavor). */
static void build_device_classes(struct builder *b, const struct src_flavor *s,
				 struct policy_flavor *f)
{
	const char **dc = alloc(b, s->deviceClassNames_count, sizeof(*dc));

	if (b->oom)
		return;
	for (unsigned k = 0; k < s->deviceClassNames_count; k++) {
		dc[k] = dup(b, s->deviceClassNames[k]);
		if (dc[k])
			put(b, &b->p->flavor_by_device_class, dc[k], f->index);
	}
	f->device_classes = dc;
	f->n_device_classes = s->deviceClassNames_count;
}

/* The lower-case base-32 digits of names gpugate makes (DNS labels). */
static const char base32[] = "0123456789abcdefghijklmnopqrstuv";

/* One toleration (validated): a flavor's, or a dra block's device one. */
static void build_toleration(struct builder *b, const struct src_toleration *st,
			     struct policy_toleration *out)
{
	static const char *const ops[] = {"Exists", "Equal"};
	static const char *const effects[] = {"NoSchedule", "PreferNoSchedule",
					      "NoExecute"};

	out->key = dup(b, st->key ? st->key : "");
	out->op = ops[st->operator ? *st->operator : SRC_OP_EQUAL];
	out->value = dup(b, st->value ? st->value : "");
	out->effect = st->effect ? effects[*st->effect] : "";
	out->has_seconds = st->tolerationSeconds != NULL;
	out->seconds = st->tolerationSeconds ? *st->tolerationSeconds : 0;
}

/* A DRA flavor's units in messages (policy_flavor.units): "<class>
 * devices", or for a flavor shared by capacity "shares of <perUnit>
 * <class> <capacity>" ("shares of 10Gi gpu.nvidia.com memory"). */
static const char *flavor_units(struct builder *b, const struct policy_dra *d)
{
	size_t n = 1;
	char *r;

	if (d && d->shared)
		n = sizeof("shares of   ") + strlen(d->shared->per_unit) +
		    strlen(d->device_class) + strlen(d->shared->name);
	else if (d)
		n = strlen(d->device_class) + sizeof(" devices");
	if (!(r = alloc(b, n, 1)) || !d)
		return r;
	if (d->shared)
		snprintf(r, n, "shares of %s %s %s", d->shared->per_unit, d->device_class,
			 d->shared->name);
	else
		snprintf(r, n, "%s devices", d->device_class);
	return r;
}

/* A flavor's dra block (validated), with the hash of what a template's
 * spec depends on besides the count. */
static const struct policy_dra *build_dra(struct builder *b, const struct src_dra *s)
{
	struct policy_dra *d;
	struct policy_kv *attrs, *caps;
	struct policy_toleration *tol;
	const char **sel;
	uint64_t h = HASH_FNV1A_SEED;

	if (!s)
		return NULL;
	d = alloc(b, 1, sizeof(*d));
	attrs = alloc(b, s->attributes_count, sizeof(*attrs));
	caps = alloc(b, s->minCapacity_count, sizeof(*caps));
	sel = alloc(b, s->selectors_count, sizeof(*sel));
	tol = alloc(b, s->tolerations_count, sizeof(*tol));
	if (b->oom)
		return NULL;
	d->device_class = dup(b, s->deviceClassName);
	d->driver = dup(b, s->driver);
	/* Each field ends with a byte no field has, so that "ab" "c" and
	 * "a" "bc" hash apart. */
	h = hash_fnv1a(hash_fnv1a(h, s->deviceClassName), "\x1e");
	h = hash_fnv1a(hash_fnv1a(h, s->driver), "\x1e");
	for (unsigned k = 0; k < s->attributes_count; k++) {
		split_kv(b, s->attributes[k], &attrs[k]);
		h = hash_fnv1a(hash_fnv1a(h, s->attributes[k]), "\x1f");
	}
	h = hash_fnv1a(h, "\x1e");
	for (unsigned k = 0; k < s->minCapacity_count; k++) {
		split_kv(b, s->minCapacity[k], &caps[k]);
		h = hash_fnv1a(hash_fnv1a(h, s->minCapacity[k]), "\x1f");
	}
	h = hash_fnv1a(h, "\x1e");
	for (unsigned k = 0; k < s->selectors_count; k++) {
		sel[k] = dup(b, s->selectors[k]);
		h = hash_fnv1a(hash_fnv1a(h, s->selectors[k]), "\x1f");
	}
	h = hash_fnv1a(h, "\x1e");
	for (unsigned k = 0; k < s->tolerations_count; k++) {
		char secs[24];

		build_toleration(b, &s->tolerations[k], &tol[k]);
		snprintf(secs, sizeof(secs), "%lld",
			 tol[k].has_seconds ? (long long)tol[k].seconds : -1LL);
		h = hash_fnv1a(hash_fnv1a(h, tol[k].key), "\x1d");
		h = hash_fnv1a(hash_fnv1a(h, tol[k].op), "\x1d");
		h = hash_fnv1a(hash_fnv1a(h, tol[k].value), "\x1d");
		h = hash_fnv1a(hash_fnv1a(h, tol[k].effect), "\x1d");
		h = hash_fnv1a(hash_fnv1a(h, secs), "\x1f");
	}
	/* (Only where set: the names of templates of whole devices stay as
	 * they were before sharedCapacity existed.) */
	if (s->sharedCapacity) {
		const struct src_shared_capacity *sc = s->sharedCapacity;
		struct policy_dra_share *sh = alloc(b, 1, sizeof(*sh));
		char units[24];

		if (!sh)
			return NULL;
		sh->name = dup(b, sc->name);
		sh->per_unit = dup(b, sc->perUnit);
		if (k8s_quantity_whole(sc->perUnit, &sh->per_unit_value) < 0)
			sh->per_unit_value = 0; /* refused by validation */
		sh->units_per_device = (unsigned)sc->unitsPerDevice;
		snprintf(units, sizeof(units), "%lld", (long long)sc->unitsPerDevice);
		h = hash_fnv1a(h, "\x1e");
		h = hash_fnv1a(hash_fnv1a(h, sc->name), "\x1d");
		h = hash_fnv1a(hash_fnv1a(h, sc->perUnit), "\x1d");
		h = hash_fnv1a(hash_fnv1a(h, units), "\x1f");
		d->shared = sh;
	}
	for (int i = 0; i < 6; i++)
		d->hash[i] = base32[(h >> (5 * i)) & 31];
	d->hash[6] = '\0';
	d->attributes = attrs;
	d->n_attributes = s->attributes_count;
	d->min_capacity = caps;
	d->n_min_capacity = s->minCapacity_count;
	d->selectors = sel;
	d->n_selectors = s->selectors_count;
	d->tolerations = tol;
	d->n_tolerations = s->tolerations_count;
	return d;
}

static void build_flavors(struct builder *b)
{
	struct policy *p = b->p;

	p->n_flavors = b->src->flavors_count;
	p->flavors = alloc(b, p->n_flavors, sizeof(*p->flavors));
	if (b->oom)
		return;
	for (unsigned i = 0; i < p->n_flavors && !b->oom; i++) {
		const struct src_flavor *s = &b->src->flavors[i];
		struct policy_flavor *f = &p->flavors[i];
		struct policy_kv *sel = alloc(b, s->nodeSelector_count, sizeof(*sel));
		struct policy_toleration *tol =
			alloc(b, s->tolerations_count, sizeof(*tol));

		if (b->oom)
			return;
		f->index = i;
		f->name = dup(b, s->name);
		f->resource = s->resource ? dup(b, s->resource) : NULL;
		f->dra = build_dra(b, s->dra);
		f->units = f->resource ? f->resource : flavor_units(b, f->dra);
		f->sharing = (enum policy_sharing)s->sharing;
		f->gpus_per_node = (unsigned)s->gpusPerNode;
		for (unsigned k = 0; k < s->nodeSelector_count; k++)
			split_kv(b, s->nodeSelector[k], &sel[k]);
		f->node_selector = sel;
		f->n_node_selector = s->nodeSelector_count;
		for (unsigned k = 0; k < s->tolerations_count; k++)
			build_toleration(b, &s->tolerations[k], &tol[k]);
		f->tolerations = tol;
		f->n_tolerations = s->tolerations_count;
		build_device_classes(b, s, f);
		if (f->name)
			put(b, &p->flavor_by_name, f->name, i);
		if (f->resource && !strmap_get(&p->flavor_by_res, f->resource, NULL))
			put(b, &p->flavor_by_res, f->resource, i);
	}
}

/* idle: {below, for, action}, checked by validate.c; NULL: none. */
static const struct policy_idle *build_idle(struct builder *b, const struct src_idle *s)
{
	struct policy_idle *r;

	if (!s || !(r = alloc(b, 1, sizeof(*r))))
		return NULL;
	r->below_text = dup(b, s->below);
	r->for_text = dup(b, s->for_text);
	if (idle_parse_below(s->below, &r->below) != 0 ||
	    idle_parse_for(s->for_text, &r->for_s) != 0)
		return NULL; /* validate.c refused it first */
	r->action = s->action;
	return r;
}

static void build_classes(struct builder *b)
{
	struct policy *p = b->p;

	p->n_classes = b->src->classes_count;
	p->classes = alloc(b, p->n_classes, sizeof(*p->classes));
	for (unsigned i = 0; i < p->n_classes && !b->oom; i++) {
		const struct src_class *s = &b->src->classes[i];
		struct policy_class *c = &p->classes[i];

		c->index = i;
		c->name = dup(b, s->name);
		c->description = dup(b, s->description ? s->description : "");
		c->flavor = policy_flavor_find(p, s->flavor);
		c->gpus = (unsigned)s->gpus;
		c->max_gpus = s->maxGpus ? (unsigned)*s->maxGpus : c->gpus;
		c->cpu = dup(b, s->cpu);
		c->memory = dup(b, s->memory);
		c->topology_mode = POLICY_TOPOLOGY_NONE;
		if (s->topology) {
			c->topology_key = dup(b, s->topology->key);
			c->topology_mode = s->topology->mode == SRC_TOPOLOGY_PREFERRED
						   ? POLICY_TOPOLOGY_PREFERRED
						   : POLICY_TOPOLOGY_REQUIRED;
		}
		c->priority_class_name = dup(b, s->priorityClassName);
		c->preemptible = s->preemptible;
		c->gang = s->gang;
		c->idle = build_idle(b, s->idle);
		if (c->name)
			put(b, &p->class_by_name, c->name, i);
	}
}

static int cohort_index(struct builder *b, const char *name)
{
	struct policy *p = b->p;

	for (size_t i = 0; i < p->n_cohorts; i++)
		if (strcmp(p->cohorts[i], name) == 0)
			return (int)i;
	p->cohorts[p->n_cohorts] = dup(b, name);
	return (int)p->n_cohorts++;
}

static void build_tenant_quota(struct builder *b, const struct src_tenant *s,
			       struct policy_tenant *t)
{
	struct policy *p = b->p;
	struct policy_quota *q = alloc(b, s->quota_count, sizeof(*q));
	const struct policy_quota **by_flavor =
		alloc(b, p->n_flavors, sizeof(*by_flavor));

	if (b->oom)
		return;
	for (unsigned k = 0; k < s->quota_count; k++) {
		const struct src_quota *sq = &s->quota[k];

		q[k].flavor = policy_flavor_find(p, sq->flavor);
		q[k].nominal = sq->nominal;
		q[k].borrowing_limit =
			sq->borrowingLimit ? *sq->borrowingLimit : POLICY_NO_LIMIT;
		q[k].lending_limit =
			sq->lendingLimit ? *sq->lendingLimit : POLICY_NO_LIMIT;
		by_flavor[q[k].flavor->index] = &q[k];
	}
	t->quota = q;
	t->n_quota = s->quota_count;
	t->quota_by_flavor = by_flavor;
}

static void build_tenants(struct builder *b)
{
	struct policy *p = b->p;
	size_t n_globs = 0;

	p->n_tenants = b->src->tenants_count;
	p->tenants = alloc(b, p->n_tenants, sizeof(*p->tenants));
	p->cohorts = alloc(b, p->n_tenants, sizeof(*p->cohorts));
	for (unsigned i = 0; i < p->n_tenants; i++)
		for (unsigned n = 0; n < b->src->tenants[i].namespaces_count; n++)
			n_globs += strpbrk(b->src->tenants[i].namespaces[n], "*?[") != NULL;
	p->globs = alloc(b, n_globs, sizeof(*p->globs));

	for (unsigned i = 0; i < p->n_tenants && !b->oom; i++) {
		const struct src_tenant *s = &b->src->tenants[i];
		struct policy_tenant *t = &p->tenants[i];
		const char **ns = alloc(b, s->namespaces_count, sizeof(*ns));
		const struct policy_class **cls;

		if (b->oom)
			return;
		t->index = i;
		t->name = dup(b, s->name);
		for (unsigned n = 0; n < s->namespaces_count; n++) {
			ns[n] = dup(b, s->namespaces[n]);
			if (!ns[n])
				return;
			if (strpbrk(ns[n], "*?["))
				p->globs[p->n_globs++] = (struct ns_glob){
					.pattern = ns[n],
					.prefix = strcspn(ns[n], "*?["),
					.tenant = i};
			else
				put(b, &p->tenant_by_ns, ns[n], i);
		}
		t->namespaces = ns;
		t->n_namespaces = s->namespaces_count;
		t->cohort = NULL;
		t->cohort_index = -1;
		if (s->cohort) {
			t->cohort_index = cohort_index(b, s->cohort);
			t->cohort = p->cohorts[t->cohort_index];
		}
		if (s->classes_count) {
			cls = alloc(b, s->classes_count, sizeof(*cls));
			if (b->oom)
				return;
			for (unsigned c = 0; c < s->classes_count; c++)
				cls[c] = policy_class_find(p, s->classes[c]);
			t->classes = cls;
			t->n_classes = s->classes_count;
		}
		t->all_classes = s->classes_count == 0;
		t->sharing_mask = 0;
		for (unsigned k = 0; k < s->sharing_count; k++)
			t->sharing_mask |= 1u << s->sharing[k];
		if (!s->sharing_count)
			t->sharing_mask = (1u << POLICY_SHARING__COUNT) - 1;
		t->mode = s->mode ? (enum policy_mode)*s->mode : p->settings.mode;
		t->reclaim = POLICY_RECLAIM_ANY;
		if (s->reclaimWithinCohort && *s->reclaimWithinCohort == SRC_RECLAIM_NEVER)
			t->reclaim = POLICY_RECLAIM_NEVER;
		else if (s->reclaimWithinCohort &&
			 *s->reclaimWithinCohort == SRC_RECLAIM_LOWER_PRIORITY)
			t->reclaim = POLICY_RECLAIM_LOWER_PRIORITY;
		if (s->kueue) {
			t->kueue_owns_quota = s->kueue->quotaOwner &&
					      *s->kueue->quotaOwner == SRC_QUOTA_OWNER_KUEUE;
			t->local_queue = s->kueue->localQueue ? dup(b, s->kueue->localQueue) : NULL;
		}
		build_tenant_quota(b, s, t);
		t->idle = build_idle(b, s->idle);
		if (t->name)
			put(b, &p->tenant_by_name, t->name, i);
	}
}

static void build_gpu_device_classes(struct builder *b,
				     const struct src_settings *s)
{
	struct policy_settings *out = &b->p->settings;
	size_t n = s && s->gpuDeviceClassNames_count
			   ? s->gpuDeviceClassNames_count
			   : sizeof(default_gpu_device_classes) /
				     sizeof(default_gpu_device_classes[0]);
	const char **dc = alloc(b, n, sizeof(*dc));

	if (b->oom)
		return;
	for (size_t k = 0; k < n; k++) {
		dc[k] = dup(b, s && s->gpuDeviceClassNames_count
				       ? s->gpuDeviceClassNames[k]
				       : default_gpu_device_classes[k]);
		if (dc[k])
			put(b, &b->p->gpu_device_class, dc[k], k);
	}
	out->gpu_device_classes = dc;
	out->n_gpu_device_classes = n;
}

static const char *const *dup_list(struct builder *b,
				   const char *const *src, size_t n)
{
	const char **out = n ? alloc(b, n, sizeof(*out)) : NULL;

	for (size_t i = 0; out && i < n; i++)
		out[i] = dup(b, src[i]);
	return out;
}

static void build_exemptions(struct builder *b, const struct src_settings *s)
{
	static const char *const defaults[] = {POLICY_DEFAULT_EXEMPT_NAMESPACES};
	struct policy_settings *out = &b->p->settings;
	const struct src_exemptions *e = s ? s->exemptions : NULL;

	if (!e) {
		out->n_exempt_namespaces = sizeof(defaults) / sizeof(defaults[0]);
		out->exempt_namespaces = dup_list(b, defaults,
						  out->n_exempt_namespaces);
		return;
	}
	out->n_exempt_namespaces = e->namespaces_count;
	out->exempt_namespaces = dup_list(b, (const char *const *)e->namespaces,
					  e->namespaces_count);
	out->n_exempt_service_accounts = e->serviceAccounts_count;
	out->exempt_service_accounts =
		dup_list(b, (const char *const *)e->serviceAccounts,
			 e->serviceAccounts_count);
}

static void build_settings(struct builder *b)
{
	const struct src_settings *s = b->src->settings;
	struct policy_settings *out = &b->p->settings;

	out->class_label = dup(b, s && s->classLabel ? s->classLabel
						    : POLICY_DEFAULT_CLASS_LABEL);
	out->gpus_label = dup(b, s && s->gpusLabel ? s->gpusLabel
						  : POLICY_DEFAULT_GPUS_LABEL);
	out->raw_gpu_requests = s ? (enum policy_raw_requests)s->rawGpuRequests
				  : POLICY_RAW_REJECT;
	out->mode = s ? (enum policy_mode)s->mode : POLICY_MODE_ENFORCE;
	out->admission_warnings = s ? (enum policy_admission_warnings)s->admissionWarnings
				    : POLICY_WARNINGS_PROBLEMS;
	out->gang_start = s ? (enum policy_gang_start)s->gangStart : POLICY_GANG_AUTO;
	out->gang_timeout_seconds = s && s->gangTimeoutSeconds
					    ? *s->gangTimeoutSeconds
					    : POLICY_GANG_TIMEOUT_DEFAULT;
	build_gpu_device_classes(b, s);
	build_exemptions(b, s);
}

/* checkpoint.claim: absent, nothing is created. */
static void build_checkpoint_claim(struct builder *b,
				   const struct src_checkpoint_claim *s)
{
	static const char *const mode_names[SRC_ACCESS_COUNT] = {
		[SRC_ACCESS_RWO] = "ReadWriteOnce",
		[SRC_ACCESS_RWX] = "ReadWriteMany",
		[SRC_ACCESS_RWOP] = "ReadWriteOncePod",
	};
	struct policy_checkpoint_claim *c = &b->p->checkpoint.claim;
	const char **modes;

	if (!s)
		return;
	c->create = s->create && *s->create;
	c->storage_class = dup(b, s->storageClassName);
	c->size = dup(b, s->size ? s->size : DEFAULT_CLAIM_SIZE);
	modes = alloc(b, s->accessModes_count ? s->accessModes_count : 1,
		      sizeof(*modes));
	if (b->oom)
		return;
	if (!s->accessModes_count)
		modes[0] = mode_names[SRC_ACCESS_RWX];
	for (unsigned i = 0; i < s->accessModes_count; i++)
		modes[i] = mode_names[s->accessModes[i]];
	c->access_modes = modes;
	c->n_access_modes = s->accessModes_count ? s->accessModes_count : 1;
}

static void build_checkpoint(struct builder *b)
{
	const struct src_checkpoint *s = b->src->checkpoint;
	struct policy_checkpoint *c = &b->p->checkpoint;

	c->grace_period_seconds = s && s->gracePeriodSeconds
					  ? *s->gracePeriodSeconds
					  : DEFAULT_GRACE_SECONDS;
	c->timeout_seconds = s && s->timeoutSeconds ? *s->timeoutSeconds
						    : DEFAULT_CHECKPOINT_TIMEOUT_SECONDS;
	c->mount_path = dup(b, s && s->mountPath ? s->mountPath
						 : DEFAULT_MOUNT_PATH);
	c->claim_name = dup(b, s ? s->claimName : NULL);
	build_checkpoint_claim(b, s ? s->claim : NULL);
	if (s && s->preStop_count) {
		const char **argv = alloc(b, s->preStop_count, sizeof(*argv));

		if (b->oom)
			return;
		for (unsigned i = 0; i < s->preStop_count; i++)
			argv[i] = dup(b, s->preStop[i]);
		c->pre_stop = argv;
		c->n_pre_stop = s->preStop_count;
	}
	if (s && s->env_count) {
		struct policy_kv *env = alloc(b, s->env_count, sizeof(*env));

		if (b->oom)
			return;
		for (unsigned i = 0; i < s->env_count; i++)
			split_kv(b, s->env[i], &env[i]);
		c->env = env;
		c->n_env = s->env_count;
	}
}

/*
 * The health signals gpugate knows out of the box (docs/policy.md
 * "health"), checked against the sources of the systems that write them:
 *   - node.kubernetes.io/out-of-service: Kubernetes' well-known taint for a
 *     node that is shut down (k8s.io/api core/v1 well_known_taints.go);
 *   - NVIDIA NVSentinel: the label dgxc.nvidia.com/nvsentinel-state (any
 *     value: quarantined, draining, remediating, ...-failed; it goes when
 *     the node recovers) and the conditions its GPU and syslog health
 *     monitors write as True for fatal faults (DCGM health watches, XID,
 *     SXID, a GPU fallen off the bus);
 *   - node-problem-detector's default monitors: hard node faults.
 * Cordons (NVSentinel's quarantine, a driver upgrade) and NotReady are
 * exclusions of their own (policy/pool.h).
 */
static const char *const default_health_taints[] = {
	"node.kubernetes.io/out-of-service",
};
static const char *const default_health_conditions[] = {
	"GpuMemWatch", "GpuNvlinkWatch", "GpuPcieWatch", "GpuInforomWatch",
	"GpuDriverWatch", "GpuSmWatch", "GpuMcuWatch", "GpuPmuWatch",
	"GpuNvswitchWatch", "GpuXidError", "SysLogsXIDError", "SysLogsSXIDError",
	"SysLogsGPUFallenOff",
	"KernelDeadlock", "ReadonlyFilesystem", "XfsShutdown",
	"CperHardwareErrorFatal",
};
static const char *const default_health_labels[] = {
	"dgxc.nvidia.com/nvsentinel-state",
};
/* NVSentinel's node-drainer evicts the pods of a node it quarantined; its
 * state label is on from the quarantine to the recovery. */
static const char *const default_drained_by[] = {
	"dgxc.nvidia.com/nvsentinel-state",
};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* s[0, n) copied into the policy's arena. */
static const char *dupn(struct builder *b, const char *s, size_t n)
{
	char *out = alloc(b, n + 1, 1);

	if (out) {
		memcpy(out, s, n);
		out[n] = '\0';
	}
	return out;
}

/* The defaults (unless defaults: false) and then the file's entries. */
static const char *const *health_list(struct builder *b, bool defaults,
				      const char *const *builtin, size_t n_builtin,
				      char *const *mine, unsigned n_mine, size_t *n)
{
	const char **out;

	*n = (defaults ? n_builtin : 0) + n_mine;
	out = alloc(b, *n + 1, sizeof(*out));
	if (!out)
		return NULL;
	for (size_t i = 0; defaults && i < n_builtin; i++)
		out[i] = builtin[i];
	for (unsigned i = 0; i < n_mine; i++)
		out[(defaults ? n_builtin : 0) + i] = mine[i];
	return out;
}

/* "key[=value]" into kv, in the policy's arena (value NULL: none). */
static void split_signal(struct builder *b, const char *s, struct policy_kv *kv)
{
	struct pool_signal sig;

	pool_signal_split(s, false, &sig);
	kv->key = dupn(b, s, sig.key_len);
	kv->value = sig.has_value ? dupn(b, sig.value, sig.value_len) : NULL;
}

/* onUnhealthy, returnAfter, drainedBy (docs/policy.md "The health loop"). */
static void build_health_loop(struct builder *b, bool defaults)
{
	const struct src_health *s = b->src->health;
	struct policy_health *h = &b->p->health;
	const char *const *d;
	struct policy_kv *kv, rl;
	size_t nd;

	h->on_unhealthy = s ? s->onUnhealthy : HEALTH_ON_CHECKPOINT;
	if (s && s->returnAfter && s->returnAfter->validationLabel) {
		split_signal(b, s->returnAfter->validationLabel, &rl);
		h->return_label_key = rl.key;
		h->return_label_value = rl.value;
	}
	if (s && s->returnAfter && s->returnAfter->settleSeconds)
		h->return_settle_s = *s->returnAfter->settleSeconds;
	d = health_list(b, defaults, default_drained_by, COUNT(default_drained_by),
			s ? s->drainedBy : NULL, s ? s->drainedBy_count : 0, &nd);
	kv = alloc(b, nd + 1, sizeof(*kv));
	if (b->oom || !d || !kv)
		return;
	for (size_t i = 0; i < nd; i++)
		split_signal(b, d[i], &kv[i]);
	h->drained_by = kv;
	h->n_drained_by = nd;
}

static void build_health(struct builder *b)
{
	const struct src_health *s = b->src->health;
	struct policy_health *h = &b->p->health;
	bool defaults = !s || !s->defaults || *s->defaults;
	const char *const *t, *const *c, *const *l;
	size_t nt, nc, nl;
	struct policy_health_taint *taints;
	struct policy_health_condition *conds;
	struct policy_kv *labels;

	t = health_list(b, defaults, default_health_taints, COUNT(default_health_taints),
			s ? s->taints : NULL, s ? s->taints_count : 0, &nt);
	c = health_list(b, defaults, default_health_conditions,
			COUNT(default_health_conditions), s ? s->conditions : NULL,
			s ? s->conditions_count : 0, &nc);
	l = health_list(b, defaults, default_health_labels, COUNT(default_health_labels),
			s ? s->labels : NULL, s ? s->labels_count : 0, &nl);
	taints = alloc(b, nt + 1, sizeof(*taints));
	conds = alloc(b, nc + 1, sizeof(*conds));
	labels = alloc(b, nl + 1, sizeof(*labels));
	if (b->oom || !t || !c || !l || !taints || !conds || !labels)
		return;
	for (size_t i = 0; i < nt; i++) {
		struct pool_signal sig;

		pool_signal_split(t[i], true, &sig);
		taints[i].key = dupn(b, t[i], sig.key_len);
		taints[i].value = sig.has_value ? dupn(b, sig.value, sig.value_len) : NULL;
		taints[i].effect = sig.effect ? dup(b, sig.effect) : NULL;
	}
	for (size_t i = 0; i < nc; i++) {
		struct pool_signal sig;

		pool_signal_split(c[i], false, &sig);
		conds[i].type = dupn(b, c[i], sig.key_len);
		conds[i].status = sig.has_value ? dupn(b, sig.value, sig.value_len)
						: dup(b, "True");
	}
	for (size_t i = 0; i < nl; i++) {
		struct pool_signal sig;

		pool_signal_split(l[i], false, &sig);
		labels[i].key = dupn(b, l[i], sig.key_len);
		labels[i].value = sig.has_value ? dupn(b, sig.value, sig.value_len) : NULL;
	}
	h->taints = taints;
	h->n_taints = nt;
	h->conditions = conds;
	h->n_conditions = nc;
	h->labels = labels;
	h->n_labels = nl;
	build_health_loop(b, defaults);
}

struct policy *model_build(const char *source, const struct src_policy *src)
{
	struct builder b = {.src = src};
	struct policy *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	b.p = p;
	{
		static _Atomic uint64_t next = 1;

		p->serial = atomic_fetch_add(&next, 1);
	}
	arena_init(&p->arena);
	strmap_init(&p->flavor_by_name);
	strmap_init(&p->class_by_name);
	strmap_init(&p->tenant_by_name);
	strmap_init(&p->tenant_by_ns);
	strmap_init(&p->flavor_by_res);
	strmap_init(&p->flavor_by_device_class);
	strmap_init(&p->gpu_device_class);
	p->source = dup(&b, source);
	build_settings(&b);
	build_checkpoint(&b);
	build_health(&b);
	build_flavors(&b);
	if (!b.oom)
		build_classes(&b);
	if (!b.oom)
		build_tenants(&b);
	if (b.oom) {
		policy_free(p);
		return NULL;
	}
	return p;
}

void policy_free(struct policy *p)
{
	if (!p)
		return;
	strmap_release(&p->flavor_by_name);
	strmap_release(&p->class_by_name);
	strmap_release(&p->tenant_by_name);
	strmap_release(&p->tenant_by_ns);
	strmap_release(&p->flavor_by_res);
	strmap_release(&p->flavor_by_device_class);
	strmap_release(&p->gpu_device_class);
	arena_release(&p->arena);
	free(p);
}

/* ---- lookups ---------------------------------------------------------- */

const char *policy_source(const struct policy *p)
{
	return p->source;
}

const struct policy_settings *policy_settings(const struct policy *p)
{
	return &p->settings;
}

const struct policy_checkpoint *policy_checkpoint(const struct policy *p)
{
	return &p->checkpoint;
}

const struct policy_health *policy_health(const struct policy *p)
{
	return &p->health;
}

uint64_t policy_serial(const struct policy *p)
{
	return p->serial;
}

enum policy_claim_status policy_checkpoint_claim(const struct policy *p,
						 const struct policy_tenant *t,
						 const char *ns, char *out,
						 size_t size)
{
	const char *tmpl = p->checkpoint.claim_name;
	enum policy_claim_status st = POLICY_CLAIM_OK;

	if (!tmpl)
		st = POLICY_CLAIM_NONE;
	else if (policy_claim_name(tmpl, t->name, ns, out, size) >= size || size <= 253)
		st = POLICY_CLAIM_TOO_LONG;
	else if (!k8s_dns_subdomain_valid(out))
		st = POLICY_CLAIM_INVALID;
	if (st != POLICY_CLAIM_OK)
		out[0] = '\0';
	return st;
}

size_t policy_claim_name(const char *tmpl, const char *tenant, const char *ns,
			 char *out, size_t size)
{
	size_t o = 0;

	for (const char *p = tmpl; *p;) {
		const char *text = p;
		size_t n = 1;

		if (strncmp(p, "{tenant}", 8) == 0) {
			text = tenant;
			n = strlen(tenant);
			p += 8;
		} else if (strncmp(p, "{namespace}", 11) == 0) {
			text = ns;
			n = strlen(ns);
			p += 11;
		} else {
			p++;
		}
		if (o < size)
			memcpy(out + o, text, n < size - o ? n : size - o);
		o += n;
	}
	out[o < size ? o : size - 1] = '\0';
	return o;
}

size_t policy_flavor_count(const struct policy *p)
{
	return p->n_flavors;
}

bool policy_has_dra_flavor(const struct policy *p)
{
	for (size_t i = 0; i < p->n_flavors; i++)
		if (policy_flavor_at(p, i)->dra)
			return true;
	return false;
}

const struct policy_flavor *policy_flavor_at(const struct policy *p, size_t i)
{
	return i < p->n_flavors ? &p->flavors[i] : NULL;
}

const struct policy_flavor *policy_flavor_find(const struct policy *p,
					       const char *name)
{
	size_t i;

	return strmap_get(&p->flavor_by_name, name, &i) ? &p->flavors[i] : NULL;
}

const char *policy_implicit_device_class(const char *resource)
{
	size_t n = sizeof(POLICY_DEVICE_CLASS_PREFIX) - 1;

	return strncmp(resource, POLICY_DEVICE_CLASS_PREFIX, n) == 0 && resource[n]
		       ? resource + n
		       : NULL;
}

size_t policy_flavors_for_resource(const struct policy *p, const char *resource,
				   const struct policy_flavor **out, size_t max)
{
	size_t n = 0, first;

	if (!strmap_get(&p->flavor_by_res, resource, &first)) {
		const char *dc = policy_implicit_device_class(resource);
		const struct policy_flavor *f =
			dc ? policy_flavor_for_device_class(p, dc) : NULL;

		if (f && max)
			out[0] = f;
		return f ? 1 : 0;
	}
	for (size_t i = first; i < p->n_flavors; i++) {
		if (!p->flavors[i].resource ||
		    strcmp(p->flavors[i].resource, resource) != 0)
			continue;
		if (n < max)
			out[n] = &p->flavors[i];
		n++;
	}
	return n;
}

bool policy_is_flavor_resource(const struct policy *p, const char *resource)
{
	const char *dc;

	if (strmap_get(&p->flavor_by_res, resource, NULL))
		return true;
	dc = policy_implicit_device_class(resource);
	return dc && policy_flavor_for_device_class(p, dc);
}

const struct policy_flavor *policy_flavor_for_device_class(const struct policy *p,
							   const char *device_class)
{
	size_t i;

	return strmap_get(&p->flavor_by_device_class, device_class, &i)
		       ? &p->flavors[i]
		       : NULL;
}

bool policy_is_gpu_device_class(const struct policy *p, const char *device_class)
{
	return strmap_get(&p->flavor_by_device_class, device_class, NULL) ||
	       strmap_get(&p->gpu_device_class, device_class, NULL);
}

size_t policy_class_count(const struct policy *p)
{
	return p->n_classes;
}

const struct policy_class *policy_class_at(const struct policy *p, size_t i)
{
	return i < p->n_classes ? &p->classes[i] : NULL;
}

const struct policy_class *policy_class_find(const struct policy *p,
					     const char *name)
{
	size_t i;

	return strmap_get(&p->class_by_name, name, &i) ? &p->classes[i] : NULL;
}

size_t policy_tenant_count(const struct policy *p)
{
	return p->n_tenants;
}

const struct policy_tenant *policy_tenant_at(const struct policy *p, size_t i)
{
	return i < p->n_tenants ? &p->tenants[i] : NULL;
}

const struct policy_tenant *policy_tenant_find(const struct policy *p,
					       const char *name)
{
	size_t i;

	return strmap_get(&p->tenant_by_name, name, &i) ? &p->tenants[i] : NULL;
}

const struct policy_tenant *policy_tenant_for_namespace(const struct policy *p,
							const char *ns)
{
	size_t best = p->n_tenants, lit;

	if (strmap_get(&p->tenant_by_ns, ns, &lit))
		best = lit;
	/* Globs are in tenant order: the first one that matches an earlier
	 * tenant than the literal match wins. */
	for (size_t g = 0; g < p->n_globs && p->globs[g].tenant < best; g++) {
		const struct ns_glob *gl = &p->globs[g];

		/* A name can only match a glob that starts with the glob's
		 * literal prefix ("team-a-*"): most globs are ruled out by a
		 * strncmp, without fnmatch(). */
		if (strncmp(gl->pattern, ns, gl->prefix) != 0)
			continue;
		if (fnmatch(gl->pattern, ns, 0) == 0) {
			best = p->globs[g].tenant;
			break;
		}
	}
	return best < p->n_tenants ? &p->tenants[best] : NULL;
}

enum policy_exemption policy_exempt(const struct policy *p, const char *ns,
				    const char *sa)
{
	const struct policy_settings *s = &p->settings;
	size_t nl;

	if (!ns)
		return POLICY_NOT_EXEMPT;
	for (size_t i = 0; i < s->n_exempt_namespaces; i++)
		if (strcmp(s->exempt_namespaces[i], ns) == 0)
			return POLICY_EXEMPT_NAMESPACE;
	nl = strlen(ns);
	if (!sa || !sa[0])
		sa = "default";
	for (size_t i = 0; i < s->n_exempt_service_accounts; i++) {
		const char *e = s->exempt_service_accounts[i];

		if (strncmp(e, ns, nl) == 0 && e[nl] == '/' &&
		    strcmp(e + nl + 1, sa) == 0)
			return POLICY_EXEMPT_SERVICE_ACCOUNT;
	}
	return POLICY_NOT_EXEMPT;
}

size_t policy_cohort_count(const struct policy *p)
{
	return p->n_cohorts;
}

int64_t policy_idle_window_s(const struct policy *p)
{
	int64_t w = 0;

	for (size_t i = 0; i < p->n_classes; i++)
		if (p->classes[i].idle && p->classes[i].idle->for_s > w)
			w = p->classes[i].idle->for_s;
	for (size_t i = 0; i < p->n_tenants; i++)
		if (p->tenants[i].idle && p->tenants[i].idle->for_s > w)
			w = p->tenants[i].idle->for_s;
	return w;
}

const char *policy_cohort_name(const struct policy *p, size_t i)
{
	return i < p->n_cohorts ? p->cohorts[i] : NULL;
}

bool policy_tenant_allows_class(const struct policy_tenant *t,
				const struct policy_class *c)
{
	if (t->all_classes)
		return true;
	for (size_t i = 0; i < t->n_classes; i++)
		if (t->classes[i] == c)
			return true;
	return false;
}

bool policy_tenant_can_use(const struct policy_tenant *t,
			   const struct policy_class *c)
{
	return policy_tenant_allows_class(t, c) &&
	       policy_tenant_allows_sharing(t, c->flavor->sharing) &&
	       policy_tenant_quota(t, c->flavor);
}

bool policy_tenant_allows_sharing(const struct policy_tenant *t,
				  enum policy_sharing s)
{
	return (t->sharing_mask >> s) & 1u;
}

const struct policy_quota *policy_tenant_quota(const struct policy_tenant *t,
					       const struct policy_flavor *f)
{
	return t->quota_by_flavor[f->index];
}
