/*
 * gpugate explain: what the webhook would do with a manifest, offline.
 *
 * The manifest goes through the same pipeline as a request to the server
 * (handler_evaluate): /mutate, then the patch applied with the strict
 * applier, then /validate on the result, as the kube-apiserver would.
 * Nothing is in use: explain knows no cluster, so quota shows what the
 * request needs against empty usage.
 */
#include "policy/diag.h"
#include "policy/policy.h"
#include "webhook/cmd.h"
#include "webhook/handler.h"
#include "webhook/patch.h"
#include "webhook/review.h"
#include "webhook/yamljson.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MANIFEST_MAX (8u << 20)

void cmd_explain_usage(FILE *out)
{
	fputs("usage: gpugate explain --policy FILE [--namespace NS] FILE\n"
	      "\n"
	      "Shows what gpugate does with a Pod or batch/v1 Job manifest (YAML or\n"
	      "JSON; FILE may be - for standard input): the decision and its reasons,\n"
	      "the warnings kubectl would print, the JSON Patch, and the resulting\n"
	      "object.  The namespace defaults to the manifest's, else \"default\".\n"
	      "Quota is judged against empty usage: explain knows no cluster.\n"
	      "\n"
	      "Exit status: 0 admitted, 1 denied, 2 bad input.\n",
	      out);
}

static char *read_input(const char *path, size_t *len, struct diag *d)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
	char *buf;
	size_t n;

	if (!f) {
		diag_addf(d, "%s: cannot open: %s", path, strerror(errno));
		return NULL;
	}
	buf = malloc(MANIFEST_MAX + 1);
	if (!buf) {
		diag_addf(d, "%s: out of memory", path);
		if (f != stdin)
			fclose(f);
		return NULL;
	}
	n = fread(buf, 1, MANIFEST_MAX + 1, f);
	if (f != stdin)
		fclose(f);
	if (n > MANIFEST_MAX) {
		diag_addf(d, "%s: larger than %u bytes", path, MANIFEST_MAX);
		free(buf);
		return NULL;
	}
	buf[n] = '\0';
	*len = n;
	return buf;
}

/* Wraps the object in an AdmissionReview and decodes it like the server. */
static int make_review(const json_t *obj, const char *ns, const char *uid,
		       struct review *rv, struct diag *d)
{
	const char *kind = json_string_value(json_object_get(obj, "kind"));
	const char *name = json_string_value(
		json_object_get(json_object_get(obj, "metadata"), "name"));
	bool job = strcmp(kind, "Job") == 0;
	json_t *req;
	char *text;
	char err[400];
	int rc;

	req = json_pack("{s:s,s:s,s:{s:s,s:{s:s,s:s,s:s},s:{s:s,s:s,s:s},s:s,s:s,"
			"s:s,s:O,s:b}}",
			"apiVersion", REVIEW_API_VERSION, "kind", "AdmissionReview",
			"request", "uid", uid, "kind", "group", job ? "batch" : "",
			"version", "v1", "kind", kind, "resource", "group",
			job ? "batch" : "", "version", "v1", "resource",
			job ? "jobs" : "pods", "namespace", ns, "name", name ? name : "",
			"operation", "CREATE", "object", obj, "dryRun", 1);
	text = req ? json_dumps(req, JSON_COMPACT) : NULL;
	json_decref(req);
	if (!text) {
		diag_addf(d, "out of memory");
		return -1;
	}
	rc = review_decode(text, strlen(text), rv, err, sizeof(err));
	free(text);
	if (rc < 0)
		diag_addf(d, "%s", err);
	return rc;
}

static void print_decision(const char *phase, const struct evaluation *ev)
{
	const struct decision *dec = &ev->dec;

	if (ev->bad_request) {
		printf("%-10s denied: %s\n", phase, ev->error);
		return;
	}
	if (!dec->allowed)
		printf("%-10s denied (rule %s)\n           %s\n", phase, dec->rule,
		       dec->message);
	else if (dec->violation)
		printf("%-10s admitted in %s mode despite rule %s\n           %s\n",
		       phase, policy_mode_name(dec->mode), dec->rule, dec->message);
	else
		printf("%-10s admitted\n", phase);
	for (size_t i = 0; i < dec->n_warnings; i++)
		printf("           warning: %s\n", dec->warnings[i]);
}

static void print_mapping(const struct evaluation *ev, const char *ns)
{
	const struct decision *dec = &ev->dec;
	const struct quota_result *q = &dec->quota;

	printf("namespace  %s -> tenant %s\n", ns,
	       dec->tenant ? dec->tenant->name : "(none)");
	if (!dec->cls)
		return;
	printf("class      %s%s%s%s\n", dec->cls->name,
	       dec->cls->description[0] ? " (" : "", dec->cls->description,
	       dec->cls->description[0] ? ")" : "");
	printf("flavor     %s: %s, %s sharing, nodeSelector", dec->flavor->name,
	       dec->flavor->resource, policy_sharing_name(dec->flavor->sharing));
	for (size_t i = 0; i < dec->flavor->n_node_selector; i++)
		printf(" %s=%s", dec->flavor->node_selector[i].key,
		       dec->flavor->node_selector[i].value);
	printf("\ncount      %u per pod x %" PRId64 " pod%s = %" PRId64 " %s\n",
	       dec->count, dec->claim.pods, dec->claim.pods == 1 ? "" : "s",
	       dec->claim.units, dec->flavor->resource);
	if (dec->has_quota)
		printf("quota      %s (nominal %" PRId64 ", at most %" PRId64
		       " with borrowing; judged against empty usage)\n",
		       quota_position_name(q->position), q->nominal, q->ceiling);
	printf("preempt    %s\n", dec->plan.preemptible ? "yes: checkpoint hooks injected"
						       : "no");
}

static void print_patch(const json_t *patch)
{
	size_t i;
	json_t *op;

	printf("\npatch (%zu operation%s, RFC 6902):\n", json_array_size(patch),
	       json_array_size(patch) == 1 ? "" : "s");
	json_array_foreach(patch, i, op) {
		char *v = json_dumps(json_object_get(op, "value"),
				     JSON_COMPACT | JSON_ENCODE_ANY);

		printf("  %-7s %s%s%s\n", json_string_value(json_object_get(op, "op")),
		       json_string_value(json_object_get(op, "path")), v ? " " : "",
		       v ? v : "");
		free(v);
	}
}

int cmd_explain(int argc, char **argv)
{
	static const struct option opts[] = {
		{"policy", required_argument, NULL, 'p'},
		{"namespace", required_argument, NULL, 'n'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *policy_path = NULL, *ns = NULL, *kind, *api;
	struct policy *p = NULL;
	struct review rv = {0}, rv2 = {0};
	struct evaluation mut, val;
	json_t *obj = NULL, *result = NULL, *patch = NULL;
	char *text = NULL, *dump;
	size_t len = 0;
	struct diag d;
	int c, rc = 2;

	optind = 1;
	while ((c = getopt_long(argc, argv, "hn:", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			policy_path = optarg;
			break;
		case 'n':
			ns = optarg;
			break;
		case 'h':
			cmd_explain_usage(stdout);
			return 0;
		default:
			cmd_explain_usage(stderr);
			return 2;
		}
	}
	if (!policy_path || optind != argc - 1) {
		fprintf(stderr, "gpugate explain: --policy and one manifest are "
				"required\n");
		cmd_explain_usage(stderr);
		return 2;
	}
	evaluation_init(&mut);
	evaluation_init(&val);
	diag_init(&d);
	if (policy_load(policy_path, &p, &d) < 0)
		goto bad;
	text = read_input(argv[optind], &len, &d);
	if (!text || yamljson_parse(argv[optind], text, len, &obj, &d) < 0)
		goto bad;
	kind = json_string_value(json_object_get(obj, "kind"));
	api = json_string_value(json_object_get(obj, "apiVersion"));
	if (!json_is_object(obj) || !kind || !api ||
	    !((strcmp(kind, "Pod") == 0 && strcmp(api, "v1") == 0) ||
	      (strcmp(kind, "Job") == 0 && strcmp(api, "batch/v1") == 0))) {
		diag_addf(&d, "%s: explain reads a Pod (apiVersion v1) or a Job "
			      "(apiVersion batch/v1)",
			  argv[optind]);
		goto bad;
	}
	if (!ns)
		ns = json_string_value(
			json_object_get(json_object_get(obj, "metadata"), "namespace"));
	if (!ns || !ns[0])
		ns = "default";

	if (make_review(obj, ns, "explain-mutate", &rv, &d) < 0 ||
	    handler_evaluate(p, &rv, HANDLER_MUTATE, NULL, &mut) < 0)
		goto bad;
	print_mapping(&mut, ns);
	print_decision("mutate", &mut);
	if (mut.bad_request || !mut.dec.allowed) {
		rc = 1;
		goto out;
	}
	if (mut.patch_ops > 0) {
		/* The text the server would send, read back and applied as
		 * strictly as the apiserver would. */
		patch = json_loadb(mut.patch.buf, mut.patch.len, 0, NULL);
		if (!patch) {
			fprintf(stderr, "gpugate explain: out of memory\n");
			rc = 2;
			goto out;
		}
		print_patch(patch);
		result = patch_apply(obj, patch, &d);
		if (!result) {
			fprintf(stderr, "gpugate explain: internal error: the patch does "
					"not apply: %s",
				diag_text(&d));
			rc = 1;
			goto out;
		}
	} else {
		printf("\npatch: none (nothing to change)\n");
		result = json_incref(obj);
	}
	if (make_review(result, ns, "explain-validate", &rv2, &d) < 0 ||
	    handler_evaluate(p, &rv2, HANDLER_VALIDATE, NULL, &val) < 0)
		goto bad;
	printf("\n");
	print_decision("validate", &val);
	dump = json_dumps(result, JSON_INDENT(2));
	if (dump) {
		printf("\nresult:\n%s\n", dump);
		free(dump);
	}
	rc = (val.bad_request || !val.dec.allowed) ? 1 : 0;
	goto out;
bad:
	fputs(diag_text(&d), stderr);
	rc = 2;
out:
	evaluation_release(&mut);
	evaluation_release(&val);
	review_release(&rv);
	review_release(&rv2);
	json_decref(obj);
	json_decref(result);
	json_decref(patch);
	free(text);
	policy_free(p);
	return rc;
}
