/*
 * The shared usage backend (usage/shared-backend.c) over a fake document
 * store with compare-and-swap (this file): several replicas, one truth.
 */
#include "base/diag.h"
#include "policy/decide.h"
#include "tests/unit/test_policy.h"
#include "usage/reservations.h"
#include "usage/shared-backend.h"
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

/* ---- issue #26: every decision under the compare-and-swap ------------------ */

/* A request of any kind: a pod (of Job `job` when not NULL), or a Job of
 * `slots` pods, at `generation`. */
struct ask {
	enum wl_kind kind;
	const char *ns, *uid, *name, *job;
	int64_t per_pod, slots, generation;
};

static enum quota_position ask(struct usage_store *u, const struct ask *a)
{
	struct quota_result q;
	struct workload wl = {
		.kind = a->kind, .op = WL_CREATE, .request_uid = "r",
		.namespace = a->ns, .name = a->name ? a->name : a->uid, .uid = a->uid,
		.generation = a->generation, .owner_job = a->job ? "the-job" : NULL,
		.owner_job_uid = a->job,
	};
	int64_t pods = a->kind == WL_JOB ? a->slots : 1;
	struct quota_claim c = {
		.needed = true, .tenant = policy_tenant_for_namespace(P, a->ns),
		.flavor = policy_flavor_find(P, "h100"), .units = pods * a->per_pod,
		.per_pod = (unsigned)a->per_pod, .pods = pods, .may_borrow = true,
		.owner_job_uid = a->kind == WL_POD ? a->job : NULL,
	};

	usage_decide(u, P, &wl, &c, true, false, &q);
	return q.position;
}

/* What the watch shows: an object of the same shape, active or not. */
static void show(struct usage_store *u, const struct ask *a, bool active)
{
	bool job = a->kind == WL_JOB;
	struct usage_item it = {
		.uid = a->uid, .kind = job ? USAGE_JOBS : USAGE_PODS,
		.namespace = a->ns, .name = a->name ? a->name : a->uid,
		.tenant = policy_tenant_for_namespace(P, a->ns)->name,
		.flavor = "h100", .per_pod = a->per_pod, .slots = job ? a->slots : 1,
		.units = (job ? a->slots : 1) * a->per_pod, .active = active,
		.owner_job_uid = job ? NULL : a->job, .generation = a->generation,
	};

	usage_observe(u, &it);
}

static void show_all(struct usage_store **rs, size_t n, const struct ask *a,
		     bool active)
{
	for (size_t i = 0; i < n; i++)
		show(rs[i], a, active);
}

struct rider {
	struct usage_store *u;
	int id;
	enum quota_position pos;
};

static void *ride(void *arg)
{
	struct rider *r = arg;
	char uid[32];

	snprintf(uid, sizeof(uid), "rider-%d", r->id);
	r->pos = ask(r->u, &(struct ask){.kind = WL_POD, .ns = "solo", .uid = uid,
					  .job = "job-1", .per_pod = 3});
	return NULL;
}

static void *ride1(void *arg)
{
	struct rider *r = arg;
	char uid[32];

	snprintf(uid, sizeof(uid), "rider1-%d", r->id);
	r->pos = ask(r->u, &(struct ask){.kind = WL_POD, .ns = "solo", .uid = uid,
					  .job = "job-1", .per_pod = 1, .generation = 1});
	return NULL;
}

Test(shared, twelve_riders_of_a_one_slot_gang_on_three_replicas_take_one_slot)
{
	struct usage_store *rs[3] = {replica("r1"), replica("r2"), replica("r3")};
	const struct ask job = {.kind = WL_JOB, .ns = "solo", .uid = "job-1",
				.per_pod = 3, .slots = 1, .generation = 1};
	struct rider r[12];
	pthread_t th[12];
	int covered = 0, over = 0;

	/* The Job holds solo's 3 for its one pod; nobody runs it (managedBy). */
	cr_assert_eq(ask(rs[0], &job), QUOTA_NOMINAL);
	show_all(rs, 3, &job, true);
	for (int i = 0; i < 12; i++) {
		r[i] = (struct rider){.u = rs[i % 3], .id = i};
		pthread_create(&th[i], NULL, ride, &r[i]);
	}
	for (int i = 0; i < 12; i++) {
		pthread_join(th[i], NULL);
		covered += r[i].pos == QUOTA_COVERED;
		over += r[i].pos == QUOTA_OVER;
	}
	cr_assert_eq(covered, 1, "one slot, one rider (%d)", covered);
	cr_assert_eq(over, 11, "the rest are charged and over quota (%d)", over);
	for (int i = 0; i < 3; i++)
		usage_free(rs[i]);
}

Test(shared, a_plain_job_with_one_free_slot_gives_it_once)
{
	struct usage_store *rs[3] = {replica("r1"), replica("r2"), replica("r3")};
	const struct ask job = {.kind = WL_JOB, .ns = "solo", .uid = "job-1",
				.per_pod = 1, .slots = 2, .generation = 1};
	const struct ask p0 = {.kind = WL_POD, .ns = "solo", .uid = "p0",
			       .job = "job-1", .per_pod = 1, .generation = 1};
	struct rider r[12];
	pthread_t th[12];
	int covered = 0, nominal = 0;

	/* A Job of 2 x 1 whose controller made one pod: one slot free, and
	 * 1 unit of solo's 3 left beside the gang. */
	cr_assert_eq(ask(rs[0], &job), QUOTA_NOMINAL);
	show_all(rs, 3, &job, true);
	cr_assert_eq(ask(rs[1], &p0), QUOTA_COVERED);
	show_all(rs, 3, &p0, true);
	for (int i = 0; i < 12; i++) {
		r[i] = (struct rider){.u = rs[i % 3], .id = i};
		pthread_create(&th[i], NULL, ride1, &r[i]);
	}
	for (int i = 0; i < 12; i++) {
		pthread_join(th[i], NULL);
		covered += r[i].pos == QUOTA_COVERED;
		nominal += r[i].pos == QUOTA_NOMINAL;
	}
	cr_assert_eq(covered, 1, "the free slot, once (%d)", covered);
	cr_assert_eq(nominal, 1, "then the one unit left, as a bare pod (%d)", nominal);
	for (int i = 0; i < 3; i++)
		usage_free(rs[i]);
}

Test(shared, a_rider_whose_pod_finished_frees_its_slot)
{
	struct usage_store *rs[2] = {replica("r1"), replica("r2")};
	const struct ask job = {.kind = WL_JOB, .ns = "solo", .uid = "job-1",
				.per_pod = 3, .slots = 1, .generation = 1};
	const struct ask p1 = {.kind = WL_POD, .ns = "solo", .uid = "p1",
			       .job = "job-1", .per_pod = 3, .generation = 1};
	const struct ask p2 = {.kind = WL_POD, .ns = "solo", .uid = "p2",
			       .job = "job-1", .per_pod = 3, .generation = 1};

	cr_assert_eq(ask(rs[0], &job), QUOTA_NOMINAL);
	show_all(rs, 2, &job, true);
	cr_assert_eq(ask(rs[0], &p1), QUOTA_COVERED);
	cr_assert_eq(ask(rs[1], &p2), QUOTA_OVER, "the slot is taken, in the document");
	show_all(rs, 2, &p1, true);
	cr_assert_eq(ask(rs[1], &p2), QUOTA_OVER, "the slot is taken, by the watch");
	show_all(rs, 2, &p1, false); /* Failed: the Job controller replaces it */
	cr_assert_eq(ask(rs[1], &p2), QUOTA_COVERED);
	for (int i = 0; i < 2; i++)
		usage_free(rs[i]);
}

Test(shared, resumed_jobs_are_new_generations_that_count)
{
	struct usage_store *rs[2] = {replica("r1"), replica("r2")};
	struct ask j1 = {.kind = WL_JOB, .ns = "solo", .uid = "j1", .per_pod = 1,
			 .slots = 2, .generation = 1};
	struct ask j2 = {.kind = WL_JOB, .ns = "solo", .uid = "j2", .per_pod = 1,
			 .slots = 2, .generation = 1};

	/* Each ran (2 of solo's 3), then was suspended (0). */
	cr_assert_eq(ask(rs[0], &j1), QUOTA_NOMINAL);
	show_all(rs, 2, &j1, true);
	show_all(rs, 2, &j1, false);
	cr_assert_eq(ask(rs[1], &j2), QUOTA_NOMINAL);
	show_all(rs, 2, &j2, true);
	show_all(rs, 2, &j2, false);
	/* Resumed at once on two replicas: 2 + 2 > 3. */
	j1.generation = j2.generation = 2;
	cr_assert_eq(ask(rs[0], &j1), QUOTA_NOMINAL);
	cr_assert_eq(ask(rs[1], &j2), QUOTA_OVER,
		     "j1's record of generation 2 counts though its uid was shown");
	/* The watch shows j1's generation 2 running: counted once. */
	show_all(rs, 2, &j1, true);
	cr_assert_eq(ask(rs[1], &j2), QUOTA_OVER);
	cr_assert_eq(ask(rs[1], &(struct ask){.kind = WL_POD, .ns = "solo", .uid = "p",
					      .per_pod = 1, .generation = 1}),
		     QUOTA_NOMINAL);
	for (int i = 0; i < 2; i++)
		usage_free(rs[i]);
}

Test(shared, a_record_of_a_finished_or_deleted_object_counts_for_nothing)
{
	struct usage_store *r1 = replica("r1"), *r2 = replica("r2");
	const struct ask done = {.kind = WL_POD, .ns = "solo", .uid = "done",
				 .per_pod = 2, .generation = 1};
	const struct ask deleted = {.kind = WL_POD, .ns = "solo", .uid = "deleted",
				    .per_pod = 1, .generation = 1};

	cr_assert_eq(ask(r1, &done), QUOTA_NOMINAL);
	cr_assert_eq(ask(r1, &deleted), QUOTA_NOMINAL);
	/* r2's watch shows done Succeeded and deleted gone, at once. */
	show(r2, &done, false);
	show(r2, &deleted, true);
	usage_forget(r2, "deleted");
	cr_assert_eq(ask(r2, &(struct ask){.kind = WL_POD, .ns = "solo", .uid = "new",
					   .per_pod = 3, .generation = 1}),
		     QUOTA_NOMINAL);
	usage_free(r1);
	usage_free(r2);
}

Test(shared, a_restarted_replica_counts_what_its_list_shows)
{
	struct usage_store *r1 = replica("r1"), *r2;
	const struct ask held = {.kind = WL_POD, .ns = "solo", .uid = "held",
				 .per_pod = 2, .generation = 1};
	const struct ask gone = {.kind = WL_POD, .ns = "solo", .uid = "gone",
				 .per_pod = 1, .generation = 1};
	const struct ask fits = {.kind = WL_POD, .ns = "solo", .uid = "fits",
				 .per_pod = 1, .generation = 1};

	cr_assert_eq(ask(r1, &held), QUOTA_NOMINAL);
	cr_assert_eq(ask(r1, &gone), QUOTA_NOMINAL);
	usage_free(r1); /* kill -9: both records stay */
	/* gone was deleted meanwhile; the new replica lists the pods. */
	fake_now += 6000;
	r2 = replica("r1");
	for (int k = 0; k < USAGE_KINDS; k++) {
		usage_relist_begin(r2, (enum usage_kind)k);
		if (k == USAGE_PODS)
			show(r2, &held, true);
		usage_relist_end(r2, (enum usage_kind)k);
	}
	cr_assert_eq(ask(r2, &fits), QUOTA_NOMINAL, "2 + 1 of 3");
	cr_assert_eq(ask(r2, &(struct ask){.kind = WL_POD, .ns = "solo", .uid = "x",
					   .per_pod = 1, .generation = 1}),
		     QUOTA_OVER);
	usage_free(r2);
}

Test(shared, a_list_just_after_a_reservation_leaves_it_pending)
{
	struct usage_store *r1 = replica("r1"), *r2 = replica("r2");

	cr_assert_eq(reserve(r1, "solo", "in-flight", 3, NULL), QUOTA_NOMINAL);
	fake_now += 4999; /* r2 lists before the create could show */
	usage_relist_begin(r2, USAGE_PODS);
	usage_relist_end(r2, USAGE_PODS);
	cr_assert_eq(reserve(r2, "solo", "p", 1, NULL), QUOTA_OVER);
	usage_free(r1);
	usage_free(r2);
}

Test(shared, a_create_refused_as_already_existing_holds_nothing_after_grace)
{
	struct usage_store *r1 = replica("r1"), *r2 = replica("r2");
	const struct ask existing = {.kind = WL_POD, .ns = "solo", .uid = "old-uid",
				     .name = "taken", .per_pod = 1, .generation = 1};
	const struct ask ghost = {.kind = WL_POD, .ns = "solo", .uid = "ghost-uid",
				  .name = "taken", .per_pod = 2, .generation = 1};
	const struct ask fits = {.kind = WL_POD, .ns = "solo", .uid = "fits",
				 .per_pod = 2, .generation = 1};
	size_t failed;
	char err[200];

	show(r1, &existing, true);
	show(r2, &existing, true);
	cr_assert_eq(ask(r1, &ghost), QUOTA_NOMINAL, "1 + 2 of 3");
	/* The apiserver answers AlreadyExists; the record stays. */
	cr_assert_eq(ask(r2, &fits), QUOTA_OVER, "within grace it may be in flight");
	fake_now += 5000;
	cr_assert_eq(ask(r2, &fits), QUOTA_NOMINAL,
		     "the name is another uid's: the create was refused");
	/* The pod that held the name is deleted: the ghost stays void. */
	usage_forget(r2, "old-uid");
	cr_assert_eq(ask(r2, &(struct ask){.kind = WL_POD, .ns = "solo", .uid = "one",
					   .per_pod = 1, .generation = 1}),
		     QUOTA_NOMINAL, "fits 2 + one 1 of 3; the ghost holds nothing");
	cr_assert_eq(usage_shared_prune(r1, P, &failed, err, sizeof(err)), 1,
		     "the ghost goes; fits and one are pending");
	usage_free(r1);
	usage_free(r2);
}

Test(shared, a_name_deleted_then_taken_again_by_the_reserved_create_counts)
{
	struct usage_store *r1 = replica("r1");
	const struct ask old = {.kind = WL_POD, .ns = "solo", .uid = "old-uid",
				.name = "again", .per_pod = 1, .generation = 1};
	const struct ask again = {.kind = WL_POD, .ns = "solo", .uid = "new-uid",
				  .name = "again", .per_pod = 2, .generation = 1};

	show(r1, &old, true);
	usage_forget(r1, "old-uid"); /* deleted, then created again at once */
	cr_assert_eq(ask(r1, &again), QUOTA_NOMINAL);
	fake_now += 6000; /* a slow watch: not shown yet */
	cr_assert_eq(reserve(r1, "solo", "p", 2, NULL), QUOTA_OVER,
		     "the name was free when it was reserved: it counts");
	usage_free(r1);
}

/* ---- one table, both stores ---------------------------------------------------- */

enum op { ASK, SHOW, FINISH, DELETE, SOON, LATER, END };

struct step {
	enum op op;
	struct ask a;
	enum quota_position want; /* ASK */
};

#define POD(u, n, j) {.kind = WL_POD, .ns = "solo", .uid = u, .job = j, .per_pod = n, .generation = 1}
#define NAMED(u, nm, n) {.kind = WL_POD, .ns = "solo", .uid = u, .name = nm, .per_pod = n, .generation = 1}
#define JOB(u, n, s, g) {.kind = WL_JOB, .ns = "solo", .uid = u, .per_pod = n, .slots = s, .generation = g}

static const struct {
	const char *name;
	struct step steps[16];
} table[] = {
	{"riders take the gang's one slot",
	 {{ASK, JOB("j", 3, 1, 1), QUOTA_NOMINAL}, {SHOW, JOB("j", 3, 1, 1), 0},
	  {ASK, POD("r1", 3, "j"), QUOTA_COVERED}, {ASK, POD("r2", 3, "j"), QUOTA_OVER},
	  {ASK, POD("r3", 3, "j"), QUOTA_OVER}, {SHOW, POD("r1", 3, "j"), 0},
	  {ASK, POD("r4", 3, "j"), QUOTA_OVER}, {FINISH, POD("r1", 3, "j"), 0},
	  {ASK, POD("r5", 3, "j"), QUOTA_COVERED}, {END, {0}, 0}}},
	{"a rider of another size is charged",
	 {{ASK, JOB("j", 1, 2, 1), QUOTA_NOMINAL}, {SHOW, JOB("j", 1, 2, 1), 0},
	  {ASK, POD("big", 2, "j"), QUOTA_OVER}, {ASK, POD("r1", 1, "j"), QUOTA_COVERED},
	  {ASK, POD("r2", 1, "j"), QUOTA_COVERED}, {ASK, POD("r3", 1, "j"), QUOTA_NOMINAL},
	  {ASK, POD("r4", 1, "j"), QUOTA_OVER}, {END, {0}, 0}}},
	{"resumes are new generations",
	 {{ASK, JOB("a", 1, 2, 1), QUOTA_NOMINAL}, {SHOW, JOB("a", 1, 2, 1), 0},
	  {FINISH, JOB("a", 1, 2, 1), 0}, {ASK, JOB("b", 1, 2, 1), QUOTA_NOMINAL},
	  {SHOW, JOB("b", 1, 2, 1), 0}, {FINISH, JOB("b", 1, 2, 1), 0},
	  {ASK, JOB("a", 1, 2, 2), QUOTA_NOMINAL}, {ASK, JOB("b", 1, 2, 2), QUOTA_OVER},
	  {FINISH, JOB("a", 1, 2, 1), 0}, {ASK, JOB("b", 1, 2, 2), QUOTA_OVER},
	  {SHOW, JOB("a", 1, 2, 2), 0}, {ASK, POD("p", 1, NULL), QUOTA_NOMINAL},
	  {ASK, POD("q", 1, NULL), QUOTA_OVER}, {END, {0}, 0}}},
	{"finished and deleted objects hold nothing",
	 {{ASK, POD("a", 2, NULL), QUOTA_NOMINAL}, {ASK, POD("b", 1, NULL), QUOTA_NOMINAL},
	  {ASK, POD("c", 1, NULL), QUOTA_OVER}, {SHOW, POD("a", 2, NULL), 0},
	  {FINISH, POD("a", 2, NULL), 0}, {ASK, POD("c", 1, NULL), QUOTA_NOMINAL},
	  {SHOW, POD("b", 1, NULL), 0}, {DELETE, POD("b", 1, NULL), 0},
	  {ASK, POD("d", 1, NULL), QUOTA_NOMINAL}, {ASK, POD("e", 1, NULL), QUOTA_NOMINAL},
	  {ASK, POD("f", 1, NULL), QUOTA_OVER}, {END, {0}, 0}}},
	{"a create refused as AlreadyExists holds nothing after G",
	 {{SHOW, NAMED("old", "taken", 1), 0}, {ASK, NAMED("ghost", "taken", 2), QUOTA_NOMINAL},
	  {ASK, POD("p", 1, NULL), QUOTA_OVER}, {SOON, {0}, 0},
	  {ASK, POD("p", 1, NULL), QUOTA_NOMINAL}, {ASK, POD("q", 1, NULL), QUOTA_NOMINAL},
	  {ASK, POD("r", 1, NULL), QUOTA_OVER}, {END, {0}, 0}}},
	{"a reservation never shown goes after the TTL",
	 {{ASK, POD("lost", 3, NULL), QUOTA_NOMINAL}, {ASK, POD("p", 1, NULL), QUOTA_OVER},
	  {LATER, {0}, 0}, {ASK, POD("p", 1, NULL), QUOTA_NOMINAL}, {END, {0}, 0}}},
};

/* The documents, emptied: the next run starts from nothing reserved. */
static void empty_store(void)
{
	for (size_t i = 0; i < S.n; i++)
		resv_doc_release(&S.docs[i]);
	S.n = 0;
}

static uint64_t mono_now(void)
{
	return __atomic_load_n(&fake_now, __ATOMIC_RELAXED);
}

/* Runs one table entry on stores rs[0..n) (a step's ASK goes to the next
 * store in turn; what the watch shows, to all of them). */
static void run_table(size_t t, struct usage_store **rs, size_t n, const char *what)
{
	size_t turn = 0;

	for (const struct step *s = table[t].steps; s->op != END; s++) {
		switch (s->op) {
		case ASK: {
			enum quota_position got = ask(rs[turn++ % n], &s->a);

			cr_expect_eq(got, s->want, "%s, %s: step %zu (%s): %d, not %d", what,
				     table[t].name, (size_t)(s - table[t].steps), s->a.uid,
				     got, s->want);
			break;
		}
		case SHOW:
		case FINISH:
			show_all(rs, n, &s->a, s->op == SHOW);
			break;
		case DELETE:
			for (size_t i = 0; i < n; i++)
				usage_forget(rs[i], s->a.uid);
			break;
		case SOON:
			fake_now += 5000; /* G */
			for (size_t i = 0; i < n; i++)
				usage_expire(rs[i]);
			break;
		case LATER:
			fake_now += 60001;
			for (size_t i = 0; i < n; i++)
				usage_expire(rs[i]);
			break;
		case END:
			break;
		}
	}
}

Test(shared, memory_and_shared_stores_give_the_same_answers)
{
	for (size_t t = 0; t < sizeof(table) / sizeof(table[0]); t++) {
		struct usage_store *mem = usage_memory_new(&(struct usage_memory_config){
			.reservation_ttl_ms = 60000, .now_ms = mono_now});
		struct usage_store *one[1] = {replica("s1")};
		struct usage_store *three[3] = {replica("t1"), replica("t2"), replica("t3")};

		run_table(t, &mem, 1, "memory");
		run_table(t, one, 1, "one shared replica");
		empty_store();
		run_table(t, three, 3, "three shared replicas");
		empty_store();
		usage_free(mem);
		usage_free(one[0]);
		for (int i = 0; i < 3; i++)
			usage_free(three[i]);
	}
}
