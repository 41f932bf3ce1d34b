/*
 * gpugate explain: what the webhook would do with a manifest, offline.
 *
 * The manifest goes through the same pipeline as a request to the server
 * (handler_evaluate): /mutate, then the patch applied with the strict
 * applier, then /validate on the result, as the kube-apiserver would.
 * Nothing is in use: explain knows no cluster, so quota shows what the
 * request needs against empty usage.
 */
#include "base/diag.h"
#include "base/file.h"
#include "cli/cmd.h"
#include "codec/yamljson.h"
#include "policy/policy.h"
#include "webhook/handler.h"
#include "webhook/patch.h"
#include "webhook/review.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MANIFEST_MAX (8u << 20)

/*
 * Exit statuses: SPEC section 7 fixes 0, 1 and 2.  A failure of gpugate
 * itself (out of memory, a patch that does not apply to the object it was
 * computed from) is none of those: it must not read as a denial, nor send
 * the user looking for a fault in a manifest that has none.
 */
enum {
	EXPLAIN_ADMITTED = 0,
	EXPLAIN_DENIED = 1,
	EXPLAIN_BAD_INPUT = 2,
	EXPLAIN_INTERNAL = 3,
};

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
	      "Exit status: 0 admitted; 1 denied; 2 bad input (unreadable file, not\n"
	      "YAML or JSON, not a Pod or Job, a malformed manifest, a missing or\n"
	      "invalid policy); 3 internal error (out of memory, or a gpugate bug:\n"
	      "please report it).  Errors go to standard error.\n",
	      out);
}

/* Returns 0, or the exit status of the failure (message in d). */
static int read_input(const char *path, char **out, size_t *len, struct diag *d)
{
	int rc = file_read(path, MANIFEST_MAX, FILE_STDIN_DASH, out, len, d);

	if (rc == FILE_OOM)
		return EXPLAIN_INTERNAL;
	return rc < 0 ? EXPLAIN_BAD_INPUT : 0;
}

/*
 * Wraps the object in an AdmissionReview and decodes it like the server.
 * Returns 0, or the exit status of the failure (message in d).
 */
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
		diag_addf(d, "gpugate explain: out of memory");
		return EXPLAIN_INTERNAL;
	}
	rc = review_decode(text, strlen(text), rv, err, sizeof(err));
	free(text);
	if (rc < 0) {
		diag_addf(d, "%s", err);
		return EXPLAIN_BAD_INPUT;
	}
	return 0;
}

/* Whether kubectl prints text as one of the warnings of dec. */
static bool warns(const struct decision *dec, const char *text)
{
	for (size_t i = 0; i < dec->n_warnings; i++)
		if (strcmp(dec->warnings[i], text) == 0)
			return true;
	return false;
}

/*
 * A rule that warn mode lets pass is said once: as the warning kubectl
 * prints when a phase (this one, or later, the /validate that follows; NULL
 * when none) carries it, else under the phase.
 */
static void print_decision(const char *phase, const struct evaluation *ev,
			   const struct evaluation *later)
{
	const struct decision *dec = &ev->dec;

	if (!dec->allowed)
		printf("%-10s denied (rule %s)\n           %s\n", phase, dec->rule,
		       dec->message);
	else if (dec->violation) {
		printf("%-10s admitted in %s mode despite rule %s\n", phase,
		       policy_mode_name(dec->mode), dec->rule);
		if (!warns(dec, dec->message) &&
		    !(later && warns(&later->dec, dec->message)))
			printf("           %s\n", dec->message);
	} else
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
	/* A rule that denies before the claim is made (security, sharing)
	 * leaves it empty: nothing is said of what was not counted. */
	printf("\ncount      %u per pod", dec->count);
	if (dec->claim.pods > 0)
		printf(" x %" PRId64 " pod%s = %" PRId64 " %s", dec->claim.pods,
		       dec->claim.pods == 1 ? "" : "s", dec->claim.units,
		       dec->flavor->resource);
	putchar('\n');
	if (dec->has_quota)
		printf("quota      %s (nominal %" PRId64 ", at most %" PRId64
		       " with borrowing; judged against empty usage)\n",
		       quota_position_name(q->position), q->nominal, q->ceiling);
	/* The checkpoint plan is made only for what is admitted. */
	if (dec->allowed)
		printf("preempt    %s\n", dec->plan.preemptible
					       ? "yes: checkpoint hooks injected"
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

static int out_of_memory(struct diag *d)
{
	diag_addf(d, "gpugate explain: out of memory");
	return EXPLAIN_INTERNAL;
}

static void internal_error(struct diag *d, const char *what, const char *detail)
{
	diag_addf(d, "gpugate explain: internal error (please report it): %s: %s",
		  what, detail);
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
	int c, rc = EXPLAIN_BAD_INPUT;

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
			return EXPLAIN_BAD_INPUT;
		}
	}
	if (!policy_path || optind != argc - 1) {
		fprintf(stderr, "gpugate explain: --policy and one manifest are "
				"required\n");
		cmd_explain_usage(stderr);
		return EXPLAIN_BAD_INPUT;
	}
	evaluation_init(&mut);
	evaluation_init(&val);
	diag_init(&d);
	if (policy_load(policy_path, &p, &d) < 0)
		goto out;
	rc = read_input(argv[optind], &text, &len, &d);
	if (rc != 0)
		goto out;
	rc = EXPLAIN_BAD_INPUT;
	if (yamljson_parse(argv[optind], text, len, &obj, &d) < 0)
		goto out;
	kind = json_string_value(json_object_get(obj, "kind"));
	api = json_string_value(json_object_get(obj, "apiVersion"));
	if (!json_is_object(obj) || !kind || !api ||
	    !((strcmp(kind, "Pod") == 0 && strcmp(api, "v1") == 0) ||
	      (strcmp(kind, "Job") == 0 && strcmp(api, "batch/v1") == 0))) {
		diag_addf(&d, "%s: explain reads a Pod (apiVersion v1) or a Job "
			      "(apiVersion batch/v1)",
			  argv[optind]);
		goto out;
	}
	if (!ns)
		ns = json_string_value(
			json_object_get(json_object_get(obj, "metadata"), "namespace"));
	if (!ns || !ns[0])
		ns = "default";

	rc = make_review(obj, ns, "explain-mutate", &rv, &d);
	if (rc != 0)
		goto out;
	if (handler_evaluate(p, &rv, HANDLER_MUTATE, NULL, NULL, &mut) < 0) {
		rc = out_of_memory(&d);
		goto out;
	}
	if (mut.bad_request) {
		/* What the server answers with HTTP 400 in the review: the
		 * manifest is at fault, not the policy. */
		diag_addf(&d, "%s: %s", argv[optind], mut.error);
		rc = EXPLAIN_BAD_INPUT;
		goto out;
	}
	if (!mut.dec.allowed) {
		print_mapping(&mut, ns);
		print_decision("mutate", &mut, NULL);
		rc = EXPLAIN_DENIED;
		goto out;
	}
	/* The manifest was read and judged: a failure from here on is
	 * gpugate's own. */
	rc = EXPLAIN_INTERNAL;
	if (mut.patch_ops > 0) {
		/* The text the server would send, read back and applied as
		 * strictly as the apiserver would. */
		json_error_t jerr;
		struct diag pd;
		char first[400];

		patch = json_loadb(mut.patch.buf, mut.patch.len, JSON_ALLOW_NUL, &jerr);
		if (!patch) {
			internal_error(&d, "the patch is not JSON", jerr.text);
			goto out;
		}
		diag_init(&pd);
		result = patch_apply(obj, patch, &pd);
		if (!result) {
			diag_first(&pd, first, sizeof(first));
			internal_error(&d, "the patch does not apply", first);
			goto out;
		}
	} else {
		result = json_incref(obj);
	}
	if (make_review(result, ns, "explain-validate", &rv2, &d) != 0)
		goto out;
	if (handler_evaluate(p, &rv2, HANDLER_VALIDATE, NULL, NULL, &val) < 0) {
		rc = out_of_memory(&d);
		goto out;
	}
	if (val.bad_request) {
		internal_error(&d, "/validate refuses the mutated object", val.error);
		goto out;
	}
	dump = json_dumps(result, JSON_INDENT(2));
	if (!dump) {
		rc = out_of_memory(&d);
		goto out;
	}
	print_mapping(&mut, ns);
	print_decision("mutate", &mut, &val);
	if (patch)
		print_patch(patch);
	else
		printf("\npatch: none (nothing to change)\n");
	printf("\n");
	print_decision("validate", &val, NULL);
	printf("\nresult:\n%s\n", dump);
	free(dump);
	rc = val.dec.allowed ? EXPLAIN_ADMITTED : EXPLAIN_DENIED;
out:
	fflush(stdout);
	if (rc == EXPLAIN_BAD_INPUT || rc == EXPLAIN_INTERNAL)
		fputs(diag_text(&d), stderr);
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
