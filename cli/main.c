/* gpugate: the command line.  Dispatch only; each command lives in its own file. */
#include "cli/cmd.h"

#include <stdio.h>
#include <string.h>

struct command {
	const char *name;
	const char *summary;
	int (*run)(int argc, char **argv);
	void (*usage)(FILE *out);
};

static const struct command commands[] = {
	{"serve", "serve the admission webhook over HTTPS", cmd_serve,
	 cmd_serve_usage},
	{"check", "validate policy files", cmd_check, cmd_check_usage},
	{"classes", "list the GPU classes and who may use them", cmd_classes,
	 cmd_classes_usage},
	{"explain", "show what gpugate does with manifests (for CI too)",
	 cmd_explain, cmd_explain_usage},
	{"pool", "show the cluster's GPU pool and tenants' quota", cmd_pool,
	 cmd_pool_usage},
	{"certs", "write a CA and a serving certificate", cmd_certs,
	 cmd_certs_usage},
	{"version", "print the version", cmd_version, cmd_version_usage},
};
#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *out)
{
	fputs("usage: gpugate COMMAND [OPTIONS]\n\n"
	      "gpugate is a Kubernetes admission webhook that maps GPU classes to\n"
	      "accelerator flavors and enforces tenant quota.\n\ncommands:\n",
	      out);
	for (size_t i = 0; i < N_COMMANDS; i++)
		fprintf(out, "  %-9s %s\n", commands[i].name, commands[i].summary);
	fputs("\nRun 'gpugate COMMAND --help' for the options of a command.\n", out);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		if (argc == 2) {
			usage(stdout);
			return 0;
		}
		for (size_t i = 0; i < N_COMMANDS; i++)
			if (strcmp(argv[2], commands[i].name) == 0) {
				commands[i].usage(stdout);
				return 0;
			}
		fprintf(stderr, "gpugate: unknown command '%s'\n", argv[2]);
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "--version") == 0)
		return cmd_version(argc - 1, argv + 1);
	for (size_t i = 0; i < N_COMMANDS; i++) {
		char prog[32];

		if (strcmp(argv[1], commands[i].name) != 0)
			continue;
		if (argc > 2 && (strcmp(argv[2], "--help") == 0 ||
				 strcmp(argv[2], "-h") == 0)) {
			commands[i].usage(stdout);
			return 0;
		}
		/* getopt names the program by argv[0] in its messages:
		 * "gpugate check: unrecognized option", not "check: ...". */
		snprintf(prog, sizeof(prog), "gpugate %s", commands[i].name);
		argv[1] = prog;
		return commands[i].run(argc - 1, argv + 1);
	}
	fprintf(stderr, "gpugate: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
