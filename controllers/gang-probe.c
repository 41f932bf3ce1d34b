/* gang-probe: what the apiserver serves for gang start (controllers/gang-probe.h). */
#include "controllers/gang-probe.h"

#include "base/diag.h"
#include "base/log.h"
#include "controllers/worker.h"
#include "kube/client.h"
#include "metrics/metrics.h"
#include "policy/gang.h"
#include "webhook/holder.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One request: the apiserver answers a dry run at once. */
#define PROBE_TIMEOUT_MS 10000u
/* A probe that said nothing is asked again after 2, 4, ... this many s. */
#define PROBE_RETRY_CAP_S 60u

struct gang_probe {
	struct gang_probe_config cfg;
	struct worker w;
	/* The thread's own. */
	bool done;          /* a probe said something since the start */
	uint64_t done_gen;  /* the policy generation of the last probe */
	unsigned waited_s;  /* seconds since the last probe */
	unsigned wait_s;    /* before the next: interval_s, or a retry's */
	unsigned failed;    /* probes in a row that said nothing */
	unsigned logged;    /* the bits logged last */
	bool have_logged;
};

/* ---- pure --------------------------------------------------------------- */

json_t *gang_probe_job_object(void)
{
	return json_pack(
		"{s:s, s:s, s:{s:s}, s:{s:i, s:i, s:b, s:{s:{s:{s:i}}}, "
		"s:{s:{s:[{s:s, s:s}], s:s}}}}",
		"apiVersion", "batch/v1", "kind", "Job", "metadata", "name",
		GANG_PROBE_NAME, "spec", "parallelism", 2, "completions", 2, "suspend",
		1, "scheduling", "schedulingPolicy", "gang", "minCount", 2, "template",
		"spec", "containers", "name", "probe", "image", "gpugate.invalid/probe",
		"restartPolicy", "Never");
}

json_t *gang_probe_podgroup_object(void)
{
	return json_pack("{s:s, s:s, s:{s:s}, s:{s:{s:{s:i}}, s:{s:[{s:s}]}}}",
			 "apiVersion", "scheduling.k8s.io/v1beta1", "kind", "PodGroup",
			 "metadata", "name", GANG_PROBE_NAME, "spec", "schedulingPolicy",
			 "gang", "minCount", 2, "schedulingConstraints", "topology", "key",
			 "kubernetes.io/hostname");
}

static const json_t *member(const json_t *o, const char *const *path)
{
	for (; o && *path; path++)
		o = json_object_get(o, *path);
	return o;
}

enum gang_probe_answer gang_probe_discovery(long status, const json_t *body)
{
	const json_t *r;
	bool workloads = false, podgroups = false;
	size_t i;

	if (status == 404)
		return GANG_PROBE_NO; /* the group version is not served */
	if (status != 200 || !json_is_object(body))
		return GANG_PROBE_UNKNOWN;
	json_array_foreach(json_object_get(body, "resources"), i, r) {
		const char *name = json_string_value(json_object_get(r, "name"));

		if (!name)
			continue;
		workloads |= strcmp(name, "workloads") == 0;
		podgroups |= strcmp(name, "podgroups") == 0;
	}
	return workloads && podgroups ? GANG_PROBE_YES : GANG_PROBE_NO;
}

/* A dry-run create: 200/201 with the member at path kept, or dropped;
 * 400/422 (the field refused): no; anything else says nothing (403: no
 * right; 404: no such namespace; 409: a real object of the name; 5xx). */
static enum gang_probe_answer dry_run(long status, const json_t *body,
				      const char *const *path)
{
	if (status == 400 || status == 422)
		return GANG_PROBE_NO;
	if ((status != 200 && status != 201) || !json_is_object(body))
		return GANG_PROBE_UNKNOWN;
	return json_is_object(member(body, path)) || json_is_array(member(body, path))
		       ? GANG_PROBE_YES
		       : GANG_PROBE_NO;
}

enum gang_probe_answer gang_probe_job(long status, const json_t *body)
{
	static const char *const path[] = {"spec", "scheduling", "schedulingPolicy",
					   "gang", NULL};

	return dry_run(status, body, path);
}

enum gang_probe_answer gang_probe_topology(long status, const json_t *body)
{
	static const char *const path[] = {"spec", "schedulingConstraints", "topology",
					   NULL};
	enum gang_probe_answer a = dry_run(status, body, path);

	/* Kept, and not emptied. */
	if (a == GANG_PROBE_YES && json_array_size(member(body, path)) == 0)
		return GANG_PROBE_NO;
	return a;
}

static unsigned apply(unsigned bits, unsigned bit, enum gang_probe_answer a)
{
	if (a == GANG_PROBE_YES)
		return bits | bit;
	if (a == GANG_PROBE_NO)
		return bits & ~bit;
	return bits;
}

unsigned gang_probe_bits(unsigned prev, enum gang_probe_answer podgroup,
			 enum gang_probe_answer job, enum gang_probe_answer topology)
{
	unsigned bits = prev;

	bits = apply(bits, GANG_SERVES_PODGROUP, podgroup);
	bits = apply(bits, GANG_SERVES_JOB_SCHEDULING, job);
	bits = apply(bits, GANG_SERVES_TOPOLOGY,
		     podgroup == GANG_PROBE_NO ? GANG_PROBE_NO : topology);
	if (podgroup != GANG_PROBE_UNKNOWN || job != GANG_PROBE_UNKNOWN ||
	    topology != GANG_PROBE_UNKNOWN)
		bits |= GANG_SERVES_KNOWN;
	return bits | GANG_SERVES_CONTROLLER;
}

/* ---- the thread --------------------------------------------------------- */

/* status and body of one answer: 0 -> 2xx (status as the verb's), the
 * status of another, -1 none; the first error into why. */
static long outcome(int rc, long ok, struct diag *d, char *why, size_t size)
{
	if (rc != 0 && !why[0]) {
		diag_first(d, why, size);
		if (!why[0])
			snprintf(why, size, "no answer");
	}
	return rc == 0 ? ok : rc;
}

static enum gang_probe_answer ask_discovery(struct gang_probe *p, char *why,
					    size_t size)
{
	json_t *body = NULL;
	struct diag d;
	long status;
	enum gang_probe_answer a;
	int rc;

	diag_init(&d);
	rc = kube_get_json(p->w.kube, "/apis/scheduling.k8s.io/v1beta1",
			   PROBE_TIMEOUT_MS, &body, &d);
	status = rc == 404 ? 404 : outcome(rc, 200, &d, why, size);
	a = gang_probe_discovery(status, body);
	json_decref(body);
	return a;
}

static enum gang_probe_answer ask_dry_run(struct gang_probe *p, const char *collection,
					  json_t *obj,
					  enum gang_probe_answer (*read)(long,
									 const json_t *),
					  char *why, size_t size)
{
	json_t *body = NULL;
	struct diag d;
	char path[256];
	long status;
	enum gang_probe_answer a;
	int rc;

	if (!obj) {
		if (!why[0])
			snprintf(why, size, "out of memory");
		return GANG_PROBE_UNKNOWN;
	}
	diag_init(&d);
	snprintf(path, sizeof(path), collection, p->cfg.namespace);
	rc = kube_create(p->w.kube, path, obj, PROBE_TIMEOUT_MS, &body, &d);
	json_decref(obj);
	status = rc == 400 || rc == 422 ? rc : outcome(rc, 201, &d, why, size);
	a = read(status, body);
	json_decref(body);
	return a;
}

static void publish(struct gang_probe *p, unsigned bits)
{
	enum gang_route auto_route = gang_auto_route(bits);

	atomic_store(p->cfg.served, bits);
	metrics_gang_route(p->cfg.metrics, auto_route);
	if (p->have_logged && p->logged == bits)
		return;
	log_event(LOG_INFO, "msg=\"gang start served\" workload=%s podgroup=%s "
			    "topology=%s controller=%s known=%s auto=%s",
		  bits & GANG_SERVES_JOB_SCHEDULING ? "yes" : "no",
		  bits & GANG_SERVES_PODGROUP ? "yes" : "no",
		  bits & GANG_SERVES_TOPOLOGY ? "yes" : "no",
		  bits & GANG_SERVES_CONTROLLER ? "yes" : "no",
		  bits & GANG_SERVES_KNOWN ? "yes" : "no", gang_route_name(auto_route));
	p->logged = bits;
	p->have_logged = true;
}

/* One probe: true when every answer said something. */
static bool probe_once(struct gang_probe *p)
{
	char why[600] = "";
	/* Not asked (no podgroups): says nothing, which keeps the bit
	 * (gang_probe_bits() clears it with the podgroups). */
	enum gang_probe_answer pg, job, topo = GANG_PROBE_UNKNOWN;
	unsigned prev = atomic_load(p->cfg.served);

	pg = ask_discovery(p, why, sizeof(why));
	job = ask_dry_run(p, "/apis/batch/v1/namespaces/%s/jobs?dryRun=All",
			  gang_probe_job_object(), gang_probe_job, why, sizeof(why));
	if (pg == GANG_PROBE_YES ||
	    (pg == GANG_PROBE_UNKNOWN && (prev & GANG_SERVES_PODGROUP)))
		topo = ask_dry_run(p,
				   "/apis/scheduling.k8s.io/v1beta1/namespaces/%s/"
				   "podgroups?dryRun=All",
				   gang_probe_podgroup_object(), gang_probe_topology, why,
				   sizeof(why));
	publish(p, gang_probe_bits(prev, pg, job, topo));
	if (why[0]) {
		worker_failed(&p->w, "gang start probe failed", why);
		return false;
	}
	worker_recovered(&p->w);
	return true;
}

static unsigned turn(void *arg)
{
	struct gang_probe *p = arg;
	uint64_t gen = holder_generation(p->cfg.policy);

	if (!p->done || gen != p->done_gen || p->waited_s >= p->wait_s) {
		bool ok = probe_once(p);

		p->done = true;
		p->done_gen = gen;
		p->waited_s = 0;
		p->wait_s = ok ? p->cfg.interval_s
			       : worker_retry_s(p->failed, PROBE_RETRY_CAP_S);
		p->failed = ok ? 0 : p->failed + 1;
		if (worker_stopping(&p->w))
			return 1000;
	}
	p->waited_s++; /* the second slept next */
	return 1000;
}

int gang_probe_start(const struct gang_probe_config *cfg, struct gang_probe **out,
		     struct diag *d)
{
	struct gang_probe *p = calloc(1, sizeof(*p));

	if (!p) {
		diag_addf(d, "out of memory");
		return -1;
	}
	p->cfg = *cfg;
	if (!p->cfg.interval_s)
		p->cfg.interval_s = 600;
	/* Without an answer yet: a controller runs (route gates). */
	atomic_fetch_or(p->cfg.served, GANG_SERVES_CONTROLLER);
	metrics_gang_route(p->cfg.metrics, gang_auto_route(atomic_load(p->cfg.served)));
	if (worker_start(&p->w,
			 &(struct worker_config){.name = "gang-probe", .kube = cfg->kube,
						 .turn = turn, .arg = p},
			 d) < 0) {
		free(p);
		return -1;
	}
	*out = p;
	return 0;
}

void gang_probe_stop(struct gang_probe *p)
{
	if (!p)
		return;
	worker_stop(&p->w);
	free(p);
}
