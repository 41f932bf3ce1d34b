#!/usr/bin/env bash
# Builds every libFuzzer harness tests/fuzz/*_fuzz.c into build/fuzz/ and
# runs each one for SECONDS on a copy of its checked-in corpus.
#
#   tests/fuzz/run.sh [SECONDS] [NAME...]    default 60 s each, all harnesses
#   tests/fuzz/run.sh --smoke [NAME...]      20 s each (what CI runs)
#   tests/fuzz/run.sh --build                build only
#
# NAME is a harness name without _fuzz (review, policy, patch, ...).
# Needs clang with libFuzzer (scripts/deps.sh --fuzz).  Exits non-zero when
# a harness finds a crash, a leak, a timeout or an out-of-memory, and prints
# the reproducer's path: build/fuzz/NAME_fuzz PATH replays it.
#
# The library objects (every folder of the Makefile but cli/main.c) are built once
# with -fsanitize=fuzzer-no-link,address,undefined into an archive, so each
# harness links only what it uses.  New inputs the fuzzer finds stay in
# build/fuzz/work/NAME/corpus; the checked-in corpus is never written.
set -euo pipefail
cd "$(dirname "$0")/../.."

seconds=60
build_only=0
names=()
case "${1:-}" in
  --smoke) seconds=20; shift ;;
  --build) build_only=1; shift ;;
  ''|-*) ;;
  *[!0-9]*) ;;
  *) seconds=$1; shift ;;
esac
for arg in "$@"; do
  case "$arg" in
    -*) echo "run.sh: unknown option '$arg'" >&2; exit 2 ;;
    *) names+=("$arg") ;;
  esac
done

CC=${FUZZ_CC:-clang}
OUT=build/fuzz
PKGS="libcyaml yaml-0.1 jansson libmicrohttpd gnutls libcurl openssl"

command -v "$CC" >/dev/null || {
  echo "run.sh: $CC not found; run scripts/deps.sh --fuzz (or make fuzz)" >&2
  exit 1
}
pkg_cflags=$(pkg-config --cflags $PKGS)
pkg_libs="$(pkg-config --libs $PKGS) -lpthread"

CFLAGS_COMMON="-std=c11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer -I. $pkg_cflags"
SAN="address,undefined"

# ---- build -----------------------------------------------------------------

mkdir -p "$OUT/obj"
srcs=()
# The library folders of the Makefile (CORE_DIRS, SHELL_DIRS).
LIB_DIRS=$(make -s --no-print-directory print-dirs)
for d in $LIB_DIRS; do
  for f in "$d"/*.c; do
    [ "$f" = cli/main.c ] || srcs+=("$f")
  done
done

# An object is rebuilt when it is missing or older than its source, any
# header of the tree, or this script.
newest_header=$(for d in $LIB_DIRS; do ls "$d"/*.h; done | xargs ls -t -- "$0" | head -1)
stale=()
for f in "${srcs[@]}"; do
  o="$OUT/obj/${f%.c}.o"
  if [ ! -e "$o" ] || [ "$f" -nt "$o" ] || [ "$newest_header" -nt "$o" ]; then
    stale+=("$f")
  fi
done
if [ ${#stale[@]} -gt 0 ]; then
  echo "run.sh: compiling ${#stale[@]} sources with $CC -fsanitize=fuzzer-no-link,$SAN"
  export CC OUT CFLAGS_COMMON SAN
  printf '%s\n' "${stale[@]}" | xargs -P "$(nproc)" -I{} sh -c '
    f={}; o="$OUT/obj/${f%.c}.o"; mkdir -p "$(dirname "$o")"
    $CC $CFLAGS_COMMON -fsanitize=fuzzer-no-link,$SAN \
        -fno-sanitize-recover=all -c "$f" -o "$o" || exit 255'
  rm -f "$OUT/libgpugate-fuzz.a"
fi
lib="$OUT/libgpugate-fuzz.a"
if [ ! -e "$lib" ]; then
  objs=()
  for f in "${srcs[@]}"; do objs+=("$OUT/obj/${f%.c}.o"); done
  ar rcs "$lib" "${objs[@]}"
fi

harnesses=()
if [ ${#names[@]} -eq 0 ]; then
  for d in tests/fuzz/*_fuzz.c; do
    n=${d##*/}; harnesses+=("${n%_fuzz.c}")
  done
else
  for n in "${names[@]}"; do
    [ -e "tests/fuzz/${n}_fuzz.c" ] || { echo "run.sh: no tests/fuzz/${n}_fuzz.c" >&2; exit 2; }
    harnesses+=("$n")
  done
fi

for n in "${harnesses[@]}"; do
  src="tests/fuzz/${n}_fuzz.c" bin="$OUT/${n}_fuzz"
  if [ ! -e "$bin" ] || [ "$src" -nt "$bin" ] || [ "$lib" -nt "$bin" ]; then
    echo "run.sh: linking $bin"
    $CC $CFLAGS_COMMON -fsanitize=fuzzer,$SAN -fno-sanitize-recover=all \
        "$src" "$lib" $pkg_libs -o "$bin"
  fi
done
[ $build_only -eq 1 ] && exit 0

# ---- run -------------------------------------------------------------------

# Longest input per harness: AdmissionReviews and policies are small
# documents; 64 KiB leaves room for the fuzzer to grow them.
max_len() {
  case "$1" in
    patch) echo 16384 ;;
    *) echo 65536 ;;
  esac
}

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

failed=()
printf '\nrun.sh: %s s per harness: %s\n' "$seconds" "${harnesses[*]}"
for n in "${harnesses[@]}"; do
  bin="$OUT/${n}_fuzz" work="$OUT/work/$n"
  rm -rf "$work"
  mkdir -p "$work/corpus" "$work/artifacts"
  # Reproducers of known bugs (crash-*) are replayed on their own, so that
  # one that still fails is named and the rest of the corpus still fuzzes.
  known=()
  for f in tests/fuzz/corpus/"$n"/*; do
    [ -f "$f" ] || continue
    case "${f##*/}" in
      crash-*) known+=("$f") ;;
      *) cp "$f" "$work/corpus/" ;;
    esac
  done
  if [ ${#known[@]} -gt 0 ]; then
    for f in "${known[@]}"; do
      mkdir -p "$work/tmp"
      if ! TMPDIR=$PWD/$work/tmp "$bin" -runs=1 "$f" </dev/null >"$work/replay.log" 2>&1; then
        printf '  %-10s FAIL  known reproducer still fails: %s %s\n' "$n" "$bin" "$f"
        grep -E 'ERROR: |runtime error:|invariant violated|^reply: ' "$work/replay.log" | head -3 | sed 's/^/    /'
        failed+=("$n")
      fi
    done
  fi
  dict=()
  [ -e "tests/fuzz/$n.dict" ] && dict=("-dict=tests/fuzz/$n.dict")
  log="$work/fuzz.log"
  rc=0
  mkdir -p "$work/tmp"
  TMPDIR=$PWD/$work/tmp "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -max_len="$(max_len "$n")" -print_final_stats=1 \
      -artifact_prefix="$work/artifacts/" "${dict[@]}" \
      "$work/corpus" </dev/null >"$log" 2>&1 || rc=$?
  stats=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  if [ $rc -eq 0 ]; then
    printf '  %-10s fuzz ok: %s runs in %s s; %s\n' "$n" "${execs:-?}" "$seconds" "$stats"
  else
    printf '  %-10s FAIL  fuzzing (exit %s), log %s\n' "$n" "$rc" "$log"
    grep -E 'ERROR: |runtime error:|SUMMARY:|deadly signal|invariant violated|^reply: ' "$log" | head -20 | sed 's/^/    /'
    for a in "$work"/artifacts/*; do
      [ -e "$a" ] && printf '    reproduce: %s %s\n' "$bin" "$a"
    done
    failed+=("$n")
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "run.sh: findings in: $(printf '%s\n' "${failed[@]}" | sort -u | tr '\n' ' ')" >&2
  exit 1
fi
echo "run.sh: no findings"
