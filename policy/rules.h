/*
 * rules: the table of the rules a decision can name (struct decision.rule,
 * policy/decide.h).  One row a rule: its id (the short name denials,
 * the decision annotation, logs, metrics and `gpugate explain` give), what
 * it checks, and where a user reads about it (a heading of a file under
 * docs/).  The ids are part of the contract: never renamed.
 *
 * Pure, constant data.
 */
#ifndef GPUGATE_RULES_H
#define GPUGATE_RULES_H

enum rules_id {
	RULES_NO_TENANT,
	RULES_CLASS_CONFLICT,
	RULES_CLASS_UNKNOWN,
	RULES_CLASS_NOT_ALLOWED,
	RULES_GPUS_INVALID,
	RULES_GPUS_CONFLICT,
	RULES_SHARING,
	RULES_CONTAINER_UNKNOWN,
	RULES_TWO_FLAVORS,
	RULES_RAW_REQUEST,
	RULES_RAW_FLAVOR,
	RULES_SECURITY,
	RULES_NODE_SELECTOR,
	RULES_NOT_MUTATED,
	RULES_QUOTA,
	RULES_POOL,
	RULES_STAMP_CHANGED,
	RULES_PARALLELISM_RAISED,
	RULES_JOB_TEMPLATE_CHANGED,
	RULES_ALLOCATION_ALL,
	RULES_GANG,
	RULES_POD_REQUEST_CHANGED,
	RULES_CLAIM_TEMPLATE,
	RULES__COUNT
};

struct rules_row {
	const char *id;     /* "no-tenant" */
	const char *what;   /* one line: what the rule checks */
	const char *doc;    /* the file a user reads, from the repository root */
	const char *anchor; /* the heading there, GitHub-style ("denials") */
};

/* The row of rule r (r < RULES__COUNT; never NULL). */
const struct rules_row *rules_row(enum rules_id r);

/* The id of rule r: a static string, as struct decision.rule holds it. */
const char *rules_name(enum rules_id r);

/* The row whose id is id, or NULL. */
const struct rules_row *rules_find(const char *id);

#endif
