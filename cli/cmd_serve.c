/*
 * gpugate serve: load the policy and certificate, serve HTTPS, reload both
 * when they change on disk, stop gracefully on SIGTERM.
 *
 * All signals are blocked in every thread and taken by the main thread with
 * sigtimedwait(), which also ticks once a second to look at the files.
 */
#include "base/diag.h"
#include "base/file.h"
#include "base/log.h"
#include "base/strbuf.h"
#include "certs/certs.h"
#include "cli/cmd.h"
#include "codec/jsonmem.h"
#include "http/server.h"
#include "kube/config.h"
#include "kube/watch.h"
#include "policy/policy.h"
#include "usage/usage.h"
#include "webhook/handler.h"
#include "webhook/holder.h"
#include "webhook/metrics.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <pthread.h>
#include <time.h>

#define GRACE_MS 10000
/* API mode: a reservation whose object has not shown up in the watch by
 * then is dropped (the create failed after /validate); --reservation-ttl. */
#define RESERVATION_TTL_S 60

void cmd_serve_usage(FILE *out)
{
	fputs("usage: gpugate serve --policy FILE --tls-cert FILE --tls-key FILE\n"
	      "                     [--listen HOST:PORT] [--kubeconfig FILE | --embedded]\n"
	      "                     [--threads N] [--log-level LEVEL]\n"
	      "                     [--conn-timeout SECONDS] [--max-conns N]\n"
	      "                     [--max-conns-per-ip N] [--reservation-ttl SECONDS]\n"
	      "\n"
	      "Serves the admission webhook over HTTPS: POST /mutate, POST /validate,\n"
	      "GET /healthz, /readyz, /metrics.\n"
	      "\n"
	      "  --policy FILE      the policy (reloaded when it changes; a bad new\n"
	      "                     policy is refused and the old one kept)\n"
	      "  --tls-cert FILE    PEM certificate chain (reloaded when it changes)\n"
	      "  --tls-key FILE     PEM private key\n"
	      "  --listen HOST:PORT numeric address and port (default 0.0.0.0:8443;\n"
	      "                     IPv6 as [::]:8443; port 0 picks a free port)\n"
	      "  --kubeconfig FILE  keep quota usage true from this Kubernetes API\n"
	      "                     (list and watch of Pods and Jobs); inside a pod\n"
	      "                     the service account is used without this flag\n"
	      "  --embedded         no API even in a pod: usage is what this process\n"
	      "                     admitted, released by DELETE admissions\n"
	      "  --threads N        worker threads (default: one per CPU)\n"
	      "  --log-level LEVEL  debug, info, warn or error (default info)\n"
	      "  --conn-timeout S   close a connection idle or stalled for S seconds\n"
	      "                     (default 30)\n"
	      "  --max-conns N      connections at most (default 1024)\n"
	      "  --max-conns-per-ip N  from one address at most (default 256)\n"
	      "  --reservation-ttl S  with the API: drop a quota reservation made at\n"
	      "                     /validate when its object has not shown up in the\n"
	      "                     watch after S seconds of the watch being connected\n"
	      "                     (default 60; the create failed)\n"
	      "\n"
	      "SIGTERM or SIGINT: stop accepting, finish requests in progress, exit 0.\n"
	      "SIGHUP: reload the policy and certificate now.\n",
	      out);
}

struct watched {
	const char *path;
	struct stat st;
	bool known;
};

struct serve {
	const char *policy_path;
	struct usage_store *ledger;
	struct watch *watch;
	struct watched policy_file, cert_file, key_file;
	struct holder *holder;
	struct metrics *metrics;
	struct server *server;
	struct handler handler;
	time_t cert_not_after;
	char cert_subject[256];
	uint64_t policy_loaded_at;
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

static char *read_small(const char *path, unsigned flags, struct diag *d)
{
	char *buf;
	size_t len;

	return file_read(path, CERTS_MAX_FILE_BYTES, flags, &buf, &len, d) < 0
		       ? NULL
		       : buf;
}

/*
 * Reads the pair once and checks those very bytes; on success *cert and
 * *key are malloc'd.  A rotation in the middle (a Secret volume flips both
 * files at once) yields a mismatched pair, which is refused: the next tick
 * reads the new pair whole.
 */
static int load_pair(struct serve *sv, char **cert, char **key, struct diag *d)
{
	struct certs_info info;

	*cert = read_small(sv->cert_file.path, 0, d);
	*key = *cert ? read_small(sv->key_file.path, FILE_SECRET, d) : NULL;
	if (!*key ||
	    certs_check_pem(sv->cert_file.path, *cert, sv->key_file.path, *key,
			    time(NULL), &info, d) < 0) {
		if (*key) {
			memset(*key, 0, strlen(*key));
			free(*key);
		}
		free(*cert);
		*cert = *key = NULL;
		return -1;
	}
	sv->cert_not_after = info.not_after;
	snprintf(sv->cert_subject, sizeof(sv->cert_subject), "%s", info.subject);
	return 0;
}

static void log_diag(enum log_level level, const char *what, struct diag *d)
{
	char q[DIAG_CAP];
	const char *text = diag_text(d);

	log_event(level, "msg=\"%s\" error=\"%s\"", what, log_quote(text, q, sizeof(q)));
}

static void reload_policy(struct serve *sv)
{
	struct policy *p = NULL;
	struct diag d;

	diag_init(&d);
	if (policy_load(sv->policy_path, &p, &d) < 0) {
		metrics_policy_reload(sv->metrics, false);
		log_diag(LOG_ERROR, "policy reload refused, keeping the old policy", &d);
		return;
	}
	holder_swap(sv->holder, p);
	metrics_policy_reload(sv->metrics, true);
	log_event(LOG_INFO, "msg=\"policy reloaded\" file=%s flavors=%zu classes=%zu "
			    "tenants=%zu",
		  sv->policy_path, policy_flavor_count(p), policy_class_count(p),
		  policy_tenant_count(p));
}

static void reload_cert(struct serve *sv)
{
	char *cert, *key;
	struct diag d;

	diag_init(&d);
	if (load_pair(sv, &cert, &key, &d) < 0 ||
	    server_set_certificate(sv->server, cert, key, &d) < 0) {
		metrics_cert_reload(sv->metrics, false);
		log_diag(LOG_WARN, "certificate reload refused, keeping the old one", &d);
	} else {
		metrics_cert_reload(sv->metrics, true);
		log_event(LOG_INFO, "msg=\"certificate reloaded\" subject=\"%s\" "
				    "not_after=%lld",
			  sv->cert_subject, (long long)sv->cert_not_after);
	}
	if (cert) {
		memset(key, 0, strlen(key));
		free(key);
		free(cert);
	}
}

static bool ready(void *ctx, struct strbuf *why)
{
	struct serve *sv = ctx;
	bool ok = true;

	if (time(NULL) > sv->cert_not_after) {
		strbuf_addf(why, "certificate expired\n");
		ok = false;
	}
	if (sv->watch && !watch_synced(sv->watch)) {
		strbuf_addf(why, "quota usage not synced from the Kubernetes API yet\n");
		ok = false;
	}
	return ok;
}

static void quota_gauges(void *ctx, struct strbuf *out)
{
	struct serve *sv = ctx;
	struct holder_ref *ref;
	const struct policy *p = holder_acquire(sv->holder, &ref);

	strbuf_addf(out, "# HELP gpugate_quota_nominal Nominal quota, in units of "
			 "the flavor's resource.\n"
			 "# TYPE gpugate_quota_nominal gauge\n");
	for (size_t t = 0; p && t < policy_tenant_count(p); t++) {
		const struct policy_tenant *te = policy_tenant_at(p, t);

		for (size_t q = 0; q < te->n_quota; q++)
			strbuf_addf(out,
				    "gpugate_quota_nominal{tenant=\"%s\",flavor=\"%s\"} "
				    "%" PRId64 "\n",
				    te->name, te->quota[q].flavor->name,
				    te->quota[q].nominal);
	}
	strbuf_addf(out, "# HELP gpugate_quota_used Quota in use (reserved or "
			 "observed), in units of the flavor's resource.\n"
			 "# TYPE gpugate_quota_used gauge\n");
	for (size_t t = 0; p && t < policy_tenant_count(p); t++) {
		const struct policy_tenant *te = policy_tenant_at(p, t);

		for (size_t q = 0; q < te->n_quota; q++)
			strbuf_addf(out,
				    "gpugate_quota_used{tenant=\"%s\",flavor=\"%s\"} "
				    "%" PRId64 "\n",
				    te->name, te->quota[q].flavor->name,
				    usage_used(sv->ledger, te->name,
						te->quota[q].flavor->name));
	}
	strbuf_addf(out, "# HELP gpugate_ledger_entries Workloads holding quota.\n"
			 "# TYPE gpugate_ledger_entries gauge\n"
			 "gpugate_ledger_entries %zu\n",
		    usage_entries(sv->ledger));
	if (sv->watch)
		strbuf_addf(out, "# HELP gpugate_kube_watch_connected 1 while the "
				 "Pod and Job watches are connected.\n"
				 "# TYPE gpugate_kube_watch_connected gauge\n"
				 "gpugate_kube_watch_connected %d\n"
				 "# HELP gpugate_kube_synced 1 once usage was listed "
				 "from the API.\n"
				 "# TYPE gpugate_kube_synced gauge\n"
				 "gpugate_kube_synced %d\n",
			    watch_connected(sv->watch), watch_synced(sv->watch));
	strbuf_addf(out, "# HELP gpugate_certificate_expiry_seconds Unix time at "
			 "which the serving certificate expires.\n"
			 "# TYPE gpugate_certificate_expiry_seconds gauge\n"
			 "gpugate_certificate_expiry_seconds %lld\n",
		    (long long)sv->cert_not_after);
	holder_release(ref);
}

/* What metrics.c does not hold: quota gauges and the server's workers. */
static void extra_metrics(void *ctx, struct strbuf *out)
{
	struct serve *sv = ctx;

	quota_gauges(sv, out);
	if (sv->server)
		server_worker_metrics(sv->server, out);
}

static int render_metrics(void *ctx, char **out, size_t *len)
{
	struct serve *sv = ctx;

	return metrics_render(sv->metrics, extra_metrics, sv, out, len);
}

/* "HOST:PORT" or "[V6]:PORT" -> host (in buf) and port. */
static int parse_listen(const char *s, char *host, size_t hostsz, uint16_t *port)
{
	const char *colon;
	char *end;
	unsigned long p;
	size_t n;

	if (s[0] == '[') {
		const char *close = strchr(s, ']');

		if (!close || close[1] != ':')
			return -1;
		n = (size_t)(close - s - 1);
		if (n >= hostsz)
			return -1;
		memcpy(host, s + 1, n);
		host[n] = '\0';
		colon = close + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon)
			return -1;
		n = (size_t)(colon - s);
		if (n == 0 || n >= hostsz)
			return -1;
		memcpy(host, s, n);
		host[n] = '\0';
	}
	p = strtoul(colon + 1, &end, 10);
	if (!colon[1] || *end || p > 65535)
		return -1;
	*port = (uint16_t)p;
	return 0;
}

/* A whole number in [lo, hi]. */
static int parse_count(const char *s, unsigned lo, unsigned hi, unsigned *out)
{
	char *end;
	unsigned long n;

	if (!*s || *s == '-' || *s == '+')
		return -1;
	n = strtoul(s, &end, 10);
	if (*end || n < lo || n > hi)
		return -1;
	*out = (unsigned)n;
	return 0;
}

static int usage_error(const char *msg)
{
	fprintf(stderr, "gpugate serve: %s\n", msg);
	cmd_serve_usage(stderr);
	return 2;
}

int cmd_serve(int argc, char **argv)
{
	static const struct option opts[] = {
		{"policy", required_argument, NULL, 'p'},
		{"tls-cert", required_argument, NULL, 'c'},
		{"tls-key", required_argument, NULL, 'k'},
		{"listen", required_argument, NULL, 'l'},
		{"kubeconfig", required_argument, NULL, 'K'},
		{"embedded", no_argument, NULL, 'E'},
		{"threads", required_argument, NULL, 't'},
		{"log-level", required_argument, NULL, 'L'},
		{"conn-timeout", required_argument, NULL, 'T'},
		{"max-conns", required_argument, NULL, 'M'},
		{"max-conns-per-ip", required_argument, NULL, 'I'},
		{"reservation-ttl", required_argument, NULL, 'R'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct serve sv = {0};
	struct server_config cfg = {0};
	const char *listen = "0.0.0.0:8443", *kubeconfig = NULL;
	struct kube_config kc = {0};
	bool embedded = false, have_api = false;
	unsigned ttl_s = RESERVATION_TTL_S;
	char host[64], *cert = NULL, *key = NULL;
	struct policy *p = NULL;
	struct diag d;
	sigset_t set;
	int c, rc = 1;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			sv.policy_path = optarg;
			break;
		case 'c':
			sv.cert_file.path = optarg;
			break;
		case 'k':
			sv.key_file.path = optarg;
			break;
		case 'l':
			listen = optarg;
			break;
		case 'K':
			kubeconfig = optarg;
			break;
		case 'E':
			embedded = true;
			break;
		case 't':
			if (parse_count(optarg, 1, 256, &cfg.threads) < 0)
				return usage_error("--threads must be 1..256");
			break;
		case 'T':
			if (parse_count(optarg, 1, 3600, &cfg.conn_timeout) < 0)
				return usage_error("--conn-timeout must be 1..3600 seconds");
			break;
		case 'M':
			if (parse_count(optarg, 1, 65536, &cfg.conn_limit) < 0)
				return usage_error("--max-conns must be 1..65536");
			break;
		case 'I':
			if (parse_count(optarg, 1, 65536, &cfg.per_ip_limit) < 0)
				return usage_error("--max-conns-per-ip must be 1..65536");
			break;
		case 'R':
			if (parse_count(optarg, 1, 86400, &ttl_s) < 0)
				return usage_error("--reservation-ttl must be 1..86400 "
						   "seconds");
			break;
		case 'L':
			if (strcmp(optarg, "debug") == 0)
				log_set_level(LOG_DEBUG);
			else if (strcmp(optarg, "info") == 0)
				log_set_level(LOG_INFO);
			else if (strcmp(optarg, "warn") == 0)
				log_set_level(LOG_WARN);
			else if (strcmp(optarg, "error") == 0)
				log_set_level(LOG_ERROR);
			else
				return usage_error("--log-level must be debug, info, warn "
						   "or error");
			break;
		case 'h':
			cmd_serve_usage(stdout);
			return 0;
		default:
			cmd_serve_usage(stderr);
			return 2;
		}
	}
	if (optind < argc)
		return usage_error("unexpected argument");
	if (!sv.policy_path || !sv.cert_file.path || !sv.key_file.path)
		return usage_error("--policy, --tls-cert and --tls-key are required");
	if (kubeconfig && embedded)
		return usage_error("--kubeconfig and --embedded exclude each other");
	if (parse_listen(listen, host, sizeof(host), &cfg.port) < 0)
		return usage_error("--listen must be HOST:PORT (e.g. 0.0.0.0:8443 or "
				   "[::]:8443)");
	cfg.host = host;
	sv.policy_file.path = sv.policy_path;

	/* Signals go to the main thread only: block them before any thread. */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	jsonmem_install();
	diag_init(&d);
	if (policy_load(sv.policy_path, &p, &d) < 0) {
		fputs(diag_text(&d), stderr);
		fprintf(stderr, "gpugate serve: the policy is invalid; not starting\n");
		return 1;
	}
	if (kubeconfig) {
		if (kube_config_load(kubeconfig, &kc, &d) < 0) {
			fputs(diag_text(&d), stderr);
			policy_free(p);
			return 1;
		}
		have_api = true;
	} else if (!embedded && getenv("KUBERNETES_SERVICE_HOST")) {
		if (kube_config_in_cluster(NULL, &kc, &d) < 0) {
			fputs(diag_text(&d), stderr);
			fprintf(stderr, "gpugate serve: cannot use the in-cluster service "
					"account (use --embedded to run without the API)\n");
			policy_free(p);
			return 1;
		}
		have_api = true;
	}
	sv.metrics = metrics_new();
	sv.holder = holder_new(p);
	sv.ledger = usage_memory_new(&(struct usage_memory_config){
		.reservation_ttl_ms = have_api ? (uint64_t)ttl_s * 1000u : 0});
	if (!sv.metrics || !sv.holder || !sv.ledger) {
		fprintf(stderr, "gpugate serve: out of memory\n");
		policy_free(sv.holder ? NULL : p);
		goto out;
	}
	if (have_api) {
		struct watch_config wc = {.kube = &kc, .ledger = sv.ledger,
					  .policy = sv.holder};

		if (watch_start(&wc, &sv.watch, &d) < 0) {
			fputs(diag_text(&d), stderr);
			goto out;
		}
		log_event(LOG_INFO, "msg=\"usage from the Kubernetes API\" server=%s "
				    "credentials=\"%s\" reservation_ttl_s=%u",
			  kc.server, kc.source, ttl_s);
	} else {
		log_event(LOG_INFO, "msg=\"embedded usage\" detail=\"usage is what "
				    "this process admitted; DELETE admissions release "
				    "it\"");
	}
	if (load_pair(&sv, &cert, &key, &d) < 0) {
		fputs(diag_text(&d), stderr);
		goto out;
	}
	sv.handler.policy = sv.holder;
	sv.handler.metrics = sv.metrics;
	sv.handler.usage = sv.ledger;
	cfg.handler = &sv.handler;
	cfg.ready = ready;
	cfg.metrics = render_metrics;
	cfg.ctx = &sv;
	if (server_start(&cfg, cert, key, &sv.server, &d) < 0) {
		fputs(diag_text(&d), stderr);
		goto out;
	}
	changed(&sv.policy_file);
	changed(&sv.cert_file);
	changed(&sv.key_file);
	log_event(LOG_INFO, "msg=\"serving\" listen=%s:%u policy=%s tenants=%zu "
			    "classes=%zu certificate=\"%s\"",
		  host, server_port(sv.server), sv.policy_path,
		  policy_tenant_count(p), policy_class_count(p), sv.cert_subject);
	/* The bound port, on stdout, for scripts that asked for port 0. */
	printf("listening on https://%s:%u\n", host, server_port(sv.server));
	fflush(stdout);

	for (;;) {
		struct timespec tick = {.tv_sec = 1, .tv_nsec = 0};
		int sig = sigtimedwait(&set, NULL, &tick);

		if (sig == SIGTERM || sig == SIGINT)
			break;
		/* The ledger knows whether the watch is up: reservations do
		 * not expire while it is down (ledger_set_watching). */
		if (sv.watch) {
			size_t n = usage_expire(sv.ledger);

			if (n)
				log_event(LOG_INFO, "msg=\"reservations expired\" "
						    "count=%zu",
					  n);
		}
		if (sig == SIGHUP) {
			reload_policy(&sv);
			reload_cert(&sv);
			continue;
		}
		if (changed(&sv.policy_file))
			reload_policy(&sv);
		/* Either file of the pair (both stat()s run, to keep both
		 * snapshots current): a half-rotated pair is refused and the
		 * next change retries. */
		{
			bool cert_changed = changed(&sv.cert_file);
			bool key_changed = changed(&sv.key_file);

			if (cert_changed || key_changed)
				reload_cert(&sv);
		}
	}
	log_event(LOG_INFO, "msg=\"stopping\" in_flight=%u", server_in_flight(sv.server));
	server_stop(sv.server, GRACE_MS);
	log_event(LOG_INFO, "msg=\"stopped\"");
	rc = 0;
out:
	watch_stop(sv.watch);
	usage_free(sv.ledger);
	kube_config_release(&kc);
	if (key) {
		memset(key, 0, strlen(key));
		free(key);
	}
	free(cert);
	holder_free(sv.holder);
	metrics_free(sv.metrics);
	return rc;
}
