/*
 * informer: keeps a caller's picture of one kind of Kubernetes object true,
 * from a list and a watch (the client-go pattern, small).
 *
 * One thread per informer.  It lists the resource page by page (limit,
 * continue), then watches from the list's resourceVersion with bookmarks
 * (allowWatchBookmarks).  A watch that ends cleanly (the server's
 * timeoutSeconds) is resumed at once from the last version seen, an
 * event's or a bookmark's.  "410 Gone" (the version is too old: an ERROR
 * event, or HTTP 410 to the watch request) starts a new list.  Failed lists,
 * broken watches and watches ended by any other ERROR event are retried
 * with exponential backoff, 0.5 s doubling to 30 s, back to 0.5 s after
 * every whole list and every watch that opened; a watch whose first event
 * is such an ERROR did not open, as far as the backoff goes.  A watch
 * counts as connected once the server answered it 200 (before its first
 * event), until it ends.  Stopping interrupts a list, a watch or a backoff
 * within about a second (informer_cancel(): at once, the connection cut).
 *
 * The informer keeps no objects: it tells the caller what it sees, and a
 * relist tells it that the objects of the list between relist begin and
 * end are all there are (what the caller knew and the list did not repeat
 * was deleted while nobody watched).  A list is read a page at a time and
 * a page an item at a time, so that it costs the memory of one page's JSON
 * and of one object's values, whatever the size of the cluster.  Objects
 * come without metadata.managedFields, which is checked to be JSON but not
 * built (a third of a Pod's bytes; no caller reads it); JSON is read by
 * codec/jsonfast.h, which refuses duplicate keys.
 *
 * It logs (logfmt, kind= the config's name):
 *
 *   warn  msg="cannot list" kind=K error="..." retry_ms=N   no answer
 *   warn  msg="cannot list" kind=K status=S retry_ms=N      not 200
 *   warn  msg="cannot list" kind=K error="not a list" retry_ms=N
 *   warn  msg="cannot list" kind=K error="item I of the page: ..." retry_ms=N
 *   warn  msg="watch broke" kind=K status=S error="..." retry_ms=N
 *                                    (status -1: the connection broke)
 *   info  msg="watch error" kind=K code=410                 then a relist
 *   warn  msg="watch error" kind=K code=C retry_ms=N        resumed after N
 *   info  msg="relisted" kind=K resource_version=RV         every list but
 *                                                            the first
 *
 * The first whole list is the caller's to log (on_relist_end, first).
 *
 * An optional informer is for a resource the API may not serve (an API
 * group of a feature the cluster lacks, or a version it does not have
 * yet).  A 404 to its list means that there is none of it: the caller
 * hears an empty relist (what it knew is gone; or not_served, when it has
 * one, to tell "none" from "not served"), the informer counts as
 * synced and as connected (there is nothing to miss), logs it once
 *
 *   info  msg="not served" kind=K path=P retry_s=N
 *
 * and lists again every unserved_retry_ms; once the API serves it, it is
 * listed and watched as any other (a 404 to its watch lists again).
 *
 * Another kind in about a hundred lines (docs/internals.md, "The informer
 * and the feed"): a struct holding what the caller keeps, an on_object that
 * reads the fields it needs out of the JSON and updates it, an on_delete
 * that drops it, relist begin/end that mark and sweep, and
 *
 *   struct informer_config c = {
 *       .kube = kc, .name = "nodes", .path = "/api/v1/nodes",
 *       .label_selector = "nvidia.com/gpu.present",
 *       .on = {.object = node_seen, .delete = node_gone,
 *              .relist_begin = nodes_mark, .relist_end = nodes_sweep,
 *              .ctx = &nodes},
 *   };
 *   if (informer_start(&c, &inf, d) < 0) ...
 */
#ifndef GPUGATE_INFORMER_H
#define GPUGATE_INFORMER_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

struct diag;
struct kube_config;

/*
 * What an informer calls, all on its own thread, one call at a time, with
 * ctx.  Any may be NULL.  Objects are borrowed for the length of the call.
 */
struct informer_handler {
	/* A listed object, or ADDED or MODIFIED by the watch. */
	void (*object)(void *ctx, const json_t *obj);
	/* DELETED by the watch (obj is its last state). */
	void (*delete)(void *ctx, const json_t *obj);
	/* The first page of a list was read: the objects of this list (until
	 * relist_end) replace everything known before.  A list that fails
	 * half-way is begun again, without an end in between. */
	void (*relist_begin)(void *ctx);
	/* Every page was read.  first: this is the first whole list (the
	 * informer is synced from now on). */
	void (*relist_end)(void *ctx, bool first);
	/* The watch answered 200 (up), or a watch that had done so ended
	 * (down).  Called only on changes, up first. */
	void (*connected)(void *ctx, bool up);
	/* An optional informer's path is not served (404 to its list), said
	 * when it starts being so.  When set, called instead of the empty
	 * relist (relist_begin, relist_end) that says it otherwise; first as
	 * for relist_end. */
	void (*not_served)(void *ctx, bool first);
	void *ctx;
};

struct informer_config {
	const struct kube_config *kube; /* copied */
	const char *name;               /* for log lines: "pods"; copied */
	const char *path;               /* "/api/v1/pods", no query; copied */
	/* Only objects that match, as the API reads them ("app=x", "key",
	 * "!key"); NULL: all.  Copied. */
	const char *label_selector;
	const char *field_selector;     /* "spec.nodeName=n1"; NULL: all */
	unsigned idle_seconds;          /* a silent watch is broken; 0: 180 */
	unsigned page_size;             /* list limit; 0: 500 */
	bool optional;                  /* the API may not serve the path */
	unsigned unserved_retry_ms;     /* optional, not served: 0: 300000 */
	struct informer_handler on;
};

struct informer;

/*
 * Checks cfg, and starts the thread, which begins with a list.  Returns 0
 * with *out; -1 with a message when cfg is wrong (no name; a path that does
 * not start with '/', has a query or is over 1 KiB; a selector over 1 KiB)
 * or a resource runs out.
 */
int informer_start(const struct informer_config *cfg, struct informer **out,
		   struct diag *d);

/* True once a list was read completely (it stays true through relists), or
 * an optional informer's path is not served. */
bool informer_synced(struct informer *inf);

/* True while the watch is connected (answered 200, not ended), or an
 * optional informer's path is not served. */
bool informer_connected(struct informer *inf);

/*
 * A new whole list, now (issue #32: a replica that starts deciding quota
 * must first see everything stored before it did): returns a ticket that
 * informer_resynced() answers true for once a list begun after this call
 * has been read whole.  The watch open now is cut; a call while a ticket
 * is pending returns that ticket and cuts the watch again (a watch that
 * opened just after the last call would otherwise run on), so callers
 * ask again until served.  An optional informer whose path is not served
 * serves every ticket at once.  Any thread.
 */
uint64_t informer_resync(struct informer *inf);
bool informer_resynced(struct informer *inf, uint64_t ticket);

/* Asks the thread to stop, cuts its watch's connection (kube_interrupt())
 * and returns at once: callers that stop several informers cancel them
 * all, then stop each. */
void informer_cancel(struct informer *inf);

/* Stops the thread (within about a second), waits for it and frees inf.
 * No callback runs after it returns.  NULL is a no-op. */
void informer_stop(struct informer *inf);

#endif
