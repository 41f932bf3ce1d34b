/*
 * The decision engine.  Rules run in this order; the first violation is
 * the one reported (docs/users.md lists every message):
 *
 *   1. not a Pod or Job, or not a CREATE           -> allowed untouched
 *   2. no class, no flavor resource                 -> security rules
 *      (every namespace when the pod can reach GPU nodes, else tenant
 *      namespaces only: check_security); forged stamps stripped
 *   3. raw flavor resources without a class         -> no-tenant, raw-request,
 *      two-flavors, raw-flavor (a shared resource must select one flavor),
 *      sharing, security; quota when the resource is one flavor
 *   4. a class: class-conflict, no-tenant, class-unknown, class-not-allowed,
 *      gpus-invalid, sharing, container-unknown, init/other containers'
 *      flavor resources (two-flavors), security, node-selector conflicts,
 *      at /validate not-mutated, then quota (decide_quota)
 *   DRA (a ResourceClaim or ResourceClaimTemplate CREATE asking for a GPU
 *      device class; the section at the end of this file): no-tenant,
 *      raw-request, allocation-all, two-flavors, sharing, then quota
 */
#include "policy/decide.h"
#include "policy/kinds.h"

#include "base/hash.h"
#include "base/text.h"
#include "policy/charge.h"
#include "policy/dra.h"
#include "policy/k8s.h"
#include "policy/pool.h"
#include "policy/reach.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define MAX_POD_FAILURE_RULES 20
/* More than any gang holds; small enough that parse_count cannot wrap. */
#define BORROWED_MAX 100000000u

struct ctx {
	const struct decide_input *in;
	const struct policy *p;
	const struct workload *wl;
	struct decision *out;
	struct charge charge; /* what wl holds (policy/charge.h) */
};

const char *wl_get(const struct wl_kv *kv, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (kv[i].key && strcmp(kv[i].key, key) == 0)
			return kv[i].value;
	return NULL;
}

/* ---- messages --------------------------------------------------------- */

static void add_warning(struct decision *out, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void add_warning(struct decision *out, const char *fmt, ...)
{
	va_list ap;
	char *w;

	if (out->n_warnings >= DECIDE_MAX_WARNINGS)
		return;
	w = out->warnings[out->n_warnings++];
	va_start(ap, fmt);
	vsnprintf(w, DECIDE_WARNING_LEN, fmt, ap);
	va_end(ap);
	/* One line of valid UTF-8 (text_clean also blanks control characters). */
	text_clean(w);
}

void decide_note(struct decision *out, const char *text)
{
	add_warning(out, "%s", text);
}

size_t decide_problem_count(const struct decision *dec)
{
	return dec->n_warnings - (dec->success_warned ? 1 : 0);
}

/*
 * Records a rule violation; the first one wins.  Returns true when the
 * decision is final (enforce mode: denied).  In warn mode the text becomes
 * a warning at /validate; in audit mode it is only recorded.
 */
static bool violate(struct ctx *c, const char *rule, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * A pod the isolation rules deny in a namespace of no tenant looks like a
 * cluster component rather than a tenant's work: its denial says how to
 * exempt it (a tenant's namespace cannot be exempted).
 */
static void exemption_hint(const struct ctx *c, char *msg, size_t size)
{
	size_t n = strlen(msg);

	snprintf(msg + n, size - n,
		 "; if this is a cluster component (the GPU Operator's, "
		 "NVSentinel's, a DCGM exporter), exempt it: "
		 "settings.exemptions.namespaces [\"%.63s\"] or serviceAccounts "
		 "[\"%.63s/%.200s\"] (docs/policy.md, \"exemptions\")",
		 c->wl->namespace ? c->wl->namespace : "",
		 c->wl->namespace ? c->wl->namespace : "",
		 c->wl->pod.service_account ? c->wl->pod.service_account : "default");
}

static bool violate(struct ctx *c, const char *rule, const char *fmt, ...)
{
	struct decision *out = c->out;
	va_list ap;
	int n;

	if (out->violation)
		return out->mode == POLICY_MODE_ENFORCE;
	n = snprintf(out->message, sizeof(out->message), "gpugate: ");
	va_start(ap, fmt);
	vsnprintf(out->message + n, sizeof(out->message) - (size_t)n, fmt, ap);
	va_end(ap);
	if (strcmp(rule, "security") == 0 && out->mode == POLICY_MODE_ENFORCE &&
	    !policy_tenant_for_namespace(c->p, c->wl->namespace))
		exemption_hint(c, out->message, sizeof(out->message));
	text_clean(out->message);
	out->violation = true;
	out->rule = rule;
	switch (out->mode) {
	case POLICY_MODE_ENFORCE:
		out->allowed = false;
		out->code = 403;
		return true;
	case POLICY_MODE_WARN:
		if (c->in->phase == DECIDE_VALIDATE)
			add_warning(out, "%s", out->message);
		return false;
	case POLICY_MODE_AUDIT:
		return false;
	}
	return false;
}

/* Appends s to a comma-separated list in buf, keeping it bounded. */
static void list_add(char *buf, size_t size, const char *s)
{
	size_t len = strlen(buf);

	if (len && strcmp(buf + (len >= 5 ? len - 5 : 0), ", ...") == 0)
		return;
	if (len + strlen(s) + 8 >= size) {
		snprintf(buf + len, size - len, "%s...", len ? ", " : "");
		return;
	}
	snprintf(buf + len, size - len, "%s%s", len ? ", " : "", s);
}

/* The classes tenant t can actually use: allowed, sharing ok, has quota. */
static void usable_classes(const struct policy *p, const struct policy_tenant *t,
			   char *buf, size_t size)
{
	buf[0] = '\0';
	for (size_t i = 0; i < policy_class_count(p); i++) {
		const struct policy_class *cl = policy_class_at(p, i);

		if (policy_tenant_can_use(t, cl))
			list_add(buf, size, cl->name);
	}
	if (!buf[0])
		snprintf(buf, size, "none");
}

/* " (did you mean \"C\"?)" for the class t can use that is nearest to
 * name (text_nearest_consider()), or "". */
static const char *nearest_usable_class(const struct policy *p,
					const struct policy_tenant *t,
					const char *name, char *buf, size_t size)
{
	struct text_nearest near = {0};

	for (size_t i = 0; i < policy_class_count(p); i++) {
		const struct policy_class *cl = policy_class_at(p, i);

		if (policy_tenant_can_use(t, cl))
			text_nearest_consider(&near, name, cl->name);
	}
	return text_nearest_hint(&near, "", buf, size);
}

static void sharing_list(const struct policy_tenant *t, char *buf, size_t size)
{
	buf[0] = '\0';
	for (int s = 0; s < POLICY_SHARING__COUNT; s++)
		if (policy_tenant_allows_sharing(t, (enum policy_sharing)s))
			list_add(buf, size, policy_sharing_name((enum policy_sharing)s));
	if (!buf[0])
		snprintf(buf, size, "none");
}

/* ---- facts helpers ---------------------------------------------------- */

const char *decide_template_kind_name(const struct workload *wl)
{
	return kinds_of_template(wl->template_kind)->kind;
}

static const char *pod_or_job_label(const struct workload *wl, const char *key)
{
	const char *v = wl_get(wl->pod.labels, wl->pod.n_labels, key);

	if (!v && (wl->kind == WL_JOB || wl->kind == WL_TEMPLATE))
		v = wl_get(wl->labels, wl->n_labels, key);
	return v;
}

static const char *pod_or_job_annotation(const struct workload *wl,
					 const char *key)
{
	const char *v = wl_get(wl->pod.annotations, wl->pod.n_annotations, key);

	if (!v && (wl->kind == WL_JOB || wl->kind == WL_TEMPLATE))
		v = wl_get(wl->annotations, wl->n_annotations, key);
	return v;
}

/* Units of a resource in a container: its limit, else its request. */
static bool container_units(const struct wl_container *ct, const char *res,
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

static bool has_resource(const struct wl_resource *r, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(r[i].name, name) == 0)
			return true;
	return false;
}

/* The first flavor resource a container names (limits, then requests). */
static const char *first_flavor_resource(const struct policy *p,
					 const struct wl_container *ct,
					 const char *other_than)
{
	const struct wl_resource *lists[2] = {ct->limits, ct->requests};
	size_t counts[2] = {ct->n_limits, ct->n_requests};

	for (int l = 0; l < 2; l++)
		for (size_t i = 0; i < counts[l]; i++) {
			const char *n = lists[l][i].name;

			if (policy_is_flavor_resource(p, n) &&
			    (!other_than || strcmp(n, other_than) != 0))
				return n;
		}
	return NULL;
}

static bool container_has_flavor_resource(const struct policy *p,
					  const struct wl_container *ct)
{
	return first_flavor_resource(p, ct, NULL) != NULL;
}

/* Whole decimal 1..max without sign or leading zero. */
static bool parse_count(const char *s, unsigned max, unsigned *out)
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

/* ---- security rules --------------------------------------------------- */

/*
 * The variables through which the NVIDIA container runtime hands a
 * container devices, whatever the device plugin allocated.
 */
static bool nvidia_env(const char *name)
{
	return strcmp(name, "NVIDIA_VISIBLE_DEVICES") == 0 ||
	       strcmp(name, "NVIDIA_MIG_CONFIG_DEVICES") == 0 ||
	       strcmp(name, "NVIDIA_MIG_MONITOR_DEVICES") == 0;
}

/*
 * envFrom makes variable prefix + K of every key K of its source.  The
 * keys are unknown at admission, so an entry can make a variable that
 * starts with NVIDIA_ exactly when its prefix (possibly empty) is a prefix
 * of "NVIDIA_" or starts with it.
 */
static bool env_from_may_set_nvidia(const char *prefix)
{
	static const char nv[] = "NVIDIA_";
	const char *pre = prefix ? prefix : "";
	size_t n = strlen(pre);

	return strncmp(pre, nv, n < sizeof(nv) - 1 ? n : sizeof(nv) - 1) == 0;
}

/* Values that hide every device: harmless in a container without GPUs. */
static bool env_hides_devices(const char *value)
{
	return value && (value[0] == '\0' || strcmp(value, "void") == 0 ||
			 strcmp(value, "none") == 0);
}

/*
 * Lexically normalizes dir + "/" + sub into out: "//" and "." segments go,
 * ".." climbs (never above "/").  The kubelet mounts what the kernel
 * resolves, so "/dev/./nvidia0" and "//dev/nvidia0" are /dev/nvidia0.
 */
static void normalize_path(const char *dir, const char *sub, char *out,
			   size_t size)
{
	const char *parts[2] = {dir, sub ? sub : ""};
	size_t o = 0;

	out[o++] = '/';
	for (int k = 0; k < 2; k++) {
		const char *p = parts[k];

		while (*p) {
			const char *seg;
			size_t n;

			while (*p == '/')
				p++;
			seg = p;
			while (*p && *p != '/')
				p++;
			n = (size_t)(p - seg);
			if (n == 0 || (n == 1 && seg[0] == '.'))
				continue;
			if (n == 2 && seg[0] == '.' && seg[1] == '.') {
				while (o > 1 && out[o - 1] != '/')
					o--;
				if (o > 1)
					o--; /* the slash before the dropped segment */
				continue;
			}
			if (o > 1 && o < size - 1)
				out[o++] = '/';
			for (size_t i = 0; i < n && o < size - 1; i++)
				out[o++] = seg[i];
		}
	}
	out[o] = '\0';
}

/* The host root, /dev, or a /dev/nvidia* node: GPU device files. */
static bool device_host_path(const char *path)
{
	return strcmp(path, "/") == 0 || strcmp(path, "/dev") == 0 ||
	       strncmp(path, "/dev/nvidia", 11) == 0;
}

/*
 * The NVIDIA container toolkit's volume-mounts device list: with
 * accept-nvidia-visible-devices-as-volume-mounts, every mount whose
 * destination is under this directory names devices to inject (the device
 * plugin's deviceListStrategy volume-mounts).  gpugate never mounts
 * anything there, so a pod's own mount there asks for GPUs behind the
 * device plugin's back, whatever the volume is.  /run is where /var/run
 * links to: that spelling is refused too (no pod has a use for it).
 */
#define DEVICE_LIST_DIR "/var/run/nvidia-container-devices"

static bool under(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static bool device_list_mount(const char *mount_path)
{
	char path[512];

	if (!mount_path)
		return false;
	normalize_path(mount_path, NULL, path, sizeof(path));
	return under(path, DEVICE_LIST_DIR) ||
	       under(path, "/run/nvidia-container-devices");
}

static const struct wl_volume *find_volume(const struct wl_pod *pod,
					   const char *name)
{
	for (size_t i = 0; i < pod->n_volumes; i++)
		if (pod->volumes[i].name && strcmp(pod->volumes[i].name, name) == 0)
			return &pod->volumes[i];
	return NULL;
}

enum container_kind { CT_REGULAR, CT_INIT, CT_EPHEMERAL };

static const char *const container_noun[] = {
	[CT_REGULAR] = "container",
	[CT_INIT] = "init container",
	[CT_EPHEMERAL] = "ephemeral container",
};

/* "it asks for class big", the parenthesis of a reach-only message. */
static void reach_text(const struct reach *r, char *buf, size_t size)
{
	switch (r->cause) {
	case REACH_CLASS:
		snprintf(buf, size, "it asks for class %.63s", r->class_name);
		return;
	case REACH_RESOURCE:
		snprintf(buf, size, "it asks for %.100s", r->resource);
		return;
	case REACH_TOLERATION:
		snprintf(buf, size,
			 "it tolerates the %.100s taint of flavor %.63s",
			 r->taint->key, r->flavor->name);
		return;
	case REACH_NODE_SELECTOR:
		snprintf(buf, size,
			 "its nodeSelector %.100s=%.63s selects flavor %.63s",
			 r->selector->key, r->selector->value, r->flavor->name);
		return;
	case REACH_NODE_NAME:
		snprintf(buf, size, "its nodeName %.100s is a node of flavor %.63s",
			 r->node, r->flavor->name);
		return;
	case REACH_NONE:
		break;
	}
	snprintf(buf, size, "-");
}

/* A privileged container that is not a GPU container, in a pod that can
 * reach GPU nodes. */
static bool deny_privileged(struct ctx *c, const struct wl_container *ct,
			    enum container_kind kind, const struct reach *r)
{
	char why[300];

	reach_text(r, why, sizeof(why));
	return violate(c, "security",
		       "%s \"%s\" is privileged and the pod can reach GPU "
		       "nodes (%s); a privileged container sees every GPU on "
		       "the node: remove securityContext.privileged%s",
		       container_noun[kind], ct->name ? ct->name : "", why,
		       kind == CT_EPHEMERAL
			       ? " (kubectl debug --profile=sysadmin sets it)"
			       : "");
}

/* envFrom entry e of ct, which could make an NVIDIA_ variable. */
static bool deny_env_from(struct ctx *c, const struct wl_container *ct,
			  enum container_kind kind, size_t e,
			  const struct reach *r)
{
	const struct wl_env_from *ef = &ct->env_from[e];
	char why[300], src[300], pre[100];

	reach_text(r, why, sizeof(why));
	if (ef->source == WL_ENV_OTHER)
		snprintf(src, sizeof(src), "envFrom[%zu]", e);
	else
		snprintf(src, sizeof(src), "%s \"%.253s\"",
			 ef->source == WL_ENV_SECRET ? "secret" : "configMap",
			 ef->name ? ef->name : "");
	if (ef->prefix && ef->prefix[0])
		snprintf(pre, sizeof(pre), "with prefix \"%.63s\"", ef->prefix);
	else
		snprintf(pre, sizeof(pre), "without a prefix");
	return violate(c, "security",
		       "%s \"%s\" takes env from %s %s and the pod can reach "
		       "GPU nodes (%s); its keys could make variables that "
		       "start with NVIDIA_, such as NVIDIA_VISIBLE_DEVICES, "
		       "which bypasses the device plugin's GPU isolation: set "
		       "a prefix that does not start with NVIDIA_ (e.g. "
		       "prefix: APP_)",
		       container_noun[kind], ct->name ? ct->name : "", src, pre,
		       why);
}

/*
 * Returns true when the decision is final.  gpu: the container gets GPUs;
 * r: why the pod can reach GPU nodes, or NULL when it cannot.
 */
static bool check_container_security(struct ctx *c, const struct wl_container *ct,
				     enum container_kind kind, bool gpu,
				     const struct reach *r)
{
	const struct wl_pod *pod = &c->wl->pod;
	const char *noun = container_noun[kind];
	const char *name = ct->name ? ct->name : "";

	if (gpu && ct->privileged &&
	    violate(c, "security",
		    "%s \"%s\" is privileged; a privileged GPU container "
		    "bypasses the device plugin's isolation: remove "
		    "securityContext.privileged",
		    noun, name))
		return true;
	if (!gpu && ct->privileged && r && deny_privileged(c, ct, kind, r))
		return true;
	for (size_t e = 0; e < ct->n_env; e++) {
		if (!ct->env[e].key || !nvidia_env(ct->env[e].key))
			continue;
		if (!gpu && env_hides_devices(ct->env[e].value))
			continue;
		if (violate(c, "security",
			    "%s \"%s\" sets %s, which bypasses the device "
			    "plugin's GPU isolation: remove it and ask for GPUs "
			    "with a class",
			    noun, name, ct->env[e].key))
			return true;
	}
	for (size_t e = 0; r && e < ct->n_env_from; e++)
		if (env_from_may_set_nvidia(ct->env_from[e].prefix) &&
		    deny_env_from(c, ct, kind, e, r))
			return true;
	for (size_t m = 0; m < ct->n_mounts; m++) {
		const struct wl_volume *v;
		char src[512];

		if (device_list_mount(ct->mounts[m].path) &&
		    violate(c, "security",
			    "%s \"%s\" mounts volume \"%s\" at %.200s, where the "
			    "NVIDIA container toolkit reads which GPUs to give a "
			    "container (" DEVICE_LIST_DIR "), which bypasses the "
			    "device plugin's GPU isolation: mount it elsewhere, and "
			    "ask for GPUs with a class",
			    noun, name, ct->mounts[m].volume ? ct->mounts[m].volume : "",
			    ct->mounts[m].path))
			return true;
		if (!ct->mounts[m].volume)
			continue;
		v = find_volume(pod, ct->mounts[m].volume);
		if (!v || !v->host_path)
			continue;
		normalize_path(v->host_path, ct->mounts[m].sub_path, src, sizeof(src));
		if (!device_host_path(src))
			continue;
		/* Quote what the user wrote: that is what they will look for. */
		if (violate(c, "security",
			    "%s \"%s\" mounts host path %.200s%s%.200s (volume "
			    "\"%s\"), which bypasses the device plugin's GPU "
			    "isolation: remove the hostPath volume",
			    noun, name, v->host_path,
			    ct->mounts[m].sub_path ? " with subPath " : "",
			    ct->mounts[m].sub_path ? ct->mounts[m].sub_path : "",
			    v->name))
			return true;
	}
	return false;
}

/*
 * A pod that names its node (spec.nodeName) skips the scheduler, and with
 * it the taints and selectors by which the policy knows GPU nodes: it can
 * reach them when that node is a flavor's, as the cluster's inventory says.
 */
static bool reach_node_name(const struct ctx *c, struct reach *why)
{
	const struct decide_node_source *ns = c->in->nodes;
	const char *node = c->wl->pod.node_name;
	const struct policy_flavor *f;

	if (!node || !node[0] || !ns || !(f = ns->flavor_of(ns->ctx, node)))
		return false;
	*why = (struct reach){.cause = REACH_NODE_NAME, .flavor = f, .node = node};
	return true;
}

/* A CDI device name's kind ("vendor/class" before '=') is a GPU's: any of
 * NVIDIA's, or a flavor's resource. */
static bool cdi_gpu_kind(const struct policy *p, const char *kind, size_t n)
{
	char buf[256];

	if (n >= 11 && strncmp(kind, "nvidia.com/", 11) == 0)
		return true;
	if (n >= sizeof(buf))
		return false;
	memcpy(buf, kind, n);
	buf[n] = '\0';
	return policy_is_flavor_resource(p, buf);
}

/*
 * Annotations cdi.k8s.io/<anything> ask the container runtime (containerd,
 * CRI-O) to inject the CDI devices they name, a comma-separated list of
 * "vendor/class=name": a GPU named there reaches the container without the
 * device plugin or DRA allocating it.  gpugate injects none.
 */
static bool check_cdi(struct ctx *c)
{
	const struct wl_pod *pod = &c->wl->pod;

	for (size_t i = 0; i < pod->n_annotations; i++) {
		const char *key = pod->annotations[i].key;
		const char *v = pod->annotations[i].value;

		if (!key || strncmp(key, "cdi.k8s.io/", 11) != 0 || !v)
			continue;
		while (*v) {
			size_t len = strcspn(v, ",");
			const char *eq = memchr(v, '=', len);
			size_t kind = eq ? (size_t)(eq - v) : len;

			while (kind > 0 && v[0] == ' ') {
				v++;
				len--;
				kind--;
			}
			if (cdi_gpu_kind(c->p, v, kind))
				return violate(c, "security",
					       "annotation %.100s asks the container "
					       "runtime for CDI device %.*s, which "
					       "bypasses the device plugin's GPU "
					       "isolation: remove the annotation and ask "
					       "for GPUs with a class",
					       key, (int)(len > 200 ? 200 : len), v);
			v += len;
			if (*v == ',')
				v++;
		}
	}
	return false;
}

/*
 * Security rules over every container of the pod: init, regular and
 * ephemeral.  A pod that can reach GPU nodes (policy/reach.h; a class
 * label counts) gets all of them, in every namespace the webhooks see:
 * no container may be privileged or take env from a source that could
 * set NVIDIA_ variables.  Any other pod gets the env and hostPath rules,
 * in tenant namespaces only (outside them, e.g. in a device plugin's own
 * namespace, such a pod is not gpugate's business).  A container is a GPU
 * container when it is the class's (gpu_index) or asks for a flavor
 * resource itself: its privileged denial says so, and
 * NVIDIA_VISIBLE_DEVICES=void is no excuse there.
 */
static bool check_security(struct ctx *c, long gpu_index)
{
	const struct wl_pod *pod = &c->wl->pod;
	const char *cls =
		pod_or_job_label(c->wl, policy_settings(c->p)->class_label);
	struct reach why;
	const struct reach *r = &why;

	if (cls)
		why = (struct reach){.cause = REACH_CLASS, .class_name = cls};
	else if (!reach_gpu_nodes(c->p, pod, &why) && !reach_node_name(c, &why))
		r = NULL;
	if (!r && !c->out->tenant)
		return false;
	if (check_cdi(c))
		return true;
	for (size_t i = 0; i < pod->n_init_containers; i++) {
		const struct wl_container *ct = &pod->init_containers[i];
		bool gpu = container_has_flavor_resource(c->p, ct);

		if (check_container_security(c, ct, CT_INIT, gpu, r))
			return true;
	}
	for (size_t i = 0; i < pod->n_containers; i++) {
		const struct wl_container *ct = &pod->containers[i];
		bool gpu = (long)i == gpu_index ||
			   container_has_flavor_resource(c->p, ct);

		if (check_container_security(c, ct, CT_REGULAR, gpu, r))
			return true;
	}
	for (size_t i = 0; i < pod->n_ephemeral_containers; i++)
		if (check_container_security(c, &pod->ephemeral_containers[i],
					     CT_EPHEMERAL, false, r))
			return true;
	return false;
}

/* ---- stamps ----------------------------------------------------------- */

static bool has_stamps(const struct wl_kv *labels, size_t nl,
		       const struct wl_kv *ann, size_t na)
{
	static const char *const label_keys[] = {STAMP_TENANT, STAMP_FLAVOR,
						 STAMP_PREEMPTIBLE, STAMP_GANG};
	static const char *const ann_keys[] = {STAMP_DECISION, STAMP_BORROWED};

	for (size_t i = 0; i < sizeof(label_keys) / sizeof(label_keys[0]); i++)
		if (wl_get(labels, nl, label_keys[i]))
			return true;
	for (size_t i = 0; i < sizeof(ann_keys) / sizeof(ann_keys[0]); i++)
		if (wl_get(ann, na, ann_keys[i]))
			return true;
	return false;
}

static bool workload_has_stamps(const struct workload *wl)
{
	return has_stamps(wl->pod.labels, wl->pod.n_labels, wl->pod.annotations,
			  wl->pod.n_annotations) ||
	       (wl->kind == WL_JOB && has_stamps(wl->labels, wl->n_labels,
						 wl->annotations, wl->n_annotations));
}

static bool gang_well_formed(const char *g)
{
	if (!g || strlen(g) != 18 || strncmp(g, "g-", 2) != 0)
		return false;
	for (const char *c = g + 2; *c; c++)
		if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
			return false;
	return true;
}

/*
 * The gang id of a Job: derived from its namespace and name, or from the
 * request when the name is still to be generated (re-invocations of one
 * request agree).  Never taken from the user: a forged id could join
 * another Job's gang.  A Job's pod keeps the id its template gave it, or
 * derives it from its Job the same way.
 */
static void gang_id(const struct workload *wl, char *out, size_t size)
{
	const char *have = wl_get(wl->pod.labels, wl->pod.n_labels, STAMP_GANG);
	uint64_t h = HASH_FNV1A_SEED;

	if (wl->kind == WL_POD && gang_well_formed(have)) {
		snprintf(out, size, "%s", have);
		return;
	}
	h = hash_fnv1a(h, wl->namespace);
	h = hash_fnv1a(h, "/");
	if (wl->kind == WL_POD) {
		h = hash_fnv1a(h, wl->owner_job);
	} else if (wl->name && wl->name[0]) {
		h = hash_fnv1a(h, wl->name);
	} else {
		h = hash_fnv1a(h, "/");
		h = hash_fnv1a(h, wl->request_uid);
	}
	snprintf(out, size, "g-%016" PRIx64, h);
}

/* ---- the raw path (a flavor resource without a class) ------------------ */

/* "a100: nvidia.com/gpu.product=A100; h100: ...", the flavors of res with
 * their nodeSelectors. */
static void flavors_of_resource(const struct policy *p, const char *res,
				char *buf, size_t size)
{
	const struct policy_flavor *f[8];
	size_t n = policy_flavors_for_resource(p, res, f, 8);

	buf[0] = '\0';
	for (size_t i = 0; i < n && i < 8; i++) {
		char one[300];
		size_t o;

		o = (size_t)snprintf(one, sizeof(one), "%.63s:", f[i]->name);
		for (size_t k = 0; k < f[i]->n_node_selector && o < sizeof(one); k++)
			o += (size_t)snprintf(one + o, sizeof(one) - o, " %.100s=%.63s",
					      f[i]->node_selector[k].key,
					      f[i]->node_selector[k].value);
		if (f[i]->n_node_selector == 0)
			snprintf(one + o, sizeof(one) - o, " no nodeSelector");
		o = strlen(buf);
		snprintf(buf + o, size - o, "%s%s", i ? "; " : "", one);
	}
}

static void decide_raw(struct ctx *c, const char *resource)
{
	const struct workload *wl = c->wl;
	const struct policy_tenant *t = c->out->tenant;
	const struct policy_flavor *f;
	char classes[600];
	int64_t units;

	if (!t) {
		violate(c, "no-tenant",
			"namespace \"%s\" belongs to no tenant, so it cannot use %s; "
			"ask the platform team to add it to a tenant in the gpugate "
			"policy",
			wl->namespace, resource);
		return;
	}
	if (policy_settings(c->p)->raw_gpu_requests == POLICY_RAW_REJECT) {
		usable_classes(c->p, t, classes, sizeof(classes));
		violate(c, "raw-request",
			"this workload asks for %s directly; request GPUs with a class "
			"instead: set label %s to one of: %s",
			resource, policy_settings(c->p)->class_label, classes);
		return;
	}
	/* Allowed raw requests still follow the one-flavor, sharing and
	 * security rules, and are charged by the charge rule. */
	for (size_t i = 0; i < wl->pod.n_containers + wl->pod.n_init_containers; i++) {
		const struct wl_container *ct =
			i < wl->pod.n_containers
				? &wl->pod.containers[i]
				: &wl->pod.init_containers[i - wl->pod.n_containers];
		const char *other = first_flavor_resource(c->p, ct, resource);

		if (other) {
			if (violate(c, "two-flavors",
				    "this workload asks for resources of two flavors "
				    "(%s and %s); a pod may use one flavor only",
				    resource, other))
				return;
			break;
		}
	}
	/* The flavor of a resource several flavors share is the one whose
	 * nodes the pod selects (policy/charge.h); a pod that could land on
	 * another one's nodes would be charged for the wrong flavor. */
	if (!charge_selected_flavor(c->p, &wl->pod, resource)) {
		char which[600];

		flavors_of_resource(c->p, resource, which, sizeof(which));
		if (violate(c, "raw-flavor",
			    "this workload asks for %s, which several flavors "
			    "share, and its nodeSelector does not select exactly "
			    "one of them: set the nodeSelector of one (%s), or ask "
			    "for GPUs with a class",
			    resource, which))
			return;
	}
	f = c->charge.flavor;
	units = c->charge.per_pod;
	if (f && !policy_tenant_allows_sharing(t, f->sharing)) {
		char allowed[128];

		sharing_list(t, allowed, sizeof(allowed));
		if (violate(c, "sharing",
			    "%s is a %s GPU resource, which tenant \"%s\" may not "
			    "use (allowed sharing: %s)",
			    resource, policy_sharing_name(f->sharing), t->name,
			    allowed))
			return;
	}
	if (check_security(c, -1))
		return;
	if (f && units > 0) {
		c->out->flavor = f;
		c->out->claim = (struct quota_claim){
			.needed = true,
			.tenant = t,
			.flavor = f,
			.per_pod = (unsigned)(units > UINT32_MAX ? UINT32_MAX : units),
			.pods = wl->kind == WL_JOB ? charge_job_slots(wl) : 1,
			.may_borrow = false,
		};
		c->out->claim.units = units * c->out->claim.pods;
	}
}

/* ---- the class path --------------------------------------------------- */

/* Step "resources": which container gets GPUs, and nobody else does. */
static bool check_class_resources(struct ctx *c, size_t gpu)
{
	const struct wl_pod *pod = &c->wl->pod;
	const char *res = c->out->flavor->resource;

	for (size_t i = 0; i < pod->n_init_containers; i++) {
		const struct wl_container *ct = &pod->init_containers[i];
		const char *r = first_flavor_resource(c->p, ct, NULL);

		if (r && violate(c, "two-flavors",
				 "init container \"%s\" asks for %s; with class %s "
				 "only container \"%s\" gets accelerators: remove that "
				 "request",
				 ct->name, r, c->out->cls->name,
				 pod->containers[gpu].name))
			return true;
	}
	for (size_t i = 0; i < pod->n_containers; i++) {
		const struct wl_container *ct = &pod->containers[i];
		const char *other = first_flavor_resource(c->p, ct, res);

		if (other && violate(c, "two-flavors",
				     "container \"%s\" asks for %s, but class %s gives "
				     "this pod %s (%s) only: remove that request",
				     ct->name, other, c->out->cls->name,
				     c->out->flavor->name, res))
			return true;
		if (i != gpu &&
		    (has_resource(ct->limits, ct->n_limits, res) ||
		     has_resource(ct->requests, ct->n_requests, res)) &&
		    violate(c, "two-flavors",
			    "container \"%s\" also asks for %s; with class %s only "
			    "container \"%s\" gets accelerators: remove that request "
			    "or name it in annotation " ANNOTATION_CONTAINER,
			    ct->name, res, c->out->cls->name, pod->containers[gpu].name))
			return true;
	}
	return false;
}

static bool check_node_selector(struct ctx *c)
{
	const struct policy_flavor *f = c->out->flavor;
	const struct wl_pod *pod = &c->wl->pod;

	for (size_t i = 0; i < f->n_node_selector; i++) {
		const struct policy_kv *kv = &f->node_selector[i];
		const char *have = wl_get(pod->node_selector, pod->n_node_selector,
					  kv->key);

		if (have && strcmp(have, kv->value) != 0) {
			if (violate(c, "node-selector",
				    "nodeSelector %s=%s conflicts with flavor %s, which "
				    "needs %s=%s: remove it, the class chooses the nodes",
				    kv->key, have, f->name, kv->key, kv->value))
				return true;
		} else if (!have && c->in->phase == DECIDE_VALIDATE) {
			if (violate(c, "not-mutated",
				    "the pod lacks nodeSelector %s=%s of flavor %s: it "
				    "was changed after gpugate's mutation, or the "
				    "mutating webhook is not registered",
				    kv->key, kv->value, f->name))
				return true;
		}
	}
	return false;
}

/* At /validate: the GPU container carries exactly the class's resources. */
static bool check_mutated_resources(struct ctx *c, size_t gpu)
{
	const struct wl_container *ct = &c->wl->pod.containers[gpu];
	const char *res = c->out->flavor->resource;
	const char *raw = NULL;
	int64_t units = -1;
	bool found = container_units(ct, res, &units, &raw);

	for (size_t i = 0; found && i < ct->n_requests; i++) {
		int64_t r;

		if (strcmp(ct->requests[i].name, res) == 0 &&
		    (!ct->requests[i].quantity ||
		     k8s_quantity_whole(ct->requests[i].quantity, &r) < 0 ||
		     r != units))
			units = -1;
	}
	if (found && units == (int64_t)c->out->count)
		return false;
	return violate(c, "not-mutated",
		       "container \"%s\" has %s %s but class %s gives %u: it was "
		       "changed after gpugate's mutation, or the mutating webhook "
		       "is not registered",
		       ct->name, res, found ? (raw && raw[0] ? raw : "(invalid)") : "none",
		       c->out->cls->name, c->out->count);
}

/*
 * An UPDATE of a pod template gpugate mapped before (its tenant stamp is on
 * the old template) that leaves container ct's count of res as the old
 * template had it: that count is the one gpugate wrote.  kubectl apply
 * keeps a field its last-applied configuration does not name, so a user
 * who changes only the GPU label would otherwise be told that "their"
 * count conflicts with it.  It is rewritten to the class's.
 */
static bool count_is_gpugates(const struct ctx *c, const struct wl_container *ct,
			      const char *res, int64_t units)
{
	const struct workload *old = c->in->old;

	if (c->wl->kind != WL_TEMPLATE || c->wl->op != WL_UPDATE || !old || !ct->name ||
	    !wl_get(old->pod.labels, old->pod.n_labels, STAMP_TENANT))
		return false;
	for (size_t i = 0; i < old->pod.n_containers; i++) {
		const struct wl_container *oc = &old->pod.containers[i];
		const char *raw = NULL;
		int64_t was = -1;

		if (oc->name && strcmp(oc->name, ct->name) == 0)
			return container_units(oc, res, &was, &raw) && was == units;
	}
	return false;
}

/*
 * At /mutate: a GPU count the user wrote on the GPU container must be the
 * class's.  gpugate never removes what the user wrote, so a different one
 * is denied rather than replaced without a word (what gpugate wrote itself
 * on a template is rewritten: count_is_gpugates()).
 */
static bool check_user_count(struct ctx *c, size_t gpu, unsigned count)
{
	const struct wl_container *ct = &c->wl->pod.containers[gpu];
	const struct policy_class *cls = c->out->cls;
	const char *res = cls->flavor->resource, *label = policy_settings(c->p)->gpus_label;
	const char *raw = NULL;
	int64_t units = -1;

	if (!container_units(ct, res, &units, &raw) || units == (int64_t)count ||
	    count_is_gpugates(c, ct, res, units))
		return false;
	if (units >= 1 && units <= (int64_t)cls->max_gpus)
		return violate(c, "gpus-conflict",
			       "container \"%s\" asks for %s %s but class %s gives %u: "
			       "remove that request, or set label %s: \"%s\"",
			       ct->name ? ct->name : "", raw, res, cls->name, count,
			       label, raw);
	return violate(c, "gpus-conflict",
		       "container \"%s\" asks for %s %s but class %s gives %u "
		       "(at most %u with label %s): remove that request",
		       ct->name ? ct->name : "", raw && raw[0] ? raw : "(invalid)", res,
		       cls->name, count, cls->max_gpus, label);
}

/*
 * After a violation that leaves nothing to map (warn or audit mode): the
 * workload is admitted as it is.
 */
static void unmap(struct ctx *c)
{
	c->out->cls = NULL;
	c->out->flavor = NULL;
}

static void decide_class(struct ctx *c, const char *class_name)
{
	const struct workload *wl = c->wl;
	const struct policy_settings *s = policy_settings(c->p);
	const struct policy_tenant *t = c->out->tenant;
	const struct policy_class *cls;
	const char *gpus, *want;
	char list[600];
	size_t gpu = 0;
	unsigned count;

	if (!t) {
		violate(c, "no-tenant",
			"namespace \"%s\" belongs to no tenant, so it cannot use GPU "
			"class \"%s\"; ask the platform team to add it to a tenant in "
			"the gpugate policy",
			wl->namespace, class_name);
		return;
	}
	cls = policy_class_find(c->p, class_name);
	if (!cls) {
		char hint[TEXT_DISTANCE_MAX_LEN + 32];

		usable_classes(c->p, t, list, sizeof(list));
		violate(c, "class-unknown",
			"unknown GPU class \"%s\"%s; tenant \"%s\" may use: %s",
			class_name,
			nearest_usable_class(c->p, t, class_name, hint, sizeof(hint)),
			t->name, list);
		return;
	}
	if (!policy_tenant_allows_class(t, cls)) {
		usable_classes(c->p, t, list, sizeof(list));
		violate(c, "class-not-allowed",
			"class \"%s\" is not allowed for tenant \"%s\"; allowed: %s",
			cls->name, t->name, list);
		return;
	}
	c->out->cls = cls;
	c->out->flavor = cls->flavor;

	gpus = pod_or_job_label(wl, s->gpus_label);
	count = cls->gpus;
	if (gpus && !parse_count(gpus, cls->max_gpus, &count)) {
		violate(c, "gpus-invalid",
			"label %s=\"%.40s\" must be a whole number from 1 to %u for "
			"class %s",
			s->gpus_label, gpus, cls->max_gpus, cls->name);
		unmap(c);
		return;
	}
	c->out->count = count;

	if (!policy_tenant_allows_sharing(t, cls->flavor->sharing)) {
		char allowed[128];

		sharing_list(t, allowed, sizeof(allowed));
		if (violate(c, "sharing",
			    "class \"%s\" uses %s GPUs, which tenant \"%s\" may not "
			    "use (allowed sharing: %s)",
			    cls->name, policy_sharing_name(cls->flavor->sharing),
			    t->name, allowed))
			return;
	}

	if (wl->pod.n_containers == 0) {
		violate(c, "container-unknown", "the pod has no containers");
		unmap(c);
		return;
	}
	want = pod_or_job_annotation(wl, ANNOTATION_CONTAINER);
	if (want) {
		size_t i;

		for (i = 0; i < wl->pod.n_containers; i++)
			if (wl->pod.containers[i].name &&
			    strcmp(wl->pod.containers[i].name, want) == 0)
				break;
		if (i == wl->pod.n_containers) {
			list[0] = '\0';
			for (size_t k = 0; k < wl->pod.n_containers; k++)
				list_add(list, sizeof(list),
					 wl->pod.containers[k].name ? wl->pod.containers[k].name
								    : "");
			violate(c, "container-unknown",
				"annotation " ANNOTATION_CONTAINER " names container "
				"\"%.63s\", but the pod has no such container "
				"(containers: %s)",
				want, list);
			unmap(c);
			return;
		}
		gpu = i;
	}
	c->out->plan.gpu_container = gpu;

	if (c->in->phase == DECIDE_MUTATE && check_user_count(c, gpu, count))
		return;
	if (check_class_resources(c, gpu) || check_security(c, (long)gpu) ||
	    check_node_selector(c))
		return;
	if (c->in->phase == DECIDE_VALIDATE && check_mutated_resources(c, gpu))
		return;

	c->out->claim = (struct quota_claim){
		.needed = true,
		.tenant = t,
		.flavor = cls->flavor,
		.per_pod = count,
		.pods = wl->kind == WL_JOB ? charge_job_slots(wl) : 1,
	};
	c->out->claim.units = (int64_t)count * c->out->claim.pods;
	/* At /mutate the workload will be made preemptible if it borrows; at
	 * /validate it may borrow only if it already is. */
	c->out->claim.may_borrow =
		c->in->phase == DECIDE_MUTATE || cls->preemptible ||
		(pod_or_job_label(wl, STAMP_PREEMPTIBLE) &&
		 strcmp(pod_or_job_label(wl, STAMP_PREEMPTIBLE), "true") == 0);
}

/* ---- plan and messages after quota ------------------------------------ */

static bool pre_stop_is_ours(const struct policy_checkpoint *ck,
			     const struct wl_container *ct)
{
	if (ct->n_pre_stop_exec != ck->n_pre_stop || !ck->n_pre_stop)
		return false;
	for (size_t i = 0; i < ck->n_pre_stop; i++)
		if (!ct->pre_stop_exec[i] ||
		    strcmp(ct->pre_stop_exec[i], ck->pre_stop[i]) != 0)
			return false;
	return true;
}

/*
 * gpugate check has tried the claim name with every tenant: only the
 * namespace can still spoil it, by its length, or by being no valid name
 * (the apiserver never sends one; gpugate explain --namespace may).  The
 * volume is then an emptyDir, with a warning that says why.
 */
static void plan_claim_name(struct ctx *c, const char *tmpl)
{
	const char *ns = c->wl->namespace;
	char *name = c->out->plan.claim_name;
	const size_t size = sizeof(c->out->plan.claim_name);
	char shown[DECIDE_WARNING_LEN];

	switch (policy_checkpoint_claim(c->p, c->out->tenant, ns, name, size)) {
	case POLICY_CLAIM_TOO_LONG:
		add_warning(c->out,
			    "gpugate: checkpoint claim name for namespace %.63s is "
			    "longer than the %zu characters of a PersistentVolumeClaim "
			    "name; using an emptyDir volume",
			    ns, size - 1);
		break;
	case POLICY_CLAIM_INVALID:
		policy_claim_name(tmpl, c->out->tenant->name, ns, shown, sizeof(shown));
		add_warning(c->out,
			    "gpugate: checkpoint claim name \"%.80s\" for namespace "
			    "%.63s is not a valid PersistentVolumeClaim name; using an "
			    "emptyDir volume",
			    shown, ns);
		break;
	default:
		break;
	}
}

static bool signal_volume_is_ours(const struct wl_volume *v)
{
	return v->downward_path && strcmp(v->downward_path, SIGNAL_ITEM) == 0 &&
	       v->downward_field && strcmp(v->downward_field, SIGNAL_FIELD_PATH) == 0;
}

/*
 * The checkpoint signal: what the user already has under its name or at
 * its path is kept (apply.c), with a warning when it is not gpugate's own,
 * since $GPUGATE_CHECKPOINT_SIGNAL may then never show a request.
 */
static void plan_signal(struct ctx *c)
{
	const struct wl_pod *pod = &c->wl->pod;

	c->out->plan.signal = true;
	for (size_t i = 0; i < pod->n_volumes; i++)
		if (pod->volumes[i].name &&
		    strcmp(pod->volumes[i].name, SIGNAL_VOLUME) == 0 &&
		    !signal_volume_is_ours(&pod->volumes[i]))
			add_warning(c->out,
				    "gpugate: the pod keeps its own volume \"" SIGNAL_VOLUME
				    "\"; " SIGNAL_FILE " may not show checkpoint requests");
	for (size_t i = 0; i < pod->n_containers; i++) {
		const struct wl_container *ct = &pod->containers[i];
		bool ours = false, other = false;

		for (size_t m = 0; m < ct->n_mounts; m++) {
			bool named = ct->mounts[m].volume &&
				     strcmp(ct->mounts[m].volume, SIGNAL_VOLUME) == 0;
			bool at = ct->mounts[m].path &&
				  strcmp(ct->mounts[m].path, SIGNAL_MOUNT_PATH) == 0;

			if (named && at && !ct->mounts[m].sub_path)
				ours = true;
			else if (named || at)
				other = true;
		}
		if (other && !ours)
			add_warning(c->out,
				    "gpugate: container \"%.63s\" keeps its own mount of "
				    "\"" SIGNAL_VOLUME "\" or at " SIGNAL_MOUNT_PATH
				    "; it may not see checkpoint requests",
				    ct->name ? ct->name : "");
	}
}

/*
 * The checkpoint volume mounts the claim pl->claim_name: pods that mount a
 * claim that does not exist never start, so a claim known to be missing is
 * not mounted at all (the rest of the hooks stay); where the claims are
 * not known (no API, not listed yet) it is mounted as the policy says.
 * Pods of one workload on several nodes need it ReadWriteMany.  Said once
 * per workload (not for each pod of a Job, which is planned all the same:
 * its claim may have been created since its Job).
 */
static void check_checkpoint_claim(struct ctx *c)
{
	const struct workload *wl = c->wl;
	struct plan *pl = &c->out->plan;
	int64_t pods = wl->kind == WL_JOB ? wl->parallelism
		       : wl->kind == WL_TEMPLATE ? (wl->template_kind == WL_DAEMONSET
							    ? 2 /* one per node */
							    : wl->replicas)
					       : 1;
	enum pvc_state st;

	if (!c->in->pvcs || !pl->claim_name[0])
		return;
	st = c->in->pvcs->state(c->in->pvcs->ctx, wl->namespace, pl->claim_name);
	pl->no_volume = st == PVC_MISSING;
	if (wl->kind == WL_POD && wl->owner_job)
		return;
	if (st == PVC_MISSING)
		add_warning(c->out,
			    "gpugate: checkpoint volume not mounted: PersistentVolumeClaim "
			    "\"%.63s\" does not exist in namespace %.63s; what is written "
			    "to %.63s is lost with the pod; %s",
			    pl->claim_name, wl->namespace,
			    policy_checkpoint(c->p)->mount_path,
			    policy_checkpoint(c->p)->claim.create
				    ? "gpugate creates it (checkpoint.claim.create), "
				      "wait a moment and create the workload again"
				    : "create it or set checkpoint.claim.create");
	else if (st == PVC_ONE_NODE && pods > 1)
		add_warning(c->out,
			    "gpugate: checkpoint volume: PersistentVolumeClaim \"%.63s\" "
			    "is not ReadWriteMany; pods on different nodes cannot all "
			    "mount it",
			    pl->claim_name);
}

/*
 * Borrowing makes a workload preemptible (gpugate may take it back), not a
 * user of the checkpoint hooks: they come with a preemptible class, or the
 * user's own gpugate.io/preemptible "true" (the label gpugate stamps on a
 * borrower comes with gpugate.io/borrowed: a borrowing Job's pods and a
 * reinvocation get no hooks from it).
 */
/*
 * Whether the workload takes units beyond its tenant's nominal quota.  A
 * request of nothing (a Job of parallelism 0) by a tenant already over it
 * is in the borrowed position but borrows nothing: it is not made
 * preemptible, and its reinvocation agrees (the gpugate.io/borrowed record
 * is a count of at least one).
 */
static bool borrows(const struct decision *out)
{
	return out->has_quota && out->quota.position == QUOTA_BORROWED &&
	       out->quota.borrowed > 0;
}

static bool wants_hooks(const struct ctx *c)
{
	const char *label = pod_or_job_label(c->wl, STAMP_PREEMPTIBLE);

	return c->out->cls->preemptible ||
	       (label && strcmp(label, "true") == 0 &&
		!pod_or_job_annotation(c->wl, STAMP_BORROWED));
}

static void plan_checkpoint(struct ctx *c)
{
	const struct policy_checkpoint *ck = policy_checkpoint(c->p);
	const struct workload *wl = c->wl;
	struct plan *pl = &c->out->plan;
	const struct wl_container *gpu = &wl->pod.containers[pl->gpu_container];

	pl->checkpoint = true;
	plan_signal(c);
	pl->grace = ck->grace_period_seconds;
	if (ck->claim_name) {
		plan_claim_name(c, ck->claim_name);
		check_checkpoint_claim(c);
	}
	if (ck->n_pre_stop) {
		if (!gpu->has_pre_stop)
			pl->set_pre_stop = true;
		else if (!pre_stop_is_ours(ck, gpu))
			add_warning(c->out,
				    "gpugate: container \"%.63s\" keeps its own preStop "
				    "hook; make sure it checkpoints within %" PRId64 "s",
				    gpu->name, ck->grace_period_seconds);
	}
	if (wl->kind != WL_JOB || wl->has_disruption_rule)
		return;
	if (!wl->pod.restart_policy || strcmp(wl->pod.restart_policy, "Never") != 0)
		add_warning(c->out,
			    "gpugate: restartPolicy %s lets preemptions count against "
			    "backoffLimit; use restartPolicy Never so that gpugate can "
			    "add a podFailurePolicy",
			    wl->pod.restart_policy ? wl->pod.restart_policy : "(unset)");
	else if (wl->n_failure_rules >= MAX_POD_FAILURE_RULES)
		add_warning(c->out,
			    "gpugate: podFailurePolicy already has %d rules; preemptions "
			    "will count against backoffLimit",
			    MAX_POD_FAILURE_RULES);
	else
		pl->add_failure_rule = true;
}

/* "tenant "product" borrows 8, tenant "x" borrows 2": who holds the lent
 * units of q (QUOTA_MAX_NAMED named, then "and N more"). */
static void borrowers_text(const struct quota_result *q, char *buf, size_t size)
{
	size_t n = q->n_borrowers < QUOTA_MAX_NAMED ? q->n_borrowers : QUOTA_MAX_NAMED;

	buf[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(buf);

		snprintf(buf + len, size - len, "%stenant \"%.63s\" borrows %" PRId64,
			 i ? ", " : "", q->borrowers[i].tenant, q->borrowers[i].borrowed);
	}
	if (q->n_borrowers > n) {
		size_t len = strlen(buf);

		snprintf(buf + len, size - len, " and %zu more", q->n_borrowers - n);
	}
}

/* What a tenant may hold at most, as a NEVER_FITS message says it:
 * "nominal 8 + borrowing limit 4". */
static void ceiling_text(const struct quota_result *q, char *buf, size_t size)
{
	if (!q->cohort)
		snprintf(buf, size, "nominal %" PRId64, q->nominal);
	else if (q->borrowing_limit != POLICY_NO_LIMIT &&
		 q->borrowing_limit <= q->cohort_lendable)
		snprintf(buf, size, "nominal %" PRId64 " + borrowing limit %" PRId64,
			 q->nominal, q->borrowing_limit);
	else
		snprintf(buf, size, "nominal %" PRId64 " + %" PRId64 " that cohort \"%s\" can lend",
			 q->nominal, q->ceiling - q->nominal, q->cohort);
}

static void template_pool(struct ctx *c);

/*
 * A pod-template controller (WL_TEMPLATE) reserves nothing: its pods are
 * charged one by one as they are created.  What it asks can still never
 * fit: one pod beyond what the tenant may ever hold, or all its replicas
 * (a CronJob: one Job's parallelism) at once.  Judged against an empty
 * cluster, so a scale within the ceiling is never refused for what others
 * hold now.
 */
static void template_ceiling(struct ctx *c)
{
	const struct workload *wl = c->wl;
	const struct decision *out = c->out;
	const char *kind = decide_template_kind_name(wl);
	char ceiling[200], who[96];
	struct quota_result q;
	int64_t per_pod = out->count, pods = wl->replicas;

	snprintf(who, sizeof(who), wl->name && wl->name[0] ? "%s \"%.63s\"" : "%s", kind,
		 wl->name);
	quota_decide(c->p, out->tenant, out->flavor, per_pod, true, &quota_no_usage, &q);
	if (q.position == QUOTA_NO_QUOTA) {
		violate(c, "quota",
			"tenant \"%s\" has no quota for flavor %s (class %s); ask the "
			"platform team for quota",
			out->tenant->name, out->flavor->name, out->cls->name);
		return;
	}
	if (q.position != QUOTA_NEVER_FITS && pods > 1)
		quota_decide(c->p, out->tenant, out->flavor, per_pod * pods, true,
			     &quota_no_usage, &q);
	if (q.position != QUOTA_NEVER_FITS)
		return;
	ceiling_text(&q, ceiling, sizeof(ceiling));
	if (q.requested == per_pod)
		violate(c, "quota",
			"%s can never run a pod: each needs %" PRId64 " %s, tenant "
			"\"%s\" may hold at most %" PRId64 " (%s)",
			who, per_pod, out->flavor->name, out->tenant->name, q.ceiling,
			ceiling);
	else
		violate(c, "quota",
			"%s can never run %s: needs %" PRId64 " %s (%" PRId64 " %s x %"
			PRId64 "), tenant \"%s\" may hold at most %" PRId64 " (%s)",
			who, wl->template_kind == WL_CRONJOB ? "a whole Job" : "all its replicas",
			q.requested, out->flavor->name, pods,
			wl->template_kind == WL_CRONJOB ? "pods" : "replicas", per_pod,
			out->tenant->name, q.ceiling, ceiling);
}

/* The denial of QUOTA_LENT_OUT and QUOTA_RECLAIM_SHORT; `req` says what was
 * requested. */
static void lent_out(struct ctx *c, const struct quota_result *q, const char *tenant,
		     const char *flavor, const char *req)
{
	char who[QUOTA_MAX_NAMED * 96 + 32], why[200];

	borrowers_text(q, who, sizeof(who));
	if (q->position == QUOTA_RECLAIM_SHORT && q->any_priority)
		snprintf(why, sizeof(why),
			 "with reclaimWithinCohort Any only preemptible workloads are "
			 "taken back, and they hold %" PRId64
			 "; it waits until the units are returned",
			 q->reclaimable);
	else if (q->position == QUOTA_RECLAIM_SHORT)
		snprintf(why, sizeof(why),
			 "with reclaimWithinCohort LowerPriority only workloads of "
			 "priority below %" PRId32 " are taken back, and they hold %" PRId64
			 "; it waits until the units are returned",
			 q->below, q->reclaimable);
	else
		snprintf(why, sizeof(why), "with reclaimWithinCohort Never it waits "
					   "until they are returned");
	violate(c, "quota",
		"tenant \"%s\" cannot have its lent %s quota back now: requested "
		"%s, in use %" PRId64 " of nominal %" PRId64 ", and %" PRId64 " of "
		"those units are lent out in cohort \"%s\" (%s); %s",
		tenant, flavor, req, q->used, q->nominal, q->reclaim,
		q->cohort ? q->cohort : "", who, why);
}

/* How many pods a WL_TEMPLATE runs, as the decision line says it before
 * "N x flavor": "3 pods x ", "1 pod per node x ", "Jobs of 8 pods x ". */
static const char *template_pods(const struct workload *wl, char *buf, size_t size)
{
	char digits[TEXT_DECIMAL_MAX + 1];
	const char *n = text_int(digits, wl->replicas);

	if (wl->template_kind == WL_DAEMONSET)
		snprintf(buf, size, "1 pod per node x ");
	else if (wl->template_kind == WL_CRONJOB)
		snprintf(buf, size, "Jobs of %s %s x ", n, wl->replicas == 1 ? "pod" : "pods");
	else
		snprintf(buf, size, "%s %s x ", n, wl->replicas == 1 ? "pod" : "pods");
	return buf;
}

/* "24/32 in use" and, when borrowing, the borrowed part. */
static void position_text(const struct ctx *c, char *buf, size_t size)
{
	const struct decision *out = c->out;
	const struct quota_result *q = &out->quota;

	if (!out->has_quota) {
		if (c->wl->kind == WL_JOB && !c->wl->job_suspended && out->queue) {
			snprintf(buf, size, "queued in Kueue LocalQueue %.63s: charged when "
				 "Kueue admits it", out->queue);
			return;
		}
		snprintf(buf, size, "%s",
			 c->wl->kind == WL_JOB && c->wl->job_suspended
				 ? "suspended: quota is checked when it is resumed"
			 : c->wl->kind == WL_TEMPLATE
				 ? (c->wl->template_kind == WL_CRONJOB
					    ? "each Job is charged when it is created"
					    : "each pod is charged when it is created")
				 : "not charged");
		return;
	}
	switch (q->position) {
	case QUOTA_COVERED:
		snprintf(buf, size, "held by job %.63s", q->holder ? q->holder : "");
		return;
	case QUOTA_BORROWED:
		snprintf(buf, size, "%" PRId64 "/%" PRId64 " in use, %" PRId64
			 " borrowed from %.40s",
			 q->used + q->requested, q->nominal, q->borrowed,
			 q->cohort ? q->cohort : "the cohort");
		return;
	default: {
		char used[TEXT_DECIMAL_MAX + 1], nominal[TEXT_DECIMAL_MAX + 1];

		text_cat(buf, size, text_int(used, q->used + q->requested), "/",
			 text_int(nominal, q->nominal), " in use", NULL);
		if (q->position == QUOTA_NOMINAL && q->reclaim > 0) {
			size_t len = strlen(buf);

			snprintf(buf + len, size - len,
				 ", reclaims %" PRId64 " lent in %.40s", q->reclaim,
				 q->cohort ? q->cohort : "the cohort");
		}
		return;
	}
	}
}

static void plan_mapping(struct ctx *c)
{
	const struct workload *wl = c->wl;
	const struct policy_settings *s = policy_settings(c->p);
	const struct policy_class *cls = c->out->cls;
	struct plan *pl = &c->out->plan;
	char pos[160], pods[TEXT_DECIMAL_MAX + 32], count[TEXT_DECIMAL_MAX];

	pl->active = true;
	pl->map = true;
	pl->resource = cls->flavor->resource;
	pl->count = c->out->count;
	pl->flavor = cls->flavor;
	pl->tenant = c->out->tenant->name;
	pl->cpu = cls->cpu;
	pl->memory = cls->memory;
	if (cls->priority_class_name && !wl->pod.priority_class_name)
		pl->priority_class = cls->priority_class_name;
	if (wl->kind == WL_JOB || wl->owner_job)
		gang_id(wl, pl->gang, sizeof(pl->gang));
	else
		pl->remove_gang = true;
	if (wl->kind == WL_JOB && wl->parallelism > 1 &&
	    cls->topology_mode != POLICY_TOPOLOGY_NONE) {
		pl->topology = cls->topology_mode;
		pl->topology_key = cls->topology_key;
	}
	if (wl->kind == WL_TEMPLATE) {
		pl->class_label = s->class_label;
		pl->class_name = cls->name;
		if (pod_or_job_label(wl, s->gpus_label)) {
			pl->gpus_label = s->gpus_label;
			pl->gpus_value = pod_or_job_label(wl, s->gpus_label);
		}
	}
	if (wl->kind == WL_JOB && c->out->tenant->local_queue &&
	    !pod_or_job_label(wl, KUEUE_QUEUE_LABEL))
		pl->queue_name = c->out->tenant->local_queue;
	if (wl->kind == WL_JOB) {
		pl->replace_when_failed = true;
		pl->class_label = s->class_label;
		pl->class_name = cls->name;
		if (pod_or_job_label(wl, s->gpus_label)) {
			pl->gpus_label = s->gpus_label;
			pl->gpus_value = pod_or_job_label(wl, s->gpus_label);
		}
	}
	position_text(c, pos, sizeof(pos));
	if (c->out->violation && c->out->mode != POLICY_MODE_ENFORCE)
		snprintf(pl->decision, sizeof(pl->decision), "%s: %s",
			 c->out->mode == POLICY_MODE_AUDIT ? "audit: would deny"
							   : "warn",
			 c->out->message + strlen("gpugate: "));
	else if (wl->kind == WL_JOB)
		text_cat(pl->decision, sizeof(pl->decision), cls->name, ": ",
			 text_int(pods, c->out->claim.pods),
			 c->out->claim.pods == 1 ? " pod x " : " pods x ",
			 text_decimal(count, c->out->count), " x ", cls->flavor->name,
			 " for tenant ", c->out->tenant->name, "; ", pos, NULL);
	else if (wl->kind == WL_TEMPLATE)
		text_cat(pl->decision, sizeof(pl->decision), cls->name, ": ",
			 template_pods(wl, pods, sizeof(pods)),
			 text_decimal(count, c->out->count), " x ", cls->flavor->name,
			 " for tenant ", c->out->tenant->name, "; ", pos, NULL);
	else
		text_cat(pl->decision, sizeof(pl->decision), cls->name, ": ",
			 text_decimal(count, c->out->count), " x ", cls->flavor->name,
			 " for tenant ", c->out->tenant->name, "; ", pos, NULL);

	text_clean(pl->decision);
	/* A Job's pod carries its Job's decision from the template: the Job
	 * holds the quota, the pod is not judged again. */
	pl->keep_decision =
		wl->kind == WL_POD && wl->owner_job &&
		wl_get(wl->pod.annotations, wl->pod.n_annotations, STAMP_DECISION);

	pl->preemptible = cls->preemptible || borrows(c->out) ||
			  (pod_or_job_label(wl, STAMP_PREEMPTIBLE) &&
			   strcmp(pod_or_job_label(wl, STAMP_PREEMPTIBLE), "true") == 0);
	if (borrows(c->out))
		pl->borrowed = c->out->quota.borrowed;
	if (wants_hooks(c)) {
		plan_checkpoint(c);
	} else if (pl->preemptible) {
		pl->cap_grace = true;
		pl->grace_cap = policy_checkpoint(c->p)->grace_period_seconds;
	}
}

/*
 * head, then tail, as one line of at most DECIDE_SUCCESS_MAX characters:
 * out->success, and a warning only with settings.admissionWarnings all.
 */
static void add_success(struct ctx *c, char *head, const char *tail)
{
	struct decision *out = c->out;

	/* Long names: cut them, keep the numbers, which are what users read. */
	if (strlen(tail) < DECIDE_SUCCESS_MAX - 20)
		text_clip(head, DECIDE_SUCCESS_MAX - strlen(tail));
	snprintf(out->success, sizeof(out->success), "%s%s", head, tail);
	text_clean(out->success);
	if (policy_settings(c->p)->admission_warnings != POLICY_WARNINGS_ALL ||
	    out->n_warnings >= DECIDE_MAX_WARNINGS)
		return;
	add_warning(out, "%s", out->success);
	out->success_warned = true;
}

/* The one short line kubectl prints for an admitted class workload. */
static void success_line(struct ctx *c)
{
	const struct decision *out = c->out;
	char pos[160], head[DECIDE_WARNING_LEN], tail[200];
	char pods[TEXT_DECIMAL_MAX + 32], count[TEXT_DECIMAL_MAX];

	position_text(c, pos, sizeof(pos));
	if (c->wl->kind == WL_JOB)
		text_cat(head, sizeof(head), "gpugate: ", out->cls->name, " -> ",
			 text_int(pods, out->claim.pods),
			 out->claim.pods == 1 ? " pod x " : " pods x ",
			 text_decimal(count, out->count), " x ", out->flavor->name,
			 " for tenant ", out->tenant->name, NULL);
	else if (c->wl->kind == WL_TEMPLATE)
		text_cat(head, sizeof(head), "gpugate: ", out->cls->name, " -> ",
			 template_pods(c->wl, pods, sizeof(pods)),
			 text_decimal(count, out->count), " x ", out->flavor->name,
			 " for tenant ", out->tenant->name, NULL);
	else
		text_cat(head, sizeof(head), "gpugate: ", out->cls->name, " -> ",
			 text_decimal(count, out->count), " x ", out->flavor->name,
			 " for tenant ", out->tenant->name, NULL);
	text_cat(tail, sizeof(tail), " (", pos, ")", NULL);
	add_success(c, head, tail);
}

/*
 * At /validate, what the user of a workload admitted on borrowed quota
 * should know: gpugate made it preemptible, with or without checkpoint
 * hooks (which come only with a preemptible class or the user's own
 * label).  A problem, so a warning whatever settings.admissionWarnings
 * says; once per workload (not for each pod of a Job).  A workload
 * preemptible by its class or the user's label is what was asked for: no
 * problem, nothing said.
 */
static void reclaim_notice(struct ctx *c)
{
	const struct decision *out = c->out;
	bool hooks = wants_hooks(c);
	char n[TEXT_DECIMAL_MAX + 1];

	if ((c->wl->kind == WL_POD && c->wl->owner_job) || !borrows(out))
		return;
	add_warning(c->out,
		    "gpugate: borrowed %s %.40s from cohort %.40s: gpugate takes "
		    "them back when a lender needs them%s",
		    text_int(n, out->quota.borrowed), out->flavor->name,
		    out->quota.cohort ? out->quota.cohort : "",
		    hooks ? ", after a checkpoint" : " (no checkpoint hooks)");
}

/*
 * /validate of a workload that /mutate made preemptible (by its class, or
 * because it borrowed, which gpugate.io/borrowed records): the quota may
 * have moved in between.  Borrowing is safe either way, since the workload
 * can be preempted, so it is admitted; the user learns that the annotation
 * no longer says what it holds.  (Not preemptible and now borrowing is
 * QUOTA_NOT_PREPARED, a denial.)
 */
static void borrow_changed(struct ctx *c)
{
	const struct decision *out = c->out;
	const char *ann = pod_or_job_annotation(c->wl, STAMP_BORROWED);
	unsigned said = 0;
	int64_t now;

	if (!out->has_quota || !out->claim.may_borrow ||
	    (out->quota.position != QUOTA_NOMINAL &&
	     out->quota.position != QUOTA_BORROWED))
		return;
	/* Only gpugate writes it (a user's is stripped at /mutate): anything
	 * but a count is some other webhook's business. */
	if (ann && !parse_count(ann, BORROWED_MAX, &said))
		return;
	now = out->quota.position == QUOTA_BORROWED ? out->quota.borrowed : 0;
	if (now == (int64_t)said)
		return;
	if (ann)
		add_warning(c->out,
			    "gpugate: quota changed after mutation: now %" PRId64
			    " borrowed (annotation says %u); it stays preemptible",
			    now, said);
	else
		add_warning(c->out,
			    "gpugate: quota changed after mutation: now %" PRId64
			    " borrowed (no annotation); it stays preemptible",
			    now);
}

/*
 * In warn or audit mode, a violation that leaves nothing to map still
 * leaves its record on the object, and stamps the user set are removed.
 */
static void plan_note(struct ctx *c)
{
	struct plan *pl = &c->out->plan;

	if (workload_has_stamps(c->wl)) {
		pl->active = true;
		pl->strip_stamps = true;
	}
	if (!c->out->violation || c->out->mode == POLICY_MODE_ENFORCE)
		return;
	pl->active = true;
	snprintf(pl->note, sizeof(pl->note), "%s: %s",
		 c->out->mode == POLICY_MODE_AUDIT ? "audit: would deny" : "warn",
		 c->out->message + strlen("gpugate: "));
	text_clean(pl->note);
}

/* A raw request charged to quota is stamped like a class workload. */
static void plan_raw(struct ctx *c)
{
	struct plan *pl = &c->out->plan;
	char pos[160];

	pl->active = true;
	pl->stamp_only = true;
	pl->tenant = c->out->tenant->name;
	pl->flavor = c->out->flavor;
	pl->remove_gang = c->wl->kind == WL_POD && !c->wl->owner_job;
	position_text(c, pos, sizeof(pos));
	snprintf(pl->decision, sizeof(pl->decision),
		 "no class: %" PRId64 " x %s (%s) for tenant %s; %s",
		 c->out->claim.units, c->out->flavor->name, c->out->flavor->resource,
		 c->out->tenant->name, pos);
}

static void finish(struct ctx *c)
{
	struct decision *out = c->out;

	if (!out->allowed)
		return;
	if (c->in->phase == DECIDE_MUTATE) {
		if (out->cls)
			plan_mapping(c);
		else if (out->claim.needed && out->flavor && out->tenant)
			plan_raw(c);
		else
			plan_note(c);
	} else if (out->cls && (!out->violation || out->mode != POLICY_MODE_AUDIT)) {
		success_line(c);
		reclaim_notice(c);
		borrow_changed(c);
	}
}

/* ---- entry points ----------------------------------------------------- */

static void init_decision(const struct decide_input *in, struct decision *out)
{
	memset(out, 0, sizeof(*out));
	out->allowed = true;
	out->code = 200;
	out->mode = policy_settings(in->policy)->mode;
}

static const char *class_of(struct ctx *c)
{
	const struct workload *wl = c->wl;
	const char *key = policy_settings(c->p)->class_label;
	const char *pod = wl_get(wl->pod.labels, wl->pod.n_labels, key);
	const char *job = wl->kind == WL_JOB || wl->kind == WL_TEMPLATE
				  ? wl_get(wl->labels, wl->n_labels, key)
				  : NULL;

	if (pod && job && strcmp(pod, job) != 0) {
		violate(c, "class-conflict",
			"the %s asks for class \"%.63s\" but its pod template asks "
			"for class \"%.63s\"; use one",
			wl->kind == WL_JOB ? "Job" : decide_template_kind_name(wl), job, pod);
		return NULL;
	}
	return pod ? pod : job;
}

/*
 * UPDATE: the stamped labels are gpugate's record of who holds what; a
 * user who could drop them would drop out of quota accounting.
 */
static void check_stamps_unchanged(struct ctx *c)
{
	static const char *const keys[] = {STAMP_TENANT, STAMP_FLAVOR, STAMP_GANG,
					   STAMP_PREEMPTIBLE};
	const struct workload *now = c->wl, *old = c->in->old;

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		const char *a = wl_get(old->labels, old->n_labels, keys[i]);
		const char *b = wl_get(now->labels, now->n_labels, keys[i]);

		if (!a && !b)
			continue;
		if (a && b && strcmp(a, b) == 0)
			continue;
		if (a)
			violate(c, "stamp-changed",
				"label %s is set by gpugate and cannot be changed or "
				"removed (it is \"%.63s\")",
				keys[i], a);
		else
			violate(c, "stamp-changed",
				"label %s is set by gpugate and cannot be added by an "
				"update",
				keys[i]);
		return;
	}
}

/*
 * UPDATE of a running GPU Job: its gang was reserved for the pods it could
 * run at once, charge_job_slots() (min(parallelism, completions)), and its
 * pods are admitted against that reservation.  Whatever raises that number
 * (parallelism, or completions of an elastic Indexed Job) would add pods
 * nobody judged.  A Job suspended before the update holds nothing: it may
 * grow, and its resume is judged whole (decide_update()).  Which Job is a
 * GPU Job is its template's charge, never its labels (a jobs/status writer
 * can change those).
 */
static void check_slots_not_raised(struct ctx *c)
{
	const struct workload *now = c->wl, *old = c->in->old;
	int64_t was = charge_job_slots(old), will = charge_job_slots(now);
	struct charge held;

	if (now->kind != WL_JOB || old->job_suspended || will <= was)
		return;
	charge_decide(c->p, old, &held);
	if (!held.flavor)
		return;
	if (now->parallelism > old->parallelism &&
	    (!now->has_completions || now->completions >= now->parallelism))
		violate(c, "parallelism-raised",
			"the parallelism of a GPU Job cannot be raised (from %" PRId64
			" to %" PRId64 "): its gang was admitted for %" PRId64 "; "
			"create a new Job instead",
			old->parallelism, now->parallelism, was);
	else
		violate(c, "parallelism-raised",
			"a GPU Job cannot be made to run more pods at once (from "
			"%" PRId64 " to %" PRId64 ": parallelism %" PRId64
			", completions %" PRId64 "): its gang was admitted for %" PRId64
			"; create a new Job instead",
			was, will, now->parallelism, now->completions, was);
}

/* DRA claims and templates: the section at the end of this file. */
static void decide_claim(struct ctx *c);
static void decide_claim_quota(struct ctx *c, const struct quota_result *q);

/*
 * At /validate: the claim is what the object holds by the charge rule, so
 * that what is reserved is what the watch will count, whatever the mode
 * (warn and audit relax the verdict, never the accounting).  A pod that
 * names two flavors' resources could be charged for one only: denied in
 * every mode.
 */
static void claim_from_charge(struct ctx *c)
{
	const struct charge *ch = &c->charge;
	struct decision *out = c->out;
	bool may_borrow = out->claim.needed && out->claim.may_borrow;

	if (ch->two_flavors) {
		out->mode = POLICY_MODE_ENFORCE;
		out->violation = false;
		violate(c, "two-flavors",
			"this workload asks for resources of two flavors (%s and "
			"another); a pod may use one flavor only",
			ch->flavor->resource);
		return;
	}
	memset(&out->claim, 0, sizeof(out->claim));
	if (!ch->active)
		return;
	out->claim = (struct quota_claim){
		.needed = true,
		.tenant = ch->tenant,
		.flavor = ch->flavor,
		.units = ch->units,
		.per_pod = (unsigned)(ch->per_pod > UINT32_MAX ? UINT32_MAX : ch->per_pod),
		.pods = ch->slots,
		.may_borrow = may_borrow,
		.owner_job_uid = ch->owner_job_uid,
	};
	if (!out->flavor)
		out->flavor = ch->flavor;
}

int32_t decide_priority(const struct workload *wl, const char *class_priority,
			const struct priority_view *pv)
{
	const struct wl_pod *pod = &wl->pod;
	const char *name = pod->priority_class_name;
	int32_t v = 0;

	/* The class's priorityClassName replaces none the user chose
	 * (decide_class()); the apiserver then resolves it again. */
	if (class_priority && !name)
		name = class_priority;
	else if (wl->kind == WL_POD && pod->has_priority)
		return pod->priority; /* the Priority plugin's answer */
	if (pv && pv->value(pv->ctx, name, &v))
		return v;
	return 0; /* Kubernetes' priority without a class or a default */
}

/*
 * Does Kueue really hold the workload, so that its quota is Kueue's word?
 * The queue label alone is anybody's to write.  Kueue holds a Job by
 * suspending it and admits it by resuming it, so a resume is Kueue's (a Job
 * created running was not suspended by Kueue: Kueue does not manage it);
 * it holds a bare Pod behind its scheduling gate.
 */
static bool kueue_holds(const struct ctx *c)
{
	const struct workload *wl = c->wl;

	if (wl->kind == WL_JOB)
		return wl->op == WL_UPDATE && c->in->old && c->in->old->job_suspended;
	for (size_t i = 0; wl->kind == WL_POD && i < wl->pod.n_scheduling_gates; i++)
		if (strcmp(wl->pod.scheduling_gates[i], KUEUE_ADMISSION_GATE) == 0)
			return true;
	return false;
}

/* The rules of a CREATE (or of a Job being resumed), then the claim. */
static void judge(struct ctx *c)
{
	const struct workload *wl = c->wl;
	struct decision *out = c->out;
	const char *class_name, *raw = NULL;

	class_name = class_of(c);
	if (out->violation) {
		/* class-conflict: nothing to map */
	} else if (class_name) {
		decide_class(c, class_name);
	} else {
		for (size_t i = 0; i < wl->pod.n_containers && !raw; i++)
			raw = first_flavor_resource(c->p, &wl->pod.containers[i], NULL);
		for (size_t i = 0; i < wl->pod.n_init_containers && !raw; i++)
			raw = first_flavor_resource(c->p, &wl->pod.init_containers[i],
						    NULL);
		if (raw)
			decide_raw(c, raw);
		else
			check_security(c, -1);
	}
	if (!out->allowed)
		return;
	if (wl->kind == WL_TEMPLATE) {
		/* Its pods are charged one by one, as they are created. */
		if (out->cls)
			template_ceiling(c);
		if (!out->violation)
			template_pool(c);
		memset(&out->claim, 0, sizeof(out->claim));
		return;
	}
	out->queue = pod_or_job_label(wl, KUEUE_QUEUE_LABEL);
	if (!out->queue && wl->kind == WL_JOB && out->cls && out->tenant &&
	    c->in->phase == DECIDE_MUTATE)
		out->queue = out->tenant->local_queue; /* stamped (plan_mapping) */
	if (c->in->phase == DECIDE_VALIDATE)
		claim_from_charge(c);
	else if (wl->kind == WL_JOB && wl->job_suspended)
		out->claim.needed = false; /* judged when it is resumed */
	else if (wl->kind == WL_JOB && out->queue && wl->op == WL_CREATE)
		/* Kueue suspends it (its webhook runs after this one) and
		 * charges it when it admits it: judged when it is resumed.
		 * Without Kueue it is not suspended, and /validate charges it. */
		out->claim.needed = false;
	else if (out->claim.needed)
		out->claim.owner_job_uid = c->charge.owner_job_uid;
	if (out->claim.needed) {
		out->claim.priority = decide_priority(
			wl, out->cls ? out->cls->priority_class_name : NULL,
			c->in->priorities);
		out->claim.kueue_quota = out->queue && out->tenant &&
					 out->tenant->kueue_owns_quota &&
					 kueue_holds(c);
	}
}

/*
 * UPDATE of a Job: the GPU request of its pod template (class, count,
 * flavor, per-pod units) is what its gang was judged for; a change would
 * give its pods what nobody judged.  (Suspended, a Job's template is
 * mutable; it still cannot change what its pods ask for.)
 */
static void check_template_unchanged(struct ctx *c)
{
	const struct workload *now = c->wl, *old = c->in->old;
	const struct policy_settings *s = policy_settings(c->p);
	struct charge was;
	const char *keys[2] = {s->class_label, s->gpus_label};

	charge_decide(c->p, old, &was);
	for (size_t i = 0; i < 2; i++) {
		const char *a = pod_or_job_label(old, keys[i]);
		const char *b = pod_or_job_label(now, keys[i]);

		if ((a || b) && (!a || !b || strcmp(a, b) != 0)) {
			violate(c, "job-template-changed",
				"label %s of a Job cannot be changed by an update (it "
				"is \"%.63s\"): its gang was judged for it; create a new "
				"Job instead",
				keys[i], a ? a : "");
			return;
		}
	}
	if (was.flavor != c->charge.flavor || was.per_pod != c->charge.per_pod)
		violate(c, "job-template-changed",
			"the pod template's GPU request cannot be changed by an update "
			"(it is %" PRId64 " %s per pod, now %" PRId64 " %s): its gang "
			"was judged for it; create a new Job instead",
			was.per_pod, was.flavor ? was.flavor->resource : "GPUs",
			c->charge.per_pod,
			c->charge.flavor ? c->charge.flavor->resource : "GPUs");
}

/*
 * UPDATE of a Pod: the job controller's label says which Job's gang the
 * pod rides on; a pod that dropped it would leave the gang (and be
 * replaced by the job controller) while it still holds its GPUs.
 */
static void check_controller_uid_unchanged(struct ctx *c)
{
	const struct workload *now = c->wl, *old = c->in->old;
	const char *a = wl_get(old->labels, old->n_labels, CHARGE_CONTROLLER_UID_LABEL);
	const char *b = wl_get(now->labels, now->n_labels, CHARGE_CONTROLLER_UID_LABEL);

	if (a && (!b || strcmp(a, b) != 0))
		violate(c, "stamp-changed",
			"label " CHARGE_CONTROLLER_UID_LABEL " is set by the job "
			"controller and cannot be changed or removed (it is "
			"\"%.63s\"): it says which Job's quota holds the pod",
			a);
}

/* UPDATE at /validate (see decide.h). */
static void decide_update(struct ctx *c)
{
	const struct workload *wl = c->wl, *old = c->in->old;
	struct decision *out = c->out;

	out->tenant = policy_tenant_for_namespace(c->p, wl->namespace);
	if (out->tenant)
		out->mode = out->tenant->mode;
	check_stamps_unchanged(c);
	if (!out->violation && wl->kind == WL_POD)
		check_controller_uid_unchanged(c);
	/* Where a pod may run can change after its creation: tolerations may
	 * be added to any pod, and a gated pod's nodeSelector and affinity
	 * set before its gates are removed.  It is held to the security rules
	 * as it is now, wherever it can now reach. */
	if (!out->violation && wl->kind == WL_POD)
		check_security(c, -1);
	if (wl->kind != WL_JOB || out->violation)
		return;
	check_slots_not_raised(c);
	if (!out->violation)
		check_template_unchanged(c);
	if (out->violation)
		return;
	/* Resuming a suspended Job is an admission point: its gang is judged
	 * and reserved now.  A suspended Job's other updates are judged by
	 * the rules (no quota: it holds nothing). */
	if (wl->job_suspended || (old->job_suspended && !wl->job_finished))
		judge(c);
}

/*
 * settings.exemptions: the GPU stack's own pods (the device plugin, the
 * DCGM exporter, NVSentinel) are privileged and tolerate the GPU taint by
 * design; in their namespaces, or as their ServiceAccounts, gpugate judges
 * nothing and changes nothing.  A claim or a template has no
 * ServiceAccount of its own to go by: its namespace, or its pod's.
 */
static bool exempt(const struct decide_input *in, struct decision *out)
{
	const struct workload *wl = in->wl;

	out->exempt = policy_exempt(in->policy, wl->namespace,
				    wl->kind == WL_CLAIM || wl->kind == WL_CLAIM_TEMPLATE
					    ? NULL
					    : wl->pod.service_account);
	return out->exempt != POLICY_NOT_EXEMPT;
}

void decide_prepare(const struct decide_input *in, struct decision *out)
{
	struct ctx c = {.in = in, .p = in->policy, .wl = in->wl, .out = out};
	const struct workload *wl = in->wl;

	init_decision(in, out);
	if (exempt(in, out))
		return;
	if (wl->kind == WL_CLAIM || wl->kind == WL_CLAIM_TEMPLATE) {
		decide_claim(&c);
		return;
	}
	if (wl->kind == WL_OTHER || (wl->kind == WL_TEMPLATE && wl->template_owned))
		return;
	if (wl->kind == WL_TEMPLATE && (wl->op == WL_CREATE || wl->op == WL_UPDATE)) {
		/* Every change of a template is judged and mapped again: what
		 * it asks is what its next pods will ask. */
		out->tenant = policy_tenant_for_namespace(in->policy, wl->namespace);
		if (out->tenant)
			out->mode = out->tenant->mode;
		judge(&c);
	} else if (wl->op == WL_UPDATE && in->old && in->phase == DECIDE_VALIDATE) {
		charge_decide(in->policy, wl, &c.charge);
		decide_update(&c);
		if (!out->claim.needed && wl->job_suspended)
			return; /* no word on every update of a suspended Job */
	} else if (wl->op == WL_CREATE) {
		charge_decide(in->policy, wl, &c.charge);
		out->tenant = policy_tenant_for_namespace(in->policy, wl->namespace);
		if (out->tenant)
			out->mode = out->tenant->mode;
		judge(&c);
	} else {
		return;
	}
	if (!out->claim.needed)
		finish(&c);
}

/*
 * The usage store could not decide (the shared store of several replicas
 * could not be read or written in time): denied in every mode, since what
 * would be admitted could not be counted.
 */
static void unavailable(struct ctx *c, const struct quota_result *q)
{
	c->out->mode = POLICY_MODE_ENFORCE;
	c->out->violation = false;
	violate(c, "quota",
		"cannot reserve quota for tenant \"%s\" now (%s); nothing was "
		"admitted: retry in a moment",
		c->out->claim.tenant->name, q->reason[0] ? q->reason : "no reason given");
}

void decide_quota(const struct decide_input *in, struct decision *out,
		  const struct quota_result *q)
{
	struct ctx c = {.in = in, .p = in->policy, .wl = in->wl, .out = out};
	const struct quota_claim *cl = &out->claim;
	const char *cls = out->cls ? out->cls->name : "none";
	const char *what = in->wl->kind == WL_JOB ? "job" : "pod";
	char req[160];

	if (in->wl->kind == WL_CLAIM) {
		decide_claim_quota(&c, q);
		return;
	}
	out->has_quota = true;
	out->quota = *q;
	/* Kueue admitted it and owns this tenant's quota: gpugate counts it
	 * and says what its own numbers are, never refuses it for them. */
	if (cl->kueue_quota && out->mode == POLICY_MODE_ENFORCE &&
	    q->position != QUOTA_UNAVAILABLE)
		out->mode = POLICY_MODE_WARN;
	if (in->wl->kind == WL_JOB)
		snprintf(req, sizeof(req), "%" PRId64 " (parallelism %" PRId64
			 " x %u, class %s)", cl->units, cl->pods, cl->per_pod, cls);
	else
		snprintf(req, sizeof(req), "%" PRId64 " (class %s)", cl->units, cls);

	switch (q->position) {
	case QUOTA_NOMINAL:
	case QUOTA_BORROWED:
	case QUOTA_COVERED:
		break;
	case QUOTA_UNAVAILABLE:
		unavailable(&c, q);
		break;
	case QUOTA_LENT_OUT:
	case QUOTA_RECLAIM_SHORT:
		lent_out(&c, q, cl->tenant->name, cl->flavor->name, req);
		break;
	case QUOTA_NO_QUOTA:
		violate(&c, "quota",
			"tenant \"%s\" has no quota for flavor %s (class %s); ask the "
			"platform team for quota",
			cl->tenant->name, cl->flavor->name, cls);
		break;
	case QUOTA_NEVER_FITS: {
		char ceiling[200];

		ceiling_text(q, ceiling, sizeof(ceiling));
		if (in->wl->kind == WL_JOB)
			violate(&c, "quota",
				"job can never be admitted: needs %" PRId64 " %s "
				"(parallelism %" PRId64 " x %u), tenant \"%s\" may hold at "
				"most %" PRId64 " (%s)",
				cl->units, cl->flavor->name, cl->pods, cl->per_pod,
				cl->tenant->name, q->ceiling, ceiling);
		else
			violate(&c, "quota",
				"pod can never be admitted: needs %" PRId64 " %s, tenant "
				"\"%s\" may hold at most %" PRId64 " (%s)",
				cl->units, cl->flavor->name, cl->tenant->name, q->ceiling,
				ceiling);
		break;
	}
	case QUOTA_OVER: {
		char tail[200];
		int64_t own = q->used > q->nominal ? q->used - q->nominal : 0;

		if (!q->cohort)
			snprintf(tail, sizeof(tail), "no cohort to borrow from");
		else if (q->borrowing_limit != POLICY_NO_LIMIT &&
			 q->used + q->requested - q->nominal > q->borrowing_limit &&
			 q->borrowing_limit - own <= q->can_lend)
			snprintf(tail, sizeof(tail),
				 "borrowing limit %" PRId64 " leaves %" PRId64,
				 q->borrowing_limit,
				 q->borrowing_limit > own ? q->borrowing_limit - own : 0);
		else
			snprintf(tail, sizeof(tail), "cohort \"%s\" can lend %" PRId64,
				 q->cohort, q->can_lend);
		violate(&c, "quota",
			"tenant \"%s\" is over its %s quota: requested %s, in use "
			"%" PRId64 " of nominal %" PRId64 ", %s",
			cl->tenant->name, cl->flavor->name, req, q->used, q->nominal,
			tail);
		break;
	}
	case QUOTA_NOT_PREPARED:
		if (!out->cls)
			/* Without a class nothing makes it preemptible: it may
			 * only ever use nominal quota. */
			violate(&c, "quota",
				"tenant \"%s\" is over its %s quota: requested %s, in "
				"use %" PRId64 " of nominal %" PRId64 "; a %s without a "
				"class never borrows (gpugate cannot make it "
				"preemptible): ask for GPUs with a class",
				cl->tenant->name, cl->flavor->name, req, q->used,
				q->nominal, what);
		else
			violate(&c, "quota",
				"tenant \"%s\" now needs %" PRId64 " borrowed %s for "
				"this %s, but it was not made preemptible when it was "
				"mutated (the quota changed in between); retry the "
				"request",
				cl->tenant->name, q->borrowed, cl->flavor->name, what);
		break;
	}
	finish(&c);
}

void decide(const struct decide_input *in, const struct usage_view *usage,
	    struct decision *out)
{
	decide_with_pool(in, usage, NULL, out);
}

void decide_with_pool(const struct decide_input *in, const struct usage_view *usage,
		      const struct pool_check *pc, struct decision *out)
{
	struct quota_result q;

	decide_prepare(in, out);
	if (!out->claim.needed)
		return;
	quota_decide(in->policy, out->claim.tenant, out->claim.flavor,
		     out->claim.units, out->claim.may_borrow, usage ? usage : &quota_no_usage,
		     &q);
	decide_quota_pool(in, out, &q, pc);
}

/* ---- the pool (policy/pool.h) ----------------------------------------- */

/*
 * "; 2 nodes excluded: a (cordoned), b (condition X=True)" or "", at most
 * room bytes (size > room): the nodes that do not fit become ", ..." (a
 * warning has DECIDE_WARNING_LEN bytes in all).
 */
static void excluded_text(const struct pool_check *pc, char *buf, size_t size,
			  size_t room)
{
	char entry[POOL_NAME_LEN + 200];
	size_t len;

	buf[0] = '\0';
	if (!pc->n_excluded)
		return;
	snprintf(buf, size, "; %zu node%s excluded: ", pc->n_excluded,
		 pc->n_excluded == 1 ? "" : "s");
	for (size_t i = 0; i < pc->n_excluded; i++) {
		const char *why;

		len = strlen(buf);
		if (i >= POOL_MAX_EXCLUDED) {
			snprintf(buf + len, size - len, ", ...");
			break;
		}
		why = pc->excluded[i].exclusion == POOL_HEALTH ||
				      pc->excluded[i].exclusion == POOL_TAINTED
			      ? pc->excluded[i].why
			      : pool_exclusion_name(pc->excluded[i].exclusion);
		snprintf(entry, sizeof(entry), "%s%s (%s)", i ? ", " : "",
			 pc->excluded[i].node, why);
		/* Room for this entry and a closing ", ..." after it (none
		 * needed after the last). */
		if (len + strlen(entry) + (i + 1 < pc->n_excluded ? 5 : 0) > room) {
			if (i)
				snprintf(buf + len, size - len, ", ...");
			else /* not even one: the count alone */
				snprintf(buf, size, "; %zu node%s excluded (gpugate pool "
					 "names them)", pc->n_excluded,
					 pc->n_excluded == 1 ? "" : "s");
			break;
		}
		snprintf(buf + len, size - len, "%s", entry);
	}
	if (strlen(buf) > room)
		buf[0] = '\0';
}

/* "all 4 nodes", or "the one node" (n == 1). */
static const char *nodes_text(size_t n, const char *all, char *buf, size_t size)
{
	if (n == 1)
		snprintf(buf, size, "the one node");
	else
		snprintf(buf, size, "%s %zu nodes", all, n);
	return buf;
}

static bool needs_pool_check(const struct decide_input *in, const struct decision *out)
{
	const struct quota_claim *cl = &out->claim;

	/* A Job's pod was weighed with its Job; claims have no node yet. */
	return cl->needed && !cl->owner_job_uid && cl->per_pod > 0 &&
	       (in->wl->kind == WL_POD || in->wl->kind == WL_JOB);
}

const char *decide_pool_topology(const struct decision *out)
{
	/* The class says (the plan exists at /mutate only). */
	return out->cls && out->cls->topology_mode == POLICY_TOPOLOGY_REQUIRED &&
			       out->claim.pods > 1
		       ? out->cls->topology_key
		       : NULL;
}

bool decide_pool_denies(const struct decide_input *in, const struct decision *out,
			const struct pool_check *pc)
{
	return needs_pool_check(in, out) && pc && pc->known &&
	       pc->fit.verdict == POOL_NEVER_FITS && out->mode == POLICY_MODE_ENFORCE;
}

/* The pool's rule: a request no usable node could ever hold. */
static void pool_rule(const struct decide_input *in, struct decision *out,
		      const struct pool_check *pc)
{
	struct ctx c = {.in = in, .p = in->policy, .wl = in->wl, .out = out};
	const struct quota_claim *cl = &out->claim;
	const struct policy_flavor *f = cl->flavor;
	const struct pool_fit *fit = &pc->fit;
	const char *topo = decide_pool_topology(out);
	char ex[700], gang[160];

	if (!pc->known || !needs_pool_check(in, out) || fit->verdict != POOL_NEVER_FITS)
		return;
	/* A denial has room for every node named (up to four). */
	excluded_text(pc, ex, sizeof(ex), 600);
	snprintf(gang, sizeof(gang), "the job's %" PRId64 " pods of %u %s", cl->pods,
		 cl->per_pod, f->resource);
	{
		if (cl->per_pod > pc->largest_allocatable)
			violate(&c, "pool", "no usable node of flavor %s can hold a pod of "
				"%u %s: the largest offers %" PRId64 " (%s)%s",
				f->name, cl->per_pod, f->resource,
				pc->largest_allocatable, pc->largest_allocatable_node, ex);
		else if (topo)
			violate(&c, "pool", "no %s domain of flavor %s can hold %s: the "
				"largest holds %" PRId64 "%s%s",
				topo, f->name, gang, fit->fit_empty,
				fit->n_domains ? "" : " (no usable node has the label)", ex);
		else
			violate(&c, "pool", "the usable nodes of flavor %s can hold at most "
				"%" PRId64 " of %s%s",
				f->name, fit->fit_empty, gang, ex);
	}
}

/*
 * A pod template against the pool (its pods hold no claim, so pool_rule()
 * never sees them): what no usable node could ever hold is refused at the
 * door, as a Pod's or a Job's is.  One pod of a Deployment, StatefulSet,
 * ReplicaSet or DaemonSet; a CronJob's whole Job, a gang like any Job's,
 * in one domain when its class requires a topology.  All the replicas of
 * the others are not a gang (a Deployment runs with some of them, and an
 * autoscaler may add nodes): more than the flavor's usable nodes could
 * hold, even empty, is a warning at /validate.  What is in use now is
 * never weighed: the template holds nothing, and its pods meet the quota
 * and the pool one by one.
 */
static void template_pool(struct ctx *c)
{
	const struct workload *wl = c->wl;
	struct decision *out = c->out;
	const struct policy_flavor *f = out->flavor;
	const char *kind = decide_template_kind_name(wl);
	bool cron = wl->template_kind == WL_CRONJOB;
	int64_t per_pod = out->count, pods = cron && wl->replicas > 1 ? wl->replicas : 1;
	const char *topo = cron && pods > 1 && out->cls &&
					   out->cls->topology_mode == POLICY_TOPOLOGY_REQUIRED
				   ? out->cls->topology_key
				   : NULL;
	struct pool_check pc;
	char who[96], ex[700];

	if (!c->in->pool || !f || per_pod <= 0)
		return;
	snprintf(who, sizeof(who), wl->name && wl->name[0] ? "%s \"%.63s\"" : "%s", kind,
		 wl->name);
	c->in->pool->fit(c->in->pool->ctx, f, per_pod, pods, topo, &pc);
	if (!pc.known)
		return;
	if (pc.fit.verdict == POOL_NEVER_FITS) {
		excluded_text(&pc, ex, sizeof(ex), 600);
		if (per_pod > pc.largest_allocatable)
			violate(c, "pool", "%s can never run a pod: no usable node of flavor "
				"%s can hold one of %" PRId64 " %s, the largest offers %"
				PRId64 " (%s)%s",
				who, f->name, per_pod, f->resource, pc.largest_allocatable,
				pc.largest_allocatable_node, ex);
		else if (topo)
			violate(c, "pool", "%s can never run a whole Job: no %s domain of "
				"flavor %s can hold its %" PRId64 " pods of %" PRId64 " %s, the "
				"largest holds %" PRId64 "%s%s",
				who, topo, f->name, pods, per_pod, f->resource, pc.fit.fit_empty,
				pc.fit.n_domains ? "" : " (no usable node has the label)", ex);
		else
			violate(c, "pool", "%s can never run a whole Job: the usable nodes of "
				"flavor %s can hold at most %" PRId64 " of its %" PRId64
				" pods of %" PRId64 " %s%s",
				who, f->name, pc.fit.fit_empty, pods, per_pod, f->resource, ex);
		return;
	}
	if (cron || wl->template_kind == WL_DAEMONSET || wl->replicas <= 1 ||
	    c->in->phase != DECIDE_VALIDATE || pc.fit.verdict == POOL_NONE_USABLE ||
	    pc.fit.verdict == POOL_UNKNOWN)
		return;
	c->in->pool->fit(c->in->pool->ctx, f, per_pod, wl->replicas, NULL, &pc);
	if (pc.known && pc.fit.verdict == POOL_NEVER_FITS)
		add_warning(out, "gpugate: the usable nodes of flavor %s can hold at most "
			    "%" PRId64 " of %s's %" PRId64 " pods of %" PRId64 " %s, even "
			    "empty: the others stay Pending until nodes join",
			    f->name, pc.fit.fit_empty, who, wl->replicas, per_pod, f->resource);
}

/* The pool's advice, at /validate, for what was admitted: no room now. */
static void pool_advice(const struct decide_input *in, struct decision *out,
			const struct pool_check *pc)
{
	const struct quota_claim *cl = &out->claim;
	const struct policy_flavor *f = cl->flavor;
	const struct pool_fit *fit = &pc->fit;
	bool job = in->wl->kind == WL_JOB && cl->pods > 1;
	const char *topo = decide_pool_topology(out);
	const char *what = in->wl->kind == WL_JOB ? "job" : "pod";
	char ex_short[700], gang[160], n1[40];

	if (!pc->known || !needs_pool_check(in, out) || !out->allowed ||
	    in->phase != DECIDE_VALIDATE)
		return; /* advice is given once, when admitted (kubectl prints it) */
/* A warning as long as its kind may be (DECIDE_WARNING_LEN): the text
 * first, then as many excluded nodes as fit after it. */
#define ADVISE(...)                                                            \
	do {                                                                   \
		char probe_[2 * DECIDE_WARNING_LEN];                           \
		size_t len_;                                                   \
		ex_short[0] = '\0';                                            \
		snprintf(probe_, sizeof(probe_), __VA_ARGS__);                 \
		len_ = strlen(probe_);                                         \
		excluded_text(pc, ex_short, sizeof(ex_short),                  \
			      len_ + 1 < DECIDE_WARNING_LEN                    \
				      ? DECIDE_WARNING_LEN - 1 - len_          \
				      : 0);                                    \
		add_warning(out, __VA_ARGS__);                                 \
	} while (0)
	snprintf(gang, sizeof(gang), "the job's %" PRId64 " pods of %u %s", cl->pods,
		 cl->per_pod, f->resource);
	switch (fit->verdict) {
	case POOL_UNKNOWN:
		ADVISE("gpugate: no node of flavor %s is in the cluster: the "
			    "%s waits until one joins", f->name, what);
		break;
	case POOL_NONE_USABLE:
		if (pc->n_usable)
			ADVISE("gpugate: no usable node of flavor %s offers any %s "
				    "now (allocatable 0), the %s waits until one does%s",
				    f->name, f->resource, what, ex_short);
		else
			ADVISE("gpugate: %s of flavor %s %s excluded, the %s "
				    "waits until one is back%s",
				    nodes_text(pc->n_nodes, "all", n1, sizeof(n1)), f->name,
				    pc->n_nodes == 1 ? "is" : "are", what, ex_short);
		break;
	case POOL_NOT_NOW:
		if (topo)
			ADVISE("gpugate: admitted, but no %s domain of flavor %s "
				    "has room for %s now: the best (%s) has room for "
				    "%" PRId64 "%s",
				    topo, f->name, gang, pc->domain, fit->fit_now, ex_short);
		else if (job)
			ADVISE("gpugate: admitted, but flavor %s has room for "
				    "%" PRId64 " of %s now (%" PRId64 " free, at most %"
				    PRId64 " on one node)%s",
				    f->name, fit->fit_now, gang, pc->free, pc->largest_free, ex_short);
		else
			ADVISE("gpugate: admitted, but no node of flavor %s has "
				    "%u %s free now: %" PRId64 " free on %zu node%s, at most %"
				    PRId64 " on one%s; the %s waits%s",
				    f->name, cl->per_pod, f->resource, pc->free, pc->n_usable,
				    pc->n_usable == 1 ? "" : "s",
				    pc->largest_free,
				    pc->free >= cl->per_pod ? " (fragmentation)" : "", what,
				    ex_short);
		break;
	default:
		break;
	}
}
#undef ADVISE

void decide_quota_pool(const struct decide_input *in, struct decision *out,
		       const struct quota_result *q, const struct pool_check *pc)
{
	/* Quota speaks first: only what quota admits meets the pool's rule,
	 * recorded before decide_quota() words the plan (the decision
	 * annotation of warn and audit modes carries it). */
	if (pc && (q->position == QUOTA_NOMINAL || q->position == QUOTA_BORROWED))
		pool_rule(in, out, pc);
	decide_quota(in, out, q);
	if (pc)
		pool_advice(in, out, pc);
}

/* ---- ephemeral containers --------------------------------------------- */

void decide_status(const struct decide_input *in, struct decision *out)
{
	struct ctx c = {.in = in, .p = in->policy, .wl = in->wl, .out = out};

	init_decision(in, out);
	if ((in->wl->kind != WL_POD && in->wl->kind != WL_JOB) || !in->old ||
	    exempt(in, out))
		return;
	out->tenant = policy_tenant_for_namespace(in->policy, in->wl->namespace);
	if (out->tenant)
		out->mode = out->tenant->mode;
	check_stamps_unchanged(&c);
	if (!out->violation && in->wl->kind == WL_POD)
		check_controller_uid_unchanged(&c);
}

void decide_ephemeral(const struct decide_input *in, struct decision *out)
{
	struct ctx c = {.in = in, .p = in->policy, .wl = in->wl, .out = out};

	init_decision(in, out);
	if (in->wl->kind != WL_POD || exempt(in, out))
		return;
	out->tenant = policy_tenant_for_namespace(in->policy,
						  in->wl->namespace);
	if (out->tenant)
		out->mode = out->tenant->mode;
	check_security(&c, -1);
}

/* ---- DRA: ResourceClaim and ResourceClaimTemplate (policy/dra.h) ------- */

/*
 * A ResourceClaim that asks for devices of a GPU device class is charged
 * like a bare Pod: its units of one flavor, reserved at /validate.  A
 * ResourceClaimTemplate holds nothing (the resourceclaim controller makes
 * a claim from it for each pod, and that claim comes through here): it is
 * judged by the same rules, and against an empty cluster, so that a
 * template whose claims can never be admitted is refused when it is
 * written.  gpugate changes neither: there is no plan.
 *
 * Claims use nominal quota only.  Borrowed GPUs must be preemptible, and
 * gpugate cannot make a claim's pods preemptible: it does not change the
 * claim, and does not know which pods will use it.
 */

static bool is_template(const struct ctx *c)
{
	return c->wl->kind == WL_CLAIM_TEMPLATE;
}

/* "gpu", or "gpu/big" for a subrequest (Kubernetes' own notation). */
static void request_name(const struct dra_where *w, char *buf, size_t size)
{
	text_cat(buf, size, w->request, w->subrequest ? "/" : "",
		 w->subrequest ? w->subrequest : "", NULL);
}

/* The device classes tenant t can use: mapped to a flavor of a sharing
 * mode it may use, which it has quota for. */
static void usable_device_classes(const struct policy *p,
				  const struct policy_tenant *t, char *buf,
				  size_t size)
{
	buf[0] = '\0';
	for (size_t i = 0; i < policy_flavor_count(p); i++) {
		const struct policy_flavor *f = policy_flavor_at(p, i);

		if (!policy_tenant_allows_sharing(t, f->sharing) ||
		    !policy_tenant_quota(t, f))
			continue;
		for (size_t k = 0; k < f->n_device_classes; k++)
			list_add(buf, size, f->device_classes[k]);
	}
	if (!buf[0])
		snprintf(buf, size, "none");
}

/* raw-request, allocation-all, two-flavors, sharing.  True when final. */
static bool claim_rules(struct ctx *c, const struct dra_claim *h)
{
	const struct policy_tenant *t = c->out->tenant;
	const char *what = is_template(c) ? "claim template" : "claim";
	char list[600], name[160];

	if (h->raw.device_class &&
	    policy_settings(c->p)->raw_gpu_requests == POLICY_RAW_REJECT) {
		usable_device_classes(c->p, t, list, sizeof(list));
		if (violate(c, "raw-request",
			    "this %s asks for devices of class \"%s\", which maps to "
			    "no GPU flavor; use a device class tenant \"%s\" may use: %s",
			    what, h->raw.device_class, t->name, list))
			return true;
	}
	if (h->all.device_class) {
		request_name(&h->all, name, sizeof(name));
		if (violate(c, "allocation-all",
			    "request \"%s\" asks for all devices of class \"%s\" "
			    "(allocationMode All), which cannot be counted against "
			    "quota; ask for a number of devices (allocationMode "
			    "ExactCount with a count)",
			    name, h->all.device_class))
			return true;
	}
	if (h->other_flavor &&
	    violate(c, "two-flavors",
		    "this %s asks for devices of two flavors (class \"%s\" of %s "
		    "and class \"%s\" of %s); a claim may use one flavor only",
		    what, h->device_class, h->flavor->name,
		    h->two_flavors.device_class, h->other_flavor->name))
		return true;
	if (h->flavor && !policy_tenant_allows_sharing(t, h->flavor->sharing)) {
		sharing_list(t, list, sizeof(list));
		if (violate(c, "sharing",
			    "device class \"%s\" is a %s GPU class, which tenant \"%s\" "
			    "may not use (allowed sharing: %s)",
			    h->device_class, policy_sharing_name(h->flavor->sharing),
			    t->name, list))
			return true;
	}
	return false;
}

/* The quota rules: a claim against the usage q was decided on, a
 * template's claims against an empty cluster.  Nominal quota only. */
static void claim_quota_rules(struct ctx *c, const struct dra_claim *h,
			      const struct quota_result *q)
{
	const char *tenant = c->out->tenant->name, *flavor = h->flavor->name;
	char ceiling[160];

	if (q->position == QUOTA_NOMINAL)
		return;
	if (q->position == QUOTA_UNAVAILABLE) {
		unavailable(c, q);
		return;
	}
	if (q->position == QUOTA_LENT_OUT || q->position == QUOTA_RECLAIM_SHORT) {
		char req[160];

		snprintf(req, sizeof(req), "%" PRId64 " (claim, device class %s)",
			 h->units, h->device_class);
		lent_out(c, q, tenant, flavor, req);
		return;
	}
	if (q->position == QUOTA_NO_QUOTA) {
		violate(c, "quota",
			"tenant \"%s\" has no quota for flavor %s (device class %s); "
			"ask the platform team for quota",
			tenant, flavor, h->device_class);
		return;
	}
	if (h->units > q->nominal) {
		snprintf(ceiling, sizeof(ceiling), "nominal %" PRId64 "%s", q->nominal,
			 q->cohort ? "; claims do not borrow" : "");
		if (is_template(c))
			violate(c, "quota",
				"the claims of this template can never be admitted: "
				"each needs %" PRId64 " %s, tenant \"%s\" may hold at "
				"most %" PRId64 " (%s)",
				h->units, flavor, tenant, q->nominal, ceiling);
		else
			violate(c, "quota",
				"claim can never be admitted: needs %" PRId64 " %s, "
				"tenant \"%s\" may hold at most %" PRId64 " (%s)",
				h->units, flavor, tenant, q->nominal, ceiling);
		return;
	}
	if (is_template(c))
		return; /* fits an empty cluster */
	if (q->cohort)
		violate(c, "quota",
			"tenant \"%s\" is over its %s quota: requested %" PRId64
			" (claim, device class %s), in use %" PRId64 " of nominal "
			"%" PRId64 ", claims do not borrow from cohort \"%s\"",
			tenant, flavor, h->units, h->device_class, q->used,
			q->nominal, q->cohort);
	else
		violate(c, "quota",
			"tenant \"%s\" is over its %s quota: requested %" PRId64
			" (claim, device class %s), in use %" PRId64 " of nominal "
			"%" PRId64 ", no cohort to borrow from",
			tenant, flavor, h->units, h->device_class, q->used,
			q->nominal);
}

/* At /validate, the line kubectl prints for an admitted claim or template. */
static void claim_success_line(struct ctx *c)
{
	const struct decision *out = c->out;
	char head[DECIDE_WARNING_LEN], tail[200], pos[160];
	char units[TEXT_DECIMAL_MAX + 1];

	if (c->in->phase != DECIDE_VALIDATE || !out->allowed ||
	    (out->violation && out->mode == POLICY_MODE_AUDIT))
		return;
	text_cat(head, sizeof(head), "gpugate: ",
		 is_template(c) ? "claim template -> " : "claim -> ",
		 text_int(units, out->claim.units), " x ", out->flavor->name,
		 is_template(c) ? " per claim" : "", " for tenant ",
		 out->tenant->name, NULL);
	if (is_template(c)) {
		text_cat(tail, sizeof(tail), " (each claim made from it is charged)",
			 NULL);
	} else {
		position_text(c, pos, sizeof(pos));
		text_cat(tail, sizeof(tail), " (", pos, ")", NULL);
	}
	add_success(c, head, tail);
}

static void decide_claim(struct ctx *c)
{
	const struct workload *wl = c->wl;
	struct decision *out = c->out;
	struct dra_claim h;

	if (wl->op != WL_CREATE)
		return;
	dra_decide(c->p, wl->device_requests, wl->n_device_requests, &h);
	if (!h.gpu)
		return; /* no GPUs: none of gpugate's business */
	out->tenant = policy_tenant_for_namespace(c->p, wl->namespace);
	if (!out->tenant) {
		violate(c, "no-tenant",
			"namespace \"%s\" belongs to no tenant, so it cannot use "
			"device class \"%s\"; ask the platform team to add it to a "
			"tenant in the gpugate policy",
			wl->namespace, h.first_gpu.device_class);
		return;
	}
	out->mode = out->tenant->mode;
	/* In warn and audit mode a violation admits the claim, and what it
	 * asks of a flavor is still charged. */
	if (claim_rules(c, &h) || !h.flavor || h.units <= 0)
		return;
	out->flavor = h.flavor;
	out->count = h.units > UINT32_MAX ? UINT32_MAX : (unsigned)h.units;
	out->claim = (struct quota_claim){
		.needed = true,
		.tenant = out->tenant,
		.flavor = h.flavor,
		.units = h.units,
		.per_pod = out->count,
		.pods = 1,
		.may_borrow = false,
	};
	if (is_template(c)) {
		struct quota_result q;

		out->claim.needed = false; /* it holds nothing */
		quota_decide(c->p, out->tenant, h.flavor, h.units, false,
			     &quota_no_usage, &q);
		claim_quota_rules(c, &h, &q);
		claim_success_line(c);
	}
}

static void decide_claim_quota(struct ctx *c, const struct quota_result *q)
{
	struct dra_claim h;

	c->out->has_quota = true;
	c->out->quota = *q;
	dra_decide(c->p, c->wl->device_requests, c->wl->n_device_requests, &h);
	claim_quota_rules(c, &h, q);
	claim_success_line(c);
}

/* ---- why a pod waits (webhook/waiter.c) -------------------------------- */

void decide_waiting(const struct policy *p, const struct policy_flavor *f,
		    int64_t per_pod, const struct pool_check *pc,
		    const struct usage_view *u, const char *scheduler, char *out,
		    size_t size)
{
	char ex[600], holders[300] = "", n1[40];
	const struct pool_fit *fit = &pc->fit;

	out[0] = '\0';
	if (!pc->known) {
		if (scheduler && scheduler[0])
			snprintf(out, size, "the scheduler says: %s", scheduler);
		return;
	}
	excluded_text(pc, ex, sizeof(ex), 500);
	switch (fit->verdict) {
	case POOL_UNKNOWN:
		snprintf(out, size, "no node of flavor %s is in the cluster", f->name);
		break;
	case POOL_NONE_USABLE:
		if (pc->n_usable)
			snprintf(out, size, "no usable node of flavor %s offers any %s now "
				 "(allocatable 0: its device plugin?)%s",
				 f->name, f->resource, ex);
		else
			snprintf(out, size, "%s of flavor %s %s excluded (the repair "
				 "comes first)%s",
				 nodes_text(pc->n_nodes, "all", n1, sizeof(n1)), f->name,
				 pc->n_nodes == 1 ? "is" : "are", ex);
		break;
	case POOL_NEVER_FITS:
		snprintf(out, size, "no usable node of flavor %s can hold %" PRId64 " %s: "
			 "the largest offers %" PRId64 " (%s)%s",
			 f->name, per_pod, f->resource, pc->largest_allocatable,
			 pc->largest_allocatable_node, ex);
		break;
	case POOL_NOT_NOW: {
		/* Who holds the flavor, most first (three at most), and who
		 * of them borrows: the capacity comes back when they finish,
		 * or when a lender reclaims. */
		const struct policy_tenant *shown[3] = {NULL, NULL, NULL};

		for (int k = 0; k < 3 && u; k++) {
			const struct policy_tenant *best = NULL;
			int64_t best_used = 0;

			for (size_t i = 0; i < policy_tenant_count(p); i++) {
				const struct policy_tenant *t = policy_tenant_at(p, i);
				int64_t used = u->used(u->ctx, t->index, f->index);
				bool listed = t == shown[0] || t == shown[1] || t == shown[2];

				if (!listed && used > best_used) {
					best = t;
					best_used = used;
				}
			}
			if (!best)
				break;
			shown[k] = best;
			{
				const struct policy_quota *q = policy_tenant_quota(best, f);
				size_t len = strlen(holders);
				int64_t nominal = q ? q->nominal : 0;

				snprintf(holders + len, sizeof(holders) - len, "%s%s %" PRId64 "%s",
					 len ? ", " : "; quota held by ", best->name, best_used,
					 best_used > nominal ? " (borrowed)" : "");
			}
		}
		snprintf(out, size, "no node of flavor %s has %" PRId64 " %s free: %" PRId64
			 " free on %zu usable node%s, at most %" PRId64 " on one%s%s%s",
			 f->name, per_pod, f->resource, pc->free, pc->n_usable,
			 pc->n_usable == 1 ? "" : "s",
			 pc->largest_free, pc->free >= per_pod ? " (fragmentation)" : "",
			 holders, ex);
		break;
	}
	case POOL_FITS:
		if (scheduler && scheduler[0])
			snprintf(out, size, "the scheduler says: %s", scheduler);
		break;
	}
	text_clean(out);
}
