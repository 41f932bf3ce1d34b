/* Message text helpers (base/text.c). */
#include "base/text.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

Test(text, cleans_cut_and_invalid_utf8)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{"plain", "plain"},
		{"caf\xc3\xa9", "caf\xc3\xa9"},
		{"caf\xc3", "caf"},                 /* cut in a 2-byte character */
		{"x\xe2\x82", "x"},                 /* cut in a 3-byte character */
		{"a\xffz", "a?z"},                  /* not UTF-8 at all */
		{"a\xc3z", "a?z"},                  /* lone lead byte mid-string */
		{"over\xc0\xaflong", "over??long"}, /* overlong encoding */
		{"\xed\xa0\x80", "???"},            /* a surrogate */
		{"tab\there\nnl", "tab here nl"},
		{"\xf0\x9f\x98\x80 ok", "\xf0\x9f\x98\x80 ok"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char buf[64];

		strcpy(buf, cases[i].in);
		text_clean(buf);
		cr_expect_str_eq(buf, cases[i].out, "case %zu", i);
	}
}

Test(text, clips_at_a_character_boundary)
{
	char buf[64];

	strcpy(buf, "short");
	text_clip(buf, 10);
	cr_assert_str_eq(buf, "short");
	strcpy(buf, "abcdefghijkl");
	text_clip(buf, 8);
	cr_assert_str_eq(buf, "abcde...");
	strcpy(buf, "ab\xc3\xa9\xc3\xa9\xc3\xa9zz");
	text_clip(buf, 7); /* cut would fall inside the second character */
	cr_assert_str_eq(buf, "ab\xc3\xa9...");
	cr_assert_eq(strlen(buf), 7);
}

Test(text, writes_integers_in_decimal)
{
	char buf[TEXT_DECIMAL_MAX + 1];

	cr_assert_str_eq(text_decimal(buf, 0), "0");
	cr_assert_str_eq(text_decimal(buf, UINT64_MAX), "18446744073709551615");
	cr_assert_str_eq(text_int(buf, 0), "0");
	cr_assert_str_eq(text_int(buf, 42), "42");
	cr_assert_str_eq(text_int(buf, -7), "-7");
	cr_assert_str_eq(text_int(buf, INT64_MAX), "9223372036854775807");
	cr_assert_str_eq(text_int(buf, INT64_MIN), "-9223372036854775808");
}

/* text_cat() writes what snprintf("%s%s...") writes, cut alike. */
Test(text, joins_strings_as_snprintf_would)
{
	char buf[8], want[8];

	text_cat(buf, sizeof(buf), "ab", "", "cd", NULL);
	cr_assert_str_eq(buf, "abcd");
	text_cat(buf, sizeof(buf), NULL);
	cr_assert_str_eq(buf, "");
	for (size_t size = 1; size <= sizeof(buf); size++) {
		memset(buf, 'x', sizeof(buf));
		memset(want, 'x', sizeof(want));
		text_cat(buf, size, "tenant", "\x1f", "flavor", NULL);
		/* The cut is what is being compared. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-truncation"
		snprintf(want, size, "%s%s%s", "tenant", "\x1f", "flavor");
#pragma GCC diagnostic pop
		cr_assert(memcmp(buf, want, sizeof(buf)) == 0, "size %zu: \"%s\"",
			  size, buf);
	}
	text_cat(buf, 0, "untouched", NULL); /* writes nothing */
}

Test(text, measures_the_edit_distance)
{
	static const struct {
		const char *a, *b;
		size_t max, want;
	} cases[] = {
		{"", "", 2, 0},
		{"train-large", "train-large", 2, 0},
		{"train-larg", "train-large", 2, 1},   /* one deleted */
		{"train-lagre", "train-large", 2, 2},  /* two swapped: 2 edits */
		{"h100-80", "h100-80gb", 2, 2},        /* two missing */
		{"h100", "h100-80gb", 2, 3},           /* too far: max + 1 */
		{"kitten", "sitting", 5, 3},
		{"Train-Large", "train-large", 2, 2},  /* case counts */
		{"", "abc", 5, 3},
		{"abc", "", 1, 2},                     /* length apart: early */
		{"abcdef", "uvwxyz", 2, 3},            /* stops early */
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		cr_expect_eq(text_distance(cases[i].a, cases[i].b, cases[i].max),
			     cases[i].want, "case %zu: %s / %s", i, cases[i].a,
			     cases[i].b);
}

Test(text, distance_of_long_strings_is_over_max)
{
	char a[TEXT_DISTANCE_MAX_LEN + 2], b[TEXT_DISTANCE_MAX_LEN + 2];

	memset(a, 'a', sizeof(a) - 1);
	a[sizeof(a) - 1] = '\0';
	strcpy(b, a);
	cr_expect_eq(text_distance(a, b, 2), 0, "equal strings of any length");
	b[0] = 'b';
	cr_expect_eq(text_distance(a, b, 2), 3);
	a[TEXT_DISTANCE_MAX_LEN] = '\0';
	b[TEXT_DISTANCE_MAX_LEN] = '\0';
	cr_expect_eq(text_distance(a, b, 2), 1, "the longest measured");
}

/* The nearest of known names, as a message offers it. */
static const char *nearest(const char *name, const char *const *known,
			   char *buf, size_t size)
{
	struct text_nearest n = {0};

	for (size_t i = 0; known[i]; i++)
		text_nearest_consider(&n, name, known[i]);
	return text_nearest_hint(&n, "", buf, size);
}

Test(text, offers_the_nearest_name)
{
	static const char *const classes[] = {"train-large", "train-small",
					      "dev-shared", "dev", NULL};
	static const char *const outputs[] = {"text", "json", "yaml", NULL};
	static const struct {
		const char *name;
		const char *const *known;
		const char *want;
	} cases[] = {
		{"trian-large", classes, " (did you mean \"train-large\"?)"},
		{"Train-Small", classes, " (did you mean \"train-small\"?)"},
		{"train-larg", classes, " (did you mean \"train-large\"?)"},
		{"dve", classes, " (did you mean \"dev\"?)"},
		{"inference", classes, ""},          /* nothing close */
		{"xy", classes, ""},                 /* 2 edits would rewrite it */
		{"jsn", outputs, " (did you mean \"json\"?)"},
		{"YAML", outputs, " (did you mean \"yaml\"?)"},
		{"json", outputs, ""},               /* known: nothing to offer */
		{"", outputs, ""},
	};
	char buf[64];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		cr_expect_str_eq(nearest(cases[i].name, cases[i].known, buf,
					 sizeof(buf)),
				 cases[i].want, "case %zu: %s", i, cases[i].name);
}

Test(text, nearest_prefers_case_then_fewest_edits_then_first)
{
	static const char *const known[] = {"ab-c", "AB-D", "ab-d", NULL};
	static const char *const tie[] = {"memory", "memorx", NULL};
	char buf[64];

	cr_expect_str_eq(nearest("ab-D", known, buf, sizeof(buf)),
			 " (did you mean \"AB-D\"?)", "case only beats one edit");
	cr_expect_str_eq(nearest("memorz", tie, buf, sizeof(buf)),
			 " (did you mean \"memory\"?)", "a tie: the first");
	cr_expect_str_eq(nearest("memroy", tie, buf, 8), "",
			 "a hint too long for buf is not offered cut");
	{
		struct text_nearest n = {0};

		text_nearest_consider(&n, "usage-stor", "usage-store");
		cr_expect_str_eq(text_nearest_hint(&n, "--", buf, sizeof(buf)),
				 " (did you mean \"--usage-store\"?)");
	}
}
