#include "kube/shared-io.h"

#include "base/diag.h"
#include "base/log.h"
#include "base/text.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/reservations.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct kube_shared_io {
	const struct kube_config *kube; /* the daemon's, outlives io */
	char ns[64];
	unsigned budget_ms;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct kube *idle[KUBE_SHARED_IO_CLIENTS];
	size_t n_idle, n_made;
};

struct kube_shared_io *kube_shared_io_new(const struct kube_config *cfg,
					  const char *ns, unsigned budget_ms,
					  struct diag *d)
{
	struct kube_shared_io *io = calloc(1, sizeof(*io));

	if (!io) {
		diag_addf(d, "out of memory");
		return NULL;
	}
	io->kube = cfg;
	snprintf(io->ns, sizeof(io->ns), "%s", ns);
	io->budget_ms = budget_ms ? budget_ms : KUBE_CAS_BUDGET_MS;
	pthread_mutex_init(&io->mu, NULL);
	pthread_cond_init(&io->cv, NULL);
	return io;
}

void kube_shared_io_free(struct kube_shared_io *io)
{
	if (!io)
		return;
	for (size_t i = 0; i < io->n_idle; i++)
		kube_free(io->idle[i]);
	pthread_cond_destroy(&io->cv);
	pthread_mutex_destroy(&io->mu);
	free(io);
}

/* A client of the pool: an idle one, a new one while fewer than the most
 * exist, else the next one given back. */
static struct kube *borrow(struct kube_shared_io *io, struct diag *d)
{
	struct kube *k = NULL;
	bool make = false;

	pthread_mutex_lock(&io->mu);
	while (!io->n_idle && io->n_made >= KUBE_SHARED_IO_CLIENTS)
		pthread_cond_wait(&io->cv, &io->mu);
	if (io->n_idle)
		k = io->idle[--io->n_idle];
	else
		make = true, io->n_made++;
	pthread_mutex_unlock(&io->mu);
	if (make) {
		k = kube_new(io->kube, d);
		if (!k) {
			pthread_mutex_lock(&io->mu);
			io->n_made--;
			pthread_cond_signal(&io->cv);
			pthread_mutex_unlock(&io->mu);
		}
	}
	return k;
}

static void give_back(struct kube_shared_io *io, struct kube *k)
{
	pthread_mutex_lock(&io->mu);
	io->idle[io->n_idle++] = k;
	pthread_cond_signal(&io->cv);
	pthread_mutex_unlock(&io->mu);
}

struct round {
	usage_shared_fn *fn;
	void *ctx;
	bool bad;          /* the document did not decode */
	char why[200];
};

static enum kube_cas_verdict on_object(void *ctx, json_t *obj, bool exists)
{
	struct round *r = ctx;
	struct resv_doc doc;
	struct diag d;
	enum kube_cas_verdict v = KUBE_CAS_KEEP;

	diag_init(&d);
	r->bad = false;
	if (resv_doc_parse(exists ? obj : NULL, &doc, &d) < 0) {
		r->bad = true;
		diag_first(&d, r->why, sizeof(r->why));
		resv_doc_release(&doc);
		return KUBE_CAS_ABORT;
	}
	if (r->fn(r->ctx, &doc)) {
		if (!exists) {
			json_object_set_new(obj, "apiVersion", json_string("v1"));
			json_object_set_new(obj, "kind", json_string("ConfigMap"));
		}
		v = resv_doc_write(&doc, obj) == 0 ? KUBE_CAS_WRITE : KUBE_CAS_ABORT;
		if (v == KUBE_CAS_ABORT) {
			r->bad = true;
			snprintf(r->why, sizeof(r->why), "out of memory");
		}
	}
	resv_doc_release(&doc);
	return v;
}

int kube_shared_io_transact(void *arg, const char *domain, usage_shared_fn *fn,
			    void *ctx, char *err, size_t errsz)
{
	struct kube_shared_io *io = arg;
	struct kube_cas_opts opts = {.budget_ms = io->budget_ms};
	struct kube_cas_result res;
	struct round r = {.fn = fn, .ctx = ctx};
	char path[512];
	struct kube *k;
	struct diag d;
	int rc;

	diag_init(&d);
	text_cat(path, sizeof(path), "/api/v1/namespaces/", io->ns, "/configmaps/",
		 domain, NULL);
	k = borrow(io, &d);
	if (!k) {
		diag_first(&d, err, errsz);
		return -1;
	}
	rc = kube_cas_update(k, path, on_object, &r, &opts, &res, &d);
	give_back(io, k);
	if (rc == 0 && res.outcome == KUBE_CAS_ABORTED && r.bad) {
		snprintf(err, errsz, "the reservations of %s/%s do not read: %s", io->ns,
			 domain, r.why);
		rc = -1;
	} else if (rc < 0) {
		diag_first(&d, err, errsz);
	}
	if (rc < 0)
		log_event(LOG_WARN, "msg=\"shared usage store\" domain=%s outcome=%s "
				    "attempts=%u conflicts=%u elapsed_ms=%u error=\"%s\"",
			  domain, kube_cas_outcome_name(res.outcome), res.attempts,
			  res.conflicts, res.elapsed_ms, err);
	kube_cas_result_release(&res);
	return rc;
}
