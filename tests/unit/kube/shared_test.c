/*
 * The shared usage backend (usage/shared-backend.c) over a fake document
 * store with compare-and-swap (this file): several replicas, one truth.
 */
#include "base/diag.h"
#include "policy/decide.h"
#include "tests/unit/test_policy.h"
#include "kube/reservations.h"
#include "kube/shared.h"
#include "usage/usage.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char policy_yaml[] =
	"version: 1\n"
	"flavors:\n"
	"  - {name: h100, resource: nvidia.com/gpu, sharing: exclusive, gpusPerNode: 8}\n"
	"classes:\n"
	"  - {name: one, flavor: h100, gpus: 1, maxGpus: 8}\n"
	"tenants:\n"
	"  - name: a\n"
	"    namespaces: [a]\n"
	"    cohort: lab\n"
	"    quota: [{flavor: h100, nominal: 10, borrowingLimit: 4}]\n"
	"  - name: b\n"
	"    namespaces: [b]\n"
	"    cohort: lab\n"
	"    quota: [{flavor: h100, nominal: 6, lendingLimit: 6}]\n"
	"  - name: solo\n"
	"    namespaces: [solo]\n"
	"    quota: [{flavor: h100, nominal: 3}]\n";

static struct policy *P;
static uint64_t fake_now;

/* ---- a document store with compare-and-swap ------------------------------ */

#define DOMAINS 4

struct fake_store {
	pthread_mutex_t mu;
	char names[DOMAINS][RESV_DOMAIN_NAME_SIZE];
	struct resv_doc docs[DOMAINS];
	unsigned versions[DOMAINS];
	size_t n;
	unsigned conflicts, writes;
	bool down; /* every transact fails */
};

static struct fake_store S;

static size_t domain_of(const char *name)
{
	for (size_t i = 0; i < S.n; i++)
		if (strcmp(S.names[i], name) == 0)
			return i;
	cr_assert_lt(S.n, DOMAINS);
	snprintf(S.names[S.n], sizeof(S.names[S.n]), "%s", name);
	resv_doc_init(&S.docs[S.n]);
	return S.n++;
}

static void copy_doc(struct resv_doc *to, const struct resv_doc *from)
{
	struct diag d;

	diag_init(&d);
	resv_doc_init(to);
	for (size_t i = 0; i < from->n; i++)
		cr_assert_geq(resv_doc_add(to, &from->items[i], &d), 0, "%s",
			      diag_text(&d));
}

static int fake_transact(void *io, const char *domain, usage_shared_fn *fn,
			 void *ctx, char *err, size_t errsz)
{
	(void)io;
	for (int attempt = 0; attempt < 64; attempt++) {
		struct resv_doc doc;
		unsigned version;
		size_t i;

		pthread_mutex_lock(&S.mu);
		if (S.down) {
			pthread_mutex_unlock(&S.mu);
			snprintf(err, errsz, "GET /api/...: Couldn't connect to server");
			return -1;
		}
		i = domain_of(domain);
		copy_doc(&doc, &S.docs[i]);
		version = S.versions[i];
		pthread_mutex_unlock(&S.mu);
		if (!fn(ctx, &doc)) {
			resv_doc_release(&doc);
			return 0;
		}
		pthread_mutex_lock(&S.mu);
		if (S.versions[i] == version) {
			resv_doc_release(&S.docs[i]);
			S.docs[i] = doc;
			S.versions[i]++;
			S.writes++;
			pthread_mutex_unlock(&S.mu);
			return 0;
		}
		S.conflicts++;
		pthread_mutex_unlock(&S.mu);
		resv_doc_release(&doc);
	}
	snprintf(err, errsz, "gave up after 64 attempts");
	return -1;
}

static uint64_t now_ms(void)
{
	return __atomic_load_n(&fake_now, __ATOMIC_RELAXED);
}

static struct usage_store *replica(const char *name)
{
	struct usage_store *u = usage_shared_new(&(struct usage_shared_config){
		.io = {.transact = fake_transact},
		.replica = name,
		.reservation_ttl_ms = 60000,
		.grace_ms = 5000,
		.now_ms = now_ms,
	});

	cr_assert_not_null(u);
	return u;
}

static void setup(void)
{
	P = test_policy(policy_yaml);
	memset(&S, 0, sizeof(S));
	pthread_mutex_init(&S.mu, NULL);
	fake_now = 1764680000000u;
}

static void teardown(void)
{
	for (size_t i = 0; i < S.n; i++)
		resv_doc_release(&S.docs[i]);
	pthread_mutex_destroy(&S.mu);
	policy_free(P);
}

TestSuite(shared, .init = setup, .fini = teardown);

/* ---- helpers ---------------------------------------------------------------- */

struct req {
	struct workload wl;
	struct quota_claim claim;
	char uid[64];
};

static void make_pod(struct req *r, const char *ns, const char *uid, int64_t units)
{
	memset(r, 0, sizeof(*r));
	snprintf(r->uid, sizeof(r->uid), "%s", uid);
	r->wl.kind = WL_POD;
	r->wl.op = WL_CREATE;
	r->wl.namespace = ns;
	r->wl.name = r->uid;
	r->wl.uid = r->uid;
	r->wl.request_uid = "r";
	r->claim.needed = true;
	r->claim.tenant = policy_tenant_for_namespace(P, ns);
	r->claim.flavor = policy_flavor_find(P, "h100");
	r->claim.units = units;
	r->claim.per_pod = (unsigned)units;
	r->claim.pods = 1;
	r->claim.may_borrow = true;
}

static enum quota_position reserve(struct usage_store *u, const char *ns,
				   const char *uid, int64_t units,
				   struct quota_result *out)
{
	struct quota_result q;
	struct req r;

	make_pod(&r, ns, uid, units);
	usage_decide(u, P, &r.wl, &r.claim, true, false, out ? out : &q);
	return (out ? out : &q)->position;
}

static void observe(struct usage_store *u, const char *ns, const char *uid,
		    int64_t units)
{
	struct usage_item it = {
		.uid = uid, .kind = USAGE_PODS, .namespace = ns, .name = uid,
		.tenant = policy_tenant_for_namespace(P, ns)->name, .flavor = "h100",
		.per_pod = units, .slots = 1, .units = units, .active = true,
	};

	usage_observe(u, &it);
}

static size_t pending(void)
{
	size_t n = 0;

	for (size_t i = 0; i < S.n; i++)
		n += S.docs[i].n;
	return n;
}

/* ---- tests -------------------------------------------------------------------- */

Test(shared, two_replicas_never_hand_out_the_same_last_units)
{
	struct usage_store *r1 = replica("r1"), *r2 = replica("r2");

	cr_assert_eq(reserve(r1, "solo", "p1", 2, NULL), QUOTA_NOMINAL);
	/* r2 knows nothing of p1 but the document: only 1 left. */
	cr_assert_eq(reserve(r2, "solo", "p2", 2, NULL), QUOTA_OVER);
	cr_assert_eq(reserve(r2, "solo", "p3", 1, NULL), QUOTA_NOMINAL);
	cr_assert_eq(pending(), 2);
	usage_free(r1);
	usage_free(r2);
}

Test(shared, what_the_watch_shows_is_counted_once)
{
	struct usage_store *r1 = replica("r1"), *r2 = replica("r2");

	cr_assert_eq(reserve(r1, "solo", "p1", 2, NULL), QUOTA_NOMINAL);
	/* Both watches show p1: observed, its record no longer adds. */
	observe(r1, "solo", "p1", 2);
	observe(r2, "solo", "p1", 2);
	cr_assert_eq(reserve(r2, "solo", "p2", 1, NULL), QUOTA_NOMINAL);
	cr_assert_eq(reserve(r2, "solo", "p3", 1, NULL), QUOTA_OVER);
	usage_free(r1);
	usage_free(r2);
}

Test(shared, a_retried_request_replaces_its_record)
{
	struct usage_store *r1 = replica("r1");

	cr_assert_eq(reserve(r1, "solo", "p1", 3, NULL), QUOTA_NOMINAL);
	cr_assert_eq(reserve(r1, "solo", "p1", 3, NULL), QUOTA_NOMINAL,
		     "judged without its own units");
	cr_assert_eq(pending(), 1);
	usage_free(r1);
}

Test(shared, borrowing_reads_the_whole_cohort)
{
	struct usage_store *r1 = replica("r1"), *r2 = replica("r2");

	/* b lends 6; a borrows at most 4 beyond its 10. */
	cr_assert_eq(reserve(r1, "a", "a1", 10, NULL), QUOTA_NOMINAL);
	cr_assert_eq(reserve(r2, "a", "a2", 4, NULL), QUOTA_BORROWED);
	cr_assert_eq(reserve(r1, "b", "b1", 3, NULL), QUOTA_NOMINAL);
	cr_assert_eq(reserve(r2, "a", "a3", 1, NULL), QUOTA_OVER);
	usage_free(r1);
	usage_free(r2);
}

Test(shared, unreachable_or_unwatched_means_denied_and_nothing_written)
{
	struct usage_store *r1 = replica("r1");
	struct quota_result q;

	S.down = true;
	cr_assert_eq(reserve(r1, "solo", "p1", 1, &q), QUOTA_UNAVAILABLE);
	cr_assert(strstr(q.reason, "Couldn't connect"), "%s", q.reason);
	S.down = false;
	usage_set_watching(r1, false);
	cr_assert_eq(reserve(r1, "solo", "p2", 1, &q), QUOTA_UNAVAILABLE);
	cr_assert(strstr(q.reason, "watch is down"), "%s", q.reason);
	cr_assert_eq(pending(), 0);
	usage_set_watching(r1, true);
	cr_assert_eq(reserve(r1, "solo", "p3", 1, NULL), QUOTA_NOMINAL);
	usage_free(r1);
}

Test(shared, a_peek_writes_nothing)
{
	struct usage_store *r1 = replica("r1");
	struct quota_result q;
	struct req r;

	make_pod(&r, "solo", "p1", 1);
	usage_decide(r1, P, &r.wl, &r.claim, false, false, &q);
	cr_assert_eq(q.position, QUOTA_NOMINAL);
	cr_assert_eq(S.writes, 0);
	usage_free(r1);
}

Test(shared, the_leader_prunes_shown_records_after_grace_and_lost_ones_after_ttl)
{
	struct usage_store *r1 = replica("r1");
	size_t failed;
	char err[200];

	cr_assert_eq(reserve(r1, "solo", "shown", 1, NULL), QUOTA_NOMINAL);
	cr_assert_eq(reserve(r1, "solo", "lost", 1, NULL), QUOTA_NOMINAL);
	observe(r1, "solo", "shown", 1);
	fake_now += 4999;
	cr_assert_eq(usage_shared_prune(r1, P, &failed, err, sizeof(err)), 0);
	fake_now += 1;
	cr_assert_eq(usage_shared_prune(r1, P, &failed, err, sizeof(err)), 1);
	cr_assert_eq(failed, 0, "%s", err);
	cr_assert_eq(pending(), 1);
	fake_now += 55001;
	cr_assert_eq(usage_shared_prune(r1, P, &failed, err, sizeof(err)), 1,
		     "never shown, older than the TTL");
	cr_assert_eq(pending(), 0);
	S.down = true;
	usage_shared_prune(r1, P, &failed, err, sizeof(err));
	cr_assert_eq(failed, 2, "the cohort lab and tenant solo: %s", err);
	usage_free(r1);
}

struct racer {
	struct usage_store *u;
	int id;
	int admitted;
};

static void *race(void *arg)
{
	struct racer *r = arg;

	for (int i = 0; i < 40; i++) {
		char uid[32];
		enum quota_position pos;

		snprintf(uid, sizeof(uid), "t%d-%d", r->id, i);
		pos = reserve(r->u, "solo", uid, 1, NULL);
		if (pos == QUOTA_NOMINAL || pos == QUOTA_BORROWED)
			r->admitted++;
		else
			cr_assert_eq(pos, QUOTA_OVER, "%d", pos);
	}
	return NULL;
}

Test(shared, three_replicas_of_four_threads_admit_exactly_the_quota)
{
	struct usage_store *rs[3] = {replica("r1"), replica("r2"), replica("r3")};
	struct racer r[12];
	pthread_t th[12];
	int total = 0;

	for (int i = 0; i < 12; i++) {
		r[i] = (struct racer){.u = rs[i % 3], .id = i};
		pthread_create(&th[i], NULL, race, &r[i]);
	}
	for (int i = 0; i < 12; i++) {
		pthread_join(th[i], NULL);
		total += r[i].admitted;
	}
	cr_assert_eq(total, 3, "nominal 3, no cohort");
	cr_assert_eq(pending(), 3);
	for (int i = 0; i < 3; i++)
		usage_free(rs[i]);
}
