/* gpugate version (base/version.h knows what the build is). */
#include "base/version.h"
#include "cli/cmd.h"

#include <stdio.h>

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
	printf("gpugate %s (%s)\n", version_string(), version_revision());
	return 0;
}
