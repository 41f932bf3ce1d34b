/*
 * yamlout: a jansson value -> YAML text (block style), the inverse of
 * yamljson for what gpugate writes (`gpugate explain -o yaml`).
 *
 * A string is written plain only when every YAML reader takes it back as
 * that string: it starts with a letter, holds only letters, digits and
 * "-_./" and is none of the YAML 1.1 and 1.2 words for null and booleans
 * (y, n, yes, no, on, off, true, false, null, in any case); any other
 * string is double-quoted, with libyaml's escapes.  Numbers, booleans and
 * null are written as JSON writes them.  Empty objects and arrays are {}
 * and [].  Keys keep their order.
 */
#ifndef GPUGATE_YAMLOUT_H
#define GPUGATE_YAMLOUT_H

#include <jansson.h>

struct strbuf;

/*
 * Appends v as one YAML document (no "---", ends with a newline) to sb.
 * v nests at most YAMLJSON_MAX_DEPTH deep.  Returns 0, or -1 when out of
 * memory or too deep (sb is then marked failed or left partial).
 */
int yamlout_write(const json_t *v, struct strbuf *sb);

#endif
