/*
 * decide: why a pod waits for a node (decide_waiting(), for
 * controllers/waiter.c).
 */
#include "policy/decide-int.h"

#include "base/text.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* ---- why a pod waits (controllers/waiter.c) -------------------------------- */

void decide_waiting(const struct policy *p, const struct policy_flavor *f,
		    int64_t per_pod, const struct pool_check *pc,
		    const struct usage_view *u, const char *scheduler, char *out,
		    size_t size)
{
	char ex[600], holders[300] = "", n1[40];
	const struct pool_fit *fit = &pc->fit;

	out[0] = '\0';
	if (!pc->known) {
		if (scheduler && scheduler[0])
			snprintf(out, size, "the scheduler says: %s", scheduler);
		return;
	}
	decide_excluded_text(pc, ex, sizeof(ex), 500);
	switch (fit->verdict) {
	case POOL_UNKNOWN:
		snprintf(out, size, "no node of flavor %s is in the cluster", f->name);
		break;
	case POOL_NONE_USABLE:
		if (pc->n_usable)
			snprintf(out, size, "no usable node of flavor %s offers any %s now "
				 "(allocatable 0: its device plugin?)%s",
				 f->name, f->units, ex);
		else
			snprintf(out, size, "%s of flavor %s %s excluded (the repair "
				 "comes first)%s",
				 decide_nodes_text(pc->n_nodes, "all", n1, sizeof(n1)), f->name,
				 pc->n_nodes == 1 ? "is" : "are", ex);
		break;
	case POOL_NEVER_FITS:
		snprintf(out, size, "no usable node of flavor %s can hold %" PRId64 " %s: "
			 "the largest offers %" PRId64 " (%s)%s",
			 f->name, per_pod, f->units, pc->largest_allocatable,
			 pc->largest_allocatable_node, ex);
		break;
	case POOL_NOT_NOW: {
		/* Who holds the flavor, most first (three at most), and who
		 * of them borrows: the capacity comes back when they finish,
		 * or when a lender reclaims. */
		const struct policy_tenant *shown[3] = {NULL, NULL, NULL};

		for (int k = 0; k < 3 && u; k++) {
			const struct policy_tenant *best = NULL;
			int64_t best_used = 0;

			for (size_t i = 0; i < policy_tenant_count(p); i++) {
				const struct policy_tenant *t = policy_tenant_at(p, i);
				int64_t used = u->used(u->ctx, t->index, f->index);
				bool listed = t == shown[0] || t == shown[1] || t == shown[2];

				if (!listed && used > best_used) {
					best = t;
					best_used = used;
				}
			}
			if (!best)
				break;
			shown[k] = best;
			{
				const struct policy_quota *q = policy_tenant_quota(best, f);
				size_t len = strlen(holders);
				int64_t nominal = q ? q->nominal : 0;

				snprintf(holders + len, sizeof(holders) - len, "%s%s %" PRId64 "%s",
					 len ? ", " : "; quota held by ", best->name, best_used,
					 best_used > nominal ? " (borrowed)" : "");
			}
		}
		snprintf(out, size, "no node of flavor %s has %" PRId64 " %s free: %" PRId64
			 " free on %zu usable node%s, at most %" PRId64 " on one%s%s%s",
			 f->name, per_pod, f->units, pc->free, pc->n_usable,
			 pc->n_usable == 1 ? "" : "s",
			 pc->largest_free, pc->free >= per_pod ? " (fragmentation)" : "",
			 holders, ex);
		break;
	}
	case POOL_FITS:
		if (scheduler && scheduler[0])
			snprintf(out, size, "the scheduler says: %s", scheduler);
		break;
	}
	text_clean(out);
}
