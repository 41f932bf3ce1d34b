/*
 * jsonout: JSON text written straight into a strbuf.
 *
 * The bytes are exactly those of jansson's json_dumps(v, JSON_COMPACT |
 * JSON_ENCODE_ANY): members in jansson's key order (insertion order), '"'
 * and '\\' escaped, control bytes as \b \f \n \r \t or \u00XX, everything
 * else (UTF-8 included) as is.  Writing text directly costs a fraction of
 * building a tree and dumping it; the response encoder and the patch writer
 * share these two functions.
 *
 * Strings must be valid UTF-8 (they come from the strict request reader or
 * from gpugate's own text).  Failures (memory, the strbuf's cap) are
 * recorded in the strbuf, as for every strbuf append.
 */
#ifndef GPUGATE_JSONOUT_H
#define GPUGATE_JSONOUT_H

#include "base/strbuf.h"

#include <jansson.h>
#include <stddef.h>

/* s[0, n) as a JSON string, quotes included. */
void jsonout_string(struct strbuf *sb, const char *s, size_t n);

/* Any JSON value, compact. */
void jsonout_value(struct strbuf *sb, const json_t *v);

/*
 * Writes v's text once and keeps it: jsonout_value() then copies that text
 * when it meets the object v itself (by pointer), however deep.  For values
 * built once and shared, which must never change after this (webhook/
 * apply.c's checkpoint signal).  At most 16 values; 0, or -1 when full or
 * out of memory (v is then written as any other value).  Thread-safe.
 */
int jsonout_freeze(const json_t *v);

#endif
