/*
 * What the watch derives from cluster objects (webhook/watch.c watch_item)
 * and how it reads kubeconfigs (webhook/kube.c).  The list/watch loop
 * itself runs against a scripted fake API in tests/integration/test_watch.py
 * and against a real kube-apiserver in tests/e2e.
 */
#include "base/arena.h"
#include "base/diag.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/watch.h"
#include "policy/policy.h"
#include "usage/usage.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char policy_yaml[] =
	"version: 1\n"
	"flavors:\n"
	"  - {name: h100, resource: nvidia.com/gpu, sharing: exclusive,\n"
	"     nodeSelector: [\"gpu=h100\"], gpusPerNode: 8}\n"
	"  - {name: a100, resource: nvidia.com/gpu, sharing: exclusive,\n"
	"     nodeSelector: [\"gpu=a100\"], gpusPerNode: 8}\n"
	"classes: []\n"
	"tenants:\n"
	"  - {name: research, namespaces: [research],\n"
	"     quota: [{flavor: h100, nominal: 8}, {flavor: a100, nominal: 8}]}\n";

static struct policy *P;

static void setup(void)
{
	struct diag d;

	diag_init(&d);
	cr_assert_eq(policy_parse("t.yaml", policy_yaml, strlen(policy_yaml), &P, &d),
		     0, "%s", diag_text(&d));
}

static void teardown(void)
{
	policy_free(P);
}

TestSuite(watch, .init = setup, .fini = teardown);

static void item_of(const char *json, bool job, struct usage_item *it,
		    struct arena *a, json_t **keep)
{
	json_error_t e;

	*keep = json_loads(json, 0, &e);
	cr_assert_not_null(*keep, "%s", e.text);
	arena_init(a);
	cr_assert_eq(watch_item(P, *keep, job, a, it), 0);
}

Test(watch, a_running_pod_holds_its_units)
{
	struct usage_item it;
	struct arena a;
	json_t *obj;

	item_of("{\"metadata\":{\"uid\":\"u1\",\"namespace\":\"research\",\"name\":"
		"\"p\",\"labels\":{\"gpugate.io/flavor\":\"a100\"}},\"spec\":{"
		"\"nodeSelector\":{\"gpu\":\"h100\"},\"containers\":[{\"name\":\"a\","
		"\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"2\"}}},{\"name\":\"b\","
		"\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]},\"status\":"
		"{\"phase\":\"Running\"}}",
		false, &it, &a, &obj);
	cr_assert(it.active);
	cr_assert_str_eq(it.uid, "u1");
	cr_assert_str_eq(it.tenant, "research");
	cr_assert_str_eq(it.flavor, "h100",
			 "the node selector decides, not the (forgeable) label");
	cr_assert_eq(it.units, 3);
	arena_release(&a);
	json_decref(obj);
}

Test(watch, terminal_pods_hold_nothing)
{
	static const char *const phases[] = {"Succeeded", "Failed"};

	for (size_t i = 0; i < 2; i++) {
		char json[512];
		struct usage_item it;
		struct arena a;
		json_t *obj;

		snprintf(json, sizeof(json),
			 "{\"metadata\":{\"uid\":\"u\",\"namespace\":\"research\"},"
			 "\"spec\":{\"nodeSelector\":{\"gpu\":\"a100\"},\"containers\":"
			 "[{\"name\":\"a\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":"
			 "\"1\"}}}]},\"status\":{\"phase\":\"%s\"}}",
			 phases[i]);
		item_of(json, false, &it, &a, &obj);
		cr_assert_not(it.active, "%s", phases[i]);
		cr_assert_str_eq(it.flavor, "a100");
		arena_release(&a);
		json_decref(obj);
	}
}

Test(watch, a_job_holds_its_gang_until_it_finishes)
{
	struct usage_item it;
	struct arena a;
	json_t *obj;

	item_of("{\"metadata\":{\"uid\":\"j\",\"namespace\":\"research\"},\"spec\":"
		"{\"parallelism\":3,\"template\":{\"spec\":{\"nodeSelector\":{\"gpu\":"
		"\"h100\"},\"containers\":[{\"name\":\"a\",\"resources\":{\"limits\":"
		"{\"nvidia.com/gpu\":\"2\"}}}]}}}}",
		true, &it, &a, &obj);
	cr_assert(it.active);
	cr_assert(it.is_job);
	cr_assert_eq(it.units, 6);
	arena_release(&a);
	json_decref(obj);
	item_of("{\"metadata\":{\"uid\":\"j\",\"namespace\":\"research\"},\"spec\":"
		"{\"parallelism\":3,\"template\":{\"spec\":{\"containers\":[{\"name\":"
		"\"a\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"2\"}}}]}}},"
		"\"status\":{\"conditions\":[{\"type\":\"Complete\",\"status\":\"True\"}]}}",
		true, &it, &a, &obj);
	cr_assert_not(it.active);
	arena_release(&a);
	json_decref(obj);
	item_of("{\"metadata\":{\"uid\":\"j\",\"namespace\":\"research\"},\"spec\":"
		"{\"suspend\":true,\"template\":{\"spec\":{\"containers\":[{\"name\":"
		"\"a\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"2\"}}}]}}}}",
		true, &it, &a, &obj);
	cr_assert(it.active, "a suspended Job keeps its gang: resuming is not judged");
	cr_assert_eq(it.units, 2);
	arena_release(&a);
	json_decref(obj);
}

Test(watch, outside_tenants_or_without_gpus_nothing_is_held)
{
	struct usage_item it;
	struct arena a;
	json_t *obj;

	item_of("{\"metadata\":{\"uid\":\"u\",\"namespace\":\"web\"},\"spec\":"
		"{\"containers\":[{\"name\":\"a\",\"resources\":{\"limits\":"
		"{\"nvidia.com/gpu\":\"1\"}}}]}}",
		false, &it, &a, &obj);
	cr_assert_not(it.active);
	arena_release(&a);
	json_decref(obj);
	item_of("{\"metadata\":{\"uid\":\"u\",\"namespace\":\"research\"},\"spec\":"
		"{\"containers\":[{\"name\":\"a\"}]}}",
		false, &it, &a, &obj);
	cr_assert_not(it.active);
	arena_release(&a);
	json_decref(obj);
}

Test(watch, objects_without_uid_are_refused)
{
	json_t *obj = json_loads("{\"metadata\":{}}", 0, NULL);
	struct usage_item it;
	struct arena a;

	arena_init(&a);
	cr_assert_eq(watch_item(P, obj, false, &a, &it), -1);
	arena_release(&a);
	json_decref(obj);
}

/* ---- kubeconfig --------------------------------------------------------- */

static char tmpdir[64];

static void write_file(const char *name, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
}

static void mktmp(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/gpugate-kube-XXXXXX");
	cr_assert_not_null(mkdtemp(tmpdir));
}

static void rmtmp(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	cr_assert_eq(system(cmd), 0);
}

Test(watch, reads_a_kubeconfig_with_client_certificates)
{
	struct kube_config c;
	struct diag d;
	char path[256];

	mktmp();
	write_file("ca.crt", "CA-PEM\n");
	write_file("config",
		   "apiVersion: v1\nkind: Config\ncurrent-context: admin\n"
		   "clusters:\n- name: local\n  cluster:\n"
		   "    server: https://127.0.0.1:6443/\n"
		   "    certificate-authority: ca.crt\n"
		   "users:\n- name: admin\n  user:\n"
		   "    client-certificate-data: Q0VSVA==\n"   /* CERT */
		   "    client-key-data: S0VZ\n"               /* KEY */
		   "contexts:\n- name: other\n  context: {cluster: nope, user: nope}\n"
		   "- name: admin\n  context: {cluster: local, user: admin}\n");
	snprintf(path, sizeof(path), "%s/config", tmpdir);
	diag_init(&d);
	cr_assert_eq(kube_config_load(path, &c, &d), 0, "%s", diag_text(&d));
	cr_assert_str_eq(c.server, "https://127.0.0.1:6443");
	cr_assert_str_eq(c.ca_pem, "CA-PEM\n", "relative to the kubeconfig");
	cr_assert_str_eq(c.cert_pem, "CERT");
	cr_assert_str_eq(c.key_pem, "KEY");
	cr_assert_null(c.token);
	cr_assert_not(c.insecure);
	kube_config_release(&c);
	rmtmp();
}

Test(watch, reads_a_kubeconfig_with_a_token)
{
	struct kube_config c;
	struct diag d;
	char path[256];

	mktmp();
	write_file("config",
		   "current-context: c\nclusters:\n- name: k\n  cluster:\n"
		   "    server: https://k.example:443\n"
		   "    insecure-skip-tls-verify: true\n"
		   "users:\n- name: u\n  user: {token: abc123}\n"
		   "contexts:\n- name: c\n  context: {cluster: k, user: u}\n");
	snprintf(path, sizeof(path), "%s/config", tmpdir);
	diag_init(&d);
	cr_assert_eq(kube_config_load(path, &c, &d), 0, "%s", diag_text(&d));
	cr_assert_str_eq(c.token, "abc123");
	cr_assert(c.insecure);
	cr_assert_null(c.ca_pem);
	kube_config_release(&c);
	rmtmp();
}

Test(watch, kubeconfig_errors)
{
	static const struct {
		const char *yaml;
		const char *error;
	} cases[] = {
		{"clusters: []\n", "no current-context (or it names no context)"},
		{"current-context: c\ncontexts:\n- {name: c, context: {cluster: x}}\n",
		 "context \"c\" names no cluster"},
		{"current-context: c\ncontexts:\n- {name: c, context: {cluster: k}}\n"
		 "clusters:\n- {name: k, cluster: {server: \"http://plain:80\"}}\n",
		 "cluster \"k\" has no https server"},
		{"current-context: c\ncontexts:\n- {name: c, context: {cluster: k, "
		 "user: u}}\nclusters:\n- {name: k, cluster: {server: \"https://k\"}}\n"
		 "users:\n- {name: u, user: {client-key-data: S0VZ}}\n",
		 "user \"u\" has a client certificate without a key (or a key without a "
		 "certificate)"},
		{"current-context: c\ncontexts:\n- {name: c, context: {cluster: k}}\n"
		 "clusters:\n- {name: k, cluster: {server: \"https://k\", "
		 "certificate-authority-data: \"!!!\"}}\n",
		 "certificate-authority-data is not valid base64"},
	};

	mktmp();
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct kube_config c;
		struct diag d;
		char path[256], want[512];

		write_file("config", cases[i].yaml);
		snprintf(path, sizeof(path), "%s/config", tmpdir);
		snprintf(want, sizeof(want), "%s: %s\n", path, cases[i].error);
		diag_init(&d);
		cr_expect_eq(kube_config_load(path, &c, &d), -1, "case %zu", i);
		cr_expect_str_eq(diag_text(&d), want, "case %zu", i);
	}
	rmtmp();
}

Test(watch, in_cluster_config)
{
	struct kube_config c;
	struct diag d;

	mktmp();
	write_file("ca.crt", "SA-CA\n");
	write_file("token", "tok\n");
	setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "443", 1);
	diag_init(&d);
	cr_assert_eq(kube_config_in_cluster(tmpdir, &c, &d), 0, "%s", diag_text(&d));
	cr_assert_str_eq(c.server, "https://10.96.0.1:443");
	cr_assert_str_eq(c.ca_pem, "SA-CA\n");
	cr_assert_not_null(strstr(c.token_file, "/token"));
	kube_config_release(&c);
	setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
	cr_assert_eq(kube_config_in_cluster(tmpdir, &c, &d), 0);
	cr_assert_str_eq(c.server, "https://[fd00::1]:443");
	kube_config_release(&c);
	unsetenv("KUBERNETES_SERVICE_HOST");
	diag_init(&d);
	cr_assert_eq(kube_config_in_cluster(tmpdir, &c, &d), -1);
	cr_assert_str_eq(diag_text(&d),
			 "not in a cluster: KUBERNETES_SERVICE_HOST and "
			 "KUBERNETES_SERVICE_PORT are not set\n");
	rmtmp();
}

Test(watch, a_dead_api_server_is_an_error_not_a_hang)
{
	struct kube_config c = {.server = (char *)"https://127.0.0.1:1",
				.insecure = true};
	struct kube *k;
	struct diag d;
	long status = 0;
	char *body = NULL;
	size_t len;

	diag_init(&d);
	k = kube_new(&c, &d);
	cr_assert_not_null(k);
	cr_assert_eq(kube_get(k, "/api/v1/pods", 1024, &status, &body, &len, NULL, &d), -1);
	cr_assert_null(body);
	cr_assert_not_null(strstr(diag_text(&d), "GET /api/v1/pods: "), "%s",
			   diag_text(&d));
	kube_free(k);
}
