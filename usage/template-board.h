/*
 * template-board: what the template keeper (controllers/claim-templates.h)
 * last found, for admission to read: whether the cluster serves
 * resource.k8s.io/v1 ResourceClaimTemplates, and which names gpugate wants
 * are taken by templates that are not gpugate's (docs/design/dra.md,
 * "Ownership").  A pod of a DRA class whose template is taken, or on a
 * cluster that serves none, is denied at the door.
 *
 * The keeper publishes a whole round at once (every replica's keeper
 * lists, only the leader's writes); admission asks by name.  Thread-safe
 * (one mutex); a lookup is a hash probe.
 */
#ifndef GPUGATE_TEMPLATE_BOARD_H
#define GPUGATE_TEMPLATE_BOARD_H

#include <stdbool.h>
#include <stddef.h>

enum template_served {
	TEMPLATES_UNKNOWN,    /* not asked yet (or every answer failed) */
	TEMPLATES_SERVED,
	TEMPLATES_NOT_SERVED, /* 404: resource.k8s.io/v1 resourceclaimtemplates */
};

struct template_board;

/* NULL when out of memory. */
struct template_board *template_board_new(void);
/* NULL is a no-op. */
void template_board_free(struct template_board *b);

/* Served or not, as the round found. */
void template_board_served_set(struct template_board *b, enum template_served s);
enum template_served template_board_served(struct template_board *b);

/*
 * A round's taken names: the set between begin and end replaces the last
 * one.  put returns 1 when (ns, name) was not taken in the last round (the
 * keeper logs it then, once), 0 when it was, -1 when out of memory.
 */
void template_board_taken_begin(struct template_board *b);
int template_board_taken_put(struct template_board *b, const char *ns, const char *name);
void template_board_taken_end(struct template_board *b);

/* Whether template `name` in namespace ns is taken by a stranger's
 * (as of the last round published). */
bool template_board_taken(struct template_board *b, const char *ns, const char *name);
/* How many are taken. */
size_t template_board_taken_count(struct template_board *b);

#endif
