/*
 * log_capture: the test process's stderr into a temporary file, so that a
 * test reads back the log lines gpugate wrote (kube/informer.c and
 * kube/feed.c log there).  One capture at a time; Criterion runs each test
 * in a process of its own.
 */
#ifndef GPUGATE_TEST_LOG_CAPTURE_H
#define GPUGATE_TEST_LOG_CAPTURE_H

#include <stddef.h>

/* From now on stderr goes to a new temporary file (a failed assertion
 * otherwise). */
void log_capture_start(void);

/* What was logged so far, at most 64 KiB; the caller frees it. */
char *log_captured(void);

/* How often needle occurs in hay. */
size_t log_count(const char *hay, const char *needle);

/* stderr back where it was, the file removed.  A no-op without a start:
 * fit for a suite's .fini. */
void log_capture_stop(void);

#endif
