#!/usr/bin/env bash
# cluster.sh - start/stop a throw-away local Kubernetes control plane
# (etcd + kube-apiserver + kube-controller-manager + kube-scheduler, and KWOK
# in place of kubelets) for gpugate's end-to-end tests. Everything listens on 127.0.0.1 on free ports,
# all state lives in one directory, nothing needs root.
#
# Usage:
#   cluster.sh up DIR             generate PKI, start the cluster, wait until
#                                 it is ready; writes DIR/env, DIR/admin.kubeconfig
#   cluster.sh down DIR           stop everything started by `up DIR`
#                                 (always succeeds, idempotent; keeps DIR/logs)
#   cluster.sh status DIR         exit 0 if all components run and /readyz is ok
#   cluster.sh cert DIR NAME [SAN...]
#                                 issue a serving cert signed by the cluster CA
#                                 (e.g. for the webhook under test), printing
#                                 the paths DIR/pki/NAME.{crt,key}; default SANs
#                                 are 127.0.0.1 and localhost
#
# DIR/env (source it) exports:
#   CLUSTER_DIR KUBECONFIG KUBECTL KUBE_BIN_DIR ETCD_BIN_DIR
#   APISERVER_URL APISERVER_PORT ETCD_URL CA_CERT CA_KEY CA_BUNDLE_B64
#   ETCD_PID APISERVER_PID CONTROLLER_MANAGER_PID SCHEDULER_PID KWOK_PID KWOK_BIN_DIR
#   GPUGATE_WAS (1: the cluster runs the workload-aware scheduling gates)
#
# Environment knobs:
#   GPUGATE_CLUSTER_TIMEOUT   seconds to wait for readiness (default 180)
#   GPUGATE_STOP_TIMEOUT      seconds between SIGTERM and SIGKILL (default 10)
#   GPUGATE_KCM_CONTROLLERS   --controllers value for kube-controller-manager
#   GPUGATE_KEEP_ON_FAILURE=1 leave processes running if `up` fails (debug)
#   GPUGATE_APISERVER_EXTRA_FLAGS   more kube-apiserver flags, appended to its
#   GPUGATE_KCM_EXTRA_FLAGS         command line (after the built-in ones, so
#   GPUGATE_SCHEDULER_EXTRA_FLAGS   a repeated flag wins), and the same for
#                                 kube-controller-manager and kube-scheduler;
#                                 split on white space (no quoting), e.g.
#                                 GPUGATE_APISERVER_EXTRA_FLAGS='--v=4'
#   GPUGATE_WAS=1                 workload-aware scheduling (gang start's
#                                 routes workload and podgroup, SPEC section 9,
#                                 docs/design/gang-start.md "End to end"):
#       kube-apiserver          --feature-gates=GenericWorkload=true,WorkloadWithJob=true,
#                                   TopologyAwareWorkloadScheduling=true
#                               --runtime-config=scheduling.k8s.io/v1beta1=true
#       kube-controller-manager --feature-gates=GenericWorkload=true,WorkloadWithJob=true
#       kube-scheduler          --feature-gates=GenericWorkload=true,
#                                   TopologyAwareWorkloadScheduling=true
#                                 placed before the *_EXTRA_FLAGS (a repeated
#                                 --feature-gates sets its own keys on top).
#                                 The scheduler's configuration lists no
#                                 plugins, so its default profile gains
#                                 GangScheduling, TopologyPlacementGenerator and
#                                 PodGroupPodsCount with the gates; the
#                                 podgroup-protection controller runs too
#                                 (unless GPUGATE_KCM_CONTROLLERS). `up` checks
#                                 that scheduling.k8s.io/v1beta1 serves
#                                 podgroups and workloads, and fails saying so
#                                 otherwise (without them the Job controller,
#                                 WorkloadWithJob on, stalls: no Job gets pods).
#   plus everything build-tools.sh honours (GPUGATE_TOOLS_DIR, GO, ...).
#
# Nodes: none until someone creates them. KWOK (sigs.k8s.io/kwok) manages the
# nodes annotated kwok.x-k8s.io/node=fake and the pods bound to them, as a
# kubelet would, by the stages of tests/e2e/kwok/stages.yaml (Running at once;
# completion, failure and slow termination on demand by annotations); it
# renews their Leases, so the node-lifecycle controller keeps them Ready and
# takes their not-ready taint off. tests/e2e/fleet.py makes a fake GPU fleet
# of such nodes from a policy. Pods that no node fits stay Pending.
#
# The job, replicaset, deployment, garbage-collector, namespace,
# service-account (+token), root-CA-publisher, clusterrole-aggregation,
# resourceclaim, device-taint-eviction, node-lifecycle and taint-eviction
# controllers run, so Jobs/Deployments create Pods, pods get the
# ResourceClaims of their templates, new namespaces get a "default"
# ServiceAccount (create Pods only after it exists), deleted namespaces are
# emptied, the built-in ClusterRoles admin/edit/view carry their real
# aggregated rules (`up` waits for edit's), NoExecute taints evict (a node's
# or a DRA device's), etc.

set -euo pipefail

script_dir=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
prog=cluster.sh

# Controllers to run, by canonical name (1.30+). The old short names are
# accepted as aliases ("job", "garbagecollector", "serviceaccount-token", ...),
# but e.g. "garbage-collector" is not a valid name in any release.
default_controllers=job-controller,garbage-collector-controller,namespace-controller
default_controllers+=,serviceaccount-controller,serviceaccount-token-controller
default_controllers+=,root-ca-certificate-publisher-controller
default_controllers+=,replicaset-controller,deployment-controller
# edit, admin and view are built by aggregation (their own rules are empty
# until this controller fills them in): tests act as a tenant bound to edit.
default_controllers+=,clusterrole-aggregation-controller
# DRA: makes a pod's ResourceClaims from its ResourceClaimTemplates (alias
# resource-claim-controller; on by default with DynamicResourceAllocation,
# GA since 1.34).
default_controllers+=,resourceclaim-controller
# DRA device taints (GA in 1.37, no feature gate): deletes the pods whose
# allocated devices carry a NoExecute taint, in their ResourceSlice or from
# a DeviceTaintRule, and writes the rules' EvictionInProgress condition
# (its bootstrap role system:controller:device-taint-eviction-controller).
default_controllers+=,device-taint-eviction-controller
# Nodes: Ready/NotReady from their Leases, the not-ready/unreachable taints;
# NoExecute taints evict. Not the pod garbage collector: tests bind pods to
# nodes that do not exist (gpugate_e2e.bind_pod), which it would delete.
default_controllers+=,node-lifecycle-controller,taint-eviction-controller

# Extra flags per component (GPUGATE_WAS=1 and the *_EXTRA_FLAGS knobs).
apiserver_extra=() kcm_extra=() scheduler_extra=()
if [[ ${GPUGATE_WAS:-0} == 1 ]]; then
    apiserver_extra+=(--feature-gates=GenericWorkload=true,WorkloadWithJob=true,TopologyAwareWorkloadScheduling=true
        --runtime-config=scheduling.k8s.io/v1beta1=true)
    kcm_extra+=(--feature-gates=GenericWorkload=true,WorkloadWithJob=true)
    scheduler_extra+=(--feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=true)
    # PodGroups carry the finalizer scheduling.k8s.io/podgroup-protection,
    # which only this controller removes: without it a deleted PodGroup
    # stays Terminating, and so does a Job deleted in the foreground (the
    # Job controller's PodGroup blocks its owner's deletion).
    default_controllers+=,podgroup-protection-controller
elif [[ ${GPUGATE_WAS:-0} != 0 && -n ${GPUGATE_WAS:-} ]]; then
    printf '%s: ERROR: GPUGATE_WAS=%s: want 1 or 0\n' "$prog" "$GPUGATE_WAS" >&2
    exit 2
fi
# Split on white space on purpose: flags are single words.
# shellcheck disable=SC2206
apiserver_extra+=(${GPUGATE_APISERVER_EXTRA_FLAGS:-})
# shellcheck disable=SC2206
kcm_extra+=(${GPUGATE_KCM_EXTRA_FLAGS:-})
# shellcheck disable=SC2206
scheduler_extra+=(${GPUGATE_SCHEDULER_EXTRA_FLAGS:-})

timeout_s=${GPUGATE_CLUSTER_TIMEOUT:-180}
stop_timeout_s=${GPUGATE_STOP_TIMEOUT:-10}

# Components in start order; `down` stops them in reverse order.
components=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)

# Messages go to a saved copy of the original stderr, so that they are not
# lost when a signal trap fires while stderr is temporarily redirected
# (e.g. inside a readiness check).
exec {msg_fd}>&2
log() { printf '%s: %s\n' "$prog" "$*" >&"$msg_fd"; }
die() {
    printf '%s: ERROR: %s\n' "$prog" "$*" >&"$msg_fd"
    exit 1
}

usage() {
    sed -n '2,/^$/{s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" >&2
    exit 2
}

now() { printf '%s' "${EPOCHREALTIME}"; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1fs", b - a }'; }

# Absolute path of DIR (which may not exist yet).
abs_dir() {
    case $1 in
        /*) printf '%s' "${1%/}" ;;
        *) printf '%s/%s' "$PWD" "${1%/}" ;;
    esac
}

# ---------------------------------------------------------------------------
# Processes
# ---------------------------------------------------------------------------

# is_ours PID: the process exists, is not a zombie, and its command line
# mentions the cluster dir (guards against killing a recycled pid).
is_ours() {
    local pid=$1 state cmdline
    [[ $pid =~ ^[0-9]+$ && -r /proc/$pid/stat ]] || return 1
    state=$(awk '{ sub(/^.*\) /, ""); print $1 }' "/proc/$pid/stat" 2>/dev/null) || return 1
    [[ $state != Z && $state != X ]] || return 1
    cmdline=$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline") || return 1
    [[ $cmdline == *"$cluster_dir"* ]]
}

# start NAME BINARY ARGS...: start a component in its own session (so its
# whole process group can be signalled and it survives our exit), with
# output to DIR/logs/NAME.log, and record its pid in DIR/pids/NAME.pid.
start() {
    local name=$1
    shift
    # Not an interactive shell, so the background child is not a process
    # group leader and setsid execs in place: $! is the component's pid,
    # which is also its process group id.
    # The component must not inherit our stdout/stderr (or $msg_fd): a
    # caller reading our output through a pipe would otherwise never see EOF.
    setsid "$@" </dev/null >"$cluster_dir/logs/$name.log" 2>&1 {msg_fd}>&- &
    printf '%s\n' "$!" >"$cluster_dir/pids/$name.pid"
}

pid_of() {
    local f=$cluster_dir/pids/$1.pid
    [[ -f $f ]] && cat -- "$f"
}

# stop NAME: SIGTERM the component's process group, SIGKILL after the bound.
stop() {
    local name=$1 pid deadline
    pid=$(pid_of "$name") || return 0
    if is_ours "$pid"; then
        log "stopping $name (pid $pid)"
        kill -TERM -- "-$pid" 2>/dev/null || kill -TERM -- "$pid" 2>/dev/null || true
        deadline=$((SECONDS + stop_timeout_s))
        while is_ours "$pid" && ((SECONDS < deadline)); do
            sleep 0.1
        done
        if is_ours "$pid"; then
            log "$name did not stop within ${stop_timeout_s}s, sending SIGKILL"
            kill -KILL -- "-$pid" 2>/dev/null || kill -KILL -- "$pid" 2>/dev/null || true
            deadline=$((SECONDS + 5))
            while is_ours "$pid" && ((SECONDS < deadline)); do
                sleep 0.1
            done
        fi
        stopped_pids+=("$pid")
    fi
    rm -f -- "$cluster_dir/pids/$name.pid"
}

stop_all() {
    local i pid deadline
    stopped_pids=()
    for ((i = ${#components[@]} - 1; i >= 0; i--)); do
        stop "${components[i]}"
    done
    # The stopped processes are zombies until their parent (init or a
    # subreaper: we never wait for our components) reaps them. Give it a
    # moment so that `pgrep` right after `down` sees nothing. Best effort.
    deadline=$((SECONDS + 3))
    for pid in "${stopped_pids[@]}"; do
        while [[ -e /proc/$pid ]] && ((SECONDS < deadline)); do
            sleep 0.05
        done
    done
}

# Print the last lines of a component's log to stderr.
show_log() {
    local name=$1 f=$cluster_dir/logs/$1.log
    [[ -f $f ]] || return 0
    printf '%s: ----- last 40 lines of %s -----\n' "$prog" "$f" >&"$msg_fd"
    tail -n 40 -- "$f" >&"$msg_fd" || true
    printf '%s: ----- end of %s -----\n' "$prog" "$f" >&"$msg_fd"
}

# True while pid runs (not a zombie). For components this run started: they
# are our children, so their pid cannot be reused before we reap them. Not
# is_ours(): /proc/PID/cmdline reads empty while a process is in execve(),
# which made a component that had just started look dead.
is_running() {
    local pid=$1 state
    [[ $pid =~ ^[0-9]+$ && -r /proc/$pid/stat ]] || return 1
    state=$(awk '{ sub(/^.*\) /, ""); print $1 }' "/proc/$pid/stat" 2>/dev/null) || return 1
    [[ -n $state && $state != Z && $state != X ]]
}

# Fail fast if a started component has already exited.
check_alive() {
    local name pid
    for name in "$@"; do
        pid=$(pid_of "$name") || continue
        if ! is_running "$pid"; then
            show_log "$name"
            die "$name (pid $pid) exited during start-up; see $cluster_dir/logs/$name.log"
        fi
    done
}

# ---------------------------------------------------------------------------
# Ports
# ---------------------------------------------------------------------------

picked_ports=" "

# Print a currently unused TCP port. Picks from 20000-32767, i.e. below
# Linux' default ephemeral range (32768+), so outgoing connections do not
# grab it between now and when the component binds it.
free_port() {
    local used port tries
    used=" $(ss -Htan | awk '{ n = split($4, a, ":"); print a[n] }' | tr '\n' ' ') "
    for ((tries = 0; tries < 1000; tries++)); do
        port=$((20000 + (RANDOM * 32768 + RANDOM) % 12768))
        if [[ $used != *" $port "* && $picked_ports != *" $port "* ]]; then
            picked_ports+="$port "
            printf '%s' "$port"
            return 0
        fi
    done
    die "could not find a free TCP port"
}

# ---------------------------------------------------------------------------
# PKI (openssl CLI)
# ---------------------------------------------------------------------------

write_openssl_config() {
    # Self-contained config so the result does not depend on the system's
    # openssl.cnf defaults.
    cat >"$pki/openssl.cnf" <<'EOF'
[req]
distinguished_name = dn
prompt = no

[dn]

[ca_ext]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign, digitalSignature
subjectKeyIdentifier = hash

[server_ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
subjectAltName = ${ENV::GPUGATE_SANS}

[client_ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
EOF
}

# new_key FILE: EC P-256 key (fast to generate, supported everywhere in k8s).
new_key() {
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null
    chmod 600 "$1"
}

# sign NAME SUBJECT EXT [SANS]: key + certificate NAME.{key,crt} signed by the CA.
sign() {
    local name=$1 subject=$2 ext=$3 sans=${4:-DNS:localhost}
    new_key "$pki/$name.key"
    GPUGATE_SANS=$sans openssl req -new -config "$pki/openssl.cnf" -key "$pki/$name.key" \
        -subj "$subject" -out "$pki/$name.csr"
    GPUGATE_SANS=$sans openssl x509 -req -in "$pki/$name.csr" \
        -CA "$pki/ca.crt" -CAkey "$pki/ca.key" \
        -set_serial "0x$(openssl rand -hex 16)" -days 3650 -sha256 \
        -extfile "$pki/openssl.cnf" -extensions "$ext" \
        -out "$pki/$name.crt" 2>/dev/null
    rm -f -- "$pki/$name.csr"
}

generate_pki() {
    write_openssl_config
    new_key "$pki/ca.key"
    GPUGATE_SANS=DNS:localhost openssl req -x509 -new -config "$pki/openssl.cnf" \
        -extensions ca_ext -key "$pki/ca.key" -subj "/CN=gpugate-e2e-ca" \
        -days 3650 -sha256 -out "$pki/ca.crt"

    # 10.96.0.1 is the first IP of --service-cluster-ip-range, i.e. the
    # in-cluster address of the "kubernetes" Service.
    sign apiserver "/CN=kube-apiserver" server_ext \
        "IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
    sign admin "/O=system:masters/CN=admin" client_ext
    sign kube-controller-manager "/CN=system:kube-controller-manager" client_ext
    sign kube-scheduler "/CN=system:kube-scheduler" client_ext
    # Front-proxy (request-header) client, as kubeadm sets up. Without a
    # request-header CA the kube-system/extension-apiserver-authentication
    # ConfigMap is incomplete and kube-controller-manager logs an error
    # about it every few seconds.
    sign front-proxy-client "/CN=front-proxy-client" client_ext

    # Service-account token signing keypair (RS256, the most widely
    # supported JWT algorithm).
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 \
        -out "$pki/sa.key" 2>/dev/null
    chmod 600 "$pki/sa.key"
    openssl pkey -in "$pki/sa.key" -pubout -out "$pki/sa.pub"
}

# write_kubeconfig FILE USER: kubeconfig using DIR/pki/USER.{crt,key}.
write_kubeconfig() {
    local file=$1 user=$2
    cat >"$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: gpugate-e2e
  cluster:
    server: $apiserver_url
    certificate-authority: $pki/ca.crt
users:
- name: $user
  user:
    client-certificate: $pki/$user.crt
    client-key: $pki/$user.key
contexts:
- name: gpugate-e2e
  context:
    cluster: gpugate-e2e
    user: $user
current-context: gpugate-e2e
EOF
    chmod 600 "$file"
}

# ---------------------------------------------------------------------------
# Readiness
# ---------------------------------------------------------------------------

# etcd_healthy: GET /health over plain HTTP with bash's /dev/tcp (no curl).
etcd_healthy() {
    local reply
    reply=$(
        exec 3<>"/dev/tcp/127.0.0.1/$etcd_client_port" || exit 1
        printf 'GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
        timeout 2 cat <&3
    ) 2>/dev/null || return 1
    [[ $reply == *'"health":"true"'* ]]
}

kubectl_() {
    "$kubectl" --kubeconfig "$cluster_dir/admin.kubeconfig" --request-timeout=5s "$@"
}

# wait_for WHAT BLAME CHECK...: poll CHECK until it succeeds; on timeout show
# the log of the component to BLAME. Aborts early if a component died.
wait_for() {
    local what=$1 blame=$2
    shift 2
    while ! "$@" >/dev/null 2>&1; do
        check_alive "${components[@]}"
        if ((SECONDS >= deadline)); then
            show_log "$blame"
            die "timed out after ${timeout_s}s waiting for $what; logs in $cluster_dir/logs"
        fi
        sleep 0.5
    done
    log "$what: ok ($(elapsed "$t_start"))"
}

apiserver_ready() { [[ $(kubectl_ get --raw /readyz 2>/dev/null) == ok ]]; }

# healthz URL: the component answers "ok" (the scheduler over TLS with its
# own self-signed certificate, kwok over plain HTTP).
healthz() { [[ $(curl -ksS --max-time 2 "$1" 2>/dev/null) == ok ]]; }

# edit_aggregated: ClusterRole edit has its aggregated rules (it may write
# pods and jobs, and read them: system:aggregate-to-edit and -to-view are in).
edit_aggregated() {
    local rules
    rules=$(kubectl_ get clusterrole edit -o jsonpath='{.rules}' 2>/dev/null) || return 1
    [[ $rules == *'"pods"'* && $rules == *'"jobs"'* && $rules == *'"watch"'* ]]
}

# ---------------------------------------------------------------------------
# Subcommands
# ---------------------------------------------------------------------------

cmd_up() {
    t_start=$(now)
    local marker=$cluster_dir/.gpugate-cluster name pid

    # Refuse to clobber an unrelated directory or a running cluster.
    if [[ -d $cluster_dir ]] && [[ -n $(ls -A -- "$cluster_dir") ]]; then
        [[ -f $marker ]] ||
            die "$cluster_dir exists, is not empty and was not created by $prog"
        for name in "${components[@]}"; do
            if pid=$(pid_of "$name") && is_ours "$pid"; then
                die "a cluster is already running in $cluster_dir (run: $prog down $cluster_dir)"
            fi
        done
        # Stale state from an earlier cluster: start from scratch.
        rm -rf -- "${cluster_dir:?}"/{etcd,pki,pids,logs,kcm-certs,scheduler-certs,env,admin.kubeconfig,kube-controller-manager.kubeconfig,kube-scheduler.kubeconfig,kube-scheduler.yaml}
    fi
    mkdir -p "$cluster_dir"/{etcd,pki,pids,logs,kcm-certs,scheduler-certs}
    chmod 700 "$cluster_dir/etcd" "$cluster_dir/pki"
    : >"$marker"

    # Tear down whatever was started if anything below fails.
    trap 'on_up_exit $?' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM

    if ((${#apiserver_extra[@]} + ${#kcm_extra[@]} + ${#scheduler_extra[@]} > 0)); then
        log "extra flags: kube-apiserver: ${apiserver_extra[*]:-none}; kube-controller-manager: ${kcm_extra[*]:-none}; kube-scheduler: ${scheduler_extra[*]:-none}"
    fi

    # Binaries (no-op in milliseconds once cached).
    local build_out
    build_out=$("$script_dir/build-tools.sh") || die "build-tools.sh failed"
    eval "$build_out" # sets KUBE_BIN_DIR, ETCD_BIN_DIR, KWOK_BIN_DIR
    kubectl=$KUBE_BIN_DIR/kubectl

    pki=$cluster_dir/pki
    generate_pki
    log "PKI generated ($(elapsed "$t_start"))"

    etcd_client_port=$(free_port)
    local etcd_peer_port apiserver_port kcm_port scheduler_port kwok_port
    etcd_peer_port=$(free_port)
    apiserver_port=$(free_port)
    kcm_port=$(free_port)
    scheduler_port=$(free_port)
    kwok_port=$(free_port)
    local etcd_url=http://127.0.0.1:$etcd_client_port
    apiserver_url=https://127.0.0.1:$apiserver_port

    write_kubeconfig "$cluster_dir/admin.kubeconfig" admin
    write_kubeconfig "$cluster_dir/kube-controller-manager.kubeconfig" kube-controller-manager
    write_kubeconfig "$cluster_dir/kube-scheduler.kubeconfig" kube-scheduler

    deadline=$((SECONDS + timeout_s))

    # etcd: plain HTTP on loopback only; fsync off, the data is throw-away.
    start etcd "$ETCD_BIN_DIR/etcd" \
        --name=gpugate-e2e \
        --data-dir="$cluster_dir/etcd" \
        --listen-client-urls="$etcd_url" \
        --advertise-client-urls="$etcd_url" \
        --listen-peer-urls="http://127.0.0.1:$etcd_peer_port" \
        --initial-advertise-peer-urls="http://127.0.0.1:$etcd_peer_port" \
        --initial-cluster="gpugate-e2e=http://127.0.0.1:$etcd_peer_port" \
        --initial-cluster-state=new \
        --unsafe-no-fsync
    wait_for "etcd healthy on $etcd_url" etcd etcd_healthy

    # MutatingAdmissionWebhook and ValidatingAdmissionWebhook are enabled by
    # default; they are listed explicitly because they are what we test.
    # --enable-admission-plugins adds to the default set.
    # --allow-privileged=true as in kubeadm clusters (the default, false,
    # refuses every privileged container before any validating webhook
    # sees it, which would hide what gpugate itself lets through).
    start kube-apiserver "$KUBE_BIN_DIR/kube-apiserver" \
        --bind-address=127.0.0.1 \
        --advertise-address=127.0.0.1 \
        --secure-port="$apiserver_port" \
        --tls-cert-file="$pki/apiserver.crt" \
        --tls-private-key-file="$pki/apiserver.key" \
        --client-ca-file="$pki/ca.crt" \
        --cert-dir="$cluster_dir/pki" \
        --etcd-servers="$etcd_url" \
        --authorization-mode=Node,RBAC \
        --allow-privileged=true \
        --enable-admission-plugins=MutatingAdmissionWebhook,ValidatingAdmissionWebhook \
        --service-cluster-ip-range=10.96.0.0/16 \
        --service-account-issuer=https://kubernetes.default.svc.cluster.local \
        --service-account-key-file="$pki/sa.pub" \
        --service-account-signing-key-file="$pki/sa.key" \
        --requestheader-client-ca-file="$pki/ca.crt" \
        --requestheader-allowed-names=front-proxy-client \
        --requestheader-username-headers=X-Remote-User \
        --requestheader-group-headers=X-Remote-Group \
        --requestheader-extra-headers-prefix=X-Remote-Extra- \
        --proxy-client-cert-file="$pki/front-proxy-client.crt" \
        --proxy-client-key-file="$pki/front-proxy-client.key" \
        --endpoint-reconciler-type=none \
        "${apiserver_extra[@]}"
    wait_for "kube-apiserver /readyz on $apiserver_url" kube-apiserver apiserver_ready
    if [[ ${GPUGATE_WAS:-0} == 1 ]]; then
        # Both the gate and the runtime-config are needed: either alone
        # serves nothing (docs/design/gang-start.md, F5), and the
        # controller-manager's WorkloadWithJob then stalls every Job.
        local served
        served=$(kubectl_ get --raw /apis/scheduling.k8s.io/v1beta1 2>&1) || true
        if [[ $served != *'"podgroups"'* || $served != *'"workloads"'* ]]; then
            show_log kube-apiserver
            die "GPUGATE_WAS=1, but kube-apiserver does not serve podgroups and workloads at scheduling.k8s.io/v1beta1 (flags: ${apiserver_extra[*]}); it answered: ${served:0:300}"
        fi
        log "scheduling.k8s.io/v1beta1 serves podgroups, workloads: ok ($(elapsed "$t_start"))"
    fi

    local controllers=${GPUGATE_KCM_CONTROLLERS:-$default_controllers}
    # --use-service-account-credentials=true: every controller acts as its
    # own kube-system ServiceAccount with the bootstrap RBAC role for it.
    # With =false all controllers would act as system:kube-controller-manager,
    # whose role cannot e.g. create Pods, so the job controller would fail.
    start kube-controller-manager "$KUBE_BIN_DIR/kube-controller-manager" \
        --bind-address=127.0.0.1 \
        --secure-port="$kcm_port" \
        --cert-dir="$cluster_dir/kcm-certs" \
        --kubeconfig="$cluster_dir/kube-controller-manager.kubeconfig" \
        --authentication-kubeconfig="$cluster_dir/kube-controller-manager.kubeconfig" \
        --authorization-kubeconfig="$cluster_dir/kube-controller-manager.kubeconfig" \
        --controllers="$controllers" \
        --use-service-account-credentials=true \
        --service-account-private-key-file="$pki/sa.key" \
        --root-ca-file="$pki/ca.crt" \
        --kube-api-qps=200 --kube-api-burst=400 \
        --leader-elect=false \
        "${kcm_extra[@]}"
    # Pods can only be created once the namespace's default ServiceAccount
    # exists (ServiceAccount admission), so that is the real "ready" signal.
    wait_for "ServiceAccount default/default" kube-controller-manager \
        kubectl_ -n default get serviceaccount default
    # A custom GPUGATE_KCM_CONTROLLERS may leave the aggregation controller
    # out (it is in "*", all controllers on by default): then do not wait.
    if [[ ,$controllers, == *,clusterrole-aggregation-controller,* || ,$controllers, == *,\*,* ]]; then
        wait_for "ClusterRole edit aggregated" kube-controller-manager edit_aggregated
    fi

    # The real scheduler, as kubeadm runs it (its bootstrap RBAC identity),
    # with room for the scale run's bursts (client-go's default is 50 qps).
    cat >"$cluster_dir/kube-scheduler.yaml" <<EOF
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: $cluster_dir/kube-scheduler.kubeconfig
  qps: 500
  burst: 1000
leaderElection:
  leaderElect: false
EOF
    start kube-scheduler "$KUBE_BIN_DIR/kube-scheduler" \
        --config="$cluster_dir/kube-scheduler.yaml" \
        --bind-address=127.0.0.1 \
        --secure-port="$scheduler_port" \
        --cert-dir="$cluster_dir/scheduler-certs" \
        --authentication-kubeconfig="$cluster_dir/kube-scheduler.kubeconfig" \
        --authorization-kubeconfig="$cluster_dir/kube-scheduler.kubeconfig" \
        "${scheduler_extra[@]}"
    wait_for "kube-scheduler /healthz" kube-scheduler \
        healthz "https://127.0.0.1:$scheduler_port/healthz"

    # KWOK: the kubelets of the fake nodes. Pod IPs come from a /12 (the
    # default /24 runs out at 254 pods); its Leases last 40 s, as a
    # kubelet's do.
    start kwok "$KWOK_BIN_DIR/kwok" \
        --kubeconfig="$cluster_dir/admin.kubeconfig" \
        --config="$script_dir/kwok/stages.yaml" \
        --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
        --node-lease-duration-seconds=40 \
        --cidr=10.64.0.0/12 \
        --node-ip=10.63.0.1 \
        --server-address="127.0.0.1:$kwok_port"
    wait_for "kwok /healthz" kwok healthz "http://127.0.0.1:$kwok_port/healthz"

    {
        printf '# Generated by %s up; source this file.\n' "$prog"
        printf 'export CLUSTER_DIR=%q\n' "$cluster_dir"
        printf 'export KUBECONFIG=%q\n' "$cluster_dir/admin.kubeconfig"
        printf 'export KUBECTL=%q\n' "$kubectl"
        printf 'export KUBE_BIN_DIR=%q\n' "$KUBE_BIN_DIR"
        printf 'export ETCD_BIN_DIR=%q\n' "$ETCD_BIN_DIR"
        printf 'export KWOK_BIN_DIR=%q\n' "$KWOK_BIN_DIR"
        printf 'export APISERVER_URL=%q\n' "$apiserver_url"
        printf 'export APISERVER_PORT=%q\n' "$apiserver_port"
        printf 'export ETCD_URL=%q\n' "$etcd_url"
        printf 'export CA_CERT=%q\n' "$pki/ca.crt"
        printf 'export CA_KEY=%q\n' "$pki/ca.key"
        printf 'export CA_BUNDLE_B64=%q\n' "$(base64 -w0 <"$pki/ca.crt")"
        printf 'export ETCD_PID=%q\n' "$(pid_of etcd)"
        printf 'export APISERVER_PID=%q\n' "$(pid_of kube-apiserver)"
        printf 'export CONTROLLER_MANAGER_PID=%q\n' "$(pid_of kube-controller-manager)"
        printf 'export SCHEDULER_PID=%q\n' "$(pid_of kube-scheduler)"
        printf 'export KWOK_PID=%q\n' "$(pid_of kwok)"
        printf 'export GPUGATE_WAS=%q\n' "${GPUGATE_WAS:-0}"
    } >"$cluster_dir/env"

    trap - EXIT INT TERM
    log "cluster up in $(elapsed "$t_start"): $apiserver_url"
    log "use: source $cluster_dir/env && \"\$KUBECTL\" get ns"
}

on_up_exit() {
    local rc=$1
    trap - EXIT
    if [[ $rc -ne 0 ]]; then
        if [[ ${GPUGATE_KEEP_ON_FAILURE:-0} == 1 ]]; then
            log "up failed; GPUGATE_KEEP_ON_FAILURE=1, leaving processes running"
        else
            log "up failed; stopping what was started"
            stop_all
        fi
    fi
    exit "$rc"
}

cmd_down() {
    # Always succeeds: a missing dir or dead processes are fine.
    if [[ -d $cluster_dir/pids ]]; then
        stop_all
    fi
    rm -f -- "$cluster_dir/env"
    log "cluster in $cluster_dir is down"
}

cmd_status() {
    local name pid rc=0
    for name in "${components[@]}"; do
        if pid=$(pid_of "$name") && is_ours "$pid"; then
            log "$name running (pid $pid)"
        else
            log "$name NOT running"
            rc=1
        fi
    done
    [[ -f $cluster_dir/env ]] || { log "no $cluster_dir/env"; return 1; }
    # shellcheck disable=SC1091,SC2153  # KUBECTL comes from the env file
    kubectl=$(source "$cluster_dir/env" && printf '%s' "$KUBECTL")
    if apiserver_ready; then
        log "kube-apiserver /readyz: ok"
    else
        log "kube-apiserver /readyz: NOT ok"
        rc=1
    fi
    return "$rc"
}

cmd_cert() {
    local name=${1:?usage: $prog cert DIR NAME [SAN...]} san sans=""
    shift
    [[ $name =~ ^[A-Za-z0-9._-]+$ ]] || die "invalid cert name: $name"
    pki=$cluster_dir/pki
    [[ -f $pki/ca.key ]] || die "no CA in $pki (run: $prog up $cluster_dir)"
    (($# > 0)) || set -- 127.0.0.1 localhost
    for san in "$@"; do
        if [[ $san =~ ^[0-9.]+$ || $san == *:* ]]; then
            sans+=",IP:$san"
        else
            sans+=",DNS:$san"
        fi
    done
    sign "$name" "/CN=$1" server_ext "${sans#,}"
    printf '%s\n%s\n' "$pki/$name.crt" "$pki/$name.key"
}

main() {
    (($# >= 2)) || usage
    local cmd=$1
    cluster_dir=$(abs_dir "$2")
    shift 2
    case $cmd in
        up | down | status)
            (($# == 0)) || usage
            "cmd_$cmd"
            ;;
        cert) cmd_cert "$@" ;;
        *) usage ;;
    esac
}

main "$@"
