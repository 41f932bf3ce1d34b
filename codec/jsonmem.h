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

#include <stdbool.h>

/* Installs the allocator (once, before any thread uses jansson). */
void jsonmem_install(void);
void jsonmem_begin(void);
void jsonmem_end(void);
/*
 * True when everything jansson allocated since jsonmem_begin() lies in the
 * arena: the request's values may then be dropped with it, without walking
 * them to free each block (json_decref of a review was a quarter of a
 * request's instructions).
 */
bool jsonmem_discardable(void);
/*
 * Values that outlive the request (built once inside one, then shared):
 * between jsonmem_pause() and jsonmem_resume(), jansson allocates with
 * malloc() on this thread.  jsonmem_pause() returns what jsonmem_resume()
 * takes back.
 */
bool jsonmem_pause(void);
void jsonmem_resume(bool was_on);
/* Frees what jansson allocated (json_dumps() text, ...). */
void jsonmem_free(void *p);

#endif
