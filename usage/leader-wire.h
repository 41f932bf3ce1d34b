/*
 * leader-wire: what a follower sends the leader and gets back (issue #32,
 * usage/leader-backend.h), as JSON; pure (jansson only).
 *
 * The request is the decision's inputs by name, not by the policy's
 * indices (the two replicas may hold different policies for a moment
 * during a rollout: the leader judges by its own, and a name it does not
 * know is an error, not a guess):
 *
 *   {"v":1,"force":false,
 *    "workload":{"kind":"pod","uid":"...","namespace":"...","name":"...",
 *                "requestUid":"...","generation":1,"ownerJob":"..."},
 *    "claim":{"tenant":"...","flavor":"...","units":8,"perPod":8,"pods":1,
 *             "mayBorrow":false,"ownerJobUid":"...","priority":0,
 *             "kueueQuota":false}}
 *
 * The answer is a struct quota_result:
 *
 *   {"v":1,"position":"nominal","requested":8,"used":0,"nominal":8,
 *    "borrowingLimit":-1,"borrowed":0,"canLend":0,"ceiling":8,
 *    "cohortLendable":0,"cohort":"...","holder":"...","reclaim":0,
 *    "borrowers":[{"tenant":"...","borrowed":2}],"nBorrowers":1,
 *    "below":0,"anyPriority":false,"reclaimable":0,"reason":""}
 *
 * Readers refuse (-1, one line in err) what is not that: a wrong "v", a
 * missing or mistyped field, a number out of range, a tenant or flavor
 * (or cohort, or borrower) the reader's policy does not have.
 */
#ifndef GPUGATE_USAGE_LEADER_WIRE_H
#define GPUGATE_USAGE_LEADER_WIRE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct policy;
struct quota_claim;
struct quota_result;
struct workload;

#define LEADER_WIRE_VERSION 1

/* The request for claim c of wl; NULL when out of memory. */
json_t *leader_wire_request(const struct workload *wl, const struct quota_claim *c,
			    bool force);

/*
 * Reads a request under policy p into *wl (only the fields the decision
 * reads; strings borrowed from j), *c (tenant and flavor pointing into p)
 * and *force.  0, or -1 with one line in err.
 */
int leader_wire_read_request(const json_t *j, const struct policy *p,
			     struct workload *wl, struct quota_claim *c,
			     bool *force, char *err, size_t size);

/* The answer for r; NULL when out of memory. */
json_t *leader_wire_result(const struct quota_result *r);

/*
 * Reads an answer into *out: cohort and borrowers' tenants pointing into
 * p, holder into wl (wl->owner_job; NULL when the answer has none).  0, or
 * -1 with one line in err.
 */
int leader_wire_read_result(const json_t *j, const struct policy *p,
			    const struct workload *wl, struct quota_result *out,
			    char *err, size_t size);

#endif
