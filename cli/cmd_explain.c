/*
 * gpugate explain: what the webhook would do with manifests, in CI or at a
 * desk.
 *
 * explain reads (files, directories, standard input; several YAML documents
 * each; List objects unwrapped), hands every object to the pipeline the
 * server runs (handler_evaluate): /mutate, then the patch applied with the
 * strict applier, then /validate on the result, as the kube-apiserver
 * would; and formats what it says.  What is judged is the pipeline's to
 * say: an object whose kind the review decoder does not take (WL_OTHER) is
 * "not judged".  Quota is judged against empty usage, or against the
 * cluster's with --kubeconfig (the snapshot `gpugate pool` takes).  Each
 * object is judged alone: nothing is reserved, so the objects of one run do
 * not add up.
 */
#include "base/diag.h"
#include "base/file.h"
#include "base/log.h"
#include "base/strbuf.h"
#include "cli/cluster-opts.h"
#include "cli/cmd.h"
#include "codec/yamljson.h"
#include "codec/yamlout.h"
#include "kube/config.h"
#include "policy/policy.h"
#include "usage/usage.h"
#include "webhook/handler.h"
#include "webhook/holder.h"
#include "webhook/patch.h"
#include "webhook/review.h"
#include "report/quotas.h"
#include "report/snapshot.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MANIFEST_MAX (8u << 20) /* per file, as a review body */

/*
 * Exit statuses: SPEC section 7 fixes 0, 1 and 2.  A failure of gpugate
 * itself (out of memory, a patch that does not apply to the object it was
 * computed from) is none of those: it must not read as a denial, nor send
 * the user looking for a fault in a manifest that has none.  When several
 * happen in one run the highest wins: an input that could not be read
 * leaves the verdict incomplete, so 2 beats 1 (docs/users.md).
 */
enum {
	EXPLAIN_ADMITTED = 0,
	EXPLAIN_DENIED = 1,
	EXPLAIN_BAD_INPUT = 2,
	EXPLAIN_INTERNAL = 3,
};

/* What became of one object (or of an input that gave none). */
enum verdict { V_ADMITTED, V_DENIED, V_WARNED, V_NOT_JUDGED, V_ERROR, V_N };

static const char *const verdict_names[V_N] = {
	"admitted", "denied", "warned", "not-judged", "error",
};

enum output { OUT_TEXT, OUT_JSON, OUT_YAML };

struct run {
	const struct policy *p;
	const char *ns_flag;          /* -n, or NULL */
	enum output output;
	struct usage_store *usage;    /* --kubeconfig, else NULL */
	struct inventory *inventory;  /* --kubeconfig, else NULL */
	/* --kubeconfig without the right to list the cluster: usage is what
	 * the GPUQuota objects of this namespace say; else NULL. */
	const char *quota_ns;
	/* What the cluster serves for gang start (policy/gang.h): without
	 * --kubeconfig, gpugate's own controller only (route gates). */
	unsigned gang_served;
	json_t *results;              /* -o json|yaml */
	unsigned count[V_N];
	int status;                   /* the highest exit status so far */
	bool printed;                 /* text: an object was printed */
	bool brief;                   /* text: one line per object */
	bool oom;
};

/* One object through the pipeline. */
struct outcome {
	const char *source;
	size_t doc, line; /* 1-based document index, its line */
	long item;        /* index in a List, or -1 */
	const json_t *obj;
	const char *api, *kind, *ns, *name;
	const char *generate_name; /* metadata.generateName, or NULL */
	enum verdict v;
	struct evaluation mut, val;
	bool validated;
	json_t *patch;  /* the operations, NULL for none */
	json_t *result; /* the object after the patch */
	char error[1024];
	int error_status;
};

void cmd_explain_usage(FILE *out)
{
	fputs("usage: gpugate explain --policy FILE [-n NS] [-o text|json|yaml | --brief]\n"
	      "                       [--kubeconfig FILE [--timeout SECONDS]] PATH...\n"
	      "\n"
	      "Shows what gpugate does with the objects of manifests (YAML or JSON):\n"
	      "for each Pod, Job, ResourceClaim, Deployment, StatefulSet, ReplicaSet,\n"
	      "DaemonSet and CronJob the decision and its reasons, the warnings kubectl\n"
	      "would print, the JSON Patch and the resulting object; a summary line\n"
	      "at the end.  A PATH is a file (several documents separated by ---), a\n"
	      "directory (its *.yaml, *.yml and *.json files, sorted; not its\n"
	      "subdirectories), or - for standard input (kustomize build | gpugate\n"
	      "explain --policy P -).  A List (kubectl get -o yaml) is read item by\n"
	      "item.  Objects of other kinds (ConfigMap, Service, ...) are listed as\n"
	      "not judged.  An object without metadata.namespace is in NS (default\n"
	      "\"default\"); one in another namespace than an explicit -n is an\n"
	      "error, as with kubectl.\n"
	      "\n"
	      "  -n, --namespace NS   the namespace of objects that name none\n"
	      "  -o, --output FORMAT  text (default), or json or yaml: one document\n"
	      "                       with a result per object and the summary\n"
	      "  --brief              text, one line per object: the verdict, the\n"
	      "                       object (and where it is), the reason\n"
	      "  --kubeconfig FILE    judge quota and the GPU pool against the\n"
	      "                       cluster's usage, listed once (as gpugate pool);\n"
	      "                       without it, against empty usage\n"
	      "  --timeout SECONDS    wait at most this long for the cluster's lists\n"
	      "                       (default 60)\n"
	      "\n"
	      "With --kubeconfig credentials that may not list Pods, Jobs, Nodes or\n"
	      "ResourceClaims cluster-wide (a tenant's edit or view), a 403 is said at\n"
	      "once and quota is judged against the GPUQuota objects of NS instead:\n"
	      "what the tenant uses, not the cohort's other members, and no pool;\n"
	      "the output says so (text: a \"usage\" line; json/yaml: \"usage\").\n"
	      "\n"
	      "Each object is judged alone: nothing is reserved, so the objects of one\n"
	      "run do not add up against quota.\n"
	      "\n"
	      "Exit status: 0 every object judged is admitted (warnings allowed); 1\n"
	      "some object is denied; 2 bad input (an unreadable file, not YAML or\n"
	      "JSON, not an object, a malformed manifest, a cluster that cannot be\n"
	      "read, bad options, a missing or invalid policy), even when some other\n"
	      "object is denied; 3 internal error (out of memory, or a gpugate bug:\n"
	      "please report it), over all others.  Errors go to standard error.\n",
	      out);
}

/* ---- judging ------------------------------------------------------------- */

static void fail(struct outcome *oc, int status, const char *fmt, const char *a,
		 const char *b)
{
	size_t n = sizeof(oc->error);

	oc->v = V_ERROR;
	oc->error_status = status;
	/* The messages are one line of bounded parts; a longer one is cut
	 * and says so. */
	if (snprintf(oc->error, n, fmt, a, b) >= (int)n)
		memcpy(oc->error + n - 4, "...", 4);
}

static void internal_error(struct outcome *oc, const char *what, const char *detail)
{
	fail(oc, EXPLAIN_INTERNAL,
	     "gpugate explain: internal error (please report it): %s: %s", what,
	     detail);
}

/*
 * Wraps oc->obj (or obj, the mutated object) in a dry-run CREATE review and
 * decodes it like the server: request.kind is what the object says it is.
 */
static int make_review(struct outcome *oc, const json_t *obj, const char *uid,
		       const char *where, struct review *rv)
{
	const char *slash = strchr(oc->api, '/');
	char group[256], err[400];
	json_t *req;
	char *text;
	int rc;

	snprintf(group, sizeof(group), "%.*s", slash ? (int)(slash - oc->api) : 0,
		 oc->api);
	req = json_pack("{s:s,s:s,s:{s:s,s:{s:s,s:s,s:s},s:s,s:s,s:s,s:O,s:b}}",
			"apiVersion", REVIEW_API_VERSION, "kind", "AdmissionReview",
			"request", "uid", uid, "kind", "group", group, "version",
			slash ? slash + 1 : oc->api, "kind", oc->kind, "namespace",
			oc->ns, "name", oc->name, "operation", "CREATE", "object",
			obj, "dryRun", 1);
	text = req ? json_dumps(req, JSON_COMPACT) : NULL;
	json_decref(req);
	if (!text)
		return -1;
	rc = review_decode(text, strlen(text), rv, err, sizeof(err));
	free(text);
	if (rc < 0)
		fail(oc, EXPLAIN_BAD_INPUT, "%s: %s", where, err);
	return 0;
}

/* /mutate, the patch applied, /validate.  -1 when out of memory. */
static int judge(const struct run *run, struct outcome *oc)
{
	struct review rv = {0}, rv2 = {0};
	char where[300];
	int rc = -1;

	snprintf(where, sizeof(where), "%s:%zu", oc->source, oc->line);
	if (make_review(oc, oc->obj, "explain-mutate", where, &rv) < 0)
		goto out;
	rc = 0;
	if (oc->v == V_ERROR)
		goto out;
	if (rv.kind == WL_OTHER) {
		oc->v = V_NOT_JUDGED;
		goto out;
	}
	rc = -1;
	if (handler_evaluate(run->p, &rv, HANDLER_MUTATE, run->usage,
			     run->inventory, &oc->mut) < 0)
		goto out;
	rc = 0;
	if (oc->mut.bad_request) {
		/* What the server answers with HTTP 400 in the review: the
		 * manifest is at fault, not the policy. */
		fail(oc, EXPLAIN_BAD_INPUT, "%s: %s", where, oc->mut.error);
		goto out;
	}
	if (!oc->mut.dec.allowed) {
		oc->v = V_DENIED;
		goto out;
	}
	/* The manifest was read and judged: a failure from here on is
	 * gpugate's own. */
	if (oc->mut.patch_ops > 0) {
		/* The text the server would send, read back and applied as
		 * strictly as the apiserver would. */
		json_error_t jerr;
		struct diag pd;
		char first[400];

		oc->patch = json_loadb(oc->mut.patch.buf, oc->mut.patch.len,
				       JSON_ALLOW_NUL, &jerr);
		if (!oc->patch) {
			internal_error(oc, "the patch is not JSON", jerr.text);
			goto out;
		}
		diag_init(&pd);
		oc->result = patch_apply(oc->obj, oc->patch, &pd);
		if (!oc->result) {
			diag_first(&pd, first, sizeof(first));
			internal_error(oc, "the patch does not apply", first);
			goto out;
		}
	} else {
		oc->result = json_incref((json_t *)oc->obj);
	}
	rc = -1;
	if (make_review(oc, oc->result, "explain-validate", where, &rv2) < 0 ||
	    handler_evaluate(run->p, &rv2, HANDLER_VALIDATE, run->usage,
			     run->inventory, &oc->val) < 0)
		goto out;
	rc = 0;
	if (oc->v == V_ERROR)
		goto out;
	if (oc->val.bad_request) {
		internal_error(oc, "/validate refuses the mutated object", oc->val.error);
		goto out;
	}
	oc->validated = true;
	/* Warned: a rule warn mode let pass, or a problem kubectl prints
	 * (the success line is none: settings.admissionWarnings). */
	oc->v = !oc->val.dec.allowed ? V_DENIED
		: oc->mut.dec.violation || oc->val.dec.violation ||
				decide_problem_count(&oc->mut.dec) ||
				(oc->validated && decide_problem_count(&oc->val.dec))
			? V_WARNED
			: V_ADMITTED;
out:
	review_release(&rv);
	review_release(&rv2);
	return rc;
}

/* ---- text ---------------------------------------------------------------- */

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
static void print_gang(const struct run *run, const struct decision *dec)
{
	static const char *const starts[] = {
		[POLICY_GANG_AUTO] = "auto", [POLICY_GANG_WORKLOAD] = "workload",
		[POLICY_GANG_PODGROUP] = "podgroup", [POLICY_GANG_GATES] = "gates",
		[POLICY_GANG_OFF] = "off",
	};
	const char *why = strstr(dec->plan.decision, "; gang start ");

	printf("gang start %s (settings.gangStart %s; %s)\n",
	       dec->plan.gang_route != GANG_NONE ? gang_route_name(dec->plan.gang_route)
	       : why				 ? why + strlen("; gang start ")
						 : "none",
	       starts[policy_settings(run->p)->gang_start],
	       run->gang_served & GANG_SERVES_KNOWN
		       ? "routes the cluster serves asked"
		       : "the cluster not asked: gpugate's own gate");
}

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
	/* The mapping in one line, also where kubectl is not shown it. */
	if (dec->success[0] && !dec->success_warned)
		printf("           %s\n", dec->success);
}

static void print_mapping(const struct run *run, const struct outcome *oc)
{
	const struct decision *dec = &oc->mut.dec;
	const struct quota_result *q = &dec->quota;

	printf("namespace  %s -> tenant %s\n", oc->ns,
	       dec->tenant ? dec->tenant->name : "(none)");
	if (!dec->cls)
		return;
	printf("class      %s%s%s%s\n", dec->cls->name,
	       dec->cls->description[0] ? " (" : "", dec->cls->description,
	       dec->cls->description[0] ? ")" : "");
	if (dec->flavor->dra)
		/* docs/policy.md, "DRA flavors": the devices come through
		 * gpugate's claim template. */
		printf("flavor     %s: DRA device class %s (claim template %s), %s "
		       "sharing%s%s%s, nodeSelector",
		       dec->flavor->name, dec->flavor->dra->device_class,
		       dec->plan.dra_template[0] ? dec->plan.dra_template : "(none)",
		       policy_sharing_name(dec->flavor->sharing),
		       dec->flavor->dra->shared ? " of one device's " : "",
		       dec->flavor->dra->shared ? dec->flavor->dra->shared->name : "",
		       dec->flavor->dra->shared ? " (consumable capacity)" : "");
	else
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
		       dec->flavor->units);
	putchar('\n');
	if (dec->has_quota)
		printf("quota      %s (nominal %" PRId64 ", at most %" PRId64
		       " with borrowing; judged against %s%s)\n",
		       quota_position_name(q->position), q->nominal, q->ceiling,
		       run->quota_ns ? "the GPUQuota status of namespace "
		       : run->usage  ? "the cluster's usage"
				     : "empty usage",
		       run->quota_ns ? run->quota_ns : "");
	if (dec->allowed && dec->cls->gang && oc->mut.wl.kind == WL_JOB)
		print_gang(run, dec);
	/* The checkpoint plan is made only for what is admitted. */
	if (dec->allowed)
		printf("preempt    %s%s\n",
		       !dec->plan.preemptible ? "no"
		       : dec->plan.checkpoint ? "yes: checkpoint hooks injected"
					      : "yes (borrowed): no checkpoint hooks",
		       dec->plan.no_volume ? ", without the checkpoint volume" : "");
}

/* How a Job of a gang class starts (SPEC section 9). */
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

/* "Kind ns/name" */
static void print_object(const struct outcome *oc)
{
	printf("%s %s%s", oc->kind, oc->ns ? oc->ns : "", oc->ns ? "/" : "");
	/* A name the apiserver will generate: its prefix, then "*" (no
	 * name holds one). */
	if (oc->name[0])
		fputs(oc->name, stdout);
	else if (oc->generate_name)
		printf("%s*", oc->generate_name);
	else
		fputs("(no name)", stdout);
}

static void print_header(struct run *run, const struct outcome *oc)
{
	if (run->printed)
		putchar('\n');
	run->printed = true;
	printf("== %s:%zu", oc->source, oc->line);
	if (oc->item >= 0)
		printf(" item %ld", oc->item + 1);
	printf(" ");
	print_object(oc);
}

/*
 * --brief: one line per object, the verdict, the object and the reason:
 * the rule's message for a denial or an admission despite a rule, the
 * decision (gpugate.io/decision) for an admission with a class.
 */
static void print_brief(const struct outcome *oc)
{
	const char *reason = "";

	if (oc->v == V_DENIED)
		reason = !oc->mut.dec.allowed ? oc->mut.dec.message : oc->val.dec.message;
	else if (oc->v == V_WARNED)
		reason = oc->mut.dec.violation ? oc->mut.dec.message : oc->val.dec.message;
	else if (oc->v == V_ADMITTED)
		reason = oc->mut.dec.plan.decision[0] ? oc->mut.dec.plan.decision
		       : oc->val.dec.plan.decision[0] ? oc->val.dec.plan.decision
						      : "no GPU class: nothing to map";
	printf("%-10s ", verdict_names[oc->v]);
	print_object(oc);
	printf(" (%s:%zu", oc->source, oc->line);
	if (oc->item >= 0)
		printf(" item %ld", oc->item + 1);
	printf(")%s%s\n", reason[0] ? ": " : "", reason);
}

/* Returns -1 when out of memory. */
static int print_text(struct run *run, const struct outcome *oc)
{
	char *dump;

	if (oc->v == V_ERROR)
		return 0; /* on standard error */
	if (run->brief) {
		print_brief(oc);
		return 0;
	}
	print_header(run, oc);
	if (oc->v == V_NOT_JUDGED) {
		printf(": not judged\n");
		return 0;
	}
	putchar('\n');
	print_mapping(run, oc);
	if (!oc->validated) {
		print_decision("mutate", &oc->mut, NULL);
		return 0;
	}
	dump = json_dumps(oc->result, JSON_INDENT(2));
	if (!dump)
		return -1;
	print_decision("mutate", &oc->mut, &oc->val);
	if (oc->patch)
		print_patch(oc->patch);
	else
		printf("\npatch: none (nothing to change)\n");
	printf("\n");
	print_decision("validate", &oc->val, NULL);
	printf("\nresult:\n%s\n", dump);
	free(dump);
	return 0;
}

/* ---- json and yaml ------------------------------------------------------- */

static int add_strings(json_t *to, const struct decision *dec)
{
	for (size_t i = 0; i < dec->n_warnings; i++)
		if (json_array_append_new(to, json_string(dec->warnings[i])) < 0)
			return -1;
	return 0;
}

static json_t *result_json(const struct outcome *oc)
{
	json_t *r = json_object(), *msgs = json_array(), *warnings = json_array();
	const struct decision *dec = NULL;
	int bad = !r || !msgs || !warnings;

	bad |= json_object_set_new(r, "source", json_string(oc->source));
	bad |= json_object_set_new(r, "document",
				   oc->doc ? json_integer((json_int_t)oc->doc)
					   : json_null());
	bad |= json_object_set_new(r, "line", oc->line
						     ? json_integer((json_int_t)oc->line)
						     : json_null());
	if (oc->item >= 0)
		bad |= json_object_set_new(r, "item", json_integer(oc->item + 1));
	bad |= json_object_set_new(r, "apiVersion",
				   oc->api ? json_string(oc->api) : json_null());
	bad |= json_object_set_new(r, "kind",
				   oc->kind ? json_string(oc->kind) : json_null());
	bad |= json_object_set_new(r, "namespace",
				   oc->ns ? json_string(oc->ns) : json_null());
	bad |= json_object_set_new(r, "name", oc->name && oc->name[0]
						      ? json_string(oc->name)
						      : json_null());
	if (oc->generate_name)
		bad |= json_object_set_new(r, "generateName",
					   json_string(oc->generate_name));
	bad |= json_object_set_new(r, "result", json_string(verdict_names[oc->v]));
	if (oc->v == V_ERROR)
		bad |= json_array_append_new(msgs, json_string(oc->error));
	else if (oc->v == V_DENIED) {
		dec = !oc->mut.dec.allowed ? &oc->mut.dec : &oc->val.dec;
		bad |= json_array_append_new(msgs, json_string(dec->message));
	} else if (oc->v == V_WARNED &&
		   (oc->mut.dec.violation || oc->val.dec.violation)) {
		dec = oc->mut.dec.violation ? &oc->mut.dec : &oc->val.dec;
		bad |= json_array_append_new(msgs, json_string(dec->message));
	}
	bad |= json_object_set_new(r, "rule", dec && dec->rule
						      ? json_string(dec->rule)
						      : json_null());
	if (oc->v != V_ERROR && oc->v != V_NOT_JUDGED) {
		bad |= add_strings(warnings, &oc->mut.dec);
		if (oc->validated)
			bad |= add_strings(warnings, &oc->val.dec);
	}
	bad |= json_object_set(r, "messages", msgs);
	bad |= json_object_set(r, "warnings", warnings);
	bad |= json_object_set_new(r, "patch", oc->patch ? json_incref(oc->patch)
							  : json_array());
	json_decref(msgs);
	json_decref(warnings);
	if (bad) {
		json_decref(r);
		return NULL;
	}
	return r;
}

/* Prints the document of -o json|yaml.  -1 when out of memory. */
static int print_document(const struct run *run)
{
	json_t *doc, *sum;
	struct strbuf sb;
	char *text;
	size_t len;
	int rc = -1;

	sum = json_pack("{s:I,s:I,s:I,s:I,s:I}", "admitted",
			(json_int_t)run->count[V_ADMITTED], "denied",
			(json_int_t)run->count[V_DENIED], "warned",
			(json_int_t)run->count[V_WARNED], "notJudged",
			(json_int_t)run->count[V_NOT_JUDGED], "errors",
			(json_int_t)run->count[V_ERROR]);
	doc = sum ? json_pack("{s:O,s:o}", "results", run->results, "summary", sum)
		  : NULL;
	if (doc && run->quota_ns &&
	    json_object_set_new(doc, "usage", json_pack("{s:s, s:s}", "source", "gpuquota",
							 "namespace", run->quota_ns)) < 0) {
		json_decref(doc);
		return -1;
	}
	if (!doc)
		return -1;
	if (run->output == OUT_JSON) {
		if (json_dumpf(doc, stdout, JSON_INDENT(2)) == 0) {
			putchar('\n');
			rc = 0;
		}
	} else {
		strbuf_init(&sb, (size_t)1 << 30);
		if (yamlout_write(doc, &sb) == 0) {
			text = strbuf_take(&sb, &len);
			fwrite(text, 1, len, stdout);
			free(text);
			rc = 0;
		}
		strbuf_release(&sb);
	}
	json_decref(doc);
	return rc;
}

/* ---- the run ------------------------------------------------------------- */

static void raise_status(struct run *run, int status)
{
	if (status > run->status)
		run->status = status;
}

/* Counts, prints or collects oc. */
static void report(struct run *run, const struct outcome *oc)
{
	run->count[oc->v]++;
	if (oc->v == V_ERROR) {
		fprintf(stderr, "%s\n", oc->error);
		raise_status(run, oc->error_status);
	} else if (oc->v == V_DENIED) {
		raise_status(run, EXPLAIN_DENIED);
	}
	if (run->output == OUT_TEXT) {
		if (print_text(run, oc) < 0)
			run->oom = true;
	} else {
		json_t *r = result_json(oc);

		if (!r || json_array_append_new(run->results, r) < 0)
			run->oom = true;
	}
}

/* An input that gave no object: one error line. */
static void report_error(struct run *run, const char *source, size_t line,
			 const char *text, int status)
{
	struct outcome oc = {.source = source, .line = line, .item = -1};

	fail(&oc, status, "%s%s", text, "");
	report(run, &oc);
}

static const char *metadata_str(const json_t *obj, const char *key)
{
	return json_string_value(json_object_get(json_object_get(obj, "metadata"), key));
}

/* One object of a document (item >= 0: of a List). */
static void explain_object(struct run *run, const char *source, size_t doc,
			   size_t line, long item, const json_t *obj)
{
	struct outcome oc = {.source = source, .doc = doc, .line = line, .item = item};
	const char *own_ns;
	char msg[600];

	evaluation_init(&oc.mut);
	evaluation_init(&oc.val);
	oc.mut.gang_served = oc.val.gang_served = run->gang_served;
	oc.obj = obj;
	oc.api = json_string_value(json_object_get(obj, "apiVersion"));
	oc.kind = json_string_value(json_object_get(obj, "kind"));
	oc.name = metadata_str(obj, "name");
	if (!oc.name)
		oc.name = "";
	oc.generate_name = metadata_str(obj, "generateName");
	own_ns = metadata_str(obj, "namespace");
	oc.ns = own_ns && own_ns[0] ? own_ns : run->ns_flag ? run->ns_flag : "default";
	if (!json_is_object(obj) || !oc.api || !oc.kind || !oc.api[0] || !oc.kind[0]) {
		snprintf(msg, sizeof(msg), "%s:%zu: %snot an object (a mapping with "
			 "apiVersion and kind)", source, line, item >= 0 ? "List item: " : "");
		oc.api = oc.kind = oc.name = oc.ns = oc.generate_name = NULL;
		fail(&oc, EXPLAIN_BAD_INPUT, "%s%s", msg, "");
	} else if (own_ns && own_ns[0] && run->ns_flag &&
		   strcmp(own_ns, run->ns_flag) != 0) {
		/* kubectl's words for the same refusal. */
		snprintf(msg, sizeof(msg), "%s:%zu: the namespace from the provided "
			 "object \"%s\" does not match the namespace \"%s\". You must "
			 "pass '--namespace=%s' to perform this operation.",
			 source, line, own_ns, run->ns_flag, own_ns);
		fail(&oc, EXPLAIN_BAD_INPUT, "%s%s", msg, "");
	} else if (judge(run, &oc) < 0) {
		snprintf(msg, sizeof(msg), "%s:%zu: out of memory", source, line);
		fail(&oc, EXPLAIN_INTERNAL, "%s%s", msg, "");
	}
	if (oc.v == V_NOT_JUDGED && !(own_ns && own_ns[0]))
		oc.ns = NULL; /* perhaps cluster-scoped: explain does not know */
	report(run, &oc);
	evaluation_release(&oc.mut);
	evaluation_release(&oc.val);
	json_decref(oc.patch);
	json_decref(oc.result);
}

/* A List (kubectl get -o yaml, or a typed FooList): its items. */
static bool is_list(const json_t *obj)
{
	const char *kind = json_string_value(json_object_get(obj, "kind"));
	size_t n = kind ? strlen(kind) : 0;

	return n >= 4 && strcmp(kind + n - 4, "List") == 0 &&
	       json_is_array(json_object_get(obj, "items"));
}

static bool ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), t = strlen(tail);

	return n >= t && strcmp(s + n - t, tail) == 0;
}

/* One file, or standard input ("-"). */
static void explain_file(struct run *run, const char *path)
{
	struct yamljson_doc *docs = NULL;
	size_t len = 0, n = 0;
	char *text = NULL;
	struct diag d;
	int rc;

	diag_init(&d);
	rc = file_read(path, MANIFEST_MAX, FILE_STDIN_DASH, &text, &len, &d);
	if (rc == 0)
		rc = yamljson_parse_all(path, text, len, &docs, &n, &d);
	free(text);
	if (rc < 0) {
		char first[DIAG_CAP];

		diag_first(&d, first, sizeof(first));
		report_error(run, path, 0, first,
			     rc == FILE_OOM || ends_with(first, ": out of memory")
				     ? EXPLAIN_INTERNAL
				     : EXPLAIN_BAD_INPUT);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const json_t *obj = docs[i].value;

		if (is_list(obj)) {
			const json_t *items = json_object_get(obj, "items");

			for (size_t j = 0; j < json_array_size(items); j++)
				explain_object(run, path, i + 1, docs[i].line, (long)j,
					       json_array_get(items, j));
		} else {
			explain_object(run, path, i + 1, docs[i].line, -1, obj);
		}
	}
	yamljson_docs_free(docs, n);
}

/* The manifests directly in dir (kubectl apply -f DIR without -R). */
static void explain_dir(struct run *run, const char *dir)
{
	static const char *const manifests[] = {".yaml", ".yml", ".json", NULL};
	char **names = NULL, msg[600];
	struct diag d;
	long n;

	diag_init(&d);
	n = file_list(dir, manifests, &names, &d);
	if (n == FILE_OOM) {
		run->oom = true;
		return;
	}
	if (n < 0) {
		diag_first(&d, msg, sizeof(msg));
		report_error(run, dir, 0, msg, EXPLAIN_BAD_INPUT);
		return;
	}
	if (n == 0) {
		snprintf(msg, sizeof(msg), "%s: no *.yaml, *.yml or *.json file", dir);
		report_error(run, dir, 0, msg, EXPLAIN_BAD_INPUT);
	}
	for (long i = 0; i < n; i++)
		explain_file(run, names[i]);
	file_list_free(names, n);
}

static void explain_path(struct run *run, const char *path)
{
	struct stat st;

	if (strcmp(path, "-") != 0 && stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		explain_dir(run, path);
	else
		explain_file(run, path);
}

/* -o, in the order of enum output. */
static const char *const outputs[] = {"text", "json", "yaml", NULL};

const struct args_opt cmd_explain_opts[] = {
	{"policy", 0, 'p', ARGS_FILE, NULL},
	{"namespace", 'n', 'n', ARGS_WORD, NULL},
	{"output", 'o', 'o', ARGS_CHOICE, outputs},
	{"brief", 0, 'b', ARGS_NONE, NULL},
	{"kubeconfig", 0, 'k', ARGS_FILE, NULL},
	{"timeout", 0, 't', ARGS_WORD, NULL},
	{"help", 'h', 'h', ARGS_NONE, NULL},
	{NULL, 0, 0, ARGS_NONE, NULL},
};

/* The cluster may not be listed: usage from the GPUQuota objects of ns,
 * into snap (no inventory: the pool is unknown).  -1 (said) when they
 * cannot be read or there is none. */
static int quota_fallback(const struct kube_config *kube, const char *ns,
			  unsigned timeout_s, struct snapshot *snap)
{
	json_t *items = NULL;
	struct diag d;
	int rc = -1;

	diag_init(&d);
	if (snapshot_quotas(kube, ns, timeout_s * 1000u, &items, &d) < 0) {
		fprintf(stderr, "gpugate explain: %s", diag_text(&d));
		return -1;
	}
	if (json_array_size(items) == 0)
		fprintf(stderr, "gpugate explain: no GPUQuota object in namespace %s to "
				"judge quota against (-n names the tenant's namespace)\n",
			ns);
	else if ((snap->usage = usage_memory_new(&(struct usage_memory_config){0}))) {
		quotas_observe(snap->usage, items);
		rc = 0;
	}
	json_decref(items);
	return rc;
}

int cmd_explain(const struct args_call *call, int argc, char **argv)
{
	const char *policy_path = NULL, *kubeconfig = NULL;
	struct run run = {.status = EXPLAIN_ADMITTED, .gang_served = GANG_SERVES_CONTROLLER};
	struct kube_config kube = {0};
	struct holder *holder = NULL;
	struct snapshot snap = {0};
	struct policy *p = NULL;
	unsigned timeout_s = 60;
	bool timeout_set = false;
	struct args args;
	struct diag d;
	int c, i;

	args_init(&args, call->self);
	while ((c = args_next(&args, argc, argv)) != -1) {
		switch (c) {
		case 'p': policy_path = optarg; break;
		case 'n': run.ns_flag = optarg; break;
		case 'o':
			i = args_choice(&args, 'o', optarg);
			if (i < 0)
				return EXPLAIN_BAD_INPUT;
			run.output = (enum output)i;
			break;
		case 'b': run.brief = true; break;
		case 'k': kubeconfig = optarg; break;
		case 't':
			if (cluster_opts_timeout(optarg, &timeout_s) < 0)
				return args_usage_error(args.cmd, CLUSTER_OPTS_TIMEOUT_ERROR);
			timeout_set = true;
			break;
		case 'h': cmd_explain_usage(stdout); return 0;
		default: return EXPLAIN_BAD_INPUT;
		}
	}
	if (!policy_path || optind == argc)
		return args_usage_error(args.cmd, "--policy and a manifest are required");
	if (run.ns_flag && !run.ns_flag[0])
		return args_usage_error(args.cmd, "--namespace wants a name");
	if (timeout_set && !kubeconfig)
		return args_usage_error(args.cmd, "--timeout goes with --kubeconfig");
	if (run.brief && run.output != OUT_TEXT)
		return args_usage_error(args.cmd, "--brief is a text form: it does not go "
				   "with -o %s", outputs[run.output]);
	diag_init(&d);
	if (policy_load(policy_path, &p, &d) < 0) {
		fputs(diag_text(&d), stderr);
		return EXPLAIN_BAD_INPUT;
	}
	run.p = p;
	if (kubeconfig) {
		/* The feed's progress is not the command's output; its
		 * warnings (a list that keeps failing) are. */
		log_set_level(LOG_WARN);
		holder = holder_new(p); /* owns p from here */
		if (!holder) {
			policy_free(p);
			fputs("gpugate explain: out of memory\n", stderr);
			return EXPLAIN_INTERNAL;
		}
		diag_init(&d);
		if (kube_config_load(kubeconfig, &kube, &d) < 0) {
			fprintf(stderr, "gpugate explain: %s", diag_text(&d));
			run.status = EXPLAIN_BAD_INPUT;
			goto out;
		}
		{
			const char *ns = run.ns_flag ? run.ns_flag : "default";
			int st = snapshot_take_as(&kube, holder, timeout_s * 1000u,
						  "explain", ns, &snap, &d);

			if (st < 0)
				fprintf(stderr, "gpugate explain: %s", diag_text(&d));
			if (st == SNAPSHOT_FORBIDDEN &&
			    quota_fallback(&kube, ns, timeout_s, &snap) == 0)
				run.quota_ns = ns;
			else if (st < 0) {
				run.status = EXPLAIN_BAD_INPUT;
				goto out;
			}
		}
		run.usage = snap.usage;
		run.inventory = snap.inventory;
		if (run.quota_ns && run.output == OUT_TEXT)
			printf("usage      from the GPUQuota objects of namespace %s: its "
			       "tenant's own use; the cohort's other members and the GPU "
			       "pool are not readable with these credentials\n\n",
			       run.quota_ns);
	}
	if (run.output != OUT_TEXT && !(run.results = json_array())) {
		run.oom = true;
		goto done;
	}
	for (i = optind; i < argc && !run.oom; i++)
		explain_path(&run, argv[i]);
	if (run.oom)
		goto done;
	if (run.output == OUT_TEXT) {
		if (run.printed && !run.brief)
			putchar('\n');
		printf("summary: %u admitted, %u denied, %u warned, %u not judged, "
		       "%u error%s\n",
		       run.count[V_ADMITTED], run.count[V_DENIED], run.count[V_WARNED],
		       run.count[V_NOT_JUDGED], run.count[V_ERROR],
		       run.count[V_ERROR] == 1 ? "" : "s");
	} else if (print_document(&run) < 0) {
		run.oom = true;
	}
done:
	if (run.oom) {
		fputs("gpugate explain: out of memory\n", stderr);
		run.status = EXPLAIN_INTERNAL;
	}
out:
	fflush(stdout);
	json_decref(run.results);
	snapshot_release(&snap);
	kube_config_release(&kube);
	if (holder)
		holder_free(holder); /* frees p */
	else
		policy_free(p);
	return run.status;
}
