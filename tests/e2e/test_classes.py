"""Users see the classes inside the cluster (issue #18 item 4):
`kubectl get gpuclasses`, as a tenant with nothing but `edit` in its own
namespace, lists one GPUClass per class of the policy gpugate serves, with
the printer columns of manifests/crd-gpuclasses.yaml; a policy reload that
drops a class deletes its object; objects gpugate does not own are left
alone, and a class it cannot publish is named in a warning; without the
CRD gpugate says so once, keeps serving, and makes the objects as soon as
the CRD is back.

The session's gates run with --no-gpuclasses (they serve three different
policies: they would take turns rewriting the objects); this test starts
its own gpugate, on a copy of the example policy, with the CRD and the
readers' ClusterRole of the base installed, and removes them afterwards.
"""

from __future__ import annotations

import json
import re

import pytest

from gpugate_e2e import EXAMPLE_POLICY, ROOT, Gate, ensure_crd, wait_until

CRD = ROOT / "manifests" / "crd-gpuclasses.yaml"
READER = "gpugate-gpuclasses-reader"
OWNER = {"app.kubernetes.io/managed-by": "gpugate"}

# kubectl get gpuclasses, AGE left out (it varies)
TABLE = [
    ["NAME", "FLAVOR", "GPUS", "MAX", "SHARING", "PREEMPTIBLE"],
    ["dev-shared", "l4-shared", "1", "1", "time-slicing", "true"],
    ["inference-mig", "a100-1g.10gb", "1", "2", "mig", "false"],
    ["inference-mig-large", "a100-3g.40gb", "1", "1", "mig", "false"],
    ["train-large", "h100-80gb", "8", "8", "exclusive", "false"],
    ["train-small", "h100-80gb", "1", "4", "exclusive", "true"],
]


EXTRA = """\
  - {name: Dev_Shared, flavor: l4-shared, gpus: 1}
  - {name: handmade, flavor: l4-shared, gpus: 1}
"""
NOT_AN_OBJECT_NAME = ('level=warn msg="class not published as a GPUClass" class=Dev_Shared '
                      'reason="not a valid object name (lower-case letters, digits, \'-\' '
                      'and \'.\')"')
NOT_OURS = ('level=warn msg="class not published as a GPUClass" class=handmade reason="a '
            'GPUClass of that name exists without the label '
            'app.kubernetes.io/managed-by=gpugate"')
NO_CRD = ('level=warn msg="gpuclasses not synced: the GPUClass CustomResourceDefinition '
          'is not installed" crd=gpuclasses.gpugate.io')


def rows(out: str) -> list[list[str]]:
    """The table without its AGE column (the last)."""
    lines = out.splitlines()
    assert lines and lines[0].split()[-1] == "AGE", out
    return [line.split()[:-1] for line in lines]


def gpuclass(name: str, labels: dict | None = None) -> dict:
    return {"apiVersion": "gpugate.io/v1alpha1", "kind": "GPUClass",
            "metadata": {"name": name, **({"labels": labels} if labels else {})},
            "spec": {"flavor": "x", "resource": "example.com/gpu", "sharing": "mps",
                     "gpus": 1, "maxGpus": 1, "preemptible": False, "tenants": []}}


@pytest.fixture
def crd(stack):
    """The CRD and the readers' ClusterRole and binding, from the base."""
    k = stack.kubectl
    ensure_crd(k, CRD, "gpuclasses.gpugate.io")
    rendered = k("kustomize", "manifests").check().out
    text = k("create", "--dry-run=client", "-o", "json", "-f", "-",
             input=rendered).check().out
    docs, i, dec = [], 0, json.JSONDecoder()  # one JSON document per object
    while text[i:].strip():
        while text[i].isspace():
            i += 1
        obj, i = dec.raw_decode(text, i)
        docs.append(obj)
    reader = [d for d in docs if d["metadata"]["name"] == READER]
    assert sorted(d["kind"] for d in reader) == ["ClusterRole", "ClusterRoleBinding"]
    k.apply({"apiVersion": "v1", "kind": "List", "items": reader}).check()
    yield
    k("delete", "-f", "-", "--ignore-not-found",
      input=json.dumps({"apiVersion": "v1", "kind": "List", "items": reader}))
    k("delete", "-f", str(CRD), "--ignore-not-found", "--wait=true", timeout=120)


def test_kubectl_get_gpuclasses_as_a_tenant(stack, crd, tmp_path):
    k = stack.kubectl
    tenant = stack.tenant_kubectl("research")
    # One stale object of gpugate's, one that someone else made.
    k.create(gpuclass("retired-class", OWNER)).check()
    k.create(gpuclass("handmade")).check()
    # Two classes that are not published: a name no object may have, and
    # the name of the object someone else made.
    policy = tmp_path / "policy.yaml"
    policy.write_text(EXAMPLE_POLICY.read_text().replace("\ntenants:", EXTRA + "\ntenants:"))
    gate = Gate(stack.binary, stack.certs, policy, tmp_path / "gpugate",
                stack.cluster.env["KUBECONFIG"], name="classes").start()
    try:
        wait_until("gpugate's GPUClass objects", lambda: 'msg="gpuclasses synced" '
                   'created=5 updated=0 deleted=1 unchanged=0' in gate.stderr_text(), 30)
        assert gate.stderr_text().count(NOT_AN_OBJECT_NAME) == 1
        assert gate.stderr_text().count(NOT_OURS) == 1
        # edit in research (a RoleBinding) gives no cluster-scoped resource:
        # the readers' ClusterRole, bound to every authenticated user, does.
        for verb, want in (("list", "yes"), ("watch", "yes"), ("create", "no"),
                           ("update", "no"), ("delete", "no")):
            r = tenant("auth", "can-i", verb, "gpuclasses.gpugate.io")
            assert r.out.strip() == want, (verb, r)
        r = tenant("get", "gpuclasses")
        assert (r.rc, r.err) == (0, ""), r
        assert rows(r.out) == TABLE[:1] + sorted(TABLE[1:] + [
            ["handmade", "x", "1", "1", "mps", "false"]]), r.out
        r = tenant("get", "gpuclasses", "-o", "wide")
        assert r.rc == 0, r
        header = r.out.splitlines()[0].split()
        assert header == ["NAME", "FLAVOR", "GPUS", "MAX", "SHARING", "PREEMPTIBLE", "AGE",
                          "TENANTS", "DESCRIPTION"], r.out
        line = [x for x in r.out.splitlines() if x.startswith("train-large ")][0]
        assert re.search(r' \["research"\] +8 H100 on one node inside one NVLink domain, '
                         r'for distributed training$', line), line
        spec = tenant("get", "gpuclass", "train-small", "-o", "json").json()["spec"]
        assert spec == {"description": "1 to 4 H100 for experiments; preemptible, "
                                       "checkpoints on SIGTERM",
                        "flavor": "h100-80gb", "resource": "nvidia.com/gpu",
                        "sharing": "exclusive", "gpus": 1, "maxGpus": 4,
                        "preemptible": True, "cpu": "12", "memory": "120Gi",
                        "tenants": ["research", "product"]}, spec
        r = tenant("delete", "gpuclass", "train-large")
        assert r.rc == 1 and "Forbidden" in r.err, r

        # A reload that drops dev-shared (and sandbox, which only had it)
        # deletes its object; the one gpugate does not own stays.
        text = policy.read_text()
        text = re.sub(r"\n  - name: dev-shared\n(    .*\n)+", "\n", text)
        text = text.replace("classes: [train-large, train-small, dev-shared]",
                            "classes: [train-large, train-small]")
        text = re.sub(r"\n  - name: sandbox\n(    .*\n)+", "\n", text)
        policy.write_text(text)
        wait_until("the reload", lambda: 'msg="policy reloaded"' in gate.stderr_text(), 30)
        wait_until("dev-shared's object deleted", lambda: "dev-shared" not in
                   tenant("get", "gpuclasses", "-o", "name").out, 30)
        r = tenant("get", "gpuclasses")
        assert rows(r.out) == [TABLE[0]] + sorted(
            [row for row in TABLE[1:] if row[0] != "dev-shared"] +
            [["handmade", "x", "1", "1", "mps", "false"]]), r.out
        assert 'msg="gpuclasses synced" created=0 updated=0 deleted=1 unchanged=4' \
            in gate.stderr_text()
        # said again for the new policy
        assert gate.stderr_text().count(NOT_OURS) == 2

        # Without the CRD: said once, never fatal; back when it is.
        k("delete", "-f", str(CRD), "--wait=true", timeout=120).check()
        policy.write_text(policy.read_text() + "# touched\n")
        wait_until("the CRD missed", lambda: NO_CRD in gate.stderr_text(), 30)
        assert gate.alive
        k("apply", "-f", str(CRD)).check()
        wait_until("the objects made again", lambda: 'msg="gpuclasses synced" created=5 '
                   'updated=0 deleted=0 unchanged=0' in gate.stderr_text(), 60)
        assert gate.stderr_text().count(NO_CRD) == 1
        assert 'level=info msg="gpuclasses: the CustomResourceDefinition is there now"' \
            in gate.stderr_text()
        r = tenant("get", "gpuclasses")
        assert rows(r.out) == [TABLE[0]] + sorted(
            [row for row in TABLE[1:] if row[0] != "dev-shared"] +
            [["handmade", "l4-shared", "1", "1", "time-slicing", "false"]]), r.out
        assert gate.stop_and_check() == []
    finally:
        gate.kill()
