/*
 * gpugate serve: the flags, turned into a struct daemon_config; the daemon
 * (daemon/daemon.c) does the rest.
 */
#include "base/log.h"
#include "base/version.h"
#include "cli/cmd.h"
#include "daemon/daemon.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cmd_serve_usage(FILE *out)
{
	fputs("usage: gpugate serve --policy FILE --tls-cert FILE --tls-key FILE\n"
	      "                     [--listen HOST:PORT] [--kubeconfig FILE | --embedded]\n"
	      "                     [--threads N] [--log-level LEVEL]\n"
	      "                     [--log-format logfmt|json]\n"
	      "                     [--conn-timeout SECONDS] [--max-conns N]\n"
	      "                     [--max-conns-per-ip N] [--reservation-ttl SECONDS]\n"
	      "                     [--usage-store memory|shared|leader]\n"
	      "                     [--namespace NS] [--identity NAME]\n"
	      "                     [--peer-address HOST:PORT]\n"
	      "                     [--waiting-reason-after S]\n"
	      "                     [--no-gpuclasses] [--no-gpuquotas]\n"
	      "                     [--no-node-health]\n"
	      "                     [--prometheus-url URL]\n"
	      "                     [--prometheus-bearer-token-file FILE]\n"
	      "                     [--prometheus-ca FILE] [--idle-interval S]\n"
	      "\n"
	      "Serves the admission webhook over HTTPS: POST /mutate, POST /validate,\n"
	      "GET /healthz, /readyz, /metrics, /pool.\n"
	      "\n"
	      "  --policy FILE      the policy (reloaded when it changes; a bad new\n"
	      "                     policy is refused and the old one kept)\n"
	      "  --tls-cert FILE    PEM certificate chain (reloaded when it changes)\n"
	      "  --tls-key FILE     PEM private key\n"
	      "  --listen HOST:PORT numeric address and port (default 0.0.0.0:8443;\n"
	      "                     IPv6 as [::]:8443; port 0 picks a free port)\n"
	      "  --kubeconfig FILE  keep quota usage true from this Kubernetes API\n"
	      "                     (list and watch of Pods, Jobs, DRA\n"
	      "                     ResourceClaims and Nodes: the pool); inside a pod\n"
	      "                     the service account is used without this flag\n"
	      "  --embedded         no API even in a pod: usage is what this process\n"
	      "                     admitted, released by DELETE admissions\n"
	      "  --threads N        worker threads (default: one per CPU)\n"
	      "  --log-level LEVEL  debug, info, warn or error (default info)\n"
	      "  --log-format F     logfmt (default) or json: one JSON object per\n"
	      "                     line, keys ts, level, msg and the fields; every\n"
	      "                     line on stderr, start-up errors included\n"
	      "  --conn-timeout S   close a connection idle or stalled for S seconds\n"
	      "                     (default 30)\n"
	      "  --max-conns N      connections at most (default 1024)\n"
	      "  --max-conns-per-ip N  from one address at most (default 256)\n"
	      "  --reservation-ttl S  with the API: drop a quota reservation made at\n"
	      "                     /validate when its object has not shown up in the\n"
	      "                     watch after S seconds of the watch being connected\n"
	      "                     (default 60; the create failed)\n"
	      "  --usage-store S    with the API: memory (this replica's ledger, the\n"
	      "                     default: one replica; it decides quota only while\n"
	      "                     it holds Lease gpugate-memory of --namespace),\n"
	      "                     leader (several replicas, the chart's default:\n"
	      "                     the holder of that Lease decides quota in memory\n"
	      "                     and the others forward to it over HTTPS) or\n"
	      "                     shared (reservations shared by all replicas\n"
	      "                     through ConfigMaps of --namespace, a Lease there\n"
	      "                     choosing who cleans up; quota is denied while\n"
	      "                     the API cannot be reached)\n"
	      "  --namespace NS     gpugate's namespace (default: $POD_NAMESPACE, else\n"
	      "                     gpugate)\n"
	      "  --peer-address HOST:PORT  --usage-store leader: where the other\n"
	      "                     replicas reach this one (default: $POD_IP, else\n"
	      "                     the --listen host unless 0.0.0.0 or ::, else\n"
	      "                     127.0.0.1; and the port listened on)\n"
	      "  --identity NAME    this replica (default: $POD_NAME, else the host\n"
	      "                     name)\n"
	      "  --waiting-reason-after S  with the API: say why a GPU pod waits for a\n"
	      "                     node (an Event, reason GPUWaiting) once it has\n"
	      "                     waited S seconds (default 60; 0: never)\n"
	      "  --no-gpuclasses    with the API: do not keep a GPUClass object per\n"
	      "                     class (kubectl get gpuclasses; kept by default\n"
	      "                     once the gpuclasses.gpugate.io CRD is installed,\n"
	      "                     by the Lease holder with --usage-store shared)\n"
	      "  --no-gpuquotas     with the API: do not keep a GPUQuota object per\n"
	      "                     tenant namespace (kubectl get gpuquota -n NS;\n"
	      "                     kept by default once the gpuquotas.gpugate.io\n"
	      "                     CRD is installed, by the Lease holder)\n"
	      "  --no-node-health   with the API: do not put gpugate's taint and record\n"
	      "                     on a node out for health (another gpugate of the\n"
	      "                     same cluster does); the pool excludes it anyway\n"
	      "  --prometheus-url URL  with the API: the cluster's Prometheus\n"
	      "                     (http:// or https://), read for GPU utilization\n"
	      "                     (dcgm-exporter): idle GPUs, the policy's idle\n"
	      "                     rules, gpugate_gpu_busy_seconds_total; without it\n"
	      "                     nothing is ever idle\n"
	      "  --prometheus-bearer-token-file FILE  sent as a bearer token to\n"
	      "                     Prometheus, re-read on every query (a projected\n"
	      "                     token rotates); default: none\n"
	      "  --prometheus-ca FILE  PEM CA that Prometheus' certificate is checked\n"
	      "                     with (default: the system's CAs)\n"
	      "  --idle-interval S  seconds between the idle rounds (default 60;\n"
	      "                     10..3600)\n"
	      "\n"
	      "SIGTERM or SIGINT: stop accepting, finish requests in progress, exit 0.\n"
	      "SIGHUP: reload the policy and certificate now.\n",
	      out);
}

/* --peer-address: "HOST:PORT" or "[V6]:PORT", a host of name characters
 * (letters, digits, '.', '-', ':' inside brackets), a port 1..65535. */
static bool peer_address_ok(const char *s)
{
	const char *colon = strrchr(s, ':'), *h = s, *end;
	unsigned long port;
	char *pend;

	if (!colon || colon == s || strlen(s) > 300)
		return false;
	end = colon;
	if (*h == '[') {
		if (colon[-1] != ']' || colon - s < 3)
			return false;
		h++;
		end = colon - 1;
	}
	for (const char *c = h; c < end; c++)
		if (!(isalnum((unsigned char)*c) || *c == '.' || *c == '-' ||
		      (*c == ':' && s[0] == '[')))
			return false;
	port = strtoul(colon + 1, &pend, 10);
	return colon[1] && !*pend && port >= 1 && port <= 65535 && end > h;
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

/*
 * Tests only, in no --help and no doc but tests/integration/README.md:
 * $GPUGATE_TEST_ROUND_MS, the ms between the rounds of the controllers
 * that take it (daemon_config.round_ms), so that an integration test
 * waits a few rounds of 200 ms, not of 2 s.  Said at start when set.
 */
static int test_round_ms(unsigned *out)
{
	const char *v = getenv("GPUGATE_TEST_ROUND_MS");
	char q[128];

	if (!v || !v[0])
		return 0;
	if (parse_count(v, 10, 60000, out) < 0) {
		log_event(LOG_ERROR, "msg=\"not starting\" error=\"GPUGATE_TEST_ROUND_MS "
				     "must be 10..60000 (ms)\" value=\"%s\"",
			  log_quote(v, q, sizeof(q)));
		return -1;
	}
	log_event(LOG_WARN, "msg=\"a test setting: controller rounds every %u ms\" "
			    "env=GPUGATE_TEST_ROUND_MS", *out);
	return 0;
}

/* A bad command line (cli/args.h words it): one log line, in --log-format
 * like every other. */
void cmd_serve_report(const char *msg)
{
	char q[512];

	log_event(LOG_ERROR, "msg=\"not starting\" error=\"gpugate serve: %s\" "
			     "hint=\"gpugate serve --help lists the flags\"",
		  log_quote(msg, q, sizeof(q)));
}

/* The values of --log-level and --usage-store, in the order of levels and
 * stores below. */
static const char *const log_levels[] = {"debug", "info", "warn", "error", NULL};
static const enum log_level log_level_of[] = {LOG_DEBUG, LOG_INFO, LOG_WARN,
					      LOG_ERROR};
static const char *const usage_stores[] = {"memory", "shared", "leader", NULL};
/* For completion; log_format_parse() decides (scan_log_format()). */
static const char *const log_formats[] = {"logfmt", "json", NULL};

const struct args_opt cmd_serve_opts[] = {
	{"policy", 0, 'p', ARGS_FILE, NULL},
	{"tls-cert", 0, 'c', ARGS_FILE, NULL},
	{"tls-key", 0, 'k', ARGS_FILE, NULL},
	{"listen", 0, 'l', ARGS_WORD, NULL},
	{"kubeconfig", 0, 'K', ARGS_FILE, NULL},
	{"embedded", 0, 'E', ARGS_NONE, NULL},
	{"threads", 0, 't', ARGS_WORD, NULL},
	{"log-level", 0, 'L', ARGS_CHOICE, log_levels},
	{"log-format", 0, 'F', ARGS_CHOICE, log_formats},
	{"conn-timeout", 0, 'T', ARGS_WORD, NULL},
	{"max-conns", 0, 'M', ARGS_WORD, NULL},
	{"max-conns-per-ip", 0, 'I', ARGS_WORD, NULL},
	{"reservation-ttl", 0, 'R', ARGS_WORD, NULL},
	{"usage-store", 0, 'U', ARGS_CHOICE, usage_stores},
	{"namespace", 0, 'N', ARGS_WORD, NULL},
	{"identity", 0, 'D', ARGS_WORD, NULL},
	{"peer-address", 0, 'A', ARGS_WORD, NULL},
	{"waiting-reason-after", 0, 'W', ARGS_WORD, NULL},
	{"no-gpuclasses", 0, 'G', ARGS_NONE, NULL},
	{"no-gpuquotas", 0, 'Q', ARGS_NONE, NULL},
	{"no-node-health", 0, 'H', ARGS_NONE, NULL},
	{"prometheus-url", 0, 'P', ARGS_WORD, NULL},
	{"prometheus-bearer-token-file", 0, 'B', ARGS_FILE, NULL},
	{"prometheus-ca", 0, 'C', ARGS_FILE, NULL},
	{"idle-interval", 0, 'V', ARGS_WORD, NULL},
	{"help", 'h', 'h', ARGS_NONE, NULL},
	{NULL, 0, 0, ARGS_NONE, NULL},
};

/*
 * --log-format before anything else, so that an error in any flag, even
 * one before it, is said in that format; and whether --help was asked.
 * Returns the value when it is not a format (the log stays logfmt).
 */
static const char *scan_log_format(int argc, char **argv, bool *help)
{
	enum log_format f = LOG_FORMAT_LOGFMT;
	const char *value = NULL;

	*help = false;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0)
			break;
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			*help = true;
		else if (strncmp(argv[i], "--log-format=", 13) == 0)
			value = argv[i] + 13;
		else if (strcmp(argv[i], "--log-format") == 0 && i + 1 < argc)
			value = argv[++i];
	}
	if (value && log_format_parse(value, &f) < 0)
		return value;
	log_set_format(f);
	return NULL;
}

static int format_error(const char *value)
{
	char msg[200];

	snprintf(msg, sizeof(msg), "--log-format must be logfmt or json (got \"%.60s\")",
		 value);
	cmd_serve_report(msg);
	return ARGS_USAGE_ERROR;
}

int cmd_serve(const struct args_call *call, int argc, char **argv)
{
	struct daemon_config cfg = {.api = DAEMON_API_AUTO,
				    .reservation_ttl_s =
					    DAEMON_RESERVATION_TTL_S_DEFAULT,
				    .waiting_after_s = DAEMON_WAITING_AFTER_S_DEFAULT};
	const char *listen = "0.0.0.0:8443";
	bool embedded = false;
	const char *bad_format;
	char host[64];
	struct args args;
	bool help;
	int c, i;

	bad_format = scan_log_format(argc, argv, &help);
	/* The first line says which build this is (before any error). */
	if (!help)
		log_event(LOG_INFO, "msg=\"gpugate starting\" version=%s revision=%s",
			  version_string(), version_revision());
	if (bad_format)
		return format_error(bad_format);
	args_init(&args, call->self);
	while ((c = args_next(&args, argc, argv)) != -1) {
		switch (c) {
		case 'p':
			cfg.policy_path = optarg;
			break;
		case 'c':
			cfg.cert_path = optarg;
			break;
		case 'k':
			cfg.key_path = optarg;
			break;
		case 'l':
			listen = optarg;
			break;
		case 'K':
			cfg.kubeconfig = optarg;
			break;
		case 'E':
			embedded = true;
			break;
		case 't':
			if (parse_count(optarg, 1, 256, &cfg.threads) < 0)
				return args_usage_error(args.cmd, "--threads must be 1..256");
			break;
		case 'T':
			if (parse_count(optarg, 1, 3600, &cfg.conn_timeout) < 0)
				return args_usage_error(args.cmd, "--conn-timeout must be 1..3600 seconds");
			break;
		case 'M':
			if (parse_count(optarg, 1, 65536, &cfg.conn_limit) < 0)
				return args_usage_error(args.cmd, "--max-conns must be 1..65536");
			break;
		case 'I':
			if (parse_count(optarg, 1, 65536, &cfg.per_ip_limit) < 0)
				return args_usage_error(args.cmd, "--max-conns-per-ip must be 1..65536");
			break;
		case 'R':
			if (parse_count(optarg, 1, 86400, &cfg.reservation_ttl_s) < 0)
				return args_usage_error(args.cmd, "--reservation-ttl must be 1..86400 "
						   "seconds");
			break;
		case 'W':
			if (strcmp(optarg, "0") == 0)
				cfg.waiting_after_s = 0;
			else if (parse_count(optarg, 1, 86400, &cfg.waiting_after_s) < 0)
				return args_usage_error(args.cmd, "--waiting-reason-after must be 0..86400 "
						   "seconds");
			break;
		case 'U':
			i = args_choice(&args, 'U', optarg);
			if (i < 0)
				return ARGS_USAGE_ERROR;
			cfg.shared_usage = strcmp(usage_stores[i], "shared") == 0;
			cfg.leader_usage = strcmp(usage_stores[i], "leader") == 0;
			break;
		case 'G':
			cfg.no_gpuclasses = true;
			break;
		case 'Q':
			cfg.no_gpuquotas = true;
			break;
		case 'H':
			cfg.no_node_health = true;
			break;
		case 'P':
			if (strncmp(optarg, "http://", 7) != 0 &&
			    strncmp(optarg, "https://", 8) != 0)
				return args_usage_error(args.cmd, "--prometheus-url must be "
						   "http://HOST:PORT or https://HOST:PORT "
						   "(got '%.60s')", optarg);
			cfg.prometheus_url = optarg;
			break;
		case 'B':
			cfg.prometheus_token_file = optarg;
			break;
		case 'C':
			cfg.prometheus_ca = optarg;
			break;
		case 'V':
			if (parse_count(optarg, 10, 3600, &cfg.idle_interval_s) < 0)
				return args_usage_error(args.cmd, "--idle-interval must be 10..3600 "
						   "seconds");
			break;
		case 'N':
			cfg.namespace = optarg;
			break;
		case 'D':
			cfg.identity = optarg;
			break;
		case 'A':
			if (!peer_address_ok(optarg))
				return args_usage_error(args.cmd, "--peer-address must be HOST:PORT "
						   "(e.g. 10.0.0.5:8443 or [fd00::5]:8443)");
			cfg.peer_address = optarg;
			break;
		case 'L':
			i = args_choice(&args, 'L', optarg);
			if (i < 0)
				return ARGS_USAGE_ERROR;
			log_set_level(log_level_of[i]);
			break;
		case 'F': {
			/* Set by scan_log_format() already, unless getopt took
			 * an abbreviation (--log-f json). */
			enum log_format f;

			if (log_format_parse(optarg, &f) < 0)
				return format_error(optarg);
			log_set_format(f);
			break;
		}
		case 'h':
			cmd_serve_usage(stdout);
			return 0;
		default:
			return ARGS_USAGE_ERROR;
		}
	}
	if (optind < argc)
		return args_usage_error(args.cmd, "unexpected argument '%.60s'",
					argv[optind]);
	if (!cfg.policy_path || !cfg.cert_path || !cfg.key_path)
		return args_usage_error(args.cmd, "--policy, --tls-cert and --tls-key are required");
	if (cfg.kubeconfig && embedded)
		return args_usage_error(args.cmd, "--kubeconfig and --embedded exclude each other");
	if (cfg.shared_usage && embedded)
		return args_usage_error(args.cmd, "--usage-store shared needs the API, not --embedded");
	if (cfg.leader_usage && embedded)
		return args_usage_error(args.cmd, "--usage-store leader needs the API, not --embedded");
	if (cfg.peer_address && !cfg.leader_usage)
		return args_usage_error(args.cmd, "--peer-address needs --usage-store leader");
	if ((cfg.prometheus_token_file || cfg.prometheus_ca) && !cfg.prometheus_url)
		return args_usage_error(args.cmd, "--prometheus-bearer-token-file and "
				   "--prometheus-ca need --prometheus-url");
	if (cfg.prometheus_url && embedded)
		return args_usage_error(args.cmd, "--prometheus-url needs the API, not "
				   "--embedded");
	if (!cfg.namespace)
		cfg.namespace = getenv("POD_NAMESPACE");
	if (!cfg.identity)
		cfg.identity = getenv("POD_NAME");
	if (test_round_ms(&cfg.round_ms) < 0)
		return ARGS_USAGE_ERROR;
	if (parse_listen(listen, host, sizeof(host), &cfg.port) < 0)
		return args_usage_error(args.cmd, "--listen must be HOST:PORT (e.g. 0.0.0.0:8443 or "
				   "[::]:8443)");
	cfg.host = host;
	if (cfg.kubeconfig)
		cfg.api = DAEMON_API_KUBECONFIG;
	else if (embedded)
		cfg.api = DAEMON_API_NONE;
	return daemon_run(&cfg);
}
