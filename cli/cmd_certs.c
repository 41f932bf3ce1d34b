/* gpugate certs: write a CA and a serving certificate, print the caBundle. */
#include "base/diag.h"
#include "certs/certs.h"
#include "cli/cmd.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define DEFAULT_DAYS 365
#define DEFAULT_DNS  "localhost"
#define DEFAULT_IP   "127.0.0.1"

void cmd_certs_usage(FILE *out)
{
	fputs(
	    "usage: gpugate certs --out DIR [--dns NAME]... [--ip ADDR]... "
	    "[--days N] [--new-ca]\n"
	    "\n"
	    "Writes a CA (ca.crt, ca.key) and a serving certificate signed by "
	    "it\n"
	    "(tls.crt, tls.key) into DIR, all PEM with ECDSA P-256 keys, and\n"
	    "prints the CA as the base64 caBundle of the webhook "
	    "configuration:\n"
	    "the only line on stdout.  A CA already in DIR is reused, so\n"
	    "rotating the serving certificate keeps the caBundle.\n"
	    "\n"
	    "  --out DIR     where to write (created if missing); keys are "
	    "0600\n"
	    "  --dns NAME    a DNS name for the certificate, e.g.\n"
	    "                gpugate.gpugate-system.svc (repeatable)\n"
	    "  --ip ADDR     an IPv4 or IPv6 address for it (repeatable)\n"
	    "                neither given: --dns localhost --ip 127.0.0.1\n"
	    "  --days N      validity of the serving certificate, 1 to 3650\n"
	    "                (default 365); the CA gets 10 years\n"
	    "  --new-ca      replace the CA in DIR: the caBundle changes\n"
	    "  -h, --help    show this help\n"
	    "\n"
	    "Exit status: 0 written, 1 failure, 2 usage error.\n",
	    out);
}

/* A whole number within 1..CERTS_MAX_DAYS, or -1. */
static int parse_days(const char *s)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < CERTS_MIN_DAYS ||
	    v > CERTS_MAX_DAYS)
		return -1;
	return (int)v;
}

static bool exists(const char *dir, const char *name)
{
	char path[PATH_MAX];
	struct stat st;
	int n = snprintf(path, sizeof(path), "%s/%s", dir, name);

	return n > 0 && (size_t)n < sizeof(path) && stat(path, &st) == 0;
}

static void fmt_utc(time_t t, char *out, size_t outsz)
{
	struct tm tm;

	if (!gmtime_r(&t, &tm) ||
	    strftime(out, outsz, "%Y-%m-%d %H:%M:%S UTC", &tm) == 0)
		snprintf(out, outsz, "@%lld", (long long)t);
}

/*
 * Reads back what was written: the pairs must check out now, and their
 * validity goes into the notes.
 */
static int report(const struct certs_request *req, bool had_ca,
		  const char *bundle_path, struct diag *d)
{
	char ca_key[PATH_MAX], crt[PATH_MAX], key[PATH_MAX], until[64];
	struct certs_info info;
	time_t now = time(NULL);

	snprintf(ca_key, sizeof(ca_key), "%s/%s", req->out_dir, CERTS_CA_KEY);
	if (certs_check_pair(bundle_path, ca_key, now, &info, d) < 0)
		return -1;
	fmt_utc(info.not_after, until, sizeof(until));
	if (had_ca && !req->new_ca)
		fprintf(stderr,
			"reused the CA in %s (valid until %s); the caBundle is "
			"unchanged\n",
			req->out_dir, until);
	else if (had_ca)
		fprintf(stderr,
			"replaced the CA in %s (valid until %s); the caBundle "
			"changed: update the webhook configuration\n",
			req->out_dir, until);
	else
		fprintf(stderr, "created a new CA in %s (valid until %s)\n",
			req->out_dir, until);

	snprintf(crt, sizeof(crt), "%s/%s", req->out_dir, CERTS_TLS_CRT);
	snprintf(key, sizeof(key), "%s/%s", req->out_dir, CERTS_TLS_KEY);
	if (certs_check_pair(crt, key, now, &info, d) < 0)
		return -1;
	fmt_utc(info.not_after, until, sizeof(until));
	fprintf(stderr, "wrote %s and %s (%s, valid until %s, SANs: ", crt, key,
		info.subject, until);
	for (size_t i = 0; i < req->n_dns; i++)
		fprintf(stderr, "%sDNS:%s", i ? ", " : "", req->dns[i]);
	for (size_t i = 0; i < req->n_ips; i++)
		fprintf(stderr, "%sIP:%s", i || req->n_dns ? ", " : "",
			req->ips[i]);
	fputs(")\n", stderr);
	return 0;
}

static int run(const struct certs_request *req)
{
	static const char *const default_dns[] = {DEFAULT_DNS};
	static const char *const default_ips[] = {DEFAULT_IP};
	struct certs_request r = *req;
	char ca_crt[PATH_MAX];
	char *bundle = NULL;
	struct diag d;
	bool had_ca;
	int n, status = 1;

	diag_init(&d);
	if (r.n_dns + r.n_ips == 0) {
		r.dns = default_dns;
		r.n_dns = 1;
		r.ips = default_ips;
		r.n_ips = 1;
	}
	if (certs_request_check(&r, &d) < 0) {
		fputs(diag_text(&d), stderr);
		return 2;
	}
	n = snprintf(ca_crt, sizeof(ca_crt), "%s/%s", r.out_dir, CERTS_CA_CRT);
	if (n < 0 || (size_t)n >= sizeof(ca_crt)) {
		fprintf(stderr, "%s: path too long\n", r.out_dir);
		return 1;
	}
	/* Only for the note: certs_generate decides for itself. */
	had_ca =
	    exists(r.out_dir, CERTS_CA_CRT) && exists(r.out_dir, CERTS_CA_KEY);
	if (certs_generate(&r, &d) < 0 || report(&r, had_ca, ca_crt, &d) < 0 ||
	    certs_ca_bundle(ca_crt, &bundle, &d) < 0) {
		fputs(diag_text(&d), stderr);
		goto out;
	}
	if (puts(bundle) == EOF || fflush(stdout) == EOF) {
		fprintf(stderr,
			"gpugate certs: cannot write the caBundle to "
			"stdout: %s\n",
			strerror(errno));
		goto out;
	}
	status = 0;
out:
	free(bundle);
	return status;
}

enum { OPT_OUT = 256, OPT_DNS, OPT_IP, OPT_DAYS, OPT_NEW_CA };

const struct args_opt cmd_certs_opts[] = {
	{"out", 0, OPT_OUT, ARGS_DIR, NULL},
	{"dns", 0, OPT_DNS, ARGS_WORD, NULL},
	{"ip", 0, OPT_IP, ARGS_WORD, NULL},
	{"days", 0, OPT_DAYS, ARGS_WORD, NULL},
	{"new-ca", 0, OPT_NEW_CA, ARGS_NONE, NULL},
	{"help", 'h', 'h', ARGS_NONE, NULL},
	{NULL, 0, 0, ARGS_NONE, NULL},
};

int cmd_certs(const struct args_call *call, int argc, char **argv)
{
	struct args args;
	struct certs_request req = {.days = DEFAULT_DAYS};
	const char **dns = NULL, **ips = NULL;
	size_t n_dns = 0, n_ips = 0;
	int c, status = 2;

	/* Each option takes one argv slot at least: argc bounds both lists. */
	dns = calloc((size_t)argc + 1, sizeof(*dns));
	ips = calloc((size_t)argc + 1, sizeof(*ips));
	if (!dns || !ips) {
		fprintf(stderr, "gpugate certs: out of memory\n");
		status = 1;
		goto out;
	}
	args_init(&args, call->self);
	while ((c = args_next(&args, argc, argv)) != -1) {
		switch (c) {
		case OPT_OUT:
			req.out_dir = optarg;
			break;
		case OPT_DNS:
			dns[n_dns++] = optarg;
			break;
		case OPT_IP:
			ips[n_ips++] = optarg;
			break;
		case OPT_DAYS:
			req.days = parse_days(optarg);
			if (req.days < 0) {
				args_usage_error(args.cmd,
						 "invalid --days \"%.60s\" (expected a "
						 "whole number from %d to %d)",
						 optarg, CERTS_MIN_DAYS, CERTS_MAX_DAYS);
				goto out;
			}
			break;
		case OPT_NEW_CA:
			req.new_ca = true;
			break;
		case 'h':
			cmd_certs_usage(stdout);
			status = 0;
			goto out;
		default:
			goto out;
		}
	}
	if (optind < argc) {
		args_usage_error(args.cmd, "unexpected argument \"%.60s\"",
				 argv[optind]);
		goto out;
	}
	if (!req.out_dir || !*req.out_dir) {
		args_usage_error(args.cmd, "no output directory given (--out DIR)");
		goto out;
	}
	req.dns = dns;
	req.n_dns = n_dns;
	req.ips = ips;
	req.n_ips = n_ips;
	status = run(&req);
out:
	free(dns);
	free(ips);
	return status;
}
