/* gpugate check: validate policy files and summarise the valid ones. */
#include "base/diag.h"
#include "cli/cmd.h"
#include "policy/policy.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

void cmd_check_usage(FILE *out)
{
	fputs("usage: gpugate check [--quiet] FILE...\n"
	      "\n"
	      "Validates policy files.  Every error is printed as FILE:LINE: message.\n"
	      "A valid file gets a short summary: counts, and per tenant its\n"
	      "namespaces and quota.\n"
	      "\n"
	      "  -q, --quiet   print errors only\n"
	      "\n"
	      "Exit status: 0 all files valid, 1 some file invalid, 2 usage error.\n",
	      out);
}

static void print_limit(const char *what, int64_t v, bool *first)
{
	if (v == POLICY_NO_LIMIT)
		return;
	printf("%s%s %" PRId64, *first ? " (" : ", ", what, v);
	*first = false;
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

int cmd_check(int argc, char **argv)
{
	static const struct option opts[] = {
		{"quiet", no_argument, NULL, 'q'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	bool quiet = false;
	int bad = 0, c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "qh", opts, NULL)) != -1) {
		switch (c) {
		case 'q':
			quiet = true;
			break;
		case 'h':
			cmd_check_usage(stdout);
			return 0;
		default:
			cmd_check_usage(stderr);
			return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "gpugate check: no policy file given\n");
		cmd_check_usage(stderr);
		return 2;
	}
	for (int i = optind; i < argc; i++) {
		struct policy *p = NULL;
		struct diag d;

		diag_init(&d);
		if (policy_load(argv[i], &p, &d) < 0) {
			fputs(diag_text(&d), stderr);
			fprintf(stderr, "%s: %u error%s\n", argv[i], diag_count(&d),
				diag_count(&d) == 1 ? "" : "s");
			bad = 1;
			continue;
		}
		if (!quiet)
			summarise(p);
		policy_free(p);
	}
	return bad;
}
