/*
 * report/snapshot.c: the message of a 403 to the lists `gpugate pool` and
 * `gpugate explain --kubeconfig` need (docs/users.md lists it).
 */
#include "report/snapshot.h"

#include <criterion/criterion.h>

Test(snapshot, forbidden_says_what_is_missing_and_what_a_tenant_reads)
{
	char msg[600];

	snapshot_forbidden("pool", "nodes", "research", msg, sizeof(msg));
	cr_expect_str_eq(msg, "forbidden: cannot list nodes at the cluster scope (pool "
			      "needs list on nodes, pods, jobs.batch and "
			      "resourceclaims.resource.k8s.io in all namespaces); as a "
			      "tenant, read your quota with: kubectl get gpuquota -n "
			      "research");
	snapshot_forbidden("explain", "pods", NULL, msg, sizeof(msg));
	cr_expect_str_eq(msg, "forbidden: cannot list pods at the cluster scope (explain "
			      "needs list on nodes, pods, jobs.batch and "
			      "resourceclaims.resource.k8s.io in all namespaces); as a "
			      "tenant, read your quota with: kubectl get gpuquota -n "
			      "YOUR-NAMESPACE");
}
