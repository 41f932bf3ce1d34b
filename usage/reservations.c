/*
 * reservations: the reservation document as values (usage/reservations.h).
 *
 * One set of rules, resv_string_ok() and resv_numbers_ok(), holds a record
 * to what a document may hold: the decoder (kube/reservations-json.c) runs
 * them on every record it reads and resv_doc_add() on every record it is
 * given, so that a document this module wrote always reads back.
 */
#include "usage/reservations.h"

#include "base/diag.h"
#include "base/hash.h"
#include "base/text.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[USAGE_KINDS] = {
	[USAGE_PODS] = "pod",
	[USAGE_JOBS] = "job",
	[USAGE_CLAIMS] = "claim",
};

const char *resv_kind_name(enum usage_kind kind)
{
	return (unsigned)kind < USAGE_KINDS ? kind_names[kind] : NULL;
}

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

#define FIELD(k, m, x, e) {k, offsetof(struct resv, m), x, e}
const struct resv_field resv_string_fields[RESV_STRING_FIELDS] = {
	FIELD("uid", uid, RESV_UID_MAX, false),
	FIELD("namespace", namespace, RESV_NAMESPACE_MAX, false),
	FIELD("name", name, RESV_NAME_MAX, false),
	FIELD("tenant", tenant, RESV_TENANT_MAX, false),
	FIELD("flavor", flavor, RESV_FLAVOR_MAX, false),
	FIELD("ownerJob", owner_job, RESV_UID_MAX, true),
	FIELD("replica", replica, RESV_NAME_MAX, false),
};
#undef FIELD

static char *field_of(struct resv *r, const struct resv_field *f)
{
	return (char *)r + f->off;
}

static const char *cfield_of(const struct resv *r, const struct resv_field *f)
{
	return (const char *)r + f->off;
}

/*
 * What is wrong with s[0, len) as the value of f, or NULL.  Strings are
 * names and uids: UTF-8 without control characters (text_clean() changes
 * nothing), within f->max bytes.
 */
static const char *string_problem(const struct resv_field *f, const char *s,
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

bool resv_string_ok(const char *whom, const struct resv_field *f,
		    const char *s, size_t len, struct diag *d)
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

bool resv_numbers_ok(const char *whom, const struct resv *r, struct diag *d)
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
	for (size_t i = 0; i < RESV_STRING_FIELDS; i++) {
		const struct resv_field *f = &resv_string_fields[i];
		const char *s = cfield_of(r, f);
		const char *end = memchr(s, '\0', f->max + 1);

		if (!end) {
			diag_addf(d, "%s: \"%s\": not terminated within %zu bytes",
				  whom, f->key, f->max);
			return false;
		}
		if (!resv_string_ok(whom, f, s, (size_t)(end - s), d))
			return false;
	}
	return resv_numbers_ok(whom, r, d);
}

/* ---- records ------------------------------------------------------------ */

static bool copy_field(const char *whom, const struct resv_field *f,
		       const char *s, struct resv *out, struct diag *d)
{
	size_t len;

	s = s ? s : "";
	len = strlen(s);
	if (!resv_string_ok(whom, f, s, len, d))
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
		if (!copy_field(whom, &resv_string_fields[i], values[i], out, d))
			return -1;
	out->kind = it->kind;
	out->per_pod = it->per_pod;
	out->slots = it->slots;
	out->generation = it->generation;
	out->at_ms = at_ms;
	return resv_numbers_ok(whom, out, d) ? 0 : -1;
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
	for (size_t i = 0; i < RESV_STRING_FIELDS; i++)
		if (strcmp(cfield_of(a, &resv_string_fields[i]),
			   cfield_of(b, &resv_string_fields[i])) != 0)
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
