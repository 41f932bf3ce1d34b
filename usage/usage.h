/*
 * usage: who holds which quota right now (SPEC section 5), behind one seam.
 *
 * The admission pipeline asks a usage store to decide a claim (peek at
 * /mutate, reserve at /validate) and to release a deleted workload; the
 * Kubernetes feed (kube/feed.c) tells it what the cluster shows (observe,
 * forget, relists, whether the watch is up); metrics read the sums.  Every
 * call goes through a struct usage_store, whose backend does the work:
 *
 *   usage/memory-backend.c   this process's ledger: reservations, Job gangs,
 *                            running sums, one lock (usage_memory_new)
 *   usage/shared-backend.c   several replicas': what the watch shows in a
 *                            ledger, reservations in one document per
 *                            quota domain, over a store the caller injects
 *                            (usage_shared_new, usage/shared-backend.h;
 *                            gpugate serve's store is kube/shared-io.c)
 *
 * A backend implements struct usage_backend (usage/backend.h), the way
 * git's refs/files-backend.c and refs/packed-backend.c implement its ref
 * storage; the second (quota reservations shared between replicas
 * through the Kubernetes API) sits beside the first without changing a
 * caller.  Operations a backend leaves
 * out (NULL) do nothing, or answer "nothing in use".
 *
 * All functions are thread-safe when the backend's are (the memory
 * backend's are).  Names, not policy indices, key the sums, so a policy
 * reload keeps usage.
 */
#ifndef GPUGATE_USAGE_H
#define GPUGATE_USAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct policy;
struct quota_claim;
struct quota_result;
struct workload;

struct usage_store;

/* The kinds of object the feed lists and watches (kube/feed.h). */
enum usage_kind {
	USAGE_PODS,
	USAGE_JOBS,
	USAGE_CLAIMS, /* resource.k8s.io/v1 ResourceClaims (DRA) */
	USAGE_KINDS,  /* how many */
};

/* What one object holds, as the API shows it (the charge rule's answer). */
struct usage_item {
	const char *uid;
	enum usage_kind kind;
	const char *namespace;
	const char *name;
	const char *tenant;        /* from the namespace, by the policy */
	const char *flavor;        /* from the resources and node selector */
	int64_t per_pod;           /* units one pod holds */
	int64_t slots;             /* a Job's gang (pods); 1 for a pod */
	int64_t units;             /* per_pod x slots: what it holds while active */
	bool active;               /* false: terminal pod, suspended or finished Job */
	const char *owner_job_uid; /* a pod that may ride on its Job's gang */
	/* DRA (policy/charge.h, usage_claim_ride()): a claim that may ride on
	 * its pod, that pod's uid; a pod's claim for its extended resources
	 * (its status names it; NULL: not yet), and the claims it names
	 * itself, each between two \x1f ("\x1fa\x1fb\x1f"; NULL: none). */
	const char *owner_pod_uid;
	const char *extended_claim;
	const char *named_claims;
	int64_t generation;        /* metadata.generation */
	/* What a reclaim reads (docs/design/reclaim.md); 0 / false when the
	 * object does not say. */
	int32_t priority;          /* a Pod's spec.priority, a Job's template's */
	int64_t created_ms;        /* metadata.creationTimestamp, ms since epoch */
	bool preemptible;          /* label gpugate.io/preemptible "true" */
	int64_t signalled_ms;      /* annotation gpugate.io/checkpoint-requested */
	int64_t done_ms;           /* annotation gpugate.io/checkpoint-done */
};

/* A workload that holds quota now, as the watch shows it: a Job's gang, or
 * a pod that rides on no gang.  Strings live for the call only. */
struct usage_workload {
	const char *uid;
	enum usage_kind kind;      /* USAGE_JOBS or USAGE_PODS (claims are left out) */
	const char *namespace;
	const char *name;
	const char *tenant;
	const char *flavor;
	int64_t units;             /* what it holds now */
	int32_t priority;          /* a Job: or its riding pods', the highest */
	int64_t created_ms;
	bool preemptible;
	int64_t signalled_ms;      /* the workload's own request, 0: none */
	/* The workload reported its checkpoint: its own annotation, or (a Job)
	 * that of every pod riding on its gang, the latest of them; 0: not. */
	int64_t done_ms;
	size_t pods;               /* a Job: the pods riding on its gang */
	/* A pod that names a Job (its gang does not cover it: the Job is
	 * suspended, finished, or the pod is beyond the gang). */
	bool owned;
};
typedef void (*usage_workload_fn)(void *ctx, const struct usage_workload *w);

/* ---- Job gangs: the one rule ------------------------------------------- */

/* What one pod of a gang holds, or what a pod asks: the rule compares these. */
struct usage_holding {
	const char *namespace;
	const char *tenant;
	const char *flavor;
	int64_t per_pod;
};

/*
 * Whether a pod holding `pod` fits the gang of a Job holding `job`: the
 * same namespace, tenant, flavor and per-pod units (then it is one of the
 * Job's pods as far as quota goes; the Job holds max(slots, riders) x
 * per_pod for all of them).  The one rule for every backend.
 */
bool usage_gang_fits(const struct usage_holding *job, const struct usage_holding *pod);

/*
 * Whether a new pod holding `pod` rides on the gang (is charged nothing
 * of its own): it fits, and the gang has a free slot (riders, the pods
 * riding now, reserved or shown, below slots).  Memory and shared
 * backends decide a Job's new pod by this function and nothing else.
 */
bool usage_gang_takes(const struct usage_holding *job, int64_t slots,
		      int64_t riders, const struct usage_holding *pod);

/* ---- DRA claims that ride on their pod: the one rule ------------------ */

/*
 * What a claim holding `claim` (per_pod: its devices) holds beside the pod
 * holding `pod` whose claim it is (policy/charge.h; pod NULL: not known,
 * or the claim is not the pod's chosen one): the devices the pod's own
 * units do not cover, when both are of one namespace, tenant and flavor;
 * else all of them.  Memory and shared backends charge a claim by this
 * function and nothing else.
 */
int64_t usage_claim_ride(const struct usage_holding *pod,
			 const struct usage_holding *claim);

/* A Job's gang as a store knows it (usage_gang()).  Strings are copies. */
#define USAGE_GANG_NAME_MAX 253
struct usage_gang {
	char namespace[USAGE_GANG_NAME_MAX + 1];
	char tenant[USAGE_GANG_NAME_MAX + 1];
	char flavor[USAGE_GANG_NAME_MAX + 1];
	int64_t per_pod;
	int64_t slots;
	int64_t riders;  /* pods riding on it, reserved or shown */
};

/* The gang of Job job_uid when the store holds the Job (true). */
bool usage_gang(struct usage_store *u, const char *job_uid, struct usage_gang *out);

/* The holding of g (pointers into g). */
void usage_gang_holding(const struct usage_gang *g, struct usage_holding *out);

/* ---- admission ---------------------------------------------------------- */

/*
 * Answers a claim: a peek when reserve is false (/mutate, dry runs); else
 * decides and holds the units at once, so that concurrent requests never
 * over-admit.  force holds the units even when over quota (warn and audit
 * modes admit anyway).  u NULL: nothing in use.
 *
 * A tenant with reclaimWithinCohort LowerPriority whose request takes
 * lent-out units is also weighed against the store's workloads
 * (usage_each_workload()): QUOTA_RECLAIM_SHORT, and nothing held, when the
 * borrowers of priority below c->priority cannot give them back.
 */
void usage_decide(struct usage_store *u, const struct policy *p,
		  const struct workload *wl, const struct quota_claim *claim,
		  bool reserve, bool force, struct quota_result *out);

/* A DELETE at /validate (not a dry run).  u may be NULL. */
void usage_release(struct usage_store *u, const struct policy *p,
		   const struct workload *wl);

/* ---- what the cluster shows ------------------------------------------- */

/*
 * ADDED/MODIFIED (or a listed object), active or not: an object shown
 * holding nothing (a terminal pod, a finished or suspended Job) releases
 * what it held, but an older generation than the one reserved (a Job
 * resumed at /validate that the watch still shows suspended) leaves the
 * reservation standing.
 */
void usage_observe(struct usage_store *u, const struct usage_item *it);
/* DELETED. */
void usage_forget(struct usage_store *u, const char *uid);

/*
 * A relist of one kind (pods, jobs or claims): observations not repeated
 * between begin and end were deleted while nobody watched, and are
 * forgotten.  Reservations not yet observed are kept (they expire on their
 * own).
 */
void usage_relist_begin(struct usage_store *u, enum usage_kind kind);
void usage_relist_end(struct usage_store *u, enum usage_kind kind);

/*
 * The API watch is up (true) or down.  Only a watch that is up can tell a
 * create that failed after /validate from one that is slow to show, so a
 * reservation expires once the watch has been up for the whole TTL since
 * the reservation was made: while it is down nothing expires, and when it
 * comes back every pending reservation has a whole TTL again.  A new store
 * counts as up; the feed says when it is not.
 */
void usage_set_watching(struct usage_store *u, bool up);

/* Drops reservations whose object never showed up (see above); returns how
 * many.  Called about once a second. */
size_t usage_expire(struct usage_store *u);

/* ---- reading ------------------------------------------------------------ */

int64_t usage_used(struct usage_store *u, const char *tenant,
		   const char *flavor);
/*
 * The quota arithmetic's view (policy/quota.h) of store u under policy p,
 * by names: *names holds both and must outlive the view.  u NULL: nothing
 * in use.
 */
struct usage_names {
	const struct policy *p;
	struct usage_store *u;
};
struct usage_view;
void usage_names_view(struct usage_names *names, const struct policy *p,
		      struct usage_store *u, struct usage_view *out);

/* Workloads holding quota. */
size_t usage_entries(struct usage_store *u);
typedef void (*usage_sum_fn)(void *ctx, const char *tenant, const char *flavor,
			     int64_t used);
void usage_foreach(struct usage_store *u, usage_sum_fn fn, void *ctx);

/*
 * Every observed workload (not a reservation, not a DRA claim) that holds
 * units now, under the store's lock: fn must not call the store.  What the
 * reclaim controller chooses victims from.  A backend without it lists
 * nothing.
 */
void usage_each_workload(struct usage_store *u, usage_workload_fn fn, void *ctx);

/*
 * The reclaim candidate (policy/reclaim.h) workload w is, its tenant being
 * policy tenant `tenant`; false when it is none.  The one rule for the
 * reclaimer and for reclaimWithinCohort LowerPriority at admission
 * (usage_decide()).  out->uid is w->uid: it lives as long as w.
 */
struct reclaim_candidate;
bool usage_reclaim_candidate(const struct usage_workload *w, unsigned tenant,
			     struct reclaim_candidate *out);

/* The backend's name ("memory"), for logs. */
const char *usage_backend_name(const struct usage_store *u);

/* NULL is a no-op. */
void usage_free(struct usage_store *u);

/* ---- the memory backend ------------------------------------------------- */

/*
 * Every workload that holds quota is one entry, keyed by its uid: a bare
 * Pod holds its units, a Job holds slots x per-pod units for all its pods,
 * and the pods of a Job the store knows ride on its gang (are not charged
 * again) when they are in its namespace and hold its flavor and per-pod
 * units; the Job then holds max(slots, riders) x per-pod units, so that
 * pods beyond the gang (a replacement while the old pod terminates, a
 * lowered parallelism, a forged ownerReference) are charged.  Usage per
 * (tenant, flavor) is kept as a running sum, so a decision costs O(cohort
 * size), not O(workloads).
 *
 * Entries come from two places: reservations at /validate (the quota
 * arithmetic and the reservation happen under one lock) and observations
 * from the feed (a reservation becomes an observation when its object
 * shows up, and expires if it never does).  Without an API (embedded mode)
 * reservations never expire and DELETE admissions release them.
 */
struct usage_memory_config {
	/* API mode: reservations expire unless observed within this many
	 * milliseconds; DELETE admissions are left to the watch.  0: embedded
	 * mode. */
	uint64_t reservation_ttl_ms;
	/* API mode: a reservation whose name (kind, namespace, name) the
	 * watch shows under another uid this long after it was made is
	 * dropped: the apiserver refused its create (AlreadyExists), as the
	 * shared store judges it.  0: 5000. */
	uint64_t grace_ms;
	/* Milliseconds on a monotonic clock; NULL: CLOCK_MONOTONIC. */
	uint64_t (*now_ms)(void);
	/*
	 * The fence (usage/leader-backend.h): asked under the ledger's lock
	 * before a decision that reserves; false answers it
	 * QUOTA_UNAVAILABLE with the reason it wrote into why (one line),
	 * nothing held.  It must not call the store.  NULL: always true.
	 */
	bool (*may_reserve)(void *ctx, char *why, size_t size);
	void *fence_ctx;
};

/* cfg may be NULL (embedded, the real clock).  NULL when out of memory. */
struct usage_store *usage_memory_new(const struct usage_memory_config *cfg);

#endif
