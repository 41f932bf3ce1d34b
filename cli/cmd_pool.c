/*
 * gpugate pool: the pool at a glance, from the cluster, once — per flavor
 * its nodes (usable, or why excluded), capacity, allocated, free and the
 * largest free on one node; per tenant used, nominal, borrowed and lent.
 * The same report as GET /pool of gpugate serve (report/pool-report.h),
 * read through the same feed (report/snapshot.h).
 */
#include "base/diag.h"
#include "base/log.h"
#include "base/strbuf.h"
#include "base/wallclock.h"
#include "cli/cluster-opts.h"
#include "cli/cmd.h"
#include "kube/config.h"
#include "policy/policy.h"
#include "webhook/holder.h"
#include "kube/prom.h"
#include "report/busy.h"
#include "report/pool-report.h"
#include "report/quotas.h"
#include "report/snapshot.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cmd_pool_usage(FILE *out)
{
	fputs("usage: gpugate pool --policy FILE --kubeconfig FILE [-o text|json]\n"
	      "                    [--timeout SECONDS] [-n NS]\n"
	      "                    [--prometheus-url URL [--prometheus-bearer-token-file FILE]\n"
	      "                     [--prometheus-ca FILE]]\n"
	      "\n"
	      "Lists the cluster's Nodes, Pods, Jobs and ResourceClaims once and shows\n"
	      "the pool as gpugate serve sees it under the policy: per flavor its\n"
	      "nodes, how many are usable (the others are excluded: a health signal,\n"
	      "NotReady, cordoned, or a taint the flavor does not tolerate), capacity,\n"
	      "allocated, free and the largest free on one node; per tenant and\n"
	      "flavor the units used, the nominal quota, what it borrows and what it\n"
	      "lends.  -o json prints the document GET /pool serves.\n"
	      "\n"
	      "  --timeout SECONDS  wait at most this long for the lists (default 60)\n"
	      "  -n, --namespace NS when the credentials may not list Nodes, Pods,\n"
	      "                     Jobs or ResourceClaims cluster-wide (a tenant's\n"
	      "                     edit or view): show the GPUQuota objects of NS\n"
	      "                     instead, what the tenant uses of its quota\n"
	      "  --prometheus-url URL the cluster's Prometheus, where NVIDIA's DCGM\n"
	      "                     exporter's series are: each tenant's busy share of\n"
	      "                     the GPUs it holds, over the last hour (as GET /pool\n"
	      "                     of gpugate serve --prometheus-url shows it)\n"
	      "  --prometheus-bearer-token-file FILE, --prometheus-ca FILE\n"
	      "                     its bearer token and CA, as for gpugate serve\n"
	      "\n"
	      "A 403 to those lists ends the command at once, saying which\n"
	      "permission is missing.\n"
	      "\n"
	      "Exit status: 0 shown; 1 the cluster could not be read; 2 usage error or\n"
	      "invalid policy; 3 the pool is forbidden, the GPUQuota objects of -n NS\n"
	      "were shown instead.\n",
	      out);
}

static const char *const outputs[] = {"text", "json", NULL};

const struct args_opt cmd_pool_opts[] = {
	{"policy", 0, 'p', ARGS_FILE, NULL},
	{"kubeconfig", 0, 'k', ARGS_FILE, NULL},
	{"output", 'o', 'o', ARGS_CHOICE, outputs},
	{"timeout", 0, 't', ARGS_WORD, NULL},
	{"namespace", 'n', 'n', ARGS_WORD, NULL},
	{"prometheus-url", 0, 'P', ARGS_WORD, NULL},
	{"prometheus-bearer-token-file", 0, 'B', ARGS_FILE, NULL},
	{"prometheus-ca", 0, 'C', ARGS_FILE, NULL},
	{"help", 'h', 'h', ARGS_NONE, NULL},
	{NULL, 0, 0, ARGS_NONE, NULL},
};


/* The pool is forbidden: what tenant ns's GPUQuota objects say.  3 when
 * shown, 1 when they cannot be read or there is none. */
static int show_quotas(const struct kube_config *kube, const char *ns,
		       unsigned timeout_s, const char *output)
{
	json_t *items = NULL;
	struct strbuf sb;
	struct diag d;
	int rc = 1;

	diag_init(&d);
	strbuf_init(&sb, 16u << 20);
	if (snapshot_quotas(kube, ns, timeout_s * 1000u, &items, &d) < 0) {
		fprintf(stderr, "gpugate pool: %s", diag_text(&d));
		goto out;
	}
	if (json_array_size(items) == 0) {
		fprintf(stderr, "gpugate pool: no GPUQuota object in namespace %s: the "
				"policy names it for no tenant, or gpugate serve keeps none "
				"(docs/operations.md, \"GPUQuota objects\")\n",
			ns);
		goto out;
	}
	if (strcmp(output, "json") == 0) {
		json_t *doc = json_pack("{s:s, s:s, s:O}", "source", "gpuquota", "namespace",
					ns, "items", items);

		if (!doc || json_dumpf(doc, stdout, JSON_INDENT(2)) < 0) {
			json_decref(doc);
			goto out;
		}
		json_decref(doc);
		putchar('\n');
	} else {
		strbuf_addf(&sb, "from the GPUQuota objects of namespace %s (the pool "
				 "itself is not readable with these credentials)\n",
			    ns);
		if (quotas_text(items, &sb) < 0) {
			fputs("gpugate pool: out of memory\n", stderr);
			goto out;
		}
		fwrite(sb.buf, 1, sb.len, stdout);
	}
	rc = 3;
out:
	strbuf_release(&sb);
	json_decref(items);
	return rc;
}

/* --prometheus-url: each pod's hour (report/busy.h).  A Prometheus that
 * cannot be read ends the command: asked for, the share is not left out
 * silently.  0, or -1 said. */
static int read_busy(const struct prom_config *pc, struct idle_util **utils, size_t *nu)
{
	struct prom *pr;
	struct diag d;
	int rc;

	diag_init(&d);
	if (!(pr = prom_new(pc, &d))) {
		fprintf(stderr, "gpugate pool: %s", diag_text(&d));
		return -1;
	}
	rc = busy_read(pr, 0, utils, nu, &d);
	if (rc < 0)
		fprintf(stderr, "gpugate pool: %s", diag_text(&d));
	prom_free(pr);
	return rc;
}

int cmd_pool(const struct args_call *call, int argc, char **argv)
{
	const char *policy_path = NULL, *kubeconfig = NULL, *output = "text";
	const char *ns = NULL;
	struct prom_config pc = {0};
	struct idle_util *utils = NULL;
	size_t nu = 0;
	unsigned timeout_s = 60;
	struct kube_config kube = {0};
	struct policy *p = NULL;
	struct holder *holder = NULL;
	struct snapshot snap = {0};
	struct diag d;
	json_t *report = NULL;
	struct args args;
	int c, rc = 1;

	args_init(&args, call->self);
	while ((c = args_next(&args, argc, argv)) != -1) {
		switch (c) {
		case 'p': policy_path = optarg; break;
		case 'k': kubeconfig = optarg; break;
		case 'o':
			if (args_choice(&args, 'o', optarg) < 0)
				return ARGS_USAGE_ERROR;
			output = optarg;
			break;
		case 'n': ns = optarg; break;
		case 'P': pc.url = optarg; break;
		case 'B': pc.bearer_token_file = optarg; break;
		case 'C': pc.ca_file = optarg; break;
		case 't':
			if (cluster_opts_timeout(optarg, &timeout_s) < 0)
				return args_usage_error(args.cmd, CLUSTER_OPTS_TIMEOUT_ERROR);
			break;
		case 'h': cmd_pool_usage(stdout); return 0;
		default: return ARGS_USAGE_ERROR;
		}
	}
	if (optind != argc)
		return args_usage_error(args.cmd, "unexpected argument '%.60s'",
					argv[optind]);
	if (!policy_path || !kubeconfig)
		return args_usage_error(args.cmd,
					"--policy and --kubeconfig are required");
	if (ns && !ns[0])
		return args_usage_error(args.cmd, "--namespace wants a name");
	if (!pc.url && (pc.bearer_token_file || pc.ca_file))
		return args_usage_error(args.cmd, "--prometheus-bearer-token-file and "
						  "--prometheus-ca need --prometheus-url");
	/* The feed's progress is not the command's output; its warnings (a
	 * list that keeps failing) are. */
	log_set_level(LOG_WARN);
	diag_init(&d);
	if (policy_load(policy_path, &p, &d) < 0) {
		fputs(diag_text(&d), stderr);
		return 2;
	}
	holder = holder_new(p);
	if (!holder) {
		policy_free(p);
		fputs("gpugate pool: out of memory\n", stderr);
		return 1;
	}
	diag_init(&d);
	if (kube_config_load(kubeconfig, &kube, &d) < 0) {
		fprintf(stderr, "gpugate pool: %s", diag_text(&d));
		goto out;
	}
	{
		int st = snapshot_take_as(&kube, holder, timeout_s * 1000u, "pool", ns,
					  &snap, &d);

		if (st == SNAPSHOT_FORBIDDEN && ns) {
			fprintf(stderr, "gpugate pool: %s", diag_text(&d));
			rc = show_quotas(&kube, ns, timeout_s, output);
			goto out;
		}
		if (st < 0) {
			fprintf(stderr, "gpugate pool: %s", diag_text(&d));
			goto out;
		}
	}
	if (pc.url && read_busy(&pc, &utils, &nu) < 0)
		goto out;
	report = pool_report_idle(p, snap.inventory, snap.usage, wall_ms(), utils, nu);
	if (!report) {
		fputs("gpugate pool: out of memory\n", stderr);
		goto out;
	}
	if (strcmp(output, "json") == 0) {
		if (json_dumpf(report, stdout, JSON_INDENT(2)) < 0)
			goto out;
		putchar('\n');
	} else {
		struct strbuf sb;

		strbuf_init(&sb, 64u << 20);
		if (pool_report_text(report, &sb) < 0) {
			strbuf_release(&sb);
			fputs("gpugate pool: out of memory\n", stderr);
			goto out;
		}
		{
			size_t len;
			char *text = strbuf_take(&sb, &len);

			fwrite(text, 1, len, stdout);
			free(text);
		}
	}
	rc = 0;
out:
	busy_free(utils, nu);
	json_decref(report);
	snapshot_release(&snap);
	kube_config_release(&kube);
	holder_free(holder); /* frees p */
	return rc;
}
