#include "controllers/class-sync.h"

#include "base/diag.h"
#include "base/log.h"
#include "kube/client.h"
#include "policy/policy.h"
#include "report/classes.h"
#include "webhook/holder.h"
#include "controllers/worker.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One request; the sync is advice for users, never urgent. */
#define SYNC_TIMEOUT_MS 10000u

struct class_sync {
	struct class_sync_config cfg;
	struct worker w;
	/* The thread's own. */
	bool synced;          /* the last sync went through */
	uint64_t generation;  /* of the policy it was made for */
	int64_t next_at;      /* monotonic seconds: sync again from then */
	bool crd_missing;     /* the last list said 404 */
	unsigned failures;    /* syncs failed in a row */
	bool announced;       /* the skipped classes of `announced_gen` */
	uint64_t announced_gen; /* were logged */
};

static int64_t now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec;
}

/* An error, logged when it differs from the one logged last. */
static void failed(struct class_sync *s, const char *text)
{
	worker_failed(&s->w, "gpuclasses not synced", text);
}

static void object_path(const json_t *obj, char *out, size_t size)
{
	snprintf(out, size, CLASSES_COLLECTION "/%s",
		 json_string_value(json_object_get(json_object_get(obj, "metadata"), "name")));
}

int class_sync_plan(const struct policy *p, const json_t *list, struct classes_plan *out,
		    char *err, size_t size)
{
	const json_t *items = json_object_get(list, "items");

	if (!json_is_array(items)) {
		snprintf(err, size, "the list of gpuclasses has no items");
		return -1;
	}
	if (classes_plan_make(p, items, out) < 0) {
		snprintf(err, size, "out of memory");
		return -1;
	}
	return 0;
}

/* The API's answer to the list of the owned objects, or NULL (logged). */
static json_t *list_owned(struct class_sync *s)
{
	json_t *list = NULL;
	struct diag d;
	int rc;

	diag_init(&d);
	rc = kube_get_json(s->w.kube, CLASSES_COLLECTION "?labelSelector="
			   "app.kubernetes.io%2Fmanaged-by%3D" CLASSES_OWNER,
			   SYNC_TIMEOUT_MS, &list, &d);
	if (rc == 404) {
		if (!s->crd_missing)
			log_event(LOG_WARN, "msg=\"gpuclasses not synced: the GPUClass "
					    "CustomResourceDefinition is not installed\" "
					    "crd=gpuclasses.gpugate.io");
		s->crd_missing = true;
		worker_recovered(&s->w);
		return NULL;
	}
	if (rc != 0) {
		failed(s, diag_text(&d));
		return NULL;
	}
	if (s->crd_missing)
		log_event(LOG_INFO, "msg=\"gpuclasses: the CustomResourceDefinition is "
				    "there now\"");
	s->crd_missing = false;
	return list;
}

/* One write of the plan: 1 written, 0 nothing to write after all, -1
 * failed (the first failure is in d).  announce: as for sync_once(). */
static int write_one(struct class_sync *s, const char *verb, json_t *obj,
		     bool announce, struct diag *d)
{
	char path[400];
	int rc;

	object_path(obj, path, sizeof(path));
	if (strcmp(verb, "create") == 0) {
		rc = kube_create(s->w.kube, CLASSES_COLLECTION, obj, SYNC_TIMEOUT_MS, NULL, d);
		if (rc == 409) {
			/* Someone else's object of that name: not ours to take. */
			if (announce)
				log_event(LOG_WARN,
					  "msg=\"class not published as a GPUClass\" "
					  "class=%s reason=\"a GPUClass of that name exists "
					  "without the label app.kubernetes.io/managed-by="
					  "gpugate\"",
					  path + sizeof(CLASSES_COLLECTION));
			return 0;
		}
	} else if (strcmp(verb, "update") == 0) {
		rc = kube_replace(s->w.kube, path, obj, SYNC_TIMEOUT_MS, NULL, d);
	} else {
		const json_t *meta = json_object_get(obj, "metadata");

		rc = kube_delete(s->w.kube, path,
				 json_string_value(json_object_get(meta, "uid")),
				 json_string_value(json_object_get(meta, "resourceVersion")),
				 SYNC_TIMEOUT_MS, NULL, d);
		if (rc == 404)
			return 0; /* gone already */
	}
	return rc == 0 ? 1 : -1;
}

/* announce: log the classes that cannot be published (once a policy,
 * so that a resync every few minutes does not repeat it). */
static int sync_once(struct class_sync *s, const struct policy *p, bool announce)
{
	struct classes_plan pl;
	json_t *answer = list_owned(s);
	const struct {
		const char *verb;
		json_t **list;
	} steps[] = {{"create", &pl.create}, {"update", &pl.update},
		     {"delete", &pl.remove}};
	size_t i, done[3] = {0};
	json_t *o;
	struct diag d;
	char err[64];
	int rc = 0;

	if (!answer)
		return -1;
	if (class_sync_plan(p, answer, &pl, err, sizeof(err)) < 0) {
		json_decref(answer);
		failed(s, err);
		return -1;
	}
	json_decref(answer);
	diag_init(&d);
	for (size_t k = 0; k < 3; k++)
		json_array_foreach(*steps[k].list, i, o) {
			if (worker_stopping(&s->w))
				break;
			int w = write_one(s, steps[k].verb, o, announce, &d);

			if (w < 0)
				rc = -1; /* the others still go */
			else
				done[k] += (size_t)w;
		}
	if (announce) {
		json_array_foreach(pl.skipped, i, o)
			log_event(LOG_WARN, "msg=\"class not published as a GPUClass\" "
					    "class=%s reason=\"not a valid object name "
					    "(lower-case letters, digits, '-' and '.')\"",
				  json_string_value(o));
	}
	if (done[0] + done[1] + done[2])
		log_event(LOG_INFO, "msg=\"gpuclasses synced\" created=%zu updated=%zu "
				    "deleted=%zu unchanged=%zu",
			  done[0], done[1], done[2], pl.unchanged);
	if (rc < 0)
		failed(s, diag_text(&d));
	else
		worker_recovered(&s->w);
	classes_plan_release(&pl);
	return rc;
}

/* Not leading: sync at once when leading again. */
static void idle(void *arg)
{
	struct class_sync *s = arg;

	s->synced = false;
}

static unsigned turn(void *arg)
{
	struct class_sync *s = arg;
	uint64_t gen = holder_generation(s->cfg.policy);
	int64_t now = now_s();
	struct holder_ref *ref;
	const struct policy *p;

	if (s->synced && gen == s->generation && now < s->next_at)
		return 1000;
	p = holder_acquire(s->cfg.policy, &ref);
	if (p && sync_once(s, p, !s->announced || s->announced_gen != gen) == 0) {
		s->synced = true;
		s->next_at = now + s->cfg.resync_s;
		s->announced = true;
		s->announced_gen = gen;
		s->failures = 0;
	} else {
		/* Retried after 2, 4, 8, 16 s, then every retry_s (a CRD
		 * just created answers 429 for a moment), or at once on
		 * a new policy. */
		s->next_at = now + worker_retry_s(s->failures, s->cfg.retry_s);
		s->failures++;
		s->synced = true;
	}
	s->generation = gen;
	holder_release(ref);
	return 1000;
}

int class_sync_start(const struct class_sync_config *cfg, struct class_sync **out,
		     struct diag *d)
{
	struct class_sync *s = calloc(1, sizeof(*s));

	if (!s) {
		diag_addf(d, "out of memory");
		return -1;
	}
	s->cfg = *cfg;
	if (!s->cfg.resync_s)
		s->cfg.resync_s = 300;
	if (!s->cfg.retry_s)
		s->cfg.retry_s = 30;
	if (worker_start(&s->w,
			 &(struct worker_config){.name = "class-sync", .kube = cfg->kube,
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

void class_sync_stop(struct class_sync *s)
{
	if (!s)
		return;
	worker_stop(&s->w);
	free(s);
}
