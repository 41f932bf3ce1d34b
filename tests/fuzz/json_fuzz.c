/*
 * Differential harness for webhook/jsonfast.c: it must accept exactly what
 * json_loadb(JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL | JSON_DECODE_ANY)
 * accepts, and build an equal value.  One known difference: a raw NUL byte
 * is never valid JSON text, which jsonfast always refuses, while jansson
 * sometimes reads it as the end of the input ("\t4\0\t" loads as 4).
 */
#include "webhook/jsonfast.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
	/* Skipping values: whatever jansson reads, the skipping reader reads
	 * too, with those values as null. */
	if (a) {
		static const char *const skip[] = {"r/o", "r/p/q", NULL};
		json_t *c = jsonfast_parse_skip((const char *)data, size, skip, err,
						sizeof(err));
		json_t *r = json_object_get(a, "r");
		json_t *p = json_is_object(r) ? json_object_get(r, "p") : NULL;

		if (!c)
			abort();
		if (json_is_object(r) && json_object_get(r, "o"))
			json_object_set_new(r, "o", json_null());
		if (json_is_object(p) && json_object_get(p, "q"))
			json_object_set_new(p, "q", json_null());
		if (!json_equal(a, c))
			abort();
		json_decref(c);
	}
	json_decref(a);
	json_decref(b);
	return 0;
}
