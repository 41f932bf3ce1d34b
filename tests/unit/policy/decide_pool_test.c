/*
 * The pool at admission and why a pod waits (policy/decide-pool.c decide_pool,
 * decide_waiting): the texts users read, asserted verbatim.  The pool is
 * built from plain node values (policy/pool.h); workloads come as JSON
 * through webhook/facts.c.
 */
#include "base/arena.h"
#include "base/diag.h"
#include "policy/kinds.h"
#include "policy/decide.h"
#include "policy/pool.h"
#include "webhook/apply.h"
#include "webhook/facts.h"
#include "tests/unit/test_policy.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <string.h>

static const char policy_yaml[] =
	"version: 1\n"
	"flavors:\n"
	"  - name: h100\n"
	"    resource: nvidia.com/gpu\n"
	"    sharing: exclusive\n"
	"    nodeSelector: [\"gpu=h100\"]\n"
	"    tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]\n"
	"    gpusPerNode: 8\n"
	"classes:\n"
	"  - {name: big, flavor: h100, gpus: 8, topology: {key: clique}}\n"
	"  - {name: small, flavor: h100, gpus: 1, maxGpus: 4}\n"
	"tenants:\n"
	"  - name: research\n"
	"    namespaces: [research]\n"
	"    quota: [{flavor: h100, nominal: 64}]\n"
	"  - name: sandbox\n"
	"    namespaces: [sandbox]\n"
	"    mode: warn\n"
	"    quota: [{flavor: h100, nominal: 64}]\n";

static struct policy *P;

static void setup(void)
{
	P = test_policy(policy_yaml);
}

static void teardown(void)
{
	policy_free(P);
}

TestSuite(decide_pool, .init = setup, .fini = teardown);

/* Nodes n0..n3: allocatable and allocated given, clique A for n0, n1. */
struct fleet {
	struct pool_label labels[4][2];
	struct pool_resource res[4][1];
	struct pool_condition ready[1];
	struct pool_node nodes[4];
	const struct pool_node *ptr[4];
	struct pool_member members[4];
	struct pool_view view;
};

static void fleet(struct fleet *f, const int64_t alloc[4], const int64_t used[4])
{
	static const char *const names[] = {"n0", "n1", "n2", "n3"};
	static const char *const cliques[] = {"A", "A", "B", "B"};

	f->ready[0] = (struct pool_condition){"Ready", "True", ""};
	for (int i = 0; i < 4; i++) {
		f->labels[i][0] = (struct pool_label){"gpu", "h100"};
		f->labels[i][1] = (struct pool_label){"clique", cliques[i]};
		f->res[i][0] = (struct pool_resource){"nvidia.com/gpu", 8, alloc[i], used[i]};
		f->nodes[i] = (struct pool_node){
			.name = names[i], .labels = f->labels[i], .n_labels = 2,
			.resources = f->res[i], .n_resources = 1,
			.conditions = f->ready, .n_conditions = 1, .ready = true};
		f->ptr[i] = &f->nodes[i];
	}
}

static void check(struct fleet *f, int64_t per_pod, int64_t pods, const char *key,
		  struct pool_check *pc)
{
	pool_view_build(f->ptr, 4, policy_flavor_find(P, "h100"), policy_health(P),
			f->members, &f->view);
	pool_check_build(&f->view, per_pod, pods, key, pc);
}

struct run {
	struct arena arena;
	json_t *obj;
	struct workload wl;
	struct decision dec;
};

static void done(struct run *r)
{
	arena_release(&r->arena);
	json_decref(r->obj);
}

static void prepare(struct run *r, const char *ns, json_t *obj, bool job)
{
	struct diag d;

	r->obj = obj;
	arena_init(&r->arena);
	memset(&r->wl, 0, sizeof(r->wl));
	r->wl.kind = job ? WL_JOB : WL_POD;
	r->wl.def = job ? kinds_find("batch", "v1", "Job") : kinds_find("", "v1", "Pod");
	r->wl.op = WL_CREATE;
	r->wl.namespace = ns;
	r->wl.name = r->wl.uid = "";
	diag_init(&d);
	cr_assert_eq(facts_extract(r->obj, &r->wl, &r->arena, &d), 0, "%s", diag_text(&d));
}

/* decide with no quota in use, then decide_pool with pc; at /validate on
 * the object as /mutate's plan left it, as the apiserver sends it. */
static void run(struct run *r, const char *ns, const char *json,
		enum decide_phase phase, const struct pool_check *pc)
{
	json_error_t e;
	json_t *obj = json_loads(json, 0, &e);
	bool job = strstr(json, "\"Job\"") != NULL;
	struct decide_input in = {.policy = P, .wl = &r->wl, .phase = DECIDE_MUTATE};

	cr_assert_not_null(obj, "%s", e.text);
	prepare(r, ns, obj, job);
	decide_with_pool(&in, NULL, pc, &r->dec);
	if (phase == DECIDE_VALIDATE) {
		json_t *copy = json_deep_copy(r->obj);
		struct diag d;

		cr_assert(r->dec.allowed, "%s", r->dec.message);
		diag_init(&d);
		cr_assert_eq(apply_plan(copy, &r->wl, &r->dec.plan, P, &d), 0, "%s",
			     diag_text(&d));
		done(r);
		prepare(r, ns, copy, job);
		in.phase = DECIDE_VALIDATE;
		decide_with_pool(&in, NULL, pc, &r->dec);
	}
	cr_assert_eq(decide_pool_denies(&in, &r->dec, pc),
		     pc->known && pc->fit.verdict == POOL_NEVER_FITS &&
			     r->dec.mode == POLICY_MODE_ENFORCE);
}

#define POD(cls, gpus)                                                      \
	"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\","  \
	"\"labels\":{\"gpugate.io/class\":\"" cls "\",\"gpugate.io/gpus\":\"" \
	gpus "\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"x\"}]}}"
#define JOB(cls, n)                                                           \
	"{\"apiVersion\":\"batch/v1\",\"kind\":\"Job\",\"metadata\":{\"name\":"  \
	"\"j\",\"labels\":{\"gpugate.io/class\":\"" cls "\"}},\"spec\":{"        \
	"\"parallelism\":" n ",\"completions\":" n ",\"template\":{\"spec\":{"    \
	"\"restartPolicy\":\"Never\",\"containers\":[{\"name\":\"c\",\"image\":" \
	"\"x\"}]}}}}"

Test(decide_pool, a_pod_no_usable_node_can_hold_is_denied_naming_the_largest)
{
	struct fleet f;
	struct pool_check pc;
	struct run r;

	fleet(&f, (int64_t[]){7, 6, 8, 8}, (int64_t[]){0, 0, 0, 0});
	f.nodes[2].unschedulable = true;
	f.nodes[3].ready = false;
	check(&f, 8, 1, NULL, &pc);
	run(&r, "research", POD("big", "8"), DECIDE_MUTATE, &pc);
	cr_assert_not(r.dec.allowed);
	cr_assert_str_eq(r.dec.rule, "pool");
	cr_assert_str_eq(r.dec.message,
			 "gpugate: no usable node of flavor h100 can hold a pod of 8 "
			 "nvidia.com/gpu: the largest offers 7 (n0); 2 nodes excluded: n2 "
			 "(cordoned), n3 (NotReady)");
	done(&r);

	/* Warn mode: admitted; the decision annotation records it ... */
	run(&r, "sandbox", POD("big", "8"), DECIDE_MUTATE, &pc);
	cr_assert(r.dec.allowed);
	cr_assert(strstr(r.dec.plan.decision, "no usable node of flavor h100 can hold"),
		  "%s", r.dec.plan.decision);
	done(&r);
	/* ... and the text becomes a warning at /validate, as any rule's. */
	run(&r, "sandbox", POD("big", "8"), DECIDE_VALIDATE, &pc);
	cr_assert(r.dec.allowed);
	cr_assert_eq(r.dec.n_warnings, 1);
	cr_assert_str_eq(r.dec.success, "gpugate: big -> 8 x h100 for tenant sandbox "
					"(8/64 in use)");
	cr_assert_str_eq(r.dec.warnings[0],
			 "gpugate: no usable node of flavor h100 can hold a pod of 8 "
			 "nvidia.com/gpu: the largest offers 7 (n0); 2 nodes excluded: n2 "
			 "(cordoned), n3 (NotReady)");
	done(&r);
}

Test(decide_pool, no_room_now_is_advice_at_validate_only)
{
	struct fleet f;
	struct pool_check pc;
	struct run r;

	fleet(&f, (int64_t[]){8, 8, 8, 8}, (int64_t[]){6, 6, 7, 8});
	check(&f, 4, 1, NULL, &pc);
	run(&r, "research", POD("small", "4"), DECIDE_MUTATE, &pc);
	cr_assert(r.dec.allowed);
	cr_assert_eq(r.dec.n_warnings, 0);
	done(&r);
	run(&r, "research", POD("small", "4"), DECIDE_VALIDATE, &pc);
	cr_assert(r.dec.allowed);
	cr_assert_eq(r.dec.n_warnings, 1, "%zu", r.dec.n_warnings);
	cr_assert_str_eq(r.dec.warnings[0],
			 "gpugate: admitted, but no node of flavor h100 has 4 "
			 "nvidia.com/gpu free now: 5 free on 4 nodes, at most 2 on one "
			 "(fragmentation); the pod waits");
	done(&r);
}

Test(decide_pool, a_gang_with_a_required_topology_needs_one_domain)
{
	struct fleet f;
	struct pool_check pc;
	struct run r;

	/* 3 whole nodes in one clique: each has 2. */
	fleet(&f, (int64_t[]){8, 8, 8, 8}, (int64_t[]){0, 0, 0, 0});
	check(&f, 8, 3, "clique", &pc);
	run(&r, "research", JOB("big", "3"), DECIDE_MUTATE, &pc);
	cr_assert_not(r.dec.allowed);
	cr_assert_str_eq(r.dec.message,
			 "gpugate: no clique domain of flavor h100 can hold the job's 3 "
			 "pods of 8 nvidia.com/gpu: the largest holds 2");
	done(&r);

	/* 2 fit in a clique when empty; now A is half busy, B busy. */
	fleet(&f, (int64_t[]){8, 8, 8, 8}, (int64_t[]){8, 0, 8, 1});
	check(&f, 8, 2, "clique", &pc);
	run(&r, "research", JOB("big", "2"), DECIDE_VALIDATE, &pc);
	cr_assert(r.dec.allowed);
	cr_assert_str_eq(r.dec.warnings[r.dec.n_warnings - 1],
			 "gpugate: admitted, but no clique domain of flavor h100 has room "
			 "for the job's 2 pods of 8 nvidia.com/gpu now: the best (A) has "
			 "room for 1");
	done(&r);
}

Test(decide_pool, nothing_known_nothing_said_and_every_node_excluded_is_advice)
{
	struct fleet f;
	struct pool_check pc = {.known = false};
	struct run r;

	run(&r, "research", POD("big", "8"), DECIDE_VALIDATE, &pc);
	cr_assert(r.dec.allowed);
	cr_assert_eq(r.dec.n_warnings, 0); /* the success line is no warning */
	done(&r);

	fleet(&f, (int64_t[]){8, 8, 8, 8}, (int64_t[]){0, 0, 0, 0});
	for (int i = 0; i < 4; i++)
		f.nodes[i].unschedulable = true;
	check(&f, 8, 1, NULL, &pc);
	run(&r, "research", POD("big", "8"), DECIDE_VALIDATE, &pc);
	cr_assert(r.dec.allowed);
	cr_assert_eq(r.dec.n_warnings, 1);
	cr_assert_str_eq(r.dec.warnings[0],
			 "gpugate: all 4 nodes of flavor h100 are excluded, the pod waits "
			 "until one is back; 4 nodes excluded: n0 (cordoned), n1 "
			 "(cordoned), n2 (cordoned), n3 (cordoned)");
	done(&r);
}

static int64_t held(const void *ctx, unsigned t, unsigned f)
{
	(void)ctx;
	(void)f;
	return t == 0 ? 70 : 12; /* research borrows 6 beyond its 64 */
}

Test(decide_pool, why_a_pod_waits)
{
	struct fleet f;
	struct pool_check pc;
	const struct policy_flavor *h100 = policy_flavor_find(P, "h100");
	struct usage_view u = {NULL, held};
	char why[1024];

	fleet(&f, (int64_t[]){8, 8, 8, 8}, (int64_t[]){6, 6, 7, 8});
	f.nodes[3].taints = (struct pool_taint[]){{"maintenance", "", "NoExecute"}};
	f.nodes[3].n_taints = 1;
	check(&f, 4, 1, NULL, &pc);
	decide_waiting(P, h100, 4, &pc, &u, "", why, sizeof(why));
	cr_assert_str_eq(why, "no node of flavor h100 has 4 nvidia.com/gpu free: 5 free "
			      "on 3 usable nodes, at most 2 on one (fragmentation); quota "
			      "held by research 70 (borrowed), sandbox 12; 1 node "
			      "excluded: n3 (taint maintenance:NoExecute)");
	/* Room: the scheduler's own message, if any. */
	check(&f, 1, 1, NULL, &pc);
	decide_waiting(P, h100, 1, &pc, &u, "", why, sizeof(why));
	cr_assert_str_eq(why, "");
	decide_waiting(P, h100, 1, &pc, &u, "0/4 nodes are available: 4 Insufficient cpu.",
		       why, sizeof(why));
	cr_assert_str_eq(why, "the scheduler says: 0/4 nodes are available: 4 "
			      "Insufficient cpu.");
	check(&f, 8, 1, NULL, &pc);
	f.res[0][0].allocatable = 7;
	check(&f, 8, 1, NULL, &pc);
	decide_waiting(P, h100, 8, &pc, &u, "", why, sizeof(why));
	cr_assert_str_eq(why, "no node of flavor h100 has 8 nvidia.com/gpu free: 4 free "
			      "on 3 usable nodes, at most 2 on one; quota held by research "
			      "70 (borrowed), sandbox 12; 1 node excluded: n3 (taint "
			      "maintenance:NoExecute)");
}

/* ---- pod templates: the pool at the door (template_pool) ---------------- */

/* The decision's pool source over a fleet: what inventory_fit() answers
 * in the server. */
static void fleet_fit(void *ctx, const struct policy_flavor *fl, int64_t per_pod,
		      int64_t pods, const char *topology_key, struct pool_check *out)
{
	cr_assert_str_eq(fl->name, "h100");
	check(ctx, per_pod, pods, topology_key, out);
}

static void no_fit(void *ctx, const struct policy_flavor *fl, int64_t per_pod,
		   int64_t pods, const char *topology_key, struct pool_check *out)
{
	(void)ctx, (void)fl, (void)per_pod, (void)pods, (void)topology_key;
	memset(out, 0, sizeof(*out)); /* the inventory has not listed yet */
}

/* A template decided at phase (at /validate on the object /mutate's plan
 * left), the pool from src (NULL: not known). */
static void run_template(struct run *r, const char *ns, const char *json,
			 enum decide_phase phase, const struct decide_pool_source *src)
{
	json_error_t e;
	json_t *obj = json_loads(json, 0, &e);
	struct decide_input in = {.policy = P, .wl = &r->wl, .phase = DECIDE_MUTATE,
				  .pool = src};
	struct diag d;

	cr_assert_not_null(obj, "%s", e.text);
	for (int pass = 0; pass < 2; pass++) {
		r->obj = obj;
		arena_init(&r->arena);
		memset(&r->wl, 0, sizeof(r->wl));
		r->wl.kind = WL_TEMPLATE;
		r->wl.def = kinds_template(json_string_value(json_object_get(obj, "kind")));
		cr_assert_not_null(r->wl.def);
		r->wl.op = WL_CREATE;
		r->wl.namespace = ns;
		r->wl.name = "";
		r->wl.uid = "";
		diag_init(&d);
		cr_assert_eq(facts_extract(r->obj, &r->wl, &r->arena, &d), 0, "%s",
			     diag_text(&d));
		decide_prepare(&in, &r->dec);
		if (phase == DECIDE_MUTATE || pass == 1)
			return;
		cr_assert(r->dec.allowed, "%s", r->dec.message);
		obj = json_deep_copy(r->obj);
		diag_init(&d);
		cr_assert_eq(apply_plan(obj, &r->wl, &r->dec.plan, P, &d), 0, "%s",
			     diag_text(&d));
		done(r);
		in.phase = DECIDE_VALIDATE;
	}
}

#define DEPLOY(cls, gpus, replicas)                                           \
	"{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{"    \
	"\"name\":\"serve\"},\"spec\":{\"replicas\":" replicas ",\"selector\":" \
	"{\"matchLabels\":{\"app\":\"s\"}},\"template\":{\"metadata\":{"        \
	"\"labels\":{\"app\":\"s\",\"gpugate.io/class\":\"" cls "\","           \
	"\"gpugate.io/gpus\":\"" gpus "\"}},\"spec\":{\"containers\":[{"         \
	"\"name\":\"c\",\"image\":\"x\"}]}}}}"
#define CRONJOB(cls, n) CRONJOB_PC(cls, n, n)
#define CRONJOB_PC(cls, par, n)                                               \
	"{\"apiVersion\":\"batch/v1\",\"kind\":\"CronJob\",\"metadata\":{"      \
	"\"name\":\"nightly\"},\"spec\":{\"schedule\":\"0 3 * * *\","            \
	"\"jobTemplate\":{\"spec\":{\"parallelism\":" par ",\"completions\":" n  \
	",\"template\":{\"metadata\":{\"labels\":{\"gpugate.io/class\":\"" cls   \
	"\"}},\"spec\":{\"restartPolicy\":\"Never\",\"containers\":[{\"name\":"  \
	"\"c\",\"image\":\"x\"}]}}}}}}"

Test(decide_pool, a_template_whose_pod_no_node_can_hold_is_denied_at_the_door)
{
	struct fleet f;
	struct decide_pool_source src = {fleet_fit, &f};
	struct run r;

	fleet(&f, (int64_t[]){7, 6, 8, 8}, (int64_t[]){0, 0, 0, 0});
	f.nodes[2].unschedulable = true;
	f.nodes[3].ready = false;
	run_template(&r, "research", DEPLOY("big", "8", "2"), DECIDE_MUTATE, &src);
	cr_assert_not(r.dec.allowed);
	cr_assert_str_eq(r.dec.rule, "pool");
	cr_assert_str_eq(r.dec.message,
			 "gpugate: Deployment \"serve\" can never run a pod: no usable "
			 "node of flavor h100 can hold one of 8 nvidia.com/gpu, the "
			 "largest offers 7 (n0); 2 nodes excluded: n2 (cordoned), n3 "
			 "(NotReady)");
	done(&r);

	/* Warn mode: admitted, and the text is a warning at /validate. */
	run_template(&r, "sandbox", DEPLOY("big", "8", "2"), DECIDE_VALIDATE, &src);
	cr_assert(r.dec.allowed);
	cr_assert(r.dec.violation);
	cr_assert_str_eq(r.dec.rule, "pool");
	cr_assert(strstr(r.dec.warnings[0], "Deployment \"serve\" can never run a pod"),
		  "%s", r.dec.warnings[0]);
	done(&r);

	/* A node that holds one: admitted, whatever is in use now. */
	f.nodes[2].unschedulable = false;
	f.res[2][0].allocated = 8;
	run_template(&r, "research", DEPLOY("big", "8", "2"), DECIDE_VALIDATE, &src);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	cr_assert_not(r.dec.violation);
	done(&r);
}

Test(decide_pool, replicas_beyond_the_pool_are_a_warning_not_a_denial)
{
	struct fleet f;
	struct decide_pool_source src = {fleet_fit, &f};
	struct run r;

	/* 4 nodes of 8 hold 8 pods of 4; 10 replicas (40 of 64 quota). */
	fleet(&f, (int64_t[]){8, 8, 8, 8}, (int64_t[]){8, 8, 8, 8});
	run_template(&r, "research", DEPLOY("small", "4", "10"), DECIDE_MUTATE, &src);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	cr_assert_eq(r.dec.n_warnings, 0);
	done(&r);
	run_template(&r, "research", DEPLOY("small", "4", "10"), DECIDE_VALIDATE, &src);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	cr_assert_not(r.dec.violation);
	cr_assert_eq(r.dec.n_warnings, 1, "%zu", r.dec.n_warnings);
	cr_assert_str_eq(r.dec.warnings[0],
			 "gpugate: the usable nodes of flavor h100 can hold at most 8 of "
			 "Deployment \"serve\"'s 10 pods of 4 nvidia.com/gpu, even empty: "
			 "the others stay Pending until nodes join");
	done(&r);
	/* 8 replicas fit an empty pool: nothing said of the pool. */
	run_template(&r, "research", DEPLOY("small", "4", "8"), DECIDE_VALIDATE, &src);
	cr_assert_eq(r.dec.n_warnings, 0, "%s", r.dec.warnings[0]);
	done(&r);
}

Test(decide_pool, a_cronjobs_job_is_a_gang_in_one_domain)
{
	struct fleet f;
	struct decide_pool_source src = {fleet_fit, &f};
	struct run r;

	/* Each clique holds 2 pods of 8: a Job of 3 can never run. */
	fleet(&f, (int64_t[]){8, 8, 8, 8}, (int64_t[]){0, 0, 0, 0});
	run_template(&r, "research", CRONJOB("big", "3"), DECIDE_MUTATE, &src);
	cr_assert_not(r.dec.allowed);
	cr_assert_str_eq(r.dec.message,
			 "gpugate: CronJob \"nightly\" can never run a whole Job: no clique "
			 "domain of flavor h100 can hold its 3 pods of 8 nvidia.com/gpu, "
			 "the largest holds 2");
	done(&r);
	run_template(&r, "research", CRONJOB("big", "2"), DECIDE_VALIDATE, &src);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	done(&r);
	/* Its Jobs run min(parallelism, completions) pods at once, as the
	 * charge rule counts them: parallelism 3 with 2 completions fits. */
	run_template(&r, "research", CRONJOB_PC("big", "3", "2"), DECIDE_VALIDATE, &src);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	done(&r);
	run_template(&r, "research", CRONJOB_PC("big", "2", "3"), DECIDE_VALIDATE, &src);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	done(&r);
}

Test(decide_pool, a_template_with_no_pool_known_is_judged_by_quota_alone)
{
	struct decide_pool_source unknown = {no_fit, NULL};
	struct run r;

	run_template(&r, "research", DEPLOY("big", "8", "2"), DECIDE_VALIDATE, NULL);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	cr_assert_eq(r.dec.n_warnings, 0);
	done(&r);
	run_template(&r, "research", DEPLOY("big", "8", "2"), DECIDE_VALIDATE, &unknown);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	cr_assert_eq(r.dec.n_warnings, 0);
	done(&r);
	/* The quota ceiling still speaks first: 9 pods of 8 > 64. */
	run_template(&r, "research", DEPLOY("big", "8", "9"), DECIDE_MUTATE, &unknown);
	cr_assert_not(r.dec.allowed);
	cr_assert_str_eq(r.dec.rule, "quota");
	done(&r);
}

/* ---- whether /validate holds units (decide_holds_units()) and how the
 * pool is asked about a claim (decide_pool_check(), through the pool
 * source): the rules the handler calls, from plain values. */

/* A pool source that records what it was asked and answers verdict. */
struct canned {
	int calls;
	const struct policy_flavor *f;
	int64_t per_pod, pods;
	const char *topology_key;
	enum pool_verdict verdict;
};

static void canned_fit(void *ctx, const struct policy_flavor *f, int64_t per_pod,
		       int64_t pods, const char *topology_key, struct pool_check *out)
{
	struct canned *c = ctx;

	c->calls++;
	c->f = f;
	c->per_pod = per_pod;
	c->pods = pods;
	c->topology_key = topology_key;
	memset(out, 0, sizeof(*out));
	out->known = true;
	out->fit.verdict = c->verdict;
}

/* An allowed decision in enforce mode claiming pods x per_pod of h100. */
static struct decision claim(int64_t pods, unsigned per_pod)
{
	struct decision dec;

	memset(&dec, 0, sizeof(dec));
	dec.allowed = true;
	dec.mode = POLICY_MODE_ENFORCE;
	dec.claim = (struct quota_claim){
		.needed = true,
		.flavor = policy_flavor_find(P, "h100"),
		.per_pod = per_pod,
		.pods = pods,
		.units = pods * per_pod,
	};
	return dec;
}

Test(decide_pool, units_are_held_at_validate_only_for_what_will_be_admitted)
{
	struct workload wl = {.kind = WL_POD, .op = WL_CREATE, .namespace = "research"};
	struct decide_input in = {.policy = P, .wl = &wl, .phase = DECIDE_VALIDATE};
	struct decision dec = claim(1, 8);
	struct pool_check unknown = {.known = false};
	struct pool_check never = {.known = true, .fit = {.verdict = POOL_NEVER_FITS}};
	struct pool_check fits = {.known = true, .fit = {.verdict = POOL_FITS}};

	cr_assert(decide_holds_units(&in, &dec, &unknown, false));
	cr_assert(decide_holds_units(&in, &dec, &fits, false));
	cr_assert_not(decide_holds_units(&in, &dec, &unknown, true), "a dry run holds nothing");
	cr_assert_not(decide_holds_units(&in, &dec, &never, false),
		      "nothing is held for what the pool is about to refuse");
	dec.mode = POLICY_MODE_WARN;
	cr_assert(decide_holds_units(&in, &dec, &never, false),
		  "in warn mode the pool does not refuse: it is admitted, and held");
	dec.mode = POLICY_MODE_ENFORCE;
	dec.claim.owner_job_uid = "job-uid";
	cr_assert(decide_holds_units(&in, &dec, &never, false),
		  "a Job's pod was weighed with its Job");
	dec = claim(1, 8);
	dec.allowed = false;
	cr_assert_not(decide_holds_units(&in, &dec, &unknown, false), "denied: nothing held");
	dec = claim(1, 8);
	in.phase = DECIDE_MUTATE;
	cr_assert_not(decide_holds_units(&in, &dec, &unknown, false), "/mutate only peeks");
}

Test(decide_pool, the_pool_is_asked_through_the_pool_source_for_pods_and_jobs)
{
	struct workload wl = {.kind = WL_POD, .op = WL_CREATE, .namespace = "research"};
	struct canned c = {.verdict = POOL_NOT_NOW};
	struct decide_pool_source src = {canned_fit, &c};
	struct decide_input in = {.policy = P, .wl = &wl, .phase = DECIDE_MUTATE};
	struct decision dec = claim(1, 8);
	struct pool_check pc;

	/* No pool: nothing is asked, nothing said. */
	decide_pool_check(&in, &dec, &pc);
	cr_assert_not(pc.known);

	in.pool = &src;
	decide_pool_check(&in, &dec, &pc);
	cr_assert_eq(c.calls, 1);
	cr_assert(pc.known);
	cr_assert_eq(pc.fit.verdict, POOL_NOT_NOW);
	cr_assert_eq(c.f, dec.claim.flavor);
	cr_assert_eq(c.per_pod, 8);
	cr_assert_eq(c.pods, 1);
	cr_assert_null(c.topology_key);

	/* A Job of a class with a topology: the gang, in one domain. */
	wl.kind = WL_JOB;
	wl.def = kinds_find("batch", "v1", "Job");
	dec = claim(4, 8);
	dec.cls = policy_class_find(P, "big");
	decide_pool_check(&in, &dec, &pc);
	cr_assert_eq(c.calls, 2);
	cr_assert_eq(c.pods, 4);
	cr_assert_eq(c.topology_key, decide_pool_topology(&dec));
	cr_assert_str_eq(c.topology_key, "clique");

	/* Nothing the pool weighs: not asked. */
	wl.kind = WL_POD;
	wl.def = kinds_find("", "v1", "Pod");
	dec = claim(1, 8);
	dec.claim.owner_job_uid = "job-uid";
	decide_pool_check(&in, &dec, &pc);
	cr_assert_not(pc.known, "a Job's pod was weighed with its Job");
	dec = claim(1, 8);
	dec.claim.needed = false;
	decide_pool_check(&in, &dec, &pc);
	cr_assert_not(pc.known, "no claim");
	wl.kind = WL_CLAIM;
	wl.def = kinds_find("resource.k8s.io", "v1", "ResourceClaim");
	dec = claim(1, 8);
	decide_pool_check(&in, &dec, &pc);
	cr_assert_not(pc.known, "a ResourceClaim has no node yet");
	cr_assert_eq(c.calls, 2);
}
