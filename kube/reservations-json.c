/*
 * reservations-json: the reservation document's JSON
 * (kube/reservations-json.h).
 */
#include "kube/reservations-json.h"

#include "base/diag.h"
#include "base/strbuf.h"
#include "base/text.h"
#include "codec/jget.h"
#include "codec/jsonfast.h"
#include "codec/jsonout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The encoded document's cap: RESV_MAX records of the longest strings,
 * escaped, fit with room to spare (the apiserver refuses a ConfigMap over
 * 1 MiB anyway, with a 422 the backend reports). */
#define RESV_TEXT_MAX (64u << 20)

/* Where the string member f of r is. */
static char *field_of(struct resv *r, const struct resv_field *f)
{
	return (char *)r + f->off;
}

/* "record 4" or "record 4 (uid \"u1\")": who a message is about. */
static void who(char *buf, size_t size, const char *what, size_t index,
		const char *uid)
{
	if (uid && uid[0])
		snprintf(buf, size, "%s %zu (uid \"%s\")", what, index, uid);
	else
		snprintf(buf, size, "%s %zu", what, index);
}

/* ---- decoding ----------------------------------------------------------- */

static bool read_string(const char *whom, const json_t *rec,
			const struct resv_field *f, struct resv *out, struct diag *d)
{
	const json_t *v = jget(rec, f->key);
	size_t len;

	if (!v) {
		diag_addf(d, "%s: missing \"%s\"", whom, f->key);
		return false;
	}
	if (f->may_be_empty && json_is_null(v)) {
		field_of(out, f)[0] = '\0';
		return true;
	}
	if (!json_is_string(v)) {
		diag_addf(d, "%s: \"%s\": not a string%s", whom, f->key,
			  f->may_be_empty ? " or null" : "");
		return false;
	}
	len = json_string_length(v);
	if (!resv_string_ok(whom, f, json_string_value(v), len, d))
		return false;
	memcpy(field_of(out, f), json_string_value(v), len);
	field_of(out, f)[len] = '\0';
	return true;
}

static bool read_int(const char *whom, const json_t *rec, const char *key,
		     int64_t *out, struct diag *d)
{
	const json_t *v = jget(rec, key);

	if (!v) {
		diag_addf(d, "%s: missing \"%s\"", whom, key);
		return false;
	}
	if (!json_is_integer(v)) {
		diag_addf(d, "%s: \"%s\": not an integer", whom, key);
		return false;
	}
	*out = (int64_t)json_integer_value(v);
	return true;
}

static bool read_kind(const char *whom, const json_t *rec,
		      enum usage_kind *out, struct diag *d)
{
	const json_t *v = jget(rec, "kind");

	if (!v) {
		diag_addf(d, "%s: missing \"kind\"", whom);
		return false;
	}
	if (json_is_string(v))
		for (int k = 0; k < USAGE_KINDS; k++) {
			const char *name = resv_kind_name((enum usage_kind)k);

			if (strcmp(json_string_value(v), name) == 0 &&
			    json_string_length(v) == strlen(name)) {
				*out = (enum usage_kind)k;
				return true;
			}
		}
	diag_addf(d, "%s: \"kind\": not \"pod\", \"job\" or \"claim\"", whom);
	return false;
}

/* "rides": optional, a boolean. */
static bool read_rides(const char *whom, const json_t *rec, struct resv *out,
		       struct diag *d)
{
	const json_t *v = jget(rec, "rides");

	if (!v)
		return true;
	if (!json_is_boolean(v)) {
		diag_addf(d, "%s: \"rides\": not a boolean", whom);
		return false;
	}
	out->rides = json_is_true(v);
	return true;
}

static bool read_record(size_t index, const json_t *rec, struct resv *out,
			struct diag *d)
{
	char whom[200];

	who(whom, sizeof(whom), "reservations: record", index, NULL);
	if (!json_is_object(rec)) {
		diag_addf(d, "%s: not an object", whom);
		return false;
	}
	memset(out, 0, sizeof(*out));
	/* The uid first, so that the other messages can name it. */
	if (!read_string(whom, rec, &resv_string_fields[0], out, d))
		return false;
	who(whom, sizeof(whom), "reservations: record", index, out->uid);
	if (!read_kind(whom, rec, &out->kind, d))
		return false;
	for (size_t i = 1; i < RESV_STRING_FIELDS; i++)
		if (!read_string(whom, rec, &resv_string_fields[i], out, d))
			return false;
	if (!read_int(whom, rec, "perPod", &out->per_pod, d) ||
	    !read_int(whom, rec, "slots", &out->slots, d) ||
	    !read_int(whom, rec, "generation", &out->generation, d) ||
	    !read_int(whom, rec, "at", &out->at_ms, d))
		return false;
	return read_rides(whom, rec, out, d) && resv_numbers_ok(whom, out, d);
}

static int by_uid(const void *a, const void *b)
{
	return strcmp(((const struct resv *)a)->uid, ((const struct resv *)b)->uid);
}

static int by_uid_ptr(const void *a, const void *b)
{
	const struct resv *const *x = a, *const *y = b;
	int c = strcmp((*x)->uid, (*y)->uid);

	/* Equal uids by position, so that a message names the first two. */
	return c ? c : (*x < *y ? -1 : *x > *y);
}

/* Sorts doc->items by uid; -1 with a message when two share one. */
static int sort_unique(struct resv_doc *doc, struct diag *d)
{
	const struct resv **order = NULL;
	int rc = -1;

	if (doc->n < 2)
		return 0;
	order = malloc(doc->n * sizeof(*order));
	if (!order) {
		diag_addf(d, "reservations: out of memory");
		return -1;
	}
	for (size_t i = 0; i < doc->n; i++)
		order[i] = &doc->items[i];
	qsort(order, doc->n, sizeof(*order), by_uid_ptr);
	for (size_t i = 1; i < doc->n; i++)
		if (strcmp(order[i - 1]->uid, order[i]->uid) == 0) {
			diag_addf(d, "reservations: records %zu and %zu have the same uid \"%s\"",
				  (size_t)(order[i - 1] - doc->items),
				  (size_t)(order[i] - doc->items), order[i]->uid);
			goto out;
		}
	qsort(doc->items, doc->n, sizeof(*doc->items), by_uid);
	rc = 0;
out:
	free(order);
	return rc;
}

/* Finds the text of the document: 1 and *text, 0 when there is none, -1
 * with a message when the ConfigMap is not what it should be. */
static int document_text(const json_t *cm, const json_t **text, struct diag *d)
{
	const json_t *data, *v;

	if (!cm)
		return 0;
	if (!json_is_object(cm)) {
		diag_addf(d, "reservations: the ConfigMap is not a JSON object");
		return -1;
	}
	data = jget(cm, "data");
	if (!data)
		return 0;
	if (!json_is_object(data)) {
		diag_addf(d, "reservations: the ConfigMap's data is not an object");
		return -1;
	}
	v = jget(data, RESV_DATA_KEY);
	if (!v)
		return 0;
	if (!json_is_string(v)) {
		diag_addf(d, "reservations: data." RESV_DATA_KEY " is not a string");
		return -1;
	}
	*text = v;
	return 1;
}

int resv_doc_parse(const json_t *configmap, struct resv_doc *out,
		   struct diag *d)
{
	const json_t *text = NULL;
	json_t *arr = NULL;
	char err[256];
	size_t n;
	int rc;

	resv_doc_init(out);
	rc = document_text(configmap, &text, d);
	if (rc <= 0)
		return rc;
	rc = -1;
	arr = jsonfast_parse(json_string_value(text), json_string_length(text),
			     err, sizeof(err));
	if (!arr) {
		diag_addf(d, "reservations: not JSON: %s", err);
		goto out;
	}
	if (!json_is_array(arr)) {
		diag_addf(d, "reservations: not a JSON array");
		goto out;
	}
	n = json_array_size(arr);
	if (n > RESV_MAX) {
		diag_addf(d, "reservations: %zu records, more than %d", n, RESV_MAX);
		goto out;
	}
	if (n) {
		out->items = malloc(n * sizeof(*out->items));
		if (!out->items) {
			diag_addf(d, "reservations: out of memory");
			goto out;
		}
		out->cap = n;
	}
	for (size_t i = 0; i < n; i++, out->n++)
		if (!read_record(i, json_array_get(arr, i), &out->items[i], d))
			goto out;
	if (sort_unique(out, d) < 0)
		goto out;
	rc = 0;
out:
	json_decref(arr);
	if (rc < 0)
		resv_doc_release(out);
	return rc;
}

/* ---- encoding ----------------------------------------------------------- */

static void add_int(struct strbuf *sb, const char *key, int64_t v)
{
	char num[TEXT_DECIMAL_MAX + 1];
	const char *s = text_int(num, v);

	strbuf_add(sb, ",\"", 2);
	strbuf_add(sb, key, strlen(key));
	strbuf_add(sb, "\":", 2);
	strbuf_add(sb, s, strlen(s));
}

static void add_string(struct strbuf *sb, const char *key, const char *s,
		       bool null_if_empty)
{
	strbuf_add(sb, "\"", 1);
	strbuf_add(sb, key, strlen(key));
	strbuf_add(sb, "\":", 2);
	if (null_if_empty && !s[0])
		strbuf_add(sb, "null", 4);
	else
		jsonout_string(sb, s, strlen(s));
}

/* One record, members in the order of the header's example. */
static void add_record(struct strbuf *sb, const struct resv *r)
{
	strbuf_add(sb, "{", 1);
	add_string(sb, "uid", r->uid, false);
	strbuf_add(sb, ",", 1);
	add_string(sb, "kind", resv_kind_name(r->kind), false);
	strbuf_add(sb, ",", 1);
	add_string(sb, "namespace", r->namespace, false);
	strbuf_add(sb, ",", 1);
	add_string(sb, "name", r->name, false);
	strbuf_add(sb, ",", 1);
	add_string(sb, "tenant", r->tenant, false);
	strbuf_add(sb, ",", 1);
	add_string(sb, "flavor", r->flavor, false);
	add_int(sb, "perPod", r->per_pod);
	add_int(sb, "slots", r->slots);
	strbuf_add(sb, ",", 1);
	add_string(sb, "ownerJob", r->owner_job, true);
	add_int(sb, "generation", r->generation);
	strbuf_add(sb, ",", 1);
	add_string(sb, "replica", r->replica, false);
	add_int(sb, "at", r->at_ms);
	if (r->rides)
		strbuf_add(sb, ",\"rides\":true", 13);
	strbuf_add(sb, "}", 1);
}

char *resv_doc_encode(const struct resv_doc *doc, size_t *len)
{
	struct strbuf sb;

	strbuf_init(&sb, RESV_TEXT_MAX);
	strbuf_add(&sb, "[", 1);
	for (size_t i = 0; i < doc->n; i++) {
		if (i)
			strbuf_add(&sb, ",", 1);
		add_record(&sb, &doc->items[i]);
	}
	strbuf_add(&sb, "]", 1);
	if (strbuf_failed(&sb)) {
		strbuf_release(&sb);
		return NULL;
	}
	return strbuf_take(&sb, len);
}

int resv_doc_write(const struct resv_doc *doc, json_t *configmap)
{
	json_t *data, *value = NULL;
	char *text = NULL;
	size_t len = 0;
	int rc = -1;

	if (!json_is_object(configmap))
		return -1;
	data = jget(configmap, "data");
	if (data && !json_is_object(data))
		return -1;
	text = resv_doc_encode(doc, &len);
	if (!text)
		goto out;
	value = json_stringn(text, len);
	if (!value)
		goto out;
	if (!data) {
		data = json_object();
		if (!data || json_object_set_new(configmap, "data", data) < 0)
			goto out;
	}
	rc = json_object_set(data, RESV_DATA_KEY, value);
out:
	json_decref(value);
	free(text);
	return rc < 0 ? -1 : 0;
}

