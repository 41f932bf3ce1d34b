#include "base/log.h"

#include "base/diag.h"
#include "base/text.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static enum log_level min_level = LOG_INFO;
static enum log_format format = LOG_FORMAT_LOGFMT;

/* The fields of one event (logfmt), and its JSON line: a field escaped
 * for JSON can be six times as long (\u00XX), but log_quote() leaves no
 * control character in a quoted value, so 4 x is plenty. */
#define FIELDS_MAX 2048
#define JSON_MAX (4 * FIELDS_MAX)

void log_set_level(enum log_level min)
{
	min_level = min;
}

void log_set_format(enum log_format f)
{
	format = f;
}

int log_format_parse(const char *s, enum log_format *out)
{
	if (strcmp(s, "logfmt") == 0)
		*out = LOG_FORMAT_LOGFMT;
	else if (strcmp(s, "json") == 0)
		*out = LOG_FORMAT_JSON;
	else
		return -1;
	return 0;
}

/* ---- the JSON encoder ---------------------------------------------------- */

/* Room kept at the end of the buffer: the closing quote of the string
 * being written, '}', '\n' and the NUL. */
#define JSON_TAIL 4

struct jw {
	char *buf;
	size_t size, len;
	bool full;
};

/* Appends n bytes, all or none. */
static bool jw_put(struct jw *w, const char *s, size_t n)
{
	if (w->full || w->len + n > w->size - JSON_TAIL) {
		w->full = true;
		return false;
	}
	memcpy(w->buf + w->len, s, n);
	w->len += n;
	return true;
}

/*
 * A JSON string of the n bytes at s.  unescape: s is a quoted logfmt
 * value, whose \" and \\ stand for " and \.  The closing quote always
 * fits (JSON_TAIL); when the rest does not, the string is cut at a whole
 * character and w is full.  False when not even its opening quote fit.
 */
static bool jw_string(struct jw *w, const char *s, size_t n, bool unescape)
{
	static const char hex[] = "0123456789abcdef";
	size_t i = 0;

	if (!jw_put(w, "\"", 1))
		return false;
	while (i < n) {
		unsigned char c = (unsigned char)s[i];
		char esc[6];
		size_t len;

		if (unescape && c == '\\' && i + 1 < n && (s[i + 1] == '"' || s[i + 1] == '\\'))
			c = (unsigned char)s[++i];
		if (c == '"' || c == '\\') {
			esc[0] = '\\';
			esc[1] = (char)c;
			len = 2;
		} else if (c == '\n' || c == '\r' || c == '\t') {
			esc[0] = '\\';
			esc[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
			len = 2;
		} else if (c < 0x20 || c == 0x7f) {
			memcpy(esc, "\\u00", 4);
			esc[4] = hex[c >> 4];
			esc[5] = hex[c & 15];
			len = 6;
		} else if (c >= 0x80) {
			/* s[n] may be inside a longer string: a character
			 * must end within the span. */
			size_t k = text_utf8_len(s + i);

			if (k == 0 || i + k > n) {
				if (!jw_put(w, "\\ufffd", 6))
					break;
				i++;
				continue;
			}
			if (!jw_put(w, s + i, k))
				break;
			i += k;
			continue;
		} else {
			esc[0] = (char)c;
			len = 1;
		}
		if (!jw_put(w, esc, len))
			break;
		i++;
	}
	w->buf[w->len++] = '"'; /* kept room: JSON_TAIL */
	return true;
}

/* One field, ,"key":"value" (not the first). */
static void jw_field(struct jw *w, const char *k, size_t kn, const char *v, size_t vn,
		     bool unescape)
{
	size_t at = w->len;

	if (w->full)
		return;
	/* No key without its value: a key cut, or no room to open the
	 * value, takes the field back. */
	if (!jw_put(w, ",", 1) || !jw_string(w, k, kn, false) || w->full ||
	    !jw_put(w, ":", 1) || !jw_string(w, v, vn, unescape))
		w->len = at;
}

/* The next logfmt field at *p: key and value spans; false at the end. */
struct span {
	const char *s;
	size_t n;
	bool quoted;
};

static bool next_field(const char **p, struct span *key, struct span *val)
{
	const char *s = *p;

	while (*s == ' ')
		s++;
	if (!*s)
		return false;
	key->s = s;
	while (*s && *s != '=' && *s != ' ')
		s++;
	key->n = (size_t)(s - key->s);
	val->quoted = false;
	if (*s != '=') { /* a bare key */
		val->s = "true";
		val->n = 4;
	} else if (*++s == '"') {
		val->s = ++s;
		val->quoted = true;
		while (*s && *s != '"')
			s += s[0] == '\\' && s[1] ? 2 : 1;
		val->n = (size_t)(s - val->s);
		if (*s == '"')
			s++;
	} else {
		val->s = s;
		while (*s && *s != ' ')
			s++;
		val->n = (size_t)(s - val->s);
	}
	*p = s;
	return true;
}

static bool is_msg(const struct span *key)
{
	return key->n == 3 && memcmp(key->s, "msg", 3) == 0;
}

size_t log_json_line(char *out, size_t size, const char *ts, const char *level,
		     const char *fields)
{
	struct jw w = {.buf = out, .size = size};
	struct span key, val, msg = {"", 0, false};
	const char *p = fields;

	jw_put(&w, "{\"ts\":", 6);
	jw_string(&w, ts, strlen(ts), false);
	jw_field(&w, "level", 5, level, strlen(level), false);
	while (next_field(&p, &key, &val))
		if (is_msg(&key)) {
			msg = val;
			break;
		}
	jw_field(&w, "msg", 3, msg.s, msg.n, msg.quoted);
	for (p = fields; next_field(&p, &key, &val);)
		if (!is_msg(&key) && key.n)
			jw_field(&w, key.s, key.n, val.s, val.n, val.quoted);
	w.buf[w.len++] = '}';
	w.buf[w.len++] = '\n';
	w.buf[w.len] = '\0';
	return w.len;
}

/* ---- the events ---------------------------------------------------------- */

void log_event(enum log_level level, const char *fmt, ...)
{
	static const char *const names[] = {"debug", "info", "warn", "error"};
	char fields[FIELDS_MAX], ts_text[64], line[JSON_MAX];
	struct timespec ts;
	struct tm tm;
	va_list ap;
	size_t n;

	if (level < min_level)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	snprintf(ts_text, sizeof(ts_text), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ",
		 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
		 tm.tm_sec, ts.tv_nsec / 1000000);
	va_start(ap, fmt);
	vsnprintf(fields, sizeof(fields), fmt, ap);
	va_end(ap);
	if (format == LOG_FORMAT_JSON) {
		n = log_json_line(line, sizeof(line), ts_text, names[level], fields);
	} else {
		int k = snprintf(line, FIELDS_MAX, "ts=%s level=%s %s", ts_text,
				 names[level], fields);

		n = k < 0 ? 0 : (size_t)k < FIELDS_MAX - 1 ? (size_t)k : FIELDS_MAX - 2;
		line[n++] = '\n';
	}
	/* One write: lines from different threads never interleave. */
	if (write(STDERR_FILENO, line, n) < 0)
		return;
}

void log_diag(enum log_level level, const char *msg, struct diag *d)
{
	char m[256], q[DIAG_CAP];
	const char *text = diag_text(d);

	log_quote(msg, m, sizeof(m));
	while (*text) {
		const char *nl = strchr(text, '\n');
		size_t n = nl ? (size_t)(nl - text) : strlen(text);
		char one[DIAG_CAP];

		snprintf(one, sizeof(one), "%.*s", (int)n, text);
		if (n)
			log_event(level, "msg=\"%s\" error=\"%s\"", m,
				  log_quote(one, q, sizeof(q)));
		text += n + (nl ? 1 : 0);
	}
}

const char *log_quote(const char *s, char *out, unsigned long size)
{
	size_t o = 0;

	if (size == 0)
		return "";
	for (; s && *s && o + 3 < size; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\') {
			out[o++] = '\\';
			out[o++] = (char)c;
		} else if (c < 0x20) {
			out[o++] = ' ';
		} else {
			out[o++] = (char)c;
		}
	}
	out[o] = '\0';
	return out;
}
