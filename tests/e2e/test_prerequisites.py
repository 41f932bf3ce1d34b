"""Go is a prerequisite of `make e2e` and `make demo` the first time (to build
the control plane), and only then: `build-tools.sh --check`, which both make
targets run first, fails at once with the Go version needed when the tools
are not cached and go is missing or too old, and passes when they are cached.

No cluster: these tests do not use the `stack` fixture.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from gpugate_e2e import HERE

BUILD_TOOLS = HERE / "build-tools.sh"


def go_needed() -> str:
    """The highest `go` directive of the wrapper modules."""
    versions = [re.search(r"^go (\S+)$", (HERE / "tools" / m / "go.mod").read_text(), re.M)
                .group(1) for m in ("k8s", "etcd")]
    return max(versions, key=lambda v: [int(x) for x in v.split(".")])


def check(tmp_path: Path, go: str, tools_dir: Path | None = None) -> tuple[int, str]:
    env = dict(os.environ, GO=go)
    env["GPUGATE_TOOLS_DIR"] = str(tools_dir or tmp_path / "tools")
    p = subprocess.run([str(BUILD_TOOLS), "--check"], capture_output=True, text=True,
                       env=env, timeout=60)
    assert p.stdout == "", p.stdout  # nothing for eval, nothing built
    return p.returncode, p.stderr


def fake_go(tmp_path: Path, version: str) -> str:
    f = tmp_path / f"go-{version}"
    f.write_text(f"#!/bin/sh\necho 'go version go{version} linux/amd64'\n")
    f.chmod(0o755)
    return str(f)


def refusal(tmp_path: Path, problem: str) -> str:
    need = go_needed()
    return (f"build-tools: ERROR: make e2e and make demo need Go >= {need} to build the "
            f"control plane the first time (then it is cached in {tmp_path / 'tools'}): "
            f"{problem}; install Go >= {need} (https://go.dev/dl/) or set GO=/path/to/go\n")


def test_missing_go_is_named_with_the_version_needed(tmp_path):
    assert check(tmp_path, "no-such-go") == (
        1, refusal(tmp_path, "there is no 'no-such-go' on PATH"))


@pytest.mark.parametrize("old", ["1.22.1", "1.25.9", "1.26rc1"])
def test_too_old_go_is_refused_with_the_version_needed(tmp_path, old):
    go = fake_go(tmp_path, old)
    assert check(tmp_path, go) == (1, refusal(tmp_path, f"{go} is go{old}"))


def test_new_enough_go_passes_without_building(tmp_path):
    major, minor, _ = go_needed().split(".")
    go = fake_go(tmp_path, f"{major}.{int(minor) + 1}.0")
    rc, err = check(tmp_path, go)
    assert rc == 0, err
    assert "new enough" in err
    assert not (tmp_path / "tools").exists()


def test_cached_tools_need_no_go(tmp_path):
    """run.sh built (or found) the tools before pytest started."""
    cached = Path(os.environ.get("GPUGATE_TOOLS_DIR") or
                  Path.home() / ".cache" / "gpugate" / "tools")
    rc, err = check(tmp_path, "no-such-go", cached)
    assert rc == 0, err
