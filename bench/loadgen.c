/*
 * loadgen: a small HTTPS/1.1 keep-alive load generator for gpugate's
 * benchmarks (bench/run.sh).  OpenSSL, one thread, non-blocking sockets.
 *
 *   loadgen --url https://127.0.0.1:PORT/PATH --body FILE [options]
 *
 * Two modes:
 *
 *   open loop (--rate R): request i is *scheduled* at t0 + i/R whatever
 *     happens to the ones before it, and sent on the first idle connection
 *     (if none is idle it waits in a queue).  Latency is measured from the
 *     scheduled time to the last byte of the response, so a stalled server
 *     is charged for every request that should have been sent while it
 *     stalled (no coordinated omission, as in wrk2).  The time from the
 *     schedule to the actual write ("send lag") is reported separately: it
 *     shows whether the generator itself kept up.
 *
 *   closed loop (no --rate): every connection sends its next request as
 *     soon as the previous answer is in, until --count requests were
 *     answered or --duration passed.  With --conns 1 this is "one request
 *     at a time", e.g. sequential Pod creates against the kube-apiserver.
 *
 * Options:
 *   --conns N        keep-alive TLS connections, opened before timing (1)
 *   --rate R         open loop at R requests/s
 *   --duration S     measured seconds (open loop: required)
 *   --warmup S       seconds of load before measuring (not recorded)
 *   --count N        closed loop: stop after N answers
 *   --ca FILE        verify the server against this CA (else no check)
 *   --cert F --key F client certificate (kube-apiserver admin)
 *   --tls13          TLS 1.3 only (default: 1.2 or 1.3)
 *   --vary STRING    every occurrence of STRING in the body gets, per
 *                    request, its last 12 characters replaced by the
 *                    request number in lower-case hex: distinct uids or
 *                    names with the same length
 *   --vary-start N   first request number for --vary (default 0)
 *   --expect CODE    the status that counts as success (200)
 *   --content-type T (default application/json)
 *   --latencies FILE write every measured latency (microseconds, one a line)
 *
 * Output: one line of key=value pairs on stdout, latencies in microseconds:
 *   ok= errors= bad_status= elapsed_s= rps= mean_us= p50_us= p90_us=
 *   p99_us= p999_us= max_us= lag_p99_us= lag_max_us= svc_p50_us=
 *   svc_p99_us= svc_p999_us= tls= cipher=
 * (svc_*: service time, from the actual write to the answer; in closed
 * loop it equals the latency)
 * Exit status: 0 when every measured request got --expect, 1 otherwise,
 * 2 on a usage error or when it could not connect.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define VARY_MAX 16
#define VARY_DIGITS 12

struct conn {
	int fd;
	SSL *ssl;
	char *req;        /* this connection's copy of the request */
	size_t req_len;
	size_t sent;      /* bytes of req written (only 0 or req_len with SSL) */
	bool busy;        /* a request is outstanding */
	bool writing;     /* SSL_write wants to be retried */
	uint64_t sched;   /* scheduled send time of the outstanding request */
	uint64_t started; /* actual send time */
	bool measured;
	char *rbuf;
	size_t rlen, rcap;
};

static struct {
	const char *host, *path, *ca, *cert, *key, *body_file, *vary, *lat_file;
	const char *ctype;
	char port[8];
	unsigned conns;
	double rate, duration, warmup;
	uint64_t count, vary_next;
	int expect;
	bool tls13;
} opt = {.conns = 1, .expect = 200, .ctype = "application/json"};

static SSL_CTX *ctx;
static char *base_req;
static size_t base_len;
static size_t vary_pos[VARY_MAX];
static size_t n_vary;

static uint64_t *lat, *lag;
static size_t n_lat, cap_lat, n_lag;
static uint64_t n_ok, n_err, n_bad;
static int first_bad_status;
static char first_bad_body[300];

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *fmt, const char *a)
{
	fprintf(stderr, "loadgen: ");
	fprintf(stderr, fmt, a);
	fprintf(stderr, "\n");
	ERR_print_errors_fp(stderr);
	exit(2);
}

static void record(uint64_t l, uint64_t g)
{
	if (n_lat == cap_lat) {
		cap_lat = cap_lat ? cap_lat * 2 : 65536;
		lat = realloc(lat, cap_lat * sizeof(*lat));
		lag = realloc(lag, cap_lat * sizeof(*lag));
		if (!lat || !lag)
			die("%s", "out of memory");
	}
	lat[n_lat++] = l;
	lag[n_lag++] = g;
}

static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	if (!f)
		die("cannot open %s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n)
		die("cannot read %s", path);
	fclose(f);
	buf[n] = '\0';
	*len = (size_t)n;
	return buf;
}

static void parse_url(const char *url)
{
	static char host[256];
	const char *p, *slash, *colon;
	size_t n;

	if (strncmp(url, "https://", 8) != 0)
		die("--url must start with https:// (got %s)", url);
	p = url + 8;
	slash = strchr(p, '/');
	opt.path = slash ? slash : "/";
	n = slash ? (size_t)(slash - p) : strlen(p);
	colon = memchr(p, ':', n);
	if (!colon || (size_t)(colon - p) >= sizeof(host) ||
	    (size_t)(p + n - colon - 1) >= sizeof(opt.port))
		die("--url needs an explicit port (got %s)", url);
	memcpy(host, p, (size_t)(colon - p));
	host[colon - p] = '\0';
	memcpy(opt.port, colon + 1, (size_t)(p + n - colon - 1));
	opt.port[p + n - colon - 1] = '\0';
	opt.host = host;
}

static void build_request(void)
{
	size_t blen, hlen;
	char *body = read_file(opt.body_file, &blen);
	char head[1024];

	hlen = (size_t)snprintf(head, sizeof(head),
				"POST %s HTTP/1.1\r\nHost: %s:%s\r\n"
				"User-Agent: gpugate-bench-loadgen\r\n"
				"Accept: application/json, */*\r\n"
				"Content-Type: %s\r\nContent-Length: %zu\r\n\r\n",
				opt.path, opt.host, opt.port, opt.ctype, blen);
	base_len = hlen + blen;
	base_req = malloc(base_len);
	if (!base_req)
		die("%s", "out of memory");
	memcpy(base_req, head, hlen);
	memcpy(base_req + hlen, body, blen);
	free(body);
	if (opt.vary) {
		size_t vl = strlen(opt.vary);

		if (vl < VARY_DIGITS)
			die("--vary %s: needs at least 12 characters", opt.vary);
		for (char *s = base_req + hlen;
		     (s = memmem(s, (size_t)(base_req + base_len - s), opt.vary, vl));
		     s += vl) {
			if (n_vary == VARY_MAX)
				die("--vary %s: too many occurrences", opt.vary);
			vary_pos[n_vary++] = (size_t)(s - base_req) + vl - VARY_DIGITS;
		}
		if (!n_vary)
			die("--vary %s: not found in the body", opt.vary);
	}
}

static void apply_vary(struct conn *c)
{
	char digits[VARY_DIGITS + 1];

	if (!n_vary)
		return;
	snprintf(digits, sizeof(digits), "%012llx",
		 (unsigned long long)(opt.vary_next++ & 0xffffffffffffull));
	for (size_t i = 0; i < n_vary; i++)
		memcpy(c->req + vary_pos[i], digits, VARY_DIGITS);
}

static void conn_open(struct conn *c)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
	struct addrinfo *ai;
	int one = 1, rc;
	struct in6_addr a6;
	struct in_addr a4;
	bool is_ip = inet_pton(AF_INET, opt.host, &a4) == 1 ||
		     inet_pton(AF_INET6, opt.host, &a6) == 1;

	if ((rc = getaddrinfo(opt.host, opt.port, &hints, &ai)) != 0)
		die("cannot resolve %s", opt.host);
	c->fd = socket(ai->ai_family, SOCK_STREAM, 0);
	if (c->fd < 0 || connect(c->fd, ai->ai_addr, ai->ai_addrlen) < 0)
		die("cannot connect to %s", opt.host);
	freeaddrinfo(ai);
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->ssl = SSL_new(ctx);
	SSL_set_fd(c->ssl, c->fd);
	if (!is_ip)
		SSL_set_tlsext_host_name(c->ssl, opt.host);
	if (opt.ca) {
		X509_VERIFY_PARAM *vp = SSL_get0_param(c->ssl);

		if (is_ip)
			X509_VERIFY_PARAM_set1_ip_asc(vp, opt.host);
		else
			X509_VERIFY_PARAM_set1_host(vp, opt.host, 0);
	}
	if (SSL_connect(c->ssl) != 1)
		die("TLS handshake with %s failed", opt.host);
	fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
	c->req = malloc(base_len);
	memcpy(c->req, base_req, base_len);
	c->req_len = base_len;
	c->rcap = 16384;
	c->rbuf = malloc(c->rcap);
	c->rlen = 0;
	c->busy = c->writing = false;
}

static void conn_close(struct conn *c)
{
	if (c->ssl) {
		SSL_free(c->ssl);
		c->ssl = NULL;
	}
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	free(c->req);
	free(c->rbuf);
	c->req = c->rbuf = NULL;
}

/* Tries to write the outstanding request; false on a dead connection. */
static bool conn_write(struct conn *c)
{
	int n = SSL_write(c->ssl, c->req, (int)c->req_len);

	if (n > 0) {
		c->writing = false;
		c->sent = c->req_len;
		return true;
	}
	switch (SSL_get_error(c->ssl, n)) {
	case SSL_ERROR_WANT_WRITE:
	case SSL_ERROR_WANT_READ:
		c->writing = true;
		return true;
	default:
		return false;
	}
}

static void conn_send(struct conn *c, uint64_t sched, bool measured)
{
	apply_vary(c);
	c->busy = true;
	c->sched = sched;
	c->started = now_ns();
	c->measured = measured;
	c->rlen = 0;
	c->sent = 0;
	if (!conn_write(c)) {
		n_err++;
		c->busy = false;
		conn_close(c);
	}
}

/* A complete response in rbuf?  Returns its length, 0 if not yet, -1 if
 * malformed.  *status gets the status code. */
static long response_complete(struct conn *c, int *status)
{
	char *end = memmem(c->rbuf, c->rlen, "\r\n\r\n", 4);
	size_t hlen;
	char *p, *line;
	long clen = -1;
	bool chunked = false;

	if (!end)
		return 0;
	hlen = (size_t)(end - c->rbuf) + 4;
	if (c->rlen < 12 || strncmp(c->rbuf, "HTTP/1.", 7) != 0)
		return -1;
	*status = atoi(c->rbuf + 9);
	for (line = memchr(c->rbuf, '\n', hlen); line && line < end;
	     line = memchr(line + 1, '\n', (size_t)(end - line))) {
		p = line + 1;
		if (strncasecmp(p, "Content-Length:", 15) == 0)
			clen = strtol(p + 15, NULL, 10);
		else if (strncasecmp(p, "Transfer-Encoding:", 18) == 0 &&
			 memmem(p, (size_t)(end - p), "chunked", 7))
			chunked = true;
	}
	if (!chunked) {
		if (clen < 0)
			clen = 0;
		return c->rlen >= hlen + (size_t)clen ? (long)(hlen + (size_t)clen) : 0;
	}
	/* chunked: walk the chunks */
	p = c->rbuf + hlen;
	for (;;) {
		char *nl = memmem(p, (size_t)(c->rbuf + c->rlen - p), "\r\n", 2);
		long sz;

		if (!nl)
			return 0;
		sz = strtol(p, NULL, 16);
		p = nl + 2;
		if (sz == 0) {
			/* no trailers: the final CRLF */
			if ((size_t)(c->rbuf + c->rlen - p) < 2)
				return 0;
			return (long)(p + 2 - c->rbuf);
		}
		if ((size_t)(c->rbuf + c->rlen - p) < (size_t)sz + 2)
			return 0;
		p += sz + 2;
	}
}

/* Reads what is there; true if the connection is still usable. */
static bool conn_read(struct conn *c, uint64_t t_measure_start)
{
	for (;;) {
		int n, status = 0;
		long done;

		if (c->rcap - c->rlen < 4096) {
			c->rcap *= 2;
			c->rbuf = realloc(c->rbuf, c->rcap);
			if (!c->rbuf)
				die("%s", "out of memory");
		}
		n = SSL_read(c->ssl, c->rbuf + c->rlen, (int)(c->rcap - c->rlen));
		if (n <= 0) {
			int e = SSL_get_error(c->ssl, n);

			if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
				return true;
			return false;
		}
		c->rlen += (size_t)n;
		if (!c->busy)
			continue; /* unsolicited bytes: ignored */
		done = response_complete(c, &status);
		if (done < 0)
			return false;
		if (done == 0)
			continue;
		{
			uint64_t t = now_ns();

			if (c->measured && c->sched >= t_measure_start) {
				if (status == opt.expect) {
					n_ok++;
					record(t - c->sched, c->started - c->sched);
				} else {
					if (!n_bad) {
						char *b = memmem(c->rbuf, (size_t)done, "\r\n\r\n", 4);
						size_t bl = b ? (size_t)(c->rbuf + done - b - 4) : 0;

						first_bad_status = status;
						if (bl >= sizeof(first_bad_body))
							bl = sizeof(first_bad_body) - 1;
						if (b)
							memcpy(first_bad_body, b + 4, bl);
						first_bad_body[bl] = '\0';
					}
					n_bad++;
				}
			}
		}
		memmove(c->rbuf, c->rbuf + done, c->rlen - (size_t)done);
		c->rlen -= (size_t)done;
		c->busy = false;
		return true;
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static double pct(const uint64_t *v, size_t n, double p)
{
	size_t i;

	if (!n)
		return 0;
	i = (size_t)ceil(p / 100.0 * (double)n);
	if (i > 0)
		i--;
	if (i >= n)
		i = n - 1;
	return (double)v[i] / 1000.0;
}

static void usage(void)
{
	fputs("usage: loadgen --url https://HOST:PORT/PATH --body FILE [--conns N]\n"
	      "               [--rate R --duration S | --count N | --duration S]\n"
	      "               [--warmup S] [--ca F] [--cert F --key F] [--tls13]\n"
	      "               [--vary STRING] [--vary-start N] [--expect CODE]\n"
	      "               [--content-type T] [--latencies FILE]\n",
	      stderr);
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{"url", 1, 0, 'u'},      {"body", 1, 0, 'b'},    {"conns", 1, 0, 'c'},
		{"rate", 1, 0, 'r'},     {"duration", 1, 0, 'd'}, {"warmup", 1, 0, 'w'},
		{"count", 1, 0, 'n'},    {"ca", 1, 0, 'A'},      {"cert", 1, 0, 'C'},
		{"key", 1, 0, 'K'},      {"tls13", 0, 0, '3'},   {"vary", 1, 0, 'v'},
		{"vary-start", 1, 0, 'V'}, {"expect", 1, 0, 'e'}, {"content-type", 1, 0, 't'},
		{"latencies", 1, 0, 'L'}, {0, 0, 0, 0}};
	struct conn *cs;
	struct pollfd *pfd;
	uint64_t t0, t_meas, t_end, interval = 0, next_sched, *queue;
	size_t q_head = 0, q_tail = 0, q_cap;
	uint64_t issued = 0, alive;
	unsigned rr = 0;
	int o;
	const char *url = NULL;

	while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (o) {
		case 'u': url = optarg; break;
		case 'b': opt.body_file = optarg; break;
		case 'c': opt.conns = (unsigned)atoi(optarg); break;
		case 'r': opt.rate = atof(optarg); break;
		case 'd': opt.duration = atof(optarg); break;
		case 'w': opt.warmup = atof(optarg); break;
		case 'n': opt.count = strtoull(optarg, NULL, 10); break;
		case 'A': opt.ca = optarg; break;
		case 'C': opt.cert = optarg; break;
		case 'K': opt.key = optarg; break;
		case '3': opt.tls13 = true; break;
		case 'v': opt.vary = optarg; break;
		case 'V': opt.vary_next = strtoull(optarg, NULL, 10); break;
		case 'e': opt.expect = atoi(optarg); break;
		case 't': opt.ctype = optarg; break;
		case 'L': opt.lat_file = optarg; break;
		default: usage();
		}
	}
	if (!url || !opt.body_file || opt.conns < 1 || opt.conns > 1024)
		usage();
	if (opt.rate > 0 && opt.duration <= 0)
		usage();
	if (opt.rate <= 0 && !opt.count && opt.duration <= 0)
		usage();
	parse_url(url);
	build_request();
	signal(SIGPIPE, SIG_IGN);
	/* Wake-ups on time: the default 50 us timer slack would show up as
	 * send lag at high rates. */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);

	ctx = SSL_CTX_new(TLS_client_method());
	if (!ctx)
		die("%s", "SSL_CTX_new failed");
	if (opt.tls13)
		SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
	else
		SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	if (opt.ca) {
		if (SSL_CTX_load_verify_locations(ctx, opt.ca, NULL) != 1)
			die("cannot load CA %s", opt.ca);
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	}
	if (opt.cert) {
		if (SSL_CTX_use_certificate_chain_file(ctx, opt.cert) != 1 ||
		    SSL_CTX_use_PrivateKey_file(ctx, opt.key, SSL_FILETYPE_PEM) != 1)
			die("cannot load the client certificate %s", opt.cert);
	}

	cs = calloc(opt.conns, sizeof(*cs));
	pfd = calloc(opt.conns, sizeof(*pfd));
	for (unsigned i = 0; i < opt.conns; i++)
		conn_open(&cs[i]);
	alive = opt.conns;

	q_cap = 1 << 20;
	queue = malloc(q_cap * sizeof(*queue));
	t0 = now_ns();
	t_meas = t0 + (uint64_t)(opt.warmup * 1e9);
	t_end = opt.duration > 0 ? t_meas + (uint64_t)(opt.duration * 1e9) : UINT64_MAX;
	if (opt.rate > 0)
		interval = (uint64_t)(1e9 / opt.rate);
	next_sched = t0;

	for (;;) {
		uint64_t now = now_ns();
		bool outstanding = false;
		int timeout_ns = -1;
		struct timespec ts, *tsp = NULL;
		unsigned idle_seen;

		/* 1. what is due */
		if (opt.rate > 0) {
			while (next_sched <= now && next_sched < t_end) {
				if ((q_tail + 1) % q_cap == q_head)
					die("%s", "request queue overflow: the server is far "
						  "slower than --rate");
				queue[q_tail] = next_sched;
				q_tail = (q_tail + 1) % q_cap;
				next_sched += interval;
			}
		}
		/* 2. hand it to idle connections, round robin */
		idle_seen = 0;
		while (idle_seen < opt.conns) {
			struct conn *c = &cs[rr];

			rr = (rr + 1) % opt.conns;
			if (c->fd < 0 || c->busy) {
				idle_seen++;
				continue;
			}
			if (opt.rate > 0) {
				if (q_head == q_tail)
					break;
				conn_send(c, queue[q_head], true);
				q_head = (q_head + 1) % q_cap;
			} else {
				bool more = opt.count ? issued < opt.count + 0 : now < t_end;

				if (!more)
					break;
				/* closed loop: warm-up requests are sent but not kept */
				conn_send(c, now, now >= t_meas);
				issued += now >= t_meas;
			}
			idle_seen = 0;
		}
		/* 3. done? */
		for (unsigned i = 0; i < opt.conns; i++)
			outstanding |= cs[i].fd >= 0 && cs[i].busy;
		alive = 0;
		for (unsigned i = 0; i < opt.conns; i++)
			alive += cs[i].fd >= 0;
		if (!alive) {
			fprintf(stderr, "loadgen: every connection was closed by the "
					"server\n");
			break;
		}
		if (!outstanding) {
			if (opt.rate > 0 && next_sched >= t_end && q_head == q_tail)
				break;
			if (opt.rate <= 0 &&
			    (opt.count ? issued >= opt.count : now_ns() >= t_end))
				break;
		}
		/* 4. wait for answers or the next schedule */
		for (unsigned i = 0; i < opt.conns; i++) {
			pfd[i].fd = cs[i].fd;
			pfd[i].events = POLLIN | (cs[i].writing ? POLLOUT : 0);
			pfd[i].revents = 0;
			/* bytes already decrypted inside OpenSSL */
			if (cs[i].fd >= 0 && SSL_pending(cs[i].ssl) > 0)
				timeout_ns = 0;
		}
		if (opt.rate > 0 && next_sched < t_end && timeout_ns != 0) {
			now = now_ns();
			timeout_ns = next_sched > now ? (int)(next_sched - now) : 0;
		}
		if (timeout_ns >= 0) {
			ts.tv_sec = timeout_ns / 1000000000;
			ts.tv_nsec = timeout_ns % 1000000000;
			tsp = &ts;
		} else if (opt.rate <= 0 && !opt.count) {
			ts.tv_sec = 0;
			ts.tv_nsec = 10000000;
			tsp = &ts;
		}
		if (ppoll(pfd, opt.conns, tsp, NULL) < 0 && errno != EINTR)
			die("%s", "poll failed");
		for (unsigned i = 0; i < opt.conns; i++) {
			struct conn *c = &cs[i];

			if (c->fd < 0)
				continue;
			if (c->writing && (pfd[i].revents & (POLLOUT | POLLIN)) &&
			    !conn_write(c))
				goto dead;
			if ((pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) ||
			    SSL_pending(c->ssl) > 0) {
				if (!conn_read(c, t_meas))
					goto dead;
			}
			continue;
dead:
			if (c->busy && c->measured && c->sched >= t_meas)
				n_err++;
			c->busy = false;
			conn_close(c);
		}
	}

	{
		uint64_t t_stop = now_ns();
		double elapsed = (double)(t_stop - (t_meas > t0 ? t_meas : t0)) / 1e9;
		double sum = 0;
		const char *ver = "-", *cipher = "-";
		uint64_t *svc;

		if (opt.duration > 0 && opt.rate > 0)
			elapsed = opt.duration;
		for (unsigned i = 0; i < opt.conns; i++)
			if (cs[i].ssl) {
				ver = SSL_get_version(cs[i].ssl);
				cipher = SSL_CIPHER_get_name(SSL_get_current_cipher(cs[i].ssl));
				break;
			}
		if (opt.lat_file) {
			FILE *f = fopen(opt.lat_file, "w");

			for (size_t i = 0; f && i < n_lat; i++)
				fprintf(f, "%.1f\n", (double)lat[i] / 1000.0);
			if (f)
				fclose(f);
		}
		for (size_t i = 0; i < n_lat; i++)
			sum += (double)lat[i];
		/* service time: from the actual write to the answer */
		svc = malloc((n_lat ? n_lat : 1) * sizeof(*svc));
		if (!svc)
			die("%s", "out of memory");
		for (size_t i = 0; i < n_lat; i++)
			svc[i] = lat[i] - lag[i];
		qsort(lat, n_lat, sizeof(*lat), cmp_u64);
		qsort(lag, n_lag, sizeof(*lag), cmp_u64);
		qsort(svc, n_lat, sizeof(*svc), cmp_u64);
		printf("ok=%llu errors=%llu bad_status=%llu elapsed_s=%.3f rps=%.1f "
		       "mean_us=%.1f p50_us=%.1f p90_us=%.1f p99_us=%.1f p999_us=%.1f "
		       "max_us=%.1f lag_p99_us=%.1f lag_max_us=%.1f svc_p50_us=%.1f "
		       "svc_p99_us=%.1f svc_p999_us=%.1f tls=%s cipher=%s\n",
		       (unsigned long long)n_ok, (unsigned long long)n_err,
		       (unsigned long long)n_bad, elapsed,
		       elapsed > 0 ? (double)n_ok / elapsed : 0,
		       n_lat ? sum / (double)n_lat / 1000.0 : 0, pct(lat, n_lat, 50),
		       pct(lat, n_lat, 90), pct(lat, n_lat, 99), pct(lat, n_lat, 99.9),
		       n_lat ? (double)lat[n_lat - 1] / 1000.0 : 0, pct(lag, n_lag, 99),
		       n_lag ? (double)lag[n_lag - 1] / 1000.0 : 0, pct(svc, n_lat, 50),
		       pct(svc, n_lat, 99), pct(svc, n_lat, 99.9), ver, cipher);
		if (n_bad)
			fprintf(stderr, "loadgen: %llu answers with status other than %d; "
					"first: %d %s\n",
				(unsigned long long)n_bad, opt.expect, first_bad_status,
				first_bad_body);
		for (unsigned i = 0; i < opt.conns; i++)
			conn_close(&cs[i]);
		return n_bad || n_err ? 1 : 0;
	}
}
