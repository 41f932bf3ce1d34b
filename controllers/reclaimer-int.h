/*
 * reclaimer-int: the reclaimer's round, shared by its files
 * (controllers/reclaimer.h): reclaimer.c steps the victims (signal,
 * release, abandon, resume) and owns the round; the sources mark which
 * workloads are victims before the cohorts' pick:
 *
 *   reclaim-health.c  the health loop's: preemptible work on a node out
 *                     for health (docs/design/health-loop.md);
 *   reclaim-idle.c    idle GPUs': idle workloads under an idle rule of
 *                     action reclaim (docs/design/idle-gpus.md).
 *
 * A source sets s->picked and its own field of struct seen (bad, idle);
 * reclaimer.c steps every picked workload.  Not a public interface: the
 * controllers table knows reclaimer.h only.
 */
#ifndef GPUGATE_RECLAIMER_INT_H
#define GPUGATE_RECLAIMER_INT_H

#include "base/arena.h"
#include "base/strmap.h"
#include "controllers/reclaimer.h"
#include "controllers/worker.h"
#include "policy/reclaim.h"
#include "usage/usage.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct idle_want;
struct policy;
struct policy_flavor;
struct policy_tenant;

#define WRITE_TIMEOUT_MS 5000
/* Workloads a round looks at, at most (the rest wait for the next). */
#define WORKLOADS_MAX 20000
/* gpugate's own record of its victims (docs/design/reclaim.md "State"). */
#define STATE_NAME "gpugate-reclaim"
/* Records kept, at most (about 30 bytes each plus the uid). */
#define RECORDS_MAX 2000
/* Reads and writes of victims a round makes, at most, besides the state's
 * one read and one write and the resume's list: the rest wait. */
#define ACTIONS_MAX 64
/* Rounds in a row a record's workload is missing from the ledger before
 * the record is dropped (counted by this process only). */
#define PRUNE_ROUNDS 5
/* A record of a tenant this policy does not have is dropped after this. */
#define STALE_MS (7 * 24 * 3600 * 1000LL)
/* Failing nodes a round looks at, at most (the rest wait for the next). */
#define BAD_NODES_MAX 64
/* Pods told of their failing node, remembered at most (then forgotten:
 * at worst a pod is told twice). */
#define TOLD_MAX 20000
/* The label the Job controller puts on a Job's pods: the Job's uid. */
#define JOB_UID_LABEL "batch.kubernetes.io/controller-uid"

struct reclaimer {
	struct reclaimer_config cfg;
	char identity[256];
	char namespace[254];
	struct worker w;
	/* uid -> struct miss: rounds in a row its record's workload was not
	 * in the ledger.  The thread's own. */
	struct strmap misses;
	/* The state held no record when last read or written: while no
	 * cohort holds more than its quota, a round need not read it. */
	bool known_empty;
	/* "<pod uid>@<node>" of the non-preemptible pods told that their
	 * node fails (GPUNodeFailing), so that they are told once. */
	struct strmap told;
};

/* A node out of the pool for health this round (the health loop). */
struct bad_node {
	const char *node, *why;     /* into the round's arena */
	const char *resource;       /* its flavor's resource; NULL: a DRA flavor's */
	const char *drained_by;     /* the drainedBy label that names it, or NULL */
};

struct rec;

/* A workload as a round sees it, copied out of the store's lock. */
struct seen {
	struct usage_workload w;   /* strings into the round's arena */
	const struct policy_tenant *tenant;
	const struct policy_flavor *flavor;
	struct rec *rec;           /* its record, NULL: none */
	bool picked;
	/* The health loop: the failing node one of its pods is on, NULL:
	 * none; hold: only signalled (drained by another system, or
	 * health.onUnhealthy signal). */
	const struct bad_node *bad;
	bool hold;
	/* Idle GPUs: why it is taken (the idle board's want, in the round's
	 * arena), NULL: not for idleness. */
	const struct idle_want *idle;
};

/* One record of the state ConfigMap. */
struct rec {
	const char *uid;           /* into the round's arena */
	struct reclaim_record r;
	struct seen *s;            /* its workload this round, NULL: none */
	bool gone;                 /* dropped this round */
};

/* What a round does once its state is written. */
enum act_kind { ACT_SIGNAL, ACT_SUSPEND, ACT_EVICT, ACT_DELETE, ACT_ABANDON, ACT_RESUME };

struct act {
	enum act_kind kind;
	struct seen *s;            /* all but ACT_RESUME */
	struct rec *rec;           /* ACT_SIGNAL: the new record */
	bool first;                /* the release is new: counted, an Event */
	bool reported;             /* released on the workload's report */
	bool health;               /* ACT_ABANDON, ACT_RESUME: for the health loop */
	bool idle;                 /* ACT_ABANDON: for idle GPUs */
	int64_t grace_s;           /* ACT_EVICT, ACT_DELETE */
	const char *ns, *name;     /* ACT_RESUME (arena) */
};

struct round {
	struct reclaimer *r;
	const struct policy *p;
	struct arena a;
	struct seen *seen;
	size_t n, cap;
	bool seen_oom;             /* seen could not grow: no round */
	int64_t now_ms;
	struct strmap seen_by_uid; /* uid -> index into seen */
	struct strmap rec_by_uid;  /* uid -> index into recs (not gone) */
	struct rec *recs;          /* RECORDS_MAX of them: never moved */
	size_t nrec;
	json_t *state;             /* the ConfigMap read; NULL: none yet */
	bool loaded;               /* the records were read this round */
	bool dirty;                /* the records changed */
	struct act *acts;
	size_t nact, capact;
	unsigned budget;           /* ACTIONS_MAX, counted down */
	struct bad_node *bad;      /* the failing nodes (BAD_NODES_MAX) */
	size_t n_bad;
	bool health_on;            /* the pool is known and onUnhealthy is not none */
	bool bad_partial;          /* a failing node's pods were not all read */
	/* Idle GPUs: the board's wants this round, and whether the board had
	 * a round yet (before it, idle records are neither judged nor
	 * abandoned). */
	struct idle_want *idle;
	size_t n_idle;
	bool idle_known;
};

/* One read or write of a victim, from the round's budget: false when it
 * is spent (the rest waits for the next round). */
static inline bool reclaim_spend(struct round *rd)
{
	if (!rd->budget)
		return false;
	rd->budget--;
	return true;
}

/* reclaim-health.c: fills rd->bad (the nodes out for health; nothing
 * without the pool, or under onUnhealthy none), then marks the
 * preemptible workloads with a pod there (s->bad, s->hold) and tells the
 * others' pods that their node fails. */
void reclaim_health_scan(struct round *rd);
void reclaim_health_pick(struct round *rd);

/* reclaim-idle.c: reads the idle board into rd->idle, then marks the
 * workloads it wants (s->idle) that no other source took first. */
void reclaim_idle_read(struct round *rd);
void reclaim_idle_pick(struct round *rd);

#endif
