"""`gpugate classes`: the classes of a policy as users see them.

Every line it prints is asserted verbatim: the table, the JSON and YAML
documents (the spec of a GPUClass object, report/classes.h), the
filtering by tenant and namespace, and every error with its exit status.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT, SLOW

EXAMPLE = "policy/examples/gpu-cluster.yaml"

TABLE = """\
NAME                  FLAVOR         GPUS   MAX   SHARING        PREEMPTIBLE   TOPOLOGY                         PRIORITY   TENANTS            DESCRIPTION
train-large           h100-80gb      8      8     exclusive      false         required nvidia.com/gpu.clique   training   research           8 H100 on one node inside one NVLink domain, for distributed training
train-small           h100-80gb      1      4     exclusive      true          <none>                           <none>     research,product   1 to 4 H100 for experiments; preemptible, checkpoints on SIGTERM
inference-mig         a100-1g.10gb   1      2     mig            false         <none>                           <none>     product            one or two 10 GB MIG slices for latency-sensitive serving
inference-mig-large   a100-3g.40gb   1      1     mig            false         <none>                           <none>     product            a 40 GB MIG slice for larger models
dev-shared            l4-shared      1      1     time-slicing   true          <none>                           <none>     research,sandbox   a time-sliced L4 for notebooks and CI; preemptible
"""

SANDBOX_TABLE = """\
NAME         FLAVOR      GPUS   MAX   SHARING        PREEMPTIBLE   TOPOLOGY   PRIORITY   TENANTS            DESCRIPTION
dev-shared   l4-shared   1      1     time-slicing   true          <none>     <none>     research,sandbox   a time-sliced L4 for notebooks and CI; preemptible
"""

TRAIN_LARGE = {
    "name": "train-large",
    "description": "8 H100 on one node inside one NVLink domain, for distributed training",
    "flavor": "h100-80gb",
    "resource": "nvidia.com/gpu",
    "sharing": "exclusive",
    "gpus": 8,
    "maxGpus": 8,
    "preemptible": False,
    "topology": {"key": "nvidia.com/gpu.clique", "mode": "required"},
    "priorityClassName": "training",
    "cpu": "96",
    "memory": "1000Gi",
    "tenants": ["research"],
}

SANDBOX_YAML = """\
- name: dev-shared
  description: "a time-sliced L4 for notebooks and CI; preemptible"
  flavor: l4-shared
  resource: nvidia.com/gpu.shared
  sharing: time-slicing
  gpus: 1
  maxGpus: 1
  preemptible: true
  tenants:
  - research
  - sandbox
"""

USAGE = "usage: gpugate classes --policy FILE [-o text|json|yaml]\n"


def run(binary: Path, *args: str) -> tuple[int, str, str]:
    p = subprocess.run([str(binary), "classes", *args], capture_output=True,
                       text=True, timeout=60 * SLOW, cwd=ROOT)
    return p.returncode, p.stdout, p.stderr


def test_table_of_every_class(gpugate_bin):
    assert run(gpugate_bin, "--policy", EXAMPLE) == (0, TABLE, "")
    assert run(gpugate_bin, "--policy", EXAMPLE, "-o", "text") == (0, TABLE, "")


@pytest.mark.parametrize("args", [("--tenant", "sandbox"), ("--namespace", "sandbox-ci"),
                                  ("--tenant=sandbox",)])
def test_only_what_a_tenant_can_use(gpugate_bin, args):
    assert run(gpugate_bin, "--policy", EXAMPLE, *args) == (0, SANDBOX_TABLE, "")


def test_json_is_the_spec_with_the_name(gpugate_bin):
    rc, out, err = run(gpugate_bin, "--policy", EXAMPLE, "-o", "json")
    assert (rc, err) == (0, "")
    classes = json.loads(out)
    assert [c["name"] for c in classes] == \
        ["train-large", "train-small", "inference-mig", "inference-mig-large", "dev-shared"]
    assert classes[0] == TRAIN_LARGE
    assert list(classes[0]) == list(TRAIN_LARGE), "keys in their documented order"
    # Absent fields are left out, not null.
    assert "topology" not in classes[2] and "priorityClassName" not in classes[2]
    rc, out, err = run(gpugate_bin, "--policy", EXAMPLE, "--tenant", "product", "-o", "json")
    assert [c["name"] for c in json.loads(out)] == \
        ["train-small", "inference-mig", "inference-mig-large"]


def test_yaml(gpugate_bin):
    assert run(gpugate_bin, "--policy", EXAMPLE, "--tenant", "sandbox", "-o", "yaml") == \
        (0, SANDBOX_YAML, "")


def test_a_tenant_restricted_by_sharing_or_quota(gpugate_bin, tmp_path):
    # "all classes", but no quota for one flavor and no mps: only dev.
    f = tmp_path / "p.yaml"
    f.write_text("""\
version: 1
flavors:
  - {name: l4, resource: nvidia.com/gpu, sharing: time-slicing, gpusPerNode: 4}
  - {name: h100, resource: nvidia.com/gpu, sharing: exclusive, gpusPerNode: 8}
  - {name: l4-mps, resource: nvidia.com/gpu.mps, sharing: mps, gpusPerNode: 4}
classes:
  - {name: dev, flavor: l4, gpus: 1}
  - {name: big, flavor: h100, gpus: 8}
  - {name: shared, flavor: l4-mps, gpus: 1}
tenants:
  - name: team
    namespaces: [team]
    sharing: [time-slicing, exclusive]
    quota: [{flavor: l4, nominal: 2}, {flavor: l4-mps, nominal: 2}]
""")
    rc, out, err = run(gpugate_bin, "--policy", str(f), "-o", "json")
    assert (rc, err) == (0, "")
    assert [(c["name"], c["tenants"]) for c in json.loads(out)] == \
        [("dev", ["team"]), ("big", []), ("shared", [])]
    rc, out, err = run(gpugate_bin, "--policy", str(f))
    assert out.splitlines()[2].split()[8] == "<none>"


def test_nothing_left(gpugate_bin, tmp_path):
    assert run(gpugate_bin, "--policy", EXAMPLE, "--namespace", "nowhere") == \
        (0, "", f'gpugate classes: namespace "nowhere" belongs to no tenant of {EXAMPLE}: '
                'it can use no class\n')
    assert run(gpugate_bin, "--policy", EXAMPLE, "--namespace", "nowhere", "-o", "json") == \
        (0, "[]\n", f'gpugate classes: namespace "nowhere" belongs to no tenant of {EXAMPLE}: '
                    'it can use no class\n')
    f = tmp_path / "p.yaml"
    f.write_text("version: 1\nflavors: []\nclasses: []\ntenants: [{name: t, namespaces: [t]}]\n")
    assert run(gpugate_bin, "--policy", str(f), "--tenant", "t") == \
        (0, "", 'gpugate classes: tenant "t" can use no class\n')
    assert run(gpugate_bin, "--policy", str(f)) == (0, "", "")


def test_unknown_tenant(gpugate_bin):
    assert run(gpugate_bin, "--policy", EXAMPLE, "--tenant", "reserch") == \
        (2, "", f'gpugate classes: {EXAMPLE} has no tenant "reserch" '
                '(tenants: research, product, sandbox)\n')


def test_invalid_policy(gpugate_bin, tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("version: 2\nflavors: []\nclasses: []\ntenants: []\n")
    assert run(gpugate_bin, "--policy", str(f)) == \
        (2, "", f"{f}:1: unsupported version 2 (this gpugate reads version 1)\n")


@pytest.mark.parametrize("args, first_line", [
    ((), "gpugate classes: --policy is required"),
    (("--policy", EXAMPLE, "-o", "wide"), "gpugate classes: -o wants text, json or yaml, not 'wide'"),
    (("--policy", EXAMPLE, "--tenant", "a", "--namespace", "b"),
     "gpugate classes: --tenant and --namespace exclude each other"),
    (("--policy", EXAMPLE, "extra"), "gpugate classes: unexpected argument 'extra'"),
    (("--bogus",), "gpugate classes: unknown option '--bogus'"),
    (("--tenat", "a"), "gpugate classes: unknown option '--tenat' (did you mean \"--tenant\"?)"),
])
def test_usage_errors(gpugate_bin, args, first_line):
    # One line and where the help is, not the help.
    assert run(gpugate_bin, *args) == \
        (2, "", first_line + "; run 'gpugate classes --help'\n")


def test_help(gpugate_bin):
    rc, out, err = run(gpugate_bin, "--help")
    assert (rc, err) == (0, "")
    assert out.startswith(USAGE)
    assert "'kubectl get gpuclasses' shows the same without the\npolicy file." in out
