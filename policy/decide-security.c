/*
 * decide: the security rules (SPEC section 4): privileged containers,
 * NVIDIA_ variables, envFrom, hostPath and device-list mounts, CDI
 * annotations, over every container of a pod that can reach GPU nodes
 * (decide_check_security()).
 */
#include "policy/decide-int.h"

#include "policy/reach.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

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
	return decide_violate(c, RULES_SECURITY,
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
	return decide_violate(c, RULES_SECURITY,
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
	    decide_violate(c, RULES_SECURITY,
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
		if (decide_violate(c, RULES_SECURITY,
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
		    decide_violate(c, RULES_SECURITY,
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
		if (decide_violate(c, RULES_SECURITY,
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
				return decide_violate(c, RULES_SECURITY,
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
bool decide_check_security(struct ctx *c, long gpu_index)
{
	const struct wl_pod *pod = &c->wl->pod;
	const char *cls =
		decide_label(c->wl, policy_settings(c->p)->class_label);
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
		bool gpu = charge_container_resource(c->p, ct, NULL);

		if (check_container_security(c, ct, CT_INIT, gpu, r))
			return true;
	}
	for (size_t i = 0; i < pod->n_containers; i++) {
		const struct wl_container *ct = &pod->containers[i];
		bool gpu = (long)i == gpu_index ||
			   charge_container_resource(c->p, ct, NULL);

		if (check_container_security(c, ct, CT_REGULAR, gpu, r))
			return true;
	}
	for (size_t i = 0; i < pod->n_ephemeral_containers; i++)
		if (check_container_security(c, &pod->ephemeral_containers[i],
					     CT_EPHEMERAL, false, r))
			return true;
	return false;
}
