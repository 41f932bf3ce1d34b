/*
 * controllers/claim-sync.c: the checkpoint claim gpugate creates, and
 * policy_checkpoint_claim(), the one rule for its name that admission and
 * the controller share.
 */
#include "policy/policy.h"
#include "tests/unit/test_policy.h"
#include "controllers/claim-sync.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#define HEAD                                                                  \
	"version: 1\nflavors: []\nclasses: []\n"                              \
	"tenants:\n  - {name: research, namespaces: [research, \"research-*\"]}\n"

static json_t *parse(const char *json)
{
	json_error_t e;
	json_t *v = json_loads(json, 0, &e);

	cr_assert_not_null(v, "bad test JSON: %s", e.text);
	return v;
}

static void expect_object(const char *yaml, const char *want)
{
	struct policy *p = test_policy(yaml);
	json_t *got = claim_sync_object(p, "research-a", "research-checkpoints");
	json_t *exp = parse(want);
	char *dump = json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS);

	cr_assert(json_equal(got, exp), "got %s", dump);
	free(dump);
	json_decref(exp);
	json_decref(got);
	policy_free(p);
}

Test(claim_sync, the_claim_with_the_defaults)
{
	expect_object(HEAD "checkpoint:\n  claimName: \"{tenant}-checkpoints\"\n"
			   "  claim: {create: true}\n",
		      "{\"apiVersion\":\"v1\",\"kind\":\"PersistentVolumeClaim\","
		      "\"metadata\":{\"name\":\"research-checkpoints\",\"namespace\":"
		      "\"research-a\",\"labels\":{\"app.kubernetes.io/managed-by\":"
		      "\"gpugate\"}},\"spec\":{\"accessModes\":[\"ReadWriteMany\"],"
		      "\"resources\":{\"requests\":{\"storage\":\"10Gi\"}}}}");
}

Test(claim_sync, the_claim_as_the_policy_says)
{
	expect_object(HEAD "checkpoint:\n  claimName: \"{tenant}-checkpoints\"\n"
			   "  claim: {create: true, storageClassName: nfs, size: 1Ti,\n"
			   "          accessModes: [ReadWriteOnce, ReadWriteOncePod]}\n",
		      "{\"apiVersion\":\"v1\",\"kind\":\"PersistentVolumeClaim\","
		      "\"metadata\":{\"name\":\"research-checkpoints\",\"namespace\":"
		      "\"research-a\",\"labels\":{\"app.kubernetes.io/managed-by\":"
		      "\"gpugate\"}},\"spec\":{\"accessModes\":[\"ReadWriteOnce\","
		      "\"ReadWriteOncePod\"],\"storageClassName\":\"nfs\",\"resources\":"
		      "{\"requests\":{\"storage\":\"1Ti\"}}}}");
	/* "": no StorageClass at all (a PersistentVolume made for it). */
	expect_object(HEAD "checkpoint:\n  claimName: \"{tenant}-checkpoints\"\n"
			   "  claim: {storageClassName: \"\"}\n",
		      "{\"apiVersion\":\"v1\",\"kind\":\"PersistentVolumeClaim\","
		      "\"metadata\":{\"name\":\"research-checkpoints\",\"namespace\":"
		      "\"research-a\",\"labels\":{\"app.kubernetes.io/managed-by\":"
		      "\"gpugate\"}},\"spec\":{\"accessModes\":[\"ReadWriteMany\"],"
		      "\"storageClassName\":\"\",\"resources\":{\"requests\":{\"storage\":"
		      "\"10Gi\"}}}}");
}

Test(claim_sync, one_name_for_admission_and_the_controller)
{
	struct policy *p = test_policy(HEAD "checkpoint:\n  claimName: \"{namespace}.{tenant}\"\n");
	const struct policy_tenant *t = policy_tenant_find(p, "research");
	char name[254], ns[251];

	cr_assert_eq(policy_checkpoint_claim(p, t, "research-a", name, sizeof(name)),
		     POLICY_CLAIM_OK);
	cr_assert_str_eq(name, "research-a.research");
	/* A namespace no apiserver sends: no name (explain -n may). */
	cr_assert_eq(policy_checkpoint_claim(p, t, "Team_A", name, sizeof(name)),
		     POLICY_CLAIM_INVALID);
	cr_assert_str_eq(name, "");
	memset(ns, 'a', 250);
	ns[250] = '\0';
	cr_assert_eq(policy_checkpoint_claim(p, t, ns, name, sizeof(name)),
		     POLICY_CLAIM_TOO_LONG);
	cr_assert_str_eq(name, "");
	policy_free(p);
	p = test_policy(HEAD);
	cr_assert_eq(policy_checkpoint_claim(p, policy_tenant_find(p, "research"),
					     "research", name, sizeof(name)),
		     POLICY_CLAIM_NONE, "no claimName: an emptyDir, nothing to create");
	policy_free(p);
}
