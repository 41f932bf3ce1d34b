/*
 * test_policy: the policy a unit test runs under, from YAML text.
 */
#ifndef GPUGATE_TEST_POLICY_H
#define GPUGATE_TEST_POLICY_H

struct policy;

/* The policy of yaml (named "t.yaml" in messages); a failed assertion,
 * with gpugate's message, when it does not parse.  policy_free() it. */
struct policy *test_policy(const char *yaml);

/* The same of the policy file at path ("policy/examples/gpu-cluster.yaml"). */
struct policy *test_policy_file(const char *path);

#endif
