#!/usr/bin/env bash
# bench/feed-memory.sh - gpugate's memory and sync time with a large cluster
# behind the usage feed (kube/feed.c): list, watch, ledger.
#
#   make bench-feed [FEED_ARGS="..."]
#   GPUGATE_BIN=/abs/path/to/gpugate bench/feed-memory.sh [options]
#
# Options:
#   --pods N          Pods in the fake API (default 100000)
#   --gpu-pods G      of which hold nvidia.com/gpu in a tenant namespace of
#                     policy/examples/gpu-cluster.yaml (default 10000)
#   --jobs M          Jobs (default 2000)
#   --gpu-jobs J      of which hold GPUs (default M/10)
#   --burst W         MODIFIED watch events after the sync, spread over all
#                     the Pods (default N/10)
#   --timeout S       seconds to wait for the sync and for the burst (default 600)
#   --quick           10,000 Pods, 1,000 GPU Pods, 200 Jobs: a smoke test of
#                     this script; its figures are not the benchmark's
#   --keep            keep the temporary directory (logs, kubeconfig)
#
# The fake API is tests/integration/fakekube.py with a generated population
# (tests/integration/population.py: realistic Pods of 4.7 KiB, GPU Pods of
# 6.8 KiB, with managedFields and status); it serves the label selector
# gpugate.io/tenant when gpugate asks with it (only the GPU objects carry
# the label), so the same run measures a feed with or without it.  gpugate
# serves the example policy in API mode (--kubeconfig).  The report goes to
# stdout and build/bench/feed-memory.txt, progress to stderr.  Exit status
# 0 when the benchmark ran, whatever the figures; 1 when it could not.
# How to read it: docs/benchmarks.md, "Watch memory".
set -euo pipefail

ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
OUT_DIR="$ROOT/build/bench"
REPORT_FILE="$OUT_DIR/feed-memory.txt"

pods=100000
gpu_pods=10000
jobs=2000
gpu_jobs=""
burst=""
timeout=600
quick=0
keep=0

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
  case "$1" in
    --pods) pods=${2:?--pods needs a number}; shift ;;
    --gpu-pods) gpu_pods=${2:?--gpu-pods needs a number}; shift ;;
    --jobs) jobs=${2:?--jobs needs a number}; shift ;;
    --gpu-jobs) gpu_jobs=${2:?--gpu-jobs needs a number}; shift ;;
    --burst) burst=${2:?--burst needs a number}; shift ;;
    --timeout) timeout=${2:?--timeout needs seconds}; shift ;;
    --quick) quick=1; pods=10000; gpu_pods=1000; jobs=200 ;;
    --keep) keep=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "bench/feed-memory.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
gpu_jobs=${gpu_jobs:-$((jobs / 10))}
burst=${burst:-$((pods / 10))}
for v in "$pods" "$gpu_pods" "$jobs" "$gpu_jobs" "$burst" "$timeout"; do
  case "$v" in ''|*[!0-9]*) echo "bench/feed-memory.sh: option values must be integers (got '$v')" >&2; exit 2 ;; esac
done
[ "$gpu_pods" -ge 1 ] && [ "$gpu_pods" -le "$pods" ] && [ "$gpu_jobs" -le "$jobs" ] ||
  { echo "bench/feed-memory.sh: need 1 <= --gpu-pods <= --pods and --gpu-jobs <= --jobs" >&2; exit 2; }

log() { printf 'feed-bench: %s\n' "$*" >&2; }
die() { printf 'feed-bench: error: %s\n' "$*" >&2; exit 1; }

GPUGATE_BIN=${GPUGATE_BIN:-$ROOT/build/gpugate}
case "$GPUGATE_BIN" in /*) ;; *) GPUGATE_BIN="$PWD/$GPUGATE_BIN" ;; esac
[ -x "$GPUGATE_BIN" ] || die "GPUGATE_BIN=$GPUGATE_BIN is not an executable (run make first, or use make bench-feed)"
missing=()
for t in python3 curl awk sed date; do
  command -v "$t" >/dev/null || missing+=("$t")
done
[ ${#missing[@]} -eq 0 ] || die "missing tools: ${missing[*]}"
FAKE="$ROOT/tests/integration/fakekube.py"
POLICY="$ROOT/policy/examples/gpu-cluster.yaml"

# ---- processes and clean-up -----------------------------------------------

TMP=$(mktemp -d /tmp/gpugate-feed-bench.XXXXXX)
PIDS=()

# stop_pid, wait_for_line
. "$ROOT/bench/lib.sh"

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  set +e
  # gpugate first: it must not see its API go away
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do stop_pid "${PIDS[i]}"; done
  if [ "$keep" = 1 ] || [ $rc -ne 0 ]; then
    log "temporary files kept in $TMP"
  else
    rm -rf "$TMP"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT TERM

now_ms() { date +%s%3N; }
mem_kib() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }
mib() { awk -v k="$1" 'BEGIN {printf "%.1f", k / 1024}'; }
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' "/proc/$1/stat"; }
secs() { awk -v ms="$1" 'BEGIN {printf "%.2f", ms / 1000}'; }

REPORT="$TMP/report.txt"
: >"$REPORT"
say() { printf '%s\n' "$*" | tee -a "$REPORT"; }

# ---- the fake API -------------------------------------------------------------

"$GPUGATE_BIN" certs --out "$TMP/certs" --dns localhost --ip 127.0.0.1 >/dev/null 2>&1 ||
  die "gpugate certs failed"
CA="$TMP/certs/ca.crt"
log "starting the fake API: $pods Pods ($gpu_pods GPU), $jobs Jobs ($gpu_jobs GPU)"
python3 "$FAKE" --ca "$CA" --cert "$TMP/certs/tls.crt" --key "$TMP/certs/tls.key" \
  --workdir "$TMP/kube" --pods "$pods" --gpu-pods "$gpu_pods" --jobs "$jobs" \
  --gpu-jobs "$gpu_jobs" --until-signal </dev/null >"$TMP/fake.out" 2>"$TMP/fake.err" &
FAKE_PID=$!
PIDS+=("$FAKE_PID")
wait_for_line "$TMP/fake.out" '^ready ' "$FAKE_PID" "$TMP/fake.err" "the fake API"
read -r _ FAKE_PORT KCFG <"$TMP/fake.out" || die "the fake API did not say it was ready"
[ -n "$KCFG" ] || die "the fake API did not say it was ready"
TOKEN=$(sed -n 's/^ *token: //p' "$KCFG")
fake() { # fake METHOD PATH [JSON]
  local body=()
  [ $# -lt 3 ] || body=(-H 'Content-Type: application/json' --data-binary "$3")
  curl -sS --fail --cacert "$CA" -H "Authorization: Bearer $TOKEN" -X "$1" "${body[@]}" \
    "https://127.0.0.1:$FAKE_PORT$2"
}
stat_of() { # stat_of STATS-JSON KEY
  python3 -c 'import json, sys; print(json.loads(sys.argv[1]).get(sys.argv[2], 0))' "$1" "$2"
}
# The average object, as the fake serves it (unfiltered, compact JSON).
sizes=$(cd "$ROOT/tests/integration" && python3 -c '
import sys
from population import Population
def avg(kind, n, g):
    p = Population(kind, n, g, 1)
    picks = p.picks(min(n, 2000))
    return sum(len(p.encode(i)) for i in picks) / max(len(picks), 1) / 1024
print("%.1f %.1f" % (avg("pods", *map(int, sys.argv[1:3])), avg("jobs", *map(int, sys.argv[3:5]))))
' "$pods" "$gpu_pods" "$jobs" "$gpu_jobs") || die "cannot read the population's sizes"
read -r pod_kib job_kib <<<"$sizes"

# ---- gpugate --------------------------------------------------------------------

log "starting gpugate serve --kubeconfig (the example policy)"
t_start=$(now_ms)
"$GPUGATE_BIN" serve --policy "$POLICY" --kubeconfig "$KCFG" --listen 127.0.0.1:0 \
  --tls-cert "$TMP/certs/tls.crt" --tls-key "$TMP/certs/tls.key" >"$TMP/gpugate.out" 2>"$TMP/gpugate.err" &
GG_PID=$!
PIDS+=("$GG_PID")
wait_for_line "$TMP/gpugate.out" '^listening on ' "$GG_PID" "$TMP/gpugate.err" gpugate
GG_PORT=$(sed -n 's/^listening on https:\/\/.*:\([0-9]*\)$/\1/p' "$TMP/gpugate.out")
[ -n "$GG_PORT" ] || die "gpugate did not print its port"
listen_rss=$(mem_kib "$GG_PID" VmRSS)
gg() { curl -sS --cacert "$CA" "https://127.0.0.1:$GG_PORT$1"; }
metric() { # metric METRICS-TEXT NAME
  printf '%s\n' "$1" | awk -v n="$2" '$1 == n {print $2}'
}
alive() { kill -0 "$GG_PID" 2>/dev/null || { tail -20 "$TMP/gpugate.err" >&2; die "gpugate died"; }; }

log "waiting for /readyz (the feed's first whole list of Pods and Jobs)"
deadline=$(($(now_ms) + timeout * 1000))
while :; do
  alive
  code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$CA" "https://127.0.0.1:$GG_PORT/readyz" || true)
  [ "$code" = 200 ] && break
  [ "$(now_ms)" -lt "$deadline" ] || die "gpugate was not ready within ${timeout}s"
  sleep 0.05
done
t_sync=$(($(now_ms) - t_start))
sync_cpu=$(cpu_s "$GG_PID")
sync_rss=$(mem_kib "$GG_PID" VmRSS)
sync_hwm=$(mem_kib "$GG_PID" VmHWM)
m=$(gg /metrics)
sync_entries=$(metric "$m" gpugate_ledger_entries)
research=$(metric "$m" 'gpugate_quota_used{tenant="research",flavor="h100-80gb"}')
product=$(metric "$m" 'gpugate_quota_used{tenant="product",flavor="h100-80gb"}')
st=$(fake GET /_fake/stats) || die "cannot read the fake's counters"
pods_listed=$(stat_of "$st" "ITEMS pods")
jobs_listed=$(stat_of "$st" "ITEMS jobs")
pod_pages=$(stat_of "$st" "LIST pods")
job_pages=$(stat_of "$st" "LIST jobs")
with_selector=$(stat_of "$st" "LIST pods labelSelector")
# The log's own clock: when each kind's first whole list was in.
synced_at() {
  sed -n "s/^ts=\([^ ]*\) level=info msg=\"usage synced\" kind=$1 .*/\1/p" "$TMP/gpugate.err" | head -1
}

log "waiting for both watches"
for i in $(seq 200); do
  [ "$(metric "$(gg /metrics)" gpugate_kube_watch_connected)" = 1 ] && break
  sleep 0.05
done

# ---- the burst ---------------------------------------------------------------------

log "burst: $burst MODIFIED Pod events, then one GPU Pod Succeeded"
t0=$(now_ms)
fake POST /_fake/call "{\"call\": \"burst\", \"args\": [\"pods\", $burst, true]}" >/dev/null ||
  die "the fake refused the burst"
want=$((sync_entries - 1))
deadline=$(($(now_ms) + timeout * 1000))
while :; do
  alive
  e=$(metric "$(gg /metrics)" gpugate_ledger_entries)
  [ "$e" = "$want" ] && break
  [ "$(now_ms)" -lt "$deadline" ] || die "gpugate did not read the burst within ${timeout}s (ledger entries $e, want $want)"
  sleep 0.05
done
t_burst=$(($(now_ms) - t0))
burst_rss=$(mem_kib "$GG_PID" VmRSS)
burst_hwm=$(mem_kib "$GG_PID" VmHWM)
burst_cpu=$(awk -v a="$(cpu_s "$GG_PID")" -v b="$sync_cpu" 'BEGIN {printf "%.2f", a - b}')
burst_entries=$e
st=$(fake GET /_fake/stats) || die "cannot read the fake's counters"
events=$(stat_of "$st" "EVENTS pods")
lists_after=$(stat_of "$st" "LIST pods")

# ---- report ----------------------------------------------------------------------

if [ "$with_selector" -gt 0 ]; then
  feed="label selector gpugate.io/tenant ($with_selector of $pod_pages Pod list requests carried it)"
else
  feed="every Pod and Job (no label selector)"
fi
tree_rev=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
tree_dirty=$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null | wc -l)
say "gpugate feed memory report"
say "=========================="
say "date:      $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
say "machine:   $(nproc) CPUs ($(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)), load avg $(cut -d' ' -f1-3 /proc/loadavg) at the end"
say "gpugate:   $("$GPUGATE_BIN" version 2>/dev/null | head -1) ($GPUGATE_BIN); source tree $tree_rev, $tree_dirty files modified"
say "feed:      $feed"
say "cluster:   tests/integration/fakekube.py: $pods Pods ($gpu_pods with nvidia.com/gpu in tenant namespaces, avg $pod_kib KiB JSON),"
say "           $jobs Jobs ($gpu_jobs with GPUs, avg $job_kib KiB); policy/examples/gpu-cluster.yaml"
[ "$quick" = 1 ] && say "MODE:      --quick (a smoke test; these figures are not the benchmark's)"
say ""
row() { printf '   %-44s %s\n' "$1" "$2" | tee -a "$REPORT"; }
say "1. List (start to /readyz 200)"
row "listed by gpugate:" "$pods_listed Pods in $pod_pages pages, $jobs_listed Jobs in $job_pages pages"
row "time to sync:" "$(secs "$t_sync") s (gpugate CPU $sync_cpu s; Jobs synced $(synced_at jobs), Pods $(synced_at pods))"
row "VmRSS at 'listening on' (the lists began):" "$(mib "$listen_rss") MiB"
row "VmRSS / VmHWM after sync:" "$(mib "$sync_rss") MiB / $(mib "$sync_hwm") MiB"
row "ledger after sync:" "gpugate_ledger_entries $sync_entries; h100-80gb used: research $research, product $product"
say ""
say "2. Watch burst: $burst MODIFIED Pod events (a tenth of the Pods, spread over all), then one GPU Pod Succeeded"
if [ "$with_selector" -gt 0 ]; then
  row "events sent to gpugate:" "$events (the selector leaves out the Pods without the label)"
else
  row "events sent to gpugate:" "$events"
fi
row "time until read (ledger entries -1):" "$(secs "$t_burst") s (gpugate CPU $burst_cpu s)"
row "VmRSS / VmHWM after the burst:" "$(mib "$burst_rss") MiB / $(mib "$burst_hwm") MiB"
row "ledger after the burst:" "gpugate_ledger_entries $burst_entries"
[ "$lists_after" = "$pod_pages" ] || row "WARNING:" "gpugate listed Pods again during the burst ($lists_after list requests in all)"
say ""
if [ "$pods" -ge 100000 ]; then
  verdict=$(awk -v k="$burst_hwm" 'BEGIN {print (k < 65536) ? "PASS" : "FAIL"}')
else
  verdict="n/a (only $pods Pods)"
fi
say "   target (issue #13): memory at 100,000 pods under 64 MiB: VmHWM $(mib "$burst_hwm") MiB  $verdict"
mkdir -p "$OUT_DIR"
cp "$REPORT" "$REPORT_FILE"
log "report saved to ${REPORT_FILE#"$ROOT"/}"
