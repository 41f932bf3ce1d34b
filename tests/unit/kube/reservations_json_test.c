/*
 * The reservation document's JSON (kube/reservations-json.c): decoding and
 * encoding a domain's ConfigMap.
 */
#include "base/diag.h"
#include "kube/reservations-json.h"
#include "tests/unit/usage/test_resv.h"
#include "usage/reservations.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REC(uid, extra)                                                      \
	"{\"uid\":\"" uid "\",\"kind\":\"pod\",\"namespace\":\"team-a\","  \
	"\"name\":\"p\",\"tenant\":\"a\",\"flavor\":\"h100\",\"perPod\":2," \
	"\"slots\":1,\"ownerJob\":null,\"generation\":1,\"replica\":\"r1\"," \
	"\"at\":1000" extra "}"

static json_t *configmap(const char *text)
{
	json_t *cm = json_pack("{s:s, s:{s:s}}", "kind", "ConfigMap", "data",
			       RESV_DATA_KEY, text);

	cr_assert_not_null(cm);
	return cm;
}

/* Parses text as data.reservations; returns the result, d holds the text. */
static int parse_text(const char *text, struct resv_doc *doc, struct diag *d)
{
	json_t *cm = configmap(text);
	int rc;

	diag_init(d);
	rc = resv_doc_parse(cm, doc, d);
	json_decref(cm);
	return rc;
}

static void expect_error(const char *text, const char *message)
{
	struct resv_doc doc;
	struct diag d;

	cr_assert_eq(parse_text(text, &doc, &d), -1, "accepted: %s", text);
	cr_expect_eq(doc.n, 0);
	cr_expect_null(doc.items);
	cr_expect_eq(diag_count(&d), 1, "%s", diag_text(&d));
	cr_expect_str_eq(test_resv_first(&d), message);
	resv_doc_release(&doc);
}

/* ---- decoding ------------------------------------------------------------ */

Test(reservations, absent_configmap_data_or_key_is_an_empty_document)
{
	struct resv_doc doc;
	struct diag d;
	json_t *cm;

	diag_init(&d);
	cr_assert_eq(resv_doc_parse(NULL, &doc, &d), 0);
	cr_expect_eq(doc.n, 0);
	cm = json_pack("{s:s}", "kind", "ConfigMap");
	cr_assert_eq(resv_doc_parse(cm, &doc, &d), 0);
	cr_expect_eq(doc.n, 0);
	json_object_set_new(cm, "data", json_pack("{s:s}", "other", "x"));
	cr_assert_eq(resv_doc_parse(cm, &doc, &d), 0);
	cr_expect_eq(doc.n, 0);
	cr_expect_eq(diag_count(&d), 0);
	json_decref(cm);
	resv_doc_release(&doc);
}

Test(reservations, reads_every_member_of_a_record)
{
	struct resv_doc doc;
	struct diag d;
	const struct resv *r;

	cr_assert_eq(parse_text("[" REC("u2", "") ","
				"{\"uid\":\"u1\",\"kind\":\"job\",\"namespace\":\"ns\","
				"\"name\":\"train\",\"tenant\":\"t\",\"flavor\":\"f\","
				"\"perPod\":8,\"slots\":4,\"ownerJob\":\"j-uid\","
				"\"generation\":3,\"replica\":\"gpugate-0\","
				"\"at\":1764680000123,\"future\":{\"x\":1}}]",
				&doc, &d),
		     0, "%s", diag_text(&d));
	cr_assert_eq(doc.n, 2);
	/* Sorted by uid whatever the document's order. */
	cr_expect_str_eq(doc.items[0].uid, "u1");
	cr_expect_str_eq(doc.items[1].uid, "u2");
	r = resv_doc_find(&doc, "u1");
	cr_assert_not_null(r);
	cr_expect_eq(r->kind, USAGE_JOBS);
	cr_expect_str_eq(r->namespace, "ns");
	cr_expect_str_eq(r->name, "train");
	cr_expect_str_eq(r->tenant, "t");
	cr_expect_str_eq(r->flavor, "f");
	cr_expect_eq(r->per_pod, 8);
	cr_expect_eq(r->slots, 4);
	cr_expect_str_eq(r->owner_job, "j-uid");
	cr_expect_eq(r->generation, 3);
	cr_expect_str_eq(r->replica, "gpugate-0");
	cr_expect_eq(r->at_ms, 1764680000123);
	cr_expect_eq(resv_units(r), 32);
	r = resv_doc_find(&doc, "u2");
	cr_assert_not_null(r);
	cr_expect_eq(r->kind, USAGE_PODS);
	cr_expect_str_eq(r->owner_job, "");
	cr_expect_eq(resv_units(r), 2);
	cr_expect_null(resv_doc_find(&doc, "u3"));
	cr_expect_null(resv_doc_find(&doc, ""));
	resv_doc_release(&doc);
}

Test(reservations, an_empty_array_is_an_empty_document)
{
	struct resv_doc doc;
	struct diag d;

	cr_assert_eq(parse_text(" [ ] ", &doc, &d), 0);
	cr_expect_eq(doc.n, 0);
	resv_doc_release(&doc);
}

Test(reservations, refuses_a_configmap_of_the_wrong_shape)
{
	struct resv_doc doc;
	struct diag d;
	json_t *cm;

	diag_init(&d);
	cm = json_string("x");
	cr_expect_eq(resv_doc_parse(cm, &doc, &d), -1);
	json_decref(cm);
	cm = json_pack("{s:[]}", "data");
	cr_expect_eq(resv_doc_parse(cm, &doc, &d), -1);
	json_decref(cm);
	cm = json_pack("{s:{s:i}}", "data", RESV_DATA_KEY, 1);
	cr_expect_eq(resv_doc_parse(cm, &doc, &d), -1);
	json_decref(cm);
	cr_expect_str_eq(diag_text(&d),
			 "reservations: the ConfigMap is not a JSON object\n"
			 "reservations: the ConfigMap's data is not an object\n"
			 "reservations: data.reservations is not a string\n");
	resv_doc_release(&doc);
}

Test(reservations, refuses_every_malformed_document_with_its_reason)
{
	static const struct {
		const char *text, *message;
	} cases[] = {
		{"", "reservations: not JSON: "},
		{"[", "reservations: not JSON: "},
		{"{\"uid\":\"u\"}", "reservations: not a JSON array"},
		{"[" REC("u", "") "] x", "reservations: not JSON: "},
		{"[1]", "reservations: record 0: not an object"},
		{"[" REC("u1", "") ",null]", "reservations: record 1: not an object"},
		{"[{\"kind\":\"pod\"}]", "reservations: record 0: missing \"uid\""},
		{"[{\"uid\":7}]", "reservations: record 0: \"uid\": not a string"},
		{"[{\"uid\":\"\"}]", "reservations: record 0: \"uid\": empty"},
		{"[{\"uid\":\"a\\u0000b\"}]",
		 "reservations: record 0: \"uid\": holds a NUL byte"},
		{"[{\"uid\":\"a\\nb\"}]",
		 "reservations: record 0: \"uid\": holds a control character or is not UTF-8"},
		{"[{\"uid\":\"u\"}]", "reservations: record 0 (uid \"u\"): missing \"kind\""},
		{"[{\"uid\":\"u\",\"kind\":\"node\"}]",
		 "reservations: record 0 (uid \"u\"): \"kind\": not \"pod\", \"job\" or \"claim\""},
		{"[{\"uid\":\"u\",\"kind\":1}]",
		 "reservations: record 0 (uid \"u\"): \"kind\": not \"pod\", \"job\" or \"claim\""},
		{"[{\"uid\":\"u\",\"kind\":\"pod\\u0000x\"}]",
		 "reservations: record 0 (uid \"u\"): \"kind\": not \"pod\", \"job\" or \"claim\""},
		{"[{\"uid\":\"u\",\"kind\":\"pod\"}]",
		 "reservations: record 0 (uid \"u\"): missing \"namespace\""},
		{"[{\"uid\":\"u\",\"kind\":\"pod\",\"namespace\":\"n\",\"name\":\"p\","
		 "\"tenant\":\"a\"}]",
		 "reservations: record 0 (uid \"u\"): missing \"flavor\""},
		{"[{\"uid\":\"u\",\"kind\":\"pod\",\"namespace\":\"n\",\"name\":\"p\","
		 "\"tenant\":null}]",
		 "reservations: record 0 (uid \"u\"): \"tenant\": not a string"},
		{"[{\"uid\":\"u\",\"kind\":\"pod\",\"namespace\":\"n\",\"name\":\"p\","
		 "\"tenant\":\"a\",\"flavor\":\"f\"}]",
		 "reservations: record 0 (uid \"u\"): missing \"ownerJob\""},
		{"[{\"uid\":\"u\",\"kind\":\"pod\",\"namespace\":\"n\",\"name\":\"p\","
		 "\"tenant\":\"a\",\"flavor\":\"f\",\"ownerJob\":1}]",
		 "reservations: record 0 (uid \"u\"): \"ownerJob\": not a string or null"},
		{"[{\"uid\":\"u\",\"kind\":\"pod\",\"namespace\":\"n\",\"name\":\"p\","
		 "\"tenant\":\"a\",\"flavor\":\"f\",\"ownerJob\":null}]",
		 "reservations: record 0 (uid \"u\"): missing \"replica\""},
		{"[{\"uid\":\"u\",\"kind\":\"pod\",\"namespace\":\"n\",\"name\":\"p\","
		 "\"tenant\":\"a\",\"flavor\":\"f\",\"ownerJob\":null,\"replica\":\"r\"}]",
		 "reservations: record 0 (uid \"u\"): missing \"perPod\""},
		{"[{\"uid\":\"u\",\"kind\":\"pod\",\"namespace\":\"n\",\"name\":\"p\","
		 "\"tenant\":\"a\",\"flavor\":\"f\",\"ownerJob\":null,\"replica\":\"r\","
		 "\"perPod\":\"2\"}]",
		 "reservations: record 0 (uid \"u\"): \"perPod\": not an integer"},
		{"[{\"uid\":\"u\",\"kind\":\"pod\",\"namespace\":\"n\",\"name\":\"p\","
		 "\"tenant\":\"a\",\"flavor\":\"f\",\"ownerJob\":null,\"replica\":\"r\","
		 "\"perPod\":2.0}]",
		 "reservations: record 0 (uid \"u\"): \"perPod\": not an integer"},
		{"[{\"uid\":\"u\",\"kind\":\"pod\",\"namespace\":\"n\",\"name\":\"p\","
		 "\"tenant\":\"a\",\"flavor\":\"f\",\"ownerJob\":null,\"replica\":\"r\","
		 "\"perPod\":2,\"slots\":1,\"generation\":0}]",
		 "reservations: record 0 (uid \"u\"): missing \"at\""},
		{"[{\"uid\":\"u\",\"kind\":\"pod\",\"namespace\":\"n\",\"name\":\"p\","
		 "\"tenant\":\"a\",\"flavor\":\"f\",\"ownerJob\":null,\"replica\":\"r\","
		 "\"perPod\":0,\"slots\":1,\"generation\":0,\"at\":0}]",
		 "reservations: record 0 (uid \"u\"): \"perPod\": must be an integer from 1 to 1000000"},
		{"[{\"uid\":\"u\",\"kind\":\"job\",\"namespace\":\"n\",\"name\":\"p\","
		 "\"tenant\":\"a\",\"flavor\":\"f\",\"ownerJob\":null,\"replica\":\"r\","
		 "\"perPod\":1,\"slots\":1000001,\"generation\":0,\"at\":0}]",
		 "reservations: record 0 (uid \"u\"): \"slots\": must be an integer from 1 to 1000000"},
		{"[{\"uid\":\"u\",\"kind\":\"claim\",\"namespace\":\"n\",\"name\":\"p\","
		 "\"tenant\":\"a\",\"flavor\":\"f\",\"ownerJob\":null,\"replica\":\"r\","
		 "\"perPod\":1,\"slots\":2,\"generation\":0,\"at\":0}]",
		 "reservations: record 0 (uid \"u\"): \"slots\": must be 1 for a claim"},
		{"[{\"uid\":\"u\",\"kind\":\"pod\",\"namespace\":\"n\",\"name\":\"p\","
		 "\"tenant\":\"a\",\"flavor\":\"f\",\"ownerJob\":null,\"replica\":\"r\","
		 "\"perPod\":1,\"slots\":1,\"generation\":-1,\"at\":0}]",
		 "reservations: record 0 (uid \"u\"): \"generation\": must be a non-negative integer"},
		{"[{\"uid\":\"u\",\"kind\":\"pod\",\"namespace\":\"n\",\"name\":\"p\","
		 "\"tenant\":\"a\",\"flavor\":\"f\",\"ownerJob\":null,\"replica\":\"r\","
		 "\"perPod\":1,\"slots\":1,\"generation\":0,\"at\":-5}]",
		 "reservations: record 0 (uid \"u\"): \"at\": must be a non-negative integer"},
		{"[" REC("u1", "") "," REC("u2", "") "," REC("u1", "") "]",
		 "reservations: records 0 and 2 have the same uid \"u1\""},
		{"[{\"uid\":\"u\",\"uid\":\"v\"}]", "reservations: not JSON: "},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct resv_doc doc;
		struct diag d;

		cr_assert_eq(parse_text(cases[i].text, &doc, &d), -1, "accepted: %s",
			     cases[i].text);
		cr_expect_eq(doc.n, 0);
		cr_expect_eq(diag_count(&d), 1, "%s", diag_text(&d));
		cr_expect(strncmp(test_resv_first(&d), cases[i].message,
				  strlen(cases[i].message)) == 0 &&
				  (strstr(cases[i].message, "not JSON") ||
				   strlen(test_resv_first(&d)) == strlen(cases[i].message)),
			  "case %zu: got \"%s\", want \"%s\"", i, test_resv_first(&d),
			  cases[i].message);
		resv_doc_release(&doc);
	}
}

Test(reservations, says_where_the_text_is_not_json)
{
	expect_error("[{\"uid\": x}]",
		     "reservations: not JSON: unexpected character 'x' (line 1, column 10)");
}

Test(reservations, refuses_strings_over_their_limits)
{
	static const struct {
		const char *key;
		size_t max;
	} limits[] = {
		{"uid", RESV_UID_MAX},         {"namespace", RESV_NAMESPACE_MAX},
		{"name", RESV_NAME_MAX},       {"tenant", RESV_TENANT_MAX},
		{"flavor", RESV_FLAVOR_MAX},   {"ownerJob", RESV_UID_MAX},
		{"replica", RESV_NAME_MAX},
	};

	for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++)
		for (size_t len = limits[i].max; len <= limits[i].max + 1; len++) {
			struct resv_doc doc;
			struct diag d;
			char long_s[400], want[200], *text;
			json_t *rec, *arr;
			int rc;

			memset(long_s, 'x', len);
			long_s[len] = '\0';
			rec = json_loads(REC("u", ""), 0, NULL);
			cr_assert_not_null(rec);
			json_object_set_new(rec, limits[i].key, json_string(long_s));
			arr = json_pack("[o]", rec);
			text = json_dumps(arr, JSON_COMPACT);
			rc = parse_text(text, &doc, &d);
			if (len == limits[i].max) {
				cr_expect_eq(rc, 0, "%s: %s", limits[i].key, diag_text(&d));
				cr_expect_eq(doc.n, 1);
			} else {
				cr_expect_eq(rc, -1, "%s of %zu accepted", limits[i].key, len);
				if (i == 0)
					snprintf(want, sizeof(want),
						 "reservations: record 0: \"uid\": longer than %zu bytes",
						 limits[i].max);
				else
					snprintf(want, sizeof(want),
						 "reservations: record 0 (uid \"u\"): \"%s\": longer than %zu bytes",
						 limits[i].key, limits[i].max);
				cr_expect_str_eq(test_resv_first(&d), want);
			}
			resv_doc_release(&doc);
			free(text);
			json_decref(arr);
		}
}

/* A document of n records "u0000".. "u<n-1>". */
static char *records_text(size_t n)
{
	size_t cap = n * 300 + 3, len = 0;
	char *text = malloc(cap);

	cr_assert_not_null(text);
	text[len++] = '[';
	for (size_t i = 0; i < n; i++) {
		char uid[16];

		snprintf(uid, sizeof(uid), "u%04zu", i);
		len += (size_t)snprintf(text + len, cap - len,
					"%s{\"uid\":\"%s\",\"kind\":\"pod\",\"namespace\":\"n\","
					"\"name\":\"p\",\"tenant\":\"a\",\"flavor\":\"f\",\"perPod\":1,"
					"\"slots\":1,\"ownerJob\":null,\"generation\":0,"
					"\"replica\":\"r\",\"at\":5}",
					i ? "," : "", uid);
	}
	text[len++] = ']';
	text[len] = '\0';
	return text;
}

Test(reservations, reads_resv_max_records_and_refuses_one_more)
{
	struct resv_doc doc;
	struct diag d;
	char *text = records_text(RESV_MAX);

	cr_assert_eq(parse_text(text, &doc, &d), 0, "%s", diag_text(&d));
	cr_expect_eq(doc.n, RESV_MAX);
	resv_doc_release(&doc);
	free(text);
	text = records_text(RESV_MAX + 1);
	expect_error(text, "reservations: 3001 records, more than 3000");
	free(text);
}

/* ---- encoding ------------------------------------------------------------ */

Test(reservations, writes_compact_records_sorted_by_uid)
{
	struct resv_doc doc;
	struct resv r;
	json_t *cm = json_pack("{s:s}", "kind", "ConfigMap");
	const char *text;

	resv_doc_init(&doc);
	r = test_resv_record("b", USAGE_JOBS, "t", "f", 8, 2, 42);
	snprintf(r.namespace, sizeof(r.namespace), "n\"s");
	test_resv_add(&doc, &r);
	r = test_resv_record("a", USAGE_CLAIMS, "t", "f", 1, 1, 7);
	snprintf(r.owner_job, sizeof(r.owner_job), "job-uid");
	test_resv_add(&doc, &r);
	cr_assert_eq(resv_doc_write(&doc, cm), 0);
	text = json_string_value(json_object_get(json_object_get(cm, "data"),
						 RESV_DATA_KEY));
	cr_assert_not_null(text);
	cr_expect_str_eq(text,
			 "[{\"uid\":\"a\",\"kind\":\"claim\",\"namespace\":\"ns-t\","
			 "\"name\":\"obj-a\",\"tenant\":\"t\",\"flavor\":\"f\",\"perPod\":1,"
			 "\"slots\":1,\"ownerJob\":\"job-uid\",\"generation\":1,"
			 "\"replica\":\"gpugate-7d9-x\",\"at\":7},"
			 "{\"uid\":\"b\",\"kind\":\"job\",\"namespace\":\"n\\\"s\","
			 "\"name\":\"obj-b\",\"tenant\":\"t\",\"flavor\":\"f\",\"perPod\":8,"
			 "\"slots\":2,\"ownerJob\":null,\"generation\":1,"
			 "\"replica\":\"gpugate-7d9-x\",\"at\":42}]");
	cr_expect_str_eq(json_string_value(json_object_get(cm, "kind")), "ConfigMap");
	json_decref(cm);
	resv_doc_release(&doc);
}

Test(reservations, writes_an_empty_document_and_keeps_other_data)
{
	struct resv_doc doc;
	json_t *cm = json_pack("{s:{s:s}}", "data", "other", "x");
	json_t *notobj = json_pack("{s:[]}", "data");

	resv_doc_init(&doc);
	cr_assert_eq(resv_doc_write(&doc, cm), 0);
	cr_expect_str_eq(json_string_value(json_object_get(json_object_get(cm, "data"),
							   RESV_DATA_KEY)),
			 "[]");
	cr_expect_str_eq(json_string_value(json_object_get(json_object_get(cm, "data"),
							   "other")),
			 "x");
	cr_expect_eq(resv_doc_write(&doc, notobj), -1);
	cr_expect_eq(resv_doc_write(&doc, NULL), -1);
	json_decref(cm);
	json_decref(notobj);
}

Test(reservations, round_trips_and_two_orders_write_the_same_bytes)
{
	struct resv_doc one, two, back;
	struct resv rs[40];
	json_t *cm1 = json_object(), *cm2 = json_object();
	struct diag d;
	char uid[32];

	resv_doc_init(&one);
	resv_doc_init(&two);
	for (size_t i = 0; i < 40; i++) {
		snprintf(uid, sizeof(uid), "%08zx-uid-é-%zu", (i * 7919) % 1000, i);
		rs[i] = test_resv_record(uid, (enum usage_kind)(i % USAGE_KINDS), i % 2 ? "a" : "b",
			       "h100", (int64_t)i + 1, i % USAGE_KINDS == USAGE_JOBS ? 4 : 1,
			       (int64_t)i * 1000);
		if (i % 5 == 0)
			snprintf(rs[i].owner_job, sizeof(rs[i].owner_job), "job-%zu", i);
		rs[i].generation = (int64_t)i;
	}
	for (size_t i = 0; i < 40; i++) {
		test_resv_add(&one, &rs[i]);
		test_resv_add(&two, &rs[39 - i]);
	}
	cr_assert_eq(resv_doc_write(&one, cm1), 0);
	cr_assert_eq(resv_doc_write(&two, cm2), 0);
	cr_expect(json_equal(cm1, cm2));
	diag_init(&d);
	cr_assert_eq(resv_doc_parse(cm1, &back, &d), 0, "%s", diag_text(&d));
	cr_assert_eq(back.n, 40);
	for (size_t i = 0; i < 40; i++) {
		const struct resv *r = resv_doc_find(&back, rs[i].uid);

		cr_assert_not_null(r, "%s lost", rs[i].uid);
		cr_expect(resv_equal(r, &rs[i]), "%s changed", rs[i].uid);
		cr_expect(resv_equal(&back.items[i], &one.items[i]));
	}
	json_decref(cm1);
	json_decref(cm2);
	resv_doc_release(&one);
	resv_doc_release(&two);
	resv_doc_release(&back);
}

/* ---- riders (issue #26) -------------------------------------------------- */

Test(reservations, a_rider_is_written_and_read_back_and_holds_no_units)
{
	struct resv_doc doc, back;
	struct resv r = test_resv_record("p1", USAGE_PODS, "a", "h100", 4, 1, 7);
	struct diag d;
	json_t *cm = json_object();
	char *text;

	resv_doc_init(&doc);
	snprintf(r.owner_job, sizeof(r.owner_job), "job-1");
	r.rides = true;
	test_resv_add(&doc, &r);
	text = resv_doc_encode(&doc, NULL);
	cr_assert(strstr(text, ",\"at\":7,\"rides\":true}"), "%s", text);
	free(text);
	cr_assert_eq(resv_doc_write(&doc, cm), 0);
	diag_init(&d);
	cr_assert_eq(resv_doc_parse(cm, &back, &d), 0, "%s", test_resv_first(&d));
	cr_assert(back.items[0].rides);
	cr_assert(resv_equal(&back.items[0], &r));
	cr_expect_eq(resv_doc_sum(&back, "a", "h100", NULL, NULL), 0,
		     "a rider holds a slot of its Job's gang, no units");
	resv_doc_release(&back);
	resv_doc_release(&doc);
	json_decref(cm);
	expect_error("[{\"uid\":\"u\",\"kind\":\"pod\",\"namespace\":\"n\",\"name\":\"x\","
		     "\"tenant\":\"t\",\"flavor\":\"f\",\"perPod\":1,\"slots\":1,"
		     "\"ownerJob\":\"j\",\"generation\":1,\"replica\":\"r\",\"at\":1,"
		     "\"rides\":1}]",
		     "reservations: record 0 (uid \"u\"): \"rides\": not a boolean");
	expect_error("[{\"uid\":\"u\",\"kind\":\"pod\",\"namespace\":\"n\",\"name\":\"x\","
		     "\"tenant\":\"t\",\"flavor\":\"f\",\"perPod\":1,\"slots\":1,"
		     "\"ownerJob\":null,\"generation\":1,\"replica\":\"r\",\"at\":1,"
		     "\"rides\":true}]",
		     "reservations: record 0 (uid \"u\"): \"rides\": only a pod with an ownerJob rides");
}
