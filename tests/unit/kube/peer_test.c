/*
 * kube/peer.c (issue #32): the token and the pin as pure functions (the
 * pin against the openssl command line's), the bearer check, and the
 * client against a TLS server thread of this test (OpenSSL, a throw-away
 * certificate from certs_generate()): answers, a server with another key
 * refused by the pin (libcurl checks it with VERIFYPEER off), an error
 * status, not JSON, a hang cut at PEER_TIMEOUT_MS, kept-alive connections
 * counted, the pool emptied when the address or the keys change, and
 * calls from several threads at once.
 */
#include "base/diag.h"
#include "base/file.h"
#include "certs/certs.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/peer.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <ftw.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- peer_token, peer_pin, peer_authorized ------------------------------ */

Test(peer_keys, the_token_is_the_keys_and_no_other)
{
	const char key_a[] = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";
	const char key_b[] = "-----BEGIN PRIVATE KEY-----\nAAAB\n-----END PRIVATE KEY-----\n";
	char t1[PEER_TOKEN_LEN + 1], t2[PEER_TOKEN_LEN + 1], t3[PEER_TOKEN_LEN + 1];

	cr_assert_eq(peer_token(key_a, strlen(key_a), t1), 0);
	cr_assert_eq(peer_token(key_a, strlen(key_a), t2), 0);
	cr_assert_eq(peer_token(key_b, strlen(key_b), t3), 0);
	cr_assert_eq(strlen(t1), PEER_TOKEN_LEN);
	cr_assert_eq(strspn(t1, "0123456789abcdef"), PEER_TOKEN_LEN);
	cr_assert_str_eq(t1, t2);
	cr_assert_str_neq(t1, t3);
	cr_assert_eq(peer_token(key_a, 0, t1), -1);
	cr_assert_eq(peer_token(NULL, 5, t1), -1);
}

Test(peer_keys, the_token_is_sha256_of_the_prefix_and_the_key)
{
	/* printf 'gpugate-peer-v1\nkey' | sha256sum */
	FILE *f = popen("printf 'gpugate-peer-v1\\nkey' | openssl dgst -sha256 -r", "r");
	char want[128] = "", tok[PEER_TOKEN_LEN + 1];

	cr_assert_not_null(f);
	cr_assert_not_null(fgets(want, sizeof(want), f));
	pclose(f);
	want[PEER_TOKEN_LEN] = '\0';
	cr_assert_eq(peer_token("key", 3, tok), 0);
	cr_assert_str_eq(tok, want);
}

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(p);
}

/* A new CA and serving pair for 127.0.0.1 in a new directory. */
static void make_certs(char dir[64])
{
	static const char *const ips[] = {"127.0.0.1"};
	struct certs_request req = {.ips = ips, .n_ips = 1, .days = 1};
	struct diag d;

	strcpy(dir, "/tmp/gpugate-peer-test-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	req.out_dir = dir;
	diag_init(&d);
	cr_assert_eq(certs_generate(&req, &d), 0, "%s", diag_text(&d));
}

static char *slurp(const char *dir, const char *name, size_t *len)
{
	char path[160];
	char *buf;
	size_t n;
	struct diag d;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	diag_init(&d);
	cr_assert_eq(file_read(path, 1 << 20, 0, &buf, &n, &d), 0, "%s", diag_text(&d));
	if (len)
		*len = n;
	return buf;
}

static void pin_of(const char *dir, char pin[PEER_PIN_MAX + 1])
{
	size_t len;
	char *cert = slurp(dir, CERTS_TLS_CRT, &len);
	struct diag d;

	diag_init(&d);
	cr_assert_eq(peer_pin(cert, len, pin, &d), 0, "%s", diag_text(&d));
	free(cert);
}

static void token_of(const char *dir, char token[PEER_TOKEN_LEN + 1])
{
	size_t len;
	char *key = slurp(dir, CERTS_TLS_KEY, &len);

	cr_assert_eq(peer_token(key, len, token), 0);
	free(key);
}

Test(peer_keys, the_pin_is_what_openssl_says)
{
	char dir[64], cmd[512], want[128] = "", pin[PEER_PIN_MAX + 1];
	FILE *f;

	make_certs(dir);
	snprintf(cmd, sizeof(cmd),
		 "openssl x509 -in %s/%s -pubkey -noout | openssl pkey -pubin -outform der"
		 " | openssl dgst -sha256 -binary | base64",
		 dir, CERTS_TLS_CRT);
	f = popen(cmd, "r");
	cr_assert_not_null(f);
	cr_assert_not_null(fgets(want, sizeof(want), f));
	pclose(f);
	want[strcspn(want, "\n")] = '\0';
	pin_of(dir, pin);
	cr_assert(strncmp(pin, "sha256//", 8) == 0, "%s", pin);
	cr_assert_str_eq(pin + 8, want);
	cr_assert_leq(strlen(pin), PEER_PIN_MAX);
	nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

Test(peer_keys, a_pin_of_what_is_no_certificate_fails_with_a_line)
{
	char pin[PEER_PIN_MAX + 1] = "x";
	const char key[] = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";
	struct diag d;

	diag_init(&d);
	cr_assert_eq(peer_pin("hello", 5, pin, &d), -1);
	cr_assert_str_eq(pin, "");
	cr_assert(strstr(diag_text(&d), "no PEM certificate found"), "%s", diag_text(&d));
	diag_init(&d);
	cr_assert_eq(peer_pin(key, strlen(key), pin, &d), -1);
	cr_assert_eq(diag_count(&d), 1);
	diag_init(&d);
	cr_assert_eq(peer_pin("", 0, pin, &d), -1);
	cr_assert_eq(diag_count(&d), 1);
}

Test(peer_keys, only_bearer_and_the_very_token_is_authorized)
{
	const char *tok = "0123456789abcdef";

	cr_assert(peer_authorized("Bearer 0123456789abcdef", tok));
	cr_assert_not(peer_authorized(NULL, tok));
	cr_assert_not(peer_authorized("", tok));
	cr_assert_not(peer_authorized("0123456789abcdef", tok));
	cr_assert_not(peer_authorized("bearer 0123456789abcdef", tok));
	cr_assert_not(peer_authorized("Basic 0123456789abcdef", tok));
	cr_assert_not(peer_authorized("Bearer  0123456789abcdef", tok));
	cr_assert_not(peer_authorized("Bearer 0123456789abcdee", tok));
	cr_assert_not(peer_authorized("Bearer 1123456789abcdef", tok));
	cr_assert_not(peer_authorized("Bearer 0123456789abcde", tok));
	cr_assert_not(peer_authorized("Bearer 0123456789abcdef0", tok));
	cr_assert_not(peer_authorized("Bearer ", tok));
	cr_assert_not(peer_authorized("Bearer", tok));
	/* No token: nobody. */
	cr_assert_not(peer_authorized("Bearer ", ""));
	cr_assert_not(peer_authorized("Bearer x", NULL));
}

/* ---- a TLS server thread ------------------------------------------------ */

enum mode { OK, STATUS_503, NOT_JSON, HANG };

#define MAX_CONNS 64

static struct {
	int fd;
	int port;
	SSL_CTX *ctx;
	pthread_t acceptor;
	pthread_mutex_t mu;
	enum mode mode;
	char token[PEER_TOKEN_LEN + 1]; /* the bearer wanted */
	int accepted;                   /* connections */
	int requests;
	int refused;                    /* requests without the token */
	pthread_t conns[MAX_CONNS];
	int conn_fds[MAX_CONNS];
	int n_conns;
	char dir_a[64], dir_b[64];      /* two certificates, two keys */
} S;

static enum mode mode_now(void)
{
	enum mode m;

	pthread_mutex_lock(&S.mu);
	m = S.mode;
	pthread_mutex_unlock(&S.mu);
	return m;
}

static int write_all(SSL *ssl, const char *buf, size_t len)
{
	while (len > 0) {
		int n = SSL_write(ssl, buf, (int)len);

		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

static int reply(SSL *ssl, int status, const char *body)
{
	char head[256];
	int n = snprintf(head, sizeof(head),
			 "HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
			 "Content-Length: %zu\r\n\r\n",
			 status, strlen(body));

	if (write_all(ssl, head, (size_t)n) < 0)
		return -1;
	return write_all(ssl, body, strlen(body));
}

/* One request on ssl: 0 when answered, -1 when the connection ends. */
static int serve_request(SSL *ssl, int fd)
{
	char req[16384], auth[256] = "", *end, *cl, *line, out[17000];
	size_t len = 0, want;
	bool ok;

	for (;;) {
		int n = SSL_read(ssl, req + len, (int)(sizeof(req) - 1 - len));

		if (n <= 0)
			return -1;
		len += (size_t)n;
		req[len] = '\0';
		if ((end = strstr(req, "\r\n\r\n")) != NULL)
			break;
		if (len == sizeof(req) - 1)
			return -1;
	}
	cl = strcasestr(req, "\r\nContent-Length: ");
	want = (size_t)(end + 4 - req) + (cl ? strtoul(cl + 18, NULL, 10) : 0);
	while (len < want && len < sizeof(req) - 1) {
		int n = SSL_read(ssl, req + len, (int)(sizeof(req) - 1 - len));

		if (n <= 0)
			return -1;
		len += (size_t)n;
		req[len] = '\0';
	}
	line = strcasestr(req, "\r\nAuthorization: ");
	if (line && line < end)
		snprintf(auth, sizeof(auth), "%.*s", (int)strcspn(line + 17, "\r\n"),
			 line + 17);
	pthread_mutex_lock(&S.mu);
	S.requests++;
	ok = peer_authorized(auth, S.token) &&
	     strncmp(req, "POST /peer/decide HTTP/1.1\r\n", 28) == 0;
	if (!ok)
		S.refused++;
	pthread_mutex_unlock(&S.mu);
	if (!ok)
		return reply(ssl, 403, "{\"error\":\"who are you\"}");
	switch (mode_now()) {
	case OK:
		snprintf(out, sizeof(out), "{\"got\":%s}", end + 4);
		return reply(ssl, 200, out);
	case STATUS_503:
		return reply(ssl, 503, "this replica does not lead\nsecond line");
	case NOT_JSON:
		return reply(ssl, 200, "<html>hello</html>");
	case HANG: {
		/* Until the client hangs up, at most 5 s. */
		struct pollfd p = {.fd = fd, .events = POLLIN};

		poll(&p, 1, 5000);
		return -1;
	}
	}
	return -1;
}

static void *serve_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	SSL *ssl = SSL_new(S.ctx);

	if (ssl && SSL_set_fd(ssl, fd) == 1 && SSL_accept(ssl) == 1)
		while (serve_request(ssl, fd) == 0)
			;
	if (ssl) {
		SSL_shutdown(ssl);
		SSL_free(ssl);
	}
	ERR_clear_error();
	return NULL;
}

static void *accept_loop(void *arg)
{
	(void)arg;
	for (;;) {
		int fd = accept(S.fd, NULL, NULL);

		if (fd < 0)
			return NULL;
		pthread_mutex_lock(&S.mu);
		S.accepted++;
		if (S.n_conns == MAX_CONNS ||
		    pthread_create(&S.conns[S.n_conns], NULL, serve_conn,
				   (void *)(intptr_t)fd) != 0) {
			close(fd);
		} else {
			S.conn_fds[S.n_conns++] = fd;
		}
		pthread_mutex_unlock(&S.mu);
	}
}

/* Serves the pair in dir (a fresh SSL_CTX: new connections get it). */
static void serve_certs(const char *dir)
{
	char crt[160], key[160];
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

	cr_assert_not_null(ctx);
	snprintf(crt, sizeof(crt), "%s/%s", dir, CERTS_TLS_CRT);
	snprintf(key, sizeof(key), "%s/%s", dir, CERTS_TLS_KEY);
	cr_assert_eq(SSL_CTX_use_certificate_chain_file(ctx, crt), 1);
	cr_assert_eq(SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM), 1);
	pthread_mutex_lock(&S.mu);
	if (S.ctx)
		SSL_CTX_free(S.ctx);
	S.ctx = ctx;
	pthread_mutex_unlock(&S.mu);
}

static void start(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t alen = sizeof(a);

	signal(SIGPIPE, SIG_IGN);
	memset(&S, 0, sizeof(S));
	pthread_mutex_init(&S.mu, NULL);
	make_certs(S.dir_a);
	make_certs(S.dir_b);
	token_of(S.dir_a, S.token);
	serve_certs(S.dir_a);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	S.fd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert_geq(S.fd, 0);
	cr_assert_eq(bind(S.fd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(listen(S.fd, 16), 0);
	cr_assert_eq(getsockname(S.fd, (struct sockaddr *)&a, &alen), 0);
	S.port = ntohs(a.sin_port);
	cr_assert_eq(pthread_create(&S.acceptor, NULL, accept_loop, NULL), 0);
}

static void stop(void)
{
	shutdown(S.fd, SHUT_RDWR);
	pthread_join(S.acceptor, NULL);
	close(S.fd);
	for (int i = 0; i < S.n_conns; i++) {
		shutdown(S.conn_fds[i], SHUT_RDWR);
		pthread_join(S.conns[i], NULL);
		close(S.conn_fds[i]);
	}
	SSL_CTX_free(S.ctx);
	nftw(S.dir_a, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	nftw(S.dir_b, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(peer_post, .init = start, .fini = stop, .timeout = 60);

static void set_mode(enum mode m)
{
	pthread_mutex_lock(&S.mu);
	S.mode = m;
	pthread_mutex_unlock(&S.mu);
}

static int accepted(void)
{
	int n;

	pthread_mutex_lock(&S.mu);
	n = S.accepted;
	pthread_mutex_unlock(&S.mu);
	return n;
}

static char address[64];

/* A peer with dir's keys (its pin, its token). */
static struct peer *peer_with(const char *dir)
{
	char pin[PEER_PIN_MAX + 1], token[PEER_TOKEN_LEN + 1];
	struct peer *pr = peer_new();

	cr_assert_not_null(pr);
	pin_of(dir, pin);
	token_of(dir, token);
	peer_set_keys(pr, pin, token);
	snprintf(address, sizeof(address), "127.0.0.1:%d", S.port);
	return pr;
}

static json_t *ask(void)
{
	return json_pack("{s:i, s:s}", "v", 1, "what", "decide");
}

static int post(struct peer *pr, json_t **answer, char *err, size_t size)
{
	json_t *body = ask();
	int rc;

	err[0] = '\0';
	rc = peer_post(pr, address, body, answer, err, size);
	json_decref(body);
	return rc;
}

Test(peer_post, a_200_json_answer_is_returned)
{
	struct peer *pr = peer_with(S.dir_a);
	json_t *answer;
	char err[512], *text;

	set_mode(OK);
	cr_assert_eq(post(pr, &answer, err, sizeof(err)), 0, "%s", err);
	text = json_dumps(answer, JSON_COMPACT | JSON_SORT_KEYS);
	/* The body went compact, and came back. */
	cr_assert_str_eq(text, "{\"got\":{\"v\":1,\"what\":\"decide\"}}");
	free(text);
	json_decref(answer);
	cr_assert_eq(S.refused, 0);
	peer_free(pr);
}

Test(peer_post, a_server_with_another_key_is_refused_by_the_pin)
{
	struct peer *pr = peer_with(S.dir_b);
	json_t *answer = (json_t *)1;
	char err[512];

	set_mode(OK);
	/* B's pin against A's server. */
	cr_assert_eq(post(pr, &answer, err, sizeof(err)), -1);
	cr_assert_null(answer);
	cr_assert(strstr(err, address), "%s", err);
	cr_assert(strstr(err, "public key") || strstr(err, "pinned"), "%s", err);
	cr_assert_eq(S.requests, 0, "a request reached a server the pin refuses");

	/* The server now serves B's pair: the same peer gets through. */
	serve_certs(S.dir_b);
	pthread_mutex_lock(&S.mu);
	token_of(S.dir_b, S.token);
	pthread_mutex_unlock(&S.mu);
	cr_assert_eq(post(pr, &answer, err, sizeof(err)), 0, "%s", err);
	json_decref(answer);
	peer_free(pr);
}

Test(peer_post, the_kube_client_checks_the_pin_with_verifypeer_off)
{
	char pin_a[PEER_PIN_MAX + 1], pin_b[PEER_PIN_MAX + 1], server[64];
	struct kube_config cfg = {.server = server, .token = S.token};
	struct kube_request req = {.method = "POST", .path = PEER_DECIDE_PATH,
				   .body = "{}", .body_len = 2, .timeout_ms = 5000};
	struct kube_response resp;
	struct kube *k;
	struct diag d;

	set_mode(OK);
	pin_of(S.dir_a, pin_a);
	pin_of(S.dir_b, pin_b);
	snprintf(server, sizeof(server), "https://127.0.0.1:%d", S.port);

	/* A throw-away CA the system does not know, an IP with no name
	 * checked: the pin alone lets it through. */
	cfg.pinned_pubkey = pin_a;
	diag_init(&d);
	k = kube_new(&cfg, &d);
	cr_assert_not_null(k, "%s", diag_text(&d));
	cr_assert_eq(kube_request(k, &req, &resp, &d), 0, "%s", diag_text(&d));
	cr_assert_str_eq(resp.body, "{\"got\":{}}");
	kube_response_release(&resp);
	kube_free(k);

	cfg.pinned_pubkey = pin_b;
	k = kube_new(&cfg, &d);
	cr_assert_not_null(k);
	diag_init(&d);
	cr_assert_eq(kube_request(k, &req, &resp, &d), -1);
	cr_assert(strstr(diag_text(&d), "public key"), "%s", diag_text(&d));
	kube_response_release(&resp);
	kube_free(k);

	/* A pin that is no pin at all fails too, rather than trusting. */
	cfg.pinned_pubkey = (char *)"sha256//AAAA";
	k = kube_new(&cfg, &d);
	diag_init(&d);
	cr_assert_eq(kube_request(k, &req, &resp, &d), -1);
	kube_response_release(&resp);
	kube_free(k);
	cr_assert_eq(S.requests, 1);
}

Test(peer_post, an_error_status_is_one_line_with_it)
{
	struct peer *pr = peer_with(S.dir_a);
	json_t *answer = (json_t *)1;
	char err[512], want[128];
	int before;

	set_mode(STATUS_503);
	cr_assert_eq(post(pr, &answer, err, sizeof(err)), -1);
	cr_assert_null(answer);
	snprintf(want, sizeof(want), "peer %s answered 503: this replica does not lead",
		 address);
	cr_assert_str_eq(err, want);

	/* A client whose call failed is not kept: the next call connects
	 * anew. */
	before = accepted();
	set_mode(OK);
	cr_assert_eq(post(pr, &answer, err, sizeof(err)), 0, "%s", err);
	json_decref(answer);
	cr_assert_eq(accepted(), before + 1);
	peer_free(pr);
}

Test(peer_post, a_wrong_token_is_a_403)
{
	struct peer *pr = peer_with(S.dir_a);
	char pin[PEER_PIN_MAX + 1], err[512];
	json_t *answer;

	set_mode(OK);
	pin_of(S.dir_a, pin);
	peer_set_keys(pr, pin, "not-the-token");
	cr_assert_eq(post(pr, &answer, err, sizeof(err)), -1);
	cr_assert(strstr(err, "answered 403"), "%s", err);
	cr_assert_eq(S.refused, 1);
	peer_free(pr);
}

Test(peer_post, an_answer_that_is_not_json_is_an_error)
{
	struct peer *pr = peer_with(S.dir_a);
	json_t *answer = (json_t *)1;
	char err[512];

	set_mode(NOT_JSON);
	cr_assert_eq(post(pr, &answer, err, sizeof(err)), -1);
	cr_assert_null(answer);
	cr_assert(strstr(err, "answered 200 but not JSON"), "%s", err);
	peer_free(pr);
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

Test(peer_post, a_server_that_hangs_is_cut_at_the_timeout)
{
	struct peer *pr = peer_with(S.dir_a);
	json_t *answer = (json_t *)1;
	char err[512];
	long long t0, took;

	set_mode(HANG);
	t0 = now_ms();
	cr_assert_eq(post(pr, &answer, err, sizeof(err)), -1);
	took = now_ms() - t0;
	cr_assert_null(answer);
	cr_assert(strstr(err, "no answer within 2000 ms"), "%s", err);
	cr_assert_geq(took, (long long)PEER_TIMEOUT_MS - 50, "%lld ms", took);
	cr_assert_lt(took, (long long)PEER_TIMEOUT_MS + 1000, "%lld ms", took);
	peer_free(pr);
}

Test(peer_post, no_keys_no_address_nothing_sent)
{
	struct peer *pr = peer_new();
	json_t *body = ask(), *answer = (json_t *)1;
	char err[512];

	snprintf(address, sizeof(address), "127.0.0.1:%d", S.port);
	cr_assert_eq(peer_post(pr, address, body, &answer, err, sizeof(err)), -1);
	cr_assert_null(answer);
	cr_assert(strstr(err, "no key"), "%s", err);
	peer_set_keys(pr, "sha256//x", "t");
	cr_assert_eq(peer_post(pr, "", body, &answer, err, sizeof(err)), -1);
	cr_assert(strstr(err, "not a host:port"), "%s", err);
	cr_assert_eq(peer_post(pr, "10.0.0.1:8443/x", body, &answer, err, sizeof(err)), -1);
	cr_assert_eq(peer_post(pr, NULL, body, &answer, err, sizeof(err)), -1);
	cr_assert_eq(accepted(), 0);
	json_decref(body);
	peer_free(pr);
	peer_free(NULL);
}

Test(peer_post, sequential_calls_keep_one_connection_until_something_changes)
{
	struct peer *pr = peer_with(S.dir_a);
	char pin[PEER_PIN_MAX + 1], token[PEER_TOKEN_LEN + 1], err[512], other[64];
	json_t *answer;

	set_mode(OK);
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(post(pr, &answer, err, sizeof(err)), 0, "%s", err);
		json_decref(answer);
	}
	cr_assert_eq(accepted(), 1);
	cr_assert_eq(S.requests, 3);

	/* The same keys again: nothing changes. */
	pin_of(S.dir_a, pin);
	token_of(S.dir_a, token);
	peer_set_keys(pr, pin, token);
	cr_assert_eq(post(pr, &answer, err, sizeof(err)), 0, "%s", err);
	json_decref(answer);
	cr_assert_eq(accepted(), 1);

	/* New keys (here, the same pin with the token set again after
	 * another): the pool is emptied. */
	peer_set_keys(pr, pin, "other");
	peer_set_keys(pr, pin, token);
	cr_assert_eq(post(pr, &answer, err, sizeof(err)), 0, "%s", err);
	json_decref(answer);
	cr_assert_eq(accepted(), 2);

	/* Another address (the same server by another name): a new
	 * connection, and the old one's client is not kept. */
	snprintf(other, sizeof(other), "%s", address);
	snprintf(address, sizeof(address), "localhost:%d", S.port);
	cr_assert_eq(post(pr, &answer, err, sizeof(err)), 0, "%s", err);
	json_decref(answer);
	cr_assert_eq(accepted(), 3);
	snprintf(address, sizeof(address), "%s", other);
	cr_assert_eq(post(pr, &answer, err, sizeof(err)), 0, "%s", err);
	json_decref(answer);
	cr_assert_eq(accepted(), 4);
	peer_free(pr);
}

struct worker {
	struct peer *pr;
	int ok;
	char err[512];
};

static void *hammer(void *arg)
{
	struct worker *w = arg;

	for (int i = 0; i < 10; i++) {
		json_t *body = json_pack("{s:i}", "i", i), *answer = NULL;

		if (peer_post(w->pr, address, body, &answer, w->err, sizeof(w->err)) == 0 &&
		    json_equal(json_object_get(answer, "got"), body))
			w->ok++;
		json_decref(answer);
		json_decref(body);
	}
	return NULL;
}

Test(peer_post, four_threads_at_once_all_get_their_answers)
{
	struct peer *pr = peer_with(S.dir_a);
	struct worker w[4];
	pthread_t t[4];

	set_mode(OK);
	for (int i = 0; i < 4; i++) {
		w[i] = (struct worker){.pr = pr};
		cr_assert_eq(pthread_create(&t[i], NULL, hammer, &w[i]), 0);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < 4; i++)
		cr_assert_eq(w[i].ok, 10, "thread %d: %d ok, last error: %s", i, w[i].ok,
			     w[i].err);
	/* Never more connections than calls at once. */
	cr_assert_leq(accepted(), 4);
	cr_assert_eq(S.requests, 40);
	peer_free(pr);
}
