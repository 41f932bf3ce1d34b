/*
 * certs/certs.c: what certs_generate() writes, checked with the OpenSSL API
 * and with the openssl command line; certs_check_pair() and
 * certs_ca_bundle(); every user-facing message verbatim once.  The last
 * tests drive `gpugate certs` (cli/cmd_certs.c) for its exit statuses
 * and its stdout.
 *
 * Each test gets its own directory under /tmp (Criterion runs each test in
 * its own process) and removes it in the fini hook.
 */
#include "base/diag.h"
#include "certs/certs.h"
#include "cli/cmd.h"
#include "cli/commands.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char tmp[64]; /* this test's directory */

static void setup(void)
{
	strcpy(tmp, "/tmp/gpugate-certs-test-XXXXXX");
	cr_assert_not_null(mkdtemp(tmp), "mkdtemp: %s", strerror(errno));
	umask(022);
}

static int rm_entry(const char *p, const struct stat *st, int flag,
		    struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static void teardown(void)
{
	if (tmp[0])
		nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(certs, .init = setup, .fini = teardown);

/* tmp/name, in a ring of static buffers: up to four alive at once. */
static const char *at(const char *name)
{
	static char ring[4][512];
	static unsigned next;
	char *p = ring[next++ % 4];

	snprintf(p, 512, "%s/%s", tmp, name);
	return p;
}

static char *xstrdup(const char *s)
{
	char *p = strdup(s);

	cr_assert_not_null(p);
	return p;
}

static int generate(const char *dir, const char *const *dns, size_t n_dns,
		    const char *const *ips, size_t n_ips, int days, bool new_ca,
		    struct diag *d)
{
	struct certs_request req = {
	    .out_dir = dir,
	    .dns = dns,
	    .n_dns = n_dns,
	    .ips = ips,
	    .n_ips = n_ips,
	    .days = days,
	    .new_ca = new_ca,
	};

	diag_init(d);
	return certs_generate(&req, d);
}

static const char *const local_dns[] = {"localhost"};
static const char *const local_ips[] = {"127.0.0.1"};

/* localhost + 127.0.0.1, 30 days, into tmp; must succeed. */
static void generate_default(bool new_ca)
{
	struct diag d;

	cr_assert_eq(generate(tmp, local_dns, 1, local_ips, 1, 30, new_ca, &d),
		     0, "%s", diag_text(&d));
}

static char *slurp(const char *p, size_t *len)
{
	FILE *f = fopen(p, "rb");
	char *buf;
	long n;

	cr_assert_not_null(f, "%s: %s", p, strerror(errno));
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = malloc((size_t)n + 1);
	cr_assert_not_null(buf);
	cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	if (len)
		*len = (size_t)n;
	return buf;
}

static bool same_file(const char *a, const char *b_bytes, size_t b_len)
{
	size_t len;
	char *buf = slurp(a, &len);
	bool same = len == b_len && memcmp(buf, b_bytes, len) == 0;

	free(buf);
	return same;
}

static X509 *load_x509(const char *p)
{
	FILE *f = fopen(p, "r");
	X509 *x;

	cr_assert_not_null(f, "%s: %s", p, strerror(errno));
	x = PEM_read_X509(f, NULL, NULL, NULL);
	fclose(f);
	cr_assert_not_null(x, "%s: not a PEM certificate", p);
	return x;
}

static EVP_PKEY *load_pkey(const char *p)
{
	FILE *f = fopen(p, "r");
	EVP_PKEY *k;

	cr_assert_not_null(f, "%s: %s", p, strerror(errno));
	k = PEM_read_PrivateKey(f, NULL, NULL, NULL);
	fclose(f);
	cr_assert_not_null(k, "%s: not a PEM private key", p);
	return k;
}

static time_t asn1_time(const ASN1_TIME *a)
{
	struct tm tm;

	memset(&tm, 0, sizeof(tm));
	cr_assert_eq(ASN1_TIME_to_tm(a, &tm), 1);
	return timegm(&tm);
}

/*
 * X509_verify_cert of tls.crt against ca.crt alone, for a TLS server
 * (purpose sslserver: keyUsage and extendedKeyUsage count), with host or ip
 * when not NULL.  Returns the verify error (X509_V_OK on success).
 */
static int verify_serving(const char *ca_path, const char *crt_path,
			  const char *host, const char *ip)
{
	X509 *ca = load_x509(ca_path), *leaf = load_x509(crt_path);
	X509_STORE *store = X509_STORE_new();
	X509_STORE_CTX *ctx = X509_STORE_CTX_new();
	X509_VERIFY_PARAM *vp;
	int err;

	cr_assert(store && ctx);
	cr_assert_eq(X509_STORE_add_cert(store, ca), 1);
	cr_assert_eq(X509_STORE_CTX_init(ctx, store, leaf, NULL), 1);
	cr_assert_eq(X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_SERVER),
		     1);
	vp = X509_STORE_CTX_get0_param(ctx);
	if (host)
		cr_assert_eq(X509_VERIFY_PARAM_set1_host(vp, host, 0), 1);
	if (ip)
		cr_assert_eq(X509_VERIFY_PARAM_set1_ip_asc(vp, ip), 1);
	err = X509_verify_cert(ctx) == 1 ? X509_V_OK
					 : X509_STORE_CTX_get_error(ctx);
	X509_STORE_CTX_free(ctx);
	X509_STORE_free(store);
	X509_free(leaf);
	X509_free(ca);
	ERR_clear_error();
	return err;
}

/* The SANs of a certificate as "DNS:x" / "IP:a.b.c.d" / "IP:v6 hex" text. */
static size_t san_list(const char *crt_path, char out[][64], size_t cap)
{
	X509 *x = load_x509(crt_path);
	GENERAL_NAMES *gens =
	    X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
	size_t n = 0;

	cr_assert_not_null(gens, "%s: no subjectAltName", crt_path);
	for (int i = 0; i < sk_GENERAL_NAME_num(gens); i++) {
		const GENERAL_NAME *g = sk_GENERAL_NAME_value(gens, i);
		int type;
		const ASN1_STRING *s = GENERAL_NAME_get0_value(g, &type);
		const unsigned char *b = ASN1_STRING_get0_data(s);
		int len = ASN1_STRING_length(s);
		char addr[INET6_ADDRSTRLEN];

		cr_assert_lt(n, cap);
		if (type == GEN_DNS) {
			snprintf(out[n++], 64, "DNS:%.*s", len,
				 (const char *)b);
		} else {
			cr_assert_eq(type, GEN_IPADD);
			cr_assert(len == 4 || len == 16);
			cr_assert_not_null(
			    inet_ntop(len == 4 ? AF_INET : AF_INET6, b, addr,
				      sizeof(addr)));
			snprintf(out[n++], 64, "IP:%s", addr);
		}
	}
	GENERAL_NAMES_free(gens);
	X509_free(x);
	return n;
}

/* ---- what certs_generate writes ---------------------------------------- */

Test(certs, san_holds_exactly_the_requested_names_and_ips)
{
	static const char *const dns[] = {
	    "gpugate.gpugate-system.svc",
	    "gpugate.gpugate-system.svc.cluster.local", "*.example.com"};
	static const char *const ips[] = {"127.0.0.1", "::1", "10.96.0.10",
					  "fd00:10:96::a"};
	static const char *const want[] = {
	    "DNS:gpugate.gpugate-system.svc",
	    "DNS:gpugate.gpugate-system.svc.cluster.local",
	    "DNS:*.example.com",
	    "IP:127.0.0.1",
	    "IP:::1",
	    "IP:10.96.0.10",
	    "IP:fd00:10:96::a",
	};
	char got[16][64];
	struct diag d;
	size_t n;

	cr_assert_eq(generate(tmp, dns, 3, ips, 4, 30, false, &d), 0, "%s",
		     diag_text(&d));
	n = san_list(at("tls.crt"), got, 16);
	cr_assert_eq(n, sizeof(want) / sizeof(want[0]));
	for (size_t i = 0; i < n; i++)
		cr_assert_str_eq(got[i], want[i]);

	/* CN is the first DNS name. */
	X509 *x = load_x509(at("tls.crt"));
	char cn[128];

	cr_assert_gt(X509_NAME_get_text_by_NID(X509_get_subject_name(x),
					       NID_commonName, cn, sizeof(cn)),
		     0);
	cr_assert_str_eq(cn, "gpugate.gpugate-system.svc");
	X509_free(x);
}

Test(certs, cn_is_the_first_ip_without_dns_names)
{
	static const char *const ips[] = {"fd00::1"};
	struct diag d;
	char cn[64];
	X509 *x;

	cr_assert_eq(generate(tmp, NULL, 0, ips, 1, 30, false, &d), 0, "%s",
		     diag_text(&d));
	x = load_x509(at("tls.crt"));
	X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, cn,
				  sizeof(cn));
	cr_assert_str_eq(cn, "fd00::1");
	X509_free(x);
	cr_assert_eq(
	    verify_serving(at("ca.crt"), at("tls.crt"), NULL, "fd00::1"),
	    X509_V_OK);
}

Test(certs, serving_cert_verifies_against_ca_for_its_names_only)
{
	static const char *const dns[] = {"gpugate.gpugate-system.svc"};
	static const char *const ips[] = {"127.0.0.1", "::1"};
	struct diag d;
	char ca[512];

	cr_assert_eq(generate(tmp, dns, 1, ips, 2, 30, false, &d), 0, "%s",
		     diag_text(&d));
	snprintf(ca, sizeof(ca), "%s", at("ca.crt"));
	cr_assert_eq(verify_serving(ca, at("tls.crt"), NULL, NULL), X509_V_OK);
	cr_assert_eq(verify_serving(ca, at("tls.crt"),
				    "gpugate.gpugate-system.svc", NULL),
		     X509_V_OK);
	cr_assert_eq(verify_serving(ca, at("tls.crt"), NULL, "::1"), X509_V_OK);
	cr_assert_eq(verify_serving(ca, at("tls.crt"), NULL, "127.0.0.1"),
		     X509_V_OK);
	/* Names it does not hold fail: the SAN is what clients check. */
	cr_assert_eq(
	    verify_serving(ca, at("tls.crt"), "gpugate.default.svc", NULL),
	    X509_V_ERR_HOSTNAME_MISMATCH);
	cr_assert_eq(verify_serving(ca, at("tls.crt"), NULL, "127.0.0.2"),
		     X509_V_ERR_IP_ADDRESS_MISMATCH);
	/* The CA cannot serve: its keyUsage is certificate signing only. */
	cr_assert_neq(verify_serving(ca, ca, NULL, NULL), X509_V_OK);
}

Test(certs, serving_cert_profile)
{
	X509 *x, *ca;
	EVP_PKEY *k;
	const ASN1_OCTET_STRING *akid, *skid;
	BIGNUM *serial;
	time_t before = time(NULL), nb, na;
	char group[32];
	int crit = -1;
	ASN1_BIT_STRING *ku;

	generate_default(false);
	x = load_x509(at("tls.crt"));
	ca = load_x509(at("ca.crt"));

	cr_assert_eq(X509_get_version(x), X509_VERSION_3);
	cr_assert_eq(X509_check_ca(x), 0, "the serving cert must not be a CA");
	cr_assert(X509_get_extension_flags(x) & EXFLAG_BCONS,
		  "basicConstraints present (CA:FALSE)");
	cr_assert(X509_get_extended_key_usage(x) & XKU_SSL_SERVER);
	cr_assert_eq(X509_get_extended_key_usage(x), XKU_SSL_SERVER,
		     "serverAuth only");
	cr_assert_eq(X509_get_key_usage(x), KU_DIGITAL_SIGNATURE);
	ku = X509_get_ext_d2i(x, NID_key_usage, &crit, NULL);
	cr_assert_eq(crit, 1, "keyUsage critical");
	ASN1_BIT_STRING_free(ku);

	/* authorityKeyIdentifier names the CA's key. */
	akid = X509_get0_authority_key_id(x);
	skid = X509_get0_subject_key_id(ca);
	cr_assert(akid && skid);
	cr_assert_eq(ASN1_OCTET_STRING_cmp(akid, skid), 0);
	cr_assert_not_null(X509_get0_subject_key_id(x));
	cr_assert_eq(X509_check_issued(ca, x), X509_V_OK);

	/* A positive serial of 128 random bits (top bits may be zero). */
	serial = ASN1_INTEGER_to_BN(X509_get0_serialNumber(x), NULL);
	cr_assert_not_null(serial);
	cr_assert(!BN_is_negative(serial) && !BN_is_zero(serial));
	cr_assert_leq(BN_num_bits(serial), 128);
	cr_assert_gt(BN_num_bits(serial), 64, "128 random bits");
	BN_free(serial);

	/* now - 5 minutes .. now + 30 days. */
	nb = asn1_time(X509_get0_notBefore(x));
	na = asn1_time(X509_get0_notAfter(x));
	cr_assert(nb >= before - 300 - 2 && nb <= before - 300 + 5,
		  "notBefore %lld", (long long)nb);
	cr_assert_eq(na - nb, 30 * 86400 + 300);

	/* ECDSA P-256 key. */
	k = X509_get0_pubkey(x);
	cr_assert(EVP_PKEY_is_a(k, "EC"));
	cr_assert_eq(EVP_PKEY_get_group_name(k, group, sizeof(group), NULL), 1);
	cr_assert_str_eq(group, "prime256v1");
	X509_free(ca);
	X509_free(x);
}

Test(certs, ca_profile)
{
	X509 *ca;
	char cn[64];
	int crit = -1;
	BASIC_CONSTRAINTS *bc;
	ASN1_BIT_STRING *ku;
	EVP_PKEY *key;

	generate_default(false);
	ca = load_x509(at("ca.crt"));
	X509_NAME_get_text_by_NID(X509_get_subject_name(ca), NID_commonName, cn,
				  sizeof(cn));
	cr_assert_str_eq(cn, "gpugate-ca");
	cr_assert_eq(
	    X509_NAME_cmp(X509_get_subject_name(ca), X509_get_issuer_name(ca)),
	    0, "self-signed");
	cr_assert(X509_get_extension_flags(ca) & EXFLAG_SS);
	bc = X509_get_ext_d2i(ca, NID_basic_constraints, &crit, NULL);
	cr_assert_not_null(bc);
	cr_assert(bc->ca);
	cr_assert_eq(crit, 1, "basicConstraints critical");
	BASIC_CONSTRAINTS_free(bc);
	ku = X509_get_ext_d2i(ca, NID_key_usage, &crit, NULL);
	cr_assert_eq(crit, 1, "keyUsage critical");
	ASN1_BIT_STRING_free(ku);
	cr_assert_eq(X509_get_key_usage(ca), KU_KEY_CERT_SIGN | KU_CRL_SIGN);
	cr_assert_not_null(X509_get0_subject_key_id(ca));
	cr_assert_eq(asn1_time(X509_get0_notAfter(ca)) -
			 asn1_time(X509_get0_notBefore(ca)),
		     3650 * 86400 + 300);
	key = load_pkey(at("ca.key"));
	cr_assert_eq(EVP_PKEY_eq(X509_get0_pubkey(ca), key), 1);
	cr_assert_eq(X509_verify(ca, key), 1);
	EVP_PKEY_free(key);
	X509_free(ca);
}

Test(certs, keys_are_0600_certs_0644_and_no_temporary_files_stay)
{
	static const char *const names[] = {"ca.crt", "ca.key", "tls.crt",
					    "tls.key"};
	static const mode_t modes[] = {0644, 0600, 0644, 0600};
	struct stat st;
	size_t n = 0;
	FILE *ls;
	char line[256], cmd[128];

	generate_default(false);
	generate_default(false); /* replacing keeps the modes */
	for (size_t i = 0; i < 4; i++) {
		cr_assert_eq(stat(at(names[i]), &st), 0, "%s", names[i]);
		cr_assert_eq(st.st_mode & 07777, modes[i], "%s: mode %o",
			     names[i], st.st_mode & 07777);
	}
	snprintf(cmd, sizeof(cmd), "ls -A %s", tmp);
	ls = popen(cmd, "r");
	cr_assert_not_null(ls);
	while (fgets(line, sizeof(line), ls))
		n++;
	pclose(ls);
	cr_assert_eq(n, 4, "exactly the four files");
}

Test(certs, creates_missing_directories_0755)
{
	char dir[256];
	struct stat st;
	struct diag d;

	snprintf(dir, sizeof(dir), "%s/a/b", tmp);
	cr_assert_eq(generate(dir, local_dns, 1, local_ips, 1, 1, false, &d), 0,
		     "%s", diag_text(&d));
	cr_assert_eq(stat(dir, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0755);
	cr_assert_eq(stat(at("a/b/tls.crt"), &st), 0);
}

/* The rename order is the contract a certificate watcher relies on. */
Test(certs, files_are_renamed_into_place_ca_first_tls_crt_last)
{
	static const char *const want[] = {"ca.key", "ca.crt", "tls.key",
					   "tls.crt"};
	char buf[4096]
	    __attribute__((aligned(__alignof__(struct inotify_event))));
	const char *seen[8];
	size_t n = 0;
	ssize_t len;
	int fd = inotify_init1(IN_NONBLOCK);

	cr_assert_geq(fd, 0);
	/*
	 * IN_MOVED_TO: a rename into the directory.  Writes go to temp files
	 * (".NAME.XXXXXX") and no final name ever disappears, even when it is
	 * replaced: a second run must look the same.
	 */
	generate_default(false);
	cr_assert_eq(unlink(at("ca.key")), 0);
	cr_assert_eq(unlink(at("ca.crt")), 0);
	cr_assert_geq(inotify_add_watch(
			  fd, tmp, IN_MOVED_TO | IN_CLOSE_WRITE | IN_DELETE),
		      0);
	generate_default(false);
	len = read(fd, buf, sizeof(buf));
	cr_assert_gt(len, 0);
	for (char *p = buf; p < buf + len;) {
		const struct inotify_event *ev =
		    (const struct inotify_event *)(void *)p;

		if (ev->mask & IN_CLOSE_WRITE)
			cr_assert_eq(ev->name[0], '.', "wrote %s in place",
				     ev->name);
		if (ev->mask & IN_DELETE)
			cr_assert_eq(ev->name[0], '.', "deleted %s", ev->name);
		if ((ev->mask & IN_MOVED_TO) && n < 8)
			seen[n++] = xstrdup(ev->name);
		p += sizeof(*ev) + ev->len;
	}
	close(fd);
	cr_assert_eq(n, 4);
	for (size_t i = 0; i < 4; i++)
		cr_assert_str_eq(seen[i], want[i]);
	for (size_t i = 0; i < n; i++)
		free((void *)seen[i]);
}

Test(certs, second_run_reuses_the_ca_and_renews_the_serving_cert)
{
	size_t ca_len, cakey_len, crt_len;
	char *ca, *cakey, *crt;

	generate_default(false);
	ca = slurp(at("ca.crt"), &ca_len);
	cakey = slurp(at("ca.key"), &cakey_len);
	crt = slurp(at("tls.crt"), &crt_len);
	generate_default(false);
	cr_assert(same_file(at("ca.crt"), ca, ca_len), "ca.crt unchanged");
	cr_assert(same_file(at("ca.key"), cakey, cakey_len),
		  "ca.key unchanged");
	cr_assert(!same_file(at("tls.crt"), crt, crt_len), "tls.crt renewed");
	cr_assert_eq(
	    verify_serving(at("ca.crt"), at("tls.crt"), "localhost", NULL),
	    X509_V_OK);
	free(ca);
	free(cakey);
	free(crt);
}

Test(certs, new_ca_replaces_the_ca)
{
	size_t len;
	char *ca;

	generate_default(false);
	ca = slurp(at("ca.crt"), &len);
	cr_assert_eq(rename(at("ca.crt"), at("old-ca.crt")), 0);
	cr_assert_eq(link(at("old-ca.crt"), at("ca.crt")), 0);
	generate_default(true);
	cr_assert(!same_file(at("ca.crt"), ca, len), "ca.crt replaced");
	cr_assert(same_file(at("old-ca.crt"), ca, len),
		  "replaced by rename, not rewritten in place");
	cr_assert_eq(verify_serving(at("ca.crt"), at("tls.crt"), NULL, NULL),
		     X509_V_OK);
	cr_assert_eq(
	    verify_serving(at("old-ca.crt"), at("tls.crt"), NULL, NULL),
	    X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY);
	free(ca);
}

Test(certs, a_ca_missing_its_key_is_refused)
{
	char want[1024];
	size_t len;
	char *ca;
	struct diag d;

	generate_default(false);
	ca = slurp(at("ca.crt"), &len);
	cr_assert_eq(unlink(at("ca.key")), 0);
	cr_assert_eq(generate(tmp, local_dns, 1, local_ips, 1, 30, false, &d),
		     -1);
	snprintf(want, sizeof(want),
		 "%s/ca.key: missing while %s/ca.crt exists (restore it, or "
		 "make a new CA and update the caBundle)\n",
		 tmp, tmp);
	cr_assert_str_eq(diag_text(&d), want);
	cr_assert(same_file(at("ca.crt"), ca, len), "ca.crt untouched");
	free(ca);
}

Test(certs, a_ca_whose_key_does_not_match_is_refused)
{
	char other[256], want[1024];
	struct diag d;

	snprintf(other, sizeof(other), "%s/other", tmp);
	cr_assert_eq(generate(other, local_dns, 1, NULL, 0, 1, false, &d), 0);
	generate_default(false);
	cr_assert_eq(rename(at("other/ca.key"), at("ca.key")), 0);
	cr_assert_eq(generate(tmp, local_dns, 1, local_ips, 1, 30, false, &d),
		     -1);
	snprintf(want, sizeof(want),
		 "%s/ca.key: private key does not match the certificate in "
		 "%s/ca.crt\n",
		 tmp, tmp);
	cr_assert_str_eq(diag_text(&d), want);
}

Test(certs, a_reused_ca_must_outlive_the_serving_cert)
{
	X509 *ca;
	EVP_PKEY *key;
	FILE *f;
	struct diag d;

	generate_default(false);
	/* The CA re-signed to expire in 10 days; the request wants 30. */
	ca = load_x509(at("ca.crt"));
	key = load_pkey(at("ca.key"));
	cr_assert_not_null(
	    X509_time_adj_ex(X509_getm_notAfter(ca), 10, 0, NULL));
	cr_assert_gt(X509_sign(ca, key, EVP_sha256()), 0);
	f = fopen(at("ca.crt"), "w");
	cr_assert_not_null(f);
	cr_assert_eq(PEM_write_X509(f, ca), 1);
	fclose(f);
	EVP_PKEY_free(key);
	X509_free(ca);

	cr_assert_eq(generate(tmp, local_dns, 1, local_ips, 1, 30, false, &d),
		     -1);
	cr_assert(strstr(diag_text(&d), "/ca.crt: the CA expires on "), "%s",
		  diag_text(&d));
	cr_assert(strstr(diag_text(&d), " UTC); ask for fewer days or make a "
					"new CA\n"),
		  "%s", diag_text(&d));
	cr_assert_eq(generate(tmp, local_dns, 1, local_ips, 1, 9, false, &d), 0,
		     "%s", diag_text(&d));
	cr_assert_eq(generate(tmp, local_dns, 1, local_ips, 1, 30, true, &d), 0,
		     "%s", diag_text(&d));
}

/* ---- rejected requests: nothing is written ------------------------------ */

struct bad_request {
	const char *dns, *ip;
	int days;
	const char *message;
};

Test(certs, bad_requests_are_rejected_verbatim_before_any_write)
{
	static const struct bad_request cases[] = {
	    {NULL, "300.1.2.3", 30,
	     "invalid IP address \"300.1.2.3\" (expected IPv4 such as "
	     "10.0.0.1 or IPv6 such as fd00::1)\n"},
	    {NULL, "[::1]", 30,
	     "invalid IP address \"[::1]\" (expected IPv4 such as 10.0.0.1 "
	     "or IPv6 such as fd00::1)\n"},
	    {NULL, "", 30,
	     "invalid IP address \"\" (expected IPv4 such as 10.0.0.1 or "
	     "IPv6 such as fd00::1)\n"},
	    {"gpu gate", NULL, 30,
	     "invalid DNS name \"gpu gate\": only letters, digits, '-' and "
	     "'.' are allowed\n"},
	    {"10.0.0.1", NULL, 30,
	     "invalid DNS name \"10.0.0.1\": an IP address belongs among "
	     "the IP addresses\n"},
	    {"a..b", NULL, 30, "invalid DNS name \"a..b\": empty label\n"},
	    {"host.", NULL, 30, "invalid DNS name \"host.\": empty label\n"},
	    {"*x.y", NULL, 30,
	     "invalid DNS name \"*x.y\": a wildcard must be a whole "
	     "leftmost label, as in \"*.example.com\"\n"},
	    {"", NULL, 30, "invalid DNS name \"\": empty\n"},
	    {"x", NULL, 0, "invalid validity of 0 days (expected 1 to 3650)\n"},
	    {"x", NULL, 3651,
	     "invalid validity of 3651 days (expected 1 to 3650)\n"},
	    {NULL, NULL, 30,
	     "no DNS name or IP address given for the serving "
	     "certificate\n"},
	};
	char dir[256];
	struct diag d;

	snprintf(dir, sizeof(dir), "%s/out", tmp);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct bad_request *c = &cases[i];
		const char *dns[] = {c->dns}, *ips[] = {c->ip};

		cr_assert_eq(generate(dir, dns, c->dns != NULL, ips,
				      c->ip != NULL, c->days, false, &d),
			     -1, "case %zu", i);
		cr_assert_str_eq(diag_text(&d), c->message, "case %zu", i);
		cr_assert_eq(access(dir, F_OK), -1, "case %zu created %s", i,
			     dir);
	}
}

Test(certs, a_label_of_64_characters_is_refused)
{
	char name[80];
	const char *dns[] = {name};
	struct certs_request req = {
	    .out_dir = tmp, .dns = dns, .n_dns = 1, .days = 1};
	char want[200];
	struct diag d;

	memset(name, 'a', 64);
	strcpy(name + 64, ".x");
	diag_init(&d);
	cr_assert_eq(certs_request_check(&req, &d), -1);
	snprintf(want, sizeof(want),
		 "invalid DNS name \"%s\": label longer than 63 characters\n",
		 name);
	cr_assert_str_eq(diag_text(&d), want);
	name[63] = '\0'; /* 63 is fine */
	diag_init(&d);
	cr_assert_eq(certs_request_check(&req, &d), 0, "%s", diag_text(&d));
}

/* ---- certs_check_pair --------------------------------------------------- */

Test(certs, check_pair_accepts_a_fresh_pair)
{
	struct certs_info info;
	struct diag d;
	char crt[512];

	generate_default(false);
	snprintf(crt, sizeof(crt), "%s", at("tls.crt"));
	diag_init(&d);
	cr_assert_eq(
	    certs_check_pair(crt, at("tls.key"), time(NULL), &info, &d), 0,
	    "%s", diag_text(&d));
	cr_assert_eq(diag_count(&d), 0);
	cr_assert_str_eq(info.subject, "CN=localhost");
	cr_assert_eq(info.not_after - info.not_before, 30 * 86400 + 300);
	cr_assert_leq(info.not_before, time(NULL) - 300);
}

Test(certs, check_pair_rejects_a_key_of_another_pair)
{
	char other[256], crt[512], key[512], want[1200];
	struct certs_info info;
	struct diag d;

	snprintf(other, sizeof(other), "%s/other", tmp);
	cr_assert_eq(generate(other, local_dns, 1, NULL, 0, 1, false, &d), 0);
	generate_default(false);
	snprintf(crt, sizeof(crt), "%s/tls.crt", tmp);
	snprintf(key, sizeof(key), "%s/other/tls.key", tmp);
	diag_init(&d);
	cr_assert_eq(certs_check_pair(crt, key, time(NULL), &info, &d), -1);
	snprintf(want, sizeof(want),
		 "%s: private key does not match the certificate in %s\n", key,
		 crt);
	cr_assert_str_eq(diag_text(&d), want);
	cr_assert_str_eq(info.subject, "CN=localhost", "info filled anyway");
}

/*
 * tls.crt re-signed by the CA with fixed dates: valid from 2025-01-01
 * 00:00:00 to 2026-01-02 03:04:05 UTC, written as tmp/fixed.crt.
 */
static void write_fixed_dates_cert(void)
{
	X509 *x = load_x509(at("tls.crt"));
	EVP_PKEY *cakey = load_pkey(at("ca.key"));
	FILE *f;

	cr_assert_not_null(ASN1_TIME_set(X509_getm_notBefore(x), 1735689600));
	cr_assert_not_null(ASN1_TIME_set(X509_getm_notAfter(x), 1767323045));
	cr_assert_gt(X509_sign(x, cakey, EVP_sha256()), 0);
	f = fopen(at("fixed.crt"), "w");
	cr_assert_not_null(f);
	cr_assert_eq(PEM_write_X509(f, x), 1);
	fclose(f);
	EVP_PKEY_free(cakey);
	X509_free(x);
}

Test(certs, check_pair_rejects_an_expired_cert)
{
	char crt[512], want[1200];
	struct certs_info info;
	struct diag d;

	generate_default(false);
	write_fixed_dates_cert();
	snprintf(crt, sizeof(crt), "%s/fixed.crt", tmp);
	diag_init(&d);
	/* 2026-06-01 00:00:00 UTC */
	cr_assert_eq(
	    certs_check_pair(crt, at("tls.key"), 1780272000, &info, &d), -1);
	snprintf(want, sizeof(want),
		 "%s: certificate expired on 2026-01-02 03:04:05 UTC\n", crt);
	cr_assert_str_eq(diag_text(&d), want);
	cr_assert_eq(info.not_before, 1735689600);
	cr_assert_eq(info.not_after, 1767323045);
	/* The last second is still valid. */
	diag_init(&d);
	cr_assert_eq(certs_check_pair(crt, at("tls.key"), 1767323045, NULL, &d),
		     0, "%s", diag_text(&d));
}

Test(certs, check_pair_rejects_a_cert_not_yet_valid)
{
	char crt[512], want[1200];
	struct diag d;

	generate_default(false);
	write_fixed_dates_cert();
	snprintf(crt, sizeof(crt), "%s/fixed.crt", tmp);
	diag_init(&d);
	/* 2024-06-01 00:00:00 UTC */
	cr_assert_eq(certs_check_pair(crt, at("tls.key"), 1717200000, NULL, &d),
		     -1);
	snprintf(
	    want, sizeof(want),
	    "%s: certificate is not valid before 2025-01-01 00:00:00 UTC\n",
	    crt);
	cr_assert_str_eq(diag_text(&d), want);
}

Test(certs, check_pair_rejects_a_fresh_cert_after_its_days)
{
	char crt[512];
	struct certs_info info;
	struct diag d;
	time_t later = time(NULL) + 31 * 86400;

	generate_default(false);
	snprintf(crt, sizeof(crt), "%s/tls.crt", tmp);
	diag_init(&d);
	cr_assert_eq(certs_check_pair(crt, at("tls.key"), later, &info, &d),
		     -1);
	cr_assert(strstr(diag_text(&d), "/tls.crt: certificate expired on "),
		  "%s", diag_text(&d));
}

Test(certs, check_pair_reports_a_mismatch_and_expiry_together)
{
	char crt[512], key[512], want[2048];
	struct diag d;

	generate_default(false);
	write_fixed_dates_cert();
	snprintf(crt, sizeof(crt), "%s/fixed.crt", tmp);
	snprintf(key, sizeof(key), "%s/ca.key", tmp);
	diag_init(&d);
	cr_assert_eq(certs_check_pair(crt, key, 1780272000, NULL, &d), -1);
	snprintf(want, sizeof(want),
		 "%s: private key does not match the certificate in %s\n"
		 "%s: certificate expired on 2026-01-02 03:04:05 UTC\n",
		 key, crt, crt);
	cr_assert_str_eq(diag_text(&d), want);
}

Test(certs, check_pair_names_unreadable_files)
{
	char crt[512], want[2048];
	struct certs_info info;
	struct diag d;
	FILE *f;

	generate_default(false);
	snprintf(crt, sizeof(crt), "%s/tls.crt", tmp);

	diag_init(&d);
	cr_assert_eq(certs_check_pair(at("missing.crt"), "x", 0, &info, &d),
		     -1);
	snprintf(want, sizeof(want),
		 "%s/missing.crt: cannot open: No such file or directory\n",
		 tmp);
	cr_assert_str_eq(diag_text(&d), want);
	cr_assert_eq(info.not_after, 0, "info zeroed");

	/* A file without any PEM key in it. */
	diag_init(&d);
	cr_assert_eq(certs_check_pair(crt, crt, time(NULL), NULL, &d), -1);
	snprintf(want, sizeof(want), "%s: no PEM private key found\n", crt);
	cr_assert_str_eq(diag_text(&d), want);

	/* A PEM key block that is garbage. */
	f = fopen(at("bad.key"), "w");
	cr_assert_not_null(f);
	fputs("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
	      f);
	fclose(f);
	diag_init(&d);
	cr_assert_eq(certs_check_pair(crt, at("bad.key"), time(NULL), NULL, &d),
		     -1);
	cr_assert(strstr(diag_text(&d),
			 "/bad.key: cannot parse the PEM private "
			 "key ("),
		  "%s", diag_text(&d));

	/* A passphrase-protected key: refused, never prompted for. */
	{
		EVP_PKEY *k = load_pkey(at("tls.key"));
		char pw[] = "secret";

		f = fopen(at("enc.key"), "w");
		cr_assert_not_null(f);
		cr_assert_eq(PEM_write_PKCS8PrivateKey(f, k, EVP_aes_128_cbc(),
						       pw, 6, NULL, NULL),
			     1);
		fclose(f);
		EVP_PKEY_free(k);
	}
	diag_init(&d);
	cr_assert_eq(certs_check_pair(crt, at("enc.key"), time(NULL), NULL, &d),
		     -1);
	snprintf(want, sizeof(want),
		 "%s/enc.key: private key is passphrase-protected (gpugate "
		 "needs an unencrypted key)\n",
		 tmp);
	cr_assert_str_eq(diag_text(&d), want);

	/* An empty certificate file. */
	fclose(fopen(at("empty.crt"), "w"));
	diag_init(&d);
	cr_assert_eq(certs_check_pair(at("empty.crt"), crt, 0, NULL, &d), -1);
	snprintf(want, sizeof(want), "%s/empty.crt: no PEM certificate found\n",
		 tmp);
	cr_assert_str_eq(diag_text(&d), want);
}

/* ---- certs_ca_bundle ---------------------------------------------------- */

Test(certs, ca_bundle_is_the_pem_bytes_in_one_line_of_base64)
{
	char *bundle = NULL, *pem, *decoded;
	size_t pem_len, b64_len;
	int n, pad = 0;
	struct diag d;

	generate_default(false);
	pem = slurp(at("ca.crt"), &pem_len);
	diag_init(&d);
	cr_assert_eq(certs_ca_bundle(at("ca.crt"), &bundle, &d), 0, "%s",
		     diag_text(&d));
	b64_len = strlen(bundle);
	cr_assert_null(strchr(bundle, '\n'));
	cr_assert_eq(b64_len % 4, 0);
	decoded = malloc(b64_len);
	cr_assert_not_null(decoded);
	n = EVP_DecodeBlock((unsigned char *)decoded,
			    (const unsigned char *)bundle, (int)b64_len);
	cr_assert_gt(n, 0);
	/* EVP_DecodeBlock counts the padding as zero bytes. */
	pad = (bundle[b64_len - 1] == '=') + (bundle[b64_len - 2] == '=');
	cr_assert_eq((size_t)(n - pad), pem_len);
	cr_assert_eq(memcmp(decoded, pem, pem_len), 0);
	free(decoded);
	free(pem);
	free(bundle);
}

Test(certs, ca_bundle_refuses_a_key_and_a_non_certificate)
{
	char *bundle = (char *)"untouched";
	char want[1024];
	struct diag d;

	generate_default(false);
	diag_init(&d);
	cr_assert_eq(certs_ca_bundle(at("ca.key"), &bundle, &d), -1);
	cr_assert_null(bundle);
	snprintf(want, sizeof(want),
		 "%s/ca.key: holds a private key (a caBundle must contain "
		 "certificates only)\n",
		 tmp);
	cr_assert_str_eq(diag_text(&d), want);

	diag_init(&d);
	cr_assert_eq(certs_ca_bundle(at("nope.crt"), &bundle, &d), -1);
	snprintf(want, sizeof(want),
		 "%s/nope.crt: cannot open: No such file or directory\n", tmp);
	cr_assert_str_eq(diag_text(&d), want);
}

/* ---- the openssl command line agrees ------------------------------------ */

static char *run_output(const char *cmd)
{
	FILE *p = popen(cmd, "r");
	static char out[4096];
	size_t n;

	cr_assert_not_null(p, "%s", cmd);
	n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = '\0';
	cr_assert_eq(pclose(p), 0, "%s failed:\n%s", cmd, out);
	return out;
}

Test(certs, openssl_cli_verifies_the_chain_and_shows_the_sans)
{
	static const char *const dns[] = {"gpugate.gpugate-system.svc",
					  "localhost"};
	static const char *const ips[] = {"127.0.0.1", "::1"};
	char cmd[1024];
	struct diag d;

	cr_assert_eq(generate(tmp, dns, 2, ips, 2, 30, false, &d), 0, "%s",
		     diag_text(&d));
	snprintf(cmd, sizeof(cmd),
		 "openssl verify -CAfile %s/ca.crt -purpose sslserver "
		 "-verify_hostname gpugate.gpugate-system.svc -verify_ip ::1 "
		 "%s/tls.crt 2>&1",
		 tmp, tmp);
	{
		char want[600];

		snprintf(want, sizeof(want), "%s/tls.crt: OK\n", tmp);
		cr_assert_str_eq(run_output(cmd), want);
	}
	snprintf(cmd, sizeof(cmd),
		 "openssl x509 -noout -ext subjectAltName -in %s/tls.crt", tmp);
	cr_assert_str_eq(run_output(cmd),
			 "X509v3 Subject Alternative Name: \n"
			 "    DNS:gpugate.gpugate-system.svc, DNS:localhost, "
			 "IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1\n");
	/* And the keys are what `openssl pkey` reads. */
	snprintf(cmd, sizeof(cmd),
		 "openssl pkey -in %s/tls.key -noout && "
		 "openssl pkey -in %s/ca.key -noout",
		 tmp, tmp);
	cr_assert_str_eq(run_output(cmd), "");
}

/* ---- gpugate certs ------------------------------------------------------ */

/*
 * Runs cmd_certs with stdout and stderr sent to tmp/stdout and tmp/stderr;
 * argv[0] is "certs".  The arguments are copied: getopt may permute them.
 */
static int run_certs(const char *const *args)
{
	char *argv[16];
	int argc = 0, status;
	struct args_call call;
	char out[512], err[512];

	argv[argc++] = xstrdup("certs");
	for (; *args; args++) {
		cr_assert_lt(argc, 15);
		argv[argc++] = xstrdup(*args);
	}
	argv[argc] = NULL;
	snprintf(out, sizeof(out), "%s/stdout", tmp);
	snprintf(err, sizeof(err), "%s/stderr", tmp);
	fflush(stdout);
	fflush(stderr);
	cr_assert_not_null(freopen(out, "w", stdout));
	cr_assert_not_null(freopen(err, "w", stderr));
	call.self = commands_find("certs");
	call.all = commands_all(&call.n_all);
	status = cmd_certs(&call, argc, argv);
	fflush(stdout);
	fflush(stderr);
	for (int i = 0; i < argc; i++)
		free(argv[i]);
	return status;
}

Test(certs, cmd_prints_only_the_ca_bundle_on_stdout)
{
	char dir[256], ca[512], *out, *err, *bundle = NULL;
	struct diag d;
	size_t len;

	snprintf(dir, sizeof(dir), "%s/out", tmp);
	cr_assert_eq(run_certs((const char *const[]){"--out", dir, NULL}), 0);
	snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
	diag_init(&d);
	cr_assert_eq(certs_ca_bundle(ca, &bundle, &d), 0);
	out = slurp(at("stdout"), &len);
	cr_assert_eq(len, strlen(bundle) + 1);
	cr_assert_eq(strncmp(out, bundle, strlen(bundle)), 0);
	cr_assert_eq(out[len - 1], '\n');
	err = slurp(at("stderr"), NULL);
	cr_assert(strstr(err, "created a new CA in "), "%s", err);
	cr_assert(strstr(err, "SANs: DNS:localhost, IP:127.0.0.1)\n"), "%s",
		  err);
	free(err);
	free(out);

	/* Again: the CA is reused and the bundle is the same. */
	cr_assert_eq(
	    run_certs((const char *const[]){"--out", dir, "--days", "7", NULL}),
	    0);
	out = slurp(at("stdout"), &len);
	cr_assert_eq(strncmp(out, bundle, strlen(bundle)), 0);
	err = slurp(at("stderr"), NULL);
	cr_assert(strstr(err, "reused the CA in "), "%s", err);
	free(err);
	free(out);
	free(bundle);
}

Test(certs, cmd_exit_statuses)
{
	char dir[256];
	char *err;

	snprintf(dir, sizeof(dir), "%s/out", tmp);
	cr_assert_eq(run_certs((const char *const[]){NULL}), 2);
	err = slurp(at("stderr"), NULL);
	cr_assert_str_eq(err, "gpugate certs: no output directory given "
			      "(--out DIR); run 'gpugate certs --help'\n");
	free(err);
	cr_assert_eq(run_certs((const char *const[]){"--out", dir, "--days",
						     "3651", NULL}),
		     2);
	err = slurp(at("stderr"), NULL);
	cr_assert_str_eq(err,
			 "gpugate certs: invalid --days \"3651\" (expected "
			 "a whole number from 1 to 3650); run 'gpugate certs "
			 "--help'\n");
	free(err);
	cr_assert_eq(run_certs((const char *const[]){"--out", dir, "--days",
						     "7x", NULL}),
		     2);
	cr_assert_eq(
	    run_certs((const char *const[]){"--out", dir, "--bogus", NULL}), 2);
	cr_assert_eq(
	    run_certs((const char *const[]){"--out", dir, "extra", NULL}), 2);
	cr_assert_eq(run_certs((const char *const[]){"--out", dir, "--ip",
						     "1.2.3", NULL}),
		     2);
	err = slurp(at("stderr"), NULL);
	cr_assert_str_eq(err,
			 "invalid IP address \"1.2.3\" (expected IPv4 such "
			 "as 10.0.0.1 or IPv6 such as fd00::1)\n");
	free(err);
	cr_assert_eq(access(dir, F_OK), -1, "usage errors write nothing");
	cr_assert_eq(run_certs((const char *const[]){"--help", NULL}), 0);
	/* A failure, not a usage error: the directory cannot be made. */
	cr_assert_eq(
	    run_certs((const char *const[]){"--out", "/dev/null/x", NULL}), 1);
	err = slurp(at("stderr"), NULL);
	cr_assert_str_eq(err, "/dev/null/x: cannot create directory: Not a "
			      "directory\n");
	free(err);
}

/* ---- digests (kube/peer.c's token and pin) ------------------------------- */

Test(certs, sha256_of_two_parts_is_that_of_their_concatenation)
{
	/* FIPS 180-2's "abc". */
	static const unsigned char abc[CERTS_SHA256_LEN] = {
		0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40,
		0xde, 0x5d, 0xae, 0x22, 0x23, 0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17,
		0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00, 0x15, 0xad};
	unsigned char md[CERTS_SHA256_LEN];

	cr_assert_eq(certs_sha256("abc", 3, NULL, 0, md), 0);
	cr_assert_arr_eq(md, abc, sizeof(abc));
	cr_assert_eq(certs_sha256("a", 1, "bc", 2, md), 0);
	cr_assert_arr_eq(md, abc, sizeof(abc));
	cr_assert_eq(certs_sha256(NULL, 0, "abc", 3, md), 0);
	cr_assert_arr_eq(md, abc, sizeof(abc));
}

Test(certs, spki_sha256_is_the_keys_not_the_certificates)
{
	static const char *const dns[] = {"a.example"};
	struct certs_request req = {.out_dir = tmp, .dns = dns, .n_dns = 1, .days = 1};
	unsigned char tls1[CERTS_SHA256_LEN], tls2[CERTS_SHA256_LEN], ca[CERTS_SHA256_LEN];
	char *pem, path[128];
	size_t len;
	FILE *f;
	struct diag d;

	diag_init(&d);
	cr_assert_eq(certs_generate(&req, &d), 0, "%s", diag_text(&d));
	snprintf(path, sizeof(path), "%s/%s", tmp, CERTS_TLS_CRT);
	f = fopen(path, "r");
	cr_assert_not_null(f);
	pem = calloc(1, 1 << 16);
	len = fread(pem, 1, (1 << 16) - 1, f);
	fclose(f);
	cr_assert_eq(certs_spki_sha256("tls.crt", pem, len, tls1, &d), 0, "%s", diag_text(&d));
	free(pem);
	snprintf(path, sizeof(path), "%s/%s", tmp, CERTS_CA_CRT);
	f = fopen(path, "r");
	pem = calloc(1, 1 << 16);
	len = fread(pem, 1, (1 << 16) - 1, f);
	fclose(f);
	cr_assert_eq(certs_spki_sha256("ca.crt", pem, len, ca, &d), 0);
	free(pem);
	cr_assert(memcmp(tls1, ca, sizeof(ca)) != 0);

	/* A new serving certificate with a new key: another digest. */
	cr_assert_eq(certs_generate(&req, &d), 0, "%s", diag_text(&d));
	snprintf(path, sizeof(path), "%s/%s", tmp, CERTS_TLS_CRT);
	f = fopen(path, "r");
	pem = calloc(1, 1 << 16);
	len = fread(pem, 1, (1 << 16) - 1, f);
	fclose(f);
	cr_assert_eq(certs_spki_sha256("tls.crt", pem, len, tls2, &d), 0);
	free(pem);
	cr_assert(memcmp(tls1, tls2, sizeof(tls1)) != 0);

	diag_init(&d);
	cr_assert_eq(certs_spki_sha256("x.crt", "nothing", 7, tls2, &d), -1);
	cr_assert_str_eq(diag_text(&d), "x.crt: no PEM certificate found\n");
}
