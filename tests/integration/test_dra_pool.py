"""The pool of a DRA flavor (issue #33 step 4, docs/design/dra.md D3) over
the fake API: gpugate serve --kubeconfig lists and watches ResourceSlices,
DeviceTaintRules, DeviceClasses and ResourceClaims (kube/feed.c), reads
them (webhook/dra-facts.c) into the inventory, and /pool, the gpugate_pool_*
metrics and `gpugate pool` count devices: a device tainted by its slice or
by a DeviceTaintRule is out of allocatable and counted in devicesTainted
with the first one's reason, a device a claim's allocation names is
allocated, a slice of a newer generation of its pool replaces the old, and
without ResourceSlices (404) a DRA flavor's pool is not known while the
server goes on serving.

Watch events are waited for on /pool, never by sleeping.
"""

from __future__ import annotations

import subprocess

import pytest

from conftest import SLOW, metrics, poll
from test_pool import flavor, pool_gate, wait_pool  # noqa: F401  (pool_gate: a fixture)
from test_watch import kube  # noqa: F401  (the fixture)

DRIVER = "gpu.nvidia.com"
H100 = "NVIDIA H100 80GB HBM3"
POLICY = f"""\
version: 1
flavors:
  - name: h100-dra
    sharing: exclusive
    gpusPerNode: 8
    dra:
      deviceClassName: gpu.nvidia.com
      driver: {DRIVER}
      attributes: ["productName={H100}"]
      minCapacity: [memory=80Gi]
      selectors: ["device.attributes['gpu.nvidia.com'].brand == 'Nvidia'"]
classes:
  - {{name: train, flavor: h100-dra, gpus: 2, maxGpus: 4}}
tenants:
  - {{name: research, namespaces: ["research*"], quota: [{{flavor: h100-dra, nominal: 16}}]}}
"""
DRA_KINDS = ("resourceslices", "devicetaintrules", "deviceclasses")
XID = {"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoExecute"}


def kwok_node(name: str) -> dict:
    """A KWOK node: no device plugin, its GPUs only in ResourceSlices."""
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": f"uid-node-{name}",
                         "labels": {"type": "kwok", "kubernetes.io/hostname": name}},
            "spec": {},
            "status": {"capacity": {"cpu": "32", "memory": "256Gi", "pods": "110"},
                       "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def device(name: str, product: str = H100, memory: str = "80Gi",
           taints: list | None = None) -> dict:
    """A GPU as NVIDIA's kubelet plugin publishes it."""
    d = {"name": name,
         "attributes": {"productName": {"string": product}, "type": {"string": "gpu"},
                        "uuid": {"string": f"GPU-{name}-0000"},
                        "brand": {"string": "Nvidia"}},
         "capacity": {"memory": {"value": memory}}}
    if taints:
        d["taints"] = taints
    return d


def api_slice(node: str, devices: list, generation: int = 1, name: str | None = None) -> dict:
    name = name or f"{node}-{DRIVER}-g{generation}"
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": name, "uid": f"uid-slice-{name}"},
            "spec": {"driver": DRIVER, "nodeName": node,
                     "pool": {"name": node, "generation": generation,
                              "resourceSliceCount": 1},
                     "devices": devices}}


def taint_rule(name: str, pool: str, dev: str) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
            "metadata": {"name": name, "uid": f"uid-rule-{name}"},
            "spec": {"deviceSelector": {"driver": DRIVER, "pool": pool, "device": dev},
                     "taint": {"key": "maintenance", "value": "rma",
                               "effect": "NoSchedule"}}}


def allocated_claim(name: str, pool: str, dev: str) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "research", "uid": f"uid-claim-{name}"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "gpu.nvidia.com", "count": 1}}]}},
            "status": {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": DRIVER, "pool": pool, "device": dev}]}}}}


@pytest.fixture
def gate(pool_gate, kube, tmp_path):
    """gpugate serve with POLICY once its pool is synced; the DRA kinds
    served or not (404)."""
    def start(serve_dra: bool = True):
        for k in DRA_KINDS:
            kube.serve(k, serve_dra)
        path = tmp_path / "policy.yaml"
        path.write_text(POLICY)
        return pool_gate(path)
    return start


def dra_flavor(srv) -> dict:
    return flavor(srv, "h100-dra")


def wait_flavor(srv, check, what: str) -> dict:
    return wait_pool(srv, check, what, "h100-dra")


def gpugate_pool(gpugate_bin, kube, policy) -> subprocess.CompletedProcess:
    """gpugate pool, which succeeds and writes nothing on stderr."""
    out = subprocess.run([str(gpugate_bin), "pool", "--kubeconfig", str(kube.kubeconfig),
                          "--policy", str(policy)], capture_output=True, text=True,
                         timeout=120 * SLOW)
    assert (out.returncode, out.stderr) == (0, ""), out.stderr
    return out


def nodes(f: dict) -> dict[str, dict]:
    return {n["name"]: n for n in f["nodeList"]}


def cluster(kube) -> None:
    """Two KWOK nodes of four H100s each: node-a's gpu-1 tainted by its
    slice (an XID), node-b's gpu-2 by a DeviceTaintRule, node-a's gpu-0
    allocated; an L4 on node-b is no device of the flavor."""
    kube.put("nodes", kwok_node("node-a"), kwok_node("node-b"))
    kube.put("resourceslices",
             api_slice("node-a", [device("gpu-0"), device("gpu-1", taints=[XID]),
                                  device("gpu-2"), device("gpu-3")]),
             api_slice("node-b", [device(f"gpu-{i}") for i in range(4)] +
                       [device("gpu-4", product="NVIDIA L4", memory="24Gi")]))
    kube.put("devicetaintrules", taint_rule("rma-gpu-2", "node-b", "gpu-2"))
    kube.put("claims", allocated_claim("train-0", "node-a", "gpu-0"))


def test_the_pool_of_a_dra_flavor_counts_devices(gate, kube, gpugate_bin):
    cluster(kube)
    srv = gate()
    f = wait_flavor(srv, lambda f: f["known"] and f["capacity"] == 8, "8 devices known")
    assert (f["units"], f["approximate"]) == ("devices", True), f
    assert (f["nodes"], f["usable"], f["capacity"], f["allocatable"], f["allocated"],
            f["free"], f["devicesTainted"]) == (2, 2, 8, 6, 1, 5, 2), f
    n = nodes(f)
    assert (n["node-a"]["capacity"], n["node-a"]["allocatable"], n["node-a"]["allocated"],
            n["node-a"]["free"]) == (4, 3, 1, 2), n
    assert (n["node-b"]["capacity"], n["node-b"]["allocatable"], n["node-b"]["allocated"],
            n["node-b"]["free"]) == (4, 3, 0, 3), n
    assert n["node-a"]["devicesTainted"] == 1, n
    assert n["node-a"]["deviceWhy"] == "gpu-1: taint gpu.nvidia.com/xid=79:NoExecute", n
    assert n["node-b"]["devicesTainted"] == 1, n
    assert n["node-b"]["deviceWhy"] == (
        "gpu-2: DeviceTaintRule rma-gpu-2: taint maintenance=rma:NoSchedule"), n

    with srv.client() as c:
        m = metrics(c)
    assert m['gpugate_pool_devices_tainted{flavor="h100-dra"}'] == 2, m
    assert m["gpugate_pool_dra_known"] == 1, m
    assert m['gpugate_pool_capacity_units{flavor="h100-dra"}'] == 8, m
    assert m['gpugate_pool_free_units{flavor="h100-dra"}'] == 5, m
    with srv.client() as c:
        text = c.get("/metrics").text
    assert "# HELP gpugate_pool_devices_tainted DRA flavors: devices of the usable " \
           "nodes with a taint" in text, text

    # The claim is released (deleted): its device is free again.
    kube.event("claims", "DELETED", allocated_claim("train-0", "node-a", "gpu-0"))
    f = wait_flavor(srv, lambda f: f["allocated"] == 0, "the claim's device freed")
    assert f["free"] == 6, f

    # The rule goes: node-b's gpu-2 is back.
    kube.event("devicetaintrules", "DELETED", taint_rule("rma-gpu-2", "node-b", "gpu-2"))
    f = wait_flavor(srv, lambda f: f["devicesTainted"] == 1, "the rule gone")
    assert "devicesTainted" not in nodes(f)["node-b"], f

    # A newer generation of node-a's pool replaces the old slice (the
    # driver republished it: two GPUs, none tainted), before the old one
    # is deleted.
    kube.event("resourceslices", "ADDED",
               api_slice("node-a", [device("gpu-0"), device("gpu-1")], generation=2))
    f = wait_flavor(srv, lambda f: nodes(f)["node-a"]["capacity"] == 2,
                    "generation 2 of node-a's pool")
    assert "devicesTainted" not in nodes(f)["node-a"], f
    assert (f["capacity"], f["devicesTainted"]) == (6, 0), f

    # gpugate pool says it too.
    out = gpugate_pool(gpugate_bin, kube, srv.policy)
    assert ("h100-dra: units are devices, an upper bound (dra.selectors are CEL "
            "gpugate does not evaluate); 0 tainted\n") in out.stdout, out.stdout


def test_gpugate_pool_names_the_tainted_devices(kube, gpugate_bin, tmp_path):
    cluster(kube)
    for k in DRA_KINDS:
        kube.serve(k, True)
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    out = gpugate_pool(gpugate_bin, kube, path)
    assert ("\nDEVICES (DRA flavors: ResourceSlices, DeviceTaintRules, claims)\n"
            "h100-dra: units are devices, an upper bound (dra.selectors are CEL gpugate "
            "does not evaluate); 2 tainted\n"
            "  node-a               1 tainted (gpu-1: taint gpu.nvidia.com/xid=79:NoExecute)\n"
            "  node-b               1 tainted (gpu-2: DeviceTaintRule rma-gpu-2: taint "
            "maintenance=rma:NoSchedule)\n") in out.stdout, out.stdout


def test_without_resource_slices_a_dra_flavor_is_not_known(gate, kube):
    cluster(kube)
    srv = gate(serve_dra=False)
    poll(lambda: 'msg="not served" kind=resourceslices '
         'path=/apis/resource.k8s.io/v1/resourceslices' in srv.stderr_text(),
         "the slices' list answered 404")
    f = dra_flavor(srv)
    assert (f["units"], f["known"], f["capacity"]) == ("devices", False, 0), f
    with srv.client() as c:
        m = metrics(c)
        assert c.get("/readyz").status == 200
    assert m["gpugate_pool_dra_known"] == 0, m
    assert m["gpugate_pool_synced"] == 1, m
