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

#endif
