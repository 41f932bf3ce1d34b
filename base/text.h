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

/*
 * A duration of s seconds as an operator reads it, two units at most:
 * "45s", "3m", "3m20s", "1h2m", "2d3h" (a negative s counts as 0), like
 * snprintf (size > 0).
 */
void text_duration(int64_t s, char *buf, size_t size);

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

/*
 * "Did you mean": the one rule for which known name a message offers for
 * an unknown one (a class in a manifest or a policy, a flavor, a command,
 * an option, an option's value).  A known name is offered when it differs
 * only in case (the closest), or by at most TEXT_NEAREST_MAX_EDITS edits
 * that do not rewrite the whole name; among several, the fewest edits win,
 * then the first considered.
 *
 *	struct text_nearest n = {0};
 *	for (each known name k) text_nearest_consider(&n, name, k);
 *	printf("unknown class \"%s\"%s", name, text_nearest_hint(&n, "", buf, sizeof(buf)));
 */
#define TEXT_NEAREST_MAX_EDITS 2

struct text_nearest {
	const char *name; /* the known name kept (borrowed), or NULL */
	size_t edits;
};

/* Keeps known for name when it is closer than the one kept. */
void text_nearest_consider(struct text_nearest *n, const char *name,
			   const char *known);

/* buf = " (did you mean \"PREFIXNAME\"?)" for the name kept (prefix: "--"
 * for an option, else ""), else "" (a known name too long for buf is not
 * offered); returns buf.  size > 0. */
const char *text_nearest_hint(const struct text_nearest *n, const char *prefix,
			      char *buf, size_t size);

/*
 * A controller's one-line record "a=N b=N c=N t=TEXT": three whole
 * numbers of at most 18 digits, named by the three letters of names in
 * that order, then t= and a non-empty rest without a newline.  The
 * numbers into v, the rest into *tail (pointing into text).  0, or -1
 * when text is not such a record.
 */
int text_record_parse(const char *text, const char names[3], int64_t v[3],
		      const char **tail);

#endif
