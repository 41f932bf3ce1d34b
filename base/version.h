/*
 * version: what this build is.  The Makefile compiles base/version.c
 * alone with the generated revision header (build/gen/revision.h), so
 * that a new commit rebuilds only it.  Shown by `gpugate version`, in the
 * first log line of `gpugate serve`, and as gpugate_build_info.
 */
#ifndef GPUGATE_VERSION_H
#define GPUGATE_VERSION_H

/* VERSION of the source tree, e.g. "0.9.0". */
const char *version_string(void);
/* `git describe --always --dirty` at build time, "unknown" outside git. */
const char *version_revision(void);

#endif
