"""What a newcomer tries first, taken from where they read it, so that it
cannot rot: the `curl` and `explain` commands `make run` prints (Makefile),
and the commands and the denial README.md shows.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

from conftest import ROOT, SLOW, check_envelope, decode_patch
from jsonpatch_strict import apply

MAKEFILE = (ROOT / "Makefile").read_text()
README = (ROOT / "README.md").read_text()


def make_variable(name: str) -> str:
    m = re.search(rf"^{name} \?= (\S+)$", MAKEFILE, re.M)
    assert m, f"Makefile: no default for {name}"
    return m.group(1)


def run_echo_lines() -> list[str]:
    """The command lines the `run` target prints ("Try, in another shell")."""
    recipe = MAKEFILE.split("\nrun: ", 1)[1].split("\n\n", 1)[0]
    return [m.group(1) for m in re.finditer(r'@echo "  (.*)"$', recipe, re.M)]


def test_make_run_curl_example(fresh_server):
    [line] = [line for line in run_echo_lines() if line.startswith("curl ")]
    # The answer is shown through scripts/show-review.py: the patch decoded.
    curl, show = line.split(" | ")
    assert show == "python3 scripts/show-review.py", line
    data = re.search(r"--data @(\S+)", curl)
    assert data and "-H 'Content-Type: application/json'" in curl, curl
    assert curl.endswith("/mutate"), curl
    review_file = ROOT / data.group(1)
    assert review_file.is_file(), f"make run points curl at {review_file}, which is missing"
    srv = fresh_server(ROOT / make_variable("RUN_POLICY"))
    # curl --data @FILE sends the file without its carriage returns and
    # newlines (--data-binary would keep them): send what curl sends.
    body = review_file.read_bytes().replace(b"\r", b"").replace(b"\n", b"")
    with srv.client() as c:
        r = c.post("/mutate", body, headers={"Content-Type": "application/json"})
        assert r.status == 200, r
        out = r.json()
        review = json.loads(body)
        check_envelope(out, review, "mutate")
        resp = out["response"]
        assert resp["allowed"] is True, resp
        assert "patch" in resp, "the example review is meant to show a patch"
        shown = subprocess.run([sys.executable, str(ROOT / "scripts/show-review.py")],
                               input=r.text, capture_output=True, text=True, timeout=30)
        assert shown.returncode == 0, shown
        lines = shown.stdout.splitlines()
        ops = decode_patch(resp["patch"])
        assert lines[:2] == ["allowed: true", f"patch (JSONPatch, {len(ops)} operations):"], lines
        assert ('  {"op": "add", "path": "/spec/nodeSelector", "value": '
                '{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}') in lines, lines
        assert len(lines) == 2 + len(ops), lines
        patched = apply(review["request"]["object"], decode_patch(resp["patch"]))
        ct = patched["spec"]["containers"][0]
        assert ct["resources"]["limits"] == {"nvidia.com/gpu": "2"}
        assert patched["metadata"]["labels"]["gpugate.io/tenant"] == "research"
        # The patched pod passes /validate, as the apiserver would chain it.
        check = c.admit("validate", patched, namespace=review["request"]["namespace"],
                        dry_run=True)
        assert check.allowed, check
        # A pod that fits is no problem: no warning (settings.admissionWarnings
        # defaults to problems; docs/users.md "What kubectl shows").
        assert check.warnings == [], check


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60 * SLOW, cwd=ROOT)


def test_make_run_explain_example(gpugate_bin):
    [line] = [line for line in run_echo_lines() if " explain " in line]
    args = line.replace("$(RUN_POLICY)", make_variable("RUN_POLICY")).split()
    assert args[0] == "$(GPUGATE)", line
    p = _run([str(gpugate_bin), *args[1:]])
    assert p.returncode == 0, p.stderr + p.stdout
    assert "validate   admitted" in p.stdout.splitlines(), p.stdout


def test_readme_commands(gpugate_bin):
    lines = [line for line in README.splitlines() if line.startswith("build/gpugate ")]
    assert len(lines) >= 3, lines
    for line in lines:
        p = _run([str(gpugate_bin), *line.split()[1:]])
        assert p.returncode == 0, (line, p.stderr)


def test_readme_denial_is_what_gpugate_says(gpugate_bin):
    """README's `kubectl apply -f examples/job-too-big.yaml` shows a denial:
    it must be the text gpugate gives for that file."""
    m = re.search(r"^\$ kubectl apply -f (\S+)\n.*\n(gpugate: .*)$", README, re.M)
    assert m, "README no longer shows the kubectl denial example"
    p = _run([str(gpugate_bin), "explain", "--policy", "policy/examples/gpu-cluster.yaml",
              m.group(1)])
    assert p.returncode == 1, p.stdout + p.stderr
    assert " " * 11 + m.group(2) in p.stdout.splitlines(), p.stdout
