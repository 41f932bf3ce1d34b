/*
 * reservations: the reservation document (kube/reservations.h).
 *
 * One checker, check_record(), holds a record to the rules: the decoder
 * runs it on every record it reads and resv_doc_add() on every record it
 * is given, so that a document this module wrote always reads back.
 */
#include "kube/reservations.h"

#include "base/diag.h"
#include "base/hash.h"
#include "base/strbuf.h"
#include "base/text.h"
#include "codec/jget.h"
#include "codec/jsonfast.h"
#include "codec/jsonout.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* The encoded document's cap: RESV_MAX records of the longest strings,
 * escaped, fit with room to spare (the apiserver refuses a ConfigMap over
 * 1 MiB anyway, with a 422 the backend reports). */
#define RESV_TEXT_MAX (64u << 20)

static const char *const kind_names[USAGE_KINDS] = {
	[USAGE_PODS] = "pod",
	[USAGE_JOBS] = "job",
	[USAGE_CLAIMS] = "claim",
};

void resv_doc_init(struct resv_doc *doc)
{
	doc->items = NULL;
	doc->n = doc->cap = 0;
}

void resv_doc_release(struct resv_doc *doc)
{
	free(doc->items);
	resv_doc_init(doc);
}

/* ---- the rules of a record ---------------------------------------------- */

/* The string fields, in the order of the encoding and of the checks. */
struct field {
	const char *key;
	size_t off, max;
	bool may_be_empty;
};

#define FIELD(k, m, x, e) {k, offsetof(struct resv, m), x, e}
static const struct field string_fields[] = {
	FIELD("uid", uid, RESV_UID_MAX, false),
	FIELD("namespace", namespace, RESV_NAMESPACE_MAX, false),
	FIELD("name", name, RESV_NAME_MAX, false),
	FIELD("tenant", tenant, RESV_TENANT_MAX, false),
	FIELD("flavor", flavor, RESV_FLAVOR_MAX, false),
	FIELD("ownerJob", owner_job, RESV_UID_MAX, true),
	FIELD("replica", replica, RESV_NAME_MAX, false),
};
#undef FIELD

static char *field_of(struct resv *r, const struct field *f)
{
	return (char *)r + f->off;
}

static const char *cfield_of(const struct resv *r, const struct field *f)
{
	return (const char *)r + f->off;
}

/*
 * What is wrong with s[0, len) as the value of f, or NULL.  Strings are
 * names and uids: UTF-8 without control characters (text_clean() changes
 * nothing), within f->max bytes.
 */
static const char *string_problem(const struct field *f, const char *s,
				  size_t len)
{
	char copy[RESV_NAME_MAX + 1];

	if (len == 0 && !f->may_be_empty)
		return "empty";
	if (len > f->max)
		return NULL; /* told by the caller, with the limit */
	if (memchr(s, '\0', len))
		return "holds a NUL byte";
	memcpy(copy, s, len);
	copy[len] = '\0';
	text_clean(copy);
	if (memcmp(copy, s, len) != 0)
		return "holds a control character or is not UTF-8";
	return NULL;
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

static bool string_ok(const char *whom, const struct field *f, const char *s,
		      size_t len, struct diag *d)
{
	const char *p = string_problem(f, s, len);

	if (len > f->max) {
		diag_addf(d, "%s: \"%s\": longer than %zu bytes", whom, f->key,
			  f->max);
		return false;
	}
	if (p) {
		diag_addf(d, "%s: \"%s\": %s", whom, f->key, p);
		return false;
	}
	return true;
}

static bool int_ok(const char *whom, const char *key, int64_t v, int64_t lo,
		   int64_t hi, struct diag *d)
{
	if (v >= lo && v <= hi)
		return true;
	if (hi == INT64_MAX)
		diag_addf(d, "%s: \"%s\": must be a non-negative integer", whom,
			  key);
	else
		diag_addf(d, "%s: \"%s\": must be an integer from %" PRId64
			  " to %" PRId64, whom, key, lo, hi);
	return false;
}

/* The numbers and the kind of r (its strings are checked where they are
 * read). */
static bool numbers_ok(const char *whom, const struct resv *r, struct diag *d)
{
	if ((unsigned)r->kind >= USAGE_KINDS) {
		diag_addf(d, "%s: \"kind\": not pod, job or claim", whom);
		return false;
	}
	if (!int_ok(whom, "perPod", r->per_pod, 1, RESV_UNITS_MAX, d) ||
	    !int_ok(whom, "slots", r->slots, 1, RESV_UNITS_MAX, d) ||
	    !int_ok(whom, "generation", r->generation, 0, INT64_MAX, d) ||
	    !int_ok(whom, "at", r->at_ms, 0, INT64_MAX, d))
		return false;
	if (r->rides && (r->kind != USAGE_PODS || !r->owner_job[0])) {
		diag_addf(d, "%s: \"rides\": only a pod with an ownerJob rides", whom);
		return false;
	}
	if (r->kind != USAGE_JOBS && r->slots != 1) {
		diag_addf(d, "%s: \"slots\": must be 1 for a %s", whom,
			  kind_names[r->kind]);
		return false;
	}
	return true;
}

/* A record built in memory (resv_doc_add): every string terminated in its
 * array and valid, the numbers in range. */
static bool check_record(const char *whom, const struct resv *r,
			 struct diag *d)
{
	for (size_t i = 0; i < sizeof(string_fields) / sizeof(string_fields[0]); i++) {
		const struct field *f = &string_fields[i];
		const char *s = cfield_of(r, f);
		const char *end = memchr(s, '\0', f->max + 1);

		if (!end) {
			diag_addf(d, "%s: \"%s\": not terminated within %zu bytes",
				  whom, f->key, f->max);
			return false;
		}
		if (!string_ok(whom, f, s, (size_t)(end - s), d))
			return false;
	}
	return numbers_ok(whom, r, d);
}

/* ---- decoding ----------------------------------------------------------- */

static bool read_string(const char *whom, const json_t *rec,
			const struct field *f, struct resv *out, struct diag *d)
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
	if (!string_ok(whom, f, json_string_value(v), len, d))
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
		for (int k = 0; k < USAGE_KINDS; k++)
			if (strcmp(json_string_value(v), kind_names[k]) == 0 &&
			    json_string_length(v) == strlen(kind_names[k])) {
				*out = (enum usage_kind)k;
				return true;
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
	if (!read_string(whom, rec, &string_fields[0], out, d))
		return false;
	who(whom, sizeof(whom), "reservations: record", index, out->uid);
	if (!read_kind(whom, rec, &out->kind, d))
		return false;
	for (size_t i = 1; i < sizeof(string_fields) / sizeof(string_fields[0]); i++)
		if (!read_string(whom, rec, &string_fields[i], out, d))
			return false;
	if (!read_int(whom, rec, "perPod", &out->per_pod, d) ||
	    !read_int(whom, rec, "slots", &out->slots, d) ||
	    !read_int(whom, rec, "generation", &out->generation, d) ||
	    !read_int(whom, rec, "at", &out->at_ms, d))
		return false;
	return read_rides(whom, rec, out, d) && numbers_ok(whom, out, d);
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
	add_string(sb, "kind", kind_names[r->kind], false);
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

/* ---- records ------------------------------------------------------------ */

static bool copy_field(const char *whom, const struct field *f,
		       const char *s, struct resv *out, struct diag *d)
{
	size_t len;

	s = s ? s : "";
	len = strlen(s);
	if (!string_ok(whom, f, s, len, d))
		return false;
	memcpy(field_of(out, f), s, len + 1);
	return true;
}

int resv_set(struct resv *out, const struct usage_item *it,
	     const char *replica, int64_t at_ms, struct diag *d)
{
	const char *values[] = {it->uid,    it->namespace, it->name,
				it->tenant, it->flavor,    it->owner_job_uid,
				replica};
	char whom[200];

	memset(out, 0, sizeof(*out));
	if (it->uid && strlen(it->uid) <= RESV_UID_MAX)
		snprintf(whom, sizeof(whom), "reservation \"%s\"", it->uid);
	else
		snprintf(whom, sizeof(whom), "reservation");
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++)
		if (!copy_field(whom, &string_fields[i], values[i], out, d))
			return -1;
	out->kind = it->kind;
	out->per_pod = it->per_pod;
	out->slots = it->slots;
	out->generation = it->generation;
	out->at_ms = at_ms;
	return numbers_ok(whom, out, d) ? 0 : -1;
}

/* Where uid is, or where it would go: the first record not below it. */
static size_t lower_bound(const struct resv_doc *doc, const char *uid)
{
	size_t lo = 0, hi = doc->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (strcmp(doc->items[mid].uid, uid) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

const struct resv *resv_doc_find(const struct resv_doc *doc, const char *uid)
{
	size_t i = lower_bound(doc, uid);

	return i < doc->n && strcmp(doc->items[i].uid, uid) == 0
		       ? &doc->items[i]
		       : NULL;
}

int resv_doc_add(struct resv_doc *doc, const struct resv *r, struct diag *d)
{
	char whom[200];
	size_t i;

	/* r->uid is checked to end within its array before it is quoted. */
	if (r->uid[0] && memchr(r->uid, '\0', sizeof(r->uid)))
		snprintf(whom, sizeof(whom), "reservation \"%s\"", r->uid);
	else
		snprintf(whom, sizeof(whom), "reservation");
	if (!check_record(whom, r, d))
		return -1;
	i = lower_bound(doc, r->uid);
	if (i < doc->n && strcmp(doc->items[i].uid, r->uid) == 0) {
		doc->items[i] = *r;
		return 1;
	}
	if (doc->n >= RESV_MAX) {
		diag_addf(d, "reservations: %d pending in this quota domain, the most it holds",
			  RESV_MAX);
		return -1;
	}
	if (doc->n == doc->cap) {
		size_t cap = doc->cap ? doc->cap * 2 : 16;
		struct resv *items;

		if (cap > RESV_MAX)
			cap = RESV_MAX;
		items = realloc(doc->items, cap * sizeof(*items));
		if (!items)
			return -2;
		doc->items = items;
		doc->cap = cap;
	}
	memmove(&doc->items[i + 1], &doc->items[i],
		(doc->n - i) * sizeof(*doc->items));
	doc->items[i] = *r;
	doc->n++;
	return 0;
}

bool resv_doc_remove(struct resv_doc *doc, const char *uid)
{
	size_t i = lower_bound(doc, uid);

	if (i >= doc->n || strcmp(doc->items[i].uid, uid) != 0)
		return false;
	memmove(&doc->items[i], &doc->items[i + 1],
		(doc->n - i - 1) * sizeof(*doc->items));
	doc->n--;
	return true;
}

/* now - then, 0 when then is later. */
static uint64_t age(uint64_t now, uint64_t then)
{
	return now > then ? now - then : 0;
}

size_t resv_doc_prune(struct resv_doc *doc,
		      bool (*observed_since)(void *ctx, const char *uid,
					     uint64_t *since_ms),
		      void *ctx, uint64_t now_ms, uint64_t grace_ms,
		      uint64_t ttl_ms)
{
	size_t kept = 0, n = doc->n;

	for (size_t i = 0; i < n; i++) {
		const struct resv *r = &doc->items[i];
		uint64_t since = 0;
		bool drop;

		if (observed_since && observed_since(ctx, r->uid, &since))
			drop = age(now_ms, since) >= grace_ms;
		else
			drop = age(now_ms, (uint64_t)r->at_ms) > ttl_ms;
		if (drop)
			continue;
		if (kept != i)
			doc->items[kept] = *r;
		kept++;
	}
	doc->n = kept;
	return n - kept;
}

size_t resv_doc_drop(struct resv_doc *doc,
		     bool (*drop)(void *ctx, const struct resv *r), void *ctx)
{
	size_t kept = 0, n = doc->n;

	for (size_t i = 0; i < n; i++) {
		if (drop(ctx, &doc->items[i]))
			continue;
		if (kept != i)
			doc->items[kept] = doc->items[i];
		kept++;
	}
	doc->n = kept;
	return n - kept;
}

enum resv_verdict resv_judge(const struct resv *r, const struct resv_sight *s,
			     uint64_t now_ms, uint64_t grace_ms, uint64_t ttl_ms,
			     bool *prune)
{
	uint64_t at = r->at_ms > 0 ? (uint64_t)r->at_ms : 0;
	enum resv_verdict v;
	bool p;

	if (s->shown && s->gone) {
		v = RESV_VOID;
		p = true;
	} else if (s->shown && s->generation >= r->generation) {
		v = s->active ? RESV_SHOWN : RESV_VOID;
		p = age(now_ms, s->since_ms) >= grace_ms;
	} else if (age(now_ms, at) > ttl_ms) {
		v = RESV_VOID; /* never shown (at its generation) within the TTL */
		p = true;
	} else if (s->shown) {
		v = RESV_PENDING; /* a new generation, not shown yet */
		p = false;
	} else if ((s->name_taken && age(now_ms, at) >= grace_ms &&
		    (!s->name_freed_ms || age(s->name_freed_ms, at) >= grace_ms)) ||
		   (s->listed_ms && s->listed_ms > at && s->listed_ms - at >= grace_ms)) {
		v = RESV_VOID;
		p = true;
	} else {
		v = RESV_PENDING;
		p = false;
	}
	if (prune)
		*prune = p;
	return v;
}

bool resv_equal(const struct resv *a, const struct resv *b)
{
	for (size_t i = 0; i < sizeof(string_fields) / sizeof(string_fields[0]); i++)
		if (strcmp(cfield_of(a, &string_fields[i]),
			   cfield_of(b, &string_fields[i])) != 0)
			return false;
	return a->kind == b->kind && a->per_pod == b->per_pod &&
	       a->slots == b->slots && a->generation == b->generation &&
	       a->at_ms == b->at_ms && a->rides == b->rides;
}

int64_t resv_units(const struct resv *r)
{
	return r->kind == USAGE_JOBS ? r->per_pod * r->slots : r->per_pod;
}

int64_t resv_doc_sum(const struct resv_doc *doc, const char *tenant,
		     const char *flavor,
		     bool (*counted)(void *ctx, const struct resv *r),
		     void *ctx)
{
	int64_t sum = 0;

	for (size_t i = 0; i < doc->n; i++) {
		const struct resv *r = &doc->items[i];

		if (strcmp(r->tenant, tenant) != 0 || strcmp(r->flavor, flavor) != 0)
			continue;
		if (r->rides || (counted && counted(ctx, r)))
			continue;
		sum += resv_units(r);
	}
	return sum;
}

/* ---- the ConfigMap of a domain ------------------------------------------ */

/* The part of a domain name after the prefix, and the hash's digits. */
#define HASH_DIGITS 16
#define CUT_AT (RESV_DOMAIN_NAME_SIZE - 1 - 1 - HASH_DIGITS)

static bool alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool hexdigit(char c)
{
	return (c >= 'a' && c <= 'f') || (c >= '0' && c <= '9');
}

/* s[0, n) is kept as it is: a subdomain (only [a-z0-9-.], every '.'
 * between two letters or digits, a letter or digit at both ends), at most
 * 253 bytes, not ending in '-' and 16 hex digits. */
static bool keeps_as_is(const char *s, size_t n)
{
	if (n == 0 || n > RESV_DOMAIN_NAME_SIZE - 1 || !alnum(s[0]) ||
	    !alnum(s[n - 1]))
		return false;
	for (size_t i = 0; i < n; i++) {
		if (alnum(s[i]) || s[i] == '-')
			continue;
		if (s[i] != '.' || !alnum(s[i - 1]) || !alnum(s[i + 1]))
			return false;
	}
	if (n > HASH_DIGITS && s[n - HASH_DIGITS - 1] == '-') {
		for (size_t i = n - HASH_DIGITS; i < n; i++)
			if (!hexdigit(s[i]))
				return true;
		return false;
	}
	return true;
}

int resv_domain_name(const char *cohort, const char *tenant, char *out,
		     size_t size)
{
	const char *prefix = cohort ? "gpugate-usage-c-" : "gpugate-usage-t-";
	const char *raw = cohort ? cohort : tenant ? tenant : "";
	size_t plen = strlen(prefix), rlen = strlen(raw), n;
	uint64_t h;

	if (size < RESV_DOMAIN_NAME_SIZE) {
		if (size)
			out[0] = '\0';
		return -1;
	}
	if (plen + rlen < size) {
		memcpy(out, prefix, plen);
		memcpy(out + plen, raw, rlen + 1);
		if (keeps_as_is(out, plen + rlen))
			return (int)(plen + rlen);
	}
	/* Hashed: the mapped name, cut, then '-' and the hash of the
	 * unchanged name. */
	h = hash_fnv1a(hash_fnv1a(HASH_FNV1A_SEED, prefix), raw);
	memcpy(out, prefix, plen);
	n = plen;
	for (size_t i = 0; i < rlen && n < CUT_AT; i++) {
		char c = raw[i];

		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		else if (!alnum(c) && c != '.')
			c = '-';
		out[n++] = c;
	}
	/* A '.' stays only between two letters or digits; the next character
	 * after the last one is the suffix's '-'. */
	for (size_t i = plen; i < n; i++)
		if (out[i] == '.' &&
		    (!alnum(out[i - 1]) || i + 1 >= n || !alnum(out[i + 1])))
			out[i] = '-';
	snprintf(out + n, size - n, "-%016" PRIx64, h);
	return (int)(n + 1 + HASH_DIGITS);
}
