/*
 * The daemon without its command line (daemon/daemon.c): a whole webhook
 * started from a struct daemon_config, asked over HTTPS, reloaded by ticks
 * when its files change, stopped.  The signal loop and the flags are
 * tested through the binary (tests/integration/test_http.py, test_cli.py).
 */
#include "base/diag.h"
#include "base/log.h"
#include "certs/certs.h"
#include "daemon/daemon.h"

#include <criterion/criterion.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define EXAMPLE_POLICY "policy/examples/gpu-cluster.yaml"
#define NOMINAL_LINE "gpugate_quota_nominal{tenant=\"research\",flavor=\"h100-80gb\"} "

static char dir[64], policy[128], ca[128], crt[128], key[128];

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	cr_assert_not_null(f, "%s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = malloc((size_t)n + 1);
	cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* Writes text to path through a new file renamed over it, as a ConfigMap
 * volume update does (a new inode: the daemon must see the change even
 * within one clock tick). */
static void replace_file(const char *path, const char *text)
{
	char tmp[160];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.new", path);
	f = fopen(tmp, "wb");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
	cr_assert_eq(rename(tmp, path), 0);
}

/* The example policy with research's h100-80gb nominal set to n. */
static void write_policy(int n)
{
	char *text = slurp(EXAMPLE_POLICY), *at = strstr(text, "nominal: 32,");
	char *out = malloc(strlen(text) + 16);

	cr_assert_not_null(at);
	*at = '\0';
	sprintf(out, "%snominal: %d,%s", text, n, at + strlen("nominal: 32,"));
	replace_file(policy, out);
	free(out);
	free(text);
}

static void make_certs(bool new_ca)
{
	static const char *const dns[] = {"localhost"};
	static const char *const ips[] = {"127.0.0.1"};
	struct certs_request req = {.out_dir = dir, .dns = dns, .n_dns = 1,
				    .ips = ips, .n_ips = 1, .days = 30,
				    .new_ca = new_ca};
	struct diag d;

	diag_init(&d);
	cr_assert_eq(certs_generate(&req, &d), 0, "%s", diag_text(&d));
}

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/gpugate-daemon-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(policy, sizeof(policy), "%s/policy.yaml", dir);
	snprintf(ca, sizeof(ca), "%s/" CERTS_CA_CRT, dir);
	snprintf(crt, sizeof(crt), "%s/" CERTS_TLS_CRT, dir);
	snprintf(key, sizeof(key), "%s/" CERTS_TLS_KEY, dir);
	write_policy(32);
	make_certs(false);
	log_set_level(LOG_ERROR);
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(daemon, .init = setup, .fini = teardown, .timeout = 60);

struct answer {
	long status;
	char body[1 << 16];
	size_t len;
};

static size_t on_body(char *p, size_t size, size_t n, void *ctx)
{
	struct answer *a = ctx;
	size_t k = size * n;

	if (k > sizeof(a->body) - 1 - a->len)
		k = sizeof(a->body) - 1 - a->len;
	memcpy(a->body + a->len, p, k);
	a->len += k;
	a->body[a->len] = '\0';
	return size * n;
}

/* GET (body NULL) or POST JSON to the daemon; fails the test when no
 * answer comes. */
static void ask(uint16_t port, const char *path, const char *body,
		struct answer *a)
{
	CURL *c = curl_easy_init();
	struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
	char url[128];
	CURLcode rc;

	memset(a, 0, sizeof(*a));
	snprintf(url, sizeof(url), "https://127.0.0.1:%u%s", port, path);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CAINFO, ca);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, a);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
	if (body) {
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	}
	rc = curl_easy_perform(c);
	cr_assert_eq(rc, CURLE_OK, "%s: %s", path, curl_easy_strerror(rc));
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &a->status);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
}

static struct daemon *start(void)
{
	struct daemon_config cfg = {.policy_path = policy, .cert_path = crt,
				    .key_path = key, .host = "127.0.0.1",
				    .threads = 1, .api = DAEMON_API_NONE,
				    .grace_ms = 2000};
	struct daemon *dm;
	struct diag d;

	diag_init(&d);
	cr_assert_eq(daemon_start(&cfg, &dm, &d), 0, "%s", diag_text(&d));
	cr_assert_neq(daemon_port(dm), 0);
	return dm;
}

/* The value of the metric line that starts with prefix, or -1. */
static long metric(uint16_t port, const char *prefix)
{
	struct answer a;
	const char *at;

	ask(port, "/metrics", NULL, &a);
	cr_assert_eq(a.status, 200);
	at = strstr(a.body, prefix);
	return at ? atol(at + strlen(prefix)) : -1;
}

Test(daemon, serves_admissions_health_and_metrics)
{
	struct daemon *dm = start();
	uint16_t port = daemon_port(dm);
	char *review = slurp("examples/review-pod.json");
	struct answer a;

	ask(port, "/healthz", NULL, &a);
	cr_assert_eq(a.status, 200);
	cr_assert_str_eq(a.body, "ok\n");
	ask(port, "/readyz", NULL, &a);
	cr_assert_eq(a.status, 200);
	ask(port, "/mutate", review, &a);
	cr_assert_eq(a.status, 200);
	cr_assert(strstr(a.body, "\"allowed\":true"), "%s", a.body);
	cr_assert(strstr(a.body, "\"patch\":"), "%s", a.body);
	cr_assert_eq(metric(port, NOMINAL_LINE), 32);
	cr_assert_eq(metric(port, "gpugate_certificate_reloads_total{result=\"success\"} "), 0);
	cr_assert_eq(metric(port,
			    "gpugate_admission_requests_total{endpoint=\"mutate\","
			    "kind=\"Pod\",result=\"allowed\"} "),
		     1);
	cr_assert_eq(metric(port, "gpugate_http_worker_requests_total{worker=\"0\"} "),
		     /* healthz, readyz, mutate, four scrapes with this one */ 7);
	cr_assert_eq(metric(port, "gpugate_kube_synced "), -1, "embedded: no API lines");
	free(review);
	daemon_stop(dm);
}

Test(daemon, a_tick_reloads_what_changed_and_keeps_a_good_policy)
{
	struct daemon *dm = start();
	uint16_t port = daemon_port(dm);

	daemon_tick(dm); /* nothing changed */
	cr_assert_eq(metric(port, "gpugate_policy_reloads_total{result=\"success\"} "), 0);
	write_policy(30);
	daemon_tick(dm);
	cr_assert_eq(metric(port, NOMINAL_LINE), 30);
	cr_assert_eq(metric(port, "gpugate_policy_reloads_total{result=\"success\"} "), 1);

	replace_file(policy, "version: 1\nflavors: [\n");
	daemon_tick(dm);
	cr_assert_eq(metric(port, "gpugate_policy_reloads_total{result=\"failure\"} "), 1);
	cr_assert_eq(metric(port, NOMINAL_LINE), 30, "the bad policy is refused");

	make_certs(true); /* a new CA and serving certificate */
	daemon_tick(dm);
	cr_assert_eq(metric(port, "gpugate_certificate_reloads_total{result=\"success\"} "),
		     1);
	daemon_reload(dm); /* SIGHUP: both again (the policy is still bad) */
	cr_assert_eq(metric(port, "gpugate_policy_reloads_total{result=\"failure\"} "), 2);
	cr_assert_eq(metric(port, "gpugate_certificate_reloads_total{result=\"success\"} "),
		     2);
	daemon_stop(dm);
}

Test(daemon, refuses_to_start_and_says_why)
{
	struct daemon_config cfg = {.policy_path = policy, .cert_path = crt,
				    .key_path = key, .host = "127.0.0.1",
				    .api = DAEMON_API_NONE};
	struct daemon *dm = (struct daemon *)&cfg;
	char want[512];
	struct diag d;

	replace_file(policy, "version: 1\nbogus: 1\n");
	diag_init(&d);
	cr_assert_eq(daemon_start(&cfg, &dm, &d), -1);
	cr_assert_null(dm);
	cr_assert(strstr(diag_text(&d), "gpugate serve: the policy is invalid; not "
					"starting\n"),
		  "%s", diag_text(&d));

	write_policy(32);
	cfg.key_path = "/nonexistent/tls.key";
	diag_init(&d);
	cr_assert_eq(daemon_start(&cfg, &dm, &d), -1);
	cr_assert_str_eq(diag_text(&d), "/nonexistent/tls.key: cannot open: No such "
					"file or directory\n");

	cfg.key_path = key;
	cfg.api = DAEMON_API_KUBECONFIG;
	cfg.kubeconfig = "/nonexistent/kubeconfig";
	diag_init(&d);
	cr_assert_eq(daemon_start(&cfg, &dm, &d), -1);
	snprintf(want, sizeof(want), "%s: cannot open: No such file or directory\n",
		 cfg.kubeconfig);
	cr_assert_str_eq(diag_text(&d), want);
}
