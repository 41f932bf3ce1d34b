#!/usr/bin/env bash
# bench/profile.sh - instructions per request, exactly, under callgrind.
#
#   bench/profile.sh [--requests N] [--bodies LIST] [--policy FILE] [--keep DIR] BIN...
#
# For every gpugate binary BIN and every body (default: the six reviews of
# bench/reviews/), runs `BIN serve --threads 1` under valgrind --tool=callgrind,
# sends 50 requests to warm it up, zeroes the counters, sends N more (default
# 300) one at a time over one keep-alive TLS 1.3 connection, dumps the
# counters and prints the instructions (Ir) per request: everything the
# process executed (libmicrohttpd, GnuTLS, the handler, jansson, malloc),
# not the kernel.
#
# Instruction counts do not move when other work shares the machine, which
# is why proposed changes are compared with this and not with wall time.
# The hardware counters (perf stat -e instructions) are not available in
# this VM; `perf record` (cpu-clock) still works for a time profile.
#
# --keep DIR keeps the callgrind files (DIR/<bin>-<body>.cg.*): read them with
#   callgrind_annotate --inclusive=yes DIR/FILE | head -60
set -euo pipefail

ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
requests=300
bodies="mutate-pod-train-small validate-pod-train-small mutate-job-train-large validate-job-train-large mutate-pod-nginx validate-pod-nginx"
policy="$ROOT/bench/policy-bench.yaml"
keep=""
bins=()
while [ $# -gt 0 ]; do
  case "$1" in
    --requests) requests=${2:?}; shift ;;
    --bodies) bodies=${2:?}; shift ;;
    --policy) policy=${2:?}; shift ;;
    --keep) keep=${2:?}; shift ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "profile.sh: unknown option $1" >&2; exit 2 ;;
    *) bins+=("$1") ;;
  esac
  shift
done
[ ${#bins[@]} -gt 0 ] || bins=("${GPUGATE_BIN:-$ROOT/build/gpugate}")
for t in valgrind callgrind_annotate gcc; do
  command -v "$t" >/dev/null || { echo "profile.sh: missing $t (scripts/deps.sh --bench)" >&2; exit 1; }
done

mkdir -p "$ROOT/build/bench"
LOADGEN="$ROOT/build/bench/loadgen"
gcc -O2 -g -Wall -o "$LOADGEN" "$ROOT/bench/loadgen.c" -lssl -lcrypto -lm
TMP=$(mktemp -d /tmp/gpugate-profile.XXXXXX)
VPID=""
cleanup() {
  [ -n "$VPID" ] && kill "$VPID" 2>/dev/null && wait "$VPID" 2>/dev/null
  rm -rf "$TMP"
}
trap cleanup EXIT
"${bins[0]}" certs --out "$TMP/certs" >/dev/null 2>&1

printf '%-40s %-28s %12s\n' binary body "Ir/request"
for bin in "${bins[@]}"; do
  for body in $bodies; do
    ep=${body%%-*}
    out="$TMP/cg"
    rm -f "$out".* "$TMP/serve.out"
    valgrind --tool=callgrind --callgrind-out-file="$out" \
      "$bin" serve --policy "$policy" --tls-cert "$TMP/certs/tls.crt" --tls-key "$TMP/certs/tls.key" \
      --listen 127.0.0.1:0 --embedded --threads 1 >"$TMP/serve.out" 2>"$TMP/serve.err" &
    VPID=$!
    for _ in $(seq 600); do
      grep -q '^listening on' "$TMP/serve.out" 2>/dev/null && break
      sleep 0.1
    done
    port=$(sed -n 's/^listening on https:\/\/.*:\([0-9]*\)$/\1/p' "$TMP/serve.out")
    [ -n "$port" ] || { cat "$TMP/serve.err" >&2; echo "profile.sh: $bin did not start" >&2; exit 1; }
    url="https://127.0.0.1:$port/$ep"
    "$LOADGEN" --url "$url" --body "$ROOT/bench/reviews/$body.json" --ca "$TMP/certs/ca.crt" --tls13 --count 50 >/dev/null
    callgrind_control -z "$VPID" >/dev/null 2>&1
    "$LOADGEN" --url "$url" --body "$ROOT/bench/reviews/$body.json" --ca "$TMP/certs/ca.crt" --tls13 --count "$requests" >/dev/null
    callgrind_control -d "$VPID" >/dev/null 2>&1
    kill "$VPID"; wait "$VPID" 2>/dev/null || true
    VPID=""
    ir=$(callgrind_annotate "$out.1" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
    printf '%-40s %-28s %12.0f\n' "$(basename "$bin")" "$body" "$(awk -v i="$ir" -v n="$requests" 'BEGIN {print i / n}')"
    if [ -n "$keep" ]; then
      mkdir -p "$keep"
      cp "$out.1" "$keep/$(basename "$bin")-$body.cg.1"
    fi
  done
done
