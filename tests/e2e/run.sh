#!/usr/bin/env bash
# run.sh - gpugate's end-to-end tests: a real local control plane (etcd,
# kube-apiserver, kube-controller-manager), gpugate registered as its
# admission webhook, the real kubectl.
#
# Two passes, each on a cluster of its own, one after the other: "plain"
# (no workload-aware scheduling gates) runs every test but those marked
# was_only; "was" (GPUGATE_WAS=1, cluster.sh) runs only the tests marked
# was or was_only, less those marked plain_only (conftest.py; a module
# says `pytestmark = pytest.mark.was`). A pass that selects no test is
# skipped without starting its cluster.
#
# Usage: tests/e2e/run.sh [pytest args...]
#   make e2e                          (builds gpugate, sets GPUGATE_BIN)
#   make e2e E2E_ARGS='-k quota -x'   (pytest arguments pass through)
#   GPUGATE_BIN=build/san-address-undefined/gpugate tests/e2e/run.sh
#
# Environment:
#   GPUGATE_BIN     the gpugate binary (default build/gpugate); an ASan/UBSan
#                   build works: any sanitizer report on its stderr fails
#   GPUGATE_TOOLS_DIR, GO, ...        see build-tools.sh (tools are cached)
#   GPUGATE_E2E_MANIFESTS_WAIT        seconds to wait for manifests/ (default 0)
#   GPUGATE_E2E_KEEP=1                keep the logs even when the run passed
#                                     (they are always kept when it failed)
#   GPUGATE_E2E_PASSES                the passes to run, in order (default
#                                     "plain was"; make e2e E2E_PASSES=was)

set -euo pipefail

root=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"

now() { printf '%s' "${EPOCHREALTIME}"; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1fs", b - a }'; }
t0=$(now)

bin=${GPUGATE_BIN:-$root/build/gpugate}
[[ $bin == /* ]] || bin=$root/$bin
if [[ ! -x $bin ]]; then
    echo "run.sh: $bin is not built: run \`make\` (or \`make e2e\`)" >&2
    exit 2
fi
export GPUGATE_BIN=$bin

# The interpreter itself, not a wrapper (a pyenv shim is a shell script):
# signals sent to it below must reach pytest.
if ! py=$(python3 -c 'import sys, pytest; print(sys.executable)' 2>/dev/null) || [[ -z $py ]]; then
    echo "run.sh: python3 with pytest is needed (scripts/deps.sh installs python3-pytest)" >&2
    exit 2
fi

# The control-plane binaries: built once (several minutes), then cached; a
# no-op in milliseconds afterwards.  cluster.sh would do it as well, but
# here its progress is visible and its time is reported on its own.
echo "e2e: control-plane tools (tests/e2e/build-tools.sh)..."
tools=$("$root/tests/e2e/build-tools.sh") || {
    echo "run.sh: build-tools.sh failed" >&2
    exit 1
}
eval "$tools"
echo "e2e: tools ready in $(since "$t0"): $KUBE_BIN_DIR, $ETCD_BIN_DIR"
echo "e2e: gpugate: $GPUGATE_BIN ($("$GPUGATE_BIN" version 2>/dev/null | head -n1 || true))"

# pytest's temporary directories (the cluster, gpugate's logs) go under
# $work: whatever happens to pytest, the EXIT trap stops what it left
# running (gpugate by its pid files, the cluster with cluster.sh down).
work=$(mktemp -d "${TMPDIR:-/tmp}/gpugate-e2e.XXXXXX")
pid=
stopped=0
# shellcheck disable=SC2317  # invoked by the EXIT trap
cleanup() {
    local d
    if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
    for d in "$work"/pytest-*/stack*/; do
        if [[ -d $d ]]; then
            "$py" "$root/tests/e2e/gpugate_e2e.py" down "$d" >/dev/null 2>&1 || true
        fi
    done
    if [[ ${GPUGATE_E2E_KEEP:-0} == 1 || ${rc:-1} != 0 ]]; then
        echo "e2e: logs (gpugate stderr, control-plane logs) kept in $work"
    else
        rm -rf -- "$work"
    fi
}
trap cleanup EXIT
# pytest runs in the background so that this script can pass INT and TERM
# on as SIGTERM, which the tests' conftest turns into an orderly teardown.
trap 'stopped=1; kill -TERM "$pid" 2>/dev/null || true' INT TERM

# -p no:cacheprovider: nothing written outside tests/e2e; no bytecode either.
# The whole suite, unless the arguments name test files or directories
# (make e2e E2E_ARGS='tests/e2e/test_chart.py -x').
suite=tests/e2e
for a in "$@"; do
    [[ $a == tests/e2e/* ]] && suite=
done
pytest_() {
    PYTHONDONTWRITEBYTECODE=1 "$py" -m pytest -p no:cacheprovider "$@"
}

verdict_of() {
    case $1 in
        0) echo "PASSED" ;;
        5) echo "NO TESTS RAN" ;;
        2) echo "INTERRUPTED (pytest exit 2)" ;;
        *) echo "FAILED (pytest exit $1)" ;;
    esac
}

# run_pass NAME WAS: one pytest session on a cluster of its own, with
# GPUGATE_WAS=WAS (cluster.sh reads it; conftest.py selects the tests of
# the pass by their markers: gpugate_e2e.selected). A pass that selects no
# test is skipped without a cluster. Sets pass_rc.
run_pass() {
    local name=$1 was=$2 t1 n
    shift 2
    pass_rc=0
    # One "path::test" line a test; "path: N" lines instead when the
    # arguments add a -q of their own (E2E_ARGS='... -q').
    n=$(GPUGATE_WAS=$was pytest_ -q --collect-only $suite "$@" 2>/dev/null |
        awk '/::/ { n++ } /^[^ ]+\.py: [0-9]+$/ { n += $NF } END { print n + 0 }')
    if ((n == 0)); then
        echo "e2e: pass $name: no test selected, skipped"
        pass_rc=5
        return
    fi
    echo "e2e: pass $name (GPUGATE_WAS=$was): $n tests, on a cluster of its own"
    t1=$(now)
    GPUGATE_WAS=$was pytest_ -q -rfExXs --durations=5 --basetemp="$work/pytest-$name" \
        $suite "$@" &
    pid=$!
    wait "$pid" || pass_rc=$?
    while kill -0 "$pid" 2>/dev/null; do # wait was cut short by a signal
        pass_rc=0
        wait "$pid" || pass_rc=$?
    done
    pid=
    echo
    echo "e2e: pass $name: $(verdict_of "$pass_rc") in $(since "$t1")"
}

# GPUGATE_E2E_PASSES: which passes, in order (default both): plain (no
# workload-aware scheduling gates: every test not marked was_only) and was
# (GPUGATE_WAS=1: the tests marked was or was_only, not plain_only).
rc=5 ran=()
for p in ${GPUGATE_E2E_PASSES:-plain was}; do
    case $p in
        plain) run_pass plain 0 "$@" ;;
        was) run_pass was 1 "$@" ;;
        *)
            echo "run.sh: GPUGATE_E2E_PASSES: unknown pass \"$p\" (plain, was)" >&2
            rc=2
            break
            ;;
    esac
    ((pass_rc == 5)) && continue
    ran+=("$p $(verdict_of "$pass_rc")")
    if ((rc == 5 || rc == 0)); then
        rc=$pass_rc
    fi
    ((stopped == 0)) || break
done

echo
summary="no pass ran"
((${#ran[@]} == 0)) || summary=$(printf '%s, ' "${ran[@]}")
echo "e2e: $(verdict_of "$rc") (${summary%, }) in total $(since "$t0"); binary $GPUGATE_BIN"
exit "$rc"
