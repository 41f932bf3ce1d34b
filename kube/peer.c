/*
 * peer: one replica asking another over HTTPS (kube/peer.h).
 *
 * The pool: struct kube clients (each keeps its connection), all made for
 * one address with one pin and token.  A call takes one (or makes one,
 * outside the lock: a TLS handshake must not hold up the other calls) and
 * gives it back when its call succeeded and nothing changed meanwhile; a
 * client whose call failed is freed (its connection may be dead, or the
 * server may be an impostor the pin refused).  A new address or new keys
 * bump the generation and empty the pool: a client made before goes when
 * it comes back.
 */
#include "kube/peer.h"

#include "codec/jsonmem.h"

#include "base/base64.h"
#include "base/diag.h"
#include "base/strbuf.h"
#include "certs/certs.h"
#include "kube/client.h"
#include "kube/config.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Clients kept between calls; more run at once when needed, and the
 * extra ones are freed after their call. */
#define POOL_MAX 16
/* "host:port", a bracketed IPv6 host included. */
#define ADDRESS_MAX 300
/* The leader's answers are small (one quota result). */
#define ANSWER_MAX (64u << 10)

static const char token_prefix[] = "gpugate-peer-v1\n";

int peer_token(const char *key_pem, size_t len, char token[PEER_TOKEN_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char md[CERTS_SHA256_LEN];

	token[0] = '\0';
	if (!key_pem || len == 0)
		return -1;
	if (certs_sha256(token_prefix, sizeof(token_prefix) - 1, key_pem, len, md) < 0)
		return -1;
	for (size_t i = 0; i < CERTS_SHA256_LEN; i++) {
		token[2 * i] = hex[md[i] >> 4];
		token[2 * i + 1] = hex[md[i] & 15];
	}
	token[PEER_TOKEN_LEN] = '\0';
	memset(md, 0, sizeof(md));
	return 0;
}

int peer_pin(const char *cert_pem, size_t len, char pin[PEER_PIN_MAX + 1],
	     struct diag *d)
{
	unsigned char md[CERTS_SHA256_LEN];
	struct strbuf sb;
	int rc = -1;

	pin[0] = '\0';
	if (!cert_pem || len == 0) {
		diag_addf(d, "peer certificate: empty");
		return -1;
	}
	if (certs_spki_sha256("peer certificate", cert_pem, len, md, d) < 0)
		return -1;
	strbuf_init(&sb, PEER_PIN_MAX);
	strbuf_add(&sb, "sha256//", 8);
	base64_encode(&sb, md, sizeof(md));
	if (strbuf_failed(&sb)) {
		diag_addf(d, "peer certificate: out of memory");
	} else {
		memcpy(pin, sb.buf, sb.len + 1);
		rc = 0;
	}
	strbuf_release(&sb);
	return rc;
}

bool peer_authorized(const char *header, const char *token)
{
	static const char scheme[] = "Bearer ";
	size_t tl, vl;
	const char *v;
	unsigned char diff;

	if (!header || !token || !token[0] ||
	    strncmp(header, scheme, sizeof(scheme) - 1) != 0)
		return false;
	v = header + sizeof(scheme) - 1;
	tl = strlen(token);
	/* Never read past the header's end, and look at every byte of the
	 * token whatever the header holds: the time says nothing about where
	 * they differ. */
	vl = strnlen(v, tl + 1);
	diff = vl != tl;
	for (size_t i = 0; i < tl; i++)
		diff |= (unsigned char)((i < vl ? v[i] : 0) ^ token[i]);
	return diff == 0;
}

/* ---- the pool ----------------------------------------------------------- */

struct peer {
	pthread_mutex_t mu;
	char *pin;           /* NULL: no keys yet */
	char *token;
	char address[ADDRESS_MAX + 1]; /* what the pooled clients were made for */
	uint64_t generation; /* bumped when address or keys change */
	struct kube *pool[POOL_MAX];
	size_t n;
};

struct peer *peer_new(void)
{
	struct peer *pr = calloc(1, sizeof(*pr));

	if (!pr)
		return NULL;
	pthread_mutex_init(&pr->mu, NULL);
	return pr;
}

/* Moves the pooled clients into out (POOL_MAX), under mu; the caller frees
 * them after unlocking. */
static size_t pool_take_all(struct peer *pr, struct kube **out)
{
	size_t n = pr->n;

	memcpy(out, pr->pool, n * sizeof(*out));
	pr->n = 0;
	pr->generation++;
	return n;
}

static void free_all(struct kube **k, size_t n)
{
	for (size_t i = 0; i < n; i++)
		kube_free(k[i]);
}

static bool same(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static void free_secret(char *s)
{
	if (!s)
		return;
	memset(s, 0, strlen(s));
	free(s);
}

void peer_set_keys(struct peer *pr, const char *pin, const char *token)
{
	struct kube *old[POOL_MAX];
	char *p = pin ? strdup(pin) : NULL, *t = token ? strdup(token) : NULL;
	size_t n = 0;

	if ((pin && !p) || (token && !t)) {
		/* Out of memory: no keys rather than the old ones, so that no
		 * call goes out with what was replaced. */
		free(p);
		free_secret(t);
		p = t = NULL;
	}
	pthread_mutex_lock(&pr->mu);
	if (same(pr->pin, p) && same(pr->token, t)) {
		pthread_mutex_unlock(&pr->mu);
		free(p);
		free_secret(t);
		return;
	}
	n = pool_take_all(pr, old);
	free(pr->pin);
	free_secret(pr->token);
	pr->pin = p;
	pr->token = t;
	pthread_mutex_unlock(&pr->mu);
	free_all(old, n);
}

void peer_free(struct peer *pr)
{
	if (!pr)
		return;
	free_all(pr->pool, pr->n);
	free(pr->pin);
	free_secret(pr->token);
	pthread_mutex_destroy(&pr->mu);
	free(pr);
}

/* A client for address, from the pool or new; NULL with err set. */
static struct kube *client_take(struct peer *pr, const char *address,
				uint64_t *generation, char *err, size_t size)
{
	struct kube *old[POOL_MAX], *k = NULL;
	struct kube_config cfg = {0};
	char server[ADDRESS_MAX + 16];
	size_t n = 0;
	struct diag d;

	pthread_mutex_lock(&pr->mu);
	if (!pr->pin || !pr->token) {
		pthread_mutex_unlock(&pr->mu);
		snprintf(err, size, "peer %s: no key to reach it with yet", address);
		return NULL;
	}
	if (strcmp(pr->address, address) != 0) {
		n = pool_take_all(pr, old);
		snprintf(pr->address, sizeof(pr->address), "%s", address);
	}
	*generation = pr->generation;
	if (pr->n > 0) {
		k = pr->pool[--pr->n];
	} else {
		cfg.pinned_pubkey = strdup(pr->pin);
		cfg.token = strdup(pr->token);
	}
	pthread_mutex_unlock(&pr->mu);
	free_all(old, n);
	if (k)
		return k;

	snprintf(server, sizeof(server), "https://%s", address);
	cfg.server = server;
	cfg.source = (char *)"peer";
	diag_init(&d);
	if (cfg.pinned_pubkey && cfg.token)
		k = kube_new(&cfg, &d);
	free(cfg.pinned_pubkey);
	free_secret(cfg.token);
	if (!k)
		snprintf(err, size, "peer %s: out of memory", address);
	return k;
}

/* Gives k back after a call that succeeded, or frees it. */
static void client_give(struct peer *pr, struct kube *k, const char *address,
			uint64_t generation, bool ok)
{
	pthread_mutex_lock(&pr->mu);
	if (ok && generation == pr->generation &&
	    strcmp(pr->address, address) == 0 && pr->n < POOL_MAX) {
		pr->pool[pr->n++] = k;
		k = NULL;
	}
	pthread_mutex_unlock(&pr->mu);
	kube_free(k);
}

static bool address_ok(const char *a)
{
	size_t n;

	if (!a || !a[0])
		return false;
	n = strlen(a);
	if (n > ADDRESS_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)a[i] <= ' ' || a[i] == '/' || a[i] == '?' ||
		    a[i] == '#' || a[i] == '@' || a[i] == '\\' || a[i] == 0x7f)
			return false;
	return true;
}

/* The first line of an error answer, at most 200 bytes. */
static void answer_excerpt(const struct kube_response *r, char *out, size_t size)
{
	size_t n = 0;

	if (r->body)
		n = strcspn(r->body, "\r\n");
	if (n > 200)
		n = 200;
	snprintf(out, size, "%.*s", (int)n, r->body ? r->body : "");
}

int peer_post(struct peer *pr, const char *address, const json_t *body,
	      json_t **answer, char *err, size_t size)
{
	struct kube_response resp;
	struct kube_request req = {.method = "POST", .path = PEER_DECIDE_PATH,
				   .max_body = ANSWER_MAX,
				   .timeout_ms = PEER_TIMEOUT_MS};
	uint64_t generation = 0;
	json_error_t jerr;
	struct kube *k;
	struct diag d;
	char *text;
	int rc;

	*answer = NULL;
	if (!address_ok(address)) {
		snprintf(err, size, "peer \"%.*s\": not a host:port", 80,
			 address ? address : "");
		return -1;
	}
	text = json_dumps(body, JSON_COMPACT);
	if (!text) {
		snprintf(err, size, "peer %s: out of memory", address);
		return -1;
	}
	k = client_take(pr, address, &generation, err, size);
	if (!k) {
		jsonmem_free(text);
		return -1;
	}
	req.body = text;
	req.body_len = strlen(text);
	diag_init(&d);
	rc = kube_request(k, &req, &resp, &d);
	jsonmem_free(text); /* jansson's: from the request's arena, maybe */
	if (rc < 0) {
		char line[400];

		diag_first(&d, line, sizeof(line));
		snprintf(err, size, "peer %s: %s", address, line);
	} else if (resp.status != 200) {
		char excerpt[256];

		answer_excerpt(&resp, excerpt, sizeof(excerpt));
		snprintf(err, size, "peer %s answered %ld%s%s", address, resp.status,
			 excerpt[0] ? ": " : "", excerpt);
		rc = -1;
	} else {
		*answer = json_loadb(resp.body, resp.len, JSON_REJECT_DUPLICATES, &jerr);
		if (!*answer) {
			snprintf(err, size, "peer %s answered 200 but not JSON: %s",
				 address, jerr.text);
			rc = -1;
		}
	}
	client_give(pr, k, address, generation, *answer != NULL);
	kube_response_release(&resp);
	return *answer ? 0 : -1;
}
