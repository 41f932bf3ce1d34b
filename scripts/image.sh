#!/usr/bin/env bash
# image.sh - build gpugate's OCI image archive without a container engine:
# the runtime libraries from Debian packages (mmdebstrap, extract variant:
# the packages and their dependencies unpacked, no maintainer scripts, no
# shell, no dpkg or apt), the gpugate binary, a non-root user, written as an
# OCI layout in a tar by scripts/oci-image.py. `make image` runs it.
#
# Usage: scripts/image.sh [--binary BIN] [--out FILE]
#   --binary BIN   the gpugate to ship (default build/gpugate); it must be
#                  built on Debian 12 (bookworm), against the same libraries
#   --out FILE     default build/gpugate-image.oci.tar
#
# Reproducible: the same binary, the same apt mirror contents and the same
# SOURCE_DATE_EPOCH (default: the commit time of HEAD) give the same bytes;
# `make image-check` builds it twice and compares.
#
# The apt sources are this machine's own (/etc/apt/sources.list and
# /etc/apt/sources.list.d/*), so the libraries in the image are the ones
# the binary was built and tested against; MIRROR=FILE|URL overrides them.
# Needs mmdebstrap (scripts/deps.sh --image) and python3; as root it uses
# mmdebstrap's root mode, otherwise its unshare mode (user namespaces).
set -euo pipefail

root=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
binary=$root/build/gpugate
out=$root/build/gpugate-image.oci.tar
while (($#)); do
    case $1 in
        --binary) binary=${2:?--binary needs a file}; shift 2 ;;
        --out) out=${2:?--out needs a file}; shift 2 ;;
        -h | --help) sed -n '2,/^$/{s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) echo "image.sh: unknown option '$1'" >&2; exit 2 ;;
    esac
done

die() { echo "image.sh: $*" >&2; exit 1; }
[[ -x $binary ]] || die "$binary is not built: run make"
command -v mmdebstrap >/dev/null || die "mmdebstrap is missing: run scripts/deps.sh --image"

# What build/gpugate links against (ldd, on Debian 12), by package; apt
# adds their dependencies (libc6, libgcc-s1, zlib1g, ...).
pkgs=libcyaml1,libyaml-0-2,libjansson4,libmicrohttpd12,libgnutls30,libssl3,libcurl4

mirrors=()
if [[ -n ${MIRROR:-} ]]; then
    mirrors=("$MIRROR")
else
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
        /etc/apt/sources.list.d/*.sources; do
        [[ -f $f ]] && grep -q '^[^#]' "$f" && mirrors+=("$f")
    done
fi
((${#mirrors[@]})) || die "no apt sources found; set MIRROR"

if [[ -z ${SOURCE_DATE_EPOCH:-} ]]; then
    SOURCE_DATE_EPOCH=$(git -C "$root" log -1 --format=%ct 2>/dev/null) || SOURCE_DATE_EPOCH=0
fi
export SOURCE_DATE_EPOCH
version=$(<"$root/VERSION")
revision=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || true)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpugate-image.XXXXXX")
trap 'rm -rf -- "$tmp"' EXIT
mode=root
[[ $(id -u) -eq 0 ]] || mode=unshare
mmdebstrap --quiet --mode="$mode" --variant=extract --include="$pkgs" \
    bookworm "$tmp/rootfs.tar" "${mirrors[@]}"
# Stripped: debug information names this checkout's path; the image does
# not need it (build/gpugate keeps it, for gdb).
strip --strip-debug -o "$tmp/gpugate" "$binary"
mkdir -p "$(dirname -- "$out")"
digest=$(python3 "$root/scripts/oci-image.py" --rootfs "$tmp/rootfs.tar" \
    --binary "$tmp/gpugate" --version "$version" --revision "$revision" \
    --epoch "$SOURCE_DATE_EPOCH" --out "$out")
echo "image.sh: $out: gpugate $version, manifest $digest, $(du -h -- "$out" | cut -f1)" >&2
