#include "kube/shared-io.h"

#include "base/diag.h"
#include "base/log.h"
#include "base/text.h"
#include "kube/client.h"
#include "kube/clients.h"
#include "kube/config.h"
#include "kube/reservations-json.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct kube_shared_io {
	char ns[64];
	unsigned budget_ms;
	struct kube_clients *clients;
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
	io->clients = kube_clients_new(cfg, d);
	if (!io->clients) {
		free(io);
		return NULL;
	}
	snprintf(io->ns, sizeof(io->ns), "%s", ns);
	io->budget_ms = budget_ms ? budget_ms : KUBE_CAS_BUDGET_MS;
	return io;
}

void kube_shared_io_free(struct kube_shared_io *io)
{
	if (!io)
		return;
	kube_clients_free(io->clients);
	free(io);
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
	k = kube_clients_borrow(io->clients, &d);
	if (!k) {
		diag_first(&d, err, errsz);
		return -1;
	}
	rc = kube_cas_update(k, path, on_object, &r, &opts, &res, &d);
	kube_clients_give_back(io->clients, k);
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
