#include "codec/jsonmem.h"

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

/* Enough for a 20 KiB review, its copy and its patch; more falls back. */
#define ARENA_BYTES (256u * 1024u)

static _Thread_local struct {
	char *base;
	size_t used;
	bool on;
	bool spilled; /* something went to malloc() while on */
} ta;

static void *jm_malloc(size_t n)
{
	if (ta.on) {
		size_t need = (n + 15) & ~(size_t)15;

		if (need >= n && need <= ARENA_BYTES - ta.used) {
			void *p = ta.base + ta.used;

			ta.used += need;
			return p;
		}
		ta.spilled = true;
	}
	return malloc(n);
}

static void jm_free(void *p)
{
	/* a block of this thread's arena: dropped with the arena */
	if (ta.base && (uintptr_t)p >= (uintptr_t)ta.base &&
	    (uintptr_t)p < (uintptr_t)ta.base + ARENA_BYTES)
		return;
	free(p);
}

/* Frees a thread's arena when the thread exits. */
static pthread_key_t arena_key;
static bool installed; /* written once, before any worker thread starts */
static pthread_once_t arena_once = PTHREAD_ONCE_INIT;

static void make_key(void)
{
	pthread_key_create(&arena_key, free);
}

/* gcc says __SANITIZE_ADDRESS__, clang says __has_feature(address_sanitizer). */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define JSONMEM_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define JSONMEM_ASAN 1
#endif

void jsonmem_install(void)
{
#if defined(JSONMEM_ASAN)
	/* Under AddressSanitizer every block stays a malloc() of its own, so
	 * that use-after-free and leaks of request values are still caught. */
	return;
#endif
	pthread_once(&arena_once, make_key);
	json_set_alloc_funcs(jm_malloc, jm_free);
	installed = true;
}

void jsonmem_begin(void)
{
	if (!installed)
		return; /* jansson allocates with malloc(): nothing to scope */
	if (!ta.base) {
		pthread_once(&arena_once, make_key);
		ta.base = malloc(ARENA_BYTES);
		if (ta.base)
			pthread_setspecific(arena_key, ta.base);
	}
	ta.used = 0;
	ta.spilled = false;
	ta.on = ta.base != NULL;
}

bool jsonmem_discardable(void)
{
	return ta.on && !ta.spilled;
}

void jsonmem_end(void)
{
	ta.on = false;
	ta.used = 0;
}

bool jsonmem_pause(void)
{
	bool was_on = ta.on;

	ta.on = false;
	return was_on;
}

void jsonmem_resume(bool was_on)
{
	ta.on = was_on;
}

void jsonmem_free(void *p)
{
	jm_free(p);
}
