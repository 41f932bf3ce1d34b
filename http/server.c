#include "http/server.h"

#include "base/diag.h"
#include "base/log.h"
#include "base/strbuf.h"
#include "http/tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
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

#define TEXT_PLAIN "text/plain; charset=utf-8"

/* A route of the table, with what its lookup compares first. */
struct route {
	struct http_route r;
	size_t path_len;
	bool get; /* answers HEAD too */
};

struct request {
	const struct route *route;
	char *body;
	size_t len;
	size_t cap;
	bool answered; /* a response was queued */
	bool corked;   /* tls_cork() held it: uncork when it is sent */
};

struct server {
	struct MHD_Daemon *daemon;
	struct server_config cfg;
	struct route *routes; /* cfg.n_routes, copied */
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

/* ---- TLS, through tls.c ------------------------------------------------ */

static void *tls_of(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);

	return ci ? ci->tls_session : NULL;
}

/* ---- answers ------------------------------------------------------------ */

void http_reply_text(struct http_reply *out, unsigned status, const char *text)
{
	out->status = status;
	out->content_type = TEXT_PLAIN;
	out->body = strdup(text);
	out->len = out->body ? strlen(text) : 0;
}

/* Takes ownership of body.  allow: an Allow header, or NULL. */
static enum MHD_Result respond(struct MHD_Connection *c, unsigned status,
			       const char *type, char *body, size_t len,
			       bool close_after, const char *allow)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	if (type)
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (allow)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
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
	return respond(c, status, TEXT_PLAIN, body, strlen(body), close_after,
		       NULL);
}

/* ---- routes ------------------------------------------------------------- */

static bool is_get_or_head(const char *method)
{
	return strcmp(method, MHD_HTTP_METHOD_GET) == 0 ||
	       strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
}

/*
 * The first route for path and method, or NULL.  A handful of routes: a
 * length compare rules out almost every one before any byte is.
 */
static const struct route *route_find(const struct server *s, const char *path,
				      const char *method)
{
	size_t n = strlen(path);

	for (size_t i = 0; i < s->cfg.n_routes; i++) {
		const struct route *e = &s->routes[i];

		if (e->path_len != n || memcmp(e->r.path, path, n) != 0)
			continue;
		if (strcmp(e->r.method, method) == 0 ||
		    (e->get && strcmp(method, MHD_HTTP_METHOD_HEAD) == 0))
			return e;
	}
	return NULL;
}

/*
 * The one place that answers a request no route takes: 404 when no route
 * has its path, else 405 with the path's methods (RFC 9110: an Allow
 * header; a GET route also allows HEAD).
 */
static enum MHD_Result refuse(struct server *s, struct MHD_Connection *c,
			      const char *path, bool close_after)
{
	struct strbuf allow, use;
	size_t n = strlen(path), methods = 0;
	enum MHD_Result ret = MHD_NO;
	char *body;
	size_t len;

	strbuf_init(&allow, 1024);
	strbuf_init(&use, 1024);
	strbuf_addf(&use, "method not allowed: use ");
	for (size_t i = 0; i < s->cfg.n_routes; i++) {
		const struct route *e = &s->routes[i];
		bool seen = false;

		if (e->path_len != n || memcmp(e->r.path, path, n) != 0)
			continue;
		for (size_t j = 0; j < i && !seen; j++)
			seen = s->routes[j].path_len == n &&
			       memcmp(s->routes[j].r.path, path, n) == 0 &&
			       strcmp(s->routes[j].r.method, e->r.method) == 0;
		if (seen)
			continue;
		strbuf_addf(&allow, "%s%s%s", methods ? ", " : "", e->r.method,
			    e->get ? ", " MHD_HTTP_METHOD_HEAD : "");
		strbuf_addf(&use, "%s%s", methods ? " or " : "", e->r.method);
		methods++;
	}
	strbuf_addf(&use, "\n");
	if (!methods) {
		ret = respond_text(c, 404, "not found\n", close_after);
		goto out;
	}
	if (strbuf_failed(&allow) || strbuf_failed(&use))
		goto out;
	body = strbuf_take(&use, &len);
	if (body)
		ret = respond(c, 405, TEXT_PLAIN, body, len, close_after,
			      allow.buf);
out:
	strbuf_release(&allow);
	strbuf_release(&use);
	return ret;
}

static bool is_json(const char *ct)
{
	size_t n = strlen("application/json");

	return ct && strncasecmp(ct, "application/json", n) == 0 &&
	       (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ');
}

/* A JSON route's request, before its body: refused (and the connection
 * closed) or let in, its body to be read. */
static enum MHD_Result check_json(struct server *s, struct MHD_Connection *c,
				  bool *ok)
{
	const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						     MHD_HTTP_HEADER_CONTENT_TYPE);
	const char *cl = MHD_lookup_connection_value(
	    c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);

	*ok = false;
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
	*ok = true;
	return MHD_YES;
}

/* *req_cls of a GET or HEAD that no route takes, between its first and its
 * last call: answering on the first call would make libmicrohttpd close
 * the connection (it has not seen the end of the request yet), costing
 * every such probe a TLS handshake. */
static struct request refused;

/* The first call of a request: its head has been read. */
static enum MHD_Result begin(struct server *s, struct MHD_Connection *c,
			     const char *url, const char *method,
			     void **req_cls)
{
	const struct route *e;
	struct request *r;

	count_worker_request(s);
	e = route_find(s, url, method);
	if (!e) {
		if (!is_get_or_head(method))
			return refuse(s, c, url, true); /* its body unread */
		*req_cls = &refused;
		return MHD_YES;
	}
	if (e->r.flags & HTTP_ROUTE_JSON) {
		bool ok;
		enum MHD_Result ret = check_json(s, c, &ok);

		if (!ok)
			return ret;
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		return MHD_NO;
	r->route = e;
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

/* The last call of a request taken by a route: the whole of it is read. */
static enum MHD_Result answer(struct MHD_Connection *c, struct request *r,
			      const char *url, const char *method)
{
	const struct http_route *route = &r->route->r;
	struct http_request req = {.method = method,
				   .path = url,
				   .body = r->body ? r->body : "",
				   .len = r->len};
	struct http_reply reply = {0};

	if (route->flags & HTTP_ROUTE_AUTHORIZATION)
		req.authorization = MHD_lookup_connection_value(
			c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);

	route->handler(route->ctx, &req, &reply);
	if (!reply.body)
		return MHD_NO;
	/*
	 * One TLS record and one send per answer (tls.c, tls_cork), for JSON
	 * routes only (the admission reviews), once their body has been read
	 * whole.  An answer given before the body is read (an error) makes
	 * libmicrohttpd close the socket right after on_completed(); with
	 * unread input, that close is a reset, which can reach the client
	 * before the response it has not read yet.  Health and metrics
	 * answers are left as they were: they are not worth the care.
	 */
	if (route->flags & HTTP_ROUTE_JSON)
		r->corked = tls_cork(tls_of(c), reply.len);
	return respond(c, reply.status, reply.content_type, reply.body,
		       reply.len, false, NULL);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c,
				  const char *url, const char *method,
				  const char *version, const char *upload_data,
				  size_t *upload_data_size, void **req_cls)
{
	struct server *s = cls;
	struct request *r = *req_cls;

	(void)version;
	if (!r)
		return begin(s, c, url, method, req_cls);
	if (*upload_data_size) {
		size_t n = *upload_data_size;

		*upload_data_size = 0;
		if (r == &refused || !(r->route->r.flags & HTTP_ROUTE_JSON))
			return MHD_YES; /* a body nobody reads: dropped */
		/* Content-Length was checked against the cap and libmicrohttpd
		 * reads no more than it: only memory can run out here. */
		return append_body(r, upload_data, n, s->cfg.body_cap) ? MHD_YES
								       : MHD_NO;
	}
	if (r == &refused) {
		*req_cls = NULL;
		return refuse(s, c, url, false);
	}
	if (r->answered)
		return MHD_YES;
	r->answered = true;
	return answer(c, r, url, method);
}

/* Called once an answer has been written whole, before the next request
 * on the connection is read (or the connection closed). */
static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct server *s = cls;
	struct request *r = *req_cls;

	(void)toe;
	if (!r || r == &refused)
		return;
	if (r->corked)
		tls_uncork(tls_of(c));
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

/* Copies the table, with each path's length for route_find(). */
static int routes_copy(struct server *s, struct diag *d)
{
	const struct server_config *cfg = &s->cfg;

	if (!cfg->n_routes)
		return 0;
	s->routes = calloc(cfg->n_routes, sizeof(*s->routes));
	if (!s->routes) {
		diag_addf(d, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < cfg->n_routes; i++) {
		const struct http_route *r = &cfg->routes[i];

		if (!r->method || !r->path || !r->handler) {
			diag_addf(d,
				  "route %zu: method, path and handler are "
				  "required",
				  i);
			return -1;
		}
		s->routes[i].r = *r;
		s->routes[i].path_len = strlen(r->path);
		s->routes[i].get = strcmp(r->method, MHD_HTTP_METHOD_GET) == 0;
	}
	return 0;
}

static void server_free(struct server *s)
{
	accept_free(s);
	free(s->routes);
	free(s);
}

int server_start(const struct server_config *cfg, const char *cert_pem,
		 const char *key_pem, struct server **out, struct diag *d)
{
	struct server *s = calloc(1, sizeof(*s));
	unsigned flags = MHD_USE_POLL_INTERNAL_THREAD | MHD_USE_TLS |
			 MHD_USE_ITC | MHD_USE_ERROR_LOG |
			 MHD_USE_NO_LISTEN_SOCKET;
	bool identity = false;
	long ncpu;

	*out = NULL;
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

	if (routes_copy(s, d) < 0)
		goto fail;
	s->listen_fd = listen_open(cfg, &s->port, d);
	if (s->listen_fd < 0)
		goto fail;
	if (pipe2(s->wake, O_CLOEXEC) < 0) {
		diag_addf(d, "cannot create a pipe: %s", strerror(errno));
		goto fail;
	}
	if (tls_identity_set(cert_pem, key_pem, d) < 0)
		goto fail;
	identity = true;

	/*
	 * poll(), not epoll: libmicrohttpd 0.9.75's epoll mode keeps a
	 * connection whose TLS handshake waits for the client on its list of
	 * ready connections, so its worker calls gnutls_handshake() and
	 * recv() in a loop until the client answers: a whole CPU for every
	 * handshake in flight (docs/benchmarks.md "Handshakes that spun").
	 * poll() waits on the socket.  One option a line.
	 */
	/* clang-format off */
	s->daemon = MHD_start_daemon(
		flags, 0, NULL, NULL, on_request, s,
		MHD_OPTION_HTTPS_CERT_CALLBACK, tls_cert_callback(),
		MHD_OPTION_HTTPS_PRIORITIES, tls_priorities,
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
		MHD_OPTION_END);
	/* clang-format on */
	if (!s->daemon) {
		diag_addf(d, "cannot start the HTTPS server on %s:%u", cfg->host,
			  s->port);
		goto fail;
	}
	/* Set before the first connection is accepted: a route may read it
	 * (server_worker_requests() for /metrics). */
	*out = s;
	if (pthread_create(&s->acceptor, NULL, accept_loop, s) != 0) {
		*out = NULL;
		diag_addf(d, "cannot start the accepting thread");
		goto fail;
	}
	s->accepting = true;
	return 0;
fail:
	if (s->daemon)
		MHD_stop_daemon(s->daemon);
	if (identity)
		tls_identity_clear();
	server_free(s);
	return -1;
}

int server_set_certificate(struct server *s, const char *cert_pem,
			   const char *key_pem, struct diag *d)
{
	(void)s;
	return tls_identity_set(cert_pem, key_pem, d);
}

uint16_t server_port(const struct server *s)
{
	return s->port;
}

unsigned server_worker_count(const struct server *s)
{
	return s->cfg.threads; /* at most SERVER_MAX_THREADS */
}

uint64_t server_worker_requests(const struct server *s, unsigned i)
{
	struct server *m = (struct server *)s; /* atomics are read only */

	if (i >= s->cfg.threads || i >= atomic_load(&m->workers_seen))
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
	tls_identity_clear();
	server_free(s);
}
