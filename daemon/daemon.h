/*
 * daemon: gpugate serve without its command line — the wiring of a running
 * webhook, its reloads and its signal loop.
 *
 *   daemon_start()   load the policy and the certificate pair, make the
 *                    usage store, start the Kubernetes feed (API mode) and
 *                    the HTTPS server with gpugate's routes
 *   daemon_tick()    once a second: expire reservations, reload the policy
 *                    or the certificate when their files changed
 *   daemon_reload()  reload both now (SIGHUP)
 *   daemon_stop()    stop accepting, finish requests in progress (at most
 *                    grace_ms), stop the feed, free everything
 *   daemon_run()     all of it with the signals: what `gpugate serve` runs
 *
 * The pieces up to daemon_run() take no signals and no argv, so that tests
 * drive a whole daemon (tests/unit/webhook/daemon_test.c).  A reload that
 * fails keeps what was loaded (a bad policy never replaces a good one) and
 * is logged and counted in the metrics.
 */
#ifndef GPUGATE_DAEMON_H
#define GPUGATE_DAEMON_H

#include <stdbool.h>
#include <stdint.h>

struct diag;

/* Where quota usage comes from. */
enum daemon_api {
	/* The in-cluster service account when KUBERNETES_SERVICE_HOST is set,
	 * else embedded. */
	DAEMON_API_AUTO,
	/* The kubeconfig named in daemon_config.kubeconfig. */
	DAEMON_API_KUBECONFIG,
	/* Embedded: usage is what this process admitted, released by DELETE
	 * admissions. */
	DAEMON_API_NONE,
};

#define DAEMON_GRACE_MS_DEFAULT 10000
/* A reservation whose object has not shown up in the watch by then is
 * dropped (the create failed after /validate). */
#define DAEMON_RESERVATION_TTL_S_DEFAULT 60
#define DAEMON_WAITING_AFTER_S_DEFAULT 60
#define DAEMON_IDLE_INTERVAL_S_DEFAULT 60

struct daemon_config {
	const char *policy_path;     /* required */
	const char *cert_path;       /* required: PEM certificate chain */
	const char *key_path;        /* required: PEM private key */
	const char *host;            /* numeric address; NULL: "0.0.0.0" */
	uint16_t port;               /* 0: an ephemeral port (daemon_port) */
	unsigned threads;            /* 0: one per CPU */
	unsigned conn_timeout;       /* seconds; 0: the server's default */
	unsigned conn_limit;         /* 0: the server's default */
	unsigned per_ip_limit;       /* 0: the server's default */
	enum daemon_api api;
	const char *kubeconfig;      /* with DAEMON_API_KUBECONFIG */
	unsigned reservation_ttl_s;  /* API mode; 0: the default */
	unsigned grace_ms;           /* daemon_stop(); 0: the default */
	/* API mode: quota reservations shared by the replicas
	 * (usage/shared.h), in ConfigMaps of `namespace`, with a Lease
	 * there to choose who cleans up; else this process's ledger. */
	bool shared_usage;
	/* API mode: the holder of Lease gpugate-memory decides quota, the
	 * other replicas forward to it (daemon/quota-leader.h, issue #32);
	 * wins over shared_usage. */
	bool leader_usage;
	/* leader_usage: where the other replicas reach this one
	 * ("host:port"); NULL: $POD_IP, else the listen host when it is not a
	 * wildcard, else 127.0.0.1, and the bound port. */
	const char *peer_address;
	const char *namespace;       /* NULL: "gpugate" */
	const char *identity;        /* this replica; NULL: the host name */
	/* API mode: an Event saying why a GPU pod waits for a node, once it
	 * waited this long (controllers/waiter.h); 0: none. */
	unsigned waiting_after_s;
	/* API mode: do not keep the GPUClass objects (controllers/class-sync.h)
	 * equal to the policy's classes. */
	bool no_gpuclasses;
	/* API mode: do not keep a GPUQuota object per tenant namespace
	 * (controllers/quota-sync.h) saying what the tenant uses. */
	bool no_gpuquotas;
	/* Tests only (gpugate serve takes it from $GPUGATE_TEST_ROUND_MS,
	 * in no --help and no doc but tests/integration/README.md): the ms
	 * between the rounds of the controllers that take it (gang-start);
	 * 0: each its own. */
	unsigned round_ms;
	/* API mode: do not mark nodes out for health (controllers/health.h):
	 * another gpugate of the cluster does. */
	bool no_node_health;
	/* API mode, idle GPUs (SPEC 10; controllers/idle.h): the cluster's
	 * Prometheus (http:// or https://; NULL: none, nothing is idle),
	 * a file holding its bearer token (read on every query; NULL: no
	 * Authorization), the PEM CA it is checked with (NULL: the
	 * system's).  Both files are read once at start: one missing is a
	 * start error. */
	const char *prometheus_url;
	const char *prometheus_token_file;
	const char *prometheus_ca;
	/* Seconds between the idle controller's rounds; 0: the default.
	 * round_ms, when set, wins (tests). */
	unsigned idle_interval_s;
};

struct daemon;

/*
 * Starts everything.  Returns 0 with the daemon in *out, or -1 with the
 * reasons in d (nothing left running), e.g.
 *
 *   FILE:LINE: ... (the policy's errors)
 *   gpugate serve: the policy is invalid; not starting
 *
 * Signals are the caller's business: block them before calling, since the
 * daemon's threads inherit the mask (daemon_run() does).
 */
int daemon_start(const struct daemon_config *cfg, struct daemon **out,
		 struct diag *d);

/* The bound port (the one chosen when cfg.port was 0). */
uint16_t daemon_port(const struct daemon *dm);

/* Once a second: expiry and reloads of files that changed on disk. */
void daemon_tick(struct daemon *dm);

/* Reloads the policy and the certificate now. */
void daemon_reload(struct daemon *dm);

/* NULL is a no-op. */
void daemon_stop(struct daemon *dm);

/*
 * gpugate serve: blocks SIGTERM, SIGINT and SIGHUP in every thread and
 * ignores SIGPIPE, starts, prints "listening on https://HOST:PORT" on
 * stdout, then ticks once a second; SIGHUP reloads, SIGTERM or SIGINT stop
 * gracefully.  Returns 0 after a graceful stop, 1 when it could not start
 * (the reasons on stderr).
 */
int daemon_run(const struct daemon_config *cfg);

#endif
