/* Records for the tests of the reservation document (test_resv.h). */
#include "tests/unit/usage/test_resv.h"

#include "base/diag.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

const char *test_resv_first(const struct diag *d)
{
	static char line[1024];

	diag_first(d, line, sizeof(line));
	return line;
}

struct resv test_resv_record(const char *uid, enum usage_kind kind,
			     const char *tenant, const char *flavor,
			     int64_t per_pod, int64_t slots, int64_t at_ms)
{
	struct resv r;

	memset(&r, 0, sizeof(r));
	snprintf(r.uid, sizeof(r.uid), "%s", uid);
	r.kind = kind;
	snprintf(r.namespace, sizeof(r.namespace), "ns-%s", tenant);
	snprintf(r.name, sizeof(r.name), "obj-%s", uid);
	snprintf(r.tenant, sizeof(r.tenant), "%s", tenant);
	snprintf(r.flavor, sizeof(r.flavor), "%s", flavor);
	snprintf(r.replica, sizeof(r.replica), "gpugate-7d9-x");
	r.per_pod = per_pod;
	r.slots = slots;
	r.generation = 1;
	r.at_ms = at_ms;
	return r;
}

void test_resv_add(struct resv_doc *doc, const struct resv *r)
{
	struct diag d;

	diag_init(&d);
	cr_assert_geq(resv_doc_add(doc, r, &d), 0, "%s", diag_text(&d));
}
