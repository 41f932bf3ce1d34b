#include "tests/unit/test_policy.h"

#include "base/diag.h"
#include "policy/policy.h"

#include <criterion/criterion.h>
#include <string.h>

struct policy *test_policy(const char *yaml)
{
	struct policy *p = NULL;
	struct diag d;

	diag_init(&d);
	cr_assert_eq(policy_parse("t.yaml", yaml, strlen(yaml), &p, &d), 0, "%s",
		     diag_text(&d));
	return p;
}

struct policy *test_policy_file(const char *path)
{
	struct policy *p = NULL;
	struct diag d;

	diag_init(&d);
	cr_assert_eq(policy_load(path, &p, &d), 0, "%s: %s", path, diag_text(&d));
	return p;
}
