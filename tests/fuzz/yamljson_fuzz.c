/*
 * libFuzzer driver for codec/yamljson.c.  Any bytes must give either a
 * value or exactly one located message, without crashing, leaking or
 * taking long; a value must read back the same from its own JSON.  Read
 * as a stream (yamljson_parse_all), a one-document input gives the same
 * value, and every document reads back the same from its YAML
 * (codec/yamlout.c).
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -I. \
 *       codec/yamljson.c codec/yamlout.c base/diag.c base/strbuf.c \
 *       tests/fuzz/yamljson_fuzz.c -lyaml -ljansson -o build/yamljson-fuzz
 *   build/yamljson-fuzz -max_len=65536 -timeout=10 \
 *       tests/fuzz/corpus/yamljson
 */
#include "base/diag.h"
#include "base/strbuf.h"
#include "codec/yamljson.h"
#include "codec/yamlout.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ROUND_TRIP_MAX (256 * 1024)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Lines as libyaml counts them: LF, CR, CRLF, NEL, LS, PS. */
static unsigned long count_lines(const uint8_t *s, size_t n)
{
	unsigned long lines = 1;
	size_t i;

	for (i = 0; i < n; i++) {
		if (s[i] == '\n' || (s[i] == '\r' && !(i + 1 < n &&
						       s[i + 1] == '\n')))
			lines++;
		else if (s[i] == 0xC2 && i + 1 < n && s[i + 1] == 0x85)
			lines++;
		else if (s[i] == 0xE2 && i + 2 < n && s[i + 1] == 0x80 &&
			 (s[i + 2] == 0xA8 || s[i + 2] == 0xA9))
			lines++;
	}
	return lines;
}

/*
 * Whether libyaml reads the JSON s as jansson wrote it.  jansson writes
 * everything but C0 controls raw, while libyaml (YAML 1.1) refuses raw DEL,
 * C1 controls but NEL, U+FFFE and U+FFFF, and folds NEL, LS and PS as line
 * breaks; yamljson.h documents both.
 */
static int yaml_reads_back(const char *text)
{
	const unsigned char *s = (const unsigned char *)text;
	size_t i;

	for (i = 0; s[i]; i++) {
		if (s[i] == 0x7F)
			return 0;
		if (s[i] == 0xC2 && s[i + 1] >= 0x80 && s[i + 1] <= 0x9F)
			return 0;
		if (s[i] == 0xE2 && s[i + 1] == 0x80 &&
		    (s[i + 2] == 0xA8 || s[i + 2] == 0xA9))
			return 0;
		if (s[i] == 0xEF && s[i + 1] == 0xBF &&
		    (s[i + 2] == 0xBE || s[i + 2] == 0xBF))
			return 0;
	}
	return 1;
}

/*
 * Its own JSON must read back equal when libyaml can read it.  Values near
 * the node cap dump to megabytes; reading those again under ASan only
 * slows the run down (it timed out at 5 s), so they are left out.
 */
static void check_round_trip(const json_t *v)
{
	static struct diag d;
	json_t *again = NULL;
	char *s;

	s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
	if (!s)
		abort();
	if (strlen(s) <= ROUND_TRIP_MAX && yaml_reads_back(s)) {
		diag_init(&d);
		if (yamljson_parse("again", s, strlen(s), &again, &d) < 0 ||
		    !json_equal(v, again))
			abort();
		json_decref(again);
	}
	free(s);
}

/* Its YAML must read back equal (small values only, as above). */
static void check_yaml_round_trip(const json_t *v)
{
	static struct diag d;
	struct strbuf sb;
	json_t *again = NULL;
	char *s;
	size_t len;

	strbuf_init(&sb, ROUND_TRIP_MAX);
	if (yamlout_write(v, &sb) < 0) {
		strbuf_release(&sb); /* too big for the cap: not checked */
		return;
	}
	s = strbuf_take(&sb, &len);
	diag_init(&d);
	if (yamljson_parse("again", s, len, &again, &d) < 0 || !json_equal(v, again))
		abort();
	json_decref(again);
	free(s);
}

/* The same bytes as a stream: one value when yamljson_parse gave one. */
static void check_stream(const uint8_t *data, size_t size, const json_t *one)
{
	static struct diag d;
	struct yamljson_doc *docs = NULL;
	size_t n = 0, i;

	diag_init(&d);
	if (yamljson_parse_all("fuzz", (const char *)data, size, &docs, &n, &d) < 0) {
		if (one || docs || diag_count(&d) != 1)
			abort();
		return;
	}
	if (n < 1 || (one && (n != 1 || !json_equal(one, docs[0].value))))
		abort();
	for (i = 0; i < n; i++)
		check_yaml_round_trip(docs[i].value);
	yamljson_docs_free(docs, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct diag d;
	json_t *v = NULL;
	unsigned long line;
	char *end;
	int rc;

	diag_init(&d);
	rc = yamljson_parse("fuzz", (const char *)data, size, &v, &d);
	if (rc == 0) {
		if (!v || diag_count(&d) != 0)
			abort();
		check_round_trip(v);
		check_stream(data, size, v);
		json_decref(v);
		return 0;
	}
	check_stream(data, size, NULL);
	/* One line: "fuzz: no document" or "fuzz:LINE: message". */
	if (v || diag_count(&d) != 1 || strncmp(d.buf, "fuzz:", 5) != 0 ||
	    strchr(d.buf, '\n') != d.buf + d.len - 1)
		abort();
	if (strcmp(d.buf, "fuzz: no document\n") == 0)
		return 0;
	line = strtoul(d.buf + 5, &end, 10);
	if (end == d.buf + 5 || *end != ':' || end[1] != ' ' || line < 1 ||
	    line > count_lines(data, size))
		abort();
	/*
	 * Never "out of memory": the inputs are small, so that message would
	 * hide a wrong error path (jansson also returns NULL for invalid
	 * UTF-8).
	 */
	if (strcmp(end, ": out of memory\n") == 0)
		abort();
	return 0;
}
