/*
 * cmd: the subcommands of the gpugate binary.  main.c parses nothing but the
 * subcommand name; each cmd_* function gets the remaining argv (argv[0] is
 * the subcommand) and returns the process exit status.
 */
#ifndef GPUGATE_CMD_H
#define GPUGATE_CMD_H

#include <stdio.h>

/* gpugate check FILE...: 0 all valid, 1 some invalid, 2 usage. */
int cmd_check(int argc, char **argv);
void cmd_check_usage(FILE *out);

#endif
