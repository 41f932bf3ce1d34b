/* controller: a background controller's thread (webhook/controller.h). */
#include "webhook/controller.h"

#include "base/diag.h"
#include "kube/client.h"

int controller_start(struct controller *ctl, const char *name,
		     const struct kube_config *kc, void *(*run)(void *), void *arg,
		     struct diag *d)
{
	nap_init(&ctl->nap);
	ctl->kube = kube_new(kc, d);
	if (ctl->kube && pthread_create(&ctl->thread, NULL, run, arg) == 0)
		return 0;
	if (ctl->kube)
		diag_addf(d, "%s: cannot start its thread", name);
	kube_free(ctl->kube);
	ctl->kube = NULL;
	nap_release(&ctl->nap);
	return -1;
}

void controller_stop(struct controller *ctl)
{
	nap_stop(&ctl->nap);
	pthread_join(ctl->thread, NULL);
	kube_free(ctl->kube);
	nap_release(&ctl->nap);
}
