/*
 * Reproducers of what the fuzz harnesses (tests/fuzz/) found in codec/.
 */
#include "codec/jsonmem.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdbool.h>

/*
 * Found while setting up review_fuzz: jsonmem.h promises that under
 * AddressSanitizer every jansson block stays a malloc() of its own (so
 * that use-after-free and leaks of request values are caught), but
 * jsonmem_install() tests only __SANITIZE_ADDRESS__, which GCC defines and
 * clang 14 does not (clang has __has_feature(address_sanitizer)).  Built
 * with clang and -fsanitize=address the arena is on and ASan sees none of
 * the request's values.  Fails under `make CC=clang SANITIZER=address`;
 * elsewhere it checks nothing.
 */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#endif

#ifdef UNDER_ASAN
/* <sanitizer/allocator_interface.h>, which Debian's GCC does not ship. */
int __sanitizer_get_ownership(const volatile void *p);
#endif

Test(fuzz_regress, jsonmem_arena_is_off_under_address_sanitizer)
{
#ifdef UNDER_ASAN
	json_t *a, *b;
	bool own_a, own_b;

	jsonmem_install();
	jsonmem_begin();
	a = json_string("first");
	b = json_string("second");
	cr_assert(a && b);
	/* A block of its own is the start of an ASan heap chunk. */
	own_a = __sanitizer_get_ownership(a);
	own_b = __sanitizer_get_ownership(b);
	json_decref(a);
	json_decref(b);
	jsonmem_end();
	cr_assert(own_a && own_b,
		  "jansson allocates from the jsonmem arena under ASan");
#else
	cr_skip_test("not built with AddressSanitizer");
#endif
}
