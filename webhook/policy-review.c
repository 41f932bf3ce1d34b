/*
 * The policy ConfigMap's admission (webhook/policy-review.h).
 */
#include "webhook/policy-review.h"

#include "base/diag.h"
#include "base/log.h"
#include "codec/jget.h"
#include "policy/policy.h"
#include "webhook/review.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

/* Appends the lines of text to out, "; "-separated (an admission message
 * is one line), while they fit; says how many did not. */
static void append_lines(char *out, size_t size, const char *text)
{
	size_t n = strlen(out);
	unsigned left = 0;

	for (const char *line = text; *line;) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);

		if (len && !left && n + len + 2 < size - 40) {
			out[n++] = line == text ? ' ' : ';';
			if (line != text)
				out[n++] = ' ';
			memcpy(out + n, line, len);
			n += len;
			out[n] = '\0';
		} else if (len) {
			left++;
		}
		line += len + (end ? 1 : 0);
	}
	if (left)
		snprintf(out + n, size - n, "; and %u more", left);
}

void policy_review_judge(const void *configmap_json, struct policy_verdict *v)
{
	const json_t *cm = configmap_json;
	const json_t *text = jget(jget(cm, "data"), POLICY_REVIEW_KEY);
	const char *ns = json_string_value(jget(jget(cm, "metadata"), "namespace"));
	const char *name = json_string_value(jget(jget(cm, "metadata"), "name"));
	struct policy *p = NULL;
	struct diag d, w;

	memset(v, 0, sizeof(*v));
	v->allowed = true;
	if (!cm)
		return;
	if (!json_is_string(text)) {
		v->allowed = false;
		v->errors = 1;
		snprintf(v->message, sizeof(v->message),
			 "gpugate: ConfigMap %.63s/%.253s has no key " POLICY_REVIEW_KEY
			 " (binaryData is not read): gpugate reads its policy from "
			 "data." POLICY_REVIEW_KEY,
			 ns ? ns : "", name ? name : "");
		return;
	}
	diag_init(&d);
	diag_init(&w);
	if (policy_parse_warn(POLICY_REVIEW_KEY, json_string_value(text),
			      json_string_length(text), &p, &d, &w) < 0) {
		v->allowed = false;
		v->errors = diag_count(&d);
		snprintf(v->message, sizeof(v->message),
			 "gpugate: the policy in ConfigMap %.63s/%.253s is invalid "
			 "(%u error%s; the running gpugate keeps its current policy; "
			 "check it with `gpugate check FILE`):",
			 ns ? ns : "", name ? name : "", v->errors,
			 v->errors == 1 ? "" : "s");
		append_lines(v->message, sizeof(v->message), diag_text(&d));
	} else {
		const char *t = diag_text(&w);

		while (*t && v->n_warnings < POLICY_REVIEW_MAX_WARNINGS) {
			size_t len = strcspn(t, "\n");

			snprintf(v->warnings[v->n_warnings++], POLICY_REVIEW_WARNING_LEN,
				 "gpugate: %.*s", (int)len, t);
			t += len + (t[len] == '\n');
		}
	}
	policy_free(p);
}

void policy_review_route(void *ctx, const struct http_request *req,
			 struct http_reply *out)
{
	struct review rv;
	struct policy_verdict v;
	struct review_response resp = {0};
	const char *warnings[POLICY_REVIEW_MAX_WARNINGS];
	char err[400];

	(void)ctx;
	if (review_decode(req->body, req->len, &rv, err, sizeof(err)) < 0) {
		char msg[500];
		int n = snprintf(msg, sizeof(msg), "gpugate: bad request: %s\n", err);

		out->status = 400;
		out->content_type = "text/plain";
		out->body = strdup(msg);
		out->len = out->body ? (size_t)n : 0;
		review_release(&rv);
		return;
	}
	policy_review_judge(rv.op == WL_CREATE || rv.op == WL_UPDATE ? rv.object : NULL,
			    &v);
	resp.allowed = v.allowed;
	resp.code = v.allowed ? 0 : 422;
	resp.message = v.allowed ? NULL : v.message;
	for (size_t i = 0; i < v.n_warnings; i++)
		warnings[i] = v.warnings[i];
	resp.warnings = warnings;
	resp.n_warnings = v.n_warnings;
	log_event(v.allowed ? LOG_INFO : LOG_WARN,
		  "msg=\"policy review\" namespace=%s name=%s allowed=%s errors=%u "
		  "warnings=%zu dry_run=%s",
		  rv.namespace[0] ? rv.namespace : "-", rv.name[0] ? rv.name : "-",
		  v.allowed ? "true" : "false", v.errors, v.n_warnings,
		  rv.dry_run ? "true" : "false");
	out->body = review_encode(rv.uid, &resp, &out->len);
	out->status = out->body ? 200 : 500;
	out->content_type = "application/json";
	review_release(&rv);
}
