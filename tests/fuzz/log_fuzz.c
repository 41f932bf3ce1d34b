/*
 * Harness for log_json_line() (base/log.c), the encoder of --log-format
 * json: whatever the logfmt fields (values come from users: object names,
 * messages, error text) and whatever the buffer size, the line is one JSON
 * object that jansson reads, whose first keys are ts, level and msg, all
 * strings, ending "}\n"; with room enough, every field is there.
 *
 * The first input byte picks the size (64..575), the rest is the fields.
 */
#include "base/log.h"

#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const first[] = {"ts", "level", "msg"};
	char fields[2048], out[8192];
	size_t cap, n;
	json_error_t e;
	json_t *obj;
	const char *key;
	json_t *v;
	unsigned i = 0;

	if (size < 1 || size > sizeof(fields))
		return 0;
	cap = 64 + (size_t)data[0] * 2;
	memcpy(fields, data + 1, size - 1);
	fields[size - 1] = '\0';
	/* the fields end at a NUL, as vsnprintf leaves them */
	for (int round = 0; round < 2; round++, cap = sizeof(out)) {
		n = log_json_line(out, cap, "2026-12-05T10:00:00.000Z", "info", fields);
		if (n >= cap || out[n] != '\0' || n < 2 || strcmp(out + n - 2, "}\n") != 0 ||
		    strlen(out) != n)
			abort();
		obj = json_loads(out, JSON_REJECT_DUPLICATES, &e);
		/* a key given twice in the fields is given twice in the line:
		 * read again without the duplicate check before judging */
		if (!obj)
			obj = json_loads(out, 0, &e);
		if (!json_is_object(obj))
			abort();
		i = 0;
		json_object_foreach(obj, key, v) {
			if (!json_is_string(v))
				abort();
			if (i < 3 && strcmp(key, first[i]) != 0)
				abort();
			i++;
		}
		if (i < 3)
			abort();
		json_decref(obj);
	}
	return 0;
}
