"""Issue #33 step 5a (docs/design/dra.md "Step 5a: MIG through counters"):
partitionable devices (KEP-4815) against the real kube-apiserver,
kube-scheduler and kube-controller-manager v1.37.2 (DRAPartitionableDevices
is beta and on by default) on one KWOK node, NODE, published by the admin
as NVIDIA's plugin publishes an A100 40GB with MIG: pool NODE of driver
gpu.nvidia.com in two ResourceSlices, one with the counter set
gpu-0-counter-set (98 multiprocessors, 40Gi, memory-slice-0..7) and one
with the full GPU gpu-0 (type gpu, consuming all of it) and two 1g.5gb
partitions (type mig, profile 1g.5gb, 14 multiprocessors, 5Gi and one
memory slice each).

A gpugate of this module (COUNTERS_POLICY: whole-GPU flavor a100-dra
{type=gpu}, MIG flavor mig-1g {type=mig, profile=1g.5gb}) watches the
cluster and is asked /pool; it admits nothing (no webhook points at it).
The pods live in kube-system (no gpugate webhook there) and get their
devices from ResourceClaimTemplates with the CEL a class's template
carries (dra-template: the driver and the flavor's attributes), so that
their claims come and go with them as a class pod's do.  Asserted:

a. a whole-GPU pod runs with gpu-0; a MIG pod then stays Pending (its
   claim unallocated, FailedScheduling) while /pool shows mig-1g's two
   partitions blocked (free 0, devicesBlocked 2, blockedWhy naming gpu-0
   and memory, the first counter in the apiserver's sorted map)
   and gpugate_pool_devices_blocked{flavor="mig-1g"} 2: gpugate's rule is
   the scheduler's;
b. the whole-GPU pod deleted (its claim with it): the MIG pod runs on a
   partition; /pool: mig-1g allocated 1, free 1, nothing blocked; a100-dra
   blocked 1 (gpu-0, by the partition); a second whole-GPU pod stays
   Pending.

Everything is deleted after the module, pass or fail.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from test_dra_doors import events
from test_pool import pool_of

from gpugate_e2e import (DRA_DRIVER, allocated_devices, container, pod, wait_until)

NODE = "mig-a100-0"
NS = "kube-system"              # no gpugate webhook: the scheduler alone decides
LABEL = "e2e.gpugate.io/counters"
SET = "gpu-0-counter-set"
DEVICE_CLASS = "e2e-counters.gpu.nvidia.com"
GPU_TEMPLATE = "e2e-counters-gpu"
MIG_TEMPLATE = "e2e-counters-mig"
PARTITIONS = ["gpu-0-mig-1g-5gb-0", "gpu-0-mig-1g-5gb-1"]
COUNTERS_POLICY = f"""\
version: 1
flavors:
  - name: a100-dra
    sharing: exclusive
    gpusPerNode: 8
    dra:
      deviceClassName: {DEVICE_CLASS}
      driver: {DRA_DRIVER}
      attributes: [type=gpu]
  - name: mig-1g
    sharing: mig
    gpusPerNode: 8
    dra:
      deviceClassName: {DEVICE_CLASS}
      driver: {DRA_DRIVER}
      attributes: [type=mig, profile=1g.5gb]
classes: []
tenants: []
"""
GPU_SET = {"multiprocessors": "98", "memory": "40Gi",
           **{f"memory-slice-{i}": "1" for i in range(8)}}


# ---------------------------------------------------------------------------
# the node, as the admin (NVIDIA's plugin would publish the slices)


def counters(values: dict[str, str]) -> dict:
    return {k: {"value": v} for k, v in values.items()}


def partition(index: int) -> dict:
    return {"name": PARTITIONS[index],
            "attributes": {"type": {"string": "mig"}, "profile": {"string": "1g.5gb"},
                           "parentMinor": {"int": 0}, "productName": {
                               "string": "NVIDIA A100-SXM4-40GB"}},
            "capacity": {"memory": {"value": "5Gi"}, "multiprocessors": {"value": "14"}},
            "consumesCounters": [{"counterSet": SET, "counters": counters(
                {"multiprocessors": "14", "memory": "5Gi",
                 f"memory-slice-{index}": "1"})}]}


def slices() -> list[dict]:
    gpu = {"name": "gpu-0",
           "attributes": {"type": {"string": "gpu"}, "minor": {"int": 0},
                          "productName": {"string": "NVIDIA A100-SXM4-40GB"}},
           "capacity": {"memory": {"value": "40Gi"}, "multiprocessors": {"value": "98"}},
           "consumesCounters": [{"counterSet": SET, "counters": counters(GPU_SET)}]}

    def one(name: str, spec: dict) -> dict:
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                "metadata": {"name": name, "labels": {LABEL: "1"}},
                "spec": {"driver": DRA_DRIVER, "nodeName": NODE,
                         "pool": {"name": NODE, "generation": 1, "resourceSliceCount": 2},
                         **spec}}
    return [one(f"{NODE}-counters", {"sharedCounters": [
                {"name": SET, "counters": counters(GPU_SET)}]}),
            one(f"{NODE}-devices", {"devices": [gpu, partition(0), partition(1)]})]


def node() -> dict:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": NODE, "labels": {
                LABEL: "1", "type": "kwok", "kubernetes.io/hostname": NODE,
                "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"},
                "annotations": {"kwok.x-k8s.io/node": "fake"}},
            "spec": {},
            "status": {"capacity": {"cpu": "64", "memory": "512Gi", "pods": "110"},
                       "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"}}}


def template(name: str, cel: str) -> dict:
    """A claim template as gpugate makes a class's: one device of the class,
    the driver's and the flavor's attributes in CEL."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": NS, "labels": {LABEL: "1"}},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": DEVICE_CLASS, "allocationMode": "ExactCount", "count": 1,
                "selectors": [{"cel": {"expression": cel}}]}}]}}}}


def objects() -> list[dict]:
    attr = f"device.attributes['{DRA_DRIVER}']"
    return [
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
         "metadata": {"name": DEVICE_CLASS, "labels": {LABEL: "1"}},
         "spec": {"selectors": [{"cel": {
             "expression": f"device.driver == '{DRA_DRIVER}'"}}]}},
        template(GPU_TEMPLATE, f"{attr}.type == 'gpu'"),
        template(MIG_TEMPLATE, f"{attr}.type == 'mig' && {attr}.profile == '1g.5gb'"),
    ]


def cleanup(k) -> None:
    k("delete", "pods", "-n", NS, "-l", f"{LABEL}=1", "--ignore-not-found",
      "--grace-period=0", "--force", "--wait=true", timeout=120)
    k("delete", "resourceclaimtemplates", "-n", NS, "-l", f"{LABEL}=1",
      "--ignore-not-found", "--wait=true")
    k("delete", "resourceslices", "-l", f"{LABEL}=1", "--ignore-not-found", "--wait=true")
    k("delete", "deviceclass", DEVICE_CLASS, "--ignore-not-found", "--wait=true")
    k("delete", "node", NODE, "--ignore-not-found", "--wait=true")


@pytest.fixture(scope="module")
def mig_node(stack):
    k = stack.kubectl
    cleanup(k)
    try:
        k.apply({"apiVersion": "v1", "kind": "List", "items": [node()]}).check()
        wait_until(f"{NODE} Ready (KWOK)", lambda: any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in (k.get("node", NODE).get("status") or {}).get("conditions") or []),
            60, 0.5)
        for s in slices():
            r = k("create", "-f", "-", "-o", "json", input=json.dumps(s))
            assert r.rc == 0, r
        k.apply({"apiVersion": "v1", "kind": "List", "items": objects()}).check()
        yield NODE
    finally:
        cleanup(k)


@pytest.fixture(scope="module")
def gate(stack, mig_node, tmp_path_factory):
    """This module's gpugate: COUNTERS_POLICY, its pool only."""
    policy = Path(tmp_path_factory.mktemp("counters")) / "counters-policy.yaml"
    policy.write_text(COUNTERS_POLICY)
    g = stack.start_gate("counters", policy)
    try:
        g.wait_ready()
        yield g
    finally:
        problems = g.stop_and_check()
        stack.retired.append(g)
        assert problems == [], problems


# ---------------------------------------------------------------------------
# pods and /pool


def mig_pod(name: str, tmpl: str) -> dict:
    c = container(resources={"claims": [{"name": "gpu"}]})
    return pod(name, NS, labels={LABEL: "1"}, containers=[c],
               nodeSelector={"kubernetes.io/hostname": NODE},
               tolerations=[{"operator": "Exists"}],
               resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": tmpl}])


def claim_of(k, name: str) -> dict | None:
    p = k.get("pod", name, NS)
    for s in (p.get("status") or {}).get("resourceClaimStatuses") or []:
        if s.get("resourceClaimName"):
            r = k("get", "resourceclaim", s["resourceClaimName"], "-n", NS, "-o", "json")
            return r.json() if r.rc == 0 else None
    return None


def running_with(k, name: str, timeout: float = 60.0) -> list[str]:
    """Waits until pod NAME runs on NODE with its claim allocated; its devices."""
    def ok():
        p = k.get("pod", name, NS)
        c = claim_of(k, name)
        if ((p.get("status") or {}).get("phase") == "Running"
                and p["spec"].get("nodeName") == NODE and c and allocated_devices(c)):
            return [d["device"] for d in allocated_devices(c)]
        return None
    return wait_until(f"{name} Running on {NODE} with its devices", ok, timeout, 0.25)


def stays_pending(k, name: str, seconds: float = 5.0) -> list[str]:
    """Pod NAME gets FailedScheduling and stays unbound, its claim
    unallocated, for SECONDS; its scheduling events."""
    uid = k.get("pod", name, NS)["metadata"]["uid"]
    ev = wait_until(f"{name}: FailedScheduling",
                    lambda: [e for e in events(k, NS, uids={uid})
                             if " FailedScheduling: " in e], 30, 0.5)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        assert not k.get("pod", name, NS)["spec"].get("nodeName")
        c = claim_of(k, name)
        assert c is None or not allocated_devices(c), c
        time.sleep(0.5)
    return ev


def flavor(g, name: str) -> dict:
    return next(f for f in pool_of(g)["flavors"] if f["name"] == name)


def wait_flavor(g, name: str, want: dict, what: str, timeout: float = 30.0) -> dict:
    """/pool's flavor NAME on NODE with the fields of WANT (0: absent or 0)."""
    last: dict = {}

    def ok():
        f = flavor(g, name)
        n = next((n for n in f.get("nodeList") or [] if n["name"] == NODE), {})
        last.update(f={k: v for k, v in f.items() if k != "nodeList"}, n=n)
        return all((n.get(k) or 0) == v if isinstance(v, int) else n.get(k) == v
                   for k, v in want.items())
    try:
        wait_until(f"/pool {name}: {what}", ok, timeout, 0.25)
    except AssertionError as e:
        raise AssertionError(f"{e}; want {want}; last {json.dumps(last)}") from None
    print(f"/pool {name}: {json.dumps(last)}")
    return last["f"]


def blocked_gauge(g, name: str) -> int | None:
    m = re.search(r'^gpugate_pool_devices_blocked\{flavor="%s"\} (\d+)$' % name,
                  g.metrics(), re.M)
    return int(m.group(1)) if m else None


# ---------------------------------------------------------------------------
# a. a held GPU: the scheduler refuses its partitions, /pool shows them blocked


def test_a_a_held_gpu_blocks_its_partitions(kubectl, gate):
    k = kubectl
    wait_flavor(gate, "mig-1g", {"capacity": 2, "allocatable": 2, "free": 2,
                                 "devicesBlocked": 0}, "two free partitions")
    t0 = time.monotonic()
    k.create(mig_pod("e2e-counters-whole", GPU_TEMPLATE)).check()
    assert running_with(k, "e2e-counters-whole") == ["gpu-0"]
    print(f"whole-GPU pod running with gpu-0 in {time.monotonic() - t0:.1f}s")
    k.create(mig_pod("e2e-counters-part", MIG_TEMPLATE)).check()
    ev = stays_pending(k, "e2e-counters-part")
    print("the MIG pod:", ev[-1])
    f = wait_flavor(gate, "mig-1g",
                    {"capacity": 2, "allocatable": 2, "allocated": 0, "free": 0,
                     "devicesBlocked": 2,
                     # The apiserver keeps a map's keys sorted: memory is the
                     # first counter of the set.
                     "blockedWhy": f"{PARTITIONS[0]}: counter set {SET}: "
                                   "memory used by gpu-0"},
                    "both partitions blocked by the held GPU")
    assert (f["free"], f["devicesBlocked"], f["approximate"]) == (0, 2, False), f
    wait_flavor(gate, "a100-dra", {"capacity": 1, "allocated": 1, "free": 0,
                                   "devicesBlocked": 0}, "the GPU held")
    assert blocked_gauge(gate, "mig-1g") == 2
    assert blocked_gauge(gate, "a100-dra") == 0


# ---------------------------------------------------------------------------
# b. the GPU freed: the partition runs, and blocks the GPU in its turn


def test_b_the_gpu_freed_the_partition_runs(kubectl, gate):
    k = kubectl
    if k("get", "pod", "e2e-counters-part", "-n", NS).rc != 0:
        pytest.skip("test_a did not leave the MIG pod waiting")
    whole_claim = claim_of(k, "e2e-counters-whole")["metadata"]["name"]
    t0 = time.monotonic()
    k("delete", "pod", "e2e-counters-whole", "-n", NS, "--wait=true").check()
    wait_until("the whole-GPU pod's claim gone",
               lambda: k("get", "resourceclaim", whole_claim, "-n", NS).rc != 0, 60, 0.25)
    devs = running_with(k, "e2e-counters-part", timeout=120)
    print(f"MIG pod running with {devs} {time.monotonic() - t0:.1f}s after the "
          "whole-GPU pod's deletion")
    assert len(devs) == 1 and devs[0] in PARTITIONS, devs
    wait_flavor(gate, "mig-1g", {"allocated": 1, "free": 1, "devicesBlocked": 0},
                "one partition held, its sibling free")
    wait_flavor(gate, "a100-dra",
                {"allocated": 0, "free": 0, "devicesBlocked": 1,
                 "blockedWhy": f"gpu-0: counter set {SET}: memory used by {devs[0]}"},
                "the GPU blocked by the partition")
    assert blocked_gauge(gate, "a100-dra") == 1
    # The scheduler agrees: a whole-GPU pod waits.
    k.create(mig_pod("e2e-counters-whole-2", GPU_TEMPLATE)).check()
    stays_pending(k, "e2e-counters-whole-2")
