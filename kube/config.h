/*
 * kube config: where the Kubernetes API is and how to authenticate to it.
 *
 * Reads a kubeconfig (its current context: server, CA, client certificate,
 * token or token file) or the in-cluster service account into a plain
 * struct kube_config, which kube_new() (kube/client.h) copies.  Nothing here
 * talks to the network.
 */
#ifndef GPUGATE_KUBE_CONFIG_H
#define GPUGATE_KUBE_CONFIG_H

#include <stdbool.h>

struct diag;

struct kube_config {
	char *server;          /* "https://host:port", no trailing slash */
	char *ca_pem;          /* NULL: the system trust store */
	bool insecure;         /* insecure-skip-tls-verify */
	char *cert_pem;        /* client certificate, or NULL */
	char *key_pem;         /* its key */
	char *token;           /* bearer token, or NULL */
	char *token_file;      /* re-read on every connection, or NULL */
	/* "sha256//BASE64": the server's public key must be this one (libcurl
	 * CURLOPT_PINNEDPUBLICKEY), its certificate chain and host name are
	 * not checked (kube/peer.h: a replica's address has no name); NULL:
	 * verify as usual. */
	char *pinned_pubkey;
	char *source;          /* where it came from, for messages */
};

/* Loads the current context of a kubeconfig file.  Paths inside it are
 * relative to its directory.  On failure *out is left all zero. */
int kube_config_load(const char *path, struct kube_config *out, struct diag *d);

/* The pod's service account: KUBERNETES_SERVICE_HOST/PORT and
 * /var/run/secrets/kubernetes.io/serviceaccount (root overrides the
 * directory, for tests; NULL for the real one). */
int kube_config_in_cluster(const char *root, struct kube_config *out,
			   struct diag *d);

/* Frees what *c holds (the key is wiped first) and zeroes it. */
void kube_config_release(struct kube_config *c);

#endif
