/*
 * leader-wire: the JSON between a follower and the leader (usage/leader-wire.h).
 *
 * Names, not indices: a tenant, flavor, cohort or borrower is looked up in
 * the reader's policy, and one it does not have is an error.  Every field
 * the header lists must be there with its type; members it does not list
 * are ignored (a newer writer of the same version may add some).  Optional
 * strings travel as null.
 */
#include "usage/leader-wire.h"

#include "policy/decide.h"
#include "policy/kinds.h"
#include "policy/policy.h"
#include "policy/quota.h"
#include "policy/workload.h"

#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The workload kinds that reserve, by their wire names. */
static const struct {
	enum wl_kind kind;
	const char *name;
} wire_kinds[] = {
	{WL_POD, "pod"},
	{WL_JOB, "job"},
	{WL_CLAIM, "claim"},
};

#define N_WIRE_KINDS (sizeof(wire_kinds) / sizeof(wire_kinds[0]))

static const char *kind_name(enum wl_kind k)
{
	for (size_t i = 0; i < N_WIRE_KINDS; i++)
		if (wire_kinds[i].kind == k)
			return wire_kinds[i].name;
	return NULL;
}

/* The first row of the table of kinds judged as k. */
static const struct kind_def *kind_row(enum wl_kind k)
{
	size_t n;
	const struct kind_def *all = kinds_all(&n);

	for (size_t i = 0; i < n; i++)
		if (all[i].wl == k)
			return &all[i];
	return NULL;
}

static const enum quota_position positions[] = {
	QUOTA_NOMINAL,     QUOTA_BORROWED,     QUOTA_OVER,
	QUOTA_NEVER_FITS,  QUOTA_NO_QUOTA,     QUOTA_NOT_PREPARED,
	QUOTA_COVERED,     QUOTA_UNAVAILABLE,  QUOTA_LENT_OUT,
	QUOTA_RECLAIM_SHORT,
};

/* ---- writing ------------------------------------------------------------ */

/* A string or null; NULL when out of memory. */
static json_t *str_or_null(const char *s)
{
	return s ? json_string(s) : json_null();
}

json_t *leader_wire_request(const struct workload *wl, const struct quota_claim *c,
			    bool force)
{
	const char *kind = kind_name(wl->kind);
	json_t *j;

	if (!kind || !c->tenant || !c->flavor)
		return NULL;
	j = json_pack(
		"{s:i, s:b, s:{s:s, s:o, s:o, s:o, s:o, s:I, s:o},"
		" s:{s:s, s:s, s:I, s:I, s:I, s:b, s:o, s:i, s:b}}",
		"v", LEADER_WIRE_VERSION, "force", force,
		"workload",
		"kind", kind, "uid", str_or_null(wl->uid),
		"namespace", str_or_null(wl->namespace), "name", str_or_null(wl->name),
		"requestUid", str_or_null(wl->request_uid),
		"generation", (json_int_t)wl->generation,
		"ownerJob", str_or_null(wl->owner_job),
		"claim",
		"tenant", c->tenant->name, "flavor", c->flavor->name,
		"units", (json_int_t)c->units, "perPod", (json_int_t)c->per_pod,
		"pods", (json_int_t)c->pods, "mayBorrow", c->may_borrow,
		"ownerJobUid", str_or_null(c->owner_job_uid),
		"priority", (int)c->priority, "kueueQuota", c->kueue_quota);
	/* A claim that may ride on its pod (policy/charge.h): added in the
	 * same version, absent otherwise, so that replicas of the version
	 * before read every other request as before. */
	if (j && c->owner_pod_uid &&
	    (json_object_set_new(json_object_get(j, "claim"), "ownerPodUid",
				 json_string(c->owner_pod_uid)) < 0 ||
	     json_object_set_new(json_object_get(j, "workload"), "ownerPod",
				 str_or_null(wl->owner_pod)) < 0)) {
		json_decref(j);
		return NULL;
	}
	return j;
}

json_t *leader_wire_result(const struct quota_result *r)
{
	size_t named = r->n_borrowers < QUOTA_MAX_NAMED ? r->n_borrowers : QUOTA_MAX_NAMED;
	json_t *borrowers = json_array(), *j;

	if (!borrowers)
		return NULL;
	for (size_t i = 0; i < named; i++) {
		json_t *b = json_pack("{s:s?, s:I}", "tenant", r->borrowers[i].tenant,
				      "borrowed", (json_int_t)r->borrowers[i].borrowed);

		if (!b || json_array_append_new(borrowers, b) < 0) {
			json_decref(borrowers);
			return NULL;
		}
	}
	j = json_pack("{s:i, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I,"
		      " s:o, s:o, s:I, s:o, s:I, s:i, s:b, s:I, s:s}",
		      "v", LEADER_WIRE_VERSION,
		      "position", quota_position_name(r->position),
		      "requested", (json_int_t)r->requested,
		      "used", (json_int_t)r->used,
		      "nominal", (json_int_t)r->nominal,
		      "borrowingLimit", (json_int_t)r->borrowing_limit,
		      "borrowed", (json_int_t)r->borrowed,
		      "canLend", (json_int_t)r->can_lend,
		      "ceiling", (json_int_t)r->ceiling,
		      "cohortLendable", (json_int_t)r->cohort_lendable,
		      "cohort", str_or_null(r->cohort),
		      "holder", str_or_null(r->holder),
		      "reclaim", (json_int_t)r->reclaim,
		      "borrowers", borrowers,
		      "nBorrowers", (json_int_t)r->n_borrowers,
		      "below", (int)r->below,
		      "anyPriority", r->any_priority,
		      "reclaimable", (json_int_t)r->reclaimable,
		      "reason", r->reason);
	return j;
}

/* ---- reading ------------------------------------------------------------ */

struct rd {
	const char *what; /* "request", "answer" */
	char *err;
	size_t size;
};

static int fail(struct rd *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int fail(struct rd *r, const char *fmt, ...)
{
	char line[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	snprintf(r->err, r->size, "leader %s: %s", r->what, line);
	return -1;
}

static int get_object(struct rd *r, const json_t *o, const char *key,
		      const json_t **out)
{
	*out = json_object_get(o, key);
	if (!json_is_object(*out))
		return fail(r, "\"%s\" %s", key, *out ? "is not an object" : "is missing");
	return 0;
}

/* A string member; null too when nullable (then *out NULL). */
static int get_string(struct rd *r, const json_t *o, const char *key,
		      bool nullable, const char **out)
{
	const json_t *v = json_object_get(o, key);

	*out = NULL;
	if (!v)
		return fail(r, "\"%s\" is missing", key);
	if (nullable && json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return fail(r, "\"%s\" is not a string%s", key, nullable ? " or null" : "");
	*out = json_string_value(v);
	return 0;
}

static int get_int(struct rd *r, const json_t *o, const char *key, int64_t min,
		   int64_t max, int64_t *out)
{
	const json_t *v = json_object_get(o, key);
	json_int_t n;

	*out = 0;
	if (!v)
		return fail(r, "\"%s\" is missing", key);
	if (!json_is_integer(v))
		return fail(r, "\"%s\" is not an integer", key);
	n = json_integer_value(v);
	if (n < min || n > max)
		return fail(r, "\"%s\" is %" PRId64 ", out of range [%" PRId64 ", %" PRId64 "]",
			    key, (int64_t)n, min, max);
	*out = (int64_t)n;
	return 0;
}

static int get_bool(struct rd *r, const json_t *o, const char *key, bool *out)
{
	const json_t *v = json_object_get(o, key);

	*out = false;
	if (!v)
		return fail(r, "\"%s\" is missing", key);
	if (!json_is_boolean(v))
		return fail(r, "\"%s\" is not a boolean", key);
	*out = json_is_true(v);
	return 0;
}

static int check_version(struct rd *r, const json_t *j)
{
	int64_t v;

	if (!json_is_object(j))
		return fail(r, "not a JSON object");
	if (!json_object_get(j, "v"))
		return fail(r, "\"v\" is missing");
	if (get_int(r, j, "v", INT64_MIN, INT64_MAX, &v) < 0)
		return -1;
	if (v != LEADER_WIRE_VERSION)
		return fail(r, "version %" PRId64 ", this replica speaks %d", v,
			    LEADER_WIRE_VERSION);
	return 0;
}

int leader_wire_read_request(const json_t *j, const struct policy *p,
			     struct workload *wl, struct quota_claim *c,
			     bool *force, char *err, size_t size)
{
	struct rd r = {"request", err, size};
	const json_t *w, *cl;
	const char *kind, *tenant, *flavor;
	int64_t gen, units, per_pod, pods, prio;
	bool found = false;

	memset(wl, 0, sizeof(*wl));
	memset(c, 0, sizeof(*c));
	*force = false;
	if (check_version(&r, j) < 0 || get_bool(&r, j, "force", force) < 0 ||
	    get_object(&r, j, "workload", &w) < 0 || get_object(&r, j, "claim", &cl) < 0)
		return -1;

	if (get_string(&r, w, "kind", false, &kind) < 0)
		return -1;
	for (size_t i = 0; i < N_WIRE_KINDS; i++)
		if (strcmp(kind, wire_kinds[i].name) == 0) {
			wl->kind = wire_kinds[i].kind;
			found = true;
		}
	if (!found)
		return fail(&r, "kind \"%.64s\" does not reserve (pod, job or claim)", kind);
	wl->def = kind_row(wl->kind);
	if (get_string(&r, w, "uid", true, &wl->uid) < 0 ||
	    get_string(&r, w, "namespace", true, &wl->namespace) < 0 ||
	    get_string(&r, w, "name", true, &wl->name) < 0 ||
	    get_string(&r, w, "requestUid", true, &wl->request_uid) < 0 ||
	    get_int(&r, w, "generation", 0, INT64_MAX, &gen) < 0 ||
	    get_string(&r, w, "ownerJob", true, &wl->owner_job) < 0)
		return -1;
	wl->generation = gen;

	if (get_string(&r, cl, "tenant", false, &tenant) < 0 ||
	    get_string(&r, cl, "flavor", false, &flavor) < 0 ||
	    get_int(&r, cl, "units", 1, INT64_MAX, &units) < 0 ||
	    get_int(&r, cl, "perPod", 0, UINT32_MAX, &per_pod) < 0 ||
	    get_int(&r, cl, "pods", 1, INT64_MAX, &pods) < 0 ||
	    get_bool(&r, cl, "mayBorrow", &c->may_borrow) < 0 ||
	    get_string(&r, cl, "ownerJobUid", true, &c->owner_job_uid) < 0 ||
	    (json_object_get(cl, "ownerPodUid") &&
	     get_string(&r, cl, "ownerPodUid", true, &c->owner_pod_uid) < 0) ||
	    (json_object_get(w, "ownerPod") &&
	     get_string(&r, w, "ownerPod", true, &wl->owner_pod) < 0) ||
	    get_int(&r, cl, "priority", INT32_MIN, INT32_MAX, &prio) < 0 ||
	    get_bool(&r, cl, "kueueQuota", &c->kueue_quota) < 0)
		return -1;
	c->tenant = policy_tenant_find(p, tenant);
	if (!c->tenant)
		return fail(&r, "tenant \"%.64s\" is not in this replica's policy", tenant);
	c->flavor = policy_flavor_find(p, flavor);
	if (!c->flavor)
		return fail(&r, "flavor \"%.64s\" is not in this replica's policy", flavor);
	c->needed = true;
	c->units = units;
	c->per_pod = (unsigned)per_pod;
	c->pods = pods;
	c->priority = (int32_t)prio;
	wl->owner_job_uid = c->owner_job_uid;
	wl->owner_pod_uid = c->owner_pod_uid;
	return 0;
}

static const char *cohort_of(const struct policy *p, const char *name)
{
	for (size_t i = 0; i < policy_cohort_count(p); i++)
		if (strcmp(policy_cohort_name(p, i), name) == 0)
			return policy_cohort_name(p, i);
	return NULL;
}

int leader_wire_read_result(const json_t *j, const struct policy *p,
			    const struct workload *wl, struct quota_result *out,
			    char *err, size_t size)
{
	struct rd r = {"answer", err, size};
	const char *position, *cohort, *holder, *reason;
	const json_t *borrowers;
	int64_t n_borrowers, below;
	bool found = false;
	size_t named;

	memset(out, 0, sizeof(*out));
	if (check_version(&r, j) < 0 ||
	    get_string(&r, j, "position", false, &position) < 0)
		goto fail;
	for (size_t i = 0; i < sizeof(positions) / sizeof(positions[0]); i++)
		if (strcmp(position, quota_position_name(positions[i])) == 0) {
			out->position = positions[i];
			found = true;
		}
	if (!found) {
		fail(&r, "position \"%.64s\" is not one", position);
		goto fail;
	}
	if (get_int(&r, j, "requested", 0, INT64_MAX, &out->requested) < 0 ||
	    get_int(&r, j, "used", 0, INT64_MAX, &out->used) < 0 ||
	    get_int(&r, j, "nominal", 0, INT64_MAX, &out->nominal) < 0 ||
	    get_int(&r, j, "borrowingLimit", POLICY_NO_LIMIT, INT64_MAX,
		    &out->borrowing_limit) < 0 ||
	    get_int(&r, j, "borrowed", 0, INT64_MAX, &out->borrowed) < 0 ||
	    get_int(&r, j, "canLend", 0, INT64_MAX, &out->can_lend) < 0 ||
	    get_int(&r, j, "ceiling", 0, INT64_MAX, &out->ceiling) < 0 ||
	    get_int(&r, j, "cohortLendable", 0, INT64_MAX, &out->cohort_lendable) < 0 ||
	    get_string(&r, j, "cohort", true, &cohort) < 0 ||
	    get_string(&r, j, "holder", true, &holder) < 0 ||
	    get_int(&r, j, "reclaim", 0, INT64_MAX, &out->reclaim) < 0 ||
	    get_int(&r, j, "nBorrowers", 0, INT64_MAX, &n_borrowers) < 0 ||
	    get_int(&r, j, "below", INT32_MIN, INT32_MAX, &below) < 0 ||
	    get_bool(&r, j, "anyPriority", &out->any_priority) < 0 ||
	    get_int(&r, j, "reclaimable", 0, INT64_MAX, &out->reclaimable) < 0 ||
	    get_string(&r, j, "reason", false, &reason) < 0)
		goto fail;
	out->below = (int32_t)below;
	if (cohort) {
		out->cohort = cohort_of(p, cohort);
		if (!out->cohort) {
			fail(&r, "cohort \"%.64s\" is not in this replica's policy", cohort);
			goto fail;
		}
	}
	/* The holder is the Job the workload's pod belongs to: the string is
	 * the caller's, not the answer's (which goes before it is read). */
	if (holder) {
		if (!wl->owner_job || strcmp(holder, wl->owner_job) != 0) {
			fail(&r, "holder \"%.64s\" is not the workload's Job", holder);
			goto fail;
		}
		out->holder = wl->owner_job;
	}
	if (strlen(reason) >= sizeof(out->reason)) {
		fail(&r, "\"reason\" longer than %zu bytes", sizeof(out->reason) - 1);
		goto fail;
	}
	memcpy(out->reason, reason, strlen(reason) + 1);

	borrowers = json_object_get(j, "borrowers");
	if (!json_is_array(borrowers)) {
		fail(&r, "\"borrowers\" %s", borrowers ? "is not an array" : "is missing");
		goto fail;
	}
	named = json_array_size(borrowers);
	if (named > QUOTA_MAX_NAMED) {
		fail(&r, "%zu borrowers named, at most %d", named, QUOTA_MAX_NAMED);
		goto fail;
	}
	if ((int64_t)named != (n_borrowers < QUOTA_MAX_NAMED ? n_borrowers : QUOTA_MAX_NAMED)) {
		fail(&r, "%zu borrowers named of \"nBorrowers\" %" PRId64, named, n_borrowers);
		goto fail;
	}
	out->n_borrowers = (size_t)n_borrowers;
	for (size_t i = 0; i < named; i++) {
		const json_t *b = json_array_get(borrowers, i);
		const struct policy_tenant *t;
		const char *tenant;

		if (!json_is_object(b)) {
			fail(&r, "borrower %zu is not an object", i);
			goto fail;
		}
		if (get_string(&r, b, "tenant", false, &tenant) < 0 ||
		    get_int(&r, b, "borrowed", 1, INT64_MAX, &out->borrowers[i].borrowed) < 0)
			goto fail;
		t = policy_tenant_find(p, tenant);
		if (!t) {
			fail(&r, "borrower \"%.64s\" is not in this replica's policy", tenant);
			goto fail;
		}
		out->borrowers[i].tenant = t->name;
	}
	return 0;
fail:
	memset(out, 0, sizeof(*out));
	return -1;
}
