#!/usr/bin/env python3
"""oci-image.py - write gpugate's OCI image archive from a root filesystem
tarball (mmdebstrap's output, scripts/image.sh) and the gpugate binary.

One layer, one config, one manifest, as the OCI image spec describes them
(image-layout, manifest, config), in an oci-archive (the layout directory as
a tar, what `skopeo copy oci-archive:FILE ...` reads). Everything that could
vary between two runs is fixed, so the same inputs give the same bytes:

- entries sorted by name, mtime SOURCE_DATE_EPOCH (--epoch), owner 0:0
  (65532:65532 for the non-root user's home), no user or group names;
- gzip with mtime 0 and no file name; JSON with sorted keys;
- the config's "created" is the same epoch.

From the root filesystem it keeps the libraries and drops what a container
does not use: device nodes (the runtime provides /dev), apt's and dpkg's
configuration, documentation other than the copyright files, man pages,
locales. It adds /usr/local/bin/gpugate, /etc/passwd and /etc/group with
root and nonroot (65532), /home/nonroot and /tmp (1777).

Usage: oci-image.py --rootfs ROOT.tar --binary BIN --version V --epoch N
                    [--revision REV] --out IMAGE.oci.tar
Prints the manifest digest (sha256:...) on stdout.
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import hashlib
import io
import json
import os
import sys
import tarfile

UID = 65532
# Paths (no leading "./") dropped from the root filesystem; a directory
# entry ending in "/" drops its contents but keeps the directory.
DROP_PREFIXES = ("dev/", "etc/apt/", "etc/dpkg/", "usr/share/man/", "usr/share/locale/",
                 "usr/share/info/", "usr/share/lintian/", "var/cache/", "var/lib/apt/",
                 "var/log/")
DROP_FILES = {"etc/resolv.conf", "etc/hostname", "etc/fstab", "etc/apt", "etc/dpkg"}

PASSWD = ("root:x:0:0:root:/root:/usr/sbin/nologin\n"
          f"nonroot:x:{UID}:{UID}:nonroot:/home/nonroot:/usr/sbin/nologin\n")
GROUP = f"root:x:0:\nnonroot:x:{UID}:\n"


def keep(name: str) -> bool:
    if name in DROP_FILES:
        return False
    if any(name.startswith(p) and name != p for p in DROP_PREFIXES):
        return False
    if name.startswith("usr/share/doc/"):
        # keep the copyright files (the licences of what is shipped)
        parts = name.split("/")
        return len(parts) == 4 or (len(parts) == 5 and parts[4] in ("", "copyright"))
    return True


def norm(name: str) -> str:
    while name.startswith("./"):
        name = name[2:]
    return name.lstrip("/")


def entry(name: str, kind: bytes, mode: int, epoch: int, uid: int = 0,
          size: int = 0, link: str = "") -> tarfile.TarInfo:
    ti = tarfile.TarInfo(name)
    ti.type = kind
    ti.mode = mode
    ti.mtime = epoch
    ti.uid = ti.gid = uid
    ti.uname = ti.gname = ""
    ti.size = size
    ti.linkname = link
    return ti


def layer_tar(rootfs: str, binary: str, epoch: int) -> bytes:
    items: dict[str, tuple[tarfile.TarInfo, bytes | None]] = {}
    with tarfile.open(rootfs) as src:
        for m in src:
            name = norm(m.name)
            if not name or not keep(name):
                continue
            if m.ischr() or m.isblk() or m.isfifo():
                continue
            data = src.extractfile(m).read() if m.isreg() else None
            link = norm(m.linkname) if m.islnk() else m.linkname
            if m.islnk() and not keep(link):
                raise SystemExit(f"oci-image: hard link {name} -> {link} into a dropped path")
            items[name] = (entry(name, m.type, m.mode, epoch, 0,
                                 len(data) if data is not None else 0, link), data)

    def add_file(name: str, data: bytes, mode: int) -> None:
        items[name] = (entry(name, tarfile.REGTYPE, mode, epoch, 0, len(data)), data)

    def add_dir(name: str, mode: int, uid: int = 0) -> None:
        items[name] = (entry(name, tarfile.DIRTYPE, mode, epoch, uid), None)

    with open(binary, "rb") as f:
        gpugate = f.read()
    for d in ("etc", "home", "tmp", "usr", "usr/local", "usr/local/bin"):
        if d not in items:
            add_dir(d, 0o755)
    add_dir("tmp", 0o1777)
    add_dir("home/nonroot", 0o700, UID)
    add_file("etc/passwd", PASSWD.encode(), 0o644)
    add_file("etc/group", GROUP.encode(), 0o644)
    add_file("usr/local/bin/gpugate", gpugate, 0o755)

    out = io.BytesIO()
    # PAX: long names and exact sizes without GNU extensions; the only
    # headers written are the ones set above.
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(items):
            ti, data = items[name]
            tar.addfile(ti, io.BytesIO(data) if data is not None else None)
    return out.getvalue()


def gz(data: bytes) -> bytes:
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=9) as f:
        f.write(data)
    return out.getvalue()


def dumps(obj) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rootfs", required=True)
    ap.add_argument("--binary", required=True)
    ap.add_argument("--version", required=True)
    ap.add_argument("--revision", default="")
    ap.add_argument("--epoch", type=int, required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    created = datetime.datetime.fromtimestamp(a.epoch, datetime.timezone.utc) \
        .strftime("%Y-%m-%dT%H:%M:%SZ")
    tar = layer_tar(a.rootfs, a.binary, a.epoch)
    layer = gz(tar)
    labels = {"org.opencontainers.image.title": "gpugate",
              "org.opencontainers.image.version": a.version,
              "org.opencontainers.image.created": created}
    if a.revision:
        labels["org.opencontainers.image.revision"] = a.revision
    config = dumps({
        "architecture": "amd64",
        "os": "linux",
        "created": created,
        "config": {
            "User": f"{UID}:{UID}",
            "Entrypoint": ["/usr/local/bin/gpugate"],
            "Cmd": ["--help"],
            "Env": ["PATH=/usr/local/bin:/usr/bin:/bin"],
            "WorkingDir": "/",
            "ExposedPorts": {"8443/tcp": {}},
            "Labels": labels,
        },
        "rootfs": {"type": "layers", "diff_ids": [digest(tar)]},
        "history": [{"created": created,
                     "created_by": "scripts/image.sh (mmdebstrap --variant=extract, "
                                   "scripts/oci-image.py)"}],
    })
    manifest = dumps({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": digest(config), "size": len(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                    "digest": digest(layer), "size": len(layer)}],
        "annotations": labels,
    })
    index = dumps({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                       "digest": digest(manifest), "size": len(manifest),
                       "platform": {"architecture": "amd64", "os": "linux"},
                       "annotations": {"org.opencontainers.image.ref.name": a.version}}],
    })
    files = {"oci-layout": dumps({"imageLayoutVersion": "1.0.0"}), "index.json": index}
    for blob in (layer, config, manifest):
        files["blobs/sha256/" + hashlib.sha256(blob).hexdigest()] = blob

    tmp = a.out + ".tmp"
    with tarfile.open(tmp, mode="w", format=tarfile.PAX_FORMAT) as out:
        for d in ("blobs", "blobs/sha256"):
            out.addfile(entry(d, tarfile.DIRTYPE, 0o755, a.epoch))
        for name in sorted(files):
            data = files[name]
            out.addfile(entry(name, tarfile.REGTYPE, 0o644, a.epoch, 0, len(data)),
                        io.BytesIO(data))
    os.replace(tmp, a.out)
    print(digest(manifest))
    return 0


if __name__ == "__main__":
    sys.exit(main())
