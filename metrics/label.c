/* label: a label value as Prometheus text writes it (metrics/metrics-int.h). */
#include "metrics/metrics-int.h"

/* A label value as written: what the policy validated, clipped, and
 * anything outside [A-Za-z0-9._/-] as '_' (so that no quote or backslash
 * ever needs escaping). */
void metrics_label_copy(char *dst, size_t size, const char *src)
{
	size_t i = 0;

	for (; src && src[i] && i + 1 < size; i++) {
		char c = src[i];

		dst[i] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
				 (c >= '0' && c <= '9') || c == '.' || c == '_' ||
				 c == '-' || c == '/'
			 ? c
			 : '_';
	}
	dst[i] = '\0';
}
