/*
 * The webhook registrations agree with the table of workload kinds
 * (policy/kinds.c): manifests/webhooks.yaml, and the chart's
 * templates/webhooks.yaml, from which manifests/ is rendered.
 *
 * Each rule is spread into one registration per webhook, group, version,
 * resource and operation, and the set must be exactly what the rows' hooks
 * say (plus OTHER below, which are no workloads): a kind's resource
 * missing from a webhook it belongs to fails, and so does a rule naming a
 * resource (or subresource, or operation) that no row registers there.
 * Each webhook of kinds_webhooks() must call its path.
 *
 * gpugate's ClusterRole (manifests/rbac.yaml, the chart's templates/rbac.yaml)
 * must let it list and watch every kind that holds quota (the feed's
 * watch, kube/feed.c) and get every kind whose scale it judges (the parent
 * of a Scale, webhook/handler.c).
 *
 * The chart is a Helm template, and helm is not installed for `make test`:
 * its text is read as YAML once its actions are taken out (chart_yaml()).
 * The rules, the names and the paths are literal text there.
 */
#include "base/diag.h"
#include "base/file.h"
#include "base/strbuf.h"
#include "codec/jget.h"
#include "codec/yamljson.h"
#include "policy/kinds.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MANIFEST "manifests/webhooks.yaml"
#define CHART "charts/gpugate/templates/webhooks.yaml"
#define RBAC "manifests/rbac.yaml"
#define CHART_RBAC "charts/gpugate/templates/rbac.yaml"

/* What the webhooks register beside workloads. */
static const struct {
	const char *webhook, *path, *group, *version, *resource;
	unsigned ops;
} OTHER[] = {
	/* The policy ConfigMap, checked at kubectl apply. */
	{"policy.gpugate.io", "/validate-policy", "", "v1", "configmaps",
	 KIND_CREATE | KIND_UPDATE},
};

#define N_OTHER (sizeof(OTHER) / sizeof(OTHER[0]))

static const char *const OP_NAMES[] = {"CREATE", "UPDATE", "DELETE"};

/* "webhook group/version resource OP": one registration, as a set key. */
static void add(json_t *set, const char *webhook, const char *group, const char *version,
		const char *resource, const char *sub, const char *op, const char *why)
{
	char key[512];

	snprintf(key, sizeof(key), "%s %s%s%s %s%s%s %s", webhook, group, group[0] ? "/" : "",
		 version, resource, sub[0] ? "/" : "", sub, op);
	cr_assert_eq(json_object_set_new(set, key, json_string(why)), 0);
}

static void add_ops(json_t *set, const char *webhook, const char *group,
		    const char *version, const char *resource, const char *sub,
		    unsigned ops, const char *why)
{
	for (unsigned i = 0; i < 3; i++)
		if (ops & (1u << i))
			add(set, webhook, group, version, resource, sub, OP_NAMES[i], why);
}

/* What the table says: key -> where it comes from. */
static json_t *expected(void)
{
	json_t *set = json_object();
	size_t n;
	const struct kind_def *all = kinds_all(&n);
	char why[160];

	for (size_t i = 0; i < n; i++) {
		snprintf(why, sizeof(why), "policy/kinds.c, row %s", all[i].kind);
		for (const struct kind_hook *h = all[i].hooks; h && h->webhook; h++)
			add_ops(set, h->webhook->name, all[i].group, all[i].version,
				all[i].resource, h->subresource, h->ops, why);
	}
	for (size_t i = 0; i < N_OTHER; i++)
		add_ops(set, OTHER[i].webhook, OTHER[i].group, OTHER[i].version,
			OTHER[i].resource, "", OTHER[i].ops,
			"tests/unit/webhook/webhook_rules_test.c, OTHER");
	return set;
}

/* The path a webhook must call, or NULL when gpugate has no such webhook. */
static const char *path_of(const char *webhook)
{
	size_t n;
	const struct kind_webhook *w = kinds_webhooks(&n);

	for (size_t i = 0; i < n; i++)
		if (strcmp(w[i].name, webhook) == 0)
			return w[i].path;
	for (size_t i = 0; i < N_OTHER; i++)
		if (strcmp(OTHER[i].webhook, webhook) == 0)
			return OTHER[i].path;
	return NULL;
}

static const char *str(const json_t *v)
{
	return json_is_string(v) ? json_string_value(v) : "?";
}

/* A rule's resource "deployments/scale": its resource and subresource. */
static void split(const char *res, char *r, size_t rsize, const char **sub)
{
	const char *slash = strchr(res, '/');

	snprintf(r, rsize, "%.*s", slash ? (int)(slash - res) : (int)strlen(res), res);
	*sub = slash ? slash + 1 : "";
}

/* The registrations of the webhook configurations in docs, into set; the
 * problems with names and paths into problems. */
static void registered(const char *file, const struct yamljson_doc *docs, size_t n,
		       json_t *set, struct strbuf *problems)
{
	size_t nw;
	const struct kind_webhook *ours = kinds_webhooks(&nw);
	json_t *seen = json_object();

	for (size_t d = 0; d < n; d++) {
		const char *kind = json_string_value(jget(docs[d].value, "kind"));
		size_t i;
		json_t *hook;

		if (!kind || (strcmp(kind, "MutatingWebhookConfiguration") != 0 &&
			      strcmp(kind, "ValidatingWebhookConfiguration") != 0))
			continue;
		json_array_foreach(jget(docs[d].value, "webhooks"), i, hook) {
			const char *name = str(jget(hook, "name"));
			const char *path =
				str(jget(jget(jget(hook, "clientConfig"), "service"), "path"));
			const char *want = path_of(name);
			size_t j;
			json_t *rule;

			json_object_set_new(seen, name, json_true());
			if (!want)
				strbuf_addf(problems, "%s: webhook %s: not a webhook gpugate has "
						      "(policy/kinds.c, kinds_webhooks)\n",
					    file, name);
			else if (strcmp(path, want) != 0)
				strbuf_addf(problems, "%s: webhook %s: calls %s, not %s\n", file,
					    name, path, want);
			json_array_foreach(jget(hook, "rules"), j, rule) {
				size_t a, b, c, e;
				json_t *g, *v, *r, *o;

				json_array_foreach(jget(rule, "apiGroups"), a, g)
				json_array_foreach(jget(rule, "apiVersions"), b, v)
				json_array_foreach(jget(rule, "resources"), c, r)
				json_array_foreach(jget(rule, "operations"), e, o) {
					char res[128];
					const char *sub;

					split(str(r), res, sizeof(res), &sub);
					add(set, name, str(g), str(v), res, sub, str(o), "");
				}
			}
		}
	}
	for (size_t i = 0; i < nw; i++)
		if (!jget(seen, ours[i].name))
			strbuf_addf(problems, "%s: webhook %s is missing\n", file, ours[i].name);
	json_decref(seen);
}

/* Both ways: what the table has and the file lacks, and the reverse. */
static void compare(const char *file, json_t *want, json_t *have, struct strbuf *problems)
{
	const char *key;
	json_t *v;

	json_object_foreach(want, key, v)
		if (!jget(have, key))
			strbuf_addf(problems, "%s: missing: %s (%s)\n", file, key,
				    json_string_value(v));
	json_object_foreach(have, key, v)
		if (!jget(want, key))
			strbuf_addf(problems,
				    "%s: extra: %s (no row of policy/kinds.c registers it, "
				    "nor OTHER in tests/unit/webhook/webhook_rules_test.c)\n",
				    file, key);
}

/* file's problems against the table; "" when none (the caller frees). */
static char *check(const char *file, const char *text, size_t len)
{
	struct yamljson_doc *docs = NULL;
	size_t n = 0;
	struct diag d;
	struct strbuf problems;
	json_t *want = expected(), *have = json_object();

	strbuf_init(&problems, 1 << 20);
	strbuf_add(&problems, "", 0);
	diag_init(&d);
	cr_assert_eq(yamljson_parse_all(file, text, len, &docs, &n, &d), 0, "%s",
		     diag_text(&d));
	registered(file, docs, n, have, &problems);
	compare(file, want, have, &problems);
	yamljson_docs_free(docs, n);
	json_decref(want);
	json_decref(have);
	return strbuf_take(&problems, NULL);
}

static char *read_file(const char *path, size_t *len)
{
	struct diag d;
	char *text = NULL;

	diag_init(&d);
	cr_assert_eq(file_read(path, 1 << 20, 0, &text, len, &d), 0, "%s", diag_text(&d));
	return text;
}

/*
 * The chart's template as YAML: a line that is only a Helm action is
 * dropped, but for the clientConfig include, whose path is kept
 * ("clientConfig: {service: {path: /mutate}}"); any other action within a
 * line becomes X.
 */
static char *chart_yaml(const char *text, size_t *len)
{
	struct strbuf out;

	strbuf_init(&out, 1 << 20);
	for (const char *line = text; *line;) {
		const char *end = strchr(line, '\n');
		size_t n = end ? (size_t)(end - line) : strlen(line);
		size_t indent = strspn(line, " ");

		if (strncmp(line + indent, "{{", 2) == 0) {
			const char *cc = strstr(line, "\"gpugate.clientConfig\"");
			const char *p = cc && cc < line + n ? strstr(cc, "\"path\" \"") : NULL;

			if (p && p < line + n) {
				p += strlen("\"path\" \"");
				strbuf_addf(&out, "%*sclientConfig: {service: {path: \"%.*s\"}}\n",
					    (int)indent, "", (int)strcspn(p, "\"\n"), p);
			}
		} else {
			for (size_t i = 0; i < n;) {
				const char *close = strncmp(line + i, "{{", 2) == 0
							    ? strstr(line + i, "}}")
							    : NULL;

				if (close && close < line + n) {
					strbuf_add(&out, "X", 1);
					i = (size_t)(close + 2 - line);
				} else {
					strbuf_add(&out, line + i, 1);
					i++;
				}
			}
			strbuf_add(&out, "\n", 1);
		}
		line += n + (end ? 1 : 0);
	}
	cr_assert(!strbuf_failed(&out));
	return strbuf_take(&out, len);
}

/* file as YAML: a Helm template (helm) with its actions taken out. */
static char *read_yaml(const char *file, bool helm, size_t *len)
{
	char *text = read_file(file, len), *yaml;

	if (!helm)
		return text;
	yaml = chart_yaml(text, len);
	free(text);
	return yaml;
}

static void expect_webhooks_agree(const char *file, bool helm)
{
	size_t len;
	char *text = read_yaml(file, helm, &len);
	char *problems = check(file, text, len);

	cr_expect_str_empty(problems, "the webhook rules disagree with policy/kinds.c:\n%s",
			    problems);
	free(problems);
	free(text);
}

Test(webhook_rules, manifests_agree_with_the_kinds_table)
{
	expect_webhooks_agree(MANIFEST, false);
}

Test(webhook_rules, chart_agrees_with_the_kinds_table)
{
	expect_webhooks_agree(CHART, true);
}

/* The check sees what it is for: a resource gone from a webhook, and one
 * added that no row registers, each named with its file and webhook. */
Test(webhook_rules, a_disagreement_is_named)
{
	size_t len;
	char *text = read_file(MANIFEST, &len);
	char *bad = malloc(len + 64), *problems;
	const char *from = "resources: [\"deployments\", \"statefulsets\", \"replicasets\", "
			   "\"daemonsets\"]";
	const char *to = "resources: [\"deployments\", \"replicasets\", \"daemonsets\", "
			 "\"leaderworkersets\"]";
	char *at = strstr(text, from);

	cr_assert_not_null(at);
	cr_assert_not_null(bad);
	/* The first such rule: mutate-templates.gpugate.io's. */
	snprintf(bad, len + 64, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
	problems = check(MANIFEST, bad, strlen(bad));
	cr_expect(strstr(problems, MANIFEST ": missing: mutate-templates.gpugate.io apps/v1 "
					    "statefulsets CREATE (policy/kinds.c, row "
					    "StatefulSet)\n"),
		  "%s", problems);
	cr_expect(strstr(problems, MANIFEST ": extra: mutate-templates.gpugate.io apps/v1 "
					    "leaderworkersets UPDATE (no row"),
		  "%s", problems);
	free(problems);
	free(bad);
	free(text);
}

static bool has_string(const json_t *list, const char *s)
{
	size_t i;
	json_t *v;

	json_array_foreach(list, i, v)
		if (json_is_string(v) && strcmp(json_string_value(v), s) == 0)
			return true;
	return false;
}

/* Whether a `type` (ClusterRole, Role) of docs named `role` (NULL: any)
 * lets gpugate `verb` the kind's resource. */
static bool allowed_by(const struct yamljson_doc *docs, size_t n, const char *type,
		       const char *role, const struct kind_def *k, const char *verb)
{
	for (size_t d = 0; d < n; d++) {
		const json_t *doc = docs[d].value;
		size_t i;
		json_t *rule;

		if (!json_is_string(jget(doc, "kind")) ||
		    strcmp(json_string_value(jget(doc, "kind")), type) != 0 ||
		    (role && strcmp(str(jget(jget(doc, "metadata"), "name")), role) != 0))
			continue;
		json_array_foreach(jget(doc, "rules"), i, rule)
			if (has_string(jget(rule, "apiGroups"), k->group) &&
			    has_string(jget(rule, "resources"), k->resource) &&
			    has_string(jget(rule, "verbs"), verb))
				return true;
	}
	return false;
}

/* Whether ClusterRole `role` of docs lets gpugate `verb` the kind's resource. */
static bool allowed(const struct yamljson_doc *docs, size_t n, const char *role,
		    const struct kind_def *k, const char *verb)
{
	return allowed_by(docs, n, "ClusterRole", role, k, verb);
}

/* Gang start (controllers/gang-probe.h, controllers/gang-groups.h): the
 * ClusterRole creates, reads and lists Workloads and PodGroups; a Role (in
 * gpugate's namespace) lets the probe dry-run a Job create. */
static void check_gang_rbac(const struct yamljson_doc *docs, size_t n, const char *file,
			    const char *role, const char *shown, struct strbuf *problems)
{
	static const struct kind_def objs[] = {
		{.group = "scheduling.k8s.io", .version = "v1beta1", .resource = "workloads"},
		{.group = "scheduling.k8s.io", .version = "v1beta1", .resource = "podgroups"},
	};
	static const struct kind_def jobs = {.group = "batch", .version = "v1",
					     .resource = "jobs"};
	const char *const verbs[] = {"get", "list", "create"};

	for (size_t i = 0; i < 2; i++)
		for (size_t v = 0; v < 3; v++)
			if (!allowed(docs, n, role, &objs[i], verbs[v]))
				strbuf_addf(problems,
					    "%s: ClusterRole %s: missing %s on %s/%s %s "
					    "(gang start, route podgroup)\n",
					    file, shown, verbs[v], objs[i].group,
					    objs[i].version, objs[i].resource);
	if (!allowed_by(docs, n, "Role", NULL, &jobs, "create"))
		strbuf_addf(problems, "%s: no Role: missing create on batch/v1 jobs (the "
				      "gang-start probe's dry run)\n",
			    file);
}

/* The template keeper (controllers/claim-templates.h): get, list, watch,
 * create and delete claim templates, never update or patch (a template's
 * spec is immutable; a stranger's is never touched). */
static void check_template_rbac(const struct yamljson_doc *docs, size_t n,
				const char *file, const char *role, const char *shown,
				struct strbuf *problems)
{
	static const struct kind_def tmpl = {.group = "resource.k8s.io", .version = "v1",
					     .resource = "resourceclaimtemplates"};
	const char *const yes[] = {"get", "list", "watch", "create", "delete"};
	const char *const no[] = {"update", "patch"};

	for (size_t v = 0; v < sizeof(yes) / sizeof(yes[0]); v++)
		if (!allowed(docs, n, role, &tmpl, yes[v]))
			strbuf_addf(problems, "%s: ClusterRole %s: missing %s on "
					      "resource.k8s.io/v1 resourceclaimtemplates "
					      "(the template keeper)\n",
				    file, shown, yes[v]);
	for (size_t v = 0; v < sizeof(no) / sizeof(no[0]); v++)
		if (allowed(docs, n, role, &tmpl, no[v]))
			strbuf_addf(problems, "%s: ClusterRole %s: %s on resource.k8s.io/v1 "
					      "resourceclaimtemplates (never: the template "
					      "keeper only creates and deletes)\n",
				    file, shown, no[v]);
}

/* The pool of DRA flavors (kube/feed.c, docs/design/dra.md D3): get,
 * list and watch ResourceSlices, DeviceTaintRules and DeviceClasses; never
 * write them. */
static void check_pool_rbac(const struct yamljson_doc *docs, size_t n, const char *file,
			    const char *role, const char *shown, struct strbuf *problems)
{
	static const char *const res[] = {"resourceslices", "devicetaintrules",
					  "deviceclasses"};
	const char *const yes[] = {"get", "list", "watch"};
	const char *const no[] = {"create", "update", "patch", "delete"};

	for (size_t r = 0; r < sizeof(res) / sizeof(res[0]); r++) {
		const struct kind_def k = {.group = "resource.k8s.io", .version = "v1",
					   .resource = res[r]};

		for (size_t v = 0; v < sizeof(yes) / sizeof(yes[0]); v++)
			if (!allowed(docs, n, role, &k, yes[v]))
				strbuf_addf(problems, "%s: ClusterRole %s: missing %s on "
						      "resource.k8s.io/v1 %s (the DRA pool)\n",
					    file, shown, yes[v], res[r]);
		for (size_t v = 0; v < sizeof(no) / sizeof(no[0]); v++)
			if (allowed(docs, n, role, &k, no[v]))
				strbuf_addf(problems, "%s: ClusterRole %s: %s on "
						      "resource.k8s.io/v1 %s (never: the pool "
						      "only reads)\n",
					    file, shown, no[v], res[r]);
	}
}

/* file's ClusterRole `role` (shown as `shown`) against the table: "" when
 * it lets gpugate do all it must (the caller frees). */
static char *check_rbac(const char *file, const char *text, size_t len, const char *role,
			const char *shown)
{
	struct yamljson_doc *docs = NULL;
	size_t n = 0, nk;
	const struct kind_def *all = kinds_all(&nk);
	struct diag d;
	struct strbuf problems;

	strbuf_init(&problems, 1 << 20);
	strbuf_add(&problems, "", 0);
	diag_init(&d);
	cr_assert_eq(yamljson_parse_all(file, text, len, &docs, &n, &d), 0, "%s",
		     diag_text(&d));
	for (size_t i = 0; i < nk; i++) {
		const struct kind_def *k = &all[i];
		const char *const verbs[] = {"list", "watch"};

		for (size_t v = 0; k->holds_quota && v < 2; v++)
			if (!allowed(docs, n, role, k, verbs[v]))
				strbuf_addf(&problems,
					    "%s: ClusterRole %s: missing %s on %s%s%s %s (it holds "
					    "quota: policy/kinds.c, row %s)\n",
					    file, shown, verbs[v], k->group, k->group[0] ? "/" : "",
					    k->version, k->resource, k->kind);
		if (kinds_hook(k, NULL, "scale") && !allowed(docs, n, role, k, "get"))
			strbuf_addf(&problems,
				    "%s: ClusterRole %s: missing get on %s%s%s %s (its scale is "
				    "judged: policy/kinds.c, row %s)\n",
				    file, shown, k->group, k->group[0] ? "/" : "", k->version,
				    k->resource, k->kind);
	}
	check_gang_rbac(docs, n, file, role, shown, &problems);
	check_template_rbac(docs, n, file, role, shown, &problems);
	check_pool_rbac(docs, n, file, role, shown, &problems);
	yamljson_docs_free(docs, n);
	return strbuf_take(&problems, NULL);
}

/* role is the ClusterRole's name in file, shown as shown. */
static void expect_rbac_agrees(const char *file, bool helm, const char *role,
			       const char *shown)
{
	size_t len;
	char *text = read_yaml(file, helm, &len);
	char *problems = check_rbac(file, text, len, role, shown);

	cr_expect_str_empty(problems, "gpugate's role disagrees with policy/kinds.c:\n%s",
			    problems);
	free(problems);
	free(text);
}

Test(webhook_rules, rbac_lets_gpugate_read_the_kinds)
{
	expect_rbac_agrees(RBAC, false, "gpugate", "gpugate");
	/* The chart names the role {{ include "gpugate.fullname" . }}. */
	expect_rbac_agrees(CHART_RBAC, true, "X", "gpugate.fullname");
}
