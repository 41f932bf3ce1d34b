/*
 * Findings that do not make a policy invalid: what `gpugate check` warns
 * about (docs/policy.md, "Warnings").  Each is "FILE:LINE: warning: ...",
 * at the line of the field at fault.  Pure, and run on the built model, so
 * that the numbers are the ones admission uses (quota_decide()).
 */
#include "policy/lint.h"

#include "base/diag.h"

#include "policy/policy.h"
#include "policy/quota.h"
#include "policy/src.h"
#include "policy/srcpos.h"

#include <inttypes.h>
#include <string.h>

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

/*
 * The webhook registrations send a pod for its labels only when a key is
 * under gpugate.io/ or in the chart's webhook.extraLabelKeys: a class or
 * GPU-count label renamed elsewhere must be listed there, or a pod with
 * only that label is never judged.  And they send a pod's UPDATE only
 * when it changes one of the labels they name (the stamps, the default
 * class and GPU-count labels, webhook.extraLabelKeys): a key renamed even
 * under gpugate.io/ must be listed there, or a running pod's class could
 * be relabelled unseen (docs/operations.md, "What the webhooks are sent").
 */
static unsigned lint_label_keys(const struct policy *p, const struct srcpos *pos,
				struct diag *w)
{
	const struct policy_settings *s = policy_settings(p);
	const char *const keys[2][3] = {
		{"classLabel", s->class_label, POLICY_DEFAULT_CLASS_LABEL},
		{"gpusLabel", s->gpus_label, POLICY_DEFAULT_GPUS_LABEL}};
	unsigned n = 0;

	for (size_t i = 0; i < 2; i++) {
		unsigned line = srcpos_line(pos, "settings.%s", keys[i][0]);

		if (strcmp(keys[i][1], keys[i][2]) == 0)
			continue;
		if (strncmp(keys[i][1], "gpugate.io/", 11) != 0)
			diag_addf(w,
				  "%s:%u: warning: settings: %s \"%s\" is outside "
				  "gpugate.io/: the webhooks are sent a pod for this "
				  "label only when it is listed in their matchConditions "
				  "(Helm: webhook.extraLabelKeys=[%s])",
				  policy_source(p), line, keys[i][0], keys[i][1],
				  keys[i][1]);
		else
			diag_addf(w,
				  "%s:%u: warning: settings: %s \"%s\" is not %s: the "
				  "webhooks are sent a pod's update that changes this "
				  "label only when it is listed in their matchConditions "
				  "(Helm: webhook.extraLabelKeys=[%s])",
				  policy_source(p), line, keys[i][0], keys[i][1],
				  keys[i][2], keys[i][1]);
		n++;
	}
	return n;
}

unsigned lint_policy(const struct policy *p, const struct srcpos *pos,
		     struct diag *w)
{
	return lint_borrowing(p, pos, w) + lint_label_keys(p, pos, w);
}
