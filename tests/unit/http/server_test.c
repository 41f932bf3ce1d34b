/*
 * http/server.c: the route table against the real server.  Each test (its
 * own process, Criterion) starts a server on 127.0.0.1, an ephemeral port,
 * with a throw-away certificate and a table of test routes, and talks to it
 * with libcurl over HTTPS, the certificate verified.  gpugate's own table
 * (daemon/daemon.c) is tested in tests/unit/webhook/daemon_test.c and over
 * the binary in tests/integration.
 */
#include "base/diag.h"
#include "base/file.h"
#include "certs/certs.h"
#include "http/server.h"

#include <criterion/criterion.h>
#include <curl/curl.h>
#include <ftw.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#define BODY_CAP (64u << 10)

static char tmp[64] = "";
static char ca_path[128];
static struct server *srv;
static atomic_int hello_calls;

static const char hello_text[] = "hello\n";

/* GET /hello: the text ctx points to. */
static void hello(void *ctx, const struct http_request *req,
		  struct http_reply *out)
{
	(void)req;
	atomic_fetch_add(&hello_calls, 1);
	http_reply_text(out, 200, ctx);
}

/* POST /echo (JSON): "METHOD PATH LEN\n" and the body it was given. */
static void echo(void *ctx, const struct http_request *req,
		 struct http_reply *out)
{
	char head[128];
	int n = snprintf(head, sizeof(head), "%s %s %zu\n", req->method,
			 req->path, req->len);

	(void)ctx;
	out->body = malloc((size_t)n + req->len);
	if (!out->body)
		return;
	memcpy(out->body, head, (size_t)n);
	memcpy(out->body + n, req->body, req->len);
	out->len = (size_t)n + req->len;
	out->status = 200;
	out->content_type = "application/json";
}

/* GET and POST /both: which one was called. */
static void both(void *ctx, const struct http_request *req,
		 struct http_reply *out)
{
	(void)ctx;
	http_reply_text(out, 201, req->method);
}

/* GET /oom: a handler out of memory. */
static void oom(void *ctx, const struct http_request *req,
		struct http_reply *out)
{
	(void)ctx;
	(void)req;
	out->status = 200;
}

/* GET /auth and GET /noauth: the Authorization header as the route got
 * it ("(none)": NULL). */
static void auth(void *ctx, const struct http_request *req,
		 struct http_reply *out)
{
	(void)ctx;
	http_reply_text(out, 200, req->authorization ? req->authorization : "(none)");
}

static const struct http_route routes[] = {
    {"GET", "/auth", auth, NULL, HTTP_ROUTE_AUTHORIZATION},
    {"GET", "/noauth", auth, NULL, 0},
    {"GET", "/hello", hello, (void *)hello_text, 0},
    {"POST", "/echo", echo, NULL, HTTP_ROUTE_JSON},
    {"GET", "/both", both, NULL, 0},
    {"POST", "/both", both, NULL, 0},
    {"GET", "/oom", oom, NULL, 0},
};

static char *slurp(const char *name)
{
	char path[128];
	char *buf;
	size_t len;
	struct diag d;

	snprintf(path, sizeof(path), "%s/%s", tmp, name);
	diag_init(&d);
	cr_assert_eq(file_read(path, 1 << 20, 0, &buf, &len, &d), 0, "%s",
		     diag_text(&d));
	return buf;
}

static void setup(void)
{
	static const char *const ips[] = {"127.0.0.1"};
	struct certs_request req = {.ips = ips, .n_ips = 1, .days = 1};
	struct server_config cfg = {.host = "127.0.0.1",
				    .threads = 2,
				    .body_cap = BODY_CAP,
				    .routes = routes,
				    .n_routes =
					sizeof(routes) / sizeof(routes[0])};
	char *cert, *key;
	struct diag d;

	strcpy(tmp, "/tmp/gpugate-http-test-XXXXXX");
	cr_assert_not_null(mkdtemp(tmp));
	req.out_dir = tmp;
	diag_init(&d);
	cr_assert_eq(certs_generate(&req, &d), 0, "%s", diag_text(&d));
	snprintf(ca_path, sizeof(ca_path), "%s/%s", tmp, CERTS_CA_CRT);
	cert = slurp(CERTS_TLS_CRT);
	key = slurp(CERTS_TLS_KEY);
	diag_init(&d);
	cr_assert_eq(server_start(&cfg, cert, key, &srv, &d), 0, "%s",
		     diag_text(&d));
	free(cert);
	free(key);
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

static int rm_entry(const char *p, const struct stat *st, int flag,
		    struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static void teardown(void)
{
	server_stop(srv, 1000);
	srv = NULL;
	curl_global_cleanup();
	if (tmp[0])
		nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(http_server, .init = setup, .fini = teardown);

/* ---- a small client ----------------------------------------------------- */

struct reply {
	long status;
	CURLcode rc;
	char body[128 << 10];
	size_t len;
	char allow[256];     /* the Allow header, "" when none */
	bool close;	     /* Connection: close */
	long content_length; /* -1 when none */
	long connects;	     /* new connections this request opened */
};

struct upload {
	const char *data;
	size_t len, off;
};

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
	struct reply *r = arg;
	size_t k = size * n;

	cr_assert_leq(r->len + k, sizeof(r->body));
	memcpy(r->body + r->len, p, k);
	r->len += k;
	return k;
}

static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
	struct reply *r = arg;
	size_t k = size * n;
	char line[256];

	snprintf(line, sizeof(line), "%.*s", (int)k, p);
	line[strcspn(line, "\r\n")] = '\0';
	if (strncasecmp(line, "Allow: ", 7) == 0)
		snprintf(r->allow, sizeof(r->allow), "%s", line + 7);
	if (strcasecmp(line, "Connection: close") == 0)
		r->close = true;
	if (strncasecmp(line, "Content-Length: ", 16) == 0)
		r->content_length = atol(line + 16);
	return k;
}

static size_t on_read(char *p, size_t size, size_t n, void *arg)
{
	struct upload *u = arg;
	size_t k = size * n < u->len - u->off ? size * n : u->len - u->off;

	memcpy(p, u->data + u->off, k);
	u->off += k;
	return k;
}

enum { CHUNKED = 1, EXPECT = 2, AUTH = 4 };

/*
 * One request on the easy handle h (connections kept between calls).
 * ctype NULL: no Content-Type; body NULL: none.  The body is declared as
 * body_len bytes (with CHUNKED, sent chunked instead).
 */
static void request(CURL *h, const char *method, const char *path,
		    const char *ctype, const char *body, size_t body_len,
		    unsigned how, struct reply *r)
{
	char url[256], ct[128];
	struct curl_slist *hdr = NULL;
	struct upload up = {body, body_len, 0};

	memset(r, 0, sizeof(*r));
	r->content_length = -1;
	snprintf(url, sizeof(url), "https://127.0.0.1:%u%s", server_port(srv),
		 path);
	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_CAINFO, ca_path);
	curl_easy_setopt(h, CURLOPT_TIMEOUT, 10L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
	if (strcmp(method, "HEAD") == 0)
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	else
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	snprintf(ct, sizeof(ct), "Content-Type: %s", ctype ? ctype : "");
	hdr = curl_slist_append(hdr, ct); /* "Content-Type:" removes it */
	hdr = curl_slist_append(hdr, how & EXPECT ? "Expect: 100-continue"
						  : "Expect:");
	if (how & AUTH)
		hdr = curl_slist_append(hdr, "Authorization: Bearer t0ken");
	if (body) {
		curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(h, CURLOPT_READDATA, &up);
		if (how & CHUNKED)
			hdr = curl_slist_append(hdr,
						"Transfer-Encoding: chunked");
		else
			curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE,
					 (curl_off_t)body_len);
	}
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
	r->rc = curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
	curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &r->connects);
	r->body[r->len < sizeof(r->body) ? r->len : sizeof(r->body) - 1] = '\0';
	curl_slist_free_all(hdr);
}

static void once(const char *method, const char *path, const char *ctype,
		 const char *body, size_t body_len, unsigned how,
		 struct reply *r)
{
	CURL *h = curl_easy_init();

	cr_assert_not_null(h);
	request(h, method, path, ctype, body, body_len, how, r);
	curl_easy_cleanup(h);
	cr_assert_eq(r->rc, CURLE_OK, "%s %s: %s", method, path,
		     curl_easy_strerror(r->rc));
}

static struct reply R; /* large: not on the stack */

/* ---- routes ------------------------------------------------------------- */

Test(http_server, a_get_route_answers_with_its_ctx)
{
	once("GET", "/hello", NULL, NULL, 0, 0, &R);
	cr_assert_eq(R.status, 200);
	cr_assert_str_eq(R.body, "hello\n");
	cr_assert_eq(atomic_load(&hello_calls), 1);
}

/* Issue #32: a route that asks for it gets the Authorization header (the
 * replicas' token on /peer/decide); the others are not given it. */
Test(http_server, only_a_route_that_asks_gets_the_authorization_header)
{
	once("GET", "/auth", NULL, NULL, 0, AUTH, &R);
	cr_assert_eq(R.status, 200);
	cr_assert_str_eq(R.body, "Bearer t0ken");
	once("GET", "/auth", NULL, NULL, 0, 0, &R);
	cr_assert_str_eq(R.body, "(none)");
	once("GET", "/noauth", NULL, NULL, 0, AUTH, &R);
	cr_assert_str_eq(R.body, "(none)");
}

Test(http_server, the_query_string_is_ignored)
{
	once("GET", "/hello?verbose=1&x=y", NULL, NULL, 0, 0, &R);
	cr_assert_eq(R.status, 200);
	cr_assert_str_eq(R.body, "hello\n");
}

Test(http_server, head_on_a_get_route_is_its_get_without_the_body)
{
	once("HEAD", "/hello", NULL, NULL, 0, 0, &R);
	cr_assert_eq(R.status, 200);
	cr_assert_eq(R.len, 0);
	cr_assert_eq(R.content_length, 6);
	cr_assert_eq(atomic_load(&hello_calls), 1);
}

Test(http_server, an_unknown_path_is_404_for_every_method)
{
	once("GET", "/nope", NULL, NULL, 0, 0, &R);
	cr_assert_eq(R.status, 404);
	cr_assert_str_eq(R.body, "not found\n");
	cr_assert_str_eq(R.allow, "");
	cr_assert_not(R.close);
	once("GET", "/hello/", NULL, NULL, 0, 0, &R);
	cr_assert_eq(R.status, 404);
	once("POST", "/nope", "application/json", "{}", 2, 0, &R);
	cr_assert_eq(R.status, 404);
	cr_assert_str_eq(R.body, "not found\n");
	cr_assert(R.close, "a refusal before the body closes the connection");
}

Test(http_server, a_wrong_method_is_405_with_allow)
{
	once("GET", "/echo", NULL, NULL, 0, 0, &R);
	cr_assert_eq(R.status, 405);
	cr_assert_str_eq(R.body, "method not allowed: use POST\n");
	cr_assert_str_eq(R.allow, "POST");
	once("HEAD", "/echo", NULL, NULL, 0, 0, &R);
	cr_assert_eq(R.status, 405);
	cr_assert_str_eq(R.allow, "POST");
	once("POST", "/hello", "application/json", "{}", 2, 0, &R);
	cr_assert_eq(R.status, 405);
	cr_assert_str_eq(R.body, "method not allowed: use GET\n");
	cr_assert_str_eq(R.allow, "GET, HEAD");
	cr_assert(R.close);
	once("DELETE", "/both", NULL, NULL, 0, 0, &R);
	cr_assert_eq(R.status, 405);
	cr_assert_str_eq(R.body, "method not allowed: use GET or POST\n");
	cr_assert_str_eq(R.allow, "GET, HEAD, POST");
	cr_assert_eq(atomic_load(&hello_calls), 0);
}

Test(http_server, one_path_two_methods_two_routes)
{
	once("GET", "/both", NULL, NULL, 0, 0, &R);
	cr_assert_eq(R.status, 201);
	cr_assert_str_eq(R.body, "GET");
	once("POST", "/both", "text/plain", "x", 1, 0, &R);
	cr_assert_eq(R.status, 201);
	cr_assert_str_eq(R.body, "POST",
			 "a route without HTTP_ROUTE_JSON "
			 "takes any body and drops it");
}

Test(http_server, a_refused_get_keeps_the_connection)
{
	CURL *h = curl_easy_init();

	request(h, "GET", "/nope", NULL, NULL, 0, 0, &R);
	cr_assert_eq(R.status, 404);
	cr_assert_eq(R.connects, 1);
	request(h, "GET", "/echo", NULL, NULL, 0, 0, &R);
	cr_assert_eq(R.status, 405);
	cr_assert_eq(R.connects, 0, "the connection was not kept");
	request(h, "GET", "/hello", NULL, NULL, 0, 0, &R);
	cr_assert_eq(R.status, 200);
	cr_assert_eq(R.connects, 0, "the connection was not kept");
	curl_easy_cleanup(h);
}

Test(http_server, a_handler_without_a_body_drops_the_connection)
{
	CURL *h = curl_easy_init();

	request(h, "GET", "/oom", NULL, NULL, 0, 0, &R);
	cr_assert_eq(R.rc, CURLE_GOT_NOTHING, "%s", curl_easy_strerror(R.rc));
	curl_easy_cleanup(h);
	once("GET", "/hello", NULL, NULL, 0, 0, &R);
	cr_assert_eq(R.status, 200);
}

/* ---- JSON routes -------------------------------------------------------- */

Test(http_server, a_json_route_sees_its_body)
{
	static char big[40000];
	CURL *h = curl_easy_init();
	char want[64];

	request(h, "POST", "/echo?timeout=10s", "application/json",
		"{\"a\": 1}", 8, 0, &R);
	cr_assert_eq(R.rc, CURLE_OK);
	cr_assert_eq(R.status, 200);
	cr_assert_str_eq(R.body, "POST /echo 8\n{\"a\": 1}");
	/* Over a TLS record (16 KiB) and over what is corked (8 KiB), on the
	 * same kept-alive connection. */
	memset(big, 'x', sizeof(big));
	request(h, "POST", "/echo", "application/json; charset=utf-8", big,
		sizeof(big), 0, &R);
	cr_assert_eq(R.status, 200);
	cr_assert_eq(R.connects, 0);
	snprintf(want, sizeof(want), "POST /echo %zu\n", sizeof(big));
	cr_assert_eq(R.len, strlen(want) + sizeof(big));
	cr_assert(memcmp(R.body, want, strlen(want)) == 0);
	cr_assert(memcmp(R.body + strlen(want), big, sizeof(big)) == 0);
	/* An empty body. */
	request(h, "POST", "/echo", "application/json", "", 0, 0, &R);
	cr_assert_eq(R.status, 200);
	cr_assert_str_eq(R.body, "POST /echo 0\n");
	cr_assert_eq(R.connects, 0);
	curl_easy_cleanup(h);
}

Test(http_server, a_json_route_wants_application_json)
{
	once("POST", "/echo", "text/plain", "{}", 2, 0, &R);
	cr_assert_eq(R.status, 415);
	cr_assert_str_eq(R.body, "gpugate: bad request: Content-Type must be "
				 "application/json\n");
	cr_assert(R.close);
	once("POST", "/echo", "application/jsonx", "{}", 2, 0, &R);
	cr_assert_eq(R.status, 415);
	once("POST", "/echo", NULL, "{}", 2, 0, &R);
	cr_assert_eq(R.status, 415);
}

Test(http_server, a_json_route_wants_a_content_length)
{
	once("POST", "/echo", "application/json", "{}", 2, CHUNKED | EXPECT,
	     &R);
	cr_assert_eq(R.status, 411);
	cr_assert_str_eq(R.body,
			 "gpugate: bad request: a Content-Length is "
			 "required (chunked bodies are not accepted)\n");
	cr_assert(R.close);
}

Test(http_server, a_body_over_the_cap_is_refused_unread)
{
	static char big[BODY_CAP + 1];
	char want[128];

	memset(big, ' ', sizeof(big));
	once("POST", "/echo", "application/json", big, sizeof(big), EXPECT, &R);
	cr_assert_eq(R.status, 413);
	snprintf(want, sizeof(want),
		 "gpugate: request body too large (%zu bytes, at most %u)\n",
		 sizeof(big), BODY_CAP);
	cr_assert_str_eq(R.body, want);
	cr_assert(R.close);
	/* At the cap: taken. */
	once("POST", "/echo", "application/json", big, BODY_CAP, 0, &R);
	cr_assert_eq(R.status, 200);
}

/* ---- counters ----------------------------------------------------------- */

Test(http_server, requests_are_counted_per_worker)
{
	uint64_t sum = 0;

	for (int i = 0; i < 5; i++)
		once("GET", "/hello", NULL, NULL, 0, 0, &R);
	once("GET", "/nope", NULL, NULL, 0, 0, &R);
	cr_assert_eq(server_worker_count(srv), 2);
	for (unsigned i = 0; i < server_worker_count(srv); i++)
		sum += server_worker_requests(srv, i);
	cr_assert_eq(sum, 6);
	cr_assert_eq(server_worker_requests(srv, 2), 0);
	/* The last answer may reach curl before the server has seen it sent. */
	for (int i = 0; i < 100 && server_in_flight(srv); i++)
		nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
	cr_assert_eq(server_in_flight(srv), 0);
}
