/*
 * usage/leader-wire.c: what a follower sends the leader and gets back
 * (issue #32).  Requests and results round-trip under a small policy;
 * every way an input is not one is refused with one line.
 */
#include "policy/decide.h"
#include "policy/kinds.h"
#include "policy/policy.h"
#include "policy/quota.h"
#include "policy/workload.h"
#include "usage/leader-wire.h"
#include "tests/unit/test_policy.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static const char policy_yaml[] =
	"version: 1\n"
	"flavors:\n"
	"  - {name: h100, resource: nvidia.com/gpu, sharing: exclusive, gpusPerNode: 8}\n"
	"  - {name: a10, resource: nvidia.com/a10, sharing: exclusive, gpusPerNode: 4}\n"
	"classes:\n"
	"  - {name: one, flavor: h100, gpus: 1, maxGpus: 8}\n"
	"tenants:\n"
	"  - {name: lender, namespaces: [lender], cohort: lab,\n"
	"     quota: [{flavor: h100, nominal: 8}]}\n"
	"  - {name: bor, namespaces: [bor], cohort: lab, quota: [{flavor: h100, nominal: 8}]}\n"
	"  - {name: solo, namespaces: [solo], quota: [{flavor: a10, nominal: 4}]}\n";

static struct policy *P;

static void setup(void)
{
	P = test_policy(policy_yaml);
}

static void teardown(void)
{
	policy_free(P);
}

TestSuite(leader_wire, .init = setup, .fini = teardown);

/* ---- requests ----------------------------------------------------------- */

static struct workload a_pod(void)
{
	return (struct workload){
		.kind = WL_POD, .uid = "u-1", .namespace = "bor", .name = "train-0",
		.request_uid = "r-1", .generation = 0, .owner_job = "train",
		.owner_job_uid = "j-1",
	};
}

static struct quota_claim a_claim(const char *tenant, const char *flavor)
{
	return (struct quota_claim){
		.needed = true, .tenant = policy_tenant_find(P, tenant),
		.flavor = policy_flavor_find(P, flavor), .units = 16, .per_pod = 8,
		.pods = 2, .may_borrow = true, .owner_job_uid = "j-1",
		.priority = -5, .kueue_quota = true,
	};
}

static char err[256];

static int read_req(const json_t *j, struct workload *wl, struct quota_claim *c,
		    bool *force)
{
	err[0] = '\0';
	return leader_wire_read_request(j, P, wl, c, force, err, sizeof(err));
}

Test(leader_wire, a_pod_request_round_trips)
{
	struct workload wl = a_pod(), got;
	struct quota_claim c = a_claim("bor", "h100"), gc;
	bool force = false;
	json_t *j = leader_wire_request(&wl, &c, true);
	char *text;

	cr_assert_not_null(j);
	text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	cr_assert_str_eq(text,
			 "{\"claim\":{\"flavor\":\"h100\",\"kueueQuota\":true,"
			 "\"mayBorrow\":true,\"ownerJobUid\":\"j-1\",\"perPod\":8,"
			 "\"pods\":2,\"priority\":-5,\"tenant\":\"bor\",\"units\":16},"
			 "\"force\":true,\"v\":1,\"workload\":{\"generation\":0,"
			 "\"kind\":\"pod\",\"name\":\"train-0\",\"namespace\":\"bor\","
			 "\"ownerJob\":\"train\",\"requestUid\":\"r-1\",\"uid\":\"u-1\"}}");
	free(text);
	cr_assert_eq(read_req(j, &got, &gc, &force), 0, "%s", err);
	cr_assert(force);
	cr_assert_eq(got.kind, WL_POD);
	cr_assert_not_null(got.def);
	cr_assert_eq(got.def->wl, WL_POD);
	cr_assert_str_eq(got.def->kind, "Pod");
	cr_assert_str_eq(got.uid, "u-1");
	cr_assert_str_eq(got.namespace, "bor");
	cr_assert_str_eq(got.name, "train-0");
	cr_assert_str_eq(got.request_uid, "r-1");
	cr_assert_str_eq(got.owner_job, "train");
	cr_assert_eq(got.generation, 0);
	cr_assert(gc.needed);
	/* Pointers into the reader's policy. */
	cr_assert_eq(gc.tenant, policy_tenant_find(P, "bor"));
	cr_assert_eq(gc.flavor, policy_flavor_find(P, "h100"));
	cr_assert_eq(gc.units, 16);
	cr_assert_eq(gc.per_pod, 8);
	cr_assert_eq(gc.pods, 2);
	cr_assert(gc.may_borrow);
	cr_assert_str_eq(gc.owner_job_uid, "j-1");
	cr_assert_eq(gc.priority, -5);
	cr_assert(gc.kueue_quota);
	json_decref(j);
}

Test(leader_wire, job_and_claim_requests_with_absent_strings_round_trip)
{
	static const struct {
		enum wl_kind kind;
		const char *name;
	} kinds[] = {{WL_JOB, "Job"}, {WL_CLAIM, "ResourceClaim"}};

	for (size_t i = 0; i < 2; i++) {
		struct workload wl = {.kind = kinds[i].kind, .namespace = "solo",
				      .name = "x", .generation = 7}, got;
		struct quota_claim c = a_claim("solo", "a10"), gc;
		bool force = true;
		json_t *j;

		c.owner_job_uid = NULL;
		c.may_borrow = false;
		c.kueue_quota = false;
		c.priority = INT32_MAX;
		c.units = INT64_MAX;
		c.per_pod = UINT32_MAX;
		j = leader_wire_request(&wl, &c, false);
		cr_assert_not_null(j);
		cr_assert(json_is_null(json_object_get(json_object_get(j, "workload"), "uid")));
		cr_assert_eq(read_req(j, &got, &gc, &force), 0, "%s", err);
		cr_assert_not(force);
		cr_assert_eq(got.kind, kinds[i].kind);
		cr_assert_str_eq(got.def->kind, kinds[i].name);
		cr_assert_null(got.uid);
		cr_assert_null(got.request_uid);
		cr_assert_null(got.owner_job);
		cr_assert_eq(got.generation, 7);
		cr_assert_null(gc.owner_job_uid);
		cr_assert_not(gc.may_borrow);
		cr_assert_not(gc.kueue_quota);
		cr_assert_eq(gc.priority, INT32_MAX);
		cr_assert_eq(gc.units, INT64_MAX);
		cr_assert_eq(gc.per_pod, UINT32_MAX);
		cr_assert_eq(gc.tenant, policy_tenant_find(P, "solo"));
		json_decref(j);
	}
}

Test(leader_wire, a_kind_that_does_not_reserve_is_not_written)
{
	struct workload wl = a_pod();
	struct quota_claim c = a_claim("bor", "h100");

	wl.kind = WL_TEMPLATE;
	cr_assert_null(leader_wire_request(&wl, &c, false));
	wl.kind = WL_POD;
	c.tenant = NULL;
	cr_assert_null(leader_wire_request(&wl, &c, false));
}

/* Sets member path ("claim.units", "v") of j to v (stolen; NULL deletes). */
static void set_at(json_t *j, const char *path, json_t *v)
{
	char key[64];
	const char *dot = strchr(path, '.');

	if (dot) {
		snprintf(key, sizeof(key), "%.*s", (int)(dot - path), path);
		set_at(json_object_get(j, key), dot + 1, v);
		return;
	}
	if (v)
		json_object_set_new(j, path, v);
	else
		json_object_del(j, path);
}

struct change {
	const char *path;
	const char *value; /* JSON text; NULL: the member is deleted */
	const char *says;  /* in the error line */
};

static const struct change bad_requests[] = {
	{"v", NULL, "\"v\" is missing"},
	{"v", "2", "version 2"},
	{"v", "0", "version 0"},
	{"v", "\"1\"", "\"v\" is not an integer"},
	{"force", NULL, "\"force\" is missing"},
	{"force", "1", "\"force\" is not a boolean"},
	{"workload", NULL, "\"workload\" is missing"},
	{"workload", "[]", "\"workload\" is not an object"},
	{"claim", NULL, "\"claim\" is missing"},
	{"claim", "\"x\"", "\"claim\" is not an object"},
	{"workload.kind", NULL, "\"kind\" is missing"},
	{"workload.kind", "\"Pod\"", "kind \"Pod\" does not reserve"},
	{"workload.kind", "\"deployment\"", "does not reserve"},
	{"workload.kind", "null", "\"kind\" is not a string"},
	{"workload.uid", NULL, "\"uid\" is missing"},
	{"workload.uid", "5", "\"uid\" is not a string or null"},
	{"workload.namespace", "{}", "\"namespace\" is not a string"},
	{"workload.name", NULL, "\"name\" is missing"},
	{"workload.requestUid", "true", "\"requestUid\""},
	{"workload.ownerJob", NULL, "\"ownerJob\" is missing"},
	{"workload.generation", NULL, "\"generation\" is missing"},
	{"workload.generation", "-1", "\"generation\" is -1, out of range"},
	{"workload.generation", "1.5", "\"generation\" is not an integer"},
	{"claim.tenant", NULL, "\"tenant\" is missing"},
	{"claim.tenant", "null", "\"tenant\" is not a string"},
	{"claim.tenant", "\"nobody\"", "tenant \"nobody\" is not in this replica's policy"},
	{"claim.flavor", "\"b200\"", "flavor \"b200\" is not in this replica's policy"},
	{"claim.flavor", "7", "\"flavor\" is not a string"},
	{"claim.units", "0", "\"units\" is 0, out of range"},
	{"claim.units", "-8", "\"units\" is -8"},
	{"claim.units", "\"8\"", "\"units\" is not an integer"},
	{"claim.units", NULL, "\"units\" is missing"},
	{"claim.perPod", "-1", "\"perPod\" is -1"},
	{"claim.perPod", "4294967296", "\"perPod\" is 4294967296"},
	{"claim.pods", "0", "\"pods\" is 0"},
	{"claim.mayBorrow", NULL, "\"mayBorrow\" is missing"},
	{"claim.mayBorrow", "\"false\"", "\"mayBorrow\" is not a boolean"},
	{"claim.ownerJobUid", NULL, "\"ownerJobUid\" is missing"},
	{"claim.priority", "2147483648", "\"priority\" is 2147483648"},
	{"claim.priority", "-2147483649", "\"priority\" is -2147483649"},
	{"claim.kueueQuota", "null", "\"kueueQuota\" is not a boolean"},
};

Test(leader_wire, every_bad_request_is_refused_with_one_line)
{
	struct workload wl = a_pod(), got;
	struct quota_claim c = a_claim("bor", "h100"), gc;
	bool force;

	for (size_t i = 0; i < sizeof(bad_requests) / sizeof(bad_requests[0]); i++) {
		const struct change *ch = &bad_requests[i];
		json_t *j = leader_wire_request(&wl, &c, false);

		cr_assert_not_null(j);
		set_at(j, ch->path,
		       ch->value ? json_loads(ch->value, JSON_DECODE_ANY, NULL) : NULL);
		cr_assert_eq(read_req(j, &got, &gc, &force), -1, "accepted: %s = %s",
			     ch->path, ch->value ? ch->value : "(none)");
		cr_assert(strstr(err, ch->says), "%s = %s: %s", ch->path,
			  ch->value ? ch->value : "(none)", err);
		cr_assert(strncmp(err, "leader request: ", 16) == 0, "%s", err);
		cr_assert_null(strchr(err, '\n'), "%s", err);
		json_decref(j);
	}
}

Test(leader_wire, a_request_that_is_no_object_is_refused)
{
	struct workload got;
	struct quota_claim gc;
	bool force;
	json_t *j = json_array();

	cr_assert_eq(read_req(j, &got, &gc, &force), -1);
	cr_assert_str_eq(err, "leader request: not a JSON object");
	json_decref(j);
	cr_assert_eq(read_req(NULL, &got, &gc, &force), -1);
}

/* ---- results ------------------------------------------------------------ */

static int read_res(const json_t *j, const struct workload *wl, struct quota_result *out)
{
	err[0] = '\0';
	return leader_wire_read_result(j, P, wl, out, err, sizeof(err));
}

/* What the leader's decision would give, its strings its own copies (as
 * if from another process). */
static struct quota_result a_result(void)
{
	struct quota_result r = {
		.position = QUOTA_NOMINAL, .requested = 8, .used = 2, .nominal = 8,
		.borrowing_limit = -1, .borrowed = 0, .can_lend = 3, .ceiling = 16,
		.cohort_lendable = 8, .cohort = "lab", .holder = NULL, .reclaim = 2,
		.n_borrowers = 6, .below = -7, .any_priority = true, .reclaimable = 5,
	};
	static const char *const who[] = {"lender", "bor", "lender", "bor"};

	for (size_t i = 0; i < QUOTA_MAX_NAMED; i++)
		r.borrowers[i] = (struct quota_borrower){who[i], (int64_t)i + 1};
	snprintf(r.reason, sizeof(r.reason), "lab lends 2 of lender's h100");
	return r;
}

Test(leader_wire, a_result_round_trips_into_the_readers_policy)
{
	struct quota_result r = a_result(), got;
	struct workload wl = a_pod();
	json_t *j = leader_wire_result(&r);

	cr_assert_not_null(j);
	cr_assert_eq(json_array_size(json_object_get(j, "borrowers")), QUOTA_MAX_NAMED);
	cr_assert_eq(read_res(j, &wl, &got), 0, "%s", err);
	cr_assert_eq(got.position, QUOTA_NOMINAL);
	cr_assert_eq(got.requested, 8);
	cr_assert_eq(got.used, 2);
	cr_assert_eq(got.nominal, 8);
	cr_assert_eq(got.borrowing_limit, -1);
	cr_assert_eq(got.can_lend, 3);
	cr_assert_eq(got.ceiling, 16);
	cr_assert_eq(got.cohort_lendable, 8);
	cr_assert_eq(got.cohort, policy_tenant_find(P, "bor")->cohort);
	cr_assert_null(got.holder);
	cr_assert_eq(got.reclaim, 2);
	cr_assert_eq(got.n_borrowers, 6);
	for (size_t i = 0; i < QUOTA_MAX_NAMED; i++) {
		cr_assert_eq(got.borrowers[i].tenant,
			     policy_tenant_find(P, r.borrowers[i].tenant)->name);
		cr_assert_eq(got.borrowers[i].borrowed, (int64_t)i + 1);
	}
	cr_assert_eq(got.below, -7);
	cr_assert(got.any_priority);
	cr_assert_eq(got.reclaimable, 5);
	cr_assert_str_eq(got.reason, r.reason);
	json_decref(j);
}

Test(leader_wire, every_position_and_a_covered_pods_holder_round_trip)
{
	static const enum quota_position all[] = {
		QUOTA_NOMINAL, QUOTA_BORROWED, QUOTA_OVER, QUOTA_NEVER_FITS,
		QUOTA_NO_QUOTA, QUOTA_NOT_PREPARED, QUOTA_COVERED, QUOTA_UNAVAILABLE,
		QUOTA_LENT_OUT, QUOTA_RECLAIM_SHORT,
	};
	struct workload wl = a_pod();
	char job[] = "train";

	wl.owner_job = job;
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		struct quota_result r = {.position = all[i], .borrowing_limit = 4}, got;
		json_t *j;

		/* The memory backend's covered pod: everything 0, the Job. */
		if (all[i] == QUOTA_COVERED)
			r.holder = "train";
		j = leader_wire_result(&r);
		cr_assert_not_null(j);
		cr_assert_eq(read_res(j, &wl, &got), 0, "%s", err);
		cr_assert_eq(got.position, all[i]);
		cr_assert_null(got.cohort);
		cr_assert_eq(got.n_borrowers, 0);
		cr_assert_eq(got.borrowing_limit, 4);
		if (all[i] == QUOTA_COVERED)
			cr_assert_eq(got.holder, wl.owner_job);
		else
			cr_assert_null(got.holder);
		json_decref(j);
	}
}

static const struct change bad_results[] = {
	{"v", NULL, "\"v\" is missing"},
	{"v", "3", "version 3"},
	{"position", NULL, "\"position\" is missing"},
	{"position", "\"Nominal\"", "position \"Nominal\" is not one"},
	{"position", "\"unknown\"", "position \"unknown\" is not one"},
	{"position", "0", "\"position\" is not a string"},
	{"requested", "-1", "\"requested\" is -1"},
	{"used", NULL, "\"used\" is missing"},
	{"used", "-3", "\"used\" is -3"},
	{"nominal", "1.0", "\"nominal\" is not an integer"},
	{"borrowingLimit", "-2", "\"borrowingLimit\" is -2"},
	{"borrowed", "-1", "\"borrowed\" is -1"},
	{"canLend", "null", "\"canLend\" is not an integer"},
	{"ceiling", "-1", "\"ceiling\" is -1"},
	{"cohortLendable", NULL, "\"cohortLendable\" is missing"},
	{"cohort", "\"physics\"", "cohort \"physics\" is not in this replica's policy"},
	{"cohort", "1", "\"cohort\" is not a string or null"},
	{"cohort", NULL, "\"cohort\" is missing"},
	{"holder", "\"someone-else\"", "holder \"someone-else\" is not the workload's Job"},
	{"holder", NULL, "\"holder\" is missing"},
	{"reclaim", "-1", "\"reclaim\" is -1"},
	{"borrowers", NULL, "\"borrowers\" is missing"},
	{"borrowers", "{}", "\"borrowers\" is not an array"},
	{"borrowers", "[{\"tenant\":\"bor\",\"borrowed\":1},{\"tenant\":\"bor\","
		      "\"borrowed\":1},{\"tenant\":\"bor\",\"borrowed\":1},{\"tenant\":"
		      "\"bor\",\"borrowed\":1},{\"tenant\":\"bor\",\"borrowed\":1}]",
	 "5 borrowers named, at most 4"},
	{"borrowers", "[{\"tenant\":\"bor\",\"borrowed\":1}]", "1 borrowers named of \"nBorrowers\" 6"},
	{"borrowers", "[1,2,3,4]", "borrower 0 is not an object"},
	{"borrowers", "[{\"tenant\":\"ghost\",\"borrowed\":1},{\"tenant\":\"bor\","
		      "\"borrowed\":1},{\"tenant\":\"bor\",\"borrowed\":1},{\"tenant\":"
		      "\"bor\",\"borrowed\":1}]",
	 "borrower \"ghost\" is not in this replica's policy"},
	{"borrowers", "[{\"tenant\":\"bor\",\"borrowed\":0},{\"tenant\":\"bor\","
		      "\"borrowed\":1},{\"tenant\":\"bor\",\"borrowed\":1},{\"tenant\":"
		      "\"bor\",\"borrowed\":1}]",
	 "\"borrowed\" is 0"},
	{"borrowers", "[{\"borrowed\":1},{\"tenant\":\"bor\",\"borrowed\":1},"
		      "{\"tenant\":\"bor\",\"borrowed\":1},{\"tenant\":\"bor\",\"borrowed\":1}]",
	 "\"tenant\" is missing"},
	{"nBorrowers", "-1", "\"nBorrowers\" is -1"},
	{"nBorrowers", "3", "4 borrowers named of \"nBorrowers\" 3"},
	{"below", "2147483648", "\"below\" is 2147483648"},
	{"anyPriority", "1", "\"anyPriority\" is not a boolean"},
	{"reclaimable", "-5", "\"reclaimable\" is -5"},
	{"reason", NULL, "\"reason\" is missing"},
	{"reason", "null", "\"reason\" is not a string"},
};

Test(leader_wire, every_bad_result_is_refused_with_one_line)
{
	struct quota_result r = a_result(), got;
	struct workload wl = a_pod();

	for (size_t i = 0; i < sizeof(bad_results) / sizeof(bad_results[0]); i++) {
		const struct change *ch = &bad_results[i];
		json_t *j = leader_wire_result(&r);

		cr_assert_not_null(j);
		set_at(j, ch->path,
		       ch->value ? json_loads(ch->value, JSON_DECODE_ANY, NULL) : NULL);
		memset(&got, 0x5a, sizeof(got));
		cr_assert_eq(read_res(j, &wl, &got), -1, "accepted: %s = %s", ch->path,
			     ch->value ? ch->value : "(none)");
		cr_assert(strstr(err, ch->says), "%s = %s: %s", ch->path,
			  ch->value ? ch->value : "(none)", err);
		cr_assert(strncmp(err, "leader answer: ", 15) == 0, "%s", err);
		cr_assert_null(strchr(err, '\n'), "%s", err);
		/* Nothing half read is left to be taken for a decision. */
		cr_assert_null(got.cohort);
		cr_assert_eq(got.n_borrowers, 0);
		json_decref(j);
	}
}

Test(leader_wire, a_holder_for_a_workload_without_a_job_and_a_long_reason)
{
	struct quota_result r = {.position = QUOTA_COVERED, .holder = "train"}, got;
	struct workload wl = a_pod();
	char reason[sizeof(((struct quota_result *)0)->reason) + 80];
	json_t *j;

	wl.owner_job = NULL;
	j = leader_wire_result(&r);
	cr_assert_eq(read_res(j, &wl, &got), -1);
	cr_assert(strstr(err, "is not the workload's Job"), "%s", err);
	json_decref(j);

	r = (struct quota_result){.position = QUOTA_UNAVAILABLE};
	j = leader_wire_result(&r);
	memset(reason, 'x', sizeof(reason) - 1);
	reason[sizeof(reason) - 1] = '\0';
	json_object_set_new(j, "reason", json_string(reason));
	cr_assert_eq(read_res(j, &wl, &got), -1);
	{
		char want[64];

		snprintf(want, sizeof(want), "\"reason\" longer than %zu bytes",
			 sizeof(got.reason) - 1);
		cr_assert(strstr(err, want), "%s", err);
	}
	reason[sizeof(got.reason) - 1] = '\0';
	json_object_set_new(j, "reason", json_string(reason));
	cr_assert_eq(read_res(j, &wl, &got), 0, "%s", err);
	cr_assert_str_eq(got.reason, reason);
	json_decref(j);
}

/* A claim that may ride on its pod (policy/charge.h) carries the pod; a
 * request without those keys (a replica of the version before) reads as
 * one that rides on nothing. */
Test(leader_wire, a_claims_pod_round_trips_and_may_be_absent)
{
	struct workload wl = {.kind = WL_CLAIM, .namespace = "solo", .name = "",
			      .uid = "c-1", .owner_pod = "p", .owner_pod_uid = "p-1"},
			got;
	struct quota_claim c = a_claim("solo", "a10"), gc;
	bool force = false;
	json_t *j;

	c.owner_job_uid = NULL;
	c.owner_pod_uid = "p-1";
	j = leader_wire_request(&wl, &c, false);
	cr_assert_not_null(j);
	cr_assert_eq(read_req(j, &got, &gc, &force), 0, "%s", err);
	cr_assert_str_eq(gc.owner_pod_uid, "p-1");
	cr_assert_str_eq(got.owner_pod_uid, "p-1");
	cr_assert_str_eq(got.owner_pod, "p");
	json_object_del(json_object_get(j, "claim"), "ownerPodUid");
	json_object_del(json_object_get(j, "workload"), "ownerPod");
	cr_assert_eq(read_req(j, &got, &gc, &force), 0, "%s", err);
	cr_assert_null(gc.owner_pod_uid);
	cr_assert_null(got.owner_pod);
	/* A wrong type is refused, as every other key. */
	json_object_set_new(json_object_get(j, "claim"), "ownerPodUid", json_integer(1));
	cr_assert_eq(read_req(j, &got, &gc, &force), -1);
	cr_assert_str_eq(err, "leader request: \"ownerPodUid\" is not a string or null");
	json_decref(j);
}
