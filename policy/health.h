/*
 * health: the health loop closed (docs/design/health-loop.md), the words
 * and the pure rules shared by the pool (policy/pool.c: which nodes are
 * out), the health controller (controllers/health.c: gpugate's taint and
 * record on a Node, its Events, the gauge), the reclaimer (controllers/
 * reclaimer.c: the checkpoint of the work on a failing node) and the
 * reports (gpugate pool, check --kubeconfig).
 *
 * A node of a flavor that carries a health signal (policy health) is out
 * of the pool as `health`.  gpugate then marks it, on the Node itself, so
 * that the mark outlives the signal and any restart:
 *
 *   taint       HEALTH_TAINT=health:NoSchedule while the signal is on,
 *               HEALTH_TAINT=validating:NoSchedule once it is gone: the
 *               scheduler keeps new work off the node even where no other
 *               system cordons it (node-problem-detector and the device
 *               plugin only report).  gpugate only ever adds, changes or
 *               removes a taint of this key.
 *   record      the annotation HEALTH_RECORD, "o=<ms> c=<ms> n=<N> t=<why>":
 *               when gpugate first saw the node out (o), when its signal
 *               cleared (c, 0 while it is on), how many times it went out
 *               since it last came back (n >= 1), and the signal (why).
 *
 * While the node carries either mark and no signal, it is out as
 * `validating`; it comes back (both marks removed) only once
 * health_return() says so under health.returnAfter: a validation label
 * (a DCGM diagnostic or a remediation sets it), a settle time since the
 * signal cleared, or both.
 *
 * Pure: no I/O, no clock (times are arguments), no allocation.
 */
#ifndef GPUGATE_HEALTH_H
#define GPUGATE_HEALTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct policy_health;
struct pool_node;

/* gpugate's taint: its key, its two values, its effect. */
#define HEALTH_TAINT "gpugate.io/unhealthy"
#define HEALTH_TAINT_OUT "health"
#define HEALTH_TAINT_VALIDATING "validating"
#define HEALTH_TAINT_EFFECT "NoSchedule"
/* gpugate's record on the Node (an annotation). */
#define HEALTH_RECORD "gpugate.io/health"

/* What policy health.onUnhealthy asks for the work on a failing node. */
enum health_on_unhealthy {
	HEALTH_ON_CHECKPOINT, /* signal, then suspend (Job) or evict (Pod) after
			       * the report or checkpoint.timeoutSeconds: the
			       * default, so that the work resumes elsewhere */
	HEALTH_ON_SIGNAL,     /* the checkpoint signal only: a drain (NVSentinel's,
			       * an admin's) does the rest */
	HEALTH_ON_NONE,       /* nothing (the node still leaves the pool) */
};

/* "checkpoint", "signal", "none". */
const char *health_on_unhealthy_name(enum health_on_unhealthy m);
/* The mode named s; false: no such name. */
bool health_on_unhealthy_parse(const char *s, enum health_on_unhealthy *out);

/* gpugate's record of a node it took out (HEALTH_RECORD). */
struct health_record {
	int64_t out_ms;     /* > 0 in a valid record */
	int64_t cleared_ms; /* 0: the signal is still on */
	int64_t times;      /* >= 1 */
	const char *why;    /* the signal when it went out; not empty.  _parse
			     * points it into the text */
};

/*
 * "o=<ms> c=<ms> n=<N> t=<why>", like snprintf (the length it needs; a
 * cut text when buf is too small).  _parse: 0, or -1 for any other text
 * (then *out is untouched): a field missing, repeated, unknown or out of
 * order, out_ms <= 0, cleared_ms < 0 or before out_ms (when not 0),
 * times < 1, an empty why, a newline.
 */
size_t health_record_format(const struct health_record *r, char *buf, size_t size);
int health_record_parse(const char *text, struct health_record *out);

/*
 * The node's marks as gpugate reads them back: the record (NULL text or
 * one that does not parse: none) and the value of gpugate's taint (NULL:
 * no taint of key HEALTH_TAINT).
 */
struct health_marks {
	bool has_record;
	struct health_record record;
	const char *taint_value; /* borrowed from the node */
};
void health_marks_read(const struct pool_node *n, struct health_marks *out);

/* Whether n carries either of gpugate's marks. */
bool health_marked(const struct pool_node *n);

/*
 * Whether the node may come back, its signal gone since cleared_ms, at
 * now_ms, under h's returnAfter:
 *   - validation label "K=V" (h->return_label_key/value): the node's label
 *     K has the value V (K alone, value NULL: any value);
 *   - settle seconds (h->return_settle_s > 0): now_ms - cleared_ms >= it.
 * Both must hold when both are set; with neither, true.  Pure.
 * *wait (may be NULL) gets, when false, what it still waits for, e.g.
 * "label dcgm.validated=true" or "settle until 2026-12-05T12:00:00Z" or
 * both joined by " and ".
 */
bool health_return(const struct policy_health *h, const struct pool_node *n,
		   int64_t cleared_ms, int64_t now_ms, char *wait, size_t size);

/* What the health controller does to a node this round. */
enum health_node_step {
	HEALTH_KEEP,       /* its marks are right: nothing */
	HEALTH_MARK_OUT,   /* record (new, or a signal back: c=0, n+1) and taint
			    * =health; an Event GPUNodeUnhealthy */
	HEALTH_VALIDATE,   /* its signal cleared: record c=now, taint
			    * =validating; an Event GPUNodeValidating */
	HEALTH_RETURN,     /* validated: both marks removed; an Event
			    * GPUNodeReturned */
	HEALTH_FIX_TAINT,  /* the record is right but the taint is missing or
			    * says the other state (someone removed or
			    * changed it): set the taint again */
};

/*
 * The step for a node of a flavor, from its marks, whether it carries a
 * health signal now (pool_node_exclusion() == POOL_HEALTH), and
 * health_return() at now_ms.  A taint without a record (the record was
 * removed by hand) counts as validated: HEALTH_RETURN.  Pure.
 */
enum health_node_step health_node_next(const struct policy_health *h,
				       const struct pool_node *n,
				       const struct health_marks *m, bool signal_now,
				       int64_t now_ms);

/*
 * Whether another system drains the node itself: a label of
 * health.drainedBy (default NVSentinel's dgxc.nvidia.com/nvsentinel-state,
 * any value).  Then gpugate only signals the work there: never a second
 * eviction.  Pure.
 */
bool health_drained_by_other(const struct policy_health *h, const struct pool_node *n,
			     char *why, size_t size);

#endif
