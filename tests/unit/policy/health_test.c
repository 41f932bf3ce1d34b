/*
 * The health loop's words and rules (policy/health.c): the record on the
 * Node, the marks read back, the return after validation, the step of the
 * node controller, and whether another system drains the node.  Nodes and
 * settings are plain values.
 */
#include "policy/health.h"
#include "policy/policy.h"
#include "policy/pool.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

/* ---- the record ------------------------------------------------------- */

Test(health, the_record_round_trips)
{
	struct health_record r = {.out_ms = 1796468400000, .cleared_ms = 1796472000000,
				  .times = 2,
				  .why = "condition GpuXidError=True (reason Xid79)"};
	struct health_record back;
	char buf[256];
	size_t n = health_record_format(&r, buf, sizeof(buf));

	cr_assert_eq(n, strlen(buf));
	cr_assert_str_eq(buf, "o=1796468400000 c=1796472000000 n=2 "
			      "t=condition GpuXidError=True (reason Xid79)");
	cr_assert_eq(health_record_parse(buf, &back), 0);
	cr_assert_eq(back.out_ms, r.out_ms);
	cr_assert_eq(back.cleared_ms, r.cleared_ms);
	cr_assert_eq(back.times, 2);
	cr_assert_str_eq(back.why, r.why);
	/* It points into the text. */
	cr_assert(back.why > buf && back.why < buf + n);
}

Test(health, a_short_buffer_gets_a_cut_text_and_the_length_it_needs)
{
	struct health_record r = {.out_ms = 5, .cleared_ms = 0, .times = 1, .why = "x y"};
	char buf[8];

	cr_assert_eq(health_record_format(&r, buf, sizeof(buf)), strlen("o=5 c=0 n=1 t=x y"));
	cr_assert_str_eq(buf, "o=5 c=0");
}

Test(health, why_may_hold_spaces_equals_and_field_names)
{
	struct health_record r;

	cr_assert_eq(health_record_parse("o=1 c=0 n=1 t=taint a=b:NoSchedule o=2 t=x", &r), 0);
	cr_assert_str_eq(r.why, "taint a=b:NoSchedule o=2 t=x");
	cr_assert_eq(r.out_ms, 1);
}

Test(health, hostile_and_broken_records_are_no_record)
{
	static const char *const bad[] = {
		"",
		"o=1",
		"o=1 c=0 n=1",
		"o=1 c=0 n=1 t=",            /* empty why */
		"o=1 c=0 n=1 t=a\nb",        /* a newline */
		"o=0 c=0 n=1 t=x",           /* out_ms <= 0 */
		"o=-5 c=0 n=1 t=x",
		"o=10 c=5 n=1 t=x",          /* cleared before out */
		"o=10 c=-1 n=1 t=x",
		"o=1 c=0 n=0 t=x",           /* times < 1 */
		"c=0 o=1 n=1 t=x",           /* out of order */
		"o=1 o=1 c=0 n=1 t=x",       /* repeated */
		"o=1 c=0 x=1 n=1 t=x",       /* unknown */
		"o=1  c=0 n=1 t=x",          /* two spaces */
		"o=1x c=0 n=1 t=x",
		"o=99999999999999999999999 c=0 n=1 t=x", /* overflow */
		" o=1 c=0 n=1 t=x",
		"O=1 c=0 n=1 t=x",
		"o=1 c=0 n=1 why=x",
	};
	struct health_record r = {.out_ms = 42};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_expect_eq(health_record_parse(bad[i], &r), -1, "%s", bad[i]);
		cr_expect_eq(r.out_ms, 42, "untouched by \"%s\"", bad[i]);
	}
	cr_assert_eq(health_record_parse(NULL, &r), -1);
	/* cleared == out is fine (cleared in the same ms). */
	cr_assert_eq(health_record_parse("o=10 c=10 n=3 t=x", &r), 0);
}

Test(health, on_unhealthy_names)
{
	enum health_on_unhealthy m;

	cr_assert_str_eq(health_on_unhealthy_name(HEALTH_ON_CHECKPOINT), "checkpoint");
	cr_assert_str_eq(health_on_unhealthy_name(HEALTH_ON_SIGNAL), "signal");
	cr_assert_str_eq(health_on_unhealthy_name(HEALTH_ON_NONE), "none");
	cr_assert(health_on_unhealthy_parse("signal", &m) && m == HEALTH_ON_SIGNAL);
	cr_assert(health_on_unhealthy_parse("none", &m) && m == HEALTH_ON_NONE);
	cr_assert(health_on_unhealthy_parse("checkpoint", &m) && m == HEALTH_ON_CHECKPOINT);
	cr_assert_not(health_on_unhealthy_parse("Signal", &m));
	cr_assert_not(health_on_unhealthy_parse("", &m));
	cr_assert_not(health_on_unhealthy_parse(NULL, &m));
}

/* ---- a node ------------------------------------------------------------- */

struct node {
	struct pool_label labels[4];
	struct pool_taint taints[4];
	struct pool_node n;
};

static const struct pool_taint GPU = {"nvidia.com/gpu", "present", "NoSchedule"};

/* A node with the GPU taint, gpugate's taint of value taint (NULL: none),
 * record (NULL: none) and the label kv (key NULL: none). */
static void node(struct node *x, const char *taint, const char *record, const char *key,
		 const char *value)
{
	memset(x, 0, sizeof(*x));
	x->taints[0] = GPU;
	x->n.n_taints = 1;
	if (taint)
		x->taints[x->n.n_taints++] =
			(struct pool_taint){HEALTH_TAINT, taint, HEALTH_TAINT_EFFECT};
	x->labels[0] = (struct pool_label){"nvidia.com/gpu.product", "H100"};
	x->n.n_labels = 1;
	if (key)
		x->labels[x->n.n_labels++] = (struct pool_label){key, value};
	x->n.name = "h0";
	x->n.labels = x->labels;
	x->n.taints = x->taints;
	x->n.health_record = record;
	x->n.ready = true;
}

Test(health, marks_read_back)
{
	struct node x;
	struct health_marks m;

	node(&x, NULL, NULL, NULL, NULL);
	health_marks_read(&x.n, &m);
	cr_assert_not(m.has_record);
	cr_assert_null(m.taint_value);
	cr_assert_not(health_marked(&x.n));

	node(&x, "validating", "o=1 c=2 n=1 t=x", NULL, NULL);
	health_marks_read(&x.n, &m);
	cr_assert(m.has_record);
	cr_assert_eq(m.record.cleared_ms, 2);
	cr_assert_str_eq(m.taint_value, "validating");
	cr_assert(health_marked(&x.n));

	/* A record that does not parse is none; the taint alone marks. */
	node(&x, "health", "garbage", NULL, NULL);
	health_marks_read(&x.n, &m);
	cr_assert_not(m.has_record);
	cr_assert_str_eq(m.taint_value, "health");
	cr_assert(health_marked(&x.n));

	node(&x, NULL, "not a record", NULL, NULL);
	cr_assert_not(health_marked(&x.n));
	node(&x, NULL, "o=1 c=0 n=1 t=x", NULL, NULL);
	cr_assert(health_marked(&x.n));
}

Test(health, a_taint_without_a_value_reads_as_empty)
{
	struct node x;
	struct health_marks m;

	node(&x, NULL, NULL, NULL, NULL);
	x.taints[1] = (struct pool_taint){HEALTH_TAINT, NULL, "NoSchedule"};
	x.n.n_taints = 2;
	health_marks_read(&x.n, &m);
	cr_assert_str_eq(m.taint_value, "");
}

/* ---- return after validation -------------------------------------------- */

Test(health, return_without_settings_is_at_once)
{
	struct policy_health h = {0};
	struct node x;
	char wait[128] = "junk";

	node(&x, "validating", NULL, NULL, NULL);
	cr_assert(health_return(&h, &x.n, 1000, 1000, wait, sizeof(wait)));
	cr_assert_str_eq(wait, "");
	cr_assert(health_return(NULL, &x.n, 1000, 1000, wait, sizeof(wait)));
}

Test(health, return_after_the_label)
{
	struct policy_health h = {.return_label_key = "dcgm.example.com/diag",
				  .return_label_value = "pass"};
	struct node x;
	char wait[128];

	node(&x, "validating", NULL, NULL, NULL);
	cr_assert_not(health_return(&h, &x.n, 1000, 5000, wait, sizeof(wait)));
	cr_assert_str_eq(wait, "label dcgm.example.com/diag=pass");
	node(&x, "validating", NULL, "dcgm.example.com/diag", "fail");
	cr_assert_not(health_return(&h, &x.n, 1000, 5000, wait, sizeof(wait)));
	node(&x, "validating", NULL, "dcgm.example.com/diag", "pass");
	cr_assert(health_return(&h, &x.n, 1000, 5000, wait, sizeof(wait)));
	cr_assert_str_eq(wait, "");
	/* Any value. */
	h.return_label_value = NULL;
	node(&x, "validating", NULL, NULL, NULL);
	cr_assert_not(health_return(&h, &x.n, 1000, 5000, wait, sizeof(wait)));
	cr_assert_str_eq(wait, "label dcgm.example.com/diag");
	node(&x, "validating", NULL, "dcgm.example.com/diag", "");
	cr_assert(health_return(&h, &x.n, 1000, 5000, NULL, 0));
}

Test(health, return_after_the_settle_time)
{
	struct policy_health h = {.return_settle_s = 600};
	struct node x;
	char wait[128];
	/* 2026-12-05T11:00:00Z */
	int64_t cleared = 1796468400000;

	node(&x, "validating", NULL, NULL, NULL);
	cr_assert_not(health_return(&h, &x.n, cleared, cleared + 599999, wait, sizeof(wait)));
	cr_assert_str_eq(wait, "settle until 2026-12-05T11:10:00Z");
	cr_assert(health_return(&h, &x.n, cleared, cleared + 600000, wait, sizeof(wait)));
	/* Not cleared yet: the whole time. */
	cr_assert_not(health_return(&h, &x.n, 0, cleared, wait, sizeof(wait)));
	cr_assert_str_eq(wait, "settle for 600 s");
}

Test(health, return_after_both_needs_both)
{
	struct policy_health h = {.return_label_key = "v", .return_label_value = "ok",
				  .return_settle_s = 60};
	struct node x;
	char wait[128], tiny[10];
	int64_t cleared = 1796468400000;

	node(&x, "validating", NULL, NULL, NULL);
	cr_assert_not(health_return(&h, &x.n, cleared, cleared, wait, sizeof(wait)));
	cr_assert_str_eq(wait, "label v=ok and settle until 2026-12-05T11:01:00Z");
	cr_assert_not(health_return(&h, &x.n, cleared, cleared + 60000, wait, sizeof(wait)));
	cr_assert_str_eq(wait, "label v=ok");
	node(&x, "validating", NULL, "v", "ok");
	cr_assert_not(health_return(&h, &x.n, cleared, cleared + 1000, wait, sizeof(wait)));
	cr_assert_str_eq(wait, "settle until 2026-12-05T11:01:00Z");
	cr_assert(health_return(&h, &x.n, cleared, cleared + 60000, wait, sizeof(wait)));
	/* A short buffer: cut, ended. */
	node(&x, "validating", NULL, NULL, NULL);
	cr_assert_not(health_return(&h, &x.n, cleared, cleared, tiny, sizeof(tiny)));
	cr_assert_eq(strlen(tiny), sizeof(tiny) - 1);
}

/* ---- the node controller's step ---------------------------------------- */

static enum health_node_step step(const struct policy_health *h, struct node *x,
				  bool signal, int64_t now)
{
	struct health_marks m;

	health_marks_read(&x->n, &m);
	return health_node_next(h, &x->n, &m, signal, now);
}

Test(health, a_signal_marks_the_node_out)
{
	struct policy_health h = {0};
	struct node x;

	/* New. */
	node(&x, NULL, NULL, NULL, NULL);
	cr_assert_eq(step(&h, &x, true, 10), HEALTH_MARK_OUT);
	/* A taint someone else left, no record: a record is needed. */
	node(&x, "health", NULL, NULL, NULL);
	cr_assert_eq(step(&h, &x, true, 10), HEALTH_MARK_OUT);
	/* Back while validating (c set): out again. */
	node(&x, "validating", "o=1 c=5 n=1 t=x", NULL, NULL);
	cr_assert_eq(step(&h, &x, true, 10), HEALTH_MARK_OUT);
	/* A broken record: out again, a new one. */
	node(&x, "health", "o=1 c=0 n=0 t=x", NULL, NULL);
	cr_assert_eq(step(&h, &x, true, 10), HEALTH_MARK_OUT);
}

Test(health, out_and_marked_right_is_kept_else_the_taint_is_fixed)
{
	struct policy_health h = {0};
	struct node x;

	node(&x, "health", "o=1 c=0 n=1 t=x", NULL, NULL);
	cr_assert_eq(step(&h, &x, true, 10), HEALTH_KEEP);
	node(&x, NULL, "o=1 c=0 n=1 t=x", NULL, NULL);
	cr_assert_eq(step(&h, &x, true, 10), HEALTH_FIX_TAINT);
	node(&x, "validating", "o=1 c=0 n=1 t=x", NULL, NULL);
	cr_assert_eq(step(&h, &x, true, 10), HEALTH_FIX_TAINT);
	node(&x, "", "o=1 c=0 n=1 t=x", NULL, NULL);
	cr_assert_eq(step(&h, &x, true, 10), HEALTH_FIX_TAINT);
}

Test(health, the_signal_gone_validates_then_returns)
{
	struct policy_health h = {.return_label_key = "v", .return_label_value = "ok"};
	struct node x;

	/* Unmarked and no signal: nothing. */
	node(&x, NULL, NULL, NULL, NULL);
	cr_assert_eq(step(&h, &x, false, 10), HEALTH_KEEP);
	/* Out, signal gone: validate. */
	node(&x, "health", "o=1 c=0 n=1 t=x", NULL, NULL);
	cr_assert_eq(step(&h, &x, false, 10), HEALTH_VALIDATE);
	node(&x, NULL, "o=1 c=0 n=1 t=x", NULL, NULL);
	cr_assert_eq(step(&h, &x, false, 10), HEALTH_VALIDATE);
	/* Validating, no label yet: kept (its taint right) or fixed. */
	node(&x, "validating", "o=1 c=5 n=1 t=x", NULL, NULL);
	cr_assert_eq(step(&h, &x, false, 10), HEALTH_KEEP);
	node(&x, "health", "o=1 c=5 n=1 t=x", NULL, NULL);
	cr_assert_eq(step(&h, &x, false, 10), HEALTH_FIX_TAINT);
	node(&x, NULL, "o=1 c=5 n=1 t=x", NULL, NULL);
	cr_assert_eq(step(&h, &x, false, 10), HEALTH_FIX_TAINT);
	/* The label: back, whatever the taint. */
	node(&x, "validating", "o=1 c=5 n=1 t=x", "v", "ok");
	cr_assert_eq(step(&h, &x, false, 10), HEALTH_RETURN);
	node(&x, NULL, "o=1 c=5 n=1 t=x", "v", "ok");
	cr_assert_eq(step(&h, &x, false, 10), HEALTH_RETURN);
	/* A taint without a record (removed by hand): back. */
	node(&x, "validating", NULL, NULL, NULL);
	cr_assert_eq(step(&h, &x, false, 10), HEALTH_RETURN);
	node(&x, "validating", "not a record", NULL, NULL);
	cr_assert_eq(step(&h, &x, false, 10), HEALTH_RETURN);
}

Test(health, settle_time_counts_from_the_record)
{
	struct policy_health h = {.return_settle_s = 60};
	struct node x;

	node(&x, "validating", "o=1000 c=2000 n=1 t=x", NULL, NULL);
	cr_assert_eq(step(&h, &x, false, 61999), HEALTH_KEEP);
	cr_assert_eq(step(&h, &x, false, 62000), HEALTH_RETURN);
	/* No returnAfter: the round after the validate. */
	cr_assert_eq(step(NULL, &x, false, 2000), HEALTH_RETURN);
}

/* ---- drained by another system ------------------------------------------ */

Test(health, drained_by_a_label_of_the_list)
{
	struct policy_kv by[] = {{"dgxc.nvidia.com/nvsentinel-state", NULL},
				 {"example.com/drain", "yes"}};
	struct policy_health h = {.drained_by = by, .n_drained_by = 2};
	struct node x;
	char why[128] = "junk";

	node(&x, NULL, NULL, NULL, NULL);
	cr_assert_not(health_drained_by_other(&h, &x.n, why, sizeof(why)));
	cr_assert_str_eq(why, "");
	node(&x, NULL, NULL, "dgxc.nvidia.com/nvsentinel-state", "draining");
	cr_assert(health_drained_by_other(&h, &x.n, why, sizeof(why)));
	cr_assert_str_eq(why, "label dgxc.nvidia.com/nvsentinel-state=draining");
	node(&x, NULL, NULL, "example.com/drain", "no");
	cr_assert_not(health_drained_by_other(&h, &x.n, why, sizeof(why)));
	node(&x, NULL, NULL, "example.com/drain", "yes");
	cr_assert(health_drained_by_other(&h, &x.n, NULL, 0));
	/* No list: never. */
	cr_assert_not(health_drained_by_other(NULL, &x.n, why, sizeof(why)));
	h.n_drained_by = 0;
	cr_assert_not(health_drained_by_other(&h, &x.n, why, sizeof(why)));
}
