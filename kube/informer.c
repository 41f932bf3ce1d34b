#include "kube/informer.h"

#include "base/diag.h"
#include "base/log.h"
#include "base/thread.h"
#include "codec/jsonfast.h"
#include "kube/client.h"

#include <curl/curl.h>
#include <pthread.h> /* pthread_once */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PAGE_SIZE 500
#define IDLE_SECONDS 180
#define LIST_MAX_BODY (256u << 20)
#define BACKOFF_MIN_MS 500
#define BACKOFF_MAX_MS 30000
#define UNSERVED_RETRY_MS 300000
/* list(): an optional informer's path is not served (404). */
#define LIST_NOT_SERVED (-2)
/* Caps on what goes into a request path: the path and a selector from the
 * caller, a continue token from the server (real ones are a few hundred
 * bytes).  Escaped, a byte takes at most three; the rest of a query is
 * shorter than 256. */
#define RESOURCE_PATH_MAX 1024
#define SELECTOR_MAX 1024
#define CONTINUE_MAX 4096
#define PATH_MAX_LEN \
	(RESOURCE_PATH_MAX + 3 * (2 * SELECTOR_MAX + CONTINUE_MAX) + 256)

struct informer {
	struct informer_handler on;
	char *name;
	char *path;
	char *selectors;     /* "labelSelector=...&fieldSelector=...&", or "" */
	unsigned idle_seconds;
	unsigned page_size;
	bool optional;
	unsigned unserved_retry_ms;
	bool unserved;       /* optional, and the last list answered 404 */
	struct kube *kube;
	struct thread thread; /* its stop flag is what kube_get and kube_watch
			       * look at */
	bool need_list;      /* the next turn lists */
	char rv[128];        /* resourceVersion to resume from */
	bool gone;           /* the watch said 410 */
	bool failed;         /* the watch said ERROR, not 410 */
	bool had_event;      /* this watch sent one that is not ERROR */
	unsigned backoff;    /* ms before the next retry */
	unsigned backoff_before; /* when this watch was asked for */
	atomic_bool synced;
	atomic_bool connected; /* the watch answered 200 and is open */
	/* informer_resync(): the tickets asked for and the last one a whole
	 * list served (a list begun after it was asked); the thread's copy of
	 * the one its list serves. */
	_Atomic uint64_t resync_want, resync_done;
	uint64_t resync_taken;
	atomic_bool unserved_now; /* unserved, for other threads */
};

/* A success (a whole list, an open watch): the next failure is retried
 * soon again. */
static void backoff_reset(struct informer *inf)
{
	inf->backoff = BACKOFF_MIN_MS;
}

/* Waits before the next attempt after a failure, then doubles the wait. */
static void backoff_nap(struct informer *inf)
{
	thread_sleep(&inf->thread, inf->backoff);
	inf->backoff = inf->backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS
							 : inf->backoff * 2;
}

static void set_connected(struct informer *inf, bool up)
{
	if (atomic_exchange(&inf->connected, up) == up)
		return;
	if (inf->on.connected)
		inf->on.connected(inf->on.ctx, up);
}

static void on_open(void *ctx)
{
	struct informer *inf = ctx;

	set_connected(inf, true);
	backoff_reset(inf);
}

static void list_failed(struct informer *inf, const char *error)
{
	char q[600];

	log_event(LOG_WARN, "msg=\"cannot list\" kind=%s error=\"%s\" retry_ms=%u",
		  inf->name, log_quote(error, q, sizeof(q)), inf->backoff);
}

/*
 * What no caller reads is checked to be JSON but not built: every object's
 * metadata.managedFields.  It is a third of a Pod's bytes, in small
 * objects, and jansson makes some 230 bytes of an empty one: a Pod of 7 KiB
 * builds to 77 KiB of values with it (docs/benchmarks.md, "Watch memory").
 * Built once, shared by the informers; NULL (everything is built) only when
 * memory ran out.
 */
static const char *const unread_item[] = {"metadata/managedFields", NULL};
static const char *const unread_event[] = {"object/metadata/managedFields", NULL};
static struct jsonfast_skip *item_skip, *event_skip;
static pthread_once_t skip_once = PTHREAD_ONCE_INIT;

static void skip_init(void)
{
	char err[128];

	item_skip = jsonfast_skip_new(unread_item, err, sizeof(err));
	event_skip = jsonfast_skip_new(unread_event, err, sizeof(err));
}

/* ---- a page, one item at a time -------------------------------------------
 *
 * A page of a list is {"kind": ..., "metadata": {...}, "items": [...]}, in
 * any order.  Parsed whole, the page's values would be 12 times its 2-4 MB
 * of JSON, and a thread's malloc arena keeps what it once held; so the page
 * is only scanned for where its members and items begin and end, and each
 * item (and the metadata) is parsed on its own and freed before the next.
 * The scan does not check what it steps over: jsonfast checks every item
 * and the metadata; the rest (kind, apiVersion) is not read.
 */

static size_t skip_ws(const char *b, size_t len, size_t i)
{
	while (i < len &&
	       (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r'))
		i++;
	return i;
}

/* Past the string that starts at b[i] (a quote); 0 when it does not end. */
static size_t string_end(const char *b, size_t len, size_t i)
{
	for (i++; i < len; i++) {
		if (b[i] == '\\')
			i++;
		else if (b[i] == '"')
			return i + 1;
	}
	return 0;
}

/* Past the value that starts at b[i]; 0 when it does not end. */
static size_t value_end(const char *b, size_t len, size_t i)
{
	size_t depth = 0;

	if (i >= len)
		return 0;
	if (b[i] == '"')
		return string_end(b, len, i);
	if (b[i] != '{' && b[i] != '[') { /* a number, true, false, null */
		while (i < len && !memchr(",}] \t\n\r", b[i], 8))
			i++;
		return i;
	}
	for (; i < len; i++) {
		if (b[i] == '"') {
			i = string_end(b, len, i);
			if (!i)
				return 0;
			i--; /* the loop steps past the quote */
		} else if (b[i] == '{' || b[i] == '[') {
			depth++;
		} else if ((b[i] == '}' || b[i] == ']') && --depth == 0) {
			return i + 1;
		}
	}
	return 0;
}

/* What a page says besides its items. */
struct page {
	char rv[128];
	char cont[CONTINUE_MAX];
	bool items;
};

static int page_fail(char *why, size_t whysz, const char *what)
{
	snprintf(why, whysz, "%s", what);
	return -1;
}

/* The metadata b[i..end): its resourceVersion and continue token. */
static int page_metadata(const char *b, size_t i, size_t end, struct page *pg,
			 char *why, size_t whysz)
{
	char err[200];
	json_t *m = jsonfast_parse(b + i, end - i, err, sizeof(err));
	const char *rv = json_string_value(json_object_get(m, "resourceVersion"));
	const char *next = json_string_value(json_object_get(m, "continue"));
	int rc = 0;

	if (!m)
		rc = page_fail(why, whysz, "not a list");
	else if (next && strlen(next) >= sizeof(pg->cont))
		rc = page_fail(why, whysz, "continue token too long");
	else {
		snprintf(pg->rv, sizeof(pg->rv), "%s", rv ? rv : "");
		snprintf(pg->cont, sizeof(pg->cont), "%s", next ? next : "");
	}
	json_decref(m);
	return rc;
}

/* The items array at b[*i] (its '['), each to on_object; *i past it. */
static int page_items(struct informer *inf, const char *b, size_t len, size_t *i,
		      char *why, size_t whysz)
{
	size_t at = skip_ws(b, len, *i + 1);

	if (at < len && b[at] == ']') {
		*i = at + 1;
		return 0;
	}
	for (size_t n = 0;; n++) {
		size_t end = value_end(b, len, at);
		char err[200];
		json_t *obj;

		if (!end)
			return page_fail(why, whysz, "not a list");
		obj = jsonfast_parse_skip(b + at, end - at, item_skip, err,
					  sizeof(err));
		if (!obj) {
			snprintf(why, whysz, "item %zu of the page: %s", n, err);
			return -1;
		}
		if (inf->on.object)
			inf->on.object(inf->on.ctx, obj);
		json_decref(obj);
		at = skip_ws(b, len, end);
		if (at < len && b[at] == ']') {
			*i = at + 1;
			return 0;
		}
		if (at >= len || b[at] != ',')
			return page_fail(why, whysz, "not a list");
		at = skip_ws(b, len, at + 1);
	}
}

/* Reads one page: relist_begin (unless *begun) before its first item,
 * the items to on_object, the rest into *pg.  -1 with why. */
static int page_read(struct informer *inf, const char *b, size_t len, bool *begun,
		     struct page *pg, char *why, size_t whysz)
{
	size_t i = skip_ws(b, len, 0);

	if (i >= len || b[i] != '{')
		return page_fail(why, whysz, "not a list");
	i = skip_ws(b, len, i + 1);
	if (i < len && b[i] == '}')
		return page_fail(why, whysz, "not a list");
	for (;;) {
		size_t key = i, key_end = string_end(b, len, i), end;

		if (i >= len || b[i] != '"' || !key_end)
			return page_fail(why, whysz, "not a list");
		i = skip_ws(b, len, key_end);
		if (i >= len || b[i] != ':')
			return page_fail(why, whysz, "not a list");
		i = skip_ws(b, len, i + 1);
#define KEY_IS(k)                                                              \
	(key_end - key - 2 == sizeof(k) - 1 &&                                 \
	 memcmp(b + key + 1, k, sizeof(k) - 1) == 0)
		if (KEY_IS("items")) {
			if (i >= len || b[i] != '[' || pg->items)
				return page_fail(why, whysz, "not a list");
			pg->items = true;
			if (!*begun) {
				if (inf->on.relist_begin)
					inf->on.relist_begin(inf->on.ctx);
				*begun = true;
			}
			if (page_items(inf, b, len, &i, why, whysz) < 0)
				return -1;
		} else {
			end = value_end(b, len, i);
			if (!end)
				return page_fail(why, whysz, "not a list");
			if (KEY_IS("metadata") &&
			    page_metadata(b, i, end, pg, why, whysz) < 0)
				return -1;
			i = end;
		}
#undef KEY_IS
		i = skip_ws(b, len, i);
		if (i < len && b[i] == '}')
			break;
		if (i >= len || b[i] != ',')
			return page_fail(why, whysz, "not a list");
		i = skip_ws(b, len, i + 1);
	}
	if (skip_ws(b, len, i + 1) != len || !pg->items)
		return page_fail(why, whysz, "not a list");
	return 0;
}

/* Lists every page: the caller hears relist_begin before the first page's
 * objects.  0 once every page was read; -1 on a failure (logged) or a
 * stop; LIST_NOT_SERVED for a 404 to the first page of an optional
 * informer (not logged).  relist_end is the loop's to call. */
static int list(struct informer *inf)
{
	char path[PATH_MAX_LEN], cont[CONTINUE_MAX] = "";
	bool begun = false;

	pthread_once(&skip_once, skip_init);
	do {
		char *body = NULL, *esc, why[300];
		struct page *pg;
		struct diag d;
		long status = 0;
		size_t len;
		int n, rc;

		esc = cont[0] ? curl_easy_escape(NULL, cont, 0) : NULL;
		if (cont[0] && !esc) {
			list_failed(inf, "out of memory");
			return -1;
		}
		n = snprintf(path, sizeof(path), "%s?%slimit=%u%s%s", inf->path,
			     inf->selectors, inf->page_size, esc ? "&continue=" : "",
			     esc ? esc : "");
		curl_free(esc);
		if (n < 0 || (size_t)n >= sizeof(path)) {
			list_failed(inf, "request path too long");
			return -1;
		}
		diag_init(&d);
		if (kube_get(inf->kube, path, LIST_MAX_BODY, &status, &body, &len,
			     thread_stop_flag(&inf->thread), &d) < 0) {
			char first[512];

			if (thread_stopping(&inf->thread))
				return -1;
			diag_first(&d, first, sizeof(first));
			list_failed(inf, first);
			return -1;
		}
		if (status == 404 && inf->optional && !begun) {
			free(body);
			return LIST_NOT_SERVED;
		}
		if (status != 200) {
			log_event(LOG_WARN, "msg=\"cannot list\" kind=%s status=%ld "
					    "retry_ms=%u",
				  inf->name, status, inf->backoff);
			free(body);
			return -1;
		}
		pg = calloc(1, sizeof(*pg));
		rc = pg ? page_read(inf, body, len, &begun, pg, why, sizeof(why))
			: page_fail(why, sizeof(why), "out of memory");
		free(body);
		if (rc < 0) {
			list_failed(inf, why);
			free(pg);
			return -1;
		}
		if (pg->rv[0])
			snprintf(inf->rv, sizeof(inf->rv), "%s", pg->rv);
		snprintf(cont, sizeof(cont), "%s", pg->cont);
		free(pg);
	} while (cont[0] && !thread_stopping(&inf->thread));
	return thread_stopping(&inf->thread) ? -1 : 0;
}

static int on_event(void *ctx, const char *line, size_t len)
{
	struct informer *inf = ctx;
	char err[200];
	json_t *ev = jsonfast_parse_skip(line, len, event_skip, err, sizeof(err));
	const char *type = json_string_value(json_object_get(ev, "type"));
	const json_t *obj = json_object_get(ev, "object");
	const char *rv = json_string_value(json_object_get(
		json_object_get(obj, "metadata"), "resourceVersion"));
	int rc = 0;

	if (!type) {
		json_decref(ev);
		return 0;
	}
	if (strcmp(type, "ERROR") == 0) {
		json_int_t code = json_integer_value(json_object_get(obj, "code"));

		if (code == 410) {
			inf->gone = true;
			log_event(LOG_INFO, "msg=\"watch error\" kind=%s code=410",
				  inf->name);
		} else {
			/* A watch that fails before its first event did not
			 * open, as far as the backoff goes: the open's reset is
			 * taken back, so that an API that answers every watch
			 * with an error is asked ever less often. */
			inf->failed = true;
			if (!inf->had_event)
				inf->backoff = inf->backoff_before;
			log_event(LOG_WARN, "msg=\"watch error\" kind=%s code=%lld "
					    "retry_ms=%u",
				  inf->name, (long long)code, inf->backoff);
		}
		rc = 1; /* end this stream */
	} else {
		inf->had_event = true;
		if (strcmp(type, "ADDED") == 0 || strcmp(type, "MODIFIED") == 0) {
			if (inf->on.object)
				inf->on.object(inf->on.ctx, obj);
		} else if (strcmp(type, "DELETED") == 0) {
			if (inf->on.delete)
				inf->on.delete(inf->on.ctx, obj);
		}
		/* BOOKMARK: only its resourceVersion matters. */
		if (rv)
			snprintf(inf->rv, sizeof(inf->rv), "%s", rv);
	}
	json_decref(ev);
	return rc;
}

/*
 * The API does not serve an optional informer's path: there is none of it.
 * Said to the caller, and logged, when it starts being so; then the next
 * list in a while.  Synced and connected: nothing can be missed.
 */
static void not_served(struct informer *inf)
{
	if (!inf->unserved) {
		bool first = !atomic_load(&inf->synced);

		inf->unserved = true;
		log_event(LOG_INFO, "msg=\"not served\" kind=%s path=%s retry_s=%u",
			  inf->name, inf->path, inf->unserved_retry_ms / 1000);
		if (inf->on.not_served)
			inf->on.not_served(inf->on.ctx, first);
		else {
			if (inf->on.relist_begin)
				inf->on.relist_begin(inf->on.ctx);
			if (inf->on.relist_end)
				inf->on.relist_end(inf->on.ctx, first);
		}
		atomic_store(&inf->synced, true);
	}
	atomic_store(&inf->resync_done, inf->resync_taken);
	atomic_store(&inf->unserved_now, true);
	set_connected(inf, true);
	backoff_reset(inf);
	thread_sleep(&inf->thread, inf->unserved_retry_ms);
}

/* One turn: a list when one is needed, then one watch until it ends. */
static unsigned turn(void *arg)
{
	struct informer *inf = arg;
	const struct kube_stream cb = {.on_open = on_open, .on_line = on_event,
				       .ctx = inf};
	char path[PATH_MAX_LEN];
	struct diag d;
	int rc;

	{
		uint64_t want = atomic_load(&inf->resync_want);

		if (want != inf->resync_taken) {
			inf->resync_taken = want;
			inf->need_list = true;
		}
	}
	if (inf->need_list) {
		bool first;
		int lr = list(inf);

		if (lr == LIST_NOT_SERVED) {
			not_served(inf);
			return 0;
		}
		if (lr < 0) {
			/* Only an unserved path counts as connected while
			 * listing. */
			set_connected(inf, false);
			backoff_nap(inf);
			return 0;
		}
		if (inf->unserved) {
			/* Served now: connected again once its watch is. */
			inf->unserved = false;
			set_connected(inf, false);
		}
		inf->need_list = false;
		atomic_store(&inf->unserved_now, false);
		backoff_reset(inf);
		first = !atomic_load(&inf->synced);
		if (inf->on.relist_end)
			inf->on.relist_end(inf->on.ctx, first);
		atomic_store(&inf->synced, true);
		atomic_store(&inf->resync_done, inf->resync_taken);
		if (!first)
			log_event(LOG_INFO, "msg=\"relisted\" kind=%s "
					    "resource_version=%s",
				  inf->name, inf->rv);
	}
	snprintf(path, sizeof(path),
		 "%s?%swatch=1&allowWatchBookmarks=true"
		 "&timeoutSeconds=300&resourceVersion=%s",
		 inf->path, inf->selectors, inf->rv);
	inf->gone = inf->failed = inf->had_event = false;
	inf->backoff_before = inf->backoff;
	diag_init(&d);
	rc = kube_watch(inf->kube, path, inf->idle_seconds, &cb,
			thread_stop_flag(&inf->thread), &d);
	set_connected(inf, false);
	if (thread_stopping(&inf->thread))
		return 0;
	if (atomic_load(&inf->resync_want) != inf->resync_taken)
		return 0; /* cut by informer_resync(): list now */
	if (inf->gone || rc == 410) {
		inf->need_list = true;
		return 0;
	}
	if (inf->failed) { /* an ERROR event, logged */
		backoff_nap(inf);
		return 0;
	}
	if (rc != 0) {
		char first[512], q[600];

		diag_first(&d, first, sizeof(first));
		log_event(LOG_WARN, "msg=\"watch broke\" kind=%s status=%d "
				    "error=\"%s\" retry_ms=%u",
			  inf->name, rc, log_quote(first, q, sizeof(q)), inf->backoff);
		/* No longer served?  The list will tell. */
		if (rc == 404 && inf->optional)
			inf->need_list = true;
		backoff_nap(inf);
		return 0;
	}
	return 0; /* a clean end (timeoutSeconds): resume at once */
}

/* "labelSelector=ESCAPED&" (and the field selector's), or "". */
static char *selectors_query(const struct informer_config *cfg, struct diag *d)
{
	static const char *const keys[2] = {"labelSelector", "fieldSelector"};
	const char *vals[2] = {cfg->label_selector, cfg->field_selector};
	char buf[2 * (sizeof("fieldSelector=&") + 3 * SELECTOR_MAX)];
	size_t len = 0;

	buf[0] = '\0';
	for (int i = 0; i < 2; i++) {
		char *esc;

		if (!vals[i] || !vals[i][0])
			continue;
		if (strlen(vals[i]) > SELECTOR_MAX) {
			diag_addf(d, "informer %s: %s over %d bytes", cfg->name,
				  keys[i], SELECTOR_MAX);
			return NULL;
		}
		esc = curl_easy_escape(NULL, vals[i], 0);
		if (!esc) {
			diag_addf(d, "out of memory");
			return NULL;
		}
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s=%s&",
					keys[i], esc);
		curl_free(esc);
	}
	return strdup(buf);
}

int informer_start(const struct informer_config *cfg, struct informer **out,
		   struct diag *d)
{
	struct informer *inf;

	if (!cfg->name || !cfg->name[0]) {
		diag_addf(d, "informer: no name");
		return -1;
	}
	if (!cfg->path || cfg->path[0] != '/' || strchr(cfg->path, '?') ||
	    strlen(cfg->path) > RESOURCE_PATH_MAX) {
		diag_addf(d, "informer %s: the path must start with /, have no "
			     "query and be at most %d bytes",
			  cfg->name, RESOURCE_PATH_MAX);
		return -1;
	}
	inf = calloc(1, sizeof(*inf));
	if (!inf) {
		diag_addf(d, "out of memory");
		return -1;
	}
	inf->on = cfg->on;
	inf->idle_seconds = cfg->idle_seconds ? cfg->idle_seconds : IDLE_SECONDS;
	inf->page_size = cfg->page_size ? cfg->page_size : PAGE_SIZE;
	inf->optional = cfg->optional;
	inf->unserved_retry_ms = cfg->unserved_retry_ms ? cfg->unserved_retry_ms
							: UNSERVED_RETRY_MS;
	atomic_init(&inf->synced, false);
	atomic_init(&inf->connected, false);
	atomic_init(&inf->resync_want, 0);
	atomic_init(&inf->resync_done, 0);
	atomic_init(&inf->unserved_now, false);
	inf->need_list = true;
	backoff_reset(inf);
	inf->name = strdup(cfg->name);
	inf->path = strdup(cfg->path);
	if (!inf->name || !inf->path) {
		diag_addf(d, "out of memory");
		goto fail;
	}
	inf->selectors = selectors_query(cfg, d);
	if (!inf->selectors)
		goto fail;
	inf->kube = kube_new(cfg->kube, d);
	if (!inf->kube)
		goto fail;
	{
		char name[300];

		snprintf(name, sizeof(name), "informer %s", cfg->name);
		if (thread_start(&inf->thread,
				 &(struct thread_config){.name = name, .turn = turn,
							 .arg = inf},
				 d) < 0)
			goto fail;
	}
	*out = inf;
	return 0;
fail:
	informer_stop(inf);
	return -1;
}

bool informer_synced(struct informer *inf)
{
	return atomic_load(&inf->synced);
}

bool informer_connected(struct informer *inf)
{
	return atomic_load(&inf->connected);
}

uint64_t informer_resync(struct informer *inf)
{
	uint64_t want = atomic_load(&inf->resync_want);

	if (atomic_load(&inf->unserved_now)) {
		/* Nothing to list: whatever is asked is served. */
		atomic_store(&inf->resync_done, want);
		return want;
	}
	if (atomic_load(&inf->resync_done) == want)
		want = atomic_fetch_add(&inf->resync_want, 1) + 1;
	/* A watch open now ends, so that the thread lists; one that opens
	 * after this is cut by the next call (callers ask until served). */
	if (atomic_load(&inf->connected))
		kube_interrupt(inf->kube);
	return want;
}

bool informer_resynced(struct informer *inf, uint64_t ticket)
{
	return atomic_load(&inf->resync_done) >= ticket;
}

void informer_cancel(struct informer *inf)
{
	if (!inf)
		return;
	thread_cancel(&inf->thread);
	/* A watch in flight ends now, not at its next progress call. */
	kube_interrupt(inf->kube);
}

void informer_stop(struct informer *inf)
{
	if (!inf)
		return;
	thread_stop(&inf->thread);
	kube_free(inf->kube);
	free(inf->selectors);
	free(inf->path);
	free(inf->name);
	free(inf);
}
