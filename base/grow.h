/*
 * grow: room in an array that grows with what a round finds, up to a cap.
 *
 * A controller round that callocs its cap (20,000 workloads, 50,000 pods)
 * every time touches megabytes it rarely needs: once glibc has freed one
 * such block its mmap threshold rises, the next calloc comes from the heap
 * and is zeroed page by page (docs/benchmarks.md, "Memory since then").
 * Growing by doubling touches what is used.
 */
#ifndef GPUGATE_BASE_GROW_H
#define GPUGATE_BASE_GROW_H

#include <stdbool.h>
#include <stddef.h>

/*
 * Makes *items (*cap elements of elem bytes) hold at least n + 1: doubles
 * it, from 256, to at most max.  False when n + 1 > max, or out of memory
 * (then *oom is set; *items and *cap are unchanged either way).
 */
bool grow_room(void **items, size_t *cap, size_t n, size_t max, size_t elem,
	       bool *oom);

#endif
