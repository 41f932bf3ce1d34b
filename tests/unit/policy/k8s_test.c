/* Kubernetes name and quantity syntax (policy/k8s.c). */
#include "policy/k8s.h"

#include <criterion/criterion.h>
#include <string.h>

Test(k8s, label_keys)
{
	cr_assert(k8s_qualified_name_valid("nvidia.com/gpu.product"));
	cr_assert(k8s_qualified_name_valid("app"));
	cr_assert(k8s_qualified_name_valid("a.b/C_d-e.F"));
	cr_assert_not(k8s_qualified_name_valid(""));
	cr_assert_not(k8s_qualified_name_valid("a/b/c"));
	cr_assert_not(k8s_qualified_name_valid("/b"));
	cr_assert_not(k8s_qualified_name_valid("a/"));
	cr_assert_not(k8s_qualified_name_valid("Upper.com/x"));
	cr_assert_not(k8s_qualified_name_valid("-a"));
	cr_assert_not(k8s_qualified_name_valid("a b"));
	cr_assert_not(k8s_qualified_name_valid(
		"a234567890123456789012345678901234567890123456789012345678901234"));
}

Test(k8s, label_values)
{
	cr_assert(k8s_label_value_valid(""));
	cr_assert(k8s_label_value_valid("NVIDIA-H100-80GB-HBM3"));
	cr_assert(k8s_label_value_valid("a.b_c-d"));
	cr_assert_not(k8s_label_value_valid("a/b"));
	cr_assert_not(k8s_label_value_valid("-a"));
	cr_assert_not(k8s_label_value_valid("a "));
}

Test(k8s, dns_names)
{
	cr_assert(k8s_dns_label_valid("research-1"));
	cr_assert_not(k8s_dns_label_valid("Research"));
	cr_assert_not(k8s_dns_label_valid("a.b"));
	cr_assert_not(k8s_dns_label_valid(""));
	cr_assert(k8s_dns_subdomain_valid("a.b-c.d"));
	cr_assert_not(k8s_dns_subdomain_valid("a..b"));
	cr_assert_not(k8s_dns_subdomain_valid("a_b"));
}

Test(k8s, subdomain_parts_may_exceed_63_like_the_apiserver)
{
	char name[300];

	/* A 64-character part: no DNS label, but a valid object name. */
	memset(name, 'a', 64);
	name[64] = '\0';
	cr_assert_not(k8s_dns_label_valid(name));
	cr_assert(k8s_dns_subdomain_valid(name));
	memset(name, 'a', 253);
	name[253] = '\0';
	cr_assert(k8s_dns_subdomain_valid(name));
	name[253] = 'a';
	name[254] = '\0';
	cr_assert_not(k8s_dns_subdomain_valid(name), "254 characters");
	/* The same rule for the prefix of a label key. */
	memset(name, 'p', 70);
	strcpy(name + 70, "/key");
	cr_assert(k8s_qualified_name_valid(name));
}

Test(k8s, env_names)
{
	cr_assert(k8s_env_name_valid("GPUGATE_CHECKPOINT_DIR"));
	cr_assert(k8s_env_name_valid("a.b-c"));
	cr_assert_not(k8s_env_name_valid("1A"));
	cr_assert_not(k8s_env_name_valid("A=B"));
	cr_assert_not(k8s_env_name_valid(""));
}

Test(k8s, quantities)
{
	static const char *const good[] = {"8", "500m", "1000Gi", "1e3", "0.5",
					   "+1", "2E-2", "64Mi", "1.5Gi", ".5"};
	static const char *const bad[] = {"", "-1", "1TB", "Gi", "1e", "1.2.3",
					  "eight", "1 Gi", "0x10"};

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		cr_expect(k8s_quantity_valid(good[i]), "%s", good[i]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_not(k8s_quantity_valid(bad[i]), "%s", bad[i]);
}

Test(k8s, whole_quantities)
{
	static const struct {
		const char *s;
		int rc;
		int64_t v;
	} cases[] = {
		{"8", 0, 8},        {"0", 0, 0},         {"2k", 0, 2000},
		{"1e2", 0, 100},    {"2Ki", 0, 2048},    {"1000m", 0, 1},
		{"8.0", 0, 8},      {"1500m", -1, 0},    {"0.5", -1, 0},
		{"1.5Gi", -1, 0},   {"10E", -1, 0},      {"9223372036854775807", 0, INT64_MAX},
		{"9223372036854775808", -1, 0},          {"1e40", -1, 0},
		{"-1", -1, 0},      {"x", -1, 0},        {"8Ei", -1, 0},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int64_t v = -12345;
		int rc = k8s_quantity_whole(cases[i].s, &v);

		cr_expect_eq(rc, cases[i].rc, "%s: rc %d", cases[i].s, rc);
		if (rc == 0)
			cr_expect_eq(v, cases[i].v, "%s: %lld", cases[i].s, (long long)v);
	}
}

Test(k8s, quantities_compare_exactly)
{
	static const struct {
		const char *a, *b;
		int cmp;
	} cases[] = {
		{"81559Mi", "80Gi", -1}, /* 79.6 GiB: an H100's memory as published */
		{"81920Mi", "80Gi", 0},  {"81921Mi", "80Gi", 1},
		{"80Gi", "85899345920", 0}, {"80Gi", "85899345921", -1},
		{"80G", "80Gi", -1},     {"1.5k", "1500", 0},
		{"100m", "0.1", 0},      {"1m", "1000u", 0},
		{"1e3", "1k", 0},        {"1E-3", "1m", 0},
		{"1Ei", "1E", 1},        {"0", "0.000n", 0},
		{"007", "7", 0},         {"+2", "1.999999999999999999999", 1},
		{"1e1000", "1e-1000", 1}, {"999999999999", "1Ti", -1},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int cmp = 99, back = 99;

		cr_assert_eq(k8s_quantity_cmp(cases[i].a, cases[i].b, &cmp), 0,
			     "%s %s", cases[i].a, cases[i].b);
		cr_assert_eq(k8s_quantity_cmp(cases[i].b, cases[i].a, &back), 0);
		cr_expect_eq((cmp > 0) - (cmp < 0), cases[i].cmp, "%s vs %s: %d",
			     cases[i].a, cases[i].b, cmp);
		cr_expect_eq(back, -cmp, "%s vs %s reversed", cases[i].a, cases[i].b);
	}
	{
		int cmp = 99;

		cr_expect_eq(k8s_quantity_cmp("80Gi", "lots", &cmp), -1);
		cr_expect_eq(k8s_quantity_cmp("-1", "1", &cmp), -1);
		cr_expect_eq(cmp, 99, "untouched when not quantities");
	}
}

static const char *nth(void *ctx, size_t i)
{
	return ((const char *const *)ctx)[i];
}

static int sum_cmp(const char *const *terms, size_t n, const char *b)
{
	int cmp = 99;

	cr_assert_eq(k8s_quantity_sum_cmp(n, nth, (void *)terms, b, &cmp), 0,
		     "sum against %s", b);
	return cmp;
}

Test(k8s, quantities_sum_exactly)
{
	const char *const mig[] = {"5Gi", "5Gi", "5Gi", "5Gi", "5Gi", "5Gi", "5Gi", "5Gi"};
	const char *const mixed[] = {"1", NULL, "500m", "0.5", "1e-3"};
	const char *const bad[] = {"1", "lots"};
	int cmp;

	cr_assert_eq(sum_cmp(mig, 8, "40Gi"), 0);
	cr_assert_eq(sum_cmp(mig, 8, "40960Mi"), 0);
	cr_assert_eq(sum_cmp(mig, 8, "42949672959"), 1);
	cr_assert_eq(sum_cmp(mig, 7, "40Gi"), -1);
	cr_assert_eq(sum_cmp(mig, 0, "0"), 0, "no terms sum to 0");
	cr_assert_eq(sum_cmp(mixed, 5, "2001m"), 0, "NULL adds nothing");
	cr_assert_eq(sum_cmp(mixed, 5, "2"), 1);
	cr_assert_eq(sum_cmp(mixed, 5, "2.002"), -1);
	cr_assert_eq(k8s_quantity_sum_cmp(2, nth, (void *)bad, "3", &cmp), -1);
	cr_assert_eq(k8s_quantity_sum_cmp(1, nth, (void *)bad, "x", &cmp), -1);
}

Test(k8s, a_dra_name_without_a_domain_is_the_drivers)
{
	struct k8s_dra_name n;

	k8s_dra_name_split("gpu.nvidia.com", "productName", &n);
	cr_expect_eq(n.domain_len, strlen("gpu.nvidia.com"));
	cr_expect_eq(strncmp(n.domain, "gpu.nvidia.com", n.domain_len), 0);
	cr_expect_str_eq(n.id, "productName");
	k8s_dra_name_split("gpu.nvidia.com", "example.com/rack", &n);
	cr_expect_eq(n.domain_len, strlen("example.com"));
	cr_expect_eq(strncmp(n.domain, "example.com", n.domain_len), 0);
	cr_expect_str_eq(n.id, "rack");
}
