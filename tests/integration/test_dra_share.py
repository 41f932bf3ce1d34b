"""The pool of a DRA flavor shared by capacity (dra.sharedCapacity, issue
#33) over the fake API: devices that allow multiple allocations hold
floor(memory / perUnit) units each; the claims' results with
consumedCapacity use them up, shares of one device summed; a device that
allows a single allocation is not the flavor's.

Watch events are waited for on /pool, never by sleeping.
"""

from __future__ import annotations

import pytest

from test_dra_pool import DRA_KINDS, DRIVER, api_slice, kwok_node
from test_pool import flavor, pool_gate, wait_pool  # noqa: F401  (pool_gate: a fixture)
from test_watch import kube  # noqa: F401  (the fixture)

L40S = "NVIDIA L40S"
POLICY = f"""\
version: 1
flavors:
  - name: l40s-share
    sharing: time-slicing
    gpusPerNode: 32
    dra:
      deviceClassName: gpu.nvidia.com
      driver: {DRIVER}
      attributes: ["productName={L40S}"]
      sharedCapacity: {{name: memory, perUnit: 12Gi, unitsPerDevice: 4}}
classes:
  - {{name: notebook, flavor: l40s-share, gpus: 1, maxGpus: 4}}
tenants:
  - {{name: research, namespaces: [research], quota: [{{flavor: l40s-share, nominal: 16}}]}}
"""


def l40s(name: str, shared: bool = True) -> dict:
    d = {"name": name,
         "attributes": {"productName": {"string": L40S}, "type": {"string": "gpu"}},
         "capacity": {"memory": {"value": "48Gi"}, "multiprocessors": {"value": "142"}}}
    if shared:
        d["allowMultipleAllocations"] = True
    return d


def share(name: str, uid: str, device: str, memory: str) -> dict:
    """A claim allocated a share of node-a's DEVICE, as the scheduler
    writes it (every capacity consumed, zeros too)."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "research", "uid": uid},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "gpu.nvidia.com", "count": 1,
                "capacity": {"requests": {"memory": memory}}}}]}},
            "status": {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": DRIVER, "pool": "node-a", "device": device,
                 "shareID": f"{uid}-share",
                 "consumedCapacity": {"memory": memory, "multiprocessors": "0"}}]}}}}


@pytest.fixture
def gate(pool_gate, kube, tmp_path):
    for k in DRA_KINDS:
        kube.serve(k, True)
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    return lambda: pool_gate(path)


def test_shares_of_a_device_use_its_units(gate, kube):
    kube.put("nodes", kwok_node("node-a"))
    kube.put("resourceslices", api_slice("node-a", [l40s("gpu-0"), l40s("gpu-1"),
                                                    l40s("gpu-2", shared=False)]))
    kube.put("claims", share("nb-1", "uid-nb-1", "gpu-0", "12Gi"),
             share("nb-2", "uid-nb-2", "gpu-0", "20Gi"))
    srv = gate()
    # gpu-0: 48Gi, 32Gi consumed by two shares: 16Gi left, 1 unit; gpu-1
    # free (4); gpu-2 allows one allocation: not the flavor's.
    f = wait_pool(srv, lambda f: f["known"] and f["capacity"] == 8, "8 units known",
                  "l40s-share")
    assert (f["units"], f["allocatable"], f["allocated"], f["free"]) == \
        ("shares of 12Gi gpu.nvidia.com memory", 8, 3, 5), f
    # One share goes: 36Gi left on gpu-0, 3 units.
    kube.event("claims", "DELETED", share("nb-2", "uid-nb-2", "gpu-0", "20Gi"))
    f = wait_pool(srv, lambda f: f["allocated"] == 1, "the 20Gi share gone", "l40s-share")
    assert f["free"] == 7, f
    # A whole-device claim of gpu-1 (no consumedCapacity): all of it.
    whole = share("all", "uid-all", "gpu-1", "48Gi")
    del whole["status"]["allocation"]["devices"]["results"][0]["consumedCapacity"]
    kube.event("claims", "ADDED", whole)
    f = wait_pool(srv, lambda f: f["allocated"] == 5, "gpu-1 taken whole", "l40s-share")
    assert f["free"] == 3, f
    assert flavor(srv, "l40s-share")["nodeList"][0]["free"] == 3
