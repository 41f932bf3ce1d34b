/*
 * gpugate classes: the classes of a policy as users see them (a table,
 * JSON or YAML), all of them or those one tenant can use.  Each class is
 * the object report/classes.h makes, the spec of its GPUClass object in
 * the cluster: the command and `kubectl get gpuclasses` say the same.
 */
#include "base/diag.h"
#include "base/strbuf.h"
#include "cli/cmd.h"
#include "codec/yamlout.h"
#include "policy/policy.h"
#include "report/classes.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cmd_classes_usage(FILE *out)
{
	fputs("usage: gpugate classes --policy FILE [-o text|json|yaml]\n"
	      "                       [--tenant T | --namespace NS]\n"
	      "\n"
	      "Lists the GPU classes of a policy: what each gives (flavor, GPUs per\n"
	      "pod, the most a pod may ask for with the gpugate.io/gpus label,\n"
	      "sharing mode, preemptible, topology, priority class), its description,\n"
	      "and the tenants that can use it: the class is allowed for them, so is\n"
	      "its sharing mode, and they have quota for its flavor.  In a cluster\n"
	      "that runs gpugate, 'kubectl get gpuclasses' shows the same without the\n"
	      "policy file.\n"
	      "\n"
	      "  --policy FILE        the policy file\n"
	      "  -o, --output FORMAT  text (a table, the default), json or yaml\n"
	      "  --tenant T           only the classes tenant T can use\n"
	      "  --namespace NS       only the classes the tenant of namespace NS\n"
	      "                       can use\n"
	      "\n"
	      "Exit status: 0 shown (also when no class is left); 2 usage error,\n"
	      "invalid policy, or a tenant the policy does not have.\n",
	      out);
}

static const char *const outputs[] = {"text", "json", "yaml", NULL};

const struct args_opt cmd_classes_opts[] = {
	{"policy", 0, 'p', ARGS_FILE, NULL},
	{"output", 'o', 'o', ARGS_CHOICE, outputs},
	{"tenant", 0, 't', ARGS_WORD, NULL},
	{"namespace", 0, 'n', ARGS_WORD, NULL},
	{"help", 'h', 'h', ARGS_NONE, NULL},
	{NULL, 0, 0, ARGS_NONE, NULL},
};

enum { COL_NAME, COL_FLAVOR, COL_GPUS, COL_MAX, COL_SHARING, COL_PREEMPTIBLE,
       COL_TOPOLOGY, COL_PRIORITY, COL_TENANTS, COL_DESCRIPTION, N_COLS };

static const char *const headers[N_COLS] = {
	"NAME", "FLAVOR", "GPUS", "MAX", "SHARING", "PREEMPTIBLE",
	"TOPOLOGY", "PRIORITY", "TENANTS", "DESCRIPTION",
};

/* The cells of one class, from its object (the same for every format). */
static void cells(const json_t *o, char cell[N_COLS][320])
{
	const json_t *topo = json_object_get(o, "topology");
	const json_t *tenants = json_object_get(o, "tenants");
	const json_t *t;
	const char *prio = json_string_value(json_object_get(o, "priorityClassName"));
	const char *desc = json_string_value(json_object_get(o, "description"));
	size_t i, len = 0;

	snprintf(cell[COL_NAME], 320, "%s", json_string_value(json_object_get(o, "name")));
	snprintf(cell[COL_FLAVOR], 320, "%s", json_string_value(json_object_get(o, "flavor")));
	snprintf(cell[COL_GPUS], 320, "%lld",
		 (long long)json_integer_value(json_object_get(o, "gpus")));
	snprintf(cell[COL_MAX], 320, "%lld",
		 (long long)json_integer_value(json_object_get(o, "maxGpus")));
	snprintf(cell[COL_SHARING], 320, "%s", json_string_value(json_object_get(o, "sharing")));
	snprintf(cell[COL_PREEMPTIBLE], 320, "%s",
		 json_is_true(json_object_get(o, "preemptible")) ? "true" : "false");
	if (topo)
		snprintf(cell[COL_TOPOLOGY], 320, "%s %s",
			 json_string_value(json_object_get(topo, "mode")),
			 json_string_value(json_object_get(topo, "key")));
	else
		snprintf(cell[COL_TOPOLOGY], 320, "<none>");
	snprintf(cell[COL_PRIORITY], 320, "%s", prio ? prio : "<none>");
	cell[COL_TENANTS][0] = '\0';
	json_array_foreach(tenants, i, t) {
		const char *name = json_string_value(t);

		/* A row, not a list of a thousand teams: cut near 300 bytes. */
		if (len + 1 + strlen(name) > 300) {
			snprintf(cell[COL_TENANTS] + len, 320 - len, "%s...", i ? "," : "");
			break;
		}
		len += (size_t)snprintf(cell[COL_TENANTS] + len, 320 - len, "%s%s",
					i ? "," : "", name);
	}
	if (!cell[COL_TENANTS][0])
		snprintf(cell[COL_TENANTS], 320, "<none>");
	snprintf(cell[COL_DESCRIPTION], 320, "%s", desc ? desc : "");
}

/* A table as kubectl prints one: upper-case headers, columns three apart,
 * the last column (the description) not padded.  -1: out of memory. */
static int print_table(const json_t *list)
{
	size_t n = json_array_size(list), width[N_COLS];
	char (*rows)[N_COLS][320] = calloc(n + 1, sizeof(*rows));

	if (!rows)
		return -1;
	for (int c = 0; c < N_COLS; c++) {
		snprintf(rows[0][c], 320, "%s", headers[c]);
		width[c] = strlen(headers[c]);
	}
	for (size_t r = 0; r < n; r++) {
		cells(json_array_get(list, r), rows[r + 1]);
		for (int c = 0; c < N_COLS; c++)
			if (strlen(rows[r + 1][c]) > width[c])
				width[c] = strlen(rows[r + 1][c]);
	}
	for (size_t r = 0; r <= n; r++) {
		for (int c = 0; c < N_COLS - 1; c++)
			printf("%-*s   ", (int)width[c], rows[r][c]);
		printf("%s\n", rows[r][N_COLS - 1]);
	}
	free(rows);
	return 0;
}

/* [{name, ...spec}] of the classes `only` can use (all when NULL). */
static json_t *class_list(const struct policy *p, const struct policy_tenant *only)
{
	json_t *list = json_array();

	for (size_t i = 0; list && i < policy_class_count(p); i++) {
		const struct policy_class *c = policy_class_at(p, i);
		json_t *o, *spec;

		if (only && !policy_tenant_can_use(only, c))
			continue;
		o = json_pack("{s:s}", "name", c->name);
		spec = classes_spec_new(p, c);
		if (!o || !spec || json_object_update(o, spec) < 0 ||
		    json_array_append_new(list, o) < 0) {
			json_decref(spec);
			json_decref(list);
			return NULL;
		}
		json_decref(spec);
	}
	return list;
}

static void tenant_names(const struct policy *p, char *buf, size_t size)
{
	size_t len = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < policy_tenant_count(p) && len < size; i++) {
		int n = snprintf(buf + len, size - len, "%s%s", i ? ", " : "",
				 policy_tenant_at(p, i)->name);

		if (n < 0)
			break;
		len += (size_t)n;
	}
	if (!buf[0])
		snprintf(buf, size, "none");
}

int cmd_classes(const struct args_call *call, int argc, char **argv)
{
	const char *policy_path = NULL, *output = "text", *tenant = NULL, *ns = NULL;
	const struct policy_tenant *only = NULL;
	struct policy *p = NULL;
	json_t *list = NULL;
	struct diag d;
	struct args args;
	int c, rc = 2;

	args_init(&args, call->self);
	while ((c = args_next(&args, argc, argv)) != -1) {
		switch (c) {
		case 'p': policy_path = optarg; break;
		case 'o':
			if (args_choice(&args, 'o', optarg) < 0)
				return ARGS_USAGE_ERROR;
			output = optarg;
			break;
		case 't': tenant = optarg; break;
		case 'n': ns = optarg; break;
		case 'h': cmd_classes_usage(stdout); return 0;
		default: return ARGS_USAGE_ERROR;
		}
	}
	if (optind != argc)
		return args_usage_error(args.cmd, "unexpected argument '%.60s'",
					argv[optind]);
	if (!policy_path)
		return args_usage_error(args.cmd, "--policy is required");
	if (tenant && ns)
		return args_usage_error(args.cmd,
					"--tenant and --namespace exclude each other");
	diag_init(&d);
	if (policy_load(policy_path, &p, &d) < 0) {
		fputs(diag_text(&d), stderr);
		return 2;
	}
	if (tenant) {
		only = policy_tenant_find(p, tenant);
		if (!only) {
			char names[512];

			tenant_names(p, names, sizeof(names));
			fprintf(stderr, "gpugate classes: %s has no tenant \"%s\" (tenants: %s)\n",
				policy_path, tenant, names);
			goto out;
		}
	} else if (ns) {
		only = policy_tenant_for_namespace(p, ns);
		if (!only) {
			/* An answer, not an error: this namespace can use no class. */
			fprintf(stderr, "gpugate classes: namespace \"%s\" belongs to no tenant "
					"of %s: it can use no class\n",
				ns, policy_path);
			list = json_array();
		}
	}
	if (!list)
		list = class_list(p, only);
	if (!list) {
		fputs("gpugate classes: out of memory\n", stderr);
		rc = 1;
		goto out;
	}
	if (only && !json_array_size(list))
		fprintf(stderr, "gpugate classes: tenant \"%s\" can use no class\n",
			only->name);
	if (strcmp(output, "json") == 0) {
		json_dumpf(list, stdout, JSON_INDENT(2));
		putchar('\n');
	} else if (strcmp(output, "yaml") == 0) {
		struct strbuf sb;

		strbuf_init(&sb, 64u << 20);
		if (yamlout_write(list, &sb) < 0 || strbuf_failed(&sb)) {
			strbuf_release(&sb);
			fputs("gpugate classes: out of memory\n", stderr);
			rc = 1;
			goto out;
		}
		fwrite(sb.buf, 1, sb.len, stdout);
		strbuf_release(&sb);
	} else if (json_array_size(list) && print_table(list) < 0) {
		fputs("gpugate classes: out of memory\n", stderr);
		rc = 1;
		goto out;
	}
	rc = 0;
out:
	json_decref(list);
	policy_free(p);
	return rc;
}
