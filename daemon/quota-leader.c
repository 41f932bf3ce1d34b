/* --usage-store leader in gpugate serve: daemon/quota-leader.h. */
#include "daemon/quota-leader.h"

#include "base/diag.h"
#include "base/log.h"
#include "base/strbuf.h"
#include "codec/jsonmem.h"
#include "http/server.h"
#include "kube/config.h"
#include "kube/feed.h"
#include "kube/lease.h"
#include "kube/peer.h"
#include "policy/decide.h"
#include "policy/quota.h"
#include "policy/workload.h"
#include "usage/leader-backend.h"
#include "usage/leader-gate.h"
#include "usage/leader-wire.h"
#include "usage/usage.h"
#include "webhook/holder.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct quota_leader {
	struct quota_leader_config cfg;
	char ns[64];
	char identity[254];
	char tag[128];                     /* NS/gpugate-memory */
	struct usage_store *usage;         /* the caller's to free */
	struct leader_gate gate;
	struct peer *peer;
	/* Set once by quota_leader_start(), read by any thread. */
	_Atomic(struct lease *) lease, shared_watch;
	_Atomic(struct feed *) feed;
	struct feed_resync resync;         /* the tick's */
	pthread_mutex_t mu;                /* token */
	char token[PEER_TOKEN_LEN + 1];    /* "": not known yet */
	_Atomic long long refused_logged_s;
	_Atomic uint64_t answered, failed, answered_us;
};

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static uint64_t mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* What the Leases say now, into f (strings in the buffers). */
struct facts_buf {
	char holder[254], address[LEASE_ADDRESS_MAX + 1], error[300];
	char shared[254], blocked[700];
};

static void facts(struct quota_leader *q, struct leader_gate_facts *f,
		  struct facts_buf *b)
{
	struct lease *l = atomic_load(&q->lease), *sw = atomic_load(&q->shared_watch);

	memset(f, 0, sizeof(*f));
	f->lease = q->tag;
	if (!l) {
		f->error = "not started";
		return;
	}
	f->leading = lease_leading(l);
	if (lease_holder_address(l, b->holder, sizeof(b->holder), b->address,
				 sizeof(b->address))) {
		f->holder = b->holder;
		f->address = b->address;
	}
	lease_error(l, b->error, sizeof(b->error));
	f->error = b->error;
	if (sw && lease_holder(sw, b->shared, sizeof(b->shared))) {
		snprintf(b->blocked, sizeof(b->blocked),
			 "replica %s of --usage-store shared holds Lease %s/%s (an "
			 "upgrade in progress?): replicas of --usage-store leader decide "
			 "no quota until it is gone",
			 b->shared, q->ns, QUOTA_SHARED_LEASE);
		f->blocked = b->blocked;
	}
}

/* usage_leader_config.role. */
static enum usage_role role(void *ctx, char *who, size_t size)
{
	struct quota_leader *q = ctx;
	struct leader_gate_facts f;
	struct facts_buf b;

	facts(q, &f, &b);
	return leader_gate_role(&q->gate, &f, mono_ms(), who, size);
}

/* usage_leader_config.forward: the claim to the leader at `who`. */
static int forward(void *ctx, const char *who, const struct policy *p,
		   const struct workload *wl, const struct quota_claim *c, bool force,
		   struct quota_result *out, char *why, size_t size)
{
	struct quota_leader *q = ctx;
	json_t *req = leader_wire_request(wl, c, force), *ans = NULL;
	uint64_t t0 = mono_us();
	int rc;

	if (!req) {
		snprintf(why, size, "out of memory");
		atomic_fetch_add(&q->failed, 1);
		return -1;
	}
	rc = peer_post(q->peer, who, req, &ans, why, size);
	json_decref(req);
	if (rc == 0) {
		rc = leader_wire_read_result(ans, p, wl, out, why, size);
		json_decref(ans);
	}
	if (rc < 0) {
		atomic_fetch_add(&q->failed, 1);
		return -1;
	}
	atomic_fetch_add(&q->answered_us, mono_us() - t0);
	atomic_fetch_add(&q->answered, 1);
	return 0;
}

static void on_change(void *ctx, bool leading)
{
	struct quota_leader *q = ctx;

	leader_gate_changed(&q->gate, leading, mono_ms());
}

struct quota_leader *quota_leader_new(const struct quota_leader_config *cfg,
				      struct diag *d)
{
	struct quota_leader *q = calloc(1, sizeof(*q));

	if (!q) {
		diag_addf(d, "gpugate serve: out of memory");
		return NULL;
	}
	q->cfg = *cfg;
	snprintf(q->ns, sizeof(q->ns), "%s", cfg->namespace);
	snprintf(q->identity, sizeof(q->identity), "%s", cfg->identity);
	snprintf(q->tag, sizeof(q->tag), "%s/%s", q->ns, QUOTA_LEADER_LEASE);
	q->cfg.namespace = q->ns;
	q->cfg.identity = q->identity;
	leader_gate_init(&q->gate, 0);
	pthread_mutex_init(&q->mu, NULL);
	atomic_init(&q->lease, NULL);
	atomic_init(&q->shared_watch, NULL);
	atomic_init(&q->feed, NULL);
	atomic_init(&q->refused_logged_s, 0);
	atomic_init(&q->answered, 0);
	atomic_init(&q->failed, 0);
	atomic_init(&q->answered_us, 0);
	q->peer = peer_new();
	q->usage = usage_leader_new(&(struct usage_leader_config){
		.memory = {.reservation_ttl_ms = cfg->reservation_ttl_ms},
		.role = role, .forward = forward, .ctx = q});
	if (!q->peer || !q->usage) {
		diag_addf(d, "gpugate serve: out of memory");
		usage_free(q->usage);
		q->usage = NULL;
		quota_leader_free(q);
		return NULL;
	}
	return q;
}

struct usage_store *quota_leader_usage(struct quota_leader *q)
{
	return q->usage;
}

void quota_leader_set_feed(struct quota_leader *q, struct feed *f)
{
	atomic_store(&q->feed, f);
}

int quota_leader_set_keys(struct quota_leader *q, const char *cert_pem,
			  size_t cert_len, const char *key_pem, size_t key_len,
			  struct diag *d)
{
	char pin[PEER_PIN_MAX + 1], token[PEER_TOKEN_LEN + 1];

	if (peer_pin(cert_pem, cert_len, pin, d) < 0)
		return -1;
	if (peer_token(key_pem, key_len, token) < 0) {
		diag_addf(d, "gpugate serve: the TLS key is empty");
		return -1;
	}
	pthread_mutex_lock(&q->mu);
	memcpy(q->token, token, sizeof(q->token));
	pthread_mutex_unlock(&q->mu);
	peer_set_keys(q->peer, pin, token);
	return 0;
}

int quota_leader_start(struct quota_leader *q, const char *address, struct diag *d)
{
	struct lease_config lc = {.kube = q->cfg.kube, .namespace = q->ns,
				  .name = QUOTA_LEADER_LEASE, .identity = q->identity,
				  .on_change = on_change, .ctx = q,
				  .address = address};
	struct lease *l = NULL, *sw = NULL;

	if (lease_start(&lc, &l, d) < 0)
		return -1;
	atomic_store(&q->lease, l);
	lc = (struct lease_config){.kube = q->cfg.kube, .namespace = q->ns,
				   .name = QUOTA_SHARED_LEASE, .identity = q->identity,
				   .observe_only = true};
	if (lease_start(&lc, &sw, d) < 0)
		return -1;
	atomic_store(&q->shared_watch, sw);
	log_event(LOG_INFO, "msg=\"quota leader\" lease=%s identity=%s address=%s "
			    "detail=\"the Lease holder decides quota; the others "
			    "forward to it\"",
		  q->tag, q->identity, address);
	return 0;
}

void quota_leader_tick(struct quota_leader *q)
{
	struct feed *f = atomic_load(&q->feed);
	struct leader_gate_facts fa;
	struct facts_buf b;
	bool resynced;

	if (!atomic_load(&q->lease))
		return;
	facts(q, &fa, &b);
	resynced = f && feed_resynced(f, &q->resync);
	switch (leader_gate_step(&q->gate, &fa, mono_ms(), resynced)) {
	case LEADER_GATE_RESYNC_NEW:
		memset(&q->resync, 0, sizeof(q->resync));
		/* fall through */
	case LEADER_GATE_RESYNC_AGAIN:
		if (f)
			feed_resync(f, &q->resync);
		break;
	case LEADER_GATE_OPENED:
		log_event(LOG_INFO, "msg=\"quota decisions on\" usage_store=leader "
				    "lease=%s identity=%s",
			  q->tag, q->identity);
		break;
	case LEADER_GATE_CLOSED:
		log_event(LOG_WARN, "msg=\"quota decisions off\" usage_store=leader "
				    "lease=%s identity=%s detail=\"the Lease is lost\"",
			  q->tag, q->identity);
		break;
	case LEADER_GATE_NOTHING:
		break;
	}
}

bool quota_leader_leading(struct quota_leader *q)
{
	struct lease *l = q ? atomic_load(&q->lease) : NULL;

	return l && lease_leading(l);
}

void quota_leader_stats(struct quota_leader *q, struct quota_leader_stats *out)
{
	out->deciding = quota_leader_leading(q) &&
			leader_gate_state(&q->gate) == LEADER_GATE_OPEN;
	out->answered = atomic_load(&q->answered);
	out->failed = atomic_load(&q->failed);
	out->answered_seconds = (double)atomic_load(&q->answered_us) / 1e6;
}

bool quota_leader_ready(struct quota_leader *q, struct strbuf *why)
{
	struct lease *l = atomic_load(&q->lease), *sw = atomic_load(&q->shared_watch);

	if (l && sw && lease_tried(l) && lease_tried(sw))
		return true;
	strbuf_addf(why, "Lease %s not read yet\n", q->tag);
	return false;
}

/* ---- the leader's side: POST /peer/decide -------------------------------- */

static void refused(struct quota_leader *q, struct http_reply *out, unsigned status,
		    const char *why)
{
	long long now = (long long)(mono_ms() / 1000u), last;
	char qb[400];

	last = atomic_load(&q->refused_logged_s);
	if (now - last >= 60 &&
	    atomic_compare_exchange_strong(&q->refused_logged_s, &last, now))
		log_event(LOG_WARN, "msg=\"peer refused\" status=%u error=\"%s\"", status,
			  log_quote(why, qb, sizeof(qb)));
	http_reply_text(out, status, why);
}

void quota_leader_route(void *ctx, const struct http_request *req,
			struct http_reply *out)
{
	struct quota_leader *q = ctx;
	char token[PEER_TOKEN_LEN + 1], err[300];
	struct holder_ref *ref = NULL;
	const struct policy *p;
	struct quota_result res;
	struct workload wl;
	struct quota_claim c;
	json_error_t je;
	json_t *body, *ans;
	bool force, ok;
	char *text;

	pthread_mutex_lock(&q->mu);
	memcpy(token, q->token, sizeof(token));
	pthread_mutex_unlock(&q->mu);
	if (!token[0] || !peer_authorized(req->authorization, token)) {
		refused(q, out, 401, "not a gpugate replica of this installation "
				     "(the bearer token is not the one of the TLS key)\n");
		return;
	}
	body = json_loadb(req->body, req->len, JSON_REJECT_DUPLICATES, &je);
	if (!body) {
		snprintf(err, sizeof(err), "not JSON: %s\n", je.text);
		refused(q, out, 400, err);
		return;
	}
	p = holder_acquire(q->cfg.policy, &ref);
	ok = p && leader_wire_read_request(body, p, &wl, &c, &force, err,
					   sizeof(err) - 1) == 0;
	if (!ok) {
		if (!p)
			snprintf(err, sizeof(err), "no policy loaded");
		strcat(err, "\n");
		holder_release(ref);
		json_decref(body);
		refused(q, out, 400, err);
		return;
	}
	usage_leader_reserve(q->usage, p, &wl, &c, force, &res);
	ans = leader_wire_result(&res);
	holder_release(ref);
	json_decref(body);
	text = ans ? json_dumps(ans, JSON_COMPACT) : NULL;
	json_decref(ans);
	if (!text)
		return; /* out of memory: dropped, the follower denies */
	out->body = strdup(text); /* the server free()s it */
	jsonmem_free(text);
	if (!out->body)
		return;
	out->len = strlen(out->body);
	out->status = 200;
	out->content_type = "application/json";
}

void quota_leader_stop_leases(struct quota_leader *q)
{
	if (!q)
		return;
	lease_stop(atomic_exchange(&q->lease, NULL));
	lease_stop(atomic_exchange(&q->shared_watch, NULL));
}

void quota_leader_free(struct quota_leader *q)
{
	if (!q)
		return;
	quota_leader_stop_leases(q);
	peer_free(q->peer);
	leader_gate_destroy(&q->gate);
	pthread_mutex_destroy(&q->mu);
	free(q);
}
