#include "kube/config.h"

#include "base/base64.h"
#include "base/diag.h"
#include "base/file.h"
#include "codec/yamljson.h"

#include <jansson.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KUBECONFIG_MAX (4u << 20)
#define PEM_MAX (1u << 20)
#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

/* ---- small helpers ------------------------------------------------------ */

static const json_t *named(const json_t *list, const char *name)
{
	size_t i;
	json_t *item;

	json_array_foreach(list, i, item) {
		const char *n = json_string_value(json_object_get(item, "name"));

		if (n && strcmp(n, name) == 0)
			return item;
	}
	return NULL;
}

/* A file path from the kubeconfig, relative to its directory. */
static char *resolve(const char *dir, const char *path)
{
	char *out;
	size_t n;

	if (path[0] == '/')
		return strdup(path);
	n = strlen(dir) + strlen(path) + 2;
	out = malloc(n);
	if (out)
		snprintf(out, n, "%s/%s", dir, path);
	return out;
}

/* Inline "-data" (base64) or a file: the PEM text, or NULL with a message. */
static int pem_field(const json_t *obj, const char *data_key, const char *file_key,
		     const char *dir, const char *what, char **out, struct diag *d)
{
	const char *data = json_string_value(json_object_get(obj, data_key));
	const char *file = json_string_value(json_object_get(obj, file_key));

	*out = NULL;
	if (data) {
		size_t n;
		int rc = base64_decode(data, strlen(data), BASE64_LENIENT, out, &n);

		if (rc == -2) {
			diag_addf(d, "out of memory");
			return -1;
		}
		if (rc < 0) {
			diag_addf(d, "%s: %s is not valid base64", what, data_key);
			return -1;
		}
		return 0;
	}
	if (file) {
		char *p = resolve(dir, file);

		if (!p) {
			diag_addf(d, "out of memory");
			return -1;
		}
		size_t n;
		int rc = file_read(p, PEM_MAX, FILE_SECRET, out, &n, d);

		free(p);
		return rc < 0 ? -1 : 0;
	}
	return 0;
}

/* ---- configuration ------------------------------------------------------ */

int kube_config_load(const char *path, struct kube_config *out, struct diag *d)
{
	const json_t *ctxs, *ctx, *cluster, *user;
	const char *cur, *cluster_name, *user_name, *server, *token, *tfile;
	char *text = NULL, *dircopy = NULL, *dir;
	json_t *root = NULL;
	size_t len;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	if (file_read(path, KUBECONFIG_MAX, FILE_SECRET, &text, &len, d) < 0 ||
	    yamljson_parse(path, text, len, &root, d) < 0)
		goto out;
	dircopy = strdup(path);
	if (!dircopy)
		goto out;
	dir = dirname(dircopy);
	cur = json_string_value(json_object_get(root, "current-context"));
	ctxs = json_object_get(root, "contexts");
	ctx = cur ? named(ctxs, cur) : NULL;
	if (!ctx) {
		diag_addf(d, "%s: no current-context (or it names no context)", path);
		goto out;
	}
	cluster_name = json_string_value(json_object_get(
		json_object_get(ctx, "context"), "cluster"));
	user_name = json_string_value(json_object_get(
		json_object_get(ctx, "context"), "user"));
	cluster = json_object_get(named(json_object_get(root, "clusters"),
					cluster_name ? cluster_name : ""),
				  "cluster");
	if (!cluster) {
		diag_addf(d, "%s: context \"%s\" names no cluster", path, cur);
		goto out;
	}
	server = json_string_value(json_object_get(cluster, "server"));
	/* https://HOST[:PORT][/prefix]: a host is required, trailing slashes
	 * go (request paths start with one). */
	if (!server || strncmp(server, "https://", 8) != 0 || server[8] == '\0' ||
	    server[8] == '/') {
		diag_addf(d, "%s: cluster \"%s\" has no https server", path,
			  cluster_name);
		goto out;
	}
	out->server = strdup(server);
	if (out->server) {
		size_t n = strlen(out->server);

		while (n > 8 && out->server[n - 1] == '/')
			out->server[--n] = '\0';
	}
	out->insecure = json_is_true(json_object_get(cluster, "insecure-skip-tls-verify"));
	if (pem_field(cluster, "certificate-authority-data", "certificate-authority",
		      dir, path, &out->ca_pem, d) < 0)
		goto out;
	user = json_object_get(named(json_object_get(root, "users"),
				     user_name ? user_name : ""),
			       "user");
	if (user) {
		if (pem_field(user, "client-certificate-data", "client-certificate",
			      dir, path, &out->cert_pem, d) < 0 ||
		    pem_field(user, "client-key-data", "client-key", dir, path,
			      &out->key_pem, d) < 0)
			goto out;
		token = json_string_value(json_object_get(user, "token"));
		tfile = json_string_value(json_object_get(user, "tokenFile"));
		if (token)
			out->token = strdup(token);
		if (tfile)
			out->token_file = resolve(dir, tfile);
	}
	if (!!out->cert_pem != !!out->key_pem) {
		diag_addf(d, "%s: user \"%s\" has a client certificate without a key "
			     "(or a key without a certificate)",
			  path, user_name ? user_name : "");
		goto out;
	}
	out->source = strdup(path);
	rc = out->server && out->source ? 0 : -1;
out:
	if (rc < 0)
		kube_config_release(out);
	json_decref(root);
	file_free_secret(text, len);
	free(dircopy);
	return rc;
}

int kube_config_in_cluster(const char *root, struct kube_config *out,
			   struct diag *d)
{
	const char *host = getenv("KUBERNETES_SERVICE_HOST");
	const char *port = getenv("KUBERNETES_SERVICE_PORT");
	const char *dir = root ? root : SA_DIR;
	char path[512];
	size_t n;

	memset(out, 0, sizeof(*out));
	if (!host || !port) {
		diag_addf(d, "not in a cluster: KUBERNETES_SERVICE_HOST and "
			     "KUBERNETES_SERVICE_PORT are not set");
		return -1;
	}
	n = strlen(host) + strlen(port) + 16;
	out->server = malloc(n);
	if (!out->server)
		goto fail;
	/* An IPv6 service address needs brackets in a URL. */
	snprintf(out->server, n, strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s",
		 host, port);
	snprintf(path, sizeof(path), "%s/ca.crt", dir);
	if (file_read(path, PEM_MAX, 0, &out->ca_pem, &n, d) < 0)
		goto fail;
	snprintf(path, sizeof(path), "%s/token", dir);
	out->token_file = strdup(path);
	out->source = strdup("in-cluster service account");
	if (!out->ca_pem || !out->token_file || !out->source)
		goto fail;
	return 0;
fail:
	kube_config_release(out);
	return -1;
}

void kube_config_release(struct kube_config *c)
{
	free(c->server);
	free(c->ca_pem);
	if (c->key_pem) {
		memset(c->key_pem, 0, strlen(c->key_pem));
		free(c->key_pem);
	}
	free(c->cert_pem);
	free(c->token);
	free(c->token_file);
	free(c->pinned_pubkey);
	free(c->source);
	memset(c, 0, sizeof(*c));
}
