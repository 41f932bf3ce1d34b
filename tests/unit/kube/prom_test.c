/*
 * kube/prom.c: the vector parser on good, garbage and hostile answers;
 * the client against a plain-HTTP server thread of this test (canned
 * answers, the request it was sent checked), and over TLS against the
 * house's server (http/server.h) with a throw-away CA.
 */
#include "base/diag.h"
#include "base/file.h"
#include "certs/certs.h"
#include "http/server.h"
#include "kube/prom.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- prom_parse_vector -------------------------------------------------- */

static int parse(const char *text, struct prom_vector *v, struct diag *d)
{
	diag_init(d);
	return prom_parse_vector(text, strlen(text), v, d);
}

Test(prom_parse, a_vector_of_samples)
{
	struct prom_vector v;
	struct diag d;
	const char *text =
		"{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":["
		"{\"metric\":{\"namespace\":\"team-a\",\"pod\":\"train-0\",\"gpu\":\"0\"},"
		"\"value\":[1733400000.123,\"0.021\"]},"
		"{\"metric\":{\"namespace\":\"team-b\",\"pod\":\"infer-1\"},"
		"\"value\":[1733400000.123,\"1e-05\"]}]},"
		"\"warnings\":[\"something\"]}";

	cr_assert_eq(parse(text, &v, &d), 0, "%s", diag_text(&d));
	cr_assert_eq(v.n, 2);
	cr_assert_str_eq(v.v[0].namespace, "team-a");
	cr_assert_str_eq(v.v[0].pod, "train-0");
	cr_assert_float_eq(v.v[0].value, 0.021, 1e-12);
	cr_assert_str_eq(v.v[1].pod, "infer-1");
	cr_assert_float_eq(v.v[1].value, 1e-05, 1e-15);
	prom_vector_release(&v);
	cr_assert_eq(v.n, 0);
	cr_assert_null(v.v);
}

Test(prom_parse, an_empty_vector_is_no_error)
{
	struct prom_vector v;
	struct diag d;

	cr_assert_eq(parse("{\"status\":\"success\",\"data\":{\"resultType\":"
			   "\"vector\",\"result\":[]}}", &v, &d), 0);
	cr_assert_eq(v.n, 0);
	prom_vector_release(&v);
}

Test(prom_parse, samples_not_ours_or_not_finite_are_dropped)
{
	char pod254[300], ns64[80], text[4096];
	struct prom_vector v;
	struct diag d;

	memset(pod254, 'p', 254);
	pod254[254] = '\0';
	memset(ns64, 'n', 64);
	ns64[64] = '\0';
	snprintf(text, sizeof(text),
		 "{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":["
		 "{\"metric\":{\"pod\":\"no-namespace\"},\"value\":[1,\"0.5\"]},"
		 "{\"metric\":{\"namespace\":\"a\"},\"value\":[1,\"0.5\"]},"
		 "{\"metric\":{\"namespace\":\"a\",\"pod\":\"\"},\"value\":[1,\"0.5\"]},"
		 "{\"metric\":{\"namespace\":\"a\",\"pod\":7},\"value\":[1,\"0.5\"]},"
		 "{\"metric\":{\"namespace\":\"a\",\"pod\":\"nan\"},\"value\":[1,\"NaN\"]},"
		 "{\"metric\":{\"namespace\":\"a\",\"pod\":\"inf\"},\"value\":[1,\"+Inf\"]},"
		 "{\"metric\":{\"namespace\":\"a\",\"pod\":\"ninf\"},\"value\":[1,\"-Inf\"]},"
		 "{\"metric\":{\"namespace\":\"a\",\"pod\":\"word\"},\"value\":[1,\"high\"]},"
		 "{\"metric\":{\"namespace\":\"a\",\"pod\":\"tail\"},\"value\":[1,\"0.5x\"]},"
		 "{\"metric\":{\"namespace\":\"a\",\"pod\":\"blank\"},\"value\":[1,\" 0.5\"]},"
		 "{\"metric\":{\"namespace\":\"a\",\"pod\":\"empty\"},\"value\":[1,\"\"]},"
		 "{\"metric\":{\"namespace\":\"a\",\"pod\":\"%s\"},\"value\":[1,\"0.5\"]},"
		 "{\"metric\":{\"namespace\":\"%s\",\"pod\":\"x\"},\"value\":[1,\"0.5\"]},"
		 "{\"metric\":{\"namespace\":\"a\",\"pod\":\"h\"},\"histogram\":[1,{}]},"
		 "{\"metric\":{\"namespace\":\"a\",\"pod\":\"kept\"},\"value\":[1,\"0.25\"]}"
		 "]}}",
		 pod254, ns64);
	cr_assert_eq(parse(text, &v, &d), 0, "%s", diag_text(&d));
	cr_assert_eq(v.n, 1);
	cr_assert_str_eq(v.v[0].pod, "kept");
	cr_assert_float_eq(v.v[0].value, 0.25, 1e-12);
	prom_vector_release(&v);
}

Test(prom_parse, labels_at_the_kubernetes_limits_are_kept)
{
	char pod253[300], ns63[80], text[1024];
	struct prom_vector v;
	struct diag d;

	memset(pod253, 'p', 253);
	pod253[253] = '\0';
	memset(ns63, 'n', 63);
	ns63[63] = '\0';
	snprintf(text, sizeof(text),
		 "{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":["
		 "{\"metric\":{\"namespace\":\"%s\",\"pod\":\"%s\"},\"value\":[1,\"0\"]}]}}",
		 ns63, pod253);
	cr_assert_eq(parse(text, &v, &d), 0, "%s", diag_text(&d));
	cr_assert_eq(v.n, 1);
	cr_assert_eq(strlen(v.v[0].pod), 253);
	prom_vector_release(&v);
}

/* Each is not an answer: -1, nothing in the vector, a reason. */
static const char *const garbage[] = {
	"",
	"not json",
	"<html>502 Bad Gateway</html>",
	"[]",
	"{}",
	"{\"status\":\"error\",\"errorType\":\"bad_data\",\"error\":\"parse error\"}",
	"{\"status\":\"success\"}",
	"{\"status\":\"success\",\"data\":[]}",
	"{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":[]}}",
	"{\"status\":\"success\",\"data\":{\"resultType\":\"scalar\",\"result\":[1,\"1\"]}}",
	"{\"status\":\"success\",\"data\":{\"resultType\":\"vector\"}}",
	"{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":{}}}",
	"{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[7]}}",
	"{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":"
	"[{\"value\":[1,\"1\"]}]}}",
	"{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":"
	"[{\"metric\":{\"namespace\":\"a\",\"pod\":\"b\"}}]}}",
	"{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":"
	"[{\"metric\":{\"namespace\":\"a\",\"pod\":\"b\"},\"value\":[1,0.5]}]}}",
	"{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":"
	"[{\"metric\":{\"namespace\":\"a\",\"pod\":\"b\"},\"value\":[1]}]}}",
	"{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":"
	"[{\"metric\":{\"namespace\":\"a\",\"pod\":\"b\"},\"value\":[\"1\",\"1\",3]}]}}",
	/* A duplicate label: which pod is it? */
	"{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":"
	"[{\"metric\":{\"namespace\":\"a\",\"pod\":\"b\",\"pod\":\"c\"},"
	"\"value\":[1,\"1\"]}]}}",
	/* A good sample, then garbage: nothing is kept. */
	"{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":"
	"[{\"metric\":{\"namespace\":\"a\",\"pod\":\"b\"},\"value\":[1,\"1\"]},"
	"null]}}",
	/* A NUL in a string (jansson refuses it). */
	"{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":"
	"[{\"metric\":{\"namespace\":\"a\",\"pod\":\"b\"},\"value\":[1,\"0.5\\u0000\"]}]}}",
	/* Truncated. */
	"{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":"
	"[{\"metric\":{\"namespace\":\"a\",\"pod\":\"b\"},\"value\":[1,\"1\"]}",
};

Test(prom_parse, garbage_is_refused)
{
	for (size_t i = 0; i < sizeof(garbage) / sizeof(garbage[0]); i++) {
		struct prom_vector v = {(void *)1, 99};
		struct diag d;

		cr_assert_eq(parse(garbage[i], &v, &d), -1, "accepted: %s", garbage[i]);
		cr_assert_eq(v.n, 0, "%s", garbage[i]);
		cr_assert_null(v.v, "%s", garbage[i]);
		cr_assert_gt(diag_count(&d), 0, "no reason for: %s", garbage[i]);
	}
}

Test(prom_parse, prometheus_error_text_is_said)
{
	struct prom_vector v;
	struct diag d;

	cr_assert_eq(parse(garbage[5], &v, &d), -1);
	cr_assert(strstr(diag_text(&d), "parse error"), "%s", diag_text(&d));
}

Test(prom_parse, deep_nesting_is_refused_without_recursion)
{
	size_t depth = 200000, len = 2 * depth;
	char *text = malloc(len + 1);
	struct prom_vector v;
	struct diag d;

	cr_assert_not_null(text);
	memset(text, '[', depth);
	memset(text + depth, ']', depth);
	text[len] = '\0';
	diag_init(&d);
	cr_assert_eq(prom_parse_vector(text, len, &v, &d), -1);
	cr_assert(strstr(diag_text(&d), "nested"), "%s", diag_text(&d));
	free(text);
}

Test(prom_parse, brackets_in_strings_do_not_count_as_depth)
{
	char text[4096], deep[200];
	struct prom_vector v;
	struct diag d;

	memset(deep, '[', 100);
	deep[100] = '\0';
	snprintf(text, sizeof(text),
		 "{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":["
		 "{\"metric\":{\"namespace\":\"a\",\"pod\":\"b\",\"x\":\"\\\"%s\"},"
		 "\"value\":[1,\"1\"]}]}}",
		 deep);
	cr_assert_eq(parse(text, &v, &d), 0, "%s", diag_text(&d));
	cr_assert_eq(v.n, 1);
	prom_vector_release(&v);
}

Test(prom_parse, a_big_vector_of_many_samples)
{
	size_t n = 20000, cap = n * 100 + 200, off = 0;
	char *text = malloc(cap);
	struct prom_vector v;
	struct diag d;

	cr_assert_not_null(text);
	off += (size_t)snprintf(text + off, cap - off,
				"{\"status\":\"success\",\"data\":{\"resultType\":"
				"\"vector\",\"result\":[");
	for (size_t i = 0; i < n; i++)
		off += (size_t)snprintf(text + off, cap - off,
					"%s{\"metric\":{\"namespace\":\"ns\",\"pod\":"
					"\"p-%zu\"},\"value\":[1,\"0.%zu\"]}",
					i ? "," : "", i, i % 10);
	off += (size_t)snprintf(text + off, cap - off, "]}}");
	diag_init(&d);
	cr_assert_eq(prom_parse_vector(text, off, &v, &d), 0, "%s", diag_text(&d));
	cr_assert_eq(v.n, n);
	cr_assert_str_eq(v.v[n - 1].pod, "p-19999");
	prom_vector_release(&v);
	free(text);
}

Test(prom_parse, error_names)
{
	cr_assert_str_eq(prom_error_name(PROM_UNREACHABLE), "unreachable");
	cr_assert_str_eq(prom_error_name(PROM_TIMEOUT), "timeout");
	cr_assert_str_eq(prom_error_name(PROM_TLS), "tls");
	cr_assert_str_eq(prom_error_name(PROM_AUTH), "auth");
	cr_assert_str_eq(prom_error_name(PROM_HTTP), "http");
	cr_assert_str_eq(prom_error_name(PROM_TOO_LARGE), "too_large");
	cr_assert_str_eq(prom_error_name(PROM_GARBAGE), "garbage");
}

/* ---- prom_new ----------------------------------------------------------- */

Test(prom_new, refuses_a_url_that_is_not_http)
{
	static const char *const bad[] = {"", "prom:9090", "ftp://prom",
					  "file:///etc/passwd", "http://",
					  "https://prom:9090/?x=1"};
	struct diag d;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct prom_config c = {.url = bad[i]};

		diag_init(&d);
		cr_assert_null(prom_new(&c, &d), "%s", bad[i]);
		cr_assert(strstr(diag_text(&d), "prometheus:"), "%s", diag_text(&d));
	}
}

/* ---- prom_query against a plain-HTTP server thread ---------------------- */

enum answer { OK, FAIL_500, BAD_400, DENY_401, SLOW, HUGE, HUGE_CHUNKED, NOT_JSON,
	      NEED_TOKEN };

static const char vector_body[] =
	"{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":["
	"{\"metric\":{\"namespace\":\"team-a\",\"pod\":\"train-0\"},"
	"\"value\":[1733400000.123,\"0.5\"]}]}}";

static struct {
	int fd;
	int port;
	pthread_t thread;
	pthread_mutex_t mu;
	enum answer answer;
	char wanted_token[128];
	char request_line[4096]; /* of the last request */
	char authorization[256]; /* its Authorization header, "" when none */
	int requests;
} S;

static void send_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);

		if (n <= 0)
			return;
		buf += n;
		len -= (size_t)n;
	}
}

static void answer(int fd, int status, const char *reason, const char *body)
{
	char head[512];
	int n = snprintf(head, sizeof(head),
			 "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
			 "Content-Length: %zu\r\nConnection: close\r\n\r\n",
			 status, reason, strlen(body));

	send_all(fd, head, (size_t)n);
	send_all(fd, body, strlen(body));
}

static void serve_one(int fd)
{
	char req[8192];
	size_t len = 0;
	enum answer a;
	char *line;

	while (len < sizeof(req) - 1) {
		ssize_t n = recv(fd, req + len, sizeof(req) - 1 - len, 0);

		if (n <= 0)
			return;
		len += (size_t)n;
		req[len] = '\0';
		if (strstr(req, "\r\n\r\n"))
			break;
	}
	pthread_mutex_lock(&S.mu);
	S.requests++;
	snprintf(S.request_line, sizeof(S.request_line), "%.*s",
		 (int)strcspn(req, "\r\n"), req);
	S.authorization[0] = '\0';
	line = strcasestr(req, "\r\nAuthorization: ");
	if (line) {
		line += 17;
		snprintf(S.authorization, sizeof(S.authorization), "%.*s",
			 (int)strcspn(line, "\r\n"), line);
	}
	a = S.answer;
	pthread_mutex_unlock(&S.mu);

	switch (a) {
	case OK:
		answer(fd, 200, "OK", vector_body);
		break;
	case FAIL_500:
		answer(fd, 500, "Internal Server Error", "oops");
		break;
	case BAD_400:
		answer(fd, 400, "Bad Request",
		       "{\"status\":\"error\",\"errorType\":\"bad_data\","
		       "\"error\":\"1:5: parse error: unexpected end of input\"}");
		break;
	case DENY_401:
		answer(fd, 401, "Unauthorized", "Unauthorized\n");
		break;
	case SLOW: {
		/* Until the client hangs up (its timeout), at most 5 s. */
		struct pollfd p = {.fd = fd, .events = POLLIN};

		poll(&p, 1, 5000);
		break;
	}
	case HUGE: {
		static char chunk[65536];
		const char *head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
				   "Content-Length: 104857600\r\nConnection: close\r\n\r\n";

		memset(chunk, ' ', sizeof(chunk));
		send_all(fd, head, strlen(head));
		for (int i = 0; i < 1600; i++)
			if (send(fd, chunk, sizeof(chunk), MSG_NOSIGNAL) <= 0)
				break;
		break;
	}
	case HUGE_CHUNKED: {
		/* No length said: the limit must stop the reading. */
		static char chunk[65536 + 32];
		const char *head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
				   "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
		int n = snprintf(chunk, sizeof(chunk), "10000\r\n");

		memset(chunk + n, ' ', 65536);
		memcpy(chunk + n + 65536, "\r\n", 2);
		send_all(fd, head, strlen(head));
		for (int i = 0; i < 1600; i++)
			if (send(fd, chunk, (size_t)n + 65538, MSG_NOSIGNAL) <= 0)
				break;
		break;
	}
	case NOT_JSON:
		answer(fd, 200, "OK", "<html>hello</html>");
		break;
	case NEED_TOKEN: {
		char want[200];

		pthread_mutex_lock(&S.mu);
		snprintf(want, sizeof(want), "Bearer %s", S.wanted_token);
		pthread_mutex_unlock(&S.mu);
		if (strcmp(S.authorization, want) == 0)
			answer(fd, 200, "OK", vector_body);
		else
			answer(fd, 403, "Forbidden", "Forbidden\n");
		break;
	}
	}
}

static void *serve(void *arg)
{
	(void)arg;
	for (;;) {
		int fd = accept(S.fd, NULL, NULL);

		if (fd < 0)
			return NULL;
		serve_one(fd);
		close(fd);
	}
}

static char tmp[64];

static void start(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t alen = sizeof(a);

	signal(SIGPIPE, SIG_IGN);
	pthread_mutex_init(&S.mu, NULL);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	S.fd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert_geq(S.fd, 0);
	cr_assert_eq(bind(S.fd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(listen(S.fd, 8), 0);
	cr_assert_eq(getsockname(S.fd, (struct sockaddr *)&a, &alen), 0);
	S.port = ntohs(a.sin_port);
	cr_assert_eq(pthread_create(&S.thread, NULL, serve, NULL), 0);
	strcpy(tmp, "/tmp/gpugate-prom-test-XXXXXX");
	cr_assert_not_null(mkdtemp(tmp));
}

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static void stop(void)
{
	shutdown(S.fd, SHUT_RDWR);
	pthread_join(S.thread, NULL);
	close(S.fd);
	if (tmp[0])
		nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(prom_query, .init = start, .fini = stop, .timeout = 30);

static void set_answer(enum answer a)
{
	pthread_mutex_lock(&S.mu);
	S.answer = a;
	pthread_mutex_unlock(&S.mu);
}

static struct prom *client(const char *token_file, unsigned timeout_ms, size_t max_body)
{
	char url[64];
	struct prom_config c = {.url = url, .bearer_token_file = token_file,
				.timeout_ms = timeout_ms, .max_body = max_body};
	struct diag d;
	struct prom *p;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/", S.port);
	diag_init(&d);
	p = prom_new(&c, &d);
	cr_assert_not_null(p, "%s", diag_text(&d));
	return p;
}

static int query(struct prom *p, struct prom_vector *v, enum prom_error *why,
		 struct diag *d)
{
	diag_init(d);
	return prom_query(p, "max_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE[30m]) > 0",
			  1733400000123, v, why, d);
}

Test(prom_query, a_vector_and_the_request_that_asked_for_it)
{
	struct prom *p = client(NULL, 5000, 0);
	struct prom_vector v;
	enum prom_error why = PROM_GARBAGE;
	struct diag d;

	set_answer(OK);
	cr_assert_eq(query(p, &v, &why, &d), 0, "%s", diag_text(&d));
	cr_assert_eq(why, PROM_OK);
	cr_assert_eq(v.n, 1);
	cr_assert_str_eq(v.v[0].pod, "train-0");
	cr_assert_float_eq(v.v[0].value, 0.5, 1e-12);
	cr_assert_str_eq(S.request_line,
			 "GET /api/v1/query?query=max_over_time%28DCGM_FI_PROF_GR_ENGINE_"
			 "ACTIVE%5B30m%5D%29%20%3E%200&time=1733400000.123 HTTP/1.1");
	cr_assert_str_eq(S.authorization, "");
	prom_vector_release(&v);

	/* Time 0: Prometheus' now, no time parameter. */
	diag_init(&d);
	cr_assert_eq(prom_query(p, "up", 0, &v, &why, &d), 0, "%s", diag_text(&d));
	cr_assert_str_eq(S.request_line, "GET /api/v1/query?query=up HTTP/1.1");
	prom_vector_release(&v);
	prom_free(p);
}

Test(prom_query, a_path_prefix_is_kept)
{
	char url[80];
	struct prom_config c = {.url = url};
	struct prom_vector v;
	enum prom_error why;
	struct diag d;
	struct prom *p;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/prometheus", S.port);
	diag_init(&d);
	p = prom_new(&c, &d);
	cr_assert_not_null(p);
	set_answer(OK);
	cr_assert_eq(prom_query(p, "up", 5, &v, &why, &d), 0, "%s", diag_text(&d));
	cr_assert_str_eq(S.request_line,
			 "GET /prometheus/api/v1/query?query=up&time=0.005 HTTP/1.1");
	prom_vector_release(&v);
	prom_free(p);
}

Test(prom_query, a_500_is_http)
{
	struct prom *p = client(NULL, 5000, 0);
	struct prom_vector v;
	enum prom_error why;
	struct diag d;

	set_answer(FAIL_500);
	cr_assert_eq(query(p, &v, &why, &d), -1);
	cr_assert_eq(why, PROM_HTTP);
	cr_assert_eq(v.n, 0);
	cr_assert(strstr(diag_text(&d), "500"), "%s", diag_text(&d));
	prom_free(p);
}

Test(prom_query, a_400_says_prometheus_error)
{
	struct prom *p = client(NULL, 5000, 0);
	struct prom_vector v;
	enum prom_error why;
	struct diag d;

	set_answer(BAD_400);
	cr_assert_eq(query(p, &v, &why, &d), -1);
	cr_assert_eq(why, PROM_HTTP);
	cr_assert(strstr(diag_text(&d), "400"), "%s", diag_text(&d));
	cr_assert(strstr(diag_text(&d), "parse error: unexpected end of input"), "%s",
		  diag_text(&d));
	prom_free(p);
}

Test(prom_query, a_401_is_auth)
{
	struct prom *p = client(NULL, 5000, 0);
	struct prom_vector v;
	enum prom_error why;
	struct diag d;

	set_answer(DENY_401);
	cr_assert_eq(query(p, &v, &why, &d), -1);
	cr_assert_eq(why, PROM_AUTH);
	cr_assert(strstr(diag_text(&d), "401"), "%s", diag_text(&d));
	prom_free(p);
}

Test(prom_query, a_slow_answer_is_a_timeout)
{
	struct prom *p = client(NULL, 300, 0);
	struct prom_vector v;
	enum prom_error why;
	struct diag d;

	set_answer(SLOW);
	cr_assert_eq(query(p, &v, &why, &d), -1);
	cr_assert_eq(why, PROM_TIMEOUT);
	cr_assert(strstr(diag_text(&d), "prometheus: timeout after 300 ms at "
					"http://127.0.0.1:"), "%s", diag_text(&d));
	prom_free(p);
}

Test(prom_query, an_answer_over_the_limit_is_too_large)
{
	struct prom *p = client(NULL, 5000, 64 << 10);
	struct prom_vector v;
	enum prom_error why;
	struct diag d;

	set_answer(HUGE);
	cr_assert_eq(query(p, &v, &why, &d), -1);
	cr_assert_eq(why, PROM_TOO_LARGE, "%s", diag_text(&d));
	set_answer(HUGE_CHUNKED);
	cr_assert_eq(query(p, &v, &why, &d), -1);
	cr_assert_eq(why, PROM_TOO_LARGE, "%s", diag_text(&d));
	cr_assert(strstr(diag_text(&d), "larger than 65536 bytes"), "%s", diag_text(&d));
	prom_free(p);
}

Test(prom_query, not_json_is_garbage)
{
	struct prom *p = client(NULL, 5000, 0);
	struct prom_vector v;
	enum prom_error why;
	struct diag d;

	set_answer(NOT_JSON);
	cr_assert_eq(query(p, &v, &why, &d), -1);
	cr_assert_eq(why, PROM_GARBAGE);
	cr_assert(strstr(diag_text(&d), "garbage"), "%s", diag_text(&d));
	prom_free(p);
}

Test(prom_query, nobody_listening_is_unreachable)
{
	struct prom_config c = {.url = "http://127.0.0.1:1", .timeout_ms = 2000};
	struct prom_vector v;
	enum prom_error why;
	struct diag d;
	struct prom *p;

	diag_init(&d);
	p = prom_new(&c, &d);
	cr_assert_not_null(p);
	cr_assert_eq(query(p, &v, &why, &d), -1);
	cr_assert_eq(why, PROM_UNREACHABLE, "%s", diag_text(&d));
	prom_free(p);
}

static void write_token(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
}

Test(prom_query, the_token_file_is_read_on_every_query)
{
	char path[128];
	struct prom *p;
	struct prom_vector v;
	enum prom_error why;
	struct diag d;

	snprintf(path, sizeof(path), "%s/token", tmp);
	write_token(path, "first-token\n");
	p = client(path, 5000, 0);
	set_answer(NEED_TOKEN);
	snprintf(S.wanted_token, sizeof(S.wanted_token), "first-token");
	cr_assert_eq(query(p, &v, &why, &d), 0, "%s", diag_text(&d));
	cr_assert_str_eq(S.authorization, "Bearer first-token");
	prom_vector_release(&v);

	/* Rotated (as the kubelet does a projected token): the new one goes. */
	write_token(path, "second-token\r\n");
	snprintf(S.wanted_token, sizeof(S.wanted_token), "second-token");
	cr_assert_eq(query(p, &v, &why, &d), 0, "%s", diag_text(&d));
	cr_assert_str_eq(S.authorization, "Bearer second-token");
	prom_vector_release(&v);

	/* The server wants another: 403 is auth. */
	snprintf(S.wanted_token, sizeof(S.wanted_token), "third-token");
	cr_assert_eq(query(p, &v, &why, &d), -1);
	cr_assert_eq(why, PROM_AUTH);
	cr_assert(strstr(diag_text(&d), "403"), "%s", diag_text(&d));

	/* Gone: auth, before anything is sent. */
	cr_assert_eq(unlink(path), 0);
	pthread_mutex_lock(&S.mu);
	S.requests = 0;
	pthread_mutex_unlock(&S.mu);
	cr_assert_eq(query(p, &v, &why, &d), -1);
	cr_assert_eq(why, PROM_AUTH);
	cr_assert(strstr(diag_text(&d), "bearer token file"), "%s", diag_text(&d));
	cr_assert(strstr(diag_text(&d), path), "%s", diag_text(&d));
	cr_assert_eq(S.requests, 0);

	/* Empty: auth too. */
	write_token(path, "\n");
	cr_assert_eq(query(p, &v, &why, &d), -1);
	cr_assert_eq(why, PROM_AUTH);
	cr_assert(strstr(diag_text(&d), "empty"), "%s", diag_text(&d));
	prom_free(p);
}

/* ---- over TLS: the house's server, a throw-away CA ---------------------- */

static void tls_vector(void *ctx, const struct http_request *req,
		       struct http_reply *out)
{
	(void)ctx;
	(void)req;
	out->body = strdup(vector_body);
	out->len = out->body ? strlen(out->body) : 0;
	out->status = 200;
	out->content_type = "application/json";
}

static const struct http_route tls_routes[] = {
	{"GET", "/api/v1/query", tls_vector, NULL, 0},
};

static char *slurp(const char *dir, const char *name)
{
	char path[160];
	char *buf;
	size_t len;
	struct diag d;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	diag_init(&d);
	cr_assert_eq(file_read(path, 1 << 20, 0, &buf, &len, &d), 0, "%s",
		     diag_text(&d));
	return buf;
}

Test(prom_tls, verified_with_the_ca_refused_without)
{
	static const char *const ips[] = {"127.0.0.1"};
	struct certs_request req = {.ips = ips, .n_ips = 1, .days = 1};
	struct server_config sc = {.host = "127.0.0.1", .threads = 2,
				   .body_cap = 4096, .routes = tls_routes,
				   .n_routes = 1};
	char dir[64] = "/tmp/gpugate-prom-tls-XXXXXX", ca[128], url[64];
	struct prom_config c = {.url = url, .ca_file = ca, .timeout_ms = 5000};
	struct server *srv = NULL;
	struct prom_vector v;
	enum prom_error why;
	char *cert, *key;
	struct prom *p;
	struct diag d;

	cr_assert_not_null(mkdtemp(dir));
	req.out_dir = dir;
	diag_init(&d);
	cr_assert_eq(certs_generate(&req, &d), 0, "%s", diag_text(&d));
	snprintf(ca, sizeof(ca), "%s/%s", dir, CERTS_CA_CRT);
	cert = slurp(dir, CERTS_TLS_CRT);
	key = slurp(dir, CERTS_TLS_KEY);
	cr_assert_eq(server_start(&sc, cert, key, &srv, &d), 0, "%s", diag_text(&d));
	free(cert);
	free(key);
	snprintf(url, sizeof(url), "https://127.0.0.1:%u", server_port(srv));

	p = prom_new(&c, &d);
	cr_assert_not_null(p, "%s", diag_text(&d));
	diag_init(&d);
	cr_assert_eq(prom_query(p, "up", 0, &v, &why, &d), 0, "%s", diag_text(&d));
	cr_assert_eq(v.n, 1);
	prom_vector_release(&v);
	prom_free(p);

	/* The system's CAs do not know the throw-away one. */
	c.ca_file = NULL;
	p = prom_new(&c, &d);
	cr_assert_not_null(p);
	diag_init(&d);
	cr_assert_eq(prom_query(p, "up", 0, &v, &why, &d), -1);
	cr_assert_eq(why, PROM_TLS, "%s", diag_text(&d));
	prom_free(p);

	/* A CA file that is not one. */
	snprintf(ca, sizeof(ca), "%s/%s", dir, CERTS_TLS_KEY);
	c.ca_file = ca;
	p = prom_new(&c, &d);
	cr_assert_not_null(p);
	diag_init(&d);
	cr_assert_eq(prom_query(p, "up", 0, &v, &why, &d), -1);
	cr_assert_eq(why, PROM_TLS, "%s", diag_text(&d));
	prom_free(p);

	server_stop(srv, 1000);
	nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}
