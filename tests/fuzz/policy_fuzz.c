/*
 * libFuzzer driver for the policy loader: policy/schema.c (libcyaml and the
 * shape checker), policy/validate.c, policy/model.c and the lookups, then a
 * few admissions under the parsed policy (policy/decide*.c, webhook/apply.c).
 *
 * Input: a policy file.  policy_parse() must either
 *
 *   - fail with at least one message in the diag, every stored line
 *     "fuzz.yaml:LINE: ..." with 1 <= LINE <= lines in the input + 1, and
 *     no policy in *out; or
 *   - succeed with no message, and then:
 *       every flavor, class and tenant is found by its name (and a flavor
 *       by its resource); a class's flavor is in the policy and
 *       1 <= gpus <= maxGpus <= gpusPerNode; quota is indexed by flavor;
 *       policy_tenant_for_namespace() agrees with a plain reference (the
 *       first tenant in file order with an entry that is the name, or a
 *       glob that matches it) on every namespace entry and a few names;
 *       a Pod of each of the first classes in a namespace of a tenant that
 *       allows it, a Job of the first, and a raw nvidia.com/gpu Pod go
 *       through /mutate and /validate with the checks of
 *       admission_check.h (round trip, idempotency, encodable responses).
 *
 * The policy is freed after each input (no leaks).
 *
 *   tests/fuzz/run.sh 60 policy
 *   build/fuzz/policy_fuzz crash-file
 */
#include "tests/fuzz/admission_check.h"

#include "base/diag.h"
#include "base/log.h"
#include "policy/policy.h"

#include <fnmatch.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME "fuzz.yaml"
#define MAX_CLASSES_ADMITTED 3

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	log_set_level(LOG_ERROR);
	return 0;
}

/* Lines as libyaml counts them: LF, CR, CRLF, NEL, LS, PS. */
static unsigned long count_lines(const uint8_t *s, size_t n)
{
	unsigned long lines = 1;

	for (size_t i = 0; i < n; i++) {
		if (s[i] == '\n' ||
		    (s[i] == '\r' && !(i + 1 < n && s[i + 1] == '\n')))
			lines++;
		else if (s[i] == 0xC2 && i + 1 < n && s[i + 1] == 0x85)
			lines++;
		else if (s[i] == 0xE2 && i + 2 < n && s[i + 1] == 0x80 &&
			 (s[i + 2] == 0xA8 || s[i + 2] == 0xA9))
			lines++;
	}
	return lines;
}

static void check_errors(struct diag *d, const uint8_t *data, size_t size)
{
	unsigned long max_line = count_lines(data, size) + 1;
	const char *line = d->buf;

	if (diag_count(d) == 0)
		fuzz_fail("policy refused without a message");
	while (*line) {
		const char *nl = strchr(line, '\n');
		unsigned long n;
		char *end;

		if (!nl)
			fuzz_fail("diag line without a newline");
		if (strncmp(line, NAME ":", sizeof(NAME)) != 0) {
			fprintf(stderr, "%.*s\n", (int)(nl - line), line);
			fuzz_fail("policy error does not start with the file name");
		}
		n = strtoul(line + sizeof(NAME), &end, 10);
		if (end == line + sizeof(NAME) || end[0] != ':' || end[1] != ' ' ||
		    n < 1 || n > max_line) {
			fprintf(stderr, "%.*s\n(input has %lu lines)\n",
				(int)(nl - line), line, max_line - 1);
			fuzz_fail("policy error is not located FILE:LINE: with a "
				  "line of the input");
		}
		line = nl + 1;
	}
}

/* The documented lookup, written the obvious way. */
static const struct policy_tenant *reference_tenant(const struct policy *p,
						    const char *ns)
{
	for (size_t i = 0; i < policy_tenant_count(p); i++) {
		const struct policy_tenant *t = policy_tenant_at(p, i);

		for (size_t k = 0; k < t->n_namespaces; k++) {
			const char *e = t->namespaces[k];

			if (strpbrk(e, "*?[") ? fnmatch(e, ns, 0) == 0
					      : strcmp(e, ns) == 0)
				return t;
		}
	}
	return NULL;
}

static void check_namespace(const struct policy *p, const char *ns)
{
	if (policy_tenant_for_namespace(p, ns) != reference_tenant(p, ns)) {
		fprintf(stderr, "namespace \"%s\"\n", ns);
		fuzz_fail("policy_tenant_for_namespace disagrees with the first "
			  "matching tenant");
	}
}

static void check_model(const struct policy *p)
{
	static const char *const names[] = {
		"", "default", "research", "research-x", "sandbox-1", "a", "*",
		"[", "product-inference", "kube-system",
	};
	const struct policy_flavor *found[8];

	if (!policy_settings(p) || !policy_checkpoint(p) ||
	    strcmp(policy_source(p), NAME) != 0)
		fuzz_fail("policy without settings, checkpoint or source");
	for (size_t i = 0; i < policy_flavor_count(p); i++) {
		const struct policy_flavor *f = policy_flavor_at(p, i);
		size_t n;
		bool self = false;

		if (!f || f->index != i || policy_flavor_find(p, f->name) != f)
			fuzz_fail("flavor not found by its name");
		if (!policy_is_flavor_resource(p, f->resource))
			fuzz_fail("flavor resource not known");
		n = policy_flavors_for_resource(p, f->resource, found, 8);
		for (size_t k = 0; k < n && k < 8; k++)
			self |= found[k] == f;
		if (n == 0 || (n <= 8 && !self))
			fuzz_fail("flavor not found by its resource");
	}
	if (policy_flavor_at(p, policy_flavor_count(p)) ||
	    policy_class_at(p, policy_class_count(p)) ||
	    policy_tenant_at(p, policy_tenant_count(p)) ||
	    policy_cohort_name(p, policy_cohort_count(p)))
		fuzz_fail("lookup past the end is not NULL");
	for (size_t i = 0; i < policy_class_count(p); i++) {
		const struct policy_class *c = policy_class_at(p, i);

		if (!c || c->index != i || policy_class_find(p, c->name) != c)
			fuzz_fail("class not found by its name");
		if (!c->flavor || policy_flavor_find(p, c->flavor->name) != c->flavor)
			fuzz_fail("class without a flavor of the policy");
		if (c->gpus < 1 || c->gpus > c->max_gpus ||
		    c->max_gpus > c->flavor->gpus_per_node)
			fuzz_fail("class gpus not within 1..maxGpus..gpusPerNode");
	}
	for (size_t i = 0; i < policy_tenant_count(p); i++) {
		const struct policy_tenant *t = policy_tenant_at(p, i);

		if (!t || t->index != i || policy_tenant_find(p, t->name) != t)
			fuzz_fail("tenant not found by its name");
		if (t->cohort_index >= (int)policy_cohort_count(p) ||
		    (t->cohort_index >= 0 &&
		     strcmp(policy_cohort_name(p, (size_t)t->cohort_index),
			    t->cohort) != 0))
			fuzz_fail("tenant cohort not in the policy");
		for (size_t k = 0; k < t->n_quota; k++) {
			const struct policy_quota *q = &t->quota[k];

			if (policy_tenant_quota(t, q->flavor) != q)
				fuzz_fail("quota not indexed by its flavor");
			if (q->nominal < 0 || q->nominal > POLICY_MAX_QUOTA)
				fuzz_fail("quota out of range");
		}
		for (size_t k = 0; k < t->n_classes; k++)
			if (!policy_tenant_allows_class(t, t->classes[k]))
				fuzz_fail("tenant does not allow a class it lists");
		for (size_t k = 0; k < t->n_namespaces; k++)
			check_namespace(p, t->namespaces[k]);
	}
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		check_namespace(p, names[i]);
	(void)policy_class_find(p, "train-large");
	(void)policy_tenant_find(p, "");
}

/* A literal namespace of a tenant that allows c (and maps back to it). */
static const char *namespace_for(const struct policy *p,
				 const struct policy_class *c)
{
	for (size_t i = 0; i < policy_tenant_count(p); i++) {
		const struct policy_tenant *t = policy_tenant_at(p, i);

		if (c && !policy_tenant_allows_class(t, c))
			continue;
		for (size_t k = 0; k < t->n_namespaces; k++)
			if (!strpbrk(t->namespaces[k], "*?[") &&
			    policy_tenant_for_namespace(p, t->namespaces[k]) == t)
				return t->namespaces[k];
	}
	return NULL;
}

static void admit(const struct policy *p, json_t *doc)
{
	struct review rv;
	char err[400];
	char *body = json_dumps(doc, JSON_COMPACT);

	if (!body)
		fuzz_fail("out of memory");
	if (review_decode(body, strlen(body), &rv, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		fuzz_fail("the harness built a review that does not decode");
	}
	check_review(p, &rv, NULL);
	review_release(&rv);
	free(body);
	json_decref(doc);
}

/* An AdmissionReview of a CREATE; labels NULL for a raw GPU request. */
static json_t *review_of(bool job, const char *ns, const char *label,
			 const char *cls)
{
	json_t *labels = label ? json_pack("{ss}", label, cls) : json_object();
	json_t *c = json_pack("{ss ss}", "name", "main", "image", "x");
	json_t *pod_spec, *obj;

	if (!label)
		json_object_set_new(c, "resources",
				    json_pack("{s{ss}}", "limits",
					      "nvidia.com/gpu", "1"));
	pod_spec = json_pack("{s[o] ss}", "containers", c, "restartPolicy",
			     "Never");
	if (job)
		obj = json_pack("{ss ss s{ss ss so} s{si s{s{} so}}}",
				"apiVersion", "batch/v1", "kind", "Job",
				"metadata", "name", "j", "namespace", ns,
				"labels", labels, "spec", "parallelism", 2,
				"template", "metadata", "spec", pod_spec);
	else
		obj = json_pack("{ss ss s{ss ss so} so}", "apiVersion", "v1",
				"kind", "Pod", "metadata", "name", "p",
				"namespace", ns, "labels", labels, "spec",
				pod_spec);
	if (!obj)
		fuzz_fail("out of memory (or a label key that is not UTF-8)");
	return json_pack("{ss ss s{ss s{ss ss ss} ss ss ss so}}", "apiVersion",
			 REVIEW_API_VERSION, "kind", "AdmissionReview",
			 "request", "uid", "fuzz", "kind", "group",
			 job ? "batch" : "", "version", "v1", "kind",
			 job ? "Job" : "Pod", "operation", "CREATE",
			 "namespace", ns, "name", job ? "j" : "p", "object",
			 obj);
}

static void check_admissions(const struct policy *p)
{
	const char *label = policy_settings(p)->class_label;
	const char *ns;

	for (size_t i = 0; i < policy_class_count(p) && i < MAX_CLASSES_ADMITTED;
	     i++) {
		const struct policy_class *c = policy_class_at(p, i);

		ns = namespace_for(p, c);
		if (!ns)
			continue;
		admit(p, review_of(false, ns, label, c->name));
		if (i == 0)
			admit(p, review_of(true, ns, label, c->name));
	}
	ns = namespace_for(p, NULL);
	if (ns)
		admit(p, review_of(false, ns, NULL, NULL));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct diag d;
	struct policy *sentinel = (struct policy *)&d, *p = sentinel;

	diag_init(&d);
	if (policy_parse(NAME, (const char *)data, size, &p, &d) < 0) {
		if (p != sentinel && p != NULL)
			fuzz_fail("failed policy_parse stored a policy");
		check_errors(&d, data, size);
		return 0;
	}
	if (!p || p == sentinel)
		fuzz_fail("policy_parse succeeded without a policy");
	if (diag_count(&d) != 0) {
		fprintf(stderr, "%s", diag_text(&d));
		fuzz_fail("policy_parse succeeded with messages");
	}
	check_model(p);
	check_admissions(p);
	policy_free(p);
	return 0;
}
