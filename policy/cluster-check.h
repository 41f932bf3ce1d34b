/*
 * cluster-check: what `gpugate check --kubeconfig` finds when it holds a
 * valid policy against a cluster, decided on plain values (the shell
 * reads the cluster).  Findings are warnings: the policy is valid, the
 * cluster is missing something it needs.
 */
#ifndef GPUGATE_CLUSTER_CHECK_H
#define GPUGATE_CLUSTER_CHECK_H

#include <stddef.h>

struct diag;
struct policy;

/*
 * One warning line in w for each class whose priorityClassName is not
 * among the n PriorityClass names the cluster has: the apiserver refuses
 * every pod that names a missing PriorityClass, so every workload of
 * that class would be refused after gpugate admitted it.  Returns how
 * many were found.
 *
 *   FILE: warning: class "C": PriorityClass "P" does not exist in the
 *   cluster, and the apiserver refuses pods that name it; create it ...
 */
unsigned cluster_check_priority_classes(const struct policy *p,
					const char *const *names, size_t n,
					struct diag *w);

#endif
