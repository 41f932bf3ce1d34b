/*
 * fakekube_proc: tests/integration/fakekube.py as a child process, for the
 * C tests that need a Kubernetes API to talk to.
 *
 * fakekube_start() makes throw-away certificates (certs_generate(), valid
 * for 127.0.0.1) in a new temporary directory, starts
 *
 *   python3 tests/integration/fakekube.py --ca ... --workdir DIR
 *
 * ($FAKEKUBE_PY overrides the script; the path is relative to the
 * repository root, where the unit tests run), waits for its "ready PORT
 * KUBECONFIG" line and loads that kubeconfig into f->cfg (server
 * https://127.0.0.1:PORT, the CA, a bearer token).  The fake serves until
 * its stdin closes: fakekube_stop(), or the test process dying, ends it.
 *
 * There is no skipping: when python3 or the fake cannot start (or is not
 * ready within FAKEKUBE_START_MS), fakekube_start() returns -1 with the
 * reason in d, and the test is meant to fail with it.
 *
 * It sets SIGPIPE to be ignored in the calling process: a test that writes
 * to a connection the fake cut must see EPIPE, not die.
 */
#ifndef GPUGATE_TEST_FAKEKUBE_PROC_H
#define GPUGATE_TEST_FAKEKUBE_PROC_H

#include "kube/config.h"

#include <stdbool.h>
#include <sys/types.h>

struct diag;

#define FAKEKUBE_START_MS 20000

struct fakekube {
	pid_t pid;              /* 0 when not running */
	int to_child;           /* the fake's stdin; -1 when closed */
	int port;
	char dir[256];          /* certificates, kubeconfig; removed by stop */
	char kubeconfig[512];
	struct kube_config cfg; /* the fake's kubeconfig, loaded */
};

int fakekube_start(struct fakekube *f, struct diag *d);

/* Stops the fake (stdin closed, then SIGKILL after 5 s), removes the
 * directory, releases cfg.  Safe on a fakekube that did not start. */
void fakekube_stop(struct fakekube *f);

/* Adds a fault: json holds the fields of fakekube.py's Fault, e.g.
 * {"method": "PUT", "status": 409} or {"path": "/api/...", "delay": 2}. */
int fakekube_fault(struct fakekube *f, const char *json, struct diag *d);

/* Removes every fault. */
int fakekube_clear_faults(struct fakekube *f, struct diag *d);

/* Whether the fake serves a resource ("pods", "jobs", "claims"): off, its
 * lists and watches answer 404, as an API without it. */
int fakekube_serve(struct fakekube *f, const char *kind, bool served,
		   struct diag *d);

/* An event of kind ("ADDED", "MODIFIED", "DELETED") on a resource: the
 * object (JSON text, with metadata.uid) is stored and streamed to the open
 * watches. */
int fakekube_event(struct fakekube *f, const char *kind, const char *type,
		   const char *object, struct diag *d);

/* A counter of the requests the fake answered: "PUT" (all PUTs of
 * objects), "PUT 409" (those answered 409), "LIST pods", "WATCH jobs", ...
 * (fakekube.py, stats); 0 when none, -1 on error. */
long fakekube_stat(struct fakekube *f, const char *key, struct diag *d);

/* fakekube_fault() and fakekube_stat() for a test: a failed assertion, with
 * the fake's message, when the fake refuses. */
void fakekube_must_fault(struct fakekube *f, const char *json);
long fakekube_must_stat(struct fakekube *f, const char *key);

/* Calls one of fakekube.py's scripting methods (its _CALLS): json is
 * {"call": "error_watches", "args": ["pods", 500]}.  0, or -1 when the fake
 * refused it (d says why). */
int fakekube_call(struct fakekube *f, const char *json, struct diag *d);

#endif
