/*
 * jsonfast: a strict JSON (RFC 8259) reader that builds jansson values.
 *
 * Reading a review was two thirds of a request's instructions with
 * json_loadb(), whose lexer fetches the input a character at a time
 * through a callback.  This reader scans the buffer directly (runs of
 * plain string bytes are validated and copied at once) and builds the same
 * jansson values, so everything downstream is unchanged.
 *
 * It accepts exactly what json_loadb(JSON_REJECT_DUPLICATES |
 * JSON_ALLOW_NUL | JSON_DECODE_ANY) accepts and builds json_equal values
 * (a differential fuzz harness, tests/fuzz/json_fuzz.c, holds it to that):
 * UTF-8 only (no overlong forms, no surrogates), \u escapes with surrogate
 * pairs, \u0000 in strings but not in keys, integers that fit json_int_t,
 * reals that strtod() reads finite, nesting at most 2048 deep, nothing but
 * white space after the value.  Error texts are its own.
 */
#ifndef GPUGATE_JSONFAST_H
#define GPUGATE_JSONFAST_H

#include <jansson.h>
#include <stddef.h>

#define JSONFAST_MAX_DEPTH 2048

/*
 * Parses buf[0..len).  Returns a new value (the caller owns it), or NULL
 * with a one-line reason in err: what is wrong, then "(line L, column C)"
 * (1-based, columns in bytes).
 */
json_t *jsonfast_parse(const char *buf, size_t len, char *err, size_t errsz);

/*
 * A set of values not to build, for data the caller never looks at and
 * that is expensive to build (a Pod's managedFields is a third of an
 * AdmissionReview, in small objects).  `paths` is a NULL-terminated list
 * of paths from the document's top, keys separated by '/':
 *
 *   "request/object/metadata/managedFields"
 *   "request/object|oldObject/spec/containers/[]/image|ports"
 *
 * A key "[]" stands for every element of an array; "a|b" for either key.
 * Keys cannot contain '/' or '|', and a path is at most 16 keys deep; all
 * paths together, every alternative spelled out, make at most 511 keys.
 * Returns NULL with a reason in err when they do not fit.  The set is
 * read-only once made: threads may share it.
 */
struct jsonfast_skip;

struct jsonfast_skip *jsonfast_skip_new(const char *const *paths, char *err,
					size_t errsz);
void jsonfast_skip_free(struct jsonfast_skip *skip);

/*
 * jsonfast_parse(), except that the values at the paths of `skip` (NULL:
 * none) are checked to be JSON but not built.  A skipped member is left out
 * of its object, as if absent; a skipped array element reads as null (the
 * indexes after it stay true).  Duplicate keys are not looked for inside a
 * skipped value, nor among the skipped members themselves: nothing reads
 * them.
 */
json_t *jsonfast_parse_skip(const char *buf, size_t len,
			    const struct jsonfast_skip *skip, char *err,
			    size_t errsz);

#endif
