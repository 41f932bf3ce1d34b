/*
 * gang-rule: the pure decisions of the gang-start controller on route
 * gates (controllers/gang-start.h; docs/design/gang-start.md "Route 3"):
 * what a gang's pods count for, whether its gates come off now and in
 * which domain, what its record says, and what to do next about it (the
 * timeout, the regate by suspend and resume).  No I/O, no clock.
 *
 * The record, one entry of the ConfigMap gpugate-gangs in gpugate's
 * namespace, keyed by the Job's uid:
 *
 *   r=<unix ms released, 0: not released> n=<regates> s=<0|1> t=<tenant>
 *
 * s=1 while gpugate holds the Job suspended to regate it: a Job that is
 * suspended without it is its tenant's (or Kueue's), and left alone.
 */
#ifndef GPUGATE_GANG_RULE_H
#define GPUGATE_GANG_RULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pool_check;

struct gang_record {
	int64_t released_ms; /* 0: not released (or reset) */
	int64_t regates;     /* times gpugate gated the gang again */
	bool suspended;      /* gpugate suspended the Job to regate it */
	/* Not empty; _parse points it into the text. */
	const char *tenant;
};

/* The record's text into buf (snprintf's rule); its length. */
size_t gang_record_format(const struct gang_record *r, char *buf, size_t size);
/* 0 with *out (tenant into text), or -1 when text is no record. */
int gang_record_parse(const char *text, struct gang_record *out);

/* A Job as the rule needs it. */
struct gang_job {
	int64_t parallelism;  /* spec.parallelism (absent: 1) */
	int64_t completions;  /* spec.completions; -1: absent */
	int64_t succeeded;    /* status.succeeded */
	bool suspended;       /* spec.suspend */
	bool finished;        /* condition Complete or Failed True */
	/* Kueue holds it (its queue label): a start that does not come is
	 * Kueue's to handle (waitForPodsReady evicts by suspending), not
	 * regated by gpugate. */
	bool kueue;
};

/* One pod of the Job. */
struct gang_pod {
	bool terminal;        /* Succeeded, Failed, or being deleted */
	bool bound;           /* spec.nodeName set */
	bool running;         /* phase Running */
	bool gated;           /* carries the gate gpugate.io/gang */
	bool other_gate;      /* carries another scheduling gate (Kueue's) */
	/* spec.nodeSelector[topology key] (a pod gpugate released with a
	 * domain carries it, a gated pod its user's), NULL: none. */
	const char *domain;
};

/* What a gang's pods count for. */
struct gang_count {
	int64_t want;     /* pods the Job runs at once: min(parallelism,
			   * completions - succeeded), >= 0 */
	int64_t active;   /* non-terminal pods */
	int64_t bound;    /* non-terminal pods with a node */
	int64_t gated;    /* non-terminal pods with the gate */
	int64_t pending;  /* non-terminal, no node, no gate: released, not
			   * yet bound */
	int64_t running;  /* non-terminal pods Running */
	bool foreign_gate;/* some gated pod carries another gate too */
	/* The domain the gang's pods name (bound, released, or chosen by
	 * their user), NULL: none; split: they name more than one. */
	const char *domain;
	bool split;
};

void gang_count(const struct gang_job *j, const struct gang_pod *pods, size_t n,
		struct gang_count *out);

/* What the controller does next about a gang. */
enum gang_step {
	GANG_NOTHING,   /* nothing this round */
	GANG_LEAVE,     /* suspended by someone else, or no gang: left alone */
	GANG_WAIT,      /* gated, but not every pod exists yet, or another
			 * gate is on: waits (counted as waiting) */
	GANG_CHECK,     /* gated and complete: release when the pool has
			 * room (gang_release_ok) */
	GANG_STARTED,   /* every pod it wants runs: the record is dropped
			 * (and the start observed when it had r) */
	GANG_REGATE,    /* released, not running after the timeout: record
			 * n+1, s=1, r=0, then suspend the Job */
	GANG_RESET,     /* released long ago but nothing of it runs or
			 * waits ungated (its pods were recreated gated): r=0 */
	GANG_SUSPEND,   /* s=1, the Job not suspended and released pods
			 * still there: suspend it (again) */
	GANG_RESUME,    /* s=1, the Job suspended and no pod left: resume
			 * it, then clear s */
	GANG_CLEAR,     /* s=1, the Job runs again with only gated pods:
			 * clear s */
	GANG_DROP,      /* the Job finished: drop its record */
};

/* "nothing", "leave", "wait", ... (logs, tests). */
const char *gang_step_name(enum gang_step s);

/*
 * The next step for a gang with record rec (NULL: none), its Job j and
 * count c, at now_ms, with settings.gangTimeoutSeconds timeout_s.  In
 * order: a finished Job drops its record; a suspended one is resumed when
 * gpugate suspended it (s=1) and no pod is left, else left; s=1 on a
 * running Job clears or suspends again; every wanted pod Running: started;
 * released and past the timeout: regate (or reset); gated: check or wait.
 */
enum gang_step gang_next(const struct gang_record *rec, const struct gang_job *j,
			 const struct gang_count *c, int64_t now_ms, int64_t timeout_s);

/*
 * Whether the gates of a complete gang (GANG_CHECK) come off now: pc is
 * the pool's word for c->gated + c->pending pods of the gang's per-pod
 * units, in one domain of the class's topology key when required (the
 * gang's domain c->domain when it has one).  True with *domain (NULL
 * without a required topology) when they all fit now.  A gang split over
 * domains, or a pool that knows nothing, never releases.
 */
bool gang_release_ok(const struct gang_count *c, const struct pool_check *pc,
		     bool required, const char **domain);

#endif
