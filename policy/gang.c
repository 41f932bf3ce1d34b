/*
 * gang: the names of the gang-start routes (policy/gang.h).
 */
#include "policy/gang.h"

#include <stddef.h>
#include <string.h>

static const char *const route_names[] = {
	[GANG_NONE] = "none",
	[GANG_WORKLOAD] = "workload",
	[GANG_PODGROUP] = "podgroup",
	[GANG_GATES] = "gates",
};

const char *gang_route_name(enum gang_route r)
{
	return (size_t)r < sizeof(route_names) / sizeof(route_names[0])
		       ? route_names[r]
		       : "none";
}

enum gang_route gang_auto_route(unsigned served)
{
	if (served & GANG_SERVES_JOB_SCHEDULING)
		return GANG_WORKLOAD;
	if ((served & GANG_SERVES_PODGROUP) && (served & GANG_SERVES_CONTROLLER))
		return GANG_PODGROUP;
	if (served & GANG_SERVES_CONTROLLER)
		return GANG_GATES;
	return GANG_NONE;
}

bool gang_route_parse(const char *s, enum gang_route *out)
{
	for (size_t i = 0; s && i < sizeof(route_names) / sizeof(route_names[0]); i++)
		if (strcmp(s, route_names[i]) == 0) {
			*out = (enum gang_route)i;
			return true;
		}
	return false;
}
