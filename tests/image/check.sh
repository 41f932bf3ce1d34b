#!/usr/bin/env bash
# check.sh - check gpugate's OCI image archive (make image-check).
#
# Usage: tests/image/check.sh [IMAGE.oci.tar]   (default build/gpugate-image.oci.tar)
#
# 1. skopeo reads it as an OCI archive and copies it (which verifies every
#    blob against its digest); the config says user 65532:65532 and the
#    gpugate entrypoint.
# 2. The layer, unpacked, holds gpugate and no shell.
# 3. From that root filesystem, mounted read-only with /dev and /proc as a
#    container runtime provides them and the policy and certificate at
#    /etc/gpugate (the chart's volume), nothing writable, as uid 65532:
#    `gpugate version` prints what build/gpugate prints; `gpugate check`
#    accepts the example policy and refuses a broken one; `gpugate serve
#    --embedded` answers /healthz and /readyz over HTTPS (GnuTLS,
#    libmicrohttpd) and stops on SIGTERM; with a tmpfs on /tmp, `gpugate
#    certs` writes a CA and a certificate there (OpenSSL). So the runtime
#    libraries in the image are complete.
# 4. A second build (scripts/image.sh) gives the same bytes.
#
# Needs root (mount namespace, chroot), skopeo and mmdebstrap
# (scripts/deps.sh --image), curl.
set -euo pipefail

root=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd)
image=${1:-$root/build/gpugate-image.oci.tar}
binary=$root/build/gpugate
t0=$EPOCHREALTIME

fail() { echo "image check: FAIL: $*" >&2; exit 1; }
ok() { echo "image check: ok: $*"; }

[[ $(id -u) -eq 0 ]] || fail "needs root (a mount namespace and chroot)"
[[ -f $image ]] || fail "$image does not exist: run make image"
for tool in skopeo unshare chroot curl; do
    command -v "$tool" >/dev/null || fail "$tool is missing (scripts/deps.sh --image)"
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpugate-image-check.XXXXXX")
serve_pid=
cleanup() {
    [[ -n $serve_pid ]] && kill "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null
    rm -rf -- "$tmp"
}
trap cleanup EXIT

# 1. The archive as an OCI image.
config=$(skopeo inspect --config "oci-archive:$image")
python3 - "$config" <<'EOF' || fail "image config"
import json, sys
c = json.loads(sys.argv[1])
cfg = c["config"]
assert (c["os"], c["architecture"]) == ("linux", "amd64"), c
assert cfg["User"] == "65532:65532", cfg
assert cfg["Entrypoint"] == ["/usr/local/bin/gpugate"], cfg
assert len(c["rootfs"]["diff_ids"]) == 1, c["rootfs"]
EOF
ok "skopeo reads the archive; user 65532:65532, entrypoint /usr/local/bin/gpugate"
skopeo copy --quiet "oci-archive:$image" "dir:$tmp/copy" || fail "skopeo copy"
layer=$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print(m["layers"][0]["digest"].split(":")[1])' \
    "$tmp/copy/manifest.json")
ok "skopeo copied it (blob digests verified)"

# 2. The root filesystem.
rootfs=$tmp/rootfs
mkdir "$rootfs"
tar -xzf "$tmp/copy/$layer" -C "$rootfs" --numeric-owner --same-owner --same-permissions
[[ -x $rootfs/usr/local/bin/gpugate ]] || fail "no /usr/local/bin/gpugate in the layer"
for sh in bin/sh bin/bash usr/bin/sh usr/bin/bash; do
    [[ ! -e $rootfs/$sh && ! -L $rootfs/$sh ]] || fail "/$sh is in the image"
done
grep -qx 'nonroot:x:65532:65532:nonroot:/home/nonroot:/usr/sbin/nologin' "$rootfs/etc/passwd" ||
    fail "no nonroot user 65532 in /etc/passwd"
[[ $(stat -c %a "$rootfs/tmp") == 1777 ]] || fail "/tmp is not 1777"
ok "layer unpacked: /usr/local/bin/gpugate, user nonroot (65532), no shell ($(du -sh "$rootfs" | cut -f1))"

# 3. gpugate from the image. The mount points a runtime would create.
mkdir "$rootfs/etc/gpugate" "$rootfs/proc"
conf=$tmp/conf
mkdir -p "$conf/tls"
cp "$root/policy/examples/gpu-cluster.yaml" "$conf/policy.yaml"
printf 'flavors: [oops\n' >"$conf/broken.yaml"
"$binary" certs --out "$tmp/pki" --ip 127.0.0.1 >/dev/null 2>&1
cp "$tmp/pki/tls.crt" "$tmp/pki/tls.key" "$conf/tls/"
chmod -R a+rX "$conf"
chmod 0644 "$conf/tls/tls.key"

# "${in_image[@]}" CMD...: run CMD in the image's root filesystem as
# 65532:65532, as the chart's and the manifests' Deployment runs it: the
# root a read-only bind mount (readOnlyRootFilesystem), nothing writable
# anywhere, /etc/gpugate the configuration, read-only. "${in_image_tmp[@]}"
# adds a tmpfs on /tmp (an emptyDir), for gpugate certs' output. unshare
# and sh exec, so that "${in_image[@]}" CMD & gives CMD's own pid.
# shellcheck disable=SC2016  # expanded by the inner sh
mounts='
    r=$1; c=$2; tmpfs=$3; shift 3
    mount --bind "$r" "$r"
    mount --bind "$c" "$r/etc/gpugate"
    mount -o remount,bind,ro "$r/etc/gpugate"
    mount --rbind /dev "$r/dev"
    mount -t proc proc "$r/proc"
    [ "$tmpfs" = no ] || mount -t tmpfs -o mode=1777 tmpfs "$r/tmp"
    mount -o remount,bind,ro "$r"
    exec chroot --userspec=65532:65532 "$r" "$@"'
in_image=(unshare --mount --propagation private -- sh -ec "$mounts" sh "$rootfs" "$conf" no)
in_image_tmp=(unshare --mount --propagation private -- sh -ec "$mounts" sh "$rootfs" "$conf" yes)

want=$("$binary" version)
got=$("${in_image[@]}" /usr/local/bin/gpugate version) || fail "gpugate version in the image"
[[ $got == "$want" ]] || fail "gpugate version in the image: '$got', want '$want'"
ok "gpugate version: $got"

out=$("${in_image[@]}" /usr/local/bin/gpugate check /etc/gpugate/policy.yaml 2>&1) ||
    fail "gpugate check of the example policy in the image: $out"
ok "gpugate check /etc/gpugate/policy.yaml (the example policy): $out"
rc=0
out=$("${in_image[@]}" /usr/local/bin/gpugate check /etc/gpugate/broken.yaml 2>&1) || rc=$?
[[ $rc -eq 1 ]] || fail "gpugate check of a broken policy: exit $rc, want 1: $out"
ok "gpugate check refuses a broken policy (exit 1)"

"${in_image_tmp[@]}" /usr/local/bin/gpugate certs --out /tmp/pki --dns gpugate.gpugate.svc \
    >/dev/null 2>"$tmp/certs.log" || { cat "$tmp/certs.log" >&2; fail "gpugate certs in the image"; }
ok "gpugate certs writes a CA and a serving certificate to /tmp"

# A free port, then serve on it (embedded: no API) and ask over HTTPS.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"${in_image[@]}" /usr/local/bin/gpugate serve --embedded --policy /etc/gpugate/policy.yaml \
    --tls-cert /etc/gpugate/tls/tls.crt --tls-key /etc/gpugate/tls/tls.key \
    --listen "127.0.0.1:$port" --threads 2 >"$tmp/serve.log" 2>&1 &
serve_pid=$!
for _ in $(seq 100); do
    curl -sf --cacert "$tmp/pki/ca.crt" "https://127.0.0.1:$port/readyz" >/dev/null && break
    kill -0 "$serve_pid" 2>/dev/null || { cat "$tmp/serve.log" >&2; fail "gpugate serve exited"; }
    sleep 0.1
done
for path in /healthz /readyz; do
    code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$tmp/pki/ca.crt" \
        "https://127.0.0.1:$port$path") || true
    [[ $code == 200 ]] || { cat "$tmp/serve.log" >&2; fail "GET $path: HTTP $code"; }
done
kill -TERM "$serve_pid"
rc=0
wait "$serve_pid" || rc=$?
serve_pid=
[[ $rc -eq 0 ]] || { cat "$tmp/serve.log" >&2; fail "gpugate serve exited $rc on SIGTERM"; }
ok "gpugate serve --embedded answers /healthz and /readyz over HTTPS, stops on SIGTERM (exit 0)"

# 4. Reproducible: a second build, the same bytes.
if [[ ${IMAGE_CHECK_REBUILD:-1} == 1 ]]; then
    "$root/scripts/image.sh" --out "$tmp/again.oci.tar" 2>/dev/null || fail "second build"
    a=$(sha256sum <"$image" | cut -d' ' -f1)
    b=$(sha256sum <"$tmp/again.oci.tar" | cut -d' ' -f1)
    [[ $a == "$b" ]] || fail "a second build differs: $a vs $b"
    ok "a second build is byte for byte the same (sha256 $a)"
fi
echo "image check: passed in $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1fs", b - a }')"
