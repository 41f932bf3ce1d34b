#include "codec/jsonfast.h"

#include "base/text.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* jansson's integers are long long on every platform gpugate builds on. */
_Static_assert(sizeof(json_int_t) == sizeof(long long), "json_int_t");
#define INT_MIN_JSON LLONG_MIN

struct frame {
	json_t *c;
	bool obj;
	/* An object's pending key: into the input, or owned (had escapes). */
	const char *key;
	size_t klen;
	size_t key_pos; /* where the key starts, for messages */
	char *key_owned;
	int skip_node; /* this container's node in the skip tree, or -1 */
};

/*
 * The paths not to build, as a tree of keys.  Node 0 is the document; a
 * node's children are the members (or, for "[]", the elements) below it
 * that lead to a skipped value.  The parser follows the tree alongside the
 * document: a container off every path gets no node, and the values inside
 * it cost one comparison each.
 */
#define SKIP_NODES 512
#define SKIP_DEPTH 16
#define SKIP_TEXT 4096

struct skip_node {
	const char *key; /* into the skip set's own copy of the paths */
	size_t klen;
	uint32_t sig;    /* key_sig() of the key */
	bool any;        /* "[]": every element of an array */
	bool leaf;       /* the value here is skipped */
	int child;       /* first child, or -1 */
	int next;        /* next sibling, or -1 */
	int any_child;   /* the "[]" child, or -1 */
	uint64_t named;  /* bit sig_bit() of every named child */
};

struct jsonfast_skip {
	struct skip_node node[SKIP_NODES];
	size_t count;
	char text[SKIP_TEXT];
};

struct parser {
	const struct jsonfast_skip *skip;
	const char *buf;
	size_t len;
	size_t pos;
	char *err;
	size_t errsz;
	bool failed;
	/* Scratch for strings with escapes, reused for the whole parse. */
	char *scratch;
	size_t scap;
	struct frame *stack;
	size_t depth;
	size_t cap;
};

static void fail(struct parser *p, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void fail(struct parser *p, const char *fmt, ...)
{
	size_t line = 1, col = 1;
	char what[200];
	va_list ap;

	if (p->failed)
		return;
	p->failed = true;
	for (size_t i = 0; i < p->pos && i < p->len; i++) {
		if (p->buf[i] == '\n') {
			line++;
			col = 1;
		} else {
			col++;
		}
	}
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	/* A quoted key may hold a newline or be cut inside a character. */
	text_clean(what);
	snprintf(p->err, p->errsz, "%s (line %zu, column %zu)", what, line, col);
}

/* The position of the first byte at or after pos that is not white space. */
static inline size_t past_ws(const char *b, size_t pos, size_t len)
{
	/* The apiserver sends compact JSON: most calls find no space. */
	if (pos < len && (unsigned char)b[pos] > ' ')
		return pos;
	while (pos < len && (b[pos] == ' ' || b[pos] == '\t' || b[pos] == '\n' ||
			     b[pos] == '\r'))
		pos++;
	return pos;
}

static inline void skip_ws(struct parser *p)
{
	p->pos = past_ws(p->buf, p->pos, p->len);
}

/* Length of the well-formed UTF-8 sequence at s (n bytes left), else 0. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	unsigned cp, min;
	size_t k;

	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0) {
		k = 2;
		cp = s[0] & 0x1f;
		min = 0x80;
	} else if ((s[0] & 0xf0) == 0xe0) {
		k = 3;
		cp = s[0] & 0x0f;
		min = 0x800;
	} else if ((s[0] & 0xf8) == 0xf0) {
		k = 4;
		cp = s[0] & 0x07;
		min = 0x10000;
	} else {
		return 0;
	}
	if (k > n)
		return 0;
	for (size_t i = 1; i < k; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return k;
}

static bool scratch_add(struct parser *p, size_t *n, const char *s, size_t k)
{
	if (*n + k + 1 > p->scap) {
		size_t cap = p->scap ? p->scap : 256;
		char *nb;

		while (cap < *n + k + 1)
			cap *= 2;
		nb = realloc(p->scratch, cap);
		if (!nb) {
			fail(p, "out of memory");
			return false;
		}
		p->scratch = nb;
		p->scap = cap;
	}
	memcpy(p->scratch + *n, s, k);
	*n += k;
	return true;
}

static int hex4(const char *s)
{
	int v = 0;

	for (int i = 0; i < 4; i++) {
		char c = s[i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= c - '0';
		else if (c >= 'a' && c <= 'f')
			v |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v |= c - 'A' + 10;
		else
			return -1;
	}
	return v;
}

static size_t utf8_put(char *out, unsigned cp)
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xe0 | (cp >> 12));
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | (cp >> 18));
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/*
 * The first byte at or after pos that a string cannot take as it is: a
 * quote, a backslash, a control character or a non-ASCII byte; len when
 * there is none.
 */
static inline __attribute__((always_inline)) size_t
special_at(const unsigned char *b, size_t pos, size_t len)
{
#if defined(__SSE2__)
	/* 16 bytes at a time: the signed compare takes the non-ASCII bytes
	 * as negative, so they count as control characters here. */
	while (len - pos >= 16) {
		const __m128i v = _mm_loadu_si128((const __m128i *)(b + pos));
		const __m128i special = _mm_or_si128(
			_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')),
				     _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))),
			_mm_cmplt_epi8(v, _mm_set1_epi8(0x20)));
		const unsigned mask = (unsigned)_mm_movemask_epi8(special);

		if (mask)
			return pos + (size_t)__builtin_ctz(mask);
		pos += 16;
	}
#endif
	while (pos < len && b[pos] >= 0x20 && b[pos] < 0x80 && b[pos] != '"' &&
	       b[pos] != '\\')
		pos++;
	return pos;
}

/*
 * The escape at p->pos: a backslash with at least one byte after it.
 * Moves past it and returns the code point it stands for (a surrogate
 * pair is one), or -1 when it is not valid.
 */
static int read_escape(struct parser *p)
{
	const char *s = p->buf + p->pos;
	int cp, lo;

	switch (s[1]) {
	case '"': cp = '"'; break;
	case '\\': cp = '\\'; break;
	case '/': cp = '/'; break;
	case 'b': cp = '\b'; break;
	case 'f': cp = '\f'; break;
	case 'n': cp = '\n'; break;
	case 'r': cp = '\r'; break;
	case 't': cp = '\t'; break;
	case 'u':
		if (p->pos + 6 > p->len || (cp = hex4(s + 2)) < 0) {
			fail(p, "invalid \\u escape");
			return -1;
		}
		p->pos += 6;
		if (cp >= 0xdc00 && cp <= 0xdfff) {
			fail(p, "invalid Unicode escape: lone low surrogate");
			return -1;
		}
		if (cp >= 0xd800 && cp <= 0xdbff) {
			s = p->buf + p->pos;
			if (p->pos + 6 > p->len || s[0] != '\\' || s[1] != 'u' ||
			    (lo = hex4(s + 2)) < 0 || lo < 0xdc00 || lo > 0xdfff) {
				fail(p, "invalid Unicode escape: lone high surrogate");
				return -1;
			}
			p->pos += 6;
			cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
		}
		return cp;
	default:
		fail(p, "invalid escape \\%c",
		     (s[1] >= 0x20 && s[1] < 0x7f) ? s[1] : '?');
		return -1;
	}
	p->pos += 2;
	return cp;
}

/*
 * A string starting at the opening quote.  On success (*s, *n) is its
 * text: into the input when it had no escape (*in_scratch false), else
 * into the scratch buffer (valid until the next string).
 */
static bool parse_string(struct parser *p, const char **s, size_t *n,
			 bool *in_scratch)
{
	const unsigned char *b = (const unsigned char *)p->buf;
	size_t start = ++p->pos, out = 0;
	bool esc = false;

	for (;;) {
		size_t run = p->pos;
		char u8[4];
		int cp;

		/* The common case: plain bytes, copied (or not) as one run. */
		while (p->pos < p->len) {
			unsigned char c;
			size_t k;

			p->pos = special_at(b, p->pos, p->len);
			if (p->pos >= p->len)
				break;
			c = b[p->pos];
			if (c == '"' || c == '\\')
				break;
			if (c < 0x20) {
				fail(p, "control character 0x%02x in a string", c);
				return false;
			}
			k = utf8_len(b + p->pos, p->len - p->pos);
			if (!k) {
				fail(p, "invalid UTF-8 byte 0x%02x", c);
				return false;
			}
			p->pos += k;
		}
		if (p->pos >= p->len) {
			fail(p, "unterminated string");
			return false;
		}
		if (esc && !scratch_add(p, &out, p->buf + run, p->pos - run))
			return false;
		if (b[p->pos] == '"') {
			p->pos++;
			if (!esc) {
				*s = p->buf + start;
				*n = p->pos - 1 - start;
			} else {
				*s = p->scratch;
				*n = out;
			}
			*in_scratch = esc;
			return true;
		}
		/* A backslash: from here on the text is built in scratch. */
		if (!esc) {
			esc = true;
			out = 0;
			if (!scratch_add(p, &out, p->buf + start, p->pos - start))
				return false;
		}
		if (p->pos + 1 >= p->len) {
			fail(p, "unterminated string");
			return false;
		}
		cp = read_escape(p);
		if (cp < 0 || !scratch_add(p, &out, u8, utf8_put(u8, (unsigned)cp)))
			return false;
	}
}

static json_t *parse_number(struct parser *p)
{
	const char *s = p->buf + p->pos, *e = p->buf + p->len, *q = s;
	bool real = false, neg = false;
	char tmp[128], *copy = tmp;
	json_t *v = NULL;
	size_t n;

	if (q < e && *q == '-') {
		neg = true;
		q++;
	}
	if (q >= e || *q < '0' || *q > '9') {
		fail(p, "invalid number");
		return NULL;
	}
	if (*q == '0') {
		q++;
		if (q < e && *q >= '0' && *q <= '9') {
			fail(p, "invalid number: leading zero");
			return NULL;
		}
	} else {
		while (q < e && *q >= '0' && *q <= '9')
			q++;
	}
	if (q < e && *q == '.') {
		real = true;
		q++;
		if (q >= e || *q < '0' || *q > '9') {
			fail(p, "invalid number: digit expected after '.'");
			return NULL;
		}
		while (q < e && *q >= '0' && *q <= '9')
			q++;
	}
	if (q < e && (*q == 'e' || *q == 'E')) {
		real = true;
		q++;
		if (q < e && (*q == '+' || *q == '-'))
			q++;
		if (q >= e || *q < '0' || *q > '9') {
			fail(p, "invalid number: digit expected in the exponent");
			return NULL;
		}
		while (q < e && *q >= '0' && *q <= '9')
			q++;
	}
	n = (size_t)(q - s);
	if (!real) {
		/* Accumulate negatively: json_int_t's minimum has no positive. */
		json_int_t acc = 0;

		for (const char *d = s + neg; d < q; d++) {
			int dig = *d - '0';

			if (acc < (INT_MIN_JSON + dig) / 10) {
				fail(p, neg ? "too big negative integer" : "too big integer");
				return NULL;
			}
			acc = acc * 10 - dig;
		}
		if (!neg && acc == INT_MIN_JSON) {
			fail(p, "too big integer");
			return NULL;
		}
		p->pos += n;
		v = json_integer(neg ? acc : -acc);
	} else {
		double d;
		char *end;

		if (n >= sizeof(tmp)) {
			copy = malloc(n + 1);
			if (!copy) {
				fail(p, "out of memory");
				return NULL;
			}
		}
		memcpy(copy, s, n);
		copy[n] = '\0';
		errno = 0;
		d = strtod(copy, &end);
		if (copy != tmp)
			free(copy);
		if ((d == HUGE_VAL || d == -HUGE_VAL) && errno == ERANGE) {
			fail(p, "real number overflow");
			return NULL;
		}
		p->pos += n;
		v = json_real(d);
	}
	if (!v)
		fail(p, "out of memory");
	return v;
}

static bool literal(struct parser *p, const char *word)
{
	size_t n = strlen(word);

	if (p->len - p->pos < n || memcmp(p->buf + p->pos, word, n) != 0)
		return false;
	p->pos += n;
	return true;
}

static bool push(struct parser *p, json_t *c, bool obj, int skip_node)
{
	if (p->depth >= JSONFAST_MAX_DEPTH) {
		json_decref(c);
		fail(p, "maximum nesting depth %d reached", JSONFAST_MAX_DEPTH);
		return false;
	}
	if (p->depth == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 32;
		struct frame *ns = realloc(p->stack, cap * sizeof(*ns));

		if (!ns) {
			json_decref(c);
			fail(p, "out of memory");
			return false;
		}
		p->stack = ns;
		p->cap = cap;
	}
	p->stack[p->depth++] =
		(struct frame){.c = c, .obj = obj, .skip_node = skip_node};
	return true;
}

/* Forgets the open object's pending key: its value was skipped. */
static void drop_key(struct parser *p)
{
	struct frame *f = &p->stack[p->depth - 1];

	free(f->key_owned);
	f->key_owned = NULL;
	f->key = NULL;
}

/* Attaches a finished value to the open container; takes v. */
static bool attach(struct parser *p, json_t *v)
{
	struct frame *f = &p->stack[p->depth - 1];
	bool ok;

	if (!f->obj) {
		if (json_array_append_new(f->c, v) < 0) {
			fail(p, "out of memory");
			return false;
		}
		return true;
	}
	{
		size_t before = json_object_size(f->c);

		ok = json_object_setn_new_nocheck(f->c, f->key, f->klen, v) == 0;
		if (ok && json_object_size(f->c) == before) {
			p->pos = f->key_pos; /* point at the second key */
			fail(p, "duplicate object key \"%.*s\"",
			     (int)(f->klen > 64 ? 64 : f->klen), f->key);
			ok = false;
		} else if (!ok) {
			fail(p, "out of memory");
		}
	}
	free(f->key_owned);
	f->key_owned = NULL;
	f->key = NULL;
	return ok;
}

/* Reads an object key and the ':' after it into the top frame. */
static bool read_key(struct parser *p)
{
	struct frame *f = &p->stack[p->depth - 1];
	const char *s;
	size_t n;
	bool in_scratch;

	if (p->pos >= p->len || p->buf[p->pos] != '"') {
		fail(p, "string or '}' expected");
		return false;
	}
	f->key_pos = p->pos;
	if (!parse_string(p, &s, &n, &in_scratch))
		return false;
	/* Only an escape can put a NUL in a string. */
	if (in_scratch && memchr(s, '\0', n)) {
		fail(p, "NUL character in an object key");
		return false;
	}
	if (in_scratch) {
		f->key_owned = malloc(n + 1);
		if (!f->key_owned) {
			fail(p, "out of memory");
			return false;
		}
		memcpy(f->key_owned, s, n);
		f->key_owned[n] = '\0';
		s = f->key_owned;
	}
	f->key = s;
	f->klen = n;
	skip_ws(p);
	if (p->pos >= p->len || p->buf[p->pos] != ':') {
		fail(p, "':' expected");
		return false;
	}
	p->pos++;
	return true;
}

/*
 * A key's length and first and last bytes: most keys of an object on a
 * path differ from every child's in these, and are told apart without a
 * compare (a pod spec's node has about twenty children).
 */
static inline uint32_t key_sig(const char *key, size_t klen)
{
	return (uint32_t)klen << 16 ^ (uint32_t)(unsigned char)key[0] << 8 ^
	       (uint32_t)(unsigned char)key[klen - 1];
}

static inline unsigned sig_bit(uint32_t sig)
{
	return (sig * 0x9e3779b1u) >> 26;
}

/*
 * The skip tree's node for the value about to be read (the member whose key
 * was just read, or the next element), or -1 when no path leads there.
 */
static int skip_node_of_next(const struct parser *p)
{
	const struct frame *f;
	const struct skip_node *at;
	uint32_t sig;

	if (!p->skip)
		return -1;
	if (!p->depth)
		return 0;
	f = &p->stack[p->depth - 1];
	if (f->skip_node < 0)
		return -1;
	at = &p->skip->node[f->skip_node];
	if (!f->obj)
		return at->any_child;
	if (!f->klen)
		return -1; /* no path has an empty key */
	sig = key_sig(f->key, f->klen);
	if (!(at->named >> sig_bit(sig) & 1))
		return -1;
	for (int c = at->child; c >= 0; c = p->skip->node[c].next) {
		const struct skip_node *n = &p->skip->node[c];

		if (n->sig == sig && !n->any && n->klen == f->klen &&
		    memcmp(n->key, f->key, f->klen) == 0)
			return c;
	}
	return -1;
}

static int skip_child(struct jsonfast_skip *sk, int parent, const char *key,
		      size_t klen)
{
	bool any = klen == 2 && key[0] == '[' && key[1] == ']';
	int *link = &sk->node[parent].child;

	for (; *link >= 0; link = &sk->node[*link].next) {
		struct skip_node *n = &sk->node[*link];

		if (n->any == any && n->klen == klen && memcmp(n->key, key, klen) == 0)
			return *link;
	}
	if (sk->count == SKIP_NODES)
		return -1;
	sk->node[sk->count] = (struct skip_node){
		.key = key, .klen = klen, .sig = key_sig(key, klen), .any = any,
		.child = -1, .next = -1, .any_child = -1};
	if (any)
		sk->node[parent].any_child = (int)sk->count;
	else
		sk->node[parent].named |= 1ull << sig_bit(sk->node[sk->count].sig);
	*link = (int)sk->count;
	return (int)sk->count++;
}

/* Adds comp[0..n) below node `at`, every alternative of every component. */
static bool skip_add(struct jsonfast_skip *sk, int at, char **comp, size_t n)
{
	const char *alt = comp[0];

	for (;;) {
		const char *bar = strchr(alt, '|');
		size_t klen = bar ? (size_t)(bar - alt) : strlen(alt);
		int c;

		if (klen == 0)
			return false;
		c = skip_child(sk, at, alt, klen);
		if (c < 0)
			return false;
		if (n == 1)
			sk->node[c].leaf = true;
		else if (!skip_add(sk, c, comp + 1, n - 1))
			return false;
		if (!bar)
			return true;
		alt = bar + 1;
	}
}

struct jsonfast_skip *jsonfast_skip_new(const char *const *paths, char *err,
					size_t errsz)
{
	struct jsonfast_skip *sk = calloc(1, sizeof(*sk));
	size_t used = 0;

	if (!sk) {
		snprintf(err, errsz, "out of memory");
		return NULL;
	}
	sk->node[0] = (struct skip_node){.child = -1, .next = -1, .any_child = -1};
	sk->count = 1;
	for (; paths && *paths; paths++) {
		size_t len = strlen(*paths);
		char *comp[SKIP_DEPTH], *t;
		size_t n = 0;

		if (len == 0 || len >= SKIP_TEXT - used) {
			snprintf(err, errsz, len ? "skip paths too long"
						 : "an empty skip path");
			goto bad;
		}
		t = memcpy(sk->text + used, *paths, len + 1);
		used += len + 1;
		for (;;) {
			char *slash = strchr(t, '/');

			if (n == SKIP_DEPTH) {
				snprintf(err, errsz, "skip path \"%s\" is over %d keys deep",
					 *paths, SKIP_DEPTH);
				goto bad;
			}
			comp[n++] = t;
			if (!slash)
				break;
			*slash = '\0';
			t = slash + 1;
		}
		if (!skip_add(sk, 0, comp, n)) {
			snprintf(err, errsz, "skip path \"%s\" has an empty key, or the "
				 "paths make over %d keys", *paths, SKIP_NODES - 1);
			goto bad;
		}
	}
	return sk;
bad:
	free(sk);
	return NULL;
}

void jsonfast_skip_free(struct jsonfast_skip *sk)
{
	free(sk);
}

/*
 * Checks the string whose opening quote is at pos, for skip_value(): the
 * rules of parse_string(), without its text.  Returns where the string
 * ends (past its closing quote), or 0 when it is not valid (failed, p->pos
 * at the fault).  Sets *nul when the string holds an escaped NUL (the only
 * way a NUL gets into a JSON string).
 */
static inline __attribute__((always_inline)) size_t
skip_string(struct parser *p, size_t pos, bool *nul)
{
	const unsigned char *b = (const unsigned char *)p->buf;

	pos++;
	for (;;) {
		unsigned char c;

		pos = special_at(b, pos, p->len);
		p->pos = pos;
		if (pos >= p->len) {
			fail(p, "unterminated string");
			return 0;
		}
		c = b[pos];
		if (c == '"')
			return pos + 1;
		if (c == '\\') {
			int cp;

			if (pos + 1 >= p->len) {
				p->pos = p->len;
				fail(p, "unterminated string");
				return 0;
			}
			cp = read_escape(p);
			if (cp < 0)
				return 0;
			*nul = *nul || cp == 0;
			pos = p->pos;
		} else if (c < 0x20) {
			fail(p, "control character 0x%02x in a string", c);
			return 0;
		} else {
			size_t k = utf8_len(b + pos, p->len - pos);

			if (!k) {
				fail(p, "invalid UTF-8 byte 0x%02x", c);
				return 0;
			}
			pos += k;
		}
	}
}

/*
 * Checks one value without building it; the same grammar, depth limit and
 * string rules as the rest of the reader (no duplicate-key check).  The
 * position is kept in a local (the skipped parts are a third of a review's
 * bytes) and written back to p->pos where a message needs it.
 */
static bool skip_value(struct parser *p)
{
	const char *b = p->buf;
	const size_t len = p->len;
	size_t pos = p->pos;
	char open[JSONFAST_MAX_DEPTH];
	size_t depth = 0;
	bool nul = false;
	char c;

	for (;;) {
		pos = past_ws(b, pos, len);
		if (pos >= len)
			goto end_of_input;
		c = b[pos];
		if (c == '{' || c == '[') {
			if (p->depth + depth >= JSONFAST_MAX_DEPTH) {
				p->pos = pos;
				fail(p, "maximum nesting depth %d reached", JSONFAST_MAX_DEPTH);
				return false;
			}
			open[depth++] = c;
			pos = past_ws(b, pos + 1, len);
			if (pos < len && b[pos] == (c == '{' ? '}' : ']')) {
				pos++;
				depth--;
				goto closed;
			}
			if (c == '{')
				goto key;
			continue;
		}
		if (c == '"') {
			pos = skip_string(p, pos, &nul);
			if (!pos)
				return false;
		} else {
			p->pos = pos;
			if (c == 't' || c == 'f' || c == 'n') {
				if (!literal(p, c == 't' ? "true" : c == 'f' ? "false" : "null")) {
					fail(p, "invalid literal");
					return false;
				}
			} else if (c == '-' || (c >= '0' && c <= '9')) {
				json_t *num = parse_number(p);

				if (!num)
					return false;
				json_decref(num);
			} else {
				fail(p, "unexpected character '%c'",
				     (unsigned char)c >= 0x20 && (unsigned char)c < 0x7f ? c : '?');
				return false;
			}
			pos = p->pos;
		}
closed:
		/* A value is complete: close what it completes. */
		for (;;) {
			if (!depth) {
				p->pos = pos;
				return true;
			}
			pos = past_ws(b, pos, len);
			if (pos >= len)
				goto end_of_input;
			c = b[pos];
			if (c == ',') {
				pos++;
				if (open[depth - 1] == '{')
					goto key;
				break;
			}
			if (c == (open[depth - 1] == '{' ? '}' : ']')) {
				pos++;
				depth--;
				continue;
			}
			p->pos = pos;
			fail(p, open[depth - 1] == '{' ? "',' or '}' expected"
						       : "',' or ']' expected");
			return false;
		}
		continue;
key:
		pos = past_ws(b, pos, len);
		if (pos >= len || b[pos] != '"') {
			p->pos = pos;
			fail(p, "string or '}' expected");
			return false;
		}
		nul = false;
		pos = skip_string(p, pos, &nul);
		if (!pos)
			return false;
		if (nul) {
			p->pos = pos;
			fail(p, "NUL character in an object key");
			return false;
		}
		pos = past_ws(b, pos, len);
		if (pos >= len || b[pos] != ':') {
			p->pos = pos;
			fail(p, "':' expected");
			return false;
		}
		pos++;
	}
end_of_input:
	p->pos = pos;
	fail(p, "unexpected end of input");
	return false;
}

json_t *jsonfast_parse(const char *buf, size_t len, char *err, size_t errsz)
{
	return jsonfast_parse_skip(buf, len, NULL, err, errsz);
}

json_t *jsonfast_parse_skip(const char *buf, size_t len,
			    const struct jsonfast_skip *skip, char *err,
			    size_t errsz)
{
	struct parser p = {
		.skip = skip, .buf = buf, .len = len, .err = err, .errsz = errsz};
	json_t *root = NULL, *v;
	int node;

	for (;;) {
		skip_ws(&p);
		if (p.pos >= p.len) {
			fail(&p, p.depth ? "unexpected end of input" : "no JSON value");
			goto out;
		}
		node = skip_node_of_next(&p);
		if (node >= 0 && p.skip->node[node].leaf) {
			if (!skip_value(&p))
				goto out;
			/* A member is left out of its object; an element reads
			 * as null, so that the indexes after it stay true. */
			v = p.stack[p.depth - 1].obj ? NULL : json_null();
			goto complete;
		}
		/* A value. */
		switch (p.buf[p.pos]) {
		case '{':
		case '[': {
			bool obj = p.buf[p.pos] == '{';

			v = obj ? json_object() : json_array();
			if (!v || !push(&p, v, obj, node)) {
				if (!v)
					fail(&p, "out of memory");
				goto out;
			}
			p.pos++;
			skip_ws(&p);
			if (p.pos < p.len && p.buf[p.pos] == (obj ? '}' : ']')) {
				p.pos++;
				p.depth--;
				goto finished;
			}
			if (obj && !read_key(&p))
				goto out;
			continue;
		}
		case '"': {
			const char *s;
			size_t n;
			bool in_scratch;

			if (!parse_string(&p, &s, &n, &in_scratch))
				goto out;
			v = json_stringn_nocheck(s, n);
			break;
		}
		case 't':
			v = literal(&p, "true") ? json_true() : NULL;
			break;
		case 'f':
			v = literal(&p, "false") ? json_false() : NULL;
			break;
		case 'n':
			v = literal(&p, "null") ? json_null() : NULL;
			break;
		default:
			if (p.buf[p.pos] == '-' ||
			    (p.buf[p.pos] >= '0' && p.buf[p.pos] <= '9')) {
				v = parse_number(&p);
				if (!v)
					goto out;
				break;
			}
			fail(&p, "unexpected character '%c'",
			     (unsigned char)p.buf[p.pos] >= 0x20 &&
					     (unsigned char)p.buf[p.pos] < 0x7f
				     ? p.buf[p.pos]
				     : '?');
			goto out;
		}
		if (!v) {
			fail(&p, "invalid literal");
			goto out;
		}
		if (0) {
finished:
			v = p.stack[p.depth].c;
		}
complete:
		/* v is complete: attach it, then close what it completes. */
		for (;;) {
			if (!p.depth) {
				root = v;
				skip_ws(&p);
				if (p.pos != p.len) {
					fail(&p, "end of input expected");
					json_decref(root);
					root = NULL;
				}
				goto out;
			}
			if (!v)
				drop_key(&p);
			else if (!attach(&p, v))
				goto out;
			skip_ws(&p);
			if (p.pos >= p.len) {
				fail(&p, "unexpected end of input");
				goto out;
			}
			{
				struct frame *f = &p.stack[p.depth - 1];
				char c = p.buf[p.pos];

				if (c == ',') {
					p.pos++;
					if (f->obj) {
						skip_ws(&p);
						if (!read_key(&p))
							goto out;
					}
					break; /* the next value */
				}
				if (c == (f->obj ? '}' : ']')) {
					p.pos++;
					v = f->c;
					p.depth--;
					continue; /* the container is a finished value */
				}
				fail(&p, f->obj ? "',' or '}' expected" : "',' or ']' expected");
				goto out;
			}
		}
	}
out:
	/* A container is attached to its parent only once it is complete:
	 * on failure, every open one is released on its own. */
	for (size_t i = 0; p.failed && i < p.depth; i++) {
		free(p.stack[i].key_owned);
		json_decref(p.stack[i].c);
	}
	free(p.stack);
	free(p.scratch);
	return p.failed ? NULL : root;
}
