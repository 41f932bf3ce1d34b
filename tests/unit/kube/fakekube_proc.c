#include "tests/unit/kube/fakekube_proc.h"

#include "base/diag.h"
#include "certs/certs.h"
#include "kube/client.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SCRIPT "tests/integration/fakekube.py"

static long long mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int rm_entry(const char *path, const struct stat *st, int type,
		    struct FTW *ftw)
{
	(void)st;
	(void)type;
	(void)ftw;
	return remove(path);
}

/* Waits up to ms for the child to exit; its wait status, or -1. */
static int reap(pid_t pid, long long ms)
{
	long long until = mono_ms() + ms;
	int status;

	do {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			return status;
		if (r < 0 && errno != EINTR)
			return -1;
		usleep(10000);
	} while (mono_ms() < until);
	return -1;
}

static void describe_exit(int status, char *out, size_t cap)
{
	if (status < 0)
		snprintf(out, cap, "did not exit");
	else if (WIFEXITED(status))
		snprintf(out, cap, "exited with status %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(out, cap, "was killed by signal %d", WTERMSIG(status));
	else
		snprintf(out, cap, "stopped");
}

/* Reads the "ready PORT KUBECONFIG" line within FAKEKUBE_START_MS. */
static int read_ready(struct fakekube *f, int fd, struct diag *d)
{
	long long until = mono_ms() + FAKEKUBE_START_MS;
	char line[1024];
	size_t len = 0;

	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		long long left = until - mono_ms();
		ssize_t n;
		char *nl;

		if (left <= 0) {
			diag_addf(d, "fakekube: not ready within %d ms", FAKEKUBE_START_MS);
			return -1;
		}
		if (poll(&p, 1, (int)left) < 0) {
			if (errno == EINTR)
				continue;
			diag_addf(d, "fakekube: poll: %s", strerror(errno));
			return -1;
		}
		if (!(p.revents & (POLLIN | POLLHUP)))
			continue;
		n = read(fd, line + len, sizeof(line) - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -2; /* it went away: the caller says how */
		len += (size_t)n;
		line[len] = '\0';
		nl = strchr(line, '\n');
		if (nl) {
			*nl = '\0';
			if (sscanf(line, "ready %d %511s", &f->port, f->kubeconfig) != 2) {
				diag_addf(d, "fakekube: unexpected first line \"%s\"", line);
				return -1;
			}
			return 0;
		}
		if (len == sizeof(line) - 1) {
			diag_addf(d, "fakekube: first line too long");
			return -1;
		}
	}
}

int fakekube_start(struct fakekube *f, struct diag *d)
{
	const char *script = getenv("FAKEKUBE_PY") ? getenv("FAKEKUBE_PY") : SCRIPT;
	const char *ips[] = {"127.0.0.1"};
	char ca[300], crt[300], key[300], work[300], why[64];
	int in[2] = {-1, -1}, out[2] = {-1, -1}, rc;
	struct certs_request req = {.ips = ips, .n_ips = 1, .days = 1};

	memset(f, 0, sizeof(*f));
	f->to_child = -1;
	signal(SIGPIPE, SIG_IGN);
	if (access(script, R_OK) < 0) {
		diag_addf(d, "fakekube: %s: %s (the unit tests run from the "
			     "repository root)", script, strerror(errno));
		return -1;
	}
	snprintf(f->dir, sizeof(f->dir), "%s/fakekube-XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(f->dir)) {
		diag_addf(d, "fakekube: mkdtemp %s: %s", f->dir, strerror(errno));
		f->dir[0] = '\0';
		return -1;
	}
	req.out_dir = f->dir;
	if (certs_generate(&req, d) < 0)
		goto fail;
	snprintf(ca, sizeof(ca), "%s/" CERTS_CA_CRT, f->dir);
	snprintf(crt, sizeof(crt), "%s/" CERTS_TLS_CRT, f->dir);
	snprintf(key, sizeof(key), "%s/" CERTS_TLS_KEY, f->dir);
	snprintf(work, sizeof(work), "%s/kube", f->dir);
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0) {
		diag_addf(d, "fakekube: pipe: %s", strerror(errno));
		goto fail;
	}
	f->pid = fork();
	if (f->pid < 0) {
		diag_addf(d, "fakekube: fork: %s", strerror(errno));
		f->pid = 0;
		goto fail;
	}
	if (f->pid == 0) {
		/* The child: stdin and stdout are the pipes, stderr is the
		 * test's (a traceback shows in its log). */
		dup2(in[0], 0);
		dup2(out[1], 1);
		static const char msg[] = "fakekube: cannot run python3\n";

		execlp("python3", "python3", script, "--ca", ca, "--cert", crt,
		       "--key", key, "--workdir", work, (char *)NULL);
		/* Only async-signal-safe calls between fork and exec. */
		if (write(2, msg, sizeof(msg) - 1) < 0)
			_exit(126);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	in[0] = out[1] = -1;
	f->to_child = in[1];
	in[1] = -1;
	rc = read_ready(f, out[0], d);
	if (rc == -2) {
		describe_exit(reap(f->pid, 5000), why, sizeof(why));
		f->pid = 0;
		diag_addf(d, "fakekube: python3 %s %s before it was ready", script, why);
	}
	if (rc < 0)
		goto fail;
	close(out[0]);
	out[0] = -1;
	if (kube_config_load(f->kubeconfig, &f->cfg, d) < 0)
		goto fail;
	return 0;
fail:
	for (int i = 0; i < 2; i++) {
		if (in[i] >= 0)
			close(in[i]);
		if (out[i] >= 0)
			close(out[i]);
	}
	fakekube_stop(f);
	return -1;
}

void fakekube_stop(struct fakekube *f)
{
	if (f->to_child >= 0)
		close(f->to_child);
	f->to_child = -1;
	if (f->pid > 0 && reap(f->pid, 5000) < 0) {
		kill(f->pid, SIGKILL);
		reap(f->pid, 5000);
	}
	f->pid = 0;
	if (f->dir[0])
		nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	f->dir[0] = '\0';
	kube_config_release(&f->cfg);
}

/* One request to the fake's control paths (/_fake/...). */
static int control(struct fakekube *f, const char *method, const char *path,
		   const char *body, char **answer, struct diag *d)
{
	struct kube_request req = {.method = method, .path = path, .body = body,
				   .body_len = body ? strlen(body) : 0,
				   .timeout_ms = 10000};
	struct kube_response resp;
	struct kube *k = kube_new(&f->cfg, d);
	int rc;

	if (answer)
		*answer = NULL;
	if (!k)
		return -1;
	rc = kube_request(k, &req, &resp, d);
	if (rc == 0 && answer) {
		*answer = resp.body;
		resp.body = NULL;
	}
	kube_response_release(&resp);
	kube_free(k);
	return rc == 0 ? 0 : -1;
}

int fakekube_fault(struct fakekube *f, const char *json, struct diag *d)
{
	return control(f, "POST", "/_fake/faults", json, NULL, d);
}

int fakekube_clear_faults(struct fakekube *f, struct diag *d)
{
	return control(f, "DELETE", "/_fake/faults", NULL, NULL, d);
}

int fakekube_call(struct fakekube *f, const char *json, struct diag *d)
{
	return control(f, "POST", "/_fake/call", json, NULL, d);
}

int fakekube_serve(struct fakekube *f, const char *kind, bool served,
		   struct diag *d)
{
	char body[128];

	snprintf(body, sizeof(body), "{\"kind\": \"%s\", \"served\": %s}", kind,
		 served ? "true" : "false");
	return control(f, "POST", "/_fake/served", body, NULL, d);
}

int fakekube_event(struct fakekube *f, const char *kind, const char *type,
		   const char *object, struct diag *d)
{
	size_t n = strlen(object) + 128;
	char *body = malloc(n);
	int rc;

	if (!body) {
		diag_addf(d, "out of memory");
		return -1;
	}
	snprintf(body, n, "{\"kind\": \"%s\", \"type\": \"%s\", \"object\": %s}",
		 kind, type, object);
	rc = control(f, "POST", "/_fake/events", body, NULL, d);
	free(body);
	return rc;
}

long fakekube_stat(struct fakekube *f, const char *key, struct diag *d)
{
	char *text;
	json_t *stats;
	long n;

	if (control(f, "GET", "/_fake/stats", NULL, &text, d) < 0)
		return -1;
	stats = json_loads(text, 0, NULL);
	free(text);
	if (!json_is_object(stats)) {
		diag_addf(d, "fakekube: /_fake/stats is not a JSON object");
		json_decref(stats);
		return -1;
	}
	n = (long)json_integer_value(json_object_get(stats, key));
	json_decref(stats);
	return n;
}

void fakekube_must_fault(struct fakekube *f, const char *json)
{
	struct diag d;

	diag_init(&d);
	cr_assert_eq(fakekube_fault(f, json, &d), 0, "%s", diag_text(&d));
}

long fakekube_must_stat(struct fakekube *f, const char *key)
{
	struct diag d;
	long n;

	diag_init(&d);
	n = fakekube_stat(f, key, &d);
	cr_assert_geq(n, 0, "%s", diag_text(&d));
	return n;
}
