/*
 * yamljson: YAML (or JSON) text -> jansson value.  See yamljson.h for the
 * typing rules and the messages.
 *
 * The libyaml event stream drives an explicit stack of open collections
 * (at most YAMLJSON_MAX_DEPTH), so nothing here recurses on input depth;
 * jansson's own recursion (deep copy, decref) is bounded by the same cap.
 * Every value counts towards YAMLJSON_MAX_NODES and its text (keys and
 * scalars) towards YAMLJSON_MAX_TEXT before it is built, and an alias
 * counts as the size of what it copies, so an alias bomb stops before the
 * copy that would cross a cap.
 */
#include "codec/yamljson.h"

#include "base/diag.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/* User text in messages: at most SHOW_MAX input bytes, escaped. */
#define SHOW_MAX 64
#define SHOW_SIZE (SHOW_MAX * 4 + 32)

#define CORE_TAG "tag:yaml.org,2002:"

enum kind {
	K_IMPLICIT, /* plain and untagged: resolved by its form */
	K_STR,
	K_NULL,
	K_BOOL,
	K_INT,
	K_FLOAT,
	K_MAP,
	K_SEQ,
	K_UNKNOWN,
};

struct anchor {
	json_t *value; /* a finished collection; NULL for a scalar */
	char *raw;     /* a scalar's text */
	char *tag;     /* a scalar's tag, NULL when it had none */
	int plain;     /* the scalar was plain */
	int done;      /* 0 while the anchored collection is still open */
	unsigned gen;  /* bumped by each redefinition of the name */
	size_t nodes;  /* values a copy adds */
	size_t bytes;  /* text (keys and scalars) a copy adds */
	unsigned height;
};

struct frame {
	json_t *node;     /* the array or object being filled */
	json_t *keylines; /* objects: explicit key -> line, for duplicates */
	char *key;        /* objects: the key waiting for its value */
	size_t keyline;
	int merge;       /* the waiting key is the merge key "<<" */
	size_t anchor;   /* 1 + index of the anchor it defines, 0 when none */
	unsigned gen;    /* generation of that anchor when the node opened */
	size_t nodes;    /* values in this subtree so far, itself included */
	size_t bytes;    /* text of its keys and scalars so far */
	unsigned height; /* of the tallest child so far (scalars are 0) */
};

struct ctx {
	const char *name;
	struct diag *d;
	const unsigned char *text;
	size_t len;
	struct frame stack[YAMLJSON_MAX_DEPTH];
	unsigned depth;
	json_t *root;
	size_t total; /* values counted so far */
	size_t bytes; /* text of keys and scalars counted so far */
	struct anchor *anchors;
	size_t nanchors;
	size_t capanchors;
	json_t *anchor_index; /* anchor name -> index in anchors */
	/* yamljson_parse_all(): the finished documents. */
	int all;
	size_t rootline; /* where the document's value starts */
	struct yamljson_doc *docs;
	size_t ndocs;
	size_t capdocs;
};

/*
 * Escapes user text for a message: quote and backslash with a backslash,
 * C0 controls and DEL as \xNN, C1 controls as \u00NN.  Longer text is cut
 * after SHOW_MAX bytes on a character boundary and ends with "...".
 */
static const char *show(char *buf, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	size_t i, o = 0;

	for (i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (i >= SHOW_MAX && (ch & 0xC0) != 0x80) {
			memcpy(buf + o, "...", 3);
			o += 3;
			break;
		}
		if (ch == 0xC2 && i + 1 < n && (unsigned char)s[i + 1] < 0xA0) {
			/* C1 control U+0080..U+009F (the input is UTF-8) */
			ch = (unsigned char)s[++i];
			memcpy(buf + o, "\\u00", 4);
			o += 4;
			buf[o++] = hex[ch >> 4];
			buf[o++] = hex[ch & 15];
			continue;
		}
		if (ch < 0x20 || ch == 0x7f || ch == '"' || ch == '\\') {
			buf[o++] = '\\';
			if (ch == '"' || ch == '\\') {
				buf[o++] = (char)ch;
				continue;
			}
			buf[o++] = 'x';
			buf[o++] = hex[ch >> 4];
			buf[o++] = hex[ch & 15];
			continue;
		}
		buf[o++] = (char)ch;
	}
	buf[o] = '\0';
	return buf;
}

/* A tag as users write it: "tag:yaml.org,2002:int" shows as "!!int". */
static const char *show_tag(char *buf, const char *tag)
{
	size_t plen = strlen(CORE_TAG);

	if (strncmp(tag, CORE_TAG, plen) == 0) {
		buf[0] = '!';
		buf[1] = '!';
		show(buf + 2, tag + plen, strlen(tag + plen));
		return buf;
	}
	return show(buf, tag, strlen(tag));
}

static int oom(struct ctx *c, size_t line)
{
	diag_addf(c->d, "%s:%zu: out of memory", c->name, line);
	return -1;
}

/*
 * Width of the line break at s[i], 0 when there is none.  The same breaks
 * as libyaml counts: LF, CR, CRLF (one break), NEL, LS and PS.
 */
static size_t break_at(const unsigned char *s, size_t n, size_t i)
{
	if (s[i] == '\n')
		return 1;
	if (s[i] == '\r')
		return i + 1 < n && s[i + 1] == '\n' ? 2 : 1;
	if (s[i] == 0xC2 && i + 1 < n && s[i + 1] == 0x85)
		return 2;
	if (s[i] == 0xE2 && i + 2 < n && s[i + 1] == 0x80 &&
	    (s[i + 2] == 0xA8 || s[i + 2] == 0xA9))
		return 3;
	return 0;
}

/*
 * The 1-based line of byte offset off; *open is set when a character
 * follows the last line break before off.
 */
static size_t line_of(const struct ctx *c, size_t off, int *open)
{
	size_t line = 1, i = 0, w;

	*open = 0;
	while (i < off && i < c->len) {
		w = break_at(c->text, c->len, i);
		if (w) {
			line++;
			i += w;
			*open = 0;
		} else {
			i++;
			*open = 1;
		}
	}
	return line;
}

static size_t line_at(const struct ctx *c, size_t off)
{
	int open;

	return line_of(c, off, &open);
}

/* Length of the well-formed UTF-8 sequence at s, 0 when ill-formed. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	unsigned char lo = 0x80, hi = 0xBF;
	size_t need, i;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xC2 && s[0] <= 0xDF)
		need = 1;
	else if (s[0] >= 0xE0 && s[0] <= 0xEF)
		need = 2;
	else if (s[0] >= 0xF0 && s[0] <= 0xF4)
		need = 3;
	else
		return 0;
	if (s[0] == 0xE0)
		lo = 0xA0; /* overlong */
	else if (s[0] == 0xED)
		hi = 0x9F; /* surrogates */
	else if (s[0] == 0xF0)
		lo = 0x90; /* overlong */
	else if (s[0] == 0xF4)
		hi = 0x8F; /* above U+10FFFF */
	if (n < need + 1)
		return 0;
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (i = 2; i <= need; i++)
		if (s[i] < 0x80 || s[i] > 0xBF)
			return 0;
	return need + 1;
}

/* libyaml would call a NUL a control character: say what it is. */
static int check_text(struct ctx *c)
{
	const unsigned char *s = c->text;
	size_t i = 0, line = 1, w;

	while (i < c->len) {
		if (s[i] == '\0') {
			diag_addf(c->d, "%s:%zu: NUL byte in input", c->name,
				  line);
			return -1;
		}
		w = break_at(s, c->len, i);
		if (w) {
			line++;
			i += w;
			continue;
		}
		w = utf8_len(s + i, c->len - i);
		if (!w) {
			diag_addf(c->d, "%s:%zu: invalid UTF-8 (byte 0x%02X)",
				  c->name, line, s[i]);
			return -1;
		}
		i += w;
	}
	return 0;
}

/*
 * A libyaml mark line as a 1-based line of the text.  At the end of the
 * text libyaml moves to a line that does not exist; that is the last one.
 */
static size_t mark_line(const struct ctx *c, size_t mark)
{
	int open;
	size_t last = line_of(c, c->len, &open);

	if (!open && last > 1)
		last--; /* the text ends with a line break */
	return mark + 1 < last ? mark + 1 : last;
}

static void yaml_error(struct ctx *c, const yaml_parser_t *p)
{
	const char *problem = p->problem ? p->problem : "invalid YAML";
	size_t line, cline;

	switch (p->error) {
	case YAML_MEMORY_ERROR:
		oom(c, p->mark.line + 1);
		return;
	case YAML_READER_ERROR:
		line = line_at(c, p->problem_offset);
		if (p->problem_value != -1)
			diag_addf(c->d, "%s:%zu: %s (U+%04X)", c->name, line,
				  problem, (unsigned)p->problem_value);
		else
			diag_addf(c->d, "%s:%zu: %s", c->name, line, problem);
		return;
	default:
		line = mark_line(c, p->problem_mark.line);
		cline = mark_line(c, p->context_mark.line);
		if (p->context && cline != line)
			diag_addf(c->d, "%s:%zu: %s (%s at line %zu)", c->name,
				  line, problem, p->context, cline);
		else if (p->context)
			diag_addf(c->d, "%s:%zu: %s (%s)", c->name, line,
				  problem, p->context);
		else
			diag_addf(c->d, "%s:%zu: %s", c->name, line, problem);
		return;
	}
}

static enum kind tag_kind(const char *tag)
{
	static const struct {
		const char *name;
		enum kind kind;
	} core[] = {
		{"str", K_STR},     {"int", K_INT}, {"bool", K_BOOL},
		{"float", K_FLOAT}, {"null", K_NULL}, {"map", K_MAP},
		{"seq", K_SEQ},
	};
	size_t plen = strlen(CORE_TAG), i;

	if (strcmp(tag, "!") == 0)
		return K_STR; /* non-specific: not resolved by form */
	if (strncmp(tag, CORE_TAG, plen) != 0)
		return K_UNKNOWN;
	for (i = 0; i < sizeof(core) / sizeof(core[0]); i++)
		if (strcmp(tag + plen, core[i].name) == 0)
			return core[i].kind;
	return K_UNKNOWN;
}

/* s is NUL-terminated and holds no NUL: strcmp is exact. */
static int is_null(const char *s, size_t n)
{
	return n == 0 || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 ||
	       strcmp(s, "Null") == 0 || strcmp(s, "NULL") == 0;
}

static int is_bool(const char *s, int *b)
{
	if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE")) {
		*b = 1;
		return 1;
	}
	if (!strcmp(s, "false") || !strcmp(s, "False") ||
	    !strcmp(s, "FALSE")) {
		*b = 0;
		return 1;
	}
	return 0;
}

static int digit_value(char ch, unsigned base)
{
	int v;

	if (ch >= '0' && ch <= '9')
		v = ch - '0';
	else if (ch >= 'a' && ch <= 'f')
		v = ch - 'a' + 10;
	else if (ch >= 'A' && ch <= 'F')
		v = ch - 'A' + 10;
	else
		return -1;
	return (unsigned)v < base ? v : -1;
}

/*
 * [-+]?[0-9]+ (octal when it is 0[0-7]+ after the sign, as kubectl reads
 * it), 0x[0-9a-fA-F]+ or 0o[0-7]+.  1: *out set, 0: not an integer,
 * -1: out of int64 range.
 */
static int parse_int(const char *s, size_t n, json_int_t *out)
{
	uint64_t acc = 0, limit = INT64_MAX;
	unsigned base = 10;
	size_t i = 0, j;
	int neg = 0, dv;

	if (n > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'o')) {
		base = s[1] == 'x' ? 16 : 8;
		i = 2;
	} else {
		if (n > 0 && (s[0] == '-' || s[0] == '+')) {
			neg = s[0] == '-';
			i = 1;
		}
		if (i == n)
			return 0;
		for (j = i; j < n; j++)
			if (s[j] < '0' || s[j] > '9')
				return 0;
		if (s[i] == '0' && n - i > 1 &&
		    strspn(s + i, "01234567") == n - i)
			base = 8;
	}
	if (neg)
		limit = (uint64_t)INT64_MAX + 1;
	for (; i < n; i++) {
		dv = digit_value(s[i], base);
		if (dv < 0)
			return 0;
		if (acc > (limit - (unsigned)dv) / base)
			return -1;
		acc = acc * base + (unsigned)dv;
	}
	if (!neg)
		*out = (json_int_t)acc;
	else if (acc == (uint64_t)INT64_MAX + 1)
		*out = INT64_MIN;
	else
		*out = -(json_int_t)acc;
	return 1;
}

static size_t skip_digits(const char *s, size_t n, size_t i)
{
	while (i < n && s[i] >= '0' && s[i] <= '9')
		i++;
	return i;
}

/* [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? */
static int is_float(const char *s, size_t n)
{
	size_t i = 0, j;

	if (i < n && (s[i] == '-' || s[i] == '+'))
		i++;
	if (i < n && s[i] == '.') {
		j = skip_digits(s, n, i + 1);
		if (j == i + 1)
			return 0;
		i = j;
	} else {
		j = skip_digits(s, n, i);
		if (j == i)
			return 0;
		i = j;
		if (i < n && s[i] == '.')
			i = skip_digits(s, n, i + 1);
	}
	if (i < n && (s[i] == 'e' || s[i] == 'E')) {
		i++;
		if (i < n && (s[i] == '-' || s[i] == '+'))
			i++;
		j = skip_digits(s, n, i);
		if (j == i)
			return 0;
		i = j;
	}
	return i == n;
}

/* [-+]?\.(inf|Inf|INF) or \.(nan|NaN|NAN) */
static int is_infnan(const char *s)
{
	const char *t = s;

	if (!strcmp(s, ".nan") || !strcmp(s, ".NaN") || !strcmp(s, ".NAN"))
		return 1;
	if (*t == '-' || *t == '+')
		t++;
	return !strcmp(t, ".inf") || !strcmp(t, ".Inf") || !strcmp(t, ".INF");
}

/* The scalar text s (of form is_float) as a value, or NULL when it is not
 * a finite double. */
static json_t *make_real(const char *s, size_t n, int *range)
{
	char *end;
	double v;

	*range = 0;
	v = strtod(s, &end);
	if (end != s + n || isinf(v) || isnan(v)) {
		*range = 1;
		return NULL;
	}
	return json_real(v);
}

/*
 * The value of scalar s (n bytes, NUL-terminated, no NUL inside) with the
 * given tag (NULL when none) and style.
 */
static int resolve(struct ctx *c, const char *s, size_t n, const char *tag,
		   int plain, size_t line, json_t **out)
{
	enum kind k = tag ? tag_kind(tag) : plain ? K_IMPLICIT : K_STR;
	char t[SHOW_SIZE], tg[SHOW_SIZE];
	json_t *v = NULL;
	json_int_t i;
	int b, r, range;

	switch (k) {
	case K_IMPLICIT:
		if (is_null(s, n)) {
			v = json_null();
		} else if (is_bool(s, &b)) {
			v = json_boolean(b);
		} else if ((r = parse_int(s, n, &i)) != 0) {
			if (r < 0)
				goto int_range;
			v = json_integer(i);
		} else if (is_infnan(s)) {
			goto infnan;
		} else if (is_float(s, n)) {
			v = make_real(s, n, &range);
			if (range)
				goto float_range;
		} else {
			v = json_stringn(s, n);
		}
		break;
	case K_STR:
		v = json_stringn(s, n);
		break;
	case K_NULL:
		if (!is_null(s, n))
			goto bad;
		v = json_null();
		break;
	case K_BOOL:
		if (!is_bool(s, &b))
			goto bad;
		v = json_boolean(b);
		break;
	case K_INT:
		r = parse_int(s, n, &i);
		if (r == 0)
			goto bad;
		if (r < 0)
			goto int_range;
		v = json_integer(i);
		break;
	case K_FLOAT:
		if (is_infnan(s))
			goto infnan;
		if (!is_float(s, n))
			goto bad;
		v = make_real(s, n, &range);
		if (range)
			goto float_range;
		break;
	case K_MAP:
	case K_SEQ:
		diag_addf(c->d, "%s:%zu: tag %s does not apply to a scalar",
			  c->name, line, show_tag(tg, tag));
		return -1;
	case K_UNKNOWN:
		diag_addf(c->d, "%s:%zu: unknown tag %s", c->name, line,
			  show_tag(tg, tag));
		return -1;
	}
	if (!v)
		return oom(c, line);
	*out = v;
	return 0;
bad:
	diag_addf(c->d, "%s:%zu: \"%s\" is not a valid %s", c->name, line,
		  show(t, s, n), show_tag(tg, tag));
	return -1;
int_range:
	diag_addf(c->d, "%s:%zu: integer %s is out of range (int64)", c->name,
		  line, show(t, s, n));
	return -1;
float_range:
	diag_addf(c->d, "%s:%zu: float %s is out of range", c->name, line,
		  show(t, s, n));
	return -1;
infnan:
	diag_addf(c->d,
		  "%s:%zu: float %s cannot be represented in JSON "
		  "(no infinity or NaN)",
		  c->name, line, show(t, s, n));
	return -1;
}

static struct frame *top(struct ctx *c)
{
	return c->depth ? &c->stack[c->depth - 1] : NULL;
}

/* The open mapping that waits for a key, or NULL. */
static struct frame *wants_key(struct ctx *c)
{
	struct frame *f = top(c);

	return f && json_is_object(f->node) && !f->key ? f : NULL;
}

/* Counts n more values holding b bytes of text against the caps. */
static int count(struct ctx *c, size_t n, size_t b, size_t line)
{
	if (n > YAMLJSON_MAX_NODES - c->total) {
		diag_addf(c->d,
			  "%s:%zu: document expands to more than %d nodes",
			  c->name, line, YAMLJSON_MAX_NODES);
		return -1;
	}
	if (b > YAMLJSON_MAX_TEXT - c->bytes) {
		diag_addf(c->d,
			  "%s:%zu: document expands to more than %zu bytes of "
			  "text",
			  c->name, line, (size_t)YAMLJSON_MAX_TEXT);
		return -1;
	}
	c->total += n;
	c->bytes += b;
	return 0;
}

static int too_deep(struct ctx *c, size_t line)
{
	diag_addf(c->d, "%s:%zu: nesting deeper than %d levels", c->name, line,
		  YAMLJSON_MAX_DEPTH);
	return -1;
}

static struct anchor *find_anchor(struct ctx *c, const char *name)
{
	json_t *ix = json_object_get(c->anchor_index, name);

	return ix ? &c->anchors[json_integer_value(ix)] : NULL;
}

static void anchor_clear(struct anchor *a)
{
	json_decref(a->value);
	free(a->raw);
	free(a->tag);
	a->value = NULL;
	a->raw = NULL;
	a->tag = NULL;
	a->done = 0;
}

/*
 * Starts a (re)definition of name: until it is done, aliases to it are
 * recursive.  Returns its index or -1.
 */
static long define_anchor(struct ctx *c, const char *name, size_t line)
{
	struct anchor *a = find_anchor(c, name), *grown;
	size_t cap;

	if (a) {
		anchor_clear(a);
		a->gen++;
		return (long)(a - c->anchors);
	}
	if (c->nanchors == c->capanchors) {
		cap = c->capanchors ? c->capanchors * 2 : 16;
		grown = realloc(c->anchors, cap * sizeof(*grown));
		if (!grown)
			return oom(c, line);
		c->anchors = grown;
		c->capanchors = cap;
	}
	a = &c->anchors[c->nanchors];
	memset(a, 0, sizeof(*a));
	if (json_object_set_new(c->anchor_index, name,
				json_integer((json_int_t)c->nanchors)) < 0)
		return oom(c, line);
	return (long)c->nanchors++;
}

static int define_scalar_anchor(struct ctx *c, const char *name,
				const char *s, const char *tag, int plain,
				size_t line)
{
	long ix = define_anchor(c, name, line);
	struct anchor *a;

	if (ix < 0)
		return -1;
	a = &c->anchors[ix];
	a->raw = strdup(s);
	a->tag = tag ? strdup(tag) : NULL;
	if (!a->raw || (tag && !a->tag))
		return oom(c, line);
	a->plain = plain;
	a->done = 1;
	a->nodes = 1;
	a->bytes = strlen(s);
	a->height = 0;
	return 0;
}

/* Makes s the key that the open mapping f waits a value for. */
static int set_key(struct ctx *c, struct frame *f, const char *s, int merge,
		   size_t line)
{
	json_t *first = json_object_get(f->keylines, s);
	size_t len = strlen(s);
	char t[SHOW_SIZE];

	if (first) {
		diag_addf(c->d,
			  "%s:%zu: duplicate key \"%s\" (first at line %lld)",
			  c->name, line, show(t, s, len),
			  (long long)json_integer_value(first));
		return -1;
	}
	if (count(c, 0, len, line) < 0)
		return -1;
	f->bytes += len;
	if (json_object_set_new(f->keylines, s,
				json_integer((json_int_t)line)) < 0)
		return oom(c, line);
	f->key = strdup(s);
	if (!f->key)
		return oom(c, line);
	f->keyline = line;
	f->merge = merge;
	return 0;
}

/* Adds the keys of src that dst lacks. */
static int merge_one(struct ctx *c, json_t *dst, json_t *src, size_t line)
{
	const char *k;
	json_t *v;

	json_object_foreach(src, k, v)
	{
		if (!json_object_get(dst, k) && json_object_set(dst, k, v) < 0)
			return oom(c, line);
	}
	return 0;
}

static int all_objects(const json_t *a)
{
	size_t i;

	for (i = 0; i < json_array_size(a); i++)
		if (!json_is_object(json_array_get(a, i)))
			return 0;
	return 1;
}

/* The value v (owned) of a merge key in f; height is v's. */
static int merge(struct ctx *c, struct frame *f, json_t *v, unsigned height)
{
	size_t line = f->keyline, i;
	unsigned h = 0;
	int rc = 0;

	free(f->key);
	f->key = NULL;
	f->merge = 0;
	if (json_is_object(v)) {
		h = height - 1; /* its members become f's children */
		rc = merge_one(c, f->node, v, line);
	} else if (json_is_array(v) && all_objects(v)) {
		h = height >= 2 ? height - 2 : 0;
		for (i = 0; i < json_array_size(v) && rc == 0; i++)
			rc = merge_one(c, f->node, json_array_get(v, i), line);
	} else {
		diag_addf(c->d,
			  "%s:%zu: merge key << needs a mapping or a sequence "
			  "of mappings",
			  c->name, line);
		rc = -1;
	}
	if (h > f->height)
		f->height = h;
	json_decref(v);
	return rc;
}

/*
 * Hands v (owned, also on failure) to the open collection, or makes it the
 * document.  nodes and height describe v's subtree.
 */
static int put(struct ctx *c, json_t *v, size_t nodes, size_t bytes,
	       unsigned height, size_t line)
{
	struct frame *f = top(c);
	int rc;

	if (!f) {
		c->root = v;
		return 0;
	}
	f->nodes += nodes;
	f->bytes += bytes;
	if (json_is_array(f->node)) {
		if (height > f->height)
			f->height = height;
		if (json_array_append_new(f->node, v) < 0)
			return oom(c, line);
		return 0;
	}
	if (f->merge)
		return merge(c, f, v, height);
	if (height > f->height)
		f->height = height;
	/* Replaces a merged value: explicit keys win. */
	rc = json_object_set_new(f->node, f->key, v);
	free(f->key);
	f->key = NULL;
	return rc < 0 ? oom(c, line) : 0;
}

static int on_scalar(struct ctx *c, const yaml_event_t *ev)
{
	const char *s = (const char *)ev->data.scalar.value;
	const char *tag = (const char *)ev->data.scalar.tag;
	const char *anchor = (const char *)ev->data.scalar.anchor;
	size_t n = ev->data.scalar.length;
	size_t line = ev->start_mark.line + 1;
	int plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
	struct frame *f;
	json_t *v = NULL;

	if (memchr(s, '\0', n)) {
		diag_addf(c->d, "%s:%zu: string contains a NUL character",
			  c->name, line);
		return -1;
	}
	if (anchor &&
	    define_scalar_anchor(c, anchor, s, tag, plain, line) < 0)
		return -1;
	f = wants_key(c);
	if (f) {
		/* Keys are text; a tag is still checked. */
		if (tag && resolve(c, s, n, tag, plain, line, &v) < 0)
			return -1;
		json_decref(v);
		return set_key(c, f, s, plain && !tag && strcmp(s, "<<") == 0,
			       line);
	}
	if (count(c, 1, n, line) < 0 ||
	    resolve(c, s, n, tag, plain, line, &v) < 0)
		return -1;
	return put(c, v, 1, n, 0, line);
}

static const char *kind_name(const struct anchor *a)
{
	return json_is_object(a->value) ? "a mapping" : "a sequence";
}

static int on_alias(struct ctx *c, const yaml_event_t *ev)
{
	const char *name = (const char *)ev->data.alias.anchor;
	size_t line = ev->start_mark.line + 1;
	struct anchor *a = find_anchor(c, name);
	char t[SHOW_SIZE];
	struct frame *f;
	json_t *v = NULL;

	if (!a) {
		diag_addf(c->d, "%s:%zu: undefined alias *%s", c->name, line,
			  show(t, name, strlen(name)));
		return -1;
	}
	if (!a->done) {
		diag_addf(c->d,
			  "%s:%zu: alias *%s refers to a node that contains it",
			  c->name, line, show(t, name, strlen(name)));
		return -1;
	}
	f = wants_key(c);
	if (f) {
		if (a->value) {
			diag_addf(c->d,
				  "%s:%zu: mapping key must be a scalar, not "
				  "an alias of %s",
				  c->name, line, kind_name(a));
			return -1;
		}
		return set_key(c, f, a->raw, 0, line);
	}
	if (!a->value) {
		if (count(c, 1, a->bytes, line) < 0 ||
		    resolve(c, a->raw, a->bytes, a->tag, a->plain, line, &v) <
			    0)
			return -1;
		return put(c, v, 1, a->bytes, 0, line);
	}
	if (c->depth + a->height > YAMLJSON_MAX_DEPTH)
		return too_deep(c, line);
	if (count(c, a->nodes, a->bytes, line) < 0)
		return -1;
	v = json_deep_copy(a->value);
	if (!v)
		return oom(c, line);
	return put(c, v, a->nodes, a->bytes, a->height, line);
}

static int on_start(struct ctx *c, const yaml_event_t *ev, int map)
{
	const char *tag, *anchor;
	size_t line = ev->start_mark.line + 1;
	const char *what = map ? "a mapping" : "a sequence";
	char tg[SHOW_SIZE];
	struct frame *f;
	enum kind k;
	long ix;

	if (map) {
		tag = (const char *)ev->data.mapping_start.tag;
		anchor = (const char *)ev->data.mapping_start.anchor;
	} else {
		tag = (const char *)ev->data.sequence_start.tag;
		anchor = (const char *)ev->data.sequence_start.anchor;
	}
	if (wants_key(c)) {
		diag_addf(c->d, "%s:%zu: mapping key must be a scalar, not %s",
			  c->name, line, what);
		return -1;
	}
	if (tag && strcmp(tag, "!") != 0) {
		k = tag_kind(tag);
		if (k == K_UNKNOWN) {
			diag_addf(c->d, "%s:%zu: unknown tag %s", c->name,
				  line, show_tag(tg, tag));
			return -1;
		}
		if (k != (map ? K_MAP : K_SEQ)) {
			diag_addf(c->d, "%s:%zu: tag %s does not apply to %s",
				  c->name, line, show_tag(tg, tag), what);
			return -1;
		}
	}
	if (c->depth == YAMLJSON_MAX_DEPTH)
		return too_deep(c, line);
	if (count(c, 1, 0, line) < 0)
		return -1;
	f = &c->stack[c->depth++];
	memset(f, 0, sizeof(*f));
	f->nodes = 1;
	f->node = map ? json_object() : json_array();
	if (map)
		f->keylines = json_object();
	if (!f->node || (map && !f->keylines))
		return oom(c, line);
	if (anchor) {
		ix = define_anchor(c, anchor, line);
		if (ix < 0)
			return -1;
		f->anchor = (size_t)ix + 1;
		f->gen = c->anchors[ix].gen;
	}
	return 0;
}

static int on_end(struct ctx *c, const yaml_event_t *ev)
{
	struct frame f = c->stack[--c->depth];
	unsigned height = f.height + 1;
	struct anchor *a;

	json_decref(f.keylines);
	free(f.key); /* libyaml pairs every key with a value: NULL here */
	if (f.anchor) {
		a = &c->anchors[f.anchor - 1];
		if (a->gen == f.gen) { /* not redefined inside */
			a->value = json_incref(f.node);
			a->nodes = f.nodes;
			a->bytes = f.bytes;
			a->height = height;
			a->done = 1;
		}
	}
	return put(c, f.node, f.nodes, f.bytes, height,
		   ev->start_mark.line + 1);
}

/* A bare "---" (or a trailing one): libyaml reports an empty plain scalar. */
static int is_empty_document(const yaml_event_t *ev)
{
	return ev->type == YAML_SCALAR_EVENT && ev->data.scalar.length == 0 &&
	       ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
	       !ev->data.scalar.tag && !ev->data.scalar.anchor;
}

/*
 * yamljson_parse_all(): the document's value joins the list, and its
 * anchors end with it (an alias never reaches into another document).
 */
static int end_document(struct ctx *c)
{
	struct yamljson_doc *grown;
	size_t i, cap;

	if (!c->root)
		return 0;
	if (c->ndocs == c->capdocs) {
		cap = c->capdocs ? c->capdocs * 2 : 8;
		grown = realloc(c->docs, cap * sizeof(*grown));
		if (!grown)
			return oom(c, c->rootline);
		c->docs = grown;
		c->capdocs = cap;
	}
	c->docs[c->ndocs].value = c->root;
	c->docs[c->ndocs++].line = c->rootline;
	c->root = NULL;
	for (i = 0; i < c->nanchors; i++)
		anchor_clear(&c->anchors[i]);
	c->nanchors = 0;
	json_object_clear(c->anchor_index);
	return 0;
}

/* Handles one event; *done is set at the end of the stream. */
static int on_event(struct ctx *c, const yaml_event_t *ev, size_t *docline,
		    int *done)
{
	int content = ev->type == YAML_SCALAR_EVENT ||
		      ev->type == YAML_ALIAS_EVENT ||
		      ev->type == YAML_SEQUENCE_START_EVENT ||
		      ev->type == YAML_MAPPING_START_EVENT;

	if (content && c->depth == 0) {
		if (is_empty_document(ev))
			return 0;
		c->rootline = ev->start_mark.line + 1;
		if (c->root) {
			diag_addf(c->d,
				  "%s:%zu: more than one document (explain "
				  "reads one object)",
				  c->name, *docline);
			return -1;
		}
	}
	switch (ev->type) {
	case YAML_DOCUMENT_START_EVENT:
		*docline = ev->start_mark.line + 1;
		return 0;
	case YAML_DOCUMENT_END_EVENT:
		return c->all ? end_document(c) : 0;
	case YAML_STREAM_END_EVENT:
		*done = 1;
		return 0;
	case YAML_SCALAR_EVENT:
		return on_scalar(c, ev);
	case YAML_ALIAS_EVENT:
		return on_alias(c, ev);
	case YAML_SEQUENCE_START_EVENT:
		return on_start(c, ev, 0);
	case YAML_MAPPING_START_EVENT:
		return on_start(c, ev, 1);
	case YAML_SEQUENCE_END_EVENT:
	case YAML_MAPPING_END_EVENT:
		return on_end(c, ev);
	default: /* stream start */
		return 0;
	}
}

static void ctx_free(struct ctx *c)
{
	size_t i;

	while (c->depth) {
		struct frame *f = &c->stack[--c->depth];

		json_decref(f->node);
		json_decref(f->keylines);
		free(f->key);
	}
	for (i = 0; i < c->nanchors; i++)
		anchor_clear(&c->anchors[i]);
	free(c->anchors);
	json_decref(c->anchor_index);
	json_decref(c->root);
	yamljson_docs_free(c->docs, c->ndocs);
	free(c);
}

void yamljson_docs_free(struct yamljson_doc *docs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		json_decref(docs[i].value);
	free(docs);
}

/* Runs the parser over the text; the result is in c. */
static int parse(struct ctx *c)
{
	yaml_parser_t parser;
	yaml_event_t ev;
	size_t docline = 1;
	int have_parser = 0, have_event = 0, done = 0, rc = -1;

	if (check_text(c) < 0)
		goto out;
	c->anchor_index = json_object();
	if (!c->anchor_index || !yaml_parser_initialize(&parser)) {
		oom(c, 1);
		goto out;
	}
	have_parser = 1;
	yaml_parser_set_input_string(&parser, c->text, c->len);
	yaml_parser_set_encoding(&parser, YAML_UTF8_ENCODING);
	while (!done) {
		if (!yaml_parser_parse(&parser, &ev)) {
			yaml_error(c, &parser);
			goto out;
		}
		have_event = 1;
		if (on_event(c, &ev, &docline, &done) < 0)
			goto out;
		yaml_event_delete(&ev);
		have_event = 0;
	}
	if (!c->root && !c->ndocs) {
		diag_addf(c->d, "%s: no document", c->name);
		goto out;
	}
	rc = 0;
out:
	if (have_event)
		yaml_event_delete(&ev);
	if (have_parser)
		yaml_parser_delete(&parser);
	return rc;
}

static struct ctx *ctx_new(const char *name, const char *text, size_t len,
			   struct diag *d)
{
	struct ctx *c = calloc(1, sizeof(*c));

	if (!name)
		name = "<input>";
	if (!c) {
		diag_addf(d, "%s:1: out of memory", name);
		return NULL;
	}
	c->name = name;
	c->d = d;
	c->text = (const unsigned char *)(text ? text : "");
	c->len = text ? len : 0;
	return c;
}

int yamljson_parse(const char *name, const char *text, size_t len,
		   json_t **out, struct diag *d)
{
	struct ctx *c = ctx_new(name, text, len, d);
	int rc;

	if (!c)
		return -1;
	rc = parse(c);
	if (rc == 0) {
		*out = c->root;
		c->root = NULL;
	}
	ctx_free(c);
	return rc;
}

int yamljson_parse_all(const char *name, const char *text, size_t len,
		       struct yamljson_doc **docs, size_t *n, struct diag *d)
{
	struct ctx *c = ctx_new(name, text, len, d);
	int rc;

	if (!c)
		return -1;
	c->all = 1;
	rc = parse(c);
	if (rc == 0) {
		*docs = c->docs;
		*n = c->ndocs;
		c->docs = NULL;
		c->ndocs = 0;
	}
	ctx_free(c);
	return rc;
}
