"""MIG through counters in the pool of DRA flavors (issue #33 step 5a,
docs/design/dra.md "Step 5a: MIG through counters") over the fake API: a
node publishes, as NVIDIA's plugin does since 1.34, a counter set
gpu-0-counter-set in one ResourceSlice and, in another of the same pool,
the full GPU gpu-0 and two 1g.5gb MIG partitions that consume from it.
A claim's allocation of the GPU leaves the partitions blocked (free 0,
devicesBlocked 2, blockedWhy naming the GPU); freeing the claim frees
them again.  Watch events are waited for on /pool, never by sleeping.
"""

from __future__ import annotations

import pytest

from conftest import metrics
from test_dra_pool import DRA_KINDS, gpugate_pool, kwok_node, nodes
from test_pool import pool_gate, wait_pool  # noqa: F401  (pool_gate: a fixture)
from test_watch import kube  # noqa: F401  (the fixture)

DRIVER = "gpu.nvidia.com"
SET = "gpu-0-counter-set"
POLICY = f"""\
version: 1
flavors:
  - name: a100
    sharing: exclusive
    gpusPerNode: 8
    dra:
      deviceClassName: gpu.nvidia.com
      driver: {DRIVER}
      attributes: [type=gpu]
  - name: mig-1g
    sharing: mig
    gpusPerNode: 8
    dra:
      deviceClassName: mig.nvidia.com
      driver: {DRIVER}
      attributes: [type=mig, profile=1g.5gb]
classes:
  - {{name: whole, flavor: a100, gpus: 1}}
  - {{name: slice, flavor: mig-1g, gpus: 1}}
tenants:
  - {{name: research, namespaces: ["research*"], quota: [{{flavor: a100, nominal: 8}},
                                                       {{flavor: mig-1g, nominal: 8}}]}}
"""


def counters(value: dict) -> dict:
    return {k: {"value": v} for k, v in value.items()}


# An A100 40GB as NVIDIA's plugin models it: 98 multiprocessors, 40Gi,
# 8 memory slices; the full GPU consumes all of it, a 1g.5gb 14
# multiprocessors, 5Gi and one memory slice.
GPU_SET = {"multiprocessors": "98", "memory": "40Gi",
           **{f"memory-slice-{i}": "1" for i in range(8)}}


def mig(index: int) -> dict:
    return {"name": f"gpu-0-mig-1g-5gb-{index}",
            "attributes": {"type": {"string": "mig"}, "profile": {"string": "1g.5gb"},
                           "parentMinor": {"int": 0}},
            "capacity": {"memory": {"value": "5Gi"}},
            "consumesCounters": [{"counterSet": SET, "counters": counters(
                {"multiprocessors": "14", "memory": "5Gi",
                 f"memory-slice-{index}": "1"})}]}


GPU = {"name": "gpu-0",
       "attributes": {"type": {"string": "gpu"}, "productName": {"string": "NVIDIA A100"},
                      "minor": {"int": 0}},
       "capacity": {"memory": {"value": "40Gi"}},
       "consumesCounters": [{"counterSet": SET, "counters": counters(GPU_SET)}]}


def slices(node: str) -> list[dict]:
    """The pool of node in two slices: the counter set, then the devices
    (a slice carries one or the other)."""
    def one(name: str, spec: dict) -> dict:
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                "metadata": {"name": name, "uid": f"uid-slice-{name}"},
                "spec": {"driver": DRIVER, "nodeName": node,
                         "pool": {"name": node, "generation": 1, "resourceSliceCount": 2},
                         **spec}}
    return [one(f"{node}-counters", {"sharedCounters": [
                {"name": SET, "counters": counters(GPU_SET)}]}),
            one(f"{node}-devices", {"devices": [GPU, mig(0), mig(1)]})]


def claim(name: str, device: str) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "research", "uid": f"uid-claim-{name}"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "gpu.nvidia.com", "count": 1}}]}},
            "status": {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": DRIVER, "pool": "node-a", "device": device}]}}}}


@pytest.fixture
def gate(pool_gate, kube, tmp_path):
    for k in DRA_KINDS:
        kube.serve(k, True)
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    kube.put("nodes", kwok_node("node-a"))
    kube.put("resourceslices", *slices("node-a"))
    return pool_gate(path)


def test_an_allocated_gpu_blocks_its_partitions_until_freed(gate, kube, gpugate_bin):
    srv = gate
    f = wait_pool(srv, lambda f: f["known"] and f["capacity"] == 2, "the partitions", "mig-1g")
    assert (f["allocatable"], f["allocated"], f["free"], f["devicesBlocked"]) == \
        (2, 0, 2, 0), f
    # Nothing held: the free GPU and its free partitions cannot all be had.
    assert (f["approximate"], f["devicesCompete"]) == (True, True), f

    kube.event("claims", "ADDED", claim("whole-0", "gpu-0"))
    f = wait_pool(srv, lambda f: f["devicesBlocked"] == 2, "the GPU held", "mig-1g")
    assert (f["capacity"], f["allocatable"], f["allocated"], f["free"]) == (2, 2, 0, 0), f
    assert (f["approximate"], f["devicesCompete"]) == (False, False), f
    n = nodes(f)["node-a"]
    assert (n["devicesBlocked"], n["free"]) == (2, 0), n
    assert n["blockedWhy"] == (f"gpu-0-mig-1g-5gb-0: counter set {SET}: "
                               "multiprocessors used by gpu-0"), n
    g = wait_pool(srv, lambda f: f["allocated"] == 1, "the GPU allocated", "a100")
    assert (g["free"], g["devicesBlocked"]) == (0, 0), g
    with srv.client() as c:
        m = metrics(c)
        text = c.get("/metrics").text
    assert m['gpugate_pool_devices_blocked{flavor="mig-1g"}'] == 2, m
    assert m['gpugate_pool_devices_blocked{flavor="a100"}'] == 0, m
    assert m['gpugate_pool_free_units{flavor="mig-1g"}'] == 0, m
    assert "# HELP gpugate_pool_devices_blocked DRA flavors: devices of the usable " \
           "nodes that no claim holds" in text, text
    out = gpugate_pool(gpugate_bin, kube, srv.policy)
    assert ("mig-1g: units are devices; 0 tainted, 2 blocked by counters\n"
            "  node-a               2 blocked by counters (gpu-0-mig-1g-5gb-0: counter set "
            f"{SET}: multiprocessors used by gpu-0)\n") in out.stdout, out.stdout

    # The claim is freed: the partitions are free again.
    kube.event("claims", "DELETED", claim("whole-0", "gpu-0"))
    f = wait_pool(srv, lambda f: f["devicesBlocked"] == 0, "the GPU freed", "mig-1g")
    assert (f["free"], f["allocated"]) == (2, 0), f
    assert "devicesBlocked" not in nodes(f)["node-a"], f


def test_an_allocated_partition_blocks_the_gpu_not_its_sibling(gate, kube):
    srv = gate
    wait_pool(srv, lambda f: f["known"] and f["capacity"] == 1, "the GPU", "a100")
    kube.event("claims", "ADDED", claim("slice-0", "gpu-0-mig-1g-5gb-1"))
    g = wait_pool(srv, lambda f: f["devicesBlocked"] == 1, "a partition held", "a100")
    assert (g["free"], g["allocated"]) == (0, 0), g
    assert nodes(g)["node-a"]["blockedWhy"] == (
        f"gpu-0: counter set {SET}: multiprocessors used by gpu-0-mig-1g-5gb-1"), g
    f = wait_pool(srv, lambda f: f["allocated"] == 1, "the partition held", "mig-1g")
    assert (f["free"], f["devicesBlocked"]) == (1, 0), f
