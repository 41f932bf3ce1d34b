/*
 * The table of rules (policy/rules.h): every row complete, ids unique,
 * every anchor a heading of its docs file, and every rule the decision
 * names over the golden cases (tests/golden) a row of the table.
 *
 * Runs from the repository root, like the rest of the unit tests.
 */
#include "base/diag.h"
#include "base/file.h"
#include "policy/policy.h"
#include "policy/rules.h"
#include "webhook/handler.h"
#include "webhook/review.h"

#include <criterion/criterion.h>
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define GOLDEN_DIR "tests/golden"
#define DEFAULT_POLICY "policy/examples/gpu-cluster.yaml"

Test(rules, every_row_has_an_id_what_doc_and_anchor)
{
	for (int r = 0; r < RULES__COUNT; r++) {
		const struct rules_row *row = rules_row((enum rules_id)r);

		cr_assert_not_null(row);
		cr_assert(row->id && row->id[0], "row %d has no id", r);
		cr_assert(row->what && row->what[0], "rule %s says not what it checks",
			  row->id);
		cr_assert(row->doc && row->doc[0], "rule %s has no docs file", row->id);
		cr_assert(row->anchor && row->anchor[0], "rule %s has no anchor", row->id);
		cr_assert_eq(rules_name((enum rules_id)r), row->id);
		cr_assert_eq(rules_find(row->id), row, "rule %s", row->id);
		for (const char *s = row->id; *s; s++)
			cr_assert((*s >= 'a' && *s <= 'z') || *s == '-',
				  "rule id \"%s\": lowercase letters and '-' only", row->id);
	}
	cr_assert_null(rules_find("no-such-rule"));
	cr_assert_null(rules_find(NULL));
}

Test(rules, ids_are_unique)
{
	for (int a = 0; a < RULES__COUNT; a++)
		for (int b = a + 1; b < RULES__COUNT; b++)
			cr_assert_str_neq(rules_name((enum rules_id)a),
					  rules_name((enum rules_id)b),
					  "rules %d and %d share an id", a, b);
}

/* The GitHub anchor of a Markdown heading line ("## How much ...?" ->
 * "how-much-..."): lowercase, punctuation but '-' and '_' dropped, spaces
 * to '-'. */
static void slug(const char *heading, char *out, size_t size)
{
	size_t o = 0;

	while (*heading == '#')
		heading++;
	while (*heading == ' ')
		heading++;
	for (const char *s = heading; *s && *s != '\n' && o + 1 < size; s++) {
		unsigned char ch = (unsigned char)*s;

		if (isalnum(ch) || ch == '-' || ch == '_')
			out[o++] = (char)tolower(ch);
		else if (ch == ' ')
			out[o++] = '-';
	}
	out[o] = '\0';
}

static bool doc_has_anchor(const char *doc, const char *anchor)
{
	FILE *f = fopen(doc, "r");
	char line[1024], s[1024];
	bool fenced = false, found = false;

	cr_assert_not_null(f, "cannot read %s (run from the repository root)", doc);
	while (!found && fgets(line, sizeof(line), f)) {
		if (strncmp(line, "```", 3) == 0)
			fenced = !fenced;
		if (fenced || line[0] != '#')
			continue;
		slug(line, s, sizeof(s));
		found = strcmp(s, anchor) == 0;
	}
	fclose(f);
	return found;
}

Test(rules, every_anchor_is_a_heading_of_its_docs_file)
{
	char s[64];

	slug("## How much of my quota do I use?\n", s, sizeof(s));
	cr_assert_str_eq(s, "how-much-of-my-quota-do-i-use");
	slug("## GPUs through DRA (ResourceClaims)\n", s, sizeof(s));
	cr_assert_str_eq(s, "gpus-through-dra-resourceclaims");
	for (int r = 0; r < RULES__COUNT; r++) {
		const struct rules_row *row = rules_row((enum rules_id)r);

		cr_assert(doc_has_anchor(row->doc, row->anchor),
			  "rule %s: %s has no heading #%s", row->id, row->doc,
			  row->anchor);
	}
}

/* ---- the golden cases ---------------------------------------------------- */

static bool is_file(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The rule the decision of golden case name names ("" for none); false
 * when the case cannot be evaluated (a review the server answers 400). */
static bool golden_rule(const char *name, char *rule, size_t size)
{
	char path[512], word[32] = "", err[300];
	struct policy *p = NULL;
	struct review rv;
	struct evaluation ev;
	struct diag d;
	enum handler_endpoint ep;
	size_t len = 0;
	char *body;
	FILE *f;
	bool ok;

	rule[0] = '\0';
	snprintf(path, sizeof(path), GOLDEN_DIR "/%s/endpoint", name);
	f = fopen(path, "r");
	cr_assert_not_null(f, "%s: no endpoint", name);
	if (fscanf(f, "%31s", word) != 1)
		word[0] = '\0';
	fclose(f);
	ep = strcmp(word, "mutate") == 0 ? HANDLER_MUTATE : HANDLER_VALIDATE;
	snprintf(path, sizeof(path), GOLDEN_DIR "/%s/policy.yaml", name);
	if (!is_file(path))
		snprintf(path, sizeof(path), "%s", DEFAULT_POLICY);
	diag_init(&d);
	cr_assert_eq(policy_load(path, &p, &d), 0, "%s: %s", name, diag_text(&d));
	snprintf(path, sizeof(path), GOLDEN_DIR "/%s/review.json", name);
	cr_assert_eq(file_read(path, 1u << 20, 0, &body, &len, &d), 0, "%s: %s", name,
		     diag_text(&d));
	ok = review_decode(body, len, &rv, err, sizeof(err)) == 0;
	if (ok) {
		evaluation_init(&ev);
		cr_assert_eq(handler_evaluate(p, &rv, ep, NULL, NULL, &ev), 0, "%s", name);
		if (ev.dec.rule)
			snprintf(rule, size, "%s", ev.dec.rule);
		evaluation_release(&ev);
	}
	review_release(&rv); /* also after a failed decode */
	free(body);
	policy_free(p);
	return ok;
}

Test(rules, every_rule_the_golden_cases_name_is_in_the_table)
{
	DIR *dir = opendir(GOLDEN_DIR);
	struct dirent *e;
	size_t cases = 0, named = 0;

	cr_assert_not_null(dir, "cannot read " GOLDEN_DIR " (run from the repository root)");
	while ((e = readdir(dir)) != NULL) {
		char path[512], rule[64];

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), GOLDEN_DIR "/%s/review.json", e->d_name);
		if (!is_file(path) || !golden_rule(e->d_name, rule, sizeof(rule)))
			continue;
		cases++;
		if (!rule[0])
			continue;
		named++;
		cr_assert_not_null(rules_find(rule),
				   "golden case %s names rule \"%s\", which is not in "
				   "the table (policy/rules.c)",
				   e->d_name, rule);
	}
	closedir(dir);
	/* A test that cannot fail is a defect: the denials must be there. */
	cr_assert_geq(cases, 12, "only %zu golden cases evaluated", cases);
	cr_assert_geq(named, 3, "only %zu golden cases name a rule", named);
}
