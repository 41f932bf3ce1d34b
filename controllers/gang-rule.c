/* gang-rule: pure decisions of route gates (controllers/gang-rule.h). */
#include "controllers/gang-rule.h"

#include "base/text.h"
#include "policy/pool.h"

#include <stdio.h>
#include <string.h>

size_t gang_record_format(const struct gang_record *r, char *buf, size_t size)
{
	int n = snprintf(buf, size, "r=%lld n=%lld s=%d t=%s", (long long)r->released_ms,
			 (long long)r->regates, r->suspended ? 1 : 0,
			 r->tenant ? r->tenant : "");

	return n < 0 ? 0 : (size_t)n;
}

int gang_record_parse(const char *text, struct gang_record *out)
{
	const char *tenant;
	int64_t v[3];

	if (text_record_parse(text, "rns", v, &tenant) < 0 || strchr(tenant, ' ') ||
	    v[2] > 1)
		return -1;
	*out = (struct gang_record){.released_ms = v[0], .regates = v[1],
				    .suspended = v[2] == 1, .tenant = tenant};
	return 0;
}

void gang_count(const struct gang_job *j, const struct gang_pod *pods, size_t n,
		struct gang_count *out)
{
	int64_t par = j->parallelism, left;

	memset(out, 0, sizeof(*out));
	left = j->completions < 0 ? par : j->completions - j->succeeded;
	out->want = par < left ? par : left;
	if (out->want < 0)
		out->want = 0;
	for (size_t i = 0; i < n; i++) {
		const struct gang_pod *p = &pods[i];

		if (p->terminal)
			continue;
		out->active++;
		out->running += p->running;
		if (p->bound)
			out->bound++;
		else if (p->gated)
			out->gated++;
		else
			out->pending++;
		if (p->gated && p->other_gate)
			out->foreign_gate = true;
		if (p->domain && p->domain[0]) {
			if (!out->domain)
				out->domain = p->domain;
			else if (strcmp(out->domain, p->domain) != 0)
				out->split = true;
		}
	}
}

const char *gang_step_name(enum gang_step s)
{
	static const char *const names[] = {"nothing", "leave",  "wait",   "check",
					    "started", "regate", "reset",  "suspend",
					    "resume",  "clear",  "drop"};

	return (size_t)s < sizeof(names) / sizeof(names[0]) ? names[s] : "?";
}

enum gang_step gang_next(const struct gang_record *rec, const struct gang_job *j,
			 const struct gang_count *c, int64_t now_ms, int64_t timeout_s)
{
	/* Pods of the Job that gpugate's gate does not hold. */
	int64_t ungated = c->active - c->gated;

	if (j->finished)
		return rec ? GANG_DROP : GANG_NOTHING;
	if (j->suspended) {
		if (rec && rec->suspended)
			return c->active == 0 ? GANG_RESUME : GANG_NOTHING;
		return GANG_LEAVE; /* its tenant's, or Kueue's */
	}
	if (rec && rec->suspended)
		/* Resumed (by gpugate, whose clear of s did not land): its new
		 * pods are gated.  Else the suspend did not land: again. */
		return ungated == 0 ? GANG_CLEAR : GANG_SUSPEND;
	if (c->want > 0 && c->running >= c->want)
		return rec ? GANG_STARTED : GANG_NOTHING;
	if (rec && rec->released_ms > 0 && now_ms - rec->released_ms >= timeout_s * 1000) {
		if (ungated == 0)
			return GANG_RESET;
		if (!j->kueue)
			return GANG_REGATE;
	}
	if (c->gated == 0)
		return GANG_NOTHING;
	if (c->foreign_gate || c->bound + c->gated + c->pending != c->want)
		return GANG_WAIT;
	return GANG_CHECK;
}

bool gang_release_ok(const struct gang_count *c, const struct pool_check *pc,
		     bool required, const char **domain)
{
	*domain = NULL;
	if (c->split || !pc->known || pc->fit.verdict != POOL_FITS)
		return false;
	if (!required)
		return true;
	*domain = c->domain ? c->domain : pc->fit.domain;
	return *domain && (*domain)[0];
}
