/*
 * lint: findings that do not make a valid policy invalid (docs/policy.md,
 * "Warnings"), over the built model.  Run by the loader (policy/load.c)
 * after the model is built.
 */
#ifndef GPUGATE_LINT_H
#define GPUGATE_LINT_H

struct diag;
struct policy;
struct srcpos;

/* Each finding of p added to w (may be NULL: only counted) as
 * "FILE:LINE: warning: ...", at the position pos records.  Returns how
 * many. */
unsigned lint_policy(const struct policy *p, const struct srcpos *pos,
		     struct diag *w);

#endif
