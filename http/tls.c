#include "http/tls.h"

#include "base/diag.h"
#include "base/log.h"

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/*
 * TLS 1.2 and 1.3 only, AEAD ciphers only, forward-secret key exchange
 * only, server preference.  The kube-apiserver (Go crypto/tls) negotiates
 * TLS 1.3 with any of these.
 */
const char tls_priorities[] =
    "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:-CIPHER-ALL:+AES-128-GCM:"
    "+AES-256-GCM:+CHACHA20-POLY1305:-MAC-ALL:+AEAD:-KX-ALL:+ECDHE-ECDSA:"
    "+ECDHE-RSA:%SERVER_PRECEDENCE";

#define MAX_CHAIN    8
#define RETIRED_KEPT 4

/* ---- the certificate, swapped at run time ------------------------------ */

struct identity {
	gnutls_pcert_st pcert[MAX_CHAIN];
	unsigned n;
	gnutls_privkey_t key;
};

/*
 * GnuTLS's retrieve callback carries no user pointer, so the identity is
 * process-wide: one serving certificate per process.  Replaced identities
 * stay allocated for a few more swaps, long after any handshake that may
 * still be reading them has finished (a handshake takes milliseconds,
 * certificate rotations are hours apart).
 */
static pthread_mutex_t id_mu = PTHREAD_MUTEX_INITIALIZER;
static struct identity *id_cur;
static struct identity *id_retired[RETIRED_KEPT];

static void identity_free(struct identity *id)
{
	if (!id)
		return;
	for (unsigned i = 0; i < id->n; i++)
		gnutls_pcert_deinit(&id->pcert[i]);
	if (id->key)
		gnutls_privkey_deinit(id->key);
	free(id);
}

static struct identity *identity_parse(const char *cert_pem,
				       const char *key_pem, struct diag *d)
{
	struct identity *id = calloc(1, sizeof(*id));
	gnutls_datum_t cd, kd;
	int rc;

	if (!id) {
		diag_addf(d, "out of memory");
		return NULL;
	}
	cd.data = (unsigned char *)cert_pem;
	cd.size = (unsigned)strlen(cert_pem);
	kd.data = (unsigned char *)key_pem;
	kd.size = (unsigned)strlen(key_pem);
	id->n = MAX_CHAIN;
	rc = gnutls_pcert_list_import_x509_raw(id->pcert, &id->n, &cd,
					       GNUTLS_X509_FMT_PEM, 0);
	if (rc < 0 || id->n == 0) {
		diag_addf(d, "cannot read the certificate: %s",
			  gnutls_strerror(rc));
		id->n = 0;
		goto fail;
	}
	rc = gnutls_privkey_init(&id->key);
	if (rc >= 0)
		rc = gnutls_privkey_import_x509_raw(
		    id->key, &kd, GNUTLS_X509_FMT_PEM, NULL, 0);
	if (rc < 0) {
		diag_addf(d, "cannot read the private key: %s",
			  gnutls_strerror(rc));
		goto fail;
	}
	return id;
fail:
	identity_free(id);
	return NULL;
}

static void identity_install(struct identity *id)
{
	struct identity *old;

	pthread_mutex_lock(&id_mu);
	old = id_cur;
	id_cur = id;
	if (old) {
		identity_free(id_retired[RETIRED_KEPT - 1]);
		memmove(&id_retired[1], &id_retired[0],
			sizeof(id_retired[0]) * (RETIRED_KEPT - 1));
		id_retired[0] = old;
	}
	pthread_mutex_unlock(&id_mu);
}

int tls_identity_set(const char *cert_pem, const char *key_pem, struct diag *d)
{
	struct identity *id = identity_parse(cert_pem, key_pem, d);

	if (!id)
		return -1;
	identity_install(id);
	return 0;
}

void tls_identity_clear(void)
{
	pthread_mutex_lock(&id_mu);
	identity_free(id_cur);
	id_cur = NULL;
	for (int i = 0; i < RETIRED_KEPT; i++) {
		identity_free(id_retired[i]);
		id_retired[i] = NULL;
	}
	pthread_mutex_unlock(&id_mu);
}

static int retrieve_cert(gnutls_session_t session, const gnutls_datum_t *req_ca,
			 int nreqs, const gnutls_pk_algorithm_t *algos,
			 int nalgos, gnutls_pcert_st **pcert,
			 unsigned int *pcert_length, gnutls_privkey_t *key)
{
	int rc = -1;

	(void)session;
	(void)req_ca;
	(void)nreqs;
	(void)algos;
	(void)nalgos;
	pthread_mutex_lock(&id_mu);
	if (id_cur) {
		*pcert = id_cur->pcert;
		*pcert_length = id_cur->n;
		*key = id_cur->key;
		rc = 0;
	}
	pthread_mutex_unlock(&id_mu);
	return rc;
}

tls_any_fn tls_cert_callback(void)
{
	gnutls_certificate_retrieve_function2 *fn = retrieve_cert;

	return (tls_any_fn)fn;
}

/* ---- one record, one send ---------------------------------------------- */

/*
 * One TLS record and one send per response.  libmicrohttpd 0.9.75 hands
 * the header and the body to gnutls_record_send() separately: two records,
 * two sendmsg() calls, and the client wakes up twice.  A small response is
 * corked in GnuTLS when it is queued, and uncorked once libmicrohttpd has
 * written all of it (server.c's on_completed(), which libmicrohttpd calls
 * before it reads the next request or closes the connection).  Which
 * answers are corked is server.c's choice (see there).
 *
 * The uncork does not wait.  It can only fall short when the client has
 * left more than a socket buffer of earlier responses unread, which an
 * HTTP/1.1 client that waits for its answers never does: such a
 * connection is shut down rather than left with a response that nothing
 * would flush.
 *
 * What the uncork wrote is then pushed out of the kernel.  For a small
 * answer libmicrohttpd sends header and body in one piece after setting
 * TCP_CORK on the socket, and counts on its TCP_NODELAY after the send to
 * push the data; corked in GnuTLS, the data reaches the socket after that
 * push and would sit in the kernel's cork for its 200 ms ceiling.  Setting
 * TCP_NODELAY again pushes it at once, corked socket or not (tcp(7)).
 */
#define CORK_MAX 8192

bool tls_cork(void *session, size_t len)
{
	if (!session || len > CORK_MAX)
		return false;
	gnutls_record_cork(session);
	return true;
}

/* The socket GnuTLS sends on: the descriptor libmicrohttpd gave the
 * session (gnutls_transport_set_int()). */
static int socket_of(gnutls_session_t tls)
{
	return gnutls_transport_get_int(tls);
}

void tls_uncork(void *session)
{
	gnutls_session_t tls = session;
	ssize_t rc;

	if (!tls)
		return;
	rc = gnutls_record_uncork(tls, 0); /* 0 at once when not corked */
	if (rc == 0)
		return;
	if (rc > 0) {
		int one = 1;

		setsockopt(socket_of(tls), IPPROTO_TCP, TCP_NODELAY, &one,
			   sizeof(one));
		return;
	}
	log_event(LOG_WARN,
		  "msg=\"closing a connection whose client does not read its "
		  "responses\" error=\"%s\"",
		  gnutls_strerror((int)rc));
	shutdown(socket_of(tls), SHUT_RDWR);
}
