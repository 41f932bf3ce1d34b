/*
 * The reservation document of a quota domain (kube/reservations.c):
 * decoding, encoding, the operations and the ConfigMap's name.
 */
#include "base/diag.h"
#include "kube/reservations.h"
#include "policy/k8s.h"

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

/* The first line of d, without its newline. */
static const char *first(const struct diag *d)
{
	static char line[1024];

	diag_first(d, line, sizeof(line));
	return line;
}

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
	cr_expect_str_eq(first(&d), message);
	resv_doc_release(&doc);
}

static struct resv record(const char *uid, enum usage_kind kind,
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

static void add_ok(struct resv_doc *doc, const struct resv *r)
{
	struct diag d;

	diag_init(&d);
	cr_assert_geq(resv_doc_add(doc, r, &d), 0, "%s", diag_text(&d));
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
		cr_expect(strncmp(first(&d), cases[i].message,
				  strlen(cases[i].message)) == 0 &&
				  (strstr(cases[i].message, "not JSON") ||
				   strlen(first(&d)) == strlen(cases[i].message)),
			  "case %zu: got \"%s\", want \"%s\"", i, first(&d),
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
				cr_expect_str_eq(first(&d), want);
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
	r = record("b", USAGE_JOBS, "t", "f", 8, 2, 42);
	snprintf(r.namespace, sizeof(r.namespace), "n\"s");
	add_ok(&doc, &r);
	r = record("a", USAGE_CLAIMS, "t", "f", 1, 1, 7);
	snprintf(r.owner_job, sizeof(r.owner_job), "job-uid");
	add_ok(&doc, &r);
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
		rs[i] = record(uid, (enum usage_kind)(i % USAGE_KINDS), i % 2 ? "a" : "b",
			       "h100", (int64_t)i + 1, i % USAGE_KINDS == USAGE_JOBS ? 4 : 1,
			       (int64_t)i * 1000);
		if (i % 5 == 0)
			snprintf(rs[i].owner_job, sizeof(rs[i].owner_job), "job-%zu", i);
		rs[i].generation = (int64_t)i;
	}
	for (size_t i = 0; i < 40; i++) {
		add_ok(&one, &rs[i]);
		add_ok(&two, &rs[39 - i]);
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

/* ---- records ------------------------------------------------------------- */

Test(reservations, add_replaces_a_retried_uid_and_remove_removes)
{
	struct resv_doc doc;
	struct resv r;
	struct diag d;

	resv_doc_init(&doc);
	diag_init(&d);
	r = record("u1", USAGE_PODS, "a", "f", 1, 1, 10);
	cr_expect_eq(resv_doc_add(&doc, &r, &d), 0);
	r = record("u0", USAGE_PODS, "a", "f", 1, 1, 10);
	cr_expect_eq(resv_doc_add(&doc, &r, &d), 0);
	r = record("u1", USAGE_PODS, "a", "f", 3, 1, 20);
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
	struct resv a = record("u", USAGE_JOBS, "t", "f", 2, 3, 9), b = a;

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
	r = record("u", USAGE_PODS, "a", "f", 1, 2, 0);
	cr_expect_eq(resv_doc_add(&doc, &r, &d), -1);
	r = record("u", USAGE_PODS, "a", "f", 0, 1, 0);
	cr_expect_eq(resv_doc_add(&doc, &r, &d), -1);
	r = record("u", USAGE_PODS, "", "f", 1, 1, 0);
	cr_expect_eq(resv_doc_add(&doc, &r, &d), -1);
	r = record("u", USAGE_PODS, "a", "f", 1, 1, 0);
	memset(r.flavor, 'x', sizeof(r.flavor)); /* not terminated */
	cr_expect_eq(resv_doc_add(&doc, &r, &d), -1);
	r = record("u", USAGE_PODS, "a", "f", 1, 1, 0);
	r.kind = USAGE_KINDS;
	cr_expect_eq(resv_doc_add(&doc, &r, &d), -1);
	r = record("u", USAGE_PODS, "a", "f\x01", 1, 1, 0);
	cr_expect_eq(resv_doc_add(&doc, &r, &d), -1);
	r = record("", USAGE_PODS, "a", "f", 1, 1, 0);
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
		r = record(uid, USAGE_PODS, "a", "f", 1, 1, 0);
		cr_assert_eq(resv_doc_add(&doc, &r, &d), 0);
	}
	r = record("one-more", USAGE_PODS, "a", "f", 1, 1, 0);
	cr_expect_eq(resv_doc_add(&doc, &r, &d), -1);
	cr_expect_str_eq(first(&d),
			 "reservations: 3000 pending in this quota domain, the most it holds");
	r = record("u7", USAGE_PODS, "a", "f", 2, 1, 0);
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
		r = record(recs[i].uid, USAGE_PODS, "a", "f", 1, 1, recs[i].at);
		add_ok(&doc, &r);
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
		r = record(recs[i].uid, recs[i].kind, recs[i].tenant, recs[i].flavor,
			   recs[i].per_pod, recs[i].slots, 0);
		snprintf(r.owner_job, sizeof(r.owner_job), "%s", recs[i].owner_job);
		add_ok(&doc, &r);
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
		r = record(uid, USAGE_JOBS, "a", "f", RESV_UNITS_MAX, RESV_UNITS_MAX, 0);
		add_ok(&doc, &r);
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

/* ---- riders and the verdict on a record (issue #26) ------------------------ */

Test(reservations, a_rider_is_written_and_read_back_and_holds_no_units)
{
	struct resv_doc doc, back;
	struct resv r = record("p1", USAGE_PODS, "a", "h100", 4, 1, 7);
	struct diag d;
	json_t *cm = json_object();
	char *text;

	resv_doc_init(&doc);
	snprintf(r.owner_job, sizeof(r.owner_job), "job-1");
	r.rides = true;
	add_ok(&doc, &r);
	text = resv_doc_encode(&doc, NULL);
	cr_assert(strstr(text, ",\"at\":7,\"rides\":true}"), "%s", text);
	free(text);
	cr_assert_eq(resv_doc_write(&doc, cm), 0);
	diag_init(&d);
	cr_assert_eq(resv_doc_parse(cm, &back, &d), 0, "%s", first(&d));
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
		struct resv r = record("u", USAGE_JOBS, "a", "h100", 1, 2, cases[i].at);
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
		r = record(uid, USAGE_PODS, "a", "f", 1, 1, 0);
		add_ok(&doc, &r);
	}
	cr_assert_eq(resv_doc_drop(&doc, odd_uid, NULL), 4);
	cr_assert_eq(doc.n, 4);
	for (size_t i = 0; i < doc.n; i++) {
		snprintf(uid, sizeof(uid), "u%zu", 2 * i);
		cr_expect_str_eq(doc.items[i].uid, uid);
	}
	resv_doc_release(&doc);
}
