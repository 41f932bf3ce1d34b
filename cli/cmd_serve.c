/*
 * gpugate serve: the flags, turned into a struct daemon_config; the daemon
 * (webhook/daemon.c) does the rest.
 */
#include "base/log.h"
#include "base/version.h"
#include "cli/cmd.h"
#include "webhook/daemon.h"

#include <getopt.h>
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
	      "                     [--usage-store memory|shared] [--namespace NS]\n"
	      "                     [--identity NAME] [--waiting-reason-after S]\n"
	      "                     [--no-gpuclasses] [--no-gpuquotas]\n"
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
	      "                     it holds Lease gpugate-memory of --namespace) or\n"
	      "                     shared (reservations shared by all replicas\n"
	      "                     through ConfigMaps of --namespace, a Lease there\n"
	      "                     choosing who cleans up; quota is denied while\n"
	      "                     the API cannot be reached)\n"
	      "  --namespace NS     gpugate's namespace (default: $POD_NAMESPACE, else\n"
	      "                     gpugate)\n"
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
	      "\n"
	      "SIGTERM or SIGINT: stop accepting, finish requests in progress, exit 0.\n"
	      "SIGHUP: reload the policy and certificate now.\n",
	      out);
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

/* A bad command line: one log line, in --log-format like every other. */
static int usage_error(const char *msg)
{
	char q[512];

	log_event(LOG_ERROR, "msg=\"not starting\" error=\"gpugate serve: %s\" "
			     "hint=\"gpugate serve --help lists the flags\"",
		  log_quote(msg, q, sizeof(q)));
	return 2;
}

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
	return usage_error(msg);
}

/* What getopt_long() found wrong (opterr is 0: it says nothing itself). */
static int option_error(int c, char **argv)
{
	char msg[256];
	const char *arg = argv[optind - 1];

	if (c == ':')
		snprintf(msg, sizeof(msg), "option %.100s needs a value", arg);
	else if (optopt && optopt != '?')
		snprintf(msg, sizeof(msg), "unknown option -%c", optopt);
	else
		snprintf(msg, sizeof(msg), "unknown option %.100s", arg);
	return usage_error(msg);
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
		{"log-format", required_argument, NULL, 'F'},
		{"conn-timeout", required_argument, NULL, 'T'},
		{"max-conns", required_argument, NULL, 'M'},
		{"max-conns-per-ip", required_argument, NULL, 'I'},
		{"reservation-ttl", required_argument, NULL, 'R'},
		{"usage-store", required_argument, NULL, 'U'},
		{"namespace", required_argument, NULL, 'N'},
		{"identity", required_argument, NULL, 'D'},
		{"waiting-reason-after", required_argument, NULL, 'W'},
		{"no-gpuclasses", no_argument, NULL, 'G'},
		{"no-gpuquotas", no_argument, NULL, 'Q'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct daemon_config cfg = {.api = DAEMON_API_AUTO,
				    .reservation_ttl_s =
					    DAEMON_RESERVATION_TTL_S_DEFAULT,
				    .waiting_after_s = DAEMON_WAITING_AFTER_S_DEFAULT};
	const char *listen = "0.0.0.0:8443";
	bool embedded = false;
	const char *bad_format;
	char host[64];
	bool help;
	int c;

	bad_format = scan_log_format(argc, argv, &help);
	/* The first line says which build this is (before any error). */
	if (!help)
		log_event(LOG_INFO, "msg=\"gpugate starting\" version=%s revision=%s",
			  version_string(), version_revision());
	if (bad_format)
		return format_error(bad_format);
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
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
			if (parse_count(optarg, 1, 86400, &cfg.reservation_ttl_s) < 0)
				return usage_error("--reservation-ttl must be 1..86400 "
						   "seconds");
			break;
		case 'W':
			if (strcmp(optarg, "0") == 0)
				cfg.waiting_after_s = 0;
			else if (parse_count(optarg, 1, 86400, &cfg.waiting_after_s) < 0)
				return usage_error("--waiting-reason-after must be 0..86400 "
						   "seconds");
			break;
		case 'U':
			if (strcmp(optarg, "shared") == 0)
				cfg.shared_usage = true;
			else if (strcmp(optarg, "memory") != 0)
				return usage_error("--usage-store must be memory or shared");
			break;
		case 'G':
			cfg.no_gpuclasses = true;
			break;
		case 'Q':
			cfg.no_gpuquotas = true;
			break;
		case 'N':
			cfg.namespace = optarg;
			break;
		case 'D':
			cfg.identity = optarg;
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
			return option_error(c, argv);
		}
	}
	if (optind < argc)
		return usage_error("unexpected argument");
	if (!cfg.policy_path || !cfg.cert_path || !cfg.key_path)
		return usage_error("--policy, --tls-cert and --tls-key are required");
	if (cfg.kubeconfig && embedded)
		return usage_error("--kubeconfig and --embedded exclude each other");
	if (cfg.shared_usage && embedded)
		return usage_error("--usage-store shared needs the API, not --embedded");
	if (!cfg.namespace)
		cfg.namespace = getenv("POD_NAMESPACE");
	if (!cfg.identity)
		cfg.identity = getenv("POD_NAME");
	if (parse_listen(listen, host, sizeof(host), &cfg.port) < 0)
		return usage_error("--listen must be HOST:PORT (e.g. 0.0.0.0:8443 or "
				   "[::]:8443)");
	cfg.host = host;
	if (cfg.kubeconfig)
		cfg.api = DAEMON_API_KUBECONFIG;
	else if (embedded)
		cfg.api = DAEMON_API_NONE;
	return daemon_run(&cfg);
}
