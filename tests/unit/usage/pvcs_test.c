/* The PersistentVolumeClaims table (usage/pvcs.c): nothing is known before
 * the first whole list; put, delete, relist; the decision's view. */
#include "policy/decide.h"
#include "usage/pvcs.h"

#include <criterion/criterion.h>
#include <stdio.h>

static enum pvc_state state(struct pvcs *pv, const char *ns, const char *name)
{
	struct pvc_view v;

	pvcs_view(pv, &v);
	return v.state(v.ctx, ns, name);
}

Test(pvcs, unknown_until_listed_then_exact)
{
	struct pvcs *pv = pvcs_new();

	cr_assert_not_null(pv);
	cr_assert_eq(pvcs_put(pv, "research", "research-checkpoints", true), 0);
	cr_expect_eq(state(pv, "research", "research-checkpoints"), PVC_UNKNOWN,
		     "not listed whole yet");
	pvcs_relist_begin(pv);
	cr_assert_eq(pvcs_put(pv, "research", "research-checkpoints", true), 0);
	cr_assert_eq(pvcs_put(pv, "staging", "research-checkpoints", false), 0);
	pvcs_relist_end(pv);
	cr_expect_eq(state(pv, "research", "research-checkpoints"), PVC_MANY_NODES);
	cr_expect_eq(state(pv, "staging", "research-checkpoints"), PVC_ONE_NODE);
	cr_expect_eq(state(pv, "other", "research-checkpoints"), PVC_MISSING);
	/* MODIFIED and DELETED. */
	cr_assert_eq(pvcs_put(pv, "staging", "research-checkpoints", true), 0);
	cr_expect_eq(state(pv, "staging", "research-checkpoints"), PVC_MANY_NODES);
	pvcs_delete(pv, "staging", "research-checkpoints");
	cr_expect_eq(state(pv, "staging", "research-checkpoints"), PVC_MISSING);
	cr_expect_eq(pvcs_count(pv), 1);
	pvcs_free(pv);
}

Test(pvcs, a_relist_drops_what_it_did_not_show)
{
	struct pvcs *pv = pvcs_new();

	pvcs_relist_begin(pv);
	for (int i = 0; i < 300; i++) {
		char name[32];

		snprintf(name, sizeof(name), "c%d", i);
		cr_assert_eq(pvcs_put(pv, "ns", name, i % 2), 0);
	}
	pvcs_relist_end(pv);
	cr_expect_eq(pvcs_count(pv), 300);
	pvcs_relist_begin(pv);
	cr_assert_eq(pvcs_put(pv, "ns", "c7", true), 0);
	pvcs_relist_end(pv);
	cr_expect_eq(pvcs_count(pv), 1);
	cr_expect_eq(state(pv, "ns", "c7"), PVC_MANY_NODES);
	cr_expect_eq(state(pv, "ns", "c8"), PVC_MISSING);
	pvcs_free(pv);
}
