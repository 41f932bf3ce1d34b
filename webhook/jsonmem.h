/*
 * jsonmem: jansson's allocations of one request come from a per-thread
 * bump arena, dropped all at once when the request is done.
 *
 * A review is parsed into ~1,700 small blocks and freed again; with the
 * default allocator that is a malloc() and a free() each, and glibc
 * consolidating its fast bins whenever a larger block comes by.  Between
 * jsonmem_begin() and jsonmem_end() on a thread, jansson allocates from
 * that thread's arena (falling back to malloc() when it is full) and its
 * frees of arena blocks do nothing.  Nothing jansson allocated inside the
 * scope may be used after jsonmem_end().  Outside a scope, and on every
 * other thread, jansson uses malloc() and free() as before.
 */
#ifndef GPUGATE_JSONMEM_H
#define GPUGATE_JSONMEM_H

/* Installs the allocator (once, before any thread uses jansson). */
void jsonmem_install(void);
void jsonmem_begin(void);
void jsonmem_end(void);
/* Frees what jansson allocated (json_dumps() text, ...). */
void jsonmem_free(void *p);

#endif
