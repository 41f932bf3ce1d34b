/*
 * gpugate version.  The Makefile compiles this file alone with the
 * generated revision header, so that a new commit rebuilds only it.
 */
#include "cli/cmd.h"

#include <stdio.h>

#ifndef GPUGATE_VERSION
#define GPUGATE_VERSION "0.0.0"
#endif
#ifndef GPUGATE_REV
#define GPUGATE_REV "unknown"
#endif

void cmd_version_usage(FILE *out)
{
	fputs("usage: gpugate version\n\nPrints the version and source revision.\n",
	      out);
}

int cmd_version(int argc, char **argv)
{
	if (argc > 1) {
		fprintf(stderr, "gpugate version: unexpected argument '%s'\n",
			argv[1]);
		cmd_version_usage(stderr);
		return 2;
	}
	printf("gpugate %s (%s)\n", GPUGATE_VERSION, GPUGATE_REV);
	return 0;
}
