#!/usr/bin/env bash
# bench/ab.sh - is B slower than A?  Class Pod /mutate req/s of two gpugate
# binaries, side by side on this machine, in interleaved rounds.
#
#   make bench-ab [BASE=REV]     builds REV in build/ab-base and runs this
#   bench/ab.sh [options] A_BINARY B_BINARY
#
# Options:
#   --rounds N        interleaved rounds, one wrk run of each binary a round,
#                     the order alternating: A B, B A, A B, ... (default 80)
#   --duration S      seconds a measured wrk run (default 1; many short rounds
#                     beat a few long ones on a shared machine: see the docs)
#   --warmup S        seconds of the one warm-up run of each (default 2)
#   --connections C   wrk connections (default 16, as make bench)
#   --threads T       gpugate --threads of both servers (default: nproc,
#                     gpugate's own default)
#   --body NAME       review in bench/reviews/ (default mutate-pod-train-small,
#                     make bench's class Pod /mutate); its endpoint is the
#                     name's first word
#   --keep            keep the temporary directory (server logs, wrk output)
#
# Both servers run at once, with the same policy (bench/policy-bench.yaml,
# --embedded), the same certificate and distinct ephemeral ports; the one not
# measured is idle.  wrk -t1 (bench/ab.lua) checks that every answer is a 200
# holding "allowed":true.  The verdict is on the median of the per-round
# ratios B/A of req/s; the report gives their spread and a confidence
# interval of that median, and the same for the servers' CPU per request, a
# second opinion.  About 3 minutes with the defaults.  The report goes to
# stdout and build/bench/ab.txt, progress to stderr.  Exit status 0 when the
# comparison ran, whatever the verdict; 1 when it could not (a tool missing,
# a server died, a bad answer).
# How to read it: docs/benchmarks.md, "A/B against the previous main".
set -euo pipefail

ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
OUT_DIR="$ROOT/build/bench"
REPORT_FILE="$OUT_DIR/ab.txt"

rounds=80
seconds=1
warmup=2
conns=16
threads=$(nproc)
body_name=mutate-pod-train-small
keep=0

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }

bins=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=${2:?--rounds needs a number}; shift ;;
    --duration) seconds=${2:?--duration needs seconds}; shift ;;
    --warmup) warmup=${2:?--warmup needs seconds}; shift ;;
    --connections) conns=${2:?--connections needs a number}; shift ;;
    --threads) threads=${2:?--threads needs a number}; shift ;;
    --body) body_name=${2:?--body needs a name of bench/reviews/}; shift ;;
    --keep) keep=1 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "bench/ab.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) bins+=("$1") ;;
  esac
  shift
done
[ ${#bins[@]} -eq 2 ] || { echo "usage: bench/ab.sh [options] A_BINARY B_BINARY (see --help)" >&2; exit 2; }
for v in "$rounds" "$seconds" "$warmup" "$conns" "$threads"; do
  case "$v" in ''|*[!0-9]*|0) echo "bench/ab.sh: option values must be positive integers (got '$v')" >&2; exit 2 ;; esac
done

log() { printf 'ab: %s\n' "$*" >&2; }
die() { printf 'ab: error: %s\n' "$*" >&2; exit 1; }

# ---- tools and inputs --------------------------------------------------------

missing=()
for t in wrk curl awk sed sort nproc getconf; do
  command -v "$t" >/dev/null || missing+=("$t")
done
[ ${#missing[@]} -eq 0 ] || die "missing tools: ${missing[*]} (scripts/deps.sh --bench installs them)"

BIN=()
for b in "${bins[@]}"; do
  case "$b" in /*) ;; *) b="$PWD/$b" ;; esac
  [ -x "$b" ] && [ -f "$b" ] || die "$b is not an executable"
  BIN+=("$b")
done
A_BIN=${BIN[0]}
B_BIN=${BIN[1]}

BODY="$ROOT/bench/reviews/$body_name.json"
[ -f "$BODY" ] || die "no review $BODY"
ENDPOINT=${body_name%%-*}
POLICY="$ROOT/bench/policy-bench.yaml"
LUA="$ROOT/bench/ab.lua"
EXPECT='"allowed":true' # in every answer (bench/ab.lua)
CLK_TCK=$(getconf CLK_TCK)

# ---- processes and clean-up -------------------------------------------------

TMP=$(mktemp -d /tmp/gpugate-ab.XXXXXX)
PIDS=()    # the two servers
WRK_PID="" # the wrk run in progress

# stop_pid
. "$ROOT/bench/lib.sh"

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  set +e # clean up everything, whatever fails
  if [ -n "$WRK_PID" ]; then
    kill -TERM "$WRK_PID" 2>/dev/null
    wait "$WRK_PID" 2>/dev/null
  fi
  for pid in "${PIDS[@]}"; do stop_pid "$pid"; done
  if [ "$keep" = 1 ] || [ $rc -ne 0 ]; then
    log "temporary files kept in $TMP"
  else
    rm -rf "$TMP"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT TERM

# start NAME BINARY: serves in the background; sets PID_<NAME>, PORT_<NAME>.
start() {
  local name=$1 bin=$2 pid port i
  "$bin" serve --listen 127.0.0.1:0 --policy "$POLICY" --tls-cert "$TMP/certs/tls.crt" \
    --tls-key "$TMP/certs/tls.key" --embedded --threads "$threads" \
    >"$TMP/$name.out" 2>"$TMP/$name.err" &
  pid=$!
  PIDS+=("$pid")
  for i in $(seq 200); do
    grep -q '^listening on ' "$TMP/$name.out" 2>/dev/null && break
    kill -0 "$pid" 2>/dev/null || { cat "$TMP/$name.err" >&2; die "gpugate $name ($bin) did not start"; }
    sleep 0.05
  done
  port=$(sed -n 's/^listening on https:\/\/.*:\([0-9]*\)$/\1/p' "$TMP/$name.out")
  [ -n "$port" ] || die "gpugate $name did not print its port"
  printf -v "PID_$name" %s "$pid"
  printf -v "PORT_$name" %s "$port"
}

alive() { # alive NAME: dies loudly when server NAME has exited
  local pid_var="PID_$1"
  kill -0 "${!pid_var}" 2>/dev/null && return 0
  tail -20 "$TMP/$1.err" >&2
  die "gpugate $1 died (its stderr above)"
}

ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
# snapshot -> "ours busy steal total": CPU ticks of both servers and of this
# shell's reaped children (wrk), then the machine's busy, steal and total
# ticks (/proc/stat; on a VM, steal is CPU time the hypervisor gave others).
snapshot() {
  echo "$(($(ticks "$PID_A") + $(ticks "$PID_B") + $(awk '{print $16 + $17}' "/proc/$$/stat")))" \
    "$(awk '$1 == "cpu" {print $2 + $3 + $4 + $7 + $8, $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9}' /proc/stat)"
}

# measure NAME SECONDS: one wrk run against NAME; sets M_RPS, M_CPU (the
# server's CPU us per request) and M_ELSE (CPUs that other processes and the
# hypervisor took meanwhile).  It runs in this shell, not in $(...), so that
# a signal's trap runs at once and stops the wrk in progress.
measure() {
  local name=$1 secs=$2 pid_var="PID_$1" port_var="PORT_$1" t0 t1 out n rps non2xx errs checked bad
  local o0 b0 st0 tt0 o1 b1 st1 tt1
  alive "$name"
  t0=$(ticks "${!pid_var}")
  read -r o0 b0 st0 tt0 <<<"$(snapshot)"
  BODY="$BODY" EXPECT="$EXPECT" wrk -t1 -c"$conns" -d"${secs}s" -s "$LUA" "https://127.0.0.1:${!port_var}/$ENDPOINT" \
    >"$TMP/wrk.out" 2>&1 &
  WRK_PID=$!
  wait "$WRK_PID" || { WRK_PID=""; cat "$TMP/wrk.out" >&2; die "wrk against $name failed"; }
  WRK_PID=""
  read -r o1 b1 st1 tt1 <<<"$(snapshot)"
  t1=$(ticks "${!pid_var}")
  alive "$name"
  out=$(cat "$TMP/wrk.out")
  n=$(awk '/requests in/ {print $1}' <<<"$out")
  rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
  non2xx=$(awk '/Non-2xx/ {print $NF}' <<<"$out")
  errs=$(awk '/Socket errors/ {gsub(",", ""); print $4 + $6 + $8 + $10}' <<<"$out")
  checked=$(awk '$1 == "ab-checked" {print $2}' <<<"$out")
  bad=$(awk '$1 == "ab-bad" {print $2}' <<<"$out")
  [ -n "$n" ] && [ -n "$rps" ] && [ -n "$checked" ] && [ -n "$bad" ] ||
    { printf '%s\n' "$out" >&2; die "cannot read wrk's output (run against $name)"; }
  [ "${non2xx:-0}" = 0 ] && [ "${errs:-0}" = 0 ] && [ "$bad" = 0 ] && [ "$checked" -gt 0 ] ||
    { printf '%s\n' "$out" >&2; die "gpugate $name: $checked answers checked, $bad not 200 with $EXPECT, non-2xx ${non2xx:-0}, socket errors ${errs:-0}"; }
  M_RPS=$(awk -v rps="$rps" 'BEGIN {printf "%.0f", rps}')
  M_CPU=$(awk -v n="$n" -v dt=$((t1 - t0)) -v hz="$CLK_TCK" 'BEGIN {printf "%.1f", n ? dt / hz * 1e6 / n : 0}')
  M_ELSE=$(awk -v o=$((o1 - o0)) -v b=$((b1 - b0)) -v st=$((st1 - st0)) -v t=$((tt1 - tt0)) -v n="$(nproc)" \
    'BEGIN {e = b - o; if (e < 0) e = 0; printf "%.2f", t ? (e + st) / t * n : 0}')
}

# ---- the servers ------------------------------------------------------------------

"$A_BIN" certs --out "$TMP/certs" --dns localhost --ip 127.0.0.1 >/dev/null 2>&1 ||
  die "$A_BIN certs failed"
start A "$A_BIN"
start B "$B_BIN"
for s in A B; do
  port_var="PORT_$s"
  code=$(curl -sS -o "$TMP/answer-$s.json" -w '%{http_code}' --cacert "$TMP/certs/ca.crt" \
    -H 'Content-Type: application/json' --data-binary "@$BODY" \
    "https://127.0.0.1:${!port_var}/$ENDPOINT") || die "curl to gpugate $s failed"
  [ "$code" = 200 ] && grep -q '"allowed":true' "$TMP/answer-$s.json" ||
    die "gpugate $s /$ENDPOINT: HTTP $code $(head -c 300 "$TMP/answer-$s.json")"
done
if cmp -s "$TMP/answer-A.json" "$TMP/answer-B.json"; then
  answers="identical ($(wc -c <"$TMP/answer-A.json") bytes)"
else
  answers="DIFFERENT (A $(wc -c <"$TMP/answer-A.json") bytes, B $(wc -c <"$TMP/answer-B.json") bytes): both allowed, the work differs"
fi

mkdir -p "$OUT_DIR"
REPORT="$TMP/report.txt"
: >"$REPORT"
say() { printf '%s\n' "$*" | tee -a "$REPORT"; }

say "gpugate A/B: /$ENDPOINT $body_name ($(wc -c <"$BODY") bytes), $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
say "machine:  $(nproc) CPUs ($(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)); load avg $(cut -d' ' -f1-3 /proc/loadavg) at start"
say "A:        $("$A_BIN" version 2>/dev/null | head -1) ($A_BIN)"
say "B:        $("$B_BIN" version 2>/dev/null | head -1) ($B_BIN)"
say "method:   both serving at once (--threads $threads, --embedded, bench/policy-bench.yaml); wrk -t1 -c$conns"
say "          -d${seconds}s, $rounds rounds in the order A B, B A, ... after one ${warmup}s warm-up each"
say "answers:  $answers"
say ""

log "warm-up: ${warmup}s of wrk against each"
measure A "$warmup"
measure B "$warmup"

# ---- interleaved rounds ---------------------------------------------------------------

declare -A RPS CPU ELSE
log "$rounds rounds of ${seconds}s runs"
row() { printf '   %-7s %-5s %9s %9s %7s %9s %9s %7s %9s\n' "$@" | tee -a "$REPORT"; }
row round order "A req/s" "B req/s" "B/A" "A us/req" "B us/req" "B/A" elsewhere
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a ? b / a : 0}'; }
for r in $(seq "$rounds"); do
  if [ $((r % 2)) = 1 ]; then order="A B"; else order="B A"; fi
  for s in $order; do
    measure "$s" "$seconds"
    RPS[$s$r]=$M_RPS
    CPU[$s$r]=$M_CPU
    ELSE[$s$r]=$M_ELSE
  done
  row "$r" "${order/ /}" "${RPS[A$r]}" "${RPS[B$r]}" "$(ratio "${RPS[A$r]}" "${RPS[B$r]}")" \
    "${CPU[A$r]}" "${CPU[B$r]}" "$(ratio "${CPU[A$r]}" "${CPU[B$r]}")" \
    "$(awk -v a="${ELSE[A$r]}" -v b="${ELSE[B$r]}" 'BEGIN {printf "%.2f", (a + b) / 2}')"
done

# ---- figures --------------------------------------------------------------------------

# per_round WHAT: one value a round; WHAT is A or B (req/s), ratio (B/A
# req/s), A_cpu, B_cpu, cpu_ratio (B/A CPU per request) or else.
per_round() {
  local r
  for r in $(seq "$rounds"); do
    case "$1" in
      A | B) echo "${RPS[$1$r]}" ;;
      ratio) ratio "${RPS[A$r]}" "${RPS[B$r]}"; echo ;;
      A_cpu | B_cpu) echo "${CPU[${1%_cpu}$r]}" ;;
      cpu_ratio) ratio "${CPU[A$r]}" "${CPU[B$r]}"; echo ;;
      else) awk -v a="${ELSE[A$r]}" -v b="${ELSE[B$r]}" 'BEGIN {print (a + b) / 2}' ;;
    esac
  done
}
# stats -> "median mean min max q1 q3 lo hi coverage" of the numbers on stdin.
# lo..hi is the distribution-free interval of the median from the order
# statistics: the k-th smallest and largest, with k the largest number such
# that P(Binomial(n, 1/2) < k) <= 2.5 % (at least 1); coverage is its
# confidence, 1 - 2 P(Binomial(n, 1/2) < k), in percent.
stats() {
  sort -g | awk '{v[NR] = $1; s += $1}
    END {
      n = NR
      m = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
      k = 0; cum = 0; lp = n * log(0.5)
      for (i = 0; i < n; i++) {
        if (cum + exp(lp) > 0.025) break
        cum += exp(lp); k = i + 1
        lp += log(n - i) - log(i + 1)
      }
      if (k < 1) { k = 1; cum = exp(n * log(0.5)) }
      printf "%s %s %s %s %s %s %s %s %.0f\n", m, s / n, v[1], v[n], v[int((n + 3) / 4)], v[n + 1 - int((n + 3) / 4)],
        v[k], v[n + 1 - k], (1 - 2 * cum) * 100 }'
}
read -r a_med a_mean _ <<<"$(per_round A | stats)"
read -r b_med b_mean _ <<<"$(per_round B | stats)"
read -r ac_med _ <<<"$(per_round A_cpu | stats)"
read -r bc_med _ <<<"$(per_round B_cpu | stats)"
read -r q_med q_mean q_min q_max q_q1 q_q3 q_lo q_hi q_cov <<<"$(per_round ratio | stats)"
read -r c_med _ c_min c_max c_q1 c_q3 c_lo c_hi c_cov <<<"$(per_round cpu_ratio | stats)"
read -r e_med _ _ e_max _ <<<"$(per_round else | stats)"
f3() { printf '%.3f' "$1"; }

row median "" "$(printf "%.0f" "$a_med")" "$(printf "%.0f" "$b_med")" "$(f3 "$q_med")" "$(printf "%.1f" "$ac_med")" "$(printf "%.1f" "$bc_med")" "$(f3 "$c_med")" "$(printf '%.2f' "$e_med")"
row mean "" "$(printf '%.0f' "$a_mean")" "$(printf '%.0f' "$b_mean")" "$(f3 "$q_mean")" "" "" "" ""
say "   (B/A: of the same round; median and mean of the columns; us/req: the server's CPU time per request;"
say "   elsewhere: CPUs taken by other processes and by the hypervisor (steal) meanwhile, of $(nproc))"
say ""
say "B/A req/s:            $(f3 "$q_med"), median of the $rounds per-round ratios; the middle half $(f3 "$q_q1")-$(f3 "$q_q3"),"
say "                      all $(f3 "$q_min")-$(f3 "$q_max"); $q_cov % interval of the median $(f3 "$q_lo")-$(f3 "$q_hi")"
say "B/A CPU per request:  $(f3 "$c_med") (above 1: B spends more), middle half $(f3 "$c_q1")-$(f3 "$c_q3"); $c_cov % interval $(f3 "$c_lo")-$(f3 "$c_hi")"
say "load avg at end:      $(cut -d' ' -f1-3 /proc/loadavg); other work took up to $(printf '%.2f' "$e_max") of $(nproc) CPUs in a round"
if awk -v lo="$q_lo" -v hi="$q_hi" 'BEGIN {exit !(lo < 0.95 && hi >= 0.95)}'; then
  say "NOTE: the interval of the median straddles 0.95: the verdict below is not settled;"
  say "      run again with more --rounds, or when the machine is quieter"
fi
say ""
verdict=$(awk -v q="$q_med" 'BEGIN {
  if (q < 0.95) printf "B is %.1f %% slower than A", (1 - q) * 100
  else if (q > 1.05) printf "B is %.1f %% faster than A", (q - 1) * 100
  else printf "B is within 5 %% of A (%+.1f %%)", (q - 1) * 100 }')
say "$verdict"
cp "$REPORT" "$REPORT_FILE"
log "report saved to ${REPORT_FILE#"$ROOT"/}"
