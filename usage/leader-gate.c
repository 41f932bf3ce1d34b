/* The start gate of usage/leader-gate.h. */
#include "usage/leader-gate.h"

#include <stdio.h>

void leader_gate_init(struct leader_gate *g, uint64_t grace_ms)
{
	pthread_mutex_init(&g->mu, NULL);
	g->state = LEADER_GATE_IDLE;
	g->since_ms = 0;
	g->grace_ms = grace_ms ? grace_ms : LEADER_GATE_GRACE_MS;
}

void leader_gate_destroy(struct leader_gate *g)
{
	pthread_mutex_destroy(&g->mu);
}

/* Under g->mu: follows what the Lease says now.  A replica that leads and
 * was idle starts its wait; one that does not lead is idle. */
static enum leader_gate_state follow(struct leader_gate *g, bool leading,
				     uint64_t now_ms)
{
	enum leader_gate_state was = g->state;

	if (!leading) {
		g->state = LEADER_GATE_IDLE;
	} else if (g->state == LEADER_GATE_IDLE) {
		g->state = LEADER_GATE_WAITING;
		g->since_ms = now_ms;
	}
	return was;
}

void leader_gate_changed(struct leader_gate *g, bool leading, uint64_t now_ms)
{
	pthread_mutex_lock(&g->mu);
	if (leading) {
		/* Taken (again): the whole wait, whatever was before. */
		g->state = LEADER_GATE_WAITING;
		g->since_ms = now_ms;
	} else {
		g->state = LEADER_GATE_IDLE;
	}
	pthread_mutex_unlock(&g->mu);
}

enum leader_gate_ask leader_gate_step(struct leader_gate *g,
				      const struct leader_gate_facts *f,
				      uint64_t now_ms, bool resynced)
{
	enum leader_gate_ask ask = LEADER_GATE_NOTHING;
	enum leader_gate_state was;

	pthread_mutex_lock(&g->mu);
	was = follow(g, f->leading && !f->blocked, now_ms);
	switch (g->state) {
	case LEADER_GATE_IDLE:
		if (was == LEADER_GATE_OPEN)
			ask = LEADER_GATE_CLOSED;
		break;
	case LEADER_GATE_WAITING:
		if (now_ms - g->since_ms >= g->grace_ms) {
			g->state = LEADER_GATE_RESYNCING;
			ask = LEADER_GATE_RESYNC_NEW;
		}
		break;
	case LEADER_GATE_RESYNCING:
		if (resynced) {
			g->state = LEADER_GATE_OPEN;
			ask = LEADER_GATE_OPENED;
		} else {
			ask = LEADER_GATE_RESYNC_AGAIN;
		}
		break;
	case LEADER_GATE_OPEN:
		break;
	}
	pthread_mutex_unlock(&g->mu);
	return ask;
}

enum usage_role leader_gate_role(struct leader_gate *g,
				 const struct leader_gate_facts *f,
				 uint64_t now_ms, char *who, size_t size)
{
	enum leader_gate_state st;
	uint64_t since;

	if (f->blocked) {
		snprintf(who, size, "%s", f->blocked);
		return USAGE_ROLE_NONE;
	}
	pthread_mutex_lock(&g->mu);
	follow(g, f->leading, now_ms);
	st = g->state;
	since = g->since_ms;
	pthread_mutex_unlock(&g->mu);
	if (f->leading) {
		if (st == LEADER_GATE_OPEN)
			return USAGE_ROLE_LEAD;
		snprintf(who, size,
			 "the quota leader took Lease %s %.1f s ago and decides after "
			 "%.0f s and a relist",
			 f->lease, (double)(now_ms - since) / 1000.0,
			 (double)g->grace_ms / 1000.0);
		return USAGE_ROLE_NONE;
	}
	if (f->holder && f->holder[0]) {
		if (f->address && f->address[0]) {
			snprintf(who, size, "%s", f->address);
			return USAGE_ROLE_FOLLOW;
		}
		snprintf(who, size,
			 "replica %s holds Lease %s and publishes no address "
			 "(--usage-store memory?)",
			 f->holder, f->lease);
		return USAGE_ROLE_NONE;
	}
	if (f->error && f->error[0])
		snprintf(who, size, "no replica holds Lease %s (%s)",
			 f->lease, f->error);
	else
		snprintf(who, size, "no replica holds Lease %s as this replica last "
				    "read it",
			 f->lease);
	return USAGE_ROLE_NONE;
}

enum leader_gate_state leader_gate_state(struct leader_gate *g)
{
	enum leader_gate_state st;

	pthread_mutex_lock(&g->mu);
	st = g->state;
	pthread_mutex_unlock(&g->mu);
	return st;
}
