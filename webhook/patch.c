/*
 * RFC 6902 JSON Patch: the diff that produces the webhook's patches and the
 * strict applier that checks them (see patch.h for the contract).
 */
#include "webhook/patch.h"

#include "base/diag.h"
#include "base/text.h"
#include "codec/jget.h"
#include "codec/jsonout.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Pointers and op names quoted in messages are cut to this many bytes. */
#define SHOWN_MAX 200

/* ------------------------------------------------------------------ */
/* RFC 6901 escaping                                                  */

static size_t escaped_len(const char *tok)
{
	size_t n = 0;

	for (; *tok; tok++)
		n += (*tok == '~' || *tok == '/') ? 2 : 1;
	return n;
}

/* Writes the escaped token at dst (no NUL) and returns the end. */
static char *escape_to(char *dst, const char *tok)
{
	for (; *tok; tok++) {
		if (*tok == '~' || *tok == '/') {
			*dst++ = '~';
			*dst++ = *tok == '~' ? '0' : '1';
		} else {
			*dst++ = *tok;
		}
	}
	return dst;
}

int patch_pointer_append(char *buf, size_t bufsz, size_t *len,
			 const char *token, struct diag *d)
{
	size_t need = escaped_len(token) + 2; /* "/" and the NUL */
	char *end;

	if (*len >= bufsz || need > bufsz - *len) {
		diag_addf(d, "json pointer does not fit in %zu bytes", bufsz);
		return -1;
	}
	buf[*len] = '/';
	end = escape_to(buf + *len + 1, token);
	*end = '\0';
	*len = (size_t)(end - buf);
	return 0;
}

/* ------------------------------------------------------------------ */
/* diff                                                               */

/* The pointer of the value being diffed; grows, never shrinks. */
struct path {
	char *s;
	size_t len;
	size_t cap;
};

static int path_push(struct path *p, const char *tok)
{
	size_t need = p->len + escaped_len(tok) + 2;
	char *end;

	if (need > p->cap) {
		size_t cap = p->cap * 2;
		char *s;

		if (cap < need)
			cap = need;
		s = realloc(p->s, cap);
		if (!s)
			return -1;
		p->s = s;
		p->cap = cap;
	}
	p->s[p->len] = '/';
	end = escape_to(p->s + p->len + 1, tok);
	*end = '\0';
	p->len = (size_t)(end - p->s);
	return 0;
}

static void path_pop(struct path *p, size_t mark)
{
	p->len = mark;
	p->s[mark] = '\0';
}

/*
 * Where the operations go: a jansson array (patch_diff) or JSON text
 * (patch_diff_write).  The walk below is the same for both.
 */
struct sink {
	json_t *ops;        /* patch_diff: the array */
	struct strbuf *sb;  /* patch_diff_write: the text */
	size_t n;           /* operations so far */
};

/* Appends {"op", "path"[, "value": deep copy of value]} to ops. */
static int emit_json(json_t *ops, const char *op, const struct path *p,
		     const json_t *value)
{
	json_t *o = json_object();
	int rc = -1;

	if (!o)
		goto out;
	/* The _new setters release the value even when they fail, and fail
	 * on a NULL value: a failed copy needs no check of its own. */
	if (json_object_set_new(o, "op", json_string(op)) < 0 ||
	    json_object_set_new(o, "path", json_stringn_nocheck(p->s, p->len)) <
		    0)
		goto out;
	if (value && json_object_set_new(o, "value", json_deep_copy(value)) < 0)
		goto out;
	rc = json_array_append_new(ops, o); /* takes o, even on failure */
	o = NULL;
out:
	json_decref(o);
	return rc;
}

/* The same operation as text: the bytes json_dumps gives for emit_json's. */
static int emit_text(struct strbuf *sb, const char *op, const struct path *p,
		     const json_t *value)
{
	strbuf_add(sb, "{\"op\":\"", 7);
	strbuf_add(sb, op, strlen(op));
	strbuf_add(sb, "\",\"path\":", 9);
	jsonout_string(sb, p->s, p->len);
	if (value) {
		strbuf_add(sb, ",\"value\":", 9);
		jsonout_value(sb, value);
	}
	strbuf_add(sb, "}", 1);
	return strbuf_failed(sb) ? -1 : 0;
}

static int emit(struct sink *k, const char *op, const struct path *p,
		const json_t *value)
{
	if (k->ops)
		return emit_json(k->ops, op, p, value) < 0 ? -1 : (k->n++, 0);
	if (k->n)
		strbuf_add(k->sb, ",", 1);
	k->n++;
	return emit_text(k->sb, op, p, value);
}

static int diff_value(struct sink *k, struct path *p, const json_t *a,
		      const json_t *b);

/* True when two object iterators stand at the same key. */
static bool same_key(void *ai, void *bi)
{
	size_t n = json_object_iter_key_len(ai);

	return n == json_object_iter_key_len(bi) &&
	       memcmp(json_object_iter_key(ai), json_object_iter_key(bi), n) == 0;
}

static int diff_object(struct sink *k, struct path *p, const json_t *a,
		       const json_t *b)
{
	/* jansson's iterators take non-const objects; they only read here. */
	json_t *ao = (json_t *)a, *bo = (json_t *)b;
	size_t mark = p->len, klen;
	void *ai = json_object_iter(ao), *bi = json_object_iter(bo);
	const char *key;
	int rc;

	/*
	 * a and b are walked side by side while they hold the same keys in
	 * the same order, which is most of the way: apply_copy() keeps a
	 * copied object's order and apply_plan() adds keys at the end.  Only
	 * past that common prefix is a key looked up in the other object.
	 *
	 * Removed: keys of a not in b.  The common prefix has none.
	 */
	while (ai && bi && same_key(ai, bi)) {
		ai = json_object_iter_next(ao, ai);
		bi = json_object_iter_next(bo, bi);
	}
	for (; ai; ai = json_object_iter_next(ao, ai)) {
		key = json_object_iter_key(ai);
		klen = json_object_iter_key_len(ai);
		if (json_object_getn(b, key, klen))
			continue;
		if (path_push(p, key) < 0)
			return -1;
		rc = emit(k, "remove", p, NULL);
		path_pop(p, mark);
		if (rc < 0)
			return -1;
	}
	/* Added or changed: keys of b, in b's order; in the common prefix,
	 * a's value is the one at the same place. */
	ai = json_object_iter(ao);
	for (bi = json_object_iter(bo); bi; bi = json_object_iter_next(bo, bi)) {
		const json_t *v = json_object_iter_value(bi), *old;

		key = json_object_iter_key(bi);
		klen = json_object_iter_key_len(bi);
		if (ai && same_key(ai, bi)) {
			old = json_object_iter_value(ai);
			ai = json_object_iter_next(ao, ai);
		} else {
			ai = NULL;
			old = json_object_getn(a, key, klen);
		}
		if (old == v)
			continue; /* shared: nothing to look at, no path to build */
		if (path_push(p, key) < 0)
			return -1;
		rc = old ? diff_value(k, p, old, v) : emit(k, "add", p, v);
		path_pop(p, mark);
		if (rc < 0)
			return -1;
	}
	return 0;
}

static int diff_array(struct sink *k, struct path *p, const json_t *a,
		      const json_t *b)
{
	size_t na = json_array_size(a), nb = json_array_size(b);
	size_t mark = p->len;
	char idx[TEXT_DECIMAL_MAX];
	int rc = 0;

	/* In place first: none of these operations changes a length. */
	for (size_t i = 0; i < na && i < nb && rc == 0; i++) {
		if (json_array_get(a, i) == json_array_get(b, i))
			continue;
		if (path_push(p, text_decimal(idx, i)) < 0)
			return -1;
		rc = diff_value(k, p, json_array_get(a, i),
				json_array_get(b, i));
		path_pop(p, mark);
	}
	/* Growth: each index equals the length at the time it is applied. */
	for (size_t i = na; i < nb && rc == 0; i++) {
		if (path_push(p, text_decimal(idx, i)) < 0)
			return -1;
		rc = emit(k, "add", p, json_array_get(b, i));
		path_pop(p, mark);
	}
	/* Shrinking: from the end, so every index is the last one. */
	for (size_t i = na; i > nb && rc == 0; i--) {
		if (path_push(p, text_decimal(idx, i - 1)) < 0)
			return -1;
		rc = emit(k, "remove", p, NULL);
		path_pop(p, mark);
	}
	return rc;
}

static int diff_value(struct sink *k, struct path *p, const json_t *a,
		      const json_t *b)
{
	/* Shared by apply_copy(): equal without looking. */
	if (a == b)
		return 0;
	if (json_is_object(a) && json_is_object(b))
		return diff_object(k, p, a, b);
	if (json_is_array(a) && json_is_array(b))
		return diff_array(k, p, a, b);
	if (json_equal(a, b))
		return 0;
	return emit(k, "replace", p, b);
}

static int diff(struct sink *k, const json_t *from, const json_t *to)
{
	struct path p = {malloc(64), 0, 64};
	int rc = -1;

	if (p.s) {
		p.s[0] = '\0';
		rc = diff_value(k, &p, from, to);
	}
	free(p.s);
	return rc;
}

json_t *patch_diff(const json_t *from, const json_t *to)
{
	struct sink k = {.ops = json_array()};

	if (k.ops && diff(&k, from, to) < 0) {
		json_decref(k.ops);
		k.ops = NULL;
	}
	return k.ops;
}

long patch_diff_write(const json_t *from, const json_t *to,
		      struct strbuf *out)
{
	struct sink k = {.sb = out};

	strbuf_add(out, "[", 1);
	if (diff(&k, from, to) < 0)
		return -1;
	strbuf_add(out, "]", 1);
	return strbuf_failed(out) ? -1 : (long)k.n;
}

/* ------------------------------------------------------------------ */
/* apply: messages                                                    */

/* What is known about the operation being applied, for its messages. */
struct opctx {
	size_t index;
	const char *op; /* NULL until known to be a valid op name */
	const char *path;
	size_t pathlen; /* path is NULL until known to be a string */
	struct diag *d;
};

/*
 * s[0, len) for a one-line message: control bytes become '?', the text is
 * cut to SHOWN_MAX bytes with "...", and the empty pointer is shown as "".
 */
static const char *shown(char *buf, size_t bufsz, const char *s, size_t len)
{
	size_t n = 0;

	if (len == 0) {
		snprintf(buf, bufsz, "\"\"");
		return buf;
	}
	for (size_t i = 0; i < len && n + 4 < bufsz; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (i == SHOWN_MAX) {
			memcpy(buf + n, "...", 3);
			n += 3;
			break;
		}
		buf[n++] = (ch < 0x20 || ch == 0x7f) ? '?' : (char)ch;
	}
	buf[n] = '\0';
	return buf;
}

#define SHOWN_BUF (SHOWN_MAX + 8)

static void fail(const struct opctx *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void fail(const struct opctx *c, const char *fmt, ...)
{
	char msg[768], path[SHOWN_BUF];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (c->op && c->path)
		diag_addf(c->d, "op %zu (%s %s): %s", c->index, c->op,
			  shown(path, sizeof(path), c->path, c->pathlen), msg);
	else if (c->op)
		diag_addf(c->d, "op %zu (%s): %s", c->index, c->op, msg);
	else
		diag_addf(c->d, "op %zu: %s", c->index, msg);
}

/* ------------------------------------------------------------------ */
/* apply: pointers                                                    */

/* A parsed RFC 6901 pointer; n == 0 is the whole document. */
struct ptr {
	const char *raw; /* as written, borrowed from the patch */
	size_t rawlen;
	size_t n;
	char **tok; /* unescaped tokens, in mem */
	size_t *at; /* offset in raw of the "/" that starts tok[i] */
	char *mem;
};

static void ptr_release(struct ptr *p)
{
	free(p->tok);
	free(p->at);
	free(p->mem);
}

static int ptr_parse(const struct opctx *c, const json_t *s, const char *role,
		     struct ptr *p)
{
	const char *raw = json_string_value(s);
	size_t len = json_string_length(s);
	size_t n = 0, t = 0;
	char *w;

	p->raw = raw;
	p->rawlen = len;
	if (memchr(raw, '\0', len)) {
		fail(c, "%s contains a NUL byte", role);
		return -1;
	}
	if (len == 0)
		return 0;
	if (raw[0] != '/') {
		fail(c, "%s does not start with \"/\"", role);
		return -1;
	}
	for (size_t i = 0; i < len; i++)
		n += raw[i] == '/';
	p->tok = calloc(n, sizeof(*p->tok));
	p->at = calloc(n, sizeof(*p->at));
	/* Unescaping only shrinks; each "/" becomes at most one NUL. */
	p->mem = malloc(len + 1);
	if (!p->tok || !p->at || !p->mem) {
		fail(c, "out of memory");
		return -1;
	}
	w = p->mem;
	for (size_t i = 0; i < len; i++) {
		char next = i + 1 < len ? raw[i + 1] : '\0';

		if (raw[i] == '/') {
			if (t)
				*w++ = '\0';
			p->at[t] = i;
			p->tok[t++] = w;
		} else if (raw[i] != '~') {
			*w++ = raw[i];
		} else if (next == '0' || next == '1') {
			*w++ = next == '0' ? '~' : '/';
			i++;
		} else {
			fail(c, "bad escape in %s: \"~\" must be followed by "
				"\"0\" or \"1\"",
			     role);
			return -1;
		}
	}
	*w = '\0';
	p->n = n;
	return 0;
}

/* The raw (escaped) text of token i, for messages. */
static const char *tok_shown(char *buf, size_t bufsz, const struct ptr *p,
			     size_t i)
{
	size_t start = p->at[i] + 1;
	size_t end = i + 1 < p->n ? p->at[i + 1] : p->rawlen;

	if (end == start) {
		buf[0] = '\0';
		return buf;
	}
	return shown(buf, bufsz, p->raw + start, end - start);
}

enum index_kind { INDEX_OK, INDEX_DASH, INDEX_BAD };

/*
 * An array index token: "0" or digits without a leading zero.  An index too
 * large for size_t becomes SIZE_MAX, which is out of range for any array.
 */
static enum index_kind parse_index(const char *tok, size_t *out)
{
	size_t v = 0;

	if (strcmp(tok, "-") == 0)
		return INDEX_DASH;
	if (tok[0] < '0' || tok[0] > '9' || (tok[0] == '0' && tok[1]))
		return INDEX_BAD;
	for (const char *s = tok; *s; s++) {
		if (*s < '0' || *s > '9')
			return INDEX_BAD;
		if (v > (SIZE_MAX - 9) / 10)
			v = SIZE_MAX;
		else
			v = v * 10 + (size_t)(*s - '0');
	}
	*out = v;
	return INDEX_OK;
}

/*
 * The value at the first `upto` tokens of p, or NULL when it does not exist.
 * *bad is set to the index of a token that is not a valid array index where
 * an array is indexed (and the walk stops there).
 */
static json_t *walk(json_t *root, const struct ptr *p, size_t upto,
		    size_t *bad)
{
	json_t *cur = root;

	for (size_t i = 0; i < upto && cur; i++) {
		size_t k = 0;

		if (json_is_object(cur)) {
			cur = jget(cur, p->tok[i]);
		} else if (json_is_array(cur)) {
			switch (parse_index(p->tok[i], &k)) {
			case INDEX_BAD:
				*bad = i;
				return NULL;
			case INDEX_DASH:
				return NULL;
			case INDEX_OK:
				cur = json_array_get(cur, k);
				break;
			}
		} else {
			return NULL;
		}
	}
	return cur;
}

/* Where a value is, or goes: the whole document when parent is NULL. */
struct loc {
	json_t *parent;
	const char *key; /* parent is an object */
	size_t index;    /* parent is an array */
	bool append;     /* index is "-" (add only) */
	json_t *value;   /* the value there, NULL when none */
};

/*
 * Resolves pointer p (named `role` in messages) in root.  The parent must
 * exist and be an object or array.  With `must_exist`, the target must
 * exist too; otherwise it may be a new member, an index up to the length,
 * or "-".  The "from" of move and copy has one message for everything
 * that does not exist, since its path is not in the message prefix.
 */
static int locate(const struct opctx *c, json_t *root, const struct ptr *p,
		  const char *role, bool must_exist, struct loc *l)
{
	char a[SHOWN_BUF], b[SHOWN_BUF];
	bool is_from = strcmp(role, "from") == 0;
	size_t bad = SIZE_MAX, len;
	const char *last;
	json_t *parent;

	memset(l, 0, sizeof(*l));
	if (p->n == 0) {
		l->value = root;
		return 0;
	}
	parent = walk(root, p, p->n - 1, &bad);
	if (bad != SIZE_MAX)
		goto bad_index;
	if (is_from && !json_is_object(parent) && !json_is_array(parent))
		goto from_missing;
	if (!parent) {
		fail(c, "parent %s does not exist",
		     shown(a, sizeof(a), p->raw, p->at[p->n - 1]));
		return -1;
	}
	if (!json_is_object(parent) && !json_is_array(parent)) {
		fail(c, "parent %s is not an object or array",
		     shown(a, sizeof(a), p->raw, p->at[p->n - 1]));
		return -1;
	}
	l->parent = parent;
	last = p->tok[p->n - 1];
	if (json_is_object(parent)) {
		l->key = last;
		l->value = jget(parent, last);
		if (!l->value && must_exist) {
			if (is_from)
				goto from_missing;
			fail(c, "path does not exist");
			return -1;
		}
		return 0;
	}
	len = json_array_size(parent);
	bad = p->n - 1;
	switch (parse_index(last, &l->index)) {
	case INDEX_BAD:
		goto bad_index;
	case INDEX_DASH:
		if (is_from)
			goto from_missing;
		if (must_exist) {
			fail(c, "\"-\" is only valid for add");
			return -1;
		}
		l->append = true;
		l->index = len;
		return 0;
	case INDEX_OK:
		break;
	}
	if (l->index > len || (must_exist && l->index == len)) {
		if (is_from)
			goto from_missing;
		fail(c, "array index %s out of range (length %zu)",
		     tok_shown(a, sizeof(a), p, p->n - 1), len);
		return -1;
	}
	l->value = l->index < len ? json_array_get(parent, l->index) : NULL;
	return 0;

bad_index:
	fail(c, "bad array index \"%s\" in %s", tok_shown(a, sizeof(a), p, bad),
	     role);
	return -1;
from_missing:
	fail(c, "from %s does not exist",
	     shown(b, sizeof(b), p->raw, p->rawlen));
	return -1;
}

/* ------------------------------------------------------------------ */
/* apply: operations                                                  */

enum op_kind { OP_ADD, OP_REMOVE, OP_REPLACE, OP_MOVE, OP_COPY, OP_TEST };

static const char *const op_names[] = {
	[OP_ADD] = "add",   [OP_REMOVE] = "remove", [OP_REPLACE] = "replace",
	[OP_MOVE] = "move", [OP_COPY] = "copy",     [OP_TEST] = "test",
};

static int op_kind(const json_t *s)
{
	size_t len = json_string_length(s);

	for (size_t k = 0; k < sizeof(op_names) / sizeof(op_names[0]); k++)
		if (strlen(op_names[k]) == len &&
		    memcmp(op_names[k], json_string_value(s), len) == 0)
			return (int)k;
	return -1;
}

/* Puts value (reference taken) at l, which locate() found. */
static int put(const struct opctx *c, json_t **root, const struct loc *l,
	       json_t *value, bool insert)
{
	int rc;

	if (!l->parent) {
		json_decref(*root);
		*root = value;
		return 0;
	}
	if (json_is_object(l->parent))
		rc = json_object_set_new_nocheck(l->parent, l->key, value);
	else if (l->append)
		rc = json_array_append_new(l->parent, value);
	else if (insert)
		rc = json_array_insert_new(l->parent, l->index, value);
	else
		rc = json_array_set_new(l->parent, l->index, value);
	if (rc < 0)
		fail(c, "out of memory");
	return rc;
}

static void take_out(const struct loc *l)
{
	if (json_is_object(l->parent))
		json_object_del(l->parent, l->key);
	else
		json_array_remove(l->parent, l->index);
}

/* "from" is a proper prefix of "path", token-wise. */
static bool proper_prefix(const struct ptr *from, const struct ptr *path)
{
	return from->rawlen < path->rawlen &&
	       memcmp(from->raw, path->raw, from->rawlen) == 0 &&
	       path->raw[from->rawlen] == '/';
}

/* Member `name` of op, which must be present (and a string if want_string). */
static const json_t *member(const struct opctx *c, const json_t *op,
			    const char *name, bool want_string)
{
	const json_t *v = jget(op, name);

	if (!v)
		fail(c, "missing \"%s\"", name);
	else if (want_string && !json_is_string(v))
		fail(c, "\"%s\" is not a string", name);
	else
		return v;
	return NULL;
}

static int apply_op(size_t index, const json_t *op, json_t **root,
		    struct diag *d)
{
	struct opctx c = {index, NULL, NULL, 0, d};
	struct ptr path = {0}, from = {0};
	const json_t *jop, *jpath, *jfrom, *value = NULL;
	char name[SHOWN_BUF];
	struct loc at, src = {0};
	json_t *v = NULL;
	int kind, rc = -1;

	if (!json_is_object(op)) {
		fail(&c, "operation is not an object");
		goto out;
	}
	jop = member(&c, op, "op", true);
	if (!jop)
		goto out;
	kind = op_kind(jop);
	if (kind < 0) {
		fail(&c, "unknown op \"%s\"",
		     shown(name, sizeof(name), json_string_value(jop),
			   json_string_length(jop)));
		goto out;
	}
	c.op = op_names[kind];
	jpath = member(&c, op, "path", true);
	if (!jpath)
		goto out;
	c.path = json_string_value(jpath);
	c.pathlen = json_string_length(jpath);
	if (ptr_parse(&c, jpath, "path", &path) < 0)
		goto out;
	if (kind == OP_ADD || kind == OP_REPLACE || kind == OP_TEST) {
		value = member(&c, op, "value", false);
		if (!value)
			goto out;
	}
	if (kind == OP_MOVE || kind == OP_COPY) {
		jfrom = member(&c, op, "from", true);
		if (!jfrom || ptr_parse(&c, jfrom, "from", &from) < 0)
			goto out;
		if (locate(&c, *root, &from, "from", true, &src) < 0)
			goto out;
	}

	switch (kind) {
	case OP_ADD:
	case OP_COPY:
		if (locate(&c, *root, &path, "path", false, &at) < 0)
			goto out;
		v = json_deep_copy(kind == OP_ADD ? value : src.value);
		if (!v) {
			fail(&c, "out of memory");
			goto out;
		}
		rc = put(&c, root, &at, v, true);
		break;
	case OP_REMOVE:
		if (locate(&c, *root, &path, "path", true, &at) < 0)
			goto out;
		if (!at.parent) {
			fail(&c, "cannot remove the whole document");
			goto out;
		}
		take_out(&at);
		rc = 0;
		break;
	case OP_REPLACE:
		if (locate(&c, *root, &path, "path", true, &at) < 0)
			goto out;
		v = json_deep_copy(value);
		if (!v) {
			fail(&c, "out of memory");
			goto out;
		}
		rc = put(&c, root, &at, v, false);
		break;
	case OP_TEST:
		if (locate(&c, *root, &path, "path", true, &at) < 0)
			goto out;
		if (!json_equal(at.value, value)) {
			fail(&c, "test failed: value differs");
			goto out;
		}
		rc = 0;
		break;
	case OP_MOVE:
		if (proper_prefix(&from, &path)) {
			fail(&c, "cannot move %s into its own child",
			     shown(name, sizeof(name), from.raw, from.rawlen));
			goto out;
		}
		if (from.rawlen == path.rawlen &&
		    memcmp(from.raw, path.raw, path.rawlen) == 0) {
			rc = 0;
			break;
		}
		/* src is not the whole document: "" prefixes every path. */
		v = json_incref(src.value);
		take_out(&src);
		if (locate(&c, *root, &path, "path", false, &at) < 0)
			goto out;
		rc = put(&c, root, &at, v, true);
		break;
	}
	v = NULL; /* put() took it, or it was never made */
out:
	json_decref(v);
	ptr_release(&path);
	ptr_release(&from);
	return rc;
}

json_t *patch_apply(const json_t *doc, const json_t *patch, struct diag *d)
{
	json_t *root = NULL;

	if (!json_is_array(patch)) {
		diag_addf(d, "patch is not an array");
		goto out;
	}
	root = json_deep_copy(doc);
	if (!root) {
		diag_addf(d, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < json_array_size(patch); i++) {
		if (apply_op(i, json_array_get(patch, i), &root, d) < 0) {
			json_decref(root);
			root = NULL;
			break;
		}
	}
out:
	return root;
}
