/*
 * idle: the pure rules of idle GPUs (policy/idle.h).
 */
#include "policy/idle.h"

#include "policy/policy.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

const char *idle_action_name(enum idle_action a)
{
	return a == IDLE_ACTION_RECLAIM ? "reclaim" : "warn";
}

int idle_parse_below(const char *s, double *ratio)
{
	long whole = 0, frac = 0, scale = 1;
	const char *c = s;

	if (!s || *c < '0' || *c > '9')
		return -1;
	for (; *c >= '0' && *c <= '9'; c++) {
		whole = whole * 10 + (*c - '0');
		if (whole > 100)
			return -1;
	}
	if (*c == '.') {
		c++;
		if (*c < '0' || *c > '9')
			return -1;
		for (; *c >= '0' && *c <= '9'; c++) {
			if (scale == 100)
				return -1; /* at most two decimals */
			frac = frac * 10 + (*c - '0');
			scale *= 10;
		}
	}
	if (c[0] != '%' || c[1])
		return -1;
	/* In hundredths of a percent, exact: 0 < x <= 10000. */
	long hundredths = whole * 100 + frac * (100 / scale);
	if (hundredths <= 0 || hundredths > 10000)
		return -1;
	*ratio = (double)hundredths / 10000.0;
	return 0;
}

int idle_parse_for(const char *s, int64_t *seconds)
{
	int64_t total = 0;
	const char *c = s;

	if (!s || !*s)
		return -1;
	while (*c) {
		int64_t n = 0, unit;

		if (*c < '0' || *c > '9')
			return -1;
		for (; *c >= '0' && *c <= '9'; c++) {
			n = n * 10 + (*c - '0');
			if (n > 100000000)
				return -1;
		}
		switch (*c++) {
		case 's': unit = 1; break;
		case 'm': unit = 60; break;
		case 'h': unit = 3600; break;
		case 'd': unit = 86400; break;
		default: return -1;
		}
		total += n * unit;
		if (total > (int64_t)1 << 40)
			return -1;
	}
	*seconds = total;
	return 0;
}

const struct policy_idle *idle_rule(const struct policy_tenant *t,
				    const struct policy_class *c)
{
	if (!t)
		return NULL;
	if (c && c->idle)
		return c->idle;
	return t->idle;
}

int64_t idle_step_s(int64_t window_s)
{
	int64_t step = window_s / 4;

	if (step > 60)
		step = 60;
	return step < 1 ? 1 : step;
}

int idle_query_text(char *buf, size_t size, enum idle_query q, const char *metric,
		    int64_t window_s, int64_t recent_s)
{
	/* Per pod: the mean over its devices (a pod of 8 GPUs with one busy
	 * is 12.5 % busy), as a ratio. */
	char per_pod[256];
	bool percent = strcmp(metric, IDLE_METRIC_UTIL) == 0;
	int n;

	n = snprintf(per_pod, sizeof(per_pod), "avg by (namespace, pod) (%s{pod!=\"\"})%s",
		     metric, percent ? " / 100" : "");
	if (n < 0 || (size_t)n >= sizeof(per_pod))
		return -1;
	switch (q) {
	case IDLE_Q_PEAK:
		n = snprintf(buf, size, "max_over_time((%s)[%llds:%llds])", per_pod,
			     (long long)window_s, (long long)idle_step_s(window_s));
		break;
	case IDLE_Q_FIRST:
		n = snprintf(buf, size, "min_over_time(timestamp(%s)[%llds:%llds])", per_pod,
			     (long long)window_s, (long long)idle_step_s(window_s));
		break;
	case IDLE_Q_RECENT:
		n = snprintf(buf, size,
			     "avg by (namespace, pod) (avg_over_time(%s{pod!=\"\"}[%llds]))%s",
			     metric, (long long)(recent_s < 1 ? 1 : recent_s),
			     percent ? " / 100" : "");
		break;
	default:
		return -1;
	}
	return n < 0 || (size_t)n >= size ? -1 : 0;
}

const char *idle_verdict_name(enum idle_verdict v)
{
	static const char *const names[] = {"no-rule", "no-data", "young", "busy", "idle"};

	return (unsigned)v < sizeof(names) / sizeof(names[0]) ? names[v] : "?";
}

enum idle_verdict idle_judge(const struct policy_idle *rule, const struct idle_pod *pod,
			     int64_t window_s, int64_t now_ms)
{
	int64_t for_ms, slack_ms;

	if (!rule)
		return IDLE_NO_RULE;
	if (!pod->s.found || isnan(pod->s.peak))
		return IDLE_NO_DATA;
	for_ms = rule->for_s * 1000;
	if (pod->running_ms <= 0 || now_ms - pod->running_ms < for_ms)
		return IDLE_YOUNG;
	slack_ms = idle_step_s(window_s) * 1000;
	if (pod->s.first_ms <= 0 || pod->s.first_ms > now_ms - for_ms + slack_ms)
		return IDLE_NO_DATA;
	return pod->s.peak >= rule->below ? IDLE_BUSY : IDLE_IDLE;
}

enum idle_verdict idle_judge_job(const enum idle_verdict *v, size_t n)
{
	static const enum idle_verdict order[] = {IDLE_BUSY, IDLE_NO_DATA, IDLE_YOUNG,
						  IDLE_NO_RULE};
	size_t idle = 0;

	if (!n)
		return IDLE_NO_DATA;
	for (size_t i = 0; i < n; i++)
		idle += v[i] == IDLE_IDLE;
	if (idle == n)
		return IDLE_IDLE;
	for (size_t k = 0; k < sizeof(order) / sizeof(order[0]); k++)
		for (size_t i = 0; i < n; i++)
			if (v[i] == order[k])
				return order[k];
	return IDLE_NO_DATA;
}

void idle_describe(char *buf, size_t size, const struct policy_idle *rule, double peak)
{
	snprintf(buf, size, "below %s for %s (highest %.1f%%)", rule->below_text,
		 rule->for_text, peak * 100.0);
}

void idle_share_add(struct idle_share *s, int64_t units, const struct idle_util *u)
{
	double h;

	if (!u || units <= 0 || isnan(u->hour))
		return;
	h = u->hour < 0 ? 0 : u->hour > 1 ? 1 : u->hour;
	s->busy += (double)units * h;
	s->units += units;
}

double idle_share_of(const struct idle_share *s)
{
	if (s->units <= 0)
		return -1;
	return s->busy / (double)s->units;
}
