/*
 * startup: how long a command takes from exec to a line on its stdout
 * (gpugate serve: "listening on"), or to its exit.
 *
 *   startup --runs N --until-line PREFIX -- CMD ARGS...
 *   startup --runs N --until-exit -- CMD ARGS...
 *
 * Each run forks, starts the clock, execs CMD with stdout on a pipe and
 * stderr to /dev/null, and stops the clock at the first stdout line that
 * starts with PREFIX (then sends SIGTERM and reaps the child) or when the
 * child exits.  Prints one line:
 *   runs=N median_ms= min_ms= max_ms= cpu_median_ms= fails=
 * (cpu: the child's user + system time, until it was reaped: for a server
 * that includes its shutdown after SIGTERM)
 * Exit status 0 when every run got there, 1 otherwise, 2 on usage errors.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TIMEOUT_MS 20000

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static double median(const double *v, int n)
{
	if (!n)
		return 0;
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* One run: milliseconds, or a negative value on failure; *cpu gets the
 * child's CPU time (user + system, until it was reaped). */
static double run_once(char **argv, const char *prefix, double *cpu)
{
	struct rusage ru;
	int fds[2];
	pid_t pid;
	double t0, t = -1;
	char buf[4096];
	size_t len = 0;
	int status;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return -1;
	t0 = now_ms();
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(fds[1], 1);
		if (null >= 0)
			dup2(null, 2);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(fds[1]);
	for (;;) {
		struct pollfd p = {.fd = fds[0], .events = POLLIN};
		int left = TIMEOUT_MS - (int)(now_ms() - t0);
		ssize_t n;

		if (left <= 0 || poll(&p, 1, left) <= 0)
			break;
		n = read(fds[0], buf + len, sizeof(buf) - 1 - len);
		if (n <= 0) {
			/* EOF: the child exited (or closed stdout) */
			if (!prefix)
				t = now_ms() - t0;
			break;
		}
		if (!prefix)
			continue; /* output is not looked at: drain it */
		len += (size_t)n;
		buf[len] = '\0';
		{
			char *line = buf;
			bool found = false;

			for (char *nl; (nl = strchr(line, '\n')); line = nl + 1) {
				if (strncmp(line, prefix, strlen(prefix)) == 0) {
					found = true;
					break;
				}
			}
			if (found) {
				t = now_ms() - t0;
				break;
			}
			/* keep the unfinished line */
			len = strlen(line);
			memmove(buf, line, len + 1);
			if (len >= sizeof(buf) - 1)
				len = 0;
		}
	}
	close(fds[0]);
	if (prefix || t < 0)
		kill(pid, SIGTERM);
	{
		/* reap it; SIGKILL after 10 s */
		double dl = now_ms() + 10000;

		memset(&ru, 0, sizeof(ru));
		while (wait4(pid, &status, WNOHANG, &ru) == 0) {
			if (now_ms() > dl) {
				kill(pid, SIGKILL);
				wait4(pid, &status, 0, &ru);
				break;
			}
			usleep(2000);
		}
		*cpu = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
		       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
	}
	if (!prefix && t >= 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
		return -1;
	return t;
}

int main(int argc, char **argv)
{
	int runs = 10, fails = 0, n = 0, i = 1;
	const char *prefix = NULL;
	bool until_exit = false;
	double *v, *c;

	for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
		if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
			runs = atoi(argv[++i]);
		else if (strcmp(argv[i], "--until-line") == 0 && i + 1 < argc)
			prefix = argv[++i];
		else if (strcmp(argv[i], "--until-exit") == 0)
			until_exit = true;
		else
			goto usage;
	}
	if (i + 1 >= argc || runs < 1 || (!prefix && !until_exit) ||
	    (prefix && until_exit))
		goto usage;
	v = calloc((size_t)runs, sizeof(*v));
	c = calloc((size_t)runs, sizeof(*c));
	if (!v || !c)
		return 2;
	for (int r = 0; r < runs; r++) {
		double cpu = 0, t = run_once(argv + i + 1, prefix, &cpu);

		if (t < 0) {
			fails++;
		} else {
			c[n] = cpu;
			v[n++] = t;
		}
	}
	qsort(v, (size_t)n, sizeof(*v), cmp);
	qsort(c, (size_t)n, sizeof(*c), cmp);
	printf("runs=%d median_ms=%.2f min_ms=%.2f max_ms=%.2f cpu_median_ms=%.2f "
	       "fails=%d\n",
	       runs, median(v, n), n ? v[0] : 0, n ? v[n - 1] : 0, median(c, n),
	       fails);
	return fails ? 1 : 0;
usage:
	fputs("usage: startup --runs N (--until-line PREFIX | --until-exit) -- CMD "
	      "ARGS...\n",
	      stderr);
	return 2;
}
