/*
 * certs: a private CA and a serving certificate for the webhook, with the
 * OpenSSL 3 API.  See certs.h for what is written, in which order, and why.
 */
#include "certs/certs.h"

#include "base/diag.h"
#include "base/file.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#define CA_CN	       "gpugate-ca"
#define FALLBACK_CN    "gpugate"
#define CN_MAX	       64  /* ub-common-name, RFC 5280 */
#define DNS_NAME_MAX   253 /* RFC 1035, without the trailing dot */
#define DNS_LABEL_MAX  63
#define SERIAL_BYTES   16 /* 128 random bits */
#define TIME_TEXT_SIZE 32 /* "YYYY-MM-DD HH:MM:SS" and room to spare */

/* ---- small helpers ------------------------------------------------------ */

/*
 * The reason of the most recent OpenSSL error ("no start line"), or "unknown
 * error"; empties this thread's error queue so that the next call starts
 * clean.  The string is static in OpenSSL.
 */
static const char *ossl_why(void)
{
	unsigned long e = ERR_peek_last_error();
	const char *r = e ? ERR_reason_error_string(e) : NULL;

	ERR_clear_error();
	return r ? r : "unknown error";
}

static void fmt_time(time_t t, char out[TIME_TEXT_SIZE])
{
	struct tm tm;

	if (!gmtime_r(&t, &tm) ||
	    strftime(out, TIME_TEXT_SIZE, "%Y-%m-%d %H:%M:%S", &tm) == 0)
		snprintf(out, TIME_TEXT_SIZE, "@%lld", (long long)t);
}

static int asn1_time_to_time_t(const ASN1_TIME *a, time_t *out)
{
	struct tm tm;

	memset(&tm, 0, sizeof(tm));
	if (!a || ASN1_TIME_to_tm(a, &tm) != 1)
		return -1;
	*out = timegm(&tm);
	return 0;
}

/* "dir/name" in a new buffer, or NULL (with a line in d). */
static char *path_join(const char *dir, const char *name, struct diag *d)
{
	size_t ld = strlen(dir), ln = strlen(name);
	char *p;

	while (ld > 1 && dir[ld - 1] == '/')
		ld--;
	if (ld + 1 + ln + 1 > PATH_MAX) {
		diag_addf(d, "%s: path too long", dir);
		return NULL;
	}
	p = malloc(ld + 1 + ln + 1);
	if (!p) {
		diag_addf(d, "%s: out of memory", dir);
		return NULL;
	}
	memcpy(p, dir, ld);
	p[ld] = '/';
	memcpy(p + ld + 1, name, ln + 1);
	return p;
}

/* A certificate or key file, NUL-terminated in *out (free it with
 * file_free_secret(*out, *len): the bytes may be a key). */
static int read_small_file(const char *path, char **out, size_t *len,
			   struct diag *d)
{
	return file_read(path, CERTS_MAX_FILE_BYTES, FILE_SECRET, out, len, d) < 0
		       ? -1
		       : 0;
}

/*
 * Why PEM parsing of buf failed: no "-----BEGIN ...<label>-----" at all, or
 * one that OpenSSL could not read.  A label suffix match covers "PRIVATE
 * KEY", "EC PRIVATE KEY" and "RSA PRIVATE KEY".
 */
static void pem_problem(const char *path, const char *buf, const char *label,
			const char *what, struct diag *d)
{
	const char *p = buf;
	bool found = false;

	while (!found && (p = strstr(p, "-----BEGIN ")) != NULL) {
		const char *end = strstr(p + 11, "-----");
		size_t ll = strlen(label);

		found = end && (size_t)(end - p) >= 11 + ll &&
			memcmp(end - ll, label, ll) == 0;
		p += 11;
	}
	if (found)
		diag_addf(d, "%s: cannot parse the PEM %s (%s)", path, what,
			  ossl_why());
	else
		diag_addf(d, "%s: no PEM %s found", path, what);
	ERR_clear_error();
}

/* A certificate from PEM text in memory; path names it in messages. */
static int parse_cert(const char *path, const char *buf, size_t len, X509 **out,
		      struct diag *d)
{
	BIO *bio = BIO_new_mem_buf(buf, (int)len);

	*out = NULL;
	if (!bio) {
		diag_addf(d, "%s: out of memory", path);
		return -1;
	}
	*out = PEM_read_bio_X509(bio, NULL, NULL, NULL);
	BIO_free(bio);
	if (!*out) {
		pem_problem(path, buf, "CERTIFICATE", "certificate", d);
		return -1;
	}
	return 0;
}

static int load_cert(const char *path, X509 **out, struct diag *d)
{
	char *buf = NULL;
	size_t len = 0;
	int rc;

	*out = NULL;
	if (read_small_file(path, &buf, &len, d) < 0)
		return -1;
	rc = parse_cert(path, buf, len, out, d);
	file_free_secret(buf, len);
	return rc;
}

/* Refuses to prompt: an encrypted key is an error, not a question. */
static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
	(void)buf;
	(void)size;
	(void)rwflag;
	(void)u;
	return -1;
}

/* A private key from PEM text in memory; path names it in messages. */
static int parse_key(const char *path, const char *buf, size_t len,
		     EVP_PKEY **out, struct diag *d)
{
	BIO *bio;

	*out = NULL;
	if (strstr(buf, "-----BEGIN ENCRYPTED PRIVATE KEY-----") ||
	    strstr(buf, "Proc-Type: 4,ENCRYPTED")) {
		diag_addf(d,
			  "%s: private key is passphrase-protected (gpugate "
			  "needs an unencrypted key)",
			  path);
		return -1;
	}
	bio = BIO_new_mem_buf(buf, (int)len);
	if (!bio) {
		diag_addf(d, "%s: out of memory", path);
		return -1;
	}
	*out = PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, NULL);
	BIO_free(bio);
	if (!*out) {
		pem_problem(path, buf, "PRIVATE KEY", "private key", d);
		return -1;
	}
	return 0;
}

static int load_key(const char *path, EVP_PKEY **out, struct diag *d)
{
	char *buf = NULL;
	size_t len = 0;
	int rc;

	*out = NULL;
	if (read_small_file(path, &buf, &len, d) < 0)
		return -1;
	rc = parse_key(path, buf, len, out, d);
	file_free_secret(buf, len);
	return rc;
}

static void fill_info(const X509 *x, struct certs_info *info)
{
	BIO *bio;
	int n;

	asn1_time_to_time_t(X509_get0_notBefore(x), &info->not_before);
	asn1_time_to_time_t(X509_get0_notAfter(x), &info->not_after);
	bio = BIO_new(BIO_s_mem());
	if (!bio)
		return;
	if (X509_NAME_print_ex(bio, X509_get_subject_name(x), 0,
			       XN_FLAG_RFC2253) >= 0) {
		n = BIO_read(bio, info->subject, sizeof(info->subject) - 1);
		info->subject[n > 0 ? n : 0] = '\0';
	}
	BIO_free(bio);
}

/* now within [notBefore, notAfter]; one line per problem. */
static int check_validity(const char *path, const X509 *x, time_t now,
			  struct diag *d)
{
	time_t nb, na;
	char when[TIME_TEXT_SIZE];

	if (asn1_time_to_time_t(X509_get0_notBefore(x), &nb) < 0 ||
	    asn1_time_to_time_t(X509_get0_notAfter(x), &na) < 0) {
		diag_addf(d,
			  "%s: certificate has an unreadable validity period",
			  path);
		return -1;
	}
	if (now > na) {
		fmt_time(na, when);
		diag_addf(d, "%s: certificate expired on %s UTC", path, when);
		return -1;
	}
	if (now < nb) {
		fmt_time(nb, when);
		diag_addf(d, "%s: certificate is not valid before %s UTC", path,
			  when);
		return -1;
	}
	return 0;
}

static int check_key_matches(const char *cert_path, const X509 *x,
			     const char *key_path, const EVP_PKEY *key,
			     struct diag *d)
{
	const EVP_PKEY *pub = X509_get0_pubkey(x);

	if (pub && EVP_PKEY_eq(pub, key) == 1)
		return 0;
	ERR_clear_error();
	diag_addf(d, "%s: private key does not match the certificate in %s",
		  key_path, cert_path);
	return -1;
}

/* ---- the request -------------------------------------------------------- */

static bool dns_char_ok(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '-';
}

/*
 * A host name as a certificate SAN wants it: dot-separated labels of
 * letters, digits and '-', none empty or longer than 63, at most 253 in all;
 * the leftmost label may be "*" (a wildcard).  Returns why not, or NULL.
 */
static const char *dns_name_problem(const char *name)
{
	size_t len = strlen(name), label = 0;
	const char *p = name;

	if (len == 0)
		return "empty";
	if (len > DNS_NAME_MAX)
		return "longer than 253 characters";
	if (p[0] == '*') {
		if (p[1] != '.')
			return "a wildcard must be a whole leftmost label, as "
			       "in "
			       "\"*.example.com\"";
		p += 2;
	}
	for (; *p; p++) {
		if (*p == '.') {
			if (label == 0)
				return "empty label";
			label = 0;
			continue;
		}
		if (!dns_char_ok(*p))
			return "only letters, digits, '-' and '.' are allowed";
		if (++label > DNS_LABEL_MAX)
			return "label longer than 63 characters";
	}
	if (label == 0)
		return "empty label";
	return NULL;
}

/* Parses an IP literal into 4 or 16 bytes; returns the length or 0. */
static int parse_ip(const char *s, unsigned char out[16])
{
	if (inet_pton(AF_INET, s, out) == 1)
		return 4;
	if (inet_pton(AF_INET6, s, out) == 1)
		return 16;
	return 0;
}

int certs_request_check(const struct certs_request *req, struct diag *d)
{
	unsigned char ip[16];
	int rc = 0;

	if (!req->out_dir || !*req->out_dir) {
		diag_addf(d, "no output directory given");
		rc = -1;
	}
	if (req->days < CERTS_MIN_DAYS || req->days > CERTS_MAX_DAYS) {
		diag_addf(d, "invalid validity of %d days (expected %d to %d)",
			  req->days, CERTS_MIN_DAYS, CERTS_MAX_DAYS);
		rc = -1;
	}
	if (req->n_dns + req->n_ips == 0) {
		diag_addf(d, "no DNS name or IP address given for the serving "
			     "certificate");
		rc = -1;
	}
	for (size_t i = 0; i < req->n_dns; i++) {
		const char *name = req->dns[i] ? req->dns[i] : "";
		const char *why = dns_name_problem(name);

		if (why) {
			diag_addf(d, "invalid DNS name \"%s\": %s", name, why);
			rc = -1;
		} else if (parse_ip(name, ip)) {
			diag_addf(d,
				  "invalid DNS name \"%s\": an IP address "
				  "belongs among the IP addresses",
				  name);
			rc = -1;
		}
	}
	for (size_t i = 0; i < req->n_ips; i++) {
		const char *s = req->ips[i] ? req->ips[i] : "";

		if (!parse_ip(s, ip)) {
			diag_addf(d,
				  "invalid IP address \"%s\" (expected IPv4 "
				  "such as 10.0.0.1 or IPv6 such as fd00::1)",
				  s);
			rc = -1;
		}
	}
	return rc;
}

/* ---- building certificates --------------------------------------------- */

static EVP_PKEY *new_key(struct diag *d)
{
	EVP_PKEY *k = EVP_EC_gen("P-256");

	if (!k)
		diag_addf(d, "cannot generate an ECDSA P-256 key (%s)",
			  ossl_why());
	return k;
}

static int set_random_serial(X509 *x, struct diag *d)
{
	unsigned char raw[SERIAL_BYTES];
	BIGNUM *bn = NULL;
	int rc = -1;

	do {
		if (RAND_bytes(raw, sizeof(raw)) != 1) {
			diag_addf(d, "cannot draw a random serial number (%s)",
				  ossl_why());
			goto out;
		}
		BN_free(bn);
		bn = BN_bin2bn(raw, sizeof(raw), NULL);
		if (!bn)
			goto oom;
	} while (BN_is_zero(bn));
	if (!BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)))
		goto oom;
	rc = 0;
	goto out;
oom:
	diag_addf(d, "cannot set the serial number (%s)", ossl_why());
out:
	BN_free(bn);
	return rc;
}

/* An extension in OpenSSL's config syntax, e.g. "critical,CA:TRUE". */
struct ext {
	int nid;
	const char *value;
};

static const struct ext ca_exts[] = {
    {NID_basic_constraints, "critical,CA:TRUE"},
    {NID_key_usage, "critical,keyCertSign,cRLSign"},
    {NID_subject_key_identifier, "hash"},
};

/* subjectAltName is added apart: names with commas would not survive the
 * config syntax. */
static const struct ext serving_exts[] = {
    {NID_basic_constraints, "CA:FALSE"},
    {NID_key_usage, "critical,digitalSignature"}, /* EC: no encipherment */
    {NID_ext_key_usage, "serverAuth"},
    {NID_subject_key_identifier, "hash"},
    {NID_authority_key_identifier, "keyid:always"},
};

static int add_exts(X509 *x, X509V3_CTX *ctx, const struct ext *e, size_t n,
		    struct diag *d)
{
	for (size_t i = 0; i < n; i++) {
		X509_EXTENSION *ext =
		    X509V3_EXT_nconf_nid(NULL, ctx, e[i].nid, e[i].value);
		int ok = ext && X509_add_ext(x, ext, -1);

		X509_EXTENSION_free(ext);
		if (!ok) {
			diag_addf(d, "cannot add the %s extension \"%s\" (%s)",
				  OBJ_nid2ln(e[i].nid), e[i].value, ossl_why());
			return -1;
		}
	}
	return 0;
}

static int add_general_name(GENERAL_NAMES *gens, int type, const void *data,
			    int len)
{
	GENERAL_NAME *g = GENERAL_NAME_new();
	ASN1_STRING *s = ASN1_STRING_type_new(
	    type == GEN_DNS ? V_ASN1_IA5STRING : V_ASN1_OCTET_STRING);

	if (!g || !s || !ASN1_STRING_set(s, data, len))
		goto fail;
	GENERAL_NAME_set0_value(g, type, s);
	s = NULL; /* g owns it */
	if (!sk_GENERAL_NAME_push(gens, g))
		goto fail;
	return 0;
fail:
	ASN1_STRING_free(s);
	GENERAL_NAME_free(g);
	return -1;
}

/* subjectAltName: every DNS name, then every IP, in request order. */
static int add_san(X509 *x, const struct certs_request *req, struct diag *d)
{
	GENERAL_NAMES *gens = sk_GENERAL_NAME_new_null();
	unsigned char ip[16];
	int rc = -1;

	if (!gens)
		goto out;
	for (size_t i = 0; i < req->n_dns; i++)
		if (add_general_name(gens, GEN_DNS, req->dns[i],
				     (int)strlen(req->dns[i])) < 0)
			goto out;
	for (size_t i = 0; i < req->n_ips; i++) {
		int n = parse_ip(req->ips[i], ip); /* checked already */

		if (n == 0 || add_general_name(gens, GEN_IPADD, ip, n) < 0)
			goto out;
	}
	if (X509_add1_ext_i2d(x, NID_subject_alt_name, gens, 0,
			      X509V3_ADD_DEFAULT) != 1)
		goto out;
	rc = 0;
out:
	if (rc < 0)
		diag_addf(d, "cannot add the subjectAltName extension (%s)",
			  ossl_why());
	GENERAL_NAMES_free(gens);
	return rc;
}

/* Version 3, random serial, subject CN, public key, validity from now. */
static X509 *new_cert_skeleton(const char *cn, EVP_PKEY *pub, time_t now,
			       int days, struct diag *d)
{
	X509 *x = X509_new();
	X509_NAME *name;

	if (!x || !X509_set_version(x, X509_VERSION_3))
		goto fail;
	if (set_random_serial(x, d) < 0) {
		X509_free(x);
		return NULL;
	}
	name = X509_get_subject_name(x);
	if (!X509_NAME_add_entry_by_NID(name, NID_commonName, MBSTRING_UTF8,
					(const unsigned char *)cn, -1, -1, 0))
		goto fail;
	if (!ASN1_TIME_adj(X509_getm_notBefore(x), now, 0,
			   -CERTS_CLOCK_SKEW_SECONDS) ||
	    !ASN1_TIME_adj(X509_getm_notAfter(x), now, days, 0))
		goto fail;
	if (!X509_set_pubkey(x, pub))
		goto fail;
	return x;
fail:
	diag_addf(d, "cannot build the certificate for \"%s\" (%s)", cn,
		  ossl_why());
	X509_free(x);
	return NULL;
}

/* Ed25519 and Ed448 sign without a separate digest. */
static const EVP_MD *sign_digest(const EVP_PKEY *key)
{
	if (EVP_PKEY_is_a(key, "ED25519") || EVP_PKEY_is_a(key, "ED448"))
		return NULL;
	return EVP_sha256();
}

static int sign_cert(X509 *x, EVP_PKEY *key, struct diag *d)
{
	if (X509_sign(x, key, sign_digest(key)) > 0)
		return 0;
	diag_addf(d, "cannot sign the certificate (%s)", ossl_why());
	return -1;
}

static X509 *make_ca(EVP_PKEY *key, time_t now, struct diag *d)
{
	X509 *x = new_cert_skeleton(CA_CN, key, now, CERTS_CA_DAYS, d);
	X509V3_CTX ctx;

	if (!x)
		return NULL;
	if (!X509_set_issuer_name(x, X509_get_subject_name(x))) {
		diag_addf(d, "cannot set the CA issuer (%s)", ossl_why());
		goto fail;
	}
	X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
	if (add_exts(x, &ctx, ca_exts, sizeof(ca_exts) / sizeof(ca_exts[0]),
		     d) < 0 ||
	    sign_cert(x, key, d) < 0)
		goto fail;
	return x;
fail:
	X509_free(x);
	return NULL;
}

/* CN: the first DNS name that fits, else the first IP, else FALLBACK_CN. */
static const char *serving_cn(const struct certs_request *req)
{
	if (req->n_dns && strlen(req->dns[0]) <= CN_MAX)
		return req->dns[0];
	if (req->n_ips)
		return req->ips[0];
	return FALLBACK_CN;
}

static X509 *make_serving(const struct certs_request *req, X509 *ca,
			  EVP_PKEY *ca_key, EVP_PKEY *key, time_t now,
			  struct diag *d)
{
	X509 *x = new_cert_skeleton(serving_cn(req), key, now, req->days, d);
	X509V3_CTX ctx;

	if (!x)
		return NULL;
	if (!X509_set_issuer_name(x, X509_get_subject_name(ca))) {
		diag_addf(d, "cannot set the certificate issuer (%s)",
			  ossl_why());
		goto fail;
	}
	X509V3_set_ctx(&ctx, ca, x, NULL, NULL, 0);
	if (add_exts(x, &ctx, serving_exts,
		     sizeof(serving_exts) / sizeof(serving_exts[0]), d) < 0 ||
	    add_san(x, req, d) < 0 || sign_cert(x, ca_key, d) < 0)
		goto fail;
	return x;
fail:
	X509_free(x);
	return NULL;
}

/* ---- PEM in memory and atomic files ------------------------------------ */

/* A PEM encoding owned by a memory BIO: data/len stay valid until freed. */
struct pem {
	BIO *bio;
	char *data;
	size_t len;
};

static void pem_release(struct pem *p)
{
	BIO_free(p->bio); /* a secmem BIO wipes key bytes on free */
	memset(p, 0, sizeof(*p));
}

static int pem_finish(struct pem *p, int written)
{
	long n;

	if (!written)
		return -1;
	n = BIO_get_mem_data(p->bio, &p->data);
	if (n <= 0)
		return -1;
	p->len = (size_t)n;
	return 0;
}

static int pem_cert(const X509 *x, struct pem *p, struct diag *d)
{
	memset(p, 0, sizeof(*p));
	p->bio = BIO_new(BIO_s_mem());
	if (p->bio && pem_finish(p, PEM_write_bio_X509(p->bio, x)) == 0)
		return 0;
	diag_addf(d, "cannot encode a certificate as PEM (%s)", ossl_why());
	pem_release(p);
	return -1;
}

static int pem_key(const EVP_PKEY *k, struct pem *p, struct diag *d)
{
	memset(p, 0, sizeof(*p));
	p->bio = BIO_new(BIO_s_secmem());
	/* PKCS#8 ("BEGIN PRIVATE KEY"), unencrypted: GnuTLS reads it. */
	if (p->bio &&
	    pem_finish(p, PEM_write_bio_PrivateKey(p->bio, k, NULL, NULL, 0,
						   NULL, NULL)) == 0)
		return 0;
	diag_addf(d, "cannot encode a private key as PEM (%s)", ossl_why());
	pem_release(p);
	return -1;
}

static int write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * Replaces dir/name with data: a temporary file in dir, fsync, rename,
 * fsync of the directory.  A reader sees the old file or the new one.
 */
static int write_atomic(const char *dir, int dirfd, const char *name,
			const struct pem *p, mode_t mode, struct diag *d)
{
	char *final = NULL, *tmp = NULL;
	char tmpname[64];
	bool leftover = false; /* tmp exists and is not renamed */
	int fd = -1, rc = -1;

	snprintf(tmpname, sizeof(tmpname), ".%s.XXXXXX", name);
	final = path_join(dir, name, d);
	tmp = path_join(dir, tmpname, d);
	if (!final || !tmp)
		goto out;
	fd = mkostemp(tmp, O_CLOEXEC); /* created 0600 */
	if (fd < 0) {
		diag_addf(d, "%s: cannot create a temporary file: %s", final,
			  strerror(errno));
		goto out;
	}
	leftover = true;
	if ((mode != 0600 && fchmod(fd, mode) < 0) ||
	    write_all(fd, p->data, p->len) < 0 || fsync(fd) < 0) {
		diag_addf(d, "%s: cannot write: %s", final, strerror(errno));
		goto out;
	}
	if (close(fd) < 0) {
		fd = -1;
		diag_addf(d, "%s: cannot write: %s", final, strerror(errno));
		goto out;
	}
	fd = -1;
	if (rename(tmp, final) < 0) {
		diag_addf(d, "%s: cannot replace: %s", final, strerror(errno));
		goto out;
	}
	leftover = false;
	if (fsync(dirfd) < 0) {
		diag_addf(d, "%s: cannot sync the directory: %s", dir,
			  strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	if (leftover)
		unlink(tmp);
	free(tmp);
	free(final);
	return rc;
}

/* mkdir -p with mode 0755 for the parts that are missing. */
static int make_dirs(const char *dir, struct diag *d)
{
	struct stat st;
	char *p = strdup(dir);
	int rc = -1;

	if (!p) {
		diag_addf(d, "%s: out of memory", dir);
		return -1;
	}
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0755) < 0 && errno != EEXIST) {
			diag_addf(d, "%s: cannot create directory: %s", p,
				  strerror(errno));
			goto out;
		}
		*s = '/';
	}
	if (mkdir(p, 0755) < 0 && errno != EEXIST) {
		diag_addf(d, "%s: cannot create directory: %s", dir,
			  strerror(errno));
		goto out;
	}
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		diag_addf(d, "%s: not a directory", dir);
		goto out;
	}
	rc = 0;
out:
	free(p);
	return rc;
}

/* 1 exists, 0 does not, -1 cannot tell (with a line in d). */
static int file_exists(const char *path, struct diag *d)
{
	struct stat st;

	if (stat(path, &st) == 0)
		return 1;
	if (errno == ENOENT)
		return 0;
	diag_addf(d, "%s: cannot stat: %s", path, strerror(errno));
	return -1;
}

/* ---- the CA: reuse or make --------------------------------------------- */

struct ca {
	X509 *cert;
	EVP_PKEY *key;
	bool made; /* new: must be written */
};

static int ca_load(const char *crt_path, const char *key_path, time_t now,
		   int days, struct ca *ca, struct diag *d)
{
	time_t na, want = now + (time_t)days * 86400;
	char when[TIME_TEXT_SIZE], need[TIME_TEXT_SIZE];

	if (load_cert(crt_path, &ca->cert, d) < 0 ||
	    load_key(key_path, &ca->key, d) < 0)
		return -1;
	if (check_key_matches(crt_path, ca->cert, key_path, ca->key, d) < 0)
		return -1;
	if (X509_check_ca(ca->cert) < 1) {
		diag_addf(d,
			  "%s: not a CA certificate (no basicConstraints "
			  "CA:TRUE)",
			  crt_path);
		return -1;
	}
	if (check_validity(crt_path, ca->cert, now, d) < 0)
		return -1;
	if (asn1_time_to_time_t(X509_get0_notAfter(ca->cert), &na) == 0 &&
	    na < want) {
		fmt_time(na, when);
		fmt_time(want, need);
		diag_addf(d,
			  "%s: the CA expires on %s UTC, before the serving "
			  "certificate would (%s UTC); ask for fewer days or "
			  "make a new CA",
			  crt_path, when, need);
		return -1;
	}
	return 0;
}

static int ca_obtain(const struct certs_request *req, const char *crt_path,
		     const char *key_path, time_t now, struct ca *ca,
		     struct diag *d)
{
	int have_crt, have_key;

	if (!req->new_ca) {
		have_crt = file_exists(crt_path, d);
		have_key = file_exists(key_path, d);
		if (have_crt < 0 || have_key < 0)
			return -1;
		if (have_crt && have_key)
			return ca_load(crt_path, key_path, now, req->days, ca,
				       d);
		if (have_crt != have_key) {
			diag_addf(d,
				  "%s: missing while %s exists (restore it, or "
				  "make a new CA and update the caBundle)",
				  have_crt ? key_path : crt_path,
				  have_crt ? crt_path : key_path);
			return -1;
		}
	}
	ca->key = new_key(d);
	if (!ca->key)
		return -1;
	ca->cert = make_ca(ca->key, now, d);
	if (!ca->cert)
		return -1;
	ca->made = true;
	return 0;
}

/* ---- the API ------------------------------------------------------------ */

int certs_generate(const struct certs_request *req, struct diag *d)
{
	const char *dir = req->out_dir;
	char *ca_crt = NULL, *ca_key = NULL;
	struct ca ca = {NULL, NULL, false};
	EVP_PKEY *key = NULL;
	X509 *cert = NULL;
	struct pem p_ca_key = {0}, p_ca_crt = {0}, p_key = {0}, p_crt = {0};
	time_t now = time(NULL);
	int dirfd = -1, rc = -1;

	if (certs_request_check(req, d) < 0)
		return -1;
	if (make_dirs(dir, d) < 0)
		goto out;
	dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0) {
		diag_addf(d, "%s: cannot open directory: %s", dir,
			  strerror(errno));
		goto out;
	}
	/* One writer per directory; readers need no lock (renames). */
	while (flock(dirfd, LOCK_EX) < 0) {
		if (errno != EINTR) {
			diag_addf(d, "%s: cannot lock directory: %s", dir,
				  strerror(errno));
			goto out;
		}
	}
	ca_crt = path_join(dir, CERTS_CA_CRT, d);
	ca_key = path_join(dir, CERTS_CA_KEY, d);
	if (!ca_crt || !ca_key)
		goto out;
	if (ca_obtain(req, ca_crt, ca_key, now, &ca, d) < 0)
		goto out;
	key = new_key(d);
	if (!key)
		goto out;
	cert = make_serving(req, ca.cert, ca.key, key, now, d);
	if (!cert)
		goto out;
	/* Encode everything before replacing anything. */
	if (ca.made && (pem_key(ca.key, &p_ca_key, d) < 0 ||
			pem_cert(ca.cert, &p_ca_crt, d) < 0))
		goto out;
	if (pem_key(key, &p_key, d) < 0 || pem_cert(cert, &p_crt, d) < 0)
		goto out;
	/* The order is the contract in certs.h: tls.crt last. */
	if (ca.made &&
	    (write_atomic(dir, dirfd, CERTS_CA_KEY, &p_ca_key, 0600, d) < 0 ||
	     write_atomic(dir, dirfd, CERTS_CA_CRT, &p_ca_crt, 0644, d) < 0))
		goto out;
	if (write_atomic(dir, dirfd, CERTS_TLS_KEY, &p_key, 0600, d) < 0 ||
	    write_atomic(dir, dirfd, CERTS_TLS_CRT, &p_crt, 0644, d) < 0)
		goto out;
	rc = 0;
out:
	pem_release(&p_crt);
	pem_release(&p_key);
	pem_release(&p_ca_crt);
	pem_release(&p_ca_key);
	X509_free(cert);
	EVP_PKEY_free(key);
	X509_free(ca.cert);
	EVP_PKEY_free(ca.key);
	free(ca_key);
	free(ca_crt);
	if (dirfd >= 0)
		close(dirfd); /* releases the lock */
	return rc;
}

int certs_ca_bundle(const char *ca_path, char **out, struct diag *d)
{
	char *buf = NULL, *b64 = NULL;
	size_t len = 0;
	BIO *bio = NULL;
	X509 *x = NULL;
	int rc = -1;

	*out = NULL;
	if (read_small_file(ca_path, &buf, &len, d) < 0)
		return -1;
	/* A caBundle is public: never ship a key into the cluster by mistake.
	 */
	if (memmem(buf, len, "PRIVATE KEY-----", 16)) {
		diag_addf(d,
			  "%s: holds a private key (a caBundle must contain "
			  "certificates only)",
			  ca_path);
		goto out;
	}
	bio = BIO_new_mem_buf(buf, (int)len);
	if (!bio) {
		diag_addf(d, "%s: out of memory", ca_path);
		goto out;
	}
	x = PEM_read_bio_X509(bio, NULL, NULL, NULL);
	if (!x) {
		pem_problem(ca_path, buf, "CERTIFICATE", "certificate", d);
		goto out;
	}
	b64 = malloc(4 * ((len + 2) / 3) + 1);
	if (!b64) {
		diag_addf(d, "%s: out of memory", ca_path);
		goto out;
	}
	/* EVP_EncodeBlock writes one line, no newlines, NUL-terminated. */
	EVP_EncodeBlock((unsigned char *)b64, (const unsigned char *)buf,
			(int)len);
	*out = b64;
	rc = 0;
out:
	X509_free(x);
	BIO_free(bio);
	file_free_secret(buf, len);
	return rc;
}

int certs_check_pem(const char *cert_name, const char *cert_pem,
		    const char *key_name, const char *key_pem, time_t now,
		    struct certs_info *info, struct diag *d)
{
	X509 *x = NULL;
	EVP_PKEY *key = NULL;
	int rc = -1;

	if (info)
		memset(info, 0, sizeof(*info));
	if (parse_cert(cert_name, cert_pem, strlen(cert_pem), &x, d) < 0)
		goto out;
	if (info)
		fill_info(x, info);
	rc = 0;
	if (parse_key(key_name, key_pem, strlen(key_pem), &key, d) < 0 ||
	    check_key_matches(cert_name, x, key_name, key, d) < 0)
		rc = -1;
	if (check_validity(cert_name, x, now, d) < 0)
		rc = -1;
out:
	EVP_PKEY_free(key);
	X509_free(x);
	return rc;
}

int certs_check_pair(const char *cert_pem_path, const char *key_pem_path,
		     time_t now, struct certs_info *info, struct diag *d)
{
	X509 *x = NULL;
	EVP_PKEY *key = NULL;
	int rc = -1;

	if (info)
		memset(info, 0, sizeof(*info));
	if (load_cert(cert_pem_path, &x, d) < 0)
		goto out;
	if (info)
		fill_info(x, info);
	rc = 0;
	/* Report every problem at once: a bad key and an expired cert. */
	if (load_key(key_pem_path, &key, d) < 0 ||
	    check_key_matches(cert_pem_path, x, key_pem_path, key, d) < 0)
		rc = -1;
	if (check_validity(cert_pem_path, x, now, d) < 0)
		rc = -1;
out:
	EVP_PKEY_free(key);
	X509_free(x);
	return rc;
}

/* ---- digests for kube/peer.c -------------------------------------------- */

int certs_sha256(const void *a, size_t alen, const void *b, size_t blen,
		 unsigned char out[CERTS_SHA256_LEN])
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	unsigned int n = 0;
	int ok;

	if (!ctx)
		return -1;
	ok = EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 &&
	     (alen == 0 || EVP_DigestUpdate(ctx, a, alen) == 1) &&
	     (blen == 0 || EVP_DigestUpdate(ctx, b, blen) == 1) &&
	     EVP_DigestFinal_ex(ctx, out, &n) == 1 && n == CERTS_SHA256_LEN;
	EVP_MD_CTX_free(ctx);
	ERR_clear_error();
	return ok ? 0 : -1;
}

int certs_spki_sha256(const char *name, const char *cert_pem, size_t len,
		      unsigned char out[CERTS_SHA256_LEN], struct diag *d)
{
	unsigned char *der = NULL;
	X509 *x;
	int n, rc;

	if (len > INT_MAX) {
		diag_addf(d, "%s: certificate too large", name);
		return -1;
	}
	if (parse_cert(name, cert_pem, len, &x, d) < 0)
		return -1;
	n = i2d_PUBKEY(X509_get0_pubkey(x), &der);
	X509_free(x);
	if (n <= 0) {
		diag_addf(d, "%s: cannot encode the certificate's public key (%s)",
			  name, ossl_why());
		return -1;
	}
	rc = certs_sha256(der, (size_t)n, NULL, 0, out);
	OPENSSL_free(der);
	if (rc < 0)
		diag_addf(d, "%s: SHA-256 failed", name);
	return rc;
}
