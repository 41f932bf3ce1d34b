/*
 * decide: the messages of a decision (docs/users.md lists every one):
 * recording a rule's violation (decide_violate(), the first one wins),
 * adding warnings, the lists a message names (the classes and sharing
 * modes a tenant may use), and the denial of a claim the usage store could
 * not decide (decide_unavailable()).
 */
#include "policy/decide-int.h"

#include "base/text.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- messages --------------------------------------------------------- */

void decide_add_warning(struct decision *out, const char *fmt, ...)
{
	va_list ap;
	char *w;

	if (out->n_warnings >= DECIDE_MAX_WARNINGS)
		return;
	w = out->warnings[out->n_warnings++];
	va_start(ap, fmt);
	vsnprintf(w, DECIDE_WARNING_LEN, fmt, ap);
	va_end(ap);
	/* One line of valid UTF-8 (text_clean also blanks control characters). */
	text_clean(w);
}

void decide_note(struct decision *out, const char *text)
{
	decide_add_warning(out, "%s", text);
}

size_t decide_problem_count(const struct decision *dec)
{
	return dec->n_warnings - (dec->success_warned ? 1 : 0);
}

/*
 * A pod the isolation rules deny in a namespace of no tenant looks like a
 * cluster component rather than a tenant's work: its denial says how to
 * exempt it (a tenant's namespace cannot be exempted).
 */
static void exemption_hint(const struct ctx *c, char *msg, size_t size)
{
	size_t n = strlen(msg);

	snprintf(msg + n, size - n,
		 "; if this is a cluster component (the GPU Operator's, "
		 "NVSentinel's, a DCGM exporter), exempt it: "
		 "settings.exemptions.namespaces [\"%.63s\"] or serviceAccounts "
		 "[\"%.63s/%.200s\"] (docs/policy.md, \"exemptions\")",
		 c->wl->namespace ? c->wl->namespace : "",
		 c->wl->namespace ? c->wl->namespace : "",
		 c->wl->pod.service_account ? c->wl->pod.service_account : "default");
}

bool decide_violate(struct ctx *c, enum rules_id rule, const char *fmt, ...)
{
	struct decision *out = c->out;
	va_list ap;
	int n;

	if (out->violation)
		return out->mode == POLICY_MODE_ENFORCE;
	n = snprintf(out->message, sizeof(out->message), "gpugate: ");
	va_start(ap, fmt);
	vsnprintf(out->message + n, sizeof(out->message) - (size_t)n, fmt, ap);
	va_end(ap);
	if (rule == RULES_SECURITY && out->mode == POLICY_MODE_ENFORCE &&
	    !policy_tenant_for_namespace(c->p, c->wl->namespace))
		exemption_hint(c, out->message, sizeof(out->message));
	text_clean(out->message);
	out->violation = true;
	out->rule = rules_name(rule);
	switch (out->mode) {
	case POLICY_MODE_ENFORCE:
		out->allowed = false;
		out->code = 403;
		return true;
	case POLICY_MODE_WARN:
		if (c->in->phase == DECIDE_VALIDATE)
			decide_add_warning(out, "%s", out->message);
		return false;
	case POLICY_MODE_AUDIT:
		return false;
	}
	return false;
}

/* Appends s to a comma-separated list in buf, keeping it bounded. */
void decide_list_add(char *buf, size_t size, const char *s)
{
	size_t len = strlen(buf);

	if (len && strcmp(buf + (len >= 5 ? len - 5 : 0), ", ...") == 0)
		return;
	if (len + strlen(s) + 8 >= size) {
		snprintf(buf + len, size - len, "%s...", len ? ", " : "");
		return;
	}
	snprintf(buf + len, size - len, "%s%s", len ? ", " : "", s);
}

/* The classes tenant t can actually use: allowed, sharing ok, has quota. */
void decide_usable_classes(const struct policy *p, const struct policy_tenant *t,
			   char *buf, size_t size)
{
	buf[0] = '\0';
	for (size_t i = 0; i < policy_class_count(p); i++) {
		const struct policy_class *cl = policy_class_at(p, i);

		if (policy_tenant_can_use(t, cl))
			decide_list_add(buf, size, cl->name);
	}
	if (!buf[0])
		snprintf(buf, size, "none");
}

/* " (did you mean \"C\"?)" for the class t can use that is nearest to
 * name (text_nearest_consider()), or "". */
const char *decide_nearest_usable_class(const struct policy *p,
					const struct policy_tenant *t,
					const char *name, char *buf, size_t size)
{
	struct text_nearest near = {0};

	for (size_t i = 0; i < policy_class_count(p); i++) {
		const struct policy_class *cl = policy_class_at(p, i);

		if (policy_tenant_can_use(t, cl))
			text_nearest_consider(&near, name, cl->name);
	}
	return text_nearest_hint(&near, "", buf, size);
}

void decide_sharing_list(const struct policy_tenant *t, char *buf, size_t size)
{
	buf[0] = '\0';
	for (int s = 0; s < POLICY_SHARING__COUNT; s++)
		if (policy_tenant_allows_sharing(t, (enum policy_sharing)s))
			decide_list_add(buf, size, policy_sharing_name((enum policy_sharing)s));
	if (!buf[0])
		snprintf(buf, size, "none");
}

/*
 * The usage store could not decide (the shared store of several replicas
 * could not be read or written in time): denied in every mode, since what
 * would be admitted could not be counted.
 */
void decide_unavailable(struct ctx *c, const struct quota_result *q)
{
	c->out->mode = POLICY_MODE_ENFORCE;
	c->out->violation = false;
	decide_violate(c, RULES_QUOTA,
		"cannot reserve quota for tenant \"%s\" now (%s); nothing was "
		"admitted: retry in a moment",
		c->out->claim.tenant->name, q->reason[0] ? q->reason : "no reason given");
}
