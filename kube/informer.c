#include "kube/informer.h"

#include "base/diag.h"
#include "base/log.h"
#include "kube/client.h"

#include <curl/curl.h>
#include <pthread.h>
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
	pthread_t thread;
	bool started;
	char rv[128];        /* resourceVersion to resume from */
	bool gone;           /* the watch said 410 */
	unsigned backoff;    /* ms before the next retry */
	atomic_bool synced;
	atomic_bool connected; /* the watch answered 200 and is open */
	volatile bool stop;  /* what kube_get and kube_watch look at */
	pthread_mutex_t mu;  /* with cv: the stop flag, for naps */
	pthread_cond_t cv;
};

/* Sleeps ms, or less when the informer is stopped. */
static void nap(struct informer *inf, unsigned ms)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&inf->mu);
	while (!inf->stop &&
	       pthread_cond_timedwait(&inf->cv, &inf->mu, &until) == 0)
		;
	pthread_mutex_unlock(&inf->mu);
}

/* A success (a whole list, an open watch): the next failure is retried
 * soon again. */
static void backoff_reset(struct informer *inf)
{
	inf->backoff = BACKOFF_MIN_MS;
}

/* Waits before the next attempt after a failure, then doubles the wait. */
static void backoff_nap(struct informer *inf)
{
	nap(inf, inf->backoff);
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

/* Lists every page: the caller hears relist_begin before the first page's
 * objects.  0 once every page was read; -1 on a failure (logged) or a
 * stop; LIST_NOT_SERVED for a 404 to the first page of an optional
 * informer (not logged).  relist_end is the loop's to call. */
static int list(struct informer *inf)
{
	char path[PATH_MAX_LEN], cont[CONTINUE_MAX] = "";
	bool begun = false;

	do {
		json_t *root, *items, *item;
		const char *next, *rv;
		char *body = NULL, *esc;
		struct diag d;
		long status = 0;
		size_t len, i;
		int n;

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
			     &inf->stop, &d) < 0) {
			char first[512];

			if (inf->stop)
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
		root = json_loadb(body, len, 0, NULL);
		free(body);
		items = json_object_get(root, "items");
		if (!json_is_array(items)) {
			list_failed(inf, "not a list");
			json_decref(root);
			return -1;
		}
		rv = json_string_value(json_object_get(json_object_get(root, "metadata"),
						       "resourceVersion"));
		next = json_string_value(json_object_get(json_object_get(root, "metadata"),
							 "continue"));
		if (next && strlen(next) >= sizeof(cont)) {
			list_failed(inf, "continue token too long");
			json_decref(root);
			return -1;
		}
		if (!begun) {
			if (inf->on.relist_begin)
				inf->on.relist_begin(inf->on.ctx);
			begun = true;
		}
		json_array_foreach(items, i, item)
			if (inf->on.object)
				inf->on.object(inf->on.ctx, item);
		if (rv)
			snprintf(inf->rv, sizeof(inf->rv), "%s", rv);
		snprintf(cont, sizeof(cont), "%s", next ? next : "");
		json_decref(root);
	} while (cont[0] && !inf->stop);
	return inf->stop ? -1 : 0;
}

static int on_event(void *ctx, const char *line, size_t len)
{
	struct informer *inf = ctx;
	json_t *ev = json_loadb(line, len, 0, NULL);
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

		if (code == 410)
			inf->gone = true;
		log_event(code == 410 ? LOG_INFO : LOG_WARN,
			  "msg=\"watch error\" kind=%s code=%lld", inf->name,
			  (long long)code);
		rc = 1; /* end this stream */
	} else {
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
		if (inf->on.relist_begin)
			inf->on.relist_begin(inf->on.ctx);
		if (inf->on.relist_end)
			inf->on.relist_end(inf->on.ctx, first);
		atomic_store(&inf->synced, true);
	}
	set_connected(inf, true);
	backoff_reset(inf);
	nap(inf, inf->unserved_retry_ms);
}

static void *loop(void *arg)
{
	struct informer *inf = arg;
	const struct kube_stream cb = {.on_open = on_open, .on_line = on_event,
				       .ctx = inf};
	bool need_list = true;

	backoff_reset(inf);
	while (!inf->stop) {
		char path[PATH_MAX_LEN];
		struct diag d;
		int rc;

		if (need_list) {
			bool first;
			int lr = list(inf);

			if (lr == LIST_NOT_SERVED) {
				not_served(inf);
				continue;
			}
			if (lr < 0) {
				/* Only an unserved path counts as connected
				 * while listing. */
				set_connected(inf, false);
				backoff_nap(inf);
				continue;
			}
			if (inf->unserved) {
				/* Served now: connected again once its
				 * watch is. */
				inf->unserved = false;
				set_connected(inf, false);
			}
			need_list = false;
			backoff_reset(inf);
			first = !atomic_load(&inf->synced);
			if (inf->on.relist_end)
				inf->on.relist_end(inf->on.ctx, first);
			atomic_store(&inf->synced, true);
			if (!first)
				log_event(LOG_INFO, "msg=\"relisted\" kind=%s "
						    "resource_version=%s",
					  inf->name, inf->rv);
		}
		snprintf(path, sizeof(path),
			 "%s?%swatch=1&allowWatchBookmarks=true"
			 "&timeoutSeconds=300&resourceVersion=%s",
			 inf->path, inf->selectors, inf->rv);
		inf->gone = false;
		diag_init(&d);
		rc = kube_watch(inf->kube, path, inf->idle_seconds, &cb, &inf->stop,
				&d);
		set_connected(inf, false);
		if (inf->stop)
			break;
		if (inf->gone || rc == 410) {
			need_list = true;
			continue;
		}
		if (rc != 0) {
			char first[512], q[600];

			diag_first(&d, first, sizeof(first));
			log_event(LOG_WARN, "msg=\"watch broke\" kind=%s status=%d "
					    "error=\"%s\" retry_ms=%u",
				  inf->name, rc, log_quote(first, q, sizeof(q)),
				  inf->backoff);
			/* No longer served?  The list will tell. */
			if (rc == 404 && inf->optional)
				need_list = true;
			backoff_nap(inf);
			continue;
		}
		/* A clean end (timeoutSeconds): resume at once. */
	}
	return NULL;
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
	pthread_mutex_init(&inf->mu, NULL);
	pthread_cond_init(&inf->cv, NULL);
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
	if (pthread_create(&inf->thread, NULL, loop, inf) != 0) {
		diag_addf(d, "informer %s: cannot start its thread", cfg->name);
		goto fail;
	}
	inf->started = true;
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

void informer_cancel(struct informer *inf)
{
	if (!inf)
		return;
	pthread_mutex_lock(&inf->mu);
	inf->stop = true;
	pthread_cond_broadcast(&inf->cv);
	pthread_mutex_unlock(&inf->mu);
}

void informer_stop(struct informer *inf)
{
	if (!inf)
		return;
	informer_cancel(inf);
	if (inf->started)
		pthread_join(inf->thread, NULL);
	kube_free(inf->kube);
	pthread_cond_destroy(&inf->cv);
	pthread_mutex_destroy(&inf->mu);
	free(inf->selectors);
	free(inf->path);
	free(inf->name);
	free(inf);
}
