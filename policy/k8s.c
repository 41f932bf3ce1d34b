#include "policy/k8s.h"

#include <string.h>

static bool is_lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool is_alnum(char c)
{
	return is_lower_alnum(c) || (c >= 'A' && c <= 'Z');
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* [a-z0-9]([-a-z0-9]*[a-z0-9])? over [s, s+n), of any length but 0. */
static bool dns_label_chars(const char *s, size_t n)
{
	if (n == 0)
		return false;
	if (!is_lower_alnum(s[0]) || !is_lower_alnum(s[n - 1]))
		return false;
	for (size_t i = 1; i + 1 < n; i++)
		if (!is_lower_alnum(s[i]) && s[i] != '-')
			return false;
	return true;
}

/* A DNS label over [s, s+n). */
static bool dns_label_span(const char *s, size_t n)
{
	return n <= 63 && dns_label_chars(s, n);
}

bool k8s_dns_label_valid(const char *s)
{
	return dns_label_span(s, strlen(s));
}

static bool dns_subdomain_span(const char *s, size_t n)
{
	size_t start = 0;

	if (n == 0 || n > 253)
		return false;
	for (size_t i = 0; i <= n; i++) {
		if (i == n || s[i] == '.') {
			/* The apiserver (IsDNS1123Subdomain) limits the whole
			 * name to 253, not each part to 63. */
			if (!dns_label_chars(s + start, i - start))
				return false;
			start = i + 1;
		}
	}
	return true;
}

bool k8s_dns_subdomain_valid(const char *s)
{
	return dns_subdomain_span(s, strlen(s));
}

static bool name_part_span(const char *s, size_t n)
{
	if (n == 0 || n > 63)
		return false;
	if (!is_alnum(s[0]) || !is_alnum(s[n - 1]))
		return false;
	for (size_t i = 1; i + 1 < n; i++)
		if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
			return false;
	return true;
}

bool k8s_qualified_name_valid(const char *s)
{
	const char *slash = strchr(s, '/');

	if (!slash)
		return name_part_span(s, strlen(s));
	if (strchr(slash + 1, '/'))
		return false;
	return dns_subdomain_span(s, (size_t)(slash - s)) &&
	       name_part_span(slash + 1, strlen(slash + 1));
}

bool k8s_label_value_valid(const char *s)
{
	return s[0] == '\0' || name_part_span(s, strlen(s));
}

bool k8s_env_name_valid(const char *s)
{
	if (!s[0] || is_digit(s[0]))
		return false;
	for (const char *p = s; *p; p++)
		if (!is_alnum(*p) && *p != '-' && *p != '.' && *p != '_')
			return false;
	return true;
}

/*
 * Splits a quantity into mantissa digits and a suffix.  Kubernetes accepts
 * <sign><digits>[.<digits>]<suffix> where the suffix is a binary SI suffix
 * (Ki..Ei), a decimal SI suffix (n u m "" k M G T P E) or a decimal
 * exponent (e3, E-2).  Multipliers are returned as base^exp.
 */
struct qty {
	const char *int_part;
	size_t int_len;
	const char *frac_part;
	size_t frac_len;
	int base;    /* 2 or 10 */
	int exp;     /* power of base */
};

static int qty_split(const char *s, struct qty *q)
{
	const char *p = s;
	static const struct {
		const char *sfx;
		int base, exp;
	} suffixes[] = {
		{"Ki", 2, 10}, {"Mi", 2, 20}, {"Gi", 2, 30}, {"Ti", 2, 40},
		{"Pi", 2, 50}, {"Ei", 2, 60}, {"n", 10, -9}, {"u", 10, -6},
		{"m", 10, -3}, {"k", 10, 3}, {"M", 10, 6}, {"G", 10, 9},
		{"T", 10, 12}, {"P", 10, 15}, {"E", 10, 18},
	};

	if (*p == '+')
		p++;
	q->int_part = p;
	while (is_digit(*p))
		p++;
	q->int_len = (size_t)(p - q->int_part);
	q->frac_part = p;
	q->frac_len = 0;
	if (*p == '.') {
		q->frac_part = ++p;
		while (is_digit(*p))
			p++;
		q->frac_len = (size_t)(p - q->frac_part);
	}
	if (q->int_len + q->frac_len == 0 || q->int_len + q->frac_len > 64)
		return -1;
	q->base = 10;
	q->exp = 0;
	if (*p == '\0')
		return 0;
	for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
		if (strcmp(p, suffixes[i].sfx) == 0) {
			q->base = suffixes[i].base;
			q->exp = suffixes[i].exp;
			return 0;
		}
	}
	if (*p == 'e' || *p == 'E') {
		int sign = 1, e = 0;

		p++;
		if (*p == '+' || *p == '-')
			sign = (*p++ == '-') ? -1 : 1;
		if (!is_digit(*p))
			return -1;
		while (is_digit(*p)) {
			e = e * 10 + (*p++ - '0');
			if (e > 1000)
				return -1;
		}
		if (*p != '\0')
			return -1;
		q->exp = sign * e;
		return 0;
	}
	return -1;
}

bool k8s_quantity_valid(const char *s)
{
	struct qty q;

	return qty_split(s, &q) == 0;
}

int k8s_quantity_whole(const char *s, int64_t *out)
{
	struct qty q;
	char digits[130];
	size_t nd = 0, point;
	int64_t v = 0;

	if (qty_split(s, &q) < 0)
		return -1;
	memcpy(digits, q.int_part, q.int_len);
	memcpy(digits + q.int_len, q.frac_part, q.frac_len);
	nd = q.int_len + q.frac_len;
	point = q.int_len; /* value = digits / 10^(nd - point) * base^exp */

	if (q.base == 10) {
		/* Move the decimal point; digits past it must all be zero. */
		long long pt = (long long)point + q.exp;

		for (size_t i = 0; i < nd; i++) {
			if ((long long)i >= pt) {
				if (digits[i] != '0')
					return -1;
				continue;
			}
			if (v > (INT64_MAX - (digits[i] - '0')) / 10)
				return -1;
			v = v * 10 + (digits[i] - '0');
		}
		for (long long i = (long long)nd; i < pt; i++) {
			if (v > INT64_MAX / 10)
				return -1;
			v *= 10;
		}
	} else {
		/* Binary suffix: integer mantissa only ("1.5Gi" is exact but rare). */
		if (q.frac_len) {
			for (size_t i = 0; i < q.frac_len; i++)
				if (q.frac_part[i] != '0')
					return -1;
		}
		for (size_t i = 0; i < q.int_len; i++) {
			if (v > (INT64_MAX - (q.int_part[i] - '0')) / 10)
				return -1;
			v = v * 10 + (q.int_part[i] - '0');
		}
		if (v && q.exp >= 63)
			return -1;
		if (v > (INT64_MAX >> q.exp))
			return -1;
		v <<= q.exp;
	}
	*out = v;
	return 0;
}

/* A natural number in base 10^9, least significant limb first: enough
 * for a quantity's 64 digits moved by 2064 decimal places (the widest gap
 * between two exponents qty_split takes) and times 2^60. */
#define BIG_BASE 1000000000u
#define BIG_LIMBS 256

struct big {
	uint32_t limb[BIG_LIMBS];
	size_t n;
};

/* b *= m (m < BIG_BASE); -1 when it overflows BIG_LIMBS. */
static int big_mul(struct big *b, uint32_t m)
{
	uint64_t carry = 0;

	for (size_t i = 0; i < b->n; i++) {
		uint64_t x = (uint64_t)b->limb[i] * m + carry;

		b->limb[i] = (uint32_t)(x % BIG_BASE);
		carry = x / BIG_BASE;
	}
	while (carry) {
		if (b->n == BIG_LIMBS)
			return -1;
		b->limb[b->n++] = (uint32_t)(carry % BIG_BASE);
		carry /= BIG_BASE;
	}
	return 0;
}

/* b = q's digits * 10^ten * 2^two (ten, two >= 0). */
static int big_of(const struct qty *q, int ten, int two, struct big *b)
{
	b->n = 0;
	for (size_t i = 0; i < q->int_len + q->frac_len; i++) {
		char d = i < q->int_len ? q->int_part[i] : q->frac_part[i - q->int_len];

		if (big_mul(b, 10) < 0)
			return -1;
		if (d != '0') { /* digit d added: limb 0 has room below BIG_BASE */
			if (b->n == 0)
				b->limb[b->n++] = 0;
			b->limb[0] += (uint32_t)(d - '0');
		}
	}
	for (; ten >= 9; ten -= 9)
		if (big_mul(b, BIG_BASE) < 0)
			return -1;
	for (; ten > 0; ten--)
		if (big_mul(b, 10) < 0)
			return -1;
	for (; two >= 29; two -= 29)
		if (big_mul(b, 1u << 29) < 0)
			return -1;
	return two > 0 ? big_mul(b, 1u << two) : 0;
}

int k8s_quantity_cmp(const char *a, const char *b, int *cmp)
{
	struct qty q[2];
	struct big v[2];
	int ten[2], two[2], low;

	if (qty_split(a, &q[0]) < 0 || qty_split(b, &q[1]) < 0)
		return -1;
	/* value = digits * 10^ten * 2^two: both scaled to the lower ten. */
	for (int i = 0; i < 2; i++) {
		ten[i] = (q[i].base == 10 ? q[i].exp : 0) - (int)q[i].frac_len;
		two[i] = q[i].base == 2 ? q[i].exp : 0;
	}
	low = ten[0] < ten[1] ? ten[0] : ten[1];
	if (big_of(&q[0], ten[0] - low, two[0], &v[0]) < 0 ||
	    big_of(&q[1], ten[1] - low, two[1], &v[1]) < 0)
		return -1;
	*cmp = 0;
	if (v[0].n != v[1].n)
		*cmp = v[0].n < v[1].n ? -1 : 1;
	for (size_t i = v[0].n; *cmp == 0 && i-- > 0;)
		if (v[0].limb[i] != v[1].limb[i])
			*cmp = v[0].limb[i] < v[1].limb[i] ? -1 : 1;
	return 0;
}

/* a += b; -1 when it overflows BIG_LIMBS. */
static int big_add(struct big *a, const struct big *b)
{
	uint32_t carry = 0;

	for (size_t i = 0; i < b->n || carry; i++) {
		uint32_t x;

		if (i == a->n) {
			if (a->n == BIG_LIMBS)
				return -1;
			a->limb[a->n++] = 0;
		}
		x = a->limb[i] + (i < b->n ? b->limb[i] : 0) + carry;
		carry = x >= BIG_BASE;
		a->limb[i] = carry ? x - BIG_BASE : x;
	}
	return 0;
}

static int big_cmp(const struct big *a, const struct big *b)
{
	/* Limbs above n may be 0 after an add that carried nothing there:
	 * compare the significant ones. */
	size_t na = a->n, nb = b->n;

	while (na && !a->limb[na - 1])
		na--;
	while (nb && !b->limb[nb - 1])
		nb--;
	if (na != nb)
		return na < nb ? -1 : 1;
	for (size_t i = na; i-- > 0;)
		if (a->limb[i] != b->limb[i])
			return a->limb[i] < b->limb[i] ? -1 : 1;
	return 0;
}

/* q's decimal exponent once its fraction is an integer (qty_split). */
static int qty_ten(const struct qty *q)
{
	return (q->base == 10 ? q->exp : 0) - (int)q->frac_len;
}

int k8s_quantity_sum_cmp(size_t n, const char *(*term)(void *ctx, size_t i), void *ctx,
			 const char *b, int *cmp)
{
	struct big sum = {.n = 0}, x, vb;
	struct qty q;
	int low;

	if (qty_split(b, &q) < 0)
		return -1;
	low = qty_ten(&q);
	for (size_t i = 0; i < n; i++) {
		const char *t = term(ctx, i);
		struct qty qt;

		if (!t)
			continue;
		if (qty_split(t, &qt) < 0)
			return -1;
		if (qty_ten(&qt) < low)
			low = qty_ten(&qt);
	}
	for (size_t i = 0; i < n; i++) {
		const char *t = term(ctx, i);
		struct qty qt;

		if (!t)
			continue;
		qty_split(t, &qt);
		if (big_of(&qt, qty_ten(&qt) - low, qt.base == 2 ? qt.exp : 0, &x) < 0 ||
		    big_add(&sum, &x) < 0)
			return -1;
	}
	if (big_of(&q, qty_ten(&q) - low, q.base == 2 ? q.exp : 0, &vb) < 0)
		return -1;
	*cmp = big_cmp(&sum, &vb);
	return 0;
}

void k8s_dra_name_split(const char *driver, const char *name, struct k8s_dra_name *out)
{
	const char *slash = strchr(name, '/');

	out->domain = slash ? name : driver;
	out->domain_len = slash ? (size_t)(slash - name) : strlen(driver);
	out->id = slash ? slash + 1 : name;
}
