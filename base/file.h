/*
 * file: the one bounded file reader.  Every file gpugate reads (the policy,
 * certificates and keys, kubeconfigs and the tokens they name, manifests
 * for explain) goes through file_read(), so that every one has a hard size
 * cap and the same messages.
 */
#ifndef GPUGATE_FILE_H
#define GPUGATE_FILE_H

#include <stddef.h>

struct diag;

enum file_flags {
	/* "-" is standard input. */
	FILE_STDIN_DASH = 1u << 0,
	/* A file over max bytes is not an error: its first max + 1 bytes are
	 * returned, so that the caller can word the refusal itself. */
	FILE_TRUNCATE = 1u << 1,
	/* The bytes are a secret (a private key, a token): every buffer the
	 * read gives up is wiped first; free the result with file_free_secret(). */
	FILE_SECRET = 1u << 2,
};

/* file_read()'s failures. */
#define FILE_ERR (-1) /* cannot open or read, or over max: the message says */
#define FILE_OOM (-2) /* out of memory */

/*
 * Reads the file at path into a new NUL-terminated buffer (*out, *len
 * without the NUL; the caller frees it).  A regular file larger than max
 * bytes is refused without being read.  Returns 0, or FILE_ERR or FILE_OOM
 * after adding one line to d:
 *
 *   PATH: cannot open: REASON
 *   PATH: cannot read: REASON          (e.g. "Is a directory")
 *   PATH: larger than MAX bytes
 *   PATH: out of memory
 */
int file_read(const char *path, size_t max, unsigned flags, char **out,
	      size_t *len, struct diag *d);

/*
 * The regular files directly in dir (not in its subdirectories; no hidden
 * ones) whose names end in one of suffixes (NULL-ended, e.g. ".yaml"), as
 * "DIR/NAME", sorted by name: what `kubectl apply -f DIR` reads without
 * -R.  Returns how many (*out: n new strings in a new array; free with
 * file_list_free(), also when 0), or FILE_ERR after adding
 * "DIR: cannot open: REASON" to d, or FILE_OOM.
 */
long file_list(const char *dir, const char *const *suffixes, char ***out,
	       struct diag *d);

/* Frees what file_list() returned.  NULL is a no-op. */
void file_list_free(char **names, long n);

/* Wipes len bytes of buf, then frees it.  NULL is a no-op. */
void file_free_secret(char *buf, size_t len);

#endif
