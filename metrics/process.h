/*
 * process: this process's process_* metrics, read from /proc when a scrape
 * asks (never on the request path).  The parsing is base/procstat.c's;
 * this file only reads the files.
 */
#ifndef GPUGATE_PROCESS_H
#define GPUGATE_PROCESS_H

#include "base/procstat.h"

/* Fills out from /proc/self/{stat,limits,fd} and /proc/stat: 0, or -1 when
 * any of them cannot be read or parsed (not Linux, no /proc mounted): the
 * scrape then shows no process_* lines. */
int process_read(struct procstat *out);

#endif
