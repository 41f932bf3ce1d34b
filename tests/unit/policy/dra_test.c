/*
 * What a DRA claim asks for and holds (policy/dra.c), from plain facts: the
 * JSON side is tests/unit/webhook/charge_test.c and review_test.c, the
 * rules and messages tests/unit/policy/decide_test.c.
 */
#include "base/diag.h"
#include "policy/charge.h"
#include "policy/dra.h"
#include "policy/policy.h"
#include "policy/workload.h"
#include "tests/unit/test_policy.h"

#include <criterion/criterion.h>
#include <string.h>

static const char policy_yaml[] =
	"version: 1\n"
	"settings:\n"
	"  gpuDeviceClassNames: [gpu.nvidia.com, mig.nvidia.com, tpu.example.com]\n"
	"flavors:\n"
	"  - {name: h100, resource: nvidia.com/gpu, sharing: exclusive,\n"
	"     gpusPerNode: 8, deviceClassNames: [gpu.nvidia.com, h100.example.com]}\n"
	"  - {name: mig, resource: nvidia.com/mig-1g.10gb, sharing: mig,\n"
	"     gpusPerNode: 56, deviceClassNames: [mig-1g.example.com]}\n"
	"classes: []\n"
	"tenants:\n"
	"  - {name: research, namespaces: [research],\n"
	"     quota: [{flavor: h100, nominal: 8}, {flavor: mig, nominal: 8}]}\n";

static struct policy *P;

static void setup(void)
{
	P = test_policy(policy_yaml);
}

static void teardown(void)
{
	policy_free(P);
}

TestSuite(dra, .init = setup, .fini = teardown);

#define COUNT(n, cls, k) \
	{.name = (n), .device_class = (cls), .mode = WL_ALLOCATE_COUNT, .count = (k)}
#define ALL(n, cls) {.name = (n), .device_class = (cls), .mode = WL_ALLOCATE_ALL, .count = 1}

static struct dra_claim decide(const struct wl_device_request *r, size_t n)
{
	struct dra_claim c;

	dra_decide(P, r, n, &c);
	return c;
}

Test(dra, exact_counts_of_a_mapped_class_are_its_flavors_units)
{
	static const struct wl_device_request r[] = {
		COUNT("a", "gpu.nvidia.com", 2),
		COUNT("b", "h100.example.com", 1),
		COUNT("nic", "nic.example.com", 4),
	};
	struct dra_claim c = decide(r, 3);

	cr_assert(c.gpu);
	cr_assert_str_eq(c.first_gpu.request, "a");
	cr_assert_null(c.first_gpu.subrequest);
	cr_assert_str_eq(c.flavor->name, "h100");
	cr_assert_str_eq(c.device_class, "gpu.nvidia.com");
	cr_assert_eq(c.units, 3, "both classes of h100; the NIC is not a GPU");
	cr_assert_null(c.raw.device_class);
	cr_assert_null(c.all.device_class);
	cr_assert_null(c.two_flavors.device_class);
	cr_assert_null(c.other_flavor);
}

Test(dra, a_claim_of_no_gpu_class_is_none_of_gpugates_business)
{
	static const struct wl_device_request r[] = {
		COUNT("nic", "nic.example.com", 1), ALL("all", "fpga.example.com"),
		{.name = "unset"},
	};
	struct dra_claim c = decide(r, 3);

	cr_assert_not(c.gpu);
	cr_assert_null(c.flavor);
	cr_assert_eq(c.units, 0);
	cr_assert_null(c.all.device_class, "All is a problem on GPU classes only");
	c = decide(NULL, 0);
	cr_assert_not(c.gpu);
}

Test(dra, an_unmapped_gpu_class_is_a_raw_request_and_counts_nothing)
{
	static const struct wl_device_request r[] = {
		COUNT("slice", "mig.nvidia.com", 2),
		COUNT("tpu", "tpu.example.com", 1),
	};
	struct dra_claim c = decide(r, 2);

	cr_assert(c.gpu);
	cr_assert_str_eq(c.raw.device_class, "mig.nvidia.com", "the first one");
	cr_assert_str_eq(c.raw.request, "slice");
	cr_assert_null(c.flavor);
	cr_assert_eq(c.units, 0);
}

Test(dra, all_devices_of_a_gpu_class_is_noted_and_counted_as_the_most_a_claim_holds)
{
	static const struct wl_device_request r[] = {
		COUNT("one", "gpu.nvidia.com", 1),
		ALL("every", "gpu.nvidia.com"),
		ALL("raw", "mig.nvidia.com"),
	};
	struct dra_claim c = decide(r, 3);

	cr_assert_str_eq(c.all.request, "every");
	cr_assert_str_eq(c.all.device_class, "gpu.nvidia.com");
	cr_assert_eq(c.units, 1 + DRA_ALL_DEVICES);
	cr_assert_str_eq(c.raw.request, "raw");
}

Test(dra, first_available_holds_the_largest_of_its_subrequests_of_the_flavor)
{
	static const struct wl_device_request big_or_small[] = {
		COUNT("big", "gpu.nvidia.com", 4), COUNT("small", "h100.example.com", 2),
	};
	static const struct wl_device_request nic_or_gpu[] = {
		COUNT("nic", "nic.example.com", 8), COUNT("gpu", "gpu.nvidia.com", 2),
	};
	const struct wl_device_request r[] = {
		{.name = "train", .first_available = big_or_small, .n_first_available = 2},
		{.name = "maybe", .first_available = nic_or_gpu, .n_first_available = 2},
	};
	struct dra_claim c = decide(r, 2);

	cr_assert_str_eq(c.flavor->name, "h100");
	cr_assert_eq(c.units, 4 + 2, "conservative: the larger alternative of each");
	cr_assert_str_eq(c.first_gpu.request, "train");
	cr_assert_str_eq(c.first_gpu.subrequest, "big");
	cr_assert_null(c.two_flavors.device_class);
}

Test(dra, subrequests_of_two_flavors_are_noted_and_the_second_is_not_counted)
{
	static const struct wl_device_request h100_or_mig[] = {
		COUNT("whole", "gpu.nvidia.com", 1), COUNT("slices", "mig-1g.example.com", 7),
	};
	const struct wl_device_request r[] = {
		{.name = "any", .first_available = h100_or_mig, .n_first_available = 2},
	};
	struct dra_claim c = decide(r, 1);

	cr_assert_str_eq(c.flavor->name, "h100");
	cr_assert_str_eq(c.two_flavors.request, "any");
	cr_assert_str_eq(c.two_flavors.subrequest, "slices");
	cr_assert_str_eq(c.two_flavors.device_class, "mig-1g.example.com");
	cr_assert_str_eq(c.other_flavor->name, "mig");
	cr_assert_eq(c.units, 1);
}

Test(dra, requests_of_two_flavors_count_the_first_flavor_only)
{
	static const struct wl_device_request r[] = {
		COUNT("slices", "mig-1g.example.com", 3),
		COUNT("whole", "gpu.nvidia.com", 2),
		COUNT("again", "h100.example.com", 5),
		COUNT("more", "mig-1g.example.com", 1),
	};
	struct dra_claim c = decide(r, 4);

	cr_assert_str_eq(c.flavor->name, "mig");
	cr_assert_eq(c.units, 3 + 1);
	cr_assert_str_eq(c.two_flavors.request, "whole", "the first of another flavor");
	cr_assert_str_eq(c.other_flavor->name, "h100");
}

Test(dra, hand_made_counts_do_not_wrap)
{
	static const struct wl_device_request r[] = {
		COUNT("a", "gpu.nvidia.com", INT64_MAX), COUNT("b", "gpu.nvidia.com", INT64_MAX),
	};
	struct dra_claim c = decide(r, 2);

	cr_assert_gt(c.units, 1000000);
	cr_assert_eq(c.units, (int64_t)1 << 40);
}

static const struct wl_device_request two_h100[] = {COUNT("gpu", "gpu.nvidia.com", 2)};

static struct workload claim(void)
{
	return (struct workload){
		.kind = WL_CLAIM,
		.namespace = "research",
		.device_requests = two_h100,
		.n_device_requests = 1,
	};
}

Test(dra, a_claim_holds_its_devices_from_creation_until_deletion)
{
	struct workload wl = claim();
	struct charge ch;

	charge_decide(P, &wl, &ch); /* the one charge rule routes claims here */
	cr_assert(ch.active);
	cr_assert_str_eq(ch.tenant->name, "research");
	cr_assert_str_eq(ch.flavor->name, "h100");
	cr_assert_eq(ch.units, 2);
	charge_claim(P, &wl, &ch);
	cr_assert(ch.active && ch.units == 2);
}

Test(dra, templates_claims_outside_tenants_and_unmapped_classes_hold_nothing)
{
	static const struct wl_device_request raw[] = {COUNT("s", "mig.nvidia.com", 2)};
	struct workload wl = claim();
	struct charge ch;

	wl.kind = WL_CLAIM_TEMPLATE;
	charge_decide(P, &wl, &ch);
	cr_assert_null(ch.tenant, "a template holds nothing: its claims do");
	cr_assert_not(ch.active);
	wl = claim();
	wl.namespace = "web";
	charge_decide(P, &wl, &ch);
	cr_assert_null(ch.tenant);
	cr_assert_not(ch.active);
	wl.namespace = NULL;
	charge_decide(P, &wl, &ch);
	cr_assert_null(ch.tenant);
	wl = claim();
	wl.device_requests = raw;
	charge_decide(P, &wl, &ch);
	cr_assert_null(ch.tenant, "no flavor: nothing to charge");
	cr_assert_null(ch.flavor);
	cr_assert_eq(ch.units, 0);
}
