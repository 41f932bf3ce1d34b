/* gpugate check: validate policy files and summarise the valid ones. */
#include "base/diag.h"
#include "base/file.h"
#include "base/log.h"
#include "cli/cmd.h"
#include "kube/client.h"
#include "kube/config.h"
#include "policy/cluster-check.h"
#include "policy/policy.h"
#include "policy/pool.h"
#include "policy/quota.h"
#include "usage/inventory.h"
#include "usage/usage.h"
#include "webhook/holder.h"
#include "report/snapshot.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void cmd_check_usage(FILE *out)
{
	fputs("usage: gpugate check [--quiet] [--kubeconfig FILE] FILE|DIR...\n"
	      "\n"
	      "Validates policy files; a DIR stands for its *.yaml and *.yml files\n"
	      "(sorted; not its subdirectories).  Every error is printed as\n"
	      "FILE:LINE: message.\n"
	      "A valid file gets a short summary: counts, the classes (GPUs per\n"
	      "pod x flavor), and per tenant its namespaces, classes and quota.\n"
	      "'gpugate classes' shows the classes in full.\n"
	      "\n"
	      "Findings that do not make a file invalid are warnings on standard\n"
	      "error (FILE:LINE: warning: ...), e.g. a borrowingLimit the cohort\n"
	      "can never lend.\n"
	      "\n"
	      "  -q, --quiet        print errors (and warnings) only\n"
	      "  --kubeconfig FILE  also hold each valid policy against that cluster:\n"
	      "                     per flavor, the tenants' nominal quota summed\n"
	      "                     against what its usable nodes offer (their\n"
	      "                     allocatable); over-commitment (with the tenants\n"
	      "                     whose nominal quota is not backed now), and a\n"
	      "                     flavor no node serves, are warnings (FILE:\n"
	      "                     warning: ...), not errors\n"
	      "\n"
	      "Exit status: 0 all files valid, 1 some file invalid, 2 usage error.\n"
	      "With --kubeconfig, also 1 when the cluster could not be read.\n",
	      out);
}

/* Most PriorityClass names read (a cluster has a few dozen). */
#define CHECK_MAX_PRIORITY_CLASSES 4096

/*
 * One read-only list of the cluster at path, its items in *items (owned by
 * *list, which the caller frees).  0; 1 when the API does not serve it
 * (404) and not_served_ok; -1 after a warning on stderr saying that what
 * (e.g. "PriorityClasses") could not be listed and what is not known.
 */
static int list_cluster(const struct policy *p, const struct kube_config *kube,
			const char *path, const char *what, const char *unknown,
			bool not_served_ok, json_t **list, json_t **items)
{
	struct kube *k;
	struct diag d;
	int rc = -1;

	*list = *items = NULL;
	diag_init(&d);
	k = kube_new(kube, &d);
	if (k)
		rc = kube_get_json(k, path, 0, list, &d);
	kube_free(k);
	if (rc == 404 && not_served_ok)
		return 1;
	if (rc != 0) {
		char why[512];

		if (rc > 0)
			snprintf(why, sizeof(why), "HTTP %d", rc);
		else
			diag_first(&d, why, sizeof(why));
		fprintf(stderr, "%s: warning: the cluster's %s could not be listed (%s): %s\n",
			policy_source(p), what, why, unknown);
		return -1;
	}
	*items = json_object_get(*list, "items");
	return 0;
}

/*
 * The PriorityClasses of the cluster (a read-only list) against the ones
 * the classes name: a warning on stderr for each missing one
 * (cluster_check_priority_classes()), or one saying they could not be
 * read.  Never fails the check: the policy itself is valid.
 */
static void priority_classes(const struct policy *p, const struct kube_config *kube)
{
	const char **names = NULL;
	json_t *list, *items, *item;
	struct diag w;
	size_t n = 0, i;

	diag_init(&w);
	if (list_cluster(p, kube, "/apis/scheduling.k8s.io/v1/priorityclasses",
			 "PriorityClasses",
			 "whether the ones the classes name exist is not known", false,
			 &list, &items) != 0)
		goto out;
	names = calloc(json_array_size(items) + 1, sizeof(*names));
	if (!names) {
		fputs("gpugate check: out of memory\n", stderr);
		goto out;
	}
	json_array_foreach(items, i, item) {
		const char *name = json_string_value(
			json_object_get(json_object_get(item, "metadata"), "name"));

		if (name && n < CHECK_MAX_PRIORITY_CLASSES)
			names[n++] = name;
	}
	if (cluster_check_priority_classes(p, names, n, &w))
		fputs(diag_text(&w), stderr);
out:
	free(names);
	json_decref(list);
}

/* Most DeviceClasses read. */
#define CHECK_MAX_DEVICE_CLASSES 4096

/*
 * The cluster's DRA DeviceClasses against the flavors' deviceClassNames
 * and resources (cluster_check_device_classes()): warnings on stderr.  An
 * API that does not serve resource.k8s.io/v1 (404) has no DRA: nothing to
 * say.  Never fails the check.
 */
static void device_classes(const struct policy *p, const struct kube_config *kube)
{
	struct cluster_device_class *dcs = NULL;
	json_t *list, *items, *item;
	struct diag w;
	size_t n = 0, i;

	diag_init(&w);
	if (list_cluster(p, kube, "/apis/resource.k8s.io/v1/deviceclasses", "DeviceClasses",
			 "whether the flavors' deviceClassNames exist is not known", true,
			 &list, &items) != 0)
		goto out;
	dcs = calloc(json_array_size(items) + 1, sizeof(*dcs));
	if (!dcs) {
		fputs("gpugate check: out of memory\n", stderr);
		goto out;
	}
	json_array_foreach(items, i, item) {
		const char *name = json_string_value(
			json_object_get(json_object_get(item, "metadata"), "name"));

		if (!name || n == CHECK_MAX_DEVICE_CLASSES)
			continue;
		dcs[n].name = name;
		dcs[n].extended_resource = json_string_value(json_object_get(
			json_object_get(item, "spec"), "extendedResourceName"));
		n++;
	}
	if (cluster_check_device_classes(p, dcs, n, &w))
		fputs(diag_text(&w), stderr);
out:
	free(dcs);
	json_decref(list);
}

/*
 * The policy held against the cluster: one line per flavor on stdout
 * (unless quiet), a warning on stderr where the nominal quota is more
 * than the usable nodes offer (with the tenants whose nominal is not
 * backed now), or no node serves the flavor (cluster_check_capacity()).
 * Returns 0, or 1 when the cluster could not be read.
 */
static int against_cluster(struct policy *p, const struct kube_config *kube, bool quiet)
{
	struct holder *h = holder_new(p);
	size_t cap = policy_flavor_count(p);
	struct pool_summary *v = calloc(cap + 1, sizeof(*v));
	long n = 0;
	struct snapshot snap;
	struct diag d, w;
	bool dra_known = false;
	int rc = 1;

	diag_init(&d);
	diag_init(&w);
	if (!h || !v) {
		fprintf(stderr, "gpugate check: out of memory\n");
		goto out;
	}
	if (snapshot_take(kube, h, 60000, &snap, &d) < 0) {
		fprintf(stderr, "gpugate check: %s", diag_text(&d));
		goto out;
	}
	n = inventory_summaries(snap.inventory, p, v, cap);
	if (n < 0) {
		fprintf(stderr, "gpugate check: out of memory\n");
		snapshot_release(&snap);
		goto out;
	}
	{
		struct usage_names names;
		struct usage_view view;

		/* What the workloads hold now: the tenants it leaves short. */
		usage_names_view(&names, p, snap.usage, &view);
		dra_known = inventory_dra_known(snap.inventory);
		cluster_check_capacity(p, v, (size_t)n, &view, dra_known, &w);
	}
	snapshot_release(&snap);
	for (long i = 0; i < n; i++) {
		const struct pool_summary *s = &v[i];
		const struct policy_flavor *f = s->flavor;
		int64_t nominal = quota_nominal_sum(p, f);
		size_t nodes = 0;

		for (int e = POOL_USABLE; e <= POOL_TAINTED; e++)
			nodes += s->nodes[e];
		if (quiet)
			continue;
		if (f->dra && !dra_known)
			printf("  cluster: flavor %s: %s not known (the DRA kinds were "
			       "not listed); nominal quota %" PRId64 "\n",
			       f->name, f->units, nominal);
		else
			printf("  cluster: flavor %s: %zu node%s, %zu usable, %" PRId64
			       " %s allocatable, %" PRId64 " allocated; nominal quota %"
			       PRId64 "\n",
			       f->name, nodes, nodes == 1 ? "" : "s", s->nodes[POOL_USABLE],
			       s->allocatable, f->units, s->allocated, nominal);
	}
	if (diag_count(&w))
		fputs(diag_text(&w), stderr);
	priority_classes(p, kube);
	device_classes(p, kube);
	rc = 0;
out:
	free(v);
	if (h)
		holder_free(h); /* frees p */
	else
		policy_free(p);
	return rc;
}

static void print_limit(const char *what, int64_t v, bool *first)
{
	if (v == POLICY_NO_LIMIT)
		return;
	printf("%s%s %" PRId64, *first ? " (" : ", ", what, v);
	*first = false;
}

/* The classes t can use (policy_tenant_can_use()), or "none". */
static void print_usable(const struct policy *p, const struct policy_tenant *t)
{
	size_t n = 0;

	for (size_t i = 0; i < policy_class_count(p); i++) {
		const struct policy_class *c = policy_class_at(p, i);

		if (policy_tenant_can_use(t, c))
			printf("%s %s", n++ ? "," : "", c->name);
	}
	if (!n)
		printf(" none");
}

static void summarise(const struct policy *p)
{
	const struct policy_settings *s = policy_settings(p);
	size_t nt = policy_tenant_count(p);

	printf("%s: valid\n", policy_source(p));
	printf("  %zu flavor%s, %zu class%s, %zu tenant%s, %zu cohort%s; "
	       "mode %s; raw GPU requests %s\n",
	       policy_flavor_count(p), policy_flavor_count(p) == 1 ? "" : "s",
	       policy_class_count(p), policy_class_count(p) == 1 ? "" : "es", nt,
	       nt == 1 ? "" : "s", policy_cohort_count(p),
	       policy_cohort_count(p) == 1 ? "" : "s", policy_mode_name(s->mode),
	       s->raw_gpu_requests == POLICY_RAW_ALLOW ? "allowed" : "rejected");
	printf("  classes:");
	if (!policy_class_count(p))
		printf(" none");
	for (size_t i = 0; i < policy_class_count(p); i++) {
		const struct policy_class *c = policy_class_at(p, i);

		printf("%s %s (%u x %s", i ? "," : "", c->name, c->gpus,
		       c->flavor->name);
		if (c->max_gpus != c->gpus)
			printf(", up to %u", c->max_gpus);
		printf(")");
	}
	printf("\n");
	for (size_t i = 0; i < nt; i++) {
		const struct policy_tenant *t = policy_tenant_at(p, i);

		printf("  tenant %s", t->name);
		if (t->cohort)
			printf(" (cohort %s)", t->cohort);
		if (t->mode != s->mode)
			printf(" [mode %s]", policy_mode_name(t->mode));
		printf("\n    namespaces:");
		for (size_t n = 0; n < t->n_namespaces; n++)
			printf("%s %s", n ? "," : "", t->namespaces[n]);
		printf("\n    classes:");
		print_usable(p, t);
		printf("\n    quota:");
		if (!t->n_quota)
			printf(" none");
		for (size_t q = 0; q < t->n_quota; q++) {
			const struct policy_quota *qu = &t->quota[q];
			bool first = true;

			printf("%s %s %" PRId64, q ? "," : "", qu->flavor->name,
			       qu->nominal);
			print_limit("borrow", qu->borrowing_limit, &first);
			print_limit("lend", qu->lending_limit, &first);
			if (!first)
				printf(")");
		}
		printf("\n");
	}
}

/* One policy file: its errors, or its summary (and the cluster's view of
 * it with kube).  Returns 0 valid, 1 invalid (or the cluster unread). */
static int check_file(const char *path, bool quiet, const struct kube_config *kube)
{
	struct policy *p = NULL;
	struct diag d, w;

	diag_init(&d);
	diag_init(&w);
	if (policy_load_warn(path, &p, &d, &w) < 0) {
		fputs(diag_text(&d), stderr);
		fprintf(stderr, "%s: %u error%s\n", path, diag_count(&d),
			diag_count(&d) == 1 ? "" : "s");
		return 1;
	}
	if (diag_count(&w))
		fputs(diag_text(&w), stderr);
	if (!quiet)
		summarise(p);
	if (kube)
		return against_cluster(p, kube, quiet) != 0;
	policy_free(p);
	return 0;
}

/* Every policy file directly in dir (*.yaml, *.yml), in name order. */
static int check_dir(const char *dir, bool quiet, const struct kube_config *kube)
{
	static const char *const policies[] = {".yaml", ".yml", NULL};
	char **names = NULL;
	struct diag d;
	long n;
	int bad = 0;

	diag_init(&d);
	n = file_list(dir, policies, &names, &d);
	if (n == FILE_OOM) {
		fputs("gpugate check: out of memory\n", stderr);
		return 1;
	}
	if (n < 0) {
		fputs(diag_text(&d), stderr);
		return 1;
	}
	if (n == 0) {
		fprintf(stderr, "%s: no policy file (*.yaml, *.yml) in this "
				"directory\n", dir);
		bad = 1;
	}
	for (long i = 0; i < n; i++)
		bad |= check_file(names[i], quiet, kube);
	file_list_free(names, n);
	return bad;
}

const struct args_opt cmd_check_opts[] = {
	{"quiet", 'q', 'q', ARGS_NONE, NULL},
	{"kubeconfig", 0, 'k', ARGS_FILE, NULL},
	{"help", 'h', 'h', ARGS_NONE, NULL},
	{NULL, 0, 0, ARGS_NONE, NULL},
};

int cmd_check(const struct args_call *call, int argc, char **argv)
{
	struct args args;
	bool quiet = false;
	const char *kubeconfig = NULL;
	struct kube_config kube = {0};
	int bad = 0, c;

	args_init(&args, call->self);
	while ((c = args_next(&args, argc, argv)) != -1) {
		switch (c) {
		case 'q':
			quiet = true;
			break;
		case 'k':
			kubeconfig = optarg;
			break;
		case 'h':
			cmd_check_usage(stdout);
			return 0;
		default:
			return ARGS_USAGE_ERROR;
		}
	}
	if (optind >= argc)
		return args_usage_error(args.cmd, "no policy file given");
	if (kubeconfig) {
		struct diag d;

		/* The feed's progress is not the command's output; its
		 * warnings (a list that keeps failing) are. */
		log_set_level(LOG_WARN);
		diag_init(&d);
		if (kube_config_load(kubeconfig, &kube, &d) < 0) {
			fprintf(stderr, "gpugate check: %s", diag_text(&d));
			return 1;
		}
	}
	for (int i = optind; i < argc; i++) {
		struct stat st;

		if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode))
			bad |= check_dir(argv[i], quiet, kubeconfig ? &kube : NULL);
		else
			bad |= check_file(argv[i], quiet, kubeconfig ? &kube : NULL);
	}
	kube_config_release(&kube);
	return bad;
}
