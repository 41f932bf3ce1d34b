/*
 * The health loop's words and rules (policy/health.h).  Pure.
 */
#include "policy/health.h"

#include "base/text.h"
#include "policy/policy.h"
#include "policy/pool.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

const char *health_on_unhealthy_name(enum health_on_unhealthy m)
{
	switch (m) {
	case HEALTH_ON_CHECKPOINT: return "checkpoint";
	case HEALTH_ON_SIGNAL: return "signal";
	case HEALTH_ON_NONE: return "none";
	}
	return "?";
}

bool health_on_unhealthy_parse(const char *s, enum health_on_unhealthy *out)
{
	static const enum health_on_unhealthy all[] = {HEALTH_ON_CHECKPOINT,
						       HEALTH_ON_SIGNAL, HEALTH_ON_NONE};

	for (size_t i = 0; s && i < sizeof(all) / sizeof(all[0]); i++)
		if (strcmp(s, health_on_unhealthy_name(all[i])) == 0) {
			*out = all[i];
			return true;
		}
	return false;
}

size_t health_record_format(const struct health_record *r, char *buf, size_t size)
{
	int n = snprintf(buf, size, "o=%lld c=%lld n=%lld t=%s", (long long)r->out_ms,
			 (long long)r->cleared_ms, (long long)r->times,
			 r->why ? r->why : "");

	return n < 0 ? 0 : (size_t)n;
}

int health_record_parse(const char *text, struct health_record *out)
{
	const char *why;
	int64_t v[3];

	if (text_record_parse(text, "ocn", v, &why) < 0 || v[0] <= 0 ||
	    (v[1] != 0 && v[1] < v[0]) || v[2] < 1)
		return -1;
	*out = (struct health_record){.out_ms = v[0], .cleared_ms = v[1], .times = v[2],
				      .why = why};
	return 0;
}

void health_marks_read(const struct pool_node *n, struct health_marks *out)
{
	*out = (struct health_marks){0};
	if (n->health_record && health_record_parse(n->health_record, &out->record) == 0)
		out->has_record = true;
	for (size_t i = 0; i < n->n_taints; i++)
		if (strcmp(n->taints[i].key, HEALTH_TAINT) == 0) {
			out->taint_value = n->taints[i].value ? n->taints[i].value : "";
			break;
		}
}

bool health_marked(const struct pool_node *n)
{
	struct health_marks m;

	health_marks_read(n, &m);
	return m.has_record || m.taint_value;
}

/* The value of n's label key, or NULL (pool.c's pool_node_label, which
 * this module may not call: the pool reads the marks). */
static const char *label_of(const struct pool_node *n, const char *key)
{
	for (size_t i = 0; i < n->n_labels; i++)
		if (strcmp(n->labels[i].key, key) == 0)
			return n->labels[i].value;
	return NULL;
}

/* The label kv on n (value NULL: any value). */
static bool has_label(const struct pool_node *n, const char *key, const char *value)
{
	const char *v = label_of(n, key);

	return v && (!value || strcmp(v, value) == 0);
}

/* "2026-12-05T12:00:00Z" of ms since the epoch. */
static void utc(int64_t ms, char *buf, size_t size)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	if (!gmtime_r(&t, &tm) || !strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(buf, size, "%lld", (long long)(ms / 1000));
}

bool health_return(const struct policy_health *h, const struct pool_node *n,
		   int64_t cleared_ms, int64_t now_ms, char *wait, size_t size)
{
	bool label_ok = true, settle_ok = true;
	char until[32];

	if (wait && size)
		wait[0] = '\0';
	if (!h)
		return true;
	if (h->return_label_key)
		label_ok = has_label(n, h->return_label_key, h->return_label_value);
	if (h->return_settle_s > 0)
		settle_ok = cleared_ms > 0 && now_ms - cleared_ms >= h->return_settle_s * 1000;
	if (label_ok && settle_ok)
		return true;
	if (!wait || !size)
		return false;
	if (!label_ok)
		snprintf(wait, size, "label %s%s%s", h->return_label_key,
			 h->return_label_value ? "=" : "",
			 h->return_label_value ? h->return_label_value : "");
	if (!settle_ok) {
		size_t len = strlen(wait);

		if (cleared_ms > 0)
			utc(cleared_ms + h->return_settle_s * 1000, until, sizeof(until));
		else
			snprintf(until, sizeof(until), "%lld s", (long long)h->return_settle_s);
		if (len < size)
			snprintf(wait + len, size - len, "%ssettle %s%s", len ? " and " : "",
				 cleared_ms > 0 ? "until " : "for ", until);
	}
	return false;
}

enum health_node_step health_node_next(const struct policy_health *h,
				       const struct pool_node *n,
				       const struct health_marks *m, bool signal_now,
				       int64_t now_ms)
{
	const char *want;

	if (signal_now) {
		if (!m->has_record || m->record.cleared_ms != 0)
			return HEALTH_MARK_OUT;
		want = HEALTH_TAINT_OUT;
	} else {
		if (!m->has_record)
			return m->taint_value ? HEALTH_RETURN : HEALTH_KEEP;
		if (m->record.cleared_ms == 0)
			return HEALTH_VALIDATE;
		if (health_return(h, n, m->record.cleared_ms, now_ms, NULL, 0))
			return HEALTH_RETURN;
		want = HEALTH_TAINT_VALIDATING;
	}
	return m->taint_value && strcmp(m->taint_value, want) == 0 ? HEALTH_KEEP
								    : HEALTH_FIX_TAINT;
}

bool health_drained_by_other(const struct policy_health *h, const struct pool_node *n,
			     char *why, size_t size)
{
	if (why && size)
		why[0] = '\0';
	for (size_t i = 0; h && i < h->n_drained_by; i++) {
		const char *v = label_of(n, h->drained_by[i].key);

		if (v && (!h->drained_by[i].value || strcmp(v, h->drained_by[i].value) == 0)) {
			if (why && size)
				snprintf(why, size, "label %s=%s", h->drained_by[i].key, v);
			return true;
		}
	}
	return false;
}
