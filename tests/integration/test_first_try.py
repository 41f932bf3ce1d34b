"""What a newcomer tries first, taken from where they read it, so that it
cannot rot: the `curl` and `explain` commands `make run` prints (Makefile),
and the commands and the denial README.md shows.
"""

from __future__ import annotations

import json
from pathlib import Path
import re
import subprocess
import sys

from conftest import ROOT, SLOW, check_envelope, decode_patch
from test_watch import kube  # noqa: F401  (the fixture)
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


# ---------------------------------------------------------------------------
# The README's flagship example fits the demo fleet

def flagship() -> tuple[str, str]:
    """(policy, manifest) of the first `explain` the README shows."""
    m = re.search(r"^build/gpugate explain --policy (\S+) (\S+)$", README, re.M)
    assert m, "README.md: no `build/gpugate explain --policy P FILE` line"
    return m.group(1), m.group(2)


def demo_fleet(policy: str) -> list[dict]:
    """The nodes of `make demo` (tests/e2e/demo.sh: gpugate_e2e.py up
    --fleet, EXAMPLE_FLEET made by fleet.py), Ready as KWOK makes them."""
    import yaml
    sys.path.insert(0, str(ROOT / "tests" / "e2e"))
    try:
        import fleet
        from gpugate_e2e import EXAMPLE_FLEET
    finally:
        sys.path.pop(0)
    items = fleet.make_fleet(yaml.safe_load((ROOT / policy).read_text()),
                             per_flavor=EXAMPLE_FLEET["nodes"],
                             cpu_nodes=EXAMPLE_FLEET["cpu_nodes"],
                             clique_size=EXAMPLE_FLEET["clique_size"])
    for n in items:
        n["metadata"]["uid"] = "uid-" + n["metadata"]["name"]
        n.setdefault("status", {})["conditions"] = [
            {"type": "Ready", "status": "True", "reason": "KubeletReady"}]
    return items


def test_readme_flagship_fits_the_demo_fleet(gpugate_bin, kube, tmp_path):
    # The Job the README shows first, judged against the demo fleet's
    # nodes by gpugate's own pool rule (explain --kubeconfig): its whole
    # gang fits, in one NVLink domain when the class requires one.  The
    # same Job one pod larger than a domain holds is refused, so this test
    # can fail.
    import yaml
    policy, manifest = flagship()
    kube.put("nodes", *demo_fleet(policy))

    def verdict(path) -> tuple[int, str, str]:
        p = subprocess.run([str(gpugate_bin), "explain", "--policy", str(ROOT / policy),
                            "--kubeconfig", str(kube.kubeconfig), "--timeout", "30",
                            "-o", "json", str(path)],
                           capture_output=True, text=True, timeout=60 * SLOW, cwd=ROOT)
        assert p.stderr == "", p
        [r] = json.loads(p.stdout)["results"]
        return p.returncode, r["result"], " ".join(r["messages"])

    assert verdict(ROOT / manifest) == (0, "admitted", "")

    job = yaml.safe_load((ROOT / manifest).read_text())
    assert job["kind"] == "Job"
    too_big = tmp_path / "too-big.yaml"
    job["spec"]["parallelism"] = job["spec"]["completions"] = 4
    too_big.write_text(yaml.safe_dump(job))
    rc, result, message = verdict(too_big)
    assert (rc, result) == (1, "denied"), message
    assert "h100-80gb" in message, message


# ---------------------------------------------------------------------------
# The shipped policy names no PriorityClass the install does not create

def test_install_creates_every_priority_class_its_policy_names():
    # The apiserver refuses a pod that names a missing PriorityClass: each
    # install (the kustomize base, the chart with its default values) must
    # create every one its policy's classes name.
    import yaml

    def named(policy: Path) -> set[str]:
        doc = yaml.safe_load(policy.read_text())
        return {c["priorityClassName"] for c in doc["classes"] if c.get("priorityClassName")}

    kustomization = yaml.safe_load((ROOT / "manifests/kustomization.yaml").read_text())
    base = set()
    for res in kustomization["resources"]:
        for d in yaml.safe_load_all((ROOT / "manifests" / res).read_text()):
            if d and d["kind"] == "PriorityClass":
                base.add(d["metadata"]["name"])
    chart = {pc["name"] for pc in yaml.safe_load(
        (ROOT / "charts/gpugate/values.yaml").read_text())["priorityClasses"]}
    assert named(ROOT / "manifests/policy.yaml") <= base, base
    assert named(ROOT / "charts/gpugate/files/policy.yaml") <= chart, chart
    assert named(ROOT / "policy/examples/gpu-cluster.yaml") == named(ROOT / "manifests/policy.yaml")
    assert "training" in base, "the example policy's train-large names it"
