"""Issue #33: a class shared by capacity (dra.sharedCapacity, Kubernetes'
consumable capacity, beta and on in v1.37.2), against the real
kube-apiserver, kube-controller-manager and kube-scheduler v1.37.2 on the
KWOK fleet's DRA nodes (fixture `dra_fleet`).

This module publishes, as the admin (a driver would), beside each DRA
node's H100 pool, a pool of 2 L40S devices of driver gpu.nvidia.com that
allow multiple allocations, memory 48Gi each.  The "dra" gpugate serves
flavor l40s-share (sharedCapacity memory, 12Gi a unit, 4 a device), class
notebook (1 to 4 units), tenant dra-share (namespace dra-share, nominal 10).
Asserted:

- a notebook pod of 3 units gets gpugate's template (one device, memory
  36Gi, device.allowMultipleAllocations) and the scheduler allocates a
  share of an L40S: a result with a shareID and consumedCapacity memory
  36Gi; the pod holds 3 units, its claim rides (usage 3, not 6);
- pods of 3, 1 and 4 units pinned to one node fill its two devices (8
  units): /pool says 8 allocated, 0 free on that node, the same as the
  scheduler, which leaves a fifth pod of 1 unit Pending;
- the quota counts units: with 8 in use, a pod of 3 more is denied with
  the numbers (10 nominal);
- a pod deleted: its share goes back to the pool, and the waiting pod
  runs.
"""

from __future__ import annotations

import json

import pytest

import gpugate_e2e as e2e
from gpugate_e2e import allocated_devices, pod, wait_until

NS = "dra-share"
CLASS = "notebook"
FLAVOR = "l40s-share"
TENANT = "dra-share"
L40S = "NVIDIA L40S"
HOSTNAME = "kubernetes.io/hostname"
SHARE_LABEL = "e2e.gpugate.io/l40s-share"


def share_slice(node: str) -> dict:
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-l40s", "labels": {SHARE_LABEL: "1"}},
        "spec": {"driver": "gpu.nvidia.com", "nodeName": node,
                 "pool": {"name": f"l40s-{node}", "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": f"l40s-{i}", "allowMultipleAllocations": True,
                              "attributes": {"type": {"string": "gpu"},
                                             "productName": {"string": L40S}},
                              "capacity": {"memory": {"value": "48Gi"}}}
                             for i in range(2)]}}


@pytest.fixture(scope="module")
def l40s_pools(stack, dra_fleet):
    k = stack.kubectl
    k.apply({"apiVersion": "v1", "kind": "List",
             "items": [share_slice(n) for n in dra_fleet.nodes]}).check()
    try:
        yield dra_fleet.nodes
    finally:
        k("delete", "resourceslices", "-l", f"{SHARE_LABEL}=1", "--wait=false")


def used(stack) -> int:
    return stack.gates["dra"].quota_used(TENANT, FLAVOR)


def running_with_share(k, name: str, timeout: float = 60.0) -> dict:
    """Until pod NAME runs with its claim allocated one share: the claim."""
    return e2e.running_with_claim(k, NS, name, 1, timeout)


def node_pool(stack, node: str) -> dict:
    status, body = stack.gates["dra"].get("/pool")
    assert status == 200, (status, body)
    f = next(f for f in json.loads(body)["flavors"] if f["name"] == FLAVOR)
    return next(n for n in f["nodeList"] if n["name"] == node)


def test_shares_of_one_l40s_are_allocated_and_counted(kubectl, stack, clean, files,
                                                       l40s_pools):
    k = kubectl
    clean(NS)
    node = l40s_pools[0]
    wait_until("the pool knows the node's 8 units",
               lambda: node_pool(stack, node)["capacity"] == 8, 30, 0.5)

    r = k.apply_file(files / "nb-3.yaml",
                     pod("nb-3", NS, CLASS, 3, nodeSelector={HOSTNAME: node}))
    assert r.rc == 0, r
    assert "gpugate: notebook -> 3 x l40s-share (DRA) for tenant dra-share (3/10 in use)" \
        in r.err, r
    tmpl_name = k.get("pod", "nb-3", NS)["spec"]["resourceClaims"][0][
        "resourceClaimTemplateName"]
    tmpl = k.get("resourceclaimtemplate", tmpl_name, NS)
    ex = tmpl["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert (ex["count"], ex["capacity"]) == (1, {"requests": {"memory": "36Gi"}}), ex
    assert ex["selectors"][0]["cel"]["expression"].endswith(
        " && device.allowMultipleAllocations"), ex
    claim = running_with_share(k, "nb-3")
    (res,) = allocated_devices(claim)
    assert res["pool"] == f"l40s-{node}" and res["device"].startswith("l40s-"), res
    assert res.get("shareID"), res
    assert res["consumedCapacity"]["memory"] in ("36Gi", str(36 << 30)), res
    wait_until("usage 3: the pod's units, its claim riding", lambda: used(stack) == 3, 20)

    for name, units in (("nb-1", 1), ("nb-4", 4)):
        r = k.apply_file(files / f"{name}.yaml",
                         pod(name, NS, CLASS, units, nodeSelector={HOSTNAME: node}))
        assert r.rc == 0, r
        running_with_share(k, name)
    wait_until("usage 8", lambda: used(stack) == 8, 20)
    # Two devices of 48Gi: 36 + 12 + 48 in some order fill them both.
    n = wait_until("/pool: the node full", lambda: (lambda n: n if n["allocated"] == 8
                                                   else None)(node_pool(stack, node)),
                   20, 0.5)
    assert (n["capacity"], n["allocatable"], n["free"]) == (8, 8, 0), n

    # The scheduler agrees: one more unit does not fit on that node.
    r = k.apply_file(files / "nb-more.yaml",
                     pod("nb-more", NS, CLASS, 1, nodeSelector={HOSTNAME: node}))
    assert r.rc == 0, r

    def unschedulable():
        p = k.get("pod", "nb-more", NS)
        for c in (p.get("status") or {}).get("conditions") or []:
            if c["type"] == "PodScheduled" and c["status"] == "False":
                return c.get("reason") == "Unschedulable"
        return False
    wait_until("nb-more Unschedulable", unschedulable, 30, 0.5)
    assert not k.get("pod", "nb-more", NS)["spec"].get("nodeName")

    # The quota counts units: 9 in use (the waiting pod holds its unit), 3
    # more is over the nominal 10.
    wait_until("usage 9", lambda: used(stack) == 9, 20)
    r = k.apply_file(files / "nb-over.yaml", pod("nb-over", NS, CLASS, 3))
    assert r.rc != 0, r
    assert ('tenant "dra-share" is over its l40s-share quota: requested 3 (class notebook), '
            "in use 9 of nominal 10, no cohort to borrow from") in r.err, r

    # nb-4's share goes back: nb-more runs on the freed capacity.
    k("delete", "pod", "nb-4", "-n", NS, "--wait=false").check()
    e2e.force_delete(k, NS, e2e.terminating(
        k("get", "pods", "-n", NS, "-o", "json").json()["items"]))
    running_with_share(k, "nb-more", 90)
    wait_until("usage 5", lambda: used(stack) == 5, 30)
    n = wait_until("/pool: 3 free", lambda: (lambda n: n if n["free"] == 3 else None)(
        node_pool(stack, node)), 30, 0.5)
    assert n["allocated"] == 5, n
