/*
 * Findings that do not make a policy invalid: what `gpugate check` warns
 * about (docs/policy.md, "Warnings").  Each is "FILE:LINE: warning: ...",
 * at the line of the field at fault.  Pure, and run on the built model, so
 * that the numbers are the ones admission uses (quota_decide()).
 */
#include "base/diag.h"
#include "policy/policy.h"
#include "policy/quota.h"
#include "policy/src.h"
#include "policy/srcpos.h"

#include <inttypes.h>

/*
 * A borrowingLimit above what the cohort could lend even when every other
 * member uses nothing: the limit promises units that never come.  What
 * the cohort can lend is quota_decide()'s cohort_lendable: the other
 * members' lendingLimit, or their nominal quota where they set none.
 */
static unsigned lint_borrowing(const struct policy *p, const struct srcpos *pos,
			       struct diag *w)
{
	unsigned n = 0;

	for (size_t i = 0; i < policy_tenant_count(p); i++) {
		const struct policy_tenant *t = policy_tenant_at(p, i);

		if (!t->cohort)
			continue;
		for (size_t k = 0; k < t->n_quota; k++) {
			const struct policy_quota *q = &t->quota[k];
			struct quota_result r;

			if (q->borrowing_limit == POLICY_NO_LIMIT)
				continue;
			quota_decide(p, t, q->flavor, 1, true, &quota_no_usage, &r);
			if (r.cohort_lendable >= q->borrowing_limit)
				continue;
			diag_addf(w,
				  "%s:%u: warning: tenant \"%s\": quota %s: borrowingLimit "
				  "%" PRId64 " is more than cohort \"%s\" can ever lend: "
				  "at most %" PRId64 " (the other members' lendingLimit, "
				  "else their nominal quota)",
				  policy_source(p),
				  srcpos_line(pos, "tenants[%zu].quota[%zu].borrowingLimit",
					      i, k),
				  t->name, q->flavor->name, q->borrowing_limit, t->cohort,
				  r.cohort_lendable);
			n++;
		}
	}
	return n;
}

unsigned lint_policy(const struct policy *p, const struct srcpos *pos,
		     struct diag *w)
{
	return lint_borrowing(p, pos, w);
}
