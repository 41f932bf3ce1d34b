/* gpugate: the command line.  Dispatch only; each command lives in its own
 * file, the table of them in commands.c. */
#include "base/text.h"
#include "cli/args.h"
#include "cli/commands.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *out)
{
	fputs("usage: gpugate COMMAND [OPTIONS]\n\n"
	      "gpugate is a Kubernetes admission webhook that maps GPU classes to\n"
	      "accelerator flavors and enforces tenant quota.\n\ncommands:\n",
	      out);
	size_t n;
	const struct args_command *all = commands_all(&n);

	for (size_t i = 0; i < n; i++)
		fprintf(out, "  %-10s %s\n", all[i].name, all[i].summary);
	fputs("\nRun 'gpugate COMMAND --help' for the options of a command.\n", out);
}

static int unknown_command(const char *name)
{
	struct text_nearest near = {0};
	char hint[160];
	size_t n;
	const struct args_command *all = commands_all(&n);

	for (size_t i = 0; i < n; i++)
		text_nearest_consider(&near, name, all[i].name);
	return args_usage_error(NULL, "unknown command '%.60s'%s", name,
				text_nearest_hint(&near, "", hint, sizeof(hint)));
}

int main(int argc, char **argv)
{
	const struct args_command *cmd;
	struct args_call call;
	char prog[32];

	if (argc < 2) {
		usage(stderr);
		return ARGS_USAGE_ERROR;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		if (argc == 2) {
			usage(stdout);
			return 0;
		}
		cmd = commands_find(argv[2]);
		if (!cmd)
			return unknown_command(argv[2]);
		cmd->usage(stdout);
		return 0;
	}
	cmd = commands_find(strcmp(argv[1], "--version") == 0 ? "version"
								  : argv[1]);
	if (!cmd)
		return unknown_command(argv[1]);
	if (argc > 2 && (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0)) {
		cmd->usage(stdout);
		return 0;
	}
	/* getopt names the program by argv[0]: "gpugate check", not "check". */
	snprintf(prog, sizeof(prog), "gpugate %s", cmd->name);
	argv[1] = prog;
	call.self = cmd;
	call.all = commands_all(&call.n_all);
	return cmd->run(&call, argc - 1, argv + 1);
}
