/*
 * The reservation document of a quota domain as values
 * (usage/reservations.c): the records, the operations, what a record
 * counts for and the domain's name.
 */
#include "base/diag.h"
#include "policy/k8s.h"
#include "tests/unit/usage/test_resv.h"
#include "usage/reservations.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- records ------------------------------------------------------------- */

Test(reservations, add_replaces_a_retried_uid_and_remove_removes)
{
	struct resv_doc doc;
	struct resv r;
	struct diag d;

	resv_doc_init(&doc);
	diag_init(&d);
	r = test_resv_record("u1", USAGE_PODS, "a", "f", 1, 1, 10);
	cr_expect_eq(resv_doc_add(&doc, &r, &d), 0);
	r = test_resv_record("u0", USAGE_PODS, "a", "f", 1, 1, 10);
	cr_expect_eq(resv_doc_add(&doc, &r, &d), 0);
	r = test_resv_record("u1", USAGE_PODS, "a", "f", 3, 1, 20);
	cr_expect_eq(resv_doc_add(&doc, &r, &d), 1);
	cr_expect_eq(doc.n, 2);
	cr_expect_eq(resv_doc_find(&doc, "u1")->per_pod, 3);
	cr_expect_eq(resv_doc_find(&doc, "u1")->at_ms, 20);
	cr_expect(resv_doc_remove(&doc, "u0"));
	cr_expect_not(resv_doc_remove(&doc, "u0"));
	cr_expect_not(resv_doc_remove(&doc, "zz"));
	cr_expect_eq(doc.n, 1);
	cr_expect_null(resv_doc_find(&doc, "u0"));
	cr_expect(resv_doc_remove(&doc, "u1"));
	cr_expect_eq(doc.n, 0);
	cr_expect_eq(diag_count(&d), 0);
	resv_doc_release(&doc);
}

Test(reservations, equal_compares_every_member)
{
	struct resv a = test_resv_record("u", USAGE_JOBS, "t", "f", 2, 3, 9), b = a;

	cr_expect(resv_equal(&a, &b));
	b.generation++;
	cr_expect_not(resv_equal(&a, &b));
	b = a;
	snprintf(b.replica, sizeof(b.replica), "other");
	cr_expect_not(resv_equal(&a, &b));
	b = a;
	b.kind = USAGE_PODS;
	cr_expect_not(resv_equal(&a, &b));
}

Test(reservations, add_refuses_a_record_the_decoder_would_refuse)
{
	struct resv_doc doc;
	struct resv r;
	struct diag d;

	resv_doc_init(&doc);
	diag_init(&d);
	r = test_resv_record("u", USAGE_PODS, "a", "f", 1, 2, 0);
	cr_expect_eq(resv_doc_add(&doc, &r, &d), -1);
	r = test_resv_record("u", USAGE_PODS, "a", "f", 0, 1, 0);
	cr_expect_eq(resv_doc_add(&doc, &r, &d), -1);
	r = test_resv_record("u", USAGE_PODS, "", "f", 1, 1, 0);
	cr_expect_eq(resv_doc_add(&doc, &r, &d), -1);
	r = test_resv_record("u", USAGE_PODS, "a", "f", 1, 1, 0);
	memset(r.flavor, 'x', sizeof(r.flavor)); /* not terminated */
	cr_expect_eq(resv_doc_add(&doc, &r, &d), -1);
	r = test_resv_record("u", USAGE_PODS, "a", "f", 1, 1, 0);
	r.kind = USAGE_KINDS;
	cr_expect_eq(resv_doc_add(&doc, &r, &d), -1);
	r = test_resv_record("u", USAGE_PODS, "a", "f\x01", 1, 1, 0);
	cr_expect_eq(resv_doc_add(&doc, &r, &d), -1);
	r = test_resv_record("", USAGE_PODS, "a", "f", 1, 1, 0);
	cr_expect_eq(resv_doc_add(&doc, &r, &d), -1);
	cr_expect_str_eq(diag_text(&d),
			 "reservation \"u\": \"slots\": must be 1 for a pod\n"
			 "reservation \"u\": \"perPod\": must be an integer from 1 to 1000000\n"
			 "reservation \"u\": \"tenant\": empty\n"
			 "reservation \"u\": \"flavor\": not terminated within 63 bytes\n"
			 "reservation \"u\": \"kind\": not pod, job or claim\n"
			 "reservation \"u\": \"flavor\": holds a control character or is not UTF-8\n"
			 "reservation: \"uid\": empty\n");
	cr_expect_eq(doc.n, 0);
	resv_doc_release(&doc);
}

Test(reservations, add_refuses_past_resv_max_but_still_replaces)
{
	struct resv_doc doc;
	struct resv r;
	struct diag d;
	char uid[16];

	resv_doc_init(&doc);
	diag_init(&d);
	for (size_t i = 0; i < RESV_MAX; i++) {
		snprintf(uid, sizeof(uid), "u%zu", i);
		r = test_resv_record(uid, USAGE_PODS, "a", "f", 1, 1, 0);
		cr_assert_eq(resv_doc_add(&doc, &r, &d), 0);
	}
	r = test_resv_record("one-more", USAGE_PODS, "a", "f", 1, 1, 0);
	cr_expect_eq(resv_doc_add(&doc, &r, &d), -1);
	cr_expect_str_eq(test_resv_first(&d),
			 "reservations: 3000 pending in this quota domain, the most it holds");
	r = test_resv_record("u7", USAGE_PODS, "a", "f", 2, 1, 0);
	cr_expect_eq(resv_doc_add(&doc, &r, NULL), 1);
	cr_expect_eq(doc.n, RESV_MAX);
	cr_expect_leq(doc.cap, RESV_MAX);
	for (size_t i = 1; i < doc.n; i++)
		cr_assert_lt(strcmp(doc.items[i - 1].uid, doc.items[i].uid), 0);
	resv_doc_release(&doc);
}

Test(reservations, set_copies_a_usage_item_within_the_limits)
{
	struct usage_item it = {
		.uid = "uid-1", .kind = USAGE_JOBS, .namespace = "ns", .name = "train",
		.tenant = "a", .flavor = "h100", .per_pod = 8, .slots = 4, .units = 32,
		.active = true, .owner_job_uid = NULL, .generation = 2,
	};
	char long_name[300];
	struct resv r;
	struct diag d;

	diag_init(&d);
	cr_assert_eq(resv_set(&r, &it, "gpugate-0", 99, &d), 0, "%s", diag_text(&d));
	cr_expect_str_eq(r.uid, "uid-1");
	cr_expect_eq(r.kind, USAGE_JOBS);
	cr_expect_str_eq(r.owner_job, "");
	cr_expect_str_eq(r.replica, "gpugate-0");
	cr_expect_eq(r.at_ms, 99);
	cr_expect_eq(resv_units(&r), 32);
	memset(long_name, 'n', 254);
	long_name[254] = '\0';
	it.name = long_name;
	cr_expect_eq(resv_set(&r, &it, "gpugate-0", 99, &d), -1);
	it.name = "train";
	cr_expect_eq(resv_set(&r, &it, NULL, 99, &d), -1);
	it.slots = 0;
	cr_expect_eq(resv_set(&r, &it, "gpugate-0", 99, &d), -1);
	cr_expect_str_eq(diag_text(&d),
			 "reservation \"uid-1\": \"name\": longer than 253 bytes\n"
			 "reservation \"uid-1\": \"replica\": empty\n"
			 "reservation \"uid-1\": \"slots\": must be an integer from 1 to 1000000\n");
}

/* ---- the leader's clean-up ----------------------------------------------- */

struct seen {
	const char *uid;
	uint64_t since;
};

static bool observed_since(void *ctx, const char *uid, uint64_t *since)
{
	for (const struct seen *s = ctx; s->uid; s++)
		if (strcmp(s->uid, uid) == 0) {
			*since = s->since;
			return true;
		}
	return false;
}

Test(reservations, prune_removes_observed_after_grace_and_unobserved_after_ttl)
{
	/* now 100000, grace 5000, ttl 60000 */
	static const struct seen seen[] = {
		{"obs-long", 90000},     /* observed 10 s: gone */
		{"obs-exact", 95000},    /* observed exactly 5 s: gone */
		{"obs-short", 96000},    /* observed 4 s: kept */
		{"obs-future", 200000},  /* observed "later": kept */
		{"obs-old", 99000},      /* old, but observed 1 s: kept */
		{NULL, 0},
	};
	static const struct {
		const char *uid;
		int64_t at;
		bool kept;
	} recs[] = {
		{"obs-long", 89000, false},   {"obs-exact", 94000, false},
		{"obs-short", 95000, true},   {"obs-future", 99000, true},
		{"obs-old", 1000, true},      {"new", 99000, true},
		{"ttl-exact", 40000, true},   /* 60 s old: not older than the TTL */
		{"ttl-past", 39999, false},   {"ancient", 0, false},
		{"clock-ahead", 500000, true},
	};
	struct resv_doc doc;
	struct resv r;

	resv_doc_init(&doc);
	for (size_t i = 0; i < sizeof(recs) / sizeof(recs[0]); i++) {
		r = test_resv_record(recs[i].uid, USAGE_PODS, "a", "f", 1, 1, recs[i].at);
		test_resv_add(&doc, &r);
	}
	cr_expect_eq(resv_doc_prune(&doc, observed_since, (void *)seen, 100000, 5000,
				    60000),
		     4);
	for (size_t i = 0; i < sizeof(recs) / sizeof(recs[0]); i++)
		cr_expect_eq(resv_doc_find(&doc, recs[i].uid) != NULL, recs[i].kept,
			     "%s", recs[i].uid);
	for (size_t i = 1; i < doc.n; i++)
		cr_assert_lt(strcmp(doc.items[i - 1].uid, doc.items[i].uid), 0);
	/* Nothing else to do a moment later. */
	cr_expect_eq(resv_doc_prune(&doc, observed_since, (void *)seen, 100000, 5000,
				    60000),
		     0);
	/* Without a watch nothing is observed: only the TTL removes. */
	cr_expect_eq(resv_doc_prune(&doc, NULL, NULL, 158000, 5000, 60000), 3);
	cr_expect_eq(doc.n, 3);
	cr_expect_not_null(resv_doc_find(&doc, "obs-future"));
	cr_expect_not_null(resv_doc_find(&doc, "new"));
	cr_expect_not_null(resv_doc_find(&doc, "clock-ahead"));
	resv_doc_release(&doc);
}

/* ---- sums ---------------------------------------------------------------- */

static bool counted_by_name(void *ctx, const struct resv *r)
{
	const char *const *uids = ctx;

	for (; *uids; uids++)
		if (strcmp(*uids, r->uid) == 0)
			return true;
	return false;
}

Test(reservations, sum_adds_the_records_the_caller_does_not_count)
{
	static const char *const counted[] = {"p-seen", "pod-rides", NULL};
	static const struct {
		const char *uid, *tenant, *flavor, *owner_job;
		enum usage_kind kind;
		int64_t per_pod, slots;
	} recs[] = {
		{"p1", "a", "h100", "", USAGE_PODS, 2, 1},
		{"p-seen", "a", "h100", "", USAGE_PODS, 5, 1},
		{"job", "a", "h100", "", USAGE_JOBS, 8, 3},
		{"pod-rides", "a", "h100", "job", USAGE_PODS, 8, 1},
		{"claim", "a", "h100", "", USAGE_CLAIMS, 3, 1},
		{"other-flavor", "a", "a100", "", USAGE_PODS, 100, 1},
		{"other-tenant", "b", "h100", "", USAGE_PODS, 1000, 1},
	};
	struct resv_doc doc;
	struct resv r;

	resv_doc_init(&doc);
	for (size_t i = 0; i < sizeof(recs) / sizeof(recs[0]); i++) {
		r = test_resv_record(recs[i].uid, recs[i].kind, recs[i].tenant, recs[i].flavor,
			   recs[i].per_pod, recs[i].slots, 0);
		snprintf(r.owner_job, sizeof(r.owner_job), "%s", recs[i].owner_job);
		test_resv_add(&doc, &r);
	}
	cr_expect_eq(resv_doc_sum(&doc, "a", "h100", counted_by_name, (void *)counted),
		     2 + 24 + 3);
	cr_expect_eq(resv_doc_sum(&doc, "a", "h100", NULL, NULL), 2 + 5 + 24 + 8 + 3);
	cr_expect_eq(resv_doc_sum(&doc, "a", "a100", NULL, NULL), 100);
	cr_expect_eq(resv_doc_sum(&doc, "b", "h100", NULL, NULL), 1000);
	cr_expect_eq(resv_doc_sum(&doc, "c", "h100", NULL, NULL), 0);
	resv_doc_release(&doc);
}

Test(reservations, sum_of_a_full_document_at_the_limits_does_not_overflow)
{
	struct resv_doc doc;
	struct resv r;
	char uid[16];

	resv_doc_init(&doc);
	for (size_t i = 0; i < RESV_MAX; i++) {
		snprintf(uid, sizeof(uid), "j%zu", i);
		r = test_resv_record(uid, USAGE_JOBS, "a", "f", RESV_UNITS_MAX, RESV_UNITS_MAX, 0);
		test_resv_add(&doc, &r);
	}
	cr_expect_eq(resv_doc_sum(&doc, "a", "f", NULL, NULL),
		     (int64_t)RESV_MAX * RESV_UNITS_MAX * RESV_UNITS_MAX);
	resv_doc_release(&doc);
}

/* ---- the ConfigMap of a domain ------------------------------------------- */

static void name_of(const char *cohort, const char *tenant, char *out)
{
	int n = resv_domain_name(cohort, tenant, out, RESV_DOMAIN_NAME_SIZE);

	cr_assert_geq(n, 0);
	cr_assert_eq((size_t)n, strlen(out));
	cr_assert(k8s_dns_subdomain_valid(out), "not a subdomain: \"%s\" (from %s/%s)",
		  out, cohort ? cohort : "-", tenant ? tenant : "-");
}

Test(reservations, domain_names_of_valid_names_are_the_names)
{
	char out[RESV_DOMAIN_NAME_SIZE];

	name_of("research", "team-a", out);
	cr_expect_str_eq(out, "gpugate-usage-c-research");
	name_of(NULL, "team-a", out);
	cr_expect_str_eq(out, "gpugate-usage-t-team-a");
	name_of(NULL, "a.b-9", out);
	cr_expect_str_eq(out, "gpugate-usage-t-a.b-9");
	name_of(NULL, "0", out);
	cr_expect_str_eq(out, "gpugate-usage-t-0");
}

Test(reservations, domain_names_that_had_to_change_are_hashed)
{
	char out[RESV_DOMAIN_NAME_SIZE], lower[RESV_DOMAIN_NAME_SIZE];

	name_of(NULL, "Team_A", out);
	cr_expect_eq(strncmp(out, "gpugate-usage-t-team-a-", 23), 0, "%s", out);
	cr_expect_eq(strlen(out), 23 + 16);
	name_of(NULL, "team-a", lower);
	cr_expect_str_neq(out, lower);
	/* Upper case alone is a change: label values are case-sensitive. */
	name_of(NULL, "Team-a", lower);
	cr_expect_str_neq(out, lower);
	cr_expect_eq(strncmp(lower, "gpugate-usage-t-team-a-", 23), 0, "%s", lower);
	/* A name that looks hashed is hashed again. */
	name_of(NULL, "x-0123456789abcdef", out);
	cr_expect_eq(strncmp(out, "gpugate-usage-t-x-0123456789abcdef-", 35), 0, "%s", out);
	name_of(NULL, "x-0123456789abcdeg", out);
	cr_expect_str_eq(out, "gpugate-usage-t-x-0123456789abcdeg");
	name_of(NULL, "", out);
	cr_expect_eq(strncmp(out, "gpugate-usage-t--", 17), 0, "%s", out);
	name_of(NULL, NULL, lower);
	cr_expect_str_eq(out, lower);
}

Test(reservations, domain_names_are_subdomains_and_never_collide)
{
	static const char *const odd[] = {
		"", ".", "..", "-", "a.", ".a", "a..b", "a.-b", "a-.b", "A", "a",
		"_", "__", "a_b", "a-b", "a.b", "A.B", "ä", "é.x", "\x7f", " ",
		"a b", "a/b", "a:b", "tenant.", "-tenant", "tenant-", "x.y.z",
		"x..", "..x", "UPPER", "upper", "0123456789abcdef", "a-0123456789abcdef",
		"-0123456789abcdef", "a.0123456789abcdef", "\xff\xfe", "a\tb",
	};
	enum { N_ODD = sizeof(odd) / sizeof(odd[0]) };
	static char names[2 * (N_ODD + 8)][RESV_DOMAIN_NAME_SIZE];
	size_t n = 0;
	char buf[600];

	for (size_t i = 0; i < N_ODD; i++) {
		name_of(odd[i], "t", names[n++]);
		name_of(NULL, odd[i], names[n++]);
	}
	/* Long names, cut at every interesting place. */
	for (size_t len = 235; len < 243; len++) {
		memset(buf, 'a', len);
		buf[len] = '\0';
		buf[len - 4] = '.';
		if (len % 2)
			buf[len - 20] = '.';
		name_of(NULL, buf, names[n++]);
		memset(buf, '.', len);
		buf[len] = '\0';
		name_of(buf, NULL, names[n++]);
	}
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			cr_expect_str_neq(names[i], names[j], "%zu and %zu", i, j);
}

Test(reservations, domain_names_of_every_length_are_subdomains)
{
	char raw[600], out[RESV_DOMAIN_NAME_SIZE], prev[RESV_DOMAIN_NAME_SIZE] = "";
	static const char fill[] = "aZ.-_9.é";

	for (size_t len = 0; len < 560; len++) {
		for (size_t k = 0; k < len; k++)
			raw[k] = len % 3 ? 'a' : fill[(k * 7 + len) % (sizeof(fill) - 1)];
		raw[len] = '\0';
		name_of(raw, NULL, out);
		cr_expect_leq(strlen(out), 253);
		cr_expect_str_neq(out, prev);
		memcpy(prev, out, sizeof(out));
	}
	/* 237 bytes of valid name: 253 in all, kept; one more: hashed. */
	memset(raw, 'a', 237);
	raw[237] = '\0';
	name_of(NULL, raw, out);
	cr_expect_eq(strlen(out), 253);
	cr_expect_eq(strncmp(out + 16, raw, 237), 0);
	raw[237] = 'a';
	raw[238] = '\0';
	name_of(NULL, raw, out);
	cr_expect_eq(strlen(out), 253);
	cr_expect_eq(out[236], '-');
}

Test(reservations, domain_name_needs_room_for_any_name)
{
	char out[RESV_DOMAIN_NAME_SIZE - 1] = "x";

	cr_expect_eq(resv_domain_name(NULL, "a", out, sizeof(out)), -1);
	cr_expect_str_eq(out, "");
	cr_expect_eq(resv_domain_name(NULL, "a", NULL, 0), -1);
}

/* ---- the verdict on a record (issue #26) --------------------------------- */

Test(reservations, judge_says_what_a_record_counts_for)
{
	/* now 100000, grace 5000, ttl 60000; the record: generation 2, made
	 * at 97000 unless said. */
	static const struct {
		const char *what;
		struct resv_sight s;
		int64_t at;
		enum resv_verdict want;
		bool prune;
	} cases[] = {
		{"never shown, just made", {0}, 97000, RESV_PENDING, false},
		{"never shown, past the TTL", {0}, 39999, RESV_VOID, true},
		{"shown at its generation, active, 1 s",
		 {.shown = true, .active = true, .generation = 2, .since_ms = 99000}, 97000,
		 RESV_SHOWN, false},
		{"shown at its generation, active, 5 s",
		 {.shown = true, .active = true, .generation = 2, .since_ms = 95000}, 94000,
		 RESV_SHOWN, true},
		{"shown newer, active",
		 {.shown = true, .active = true, .generation = 3, .since_ms = 99000}, 97000,
		 RESV_SHOWN, false},
		{"shown finished at its generation",
		 {.shown = true, .generation = 2, .since_ms = 99000}, 97000, RESV_VOID, false},
		{"shown suspended at an older generation (a resume)",
		 {.shown = true, .generation = 1, .since_ms = 10000}, 97000, RESV_PENDING, false},
		{"shown running at an older generation (an update)",
		 {.shown = true, .active = true, .generation = 1, .since_ms = 10000}, 97000,
		 RESV_PENDING, false},
		{"a resume never shown, past the TTL",
		 {.shown = true, .generation = 1, .since_ms = 10000}, 30000, RESV_VOID, true},
		{"gone", {.shown = true, .gone = true, .generation = 2, .since_ms = 99999},
		 97000, RESV_VOID, true},
		{"gone at an older generation",
		 {.shown = true, .gone = true, .generation = 1, .since_ms = 99999}, 97000,
		 RESV_VOID, true},
		{"its name under another uid, 3 s", {.name_taken = true}, 97000, RESV_PENDING,
		 false},
		{"its name under another uid, 5 s", {.name_taken = true}, 95000, RESV_VOID,
		 true},
		{"its name under another uid until 5 s after it",
		 {.name_taken = true, .name_freed_ms = 99000}, 94000, RESV_VOID, true},
		{"its name under another uid until 4 s after it (a recreate)",
		 {.name_taken = true, .name_freed_ms = 98000}, 94000, RESV_PENDING, false},
		{"a list 5 s after it did not show it", {.listed_ms = 99000}, 94000, RESV_VOID,
		 true},
		{"a list 4.999 s after it did not show it", {.listed_ms = 98999}, 94000,
		 RESV_PENDING, false},
		{"a list before it", {.listed_ms = 90000}, 94000, RESV_PENDING, false},
		{"made in the future", {.name_taken = true, .listed_ms = 99000}, 200000,
		 RESV_PENDING, false},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct resv r = test_resv_record("u", USAGE_JOBS, "a", "h100", 1, 2, cases[i].at);
		bool prune = !cases[i].prune;

		r.generation = 2;
		cr_expect_eq(resv_judge(&r, &cases[i].s, 100000, 5000, 60000, &prune),
			     cases[i].want, "%s", cases[i].what);
		cr_expect_eq(prune, cases[i].prune, "%s: prune", cases[i].what);
	}
}

static bool odd_uid(void *ctx, const struct resv *r)
{
	(void)ctx;
	return (r->uid[1] - '0') % 2 == 1;
}

Test(reservations, drop_removes_what_the_predicate_names_and_keeps_the_order)
{
	struct resv_doc doc;
	char uid[8];

	resv_doc_init(&doc);
	for (int i = 0; i < 8; i++) {
		struct resv r;

		snprintf(uid, sizeof(uid), "u%d", i);
		r = test_resv_record(uid, USAGE_PODS, "a", "f", 1, 1, 0);
		test_resv_add(&doc, &r);
	}
	cr_assert_eq(resv_doc_drop(&doc, odd_uid, NULL), 4);
	cr_assert_eq(doc.n, 4);
	for (size_t i = 0; i < doc.n; i++) {
		snprintf(uid, sizeof(uid), "u%zu", 2 * i);
		cr_expect_str_eq(doc.items[i].uid, uid);
	}
	resv_doc_release(&doc);
}
