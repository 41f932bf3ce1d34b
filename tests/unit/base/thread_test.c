/* base/thread.c: the loop every background thread runs (turn, tick,
 * wake-up, stop), and base/nap.c's wake-up under it. */
#include "base/diag.h"
#include "base/nap.h"
#include "base/thread.h"

#include <criterion/criterion.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long long mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct probe {
	atomic_int turns;
	atomic_int ends;
	atomic_int stopping_seen; /* a turn saw thread_stopping() */
	atomic_int ended_after;   /* turns counted when end() ran */
	unsigned next_ms;         /* what a turn returns */
	struct thread *t;
};

static unsigned turn(void *arg)
{
	struct probe *p = arg;

	atomic_fetch_add(&p->turns, 1);
	if (thread_stopping(p->t))
		atomic_store(&p->stopping_seen, 1);
	return p->next_ms;
}

static void end(void *arg)
{
	struct probe *p = arg;

	atomic_store(&p->ended_after, atomic_load(&p->turns));
	atomic_fetch_add(&p->ends, 1);
}

/* Waits (at most 2 s) until the turns reach n. */
static bool wait_turns(struct probe *p, int n)
{
	for (long long until = mono_ms() + 2000; mono_ms() < until; usleep(1000))
		if (atomic_load(&p->turns) >= n)
			return true;
	return atomic_load(&p->turns) >= n;
}

static void start(struct thread *t, struct probe *p, unsigned first_ms)
{
	struct diag d;

	diag_init(&d);
	p->t = t;
	cr_assert_eq(thread_start(t,
				  &(struct thread_config){.name = "probe", .turn = turn,
							  .end = end, .arg = p,
							  .first_ms = first_ms},
				  &d),
		     0, "%s", diag_text(&d));
}

Test(thread, ticks_every_turn_then_stops_and_ends_once)
{
	struct probe p = {.next_ms = 10};
	struct thread t;

	start(&t, &p, 0);
	cr_assert(wait_turns(&p, 5), "5 turns of 10 ms within 2 s: %d",
		  atomic_load(&p.turns));
	thread_stop(&t);
	cr_assert_eq(atomic_load(&p.ends), 1, "end() once");
	cr_assert_eq(atomic_load(&p.ended_after), atomic_load(&p.turns),
		     "end() after the last turn");
	{
		int after = atomic_load(&p.turns);

		usleep(30000);
		cr_assert_eq(atomic_load(&p.turns), after, "no turn after the stop");
	}
	thread_stop(&t); /* twice: a no-op */
	cr_assert_eq(atomic_load(&p.ends), 1);
}

Test(thread, a_stop_ends_a_long_sleep_at_once)
{
	struct probe p = {.next_ms = 60000};
	struct thread t;
	long long t0, took;

	start(&t, &p, 0);
	cr_assert(wait_turns(&p, 1));
	usleep(20000); /* asleep for a minute now */
	t0 = mono_ms();
	thread_stop(&t);
	took = mono_ms() - t0;
	cr_assert_lt(took, 200, "thread_stop took %lld ms", took);
	cr_assert_eq(atomic_load(&p.turns), 1, "no turn on the way out");
	cr_assert_eq(atomic_load(&p.ends), 1);
}

Test(thread, the_first_sleep_comes_before_the_first_turn)
{
	struct probe p = {.next_ms = 10};
	struct thread t;
	long long t0 = mono_ms(), took;

	start(&t, &p, 60000);
	usleep(50000);
	cr_assert_eq(atomic_load(&p.turns), 0, "still in its first sleep");
	thread_stop(&t);
	took = mono_ms() - t0;
	cr_assert_lt(took, 300, "stopped in its first sleep after %lld ms", took);
	cr_assert_eq(atomic_load(&p.turns), 0, "stopped before any turn");
	cr_assert_eq(atomic_load(&p.ends), 1, "end() all the same");
}

Test(thread, a_wake_up_brings_the_next_turn_now)
{
	struct probe p = {.next_ms = 60000};
	struct thread t;

	start(&t, &p, 0);
	cr_assert(wait_turns(&p, 1));
	usleep(20000);
	cr_assert_eq(atomic_load(&p.turns), 1, "asleep for a minute");
	thread_wake(&t);
	cr_assert(wait_turns(&p, 2), "woken: a second turn");
	usleep(50000);
	cr_assert_eq(atomic_load(&p.turns), 2, "one wake-up, one early turn");
	thread_stop(&t);
}

Test(thread, a_turn_of_zero_comes_again_at_once_and_sees_the_stop)
{
	struct probe p = {.next_ms = 0};
	struct thread t;

	start(&t, &p, 0);
	cr_assert(wait_turns(&p, 1000), "no sleep between turns");
	thread_cancel(&t); /* returns at once; the loop ends */
	thread_stop(&t);
	cr_assert_eq(atomic_load(&p.ends), 1);
}

Test(thread, not_started_is_a_no_op)
{
	struct thread t;

	memset(&t, 0, sizeof(t));
	thread_wake(&t);
	thread_cancel(&t);
	thread_stop(&t);
	cr_assert_not(t.started);
}

Test(nap, a_wake_before_the_sleep_ends_the_next_one_once)
{
	struct nap n;
	long long t0;

	nap_init(&n);
	nap_wake(&n);
	t0 = mono_ms();
	nap_sleep(&n, 60000);
	cr_assert_lt(mono_ms() - t0, 100, "the wake-up was kept for this sleep");
	t0 = mono_ms();
	nap_sleep(&n, 50);
	cr_assert_geq(mono_ms() - t0, 45, "used up: the next sleeps its time");
	cr_assert_not(n.stop, "a wake-up is not a stop");
	nap_release(&n);
}
