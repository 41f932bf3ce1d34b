/*
 * How the Kubernetes client reads kubeconfigs and the in-cluster service
 * account (kube/client.c).
 */
#include "base/diag.h"
#include "kube/config.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

Test(config, reads_a_kubeconfig_with_client_certificates)
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

Test(config, reads_a_kubeconfig_with_a_token)
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

Test(config, kubeconfig_errors)
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

Test(config, in_cluster_config)
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
