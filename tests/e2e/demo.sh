#!/usr/bin/env bash
# demo.sh - a short, scripted kubectl session against a real local control
# plane with gpugate registered as its admission webhook (example policy),
# on the fake GPU fleet of that policy (KWOK nodes: pods are scheduled and
# run, tests/e2e/fleet.py and kwok/stages.yaml).
#
# Usage: tests/e2e/demo.sh          (or: make demo)
#   DEMO_PAUSE=0 tests/e2e/demo.sh  no pauses (default 1 second per step)
#   GPUGATE_BIN=...                 the gpugate binary (default build/gpugate)
#
# Non-interactive; the control plane and gpugate are always torn down (trap).
# Exit status: 0 when every step did what the script says it shows.

set -euo pipefail

root=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
pause=${DEMO_PAUSE:-1}
bin=${GPUGATE_BIN:-$root/build/gpugate}
[[ $bin == /* ]] || bin=$root/$bin
[[ -x $bin ]] || { echo "demo.sh: $bin is not built: run \`make\` (or \`make demo\`)" >&2; exit 2; }
export GPUGATE_BIN=$bin

if [[ -t 1 ]]; then bold=$'\e[1m' dim=$'\e[2m' red=$'\e[31m' off=$'\e[0m'; else bold='' dim='' red='' off=''; fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/gpugate-demo.XXXXXX")
failures=0
teardown() {
    local rc=$?
    trap - EXIT INT TERM
    echo
    echo "${dim}# tearing down: gpugate (SIGTERM), then the control plane${off}"
    if ! python3 "$root/tests/e2e/gpugate_e2e.py" down "$dir"; then
        echo "${red}demo.sh: gpugate did not stop cleanly (see $dir/gpugate)${off}" >&2
        rc=1
    else
        rm -rf -- "$dir"
    fi
    exit "$rc"
}
trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# say LINE...: a comment for the viewer, one line per argument.
say() {
    local line
    echo
    for line; do printf '%s# %s%s\n' "$dim" "$line" "$off"; done
}
show() { printf '%s$ %s%s\n' "$bold" "$*" "$off"; }
# run CMD...: show it, run it (it must succeed), pause.
run() {
    show "$*"
    if ! eval "$*"; then
        echo "${red}demo.sh: expected this to succeed${off}" >&2
        failures=$((failures + 1))
    fi
    sleep "$pause"
}
# refused CMD...: show it, run it (gpugate must refuse it), pause.
refused() {
    show "$*"
    if eval "$*"; then
        echo "${red}demo.sh: expected gpugate to refuse this${off}" >&2
        failures=$((failures + 1))
    fi
    sleep "$pause"
}

# How long eval's pod runs before its fake kubelet reports it done (step 6):
# long enough for the steps that show it running, pauses included.
run_for=$(awk -v p="$pause" 'BEGIN { printf "%ds", 8 + 4 * p + 0.5 }')

t0=$SECONDS
echo "${dim}# starting a local control plane (etcd, kube-apiserver, kube-controller-manager,"
echo "# kube-scheduler; KWOK plays the kubelets of a fake GPU fleet) and gpugate with"
echo "# policy/examples/gpu-cluster.yaml...${off}"
python3 "$root/tests/e2e/gpugate_e2e.py" up --fleet "$dir"
# shellcheck disable=SC1091
source "$dir/env"
export PATH=$KUBE_BIN_DIR:$PATH KUBECONFIG KUBECACHEDIR=$dir/kubectl-cache
echo "${dim}# ready in $((SECONDS - t0))s: kube-apiserver $APISERVER_URL, gpugate $GPUGATE_URL${off}"

cd "$dir"
# kubectl prints warnings and denials on stderr: keep them in order with the
# rest when the output goes to a pipe or a CI log.
exec 2>&1
# What gpugate counts for research's H100 (shown as the command it is).
metric="curl -s --cacert \$GPUGATE_CA \$GPUGATE_URL/metrics | grep 'quota_used{tenant=\"research\",flavor=\"h100-80gb\"}'"
usage() { eval "$metric"; }
# wait_used N: until gpugate counts N (its watch follows the cluster), 20 s
# at most; a failed step otherwise.
wait_used() {
    local i
    for ((i = 0; i < 100; i++)); do
        usage | grep -q " $1\$" && return 0
        sleep 0.2
    done
    echo "${red}demo.sh: gpugate counts $(usage | awk '{print $2}') H100 for research, not $1${off}"
    failures=$((failures + 1))
}

# placed SPEC...: each pod is Running on a node that offers the GPU resource
# its containers ask for (the flavor's: the scheduler applied the flavor's
# nodeSelector and toleration as well), and the pods that gpugate gave
# required pod affinity share one value of its topology key's node label.
# SPEC: NS/NAME (a pod) or NS/job:NAME (the Job's parallelism of pods).
# Prints what is wrong and fails; quiet otherwise.
placed_py='
import json, sys
by = {}
for o in json.load(sys.stdin)["items"]:
    by.setdefault(o["kind"], {})[(o["metadata"].get("namespace"), o["metadata"]["name"])] = o
nodes = {name: o for (_, name), o in by.get("Node", {}).items()}
pods, bad = [], []
for spec in sys.argv[1:]:
    ns, name = spec.split("/", 1)
    if name.startswith("job:"):
        job = by.get("Job", {}).get((ns, name[4:]))
        mine = [o for (n, _), o in by.get("Pod", {}).items() if n == ns and
                o["metadata"].get("labels", {}).get("batch.kubernetes.io/job-name") == name[4:]]
        want = job["spec"].get("parallelism", 1) if job else 1
        if len(mine) != want:
            bad.append(f"{spec}: {len(mine)} pods, not {want}")
        pods += mine
    elif (ns, name) in by.get("Pod", {}):
        pods.append(by["Pod"][(ns, name)])
    else:
        bad.append(f"{spec}: no such pod")
domains = {}
for p in pods:
    who = p["metadata"]["namespace"] + "/" + p["metadata"]["name"]
    phase, node = p["status"].get("phase"), p["spec"].get("nodeName")
    if phase != "Running" or node not in nodes:
        bad.append(who + ": " + str(phase) + " on " + (node or "no node"))
        continue
    alloc = nodes[node]["status"].get("allocatable", {})
    res = {r for c in p["spec"]["containers"]
           for r in (c.get("resources", {}).get("limits") or {}) if r.startswith("nvidia.com/")}
    if not res:
        bad.append(f"{who}: asks for no GPU resource")
    for r in sorted(res):
        if int(alloc.get(r, "0")) <= 0:
            bad.append(f"{who}: on {node}, which offers no {r}")
    aff = (p["spec"].get("affinity") or {}).get("podAffinity") or {}
    for t in aff.get("requiredDuringSchedulingIgnoredDuringExecution") or []:
        key = t["topologyKey"]
        sel = json.dumps(t.get("labelSelector"), sort_keys=True)
        domains.setdefault((key, sel), set()).add(nodes[node]["metadata"]["labels"].get(key))
for (key, sel), vals in domains.items():
    if len(vals) != 1 or None in vals:
        bad.append(f"pods of {sel} in {len(vals)} domains of {key}: {sorted(map(str, vals))}")
for b in bad:
    print("demo.sh:", b)
sys.exit(1 if bad else 0)
'
placed() { kubectl get pods,jobs,nodes -A -o json | python3 -c "$placed_py" "$@"; }
# expect_running SPEC...: until `placed SPEC...` holds (some 30 s at most);
# a failed step otherwise.
expect_running() {
    local i
    for ((i = 0; i < 100; i++)); do
        placed "$@" >/dev/null && return 0
        sleep 0.3
    done
    echo "${red}demo.sh: not running where they should:${off}"
    placed "$@" || true
    failures=$((failures + 1))
}

cp "$root/examples/pod-train-small.yaml" "$root/examples/job-too-big.yaml" .
cat >job-train.yaml <<'EOF'
apiVersion: batch/v1
kind: Job
metadata:
  name: pretrain
  namespace: research
  labels:
    gpugate.io/class: train-large   # 8 H100 per pod, one NVLink domain
spec:
  parallelism: 3
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: trainer
          image: nvcr.io/nvidia/pytorch:24.05-py3
EOF
sed -e 's/name: pretrain/name: finetune/' -e '/parallelism: 3/d' job-train.yaml >job-finetune.yaml
cat >class-pods.yaml <<'EOF'
apiVersion: v1
kind: Pod
metadata:
  name: llm-serve
  namespace: product-inference
  labels:
    gpugate.io/class: inference-mig   # a 1g.10gb MIG slice of an A100
spec:
  containers:
    - name: server
      image: nvcr.io/nvidia/tritonserver:24.05-py3
---
apiVersion: v1
kind: Pod
metadata:
  name: notebook
  namespace: research
  labels:
    gpugate.io/class: dev-shared      # a time-sliced share of an L4
spec:
  containers:
    - name: jupyter
      image: quay.io/jupyter/pytorch-notebook
EOF
cat >job-eval.yaml <<EOF
apiVersion: batch/v1
kind: Job
metadata:
  name: eval
  namespace: research
  labels:
    gpugate.io/class: train-large
spec:
  template:
    metadata:
      annotations:                         # to KWOK, the fake kubelet:
        fleet.gpugate.io/exit: Succeeded   #   exit 0
        fleet.gpugate.io/run-for: $(printf '%-9s' "$run_for")#   after running this long
    spec:
      restartPolicy: Never
      containers:
        - name: eval
          image: nvcr.io/nvidia/pytorch:24.05-py3
EOF
# The claim that the checkpoint hooks of preemptible classes mount
# (checkpoint.claimName "{tenant}-checkpoints"): without it their pods would
# stay Pending. No storage here: a static PV, and its claim marked bound as
# the PV controller (not running) would mark it.
cat >checkpoints.yaml <<'EOF'
apiVersion: v1
kind: PersistentVolume
metadata:
  name: research-checkpoints
spec:
  capacity: {storage: 10Ti}
  accessModes: [ReadWriteMany]
  nfs: {server: nfs.example.internal, path: /checkpoints/research}
  claimRef: {namespace: research, name: research-checkpoints}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: research-checkpoints
  namespace: research
  annotations: {pv.kubernetes.io/bind-completed: "yes"}
spec:
  accessModes: [ReadWriteMany]
  resources: {requests: {storage: 10Ti}}
  storageClassName: ""
  volumeName: research-checkpoints
EOF
# The harness (gpugate_e2e.py up) makes the example namespaces' claims as an
# admin would; make research's only where it does not exist yet.
if ! kubectl get pvc research-checkpoints -n research >/dev/null 2>&1 &&
   ! kubectl apply -f checkpoints.yaml >/dev/null; then
    echo "${red}demo.sh: could not create research's checkpoint volume${off}"
    failures=$((failures + 1))
fi

say "Tenant research (namespace research) may hold 32 H100, plus up to 8 that its cohort lends."
say "1. The fleet: fake nodes (KWOK) labelled as NVIDIA's GPU feature discovery labels real ones,"
run kubectl get nodes -L nvidia.com/gpu.product,nvidia.com/gpu.count,nvidia.com/gpu.clique
say "   what each offers (the device plugin's resources), and the taint that keeps other pods off:"
run "kubectl get nodes -o custom-columns='NAME:.metadata.name,H100:.status.allocatable.nvidia\.com/gpu,MIG-1G.10GB:.status.allocatable.nvidia\.com/mig-1g\.10gb,MIG-3G.40GB:.status.allocatable.nvidia\.com/mig-3g\.40gb,L4-SHARED:.status.allocatable.nvidia\.com/gpu\.shared,TAINT:.spec.taints[*].key'"

# The order matters: the scheduler is not gang-aware. The first pod of
# pretrain takes any free H100 node and the others must follow it into its
# clique (3 nodes), so pretrain goes first, onto an empty fleet; experiment-42
# then lands in the other clique, eval takes a whole node there and finetune
# (one pod, no affinity) the node eval leaves or the last one.
say "2. A Job of 3 pods x 8 H100: one reservation for the whole gang, its pods in one NVLink clique."
run "grep -v '^#' job-train.yaml | grep -E 'kind|name|class|parallelism'"
run kubectl apply -f job-train.yaml
expect_running research/job:pretrain
run kubectl get pods -n research -o wide -L gpugate.io/gang
nodes=$(kubectl get pods -n research -l batch.kubernetes.io/job-name=pretrain -o jsonpath='{.items[*].spec.nodeName}')
run kubectl get nodes "$nodes" -L nvidia.com/gpu.clique

say "3. A Pod asks for a class; gpugate maps it and says so:"
run "grep -v '^#' pod-train-small.yaml"
run kubectl apply -f pod-train-small.yaml
say "   What gpugate changed in the Pod (the claim: research's checkpoint volume, made beforehand):"
run "kubectl get pod experiment-42 -n research -o yaml | grep -E '^ +gpugate.io/|nvidia.com/gpu|GPUGATE_|preStop|claimName|terminationGrace'"

say "4. A MIG slice for product's inference server, a time-sliced L4 for research's notebook:"
run "grep -E '^  (name|namespace):|class' class-pods.yaml"
run kubectl apply -f class-pods.yaml
expect_running research/job:pretrain research/experiment-42 product-inference/llm-serve research/notebook
say "   Each pod runs on a node of its flavor:"
run kubectl get pods -A -o wide -L gpugate.io/flavor
wait_used 26
run "$metric"

say "5. A Job bigger than the tenant could ever hold is refused at once, not left Pending:"
refused kubectl apply -f job-too-big.yaml

say "6. Capacity comes back when a Job completes. eval, 1 pod x 8 H100, runs $run_for and exits 0;" \
    "   26 + 8 > 32: it borrows 2 from the cohort."
run "grep -E 'name: eval|class|fleet' job-eval.yaml"
run kubectl apply -f job-eval.yaml
expect_running research/job:eval
wait_used 34
run "$metric"
say "   While it runs, finetune (1 pod x 8) must wait: it would borrow 34 + 8 - 32 = 10, the cohort has 6 left."
placed research/job:eval >/dev/null ||
    echo "${red}demo.sh: eval does not run any more (it runs $run_for: a slow machine?)${off}"
refused kubectl apply -f job-finetune.yaml
say "   eval completes; gpugate sees it, and its 8 GPUs are back:"
run kubectl wait --for=condition=Complete job/eval -n research --timeout=60s
wait_used 26
run "$metric"
say "   The same request fits now (2 borrowed, so preemptible) and runs:"
run kubectl apply -f job-finetune.yaml
run "kubectl get job finetune -n research -o jsonpath='{.metadata.annotations.gpugate\.io/borrowed} borrowed, preemptible={.metadata.labels.gpugate\.io/preemptible}{\"\n\"}'"
expect_running research/job:finetune
run "kubectl get pods -n research -o wide -l 'batch.kubernetes.io/job-name in (eval,finetune)'"

# Gang start (SPEC section 9): on this cluster (no workload-aware
# scheduling gates) gpugate gates the gang's pods and releases them
# together once one clique has room for all. The blockers: one small pod
# on the first node of each clique (h100-80gb-0 and -3), so that either
# clique has room for 2 of the gang's 3 pods of 8 H100.
cat >busy.yaml <<'EOF'
apiVersion: v1
kind: Pod
metadata:
  name: busy-0
  namespace: research
  labels:
    gpugate.io/class: train-small
spec:
  nodeSelector: {kubernetes.io/hostname: h100-80gb-0}
  containers:
    - name: trainer
      image: nvcr.io/nvidia/pytorch:24.05-py3
---
apiVersion: v1
kind: Pod
metadata:
  name: busy-1
  namespace: research
  labels:
    gpugate.io/class: train-small
spec:
  nodeSelector: {kubernetes.io/hostname: h100-80gb-3}
  containers:
    - name: trainer
      image: nvcr.io/nvidia/pytorch:24.05-py3
EOF
sed -e 's/name: pretrain/name: allreduce/' -e 's/^  parallelism: 3$/  parallelism: 3\n  completions: 3/' \
    job-train.yaml >job-gang.yaml
reloads() {
    curl -s --cacert "$GPUGATE_CA" "$GPUGATE_URL/metrics" |
        awk '/^gpugate_policy_reloads_total\{result="success"\}/ { print $2 }'
}
gated_pods() {
    kubectl get pods -n research -l batch.kubernetes.io/job-name=allreduce \
        -o jsonpath='{range .items[*]}{.spec.schedulingGates[*].name}{"\n"}{end}' |
        grep -c '^gpugate.io/gang$'
}
# until_ok WHAT CMD...: until CMD succeeds (30 s at most); a failed step
# (saying WHAT did not happen) otherwise.
until_ok() {
    local what=$1 i
    shift
    for ((i = 0; i < 100; i++)); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.3
    done
    echo "${red}demo.sh: $what${off}"
    failures=$((failures + 1))
}
reloaded() { (($(reloads) > ${before:-0})); }
all_gated() { (($(gated_pods) == 3)); }
says_why() { kubectl describe pod "$1" -n research | grep -q 'waits for its gang'; }

say "7. Gang start: a Job of a gang class starts all or nothing. research's work so far ends:"
run "kubectl delete jobs,pods --all -n research --wait=false >/dev/null"
wait_used 0
say "   The operator makes train-large a gang class (gpugate reloads its policy when it changes):"
before=$(reloads)
run "sed -i '/priorityClassName: training/a\\    gang: true' \"\$GPUGATE_POLICY\" && grep -B7 'gang: true' \"\$GPUGATE_POLICY\""
until_ok "gpugate did not reload its policy" reloaded
say "   One small pod on the first H100 node of each NVLink clique: either clique has 2 whole nodes free."
run kubectl apply -f busy.yaml
expect_running research/busy-0 research/busy-1
say "   A Job of 3 pods x 8 H100 in one clique: its quota is held whole, but with room for 2 of 3 no pod starts;"
run "grep -v '^#' job-gang.yaml | grep -E 'kind|name|class|parallelism|completions'"
run kubectl apply -f job-gang.yaml
until_ok "the gang's 3 pods are not all gated gpugate.io/gang" all_gated
say "   its pods wait behind gpugate's scheduling gate:"
run "kubectl get pods -n research -l batch.kubernetes.io/job-name=allreduce -o custom-columns='NAME:.metadata.name,NODE:.spec.nodeName,GATES:.spec.schedulingGates[*].name'"
wait_used 26
run "$metric"
say "   and kubectl describe says why (gpugate's GPUWaiting event; gpugate looks every 10 s):"
first=$(kubectl get pods -n research -l batch.kubernetes.io/job-name=allreduce -o jsonpath='{.items[0].metadata.name}')
until_ok "kubectl describe pod $first does not say that it waits for its gang" says_why "$first"
run "kubectl describe pod $first -n research | sed -n '/^Events:/,\$p'"
say "   busy-0 ends: its clique has room for the whole gang, whose pods start together, all in it:"
run kubectl delete pod busy-0 -n research
expect_running research/job:allreduce
run "kubectl get pods -n research -o wide -l batch.kubernetes.io/job-name=allreduce -L gpugate.io/gang"
run kubectl get nodes h100-80gb-0 h100-80gb-1 h100-80gb-2 -L nvidia.com/gpu.clique

# The health loop (issue #30): a preemptible Job on a node whose GPU fails
# is asked to checkpoint, suspended and resumed elsewhere; the node stays
# out until a diagnostic validates it.  What NVSentinel's GPU health
# monitor and a DCGM diagnostic would write is written here as the admin.
cat >job-sweep.yaml <<'EOF'
apiVersion: batch/v1
kind: Job
metadata:
  name: sweep
  namespace: research
  labels:
    gpugate.io/class: train-small   # preemptible: checkpoints when asked
    gpugate.io/gpus: "4"
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: trainer
          image: nvcr.io/nvidia/pytorch:24.05-py3
EOF
gpugate() { "$GPUGATE_BIN" "$@"; }
# "NODE PHASE DELETED" of each pod of sweep.
sweep_pods() {
    kubectl get pods -n research -l batch.kubernetes.io/job-name=sweep \
        -o jsonpath='{range .items[*]}{.spec.nodeName} {.status.phase} {.metadata.deletionTimestamp}{"\n"}{end}'
}
# tainted NODE VALUE: gpugate's taint on NODE has VALUE ("": none).
tainted() {
    [[ $(kubectl get node "$1" -o jsonpath='{range .spec.taints[?(@.key=="gpugate.io/unhealthy")]}{.value}{end}') == "$2" ]]
}
signalled() {
    kubectl get job sweep -n research -o jsonpath='{.metadata.annotations.gpugate\.io/checkpoint-requested}' | grep -q .
}
# One pod of sweep, Running, on another node than $node.
moved() {
    local pods
    pods=$(sweep_pods)
    [[ $pods =~ ^([^ ]+)\ Running\ $ && ${BASH_REMATCH[1]} != "$node" ]]
}
# xid STATUS REASON MESSAGE: NVSentinel's condition GpuXidError on $node.
xid() {
    kubectl patch node "$node" --subresource=status --type=strategic -p "$(printf \
        '{"status":{"conditions":[{"type":"GpuXidError","status":"%s","reason":"%s","message":"%s"}]}}' \
        "$1" "$2" "$3")" >/dev/null
}
node_story='sed -n "/^Taints:/,/^Unschedulable:/p;/^Events:/,\$p"'

say "8. The health loop. The operator asks that a node whose GPU failed comes back only once a diagnostic" \
    "   has validated it (the label a DCGM diagnostic job sets):"
before=$(reloads)
run "printf 'health:\n  returnAfter: {validationLabel: \"example.com/dcgm-diag=pass\"}\n' >>\"\$GPUGATE_POLICY\" && tail -2 \"\$GPUGATE_POLICY\""
until_ok "gpugate did not reload its policy" reloaded
say "   busy-1 ends; sweep, a preemptible Job of 4 H100, runs:"
run "kubectl delete pod busy-1 -n research >/dev/null"
run kubectl apply -f job-sweep.yaml
expect_running research/job:sweep
node=$(kubectl get pods -n research -l batch.kubernetes.io/job-name=sweep -o jsonpath='{.items[0].spec.nodeName}')
run kubectl get pods -n research -o wide -l batch.kubernetes.io/job-name=sweep
say "   NVSentinel's GPU health monitor reports an XID error on $node (a node condition):"
run "xid True GpuXidErrorIsNotHealthy 'XID 79: GPU has fallen off the bus'"
say "   gpugate takes $node out of the pool: its taint keeps new work off, the Node's Events say why,"
until_ok "$node did not get gpugate's taint" tainted "$node" health
run "kubectl describe node $node | $node_story"
say "   and it asks sweep to checkpoint (an annotation its pod sees, and an Event):"
until_ok "sweep was not asked to checkpoint" signalled
run "kubectl get events -n research --field-selector involvedObject.name=sweep,reason=GPUReclaim -o custom-columns=MESSAGE:.message"
say "   The trainer writes its checkpoint and says so: gpugate suspends sweep, then resumes it away from $node:"
run "kubectl annotate pods -n research -l batch.kubernetes.io/job-name=sweep gpugate.io/checkpoint-done=\$(date -u +%FT%TZ) >/dev/null"
until_ok "sweep does not run again on another node" moved
run kubectl get pods -n research -o wide -l batch.kubernetes.io/job-name=sweep
run "kubectl get events -n research --field-selector involvedObject.name=sweep,reason=GPUReclaim --sort-by=.metadata.creationTimestamp -o custom-columns=MESSAGE:.message"
say "   The GPU is replaced and the condition clears, but $node stays out until it is validated:"
run "xid False GpuXidErrorIsHealthy 'no XID error'"
until_ok "$node is not validating" tainted "$node" validating
run "gpugate pool --policy \"\$GPUGATE_POLICY\" --kubeconfig \"\$KUBECONFIG\""
say "   The diagnostic passes and labels the node; gpugate lets it back:"
run kubectl label node "$node" example.com/dcgm-diag=pass
until_ok "$node kept gpugate's taint" tainted "$node" ""
run "kubectl describe node $node | $node_story"

echo
if ((failures)); then
    echo "${red}demo.sh: $failures step(s) did not do what they should (after $((SECONDS - t0))s)${off}"
    exit 1
fi
echo "${dim}# demo done in $((SECONDS - t0))s${off}"
