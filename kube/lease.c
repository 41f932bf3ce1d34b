#include "kube/lease.h"

#include "base/diag.h"
#include "codec/jsonmem.h"
#include "base/log.h"
#include "base/thread.h"
#include "kube/client.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NAME_MAX_LEN 253
/* The release is given at most this (lease_stop() returns within about a
 * second). */
#define RELEASE_TIMEOUT_MS 1000u
/* Conflicts in a row before an attempt gives up until the next period. */
#define ATTEMPT_ROUNDS 3

/* What one attempt found. */
enum attempt {
	HELD,   /* this replica holds the Lease: it wrote it just now */
	OTHER,  /* another replica holds it and is not silent for long enough */
	FREE,   /* observe_only: absent, released or silent for too long */
	FAILED, /* no answer, an error answer, conflicts in a row */
};

struct lease {
	char *path;       /* /apis/coordination.k8s.io/v1/namespaces/NS/leases/N */
	char *collection; /* the same without /N */
	char *ns, *name, *identity;
	char *address;    /* published while holding (lease_config.address), or NULL */
	char tag[2 * NAME_MAX_LEN + 2]; /* NS/N, for log lines */
	unsigned duration_ms, renew_deadline_ms, retry_ms;
	long long duration_s; /* what the record says */
	void (*on_change)(void *ctx, bool leading);
	void *ctx;
	uint64_t (*now)(void);
	struct kube *kube;
	struct thread thread; /* its stop flag is what kube_request looks at */
	/* Read by lease_leading() from any thread: leading is set after
	 * renewed_ms, so a reader that sees it sees a current renewed_ms. */
	atomic_bool leading;
	_Atomic uint64_t renewed_ms; /* when the last renew that worked was sent */
	/* The thread's own. */
	char *observed;       /* the spec last read, as sorted compact JSON */
	uint64_t observed_ms; /* when it was first seen so */
	json_t *held;         /* the Lease as this replica last wrote it */
	char holder[NAME_MAX_LEN + 1]; /* of the last OTHER */
	bool failing;         /* the last attempt failed (logged once) */
	bool observe_only;
	/* lease_holder()'s answer, set by the thread under mu: the other
	 * holder and the end of its term on now(). */
	pthread_mutex_t mu;
	char other[NAME_MAX_LEN + 1];
	char other_address[LEASE_ADDRESS_MAX + 1]; /* its published address, or "" */
	uint64_t other_until;
	char error[300];      /* the last failed attempt's, or "" */
	atomic_bool tried;    /* an attempt has ended */
	uint64_t rng;
	struct diag d;        /* the last attempt's error */
};

static uint64_t real_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* xorshift64*: the jitter of the tries of replicas that do not lead. */
static unsigned jitter(struct lease *l, unsigned max)
{
	l->rng ^= l->rng >> 12;
	l->rng ^= l->rng << 25;
	l->rng ^= l->rng >> 27;
	return max ? (unsigned)((l->rng * 2685821657736338717ull) >> 33) % (max + 1)
		   : 0;
}

/* The deadline of the current term, on l->now. */
static uint64_t deadline(struct lease *l)
{
	return atomic_load(&l->renewed_ms) + l->renew_deadline_ms;
}

/* "2006-01-02T15:04:05.000000Z": metav1.MicroTime. */
static void micro_time(char *out, size_t size)
{
	struct timespec ts;
	struct tm tm;
	size_t n;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = strftime(out, size, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out + n, size - n, ".%06ldZ", ts.tv_nsec / 1000);
}

/*
 * One request with a JSON body (or none) and a JSON answer, interrupted by
 * lease_stop() when stop is set: 0 with *out on a 2xx, the status of any
 * other answer, -1 when there was none (the reason in d).
 */
static int call(struct lease *l, const char *method, const char *path,
		const json_t *body, unsigned timeout_ms, bool stop, json_t **out,
		struct diag *d)
{
	struct kube_response resp = {0};
	char *text = NULL;
	json_error_t e;
	int rc;

	*out = NULL;
	if (body) {
		text = json_dumps(body, JSON_COMPACT);
		if (!text) {
			diag_addf(d, "out of memory");
			return -1;
		}
	}
	struct kube_request req = {
		.method = method, .path = path,
		.body = text, .body_len = text ? strlen(text) : 0,
		.timeout_ms = timeout_ms ? timeout_ms : 1,
		.stop = stop ? thread_stop_flag(&l->thread) : NULL,
	};
	rc = kube_request(l->kube, &req, &resp, d);
	if (rc == 0) {
		*out = json_loadb(resp.body ? resp.body : "", resp.len, 0, &e);
		if (!json_is_object(*out)) {
			diag_addf(d, "%s %s: the answer is not a JSON object", method,
				  path);
			json_decref(*out);
			*out = NULL;
			rc = -1;
		}
	}
	kube_response_release(&resp);
	jsonmem_free(text);
	return rc;
}

/* The spec of a Lease, made an object when it is none. */
static json_t *spec_of(json_t *lease)
{
	json_t *spec = json_object_get(lease, "spec");

	if (!json_is_object(spec)) {
		spec = json_object();
		json_object_set_new(lease, "spec", spec);
	}
	return spec;
}

/* Notes the spec read at now: a change restarts the holder's term as this
 * replica sees it. */
static void observe(struct lease *l, json_t *lease, uint64_t now)
{
	char *text = json_dumps(spec_of(lease), JSON_COMPACT | JSON_SORT_KEYS);

	if (!text)
		return; /* out of memory: the old observation stands */
	if (l->observed && strcmp(l->observed, text) == 0) {
		jsonmem_free(text);
		return;
	}
	jsonmem_free(l->observed);
	l->observed = text;
	l->observed_ms = now;
}

static const char *spec_str(json_t *spec, const char *key)
{
	const char *s = json_string_value(json_object_get(spec, key));

	return s ? s : "";
}

/* Makes spec this replica's record, renewed now; a new holder's term when
 * another (or nobody) held it. */
static void spec_take(struct lease *l, json_t *spec)
{
	char now[40];
	bool mine = strcmp(spec_str(spec, "holderIdentity"), l->identity) == 0;

	micro_time(now, sizeof(now));
	if (!mine) {
		json_int_t t = json_integer_value(json_object_get(spec, "leaseTransitions"));

		json_object_set_new(spec, "holderIdentity", json_string(l->identity));
		json_object_set_new(spec, "acquireTime", json_string(now));
		json_object_set_new(spec, "leaseTransitions",
				    json_integer(t > 0 ? t + 1 : 1));
	} else if (!json_is_string(json_object_get(spec, "acquireTime"))) {
		json_object_set_new(spec, "acquireTime", json_string(now));
	}
	json_object_set_new(spec, "leaseDurationSeconds", json_integer(l->duration_s));
	json_object_set_new(spec, "renewTime", json_string(now));
}

/* The timeout of the next request: while leading, what is left of the
 * term (0: it is over); otherwise renew_deadline. */
static unsigned request_timeout(struct lease *l)
{
	uint64_t now, end;

	if (!atomic_load(&l->leading))
		return l->renew_deadline_ms;
	now = l->now();
	end = deadline(l);
	return now >= end ? 0 : (unsigned)(end - now);
}

/* What lease_holder() answers: holder (NULL: nobody else) until `until`. */
static void set_other(struct lease *l, const char *holder, const char *address,
		      uint64_t until)
{
	pthread_mutex_lock(&l->mu);
	snprintf(l->other, sizeof(l->other), "%s", holder ? holder : "");
	snprintf(l->other_address, sizeof(l->other_address), "%s",
		 holder && address ? address : "");
	l->other_until = holder ? until : 0;
	pthread_mutex_unlock(&l->mu);
}

static void set_error(struct lease *l, const char *error)
{
	pthread_mutex_lock(&l->mu);
	snprintf(l->error, sizeof(l->error), "%s", error);
	pthread_mutex_unlock(&l->mu);
}

void lease_error(struct lease *l, char *buf, size_t size)
{
	pthread_mutex_lock(&l->mu);
	snprintf(buf, size, "%s", l->error);
	pthread_mutex_unlock(&l->mu);
}

bool lease_tried(struct lease *l)
{
	return atomic_load(&l->tried);
}

bool lease_holder_address(struct lease *l, char *holder, size_t hsize,
			  char *address, size_t asize)
{
	bool live;

	pthread_mutex_lock(&l->mu);
	live = l->other[0] && l->now() < l->other_until;
	snprintf(holder, hsize, "%s", live ? l->other : "");
	snprintf(address, asize, "%s", live ? l->other_address : "");
	pthread_mutex_unlock(&l->mu);
	return live;
}

bool lease_holder(struct lease *l, char *holder, size_t size)
{
	bool live;

	pthread_mutex_lock(&l->mu);
	live = l->other[0] && l->now() < l->other_until;
	snprintf(holder, size, "%s", live ? l->other : "");
	pthread_mutex_unlock(&l->mu);
	return live;
}

/*
 * The holder's address in the annotations of a Lease, written by this
 * module (publish()): the address, only when the identity annotation
 * names the holder (a holder that publishes none, an older version or
 * --usage-store memory, leaves the last one's behind); else NULL.
 */
static const char *published(json_t *lease, const char *holder)
{
	json_t *a = json_object_get(json_object_get(lease, "metadata"), "annotations");
	const char *who = json_string_value(json_object_get(a, LEASE_IDENTITY_ANNOTATION));
	const char *addr = json_string_value(json_object_get(a, LEASE_ADDRESS_ANNOTATION));

	if (!who || !addr || strcmp(who, holder) != 0 || strlen(addr) > LEASE_ADDRESS_MAX)
		return NULL;
	return addr;
}

/* Makes the annotations of obj say this replica's address (or none). */
static void publish(struct lease *l, json_t *obj)
{
	json_t *m = json_object_get(obj, "metadata"), *a;

	if (!json_is_object(m))
		return;
	a = json_object_get(m, "annotations");
	if (!l->address) {
		if (json_is_object(a)) {
			json_object_del(a, LEASE_ADDRESS_ANNOTATION);
			json_object_del(a, LEASE_IDENTITY_ANNOTATION);
		}
		return;
	}
	if (!json_is_object(a)) {
		a = json_object();
		if (!a || json_object_set_new(m, "annotations", a) < 0)
			return;
	}
	json_object_set_new(a, LEASE_ADDRESS_ANNOTATION, json_string(l->address));
	json_object_set_new(a, LEASE_IDENTITY_ANNOTATION, json_string(l->identity));
}

static void hold(struct lease *l, json_t *written)
{
	observe(l, written, l->now());
	json_decref(l->held);
	l->held = written;
}

/*
 * Reads the Lease and takes or renews it when this replica may: HELD,
 * OTHER (l->holder says who), or FAILED (l->d says why).  A 409 reads
 * again at once, up to ATTEMPT_ROUNDS times.
 */
static enum attempt attempt(struct lease *l)
{
	for (int round = 0; round < ATTEMPT_ROUNDS && !thread_stopping(&l->thread);
	     round++) {
		json_t *obj = NULL, *out = NULL, *spec;
		unsigned timeout = request_timeout(l);
		const char *holder;
		uint64_t now, term_ms;
		int rc;

		/* The term is over: the last error says why. */
		if (atomic_load(&l->leading) && timeout == 0)
			return FAILED;
		diag_init(&l->d);
		rc = call(l, "GET", l->path, NULL, timeout, true, &obj, &l->d);
		now = l->now();
		if (rc == 404 && l->observe_only)
			return FREE;
		if (rc == 404) {
			/* Absent: this replica makes it, holding it. */
			obj = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{}}", "apiVersion",
					"coordination.k8s.io/v1", "kind", "Lease",
					"metadata", "name", l->name, "namespace", l->ns,
					"spec");
			if (!obj) {
				diag_addf(&l->d, "out of memory");
				return FAILED;
			}
			spec_take(l, spec_of(obj));
			publish(l, obj);
			json_object_set_new(spec_of(obj), "leaseTransitions",
					    json_integer(0));
			diag_init(&l->d);
			rc = call(l, "POST", l->collection, obj, request_timeout(l),
				  true, &out, &l->d);
			json_decref(obj);
			if (rc == 0) {
				hold(l, out);
				return HELD;
			}
			if (rc == 409) /* AlreadyExists: another was first */
				continue;
			return FAILED;
		}
		if (rc != 0)
			return FAILED;
		if (!json_string_length(json_object_get(json_object_get(obj, "metadata"),
							"resourceVersion"))) {
			/* A PUT without one would be unconditional. */
			diag_addf(&l->d, "GET %s: the Lease has no resourceVersion",
				  l->path);
			json_decref(obj);
			return FAILED;
		}
		observe(l, obj, now);
		spec = spec_of(obj);
		holder = spec_str(spec, "holderIdentity");
		if (holder[0] && (l->observe_only || strcmp(holder, l->identity) != 0)) {
			json_int_t s = json_integer_value(
				json_object_get(spec, "leaseDurationSeconds"));

			term_ms = s > 0 ? (uint64_t)s * 1000 : l->duration_ms;
			if (now < l->observed_ms + term_ms) {
				snprintf(l->holder, sizeof(l->holder), "%s", holder);
				set_other(l, holder, published(obj, holder),
					  l->observed_ms + term_ms);
				json_decref(obj);
				return OTHER;
			}
		}
		if (l->observe_only) {
			json_decref(obj);
			return FREE;
		}
		/* Free, expired or this replica's: take or renew it at the
		 * version read (the metadata is the server's, untouched). */
		spec_take(l, spec);
		publish(l, obj);
		timeout = request_timeout(l);
		if (atomic_load(&l->leading) && timeout == 0) {
			json_decref(obj);
			return FAILED;
		}
		diag_init(&l->d);
		rc = call(l, "PUT", l->path, obj, timeout, true, &out, &l->d);
		json_decref(obj);
		if (rc == 0) {
			hold(l, out);
			return HELD;
		}
		if (rc != 409) /* 409 Conflict: another wrote first */
			return FAILED;
	}
	return FAILED;
}

static void lose(struct lease *l, const char *reason)
{
	char q[600], q2[600];

	atomic_store(&l->leading, false);
	if (strcmp(reason, "taken") == 0)
		log_event(LOG_WARN, "msg=\"leader lost\" lease=%s identity=%s "
				    "reason=\"taken\" holder=\"%s\"",
			  l->tag, l->identity, log_quote(l->holder, q, sizeof(q)));
	else if (strcmp(reason, "stopped") == 0)
		log_event(LOG_INFO, "msg=\"leader lost\" lease=%s identity=%s "
				    "reason=\"stopped\"", l->tag, l->identity);
	else
		log_event(LOG_WARN, "msg=\"leader lost\" lease=%s identity=%s "
				    "reason=\"%s\" error=\"%s\"",
			  l->tag, l->identity, log_quote(reason, q2, sizeof(q2)),
			  log_quote(diag_text(&l->d), q, sizeof(q)));
	if (l->on_change)
		l->on_change(l->ctx, false);
}

/* Gives the Lease up at the version this replica last wrote: another
 * replica takes an empty holderIdentity at once.  leaseDurationSeconds 1
 * and renewTime now, as client-go's release, for readers that do not. */
static void release(struct lease *l)
{
	json_t *obj, *spec, *out = NULL;
	char now[40], q[600];
	struct diag d;
	int rc;

	if (!l->held)
		return;
	diag_init(&d);
	obj = json_deep_copy(l->held);
	if (!obj) {
		log_event(LOG_WARN, "msg=\"cannot release\" lease=%s identity=%s "
				    "error=\"out of memory\"", l->tag, l->identity);
		return;
	}
	micro_time(now, sizeof(now));
	spec = spec_of(obj);
	json_object_set_new(spec, "holderIdentity", json_string(""));
	json_object_set_new(spec, "leaseDurationSeconds", json_integer(1));
	json_object_set_new(spec, "acquireTime", json_string(now));
	json_object_set_new(spec, "renewTime", json_string(now));
	rc = call(l, "PUT", l->path, obj,
		  l->renew_deadline_ms < RELEASE_TIMEOUT_MS ? l->renew_deadline_ms
							    : RELEASE_TIMEOUT_MS,
		  false, &out, &d);
	json_decref(obj);
	json_decref(out);
	if (rc == 0)
		log_event(LOG_INFO, "msg=\"lease released\" lease=%s identity=%s",
			  l->tag, l->identity);
	else
		log_event(LOG_WARN, "msg=\"cannot release\" lease=%s identity=%s "
				    "error=\"%s\"",
			  l->tag, l->identity, log_quote(diag_text(&d), q, sizeof(q)));
}

/* One turn: a read and take or renew; ms until the next. */
static unsigned turn(void *arg)
{
	struct lease *l = arg;
	uint64_t sent = l->now();
	enum attempt a;
	unsigned wait = l->retry_ms;

	if (atomic_load(&l->leading) && sent >= deadline(l)) {
		lose(l, "renew deadline");
		return 0;
	}
	a = attempt(l);
	if (thread_stopping(&l->thread))
		return 0;
	set_error(l, a == FAILED ? diag_text(&l->d) : "");
	if (a == HELD || a == FREE) {
		l->failing = false;
		set_other(l, NULL, NULL, 0);
	}
	if (a == FREE) {
		/* observe_only: nobody holds it */
	} else if (a == HELD) {
		atomic_store(&l->renewed_ms, sent);
		if (!atomic_load(&l->leading)) {
			json_int_t t = json_integer_value(json_object_get(
				spec_of(l->held), "leaseTransitions"));

			atomic_store(&l->leading, true);
			log_event(LOG_INFO, "msg=\"leader elected\" lease=%s "
					    "identity=%s transitions=%lld",
				  l->tag, l->identity, (long long)t);
			if (l->on_change)
				l->on_change(l->ctx, true);
		}
	} else if (a == OTHER) {
		l->failing = false;
		json_decref(l->held);
		l->held = NULL;
		if (atomic_load(&l->leading))
			lose(l, "taken");
	} else {
		uint64_t now = l->now(), end = deadline(l);

		if (!l->failing) {
			char q[600];

			log_event(LOG_WARN, "msg=\"lease unavailable\" lease=%s "
					    "identity=%s error=\"%s\"",
				  l->tag, l->identity,
				  log_quote(diag_text(&l->d), q, sizeof(q)));
			l->failing = true;
		}
		/* Wake up at the end of the term at the latest. */
		if (atomic_load(&l->leading))
			wait = now >= end ? 0
			       : end - now < wait ? (unsigned)(end - now)
						  : wait;
	}
	/* After leading is set: a reader that sees tried sees it. */
	atomic_store(&l->tried, true);
	if (!atomic_load(&l->leading))
		wait += jitter(l, l->retry_ms / 5);
	return wait;
}

/* After the last turn: a leader steps down and lets go of the Lease. */
static void end(void *arg)
{
	struct lease *l = arg;

	if (atomic_load(&l->leading)) {
		bool current = l->now() < deadline(l);

		lose(l, current ? "stopped" : "renew deadline");
		if (current)
			release(l);
	}
}

/* Lower case letters, digits, '-' and '.' (a DNS subdomain, loosely). */
static bool name_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n > NAME_MAX_LEN)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') ||
		      s[i] == '-' || s[i] == '.'))
			return false;
	return true;
}

/* What goes unquoted into log lines. */
static bool identity_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n > NAME_MAX_LEN)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || strchr("-._:", s[i])))
			return false;
	return true;
}

int lease_start(const struct lease_config *cfg, struct lease **out,
		struct diag *d)
{
	struct lease *l;
	unsigned dur, ren, ret;
	char path[2 * NAME_MAX_LEN + 64];

	if (!name_ok(cfg->namespace) || !name_ok(cfg->name)) {
		diag_addf(d, "lease: the namespace and the name must be 1 to %d "
			     "lower case letters, digits, '-' or '.'",
			  NAME_MAX_LEN);
		return -1;
	}
	if (!identity_ok(cfg->identity)) {
		diag_addf(d, "lease %s/%s: the identity must be 1 to %d letters, "
			     "digits, '-', '.', '_' or ':'",
			  cfg->namespace, cfg->name, NAME_MAX_LEN);
		return -1;
	}
	dur = cfg->duration_ms ? cfg->duration_ms : LEASE_DURATION_MS;
	ren = cfg->renew_deadline_ms ? cfg->renew_deadline_ms : LEASE_RENEW_DEADLINE_MS;
	ret = cfg->retry_ms ? cfg->retry_ms : LEASE_RETRY_MS;
	if (!(ret < ren && ren < dur)) {
		diag_addf(d, "lease %s/%s: want retry (%u ms) < renew deadline "
			     "(%u ms) < duration (%u ms)",
			  cfg->namespace, cfg->name, ret, ren, dur);
		return -1;
	}
	l = calloc(1, sizeof(*l));
	if (!l) {
		diag_addf(d, "out of memory");
		return -1;
	}
	l->duration_ms = dur;
	l->renew_deadline_ms = ren;
	l->retry_ms = ret;
	l->duration_s = (dur + 999) / 1000;
	l->on_change = cfg->on_change;
	l->ctx = cfg->ctx;
	l->now = cfg->now_ms ? cfg->now_ms : real_now_ms;
	l->observe_only = cfg->observe_only;
	pthread_mutex_init(&l->mu, NULL);
	l->rng = real_now_ms() ^ (uint64_t)(uintptr_t)l ^ 0x9e3779b97f4a7c15ull;
	atomic_init(&l->leading, false);
	atomic_init(&l->renewed_ms, 0);
	atomic_init(&l->tried, false);
	snprintf(l->tag, sizeof(l->tag), "%s/%s", cfg->namespace, cfg->name);
	snprintf(path, sizeof(path),
		 "/apis/coordination.k8s.io/v1/namespaces/%s/leases", cfg->namespace);
	l->collection = strdup(path);
	snprintf(path, sizeof(path),
		 "/apis/coordination.k8s.io/v1/namespaces/%s/leases/%s",
		 cfg->namespace, cfg->name);
	l->path = strdup(path);
	l->ns = strdup(cfg->namespace);
	l->name = strdup(cfg->name);
	l->identity = strdup(cfg->identity);
	l->address = cfg->address && cfg->address[0] ? strdup(cfg->address) : NULL;
	if (!l->collection || !l->path || !l->ns || !l->name || !l->identity ||
	    (cfg->address && cfg->address[0] && !l->address)) {
		diag_addf(d, "out of memory");
		goto fail;
	}
	l->kube = kube_new(cfg->kube, d);
	if (!l->kube)
		goto fail;
	{
		char name[sizeof(l->tag) + 8];

		snprintf(name, sizeof(name), "lease %s", l->tag);
		if (thread_start(&l->thread,
				 &(struct thread_config){.name = name, .turn = turn,
							 .end = end, .arg = l},
				 d) < 0)
			goto fail;
	}
	*out = l;
	return 0;
fail:
	lease_stop(l);
	return -1;
}

bool lease_leading(struct lease *l)
{
	return atomic_load(&l->leading) && l->now() < deadline(l);
}

void lease_stop(struct lease *l)
{
	if (!l)
		return;
	thread_stop(&l->thread);
	kube_free(l->kube);
	json_decref(l->held);
	jsonmem_free(l->observed);
	pthread_mutex_destroy(&l->mu);
	free(l->identity);
	free(l->address);
	free(l->name);
	free(l->ns);
	free(l->path);
	free(l->collection);
	free(l);
}
