/*
 * reservations-json: the reservation document (usage/reservations.h) as
 * gpugate serve stores it: in one ConfigMap per quota domain in gpugate's
 * namespace, under data.reservations, as a JSON array of records:
 *
 *   {"uid":"…","kind":"pod|job|claim","namespace":"…","name":"…",
 *    "tenant":"…","flavor":"…","perPod":1,"slots":1,"ownerJob":"…"|null,
 *    "generation":1,"replica":"gpugate-7d9…","at":1764680000123,
 *    "rides":true}      (rides: only when true, issue #26)
 *
 * This module decodes and encodes that text.  It does no I/O and keeps no
 * state: kube/shared-io.c reads and writes the ConfigMap with
 * kube_cas_update() (kube/client.h), parsing it and writing it back in its
 * mutate callback.
 *
 * Fail closed: a document that does not decode is an error with one
 * precise line in the diagnostics, never a partial read (a record dropped
 * in silence would be quota handed out twice); the caller then denies what
 * needs quota.  The decoder holds every record to the model's rules
 * (resv_string_ok(), resv_numbers_ok()), the ones resv_doc_add() holds a
 * record to, so nothing the model holds is refused when read back.
 */
#ifndef GPUGATE_KUBE_RESERVATIONS_JSON_H
#define GPUGATE_KUBE_RESERVATIONS_JSON_H

#include "usage/reservations.h"

#include <jansson.h>
#include <stddef.h>

struct diag;

/* The key of the ConfigMap's data that holds the document. */
#define RESV_DATA_KEY "reservations"

/*
 * Reads data.reservations of a ConfigMap into *out (initialised here;
 * release it whatever the result).  NULL (the ConfigMap does not exist),
 * a ConfigMap without data, or data without the key: an empty document,
 * 0.  Else the value must be a string holding a JSON array (strict:
 * codec/jsonfast.h, duplicate keys refused) of at most RESV_MAX records,
 * each an object with every member above, of the right type, strings
 * within their limits and without NUL bytes, numbers in range, uids
 * unique.  Members it does not know are ignored (a newer replica may add
 * some during a rolling upgrade; resv_doc_write() does not keep them).
 *
 * Returns 0, or -1 with *out empty and one line in d, e.g.
 *
 *   "reservations: not JSON: unexpected character 'x' (line 1, column 2)"
 *   "reservations: record 4: \"slots\": must be an integer from 1 to 1000000"
 *   "reservations: record 7 (uid \"u1\"): missing \"tenant\""
 *   "reservations: records 2 and 5 have the same uid \"u1\""
 *   "reservations: 3001 records, more than 3000"
 *
 * (records are counted from 0, in the order of the document).
 */
int resv_doc_parse(const json_t *configmap, struct resv_doc *out,
		   struct diag *d);

/*
 * Sets configmap's data.reservations to the document, compact, records by
 * uid, members in the order above (ownerJob null when ""), creating data
 * when absent; nothing else of the ConfigMap is touched.  Returns 0, or -1
 * when configmap (or its data) is not an object or memory ran out (the
 * ConfigMap is then unchanged).
 */
int resv_doc_write(const struct resv_doc *doc, json_t *configmap);

/* The document's text alone (what resv_doc_write() stores), NUL-terminated,
 * the caller's to free(); NULL when memory ran out. */
char *resv_doc_encode(const struct resv_doc *doc, size_t *len);

#endif
