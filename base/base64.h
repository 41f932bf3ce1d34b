/*
 * base64: RFC 4648 standard base64 ('+', '/', '=' padding), the one codec
 * of the tree: the admission response's patch is encoded with it, kubeconfig
 * "-data" fields are decoded with it.
 */
#ifndef GPUGATE_BASE64_H
#define GPUGATE_BASE64_H

#include <stddef.h>

struct strbuf;

/* Appends the base64 of in[0, len) to sb, padded.  Two table lookups per
 * three bytes: it encodes every patch gpugate sends. */
void base64_encode(struct strbuf *sb, const void *in, size_t len);

enum base64_mode {
	/* Padded, length a multiple of 4, nothing but the alphabet. */
	BASE64_STRICT,
	/* White space anywhere is skipped and the padding may be left out,
	 * as in a kubeconfig (Go's and kubectl's writers wrap nothing, but
	 * people paste). */
	BASE64_LENIENT,
};

/*
 * Decodes in[0, n) into a new buffer (NUL-terminated after *outlen bytes;
 * the caller frees it).  Returns 0, or -1 when the text is not base64 in
 * that mode (nothing allocated) and -2 when out of memory.
 */
int base64_decode(const char *in, size_t n, enum base64_mode mode, char **out,
		  size_t *outlen);

#endif
