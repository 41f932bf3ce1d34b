#include "webhook/server.h"

#include "policy/diag.h"
#include "webhook/handler.h"
#include "webhook/log.h"
#include "webhook/strbuf.h"

#include <arpa/inet.h>
#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
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
};

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
		bool get = strcmp(method, MHD_HTTP_METHOD_GET) == 0 ||
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
	return respond(c, (unsigned)reply.status, reply.content_type, reply.body,
		       reply.len, false);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct server *s = cls;
	struct request *r = *req_cls;

	(void)c;
	(void)toe;
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

int server_start(const struct server_config *cfg, const char *cert_pem,
		 const char *key_pem, struct server **out, struct diag *d)
{
	struct server *s = calloc(1, sizeof(*s));
	struct sockaddr_in sin;
	struct sockaddr_in6 sin6;
	struct sockaddr *sa;
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
			 MHD_USE_TLS | MHD_USE_ITC | MHD_USE_ERROR_LOG;
	struct identity *id;
	const union MHD_DaemonInfo *info;
	long ncpu;

	if (!s) {
		diag_addf(d, "out of memory");
		return -1;
	}
	s->cfg = *cfg;
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
	atomic_init(&s->in_flight, 0);

	memset(&sin, 0, sizeof(sin));
	memset(&sin6, 0, sizeof(sin6));
	if (inet_pton(AF_INET, cfg->host, &sin.sin_addr) == 1) {
		sin.sin_family = AF_INET;
		sin.sin_port = htons(cfg->port);
		sa = (struct sockaddr *)&sin;
	} else if (inet_pton(AF_INET6, cfg->host, &sin6.sin6_addr) == 1) {
		sin6.sin6_family = AF_INET6;
		sin6.sin6_port = htons(cfg->port);
		sa = (struct sockaddr *)&sin6;
		flags |= MHD_USE_IPv6;
	} else {
		diag_addf(d, "listen address \"%s\" is not a numeric IPv4 or IPv6 "
			     "address", cfg->host);
		free(s);
		return -1;
	}

	id = identity_parse(cert_pem, key_pem, d);
	if (!id) {
		free(s);
		return -1;
	}
	identity_install(id);

	s->daemon = MHD_start_daemon(
		flags, 0, NULL, NULL, on_request, s,
		MHD_OPTION_SOCK_ADDR, sa,
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
		MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
		MHD_OPTION_LISTENING_ADDRESS_REUSE, 1,
		MHD_OPTION_END);
	if (!s->daemon) {
		diag_addf(d, "cannot listen on %s:%u (address in use, or no "
			     "permission)",
			  cfg->host, cfg->port);
		identity_clear();
		free(s);
		return -1;
	}
	info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
	s->port = info ? info->port : cfg->port;
	*out = s;
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

unsigned server_in_flight(const struct server *s)
{
	return atomic_load(&((struct server *)s)->in_flight);
}

void server_stop(struct server *s, unsigned grace_ms)
{
	MHD_socket fd;
	struct timespec tick = {.tv_sec = 0, .tv_nsec = 10 * 1000 * 1000};

	if (!s)
		return;
	/* Stop accepting; connections already open keep being served. */
	fd = MHD_quiesce_daemon(s->daemon);
	if (fd != MHD_INVALID_SOCKET)
		close(fd);
	for (unsigned waited = 0;
	     atomic_load(&s->in_flight) > 0 && waited < grace_ms; waited += 10)
		nanosleep(&tick, NULL);
	MHD_stop_daemon(s->daemon);
	identity_clear();
	free(s);
}
