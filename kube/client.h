/*
 * kube client: a small Kubernetes API client on libcurl (OpenSSL).
 *
 * Talks to the API server a struct kube_config (kube/config.h) describes:
 * GET a JSON document (kube_get), stream a watch line by line
 * (kube_watch), any verb with a body and a per-call timeout (kube_request),
 * the object verbs on top of it (kube_get_json, kube_create, kube_replace,
 * kube_patch, kube_delete), and a read-decide-write loop guarded by
 * metadata.resourceVersion (kube_cas_update).  docs/internals.md, "The
 * Kubernetes API client", says how they fit together.
 *
 * One struct kube per thread: libcurl handles are not shared, and a
 * struct kube keeps its connection open between calls.
 */
#ifndef GPUGATE_KUBE_CLIENT_H
#define GPUGATE_KUBE_CLIENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct diag;

struct kube_config;
struct kube;

/* The config is copied. */
struct kube *kube_new(const struct kube_config *cfg, struct diag *d);
void kube_free(struct kube *k);

/*
 * From another thread, after setting the stop flag of the request in
 * flight on k: cuts its connection (shutdown of the socket), so that a
 * watch or a hanging list ends at once, not at the next progress call
 * (about a second later).  Nothing when k has no connection open.
 */
void kube_interrupt(struct kube *k);

/*
 * GET server+path (path starts with "/", query included).  On a response,
 * returns 0 with *status and the body (caller frees; NUL-terminated).  -1
 * when no response arrived (connection refused, TLS failure, 60 s timeout)
 * or *stop became true (checked about once a second, so that a hanging
 * server never delays shutdown; stop may be NULL).  Bodies are capped at
 * max_body bytes (-1 beyond).
 */
int kube_get(struct kube *k, const char *path, size_t max_body, long *status,
	     char **body, size_t *len, volatile bool *stop, struct diag *d);

/* What a watch calls back, all on the calling thread, with ctx. */
struct kube_stream {
	/* The server answered 200: the stream is open (it may stay idle for
	 * a while before the first event).  May be NULL. */
	void (*on_open)(void *ctx);
	/* Every line of the 200 stream (one JSON event, without the
	 * newline); non-zero ends the stream. */
	int (*on_line)(void *ctx, const char *line, size_t len);
	void *ctx;
};

/*
 * Streams a watch until the server ends it, *stop becomes true, or
 * on_line() returns non-zero.  Returns 0 in those cases, -1 on a transport
 * error (message in d), and the HTTP status when it was not 200 (on_open
 * and on_line are then never called).  Stalled streams (nothing for
 * idle_seconds) count as transport errors.
 */
int kube_watch(struct kube *k, const char *path, unsigned idle_seconds,
	       const struct kube_stream *cb, volatile bool *stop, struct diag *d);

/* ---- any verb ----------------------------------------------------------- */

/* Timeouts of a whole request (connect, TLS, send, answer), milliseconds.
 * Lists and kube_get() take up to a minute; a request made while an
 * admission review waits (the webhook answers within 10 s) must pass a far
 * shorter one. */
#define KUBE_TIMEOUT_LIST_MS 60000u
/* The connection is given at most this much of any timeout. */
#define KUBE_CONNECT_TIMEOUT_MS 10000u
/* The answer cap of the object verbs: an object in etcd is at most
 * 1.5 MiB, as JSON it may grow a little. */
#define KUBE_OBJECT_MAX (4u << 20)

struct kube_request {
	const char *method;       /* "GET", "POST", "PUT", "PATCH", "DELETE" */
	const char *path;         /* starts with "/", query included */
	const char *body;         /* sent as it is; NULL: no body */
	size_t body_len;
	const char *content_type; /* of body; NULL: "application/json" */
	size_t max_body;          /* answers longer than this fail; 0: KUBE_OBJECT_MAX */
	unsigned timeout_ms;      /* the whole request; 0: KUBE_TIMEOUT_LIST_MS */
	volatile bool *stop;      /* ends the request when it becomes true
				   * (looked at about once a second); may be NULL */
};

struct kube_response {
	long status;        /* HTTP status; 0 when no answer arrived */
	char *body;         /* the answer, NUL-terminated; NULL when none */
	size_t len;
	/* Of a non-2xx answer that is a Kubernetes Status: its reason
	 * ("Conflict", "AlreadyExists", "NotFound", "Expired",
	 * "TooManyRequests", ...) and message (truncated to fit), else "". */
	char reason[64];
	char message[512];
	/* Seconds the server asks the client to wait (a Retry-After header,
	 * else the Status's details.retryAfterSeconds); 0: it did not say. */
	unsigned retry_after_s;
	/* No whole answer within the request's timeout_ms (-1 returned). */
	bool timed_out;
};

/*
 * Sends one request and reads the answer into *resp (always set; release
 * it with kube_response_release(), whatever the result).  Returns
 *
 *   0       a 2xx answer;
 *   status  any other answer (>= 100), with one line in d:
 *           "PUT /api/v1/namespaces/x/configmaps/y: 409 Conflict: Operation
 *           cannot be fulfilled on configmaps \"y\": ..." (reason and
 *           message of the Status; "PUT ...: 502 (no Kubernetes Status in
 *           the answer)" when the body is none);
 *   -1      no (whole) answer: connection refused, TLS failure, timeout,
 *           *stop, an answer over max_body, a path too long; one line in d
 *           ("PUT /api/...: no answer within 500 ms", "GET /api/...:
 *           Couldn't connect to server").
 *
 * After -1 from a write (POST, PUT, PATCH, DELETE) the server may or may
 * not have applied it.  A 409, 422 or 429 answer means it did not.  A
 * request is sent once: libcurl's own re-send of a request whose kept-alive
 * connection died is let through only when no byte of its body went out
 * (a write without a body always takes a new connection), so a write the
 * server may have seen whole is never sent twice.
 */
int kube_request(struct kube *k, const struct kube_request *req,
		 struct kube_response *resp, struct diag *d);

/* Frees the body and zeroes *resp. */
void kube_response_release(struct kube_response *resp);

/* ---- object verbs ------------------------------------------------------- */

/*
 * JSON in and out on top of kube_request(), capped at KUBE_OBJECT_MAX, with
 * a per-call timeout (0: KUBE_TIMEOUT_LIST_MS).  Each returns 0 on a 2xx
 * answer with *out the parsed answer (the caller's reference; out may be
 * NULL to discard it), the HTTP status of any other answer (with the line
 * kube_request() gives; *out NULL), or -1 when no answer arrived or a
 * wanted answer was not JSON (*out NULL; a write may then have happened).
 * Callers branch on the status: 404 NotFound, 409 Conflict or
 * AlreadyExists, 410 Expired, 422 Invalid, 429 TooManyRequests.
 */

/* GET path. */
int kube_get_json(struct kube *k, const char *path, unsigned timeout_ms,
		  json_t **out, struct diag *d);

/* POST obj to a collection ("/api/v1/namespaces/NS/configmaps"); 409
 * (AlreadyExists) when the name is taken.  obj must not carry a
 * metadata.resourceVersion (the server refuses it). */
int kube_create(struct kube *k, const char *collection, const json_t *obj,
		unsigned timeout_ms, json_t **out, struct diag *d);

/* PUT obj at path.  With metadata.resourceVersion set, the server writes
 * only if the object is still at that version (409 Conflict otherwise);
 * without it the write is unconditional. */
int kube_replace(struct kube *k, const char *path, const json_t *obj,
		 unsigned timeout_ms, json_t **out, struct diag *d);

enum kube_patch_type {
	KUBE_PATCH_MERGE,     /* RFC 7386, application/merge-patch+json */
	KUBE_PATCH_JSON,      /* RFC 6902, application/json-patch+json */
	KUBE_PATCH_STRATEGIC, /* application/strategic-merge-patch+json
			       * (built-in kinds only) */
};

/* PATCH path.  A merge patch that carries metadata.resourceVersion is
 * applied only at that version (409 otherwise). */
int kube_patch(struct kube *k, const char *path, enum kube_patch_type type,
	       const json_t *patch, unsigned timeout_ms, json_t **out,
	       struct diag *d);

/* DELETE path, with DeleteOptions preconditions when uid or
 * resource_version is not NULL: the server deletes only the object with
 * that uid (not one re-created under the same name) at that version, 409
 * Conflict otherwise.  *out is what the server answers (a Status or the
 * object). */
int kube_delete(struct kube *k, const char *path, const char *uid,
		const char *resource_version, unsigned timeout_ms, json_t **out,
		struct diag *d);

/* ---- compare-and-swap --------------------------------------------------- */

/*
 * kube_cas_update(): read, decide, write, guarded by the version read.
 *
 *   1. GET path (an object path: ".../namespaces/NS/configmaps/NAME").
 *   2. mutate(ctx, obj, exists) changes obj in memory and says what to do.
 *      When the object exists, obj is it; on 404 obj is an empty object
 *      {} and exists is false (mutate fills it in: apiVersion, kind, data;
 *      metadata.name and namespace are set from the path when absent).
 *   3. KUBE_CAS_WRITE: PUT obj at path with metadata.resourceVersion set
 *      back to the version read (whatever mutate did to it), or, when it
 *      did not exist, POST it to the collection (path without its last
 *      segment) with no resourceVersion.
 *   4. The write is refused as stale (409 Conflict; 409 AlreadyExists on a
 *      create; 404 on a replace: deleted meanwhile) or the read or the
 *      write is throttled (429): wait a jittered backoff
 *      (kube_cas_backoff_ms(); for a 429 at least its Retry-After) and go
 *      back to 1.  Any other answer, or none, ends the call.
 *
 * Guaranteed:
 *   - no lost update: a write succeeds only on the version it was decided
 *     on, so every successful write saw all the writes before it (others
 *     using resourceVersion, through this function or not).  A writer that
 *     PUTs without a resourceVersion, or patches without one, is not held
 *     back: guard all writers;
 *   - mutate is called once per round, on the calling thread, each time
 *     with a fresh copy of what the server holds; it must decide from obj
 *     and ctx alone, and act on its decision only once the call returned
 *     it (it may run several times; only the last run's obj is written);
 *   - the whole call ends within the budget (each request is given at most
 *     what is left of it; no backoff is started that would end past it),
 *     plus the milliseconds it takes to notice a timeout and mutate's own
 *     time, and after at most max_attempts rounds;
 *   - the clock is CLOCK_MONOTONIC: a jump of the wall clock does not
 *     stretch or shorten the budget.
 * Not guaranteed:
 *   - that the write is applied exactly once when the answer is lost:
 *     after no answer (a transport error, a timeout) or a 5xx to a write
 *     the outcome is KUBE_CAS_FAILED with write_unknown, and the write may
 *     have happened.  Nothing is retried then (nor re-sent by libcurl, see
 *     kube_request()): a caller that retries must make mutate idempotent
 *     (a reservation keyed by its uid, not a counter);
 *   - progress under contention: with many writers a round may lose every
 *     time (KUBE_CAS_EXHAUSTED); the caller decides what that means (the
 *     webhook: deny with a retry message, or fail open/closed);
 *   - fairness between writers, or that obj is still current when the call
 *     returns.
 */

/* What mutate says. */
enum kube_cas_verdict {
	KUBE_CAS_WRITE, /* obj was changed: write it */
	KUBE_CAS_KEEP,  /* nothing to change: no write (KUBE_CAS_UNCHANGED) */
	KUBE_CAS_ABORT, /* give up, e.g. over quota (KUBE_CAS_ABORTED) */
};

typedef enum kube_cas_verdict kube_cas_fn(void *ctx, json_t *obj, bool exists);

/* How a call ended. */
enum kube_cas_outcome {
	KUBE_CAS_UPDATED,   /* replaced at the version read */
	KUBE_CAS_CREATED,   /* it did not exist; created */
	KUBE_CAS_UNCHANGED, /* mutate said KEEP */
	KUBE_CAS_ABORTED,   /* mutate said ABORT */
	KUBE_CAS_EXHAUSTED, /* the budget or the attempts ran out while
			     * writes were refused as stale or throttled, or
			     * a read was cut by the budget: nothing written */
	KUBE_CAS_FAILED,    /* anything else: an error answer (status), no
			     * answer (write_unknown tells whether a write
			     * may have been applied), an object without a
			     * resourceVersion, *stop */
};

/* Defaults of a zero field in struct kube_cas_opts. */
#define KUBE_CAS_BUDGET_MS 2000u
#define KUBE_CAS_ATTEMPTS 16u
#define KUBE_CAS_BACKOFF_MIN_MS 5u
#define KUBE_CAS_BACKOFF_MAX_MS 200u

/* Every field may be 0 for its default; NULL opts: all defaults. */
struct kube_cas_opts {
	unsigned budget_ms;          /* the whole call */
	unsigned max_attempts;       /* rounds (read, mutate, write) */
	unsigned request_timeout_ms; /* each request; always capped by what is
				      * left of the budget; 0: no other cap */
	unsigned backoff_min_ms;
	unsigned backoff_max_ms;
	uint64_t seed;               /* of the jitter; 0: from the monotonic
				      * clock and the thread */
	volatile bool *stop;         /* ends the call (KUBE_CAS_FAILED) */
};

struct kube_cas_result {
	enum kube_cas_outcome outcome;
	unsigned attempts;   /* rounds started (>= 1 once a GET was sent) */
	unsigned conflicts;  /* writes refused as stale */
	unsigned throttled;  /* 429 answers */
	long status;         /* HTTP status of the last answer; 0: none */
	/* FAILED on a write that got no answer or a 5xx: it may have been
	 * applied.  false: nothing this call sent was applied, unless the
	 * outcome says it was. */
	bool write_unknown;
	unsigned elapsed_ms; /* on the monotonic clock */
	/* UPDATED, CREATED: the object as the server wrote it (its new
	 * resourceVersion); UNCHANGED, ABORTED: as read (NULL when it does
	 * not exist); otherwise NULL.  The result owns it. */
	json_t *object;
};

/*
 * Runs the loop above on path.  Returns 0 when it ended by a decision
 * (UPDATED, CREATED, UNCHANGED, ABORTED) and -1 otherwise (EXHAUSTED,
 * FAILED) with one line in d, e.g.
 *
 *   "cas /api/v1/namespaces/x/configmaps/y: gave up after 4 attempts in
 *   1987 ms (4 conflicts, 0 throttled): PUT /api/v1/namespaces/x/configmaps/y:
 *   409 Conflict: Operation cannot be fulfilled ..."
 *   "PUT /api/v1/namespaces/x/configmaps/y: 500 InternalError: ..."
 *   "cas /api/v1/namespaces/x/configmaps/: not the path of an object"
 *
 * The refused rounds before the last add nothing to d.  mutate must not be
 * NULL.  *res is always set; release it with kube_cas_result_release().
 */
int kube_cas_update(struct kube *k, const char *path, kube_cas_fn *mutate,
		    void *ctx, const struct kube_cas_opts *opts,
		    struct kube_cas_result *res, struct diag *d);

void kube_cas_result_release(struct kube_cas_result *res);

/* The outcome's name ("updated", "created", "unchanged", "aborted",
 * "exhausted", "failed"), for logs. */
const char *kube_cas_outcome_name(enum kube_cas_outcome o);

/*
 * The wait before retry number `retry` (0 for the first): drawn uniformly
 * from [c/2, c] where c = min(backoff_max_ms, backoff_min_ms << retry)
 * (opts defaults as above), so that writers that collided spread out.
 * *rng is the state of the random source (xorshift64*; a zero state is
 * replaced by a fixed non-zero one) and is advanced: the same state gives
 * the same waits.  Pure: no clock, no globals.
 */
unsigned kube_cas_backoff_ms(const struct kube_cas_opts *opts, unsigned retry,
			     uint64_t *rng);

#endif
