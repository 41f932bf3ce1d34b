/* controllers: the table the daemon walks (controllers/controllers.h). */
#include "controllers/controllers.h"

#include "base/diag.h"
#include "controllers/claim-sync.h"
#include "controllers/claim-templates.h"
#include "controllers/class-sync.h"
#include "controllers/gang-groups.h"
#include "controllers/gang-probe.h"
#include "controllers/gang-start.h"
#include "controllers/health.h"
#include "controllers/idle.h"
#include "controllers/quota-sync.h"
#include "controllers/reclaimer.h"
#include "controllers/waiter.h"

#include <stdio.h>
#include <string.h>

/* ---- the rows: what each start takes from the deps --------------------- */

static bool waiter_on(const struct controller_deps *deps)
{
	return deps->waiting_after_s != 0;
}

static int waiter_row_start(const struct controller_deps *deps, void **out,
			    struct diag *d)
{
	struct waiter *w = NULL;
	struct waiter_config c = {
		.kube = deps->kube, .policy = deps->policy,
		.inventory = deps->inventory, .usage = deps->usage,
		.identity = deps->identity, .after_s = deps->waiting_after_s,
		.leading = deps->leading, .leading_ctx = deps->ctx,
	};
	int rc = waiter_start(&c, &w, d);

	*out = w;
	return rc;
}

static void waiter_row_stop(void *c)
{
	waiter_stop(c);
}

static int reclaimer_row_start(const struct controller_deps *deps, void **out,
			       struct diag *d)
{
	struct reclaimer *r = NULL;
	struct reclaimer_config c = {
		.kube = deps->kube, .policy = deps->policy, .usage = deps->usage,
		.identity = deps->identity, .namespace = deps->namespace,
		.leading = deps->leading, .leading_ctx = deps->ctx,
		.metrics = deps->metrics, .inventory = deps->inventory,
		.idle = deps->idle_board,
	};
	int rc = reclaimer_start(&c, &r, d);

	*out = r;
	return rc;
}

static void reclaimer_row_stop(void *c)
{
	reclaimer_stop(c);
}

static bool health_on(const struct controller_deps *deps)
{
	return !deps->no_node_health;
}

/* The node side of the health loop: idle until the inventory is synced. */
static int health_row_start(const struct controller_deps *deps, void **out,
			    struct diag *d)
{
	struct health_controller *h = NULL;
	struct health_controller_config c = {
		.kube = deps->kube, .policy = deps->policy,
		.inventory = deps->inventory, .metrics = deps->metrics,
		.identity = deps->identity, .leading = deps->leading,
		.leading_ctx = deps->ctx,
	};
	int rc = health_controller_start(&c, &h, d);

	*out = h;
	return rc;
}

static void health_row_stop(void *c)
{
	health_controller_stop(c);
}

static bool class_sync_on(const struct controller_deps *deps)
{
	return !deps->no_gpuclasses;
}

static int class_sync_row_start(const struct controller_deps *deps, void **out,
				struct diag *d)
{
	struct class_sync *s = NULL;
	struct class_sync_config c = {
		.kube = deps->kube, .policy = deps->policy,
		.leading = deps->leading, .leading_ctx = deps->ctx,
	};
	int rc = class_sync_start(&c, &s, d);

	*out = s;
	return rc;
}

static void class_sync_row_stop(void *c)
{
	class_sync_stop(c);
}

static bool quota_sync_on(const struct controller_deps *deps)
{
	return !deps->no_gpuquotas;
}

/* Every usage store: memory (the gpugate-memory Lease holder, whose
 * ledger decides), shared (the gpugate-leader holder); both count the
 * same watch. */
static int quota_sync_row_start(const struct controller_deps *deps, void **out,
				struct diag *d)
{
	struct quota_sync *s = NULL;
	struct quota_sync_config c = {
		.kube = deps->kube, .policy = deps->policy, .usage = deps->usage,
		.inventory = deps->inventory, .synced = deps->synced,
		.leading = deps->leading, .ctx = deps->ctx,
	};
	int rc = quota_sync_start(&c, &s, d);

	*out = s;
	return rc;
}

static void quota_sync_row_stop(void *c)
{
	quota_sync_stop(c);
}

/* checkpoint.claim.create: idle while it is off. */
static int claim_sync_row_start(const struct controller_deps *deps, void **out,
				struct diag *d)
{
	struct claim_sync *s = NULL;
	struct claim_sync_config c = {
		.kube = deps->kube, .policy = deps->policy, .pvcs = deps->pvcs,
		.leading = deps->leading, .leading_ctx = deps->ctx,
	};
	int rc = claim_sync_start(&c, &s, d);

	*out = s;
	return rc;
}

static void claim_sync_row_stop(void *c)
{
	claim_sync_stop(c);
}

/* Every replica: its webhook reads the answer. */
static int gang_probe_row_start(const struct controller_deps *deps, void **out,
				struct diag *d)
{
	struct gang_probe *p = NULL;
	struct gang_probe_config c = {
		.kube = deps->kube, .policy = deps->policy, .metrics = deps->metrics,
		.namespace = deps->namespace, .served = deps->gang_served,
	};
	int rc = gang_probe_start(&c, &p, d);

	*out = p;
	return rc;
}

static void gang_probe_row_stop(void *c)
{
	gang_probe_stop(c);
}

/* Idle while the cluster serves no PodGroup or no class is a gang. */
static int gang_groups_row_start(const struct controller_deps *deps, void **out,
				 struct diag *d)
{
	struct gang_groups *g = NULL;
	struct gang_groups_config c = {
		.kube = deps->kube, .policy = deps->policy,
		.served = deps->gang_served, .identity = deps->identity,
		.leading = deps->leading, .leading_ctx = deps->ctx,
	};
	int rc = gang_groups_start(&c, &g, d);

	*out = g;
	return rc;
}

static void gang_groups_row_stop(void *c)
{
	gang_groups_stop(c);
}

/* Route gates of gang start: idle while no gang pod is gated. */
static int gang_start_row_start(const struct controller_deps *deps, void **out,
				struct diag *d)
{
	struct gang_start *g = NULL;
	struct gang_start_config c = {
		.kube = deps->kube, .policy = deps->policy, .inventory = deps->inventory,
		.metrics = deps->metrics, .identity = deps->identity,
		.namespace = deps->namespace, .leading = deps->leading,
		.leading_ctx = deps->ctx, .interval_ms = deps->round_ms,
	};
	int rc = gang_start_start(&c, &g, d);

	*out = g;
	return rc;
}

static void gang_start_row_stop(void *c)
{
	gang_start_stop(c);
}

/* Idle GPUs: on every API-mode replica (leader-only); without
 * --prometheus-url its rounds only publish an empty board (nothing is idle
 * without data) and say once that the policy's idle rules do nothing. */
static int idle_row_start(const struct controller_deps *deps, void **out, struct diag *d)
{
	struct idle_controller *c = NULL;
	struct idle_config cfg = {
		.kube = deps->kube, .prom = deps->prom, .policy = deps->policy,
		.usage = deps->usage, .board = deps->idle_board, .metrics = deps->metrics,
		.identity = deps->identity,
		.interval_ms = deps->idle_interval_ms ? deps->idle_interval_ms : deps->round_ms,
		.leading = deps->leading, .leading_ctx = deps->ctx,
		.synced = deps->synced, .synced_ctx = deps->ctx,
	};
	int rc = idle_start(&cfg, &c, d);

	*out = c;
	return rc;
}

static void idle_row_stop(void *c)
{
	idle_stop(c);
}

/* DRA classes' claim templates: reads on every replica (the board its
 * admission asks), writes on the leader; nothing while the cluster serves
 * no templates. */
static int claim_templates_row_start(const struct controller_deps *deps, void **out,
				     struct diag *d)
{
	struct claim_templates *s = NULL;
	struct claim_templates_config c = {
		.kube = deps->kube, .policy = deps->policy, .board = deps->templates,
		.metrics = deps->metrics,
		.interval_s = deps->round_ms ? (deps->round_ms + 999) / 1000 : 0,
		.leading = deps->leading, .leading_ctx = deps->ctx,
	};
	int rc = claim_templates_start(&c, &s, d);

	*out = s;
	return rc;
}

static void claim_templates_row_stop(void *c)
{
	claim_templates_stop(c);
}

const struct controller controllers_table[CONTROLLERS_COUNT] = {
	{"waiter",
	 CONTROLLER_NEEDS_KUBE | CONTROLLER_NEEDS_POLICY | CONTROLLER_NEEDS_INVENTORY |
		 CONTROLLER_NEEDS_USAGE | CONTROLLER_NEEDS_IDENTITY,
	 true, waiter_on, waiter_row_start, waiter_row_stop},
	{"reclaimer",
	 CONTROLLER_NEEDS_KUBE | CONTROLLER_NEEDS_POLICY | CONTROLLER_NEEDS_USAGE |
		 CONTROLLER_NEEDS_IDENTITY | CONTROLLER_NEEDS_NAMESPACE |
		 CONTROLLER_NEEDS_METRICS,
	 true, NULL, reclaimer_row_start, reclaimer_row_stop},
	{"health",
	 CONTROLLER_NEEDS_KUBE | CONTROLLER_NEEDS_POLICY | CONTROLLER_NEEDS_INVENTORY |
		 CONTROLLER_NEEDS_METRICS,
	 true, health_on, health_row_start, health_row_stop},
	{"class-sync", CONTROLLER_NEEDS_KUBE | CONTROLLER_NEEDS_POLICY, true,
	 class_sync_on, class_sync_row_start, class_sync_row_stop},
	{"quota-sync",
	 CONTROLLER_NEEDS_KUBE | CONTROLLER_NEEDS_POLICY | CONTROLLER_NEEDS_USAGE |
		 CONTROLLER_NEEDS_INVENTORY | CONTROLLER_NEEDS_SYNCED,
	 true, quota_sync_on, quota_sync_row_start, quota_sync_row_stop},
	{"claim-sync",
	 CONTROLLER_NEEDS_KUBE | CONTROLLER_NEEDS_POLICY | CONTROLLER_NEEDS_PVCS,
	 true, NULL, claim_sync_row_start, claim_sync_row_stop},
	{"gang-probe",
	 CONTROLLER_NEEDS_KUBE | CONTROLLER_NEEDS_POLICY | CONTROLLER_NEEDS_METRICS |
		 CONTROLLER_NEEDS_NAMESPACE | CONTROLLER_NEEDS_GANG_SERVED,
	 false, NULL, gang_probe_row_start, gang_probe_row_stop},
	{"gang-groups",
	 CONTROLLER_NEEDS_KUBE | CONTROLLER_NEEDS_POLICY | CONTROLLER_NEEDS_IDENTITY |
		 CONTROLLER_NEEDS_GANG_SERVED,
	 true, NULL, gang_groups_row_start, gang_groups_row_stop},
	{"gang-start",
	 CONTROLLER_NEEDS_KUBE | CONTROLLER_NEEDS_POLICY | CONTROLLER_NEEDS_INVENTORY |
		 CONTROLLER_NEEDS_METRICS | CONTROLLER_NEEDS_NAMESPACE,
	 true, NULL, gang_start_row_start, gang_start_row_stop},
	{"idle",
	 CONTROLLER_NEEDS_KUBE | CONTROLLER_NEEDS_POLICY | CONTROLLER_NEEDS_USAGE |
		 CONTROLLER_NEEDS_METRICS | CONTROLLER_NEEDS_IDENTITY | CONTROLLER_NEEDS_SYNCED,
	 true, NULL, idle_row_start, idle_row_stop},
	{"claim-templates",
	 CONTROLLER_NEEDS_KUBE | CONTROLLER_NEEDS_POLICY | CONTROLLER_NEEDS_METRICS |
		 CONTROLLER_NEEDS_TEMPLATES,
	 true, NULL, claim_templates_row_start, claim_templates_row_stop},
};

_Static_assert(sizeof(controllers_table) / sizeof(controllers_table[0]) == 11,
	       "CONTROLLERS_COUNT rows, no empty one");

/* ---- the walk's helpers ------------------------------------------------ */

static const char *const need_names[] = {"kube",     "policy",    "usage",
					 "inventory", "pvcs",    "metrics",
					 "identity", "namespace", "synced",
					 "gang-served", "templates"};

unsigned controller_missing(const struct controller *c,
			    const struct controller_deps *deps)
{
	const bool have[] = {
		deps->kube != NULL,      deps->policy != NULL,   deps->usage != NULL,
		deps->inventory != NULL, deps->pvcs != NULL,     deps->metrics != NULL,
		deps->identity != NULL,  deps->namespace != NULL, deps->synced != NULL,
		deps->gang_served != NULL, deps->templates != NULL,
	};
	unsigned missing = 0;

	for (unsigned i = 0; i < sizeof(have) / sizeof(have[0]); i++)
		if ((c->needs & (1u << i)) && !have[i])
			missing |= 1u << i;
	return missing;
}

void controller_needs_text(unsigned needs, char *buf, size_t size)
{
	size_t len = 0;

	buf[0] = '\0';
	for (unsigned i = 0; i < sizeof(need_names) / sizeof(need_names[0]); i++) {
		int n;

		if (!(needs & (1u << i)) || len >= size)
			continue;
		n = snprintf(buf + len, size - len, "%s%s", len ? " " : "",
			     need_names[i]);
		len = n < 0 ? size : len + (size_t)n;
	}
}

int controller_start(const struct controller *c, const struct controller_deps *deps,
		     void **out, struct diag *d)
{
	struct controller_deps mine = *deps;
	unsigned missing = controller_missing(c, deps);

	*out = NULL;
	if (c->on && !c->on(deps))
		return 0;
	if (missing) {
		char what[128];

		controller_needs_text(missing, what, sizeof(what));
		diag_addf(d, "controller %s needs: %s", c->name, what);
		return -1;
	}
	if (!c->leader_only)
		mine.leading = NULL;
	return c->start(&mine, out, d);
}
