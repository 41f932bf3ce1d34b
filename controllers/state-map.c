/* state-map: a controller's records in a ConfigMap (controllers/state-map.h). */
#include "controllers/state-map.h"

#include "base/diag.h"
#include "kube/client.h"

#include <stdio.h>

static void path_of(char *buf, size_t size, const char *ns, const char *name)
{
	snprintf(buf, size, "/api/v1/namespaces/%s/configmaps%s%s", ns, name ? "/" : "",
		 name ? name : "");
}

int state_map_read(struct kube *k, const char *ns, const char *name,
		   unsigned timeout_ms, json_t **cm, struct diag *d)
{
	char path[600];
	int rc;

	*cm = NULL;
	path_of(path, sizeof(path), ns, name);
	rc = kube_get_json(k, path, timeout_ms, cm, d);
	if (rc == 404) {
		json_decref(*cm);
		*cm = NULL;
		return 0;
	}
	if (rc != 0) {
		json_decref(*cm);
		*cm = NULL;
	}
	return rc;
}

int state_map_write(struct kube *k, const char *ns, const char *name,
		    const json_t *read, json_t *data, unsigned timeout_ms, struct diag *d)
{
	const char *rv = json_string_value(
		json_object_get(json_object_get(read, "metadata"), "resourceVersion"));
	char path[600];
	json_t *obj;
	int rc;

	obj = json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}}}", "apiVersion", "v1", "kind",
			"ConfigMap", "metadata", "name", name, "namespace", ns, "labels",
			"app.kubernetes.io/managed-by", "gpugate");
	if (!obj || !data) {
		json_decref(obj);
		json_decref(data);
		diag_addf(d, "out of memory");
		return -1;
	}
	json_object_set_new(obj, "data", data);
	if (read && rv) {
		json_object_set_new(json_object_get(obj, "metadata"), "resourceVersion",
				    json_string(rv));
		path_of(path, sizeof(path), ns, name);
		rc = kube_replace(k, path, obj, timeout_ms, NULL, d);
	} else {
		path_of(path, sizeof(path), ns, NULL);
		rc = kube_create(k, path, obj, timeout_ms, NULL, d);
	}
	json_decref(obj);
	return rc;
}
