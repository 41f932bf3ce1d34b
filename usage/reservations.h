/*
 * reservations: the reservation document of a quota domain, shared between
 * replicas (docs/design/shared-usage-store.md), as values.
 *
 * Quota admitted at /validate but not yet shown by the API watch is a
 * reservation.  The reservations of one quota domain (a cohort, or a
 * tenant in none) are one document of records (struct resv), which every
 * replica reads and writes by compare-and-swap: the shared usage backend
 * (usage/shared-backend.h) decides on it, through a store injected into
 * it.  gpugate serve keeps each document in a ConfigMap, as JSON
 * (kube/reservations-json.h encodes and decodes it, kube/shared-io.h is
 * the store).
 *
 * This module is the document's model: the rules of a record, the
 * operations a replica's decision and the leader's clean-up need, what a
 * record counts for, and the name of a domain's document.  It does no I/O,
 * knows no JSON and keeps no state.
 *
 * Fail closed: nothing this module adds to a document is refused when read
 * back: resv_doc_add() holds a record to the rules the decoder reads by
 * (resv_string_ok(), resv_numbers_ok()).
 */
#ifndef GPUGATE_USAGE_RESERVATIONS_H
#define GPUGATE_USAGE_RESERVATIONS_H

#include "usage/usage.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct diag;

/* A domain refuses reservations past this many (the design: a ConfigMap
 * holds 1 MiB, about 4,000 records); a document with more is refused. */
#define RESV_MAX 3000

/* Longest strings of a record, in bytes (Kubernetes limits): a uid is at
 * most 128 bytes (metadata.uid, by convention an RFC 4122 UUID of 36), a
 * namespace a DNS label (63), an object name (the replica is a pod's) a
 * DNS subdomain (253); tenant and flavor names are label values (63,
 * policy/validate.c). */
#define RESV_UID_MAX 128
#define RESV_NAMESPACE_MAX 63
#define RESV_NAME_MAX 253
#define RESV_TENANT_MAX 63
#define RESV_FLAVOR_MAX 63

/* perPod and slots are 1..RESV_UNITS_MAX (POLICY_MAX_QUOTA: nothing in a
 * valid policy can be granted more), so perPod x slots, and the sum of
 * RESV_MAX records, never overflow. */
#define RESV_UNITS_MAX 1000000

/*
 * One reservation.  Strings are NUL-terminated inside their arrays; every
 * one is non-empty but owner_job, which is "" for none (JSON null).
 */
struct resv {
	char uid[RESV_UID_MAX + 1];             /* the object's metadata.uid */
	enum usage_kind kind;                   /* USAGE_PODS, _JOBS, _CLAIMS */
	char namespace[RESV_NAMESPACE_MAX + 1];
	char name[RESV_NAME_MAX + 1];
	char tenant[RESV_TENANT_MAX + 1];
	char flavor[RESV_FLAVOR_MAX + 1];
	char owner_job[RESV_UID_MAX + 1];       /* uid of a pod's Job, or "" */
	char replica[RESV_NAME_MAX + 1];        /* the pod that reserved */
	int64_t per_pod;                        /* units one pod holds */
	int64_t slots;                          /* a Job's gang; 1 otherwise */
	int64_t generation;                     /* metadata.generation, >= 0 */
	int64_t at_ms;                          /* reserving replica's wall
						 * clock, ms since the epoch */
	/* A pod that takes a slot of its Job's gang (ownerJob) and holds no
	 * units of its own: "rides":true, written only when true (an older
	 * replica ignores it; a record without it is false). */
	bool rides;
};

/*
 * The document: records sorted by uid (strcmp), uids unique, at most
 * RESV_MAX of them.  Every function here keeps that; change items only
 * through them.  The sort makes lookups a binary search and the encoding
 * deterministic: two replicas holding the same set write the same bytes.
 *
 * A struct resv is about 1 KiB, so a full document is about 3 MiB of
 * memory; inserting moves the records after the new one (a memmove of at
 * most that much, a fraction of the PUT it precedes).
 */
struct resv_doc {
	struct resv *items;
	size_t n, cap;
};

/* An empty document; resv_doc_release() frees it and leaves it empty. */
void resv_doc_init(struct resv_doc *doc);
void resv_doc_release(struct resv_doc *doc);

/* ---- the rules of a record --------------------------------------------- */

/* The name of a kind in the document ("pod", "job", "claim"); NULL for
 * none of them. */
const char *resv_kind_name(enum usage_kind kind);

/* A string member of a record: its key in the document, where it is in a
 * struct resv, its longest length in bytes and whether it may be "" (only
 * ownerJob, null in the document). */
struct resv_field {
	const char *key;
	size_t off, max;
	bool may_be_empty;
};

/* The string members, in this order: uid (first: the decoder reads it
 * before the rest, to name the record), namespace, name, tenant, flavor,
 * ownerJob, replica. */
#define RESV_STRING_FIELDS 7
extern const struct resv_field resv_string_fields[RESV_STRING_FIELDS];

/*
 * Whether s[0, len) may be the value of f: within f->max bytes, not empty
 * unless f may be, UTF-8 without NUL or control characters.  false with
 * one line in d naming whom and the key, e.g.
 *
 *   "reservations: record 4 (uid \"u1\"): \"name\": longer than 253 bytes"
 */
bool resv_string_ok(const char *whom, const struct resv_field *f,
		    const char *s, size_t len, struct diag *d);

/*
 * Whether the kind and the numbers of r are a record's (its strings are
 * checked by resv_string_ok()): a known kind, perPod and slots 1 to
 * RESV_UNITS_MAX, slots 1 but for a Job, generation and at non-negative,
 * rides only for a pod with an ownerJob.  false with one line in d.
 */
bool resv_numbers_ok(const char *whom, const struct resv *r, struct diag *d);

/* ---- records ------------------------------------------------------------ */

/*
 * Fills *out from what an object holds (the charge rule's usage_item:
 * uid, kind, namespace, name, tenant, flavor, per_pod, slots,
 * owner_job_uid, generation), who reserves and when.  Returns 0, or -1
 * with one line in d when it would not be a valid record (a string too
 * long or missing, a number out of range), e.g.
 *
 *   "reservation \"u1\": \"name\": longer than 253 bytes"
 */
int resv_set(struct resv *out, const struct usage_item *it,
	     const char *replica, int64_t at_ms, struct diag *d);

/* The record with this uid, or NULL.  Valid until the document changes. */
const struct resv *resv_doc_find(const struct resv_doc *doc, const char *uid);

/*
 * Adds a copy of r, or replaces the record of the same uid (a retried
 * admission: the last one counts).  Returns 0 when added, 1 when replaced,
 * -1 with one line in d when the document holds RESV_MAX records already
 * ("reservations: 3000 pending in this quota domain, the most it holds")
 * or r is not a valid record (the decoder would refuse it: e.g. an
 * unterminated or empty string, slots 0), -2 when memory ran out.  The
 * document is unchanged on failure.
 */
int resv_doc_add(struct resv_doc *doc, const struct resv *r, struct diag *d);

/* Removes the record of this uid; false when there is none. */
bool resv_doc_remove(struct resv_doc *doc, const char *uid);

/*
 * The leader's clean-up.  observed_since(ctx, uid, &since) says whether
 * the watch shows the object of that uid, and since when (*since, on the
 * clock of now_ms); NULL: nothing is observed.  Removes
 *
 *   - records observed for at least grace_ms (now_ms - since >= grace_ms):
 *     every replica's watch has had that long to show them too;
 *   - records never observed and older than ttl_ms (now_ms - at_ms >
 *     ttl_ms): the create failed after /validate.
 *
 * A time in the future (a clock ahead of now_ms) is an age of 0.  Returns
 * how many were removed; the order of the rest is kept.
 */
size_t resv_doc_prune(struct resv_doc *doc,
		      bool (*observed_since)(void *ctx, const char *uid,
					     uint64_t *since_ms),
		      void *ctx, uint64_t now_ms, uint64_t grace_ms,
		      uint64_t ttl_ms);

/*
 * Removes the records for which drop(ctx, r) is true; returns how many.
 * The order of the rest is kept.
 */
size_t resv_doc_drop(struct resv_doc *doc,
		     bool (*drop)(void *ctx, const struct resv *r), void *ctx);

/* ---- what a record counts for ------------------------------------------- */

/*
 * What one replica's watch shows of a record's object (its uid), and of
 * its name.  Times are on the clock of the judge's now_ms.
 */
struct resv_sight {
	bool shown;          /* the uid was listed or watched */
	bool gone;           /* deleted (or not relisted) since */
	bool active;         /* last shown holding quota */
	int64_t generation;  /* the newest generation shown */
	uint64_t since_ms;   /* when that generation was first shown; gone:
			      * when it went */
	bool name_taken;     /* the record's kind, namespace and name are (or
			      * were last) shown under another uid */
	uint64_t name_freed_ms; /* when that uid was deleted; 0: it holds the
				 * name still */
	uint64_t listed_ms;  /* the last (re)list of the record's kind ended;
			      * 0: not listed yet */
};

enum resv_verdict {
	RESV_PENDING, /* counts: what it reserves is not shown yet */
	RESV_SHOWN,   /* the watch shows it holding: the ledger counts it */
	RESV_VOID,    /* counts for nothing: terminal, gone, refused, lost */
};

/*
 * The one rule of what a record counts for on a replica whose watch shows
 * s (docs/design/shared-usage-store.md, "What a record counts for"):
 *
 *   - uid gone: RESV_VOID (a uid never comes back);
 *   - uid shown at the record's generation or newer: RESV_SHOWN when
 *     active, else RESV_VOID (a finished pod, a Job finished or suspended
 *     again);
 *   - uid shown at an older generation (a resume the watch has not shown
 *     yet): RESV_PENDING until the TTL;
 *   - uid never shown: RESV_VOID when its name is shown under another uid
 *     that held it until grace_ms after the record was made at least, and
 *     the record is grace_ms old (the apiserver refused the create:
 *     AlreadyExists; a create admitted is stored within grace_ms, and would
 *     have shown its own uid), or when a list of its kind that ended grace_ms or
 *     more after the record was made did not show it (deleted, or never
 *     stored: e.g. after a restart), or past the TTL (now - at > ttl);
 *     else RESV_PENDING.
 *
 * *prune (may be NULL) says whether the leader may remove the record: a
 * void one always, a shown one grace_ms after it was shown (every other
 * replica's watch has had that long to show it too).  A time in the future
 * is an age of 0.
 */
enum resv_verdict resv_judge(const struct resv *r, const struct resv_sight *s,
			     uint64_t now_ms, uint64_t grace_ms, uint64_t ttl_ms,
			     bool *prune);

/* Whether a and b are the same record, member by member (a retried
 * admission that changes nothing need not be written). */
bool resv_equal(const struct resv *a, const struct resv *b);

/* What a record holds: per_pod x slots for a Job, per_pod otherwise. */
int64_t resv_units(const struct resv *r);

/*
 * The units the records of tenant and flavor hold, but riders (a rider
 * holds a slot of its Job's gang, no units) and those the caller already
 * counts or holds void (counted(ctx, r) true); counted NULL: none.  What
 * the backend adds
 * to the observed usage.  At most RESV_MAX x RESV_UNITS_MAX^2: no
 * overflow.
 */
int64_t resv_doc_sum(const struct resv_doc *doc, const char *tenant,
		     const char *flavor,
		     bool (*counted)(void *ctx, const struct resv *r),
		     void *ctx);

/* ---- the name of a domain ----------------------------------------------- */

/* Room for any domain name, NUL included. */
#define RESV_DOMAIN_NAME_SIZE 254

/*
 * The name of the document of a quota domain (gpugate serve's ConfigMap
 * of it): "gpugate-usage-c-<cohort>" when cohort is not NULL, else
 * "gpugate-usage-t-<tenant>".  Always a valid
 * object name (an RFC 1123 subdomain of at most 253 bytes, as the
 * apiserver checks it), and two different domains never get the same
 * name:
 *
 *   - a name that is valid as it stands is used as it is;
 *   - otherwise (upper case, characters outside [a-z0-9-.], a '.' not
 *     between two letters or digits, no letter or digit at the end, over
 *     253 bytes), or when it already ends like a hashed name ('-' and 16
 *     hex digits), it is lower-cased, every other character and every such
 *     '.' becomes '-', it is cut to 236 bytes, and "-" and the 16 hex
 *     digits of the FNV-1a hash (base/hash.h) of the name before any
 *     change are appended.
 *
 * So names of the first kind are the input itself and never end like
 * names of the second kind, which differ unless 64-bit hashes collide.
 * Returns the length, or -1 when size < RESV_DOMAIN_NAME_SIZE (out is then
 * "" when size > 0).  tenant NULL reads as "".
 */
int resv_domain_name(const char *cohort, const char *tenant, char *out,
		     size_t size);

#endif
