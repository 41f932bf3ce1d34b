/*
 * commands: the table of the gpugate binary's commands, in the order
 * gpugate --help lists them.  main.c dispatches on it and hands each
 * command its own row and the table (struct args_call); the commands
 * themselves never read it, so the table may point at them.
 */
#ifndef GPUGATE_COMMANDS_H
#define GPUGATE_COMMANDS_H

#include <stddef.h>

#include "cli/args.h"

/* Every command; *n is their number. */
const struct args_command *commands_all(size_t *n);

/* The command named name, or NULL. */
const struct args_command *commands_find(const char *name);

#endif
