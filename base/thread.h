/*
 * thread: one background thread that runs a loop body ("a turn") until it
 * is told to stop, with the sleeps between turns cut short by a stop or a
 * wake-up (base/nap.h).  Written once for every looping thread of gpugate
 * serve: the informers and Leases (kube/), the controllers
 * (controllers/worker.h adds their API client, the leader-only turns and
 * the log-once error).
 *
 *   static unsigned turn(void *arg)       one turn: the work of one tick
 *   {
 *       ...                               may look at thread_stopping()
 *       return 2000;                      ms until the next turn
 *   }
 *
 *   struct thread_config c = {.name = "reclaimer", .turn = turn, .arg = r,
 *                             .first_ms = 2000};
 *   if (thread_start(&r->thread, &c, d) < 0) ...
 *   ...
 *   thread_stop(&r->thread);              wakes it, waits for it
 *
 * The loop, on the new thread:
 *
 *   sleep first_ms (when not 0)
 *   while not stopping:
 *       ms = turn(arg)
 *       if stopping: break
 *       sleep ms (when not 0; 0: the next turn at once)
 *   end(arg) (when not NULL)
 *
 * A sleep ends at once on thread_stop() or thread_cancel() (and a stop
 * asked before it begins makes it no sleep at all), and on thread_wake()
 * (then the next turn comes early).  A turn itself is not interrupted:
 * what it waits for (an API request) looks at the stop flag,
 * thread_stop_flag(), or is bounded.
 */
#ifndef GPUGATE_THREAD_H
#define GPUGATE_THREAD_H

#include "base/nap.h"

#include <pthread.h>
#include <stdbool.h>

struct diag;

struct thread_config {
	const char *name;           /* in the error when it cannot start (read
				     * by thread_start() only) */
	/* One turn of the loop; returns the milliseconds to sleep before the
	 * next (0: none).  On the thread. */
	unsigned (*turn)(void *arg);
	/* Once after the last turn, on the thread (a leader letting go);
	 * may be NULL. */
	void (*end)(void *arg);
	void *arg;
	unsigned first_ms;          /* sleep before the first turn; 0: none */
};

/* Caller's storage; its fields are the module's. */
struct thread {
	struct thread_config cfg;
	struct nap nap;
	pthread_t id;
	bool started;               /* thread_start() succeeded */
};

/*
 * Starts the thread on t (any previous content is overwritten).  0, or
 * -1 with "<name>: cannot start its thread" in d; t is then as if never
 * started (thread_stop() is a no-op on it).
 */
int thread_start(struct thread *t, const struct thread_config *cfg, struct diag *d);

/* True once a stop was asked: a turn that loops or waits ends early.
 * From the thread (or any). */
bool thread_stopping(const struct thread *t);

/* The flag that turns true on a stop, for calls that look at one
 * themselves (kube_request(), kube_watch()). */
volatile bool *thread_stop_flag(struct thread *t);

/* Sleeps ms within a turn (a backoff), ended at once by a stop or a
 * wake-up like the sleeps between turns.  On the thread. */
void thread_sleep(struct thread *t, unsigned ms);

/* Ends the sleep under way (or the next one) once: the next turn comes
 * now.  From any thread; a no-op when t was not started. */
void thread_wake(struct thread *t);

/* Asks the thread to stop and returns at once (to stop several together:
 * cancel all, then thread_stop() each).  A no-op when t was not started. */
void thread_cancel(struct thread *t);

/* Asks the thread to stop, waits for it (the turn under way ends first,
 * then end() runs) and releases t.  A no-op when t was not started or was
 * stopped already.  Not from the thread itself. */
void thread_stop(struct thread *t);

#endif
