#include "kube/prom.h"

#include "base/diag.h"
#include "base/file.h"

#include <curl/curl.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define TOKEN_MAX (64u << 10)
/* Label values longer than Kubernetes allows for the name are no pod of
 * ours: a namespace is a DNS label (63), a pod name a DNS subdomain (253). */
#define NAMESPACE_MAX 63u
#define POD_MAX 253u
/*
 * An answer of the query API nests five deep ({data: {result: [{metric:
 * {}}]}}).  Deeper is no answer of Prometheus: refused before jansson,
 * whose own limit (2048 levels of recursion) is for a thread with a
 * bigger stack than a controller needs.
 */
#define DEPTH_MAX 32
/* How much of Prometheus' own "error" text a message quotes. */
#define ERROR_QUOTE 300

static const char *const error_names[PROM_ERROR__COUNT] = {
	[PROM_OK] = "ok",
	[PROM_UNREACHABLE] = "unreachable",
	[PROM_TIMEOUT] = "timeout",
	[PROM_TLS] = "tls",
	[PROM_AUTH] = "auth",
	[PROM_HTTP] = "http",
	[PROM_TOO_LARGE] = "too_large",
	[PROM_GARBAGE] = "garbage",
};

const char *prom_error_name(enum prom_error e)
{
	if ((unsigned)e >= PROM_ERROR__COUNT)
		return "unknown";
	return error_names[e];
}

/* ---- the answer --------------------------------------------------------- */

void prom_vector_release(struct prom_vector *v)
{
	if (!v)
		return;
	for (size_t i = 0; i < v->n; i++) {
		free(v->v[i].namespace);
		free(v->v[i].pod);
	}
	free(v->v);
	v->v = NULL;
	v->n = 0;
}

/* Whether body nests deeper than DEPTH_MAX (strings skipped). */
static bool too_deep(const char *body, size_t len)
{
	int depth = 0;
	bool in_string = false;

	for (size_t i = 0; i < len; i++) {
		char c = body[i];

		if (in_string) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_string = false;
		} else if (c == '"') {
			in_string = true;
		} else if (c == '[' || c == '{') {
			if (++depth > DEPTH_MAX)
				return true;
		} else if (c == ']' || c == '}') {
			depth--;
		}
	}
	return false;
}

/* A label value of at most max bytes, not empty; NULL otherwise. */
static const char *label(const json_t *metric, const char *key, size_t max)
{
	const json_t *v = json_object_get(metric, key);
	size_t n;

	if (!json_is_string(v))
		return NULL;
	n = json_string_length(v);
	if (n == 0 || n > max || strlen(json_string_value(v)) != n)
		return NULL;
	return json_string_value(v);
}

/* Prometheus writes a sample's value as a string ("0.5", "NaN", "+Inf",
 * "1e-05"): a finite number, the whole string, or false. */
static bool finite_value(const json_t *v, double *out)
{
	const char *s;
	char *end;

	if (!json_is_string(v))
		return false;
	s = json_string_value(v);
	if (!s[0] || s[0] == ' ' || s[0] == '\t' || s[0] == '\n' || s[0] == '\r' ||
	    strlen(s) != json_string_length(v))
		return false;
	*out = strtod(s, &end);
	return *end == '\0' && isfinite(*out);
}

/*
 * One element of the result: 1 (a sample, in *ns, *pod, *value), 0 (a
 * sample not ours or without a finite value: dropped), -1 (not the shape
 * of a vector's sample: the answer is garbage).
 */
static int sample(const json_t *e, size_t i, const char **ns, const char **pod,
		  double *value, struct diag *d)
{
	const json_t *metric = json_object_get(e, "metric");
	const json_t *pair = json_object_get(e, "value");

	if (!json_is_object(e) || !json_is_object(metric)) {
		diag_addf(d, "result[%zu] is no sample (an object with a "
			     "\"metric\" object)", i);
		return -1;
	}
	if (!pair && json_object_get(e, "histogram"))
		return 0; /* a native histogram: no utilization */
	if (!json_is_array(pair) || json_array_size(pair) != 2 ||
	    !json_is_number(json_array_get(pair, 0)) ||
	    !json_is_string(json_array_get(pair, 1))) {
		diag_addf(d, "result[%zu].value is not [time, \"number\"]", i);
		return -1;
	}
	*ns = label(metric, "namespace", NAMESPACE_MAX);
	*pod = label(metric, "pod", POD_MAX);
	if (!*ns || !*pod || !finite_value(json_array_get(pair, 1), value))
		return 0;
	return 1;
}

int prom_parse_vector(const char *body, size_t len, struct prom_vector *out,
		      struct diag *d)
{
	const json_t *data, *result, *status;
	json_error_t je;
	json_t *root;
	size_t i, n = 0;

	out->v = NULL;
	out->n = 0;
	if (too_deep(body, len)) {
		diag_addf(d, "not an answer of the query API: JSON nested deeper "
			     "than %d levels", DEPTH_MAX);
		return -1;
	}
	/* Two "pod" labels in one sample would be ambiguous: Prometheus never
	 * sends duplicate keys, so an answer with them is not its answer. */
	root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
	if (!root) {
		diag_addf(d, "not JSON: %s (line %d, column %d)", je.text, je.line,
			  je.column);
		return -1;
	}
	status = json_object_get(root, "status");
	if (!json_is_string(status) || strcmp(json_string_value(status), "success") != 0) {
		const char *err = json_string_value(json_object_get(root, "error"));

		diag_addf(d, "status is not \"success\"%s%.*s",
			  err ? ": " : "", ERROR_QUOTE, err ? err : "");
		goto garbage;
	}
	data = json_object_get(root, "data");
	if (!json_is_object(data) ||
	    !json_is_string(json_object_get(data, "resultType"))) {
		diag_addf(d, "no data.resultType in the answer");
		goto garbage;
	}
	if (strcmp(json_string_value(json_object_get(data, "resultType")), "vector") != 0) {
		diag_addf(d, "the answer is a %.40s, not a vector",
			  json_string_value(json_object_get(data, "resultType")));
		goto garbage;
	}
	result = json_object_get(data, "result");
	if (!json_is_array(result)) {
		diag_addf(d, "data.result is not an array");
		goto garbage;
	}
	if (json_array_size(result)) {
		out->v = calloc(json_array_size(result), sizeof(*out->v));
		if (!out->v) {
			diag_addf(d, "out of memory");
			goto garbage;
		}
	}
	for (i = 0; i < json_array_size(result); i++) {
		const char *ns = NULL, *pod = NULL;
		double value = 0;
		int rc = sample(json_array_get(result, i), i, &ns, &pod, &value, d);

		if (rc < 0)
			goto garbage;
		if (rc == 0)
			continue;
		out->v[n].namespace = strdup(ns);
		out->v[n].pod = strdup(pod);
		out->v[n].value = value;
		out->n = ++n;
		if (!out->v[n - 1].namespace || !out->v[n - 1].pod) {
			diag_addf(d, "out of memory");
			goto garbage;
		}
	}
	json_decref(root);
	return 0;
garbage:
	json_decref(root);
	prom_vector_release(out);
	return -1;
}

/* ---- the client --------------------------------------------------------- */

struct prom {
	struct prom_config cfg; /* strings owned */
	char *endpoint;         /* "<url>/api/v1/query" */
	CURL *curl;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_init_once(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

static bool has_scheme(const char *url)
{
	return (strncasecmp(url, "http://", 7) == 0 && url[7]) ||
	       (strncasecmp(url, "https://", 8) == 0 && url[8]);
}

void prom_free(struct prom *p)
{
	if (!p)
		return;
	if (p->curl)
		curl_easy_cleanup(p->curl);
	free((char *)p->cfg.url);
	free((char *)p->cfg.bearer_token_file);
	free((char *)p->cfg.ca_file);
	free(p->endpoint);
	free(p);
}

struct prom *prom_new(const struct prom_config *cfg, struct diag *d)
{
	struct prom *p;
	size_t n;
	bool oom = false;

	if (!cfg->url || !has_scheme(cfg->url)) {
		diag_addf(d, "prometheus: the URL must be http://HOST[:PORT][/PATH] or "
			     "https://... (got \"%.200s\")", cfg->url ? cfg->url : "");
		return NULL;
	}
	if (strpbrk(cfg->url, "?# \t\r\n")) {
		diag_addf(d, "prometheus: the URL must have no query, fragment or "
			     "blank (got \"%.200s\")", cfg->url);
		return NULL;
	}
	pthread_once(&curl_once, curl_init_once);
	p = calloc(1, sizeof(*p));
	if (!p) {
		diag_addf(d, "out of memory");
		return NULL;
	}
	p->cfg = *cfg;
	p->cfg.url = strdup(cfg->url);
	p->cfg.bearer_token_file =
		cfg->bearer_token_file ? strdup(cfg->bearer_token_file) : NULL;
	p->cfg.ca_file = cfg->ca_file ? strdup(cfg->ca_file) : NULL;
	if (!p->cfg.timeout_ms)
		p->cfg.timeout_ms = PROM_TIMEOUT_MS;
	if (!p->cfg.max_body)
		p->cfg.max_body = PROM_MAX_BODY;
	oom = !p->cfg.url || (cfg->bearer_token_file && !p->cfg.bearer_token_file) ||
	      (cfg->ca_file && !p->cfg.ca_file);
	if (!oom) {
		/* "https://prom:9090/" and "https://prom:9090" alike; a path
		 * prefix (a Prometheus behind /prometheus) is kept. */
		n = strlen(p->cfg.url);
		while (n > 0 && p->cfg.url[n - 1] == '/')
			n--;
		p->endpoint = malloc(n + sizeof("/api/v1/query"));
		if (p->endpoint)
			snprintf(p->endpoint, n + sizeof("/api/v1/query"),
				 "%.*s/api/v1/query", (int)n, p->cfg.url);
		p->curl = curl_easy_init();
		oom = !p->endpoint || !p->curl;
	}
	if (oom) {
		diag_addf(d, "prometheus: out of memory");
		prom_free(p);
		return NULL;
	}
	return p;
}

struct sink {
	char *buf;
	size_t len, cap, max;
	bool too_big;
};

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	struct sink *s = userdata;
	size_t n = size * nmemb;

	if (s->len + n > s->max) {
		s->too_big = true;
		return 0; /* stops the transfer: nothing more is read */
	}
	if (s->len + n + 1 > s->cap) {
		size_t cap = s->cap ? s->cap : 16384;
		char *nb;

		while (cap < s->len + n + 1)
			cap *= 2;
		nb = realloc(s->buf, cap);
		if (!nb)
			return 0;
		s->buf = nb;
		s->cap = cap;
	}
	memcpy(s->buf + s->len, ptr, n);
	s->len += n;
	s->buf[s->len] = '\0';
	return n;
}

/* The reason of a failed transfer. */
static enum prom_error curl_reason(CURLcode rc)
{
	switch (rc) {
	case CURLE_OPERATION_TIMEDOUT:
		return PROM_TIMEOUT;
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_ISSUER_ERROR:
	case CURLE_SSL_CRL_BADFILE:
	case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
	case CURLE_SSL_INVALIDCERTSTATUS:
	case CURLE_SSL_ENGINE_NOTFOUND:
	case CURLE_SSL_ENGINE_SETFAILED:
	case CURLE_SSL_ENGINE_INITFAILED:
	case CURLE_SSL_SHUTDOWN_FAILED:
	case CURLE_USE_SSL_FAILED:
		return PROM_TLS;
	default:
		return PROM_UNREACHABLE;
	}
}

/*
 * "Authorization: Bearer <token>" from the token file, read now (a
 * projected token is rotated under us): the header in *h, 0; or -1
 * (PROM_AUTH) with the reason in d.  No file: no header.
 */
static int auth_header(const struct prom *p, struct curl_slist **h, struct diag *d)
{
	struct diag fd;
	char *token = NULL, *line;
	size_t len = 0, n, sz;
	struct curl_slist *nh;

	if (!p->cfg.bearer_token_file)
		return 0;
	diag_init(&fd);
	if (file_read(p->cfg.bearer_token_file, TOKEN_MAX, FILE_SECRET, &token, &len,
		      &fd) < 0) {
		char first[512];

		diag_first(&fd, first, sizeof(first));
		diag_addf(d, "prometheus: the bearer token file cannot be read "
			     "(--prometheus-bearer-token-file): %s", first);
		return -1;
	}
	n = len;
	while (n > 0 && (token[n - 1] == '\n' || token[n - 1] == '\r' ||
			 token[n - 1] == ' ' || token[n - 1] == '\t'))
		n--;
	if (n == 0 || memchr(token, '\n', n) || memchr(token, '\r', n) ||
	    strlen(token) < n) {
		diag_addf(d, "prometheus: the bearer token file %s is %s",
			  p->cfg.bearer_token_file,
			  n == 0 ? "empty" : "not one line of text");
		file_free_secret(token, len);
		return -1;
	}
	sz = n + sizeof("Authorization: Bearer ");
	line = malloc(sz);
	if (!line) {
		file_free_secret(token, len);
		diag_addf(d, "prometheus: out of memory");
		return -1;
	}
	snprintf(line, sz, "Authorization: Bearer %.*s", (int)n, token);
	file_free_secret(token, len);
	nh = curl_slist_append(*h, line);
	file_free_secret(line, sz);
	if (!nh) {
		diag_addf(d, "prometheus: out of memory");
		return -1;
	}
	*h = nh;
	return 0;
}

/* Prometheus' "error" text from the JSON body of a failed answer, quoted
 * into buf ("" when none). */
static void error_text(const char *body, size_t len, char *buf, size_t bufsz)
{
	json_t *root;
	const char *err;

	buf[0] = '\0';
	if (!body || !len || too_deep(body, len))
		return;
	root = json_loadb(body, len, 0, NULL);
	err = json_string_value(json_object_get(root, "error"));
	if (err)
		snprintf(buf, bufsz, ": %.*s", ERROR_QUOTE, err);
	json_decref(root);
}

int prom_query(struct prom *p, const char *q, int64_t time_ms, struct prom_vector *out,
	       enum prom_error *why, struct diag *d)
{
	struct sink s = {.max = p->cfg.max_body};
	struct curl_slist *h = NULL, *nh;
	char errbuf[CURL_ERROR_SIZE] = "";
	char *esc, *url;
	size_t urlsz;
	long status = 0;
	CURLcode rc;
	struct diag pd;

	out->v = NULL;
	out->n = 0;
	*why = PROM_OK;
	if (auth_header(p, &h, d) < 0) {
		curl_slist_free_all(h);
		*why = PROM_AUTH;
		return -1;
	}
	nh = curl_slist_append(h, "Accept: application/json");
	if (nh)
		h = nh;
	nh = curl_slist_append(h, "User-Agent: gpugate");
	if (nh)
		h = nh;
	esc = curl_easy_escape(p->curl, q, 0);
	urlsz = strlen(p->endpoint) + (esc ? strlen(esc) : 0) + 64;
	url = malloc(urlsz);
	if (!esc || !url || !nh) {
		curl_free(esc);
		free(url);
		curl_slist_free_all(h);
		diag_addf(d, "prometheus: out of memory");
		*why = PROM_UNREACHABLE;
		return -1;
	}
	if (time_ms > 0)
		snprintf(url, urlsz, "%s?query=%s&time=%" PRId64 ".%03d", p->endpoint,
			 esc, time_ms / 1000, (int)(time_ms % 1000));
	else
		snprintf(url, urlsz, "%s?query=%s", p->endpoint, esc);
	curl_free(esc);

	curl_easy_reset(p->curl);
	curl_easy_setopt(p->curl, CURLOPT_URL, url);
	curl_easy_setopt(p->curl, CURLOPT_HTTPGET, 1L);
	curl_easy_setopt(p->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(p->curl, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(p->curl, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
	curl_easy_setopt(p->curl, CURLOPT_TIMEOUT_MS, (long)p->cfg.timeout_ms);
	curl_easy_setopt(p->curl, CURLOPT_CONNECTTIMEOUT_MS, (long)p->cfg.timeout_ms);
	curl_easy_setopt(p->curl, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(p->curl, CURLOPT_WRITEDATA, &s);
	curl_easy_setopt(p->curl, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(p->curl, CURLOPT_HTTPHEADER, h);
	/* A redirect is not followed: the token would go wherever it says. */
	curl_easy_setopt(p->curl, CURLOPT_FOLLOWLOCATION, 0L);
	/* An answer announced over the limit is refused before its body. */
	curl_easy_setopt(p->curl, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)p->cfg.max_body);
	if (p->cfg.ca_file)
		curl_easy_setopt(p->curl, CURLOPT_CAINFO, p->cfg.ca_file);
	rc = curl_easy_perform(p->curl);
	/* The header list holds the token: wipe it before it is freed. */
	for (struct curl_slist *l = h; l; l = l->next)
		if (strncmp(l->data, "Authorization:", 14) == 0)
			memset(l->data, 0, strlen(l->data));
	curl_slist_free_all(h);
	curl_easy_setopt(p->curl, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(p->curl, CURLOPT_ERRORBUFFER, NULL);
	free(url);

	if (rc != CURLE_OK) {
		if (s.too_big || rc == CURLE_FILESIZE_EXCEEDED) {
			*why = PROM_TOO_LARGE;
			diag_addf(d, "prometheus: an answer larger than %zu bytes at %s",
				  p->cfg.max_body, p->endpoint);
		} else if (rc == CURLE_OPERATION_TIMEDOUT) {
			*why = PROM_TIMEOUT;
			diag_addf(d, "prometheus: timeout after %u ms at %s",
				  p->cfg.timeout_ms, p->endpoint);
		} else {
			*why = curl_reason(rc);
			diag_addf(d, "prometheus: %s at %s",
				  errbuf[0] ? errbuf : curl_easy_strerror(rc),
				  p->endpoint);
		}
		free(s.buf);
		return -1;
	}
	curl_easy_getinfo(p->curl, CURLINFO_RESPONSE_CODE, &status);
	if (status < 200 || status > 299) {
		char err[ERROR_QUOTE + 8];

		error_text(s.buf, s.len, err, sizeof(err));
		if (status == 401 || status == 403) {
			*why = PROM_AUTH;
			diag_addf(d, "prometheus: %ld at %s: the bearer token %s%s",
				  status, p->endpoint,
				  !p->cfg.bearer_token_file ? "is missing "
							    "(--prometheus-bearer-token-file)"
				  : status == 401 ? "was refused"
						  : "may not query",
				  err);
		} else {
			*why = PROM_HTTP;
			diag_addf(d, "prometheus: %ld at %s%s", status, p->endpoint, err);
		}
		free(s.buf);
		return -1;
	}
	diag_init(&pd);
	if (prom_parse_vector(s.buf ? s.buf : "", s.len, out, &pd) < 0) {
		char first[512];

		diag_first(&pd, first, sizeof(first));
		*why = PROM_GARBAGE;
		diag_addf(d, "prometheus: garbage at %s: %s", p->endpoint, first);
		free(s.buf);
		return -1;
	}
	free(s.buf);
	return 0;
}
