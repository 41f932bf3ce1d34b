/*
 * certs: the webhook's TLS material, made and checked with OpenSSL 3.
 *
 * certs_generate() writes a private CA and a serving certificate signed by it
 * into one directory; certs_ca_bundle() turns ca.crt into the base64 string a
 * ValidatingWebhookConfiguration / MutatingWebhookConfiguration needs as
 * caBundle; certs_check_pair() tells the server whether a certificate and key
 * it is about to (re)load are usable.
 *
 * Every fallible function returns 0 or -1 and adds one or more lines to the
 * diagnostics sink `d` (NULL allowed); each line names the file at fault.
 * Pointer parameters are borrowed.  Nothing here keeps state between calls;
 * the functions are safe to call from several threads at once.
 */
#ifndef GPUGATE_CERTS_H
#define GPUGATE_CERTS_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

struct diag;

/* Bounds on certs_request.days. */
#define CERTS_MIN_DAYS 1
#define CERTS_MAX_DAYS 3650
/* A new CA is valid for ten years, whatever the serving certificate gets. */
#define CERTS_CA_DAYS 3650
/* notBefore is backdated this much so that a slow clock elsewhere accepts a
 * brand-new certificate. */
#define CERTS_CLOCK_SKEW_SECONDS 300
/* Certificate and key files larger than this are refused unread. */
#define CERTS_MAX_FILE_BYTES (1024 * 1024)

/* The file names certs_generate() writes inside out_dir. */
#define CERTS_CA_CRT  "ca.crt"
#define CERTS_CA_KEY  "ca.key"
#define CERTS_TLS_CRT "tls.crt"
#define CERTS_TLS_KEY "tls.key"

struct certs_request {
	const char *out_dir;	/* made with parents, 0755 & ~umask */
	const char *const *dns; /* DNS names for subjectAltName */
	size_t n_dns;
	const char *const *ips; /* IPv4 or IPv6 literals for subjectAltName */
	size_t n_ips;
	int days;    /* serving certificate validity, 1..3650 */
	bool new_ca; /* replace an existing CA instead of reusing it */
};

/*
 * Checks a request without touching the disk: out_dir set, days within
 * CERTS_MIN_DAYS..CERTS_MAX_DAYS, at least one DNS name or IP, every DNS name
 * a host name (letters, digits, '-', dot-separated labels of 1..63, at most
 * 253 in all, optionally "*." first) and not an IP literal, every IP parsed
 * by inet_pton as IPv4 or IPv6.  Adds one line per problem, e.g.
 *
 *   invalid IP address "300.1.2.3" (expected IPv4 such as 10.0.0.1 or IPv6
 *   such as fd00::1)
 *
 * (on one line).  A command line can call it first to tell a usage error
 * from a failure; certs_generate() calls it too.
 */
int certs_request_check(const struct certs_request *req, struct diag *d);

/*
 * Writes, all PEM, into req->out_dir:
 *
 *   ca.key   ECDSA P-256 private key, PKCS#8, mode 0600
 *   ca.crt   self-signed, CN "gpugate-ca", basicConstraints critical CA:TRUE,
 *            keyUsage critical keyCertSign,cRLSign, subjectKeyIdentifier,
 *            valid from now - 5 minutes for CERTS_CA_DAYS days
 *   tls.key  ECDSA P-256 private key, PKCS#8, mode 0600
 *   tls.crt  signed by the CA: CN the first DNS name (else the first IP, else
 *            "gpugate"; a name longer than the 64 characters CN allows is
 *            skipped), subjectAltName with every DNS name and IP in request
 *            order, basicConstraints CA:FALSE, keyUsage critical
 *            digitalSignature, extendedKeyUsage serverAuth,
 *            subjectKeyIdentifier, authorityKeyIdentifier, a random positive
 *            128-bit serial, valid from now - 5 minutes for req->days days
 *
 * The CA: when ca.crt and ca.key both exist and !req->new_ca, they are
 * reused (the key must match the certificate, the certificate must be a CA
 * and must stay valid at least as long as the new serving certificate), so
 * rotating the serving certificate keeps the caBundle.  When neither exists,
 * or req->new_ca, a new CA replaces them.  Exactly one of the two existing is
 * an error: silently minting a new CA would break the caBundle already
 * installed in the cluster.
 *
 * Order and atomicity: each file is written to a temporary file in out_dir
 * (".NAME.XXXXXX"), fsync'ed, renamed over NAME, and the directory fsync'ed,
 * so a reader sees either the old or the new file, never half of one.  Files
 * are replaced in this order:
 *
 *   ca.key, ca.crt (only when a new CA is made), tls.key, tls.crt
 *
 * tls.crt is the commit point: a server that reloads when tls.crt changes
 * finds the matching tls.key already in place.  Between the tls.key and the
 * tls.crt renames the pair on disk does not match; a reader triggered by
 * tls.key (or by anything else in that window) must run certs_check_pair()
 * and keep its current certificate when it fails, then retry on the tls.crt
 * change.  certs_check_pair() reads the files itself: a reader that then
 * reads them again may get a newer pair than the one checked, so it must
 * also reject a mismatch when it loads (GnuTLS does).  The CA is written
 * before the serving certificate it signed.
 * Concurrent certs_generate() calls on the same directory are serialised
 * with flock() on the directory.
 *
 * The inputs (days, every DNS name and IP) are checked before anything is
 * created.  On failure returns -1 with the reason in d; files already renamed
 * into place stay (each one whole), temporary files are removed.
 */
int certs_generate(const struct certs_request *req, struct diag *d);

/*
 * Reads the PEM file at ca_path (at most CERTS_MAX_FILE_BYTES, and it must
 * hold a certificate) and sets *out to the base64 of its bytes on one line,
 * without newlines, NUL-terminated: the caBundle of a webhook configuration.
 * A file holding a private key is refused: the caBundle goes into the
 * cluster.  The caller frees *out with free().  On failure *out is NULL.
 */
int certs_ca_bundle(const char *ca_path, char **out, struct diag *d);

struct certs_info {
	time_t not_before, not_after;
	char subject[256]; /* RFC 2253, e.g. "CN=localhost"; truncated to fit */
};

/*
 * Loads the PEM certificate at cert_pem_path and the PEM private key at
 * key_pem_path and checks that the key belongs to the certificate and that
 * now lies within [notBefore, notAfter].  When info is not NULL it is zeroed
 * and, whenever the certificate could be parsed, filled in even if the check
 * then fails.  Returns 0 when the pair is usable; -1 otherwise, with lines
 * such as
 *
 *   "DIR/tls.crt: certificate expired on 2026-01-02 03:04:05 UTC"
 *   "DIR/tls.crt: certificate is not valid before 2026-01-02 03:04:05 UTC"
 *   "DIR/tls.key: private key does not match the certificate in DIR/tls.crt"
 *   "DIR/tls.crt: cannot open: No such file or directory"
 *   "DIR/tls.key: no PEM private key found"
 *   "DIR/tls.crt: cannot parse the PEM certificate (REASON FROM OPENSSL)"
 *
 * A passphrase-protected key is refused, never prompted for.
 */
int certs_check_pair(const char *cert_pem_path, const char *key_pem_path,
		     time_t now, struct certs_info *info, struct diag *d);

/*
 * The same checks on PEM text already in memory (cert_name and key_name name
 * them in messages).  A server reloading a certificate reads both files
 * once, checks those bytes, and installs the same bytes: a rotation that
 * swaps the files between a check and a read cannot slip a mismatched pair
 * in.
 */
int certs_check_pem(const char *cert_name, const char *cert_pem,
		    const char *key_name, const char *key_pem, time_t now,
		    struct certs_info *info, struct diag *d);

/* ---- digests (kube/peer.h: the peer token and the pinned key) ----------- */

#define CERTS_SHA256_LEN 32

/* SHA-256 of a[0, alen) followed by b[0, blen) (either may be empty).
 * 0, or -1 when OpenSSL fails (out of memory). */
int certs_sha256(const void *a, size_t alen, const void *b, size_t blen,
		 unsigned char out[CERTS_SHA256_LEN]);

/*
 * SHA-256 of the DER SubjectPublicKeyInfo of the first certificate in the
 * PEM text cert_pem (len bytes): what libcurl's CURLOPT_PINNEDPUBLICKEY
 * "sha256//" compares.  name names the text in messages.  0, or -1 with
 * one line in d ("NAME: no PEM certificate found").
 */
int certs_spki_sha256(const char *name, const char *cert_pem, size_t len,
		      unsigned char out[CERTS_SHA256_LEN], struct diag *d);

#endif
