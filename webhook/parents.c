#include "webhook/parents.h"

#include "base/diag.h"
#include "kube/client.h"
#include "kube/clients.h"

#include <stdlib.h>

struct parents {
	struct kube_clients *clients;
};

struct parents *parents_new(const struct kube_config *cfg, struct diag *d)
{
	struct parents *p = calloc(1, sizeof(*p));

	if (!p) {
		diag_addf(d, "out of memory");
		return NULL;
	}
	p->clients = kube_clients_new(cfg, d);
	if (!p->clients) {
		free(p);
		return NULL;
	}
	return p;
}

void parents_free(struct parents *p)
{
	if (!p)
		return;
	kube_clients_free(p->clients);
	free(p);
}

json_t *parents_get(void *ctx, const char *path, char *err, size_t errsz)
{
	struct parents *p = ctx;
	json_t *obj = NULL;
	struct kube *k;
	struct diag d;

	diag_init(&d);
	k = kube_clients_borrow(p->clients, &d);
	if (k) {
		if (kube_get_json(k, path, PARENTS_TIMEOUT_MS, &obj, &d) != 0)
			obj = NULL;
		kube_clients_give_back(p->clients, k);
	}
	if (!obj)
		diag_first(&d, err, errsz);
	return obj;
}
