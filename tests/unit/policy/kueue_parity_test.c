/*
 * Kueue parity: the cohort arithmetic of policy/quota.c (quota_decide)
 * against scenarios of Kueue's own tests, every tenant with
 * reclaimWithinCohort Never.
 *
 * Source: github.com/kubernetes-sigs/kueue at commit
 * ff69552e79ad21652c36caa97038382e55625cf7.  Each table entry names the
 * Kueue test verbatim (`test`), the Go test function or Ginkgo container it
 * is in (`where`) and its file (`file`), so that a reader can check it.  The
 * expectations are Kueue's, read from those tests; they were not taken from
 * gpugate.  Only Kueue's scenario numbers and names are used here.
 *
 * How a Kueue scenario becomes a table entry:
 *
 * - A ClusterQueue is a tenant of the same name; its quota for the one
 *   resource flavor the scenario is about is the tenant's quota for flavor
 *   "g": nominal, borrowingLimit, lendingLimit, the same numbers.  One unit
 *   of the resource is one unit of g: Kueue's "cpu: 10" is 10 units.  Where
 *   Kueue uses fractions, every quantity of the entry is scaled by the same
 *   factor (said in the entry).
 * - A Kueue cohort is a cohort.  A cohort tree whose Cohort objects hold no
 *   quota and where one cohort holds all the ClusterQueues is one flat
 *   cohort.  A ClusterQueue in no cohort is a tenant in none.
 * - Every tenant in a cohort has reclaimWithinCohort: Never.  A scenario is
 *   kept only where Kueue's answer does not depend on its own preemption
 *   settings: no step needs a preemption, and a pending workload that
 *   reserves capacity for the rest of the cycle (Kueue's scheduler.go,
 *   reserveCapacityForUnreclaimablePreempt) does so the same way under
 *   Never (it does for LowerPriority and Never, never for Any).
 * - Usage admitted before the scenario starts (ReserveQuotaAt,
 *   clusterQueueUsage) is the member's `used`.  A workload is one request
 *   of all its pods' units.
 * - A scheduling cycle that admits several workloads is a sequence of
 *   single requests in Kueue's order: workloads that fit without borrowing
 *   first, then higher priority, then older.  A workload that finishes or
 *   is deleted is a release step.  A change of the ClusterQueues (one
 *   added, deleted, a limit updated) starts a new entry (`phase`).
 * - Each step is applied to the usage as Kueue answered it, not as gpugate
 *   did, so that one disagreement does not change the steps after it.
 * - A scenario whose ClusterQueues have several flavors is kept only where
 *   the answer is decided by one flavor: the workload does not tolerate the
 *   others' taints, or can never fit them, or Kueue's message names that
 *   flavor's verdict.  The entry says which.
 * - The request may borrow (may_borrow true): gpugate makes a workload that
 *   borrows preemptible, as Kueue lets any workload borrow.
 *
 * Kueue's answer, and what gpugate must say for it:
 *
 *   K_ADMIT    QuotaReserved within nominal quota   QUOTA_NOMINAL
 *   K_BORROW   QuotaReserved beyond nominal quota   QUOTA_BORROWED, with
 *              `borrowed` = min(R, U + R - N) (Kueue records that a
 *              workload borrows, not how much)
 *   K_WAIT     pending: "insufficient unused quota", QUOTA_OVER or
 *              "no longer fits after processing       QUOTA_LENT_OUT
 *              another workload"
 *   K_EXCEEDS  pending: ExceedsMaxQuota               QUOTA_NEVER_FITS,
 *              ("... > maximum capacity (M)")         ceiling M
 *   K_PENDING  pending, the test states no reason     any of the three
 *              (integration tests)                    above
 *   K_NO_QUOTA pending: "resource ... unavailable     QUOTA_NO_QUOTA
 *              in ClusterQueue"
 *
 * A step where gpugate is known to answer otherwise carries `known_diff`,
 * the reason in one line: the test reports it ("[KNOWN] kueue parity: ..."
 * on stderr) and does not fail for it, and fails if gpugate comes to agree
 * (so that the mark goes).
 *
 * The known difference (5 steps of 4 scenarios): when a workload of a
 * ClusterQueue that cannot always reclaim (Never, LowerPriority) asks for
 * no more than that ClusterQueue's nominal quota but does not fit now,
 * Kueue's scheduler finds nothing to preempt and reserves the
 * ClusterQueue's unused quota for it for the rest of the scheduling cycle
 * (reserveCapacityForUnreclaimablePreempt and resourcesToReserve in
 * pkg/scheduler/scheduler.go): no other member borrows it, in every cycle
 * in which that workload heads its queue (with StrictFIFO, until it is
 * admitted).  gpugate's quota_decide (policy/quota.c) reads usage only; a
 * denied request leaves nothing behind, so the unused quota is in the pool
 * it lends from and the borrower is admitted (QUOTA_BORROWED).
 *
 * The scenarios left out, and why, are listed at the end of the file.
 */
#include "base/diag.h"
#include "policy/policy.h"
#include "policy/quota.h"

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define SCHED "pkg/scheduler/scheduler_test.go"
#define ASSIGN "pkg/scheduler/flavorassigner/flavorassigner_test.go"
#define INTEG "test/integration/singlecluster/scheduler/scheduler_test.go"
#define INTEG_PRE "test/integration/singlecluster/scheduler/preemption_test.go"

#define NL POLICY_NO_LIMIT /* no borrowingLimit, no lendingLimit */
#define NO_ENTRY (-1)      /* nominal: no quota entry for the flavor */

#define KMAX_MEMBERS 4
#define KMAX_STEPS 10

enum kueue_answer {
	K_RELEASE, /* not a request: a workload of `units` finishes */
	K_ADMIT,
	K_BORROW,
	K_WAIT,
	K_EXCEEDS,
	K_PENDING,
	K_NO_QUOTA,
};

struct kmember {
	char name[32];   /* the ClusterQueue's name */
	char cohort[32]; /* "": in no cohort */
	int64_t nominal; /* NO_ENTRY: no quota for the flavor */
	int64_t borrowing_limit, lending_limit; /* NL: absent */
	int64_t used;
};

struct kstep {
	char tenant[32];
	int64_t units;
	enum kueue_answer want;
	int64_t borrowed; /* K_BORROW */
	int64_t ceiling;  /* K_EXCEEDS: Kueue's "maximum capacity" */
	char known_diff[128];
};

struct kcase {
	char test[128]; /* Kueue's test name, verbatim */
	char where[80];
	char file[64];
	char phase[96];
	struct kmember m[KMAX_MEMBERS];
	struct kstep s[KMAX_STEPS];
};

/* The reason of every known difference (see the top of the file). */
#define BLOCKED                                                             \
	"Kueue reserves the lender's unused nominal for its pending workload; " \
	"gpugate keeps no pending work and lends it"

static struct kcase kcases[] = {
	/* pkg/scheduler/scheduler_test.go, TestSchedule */
	{
		.test = "single clusterQueue full",
		.where = "TestSchedule",
		.file = SCHED,
		.m = {{"sales", "", 50, NL, NL, 40}},
		.s = {{"sales", 11, K_WAIT}}, /* "1 more needed" */
	},
	{
		/* eng-alpha fits its first flavor, on-demand */
		.test = "admit in different cohorts",
		.where = "TestSchedule",
		.file = SCHED,
		.m = {{"sales", "", 50, NL, NL, 0},
		      {"eng-alpha", "eng", 50, 50, NL, 0},
		      {"eng-beta", "eng", 50, 10, NL, 0}},
		.s = {{"sales", 1, K_ADMIT}, {"eng-alpha", 51, K_BORROW, 1}},
	},
	{
		.test = "admit in same cohort with no borrowing",
		.where = "TestSchedule",
		.file = SCHED,
		.m = {{"eng-alpha", "eng", 50, 50, NL, 0},
		      {"eng-beta", "eng", 50, 10, NL, 0}},
		.s = {{"eng-alpha", 40, K_ADMIT}, {"eng-beta", 40, K_ADMIT}},
	},
	{
		/* on-demand: eng-beta "no longer fits after processing another
		 * workload" */
		.test = "cannot borrow if cohort was assigned and would result in "
			"overadmission",
		.where = "TestSchedule",
		.file = SCHED,
		.m = {{"eng-alpha", "eng", 50, 50, NL, 0},
		      {"eng-beta", "eng", 50, 10, NL, 0}},
		.s = {{"eng-alpha", 45, K_ADMIT}, {"eng-beta", 56, K_WAIT}},
	},
	{
		.test = "can borrow if cohort was assigned and will not result in "
			"overadmission",
		.where = "TestSchedule",
		.file = SCHED,
		.m = {{"eng-alpha", "eng", 50, 50, NL, 0},
		      {"eng-beta", "eng", 50, 10, NL, 0}},
		.s = {{"eng-alpha", 45, K_ADMIT}, {"eng-beta", 55, K_BORROW, 5}},
	},
	{
		.test = "workload exceeds lending limit when borrow in cohort",
		.where = "TestSchedule",
		.file = SCHED,
		.m = {{"lend-a", "lend", 3, NL, 2, 0}, {"lend-b", "lend", 2, NL, 2, 2}},
		.s = {{"lend-b", 3, K_WAIT}}, /* "1 more needed" */
	},
	{
		/* root -> child, no quota on either: one flat cohort */
		.test = "hierarchical cohort respects lending limit when borrowing",
		.where = "TestSchedule",
		.file = SCHED,
		.m = {{"cq-lender", "child", 10, NL, 3, 0},
		      {"cq-borrower", "child", 5, 10, NL, 5}},
		.s = {{"cq-borrower", 4, K_WAIT}}, /* "1 more needed" */
	},
	{
		.test = "hierarchical cohort allows borrowing up to lending limit",
		.where = "TestSchedule",
		.file = SCHED,
		.m = {{"cq-lender", "child", 10, NL, 5, 0},
		      {"cq-borrower", "child", 5, 10, NL, 5}},
		.s = {{"cq-borrower", 5, K_BORROW, 5}},
	},
	{
		/* flavor on-demand; "existing" also holds 100 spot, another
		 * flavor; new-gamma: "insufficient unused quota for cpu in
		 * flavor on-demand, 41 more needed" */
		.test = "no overadmission while borrowing",
		.where = "TestSchedule",
		.file = SCHED,
		.m = {{"eng-alpha", "eng", 50, 50, NL, 0},
		      {"eng-beta", "eng", 50, 10, NL, 0},
		      {"eng-gamma", "eng", 50, 10, NL, 51}},
		.s = {{"eng-beta", 50, K_ADMIT},
		      {"eng-alpha", 1, K_ADMIT},
		      {"eng-gamma", 50, K_WAIT}},
	},
	{
		/* resource r1 of flavor default; wl1 (priority -1) first */
		.test = "two workloads can borrow the same resources from the same "
			"flavor in the same cycle if fits in the cohort quota",
		.where = "TestSchedule",
		.file = SCHED,
		.m = {{"cq1", "co", 10, 10, NL, 0},
		      {"cq2", "co", 10, 10, NL, 0},
		      {"cq3", "co", 10, 10, NL, 0}},
		.s = {{"cq1", 16, K_BORROW, 6}, {"cq2", 14, K_BORROW, 4}},
	},
	{
		.test = "only one workload can borrow one resources from the same "
			"flavor in the same cycle if cohort quota cannot fit",
		.where = "TestSchedule",
		.file = SCHED,
		.m = {{"cq1", "co", 10, 10, NL, 0},
		      {"cq2", "co", 10, 10, NL, 0},
		      {"cq3", "co", 10, 10, NL, 0}},
		.s = {{"cq1", 16, K_BORROW, 6}, {"cq2", 16, K_WAIT}},
	},
	{
		/* cq_a: "2 more needed"; it finds nothing to preempt either way */
		.test = "preemption while borrowing, workload waiting for preemption "
			"should not block a borrowing workload in another CQ",
		.where = "TestSchedule",
		.file = SCHED,
		.m = {{"cq_shared", "preemption-while-borrowing", 4, 0, NL, 0},
		      {"cq_a", "preemption-while-borrowing", 0, 3, NL, 2},
		      {"cq_b", "preemption-while-borrowing", 0, NL, NL, 0}},
		.s = {{"cq_a", 3, K_WAIT}, {"cq_b", 1, K_BORROW, 1}},
	},
	{
		.test = "not enough resources",
		.where = "TestSchedule",
		.file = SCHED,
		.m = {{"sales", "", 50, NL, NL, 0}},
		.s = {{"sales", 100, K_EXCEEDS, 0, 50}},
	},
	{
		.test = "capacity blocked when lending clusterqueue not guaranteed to "
			"reclaim (ReclaimWithinCohort=Never)",
		.where = "TestSchedule",
		.file = SCHED,
		.m = {{"ClusterQueueA", "root", 2, NL, NL, 1},
		      {"ClusterQueueB", "root", 0, NL, NL, 0}},
		.s = {{"ClusterQueueA", 2, K_WAIT}, /* "1 more needed" */
		      {"ClusterQueueB", 1, K_WAIT, 0, 0, BLOCKED}},
	},
	{
		/* the same under Never: LowerPriority cannot always reclaim */
		.test = "capacity blocked when lending clusterqueue not guaranteed to "
			"reclaim (ReclaimWithinCohort=LowerPriority)",
		.where = "TestSchedule",
		.file = SCHED,
		.m = {{"ClusterQueueA", "root", 2, NL, NL, 1},
		      {"ClusterQueueB", "root", 0, NL, NL, 0}},
		.s = {{"ClusterQueueA", 2, K_WAIT},
		      {"ClusterQueueB", 1, K_WAIT, 0, 0, BLOCKED}},
	},
	{
		/* flavor model-a (example.com/gpu), only eng-beta has it */
		.test = "cannot borrow resource not listed in clusterQueue",
		.where = "TestSchedule",
		.file = SCHED,
		.m = {{"eng-alpha", "eng", NO_ENTRY, NL, NL, 0},
		      {"eng-beta", "eng", 20, 0, NL, 0}},
		.s = {{"eng-alpha", 1, K_NO_QUOTA}},
	},

	/* pkg/scheduler/flavorassigner/flavorassigner_test.go, TestAssignFlavors */
	{
		.test = "not enough space to borrow",
		.where = "TestAssignFlavors",
		.file = ASSIGN,
		.m = {{"test-clusterqueue", "test-cohort", 1, NL, NL, 0},
		      {"test-secondary-clusterqueue", "test-cohort", 10, NL, 0, 9}},
		.s = {{"test-clusterqueue", 2, K_EXCEEDS, 0, 1}},
	},
	{
		/* ExceedsMaxQuota comes before any preemption is considered */
		.test = "when borrowing while preemption is needed, but "
			"borrowingLimit exceeds the quota available in the cohort",
		.where = "TestAssignFlavors",
		.file = ASSIGN,
		.m = {{"test-clusterqueue", "test-cohort", 0, 12, NL, 0},
		      {"test-secondary-clusterqueue", "test-cohort", 11, NL, NL, 10}},
		.s = {{"test-clusterqueue", 12, K_EXCEEDS, 0, 11}},
	},

	/* test/integration/singlecluster/scheduler/scheduler_test.go */
	{
		/* on-demand (spot-tainted is not tolerated); prod-cq is alone
		 * in its cohort; the empty workload (0 pods) and dev-wl
		 * (another ClusterQueue and flavor) are left out */
		.test = "Should admit workloads as they fit in their ClusterQueue",
		.where = "Scheduler / Scheduling workloads on clusterQueues",
		.file = INTEG,
		.m = {{"prod-cq", "prod-cohort", 5, NL, NL, 0}},
		.s = {{"prod-cq", 2, K_ADMIT},
		      {"prod-cq", 5, K_PENDING},
		      {"prod-cq", 2, K_RELEASE},
		      {"prod-cq", 5, K_ADMIT}},
	},
	{
		/* cpu 2.5: every quantity doubled; on-demand as above */
		.test = "Should admit two small workloads after a big one finishes",
		.where = "Scheduler / Scheduling workloads on clusterQueues",
		.file = INTEG,
		.m = {{"prod-cq", "prod-cohort", 10, NL, NL, 0}},
		.s = {{"prod-cq", 10, K_ADMIT},
		      {"prod-cq", 5, K_PENDING},
		      {"prod-cq", 5, K_PENDING},
		      {"prod-cq", 10, K_RELEASE},
		      {"prod-cq", 5, K_ADMIT},
		      {"prod-cq", 5, K_ADMIT}},
	},
	{
		/* on-demand: spot-tainted (borrowingLimit 0) can never hold 10 */
		.test = "Should admit workloads using borrowed ClusterQueue",
		.where = "Scheduler / Using cohorts for sharing unused resources",
		.file = INTEG,
		.phase = "before fallback-cq is created",
		.m = {{"prod-cq", "all", 5, NL, NL, 0}},
		.s = {{"prod-cq", 10, K_PENDING}},
	},
	{
		.test = "Should admit workloads using borrowed ClusterQueue",
		.where = "Scheduler / Using cohorts for sharing unused resources",
		.file = INTEG,
		.phase = "after fallback-cq is created",
		.m = {{"prod-cq", "all", 5, NL, NL, 0},
		      {"fallback-cq", "all", 5, NL, NL, 0}},
		.s = {{"prod-cq", 10, K_BORROW, 5}},
	},
	{
		.test = "Should schedule workloads borrowing quota from ClusterQueues "
			"in the same Cohort",
		.where = "Scheduler / Using cohorts for sharing unused resources",
		.file = INTEG,
		.phase = "before test-cq is created",
		.m = {{"prod-cq", "all", 5, 10, NL, 0}, {"dev-cq", "all", 5, 10, NL, 0}},
		.s = {{"prod-cq", 11, K_PENDING}, {"dev-cq", 11, K_PENDING}},
	},
	{
		.test = "Should schedule workloads borrowing quota from ClusterQueues "
			"in the same Cohort",
		.where = "Scheduler / Using cohorts for sharing unused resources",
		.file = INTEG,
		.phase = "after test-cq is created",
		.m = {{"prod-cq", "all", 5, 10, NL, 0},
		      {"dev-cq", "all", 5, 10, NL, 0},
		      {"test-cq", "all", 15, 0, NL, 0}},
		.s = {{"prod-cq", 11, K_BORROW, 6}, {"dev-cq", 11, K_BORROW, 6}},
	},
	{
		.test = "Should start workloads that are under min quota before "
			"borrowing",
		.where = "Scheduler / Using cohorts for sharing unused resources",
		.file = INTEG,
		.m = {{"prod-cq", "all", 2, NL, NL, 0}, {"dev-cq", "all", 0, NL, NL, 0}},
		.s = {{"prod-cq", 2, K_ADMIT},
		      {"dev-cq", 1, K_PENDING},
		      {"prod-cq", 2, K_PENDING},
		      {"prod-cq", 2, K_RELEASE},
		      /* p-wl-2 before d-wl-1: it needs no borrowing */
		      {"prod-cq", 2, K_ADMIT},
		      {"dev-cq", 1, K_PENDING},
		      {"prod-cq", 2, K_RELEASE},
		      {"dev-cq", 1, K_BORROW, 1}},
	},
	{
		.test = "Should admit workloads using borrowed ClusterQueue",
		.where = "Scheduler / Using cohorts for sharing with LendingLimit",
		.file = INTEG,
		.phase = "before dev-cq is created",
		.m = {{"prod-cq", "all", 5, NL, 1, 0}},
		.s = {{"prod-cq", 9, K_PENDING}},
	},
	{
		.test = "Should admit workloads using borrowed ClusterQueue",
		.where = "Scheduler / Using cohorts for sharing with LendingLimit",
		.file = INTEG,
		.phase = "after dev-cq is created",
		.m = {{"prod-cq", "all", 5, NL, 1, 0}, {"dev-cq", "all", 5, NL, 4, 0}},
		.s = {{"prod-cq", 9, K_BORROW, 4}},
	},
	{
		.test = "Should admit workloads after updating lending limit",
		.where = "Scheduler / Using cohorts for sharing with LendingLimit",
		.file = INTEG,
		.phase = "dev-cq lendingLimit 0",
		.m = {{"prod-cq", "all", 5, NL, 0, 0}, {"dev-cq", "all", 5, NL, 0, 0}},
		.s = {{"prod-cq", 5, K_ADMIT}, {"prod-cq", 5, K_PENDING}},
	},
	{
		.test = "Should admit workloads after updating lending limit",
		.where = "Scheduler / Using cohorts for sharing with LendingLimit",
		.file = INTEG,
		.phase = "dev-cq lendingLimit updated to 5",
		.m = {{"prod-cq", "all", 5, NL, 0, 5}, {"dev-cq", "all", 5, NL, 5, 0}},
		.s = {{"prod-cq", 5, K_BORROW, 5}},
	},
	{
		/* player2-a (priority 11) before player3-a (10); pending-wl is
		 * at the head of strict-fifo-cq in every cycle */
		.test = "Pending workload with StrictFIFO doesn't block other CQ from "
			"borrowing from a third CQ",
		.where = "Scheduler / Queueing with StrictFIFO",
		.file = INTEG,
		.m = {{"strict-fifo-cq", "cohort", 5, 0, NL, 0},
		      {"team-a", "cohort", 5, NL, NL, 0},
		      {"shared-resources", "cohort", 5, NL, NL, 0}},
		.s = {{"strict-fifo-cq", 3, K_ADMIT},
		      {"team-a", 5, K_ADMIT},
		      {"strict-fifo-cq", 3, K_PENDING},
		      {"team-a", 5, K_BORROW, 5},
		      {"team-a", 1, K_PENDING, 0, 0, BLOCKED}},
	},
	{
		/* foundation-queue is LowerPriority in Kueue: the same as
		 * Never here (it cannot always reclaim) */
		.test = "foundation-queue blocks capacity when it is not sure that it "
			"can reclaim",
		.where = "Scheduler / Reserving Resources in Cohort",
		.file = INTEG,
		.m = {{"foundation-queue", "cohort", 2, NL, NL, 0},
		      {"best-effort-queue", "cohort", 0, NL, NL, 0}},
		.s = {{"foundation-queue", 1, K_ADMIT},
		      {"foundation-queue", 2, K_PENDING},
		      {"best-effort-queue", 1, K_PENDING, 0, 0, BLOCKED},
		      {"best-effort-queue", 1, K_PENDING, 0, 0, BLOCKED},
		      {"foundation-queue", 1, K_RELEASE},
		      {"foundation-queue", 2, K_ADMIT},
		      {"best-effort-queue", 1, K_PENDING},
		      {"best-effort-queue", 1, K_PENDING}},
	},
	{
		.test = "Should prevent incorrect admission through borrowing after "
			"ClusterQueue deletion",
		.where = "Scheduler / Deleting ClusterQueue should update cohort "
			 "borrowable resources",
		.file = INTEG,
		.phase = "after queue-1 is deleted",
		.m = {{"queue-2", "bug-test", 0, NL, NL, 0}},
		.s = {{"queue-2", 8, K_PENDING}},
	},
	{
		/* on-demand (spot-tainted is not tolerated) */
		.test = "Should re-enqueue by the delete event of workload belonging "
			"to the same ClusterQueue",
		.where = "Scheduler / Handling workloads events",
		.file = INTEG,
		.m = {{"cluster-queue", "prod", 5, NL, NL, 0}},
		.s = {{"cluster-queue", 4, K_ADMIT},
		      {"cluster-queue", 4, K_PENDING},
		      {"cluster-queue", 1, K_ADMIT},
		      {"cluster-queue", 4, K_RELEASE},
		      {"cluster-queue", 4, K_ADMIT}},
	},
	{
		.test = "Should re-enqueue by the delete event of workload belonging "
			"to the same Cohort",
		.where = "Scheduler / Handling workloads events",
		.file = INTEG,
		.m = {{"cluster-queue", "prod", 5, NL, NL, 0},
		      {"foo-clusterqueue", "prod", 5, NL, NL, 0}},
		.s = {{"foo-clusterqueue", 8, K_BORROW, 3},
		      {"cluster-queue", 8, K_PENDING},
		      {"foo-clusterqueue", 2, K_BORROW, 2},
		      {"foo-clusterqueue", 8, K_RELEASE},
		      {"cluster-queue", 8, K_BORROW, 3}},
	},
	{
		.test = "Should re-enqueue by the update event of ClusterQueue",
		.where = "Scheduler / Handling clusterQueue events",
		.file = INTEG,
		.phase = "before the update: nominal 5, no cohort",
		.m = {{"cluster-queue", "", 5, NL, NL, 0}},
		.s = {{"cluster-queue", 6, K_PENDING}},
	},
	{
		.test = "Should re-enqueue by the update event of ClusterQueue",
		.where = "Scheduler / Handling clusterQueue events",
		.file = INTEG,
		.phase = "after the update: nominal 6, borrowingLimit 0, cohort",
		.m = {{"cluster-queue", "cohort", 6, 0, NL, 0}},
		.s = {{"cluster-queue", 6, K_ADMIT}},
	},

	/* test/integration/singlecluster/scheduler/preemption_test.go */
	{
		.test = "Should not preempt Workloads in the cohort, if the "
			"ClusterQueue requires borrowing",
		.where = "Preemption / In a ClusterQueue that is part of a cohort",
		.file = INTEG_PRE,
		.m = {{"alpha-cq", "all", 2, NL, NL, 0},
		      {"beta-cq", "all", 2, NL, NL, 0},
		      {"gamma-cq", "all", 2, NL, NL, 0}},
		.s = {{"alpha-cq", 2, K_ADMIT},
		      {"beta-cq", 4, K_BORROW, 2},
		      {"alpha-cq", 2, K_PENDING}},
	},
	{
		/* beta-high (high priority) is ahead of beta-mid in beta-q */
		.test = "Should preempt Workloads in the cohort borrowing quota, when "
			"the ClusterQueue is using less than nominal quota",
		.where = "Preemption / In a ClusterQueue that is part of a cohort",
		.file = INTEG_PRE,
		.phase = "before alpha-mid (it reclaims with Any: left out)",
		.m = {{"alpha-cq", "all", 2, NL, NL, 0},
		      {"beta-cq", "all", 2, NL, NL, 0},
		      {"gamma-cq", "all", 2, NL, NL, 0}},
		.s = {{"alpha-cq", 1, K_ADMIT},
		      {"beta-cq", 4, K_BORROW, 2},
		      {"beta-cq", 1, K_BORROW, 1}},
	},
	{
		/* wl-2 (priority 1) is ahead of wl-1 (0) in dev-queue */
		.test = "Should be able to preempt when lending limit enabled",
		.where = "Preemption / With lending limit",
		.file = INTEG_PRE,
		.phase = "before wl-3 (it reclaims with Any: left out)",
		.m = {{"prod-cq", "all", 5, NL, 4, 0}, {"dev-cq", "all", 5, NL, NL, 0}},
		.s = {{"dev-cq", 5, K_ADMIT}, {"dev-cq", 4, K_BORROW, 4}},
	},
};

/* Kueue's answer to step s, in words. */
static void kueue_said(const struct kstep *s, char *buf, size_t n)
{
	switch (s->want) {
	case K_ADMIT:
		snprintf(buf, n, "admitted on nominal quota");
		return;
	case K_BORROW:
		snprintf(buf, n, "admitted borrowing %" PRId64, s->borrowed);
		return;
	case K_WAIT:
		snprintf(buf, n, "pending, insufficient unused quota");
		return;
	case K_EXCEEDS:
		snprintf(buf, n, "pending, ExceedsMaxQuota (maximum capacity %" PRId64 ")",
			 s->ceiling);
		return;
	case K_PENDING:
		snprintf(buf, n, "pending");
		return;
	case K_NO_QUOTA:
		snprintf(buf, n, "pending, resource unavailable in ClusterQueue");
		return;
	case K_RELEASE:
		break;
	}
	snprintf(buf, n, "?");
}

/* gpugate's answer, in words. */
static void gpugate_said(const struct quota_result *r, char *buf, size_t n)
{
	snprintf(buf, n,
		 "%s (borrowed %" PRId64 ", can lend %" PRId64 ", ceiling %" PRId64 ")",
		 quota_position_name(r->position), r->borrowed, r->can_lend,
		 r->ceiling);
}

static bool agrees(const struct kstep *s, const struct quota_result *r)
{
	switch (s->want) {
	case K_ADMIT:
		return r->position == QUOTA_NOMINAL && r->borrowed == 0;
	case K_BORROW:
		return r->position == QUOTA_BORROWED && r->borrowed == s->borrowed;
	case K_WAIT:
		return r->position == QUOTA_OVER || r->position == QUOTA_LENT_OUT;
	case K_EXCEEDS:
		return r->position == QUOTA_NEVER_FITS && r->ceiling == s->ceiling;
	case K_PENDING:
		return r->position == QUOTA_OVER || r->position == QUOTA_LENT_OUT ||
		       r->position == QUOTA_NEVER_FITS;
	case K_NO_QUOTA:
		return r->position == QUOTA_NO_QUOTA;
	case K_RELEASE:
		break;
	}
	return false;
}

/* Appends to a policy text, failing the test if it does not fit. */
static void add(char *buf, size_t cap, size_t *len, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void add(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf + *len, cap - *len, fmt, ap);
	va_end(ap);
	cr_assert(n >= 0 && (size_t)n < cap - *len, "policy text too long");
	*len += (size_t)n;
}

/* The policy of one scenario: its members, one flavor "g". */
static struct policy *load(const struct kcase *kc)
{
	char yaml[2048];
	size_t len = 0;
	struct policy *p = NULL;
	struct diag d;

	add(yaml, sizeof(yaml), &len,
	    "version: 1\n"
	    "flavors:\n"
	    "  - {name: g, resource: x.io/g, sharing: exclusive, gpusPerNode: 64}\n"
	    "classes: []\n"
	    "tenants:\n");
	for (size_t i = 0; i < KMAX_MEMBERS && kc->m[i].name[0]; i++) {
		const struct kmember *m = &kc->m[i];

		add(yaml, sizeof(yaml), &len, "  - name: %s\n    namespaces: [ns%zu]\n",
		    m->name, i);
		if (m->cohort[0])
			add(yaml, sizeof(yaml), &len,
			    "    cohort: %s\n    reclaimWithinCohort: Never\n", m->cohort);
		if (m->nominal == NO_ENTRY)
			continue;
		add(yaml, sizeof(yaml), &len, "    quota: [{flavor: g, nominal: %" PRId64,
		    m->nominal);
		if (m->borrowing_limit != NL)
			add(yaml, sizeof(yaml), &len, ", borrowingLimit: %" PRId64,
			    m->borrowing_limit);
		if (m->lending_limit != NL)
			add(yaml, sizeof(yaml), &len, ", lendingLimit: %" PRId64,
			    m->lending_limit);
		add(yaml, sizeof(yaml), &len, "}]\n");
	}
	diag_init(&d);
	cr_assert_eq(policy_parse("kueue.yaml", yaml, len, &p, &d), 0, "%s: %s\n%s",
		     kc->test, diag_text(&d), yaml);
	return p;
}

/* Units of g each tenant holds, by tenant index (the policy has no more). */
static int64_t used_now[KMAX_MEMBERS];

static int64_t used_fn(const void *ctx, unsigned t, unsigned f)
{
	(void)ctx;
	(void)f;
	return t < KMAX_MEMBERS ? used_now[t] : 0;
}

ParameterizedTestParameters(kueue_parity, scenarios)
{
	return cr_make_param_array(struct kcase, kcases,
				   sizeof(kcases) / sizeof(kcases[0]));
}

ParameterizedTest(struct kcase *kc, kueue_parity, scenarios)
{
	const struct usage_view view = {.ctx = NULL, .used = used_fn};
	struct policy *p = load(kc);
	const struct policy_flavor *g = policy_flavor_find(p, "g");

	memset(used_now, 0, sizeof(used_now));
	for (size_t i = 0; i < KMAX_MEMBERS && kc->m[i].name[0]; i++) {
		const struct policy_tenant *t = policy_tenant_find(p, kc->m[i].name);

		cr_assert(t && t->index < KMAX_MEMBERS, "%s: member %s", kc->test,
			  kc->m[i].name);
		used_now[t->index] = kc->m[i].used;
	}
	for (size_t i = 0; i < KMAX_STEPS && kc->s[i].tenant[0]; i++) {
		const struct kstep *s = &kc->s[i];
		const struct policy_tenant *t = policy_tenant_find(p, s->tenant);
		struct quota_result r;
		char kueue[96], gpugate[96];
		bool ok;

		cr_assert(t, "%s: step %zu: no member \"%s\"", kc->test, i + 1,
			  s->tenant);
		if (s->want == K_RELEASE) {
			used_now[t->index] -= s->units;
			cr_assert_geq(used_now[t->index], 0);
			continue;
		}
		quota_decide(p, t, g, s->units, true, &view, &r);
		cr_expect_eq(r.requested, s->units);
		if (s->want != K_NO_QUOTA)
			cr_expect_eq(r.used, used_now[t->index]);
		ok = agrees(s, &r);
		kueue_said(s, kueue, sizeof(kueue));
		gpugate_said(&r, gpugate, sizeof(gpugate));
		if (s->known_diff[0]) {
			/*
			 * On stderr, not cr_log_warn: Criterion 2.4 exits
			 * non-zero after any warning (unless run with
			 * --ignore-warnings), which would fail `make unit`
			 * for a difference recorded on purpose.
			 */
			fprintf(stderr,
				"[KNOWN] kueue parity: \"%s\"%s%s, step %zu, %s asks "
				"%" PRId64 ": Kueue: %s; gpugate: %s; %s\n",
				kc->test, kc->phase[0] ? ", " : "", kc->phase, i + 1,
				s->tenant, s->units, kueue, gpugate, s->known_diff);
			cr_expect(!ok,
				  "\"%s\" step %zu: gpugate now agrees with Kueue; "
				  "remove its known_diff",
				  kc->test, i + 1);
		} else {
			cr_expect(ok,
				  "\"%s\"%s%s (%s), step %zu, %s asks %" PRId64
				  ": Kueue: %s; gpugate: %s",
				  kc->test, kc->phase[0] ? ", " : "", kc->phase, kc->file,
				  i + 1, s->tenant, s->units, kueue, gpugate);
		}
		/* Kueue's answer moves the usage on, not gpugate's. */
		if (s->want == K_ADMIT || s->want == K_BORROW)
			used_now[t->index] += s->units;
	}
	policy_free(p);
}

/*
 * Left out, and why.  Kueue files as above; TestSchedule unless said.
 *
 * Several flavors, the answer decided by falling from one to the next
 * (flavor fungibility), which gpugate does not do (a class names one
 * flavor):
 *   "use second flavor when the first has no preemption candidates;
 *    WhenCanPreempt: MayStopSearch", "assign multiple resources and
 *   flavors", "can borrow if needs reclaim from cohort in different flavor",
 *   "not enough resources to borrow, fallback to next flavor; WhenCanPreempt:
 *   TryNextFlavor", "don't assign flavor if there are no candidates for
 *   preemption", "admit to second flavor when first needs preemption;
 *   WhenCanPreempt: TryNextFlavor", "PreemptionOverBorrowing preference: ..."
 *   (2), "BorrowingOverPreemption preference: borrow in second flavor instead
 *   of preempting in first"; TestLastSchedulingContext (all 5: fungibility
 *   over two cycles); TestAssignFlavors: every "multiple flavors ...",
 *   "preempt ... try next flavor", "borrow ... try next flavor", "lend try
 *   next flavor ...", "when borrowing while preemption is needed for flavor
 *   one ...", "cannot preempt in cohort (oracle returns None) for the first
 *   flavor ..."; integration: "Should try next flavor if can't preempt on
 *   first", "Should try next flavor instead of borrowing", "Should preempt
 *   before try next flavor", "Using multiple flavours".
 *
 * Several resources in one workload, or two resources of one flavor (a
 * gpugate flavor counts one resource):
 *   "two workloads can borrow different resources from the same flavor in
 *   the same cycle", "admit workload with zero-quantity request for resource
 *   not in ClusterQueue", "preempt when workload requests zero of a resource
 *   not defined in ClusterQueue", "prevent integer overflow when sum of
 *   requests over podsets exceeds MaxInt64"; TestAssignFlavors: "single
 *   flavor, fits" (cpu and memory), "multiple specs, fits borrowing", "num
 *   pods fit", "num pods don't fit" (pods counted as a resource);
 *   integration: "Should admit workloads as number of pods allows it",
 *   "Should admit workloads as the number of pods (only) allows it",
 *   "shouldn't admit second workload on over admission" (cpu and memory).
 *
 * Preemption, within the ClusterQueue or reclaiming in the cohort with Any
 * or LowerPriority (gpugate never preempts at admission; its reclaim is
 * Kueue's Any, tested in quota_test.c and reclaim_test.c):
 *   "preempt workloads in ClusterQueue and cohort", "multiple CQs need
 *   preemption", "minimal preemptions when target queue is exhausted", "A
 *   workload is only eligible to do preemptions if it fits fully within
 *   nominal quota", "multiple preemptions without borrowing", "multiple
 *   preemptions preemption possible after earlier workload fits", "multiple
 *   preemptions skip preemption when shared limited resource", "prefer
 *   reclamation over cq priority based preemption", "prefer first preemption
 *   flavor ..." (2), "workload requiring reclaimation prioritized over wl in
 *   another full cq", "capacity not blocked when lending clusterqueue can
 *   reclaim (ReclaimWithinCohort=Any)" (its answer rests on Any: under Never
 *   it is the Never scenario above), the three "... BlockedOnPreemptionGates
 *   ..."; TestAssignFlavors: "single flavor, used resources, doesn't fit",
 *   "past max, but can preempt in ClusterQueue", "past min, but can preempt
 *   in ClusterQueue", "past min, but can preempt in cohort and ClusterQueue",
 *   "quota exhausted, but can preempt in cohort and ClusterQueue" (their
 *   Preempt mode comes from the test's preemption oracle),
 *   TestReclaimBeforePriorityPreemption; integration: "foundation-queue
 *   allows best-effort queue to use capacity until it is ready to admit next
 *   workload" (Any), the later steps of the two preemption_test.go scenarios
 *   kept above, and the rest of preemption_test.go.
 *
 * Quota held by Cohort objects, or cohort trees with more than one level of
 * members (gpugate's cohort is flat and holds no quota):
 *   "in a hierarchical cohort, workload borrowing less is scheduled first",
 *   TestHierarchical; integration: "Cohort provides resources directly" (5),
 *   "Deleting child Cohort should update borrowable resources for parent
 *   Cohort" (2), "Cohort lendingLimit caps sibling borrowing in hierarchy",
 *   "Cohort borrowingLimit blocks sibling borrowing in hierarchy" (2),
 *   preemption_test.go "In a multi-level cohort".
 *
 * Partial admission, admission checks, fair sharing, TAS, workload slices,
 * reclaimable pods, LimitRanges, queueing order only, configuration errors:
 *   "partial admission ..." (4), "workload fits in single clusterQueue, with
 *   check state ready" / "... pending", "pending admission check with nofit
 *   and fit flavors", "workload-slice fits in single clusterQueue", "skip
 *   workload with missing or deleted ClusterQueue (NoFit)", "failed to match
 *   clusterQueue selector", "workload should not fit in nonexistent
 *   clusterQueue", "workload should not fit in clusterQueue with nonexistent
 *   flavor", "flavors with mixed misconfiguration and insufficient quota",
 *   "flavors with mixed taint mismatch and exceeding limits", "flavors are
 *   structurally incompatible", "error during admission", "container does
 *   not satisfy limitRange constraints", "container resource requests exceed
 *   limits", "prevent integer overflow in ResourceValue conversion to
 *   MilliValue"; scheduler_fs_test.go, scheduler_afs*_test.go,
 *   scheduler_tas_test.go, scheduler_concurrent_admission_test.go (fair
 *   sharing, TAS, concurrent admission); TestAssignFlavors: the fair sharing,
 *   TAS, workload slice and reclaimable pods cases; integration: reclaimable
 *   pods, admission checks, priorities in held queues, PriorityBoost, stop
 *   policies, namespace selectors, LimitRanges, workload slicing.
 *
 * Removed from Kueue: "lendingLimit should not affect assignments when
 * feature disabled" (TestSchedule) tested the LendingLimit feature gate
 * off; it went with the gate (Kueue commit 368717c357, LendingLimit GA).
 */
