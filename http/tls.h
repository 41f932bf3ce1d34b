/*
 * tls: the GnuTLS side of the HTTPS server (server.c), so that server.c
 * speaks libmicrohttpd only.  A GnuTLS session is passed as the void
 * pointer libmicrohttpd hands out (MHD_CONNECTION_INFO_GNUTLS_SESSION);
 * nothing here knows libmicrohttpd.
 *
 *   the serving identity   one certificate chain and key per process,
 *                          swapped at run time (tls_identity_set)
 *   the priority string    which versions, ciphers and key exchanges
 *   cork / uncork          one TLS record and one send per answer
 *
 * All functions are safe to call from any thread.
 */
#ifndef GPUGATE_TLS_H
#define GPUGATE_TLS_H

#include <stdbool.h>
#include <stddef.h>

struct diag;

/* For MHD_OPTION_HTTPS_PRIORITIES: TLS 1.2 and 1.3, AEAD ciphers, forward
 * secrecy, server preference. */
extern const char tls_priorities[];

/*
 * The certificate retrieve callback for MHD_OPTION_HTTPS_CERT_CALLBACK: a
 * gnutls_certificate_retrieve_function2, returned as a generic function
 * pointer so that its caller needs no GnuTLS header (libmicrohttpd reads
 * the option back with its real type).  It serves the identity installed
 * by tls_identity_set(); the handshake fails while there is none.
 */
typedef void (*tls_any_fn)(void);
tls_any_fn tls_cert_callback(void);

/*
 * Parses a PEM certificate chain (at most 8 certificates) and its PEM
 * private key, and serves them to every handshake from now on.  The
 * identity is process-wide (GnuTLS's retrieve callback carries no user
 * pointer): one serving certificate per process.  Returns -1 with a
 * message, the current identity kept, when either does not parse.
 */
int tls_identity_set(const char *cert_pem, const char *key_pem, struct diag *d);

/* Frees the current identity and those it replaced.  Only once no
 * handshake can run (the server is stopped). */
void tls_identity_clear(void);

/*
 * Holds what is sent on session until tls_uncork(), so that an answer of
 * len bytes goes out as one record and one send.  Returns true when it
 * corked: answers over 8 KiB, or a NULL session, are left alone.
 */
bool tls_cork(void *session, size_t len);

/*
 * Sends what tls_cork() held (nothing to do when not corked) and pushes it
 * out of the kernel at once.  A session whose client does not read its
 * answers is shut down.  NULL: no-op.
 */
void tls_uncork(void *session);

#endif
