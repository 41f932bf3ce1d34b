/* certs_check_pem: the pair a server installs is the pair it checked. */
#include "base/diag.h"
#include "certs/certs.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *slurp(const char *dir, const char *name)
{
	char path[512];
	FILE *f;
	char *buf = calloc(1, 1 << 16);

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "r");
	cr_assert_not_null(f, "%s", path);
	cr_assert_gt(fread(buf, 1, (1 << 16) - 1, f), 0);
	fclose(f);
	return buf;
}

static void make(const char *dir)
{
	static const char *const dns[] = {"localhost"};
	struct certs_request req = {.out_dir = dir, .dns = dns, .n_dns = 1,
				    .days = 30};
	struct diag d;

	diag_init(&d);
	cr_assert_eq(certs_generate(&req, &d), 0, "%s", diag_text(&d));
}

Test(certs_pem, accepts_a_pair_and_refuses_a_mixed_one)
{
	char a[] = "/tmp/gpugate-pem-a-XXXXXX", b[] = "/tmp/gpugate-pem-b-XXXXXX";
	char *ca, *ka, *cb, *kb, cmd[128];
	struct certs_info info;
	struct diag d;

	cr_assert_not_null(mkdtemp(a));
	cr_assert_not_null(mkdtemp(b));
	make(a);
	make(b);
	ca = slurp(a, "tls.crt");
	ka = slurp(a, "tls.key");
	cb = slurp(b, "tls.crt");
	kb = slurp(b, "tls.key");
	diag_init(&d);
	cr_assert_eq(certs_check_pem("a/tls.crt", ca, "a/tls.key", ka, time(NULL),
				     &info, &d), 0, "%s", diag_text(&d));
	cr_assert_str_eq(info.subject, "CN=localhost");
	/* Half a rotation: the new certificate with the old key. */
	diag_init(&d);
	cr_assert_eq(certs_check_pem("b/tls.crt", cb, "a/tls.key", ka, time(NULL),
				     &info, &d), -1);
	cr_assert_str_eq(diag_text(&d), "a/tls.key: private key does not match the "
					"certificate in b/tls.crt\n");
	diag_init(&d);
	cr_assert_eq(certs_check_pem("x.crt", "garbage", "x.key", kb, time(NULL),
				     &info, &d), -1);
	cr_assert_str_eq(diag_text(&d), "x.crt: no PEM certificate found\n");
	free(ca);
	free(ka);
	free(cb);
	free(kb);
	snprintf(cmd, sizeof(cmd), "rm -rf %s %s", a, b);
	cr_assert_eq(system(cmd), 0);
}
