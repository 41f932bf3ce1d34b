/*
 * cmd: the subcommands of the gpugate binary.  main.c parses nothing but the
 * subcommand name; each cmd_* function gets the remaining argv (argv[0] is
 * the subcommand) and returns the process exit status.
 */
#ifndef GPUGATE_CMD_H
#define GPUGATE_CMD_H

#include "cli/args.h"

#include <stdio.h>

/* Each command's options (cli/args.h), in its own file. */
extern const struct args_opt cmd_check_opts[], cmd_classes_opts[],
	cmd_serve_opts[], cmd_explain_opts[], cmd_pool_opts[], cmd_certs_opts[],
	cmd_completion_opts[], cmd_version_opts[];

/* gpugate check FILE...: 0 all valid, 1 some invalid, 2 usage. */
int cmd_check(const struct args_call *call, int argc, char **argv);
void cmd_check_usage(FILE *out);

/* gpugate classes --policy FILE: 0 shown, 1 out of memory, 2 usage. */
int cmd_classes(const struct args_call *call, int argc, char **argv);
void cmd_classes_usage(FILE *out);

/* gpugate serve: 0 after a graceful stop, 1 failure, 2 usage. */
int cmd_serve(const struct args_call *call, int argc, char **argv);
void cmd_serve_usage(FILE *out);
/* A usage error of serve: a log line (msg="not starting"), in its
 * --log-format. */
void cmd_serve_report(const char *message);

/* gpugate explain: 0 all admitted, 1 some denied, 2 bad input, 3 internal
 * error; the highest of a run wins. */
int cmd_explain(const struct args_call *call, int argc, char **argv);
void cmd_explain_usage(FILE *out);

/* gpugate pool: 0 shown, 1 the cluster could not be read, 2 usage. */
int cmd_pool(const struct args_call *call, int argc, char **argv);
void cmd_pool_usage(FILE *out);

/* gpugate certs: 0 written, 1 failure, 2 usage.  Prints the caBundle. */
int cmd_certs(const struct args_call *call, int argc, char **argv);
void cmd_certs_usage(FILE *out);

/* gpugate completion bash|zsh: 0 printed, 2 usage. */
int cmd_completion(const struct args_call *call, int argc, char **argv);
void cmd_completion_usage(FILE *out);

/* gpugate version: 0, 2 usage. */
int cmd_version(const struct args_call *call, int argc, char **argv);
void cmd_version_usage(FILE *out);

#endif
