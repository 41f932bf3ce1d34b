/*
 * Differential harness for codec/jsonfast.c: it must accept exactly what
 * json_loadb(JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL | JSON_DECODE_ANY)
 * accepts, and build an equal value.  One known difference: a raw NUL byte
 * is never valid JSON text, which jsonfast always refuses, while jansson
 * sometimes reads it as the end of the input ("\t4\0\t" loads as 4).
 */
#include "codec/jsonfast.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct jsonfast_skip *skip;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static const char *const paths[] = {"r/o", "r/p/q", "r|t/s/[]/k|l", "r/e/[]",
					    NULL};
	char err[200];

	(void)argc;
	(void)argv;
	skip = jsonfast_skip_new(paths, err, sizeof(err));
	if (!skip) {
		fprintf(stderr, "%s\n", err);
		abort();
	}
	return 0;
}

/* Every element of s that is an object loses its members "k" and "l". */
static void leave_out_kl(json_t *s)
{
	for (size_t i = 0; json_is_array(s) && i < json_array_size(s); i++) {
		json_t *el = json_array_get(s, i);

		if (json_is_object(el)) {
			json_object_del(el, "k");
			json_object_del(el, "l");
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_error_t e;
	char err[300];
	json_t *a, *b;

	if (memchr(data, '\0', size)) {
		b = jsonfast_parse((const char *)data, size, err, sizeof(err));
		if (b)
			abort();
		return 0;
	}
	a = json_loadb((const char *)data, size,
			       JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL |
				       JSON_DECODE_ANY,
			       &e);
	b = jsonfast_parse((const char *)data, size, err, sizeof(err));

	if (!a != !b) {
		fprintf(stderr, "jansson: %s; jsonfast: %s\n", a ? "ok" : e.text,
			b ? "ok" : err);
		abort();
	}
	if (a && !json_equal(a, b)) {
		fprintf(stderr, "values differ\n");
		abort();
	}
	if (!b && (!err[0] || strchr(err, '\n')))
		abort();
	/* What jansson refuses, the skipping reader refuses too (skipped
	 * values are checked), but for a key given twice: not looked for in
	 * what is skipped. */
	if (!a && !strstr(e.text, "duplicate object key")) {
		json_t *c = jsonfast_parse_skip((const char *)data, size, skip, err,
						sizeof(err));

		if (c)
			abort();
	}
	/* Skipping values: whatever jansson reads, the skipping reader reads
	 * too, without the skipped members ("r/o", "r/p/q", the "k" and "l"
	 * of every element of "r/s" or "t/s") and with the skipped elements
	 * (of "r/e") as null. */
	if (a) {
		json_t *c = jsonfast_parse_skip((const char *)data, size, skip, err,
						sizeof(err));
		json_t *r = json_object_get(a, "r");
		json_t *p = json_is_object(r) ? json_object_get(r, "p") : NULL;
		json_t *e = json_is_object(r) ? json_object_get(r, "e") : NULL;
		json_t *t = json_object_get(a, "t");

		if (!c)
			abort();
		if (json_is_object(r))
			json_object_del(r, "o");
		if (json_is_object(p))
			json_object_del(p, "q");
		for (size_t i = 0; json_is_array(e) && i < json_array_size(e); i++)
			json_array_set_new(e, i, json_null());
		leave_out_kl(json_is_object(r) ? json_object_get(r, "s") : NULL);
		leave_out_kl(json_is_object(t) ? json_object_get(t, "s") : NULL);
		if (!json_equal(a, c))
			abort();
		json_decref(c);
	}
	json_decref(a);
	json_decref(b);
	return 0;
}
