#!/usr/bin/env bash
# Installs the Debian packages gpugate needs to build and test, and nothing
# when they are all present already (then it takes a few milliseconds).
#
#   scripts/deps.sh            build + test packages
#   scripts/deps.sh --bench    also the benchmark tools (nginx, wrk)
#   scripts/deps.sh --fuzz     also clang with libFuzzer
#   scripts/deps.sh --image    also mmdebstrap and skopeo (make image,
#                              make image-check)
#
# Not installed here: Go, which `make e2e` and `make demo` need the first time
# to build the control plane (tests/e2e/build-tools.sh, Go >= the go
# directive of tests/e2e/tools/*/go.mod). Debian 12's golang-go is far older;
# get it from https://go.dev/dl/. Both make targets say so when it is missing.
set -euo pipefail

pkgs=(
  gcc make pkg-config
  libcyaml-dev libyaml-dev        # policy file
  libjansson-dev                  # JSON
  libmicrohttpd-dev libgnutls28-dev   # HTTPS server
  libssl-dev openssl              # certificates
  libcurl4-openssl-dev            # Kubernetes API client
  libcriterion-dev                # unit tests
  curl python3 python3-pytest     # integration tests
  python3-yaml                    # e2e: tests/e2e/fleet.py reads a policy
  prometheus                      # e2e: test_observability.py runs the
                                  # chart's dashboard queries and alerts
)
for arg in "$@"; do
  case "$arg" in
    --bench) pkgs+=(nginx-light wrk valgrind) ;;
    --fuzz) pkgs+=(clang libclang-rt-14-dev) ;;
    --format) pkgs+=(clang-format) ;;
    --image) pkgs+=(mmdebstrap skopeo binutils) ;;
    *) echo "deps.sh: unknown option '$arg'" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${pkgs[@]}"; do
  # dpkg-query prints "install ok installed" only for a fully installed package.
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [ "$status" = "install ok installed" ] || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

# python3-pytest is only a fallback: a pytest already on PATH is as good.
if [ ${#missing[@]} -eq 1 ] && [ "${missing[0]}" = python3-pytest ] &&
   python3 -c 'import pytest' 2>/dev/null; then
  exit 0
fi

echo "deps.sh: installing ${missing[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || {
    echo "deps.sh: missing packages ${missing[*]}; run as root or install sudo" >&2
    exit 1
  }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
# Refresh the package lists only when an install fails on stale ones.
if ! $sudo apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null; then
  $sudo apt-get update -qq
  $sudo apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null
fi
