/* cluster-check: a valid policy held against what a cluster has. */
#include "policy/cluster-check.h"

#include "base/diag.h"
#include "policy/policy.h"

#include <stdbool.h>
#include <string.h>

static bool listed(const char *name, const char *const *names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (names[i] && strcmp(names[i], name) == 0)
			return true;
	return false;
}

unsigned cluster_check_priority_classes(const struct policy *p,
					const char *const *names, size_t n,
					struct diag *w)
{
	unsigned found = 0;

	for (size_t i = 0; i < policy_class_count(p); i++) {
		const struct policy_class *c = policy_class_at(p, i);

		if (!c->priority_class_name || listed(c->priority_class_name, names, n))
			continue;
		diag_addf(w, "%s: warning: class \"%s\": PriorityClass \"%s\" does not "
			     "exist in the cluster, and the apiserver refuses pods that "
			     "name it; create it (docs/operations.md, \"PriorityClasses\") "
			     "or remove priorityClassName from the class",
			  policy_source(p), c->name, c->priority_class_name);
		found++;
	}
	return found;
}
