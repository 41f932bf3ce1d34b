/* claim-sync: the checkpoint claims gpugate creates (controllers/claim-sync.h). */
#include "controllers/claim-sync.h"

#include "base/diag.h"
#include "base/log.h"
#include "kube/client.h"
#include "policy/decide.h"
#include "policy/policy.h"
#include "usage/pvcs.h"
#include "webhook/holder.h"
#include "controllers/worker.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One request; a claim is never urgent (admission does not wait for it). */
#define SYNC_TIMEOUT_MS 10000u

struct claim_sync {
	struct claim_sync_config cfg;
	struct worker w;
	/* The thread's own. */
	bool done;           /* a round was made since leading */
	uint64_t done_gen;   /* for the policy of this generation */
	unsigned waited_s;   /* seconds since */
};

json_t *claim_sync_object(const struct policy *p, const char *ns, const char *name)
{
	const struct policy_checkpoint_claim *cl = &policy_checkpoint(p)->claim;
	json_t *modes = json_array();
	json_t *spec;

	if (!modes)
		return NULL;
	for (size_t i = 0; i < cl->n_access_modes; i++)
		if (json_array_append_new(modes, json_string(cl->access_modes[i])) < 0) {
			json_decref(modes);
			return NULL;
		}
	/* json_pack takes modes ("o"), also when it fails. */
	spec = json_pack("{s:o, s:{s:{s:s}}}", "accessModes", modes, "resources",
			 "requests", "storage", cl->size);
	if (spec && cl->storage_class &&
	    json_object_set_new(spec, "storageClassName",
				json_string(cl->storage_class)) < 0) {
		json_decref(spec);
		spec = NULL;
	}
	if (!spec)
		return NULL;
	return json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}}, s:o}", "apiVersion", "v1",
			 "kind", "PersistentVolumeClaim", "metadata", "name", name,
			 "namespace", ns, "labels", CLAIM_SYNC_OWNER_LABEL, CLAIM_SYNC_OWNER,
			 "spec", spec);
}

/* An error, logged when it differs from the one logged last. */
static void failed(struct claim_sync *s, const char *text)
{
	worker_failed(&s->w, "checkpoint claims not created", text);
}

/* One claim: 0 created or there already, -1 refused (in d). */
static int create_one(struct claim_sync *s, const struct policy *p, const char *ns,
		      const char *name, struct diag *d)
{
	const struct policy_checkpoint_claim *cl = &policy_checkpoint(p)->claim;
	json_t *obj = claim_sync_object(p, ns, name);
	char path[400];
	int rc;

	if (!obj) {
		diag_addf(d, "out of memory");
		return -1;
	}
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/persistentvolumeclaims", ns);
	rc = kube_create(s->w.kube, path, obj, SYNC_TIMEOUT_MS, NULL, d);
	json_decref(obj);
	if (rc == 409)
		return 0; /* there already: the watch has not shown it yet, or not ours */
	if (rc != 0)
		return -1;
	log_event(LOG_INFO, "msg=\"checkpoint claim created\" claim=%s/%s size=%s "
			    "access_modes=%s storage_class=%s",
		  ns, name, cl->size, cl->access_modes[0],
		  !cl->storage_class ? "(default)"
		  : cl->storage_class[0] ? cl->storage_class
					 : "(none)");
	return 0;
}

static void sync_once(struct claim_sync *s, const struct policy *p)
{
	struct pvc_view claims;
	json_t *list = NULL, *item;
	struct diag d;
	size_t i;
	int rc = 0;

	if (!policy_checkpoint(p)->claim.create)
		return;
	pvcs_view(s->cfg.pvcs, &claims);
	diag_init(&d);
	if (kube_get_json(s->w.kube, "/api/v1/namespaces", SYNC_TIMEOUT_MS, &list, &d) != 0) {
		failed(s, diag_text(&d));
		return;
	}
	json_array_foreach(json_object_get(list, "items"), i, item) {
		const char *ns = json_string_value(
			json_object_get(json_object_get(item, "metadata"), "name"));
		const char *phase = json_string_value(
			json_object_get(json_object_get(item, "status"), "phase"));
		const struct policy_tenant *t;
		char name[254];

		if (worker_stopping(&s->w))
			break;
		if (!ns || (phase && strcmp(phase, "Active") != 0))
			continue; /* a Terminating namespace refuses new objects */
		t = policy_tenant_for_namespace(p, ns);
		if (!t || policy_checkpoint_claim(p, t, ns, name, sizeof(name)) !=
				  POLICY_CLAIM_OK)
			continue;
		/* PVC_UNKNOWN (not listed yet): nothing is known to be missing. */
		if (claims.state(claims.ctx, ns, name) == PVC_MISSING &&
		    create_one(s, p, ns, name, &d) < 0)
			rc = -1; /* the others still go */
	}
	json_decref(list);
	if (rc < 0)
		failed(s, diag_text(&d));
	else
		worker_recovered(&s->w);
}

/* Not leading: a round at once when leading again. */
static void idle(void *arg)
{
	struct claim_sync *s = arg;

	s->done = false;
}

static unsigned turn(void *arg)
{
	struct claim_sync *s = arg;
	uint64_t gen = holder_generation(s->cfg.policy);
	struct holder_ref *ref;
	const struct policy *p;

	if (!s->done || gen != s->done_gen || s->waited_s >= s->cfg.interval_s) {
		p = holder_acquire(s->cfg.policy, &ref);
		if (p)
			sync_once(s, p);
		holder_release(ref);
		s->done = true;
		s->done_gen = gen;
		s->waited_s = 0;
	}
	s->waited_s++; /* the second slept next */
	return 1000;
}

int claim_sync_start(const struct claim_sync_config *cfg, struct claim_sync **out,
		     struct diag *d)
{
	struct claim_sync *s = calloc(1, sizeof(*s));

	if (!s) {
		diag_addf(d, "out of memory");
		return -1;
	}
	s->cfg = *cfg;
	if (!s->cfg.interval_s)
		s->cfg.interval_s = 10;
	if (worker_start(&s->w,
			 &(struct worker_config){.name = "claim-sync", .kube = cfg->kube,
						 .turn = turn, .idle = idle, .arg = s,
						 .idle_ms = 1000, .leading = cfg->leading,
						 .leading_ctx = cfg->leading_ctx},
			 d) < 0) {
		free(s);
		return -1;
	}
	*out = s;
	return 0;
}

void claim_sync_stop(struct claim_sync *s)
{
	if (!s)
		return;
	worker_stop(&s->w);
	free(s);
}
