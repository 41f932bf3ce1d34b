/* gpugate: the command line.  Dispatch only; each command lives in its own
 * file, the table of them in commands.c. */
#include "base/text.h"
#include "cli/args.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *out)
{
	fputs("usage: gpugate COMMAND [OPTIONS]\n\n"
	      "gpugate is a Kubernetes admission webhook that maps GPU classes to\n"
	      "accelerator flavors and enforces tenant quota.\n\ncommands:\n",
	      out);
	for (size_t i = 0; i < args_n_commands; i++)
		fprintf(out, "  %-10s %s\n", args_commands[i].name,
			args_commands[i].summary);
	fputs("\nRun 'gpugate COMMAND --help' for the options of a command.\n", out);
}

static int unknown_command(const char *name)
{
	struct text_nearest near = {0};
	char hint[160];

	for (size_t i = 0; i < args_n_commands; i++)
		text_nearest_consider(&near, name, args_commands[i].name);
	return args_usage_error(NULL, "unknown command '%.60s'%s", name,
				text_nearest_hint(&near, "", hint, sizeof(hint)));
}

int main(int argc, char **argv)
{
	const struct args_command *cmd;
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
		cmd = args_command_find(argv[2]);
		if (!cmd)
			return unknown_command(argv[2]);
		cmd->usage(stdout);
		return 0;
	}
	cmd = args_command_find(strcmp(argv[1], "--version") == 0 ? "version"
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
	return cmd->run(argc - 1, argv + 1);
}
