#include "kube/client.h"

#include "base/diag.h"
#include "base/file.h"
#include "kube/config.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOKEN_MAX (64u << 10)

/* ---- the client --------------------------------------------------------- */

struct kube {
	struct kube_config cfg;
	CURL *curl;
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
	k->cfg.source = dup_or_null(cfg->source, &oom);
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
	kube_config_release(&k->cfg);
	free(k);
}

struct sink {
	char *buf;
	size_t len, cap, max;
	bool too_big;
	long status;                 /* from the last status line seen */
	volatile bool *stop;
	bool aborted;                /* stopped, or on_line() said so */
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

/* Sets up the handle for one GET into s; returns the header list to free. */
static struct curl_slist *prepare(struct kube *k, const char *path, char *url,
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
	if (k->cfg.insecure) {
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
	h = prepare(k, path, url, sizeof(url), &s, d, &ok);
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

	h = prepare(k, path, url, sizeof(url), &s, d, &ok);
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
