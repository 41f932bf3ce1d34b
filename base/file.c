#include "base/file.h"

#include "base/diag.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void file_free_secret(char *buf, size_t len)
{
	if (!buf)
		return;
	explicit_bzero(buf, len);
	free(buf);
}

/* realloc() that leaves no copy of a secret behind in the old block. */
static char *grow(char *buf, size_t used, size_t oldcap, size_t cap,
		  bool secret)
{
	char *nb;

	if (!secret)
		return realloc(buf, cap);
	nb = malloc(cap);
	if (nb && used)
		memcpy(nb, buf, used);
	if (nb)
		file_free_secret(buf, oldcap);
	return nb;
}

int file_read(const char *path, size_t max, unsigned flags, char **out,
	      size_t *len, struct diag *d)
{
	bool stdin_ = (flags & FILE_STDIN_DASH) && strcmp(path, "-") == 0;
	bool secret = flags & FILE_SECRET;
	size_t cap = 0, got = 0, want;
	char *buf = NULL;
	struct stat st;
	int fd, rc = FILE_ERR;

	*out = NULL;
	*len = 0;
	fd = stdin_ ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		diag_addf(d, "%s: cannot open: %s", path, strerror(errno));
		return FILE_ERR;
	}
	/* Up to max + 1 bytes: one past the cap tells a file over it. */
	want = max + 1;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
		if ((unsigned long long)st.st_size > max && !(flags & FILE_TRUNCATE)) {
			diag_addf(d, "%s: larger than %zu bytes", path, max);
			goto out;
		}
		/* The whole file in one block (it may still grow meanwhile). */
		if ((unsigned long long)st.st_size < want)
			cap = (size_t)st.st_size + 1;
	}
	if (!cap)
		cap = want < 65536 ? want : 65536;
	for (;;) {
		ssize_t n;

		if (got == cap) {
			size_t ncap = cap * 2 < want ? cap * 2 : want;
			char *nb;

			if (got == want)
				break; /* max + 1 bytes: enough to know */
			nb = grow(buf, got, cap + 1, ncap + 1, secret);
			if (!nb)
				goto oom;
			buf = nb;
			cap = ncap;
		}
		if (!buf) {
			buf = malloc(cap + 1);
			if (!buf)
				goto oom;
		}
		n = read(fd, buf + got, cap - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			diag_addf(d, "%s: cannot read: %s", path, strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	if (got > max && !(flags & FILE_TRUNCATE)) {
		diag_addf(d, "%s: larger than %zu bytes", path, max);
		goto out;
	}
	if (!buf && !(buf = malloc(1)))
		goto oom;
	buf[got] = '\0';
	*out = buf;
	*len = got;
	buf = NULL;
	rc = 0;
	goto out;
oom:
	diag_addf(d, "%s: out of memory", path);
	rc = FILE_OOM;
out:
	if (secret)
		file_free_secret(buf, cap + 1);
	else
		free(buf);
	if (!stdin_)
		close(fd);
	return rc;
}

static bool listed_name(const char *name, const char *const *suffixes)
{
	size_t n = strlen(name);

	if (name[0] == '.')
		return false;
	for (size_t i = 0; suffixes[i]; i++) {
		size_t t = strlen(suffixes[i]);

		if (n > t && strcmp(name + n - t, suffixes[i]) == 0)
			return true;
	}
	return false;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

long file_list(const char *dir, const char *const *suffixes, char ***out,
	       struct diag *d)
{
	DIR *dh = opendir(dir);
	size_t n = 0, cap = 0, dl = strlen(dir);
	char **names = NULL;
	struct dirent *de;

	*out = NULL;
	if (!dh) {
		diag_addf(d, "%s: cannot open: %s", dir, strerror(errno));
		return FILE_ERR;
	}
	while ((de = readdir(dh)) != NULL) {
		struct stat st;
		char *path;

		if (!listed_name(de->d_name, suffixes))
			continue;
		if (asprintf(&path, "%s%s%s", dir, dl && dir[dl - 1] == '/' ? "" : "/",
			     de->d_name) < 0)
			goto oom;
		if (stat(path, &st) < 0 || !S_ISREG(st.st_mode)) {
			free(path);
			continue;
		}
		if (n == cap) {
			size_t grown_cap = cap ? cap * 2 : 16;
			char **grown = realloc(names, grown_cap * sizeof(*names));

			if (!grown) {
				free(path);
				goto oom;
			}
			names = grown;
			cap = grown_cap;
		}
		names[n++] = path;
	}
	closedir(dh);
	if (n > 1)
		qsort(names, n, sizeof(*names), by_name);
	*out = names;
	return (long)n;
oom:
	closedir(dh);
	file_list_free(names, (long)n);
	return FILE_OOM;
}

void file_list_free(char **names, long n)
{
	for (long i = 0; names && i < n; i++)
		free(names[i]);
	free(names);
}
