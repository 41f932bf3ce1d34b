/* cluster-opts: the options of the commands that read the cluster once. */
#include "cli/cluster-opts.h"

#include <stdlib.h>

int cluster_opts_timeout(const char *arg, unsigned *seconds)
{
	char *end;
	unsigned long v = strtoul(arg, &end, 10);

	if (!*arg || *end || v < 1 || v > 3600)
		return -1;
	*seconds = (unsigned)v;
	return 0;
}
