/*
 * libFuzzer harness for kube/reservations-json.c and the document model
 * (usage/reservations.c): the input is the text of a
 * ConfigMap's data.reservations (inputs that are not UTF-8 cannot be a
 * ConfigMap's string and are skipped), decoded by resv_doc_parse().
 *
 * What must hold (any violation aborts):
 *   - refused: exactly one line in the diagnostics, the document empty;
 *   - accepted: at most RESV_MAX records, strictly sorted by uid; every
 *     record is one resv_doc_add() takes (what is read could be written);
 *     the encoding reads back to the same records and encodes to the same
 *     bytes again; the records re-added in reverse order encode to the
 *     same bytes (the order is the uid's, not the history's);
 *   - prune and sum keep the document sorted, the sum is the units of the
 *     records not counted, and every record's domain names are valid
 *     object names.
 */
#include "base/diag.h"
#include "kube/reservations-json.h"
#include "policy/k8s.h"
#include "usage/reservations.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                          \
	do {                                                              \
		if (!(c)) {                                               \
			fprintf(stderr, "invariant violated: %s (%s:%d)\n", \
				#c, __FILE__, __LINE__);                  \
			abort();                                          \
		}                                                         \
	} while (0)

static void sorted(const struct resv_doc *doc)
{
	CHECK(doc->n <= RESV_MAX && doc->n <= doc->cap);
	for (size_t i = 1; i < doc->n; i++)
		CHECK(strcmp(doc->items[i - 1].uid, doc->items[i].uid) < 0);
}

/* Observed: uids whose first byte is even, since at_ms / 2. */
static bool observed(void *ctx, const char *uid, uint64_t *since)
{
	const struct resv_doc *doc = ctx;
	const struct resv *r = resv_doc_find(doc, uid);

	CHECK(r);
	if ((unsigned char)uid[0] % 2)
		return false;
	*since = (uint64_t)r->at_ms / 2;
	return true;
}

static bool counted(void *ctx, const struct resv *r)
{
	(void)ctx;
	return r->generation % 2 == 1;
}

static void check_accepted(struct resv_doc *doc)
{
	struct resv_doc again, copy;
	json_t *cm = json_object();
	struct diag d;
	char *text, *text2, *text3;
	size_t len, len2, len3;
	int64_t want = 0;

	sorted(doc);
	text = resv_doc_encode(doc, &len);
	CHECK(text);
	CHECK(resv_doc_write(doc, cm) == 0);
	diag_init(&d);
	CHECK(resv_doc_parse(cm, &again, &d) == 0);
	CHECK(again.n == doc->n);
	for (size_t i = 0; i < doc->n; i++)
		CHECK(resv_equal(&again.items[i], &doc->items[i]));
	text2 = resv_doc_encode(&again, &len2);
	CHECK(text2 && len2 == len && memcmp(text, text2, len) == 0);

	resv_doc_init(&copy);
	for (size_t i = doc->n; i-- > 0;) {
		diag_init(&d);
		CHECK(resv_doc_add(&copy, &doc->items[i], &d) == 0);
		CHECK(resv_doc_add(&copy, &doc->items[i], &d) == 1);
	}
	text3 = resv_doc_encode(&copy, &len3);
	CHECK(text3 && len3 == len && memcmp(text, text3, len) == 0);

	for (size_t i = 0; i < doc->n; i++) {
		const struct resv *r = &doc->items[i];
		char name[RESV_DOMAIN_NAME_SIZE];

		CHECK(resv_doc_find(doc, r->uid) == r);
		if (strcmp(r->tenant, doc->items[0].tenant) == 0 &&
		    strcmp(r->flavor, doc->items[0].flavor) == 0 && !counted(NULL, r))
			want += resv_units(r);
		CHECK(resv_domain_name(NULL, r->tenant, name, sizeof(name)) >= 0);
		CHECK(k8s_dns_subdomain_valid(name));
		CHECK(resv_domain_name(r->name, r->tenant, name, sizeof(name)) >= 0);
		CHECK(k8s_dns_subdomain_valid(name));
	}
	if (doc->n)
		CHECK(resv_doc_sum(doc, doc->items[0].tenant, doc->items[0].flavor,
				   counted, NULL) == want);

	{
		size_t before = again.n, gone;

		gone = resv_doc_prune(&again, observed, doc, 1000000, 1000, 50000);
		CHECK(gone <= before && again.n == before - gone);
		sorted(&again);
		if (again.n)
			CHECK(resv_doc_remove(&again, again.items[0].uid));
		sorted(&again);
	}

	free(text);
	free(text2);
	free(text3);
	json_decref(cm);
	resv_doc_release(&again);
	resv_doc_release(&copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *value = json_stringn((const char *)data, size), *cm;
	struct resv_doc doc;
	struct diag d;

	if (!value)
		return 0; /* not UTF-8: no ConfigMap holds it */
	cm = json_pack("{s:{s:o}}", "data", RESV_DATA_KEY, value);
	CHECK(cm);
	diag_init(&d);
	if (resv_doc_parse(cm, &doc, &d) < 0) {
		CHECK(diag_count(&d) == 1);
		CHECK(doc.n == 0 && doc.items == NULL);
	} else {
		CHECK(diag_count(&d) == 0);
		check_accepted(&doc);
	}
	resv_doc_release(&doc);
	json_decref(cm);
	return 0;
}
