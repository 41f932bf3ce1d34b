/*
 * controllers: the table of gpugate serve's background controllers, which
 * the daemon (daemon/daemon.c) walks: it fills one struct controller_deps
 * with what it has, starts every row that is on in table order, and stops
 * them in the reverse order.
 *
 * A row says, as data, what its controller needs of the daemon (needs:
 * CONTROLLER_NEEDS_*; controller_start() refuses to start one whose needs
 * the deps lack) and whether it acts only on the replica that leads (the
 * Lease of several replicas: then it is handed deps->leading, otherwise
 * no leading at all, and it acts on every replica).  Its start takes
 * what it needs from the deps, and nothing else; it returns the running
 * controller, which its stop ends and frees.
 *
 * The controllers, in the order they start (docs/internals.md, "Threads"):
 *
 *   waiter      why a pod waits, as an Event (controllers/waiter.h); on
 *               with --waiting-reasons-after
 *   reclaimer   lent GPUs come back (controllers/reclaimer.h)
 *   health      gpugate's taint and record on a node out for health
 *               (controllers/health.h); off with --no-node-health
 *   class-sync  the GPUClass objects (controllers/class-sync.h); off with
 *               --no-gpuclasses
 *   quota-sync  the GPUQuota objects (controllers/quota-sync.h); off with
 *               --no-gpuquotas
 *   claim-sync  the checkpoint claims (controllers/claim-sync.h)
 *   gang-probe  what the apiserver serves for gang start, into the bits
 *               admission reads (controllers/gang-probe.h)
 *   gang-groups route podgroup's Workload and PodGroup
 *               (controllers/gang-groups.h)
 *   gang-start  route gates of gang start: the gates of a gang's pods come
 *               off together (controllers/gang-start.h)
 *   idle        idle GPUs: utilization from Prometheus, the GPUIdle
 *               warning, the wants of the reclaimer, the busy meter
 *               (controllers/idle.h); always in API mode, judging only
 *               with --prometheus-url
 *   claim-templates  the ResourceClaimTemplates of DRA classes
 *               (controllers/claim-templates.h): every replica reads them
 *               for its admission (the board), the leader writes
 *
 * All but gang-probe write API objects, so they are leader-only; the
 * probe writes nothing (its dry runs store nothing) and every replica's
 * webhook needs its answer.  claim-templates is leader-only and reads
 * while another replica leads (its idle turn).
 */
#ifndef GPUGATE_CONTROLLERS_H
#define GPUGATE_CONTROLLERS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

struct diag;
struct holder;
struct idle_board;
struct inventory;
struct kube_config;
struct metrics;
struct prom_config;
struct pvcs;
struct template_board;
struct usage_store;

/* What the daemon hands the controllers: filled once, borrowed by every
 * controller until it is stopped. */
struct controller_deps {
	const struct kube_config *kube;  /* the API (each makes its client) */
	struct holder *policy;           /* the policy holder */
	struct usage_store *usage;       /* the usage store */
	struct inventory *inventory;     /* nodes and waiting pods */
	struct pvcs *pvcs;               /* the claims the watch saw */
	struct metrics *metrics;         /* where counters are pushed */
	const char *identity;            /* this replica (Events' reportingInstance) */
	const char *namespace;           /* gpugate's own namespace */
	/* What the cluster serves for gang start (GANG_SERVES_* of
	 * policy/gang.h): the probe writes it, admission and gang-groups
	 * read it. */
	_Atomic unsigned *gang_served;
	/* This replica leads (holds the Lease); NULL: it is the only one. */
	bool (*leading)(void *ctx);
	/* The usage was listed from the API. */
	bool (*synced)(void *ctx);
	void *ctx;                       /* of leading and synced */
	/* The switches of gpugate serve. */
	unsigned waiting_after_s;        /* --waiting-reasons-after; 0: off */
	bool no_gpuclasses;              /* --no-gpuclasses */
	bool no_gpuquotas;               /* --no-gpuquotas */
	/* Tests only (daemon_config.round_ms): between the rounds of the
	 * controllers that take it; 0: each its own interval. */
	unsigned round_ms;
	bool no_node_health;             /* --no-node-health */
	/* Idle GPUs (SPEC 10): --prometheus-url and its options (NULL: none),
	 * --idle-interval (ms; 0: 60000), and the board the idle controller
	 * publishes its rounds on, which the reclaimer reads (NULL: no idle
	 * controller, nothing taken back for idleness). */
	const struct prom_config *prom;
	unsigned idle_interval_ms;
	struct idle_board *idle_board;
	/* What the template keeper found, for admission
	 * (usage/template-board.h). */
	struct template_board *templates;
};

/* What a row's start takes from the deps (besides the switches). */
enum controller_needs {
	CONTROLLER_NEEDS_KUBE = 1u << 0,
	CONTROLLER_NEEDS_POLICY = 1u << 1,
	CONTROLLER_NEEDS_USAGE = 1u << 2,
	CONTROLLER_NEEDS_INVENTORY = 1u << 3,
	CONTROLLER_NEEDS_PVCS = 1u << 4,
	CONTROLLER_NEEDS_METRICS = 1u << 5,
	CONTROLLER_NEEDS_IDENTITY = 1u << 6,
	CONTROLLER_NEEDS_NAMESPACE = 1u << 7,
	CONTROLLER_NEEDS_SYNCED = 1u << 8,
	CONTROLLER_NEEDS_GANG_SERVED = 1u << 9,
	CONTROLLER_NEEDS_TEMPLATES = 1u << 10,
};

struct controller {
	const char *name;      /* "reclaimer" */
	unsigned needs;        /* CONTROLLER_NEEDS_*, or-ed */
	bool leader_only;      /* acts only while deps->leading says so */
	/* Whether the switches turn it on; NULL: always. */
	bool (*on)(const struct controller_deps *deps);
	/* Starts it: 0 with *out, or -1 with a message in d. */
	int (*start)(const struct controller_deps *deps, void **out, struct diag *d);
	/* Stops its thread and frees it (a request in flight ends first). */
	void (*stop)(void *c);
};

/* The rows, in start order. */
#define CONTROLLERS_COUNT 11
extern const struct controller controllers_table[CONTROLLERS_COUNT];

/* The needs of c that deps lacks (0: none): which of its pointers are
 * NULL. */
unsigned controller_missing(const struct controller *c,
			    const struct controller_deps *deps);

/* One name per bit of needs, "kube policy usage", into buf (size > 0). */
void controller_needs_text(unsigned needs, char *buf, size_t size);

/*
 * Starts row c with deps: its leading is deps->leading when c is
 * leader_only, else NULL.  0 with *out (NULL when the switches turn it
 * off: nothing runs), or -1 with a message in d: its start failed, or
 * deps lacks what it needs ("controller reclaimer needs: metrics").
 */
int controller_start(const struct controller *c, const struct controller_deps *deps,
		     void **out, struct diag *d);

#endif
