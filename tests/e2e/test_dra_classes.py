"""Issue #33 steps 2-3: a class served through DRA (docs/policy.md, "DRA
flavors"), against the real apiserver, kube-controller-manager's
resourceclaim controller and kube-scheduler v1.37.2 on the KWOK fleet's DRA
nodes (fixture `dra_fleet`: six nodes of 8 H100 devices in ResourceSlices
of driver gpu.nvidia.com; this module adds, beside each, a pool of 8 A100
devices of the same driver that class train-dra must never get).

The "dra" gpugate serves DRA_POLICY (gpugate_e2e.py): flavor h100-dra (dra:
gpu.nvidia.com, productName "NVIDIA H100 80GB HBM3", memory >= 80Gi), class
train-dra (1 to 4 devices), tenant dra (namespace dra-team, nominal 8).
gpugate keeps one ResourceClaimTemplate per count in dra-team
(controllers/claim-templates.c); /mutate names it in the pod; the
resourceclaim controller makes the pod's claim from it; the scheduler
allocates devices that match its CEL selector; the pod holds the count,
its claim rides on it.
"""

from __future__ import annotations

import json
import re
import time

import pytest

import gpugate_e2e as e2e
from gpugate_e2e import allocated_devices, container, job, pod, wait_until

NS = "dra-team"
CLASS = "train-dra"
FLAVOR = "h100-dra"
MANAGED = "app.kubernetes.io/managed-by=gpugate"
CEL = ("device.driver == 'gpu.nvidia.com' && "
       "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3' && "
       "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0")
A100 = "NVIDIA A100-SXM4-80GB"


@pytest.fixture(scope="module")
def a100_pools(stack, dra_fleet):
    """Beside each DRA node's H100 pool, a pool of 8 A100 devices of the
    same driver: what the template's selector must keep out."""
    k = stack.kubectl
    slices = []
    for node in dra_fleet.nodes:
        slices.append({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-a100", "labels": {"e2e.gpugate.io/a100": "1"}},
            "spec": {"driver": "gpu.nvidia.com", "nodeName": node,
                     "pool": {"name": f"a100-{node}", "generation": 1,
                              "resourceSliceCount": 1},
                     "devices": [{"name": f"a100-{i}", "attributes": {
                         "type": {"string": "gpu"}, "productName": {"string": A100}},
                         "capacity": {"memory": {"value": "80Gi"}}} for i in range(8)]}})
    k.apply({"apiVersion": "v1", "kind": "List", "items": slices}).check()
    try:
        yield
    finally:
        k("delete", "resourceslices", "-l", "e2e.gpugate.io/a100=1", "--wait=false")


def templates(k) -> dict[str, dict]:
    items = k("get", "resourceclaimtemplates", "-n", NS, "-l", MANAGED, "-o",
              "json").json()["items"]
    return {t["metadata"]["name"]: t for t in items}


def wait_templates(k, timeout: float = 60.0) -> dict[str, dict]:
    """gpugate's four templates of class train-dra in dra-team."""
    got: dict[str, dict] = {}

    def four():
        got.clear()
        got.update({n: t for n, t in templates(k).items()
                    if n.startswith(f"gpugate.{CLASS}.")})
        return len(got) == 4
    wait_until("gpugate's 4 claim templates of train-dra in dra-team", four, timeout, 0.5)
    return got


def pod_claim(k, name: str) -> dict | None:
    return e2e.pod_claim(k, NS, name)


def running_with_devices(k, name: str, count: int, timeout: float = 60.0) -> dict:
    """Waits until pod NAME runs with its claim allocated COUNT devices;
    returns the claim."""
    return e2e.running_with_claim(k, NS, name, count, timeout)


def used(stack) -> float:
    return stack.gates["dra"].quota_used("dra", FLAVOR)


def stays(stack, n: float, seconds: float = 3.0) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        assert used(stack) == n, f"usage {used(stack)}, expected {n}"
        time.sleep(0.5)


def test_gpugate_keeps_a_template_per_count(kubectl, dra_fleet):
    got = wait_templates(kubectl)
    counts = {}
    for name, t in got.items():
        m = re.fullmatch(rf"gpugate\.{CLASS}\.([1-4])\.[0-9a-v]{{6}}", name)
        assert m, name
        meta = t["metadata"]
        assert meta["labels"]["gpugate.io/class"] == CLASS, meta
        assert meta["labels"]["gpugate.io/flavor"] == FLAVOR, meta
        spec = t["spec"]
        assert spec["metadata"]["annotations"]["gpugate.io/flavor"] == FLAVOR, spec
        (req,) = spec["spec"]["devices"]["requests"]
        ex = req["exactly"]
        assert ex["deviceClassName"] == "gpu.nvidia.com", ex
        assert ex["allocationMode"] == "ExactCount", ex
        assert ex["selectors"][0]["cel"]["expression"] == CEL, ex
        counts[int(m.group(1))] = name
    assert sorted(counts) == [1, 2, 3, 4]


def test_a_dra_class_pod_gets_h100_devices_and_is_charged_once(kubectl, stack, clean,
                                                              files, dra_fleet, a100_pools):
    clean(NS)
    wait_templates(kubectl)
    r = kubectl.apply_file(files / "p.yaml", pod("p", NS, CLASS, 2, containers=[container()]))
    assert r.rc == 0, r
    assert "gpugate: train-dra -> 2 x h100-dra (DRA) for tenant dra (2/8 in use)" in r.err, r
    spec = kubectl.get("pod", "p", NS)["spec"]
    (entry,) = spec["resourceClaims"]
    assert entry["name"] == "gpugate-gpu"
    assert entry["resourceClaimTemplateName"].startswith(f"gpugate.{CLASS}.2."), entry
    assert spec["containers"][0]["resources"]["claims"] == [{"name": "gpugate-gpu"}]
    assert "nvidia.com/gpu" not in json.dumps(spec["containers"][0]["resources"])
    claim = running_with_devices(kubectl, "p", 2)
    node = kubectl.get("pod", "p", NS)["spec"]["nodeName"]
    assert node in dra_fleet.nodes
    for d in allocated_devices(claim):
        assert d["pool"] == node and d["device"].startswith("gpu-"), (
            f"an A100 or another node's device: {d}")
    assert claim["metadata"]["annotations"]["gpugate.io/flavor"] == FLAVOR
    stays(stack, 2)  # the pod's 2, its claim riding: not 4
    kubectl("delete", "pod", "p", "-n", NS, "--wait=false").check()
    e2e.force_delete(kubectl, NS, e2e.terminating(
        kubectl("get", "pods", "-n", NS, "-o", "json").json()["items"]))
    wait_until("usage 0 once the pod and its claim are gone", lambda: used(stack) == 0, 60)


def test_quota_is_the_pods_through_the_template(kubectl, stack, clean, files, dra_fleet):
    clean(NS)
    wait_templates(kubectl)
    for i in range(2):
        r = kubectl.apply_file(files / f"q{i}.yaml",
                               pod(f"q{i}", NS, CLASS, 4, containers=[container()]))
        assert r.rc == 0, r
    for i in range(2):
        running_with_devices(kubectl, f"q{i}", 4)
    stays(stack, 8)
    r = kubectl.apply_file(files / "q2.yaml", pod("q2", NS, CLASS, 1, containers=[container()]))
    assert r.rc != 0, r
    assert ('gpugate: tenant "dra" is over its h100-dra quota: requested 1 (class '
            'train-dra), in use 8 of nominal 8, no cohort to borrow from') in r.err, r


def test_a_job_reserves_its_gang_through_the_template(kubectl, stack, clean, files,
                                                     dra_fleet):
    clean(NS)
    wait_templates(kubectl)
    r = kubectl.apply_file(files / "j.yaml", job("j", NS, CLASS, 2, parallelism=3,
                                                 containers=[container()]))
    assert r.rc == 0, r
    assert used(stack) == 6, "the gang, reserved at the Job's admission"

    def three_running():
        items = kubectl("get", "pods", "-n", NS, "-l", "job-name=j", "-o",
                        "json").json()["items"]
        return len([p for p in items if (p.get("status") or {}).get("phase") == "Running"
                    and pod_claim(kubectl, p["metadata"]["name"])]) == 3
    wait_until("the Job's 3 pods Running with their claims", three_running, 90, 0.5)
    stays(stack, 6)


def test_gpugates_templates_are_nobody_elses(kubectl, tenant_kubectl, files, dra_fleet):
    got = wait_templates(kubectl)
    tk = tenant_kubectl(NS)
    forged = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
              "metadata": {"name": f"gpugate.{CLASS}.2.zzzzzz", "namespace": NS},
              "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                  "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount",
                  "count": 8}}]}}}}
    r = tk.apply_file(files / "forged.yaml", forged)
    assert r.rc != 0 and "gpugate." in r.err, r
    # Deleted (the webhook lets deletes through): made again.
    name = sorted(got)[0]
    kubectl("delete", "resourceclaimtemplate", name, "-n", NS).check()
    wait_until(f"template {name} made again", lambda: name in templates(kubectl), 60, 0.5)
