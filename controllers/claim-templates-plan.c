/* claim-templates-plan: one round of the template keeper, pure
 * (controllers/claim-templates-plan.h). */
#include "controllers/claim-templates-plan.h"

#include "base/grow.h"
#include "base/strmap.h"
#include "policy/policy.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The namespaces by name: their tenant (NULL: none, or not active). */
struct spaces {
	struct strmap by_name; /* name -> index + 1 */
	const struct policy_tenant **tenant;
};

static int spaces_init(struct spaces *s, const struct policy *p,
		       const struct claim_templates_ns *ns, size_t n)
{
	strmap_init(&s->by_name);
	s->tenant = calloc(n ? n : 1, sizeof(*s->tenant));
	if (!s->tenant)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (!ns[i].name)
			continue;
		if (ns[i].active)
			s->tenant[i] = policy_tenant_for_namespace(p, ns[i].name);
		if (strmap_put(&s->by_name, ns[i].name, i + 1, NULL) < 0)
			return -1;
	}
	return 0;
}

static void spaces_release(struct spaces *s)
{
	strmap_release(&s->by_name);
	free(s->tenant);
}

/* Whether tenant t wants template `name` in its namespace: it names a
 * class t may use, of a DRA flavor, a count within the class's range, and
 * the flavor's dra block of today. */
static bool wanted(const struct policy *p, const struct policy_tenant *t,
		   const char *name)
{
	const struct policy_class *c;
	unsigned count;
	bool current = false;

	if (!t)
		return false;
	c = dra_template_parse(p, name, &count, &current);
	return c && current && c->flavor->dra && policy_tenant_allows_class(t, c);
}

/* "ns/name" keys of the templates seen, each malloc'ed (freed with the map). */
static int seen_keys(struct strmap *m, const struct claim_templates_seen *seen,
		     size_t n)
{
	for (size_t i = 0; i < n; i++) {
		size_t len;
		char *key;

		if (!seen[i].ns || !seen[i].name)
			continue;
		len = strlen(seen[i].ns) + strlen(seen[i].name) + 2;
		key = malloc(len);
		if (!key)
			return -1;
		snprintf(key, len, "%s/%s", seen[i].ns, seen[i].name);
		/* the key is its own value: strmap_release_freeing() frees it */
		if (strmap_put(m, key, (size_t)(uintptr_t)key, NULL) != 0)
			free(key); /* a duplicate, or out of memory */
	}
	return 0;
}

static bool is_seen(const struct strmap *m, const char *ns, const char *name)
{
	char key[300];
	int n = snprintf(key, sizeof(key), "%s/%s", ns, name);

	return n > 0 && (size_t)n < sizeof(key) && strmap_get(m, key, NULL);
}

/* Room for one more step of a list; false when cut or out of memory. */
static bool room(struct claim_templates_plan *pl, void **items, size_t *cap,
		 size_t n, size_t elem, bool *oom)
{
	if (grow_room(items, cap, n, CLAIM_TEMPLATES_MAX_STEPS, elem, oom))
		return true;
	if (!*oom)
		pl->cut = true;
	return false;
}

/* Every wanted template of namespace ns (tenant t) not seen: to create. */
static int plan_creates(const struct policy *p, const struct policy_tenant *t,
			const char *ns, const struct strmap *seen,
			struct claim_templates_plan *pl)
{
	bool oom = false;

	for (size_t i = 0; i < policy_class_count(p); i++) {
		const struct policy_class *c = policy_class_at(p, i);

		if (!c->flavor->dra || !policy_tenant_allows_class(t, c))
			continue;
		for (unsigned n = c->gpus; n && n <= c->max_gpus; n++) {
			struct claim_templates_create *cr;

			if (!room(pl, (void **)&pl->create, &pl->cap_create, pl->n_create,
				  sizeof(*pl->create), &oom))
				return oom ? -1 : 0;
			cr = &pl->create[pl->n_create];
			if (!dra_template_name(c, n, cr->name, sizeof(cr->name)) ||
			    is_seen(seen, ns, cr->name))
				continue;
			cr->ns = ns;
			cr->cls = c;
			cr->count = n;
			pl->n_create++;
		}
	}
	return 0;
}

/* Each template seen: kept, taken, garbage, or none of gpugate's business. */
static int plan_seen(const struct policy *p, const struct spaces *s,
		     const struct claim_templates_ns *ns,
		     const struct claim_templates_seen *seen, size_t n_seen,
		     int64_t now_s, struct claim_templates_plan *pl)
{
	bool oom = false;

	for (size_t i = 0; i < n_seen; i++) {
		const struct claim_templates_seen *t = &seen[i];
		const struct policy_tenant *te;
		bool want, ours;
		size_t v;

		/* Not listed, or not active: nothing is done there (a
		 * Terminating namespace takes its templates with it).  Of no
		 * tenant: nothing is wanted, so gpugate's are garbage. */
		if (!t->ns || !t->name || !strmap_get(&s->by_name, t->ns, &v) ||
		    !ns[v - 1].active)
			continue;
		te = s->tenant[v - 1];
		want = wanted(p, te, t->name);
		ours = t->ours && dra_template_is_gpugates(t->name);
		if (want && ours) {
			pl->kept++;
		} else if (want) {
			if (!room(pl, (void **)&pl->taken, &pl->cap_taken, pl->n_taken,
				  sizeof(*pl->taken), &oom))
				return oom ? -1 : 0;
			pl->taken[pl->n_taken++] = t;
		} else if (ours) {
			struct claim_templates_garbage *g;

			if (!room(pl, (void **)&pl->garbage, &pl->cap_garbage,
				  pl->n_garbage, sizeof(*pl->garbage), &oom))
				return oom ? -1 : 0;
			g = &pl->garbage[pl->n_garbage++];
			g->t = t;
			/* An unknown age is young: never deleted on a guess. */
			g->young = t->created_s <= 0 ||
				   now_s - t->created_s < CLAIM_TEMPLATES_GRACE_S;
		}
	}
	return 0;
}

int claim_templates_plan(const struct policy *p, const struct claim_templates_ns *ns,
			 size_t n_ns, const struct claim_templates_seen *seen,
			 size_t n_seen, int64_t now_s, struct claim_templates_plan *out)
{
	struct spaces s;
	struct strmap keys;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	strmap_init(&keys);
	if (spaces_init(&s, p, ns, n_ns) < 0 || seen_keys(&keys, seen, n_seen) < 0)
		goto out;
	for (size_t i = 0; i < n_ns; i++)
		if (s.tenant[i] && plan_creates(p, s.tenant[i], ns[i].name, &keys, out) < 0)
			goto out;
	if (plan_seen(p, &s, ns, seen, n_seen, now_s, out) < 0)
		goto out;
	rc = 0;
out:
	strmap_release_freeing(&keys);
	spaces_release(&s);
	return rc;
}

void claim_templates_plan_release(struct claim_templates_plan *pl)
{
	free(pl->create);
	free(pl->taken);
	free(pl->garbage);
	memset(pl, 0, sizeof(*pl));
}

bool claim_templates_deletable(const struct claim_templates_garbage *g,
			       const char *const *used, size_t n_used)
{
	if (g->young)
		return false;
	for (size_t i = 0; i < n_used; i++)
		if (used[i] && strcmp(used[i], g->t->name) == 0)
			return false;
	return true;
}
