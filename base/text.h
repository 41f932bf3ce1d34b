/*
 * text: small helpers for messages users read.
 *
 * Messages quote user input with a length cap ("%.63s"), which can cut a
 * multi-byte character in half; the apiserver (and jansson) refuse a
 * string that is not UTF-8.  Every message is cleaned before it leaves.
 */
#ifndef GPUGATE_TEXT_H
#define GPUGATE_TEXT_H

#include <stddef.h>
#include <stdint.h>

/*
 * Makes s valid UTF-8 in place: an incomplete sequence at the end is cut,
 * any other invalid byte becomes '?', control characters become ' '.
 */
void text_clean(char *s);

/* Length of the valid UTF-8 character at s (1..4), 0 when the bytes there
 * are not one (invalid, or cut by the end of the string). */
size_t text_utf8_len(const char *s);

/* Cuts s to at most max bytes (max >= 3) at a character boundary, ending
 * with "..." when anything was cut. */
void text_clip(char *s, size_t max);

/* "2026-12-02T16:27:18Z" (RFC 3339 in UTC, as Kubernetes writes times;
 * fractional seconds ignored) -> Unix seconds; 0 when absent or
 * malformed. */
int64_t text_unix_time(const char *s);

/* Room for any uint64_t in decimal, with its NUL. */
#define TEXT_DECIMAL_MAX 21

/* v in decimal, written at the end of buf; returns where it starts.  For
 * the request path, where snprintf costs more than the work around it. */
const char *text_decimal(char buf[TEXT_DECIMAL_MAX], uint64_t v);

/* v in decimal, sign included, written at the end of buf; returns where it
 * starts. */
const char *text_int(char buf[TEXT_DECIMAL_MAX + 1], int64_t v);

/*
 * buf = the strings given, up to a NULL, one after the other: what
 * snprintf(buf, size, "%s%s...") writes, cut to size - 1 bytes and always
 * ended (size > 0).  For the request path, like text_decimal().
 */
void text_cat(char *buf, size_t size, ...) __attribute__((sentinel));

/* Longest strings text_distance() measures; longer ones are far apart. */
#define TEXT_DISTANCE_MAX_LEN 255

/*
 * The Levenshtein distance between a and b: the fewest insertions,
 * deletions and substitutions of one byte that turn one into the other
 * (names are ASCII, so bytes are characters).  Returns max + 1 as soon as
 * the distance is known to exceed max, and for a string longer than
 * TEXT_DISTANCE_MAX_LEN that is not equal to the other.  For "did you
 * mean" in messages.
 */
size_t text_distance(const char *a, const char *b, size_t max);

#endif
