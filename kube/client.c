#include "kube/client.h"

#include "base/base64.h"
#include "base/diag.h"
#include "base/file.h"
#include "codec/yamljson.h"

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <libgen.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KUBECONFIG_MAX (4u << 20)
#define PEM_MAX (1u << 20)
#define TOKEN_MAX (64u << 10)
#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

/* ---- small helpers ------------------------------------------------------ */

static const json_t *named(const json_t *list, const char *name)
{
	size_t i;
	json_t *item;

	json_array_foreach(list, i, item) {
		const char *n = json_string_value(json_object_get(item, "name"));

		if (n && strcmp(n, name) == 0)
			return item;
	}
	return NULL;
}

/* A file path from the kubeconfig, relative to its directory. */
static char *resolve(const char *dir, const char *path)
{
	char *out;
	size_t n;

	if (path[0] == '/')
		return strdup(path);
	n = strlen(dir) + strlen(path) + 2;
	out = malloc(n);
	if (out)
		snprintf(out, n, "%s/%s", dir, path);
	return out;
}

/* Inline "-data" (base64) or a file: the PEM text, or NULL with a message. */
static int pem_field(const json_t *obj, const char *data_key, const char *file_key,
		     const char *dir, const char *what, char **out, struct diag *d)
{
	const char *data = json_string_value(json_object_get(obj, data_key));
	const char *file = json_string_value(json_object_get(obj, file_key));

	*out = NULL;
	if (data) {
		size_t n;
		int rc = base64_decode(data, strlen(data), BASE64_LENIENT, out, &n);

		if (rc == -2) {
			diag_addf(d, "out of memory");
			return -1;
		}
		if (rc < 0) {
			diag_addf(d, "%s: %s is not valid base64", what, data_key);
			return -1;
		}
		return 0;
	}
	if (file) {
		char *p = resolve(dir, file);

		if (!p) {
			diag_addf(d, "out of memory");
			return -1;
		}
		size_t n;
		int rc = file_read(p, PEM_MAX, FILE_SECRET, out, &n, d);

		free(p);
		return rc < 0 ? -1 : 0;
	}
	return 0;
}

/* ---- configuration ------------------------------------------------------ */

int kube_config_load(const char *path, struct kube_config *out, struct diag *d)
{
	const json_t *ctxs, *ctx, *cluster, *user;
	const char *cur, *cluster_name, *user_name, *server, *token, *tfile;
	char *text = NULL, *dircopy = NULL, *dir;
	json_t *root = NULL;
	size_t len;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	if (file_read(path, KUBECONFIG_MAX, FILE_SECRET, &text, &len, d) < 0 ||
	    yamljson_parse(path, text, len, &root, d) < 0)
		goto out;
	dircopy = strdup(path);
	if (!dircopy)
		goto out;
	dir = dirname(dircopy);
	cur = json_string_value(json_object_get(root, "current-context"));
	ctxs = json_object_get(root, "contexts");
	ctx = cur ? named(ctxs, cur) : NULL;
	if (!ctx) {
		diag_addf(d, "%s: no current-context (or it names no context)", path);
		goto out;
	}
	cluster_name = json_string_value(json_object_get(
		json_object_get(ctx, "context"), "cluster"));
	user_name = json_string_value(json_object_get(
		json_object_get(ctx, "context"), "user"));
	cluster = json_object_get(named(json_object_get(root, "clusters"),
					cluster_name ? cluster_name : ""),
				  "cluster");
	if (!cluster) {
		diag_addf(d, "%s: context \"%s\" names no cluster", path, cur);
		goto out;
	}
	server = json_string_value(json_object_get(cluster, "server"));
	/* https://HOST[:PORT][/prefix]: a host is required, trailing slashes
	 * go (request paths start with one). */
	if (!server || strncmp(server, "https://", 8) != 0 || server[8] == '\0' ||
	    server[8] == '/') {
		diag_addf(d, "%s: cluster \"%s\" has no https server", path,
			  cluster_name);
		goto out;
	}
	out->server = strdup(server);
	if (out->server) {
		size_t n = strlen(out->server);

		while (n > 8 && out->server[n - 1] == '/')
			out->server[--n] = '\0';
	}
	out->insecure = json_is_true(json_object_get(cluster, "insecure-skip-tls-verify"));
	if (pem_field(cluster, "certificate-authority-data", "certificate-authority",
		      dir, path, &out->ca_pem, d) < 0)
		goto out;
	user = json_object_get(named(json_object_get(root, "users"),
				     user_name ? user_name : ""),
			       "user");
	if (user) {
		if (pem_field(user, "client-certificate-data", "client-certificate",
			      dir, path, &out->cert_pem, d) < 0 ||
		    pem_field(user, "client-key-data", "client-key", dir, path,
			      &out->key_pem, d) < 0)
			goto out;
		token = json_string_value(json_object_get(user, "token"));
		tfile = json_string_value(json_object_get(user, "tokenFile"));
		if (token)
			out->token = strdup(token);
		if (tfile)
			out->token_file = resolve(dir, tfile);
	}
	if (!!out->cert_pem != !!out->key_pem) {
		diag_addf(d, "%s: user \"%s\" has a client certificate without a key "
			     "(or a key without a certificate)",
			  path, user_name ? user_name : "");
		goto out;
	}
	out->source = strdup(path);
	rc = out->server && out->source ? 0 : -1;
out:
	if (rc < 0)
		kube_config_release(out);
	json_decref(root);
	file_free_secret(text, len);
	free(dircopy);
	return rc;
}

int kube_config_in_cluster(const char *root, struct kube_config *out,
			   struct diag *d)
{
	const char *host = getenv("KUBERNETES_SERVICE_HOST");
	const char *port = getenv("KUBERNETES_SERVICE_PORT");
	const char *dir = root ? root : SA_DIR;
	char path[512];
	size_t n;

	memset(out, 0, sizeof(*out));
	if (!host || !port) {
		diag_addf(d, "not in a cluster: KUBERNETES_SERVICE_HOST and "
			     "KUBERNETES_SERVICE_PORT are not set");
		return -1;
	}
	n = strlen(host) + strlen(port) + 16;
	out->server = malloc(n);
	if (!out->server)
		goto fail;
	/* An IPv6 service address needs brackets in a URL. */
	snprintf(out->server, n, strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s",
		 host, port);
	snprintf(path, sizeof(path), "%s/ca.crt", dir);
	if (file_read(path, PEM_MAX, 0, &out->ca_pem, &n, d) < 0)
		goto fail;
	snprintf(path, sizeof(path), "%s/token", dir);
	out->token_file = strdup(path);
	out->source = strdup("in-cluster service account");
	if (!out->ca_pem || !out->token_file || !out->source)
		goto fail;
	return 0;
fail:
	kube_config_release(out);
	return -1;
}

void kube_config_release(struct kube_config *c)
{
	free(c->server);
	free(c->ca_pem);
	if (c->key_pem) {
		memset(c->key_pem, 0, strlen(c->key_pem));
		free(c->key_pem);
	}
	free(c->cert_pem);
	free(c->token);
	free(c->token_file);
	free(c->source);
	memset(c, 0, sizeof(*c));
}

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
