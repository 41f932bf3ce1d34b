/*
 * policy/dra-template.h: the names of the claim templates of DRA flavors,
 * read back, and the CEL selector they carry; and the dra block as the
 * model builds it.
 */
#include "policy/dra-template.h"
#include "policy/policy.h"
#include "tests/unit/test_policy.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static const char POLICY[] =
	"version: 1\n"
	"flavors:\n"
	"  - name: h100-dra\n"
	"    sharing: exclusive\n"
	"    gpusPerNode: 8\n"
	"    dra:\n"
	"      deviceClassName: gpu.nvidia.com\n"
	"      driver: gpu.nvidia.com\n"
	"      attributes: [\"productName=NVIDIA H100 80GB HBM3\", \"example.com/rack=r1\"]\n"
	"      minCapacity: [memory=80Gi]\n"
	"      selectors: [\"device.attributes['gpu.nvidia.com'].brand == 'Nvidia'\"]\n"
	"      tolerations: [{key: example.com/flaky, operator: Exists, effect: NoSchedule}]\n"
	"  - {name: l4, resource: nvidia.com/gpu.shared, sharing: time-slicing, gpusPerNode: 8}\n"
	"classes:\n"
	"  - {name: train, flavor: h100-dra, gpus: 2, maxGpus: 8}\n"
	"  - {name: Big_One, flavor: h100-dra, gpus: 8}\n"
	"  - {name: shared, flavor: l4, gpus: 1}\n"
	"tenants: [{name: t, namespaces: [t], quota: [{flavor: h100-dra, nominal: 16}]}]\n";

Test(dra_template, the_model_keeps_the_block_and_its_hash)
{
	struct policy *p = test_policy(POLICY);
	const struct policy_flavor *f = policy_flavor_find(p, "h100-dra");

	cr_assert_null(f->resource, "a DRA flavor has no extended resource");
	cr_assert_not_null(f->dra);
	cr_assert_str_eq(f->dra->device_class, "gpu.nvidia.com");
	cr_assert_str_eq(f->dra->driver, "gpu.nvidia.com");
	cr_assert_eq(f->dra->n_attributes, 2);
	cr_assert_str_eq(f->dra->attributes[0].key, "productName");
	cr_assert_str_eq(f->dra->attributes[0].value, "NVIDIA H100 80GB HBM3");
	cr_assert_eq(f->dra->n_min_capacity, 1);
	cr_assert_eq(f->dra->n_selectors, 1);
	cr_assert_eq(f->dra->n_tolerations, 1);
	cr_assert_str_eq(f->dra->tolerations[0].op, "Exists");
	cr_assert_eq(strlen(f->dra->hash), 6);
	cr_assert_null(policy_flavor_find(p, "l4")->dra);
	policy_free(p);
}

Test(dra_template, the_hash_follows_the_block_and_nothing_else)
{
	struct policy *a = test_policy(POLICY), *b = test_policy(POLICY), *c;
	char yaml[sizeof(POLICY) + 64], *at;

	cr_assert_str_eq(policy_flavor_find(a, "h100-dra")->dra->hash,
			 policy_flavor_find(b, "h100-dra")->dra->hash, "stable");
	/* Another minimum capacity: another hash. */
	memcpy(yaml, POLICY, sizeof(POLICY));
	at = strstr(yaml, "memory=80Gi");
	memcpy(at, "memory=40Gi", 11);
	c = test_policy(yaml);
	cr_assert_str_neq(policy_flavor_find(a, "h100-dra")->dra->hash,
			  policy_flavor_find(c, "h100-dra")->dra->hash);
	policy_free(c);
	/* Another class count or quota: the same hash. */
	memcpy(yaml, POLICY, sizeof(POLICY));
	at = strstr(yaml, "nominal: 16");
	memcpy(at, "nominal: 24", 11);
	c = test_policy(yaml);
	cr_assert_str_eq(policy_flavor_find(a, "h100-dra")->dra->hash,
			 policy_flavor_find(c, "h100-dra")->dra->hash);
	policy_free(c);
	policy_free(a);
	policy_free(b);
}

Test(dra_template, names_are_made_and_read_back)
{
	struct policy *p = test_policy(POLICY);
	const struct policy_class *train = policy_class_find(p, "train");
	const struct policy_class *big = policy_class_find(p, "Big_One");
	const char *hash = train->flavor->dra->hash;
	char name[DRA_TEMPLATE_NAME_MAX], want[DRA_TEMPLATE_NAME_MAX];
	unsigned count;
	bool current;

	cr_assert(dra_template_name(train, 4, name, sizeof(name)));
	snprintf(want, sizeof(want), "gpugate.train.4.%s", hash);
	cr_assert_str_eq(name, want);
	cr_assert_eq(dra_template_parse(p, name, &count, &current), train);
	cr_assert_eq(count, 4);
	cr_assert(current);
	/* A class name that is no DNS label: its hash stands for it. */
	cr_assert(dra_template_name(big, 8, name, sizeof(name)));
	cr_assert(strncmp(name, "gpugate.c-", 10) == 0, "%s", name);
	cr_assert_eq(strlen(name), strlen("gpugate.c-") + 12 + strlen(".8.") + 6, "%s", name);
	cr_assert_eq(dra_template_parse(p, name, &count, &current), big);
	cr_assert_eq(count, 8);
	/* Not a DRA class. */
	cr_assert_not(dra_template_name(policy_class_find(p, "shared"), 1, name,
					sizeof(name)));
	policy_free(p);
}

Test(dra_template, a_name_not_of_gpugates_form_stands_for_nothing)
{
	struct policy *p = test_policy(POLICY);
	const char *hash = policy_flavor_find(p, "h100-dra")->dra->hash;
	char name[128];
	unsigned count;
	bool current;
	static const char *const bad[] = {
		"train.4.%s",          /* no prefix */
		"gpugate.train.9.%s",  /* beyond maxGpus */
		"gpugate.train.1.%s",  /* below gpus */
		"gpugate.train.04.%s", /* not how gpugate writes 4 */
		"gpugate.train.4x.%s",
		"gpugate.shared.1.%s", /* not a DRA class */
		"gpugate.nope.4.%s",
		"gpugate.train.%s",
		"gpugate.4.%s",
		"gpugate.train.99999999999999999999.%s",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(name, sizeof(name), bad[i], hash);
		cr_assert_null(dra_template_parse(p, name, &count, &current), "%s", name);
		cr_assert_eq(count, 0);
	}
	/* An earlier block's hash: the class and count, not current. */
	cr_assert_not_null(dra_template_parse(p, "gpugate.train.4.aaaaaa", &count, &current));
	cr_assert_not(current);
	cr_assert(dra_template_is_gpugates("gpugate.anything"));
	cr_assert_not(dra_template_is_gpugates("my-template"));
	policy_free(p);
}

Test(dra_template, the_selector_is_one_cel_expression_of_the_block)
{
	struct policy *p = test_policy(POLICY);
	char cel[DRA_TEMPLATE_CEL_MAX];
	int n = dra_template_cel(policy_flavor_find(p, "h100-dra")->dra, cel, sizeof(cel));

	cr_assert_gt(n, 0);
	cr_assert_str_eq(cel,
			 "device.driver == 'gpu.nvidia.com' && "
			 "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3' && "
			 "device.attributes['example.com'].rack == 'r1' && "
			 "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0");
	cr_assert_eq((size_t)n, strlen(cel));
	cr_assert_eq(dra_template_cel(policy_flavor_find(p, "h100-dra")->dra, cel, 40), -1,
		     "too small: refused, not cut");
	policy_free(p);
}

/* ---- a flavor shared by capacity (dra.sharedCapacity) -------------------- */

static const char SHARED[] =
	"version: 1\n"
	"flavors:\n"
	"  - name: l40s-share\n"
	"    sharing: time-slicing\n"
	"    gpusPerNode: 32\n"
	"    dra:\n"
	"      deviceClassName: gpu.nvidia.com\n"
	"      driver: gpu.nvidia.com\n"
	"      attributes: [\"productName=NVIDIA L40S\"]\n"
	"      sharedCapacity: {name: memory, perUnit: 12Gi, unitsPerDevice: 4}\n"
	"classes:\n"
	"  - {name: notebook, flavor: l40s-share, gpus: 1, maxGpus: 4}\n"
	"tenants: [{name: t, namespaces: [t], quota: [{flavor: l40s-share, nominal: 8}]}]\n";

Test(dra_template, a_shared_flavor_asks_for_devices_that_allow_several_allocations)
{
	struct policy *p = test_policy(SHARED), *whole;
	const struct policy_dra *d = policy_flavor_find(p, "l40s-share")->dra;
	char cel[DRA_TEMPLATE_CEL_MAX], yaml[sizeof(SHARED)], *at;

	cr_assert_not_null(d->shared);
	cr_assert_str_eq(d->shared->name, "memory");
	cr_assert_str_eq(d->shared->per_unit, "12Gi");
	cr_assert_eq(d->shared->per_unit_value, 12LL << 30);
	cr_assert_eq(d->shared->units_per_device, 4);
	cr_assert_str_eq(policy_flavor_find(p, "l40s-share")->units,
			 "shares of 12Gi gpu.nvidia.com memory", "what messages call its units");
	cr_assert_gt(dra_template_cel(d, cel, sizeof(cel)), 0);
	cr_assert_str_eq(cel,
			 "device.driver == 'gpu.nvidia.com' && "
			 "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA L40S' && "
			 "device.allowMultipleAllocations");
	/* The same block for whole devices: another hash (the templates ask
	 * for other things), and no sharing in the selector. */
	memcpy(yaml, SHARED, sizeof(SHARED));
	at = strstr(yaml, "      sharedCapacity");
	memmove(at, strchr(at, '\n') + 1, strlen(strchr(at, '\n') + 1) + 1);
	at = strstr(yaml, "time-slicing");
	memcpy(at, "exclusive\n", 10);
	memmove(at + 10, at + 13, strlen(at + 13) + 1);
	whole = test_policy(yaml);
	cr_assert_null(policy_flavor_find(whole, "l40s-share")->dra->shared);
	cr_assert_str_neq(policy_flavor_find(whole, "l40s-share")->dra->hash, d->hash);
	dra_template_cel(policy_flavor_find(whole, "l40s-share")->dra, cel, sizeof(cel));
	cr_assert_null(strstr(cel, "allowMultipleAllocations"), "%s", cel);
	policy_free(whole);
	policy_free(p);
}

Test(dra_template, a_share_is_units_times_per_unit_in_the_admins_unit)
{
	struct policy_dra_share sh = {.name = "memory", .per_unit = "12Gi",
				      .per_unit_value = 12LL << 30, .units_per_device = 4};
	char q[32];

	cr_assert_eq(dra_share_quantity(&sh, 3, q, sizeof(q)), 4);
	cr_assert_str_eq(q, "36Gi");
	sh.per_unit = "1500";
	sh.per_unit_value = 1500;
	dra_share_quantity(&sh, 2, q, sizeof(q));
	cr_assert_str_eq(q, "3000");
	/* not a plain mantissa: the value */
	sh.per_unit = "1.5Gi";
	sh.per_unit_value = 1610612736;
	dra_share_quantity(&sh, 2, q, sizeof(q));
	cr_assert_str_eq(q, "3221225472");
	sh.per_unit = "2e9";
	sh.per_unit_value = 2000000000;
	dra_share_quantity(&sh, 3, q, sizeof(q));
	cr_assert_str_eq(q, "6000000000");
	cr_assert_eq(dra_share_quantity(&sh, 3, q, 4), -1, "too small: refused, not cut");
	sh.per_unit_value = INT64_MAX / 2;
	cr_assert_eq(dra_share_quantity(&sh, 3, q, sizeof(q)), -1, "overflow");
}
