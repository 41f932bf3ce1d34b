/*
 * peer: one replica asking another over HTTPS (issue #32): a follower
 * sends the quota part of /validate to the replica that leads
 * (usage/leader-backend.h), POST /peer/decide on the leader's webhook
 * port, with usage/leader-wire.h's JSON.
 *
 * Who may talk to whom: every replica serves the same certificate and key
 * (the chart's Secret).  So
 *   - the follower pins the leader's public key to its own certificate's
 *     (libcurl CURLOPT_PINNEDPUBLICKEY, sha256 of the SubjectPublicKeyInfo):
 *     a pod address carries no name to verify, and only a holder of the
 *     key can answer; the host name is not checked;
 *   - the leader checks the follower's bearer token, derived from the key
 *     (peer_token()): only a holder of the key can send it, and it is
 *     compared in constant time.  The apiserver, which reaches the same
 *     port, does not have it.
 * A certificate rotated on one replica before another makes them refuse
 * each other until both serve the new one (the forward fails: denied, as
 * any forward that fails).
 *
 * Connections are kept alive: a pool of clients (struct kube, kube/client.h,
 * which keeps its connection between calls), one taken per call, so that
 * concurrent forwards do not wait for each other.  The pool is emptied
 * when the leader's address or the key changes.
 */
#ifndef GPUGATE_KUBE_PEER_H
#define GPUGATE_KUBE_PEER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct diag;

/* The route the leader serves, and the header its token comes in. */
#define PEER_DECIDE_PATH "/peer/decide"
/* The token's length in hex, and the pin's size ("sha256//" + base64). */
#define PEER_TOKEN_LEN 64
#define PEER_PIN_MAX 64
/* A forward's whole time (connect, TLS, answer): well inside the
 * apiserver's webhook timeout, so that a follower can still answer. */
#define PEER_TIMEOUT_MS 2000u

/*
 * The token of the key in key_pem (its bytes as read from the key file):
 * hex SHA-256 of "gpugate-peer-v1\n" followed by the key's bytes, into
 * token (PEER_TOKEN_LEN + 1 bytes).  0, or -1 when key_pem is empty.
 */
int peer_token(const char *key_pem, size_t len, char token[PEER_TOKEN_LEN + 1]);

/*
 * The pin of the certificate in cert_pem (the first of the chain):
 * "sha256//" and the base64 of the SHA-256 of its DER SubjectPublicKeyInfo,
 * into pin (PEER_PIN_MAX + 1 bytes).  0, or -1 with one line in d.
 */
int peer_pin(const char *cert_pem, size_t len, char pin[PEER_PIN_MAX + 1],
	     struct diag *d);

/*
 * Whether an Authorization header value is "Bearer " followed by token
 * (constant time in the token's length).  header may be NULL (false).
 */
bool peer_authorized(const char *header, const char *token);

struct peer;

/* NULL when out of memory. */
struct peer *peer_new(void);

/*
 * The key material every call uses from now on (copied): the pin of this
 * replica's certificate and its token.  Called at start and on every
 * certificate reload; empties the pool when either changed.  Any thread.
 */
void peer_set_keys(struct peer *pr, const char *pin, const char *token);

/*
 * POST body to https://address/peer/decide ("host:port"; a bracketed IPv6
 * host), within PEER_TIMEOUT_MS.  0 with *answer (the caller's reference)
 * when the leader answered 200 with JSON; -1 with one line in err
 * otherwise (no keys yet, refused, not pinned, no answer in time, another
 * status: "peer 10.0.0.5:8443 answered 503: ...", not JSON).  Any thread;
 * calls run in parallel.
 */
int peer_post(struct peer *pr, const char *address, const json_t *body,
	      json_t **answer, char *err, size_t size);

/* Frees pr and its pool.  NULL is a no-op. */
void peer_free(struct peer *pr);

#endif
