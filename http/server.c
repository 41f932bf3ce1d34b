#include "http/server.h"

#include "base/diag.h"
#include "base/log.h"
#include "base/strbuf.h"
#include "webhook/handler.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/*
 * TLS 1.2 and 1.3 only, AEAD ciphers only, forward-secret key exchange
 * only, server preference.  The kube-apiserver (Go crypto/tls) negotiates
 * TLS 1.3 with any of these.
 */
#define TLS_PRIORITIES                                                     \
	"NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:-CIPHER-ALL:+AES-128-GCM:" \
	"+AES-256-GCM:+CHACHA20-POLY1305:-MAC-ALL:+AEAD:-KX-ALL:+ECDHE-ECDSA:" \
	"+ECDHE-RSA:%SERVER_PRECEDENCE"

#define MAX_CHAIN 8
#define RETIRED_KEPT 4

enum route {
	ROUTE_MUTATE,
	ROUTE_VALIDATE,
};

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

static struct identity *identity_parse(const char *cert_pem, const char *key_pem,
				       struct diag *d)
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
		diag_addf(d, "cannot read the certificate: %s", gnutls_strerror(rc));
		id->n = 0;
		goto fail;
	}
	rc = gnutls_privkey_init(&id->key);
	if (rc >= 0)
		rc = gnutls_privkey_import_x509_raw(id->key, &kd, GNUTLS_X509_FMT_PEM,
						    NULL, 0);
	if (rc < 0) {
		diag_addf(d, "cannot read the private key: %s", gnutls_strerror(rc));
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

static void identity_clear(void)
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

/* ---- requests ----------------------------------------------------------- */

struct request {
	enum route route;
	char *body;
	size_t len;
	size_t cap;
	bool answered;     /* a response was queued */
};

struct server {
	struct MHD_Daemon *daemon;
	struct server_config cfg;
	atomic_uint in_flight;
	uint16_t port;
	/* gpugate accepts, libmicrohttpd serves (see "accepting" below) */
	int listen_fd;
	int wake[2];        /* a byte on wake[1] stops the acceptor */
	pthread_t acceptor;
	bool accepting;
	/* requests begun on each worker, in the order workers first served */
	atomic_uint workers_seen;
	atomic_ulong worker_requests[SERVER_MAX_THREADS];
};

/* This thread's index among the server's workers, -1 until its first
 * request.  A worker thread belongs to one server for its whole life. */
static _Thread_local int worker_index = -1;

static void count_worker_request(struct server *s)
{
	if (worker_index < 0)
		worker_index = (int)atomic_fetch_add(&s->workers_seen, 1);
	if (worker_index < SERVER_MAX_THREADS)
		atomic_fetch_add_explicit(&s->worker_requests[worker_index], 1,
					  memory_order_relaxed);
}

/*
 * One TLS record and one send per response.  libmicrohttpd 0.9.75 hands
 * the header and the body to gnutls_record_send() separately: two records,
 * two sendmsg() calls, and the client wakes up twice.  A small response is
 * corked in GnuTLS when it is queued, and uncorked once libmicrohttpd has
 * written all of it (on_completed(), which it calls before it reads the
 * next request or closes the connection).
 *
 * Only answers to admission reviews are corked, once their body has been
 * read whole.  An answer given before the body is read (an error) makes
 * libmicrohttpd close the socket right after on_completed(); with unread
 * input, that close is a reset, which can reach the client before the
 * response it has not read yet.  Health and metrics answers are left as
 * they were: they are not worth the care.
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

static gnutls_session_t tls_of(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);

	return ci ? (gnutls_session_t)ci->tls_session : NULL;
}

static void cork(struct MHD_Connection *c, size_t len)
{
	gnutls_session_t tls = len <= CORK_MAX ? tls_of(c) : NULL;

	if (tls)
		gnutls_record_cork(tls);
}

static void uncork(struct MHD_Connection *c)
{
	gnutls_session_t tls = tls_of(c);
	const union MHD_ConnectionInfo *fd;
	ssize_t rc;

	if (!tls)
		return;
	rc = gnutls_record_uncork(tls, 0); /* 0 at once when not corked */
	if (rc == 0)
		return;
	fd = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (rc > 0) {
		int one = 1;

		if (fd)
			setsockopt(fd->connect_fd, IPPROTO_TCP, TCP_NODELAY, &one,
				   sizeof(one));
		return;
	}
	log_event(LOG_WARN,
		  "msg=\"closing a connection whose client does not read its "
		  "responses\" error=\"%s\"",
		  gnutls_strerror((int)rc));
	if (fd)
		shutdown(fd->connect_fd, SHUT_RDWR);
}

/*
 * One read per request.  GnuTLS reads a record in two recv() calls, its
 * 5-byte header and then the rest, and a review arrives as one record: two
 * system calls a request where one would do.  gpugate gives GnuTLS a pull
 * function that reads up to a whole record at once and hands it over in
 * the pieces GnuTLS asks for.  The buffer is taken for a read and given
 * back once emptied, so an idle connection holds none.
 *
 * libmicrohttpd still sees every byte in order: it reads through GnuTLS
 * until GnuTLS says "again", which it only does when the buffer is empty
 * and the socket has nothing more.  That holds with MHD_USE_EPOLL, where
 * libmicrohttpd keeps a connection readable until then; with poll() or
 * select() it would wait on the socket for a record already in the buffer.
 * GnuTLS's sends are untouched: its send pointer stays the descriptor
 * libmicrohttpd gave it.  test_hostile.py sends records that arrive
 * together.
 */
#define TLS_RECORD_MAX (5 + 16384 + 256)

struct tls_in {
	int fd;
	char *buf;   /* TLS_RECORD_MAX bytes, or NULL when empty */
	size_t off;  /* what GnuTLS has taken of buf */
	size_t len;  /* what buf holds */
};

static ssize_t tls_pull(gnutls_transport_ptr_t ptr, void *data, size_t size)
{
	struct tls_in *in = ptr;
	size_t k;

	if (!in->buf) {
		ssize_t n;

		in->buf = size < TLS_RECORD_MAX ? malloc(TLS_RECORD_MAX) : NULL;
		if (!in->buf) /* large, or out of memory: read it directly */
			return recv(in->fd, data, size, 0);
		n = recv(in->fd, in->buf, TLS_RECORD_MAX, 0);
		if (n <= 0) {
			int e = errno;

			free(in->buf);
			in->buf = NULL;
			errno = e;
			return n;
		}
		in->off = 0;
		in->len = (size_t)n;
	}
	k = in->len - in->off < size ? in->len - in->off : size;
	memcpy(data, in->buf + in->off, k);
	in->off += k;
	if (in->off == in->len) {
		free(in->buf);
		in->buf = NULL;
	}
	return (ssize_t)k;
}

/* GnuTLS waits with this only for a blocking session; libmicrohttpd's are
 * not, but the answer is kept true. */
static int tls_pull_timeout(gnutls_transport_ptr_t ptr, unsigned int ms)
{
	struct tls_in *in = ptr;
	struct pollfd pfd = {.fd = in->fd, .events = POLLIN};

	if (in->buf)
		return 1;
	return poll(&pfd, 1, ms == GNUTLS_INDEFINITE_TIMEOUT ? -1 : (int)ms);
}

static void on_connection(void *cls, struct MHD_Connection *c,
			  void **socket_context,
			  enum MHD_ConnectionNotificationCode code)
{
	struct tls_in *in = *socket_context;

	(void)cls;
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		gnutls_session_t tls = tls_of(c);
		const union MHD_ConnectionInfo *fd =
			MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);

		/* Without it (no memory), GnuTLS reads for itself as before. */
		if (!tls || !fd || !(in = calloc(1, sizeof(*in))))
			return;
		in->fd = fd->connect_fd;
		gnutls_transport_set_ptr2(tls, in,
					  (gnutls_transport_ptr_t)(long)in->fd);
		gnutls_transport_set_pull_function(tls, tls_pull);
		gnutls_transport_set_pull_timeout_function(tls, tls_pull_timeout);
		*socket_context = in;
		return;
	}
	if (in) {
		free(in->buf);
		free(in);
		*socket_context = NULL;
	}
}

static enum MHD_Result respond(struct MHD_Connection *c, unsigned status,
			       const char *type, char *body, size_t len,
			       bool close_after)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (close_after)
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result respond_text(struct MHD_Connection *c, unsigned status,
				    const char *text, bool close_after)
{
	char *body = strdup(text);

	if (!body)
		return MHD_NO;
	return respond(c, status, "text/plain; charset=utf-8", body, strlen(body),
		       close_after);
}

static enum MHD_Result serve_get(struct server *s, struct MHD_Connection *c,
				 const char *url)
{
	if (strcmp(url, "/healthz") == 0)
		return respond_text(c, 200, "ok\n", false);
	if (strcmp(url, "/readyz") == 0) {
		struct strbuf why;
		bool ok;
		char *body;
		size_t len;

		if (!s->cfg.ready)
			return respond_text(c, 200, "ok\n", false);
		strbuf_init(&why, 8192);
		ok = s->cfg.ready(s->cfg.ctx, &why);
		if (ok)
			strbuf_addf(&why, "ok\n");
		body = strbuf_take(&why, &len);
		if (!body)
			return MHD_NO;
		return respond(c, ok ? 200 : 503, "text/plain; charset=utf-8", body, len,
			       false);
	}
	if (strcmp(url, "/metrics") == 0) {
		char *body = NULL;
		size_t len = 0;

		if (!s->cfg.metrics || s->cfg.metrics(s->cfg.ctx, &body, &len) < 0)
			return respond_text(c, 500, "metrics unavailable\n", false);
		return respond(c, 200, "text/plain; version=0.0.4; charset=utf-8", body,
			       len, false);
	}
	return respond_text(c, 404, "not found\n", false);
}

static bool is_json(const char *ct)
{
	size_t n = strlen("application/json");

	return ct && strncasecmp(ct, "application/json", n) == 0 &&
	       (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ');
}

static enum MHD_Result begin_post(struct server *s, struct MHD_Connection *c,
				  enum route route, void **req_cls)
{
	const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						     MHD_HTTP_HEADER_CONTENT_TYPE);
	const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						     MHD_HTTP_HEADER_CONTENT_LENGTH);
	struct request *r;

	if (!is_json(ct))
		return respond_text(c, 415,
				    "gpugate: bad request: Content-Type must be "
				    "application/json\n",
				    true);
	/*
	 * Refuse an oversized body before reading any of it.  That needs its
	 * length up front: a chunked body could only be refused once read
	 * (libmicrohttpd answers before or after a body, never in the middle),
	 * so it is refused at once.  The kube-apiserver always sends a
	 * Content-Length.
	 */
	if (!cl)
		return respond_text(c, 411,
				    "gpugate: bad request: a Content-Length is "
				    "required (chunked bodies are not accepted)\n",
				    true);
	{
		char *end;
		unsigned long long n = strtoull(cl, &end, 10);

		if (*end == '\0' && n > s->cfg.body_cap) {
			char msg[128];

			snprintf(msg, sizeof(msg),
				 "gpugate: request body too large (%llu bytes, at most "
				 "%zu)\n",
				 n, s->cfg.body_cap);
			return respond_text(c, 413, msg, true);
		}
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		return MHD_NO;
	r->route = route;
	*req_cls = r;
	atomic_fetch_add(&s->in_flight, 1);
	return MHD_YES;
}

static bool append_body(struct request *r, const char *data, size_t n,
			size_t cap)
{
	size_t ncap;
	char *nb;

	if (n > cap - r->len)
		return false;
	if (r->len + n > r->cap) {
		ncap = r->cap ? r->cap : 8192;
		while (ncap < r->len + n)
			ncap *= 2;
		if (ncap > cap)
			ncap = cap;
		nb = realloc(r->body, ncap);
		if (!nb)
			return false;
		r->body = nb;
		r->cap = ncap;
	}
	memcpy(r->body + r->len, data, n);
	r->len += n;
	return true;
}

/* *req_cls of a GET between its two calls: answering on the first call
 * would make libmicrohttpd close the connection (it has not seen the end
 * of the request yet), costing every probe a TLS handshake. */
static struct request get_pending;

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c,
				  const char *url, const char *method,
				  const char *version, const char *upload_data,
				  size_t *upload_data_size, void **req_cls)
{
	struct server *s = cls;
	struct request *r = *req_cls;
	struct handler_reply reply;

	(void)version;
	if (r == &get_pending) {
		*req_cls = NULL;
		return serve_get(s, c, url);
	}
	if (!r) {
		bool post = strcmp(method, MHD_HTTP_METHOD_POST) == 0;
		bool get;

		count_worker_request(s);
		get = strcmp(method, MHD_HTTP_METHOD_GET) == 0 ||
		      strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;

		if (strcmp(url, "/mutate") == 0 || strcmp(url, "/validate") == 0) {
			if (!post)
				return respond_text(c, 405, "method not allowed: use POST\n",
						    false);
			return begin_post(s, c,
					  url[1] == 'm' ? ROUTE_MUTATE : ROUTE_VALIDATE,
					  req_cls);
		}
		if (!get)
			return respond_text(c, strcmp(url, "/healthz") == 0 ||
						       strcmp(url, "/readyz") == 0 ||
						       strcmp(url, "/metrics") == 0
					       ? 405
					       : 404,
					    "not found or method not allowed\n", false);
		*req_cls = &get_pending;
		return MHD_YES;
	}
	if (*upload_data_size) {
		size_t n = *upload_data_size;

		*upload_data_size = 0;
		/* Content-Length was checked against the cap and libmicrohttpd
		 * reads no more than it: only memory can run out here. */
		return append_body(r, upload_data, n, s->cfg.body_cap) ? MHD_YES
								       : MHD_NO;
	}
	if (r->answered)
		return MHD_YES;
	r->answered = true;
	handler_admit(s->cfg.handler,
		      r->route == ROUTE_MUTATE ? HANDLER_MUTATE : HANDLER_VALIDATE,
		      r->body ? r->body : "", r->len, &reply);
	if (!reply.body)
		return MHD_NO;
	cork(c, reply.len);
	return respond(c, (unsigned)reply.status, reply.content_type, reply.body,
		       reply.len, false);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct server *s = cls;
	struct request *r = *req_cls;

	(void)toe;
	uncork(c);
	if (!r || r == &get_pending)
		return;
	free(r->body);
	free(r);
	*req_cls = NULL;
	atomic_fetch_sub(&s->in_flight, 1);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[512], q[600];
	size_t n;

	(void)cls;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n && (msg[n - 1] == '\n' || msg[n - 1] == '.'))
		msg[--n] = '\0';
	/* Client-side trouble (bad hellos, resets) is routine: debug level. */
	log_event(LOG_DEBUG, "msg=\"http\" detail=\"%s\"", log_quote(msg, q, sizeof(q)));
}

/* ---- accepting ----------------------------------------------------------- */

/*
 * gpugate accepts connections itself and hands each to libmicrohttpd with
 * MHD_add_connection(), which places it on worker (fd mod workers).  When
 * the workers accept for themselves, whichever wakes first takes the
 * connection, and a client that opens a few keep-alive connections at once
 * (the kube-apiserver does) often lands them all on one worker: one CPU
 * serves while the others idle.  Measured with wrk -c16 on 2 workers: one
 * run in four put all 16 connections on one worker, at 0.65x the
 * throughput of a balanced run.  Accepted sockets get consecutive
 * descriptors, so a burst of connections is spread evenly.  The per-address
 * and global connection limits stay libmicrohttpd's: a connection over
 * them is closed at once, as before.  The price: libmicrohttpd 0.9.75 does
 * not know the TCP_CORK/TCP_NODELAY state of a socket it did not accept and
 * sets TCP_NODELAY after every response (two setsockopt calls a request,
 * 2-4 % of its CPU; docs/benchmarks.md).
 */
static int listen_open(const struct server_config *cfg, uint16_t *port,
		       struct diag *d)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
	socklen_t len;
	int fd, one = 1;

	memset(&ss, 0, sizeof(ss));
	if (inet_pton(AF_INET, cfg->host, &sin->sin_addr) == 1) {
		sin->sin_family = AF_INET;
		sin->sin_port = htons(cfg->port);
		len = sizeof(*sin);
	} else if (inet_pton(AF_INET6, cfg->host, &sin6->sin6_addr) == 1) {
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(cfg->port);
		len = sizeof(*sin6);
	} else {
		diag_addf(d, "listen address \"%s\" is not a numeric IPv4 or IPv6 "
			     "address", cfg->host);
		return -1;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		diag_addf(d, "cannot create a socket: %s", strerror(errno));
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ss.ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 511) < 0) {
		diag_addf(d, "cannot listen on %s:%u: %s", cfg->host, cfg->port,
			  strerror(errno));
		close(fd);
		return -1;
	}
	len = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
		diag_addf(d, "cannot read the listening port: %s", strerror(errno));
		close(fd);
		return -1;
	}
	*port = ntohs(ss.ss_family == AF_INET6 ? sin6->sin6_port : sin->sin_port);
	return fd;
}

static void *accept_loop(void *arg)
{
	struct server *s = arg;
	struct pollfd pf[2] = {{.fd = s->listen_fd, .events = POLLIN},
			       {.fd = s->wake[0], .events = POLLIN}};

	for (;;) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		int fd;

		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			log_event(LOG_ERROR, "msg=\"accept: poll failed\" error=\"%s\"",
				  strerror(errno));
			break;
		}
		if (pf[1].revents)
			break;
		fd = accept4(s->listen_fd, (struct sockaddr *)&ss, &len,
			     SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				/* Out of descriptors: let connections close
				 * rather than spin on the ready socket. */
				struct timespec pause = {0, 50 * 1000 * 1000};

				log_event(LOG_WARN, "msg=\"accept: %s\"", strerror(errno));
				nanosleep(&pause, NULL);
			}
			continue; /* EAGAIN, ECONNABORTED, EINTR, ... */
		}
		/* Closes fd itself when it refuses it (limits, memory). */
		(void)MHD_add_connection(s->daemon, fd, (struct sockaddr *)&ss, len);
	}
	return NULL;
}

/* Stops accepting: new connections are refused, open ones carry on. */
static void accept_stop(struct server *s)
{
	if (s->accepting) {
		char b = 1;

		while (write(s->wake[1], &b, 1) < 0 && errno == EINTR)
			;
		pthread_join(s->acceptor, NULL);
		s->accepting = false;
	}
	if (s->listen_fd >= 0)
		close(s->listen_fd);
	s->listen_fd = -1;
}

static void accept_free(struct server *s)
{
	accept_stop(s);
	for (int i = 0; i < 2; i++)
		if (s->wake[i] >= 0)
			close(s->wake[i]);
	s->wake[0] = s->wake[1] = -1;
}

int server_start(const struct server_config *cfg, const char *cert_pem,
		 const char *key_pem, struct server **out, struct diag *d)
{
	struct server *s = calloc(1, sizeof(*s));
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
			 MHD_USE_TLS | MHD_USE_ITC | MHD_USE_ERROR_LOG |
			 MHD_USE_NO_LISTEN_SOCKET;
	struct identity *id;
	long ncpu;

	if (!s) {
		diag_addf(d, "out of memory");
		return -1;
	}
	s->cfg = *cfg;
	s->listen_fd = s->wake[0] = s->wake[1] = -1;
	if (!s->cfg.body_cap)
		s->cfg.body_cap = SERVER_BODY_CAP_DEFAULT;
	if (!s->cfg.conn_timeout)
		s->cfg.conn_timeout = 30;
	if (!s->cfg.conn_limit)
		s->cfg.conn_limit = 1024;
	if (!s->cfg.per_ip_limit)
		s->cfg.per_ip_limit = 256;
	if (!s->cfg.threads) {
		ncpu = sysconf(_SC_NPROCESSORS_ONLN);
		s->cfg.threads = ncpu > 0 ? (unsigned)ncpu : 2;
	}
	if (s->cfg.threads > SERVER_MAX_THREADS)
		s->cfg.threads = SERVER_MAX_THREADS;
	atomic_init(&s->in_flight, 0);

	s->listen_fd = listen_open(cfg, &s->port, d);
	if (s->listen_fd < 0) {
		free(s);
		return -1;
	}
	if (pipe2(s->wake, O_CLOEXEC) < 0) {
		diag_addf(d, "cannot create a pipe: %s", strerror(errno));
		accept_free(s);
		free(s);
		return -1;
	}
	id = identity_parse(cert_pem, key_pem, d);
	if (!id) {
		accept_free(s);
		free(s);
		return -1;
	}
	identity_install(id);

	s->daemon = MHD_start_daemon(
		flags, 0, NULL, NULL, on_request, s,
		MHD_OPTION_HTTPS_CERT_CALLBACK, retrieve_cert,
		MHD_OPTION_HTTPS_PRIORITIES, TLS_PRIORITIES,
		MHD_OPTION_THREAD_POOL_SIZE, s->cfg.threads,
		MHD_OPTION_CONNECTION_TIMEOUT, s->cfg.conn_timeout,
		MHD_OPTION_CONNECTION_LIMIT, s->cfg.conn_limit,
		/* Request headers only: bodies are buffered by gpugate.  The
		 * pool is cleared for every request on a kept-alive
		 * connection, so it should be no larger than needed. */
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(16 * 1024),
		MHD_OPTION_PER_IP_CONNECTION_LIMIT, s->cfg.per_ip_limit,
		MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
		MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL,
		MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
		MHD_OPTION_END);
	if (!s->daemon) {
		diag_addf(d, "cannot start the HTTPS server on %s:%u", cfg->host,
			  s->port);
		identity_clear();
		accept_free(s);
		free(s);
		return -1;
	}
	/* Set before the first connection is accepted: a request may read it
	 * (through cfg.metrics). */
	*out = s;
	if (pthread_create(&s->acceptor, NULL, accept_loop, s) != 0) {
		*out = NULL;
		diag_addf(d, "cannot start the accepting thread");
		MHD_stop_daemon(s->daemon);
		identity_clear();
		accept_free(s);
		free(s);
		return -1;
	}
	s->accepting = true;
	return 0;
}

int server_set_certificate(struct server *s, const char *cert_pem,
			   const char *key_pem, struct diag *d)
{
	struct identity *id = identity_parse(cert_pem, key_pem, d);

	(void)s;
	if (!id)
		return -1;
	identity_install(id);
	return 0;
}

uint16_t server_port(const struct server *s)
{
	return s->port;
}

unsigned server_worker_count(const struct server *s)
{
	return s->cfg.threads < SERVER_MAX_THREADS ? s->cfg.threads
						   : SERVER_MAX_THREADS;
}

uint64_t server_worker_requests(const struct server *s, unsigned i)
{
	struct server *m = (struct server *)s; /* atomics are read only */

	if (i >= server_worker_count(s) || i >= atomic_load(&m->workers_seen))
		return 0;
	return atomic_load(&m->worker_requests[i]);
}

unsigned server_in_flight(const struct server *s)
{
	return atomic_load(&((struct server *)s)->in_flight);
}

void server_stop(struct server *s, unsigned grace_ms)
{
	struct timespec tick = {.tv_sec = 0, .tv_nsec = 10 * 1000 * 1000};

	if (!s)
		return;
	/* Stop accepting; connections already open keep being served. */
	accept_stop(s);
	for (unsigned waited = 0;
	     atomic_load(&s->in_flight) > 0 && waited < grace_ms; waited += 10)
		nanosleep(&tick, NULL);
	MHD_stop_daemon(s->daemon);
	identity_clear();
	accept_free(s);
	free(s);
}
