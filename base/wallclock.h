/*
 * wallclock: the wall clock in Unix milliseconds, the time gpugate writes
 * into objects and records (annotations, Events, reclaim records) and
 * compares with theirs.  Intervals are measured on CLOCK_MONOTONIC
 * instead (base/nap.h).
 */
#ifndef GPUGATE_WALLCLOCK_H
#define GPUGATE_WALLCLOCK_H

#include <stdint.h>

int64_t wall_ms(void);

#endif
