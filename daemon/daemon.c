/*
 * daemon: load the policy and certificate, serve HTTPS, reload both when
 * they change on disk, stop gracefully (daemon/daemon.h).
 *
 * daemon_run() blocks the signals in every thread and takes them on the
 * calling thread with sigtimedwait(), which also ticks once a second to
 * look at the files.
 */
#include "daemon/daemon.h"

#include "base/diag.h"
#include "base/file.h"
#include "base/log.h"
#include "base/strbuf.h"
#include "certs/certs.h"
#include "codec/jsonmem.h"
#include "daemon/quota-leader.h"
#include "http/server.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/feed.h"
#include "kube/lease.h"
#include "kube/peer.h"
#include "kube/shared-io.h"
#include "policy/idle.h"
#include "policy/policy.h"
#include "usage/shared-backend.h"
#include "usage/template-board.h"
#include "usage/usage.h"
#include "webhook/charge.h"
#include "controllers/controllers.h"
#include "controllers/idle-board.h"
#include "kube/prom.h"
#include "webhook/handler.h"
#include "webhook/holder.h"
#include "metrics/metrics.h"
#include "webhook/dra-facts.h"
#include "webhook/node-facts.h"
#include "webhook/parents.h"
#include "webhook/policy-review.h"
#include "report/pool-report.h"
#include "metrics/process.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct watched {
	const char *path;
	struct stat st;
	bool known;
};

struct daemon {
	struct daemon_config cfg;
	char host[64];
	struct kube_config kube;
	bool have_api;
	struct usage_store *usage;
	struct inventory *inventory;      /* API mode only */
	struct priorities *priorities;    /* API mode only: PriorityClasses */
	struct pvcs *pvcs;                /* API mode only: the claims */
	struct parents *parents;          /* API mode only: what a scale is of */
	struct handler_parents parent_source;
	struct charge_source charge;      /* the feed's charge rule's source */
	struct meter *meter;              /* API mode only */
	struct feed *feed;
	/* API mode: the controllers running, by row of controllers_table
	 * (NULL: not started, or switched off). */
	void *controllers[CONTROLLERS_COUNT];
	/* Idle GPUs: --prometheus-url and its options (the strings are
	 * cfg's), and the board of the idle controller's rounds (API mode). */
	struct prom_config prom;
	struct idle_board *idle_board;
	struct kube_shared_io *shared_io; /* shared usage only */
	struct lease *lease;              /* shared usage only */
	/* Memory usage with the API: the Lease that lets one replica decide
	 * quota, and a watch on the shared replicas' Lease (memory_gate). */
	struct lease *memory_lease, *shared_watch;
	struct handler_quota_gate quota_gate;
	/* Leader usage (--usage-store leader): the Leases, the gate, the
	 * peers (daemon/quota-leader.h). */
	struct quota_leader *quota_leader;
	atomic_int gate_state;            /* what memory_gate last logged */
	char identity[254];
	char namespace[64];
	/* Gang start: what the cluster serves (the gang-probe controller
	 * writes it, the webhook reads it) and who gpugate is to the
	 * apiserver ("": not known). */
	_Atomic unsigned gang_served;
	char self_user[256];
	/* What the template keeper found (claim templates of DRA classes):
	 * its controller writes, admission reads. */
	struct template_board *templates;
	struct timespec last_prune;
	struct watched policy_file, cert_file, key_file;
	struct holder *holder;
	struct metrics *metrics;
	struct server *server;
	struct handler handler;
	time_t cert_not_after;
	char cert_subject[256];
};

/* True when the file looks different from last time (a Secret or ConfigMap
 * volume update swaps a symlink: stat() follows it to a new inode). */
static bool changed(struct watched *w)
{
	struct stat st;
	bool diff;

	if (stat(w->path, &st) < 0)
		return false; /* gone for a moment during a swap: wait */
	diff = !w->known || st.st_ino != w->st.st_ino || st.st_dev != w->st.st_dev ||
	       st.st_size != w->st.st_size ||
	       st.st_mtim.tv_sec != w->st.st_mtim.tv_sec ||
	       st.st_mtim.tv_nsec != w->st.st_mtim.tv_nsec;
	w->st = st;
	w->known = true;
	return diff;
}

/*
 * Who gpugate is to the apiserver (a SelfSubjectReview, which every
 * authenticated user may create): only gpugate takes its gang gate off a
 * pod (policy/decide-gang.c) and writes its claim templates
 * (policy/decide-dra.c).  Not known (logged): only a ServiceAccount of
 * gpugate's namespace may.
 */
static void whoami(struct daemon *dm)
{
	static const char review[] =
		"{\"apiVersion\":\"authentication.k8s.io/v1\","
		"\"kind\":\"SelfSubjectReview\"}";
	json_t *body = json_loads(review, 0, NULL), *out = NULL;
	struct kube *k;
	struct diag d;
	const char *u;
	int st = -1;

	diag_init(&d);
	k = kube_new(&dm->kube, &d);
	if (k && body)
		st = kube_create(k, "/apis/authentication.k8s.io/v1/selfsubjectreviews",
				 body, 5000, &out, &d);
	u = json_string_value(json_object_get(
		json_object_get(json_object_get(out, "status"), "userInfo"), "username"));
	if (u && strlen(u) < sizeof(dm->self_user)) {
		snprintf(dm->self_user, sizeof(dm->self_user), "%s", u);
		log_event(LOG_INFO, "msg=\"gpugate acts as\" user=\"%s\"", u);
	} else {
		log_event(LOG_WARN, "msg=\"who gpugate is not known\" status=%d "
				    "detail=\"only ServiceAccounts of gpugate's namespace "
				    "may release gang gates and write gpugate's "
				    "claim templates\"", st);
	}
	json_decref(out);
	json_decref(body);
	kube_free(k);
}

/* ---- the certificate pair ---------------------------------------------- */

struct pem_pair {
	char *cert, *key;
	size_t cert_len, key_len;
};

static void pair_release(struct pem_pair *pp)
{
	free(pp->cert);
	file_free_secret(pp->key, pp->key_len);
	memset(pp, 0, sizeof(*pp));
}

/*
 * Reads the pair once and checks those very bytes.  A rotation in the
 * middle (a Secret volume flips both files at once) yields a mismatched
 * pair, which is refused: the next tick reads the new pair whole.
 */
static int load_pair(struct daemon *dm, struct pem_pair *pp, struct diag *d)
{
	struct certs_info info;

	memset(pp, 0, sizeof(*pp));
	if (file_read(dm->cfg.cert_path, CERTS_MAX_FILE_BYTES, 0, &pp->cert,
		      &pp->cert_len, d) < 0 ||
	    file_read(dm->cfg.key_path, CERTS_MAX_FILE_BYTES, FILE_SECRET, &pp->key,
		      &pp->key_len, d) < 0 ||
	    certs_check_pem(dm->cfg.cert_path, pp->cert, dm->cfg.key_path, pp->key,
			    time(NULL), &info, d) < 0) {
		pair_release(pp);
		return -1;
	}
	dm->cert_not_after = info.not_after;
	snprintf(dm->cert_subject, sizeof(dm->cert_subject), "%s", info.subject);
	return 0;
}

/* ---- reloads ------------------------------------------------------------ */

static void reload_policy(struct daemon *dm)
{
	struct policy *p = NULL;
	struct diag d;

	diag_init(&d);
	if (policy_load(dm->cfg.policy_path, &p, &d) < 0) {
		metrics_policy_reload(dm->metrics, false);
		log_diag(LOG_ERROR, "policy reload refused, keeping the old policy", &d);
		return;
	}
	holder_swap(dm->holder, p);
	metrics_policy_reload(dm->metrics, true);
	log_event(LOG_INFO, "msg=\"policy reloaded\" file=%s flavors=%zu classes=%zu "
			    "tenants=%zu",
		  dm->cfg.policy_path, policy_flavor_count(p), policy_class_count(p),
		  policy_tenant_count(p));
}

static void reload_cert(struct daemon *dm)
{
	struct pem_pair pp;
	struct diag d;

	diag_init(&d);
	if (load_pair(dm, &pp, &d) < 0 ||
	    server_set_certificate(dm->server, pp.cert, pp.key, &d) < 0) {
		metrics_cert_reload(dm->metrics, false);
		log_diag(LOG_WARN, "certificate reload refused, keeping the old one", &d);
	} else {
		if (dm->quota_leader &&
		    quota_leader_set_keys(dm->quota_leader, pp.cert, pp.cert_len, pp.key,
					  pp.key_len, &d) < 0)
			log_diag(LOG_WARN, "the replicas' peer keys not reloaded", &d);
		metrics_cert_reload(dm->metrics, true);
		log_event(LOG_INFO, "msg=\"certificate reloaded\" subject=\"%s\" "
				    "not_after=%lld",
			  dm->cert_subject, (long long)dm->cert_not_after);
	}
	pair_release(&pp);
}

void daemon_reload(struct daemon *dm)
{
	reload_policy(dm);
	reload_cert(dm);
}

/* The store knows whether the watch is up: reservations do not expire
 * while it is down (usage_set_watching). */
static void expire(struct daemon *dm)
{
	if (dm->feed && !dm->lease) {
		size_t n = usage_expire(dm->usage);

		if (n)
			log_event(LOG_INFO, "msg=\"reservations expired\" count=%zu", n);
	}
}

/* Shared usage: the leader cleans the domains' documents, every 2 s. */
#define PRUNE_EVERY_MS 2000

static void prune(struct daemon *dm)
{
	struct holder_ref *ref;
	const struct policy *p;
	struct timespec now;
	size_t removed, failed;
	char err[300];

	if (!dm->lease)
		return;
	usage_expire(dm->usage); /* forgets old uids; no I/O */
	clock_gettime(CLOCK_MONOTONIC, &now);
	if ((now.tv_sec - dm->last_prune.tv_sec) * 1000 +
		    (now.tv_nsec - dm->last_prune.tv_nsec) / 1000000 <
	    PRUNE_EVERY_MS)
		return;
	dm->last_prune = now;
	if (!lease_leading(dm->lease))
		return;
	p = holder_acquire(dm->holder, &ref);
	if (p) {
		removed = usage_shared_prune(dm->usage, p, &failed, err, sizeof(err));
		if (removed)
			log_event(LOG_INFO, "msg=\"reservations pruned\" count=%zu",
				  removed);
		if (failed) {
			char q[400];

			log_event(LOG_WARN, "msg=\"reservations not pruned\" domains=%zu "
					    "error=\"%s\"",
				  failed, log_quote(err, q, sizeof(q)));
		}
	}
	holder_release(ref);
}

void daemon_tick(struct daemon *dm)
{
	expire(dm);
	prune(dm);
	if (dm->quota_leader)
		quota_leader_tick(dm->quota_leader);
	if (changed(&dm->policy_file))
		reload_policy(dm);
	/* Either file of the pair (both stat()s run, to keep both snapshots
	 * current): a half-rotated pair is refused and the next change
	 * retries. */
	{
		bool cert_changed = changed(&dm->cert_file);
		bool key_changed = changed(&dm->key_file);

		if (cert_changed || key_changed)
			reload_cert(dm);
	}
}

/* ---- what the server asks ----------------------------------------------- */

static bool ready(const struct daemon *dm, struct strbuf *why)
{
	bool ok = true;

	if (time(NULL) > dm->cert_not_after) {
		strbuf_addf(why, "certificate expired\n");
		ok = false;
	}
	if (dm->feed && !feed_synced(dm->feed)) {
		strbuf_addf(why, "quota usage not synced from the Kubernetes API yet\n");
		ok = false;
	}
	/* --usage-store memory: whether this replica decides quota is known
	 * once both Leases were read (not that it holds one: a rolling update
	 * would wait forever for the old pod to let go). */
	if (dm->quota_leader && !quota_leader_ready(dm->quota_leader, why))
		ok = false;
	if (dm->memory_lease &&
	    (!lease_tried(dm->memory_lease) || !lease_tried(dm->shared_watch))) {
		strbuf_addf(why, "Lease %s/gpugate-memory not read yet\n", dm->namespace);
		ok = false;
	}
	return ok;
}

/* The routes besides /mutate and /validate (webhook/handler.h). */
static void route_healthz(void *ctx, const struct http_request *req,
			  struct http_reply *out)
{
	(void)ctx;
	(void)req;
	http_reply_text(out, 200, "ok\n");
}

static void route_readyz(void *ctx, const struct http_request *req,
			 struct http_reply *out)
{
	struct strbuf why;
	bool ok;

	(void)req;
	strbuf_init(&why, 8192);
	ok = ready(ctx, &why);
	if (ok)
		strbuf_addf(&why, "ok\n");
	out->status = ok ? 200 : 503;
	out->content_type = "text/plain; charset=utf-8";
	out->body = strbuf_take(&why, &out->len);
}

static bool memory_gate(void *ctx, char *why, size_t size);

static void route_metrics(void *ctx, const struct http_request *req,
			  struct http_reply *out)
{
	struct daemon *dm = ctx;
	uint64_t workers[SERVER_MAX_THREADS];
	struct procstat ps;
	struct strbuf why;
	struct holder_ref *ref;
	struct metrics_state st = {
		.policy = holder_acquire(dm->holder, &ref),
		.usage = dm->usage,
		.inventory = dm->inventory,
		.meter = dm->meter,
		.api = dm->feed != NULL,
		.api_connected = dm->feed && feed_connected(dm->feed),
		.api_synced = dm->feed && feed_synced(dm->feed),
		.cert_not_after = (long long)dm->cert_not_after,
		.worker_requests = workers,
	};
	int rc;

	(void)req;
	strbuf_init(&why, 8192);
	st.ready = ready(dm, &why);
	strbuf_release(&why);
	if (process_read(&ps) == 0)
		st.process = &ps;
	if (dm->server) {
		st.workers = server_worker_count(dm->server);
		for (unsigned i = 0; i < st.workers; i++)
			workers[i] = server_worker_requests(dm->server, i);
	}
	/* gpugate_quota_leader in every mode, so that one alert (no replica
	 * decides) reads the same whatever the store. */
	st.quota_leader = true;
	if (dm->memory_lease) {
		char gate_why[400];

		st.quota_deciding = memory_gate(dm, gate_why, sizeof(gate_why));
	} else {
		st.quota_deciding = !dm->quota_leader; /* shared, embedded */
	}
	if (dm->quota_leader) {
		struct quota_leader_stats qs;

		quota_leader_stats(dm->quota_leader, &qs);
		st.quota_deciding = qs.deciding;
		st.quota_forwards = true;
		st.forwards_answered = qs.answered;
		st.forwards_failed = qs.failed;
		st.forward_seconds_sum = qs.answered_seconds;
	}
	rc = metrics_render(dm->metrics, &st, &out->body, &out->len);
	holder_release(ref);
	if (rc < 0) {
		http_reply_text(out, 500, "metrics unavailable\n");
		return;
	}
	out->status = 200;
	out->content_type = "text/plain; version=0.0.4; charset=utf-8";
}

static bool is_leading(void *ctx)
{
	struct daemon *dm = ctx;

	if (dm->quota_leader)
		return quota_leader_leading(dm->quota_leader);
	return lease_leading(dm->lease ? dm->lease : dm->memory_lease);
}

static bool is_synced(void *ctx)
{
	struct daemon *dm = ctx;

	return dm->feed && feed_synced(dm->feed);
}

/*
 * --usage-store memory with the API: a replica's ledger is its own, so two
 * replicas that both decided would hand out the same last GPUs.  Only the
 * holder of Lease gpugate-memory decides, and none while replicas of the
 * shared store hold theirs (gpugate-leader) in the same namespace.  Said
 * in the log once each time the answer changes.
 */
enum gate_state { GATE_UNSAID, GATE_OPEN, GATE_SHARED, GATE_OTHER, GATE_NOT_HELD };

static bool memory_gate(void *ctx, char *why, size_t size)
{
	struct daemon *dm = ctx;
	enum gate_state st;
	char who[254], err[300], q[400];

	if (lease_holder(dm->shared_watch, who, sizeof(who))) {
		st = GATE_SHARED;
		snprintf(why, size, "replica %.60s of --usage-store shared holds Lease "
				    "%.50s/gpugate-leader, and this one keeps usage in memory",
			 who, dm->namespace);
	} else if (lease_leading(dm->memory_lease)) {
		st = GATE_OPEN;
	} else if (lease_holder(dm->memory_lease, who, sizeof(who))) {
		st = GATE_OTHER;
		snprintf(why, size, "replica %.60s holds Lease %.50s/gpugate-memory: with "
				    "--usage-store memory one replica decides quota",
			 who, dm->namespace);
	} else {
		st = GATE_NOT_HELD;
		lease_error(dm->memory_lease, err, sizeof(err));
		snprintf(why, size, "this replica does not hold Lease %.50s/gpugate-memory%s%.80s",
			 dm->namespace, err[0] ? ": " : " yet", err);
	}
	if (atomic_exchange(&dm->gate_state, (int)st) != (int)st) {
		if (st == GATE_OPEN)
			log_event(LOG_INFO, "msg=\"quota decisions on\" usage_store=memory "
					    "lease=%s/gpugate-memory", dm->namespace);
		else
			log_event(LOG_WARN, "msg=\"quota decisions refused\" usage_store=memory "
					    "reason=\"%s\"", log_quote(why, q, sizeof(q)));
	}
	return st == GATE_OPEN;
}

/* POST /peer/decide on a replica that does not keep usage with
 * --usage-store leader. */
static void route_no_peer(void *ctx, const struct http_request *req,
			  struct http_reply *out)
{
	(void)ctx;
	(void)req;
	http_reply_text(out, 404, "this replica does not run --usage-store leader\n");
}

/* The pool at a glance (report/pool-report.h): JSON. */
static void route_pool(void *ctx, const struct http_request *req,
		       struct http_reply *out)
{
	struct daemon *dm = ctx;
	struct holder_ref *ref;
	const struct policy *p = holder_acquire(dm->holder, &ref);
	struct idle_util *utils = NULL;
	size_t nu = 0;
	struct timespec ts;
	json_t *r = NULL;
	char *text;

	/* Idle GPUs: each pod's last hour, as the idle controller's latest
	 * round read it (none, or no board: every busyShare null). */
	if (dm->idle_board && idle_board_utils(dm->idle_board, &utils, &nu) < 0) {
		utils = NULL;
		nu = 0;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	if (p)
		r = pool_report_idle(p, dm->inventory, dm->usage,
				     (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000,
				     utils, nu);
	if (utils)
		idle_board_utils_free(utils, nu);
	text = r ? json_dumps(r, JSON_COMPACT) : NULL;
	char *body = text ? strdup(text) : NULL; /* the server free()s it */

	(void)req;
	jsonmem_free(text);
	json_decref(r);
	holder_release(ref);
	if (!body) {
		http_reply_text(out, 500, "pool report unavailable\n");
		return;
	}
	out->status = 200;
	out->content_type = "application/json";
	out->len = strlen(body);
	out->body = body;
}

/* ---- start and stop ---------------------------------------------------- */

/* Where usage comes from: a kubeconfig, the service account, or nowhere. */
static int open_api(struct daemon *dm, struct diag *d)
{
	if (dm->cfg.api == DAEMON_API_KUBECONFIG) {
		if (kube_config_load(dm->cfg.kubeconfig, &dm->kube, d) < 0)
			return -1;
		dm->have_api = true;
	} else if (dm->cfg.api == DAEMON_API_AUTO &&
		   getenv("KUBERNETES_SERVICE_HOST")) {
		if (kube_config_in_cluster(NULL, &dm->kube, d) < 0) {
			diag_addf(d, "gpugate serve: cannot use the in-cluster service "
				     "account (use --embedded to run without the API)");
			return -1;
		}
		dm->have_api = true;
	}
	return 0;
}

static void on_leading(void *ctx, bool leading)
{
	(void)ctx;
	(void)leading; /* kube/lease.c logs it; prune() asks lease_leading() */
}

/* This replica's name: --identity, else the host name. */
static void set_identity(struct daemon *dm)
{
	if (dm->cfg.identity && dm->cfg.identity[0])
		snprintf(dm->identity, sizeof(dm->identity), "%s", dm->cfg.identity);
	else if (gethostname(dm->identity, sizeof(dm->identity) - 1) < 0 ||
		 !dm->identity[0])
		snprintf(dm->identity, sizeof(dm->identity), "gpugate-%ld",
			 (long)getpid());
}

/* Shared usage: the ConfigMaps, the backend, the Lease. */
static int start_shared(struct daemon *dm, unsigned ttl_s, struct diag *d)
{
	const char *ns = dm->cfg.namespace && dm->cfg.namespace[0] ? dm->cfg.namespace
								    : "gpugate";
	struct lease_config lc = {0};

	snprintf(dm->namespace, sizeof(dm->namespace), "%s", ns);
	dm->shared_io = kube_shared_io_new(&dm->kube, dm->namespace, 0, d);
	if (!dm->shared_io)
		return -1;
	dm->usage = usage_shared_new(&(struct usage_shared_config){
		.io = {.transact = kube_shared_io_transact, .io = dm->shared_io},
		.replica = dm->identity,
		.reservation_ttl_ms = (uint64_t)ttl_s * 1000u,
	});
	if (!dm->usage) {
		diag_addf(d, "gpugate serve: out of memory");
		return -1;
	}
	lc.kube = &dm->kube;
	lc.namespace = dm->namespace;
	lc.name = "gpugate-leader";
	lc.identity = dm->identity;
	lc.on_change = on_leading;
	if (lease_start(&lc, &dm->lease, d) < 0)
		return -1;
	log_event(LOG_INFO, "msg=\"shared usage\" namespace=%s identity=%s "
			    "lease=%s/gpugate-leader",
		  dm->namespace, dm->identity, dm->namespace);
	return 0;
}

/* Memory usage with the API: the Leases of memory_gate(). */
static int start_memory_gate(struct daemon *dm, struct diag *d)
{
	const char *ns = dm->cfg.namespace && dm->cfg.namespace[0] ? dm->cfg.namespace
								    : "gpugate";
	struct lease_config lc = {.kube = &dm->kube, .identity = dm->identity,
				  .on_change = on_leading};

	snprintf(dm->namespace, sizeof(dm->namespace), "%s", ns);
	lc.namespace = dm->namespace;
	lc.name = "gpugate-memory";
	if (lease_start(&lc, &dm->memory_lease, d) < 0)
		return -1;
	lc.name = "gpugate-leader";
	lc.observe_only = true;
	lc.on_change = NULL;
	if (lease_start(&lc, &dm->shared_watch, d) < 0)
		return -1;
	dm->quota_gate = (struct handler_quota_gate){memory_gate, dm};
	dm->handler.quota_gate = &dm->quota_gate;
	log_event(LOG_INFO, "msg=\"memory usage\" namespace=%s identity=%s "
			    "lease=%s/gpugate-memory detail=\"only the holder decides "
			    "quota\"",
		  dm->namespace, dm->identity, dm->namespace);
	return 0;
}

/* Leader usage: the store now; the Leases once the port is known
 * (start_leader_leases()), since they publish it. */
static int start_leader(struct daemon *dm, unsigned ttl_s, struct diag *d)
{
	const char *ns = dm->cfg.namespace && dm->cfg.namespace[0] ? dm->cfg.namespace
								    : "gpugate";

	snprintf(dm->namespace, sizeof(dm->namespace), "%s", ns);
	dm->quota_leader = quota_leader_new(
		&(struct quota_leader_config){
			.kube = &dm->kube, .namespace = dm->namespace,
			.identity = dm->identity, .policy = dm->holder,
			.reservation_ttl_ms = (uint64_t)ttl_s * 1000u},
		d);
	if (!dm->quota_leader)
		return -1;
	dm->usage = quota_leader_usage(dm->quota_leader);
	return 0;
}

/* Where the other replicas reach this one: --peer-address, else $POD_IP,
 * else the listen host unless a wildcard, else 127.0.0.1; the bound port
 * when none is given. */
static void peer_address(const struct daemon *dm, char *buf, size_t size)
{
	const char *ip = getenv("POD_IP");
	const char *host = dm->host;
	bool v6;

	if (dm->cfg.peer_address && dm->cfg.peer_address[0]) {
		snprintf(buf, size, "%s", dm->cfg.peer_address);
		return;
	}
	if (ip && ip[0])
		host = ip;
	else if (strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0 || !host[0])
		host = "127.0.0.1";
	v6 = strchr(host, ':') != NULL;
	snprintf(buf, size, "%s%s%s:%u", v6 ? "[" : "", host, v6 ? "]" : "",
		 server_port(dm->server));
}

static int start_leader_leases(struct daemon *dm, struct diag *d)
{
	char address[LEASE_ADDRESS_MAX + 1];

	peer_address(dm, address, sizeof(address));
	return quota_leader_start(dm->quota_leader, address, d);
}

/*
 * The controllers (controllers/controllers.h): the deps once, then the
 * table's rows in order.  With several replicas (a Lease) the leader-only
 * rows act on the leader only.
 */
static int start_controllers(struct daemon *dm, struct diag *d)
{
	const struct controller_deps deps = {
		.kube = &dm->kube, .policy = dm->holder, .usage = dm->usage,
		.inventory = dm->inventory, .pvcs = dm->pvcs, .metrics = dm->metrics,
		.identity = dm->identity, .namespace = dm->namespace,
		.gang_served = &dm->gang_served,
		.leading = dm->lease || dm->memory_lease || dm->quota_leader ? is_leading
									   : NULL,
		.synced = is_synced, .ctx = dm,
		.waiting_after_s = dm->cfg.waiting_after_s,
		.no_gpuclasses = dm->cfg.no_gpuclasses,
		.no_gpuquotas = dm->cfg.no_gpuquotas,
		.round_ms = dm->cfg.round_ms,
		.no_node_health = dm->cfg.no_node_health,
		.prom = dm->cfg.prometheus_url ? &dm->prom : NULL,
		/* The test-only round_ms shortens the idle rounds too. */
		.idle_interval_ms = dm->cfg.round_ms
					    ? dm->cfg.round_ms
					    : 1000u * (dm->cfg.idle_interval_s
							       ? dm->cfg.idle_interval_s
							       : DAEMON_IDLE_INTERVAL_S_DEFAULT),
		.idle_board = dm->idle_board,
		.templates = dm->templates,
	};

	for (size_t i = 0; i < CONTROLLERS_COUNT; i++)
		if (controller_start(&controllers_table[i], &deps, &dm->controllers[i],
				     d) < 0)
			return -1;
	return 0;
}

/* In the reverse order of their start. */
static void stop_controllers(struct daemon *dm)
{
	for (size_t i = CONTROLLERS_COUNT; i-- > 0;)
		if (dm->controllers[i]) {
			controllers_table[i].stop(dm->controllers[i]);
			dm->controllers[i] = NULL;
		}
}

/* One of the files of --prometheus-*, read now so that a wrong path stops
 * the start rather than every round: 0, or -1 with the flag in d. */
static int check_prom_file(const char *flag, const char *path, bool pem,
			   struct diag *d)
{
	struct diag fd;
	char first[512];
	char *buf = NULL;
	size_t len = 0;
	int rc;

	diag_init(&fd);
	rc = file_read(path, CERTS_MAX_FILE_BYTES, FILE_SECRET, &buf, &len, &fd);
	if (rc < 0) {
		diag_first(&fd, first, sizeof(first));
		diag_addf(d, "gpugate serve: %s: %s", flag, first);
		return -1;
	}
	if (pem && !strstr(buf, "-----BEGIN CERTIFICATE-----")) {
		diag_addf(d, "gpugate serve: %s: %s: no PEM certificate in it", flag,
			  path);
		rc = -1;
	} else if (!pem && len == strspn(buf, " \t\r\n")) {
		diag_addf(d, "gpugate serve: %s: %s: empty", flag, path);
		rc = -1;
	}
	file_free_secret(buf, len);
	return rc;
}

/* --prometheus-url and its files, checked once (the idle controller reads
 * them again: the token on every query).  dm->prom filled. */
static int check_prometheus(struct daemon *dm, struct diag *d)
{
	const struct daemon_config *cfg = &dm->cfg;
	struct prom *probe;

	if (!cfg->prometheus_url) {
		if (cfg->prometheus_token_file || cfg->prometheus_ca) {
			diag_addf(d, "gpugate serve: --prometheus-bearer-token-file and "
				     "--prometheus-ca need --prometheus-url");
			return -1;
		}
		return 0;
	}
	dm->prom = (struct prom_config){.url = cfg->prometheus_url,
					.bearer_token_file = cfg->prometheus_token_file,
					.ca_file = cfg->prometheus_ca};
	if (cfg->prometheus_token_file &&
	    check_prom_file("--prometheus-bearer-token-file",
			    cfg->prometheus_token_file, false, d) < 0)
		return -1;
	if (cfg->prometheus_ca &&
	    check_prom_file("--prometheus-ca", cfg->prometheus_ca, true, d) < 0)
		return -1;
	/* The URL as the client takes it (nothing is sent). */
	probe = prom_new(&dm->prom, d);
	if (!probe) {
		diag_addf(d, "gpugate serve: --prometheus-url is not usable");
		return -1;
	}
	prom_free(probe);
	return 0;
}

int daemon_start(const struct daemon_config *cfg, struct daemon **out,
		 struct diag *d)
{
	struct daemon *dm = calloc(1, sizeof(*dm));
	struct server_config sc = {0};
	struct pem_pair pp = {0};
	struct policy *p = NULL;
	unsigned ttl_s;

	*out = NULL;
	if (!dm) {
		diag_addf(d, "gpugate serve: out of memory");
		return -1;
	}
	dm->cfg = *cfg;
	if (!dm->cfg.grace_ms)
		dm->cfg.grace_ms = DAEMON_GRACE_MS_DEFAULT;
	ttl_s = dm->cfg.reservation_ttl_s ? dm->cfg.reservation_ttl_s
					  : DAEMON_RESERVATION_TTL_S_DEFAULT;
	snprintf(dm->host, sizeof(dm->host), "%s", cfg->host ? cfg->host : "0.0.0.0");
	dm->policy_file.path = cfg->policy_path;
	dm->cert_file.path = cfg->cert_path;
	dm->key_file.path = cfg->key_path;

	jsonmem_install();
	if (check_prometheus(dm, d) < 0)
		goto fail;
	if (policy_load(cfg->policy_path, &p, d) < 0) {
		diag_addf(d, "gpugate serve: the policy is invalid; not starting");
		goto fail;
	}
	if (open_api(dm, d) < 0) {
		policy_free(p);
		goto fail;
	}
	set_identity(dm);
	dm->metrics = metrics_new();
	dm->holder = holder_new(p);
	if (dm->have_api && cfg->leader_usage) {
		if (start_leader(dm, ttl_s, d) < 0) {
			policy_free(dm->holder ? NULL : p);
			goto fail;
		}
	} else if (dm->have_api && cfg->shared_usage) {
		if (start_shared(dm, ttl_s, d) < 0) {
			policy_free(dm->holder ? NULL : p); /* the holder owns it */
			goto fail;
		}
	} else {
		dm->usage = usage_memory_new(&(struct usage_memory_config){
			.reservation_ttl_ms = dm->have_api ? (uint64_t)ttl_s * 1000u : 0});
		if (dm->have_api && start_memory_gate(dm, d) < 0) {
			policy_free(dm->holder ? NULL : p);
			goto fail;
		}
	}
	if (!dm->metrics || !dm->holder || !dm->usage) {
		diag_addf(d, "gpugate serve: out of memory");
		policy_free(dm->holder ? NULL : p);
		goto fail;
	}
	if (dm->have_api) {
		struct feed_config fc = {.kube = &dm->kube, .usage = dm->usage,
					 .charge = charge_item_source,
					 .charge_ctx = &dm->charge,
					 .node = node_facts_cb,
					 .placement = pod_placement_cb,
					 .dra_put = dra_facts_put,
					 .dra_delete = dra_facts_delete,
					 .facts_ctx = dm->holder};

		dm->inventory = inventory_new();
		dm->meter = meter_new(NULL);
		dm->priorities = priorities_new();
		dm->pvcs = pvcs_new();
		dm->parents = parents_new(&dm->kube, d);
		dm->idle_board = idle_board_new();
		dm->templates = template_board_new();
		dm->charge = (struct charge_source){.holder = dm->holder,
						    .priorities = dm->priorities};
		if (!dm->inventory || !dm->meter || !dm->priorities || !dm->pvcs ||
		    !dm->parents || !dm->idle_board || !dm->templates) {
			diag_addf(d, "gpugate serve: out of memory");
			goto fail;
		}
		fc.inventory = dm->inventory;
		fc.priorities = dm->priorities;
		fc.pvcs = dm->pvcs;
		fc.meter = dm->meter;
		fc.run = pod_run_cb;
		if (feed_start(&fc, &dm->feed, d) < 0)
			goto fail;
		if (dm->quota_leader)
			quota_leader_set_feed(dm->quota_leader, dm->feed);
		whoami(dm);
		if (start_controllers(dm, d) < 0)
			goto fail;
		log_event(LOG_INFO, "msg=\"usage from the Kubernetes API\" server=%s "
				    "credentials=\"%s\" reservation_ttl_s=%u",
			  dm->kube.server, dm->kube.source, ttl_s);
		if (cfg->prometheus_url)
			log_event(LOG_INFO, "msg=\"idle GPUs from Prometheus\" url=%s "
					    "token=%s ca=%s idle_interval_s=%u",
				  cfg->prometheus_url,
				  cfg->prometheus_token_file ? cfg->prometheus_token_file
							     : "none",
				  cfg->prometheus_ca ? cfg->prometheus_ca : "system",
				  cfg->idle_interval_s ? cfg->idle_interval_s
						       : DAEMON_IDLE_INTERVAL_S_DEFAULT);
	} else {
		log_event(LOG_INFO, "msg=\"embedded usage\" detail=\"usage is what "
				    "this process admitted; DELETE admissions release "
				    "it\"");
		if (cfg->prometheus_url)
			log_event(LOG_WARN, "msg=\"--prometheus-url is not used\" "
					    "detail=\"idle GPUs are found with the "
					    "Kubernetes API only\"");
	}
	if (load_pair(dm, &pp, d) < 0)
		goto fail;
	if (dm->quota_leader &&
	    quota_leader_set_keys(dm->quota_leader, pp.cert, pp.cert_len, pp.key,
				  pp.key_len, d) < 0)
		goto fail;
	dm->handler.policy = dm->holder;
	dm->handler.metrics = dm->metrics;
	dm->handler.usage = dm->usage;
	dm->handler.inventory = dm->inventory;
	dm->handler.priorities = dm->priorities;
	dm->handler.pvcs = dm->pvcs;
	dm->handler.gang_served = &dm->gang_served;
	dm->handler.self_user = dm->self_user[0] ? dm->self_user : NULL;
	dm->handler.self_namespace = dm->namespace[0] ? dm->namespace : NULL;
	dm->handler.templates = dm->templates;
	if (dm->parents) {
		dm->parent_source = (struct handler_parents){parents_get, dm->parents};
		dm->handler.parents = &dm->parent_source;
	}
	sc.host = dm->host;
	sc.port = cfg->port;
	sc.threads = cfg->threads;
	sc.conn_timeout = cfg->conn_timeout;
	sc.conn_limit = cfg->conn_limit;
	sc.per_ip_limit = cfg->per_ip_limit;
	{
		/* SPEC section 8.  Copied by server_start(). */
		const struct http_route routes[] = {
			{"POST", "/mutate", handler_route_mutate, &dm->handler,
			 HTTP_ROUTE_JSON},
			{"POST", "/validate", handler_route_validate, &dm->handler,
			 HTTP_ROUTE_JSON},
			{"POST", "/validate-policy", policy_review_route, NULL,
			 HTTP_ROUTE_JSON},
			{"GET", "/healthz", route_healthz, NULL, 0},
			{"GET", "/readyz", route_readyz, dm, 0},
			{"GET", "/metrics", route_metrics, dm, 0},
			{"GET", "/pool", route_pool, dm, 0},
			/* --usage-store leader: the followers' forwards. */
			{"POST", PEER_DECIDE_PATH, dm->quota_leader ? quota_leader_route
								   : route_no_peer,
			 dm->quota_leader, HTTP_ROUTE_JSON | HTTP_ROUTE_AUTHORIZATION},
		};

		sc.routes = routes;
		sc.n_routes = sizeof(routes) / sizeof(routes[0]);
		if (server_start(&sc, pp.cert, pp.key, &dm->server, d) < 0)
			goto fail;
	}
	pair_release(&pp);
	if (dm->quota_leader && start_leader_leases(dm, d) < 0)
		goto fail;
	changed(&dm->policy_file);
	changed(&dm->cert_file);
	changed(&dm->key_file);
	log_event(LOG_INFO, "msg=\"serving\" listen=%s:%u policy=%s tenants=%zu "
			    "classes=%zu certificate=\"%s\"",
		  dm->host, server_port(dm->server), cfg->policy_path,
		  policy_tenant_count(p), policy_class_count(p), dm->cert_subject);
	*out = dm;
	return 0;
fail:
	pair_release(&pp);
	daemon_stop(dm);
	return -1;
}

uint16_t daemon_port(const struct daemon *dm)
{
	return server_port(dm->server);
}

void daemon_stop(struct daemon *dm)
{
	if (!dm)
		return;
	if (dm->server) {
		log_event(LOG_INFO, "msg=\"stopping\" in_flight=%u",
			  server_in_flight(dm->server));
		server_stop(dm->server, dm->cfg.grace_ms);
		log_event(LOG_INFO, "msg=\"stopped\"");
	}
	stop_controllers(dm);
	idle_board_free(dm->idle_board);
	feed_stop(dm->feed);
	/* Its Leases first (the one held is released at once, so that
	 * another replica decides without waiting out the term); its store
	 * is freed below with the others', then the rest of it. */
	quota_leader_stop_leases(dm->quota_leader);
	lease_stop(dm->lease);
	lease_stop(dm->memory_lease);
	lease_stop(dm->shared_watch);
	inventory_free(dm->inventory);
	priorities_free(dm->priorities);
	pvcs_free(dm->pvcs);
	template_board_free(dm->templates);
	parents_free(dm->parents);
	meter_free(dm->meter);
	usage_free(dm->usage);
	quota_leader_free(dm->quota_leader);
	kube_shared_io_free(dm->shared_io);
	kube_config_release(&dm->kube);
	holder_free(dm->holder);
	metrics_free(dm->metrics);
	free(dm);
}

/* ---- gpugate serve ------------------------------------------------------ */

int daemon_run(const struct daemon_config *cfg)
{
	struct daemon *dm;
	struct diag d;
	sigset_t set;

	/* Signals go to this thread only: block them before any thread. */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	diag_init(&d);
	if (daemon_start(cfg, &dm, &d) < 0) {
		/* In the log's format like every line before (--log-format). */
		log_diag(LOG_ERROR, "not starting", &d);
		return 1;
	}
	/* The bound port, on stdout, for scripts that asked for port 0. */
	printf("listening on https://%s:%u\n", dm->host, daemon_port(dm));
	fflush(stdout);
	for (;;) {
		struct timespec tick = {.tv_sec = 1, .tv_nsec = 0};
		int sig = sigtimedwait(&set, NULL, &tick);

		if (sig == SIGTERM || sig == SIGINT)
			break;
		if (sig == SIGHUP) {
			expire(dm);
			daemon_reload(dm);
			continue;
		}
		daemon_tick(dm);
	}
	daemon_stop(dm);
	return 0;
}
