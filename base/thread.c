/* thread: one looping thread, its turns, sleeps, wake-ups and stop
 * (base/thread.h). */
#include "base/thread.h"

#include "base/diag.h"

#include <string.h>

static void *loop(void *arg)
{
	struct thread *t = arg;

	if (t->cfg.first_ms)
		nap_sleep(&t->nap, t->cfg.first_ms);
	while (!t->nap.stop) {
		unsigned ms = t->cfg.turn(t->cfg.arg);

		if (t->nap.stop)
			break;
		if (ms)
			nap_sleep(&t->nap, ms);
	}
	if (t->cfg.end)
		t->cfg.end(t->cfg.arg);
	return NULL;
}

int thread_start(struct thread *t, const struct thread_config *cfg, struct diag *d)
{
	memset(t, 0, sizeof(*t));
	t->cfg = *cfg;
	nap_init(&t->nap);
	if (pthread_create(&t->id, NULL, loop, t) != 0) {
		diag_addf(d, "%s: cannot start its thread",
			  cfg->name ? cfg->name : "thread");
		nap_release(&t->nap);
		memset(t, 0, sizeof(*t));
		return -1;
	}
	t->started = true;
	return 0;
}

bool thread_stopping(const struct thread *t)
{
	return t->nap.stop;
}

volatile bool *thread_stop_flag(struct thread *t)
{
	return &t->nap.stop;
}

void thread_sleep(struct thread *t, unsigned ms)
{
	nap_sleep(&t->nap, ms);
}

void thread_wake(struct thread *t)
{
	if (t->started)
		nap_wake(&t->nap);
}

void thread_cancel(struct thread *t)
{
	if (t->started)
		nap_stop(&t->nap);
}

void thread_stop(struct thread *t)
{
	if (!t->started)
		return;
	nap_stop(&t->nap);
	pthread_join(t->id, NULL);
	nap_release(&t->nap);
	t->started = false;
}
