#include "policy/dra-template.h"

#include "base/hash.h"
#include "policy/k8s.h"
#include "policy/policy.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char base32[] = "0123456789abcdefghijklmnopqrstuv";

/* The class part of a name: the class's name when it is a DNS label,
 * else "c-" and 12 base-32 characters of a hash of it. */
static void class_part(const char *cls, char *buf, size_t size)
{
	uint64_t h;

	if (k8s_dns_label_valid(cls)) {
		snprintf(buf, size, "%s", cls);
		return;
	}
	h = hash_fnv1a(HASH_FNV1A_SEED, cls);
	if (size < 15) {
		buf[0] = '\0';
		return;
	}
	buf[0] = 'c';
	buf[1] = '-';
	for (int i = 0; i < 12; i++)
		buf[2 + i] = base32[(h >> (5 * i)) & 31];
	buf[14] = '\0';
}

bool dra_template_name(const struct policy_class *c, unsigned count, char *buf,
		       size_t size)
{
	char part[64];
	int n;

	if (!c || !c->flavor || !c->flavor->dra || size == 0)
		return false;
	class_part(c->name, part, sizeof(part));
	n = snprintf(buf, size, DRA_TEMPLATE_PREFIX "%s.%u.%s", part, count,
		     c->flavor->dra->hash);
	return n > 0 && (size_t)n < size;
}

bool dra_template_is_gpugates(const char *name)
{
	return name && strncmp(name, DRA_TEMPLATE_PREFIX,
			       sizeof(DRA_TEMPLATE_PREFIX) - 1) == 0;
}

const struct policy_class *dra_template_parse(const struct policy *p,
					      const char *name, unsigned *count,
					      bool *current)
{
	const char *cls, *dot_count, *dot_hash;
	char part[64], *end;
	unsigned long n;

	*count = 0;
	*current = false;
	if (!dra_template_is_gpugates(name))
		return NULL;
	cls = name + sizeof(DRA_TEMPLATE_PREFIX) - 1;
	dot_hash = strrchr(cls, '.');
	if (!dot_hash || dot_hash == cls)
		return NULL;
	for (dot_count = dot_hash - 1; dot_count > cls && *dot_count != '.'; dot_count--)
		;
	if (*dot_count != '.' || dot_count == cls)
		return NULL;
	if (dot_count[1] < '1' || dot_count[1] > '9')
		return NULL;
	n = strtoul(dot_count + 1, &end, 10);
	if (end != dot_hash || n > DRA_TEMPLATE_COUNT_MAX)
		return NULL;
	for (size_t i = 0; i < policy_class_count(p); i++) {
		const struct policy_class *c = policy_class_at(p, i);
		size_t pl;

		if (!c->flavor->dra)
			continue;
		class_part(c->name, part, sizeof(part));
		pl = strlen(part);
		if (pl != (size_t)(dot_count - cls) || strncmp(cls, part, pl) != 0)
			continue;
		if (n < c->gpus || n > c->max_gpus)
			return NULL;
		*count = (unsigned)n;
		*current = strcmp(dot_hash + 1, c->flavor->dra->hash) == 0;
		return c;
	}
	return NULL;
}

/* Appends s to buf at *len; false when it does not fit. */
static bool add(char *buf, size_t size, size_t *len, const char *s)
{
	size_t n = strlen(s);

	if (*len + n >= size)
		return false;
	memcpy(buf + *len, s, n + 1);
	*len += n;
	return true;
}

/* The attribute or capacity name of kv as CEL reads it: indexed by its
 * domain (k8s_dra_name_split). */
static bool add_field(char *buf, size_t size, size_t *len, const char *what,
		      const char *driver, const char *name)
{
	struct k8s_dra_name n;
	char domain[256];

	k8s_dra_name_split(driver, name, &n);
	if (n.domain_len >= sizeof(domain))
		return false;
	memcpy(domain, n.domain, n.domain_len);
	domain[n.domain_len] = '\0';
	return add(buf, size, len, "device.") && add(buf, size, len, what) &&
	       add(buf, size, len, "['") && add(buf, size, len, domain) &&
	       add(buf, size, len, "'].") && add(buf, size, len, n.id);
}

int dra_template_cel(const struct policy_dra *d, char *buf, size_t size)
{
	size_t len = 0;
	bool ok;

	if (size == 0)
		return -1;
	buf[0] = '\0';
	ok = add(buf, size, &len, "device.driver == '") &&
	     add(buf, size, &len, d->driver) && add(buf, size, &len, "'");
	for (size_t i = 0; ok && i < d->n_attributes; i++)
		ok = add(buf, size, &len, " && ") &&
		     add_field(buf, size, &len, "attributes", d->driver,
			       d->attributes[i].key) &&
		     add(buf, size, &len, " == '") &&
		     add(buf, size, &len, d->attributes[i].value) &&
		     add(buf, size, &len, "'");
	for (size_t i = 0; ok && i < d->n_min_capacity; i++)
		ok = add(buf, size, &len, " && ") &&
		     add_field(buf, size, &len, "capacity", d->driver,
			       d->min_capacity[i].key) &&
		     add(buf, size, &len, ".compareTo(quantity('") &&
		     add(buf, size, &len, d->min_capacity[i].value) &&
		     add(buf, size, &len, "')) >= 0");
	/* A shared flavor's devices are those the scheduler may allocate
	 * more than once (consumable capacity). */
	if (ok && d->shared)
		ok = add(buf, size, &len, " && device.allowMultipleAllocations");
	return ok ? (int)len : -1;
}

/* The binary and decimal suffixes of a quantity, longest first. */
static const char *const suffixes[] = {"Ki", "Mi", "Gi", "Ti", "Pi", "Ei",
				       "k", "M", "G", "T", "P", "E", ""};

int dra_share_quantity(const struct policy_dra_share *sh, unsigned units, char *buf,
		       size_t size)
{
	const char *q = sh->per_unit;
	size_t digits = strspn(q, "0123456789");
	int n = -1;

	if (sh->per_unit_value <= 0 || (units && sh->per_unit_value > INT64_MAX / units))
		return -1;
	/* "10Gi" x 3 = "30Gi": the admin's unit kept where the mantissa is
	 * a plain whole number (no overflow: its value is below the
	 * product); else the value, a plain number. */
	for (size_t i = 0; digits > 0 && digits < 19 && i < sizeof(suffixes) / sizeof(*suffixes);
	     i++)
		if (strcmp(q + digits, suffixes[i]) == 0) {
			n = snprintf(buf, size, "%lld%s",
				     strtoll(q, NULL, 10) * (long long)units, suffixes[i]);
			break;
		}
	if (n < 0)
		n = snprintf(buf, size, "%lld", (long long)sh->per_unit_value * units);
	return n >= 0 && (size_t)n < size ? n : -1;
}
