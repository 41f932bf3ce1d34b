/*
 * srcpos: where each part of a YAML document is, by path.
 *
 * The loader walks the document once and records the 1-based line of every
 * mapping key and sequence entry under a path such as
 * "tenants[1].quota[0].nominal".  Semantic checks run later on the loaded
 * structures and ask for the line of the thing at fault.
 */
#ifndef GPUGATE_SRCPOS_H
#define GPUGATE_SRCPOS_H

#include "base/arena.h"
#include "base/strmap.h"

struct srcpos {
	struct arena arena; /* the path strings */
	struct strmap map;  /* path -> line */
};

void srcpos_init(struct srcpos *p);
void srcpos_release(struct srcpos *p);

/* Records path at line; the first record of a path wins.  -1: no memory. */
int srcpos_add(struct srcpos *p, const char *path, unsigned line);

/*
 * The line of the formatted path.  When the path is unknown (a key that is
 * absent), the line of its nearest recorded parent; 0 when none.
 */
unsigned srcpos_line(const struct srcpos *p, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
