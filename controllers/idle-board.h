/*
 * idle-board: what the idle controller found in its latest round, shared
 * with the reclaimer (the workloads to take back) and with GET /pool (each
 * pod's utilization over the last hour).  Written once a round by the
 * idle controller, read by the others; a mutex inside, copies out.
 *
 * The idle controller (controllers/idle.h) publishes a whole round at a
 * time: a round that could not read Prometheus publishes an empty one, so
 * nothing is taken back on stale figures (SPEC 10: no data, never idle).
 */
#ifndef GPUGATE_IDLE_BOARD_H
#define GPUGATE_IDLE_BOARD_H

#include <stddef.h>
#include <stdint.h>

struct idle_util;

/* A workload whose rule says reclaim and that is idle. */
struct idle_want {
	char uid[64];         /* its Job's uid, or a bare pod's */
	char namespace[64];
	char name[254];       /* the Job's or the pod's */
	int64_t since_ms;     /* idle since (the annotation's time) */
	double peak;          /* the highest utilization over `for`, 0..1 */
	/* idle_describe(): "below 5% for 30m (highest 2.1%)". */
	char why[160];
};

struct idle_board;

struct idle_board *idle_board_new(void);
void idle_board_free(struct idle_board *b);

/* The round of now_ms: wants[0..nw) and utils[0..nu) (copied; strings
 * too).  0, or -1 when out of memory (the board is then empty). */
int idle_board_publish(struct idle_board *b, const struct idle_want *wants, size_t nw,
		       const struct idle_util *utils, size_t nu, int64_t now_ms);

/* A copy of the wants (free() *out): 0, or -1 out of memory.  *round_ms:
 * the round's time, 0 before the first. */
int idle_board_wants(struct idle_board *b, struct idle_want **out, size_t *n,
		     int64_t *round_ms);

/* A copy of the utilizations (idle_board_utils_free() it). */
int idle_board_utils(struct idle_board *b, struct idle_util **out, size_t *n);
void idle_board_utils_free(struct idle_util *u, size_t n);

#endif
