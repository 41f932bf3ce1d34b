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
 * The same, except that the values at the object-key paths of `skip` (a
 * NULL-terminated list of at most 8 paths of at most 8 keys, written
 * "request/object/metadata/managedFields") are checked to be JSON but not
 * built: each reads as null.  For data the caller never looks at and that
 * is expensive to build (a Pod's managedFields is a third of an
 * AdmissionReview, in small objects).  Duplicate keys inside a skipped
 * value are not looked for.
 */
json_t *jsonfast_parse_skip(const char *buf, size_t len,
			    const char *const *skip, char *err, size_t errsz);

#endif
