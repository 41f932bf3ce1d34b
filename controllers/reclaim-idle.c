/*
 * reclaim-idle: idle GPUs' victims (docs/design/idle-gpus.md;
 * controllers/reclaimer-int.h).  The idle controller publishes, once a
 * round, the workloads that are idle under an idle rule of action reclaim
 * (controllers/idle-board.h); the reclaimer takes each back by its
 * checkpoint path, after the health loop's and before the cohorts'.
 */
#include "controllers/reclaimer-int.h"

#include "base/arena.h"
#include "base/strmap.h"
#include "controllers/idle-board.h"

#include <stdlib.h>
#include <string.h>

void reclaim_idle_read(struct round *rd)
{
	struct idle_want *wants = NULL;
	int64_t round_ms = 0;
	size_t n = 0;

	rd->idle = NULL;
	rd->n_idle = 0;
	rd->idle_known = false;
	if (!rd->r->cfg.idle || idle_board_wants(rd->r->cfg.idle, &wants, &n, &round_ms) < 0)
		return;
	rd->idle_known = round_ms > 0;
	if (n && (rd->idle = arena_calloc(&rd->a, n, sizeof(*rd->idle)))) {
		memcpy(rd->idle, wants, n * sizeof(*wants));
		rd->n_idle = n;
	}
	free(wants);
}

void reclaim_idle_pick(struct round *rd)
{
	for (size_t i = 0; i < rd->n_idle; i++) {
		const struct idle_want *want = &rd->idle[i];
		struct seen *s;
		size_t idx;

		if (!strmap_get(&rd->seen_by_uid, want->uid, &idx))
			continue; /* gone, or holds nothing now */
		s = &rd->seen[idx];
		/* A pod its Job's gang does not cover is the Job's to stop;
		 * one a failing node took is moved by the health loop. */
		if (s->picked || s->w.owned)
			continue;
		s->picked = true;
		s->idle = want;
	}
}
