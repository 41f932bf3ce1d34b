#!/usr/bin/env bash
# build-tools.sh - build (once) the Kubernetes control-plane binaries, etcd
# and KWOK used by gpugate's end-to-end tests, helm for its chart, and the
# CRDs of cert-manager and of prometheus-operator's ServiceMonitor, from the
# pinned wrapper modules in
# tests/e2e/tools/{k8s,etcd,kwok,helm,cert-manager,prometheus-operator},
# using nothing but the Go module proxy.
#
# Output layout (one cache directory, one sub-directory per pinned version):
#   ${GPUGATE_TOOLS_DIR:-$HOME/.cache/gpugate/tools}/
#       k8s-<version>/{kube-apiserver,kube-controller-manager,kube-scheduler,kubectl,.stamp}
#       etcd-<version>/{etcd,.stamp}
#       kwok-<version>/{kwok,.stamp}
#       helm-<version>/{helm,.stamp}
#       cert-manager-<version>/{*.yaml,.stamp}   (deploy/crds of the module)
#       prometheus-operator-<version>/{monitoring.coreos.com_servicemonitors.yaml,.stamp}
#
# A directory only appears once its build fully succeeded (built in a temp dir,
# then renamed), and it is reused as long as its .stamp matches the current
# go.mod/go.sum/build flags. So a second run is a no-op that takes a few ms.
#
# Usage: build-tools.sh [--force] [-q|--quiet] [--check]
#   --force   rebuild even if the stamps match
#   --quiet   no progress messages (errors are still printed)
#   --check   build nothing: exit 0 if the tools are up to date or could be
#             built (go is there and new enough), else 1 with the reason;
#             `make e2e` and `make demo` run this first
#
# stdout: exactly six shell assignments, so callers can do
#   eval "$(tests/e2e/build-tools.sh)"
#     KUBE_BIN_DIR=/path/to/k8s-<version>
#     ETCD_BIN_DIR=/path/to/etcd-<version>
#     KWOK_BIN_DIR=/path/to/kwok-<version>
#     HELM_BIN_DIR=/path/to/helm-<version>
#     CERT_MANAGER_CRDS_DIR=/path/to/cert-manager-<version>
#     PROMETHEUS_CRDS_DIR=/path/to/prometheus-operator-<version>
# Everything else (progress, timings) goes to stderr.
#
# Environment:
#   GPUGATE_TOOLS_DIR    cache root (default $HOME/.cache/gpugate/tools)
#   GPUGATE_BUILD_JOBS   go build -p value (default 2)
#   GO                   go binary to use (default: go from PATH)
#   GOMODCACHE/GOCACHE/GOPROXY/GOTOOLCHAIN are honoured as usual.

set -euo pipefail

script_dir=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
k8s_mod_dir=$script_dir/tools/k8s
etcd_mod_dir=$script_dir/tools/etcd
kwok_mod_dir=$script_dir/tools/kwok
helm_mod_dir=$script_dir/tools/helm
cm_mod_dir=$script_dir/tools/cert-manager
po_mod_dir=$script_dir/tools/prometheus-operator

tools_dir=${GPUGATE_TOOLS_DIR:-${HOME:?HOME is not set}/.cache/gpugate/tools}
jobs=${GPUGATE_BUILD_JOBS:-2}
go_bin=${GO:-go}

force=0
quiet=0
check=0
for arg in "$@"; do
    case $arg in
        --force) force=1 ;;
        -q | --quiet) quiet=1 ;;
        --check) check=1 ;;
        -h | --help)
            sed -n '2,/^$/{s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
            exit 0
            ;;
        *)
            echo "build-tools.sh: unknown argument: $arg" >&2
            exit 2
            ;;
    esac
done

log() {
    if [[ $quiet -eq 0 ]]; then
        printf 'build-tools: %s\n' "$*" >&2
    fi
}

die() {
    printf 'build-tools: ERROR: %s\n' "$*" >&2
    exit 1
}

# Seconds (with milliseconds) since the epoch, from bash itself: no forks.
now() { printf '%s' "${EPOCHREALTIME}"; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1fs", b - a }'; }

# Version of a required module, read straight from a go.mod (no go command,
# so the no-op path stays fast). Handles both one-line and block requires.
mod_version() {
    local gomod=$1 module=$2 version
    version=$(awk -v m="$module" '
        $1 == "require" && $2 == m { print $3; exit }
        $1 == m && $2 ~ /^v/      { print $2; exit }' "$gomod")
    [[ -n $version ]] || die "cannot find $module in $gomod"
    printf '%s' "$version"
}

k8s_version=$(mod_version "$k8s_mod_dir/go.mod" k8s.io/kubernetes)
etcd_version=$(mod_version "$etcd_mod_dir/go.mod" go.etcd.io/etcd/server/v3)
kwok_version=$(mod_version "$kwok_mod_dir/go.mod" sigs.k8s.io/kwok)
helm_version=$(mod_version "$helm_mod_dir/go.mod" helm.sh/helm/v3)
cm_version=$(mod_version "$cm_mod_dir/go.mod" github.com/cert-manager/cert-manager)
po_version=$(mod_version "$po_mod_dir/go.mod" github.com/prometheus-operator/prometheus-operator)

# Sanity check: every staging replace must point at v0.<minor>.<patch> of the
# same release, otherwise we would silently build a mixed control plane.
staging_version=v0.${k8s_version#v1.}
awk -v want="$staging_version" '
    $2 == "=>" && $1 ~ /^k8s\.io\// && $4 != want { bad = 1; print "  " $0 > "/dev/stderr" }
    END { exit bad }' "$k8s_mod_dir/go.mod" ||
    die "replace lines in $k8s_mod_dir/go.mod do not all use $staging_version"

k8s_out=$tools_dir/k8s-$k8s_version
etcd_out=$tools_dir/etcd-$etcd_version
kwok_out=$tools_dir/kwok-$kwok_version
helm_out=$tools_dir/helm-$helm_version
cm_out=$tools_dir/cert-manager-$cm_version
po_out=$tools_dir/prometheus-operator-$po_version

# Version string embedded the same way Kubernetes' own build does
# (hack/lib/version.sh), so `kubectl version` and /version look normal.
k8s_minor=${k8s_version#v1.}
k8s_minor=${k8s_minor%%.*}
k8s_ldflags="-s -w"
for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    k8s_ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1"
    k8s_ldflags+=" -X $pkg.gitMinor=$k8s_minor -X $pkg.gitTreeState=clean"
done
etcd_ldflags="-s -w"
kwok_ldflags="-s -w" # its version is a constant in the module (pkg/consts)
# helm reports its version from internal/version, as its own Makefile sets it.
helm_ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$helm_version"
helm_ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"

# Common go build flags. -mod=readonly: go.sum in the repo is complete, so a
# fresh machine needs only the module proxy and nothing rewrites go.mod.
# -buildvcs=false: the wrapper modules live inside the gpugate git checkout,
# whose VCS state is irrelevant (and may not even have a commit yet).
build_flags=(-mod=readonly -trimpath -buildvcs=false -p "$jobs")

# Stamp = everything that determines the output (not -p, which does not).
stamp_for() {
    local mod_dir=$1 version=$2 ldflags=$3 f
    local -a inputs=()
    for f in "$mod_dir"/go.mod "$mod_dir"/go.sum "$mod_dir"/*.go; do
        [[ -f $f ]] && inputs+=("$f")
    done
    {
        printf 'version=%s\n' "$version"
        printf 'flags=-mod=readonly -trimpath -buildvcs=false CGO_ENABLED=0 GOWORK=off\n'
        printf 'ldflags=%s\n' "$ldflags"
        # Hash the inputs of the wrapper module by content, not by path.
        cat -- "${inputs[@]}" | sha256sum
    } | sha256sum | cut -d' ' -f1
}

k8s_stamp=$(stamp_for "$k8s_mod_dir" "$k8s_version" "$k8s_ldflags")
etcd_stamp=$(stamp_for "$etcd_mod_dir" "$etcd_version" "$etcd_ldflags")
kwok_stamp=$(stamp_for "$kwok_mod_dir" "$kwok_version" "$kwok_ldflags")
helm_stamp=$(stamp_for "$helm_mod_dir" "$helm_version" "$helm_ldflags")
cm_stamp=$(stamp_for "$cm_mod_dir" "$cm_version" "crds")
po_stamp=$(stamp_for "$po_mod_dir" "$po_version" "crds")

# up_to_date DIR STAMP BIN... : true if DIR has every BIN and a matching stamp.
up_to_date() {
    local dir=$1 stamp=$2 bin
    shift 2
    [[ -f $dir/.stamp && $(<"$dir/.stamp") == "$stamp" ]] || return 1
    for bin in "$@"; do
        [[ -x $dir/$bin ]] || return 1
    done
}

k8s_bins=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
etcd_bins=(etcd)
kwok_bins=(kwok)
helm_bins=(helm)
cm_bins=() # no binaries: the stamp says the CRDs were copied
po_bins=()

print_result() {
    printf 'KUBE_BIN_DIR=%q\n' "$k8s_out"
    printf 'ETCD_BIN_DIR=%q\n' "$etcd_out"
    printf 'KWOK_BIN_DIR=%q\n' "$kwok_out"
    printf 'HELM_BIN_DIR=%q\n' "$helm_out"
    printf 'CERT_MANAGER_CRDS_DIR=%q\n' "$cm_out"
    printf 'PROMETHEUS_CRDS_DIR=%q\n' "$po_out"
}

# needs_build DIR STAMP BIN... : like ! up_to_date, but --force always builds.
needs_build() {
    [[ $force -eq 1 ]] || ! up_to_date "$@"
}

# The Go release both wrapper modules need: the highest of their `go`
# directives (the directives of k8s.io/kubernetes and etcd, copied by go mod
# tidy), so that it follows a version bump by itself.
go_needed=$(awk '$1 == "go" && NF == 2 { print $2 }' "$k8s_mod_dir/go.mod" "$etcd_mod_dir/go.mod" \
    "$kwok_mod_dir/go.mod" "$helm_mod_dir/go.mod" |
    sort -V | tail -n 1)
[[ -n $go_needed ]] || die "no go directive in $k8s_mod_dir/go.mod or $etcd_mod_dir/go.mod"

# go_older HAVE NEED: true if Go release HAVE (1.26.8, 1.27rc1) comes before
# NEED (1.26.0). A pre-release comes before its .0 release.
go_older() {
    awk -v have="$1" -v need="$2" '
        function fields(v, f) { sub(/(rc|beta)[0-9]*$/, ".-1", v); return split(v, f, ".") }
        BEGIN {
            n = fields(have, h); m = fields(need, w)
            for (i = 1; i <= (n > m ? n : m); i++)
                if (h[i] + 0 != w[i] + 0) exit !(h[i] + 0 < w[i] + 0)
            exit 1
        }'
}

# require_go: dies, naming the Go version needed, unless $go_bin runs and is
# at least $go_needed. `go version` runs in the k8s module first, so that it
# reports the toolchain the build would really use (with GOTOOLCHAIN=auto, a
# go >= 1.21 switches to a newer one by itself); where that fails (an old go
# with GOTOOLCHAIN=local refuses the module), the installed go's own version.
require_go() {
    local why="make e2e and make demo need Go >= $go_needed to build the control plane"
    why+=" the first time (then it is cached in $tools_dir)"
    local fix="install Go >= $go_needed (https://go.dev/dl/) or set GO=/path/to/go"
    local path version
    path=$(command -v "$go_bin") || die "$why: there is no '$go_bin' on PATH; $fix"
    version=$(cd "$k8s_mod_dir" && GOWORK=off "$go_bin" version 2>/dev/null) ||
        version=$(cd / && GOTOOLCHAIN=local "$go_bin" version 2>/dev/null) || version=
    version=$(awk '{ print $3 }' <<<"$version")
    version=${version#go}
    [[ $version =~ ^[0-9]+(\.[0-9]+)*((rc|beta)[0-9]+)?$ ]] ||
        die "$why: '$path version' did not say which Go it is; $fix"
    ! go_older "$version" "$go_needed" || die "$why: $path is go$version; $fix"
}

# Fast path: nothing to do, do not even start the go command.
if [[ $force -eq 0 ]] && up_to_date "$k8s_out" "$k8s_stamp" "${k8s_bins[@]}" &&
    up_to_date "$etcd_out" "$etcd_stamp" "${etcd_bins[@]}" &&
    up_to_date "$kwok_out" "$kwok_stamp" "${kwok_bins[@]}" &&
    up_to_date "$helm_out" "$helm_stamp" "${helm_bins[@]}" &&
    up_to_date "$cm_out" "$cm_stamp" "${cm_bins[@]}" &&
    up_to_date "$po_out" "$po_stamp" "${po_bins[@]}"; then
    log "up to date: kubernetes $k8s_version, etcd $etcd_version, kwok $kwok_version, helm $helm_version, cert-manager CRDs $cm_version, prometheus-operator CRDs $po_version"
    [[ $check -eq 1 ]] || print_result
    exit 0
fi

require_go
if [[ $check -eq 1 ]]; then
    log "not built yet; $go_bin is new enough (>= $go_needed): the first run builds them (several minutes)"
    exit 0
fi
mkdir -p "$tools_dir"

# Serialise concurrent builds (e.g. several test jobs starting at once).
exec {lock_fd}>"$tools_dir/.lock"
if ! flock -n "$lock_fd"; then
    log "another build is running, waiting for $tools_dir/.lock"
    flock "$lock_fd"
fi

tmp_dirs=()
cleanup() {
    local d
    for d in "${tmp_dirs[@]}"; do
        rm -rf -- "$d"
    done
}
trap cleanup EXIT

# build_one NAME MOD_DIR OUT_DIR STAMP LDFLAGS OUTPUT PKG...
# Builds PKG... in MOD_DIR into a temp dir, then renames it to OUT_DIR.
# OUTPUT is the binary name for a single package, or "" to let go name the
# binaries after their package directories (multiple packages).
build_one() {
    local name=$1 mod_dir=$2 out=$3 stamp=$4 ldflags=$5 output=$6
    shift 6
    local t0 tmp
    t0=$(now)
    tmp=$(mktemp -d "$tools_dir/.build-$name.XXXXXX")
    tmp_dirs+=("$tmp")
    log "building $name into $out"
    (
        cd "$mod_dir"
        # GOWORK=off: a go.work further up must not pull these modules in.
        CGO_ENABLED=0 GOWORK=off "$go_bin" build "${build_flags[@]}" \
            -ldflags="$ldflags" -o "$tmp/$output" "$@"
    ) || die "go build of $name failed"
    printf '%s\n' "$stamp" >"$tmp/.stamp"
    chmod 755 "$tmp"
    # Replace the old directory (if any) with the complete new one.
    rm -rf -- "$out"
    mv -- "$tmp" "$out"
    log "built $name in $(elapsed "$t0")"
}

t_start=$(now)
log "$("$go_bin" version), GOMODCACHE=$("$go_bin" env GOMODCACHE), GOCACHE=$("$go_bin" env GOCACHE)"

# needs_build is re-evaluated under the lock: a concurrent run may have just
# finished the job, in which case there is nothing left to do.
if needs_build "$etcd_out" "$etcd_stamp" "${etcd_bins[@]}"; then
    build_one "etcd-$etcd_version" "$etcd_mod_dir" "$etcd_out" "$etcd_stamp" \
        "$etcd_ldflags" etcd .
fi

if needs_build "$k8s_out" "$k8s_stamp" "${k8s_bins[@]}"; then
    build_one "k8s-$k8s_version" "$k8s_mod_dir" "$k8s_out" "$k8s_stamp" \
        "$k8s_ldflags" "" \
        k8s.io/kubernetes/cmd/kube-apiserver \
        k8s.io/kubernetes/cmd/kube-controller-manager \
        k8s.io/kubernetes/cmd/kube-scheduler \
        k8s.io/kubernetes/cmd/kubectl
fi

# KWOK: a `tool` of its wrapper module (go.mod), so go.sum pins all of it.
if needs_build "$kwok_out" "$kwok_stamp" "${kwok_bins[@]}"; then
    build_one "kwok-$kwok_version" "$kwok_mod_dir" "$kwok_out" "$kwok_stamp" \
        "$kwok_ldflags" kwok sigs.k8s.io/kwok/cmd/kwok
fi

# helm: a `tool` of its wrapper module, like KWOK.
if needs_build "$helm_out" "$helm_stamp" "${helm_bins[@]}"; then
    build_one "helm-$helm_version" "$helm_mod_dir" "$helm_out" "$helm_stamp" \
        "$helm_ldflags" helm helm.sh/helm/v3/cmd/helm
fi

# copy_crds NAME MOD_DIR MODULE OUT_DIR STAMP FILE...: nothing to build; the
# FILEs (globs relative to the module) copied out of MODULE as MOD_DIR's
# go.mod pins it (go mod download checks the zip against go.sum).
copy_crds() {
    local name=$1 mod_dir=$2 module=$3 out=$4 stamp=$5 t0 tmp dir f
    shift 5
    t0=$(now)
    tmp=$(mktemp -d "$tools_dir/.build-$name.XXXXXX")
    tmp_dirs+=("$tmp")
    dir=$(cd "$mod_dir" && GOWORK=off GOFLAGS=-mod=readonly "$go_bin" mod download \
        -json "$module" | awk -F'"' '$2 == "Dir" { print $4 }')
    [[ -n $dir ]] || die "go mod download of $module failed"
    for f in "$@"; do
        # shellcheck disable=SC2086  # f is a glob
        cp -- "$dir"/$f "$tmp"/ || die "no $f in $dir"
    done
    chmod 644 "$tmp"/*.yaml
    printf '%s\n' "$stamp" >"$tmp/.stamp"
    chmod 755 "$tmp"
    rm -rf -- "$out"
    mv -- "$tmp" "$out"
    log "copied $name CRDs in $(elapsed "$t0")"
}

if needs_build "$cm_out" "$cm_stamp" "${cm_bins[@]}"; then
    copy_crds "cert-manager-$cm_version" "$cm_mod_dir" github.com/cert-manager/cert-manager \
        "$cm_out" "$cm_stamp" 'deploy/crds/*.yaml'
fi
if needs_build "$po_out" "$po_stamp" "${po_bins[@]}"; then
    copy_crds "prometheus-operator-$po_version" "$po_mod_dir" \
        github.com/prometheus-operator/prometheus-operator "$po_out" "$po_stamp" \
        example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml
fi

up_to_date "$k8s_out" "$k8s_stamp" "${k8s_bins[@]}" || die "missing binaries in $k8s_out"
up_to_date "$etcd_out" "$etcd_stamp" "${etcd_bins[@]}" || die "missing binaries in $etcd_out"
up_to_date "$kwok_out" "$kwok_stamp" "${kwok_bins[@]}" || die "missing binaries in $kwok_out"
up_to_date "$helm_out" "$helm_stamp" "${helm_bins[@]}" || die "missing binaries in $helm_out"
up_to_date "$cm_out" "$cm_stamp" "${cm_bins[@]}" || die "missing CRDs in $cm_out"
up_to_date "$po_out" "$po_stamp" "${po_bins[@]}" || die "missing CRDs in $po_out"

log "done in $(elapsed "$t_start"): kubernetes $k8s_version, etcd $etcd_version, kwok $kwok_version, helm $helm_version, cert-manager CRDs $cm_version, prometheus-operator CRDs $po_version"
print_result
