#include "kube/client.h"

#include "base/diag.h"
#include "codec/jsonmem.h"
#include "base/file.h"
#include "kube/config.h"

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define TOKEN_MAX (64u << 10)

/* ---- the client --------------------------------------------------------- */

struct kube {
	struct kube_config cfg;
	CURL *curl;
	/* The socket last opened and not yet closed (CURL_SOCKET_BAD: none),
	 * under mu: kube_interrupt() cuts it from another thread. */
	pthread_mutex_t mu;
	curl_socket_t sock;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_init_once(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

static char *dup_or_null(const char *s, bool *oom)
{
	char *r;

	if (!s)
		return NULL;
	r = strdup(s);
	if (!r)
		*oom = true;
	return r;
}

struct kube *kube_new(const struct kube_config *cfg, struct diag *d)
{
	struct kube *k = calloc(1, sizeof(*k));
	bool oom = false;

	pthread_once(&curl_once, curl_init_once);
	if (!k) {
		diag_addf(d, "out of memory");
		return NULL;
	}
	k->cfg.server = dup_or_null(cfg->server, &oom);
	k->cfg.ca_pem = dup_or_null(cfg->ca_pem, &oom);
	k->cfg.insecure = cfg->insecure;
	k->cfg.cert_pem = dup_or_null(cfg->cert_pem, &oom);
	k->cfg.key_pem = dup_or_null(cfg->key_pem, &oom);
	k->cfg.token = dup_or_null(cfg->token, &oom);
	k->cfg.token_file = dup_or_null(cfg->token_file, &oom);
	k->cfg.pinned_pubkey = dup_or_null(cfg->pinned_pubkey, &oom);
	k->cfg.source = dup_or_null(cfg->source, &oom);
	pthread_mutex_init(&k->mu, NULL);
	k->sock = CURL_SOCKET_BAD;
	k->curl = curl_easy_init();
	if (oom || !k->curl) {
		diag_addf(d, "out of memory");
		kube_free(k);
		return NULL;
	}
	return k;
}

void kube_free(struct kube *k)
{
	if (!k)
		return;
	if (k->curl)
		curl_easy_cleanup(k->curl);
	pthread_mutex_destroy(&k->mu);
	kube_config_release(&k->cfg);
	free(k);
}

static curl_socket_t open_socket(void *arg, curlsocktype purpose,
				 struct curl_sockaddr *a)
{
	struct kube *k = arg;
	curl_socket_t fd = socket(a->family, a->socktype, a->protocol);

	(void)purpose;
	if (fd != CURL_SOCKET_BAD) {
		pthread_mutex_lock(&k->mu);
		k->sock = fd;
		pthread_mutex_unlock(&k->mu);
	}
	return fd;
}

static int close_socket(void *arg, curl_socket_t fd)
{
	struct kube *k = arg;

	pthread_mutex_lock(&k->mu);
	if (k->sock == fd)
		k->sock = CURL_SOCKET_BAD;
	pthread_mutex_unlock(&k->mu);
	return close(fd);
}

void kube_interrupt(struct kube *k)
{
	if (!k)
		return;
	pthread_mutex_lock(&k->mu);
	if (k->sock != CURL_SOCKET_BAD)
		shutdown(k->sock, SHUT_RDWR);
	pthread_mutex_unlock(&k->mu);
}

struct sink {
	char *buf;
	size_t len, cap, max;
	bool too_big;
	long status;                 /* from the last status line seen */
	volatile bool *stop;
	bool aborted;                /* stopped, or on_line() said so */
	unsigned retry_after;        /* a Retry-After header, seconds */
	/* watch mode */
	int (*on_line)(void *ctx, const char *line, size_t len);
	void (*on_open)(void *ctx);
	void *ctx;
};

/* Feeds complete lines of a 200 stream to on_line(); keeps the rest. */
static int split_lines(struct sink *s)
{
	char *start = s->buf, *nl;

	while ((nl = memchr(start, '\n', s->len - (size_t)(start - s->buf)))) {
		if (nl > start && s->on_line(s->ctx, start, (size_t)(nl - start)))
			return -1;
		start = nl + 1;
	}
	s->len -= (size_t)(start - s->buf);
	memmove(s->buf, start, s->len);
	s->buf[s->len] = '\0';
	return 0;
}

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	struct sink *s = userdata;
	size_t n = size * nmemb;

	if (s->stop && *s->stop) {
		s->aborted = true;
		return 0;
	}
	/* The body of a failed watch (a Status) is no event stream. */
	if (s->on_line && s->status != 200)
		return n;
	if (s->len + n > s->max) {
		s->too_big = true;
		return 0;
	}
	if (s->len + n + 1 > s->cap) {
		size_t cap = s->cap ? s->cap : 16384;
		char *nb;

		while (cap < s->len + n + 1)
			cap *= 2;
		nb = realloc(s->buf, cap);
		if (!nb) {
			s->too_big = true;
			return 0;
		}
		s->buf = nb;
		s->cap = cap;
	}
	memcpy(s->buf + s->len, ptr, n);
	s->len += n;
	s->buf[s->len] = '\0';
	if (s->on_line && split_lines(s) < 0) {
		s->aborted = true;
		return 0;
	}
	return n;
}

/*
 * Headers, one line at a time: the status line gives the status, the empty
 * line ends the headers, and a 200 is then an open stream (before any byte
 * of its body: an idle watch is connected too).
 */
static size_t on_header(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	struct sink *s = userdata;
	size_t n = size * nmemb, i;

	if (n > 5 && memcmp(ptr, "HTTP/", 5) == 0) {
		for (i = 5; i < n && ptr[i] != ' '; i++)
			;
		s->status = 0;
		for (i++; i < n && ptr[i] >= '0' && ptr[i] <= '9' && s->status < 1000; i++)
			s->status = s->status * 10 + (ptr[i] - '0');
	} else if (n > 12 && strncasecmp(ptr, "Retry-After:", 12) == 0) {
		/* Seconds; the HTTP-date form is not used by the API server. */
		unsigned v = 0;

		for (i = 12; i < n && ptr[i] == ' '; i++)
			;
		for (; i < n && ptr[i] >= '0' && ptr[i] <= '9' && v < 86400; i++)
			v = v * 10 + (unsigned)(ptr[i] - '0');
		s->retry_after = v;
	} else if ((n == 2 && ptr[0] == '\r' && ptr[1] == '\n') ||
		   (n == 1 && ptr[0] == '\n')) {
		if (s->status == 200 && s->on_open)
			s->on_open(s->ctx);
	}
	return n;
}

/* Called about once a second even while nothing arrives: lets stop end a
 * hanging list or an idle watch. */
static int on_progress(void *userdata, curl_off_t dltotal, curl_off_t dlnow,
		       curl_off_t ultotal, curl_off_t ulnow)
{
	struct sink *s = userdata;

	(void)dltotal;
	(void)dlnow;
	(void)ultotal;
	(void)ulnow;
	if (s->stop && *s->stop) {
		s->aborted = true;
		return 1;
	}
	return 0;
}

/* Sets up the handle for one request into s (a GET unless the caller sets
 * more); returns the header list to free.  content_type: of the request
 * body, NULL when there is none. */
static struct curl_slist *prepare(struct kube *k, const char *path,
				  const char *content_type, char *url,
				  size_t urlsz, struct sink *s, struct diag *d,
				  bool *ok)
{
	struct curl_slist *h = NULL;
	char auth[8192];
	char *token = NULL;
	size_t token_len = 0;

	*ok = false;
	curl_easy_reset(k->curl);
	snprintf(url, urlsz, "%s%s", k->cfg.server, path);
	curl_easy_setopt(k->curl, CURLOPT_URL, url);
	curl_easy_setopt(k->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(k->curl, CURLOPT_CONNECTTIMEOUT, 10L);
	curl_easy_setopt(k->curl, CURLOPT_PROTOCOLS_STR, "https");
	curl_easy_setopt(k->curl, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
	curl_easy_setopt(k->curl, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(k->curl, CURLOPT_WRITEDATA, s);
	curl_easy_setopt(k->curl, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(k->curl, CURLOPT_HEADERDATA, s);
	curl_easy_setopt(k->curl, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(k->curl, CURLOPT_XFERINFODATA, s);
	curl_easy_setopt(k->curl, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(k->curl, CURLOPT_OPENSOCKETFUNCTION, open_socket);
	curl_easy_setopt(k->curl, CURLOPT_OPENSOCKETDATA, k);
	curl_easy_setopt(k->curl, CURLOPT_CLOSESOCKETFUNCTION, close_socket);
	curl_easy_setopt(k->curl, CURLOPT_CLOSESOCKETDATA, k);
	if (k->cfg.insecure) {
		curl_easy_setopt(k->curl, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(k->curl, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	if (k->cfg.pinned_pubkey) {
		/* The key alone is trusted: no chain, no name (a replica's pod
		 * address has none).  libcurl checks the pin with VERIFYPEER off
		 * too (tests/unit/kube/peer_test.c holds it to that). */
		curl_easy_setopt(k->curl, CURLOPT_PINNEDPUBLICKEY, k->cfg.pinned_pubkey);
		curl_easy_setopt(k->curl, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(k->curl, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	if (k->cfg.ca_pem) {
		struct curl_blob blob = {.data = k->cfg.ca_pem,
					 .len = strlen(k->cfg.ca_pem),
					 .flags = CURL_BLOB_COPY};

		curl_easy_setopt(k->curl, CURLOPT_CAINFO_BLOB, &blob);
	}
	if (k->cfg.cert_pem) {
		struct curl_blob cert = {.data = k->cfg.cert_pem,
					 .len = strlen(k->cfg.cert_pem),
					 .flags = CURL_BLOB_COPY};
		struct curl_blob key = {.data = k->cfg.key_pem,
					.len = strlen(k->cfg.key_pem),
					.flags = CURL_BLOB_COPY};

		curl_easy_setopt(k->curl, CURLOPT_SSLCERT_BLOB, &cert);
		curl_easy_setopt(k->curl, CURLOPT_SSLCERTTYPE, "PEM");
		curl_easy_setopt(k->curl, CURLOPT_SSLKEY_BLOB, &key);
		curl_easy_setopt(k->curl, CURLOPT_SSLKEYTYPE, "PEM");
	}
	/* Service account tokens rotate: read the file on every request. */
	if (k->cfg.token_file) {
		if (file_read(k->cfg.token_file, TOKEN_MAX, FILE_SECRET, &token,
			      &token_len, d) < 0)
			return NULL;
		token[strcspn(token, "\r\n")] = '\0';
	}
	if (token || k->cfg.token) {
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s",
			 token ? token : k->cfg.token);
		h = curl_slist_append(h, auth);
		memset(auth, 0, sizeof(auth));
	}
	file_free_secret(token, token_len);
	h = curl_slist_append(h, "Accept: application/json");
	h = curl_slist_append(h, "User-Agent: gpugate");
	if (content_type) {
		char ct[128];

		snprintf(ct, sizeof(ct), "Content-Type: %s", content_type);
		h = curl_slist_append(h, ct);
		/* No "Expect: 100-continue" round trip before large bodies. */
		h = curl_slist_append(h, "Expect:");
	}
	curl_easy_setopt(k->curl, CURLOPT_HTTPHEADER, h);
	*ok = true;
	return h;
}

int kube_get(struct kube *k, const char *path, size_t max_body, long *status,
	     char **body, size_t *len, volatile bool *stop, struct diag *d)
{
	struct sink s = {.max = max_body, .stop = stop};
	struct curl_slist *h;
	char url[4096];
	CURLcode rc;
	bool ok;

	*body = NULL;
	h = prepare(k, path, NULL, url, sizeof(url), &s, d, &ok);
	if (!ok)
		return -1;
	curl_easy_setopt(k->curl, CURLOPT_TIMEOUT, 60L);
	rc = curl_easy_perform(k->curl);
	curl_slist_free_all(h);
	if (rc != CURLE_OK) {
		diag_addf(d, "GET %s: %s", path,
			  s.aborted    ? "stopped"
			  : s.too_big ? "response too large"
				      : curl_easy_strerror(rc));
		free(s.buf);
		return -1;
	}
	curl_easy_getinfo(k->curl, CURLINFO_RESPONSE_CODE, status);
	if (!s.buf) {
		s.buf = calloc(1, 1);
		if (!s.buf)
			return -1;
	}
	*body = s.buf;
	*len = s.len;
	return 0;
}

int kube_watch(struct kube *k, const char *path, unsigned idle_seconds,
	       const struct kube_stream *cb, volatile bool *stop, struct diag *d)
{
	struct sink s = {.max = 64u << 20, .stop = stop, .on_line = cb->on_line,
			 .on_open = cb->on_open, .ctx = cb->ctx};
	struct curl_slist *h;
	char url[4096];
	CURLcode rc;
	long status = 0;
	bool ok;

	h = prepare(k, path, NULL, url, sizeof(url), &s, d, &ok);
	if (!ok)
		return -1;
	/* A stream with nothing for idle_seconds (no event, no bookmark) is
	 * dead: a half-open TCP connection would hang forever otherwise. */
	curl_easy_setopt(k->curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(k->curl, CURLOPT_LOW_SPEED_TIME, (long)idle_seconds);
	rc = curl_easy_perform(k->curl);
	curl_slist_free_all(h);
	curl_easy_getinfo(k->curl, CURLINFO_RESPONSE_CODE, &status);
	free(s.buf);
	if (s.aborted)
		return 0;
	if (rc != CURLE_OK) {
		diag_addf(d, "watch %s: %s", path,
			  s.too_big ? "event too large" : curl_easy_strerror(rc));
		return -1;
	}
	if (status == 200)
		return 0;
	diag_addf(d, "watch %s: HTTP %ld", path, status);
	return (int)status;
}

/* ---- any verb ----------------------------------------------------------- */

/* Copies what fits, not cutting a UTF-8 sequence in two. */
static void copy_text(char *dst, size_t cap, const char *src)
{
	size_t n = strlen(src);

	if (n >= cap) {
		n = cap - 1;
		while (n > 0 && ((unsigned char)src[n] & 0xC0) == 0x80)
			n--;
	}
	memcpy(dst, src, n);
	dst[n] = '\0';
}

/* Reason, message and details.retryAfterSeconds of an answer that is a
 * Kubernetes Status; false when it is none. */
static bool read_status(struct kube_response *r)
{
	json_t *st = json_loadb(r->body, r->len, 0, NULL);
	const char *kind = json_string_value(json_object_get(st, "kind"));
	const char *reason, *message;
	json_int_t after;

	if (!kind || strcmp(kind, "Status") != 0) {
		json_decref(st);
		return false;
	}
	reason = json_string_value(json_object_get(st, "reason"));
	message = json_string_value(json_object_get(st, "message"));
	copy_text(r->reason, sizeof(r->reason), reason ? reason : "");
	copy_text(r->message, sizeof(r->message), message ? message : "");
	after = json_integer_value(json_object_get(json_object_get(st, "details"),
						   "retryAfterSeconds"));
	if (!r->retry_after_s && after > 0)
		r->retry_after_s = after > 86400 ? 86400 : (unsigned)after;
	json_decref(st);
	return true;
}

/* A request body, handed to libcurl as it asks. */
struct upload {
	const char *p;
	size_t left;
};

static size_t read_body(char *buf, size_t size, size_t nitems, void *userdata)
{
	struct upload *up = userdata;
	size_t n = size * nitems;

	if (n > up->left)
		n = up->left;
	memcpy(buf, up->p, n);
	up->p += n;
	up->left -= n;
	return n;
}

int kube_request(struct kube *k, const struct kube_request *req,
		 struct kube_response *resp, struct diag *d)
{
	struct sink s = {.max = req->max_body ? req->max_body : KUBE_OBJECT_MAX,
			 .stop = req->stop};
	unsigned timeout = req->timeout_ms ? req->timeout_ms : KUBE_TIMEOUT_LIST_MS;
	struct upload up = {.p = req->body, .left = req->body ? req->body_len : 0};
	const char *ctype = NULL;
	struct curl_slist *h;
	char url[4096];
	CURLcode rc;
	bool ok;

	memset(resp, 0, sizeof(*resp));
	if (strlen(k->cfg.server) + strlen(req->path) >= sizeof(url)) {
		diag_addf(d, "%s %.80s...: path too long", req->method, req->path);
		return -1;
	}
	if (req->body)
		ctype = req->content_type ? req->content_type : "application/json";
	h = prepare(k, req->path, ctype, url, sizeof(url), &s, d, &ok);
	if (!ok)
		return -1;
	/* With a body libcurl would say POST: the method is always spelt out
	 * but for a plain GET. */
	if (strcmp(req->method, "GET") != 0 || req->body)
		curl_easy_setopt(k->curl, CURLOPT_CUSTOMREQUEST, req->method);
	/*
	 * libcurl sends a request again, unasked, when the kept-alive
	 * connection it went out on closes before any byte of an answer.  That
	 * is right for a connection the server had closed while it sat idle,
	 * and wrong for a write the server applied before the connection died:
	 * it would be applied twice (a PUT then meets its own write as a 409,
	 * and a compare-and-swap caller goes round again).  So a body is read
	 * through a callback that cannot rewind: once any of it went out, that
	 * failure ends the request (CURLE_SEND_FAIL_REWIND) instead, and a
	 * write without a body goes out on a new connection, which libcurl
	 * never retries.  Re-sent, then, is only a request the server never
	 * had whole.
	 */
	if (req->body) {
		curl_easy_setopt(k->curl, CURLOPT_POST, 1L);
		curl_easy_setopt(k->curl, CURLOPT_POSTFIELDSIZE_LARGE,
				 (curl_off_t)req->body_len);
		curl_easy_setopt(k->curl, CURLOPT_READFUNCTION, read_body);
		curl_easy_setopt(k->curl, CURLOPT_READDATA, &up);
	} else if (strcmp(req->method, "GET") != 0) {
		curl_easy_setopt(k->curl, CURLOPT_FRESH_CONNECT, 1L);
	}
	curl_easy_setopt(k->curl, CURLOPT_TIMEOUT_MS, (long)timeout);
	curl_easy_setopt(k->curl, CURLOPT_CONNECTTIMEOUT_MS,
			 (long)(timeout < KUBE_CONNECT_TIMEOUT_MS ? timeout
							   : KUBE_CONNECT_TIMEOUT_MS));
	rc = curl_easy_perform(k->curl);
	curl_slist_free_all(h);
	if (rc != CURLE_OK) {
		if (s.aborted)
			diag_addf(d, "%s %s: stopped", req->method, req->path);
		else if (s.too_big)
			diag_addf(d, "%s %s: answer larger than %zu bytes",
				  req->method, req->path, s.max);
		else if (rc == CURLE_OPERATION_TIMEDOUT) {
			resp->timed_out = true;
			diag_addf(d, "%s %s: no answer within %u ms", req->method,
				  req->path, timeout);
		}
		else if (rc == CURLE_SEND_FAIL_REWIND)
			diag_addf(d, "%s %s: the connection closed after the "
				     "request was sent, without an answer",
				  req->method, req->path);
		else
			diag_addf(d, "%s %s: %s", req->method, req->path,
				  curl_easy_strerror(rc));
		free(s.buf);
		return -1;
	}
	curl_easy_getinfo(k->curl, CURLINFO_RESPONSE_CODE, &resp->status);
	resp->body = s.buf ? s.buf : calloc(1, 1);
	resp->len = s.len;
	resp->retry_after_s = s.retry_after;
	if (!resp->body) {
		diag_addf(d, "%s %s: out of memory", req->method, req->path);
		resp->status = 0;
		return -1;
	}
	if (resp->status >= 200 && resp->status < 300)
		return 0;
	if (!read_status(resp))
		diag_addf(d, "%s %s: %ld (no Kubernetes Status in the answer)",
			  req->method, req->path, resp->status);
	else
		diag_addf(d, "%s %s: %ld%s%s%s%s", req->method, req->path,
			  resp->status, resp->reason[0] ? " " : "", resp->reason,
			  resp->message[0] ? ": " : "", resp->message);
	return resp->status > 0 ? (int)resp->status : -1;
}

void kube_response_release(struct kube_response *resp)
{
	free(resp->body);
	memset(resp, 0, sizeof(*resp));
}

/* ---- object verbs ------------------------------------------------------- */

static int object_call(struct kube *k, const char *method, const char *path,
		       const json_t *in, const char *ctype, unsigned timeout_ms,
		       json_t **out, struct diag *d)
{
	struct kube_request req = {.method = method, .path = path,
				   .content_type = ctype, .timeout_ms = timeout_ms};
	struct kube_response resp;
	char *body = NULL;
	int rc;

	if (out)
		*out = NULL;
	if (in) {
		body = json_dumps(in, JSON_COMPACT);
		if (!body) {
			diag_addf(d, "%s %s: out of memory", method, path);
			return -1;
		}
		req.body = body;
		req.body_len = strlen(body);
	}
	rc = kube_request(k, &req, &resp, d);
	if (rc == 0 && out) {
		json_error_t e;

		*out = json_loadb(resp.body, resp.len, 0, &e);
		if (!*out) {
			diag_addf(d, "%s %s: %ld answer is not JSON: %s", method,
				  path, resp.status, e.text);
			rc = -1;
		}
	}
	jsonmem_free(body); /* json_dumps: a request's arena, maybe */
	kube_response_release(&resp);
	return rc;
}

int kube_get_json(struct kube *k, const char *path, unsigned timeout_ms,
		  json_t **out, struct diag *d)
{
	return object_call(k, "GET", path, NULL, NULL, timeout_ms, out, d);
}

int kube_create(struct kube *k, const char *collection, const json_t *obj,
		unsigned timeout_ms, json_t **out, struct diag *d)
{
	return object_call(k, "POST", collection, obj, NULL, timeout_ms, out, d);
}

int kube_replace(struct kube *k, const char *path, const json_t *obj,
		 unsigned timeout_ms, json_t **out, struct diag *d)
{
	return object_call(k, "PUT", path, obj, NULL, timeout_ms, out, d);
}

int kube_patch(struct kube *k, const char *path, enum kube_patch_type type,
	       const json_t *patch, unsigned timeout_ms, json_t **out,
	       struct diag *d)
{
	static const char *const ctype[] = {
		[KUBE_PATCH_MERGE] = "application/merge-patch+json",
		[KUBE_PATCH_JSON] = "application/json-patch+json",
		[KUBE_PATCH_STRATEGIC] = "application/strategic-merge-patch+json",
	};

	if ((unsigned)type >= sizeof(ctype) / sizeof(ctype[0])) {
		diag_addf(d, "PATCH %s: unknown patch type %d", path, (int)type);
		return -1;
	}
	return object_call(k, "PATCH", path, patch, ctype[type], timeout_ms, out, d);
}

int kube_delete(struct kube *k, const char *path, const char *uid,
		const char *resource_version, unsigned timeout_ms, json_t **out,
		struct diag *d)
{
	json_t *opts = NULL, *pre;
	int rc;

	if (uid || resource_version) {
		/* Held by opts as soon as it is set there. */
		pre = json_object();
		opts = json_object();
		if (!pre || !opts ||
		    json_object_set_new(opts, "preconditions", pre) < 0 ||
		    json_object_set_new(opts, "kind", json_string("DeleteOptions")) < 0 ||
		    json_object_set_new(opts, "apiVersion", json_string("v1")) < 0 ||
		    (uid && json_object_set_new(pre, "uid", json_string(uid)) < 0) ||
		    (resource_version &&
		     json_object_set_new(pre, "resourceVersion",
					 json_string(resource_version)) < 0)) {
			if (!opts)
				json_decref(pre);
			json_decref(opts);
			if (out)
				*out = NULL;
			diag_addf(d, "DELETE %s: out of memory (or uid and "
				     "resourceVersion not UTF-8)", path);
			return -1;
		}
	}
	rc = object_call(k, "DELETE", path, opts, NULL, timeout_ms, out, d);
	json_decref(opts);
	return rc;
}

/* ---- compare-and-swap --------------------------------------------------- */

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* xorshift64*: small, fast, and plenty for spreading retries. */
static uint64_t rng_next(uint64_t *state)
{
	uint64_t x = *state ? *state : 0x9E3779B97F4A7C15ull;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545F4914F6CDD1Dull;
}

/* Different for every call, on every thread: writers that collided must
 * not draw the same waits. */
static uint64_t auto_seed(void)
{
	static atomic_uint_fast64_t calls;
	struct timespec ts;
	uint64_t x;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	x = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	x ^= (uint64_t)(uintptr_t)&ts << 16;	/* the thread's stack */
	x ^= (atomic_fetch_add(&calls, 1) + 1) * 0xD1B54A32D192ED03ull;
	return x ? x : 1;
}

unsigned kube_cas_backoff_ms(const struct kube_cas_opts *opts, unsigned retry,
			     uint64_t *rng)
{
	unsigned lo = opts && opts->backoff_min_ms ? opts->backoff_min_ms
						   : KUBE_CAS_BACKOFF_MIN_MS;
	unsigned hi = opts && opts->backoff_max_ms ? opts->backoff_max_ms
						   : KUBE_CAS_BACKOFF_MAX_MS;
	uint64_t c = lo, half;

	if (hi < lo)
		hi = lo;
	for (unsigned i = 0; i < retry && c < hi; i++)
		c <<= 1;
	if (c > hi)
		c = hi;
	half = c / 2;
	return (unsigned)(half + rng_next(rng) % (c - half + 1));
}

/* Sleeps ms, in slices so that *stop is seen; false when stopped. */
static bool pause_ms(unsigned ms, volatile bool *stop)
{
	while (ms > 0) {
		unsigned slice = ms < 50 ? ms : 50;
		struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)slice * 1000000L};

		if (stop && *stop)
			return false;
		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
		ms -= slice;
	}
	return !(stop && *stop);
}

const char *kube_cas_outcome_name(enum kube_cas_outcome o)
{
	switch (o) {
	case KUBE_CAS_UPDATED:
		return "updated";
	case KUBE_CAS_CREATED:
		return "created";
	case KUBE_CAS_UNCHANGED:
		return "unchanged";
	case KUBE_CAS_ABORTED:
		return "aborted";
	case KUBE_CAS_EXHAUSTED:
		return "exhausted";
	case KUBE_CAS_FAILED:
		return "failed";
	}
	return "unknown";
}

void kube_cas_result_release(struct kube_cas_result *res)
{
	json_decref(res->object);
	memset(res, 0, sizeof(*res));
	res->outcome = KUBE_CAS_FAILED;
}

/* The namespace segment of an object path ("/api/v1/namespaces/NS/..."),
 * copied into out; false when there is none. */
static bool path_namespace(const char *path, char *out, size_t cap)
{
	const char *p = strstr(path, "/namespaces/");
	size_t n;

	if (!p)
		return false;
	p += strlen("/namespaces/");
	n = strcspn(p, "/");
	if (n == 0 || n >= cap || p[n] != '/')
		return false;
	memcpy(out, p, n);
	out[n] = '\0';
	return true;
}

/*
 * What a new object needs besides what mutate wrote: metadata.name (and
 * namespace) from the path, no resourceVersion.  A name that differs from
 * the path's is an error (the server would create another object).
 */
static int fill_new(json_t *obj, const char *path, const char *name,
		    struct diag *d)
{
	json_t *meta = json_object_get(obj, "metadata");
	const char *have;
	char ns[256];

	if (!json_is_object(meta)) {
		meta = json_object();
		if (json_object_set_new(obj, "metadata", meta) < 0)
			goto oom;
	}
	json_object_del(meta, "resourceVersion");
	have = json_string_value(json_object_get(meta, "name"));
	if (have && strcmp(have, name) != 0) {
		diag_addf(d, "cas %s: mutate named the new object \"%s\"", path, have);
		return -1;
	}
	if (!have && json_object_set_new(meta, "name", json_string(name)) < 0)
		goto oom;
	if (!json_object_get(meta, "namespace") &&
	    path_namespace(path, ns, sizeof(ns)) &&
	    json_object_set_new(meta, "namespace", json_string(ns)) < 0)
		goto oom;
	return 0;
oom:
	diag_addf(d, "cas %s: out of memory", path);
	return -1;
}

/* The version a replace is guarded by: the one read, whatever mutate did
 * to metadata (a write without it would be unconditional). */
static int pin_version(json_t *obj, const char *rv, const char *path,
		       struct diag *d)
{
	json_t *meta = json_object_get(obj, "metadata");

	if (!json_is_object(meta)) {
		meta = json_object();
		if (json_object_set_new(obj, "metadata", meta) < 0)
			goto oom;
	}
	if (json_object_set_new(meta, "resourceVersion", json_string(rv)) < 0)
		goto oom;
	return 0;
oom:
	diag_addf(d, "cas %s: out of memory", path);
	return -1;
}

/* One request of the loop, bounded by what is left of the budget. */
/* One request of a compare-and-swap, its time limit what is left of the
 * budget (or the options' per-request limit when lower).  *cut_by_budget:
 * it timed out on what was left of the budget (curl's clock and ours may
 * disagree by a millisecond at the deadline; this does not). */
static int cas_send(struct kube *k, const char *method, const char *path,
		    const json_t *obj, const struct kube_cas_opts *o,
		    uint64_t deadline, struct kube_response *resp,
		    bool *cut_by_budget, struct diag *tmp)
{
	struct kube_request req = {.method = method, .path = path, .stop = o->stop};
	uint64_t now = now_ms();
	uint64_t left = deadline > now ? deadline - now : 0;
	char *body = NULL;
	int rc;

	bool capped = o->request_timeout_ms && o->request_timeout_ms < left;

	memset(resp, 0, sizeof(*resp));
	if (capped)
		left = o->request_timeout_ms;
	/* 0 would mean the default of kube_request(), a minute. */
	req.timeout_ms = left ? (unsigned)left : 1;
	if (obj) {
		body = json_dumps(obj, JSON_COMPACT);
		if (!body) {
			diag_addf(tmp, "%s %s: out of memory", method, path);
			return -1;
		}
		req.body = body;
		req.body_len = strlen(body);
	}
	rc = kube_request(k, &req, resp, tmp);
	jsonmem_free(body);
	*cut_by_budget = rc < 0 && resp->timed_out && !capped;
	return rc;
}

int kube_cas_update(struct kube *k, const char *path, kube_cas_fn *mutate,
		    void *ctx, const struct kube_cas_opts *opts,
		    struct kube_cas_result *res, struct diag *d)
{
	static const struct kube_cas_opts defaults;
	const struct kube_cas_opts *o = opts ? opts : &defaults;
	unsigned budget = o->budget_ms ? o->budget_ms : KUBE_CAS_BUDGET_MS;
	unsigned max_attempts = o->max_attempts ? o->max_attempts : KUBE_CAS_ATTEMPTS;
	uint64_t rng = o->seed ? o->seed : auto_seed();
	uint64_t start = now_ms(), deadline = start + budget;
	const char *slash = strrchr(path, '/'), *name;
	char collection[4096], last[640] = "";
	struct kube_response resp = {0};
	json_t *seen = NULL, *work = NULL;
	struct diag tmp;
	unsigned retry = 0;
	int rc = -1;

	memset(res, 0, sizeof(*res));
	res->outcome = KUBE_CAS_FAILED;
	if (path[0] != '/' || strchr(path, '?') || !slash || slash == path ||
	    slash[1] == '\0' || (size_t)(slash - path) >= sizeof(collection)) {
		diag_addf(d, "cas %s: not the path of an object", path);
		goto out;
	}
	name = slash + 1;
	memcpy(collection, path, (size_t)(slash - path));
	collection[slash - path] = '\0';

	for (;;) {
		enum kube_cas_verdict verdict;
		const char *rv = NULL;
		bool exists, cut;
		unsigned wait;
		int st;

		res->attempts++;
		diag_init(&tmp);
		/* 1. read */
		st = cas_send(k, "GET", path, NULL, o, deadline, &resp, &cut, &tmp);
		res->status = resp.status;
		if (st == 0) {
			seen = json_loadb(resp.body, resp.len, 0, NULL);
			rv = json_string_value(json_object_get(
				json_object_get(seen, "metadata"), "resourceVersion"));
			if (!json_is_object(seen) || !rv || !rv[0]) {
				diag_addf(d, "cas %s: the object read is not JSON "
					     "with a metadata.resourceVersion", path);
				goto out;
			}
			exists = true;
		} else if (st == 404) {
			exists = false;
		} else if (st < 0 && (cut || now_ms() >= deadline) && !(o->stop && *o->stop)) {
			/* The read was cut by the budget: nothing written. */
			diag_first(&tmp, last, sizeof(last));
			res->outcome = KUBE_CAS_EXHAUSTED;
			goto give_up;
		} else if (st != 429) {
			diag_first(&tmp, last, sizeof(last));
			diag_addf(d, "%s", last);
			goto out;
		}
		if (st == 0 || st == 404) {
			/* 2. decide, on a copy: seen stays as read */
			work = exists ? json_deep_copy(seen) : json_object();
			if (!work) {
				diag_addf(d, "cas %s: out of memory", path);
				goto out;
			}
			verdict = mutate(ctx, work, exists);
			if (verdict != KUBE_CAS_WRITE) {
				res->outcome = verdict == KUBE_CAS_KEEP
						       ? KUBE_CAS_UNCHANGED
						       : KUBE_CAS_ABORTED;
				res->object = seen;
				seen = NULL;
				rc = 0;
				goto out;
			}
			if ((exists ? pin_version(work, rv, path, d)
				    : fill_new(work, path, name, d)) < 0)
				goto out;
			if (now_ms() >= deadline) {
				/* Nothing was written: no write is started
				 * that has no time left to finish. */
				snprintf(last, sizeof(last), "no time left to write");
				res->outcome = KUBE_CAS_EXHAUSTED;
				goto give_up;
			}
			/* 3. write, guarded */
			kube_response_release(&resp);
			diag_init(&tmp);
			st = cas_send(k, exists ? "PUT" : "POST",
				      exists ? path : collection, work, o, deadline,
				      &resp, &cut, &tmp);
			res->status = resp.status;
			if (st == 0) {
				res->outcome = exists ? KUBE_CAS_UPDATED
						      : KUBE_CAS_CREATED;
				/* NULL if the answer is not JSON: written all
				 * the same. */
				res->object = json_loadb(resp.body, resp.len, 0, NULL);
				rc = 0;
				goto out;
			}
			if (st == 409 || (st == 404 && exists)) {
				res->conflicts++;
			} else if (st != 429) {
				/* No answer, or the server failed on it:
				 * applied or not, nobody can tell. */
				res->write_unknown = st < 0 || st >= 500;
				diag_first(&tmp, last, sizeof(last));
				diag_addf(d, "%s", last);
				goto out;
			}
		}
		/* 4. refused as stale, or throttled: back off and read again */
		if (st == 429)
			res->throttled++;
		diag_first(&tmp, last, sizeof(last));
		wait = kube_cas_backoff_ms(o, retry++, &rng);
		if (st == 429 && resp.retry_after_s * 1000u > wait)
			wait = resp.retry_after_s * 1000u;
		json_decref(seen);
		json_decref(work);
		seen = work = NULL;
		kube_response_release(&resp);
		if (res->attempts >= max_attempts || now_ms() + wait >= deadline) {
			res->outcome = KUBE_CAS_EXHAUSTED;
			goto give_up;
		}
		if (!pause_ms(wait, o->stop)) {
			diag_addf(d, "cas %s: stopped", path);
			goto out;
		}
	}
give_up:
	res->elapsed_ms = (unsigned)(now_ms() - start);
	diag_addf(d, "cas %s: gave up after %u attempt%s in %u ms (%u conflict%s, "
		     "%u throttled): %s",
		  path, res->attempts, res->attempts == 1 ? "" : "s",
		  res->elapsed_ms, res->conflicts, res->conflicts == 1 ? "" : "s",
		  res->throttled, last);
out:
	res->elapsed_ms = (unsigned)(now_ms() - start);
	json_decref(seen);
	json_decref(work);
	kube_response_release(&resp);
	return rc;
}
