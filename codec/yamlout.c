/* yamlout: a jansson value -> YAML text through libyaml's emitter. */
#include "codec/yamlout.h"

#include "base/strbuf.h"
#include "codec/yamljson.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

static int to_strbuf(void *data, unsigned char *buf, size_t size)
{
	struct strbuf *sb = data;

	strbuf_add(sb, (const char *)buf, size);
	return !strbuf_failed(sb);
}

/* Whether s reads back as the string s in every YAML reader, unquoted. */
static int plain_safe(const char *s)
{
	static const char *const words[] = {"y",   "n",    "yes",   "no",
					    "on",  "off",  "true",  "false",
					    "null"};
	size_t i;

	if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')))
		return 0;
	for (i = 0; s[i]; i++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			    "0123456789-_./",
			    s[i]))
			return 0;
	for (i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (strcasecmp(s, words[i]) == 0)
			return 0;
	return 1;
}

static int scalar(yaml_emitter_t *em, const char *s, size_t n,
		  yaml_scalar_style_t style)
{
	yaml_event_t ev;

	if (!yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)s,
					  (int)n, 1, 1, style))
		return -1;
	return yaml_emitter_emit(em, &ev) ? 0 : -1;
}

static int string(yaml_emitter_t *em, const char *s, size_t n)
{
	return scalar(em, s, n,
		      strlen(s) == n && plain_safe(s)
			      ? YAML_PLAIN_SCALAR_STYLE
			      : YAML_DOUBLE_QUOTED_SCALAR_STYLE);
}

static int value(yaml_emitter_t *em, const json_t *v, unsigned depth)
{
	yaml_event_t ev;
	const char *k;
	json_t *x;
	size_t i;
	int ok, flow;

	if (depth > YAMLJSON_MAX_DEPTH)
		return -1;
	if (json_is_string(v))
		return string(em, json_string_value(v), json_string_length(v));
	if (json_is_object(v) || json_is_array(v)) {
		flow = json_is_object(v) ? json_object_size(v) == 0
					 : json_array_size(v) == 0;
		ok = json_is_object(v)
			     ? yaml_mapping_start_event_initialize(
				       &ev, NULL, NULL, 1,
				       flow ? YAML_FLOW_MAPPING_STYLE
					    : YAML_BLOCK_MAPPING_STYLE)
			     : yaml_sequence_start_event_initialize(
				       &ev, NULL, NULL, 1,
				       flow ? YAML_FLOW_SEQUENCE_STYLE
					    : YAML_BLOCK_SEQUENCE_STYLE);
		if (!ok || !yaml_emitter_emit(em, &ev))
			return -1;
		if (json_is_object(v)) {
			json_object_foreach((json_t *)v, k, x)
			{
				if (string(em, k, strlen(k)) < 0 ||
				    value(em, x, depth + 1) < 0)
					return -1;
			}
			ok = yaml_mapping_end_event_initialize(&ev);
		} else {
			json_array_foreach(v, i, x)
			{
				if (value(em, x, depth + 1) < 0)
					return -1;
			}
			ok = yaml_sequence_end_event_initialize(&ev);
		}
		return ok && yaml_emitter_emit(em, &ev) ? 0 : -1;
	}
	{
		char *text = json_dumps(v, JSON_ENCODE_ANY);
		int rc;

		if (!text)
			return -1;
		rc = scalar(em, text, strlen(text), YAML_PLAIN_SCALAR_STYLE);
		free(text);
		return rc;
	}
}

int yamlout_write(const json_t *v, struct strbuf *sb)
{
	yaml_emitter_t em;
	yaml_event_t ev;
	int rc = -1;

	if (!yaml_emitter_initialize(&em))
		return -1;
	yaml_emitter_set_output(&em, to_strbuf, sb);
	yaml_emitter_set_unicode(&em, 1);
	yaml_emitter_set_width(&em, -1);
	if (!yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING) ||
	    !yaml_emitter_emit(&em, &ev))
		goto out;
	if (!yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1) ||
	    !yaml_emitter_emit(&em, &ev))
		goto out;
	if (value(&em, v, 0) < 0)
		goto out;
	if (!yaml_document_end_event_initialize(&ev, 1) ||
	    !yaml_emitter_emit(&em, &ev))
		goto out;
	if (!yaml_stream_end_event_initialize(&ev) || !yaml_emitter_emit(&em, &ev))
		goto out;
	rc = strbuf_failed(sb) ? -1 : 0;
out:
	yaml_emitter_delete(&em);
	return rc;
}
