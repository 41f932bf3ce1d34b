/*
 * cluster-opts: the options of the commands that read the cluster once
 * (`gpugate pool`, `gpugate explain --kubeconfig`), parsed one way.
 */
#ifndef GPUGATE_CLUSTER_OPTS_H
#define GPUGATE_CLUSTER_OPTS_H

/* The message of a --timeout that cluster_opts_timeout() refuses. */
#define CLUSTER_OPTS_TIMEOUT_ERROR "--timeout wants 1 to 3600 seconds"

/* --timeout SECONDS: a whole number from 1 to 3600.  Returns 0, or -1. */
int cluster_opts_timeout(const char *arg, unsigned *seconds);

#endif
