/*
 * patch: RFC 6902 JSON Patch, produced by diffing and checked by a strict
 * applier.
 *
 * The webhook applies its decision to a deep copy of the admitted object and
 * diffs the original against the copy; the kube-apiserver applies the result
 * strictly (evanphx/json-patch), so every patch patch_diff() returns must
 * apply cleanly under a strict RFC 6902 implementation.  patch_apply() is
 * such an implementation: tests, `gpugate explain` and the fuzz harness use
 * it to prove the round trip.
 *
 * Pointers follow RFC 6901: "" is the whole document, every other pointer
 * starts with "/", and inside a reference token "~" is written "~0" and "/"
 * is written "~1" (the label key "gpugate.io/class" is the token
 * "gpugate.io~1class").
 *
 * Object keys containing NUL bytes are not supported (jansson's parser
 * rejects them, so they never reach the webhook).
 */
#ifndef GPUGATE_PATCH_H
#define GPUGATE_PATCH_H

#include "base/strbuf.h"

#include <jansson.h>
#include <stddef.h>

struct diag;

/*
 * The operations that turn `from` into `to`, as a new JSON array (empty when
 * the two are json_equal); the caller owns it.  NULL only when out of memory.
 * Neither argument may be NULL; neither is modified and the patch shares no
 * value with them.
 *
 * Only "add", "remove" and "replace" are produced, and each operation is
 * valid at the point it is applied, in array order:
 *
 *   - whole document: when the two differ and are not both objects or both
 *     arrays, one "replace" at "".
 *   - objects: first a "remove" for each key only in `from`, in `from`'s key
 *     order; then, in `to`'s key order, an "add" carrying the whole value for
 *     each key only in `to` (so a missing parent such as metadata.labels is
 *     added as one map, never member by member), a recursion for each key
 *     whose values are both objects or both arrays, and a "replace" for each
 *     other key whose values are not json_equal (a type change is a
 *     "replace").  Numbers compare as json_equal does: 1 and 1.0 differ.
 *   - arrays: the common prefix is diffed element by element (these
 *     operations never change a length); extra elements of `to` are "add"ed
 *     at explicit increasing indices, each equal to the length at that point
 *     (never "-"); surplus elements of `from` are "remove"d from the end
 *     backwards, highest index first.
 */
json_t *patch_diff(const json_t *from, const json_t *to);

/*
 * The same operations as patch_diff(), appended to `out` as JSON text: the
 * exact bytes json_dumps(patch_diff(from, to), JSON_COMPACT) gives, without
 * building the array ("[]" when there is nothing to do).  This is what the
 * webhook sends; it costs a fraction of building and dumping the array.
 * Returns the number of operations, or -1 when out of memory or over the
 * strbuf's cap (the text is then incomplete).
 */
long patch_diff_write(const json_t *from, const json_t *to,
		      struct strbuf *out);

/*
 * Applies `patch` to a deep copy of `doc` (not NULL) and returns the new
 * document (the caller owns it); `doc` and `patch` are not modified and the
 * result shares no value with them.  `d` may be NULL.
 *
 * Strict RFC 6902: all six operations (add, remove, replace, move, copy,
 * test).  The first violation stops the patch: the result is NULL and `d`
 * gets exactly one line naming the operation's 0-based index, its op and its
 * path, then what is wrong, e.g.
 *
 *   op 3 (add /metadata/labels/x): parent /metadata/labels does not exist
 *
 * Violations: the patch is not an array; an operation is not an object; "op"
 * missing, not a string or unknown; "path" (or "from" for move and copy)
 * missing or not a string; a pointer that is neither "" nor starts with "/";
 * "~" followed by anything but "0" or "1"; an array index with a sign, a
 * leading zero or a non-digit; an index greater than the length for add, or
 * not less than it for remove, replace, test, move and copy sources; "-"
 * outside the last token of an add or move/copy destination; a parent that
 * does not exist or is not an object or array; a missing member for remove,
 * replace and test or a missing "from"; a move into its own child; removing
 * the whole document; "value" missing for add, replace and test; a failed
 * test.  Members an operation does not use are ignored (RFC 6902 §4).
 *
 * "add" of an existing object member replaces it.  "test" compares with
 * json_equal, which is stricter than RFC 6902 §4.6 about numbers: 1 and 1.0
 * differ.  A move whose "from" equals its "path" is a no-op once "from" is
 * known to exist.  Out of memory is a failure too, its message ends in
 * "out of memory".
 */
json_t *patch_apply(const json_t *doc, const json_t *patch, struct diag *d);

/*
 * Appends "/" and `token`, escaped as an RFC 6901 reference token, to the
 * NUL-terminated pointer of length *len in buf[bufsz] and updates *len.
 * Returns 0, or -1 with buf and *len unchanged and a message in `d` when the
 * result (with its NUL) would not fit in bufsz bytes.
 *
 *   char p[128] = "/metadata/labels";
 *   size_t n = strlen(p);
 *   patch_pointer_append(p, sizeof(p), &n, "gpugate.io/class", d);
 *   -> "/metadata/labels/gpugate.io~1class"
 */
int patch_pointer_append(char *buf, size_t bufsz, size_t *len,
			 const char *token, struct diag *d);

#endif
