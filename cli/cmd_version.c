/* gpugate version (base/version.h knows what the build is). */
#include "base/version.h"
#include "cli/cmd.h"

#include <stdio.h>

void cmd_version_usage(FILE *out)
{
	fputs("usage: gpugate version\n\nPrints the version and source revision.\n",
	      out);
}

const struct args_opt cmd_version_opts[] = {
	{"help", 'h', 'h', ARGS_NONE, NULL},
	{NULL, 0, 0, ARGS_NONE, NULL},
};

int cmd_version(const struct args_call *call, int argc, char **argv)
{
	if (argc > 1)
		return args_usage_error(call->self,
					"unexpected argument '%.60s'", argv[1]);
	printf("gpugate %s (%s)\n", version_string(), version_revision());
	return 0;
}
