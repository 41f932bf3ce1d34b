#!/usr/bin/env bash
# bench/run.sh - gpugate benchmarks: one run, one machine, one report.
#
#   make bench                              (installs nginx-light, wrk, valgrind)
#   make bench BENCH_ARGS="--no-cluster"
#   GPUGATE_BIN=$PWD/build/gpugate bench/run.sh [options]
#
# Options:
#   --no-cluster        skip section 5 (Pod creates through a kube-apiserver)
#   --duration S        seconds per saturation run (default 5, after a 1 s warm-up)
#   --rounds N          saturation rounds, interleaved; the best is kept (default 2)
#   --latency-seconds S seconds of the fixed-rate runs (default 20)
#   --rate R            requests/s of the fixed-rate runs (default 1000)
#   --pods N            pods in the ledger for section 3 (default 100000)
#   --creates N         Pod creates per side in section 5 (default 200)
#   --quick             a smoke test of this script: short runs, 10,000 pods,
#                       20 creates; its figures are not the benchmark's
#   --keep              keep the temporary directory (logs, configs)
#
# The report goes to stdout and to build/bench/report.txt; progress goes to
# stderr.  The exit status is 0 unless the benchmark could not run: targets
# missed are reported as FAIL in the report, not as an error.
# How to read the report: docs/benchmarks.md.
set -euo pipefail

ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
OUT_DIR="$ROOT/build/bench"
REPORT_FILE="$OUT_DIR/report.txt"
START_SECONDS=$SECONDS

no_cluster=0
sat_seconds=5
rounds=2
lat_seconds=20
rate=1000
pods=100000
creates=200
quick=0
keep=0

usage() { sed -n '2,23p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
  case "$1" in
    --no-cluster) no_cluster=1 ;;
    --duration) sat_seconds=${2:?--duration needs seconds}; shift ;;
    --rounds) rounds=${2:?--rounds needs a number}; shift ;;
    --latency-seconds) lat_seconds=${2:?--latency-seconds needs seconds}; shift ;;
    --rate) rate=${2:?--rate needs requests/s}; shift ;;
    --pods) pods=${2:?--pods needs a number}; shift ;;
    --creates) creates=${2:?--creates needs a number}; shift ;;
    --quick) quick=1; sat_seconds=2; rounds=1; lat_seconds=5; pods=10000; creates=20 ;;
    --keep) keep=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "bench/run.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
for v in "$sat_seconds" "$rounds" "$lat_seconds" "$rate" "$pods" "$creates"; do
  case "$v" in ''|*[!0-9]*|0) echo "bench/run.sh: option values must be positive integers (got '$v')" >&2; exit 2 ;; esac
done

log() { printf 'bench: %s\n' "$*" >&2; }
die() { printf 'bench: error: %s\n' "$*" >&2; exit 1; }

# ---- tools -------------------------------------------------------------

GPUGATE_BIN=${GPUGATE_BIN:-$ROOT/build/gpugate}
case "$GPUGATE_BIN" in /*) ;; *) GPUGATE_BIN="$PWD/$GPUGATE_BIN" ;; esac
[ -x "$GPUGATE_BIN" ] || die "GPUGATE_BIN=$GPUGATE_BIN is not an executable (run make first, or use make bench)"

NGINX=$(command -v nginx || true)
[ -n "$NGINX" ] || { [ -x /usr/sbin/nginx ] && NGINX=/usr/sbin/nginx; }
missing=()
for t in gcc wrk python3 curl awk sed pgrep getconf; do
  command -v "$t" >/dev/null || missing+=("$t")
done
[ -n "$NGINX" ] || missing+=("nginx (Debian package nginx-light)")
[ ${#missing[@]} -eq 0 ] || die "missing tools: ${missing[*]} (scripts/deps.sh --bench installs them)"
[ -f /usr/include/openssl/ssl.h ] || die "missing OpenSSL headers (Debian package libssl-dev)"

mkdir -p "$OUT_DIR"
log "compiling the load generators into $OUT_DIR"
gcc -O2 -g -Wall -Wextra -o "$OUT_DIR/loadgen" "$ROOT/bench/loadgen.c" -lssl -lcrypto -lm ||
  die "cannot compile bench/loadgen.c"
gcc -O2 -g -Wall -Wextra -o "$OUT_DIR/startup" "$ROOT/bench/startup.c" ||
  die "cannot compile bench/startup.c"
LOADGEN="$OUT_DIR/loadgen"
STARTUP="$OUT_DIR/startup"
CLK_TCK=$(getconf CLK_TCK)

# ---- processes and clean-up ---------------------------------------------

TMP=$(mktemp -d /tmp/gpugate-bench.XXXXXX)
cd "$TMP" # nothing is written into the source tree but build/bench/
PIDS=()          # every server started here
CLUSTER_DIR=""   # set once cluster.sh up was called

# stop_pid
. "$ROOT/bench/lib.sh"

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  for pid in "${PIDS[@]}"; do stop_pid "$pid"; done
  if [ -n "$CLUSTER_DIR" ]; then
    "$ROOT/tests/e2e/cluster.sh" down "$CLUSTER_DIR" >/dev/null 2>&1 || true
  fi
  if [ "$keep" = 1 ] || [ $rc -ne 0 ]; then
    log "temporary files kept in $TMP"
  else
    rm -rf "$TMP"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT TERM

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# start_gpugate NAME ARGS...: serves in the background; sets GG_PID, GG_PORT.
start_gpugate() {
  local name=$1 i
  shift
  "$GPUGATE_BIN" serve --listen 127.0.0.1:0 "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" &
  GG_PID=$!
  PIDS+=("$GG_PID")
  for i in $(seq 200); do
    grep -q '^listening on ' "$TMP/$name.out" 2>/dev/null && break
    kill -0 "$GG_PID" 2>/dev/null || { cat "$TMP/$name.err" >&2; die "gpugate ($name) did not start"; }
    sleep 0.05
  done
  GG_PORT=$(sed -n 's/^listening on https:\/\/.*:\([0-9]*\)$/\1/p' "$TMP/$name.out")
  [ -n "$GG_PORT" ] || die "gpugate ($name) did not print its port"
}

# CPU ticks (user + system) of a process and its children processes.
cpu_ticks() {
  local total=0 p
  for p in "$@" $(for q in "$@"; do pgrep -P "$q" 2>/dev/null || true; done); do
    [ -r "/proc/$p/stat" ] || continue
    total=$((total + $(awk '{print $14 + $15}' "/proc/$p/stat")))
  done
  echo "$total"
}

kv() { # kv "k1=v1 k2=v2" k2 -> v2
  printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1
}

mem_kib() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }
mib() { awk -v k="$1" 'BEGIN {printf "%.1f", k / 1024}'; }

REPORT="$TMP/report.txt"
: >"$REPORT"
say() { printf '%s\n' "$*" | tee -a "$REPORT"; }

passfail() { # passfail COND-AS-0/1
  if [ "$1" = 1 ]; then echo PASS; else echo FAIL; fi
}

# ---- inputs --------------------------------------------------------------

log "certificates (gpugate certs: ECDSA P-256) in $TMP/certs"
"$GPUGATE_BIN" certs --out "$TMP/certs" --dns localhost --ip 127.0.0.1 >/dev/null 2>&1 ||
  die "gpugate certs failed"
CA="$TMP/certs/ca.crt"
CERT="$TMP/certs/tls.crt"
KEY="$TMP/certs/tls.key"
POLICY="$ROOT/bench/policy-bench.yaml"
REVIEWS="$ROOT/bench/reviews"
# metadata.uid of the Pod in bench/reviews/validate-pod-train-small.json
POD_UID=cfe4842b-a92d-4f82-908a-fa66003bcd9e

WORKLOADS=(pod-train-small job-train-large pod-nginx)
declare -A LABEL=(
  [pod-train-small]="class Pod train-small"
  [job-train-large]="Job train-large x4"
  [pod-nginx]="non-GPU Pod nginx"
)

# ---- header ----------------------------------------------------------------

cpu_model=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
say "gpugate benchmark report"
say "========================"
say "date:      $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
say "machine:   $(nproc) CPUs ($cpu_model), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(. /etc/os-release && echo "$PRETTY_NAME"), kernel $(uname -r)"
tree_rev=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
tree_dirty=$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null | wc -l)
say "gpugate:   $("$GPUGATE_BIN" version 2>/dev/null | head -1) ($GPUGATE_BIN); source tree $tree_rev, $tree_dirty files modified"
say "tools:     $("$NGINX" -v 2>&1 | sed 's/.*: //'), $(wrk -v 2>&1 | head -1 | awk '{print $1, $2}'), $(openssl version | awk '{print $1, $2}'), loadgen (bench/loadgen.c)"
say "load avg:  $load_start at start (other work on the machine skews every figure)"
[ "$quick" = 1 ] && say "MODE:      --quick (a smoke test; these figures are not the benchmark's)"
say ""

# ---- servers -------------------------------------------------------------

log "starting gpugate (policy bench/policy-bench.yaml, embedded usage)"
start_gpugate sat --policy "$POLICY" --tls-cert "$CERT" --tls-key "$KEY" --embedded
SAT_PID=$GG_PID
SAT_PORT=$GG_PORT

# Every body must be answered 200 "allowed":true, or the run measures
# denials.  The class Pod's /mutate answer becomes nginx's fixed body.
for w in "${WORKLOADS[@]}"; do
  for ep in mutate validate; do
    code=$(curl -sS -o "$TMP/answer-$ep-$w.json" -w '%{http_code}' --cacert "$CA" \
      -H 'Content-Type: application/json' --data-binary "@$REVIEWS/$ep-$w.json" \
      "https://127.0.0.1:$SAT_PORT/$ep") || die "curl to gpugate failed"
    [ "$code" = 200 ] && grep -q '"allowed":true' "$TMP/answer-$ep-$w.json" ||
      die "gpugate /$ep of $w: HTTP $code $(head -c 300 "$TMP/answer-$ep-$w.json")"
  done
done
BASE_BODY="$TMP/answer-mutate-pod-train-small.json"

log "starting nginx (the static TLS baseline)"
NGX_PORT=$(free_port)
mkdir -p "$TMP/nginx/html"
cp "$BASE_BODY" "$TMP/nginx/html/review.json"
# `return 200 '...'` is the cheapest way nginx answers a POST; a body with
# characters nginx would interpret there is served as a file instead (a
# POST to a static file is a 405, turned into a 200 with the file).
if grep -q "[\\\\'\$]" "$BASE_BODY"; then
  ngx_answer="root $TMP/nginx/html; error_page 405 =200 /review.json; try_files /review.json =404;"
else
  ngx_answer="return 200 '$(cat "$BASE_BODY")';"
fi
cat >"$TMP/nginx/nginx.conf" <<EOF
worker_processes 2;
daemon off;
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $TMP/nginx/body;
  proxy_temp_path $TMP/nginx/proxy;
  fastcgi_temp_path $TMP/nginx/fastcgi;
  uwsgi_temp_path $TMP/nginx/uwsgi;
  scgi_temp_path $TMP/nginx/scgi;
  client_body_buffer_size 64k;
  client_max_body_size 8m;
  keepalive_timeout 60s;
  keepalive_requests 100000000;
  server {
    listen 127.0.0.1:$NGX_PORT ssl;
    ssl_certificate $CERT;
    ssl_certificate_key $KEY;
    ssl_protocols TLSv1.3;
    # what gpugate (GnuTLS) negotiates with OpenSSL clients
    ssl_ecdh_curve prime256v1;
    ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256;
    default_type application/json;
    location / { $ngx_answer }
  }
}
EOF
"$NGINX" -t -q -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf" 2>"$TMP/nginx/t.err" ||
  { cat "$TMP/nginx/t.err" >&2; die "nginx refused the generated configuration"; }
"$NGINX" -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf" 2>"$TMP/nginx/stderr" &
NGX_PID=$!
PIDS+=("$NGX_PID")
for i in $(seq 100); do
  curl -s -o /dev/null --cacert "$CA" "https://127.0.0.1:$NGX_PORT/" 2>/dev/null && break
  kill -0 "$NGX_PID" 2>/dev/null || { cat "$TMP/nginx/stderr" "$TMP/nginx/error.log" >&2 2>/dev/null; die "nginx did not start"; }
  sleep 0.05
done
curl -sS --cacert "$CA" -H 'Content-Type: application/json' \
  --data-binary "@$REVIEWS/mutate-pod-train-small.json" "https://127.0.0.1:$NGX_PORT/mutate" |
  cmp -s - "$BASE_BODY" || die "nginx does not answer the fixed AdmissionReview body"

# The connection both servers get from the same client (TLS version, suite).
tls_of() {
  local r
  r=$("$LOADGEN" --url "$1" --body "$REVIEWS/mutate-pod-train-small.json" --ca "$CA" --tls13 --count 1) ||
    die "loadgen cannot talk to $1"
  echo "$(kv "$r" tls) $(kv "$r" cipher)"
}
gg_tls=$(tls_of "https://127.0.0.1:$SAT_PORT/mutate")
ngx_tls=$(tls_of "https://127.0.0.1:$NGX_PORT/mutate")

# ---- 1. saturation ---------------------------------------------------------

# run_wrk URL BODY PIDS... -> "rps cpu_us_per_request non2xx errors"
run_wrk() {
  local url=$1 body=$2 out t0 t1 n rps non2xx errs
  shift 2
  BODY="$body" wrk -t1 -c16 -d1s -s "$ROOT/bench/post.lua" "$url" >/dev/null 2>&1 || true
  t0=$(cpu_ticks "$@")
  out=$(BODY="$body" wrk -t1 -c16 -d"${sat_seconds}s" -s "$ROOT/bench/post.lua" "$url" 2>&1) ||
    die "wrk failed: $out"
  t1=$(cpu_ticks "$@")
  n=$(printf '%s\n' "$out" | awk '/requests in/ {print $1}')
  rps=$(printf '%s\n' "$out" | awk '/^Requests\/sec:/ {print $2}')
  non2xx=$(printf '%s\n' "$out" | awk '/Non-2xx/ {print $NF}')
  errs=$(printf '%s\n' "$out" | awk '/Socket errors/ {gsub(",", ""); print $4 + $6 + $8 + $10}')
  [ -n "$n" ] && [ -n "$rps" ] || die "cannot read wrk's output: $out"
  awk -v rps="$rps" -v n="$n" -v dt=$((t1 - t0)) -v hz="$CLK_TCK" -v bad="${non2xx:-0}" -v e="${errs:-0}" \
    'BEGIN {printf "%.0f %.1f %d %d\n", rps, n ? dt / hz * 1e6 / n : 0, bad, e}'
}

log "1. saturation: wrk -t1 -c16, ${sat_seconds}s per run after 1s warm-up, $rounds round(s), $((rounds * 12)) runs"
declare -A BEST_RPS BEST_CPU
sat_problems=""
for r in $(seq "$rounds"); do
  for w in "${WORKLOADS[@]}"; do
    for ep in mutate validate; do
      body="$REVIEWS/$ep-$w.json"
      for srv in nginx gpugate; do
        if [ $srv = nginx ]; then
          res=$(run_wrk "https://127.0.0.1:$NGX_PORT/$ep" "$body" "$NGX_PID")
        else
          res=$(run_wrk "https://127.0.0.1:$SAT_PORT/$ep" "$body" "$SAT_PID")
        fi
        read -r rps cpu bad errs <<<"$res"
        log "   round $r $srv /$ep $w: $rps req/s, $cpu us CPU/request, non-2xx $bad, socket errors $errs"
        [ "$bad" = 0 ] && [ "$errs" = 0 ] || sat_problems+=" $srv/$ep/$w(non-2xx $bad, errors $errs)"
        k="$srv/$ep/$w"
        if [ -z "${BEST_RPS[$k]:-}" ] || [ "$rps" -gt "${BEST_RPS[$k]}" ]; then
          BEST_RPS[$k]=$rps
          BEST_CPU[$k]=$cpu
        fi
      done
    done
  done
done

say "1. Saturation throughput"
say "   wrk -t1 -c16 -d${sat_seconds}s -s bench/post.lua (after a 1 s warm-up), keep-alive HTTPS, same certificate (ECDSA P-256)"
say "   gpugate: $gg_tls, default --threads (one worker per CPU: $(nproc)); nginx: $ngx_tls, worker_processes 2"
say "   nginx answers every POST with gpugate's /mutate answer for the class Pod ($(wc -c <"$BASE_BODY") bytes);"
say "   /validate bodies keep their captured metadata.uid: the ledger holds each workload once (no quota refusals)"
[ "$rounds" -gt 1 ] && say "   best of $rounds interleaved rounds"
say ""
printf '   %-31s %-9s %8s %8s %8s %8s %7s %7s\n' "workload (review size)" endpoint "gpugate" "CPU/req" "nginx" "CPU/req" "ratio" "CPU" | tee -a "$REPORT"
printf '   %-31s %-9s %8s %8s %8s %8s %7s %7s\n' "" "" "req/s" "us" "req/s" "us" "req/s" "ratio" | tee -a "$REPORT"
for w in "${WORKLOADS[@]}"; do
  for ep in mutate validate; do
    g=${BEST_RPS[gpugate/$ep/$w]}; n=${BEST_RPS[nginx/$ep/$w]}
    size=$(wc -c <"$REVIEWS/$ep-$w.json")
    ratio=$(awk -v g="$g" -v n="$n" 'BEGIN {printf "%.2f", n ? g / n : 0}')
    cratio=$(awk -v g="${BEST_CPU[gpugate/$ep/$w]}" -v n="${BEST_CPU[nginx/$ep/$w]}" 'BEGIN {printf "%.2f", g ? n / g : 0}')
    printf '   %-31s %-9s %8s %8s %8s %8s %6sx %6sx\n' "${LABEL[$w]} ($(awk -v s="$size" 'BEGIN {printf "%.1f KB", s/1000}'))" "/$ep" \
      "$g" "${BEST_CPU[gpugate/$ep/$w]}" "$n" "${BEST_CPU[nginx/$ep/$w]}" "$ratio" "$cratio" | tee -a "$REPORT"
  done
done
mut_ratio=$(awk -v g="${BEST_RPS[gpugate/mutate/pod-train-small]}" -v n="${BEST_RPS[nginx/mutate/pod-train-small]}" 'BEGIN {printf "%.2f", g / n}')
say "   (CPU/req: server CPU time, user + system, per answered request over the run; CPU ratio: nginx's"
say "   CPU/req over gpugate's, the same comparison as the req/s ratio without the noise of other work)"
say ""
say "   target: /mutate (class Pod) >= 0.5x the static baseline: ${mut_ratio}x  $(passfail "$(awk -v r="$mut_ratio" 'BEGIN {print (r >= 0.5)}')")"
[ -z "$sat_problems" ] || say "   WARNING: unexpected answers:$sat_problems"
# A server under saturation load that keeps its CPUs mostly idle is not
# slow but stalled: answers held back somewhere (a 200 ms TCP cork once).
stalled=""
for w in "${WORKLOADS[@]}"; do
  for ep in mutate validate; do
    busy=$(awk -v r="${BEST_RPS[gpugate/$ep/$w]}" -v c="${BEST_CPU[gpugate/$ep/$w]}" 'BEGIN {printf "%.2f", r * c / 1e6}')
    awk -v b="$busy" 'BEGIN {exit !(b < 0.25)}' && stalled+=" /$ep $w (${busy} CPUs busy)"
  done
done
[ -z "$stalled" ] || say "   WARNING: gpugate stalled, not busy, under saturation load:$stalled"
say ""

# ---- 2. latency at a fixed rate ------------------------------------------------

log "2. latency: open loop, $rate req/s for ${lat_seconds}s (after 2s warm-up), gpugate then nginx"
lat_run() {
  "$LOADGEN" --url "$1" --body "$REVIEWS/mutate-pod-train-small.json" --ca "$CA" --tls13 \
    --conns 16 --rate "$rate" --warmup 2 --duration "$lat_seconds" || true
}
lat_gg=$(lat_run "https://127.0.0.1:$SAT_PORT/mutate")
lat_ngx=$(lat_run "https://127.0.0.1:$NGX_PORT/mutate")
[ -n "$(kv "$lat_gg" p99_us)" ] && [ -n "$(kv "$lat_ngx" p99_us)" ] || die "the fixed-rate runs failed"

say "2. Latency at a fixed rate: $rate req/s for ${lat_seconds} s, /mutate of the class Pod"
say "   bench/loadgen open loop: 16 keep-alive TLS 1.3 connections, request i scheduled at t0 + i/rate,"
say "   latency from the scheduled time to the last byte of the answer (no coordinated omission)"
say ""
printf '   %-8s %8s %8s %8s %8s %9s %9s %8s | %8s %8s %8s\n' server answered "p50 us" "p90 us" "p99 us" "p99.9 us" "max us" errors "lag p99" "svc p50" "svc p99" | tee -a "$REPORT"
for pair in "gpugate:$lat_gg" "nginx:$lat_ngx"; do
  s=${pair%%:*}; r=${pair#*:}
  printf '   %-8s %8s %8s %8s %8s %9s %9s %8s | %8s %8s %8s\n' "$s" "$(kv "$r" ok)" "$(kv "$r" p50_us)" "$(kv "$r" p90_us)" \
    "$(kv "$r" p99_us)" "$(kv "$r" p999_us)" "$(kv "$r" max_us)" \
    "$(( $(kv "$r" errors) + $(kv "$r" bad_status) ))" "$(kv "$r" lag_p99_us)" "$(kv "$r" svc_p50_us)" "$(kv "$r" svc_p99_us)" | tee -a "$REPORT"
done
p99=$(kv "$lat_gg" p99_us)
say ""
say "   (lag: how late the generator itself wrote a request, after its scheduled time; svc: service time from"
say "   the write to the answer.  A large lag means the machine, not the server, was busy: other processes.)"
say "   target: p99 < 1 ms at $rate req/s: ${p99} us  $(passfail "$(awk -v p="$p99" 'BEGIN {print (p < 1000)}')")"
say ""

stop_pid "$NGX_PID"
stop_pid "$SAT_PID"

# ---- 3. memory with N pods in the ledger ------------------------------------------

log "3. memory: $pods distinct pods through /validate"
start_gpugate mem --policy "$POLICY" --tls-cert "$CERT" --tls-key "$KEY" --embedded
MEM_PID=$GG_PID
MEM_PORT=$GG_PORT
sleep 0.5
idle_rss=$(mem_kib "$MEM_PID" VmRSS); idle_hwm=$(mem_kib "$MEM_PID" VmHWM)
# Pods 1..N get metadata.uid cfe4842b-a92d-4f82-908a-<12 hex digits of i>.
# The first 1,000 warm the process up (heap, TLS state); the fill sends all
# N, the first 1,000 again (the ledger keeps one entry per uid).
warm=$((pods < 1000 ? pods : 1000))
"$LOADGEN" --url "https://127.0.0.1:$MEM_PORT/validate" --body "$REVIEWS/validate-pod-train-small.json" \
  --ca "$CA" --tls13 --conns 16 --count "$warm" --vary "$POD_UID" --vary-start 1 >/dev/null ||
  die "warm-up of the memory run failed"
warm_rss=$(mem_kib "$MEM_PID" VmRSS)
t_fill=$SECONDS
fill=$("$LOADGEN" --url "https://127.0.0.1:$MEM_PORT/validate" --body "$REVIEWS/validate-pod-train-small.json" \
  --ca "$CA" --tls13 --conns 16 --count "$pods" --vary "$POD_UID" --vary-start 1) ||
  die "filling the ledger failed: $fill"
t_fill=$((SECONDS - t_fill))
metrics=$(curl -sS --cacert "$CA" "https://127.0.0.1:$MEM_PORT/metrics")
entries=$(printf '%s\n' "$metrics" | awk '$1 == "gpugate_ledger_entries" {print $2}')
used=$(printf '%s\n' "$metrics" | awk '/^gpugate_quota_used\{tenant="research",flavor="h100-80gb"\}/ {print $2}')
full_rss=$(mem_kib "$MEM_PID" VmRSS); full_hwm=$(mem_kib "$MEM_PID" VmHWM)
stop_pid "$MEM_PID"

say "3. Resident memory (/proc/PID/status), embedded usage, policy bench/policy-bench.yaml"
say "   $(printf '%-44s' 'idle, just started:') VmRSS $(mib "$idle_rss") MiB, VmHWM $(mib "$idle_hwm") MiB"
say "   $(printf '%-44s' "after $warm /validate of distinct pods:") VmRSS $(mib "$warm_rss") MiB"
say "   $(printf '%-44s' "after $pods /validate of distinct pods:") VmRSS $(mib "$full_rss") MiB, VmHWM $(mib "$full_hwm") MiB"
say "   gpugate_ledger_entries $entries, research h100-80gb used $used (2 GPUs a pod);" \
  "$(awk -v a="$full_rss" -v b="$warm_rss" -v n=$((pods - warm)) 'BEGIN {printf "%.0f", n ? (a - b) * 1024 / n : 0}') bytes per added entry;" \
  "filled at $(kv "$fill" rps) req/s in ${t_fill}s"
[ "$entries" = "$pods" ] || say "   WARNING: expected $pods ledger entries"
if [ "$pods" -ge 100000 ]; then
  mem_verdict=$(passfail "$(awk -v k="$full_rss" 'BEGIN {print (k < 65536)}')")
else
  mem_verdict="n/a (only $pods pods)"
fi
say "   target: < 64 MiB resident at 100,000 pods: $(mib "$full_rss") MiB  $mem_verdict"
say ""

# ---- 4. start-up ------------------------------------------------------------------------

log "4. start-up with a policy of 1000 classes and 1000 tenants"
python3 "$ROOT/bench/gen_policy.py" "$TMP/policy-1000.yaml" || die "bench/gen_policy.py failed"
"$GPUGATE_BIN" check "$TMP/policy-1000.yaml" >"$TMP/check.out" 2>&1 ||
  { head -5 "$TMP/check.out" >&2; die "the generated policy is not valid"; }
summary=$(sed -n 2p "$TMP/check.out" | sed 's/^ *//')
serve_args=(--tls-cert "$CERT" --tls-key "$KEY" --listen 127.0.0.1:0 --embedded)
st_big=$("$STARTUP" --runs 10 --until-line "listening on" -- "$GPUGATE_BIN" serve --policy "$TMP/policy-1000.yaml" "${serve_args[@]}") ||
  die "start-up runs failed: $st_big"
ck_big=$("$STARTUP" --runs 10 --until-exit -- "$GPUGATE_BIN" check "$TMP/policy-1000.yaml") ||
  die "check runs failed: $ck_big"
st_small=$("$STARTUP" --runs 10 --until-line "listening on" -- "$GPUGATE_BIN" serve --policy "$POLICY" "${serve_args[@]}") ||
  die "start-up runs failed: $st_small"

say "4. Start-up: exec to the 'listening on' line, 10 runs (bench/startup.c); policy from bench/gen_policy.py:"
say "   $summary ($(wc -c <"$TMP/policy-1000.yaml") bytes)"
printf '   %-46s median %7s ms   min %7s ms   max %7s ms\n' "gpugate serve, 1000 classes / 1000 tenants" \
  "$(kv "$st_big" median_ms)" "$(kv "$st_big" min_ms)" "$(kv "$st_big" max_ms)" | tee -a "$REPORT"
printf '   %-46s median %7s ms   min %7s ms   max %7s ms\n' "gpugate check, same file" \
  "$(kv "$ck_big" median_ms)" "$(kv "$ck_big" min_ms)" "$(kv "$ck_big" max_ms)" | tee -a "$REPORT"
printf '   %-46s median %7s ms   min %7s ms   max %7s ms\n' "gpugate serve, bench policy (5 classes)" \
  "$(kv "$st_small" median_ms)" "$(kv "$st_small" min_ms)" "$(kv "$st_small" max_ms)" | tee -a "$REPORT"
st_med=$(kv "$st_big" median_ms)
say "   target: start-up < 100 ms (1000 classes / 1000 tenants): ${st_med} ms  $(passfail "$(awk -v m="$st_med" 'BEGIN {print (m < 100)}')")"
say ""

# ---- 5. through a kube-apiserver ------------------------------------------------------------

cluster_section() {
  local cdir="$TMP/cluster" t0 client_cert client_key
  log "5. starting a local control plane (tests/e2e/cluster.sh up; the first time it builds the tools, ~7 min)"
  t0=$SECONDS
  CLUSTER_DIR=$cdir
  if ! "$ROOT/tests/e2e/cluster.sh" up "$cdir" >"$TMP/cluster-up.log" 2>&1; then
    tail -20 "$TMP/cluster-up.log" >&2
    say "5. Pod creates through the kube-apiserver: SKIPPED, the control plane did not start (log: $TMP/cluster-up.log)"
    keep=1
    return 0
  fi
  # shellcheck disable=SC1091
  . "$cdir/env"
  log "   control plane up in $((SECONDS - t0))s: $APISERVER_URL"
  "$ROOT/tests/e2e/cluster.sh" cert "$cdir" webhook 127.0.0.1 localhost >/dev/null
  client_cert=$(awk '$1 == "client-certificate:" {print $2; exit}' "$KUBECONFIG")
  client_key=$(awk '$1 == "client-key:" {print $2; exit}' "$KUBECONFIG")
  [ -r "$client_cert" ] || client_cert="$cdir/pki/admin.crt"
  [ -r "$client_key" ] || client_key="$cdir/pki/admin.key"

  # gpugate as deployed: usage from the API (list + watch), ready when synced
  start_gpugate api --policy "$POLICY" --tls-cert "$cdir/pki/webhook.crt" --tls-key "$cdir/pki/webhook.key" \
    --kubeconfig "$KUBECONFIG"
  local api_port=$GG_PORT i
  for i in $(seq 100); do
    curl -sf -o /dev/null --cacert "$CA_CERT" "https://127.0.0.1:$api_port/readyz" && break
    sleep 0.1
  done
  curl -sf -o /dev/null --cacert "$CA_CERT" "https://127.0.0.1:$api_port/readyz" || die "gpugate (API mode) is not ready"

  "$KUBECTL" create namespace research >/dev/null
  for i in $(seq 100); do
    "$KUBECTL" -n research get serviceaccount default >/dev/null 2>&1 && break
    sleep 0.2
  done

  # the class Pod, named bench-pod-<12 hex digits> by the load generator
  python3 - "$ROOT/bench/objects/pod-train-small.json" "$TMP/pod-create.json" <<'EOF'
import json, sys
o = json.load(open(sys.argv[1]))
o["metadata"]["name"] = "bench-pod-000000000000"
open(sys.argv[2], "w").write(json.dumps(o, separators=(",", ":")))
EOF
  create() { # create FIRST-NUMBER COUNT -> loadgen line
    "$LOADGEN" --url "$APISERVER_URL/api/v1/namespaces/research/pods" --body "$TMP/pod-create.json" \
      --ca "$CA_CERT" --cert "$client_cert" --key "$client_key" --conns 1 --count "$2" \
      --expect 201 --vary bench-pod-000000000000 --vary-start "$1" --latencies "$TMP/creates-$1.txt"
  }
  log "   $creates creates without gpugate (after 20 to warm up)"
  create 100000 20 >/dev/null || die "Pod creates failed (without gpugate)"
  local without with
  without=$(create 200000 "$creates") || die "Pod creates failed (without gpugate): $without"

  cat >"$TMP/webhooks.yaml" <<EOF
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: gpugate-bench}
webhooks:
  - name: mutate.gpugate.io
    admissionReviewVersions: ["v1"]
    clientConfig: {url: "https://127.0.0.1:$api_port/mutate", caBundle: "$CA_BUNDLE_B64"}
    rules:
      - {apiGroups: [""], apiVersions: ["v1"], resources: ["pods"], operations: ["CREATE"], scope: Namespaced}
      - {apiGroups: ["batch"], apiVersions: ["v1"], resources: ["jobs"], operations: ["CREATE"], scope: Namespaced}
    matchPolicy: Equivalent
    namespaceSelector: {matchExpressions: [{key: kubernetes.io/metadata.name, operator: NotIn, values: ["kube-system"]}]}
    failurePolicy: Fail
    timeoutSeconds: 5
    sideEffects: NoneOnDryRun
    reinvocationPolicy: IfNeeded
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: gpugate-bench}
webhooks:
  - name: validate.gpugate.io
    admissionReviewVersions: ["v1"]
    clientConfig: {url: "https://127.0.0.1:$api_port/validate", caBundle: "$CA_BUNDLE_B64"}
    rules:
      - {apiGroups: [""], apiVersions: ["v1"], resources: ["pods"], operations: ["CREATE"], scope: Namespaced}
      - {apiGroups: ["batch"], apiVersions: ["v1"], resources: ["jobs"], operations: ["CREATE"], scope: Namespaced}
    matchPolicy: Equivalent
    namespaceSelector: {matchExpressions: [{key: kubernetes.io/metadata.name, operator: NotIn, values: ["kube-system"]}]}
    failurePolicy: Fail
    timeoutSeconds: 5
    sideEffects: NoneOnDryRun
EOF
  "$KUBECTL" apply -f "$TMP/webhooks.yaml" >/dev/null
  # registered is not yet in force: wait until a create comes back mutated
  local tenant=""
  for i in $(seq 100); do
    tenant=$("$KUBECTL" -n research create -f "$ROOT/bench/objects/pod-train-small.json" --dry-run=server \
      -o jsonpath='{.metadata.labels.gpugate\.io/tenant}' 2>/dev/null || true)
    [ "$tenant" = research ] && break
    sleep 0.2
  done
  [ "$tenant" = research ] || die "the webhook registration did not take effect"
  log "   $creates creates with gpugate (after 20 to warm up)"
  create 300000 20 >/dev/null || die "Pod creates failed (with gpugate)"
  # gpugate's own time per review (its histogram: body in to answer out)
  hist() {
    curl -sS --cacert "$CA_CERT" "https://127.0.0.1:$api_port/metrics" |
      awk '/^gpugate_admission_duration_seconds_(sum|count)\{endpoint="(mutate|validate)"\}/ {
             split($1, a, "\""); printf "%s_%s=%s ", a[2], ($1 ~ /_sum/ ? "sum" : "count"), $2 }'
  }
  local h0 h1
  h0=$(hist)
  with=$(create 400000 "$creates") || die "Pod creates failed (with gpugate): $with"
  h1=$(hist)
  own() { # own mutate|validate -> microseconds per review during the run
    awk -v s0="$(kv "$h0" "$1_sum")" -v s1="$(kv "$h1" "$1_sum")" -v c0="$(kv "$h0" "$1_count")" \
      -v c1="$(kv "$h1" "$1_count")" 'BEGIN {printf "%.0f", (c1 > c0 ? (s1 - s0) / (c1 - c0) * 1e6 : 0)}'
  }
  local admitted
  admitted=$(curl -sS --cacert "$CA_CERT" "https://127.0.0.1:$api_port/metrics" |
    awk '/^gpugate_admission_requests_total\{endpoint="validate",kind="Pod",result="allowed"\}/ {print $2}')

  say "5. Pod create through the kube-apiserver (tests/e2e/cluster.sh: etcd + kube-apiserver $("$KUBECTL" version --client 2>/dev/null | awk '/Client Version/ {print $3}'), local)"
  say "   $creates sequential POST /api/v1/namespaces/research/pods of the class Pod, one keep-alive TLS connection,"
  say "   admin client certificate (bench/loadgen --conns 1); gpugate in API mode (--kubeconfig), mutating + validating"
  say "   webhooks by clientConfig.url with caBundle, namespaceSelector excluding kube-system"
  say ""
  printf '   %-36s %9s %9s %9s %9s %9s\n' "" "mean us" "p50 us" "p90 us" "p99 us" "max us" | tee -a "$REPORT"
  for pair in "without webhooks:$without" "with gpugate (mutate + validate):$with"; do
    local s=${pair%%:*} r=${pair#*:}
    printf '   %-36s %9s %9s %9s %9s %9s\n' "$s" "$(kv "$r" mean_us)" "$(kv "$r" p50_us)" "$(kv "$r" p90_us)" \
      "$(kv "$r" p99_us)" "$(kv "$r" max_us)" | tee -a "$REPORT"
  done
  printf '   %-36s %9s %9s %9s %9s\n' "added by gpugate" \
    "$(awk -v a="$(kv "$with" mean_us)" -v b="$(kv "$without" mean_us)" 'BEGIN {printf "%.1f", a - b}')" \
    "$(awk -v a="$(kv "$with" p50_us)" -v b="$(kv "$without" p50_us)" 'BEGIN {printf "%.1f", a - b}')" \
    "$(awk -v a="$(kv "$with" p90_us)" -v b="$(kv "$without" p90_us)" 'BEGIN {printf "%.1f", a - b}')" \
    "$(awk -v a="$(kv "$with" p99_us)" -v b="$(kv "$without" p99_us)" 'BEGIN {printf "%.1f", a - b}')" | tee -a "$REPORT"
  say ""
  say "   gpugate's own time per review in that run (gpugate_admission_duration_seconds: from the whole body"
  say "   to the answer, TLS and HTTP not included): /mutate $(own mutate) us, /validate $(own validate) us; the rest of the added"
  say "   time is the kube-apiserver's webhook calls (encode, send, decode, apply the patch) on the same 2 CPUs."
  say "   gpugate admitted $admitted Pods at /validate (warm-ups and the probe included)"
  say ""
}

if [ "$no_cluster" = 1 ]; then
  say "5. Pod creates through the kube-apiserver: skipped (--no-cluster)"
  say ""
else
  cluster_section
fi

# ---- summary ----------------------------------------------------------------------------------

say "Summary (targets on this machine, the load generator sharing its CPUs)"
sumline() { printf '   %-50s %-16s %s\n' "$1" "$2" "$3" | tee -a "$REPORT"; }
sumline "/mutate throughput >= 0.5x static TLS baseline" "${mut_ratio}x" \
  "$(passfail "$(awk -v r="$mut_ratio" 'BEGIN {print (r >= 0.5)}')")"
sumline "p99 < 1 ms at $rate req/s" "${p99} us" "$(passfail "$(awk -v p="$p99" 'BEGIN {print (p < 1000)}')")"
sumline "< 64 MiB resident with 100,000 pods" "$(mib "$full_rss") MiB" "$mem_verdict"
sumline "start-up < 100 ms (1000 classes, 1000 tenants)" "${st_med} ms" \
  "$(passfail "$(awk -v m="$st_med" 'BEGIN {print (m < 100)}')")"
say ""
say "load avg at end: $(cut -d' ' -f1-3 /proc/loadavg); elapsed $((SECONDS - START_SECONDS)) s"
cp "$REPORT" "$REPORT_FILE"
log "report saved to ${REPORT_FILE#$ROOT/}"
