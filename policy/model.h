/*
 * model: builds the immutable policy (policy/policy.h) from a src_policy
 * that passed the schema and validate_src().  The loader (policy/load.c)
 * runs the steps in order; this is the one that builds.
 */
#ifndef GPUGATE_MODEL_H
#define GPUGATE_MODEL_H

struct policy;
struct src_policy;

/* A new policy named source (the file name its messages give) from src;
 * NULL when out of memory.  Freed with policy_free(). */
struct policy *model_build(const char *source, const struct src_policy *src);

#endif
