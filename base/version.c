#include "base/version.h"

#ifndef GPUGATE_VERSION
#define GPUGATE_VERSION "0.0.0"
#endif
#ifndef GPUGATE_REV
#define GPUGATE_REV "unknown"
#endif

const char *version_string(void)
{
	return GPUGATE_VERSION;
}

const char *version_revision(void)
{
	return GPUGATE_REV;
}
