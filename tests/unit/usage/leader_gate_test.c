/*
 * The start gate of a replica that decides quota alone
 * (usage/leader-gate.c): G after taking the Lease, then a whole list, then
 * open; closed at once when the Lease is lost; who the others forward to.
 */
#include "usage/leader-gate.h"

#include <criterion/criterion.h>
#include <string.h>

static struct leader_gate G;
static char who[USAGE_ROLE_WHO_MAX];

static void setup(void)
{
	leader_gate_init(&G, 5000);
}

static void teardown(void)
{
	leader_gate_destroy(&G);
}

TestSuite(leader_gate, .init = setup, .fini = teardown);

static const struct leader_gate_facts leading = {.lease = "gpugate/gpugate-memory",
						 .leading = true};

Test(leader_gate, a_new_leader_waits_g_then_a_whole_list_then_decides)
{
	leader_gate_changed(&G, true, 1000);
	cr_assert_eq(leader_gate_role(&G, &leading, 1000, who, sizeof(who)), USAGE_ROLE_NONE);
	cr_assert_str_eq(who, "the quota leader took Lease gpugate/gpugate-memory 0.0 s ago "
			      "and decides after 5 s and a relist");
	cr_assert_eq(leader_gate_step(&G, &leading, 5999, false), LEADER_GATE_NOTHING);
	cr_assert_eq(leader_gate_role(&G, &leading, 5999, who, sizeof(who)), USAGE_ROLE_NONE);
	cr_assert_eq(leader_gate_step(&G, &leading, 6000, false), LEADER_GATE_RESYNC_NEW);
	cr_assert_eq(leader_gate_state(&G), LEADER_GATE_RESYNCING);
	cr_assert_eq(leader_gate_role(&G, &leading, 6000, who, sizeof(who)), USAGE_ROLE_NONE);
	cr_assert_eq(leader_gate_step(&G, &leading, 7000, false), LEADER_GATE_RESYNC_AGAIN);
	cr_assert_eq(leader_gate_role(&G, &leading, 7000, who, sizeof(who)), USAGE_ROLE_NONE);
	cr_assert_eq(leader_gate_step(&G, &leading, 8000, true), LEADER_GATE_OPENED);
	cr_assert_eq(leader_gate_role(&G, &leading, 8000, who, sizeof(who)), USAGE_ROLE_LEAD);
	cr_assert_eq(leader_gate_step(&G, &leading, 9000, true), LEADER_GATE_NOTHING);
}

Test(leader_gate, the_lease_seen_lost_closes_at_once_and_a_retake_waits_again)
{
	struct leader_gate_facts lost = leading;

	lost.leading = false;
	leader_gate_changed(&G, true, 0);
	leader_gate_step(&G, &leading, 5000, false);
	leader_gate_step(&G, &leading, 6000, true);
	cr_assert_eq(leader_gate_state(&G), LEADER_GATE_OPEN);
	/* A request sees the Lease lost before any callback or tick. */
	cr_assert_eq(leader_gate_role(&G, &lost, 6100, who, sizeof(who)), USAGE_ROLE_NONE);
	cr_assert_eq(leader_gate_state(&G), LEADER_GATE_IDLE);
	/* Leading again (a renew that landed late): the whole wait again. */
	cr_assert_eq(leader_gate_role(&G, &leading, 6200, who, sizeof(who)), USAGE_ROLE_NONE);
	cr_assert_eq(leader_gate_state(&G), LEADER_GATE_WAITING);
	cr_assert_eq(leader_gate_step(&G, &leading, 11199, true), LEADER_GATE_NOTHING);
	cr_assert_eq(leader_gate_step(&G, &leading, 11200, true), LEADER_GATE_RESYNC_NEW);
	/* A resync served before it was asked does not count. */
	cr_assert_eq(leader_gate_role(&G, &leading, 11200, who, sizeof(who)), USAGE_ROLE_NONE);
	cr_assert_eq(leader_gate_step(&G, &leading, 12200, true), LEADER_GATE_OPENED);
}

Test(leader_gate, closing_an_open_gate_is_said_once)
{
	struct leader_gate_facts lost = leading;

	lost.leading = false;
	leader_gate_changed(&G, true, 0);
	leader_gate_step(&G, &leading, 5000, false);
	leader_gate_step(&G, &leading, 6000, true);
	cr_assert_eq(leader_gate_step(&G, &lost, 7000, true), LEADER_GATE_CLOSED);
	cr_assert_eq(leader_gate_step(&G, &lost, 8000, true), LEADER_GATE_NOTHING);
	/* The callback after the tick changes nothing more. */
	leader_gate_changed(&G, false, 8100);
	cr_assert_eq(leader_gate_state(&G), LEADER_GATE_IDLE);
}

Test(leader_gate, followers_forward_to_the_holders_published_address)
{
	struct leader_gate_facts f = {.lease = "ns/gpugate-memory", .holder = "replica-1",
				      .address = "10.0.0.5:8443"};

	cr_assert_eq(leader_gate_role(&G, &f, 0, who, sizeof(who)), USAGE_ROLE_FOLLOW);
	cr_assert_str_eq(who, "10.0.0.5:8443");
	f.address = "";
	cr_assert_eq(leader_gate_role(&G, &f, 0, who, sizeof(who)), USAGE_ROLE_NONE);
	cr_assert_str_eq(who, "replica replica-1 holds Lease ns/gpugate-memory and publishes "
			      "no address (--usage-store memory?)");
	f.holder = NULL;
	f.error = "GET ...: 403 Forbidden";
	cr_assert_eq(leader_gate_role(&G, &f, 0, who, sizeof(who)), USAGE_ROLE_NONE);
	cr_assert_str_eq(who, "no replica holds Lease ns/gpugate-memory (GET ...: 403 "
			      "Forbidden)");
}

Test(leader_gate, shared_replicas_holding_their_lease_block_everyone)
{
	struct leader_gate_facts f = leading;

	f.blocked = "replica old-1 of --usage-store shared holds Lease ns/gpugate-leader";
	leader_gate_changed(&G, true, 0);
	cr_assert_eq(leader_gate_step(&G, &f, 6000, true), LEADER_GATE_NOTHING);
	cr_assert_eq(leader_gate_state(&G), LEADER_GATE_IDLE);
	cr_assert_eq(leader_gate_role(&G, &f, 6000, who, sizeof(who)), USAGE_ROLE_NONE);
	cr_assert_str_eq(who, f.blocked);
	/* Gone: the wait starts then, not before. */
	cr_assert_eq(leader_gate_step(&G, &leading, 7000, true), LEADER_GATE_NOTHING);
	cr_assert_eq(leader_gate_step(&G, &leading, 11999, true), LEADER_GATE_NOTHING);
	cr_assert_eq(leader_gate_step(&G, &leading, 12000, true), LEADER_GATE_RESYNC_NEW);
}
