#!/usr/bin/env bash
# demo.sh - a short, scripted kubectl session against a real local control
# plane with gpugate registered as its admission webhook (example policy).
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

say() { printf '\n%s# %s%s\n' "$dim" "$*" "$off"; }
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

t0=$SECONDS
echo "${dim}# starting a local control plane (etcd, kube-apiserver, kube-controller-manager)"
echo "# and gpugate with policy/examples/gpu-cluster.yaml...${off}"
python3 "$root/tests/e2e/gpugate_e2e.py" up "$dir"
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
wait_pods() { # N LABEL: until N pods with LABEL exist
    local i
    for ((i = 0; i < 100; i++)); do
        [[ $(kubectl get pods -n research -l "$2" -o name | wc -l) -ge $1 ]] && return 0
        sleep 0.2
    done
    return 1
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
sed -e 's/name: pretrain/name: finetune/' -e 's/parallelism: 3/parallelism: 2/' \
    job-train.yaml >job-finetune.yaml

say "Tenant research (namespace research) may hold 32 H100 (+ what cohort lab lends)."
say "1. A Pod asks for a class; gpugate maps it and says so:"
run "grep -v '^#' pod-train-small.yaml"
run kubectl apply -f pod-train-small.yaml

say "2. What gpugate changed in the Pod:"
run "kubectl get pod experiment-42 -n research -o yaml | grep -E '^ +gpugate.io/|nvidia.com/gpu|GPUGATE_|preStop|claimName|terminationGrace'"

say "3. A Job of 3 pods x 8 H100: one reservation for the whole gang."
run "grep -v '^#' job-train.yaml | grep -E 'kind|name|class|parallelism'"
run kubectl apply -f job-train.yaml
wait_pods 3 batch.kubernetes.io/job-name=pretrain ||
    { echo "${red}demo.sh: the job controller created no pods${off}" >&2; failures=$((failures + 1)); }
run kubectl get pods -n research -L gpugate.io/gang,gpugate.io/tenant
run "$metric"

say "4. Another Job of 2 x 8 does not fit: 26 + 16 > 32, and the cohort lends only 8."
refused kubectl apply -f job-finetune.yaml
say "   ... nor does one bigger than the tenant could ever hold:"
refused kubectl apply -f job-too-big.yaml

say "5. The experiment finishes (the kubelet would report this; we patch the status):"
run "kubectl patch pod experiment-42 -n research --subresource=status --type=merge -p '{\"status\":{\"phase\":\"Succeeded\"}}'"
for ((i = 0; i < 50; i++)); do usage | grep -q ' 24$' && break; sleep 0.2; done
run "$metric"
say "   Its 2 GPUs are back: the Job fits now, 8 of them borrowed from the cohort (preemptible)."
run kubectl apply -f job-finetune.yaml
run "kubectl get job finetune -n research -o jsonpath='{.metadata.annotations.gpugate\.io/borrowed} borrowed, preemptible={.metadata.labels.gpugate\.io/preemptible}{\"\n\"}'"

echo
if ((failures)); then
    echo "${red}demo.sh: $failures step(s) did not do what they should (after $((SECONDS - t0))s)${off}"
    exit 1
fi
echo "${dim}# demo done in $((SECONDS - t0))s${off}"
