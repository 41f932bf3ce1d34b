/*
 * libFuzzer driver for kube_config_load() (kube/config.c): a kubeconfig
 * file, YAML read by codec/yamljson.c, its current context resolved to a
 * server, CA, client certificate and key (inline base64 or files next to
 * the kubeconfig) and a token.
 *
 * kube_config_load() reads a file, so each input is written to
 * DIR/kubeconfig in a private directory made once ($TMPDIR/kubeconfig-
 * fuzz-XXXXXX; run.sh sets TMPDIR inside build/fuzz/work, since a crash
 * leaves the directory behind), next to
 * ca.crt, client.crt, client.key and token files that relative paths in
 * the input may name.  Checks:
 *
 *   - failure: at least one message, and the config all zero (released);
 *   - success: no message, a server that starts with "https://" and does
 *     not end with "/", a source, a certificate exactly when a key;
 *   - kube_config_release() leaves it all zero; no leaks.
 *
 * Absolute paths in the input are read as they are (a fuzzer can name any
 * file; run.sh runs it with stdin from /dev/null so that /dev/stdin never
 * blocks).
 *
 *   tests/fuzz/run.sh 60 kubeconfig
 *   build/fuzz/kubeconfig_fuzz crash-file
 */
#include "base/diag.h"
#include "kube/config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[256];
static char path[300];

static void fail(const char *what)
{
	fprintf(stderr, "fuzz invariant violated: %s\n", what);
	abort();
}

static void put(const char *name, const char *text)
{
	char p[300];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	f = fopen(p, "w");
	if (!f || fputs(text, f) < 0 || fclose(f) != 0)
		fail("cannot write the side files");
}

static void cleanup(void)
{
	static const char *const names[] = {"kubeconfig", "ca.crt", "client.crt",
					    "client.key", "token"};
	char p[300];

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
		unlink(p);
	}
	rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *tmp = getenv("TMPDIR");

	(void)argc;
	(void)argv;
	snprintf(dir, sizeof(dir), "%s/kubeconfig-fuzz-XXXXXX",
		 tmp && tmp[0] ? tmp : "/tmp");
	if (!mkdtemp(dir))
		fail("mkdtemp");
	atexit(cleanup);
	snprintf(path, sizeof(path), "%s/kubeconfig", dir);
	put("ca.crt", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
	put("client.crt", "-----BEGIN CERTIFICATE-----\nMIIC\n-----END CERTIFICATE-----\n");
	put("client.key", "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n");
	put("token", "secret-token\n");
	return 0;
}

static bool all_zero(const struct kube_config *c)
{
	static const struct kube_config zero;

	return memcmp(c, &zero, sizeof(zero)) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct diag d;
	struct kube_config cfg;
	FILE *f = fopen(path, "wb");
	size_t n;

	if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0)
		fail("cannot write the input");
	diag_init(&d);
	if (kube_config_load(path, &cfg, &d) < 0) {
		if (diag_count(&d) == 0)
			fail("refused without a message");
		if (!all_zero(&cfg))
			fail("a refused config is not released");
		return 0;
	}
	if (diag_count(&d) != 0) {
		fprintf(stderr, "%s", diag_text(&d));
		fail("loaded with messages");
	}
	if (!cfg.server || strncmp(cfg.server, "https://", 8) != 0)
		fail("server is not https://");
	n = strlen(cfg.server);
	if (n > 8 && cfg.server[n - 1] == '/')
		fail("server ends with /");
	if (!cfg.source || strcmp(cfg.source, path) != 0)
		fail("source is not the file");
	if (!cfg.cert_pem != !cfg.key_pem)
		fail("a client certificate without a key, or a key without one");
	kube_config_release(&cfg);
	if (!all_zero(&cfg))
		fail("kube_config_release left something behind");
	return 0;
}
