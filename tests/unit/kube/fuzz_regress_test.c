/*
 * Reproducers of what the fuzz harnesses (tests/fuzz/) found in kube/: the
 * kubeconfig reader.  The input files are kept in the fuzz corpus too
 * (tests/fuzz/corpus/kubeconfig/crash-*), so that tests/fuzz/run.sh
 * replays them.
 */
#include "base/diag.h"
#include "kube/config.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Loads a kubeconfig written to a temporary file. */
static int load_kubeconfig(const char *yaml, struct kube_config *c,
			   struct diag *d)
{
	char dir[] = "/tmp/gpugate-fuzz-regress-XXXXXX", path[64];
	FILE *f;
	int rc;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/config", dir);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	cr_assert_geq(fputs(yaml, f), 0);
	cr_assert_eq(fclose(f), 0);
	diag_init(d);
	rc = kube_config_load(path, c, d);
	unlink(path);
	rmdir(dir);
	return rc;
}

/*
 * tests/fuzz/corpus/kubeconfig/crash-server-trailing-slashes: kube.h says
 * the server has no trailing slash (kube_get() appends paths that start
 * with "/"), but kube_config_load() drops only one: "https://h//" stays
 * "https://h/" and requests go to "https://h//api/...".
 */
Test(fuzz_regress, kubeconfig_server_loses_every_trailing_slash)
{
	struct kube_config c;
	struct diag d;
	char server[64];

	cr_assert_eq(load_kubeconfig("current-context: x\n"
				     "contexts: [{name: x, context: {cluster: c}}]\n"
				     "clusters: [{name: c, cluster: {server: "
				     "\"https://h:6443//\"}}]\n",
				     &c, &d),
		     0, "%s", diag_text(&d));
	snprintf(server, sizeof(server), "%s", c.server);
	kube_config_release(&c); /* before asserting: no leak report */
	cr_assert_str_eq(server, "https://h:6443");
}

/*
 * tests/fuzz/corpus/kubeconfig/crash-server-without-host: "https://" is
 * accepted, and the trailing-slash cut turns it into "https:/", a server
 * that does not even start with "https://".  It has no host: refuse it
 * like a server that is not https.
 */
Test(fuzz_regress, kubeconfig_server_without_host_is_refused)
{
	struct kube_config c;
	struct diag d;
	char server[64] = "";
	int rc;

	rc = load_kubeconfig("current-context: x\n"
			     "contexts: [{name: x, context: {cluster: c}}]\n"
			     "clusters: [{name: c, cluster: {server: "
			     "\"https://\"}}]\n",
			     &c, &d);
	if (rc == 0) {
		snprintf(server, sizeof(server), "%s", c.server);
		kube_config_release(&c); /* before asserting: no leak report */
	}
	cr_assert_eq(rc, -1, "accepted as server \"%s\"", server);
	cr_assert(strstr(diag_text(&d), "cluster \"c\" has no https server"),
		  "%s", diag_text(&d));
}
