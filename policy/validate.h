/*
 * validate: the semantic checks of a policy file as written (a src_policy
 * that passed the schema), every error located by srcpos.  Run by the
 * loader (policy/load.c) before the model is built.
 */
#ifndef GPUGATE_VALIDATE_H
#define GPUGATE_VALIDATE_H

struct diag;
struct src_policy;
struct srcpos;

/* Every error added to d (may be NULL: only the verdict), each one line
 * "FILE:LINE: message" at the position pos records.  0 when valid. */
int validate_src(const char *file, const struct src_policy *src,
		 const struct srcpos *pos, struct diag *d);

#endif
