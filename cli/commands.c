/*
 * commands: every command of the gpugate binary, with its options (each
 * command's file holds its table): what main.c dispatches on, what the
 * parser reads, what `gpugate completion` completes.
 */
#include "cli/commands.h"

#include "cli/cmd.h"

#include <string.h>

static const char *const shells[] = {"bash", "zsh", NULL};

static const struct args_command COMMANDS[] = {
	{"serve", "serve the admission webhook over HTTPS", cmd_serve,
	 cmd_serve_usage, cmd_serve_opts, ARGS_NONE, NULL, cmd_serve_report},
	{"check", "validate policy files (or the policy files of a directory)",
	 cmd_check, cmd_check_usage, cmd_check_opts, ARGS_FILE, NULL, NULL},
	{"classes", "list the GPU classes and who may use them", cmd_classes,
	 cmd_classes_usage, cmd_classes_opts, ARGS_NONE, NULL, NULL},
	{"explain", "show what gpugate does with manifests (for CI too)",
	 cmd_explain, cmd_explain_usage, cmd_explain_opts, ARGS_FILE, NULL, NULL},
	{"pool", "show the cluster's GPU pool and tenants' quota", cmd_pool,
	 cmd_pool_usage, cmd_pool_opts, ARGS_NONE, NULL, NULL},
	{"certs", "write a CA and a serving certificate", cmd_certs,
	 cmd_certs_usage, cmd_certs_opts, ARGS_NONE, NULL, NULL},
	{"completion", "print a shell completion script (bash or zsh)",
	 cmd_completion, cmd_completion_usage, cmd_completion_opts, ARGS_CHOICE,
	 shells, NULL},
	{"version", "print the version", cmd_version, cmd_version_usage,
	 cmd_version_opts, ARGS_NONE, NULL, NULL},
};

#define N_COMMANDS (sizeof(COMMANDS) / sizeof(COMMANDS[0]))

const struct args_command *commands_all(size_t *n)
{
	*n = N_COMMANDS;
	return COMMANDS;
}

const struct args_command *commands_find(const char *name)
{
	for (size_t i = 0; i < N_COMMANDS; i++)
		if (strcmp(COMMANDS[i].name, name) == 0)
			return &COMMANDS[i];
	return NULL;
}
