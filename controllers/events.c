#include "controllers/events.h"

#include "base/diag.h"
#include "base/log.h"
#include "kube/client.h"

#include <jansson.h>
#include <stdio.h>
#include <time.h>

/* An Event is advice: never wait long for it. */
#define EVENT_TIMEOUT_MS 5000

void events_time(int64_t t, char *out, unsigned size)
{
	time_t tt = (time_t)t;
	struct tm tm;

	gmtime_r(&tt, &tm);
	strftime(out, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int events_write(struct kube *k, const char *identity, const struct events_object *o,
		 const char *reason, const char *type, const char *message, int64_t now)
{
	char when[32], collection[400], gen[300];
	json_t *ev, *out = NULL;
	struct diag d;
	int rc;
	/* A cluster-scoped object's (a Node's) Events live in "default",
	 * about an object of no namespace, as the kubelet writes them. */
	const char *ns = o->namespace && o->namespace[0] ? o->namespace : "default";
	const char *about = o->namespace ? o->namespace : "";

	events_time(now, when, sizeof(when));
	snprintf(collection, sizeof(collection), "/api/v1/namespaces/%s/events", ns);
	snprintf(gen, sizeof(gen), "%.200s.gpugate-", o->name);
	ev = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s, s:s, s:s, s:s, s:s}, "
		       "s:s, s:s, s:s, s:{s:s}, s:s, s:s, s:s, s:s, s:i}",
		       "apiVersion", "v1", "kind", "Event",
		       "metadata", "generateName", gen, "namespace", ns,
		       "involvedObject", "apiVersion", o->api_version, "kind", o->kind,
		       "name", o->name, "namespace", about, "uid", o->uid ? o->uid : "",
		       "reason", reason, "message", message, "type", type,
		       "source", "component", "gpugate",
		       "reportingComponent", "gpugate", "reportingInstance",
		       identity ? identity : "",
		       "firstTimestamp", when, "lastTimestamp", when, "count", 1);
	if (!ev)
		return -1;
	diag_init(&d);
	rc = kube_create(k, collection, ev, EVENT_TIMEOUT_MS, &out, &d);
	json_decref(ev);
	json_decref(out);
	if (rc != 0) {
		char q[600];

		log_event(LOG_WARN, "msg=\"event not written\" reason=%s object=%s/%s error=\"%s\"",
			  reason, ns, o->name,
			  log_quote(diag_text(&d), q, sizeof(q)));
		return -1;
	}
	return 0;
}
