/*
 * load: a policy file's way in, its steps in order (policy/policy.h,
 * policy_load() and policy_parse()):
 *
 *   schema_check   the document's shape (schema.c)
 *   schema_load    into a src_policy (schema.c)
 *   validate_src   the semantic checks, every error located (validate.c)
 *   model_build    the immutable policy (model.c)
 *   lint_policy    warnings, when asked for (lint.c)
 *
 * The steps do not call each other: only this file knows their order.
 */
#include "base/diag.h"
#include "base/file.h"
#include "policy/lint.h"
#include "policy/model.h"
#include "policy/policy.h"
#include "policy/src.h"
#include "policy/srcpos.h"
#include "policy/validate.h"

#include <stdlib.h>

/* ---- loading ---------------------------------------------------------- */

int policy_parse_warn(const char *name, const char *text, size_t len,
		      struct policy **out, struct diag *d, struct diag *w)
{
	struct src_policy *src = NULL;
	struct srcpos pos;
	int rc = -1;

	/* The one message for a file over the cap, whatever its size:
	 * policy_load() reads no more than one byte past the cap. */
	if (len > POLICY_MAX_FILE_BYTES) {
		diag_addf(d, "%s: the file is larger than %u MiB (%u bytes)", name,
			  POLICY_MAX_FILE_BYTES >> 20, POLICY_MAX_FILE_BYTES);
		return -1;
	}
	/*
	 * Positions are needed for messages only: a valid policy is checked
	 * without recording any (the costly part of the walk, with 1000
	 * tenants); when the semantic checks find something, the walk runs
	 * again to record them and the checks run again to locate the errors.
	 */
	srcpos_init(&pos);
	if (schema_check(name, text, len, NULL, d) < 0)
		goto out;
	if (schema_load(name, text, len, &src, d) < 0)
		goto out;
	if (validate_src(name, src, &pos, NULL) < 0) {
		if (schema_check(name, text, len, &pos, NULL) < 0)
			diag_addf(d, "%s: internal error: the second walk failed", name);
		validate_src(name, src, &pos, d);
		goto out;
	}
	*out = model_build(name, src);
	if (!*out) {
		diag_addf(d, "%s: out of memory", name);
		goto out;
	}
	/* Warnings are located too, as errors are: the walk that records
	 * positions runs only when there is something to locate. */
	if (w && lint_policy(*out, &pos, NULL) &&
	    schema_check(name, text, len, &pos, NULL) == 0)
		lint_policy(*out, &pos, w);
	rc = 0;
out:
	schema_free(src);
	srcpos_release(&pos);
	return rc;
}

int policy_parse(const char *name, const char *text, size_t len,
		 struct policy **out, struct diag *d)
{
	return policy_parse_warn(name, text, len, out, d, NULL);
}

int policy_load_warn(const char *path, struct policy **out, struct diag *d,
		     struct diag *w)
{
	char *text;
	size_t len;
	int rc;

	/* At most one byte more than the cap: enough for policy_parse() to
	 * refuse a larger file in its own words, without reading the rest. */
	if (file_read(path, POLICY_MAX_FILE_BYTES, FILE_TRUNCATE, &text, &len, d) <
	    0)
		return -1;
	rc = policy_parse_warn(path, text, len, out, d, w);
	free(text);
	return rc;
}

int policy_load(const char *path, struct policy **out, struct diag *d)
{
	return policy_load_warn(path, out, d, NULL);
}
