"""Issue #33 step 4, row 5 of docs/design/dra.md "What is tested how": device
taints as health signals of a DRA flavor's pool, against the real
kube-apiserver, kube-scheduler and kube-controller-manager v1.37.2 (no
feature gate: DRADeviceTaints and DRADeviceTaintRules are GA and on) on the
KWOK fleet's DRA nodes (fixture `dra_fleet`: h100-80gb-dra-0..5, one
ResourceSlice `<node>-gpu.nvidia.com` each, pool = the node's name, devices
gpu-0..7).

On node h100-80gb-dra-0 (NODE), as the admin (a driver or NVSentinel would):
device gpu-1 tainted NoSchedule in its slice (spec.devices[].taints), and a
DeviceTaintRule (resource.k8s.io/v1) NoExecute on gpu-2.  Asserted:

- gpugate's /pool (the "dra" gpugate, flavor h100-dra): the node's units
  are its devices: capacity 8, allocatable 6 (the untainted ones),
  devicesTainted 2, deviceWhy naming the first tainted device and its
  taint; the flavor's devicesTainted, units "devices";
- class pods of train-dra pinned to NODE (nodeSelector kubernetes.io/
  hostname, merged with the flavor's) get the 6 untainted devices and
  nothing else; one more stays Pending: the scheduler allocates neither
  tainted device;
- a DeviceTaintRule NoExecute on a device of a running pod: kube-controller-
  manager's device-taint-eviction-controller (tests/e2e/cluster.sh runs it)
  marks the pod (condition DisruptionTarget, reason
  DeletionByDeviceTaintManager; event DeviceTaintManagerEviction) and
  deletes it; KWOK stops it (Failed) and removes it; the resourceclaim
  controller deletes its claim; gpugate's usage and /pool let its units go,
  and /pool counts the third tainted device;
- the slice republished without its taint at the pool's next generation,
  then the rule deleted: the devices are back in /pool and the scheduler
  fills all 8 again.

/pool's deviceWhy is the node's first tainted device in the slice's order:
`gpu-1: taint e2e.gpugate.io/xid=79:NoSchedule`, and once the slice is
clean `gpu-2: DeviceTaintRule e2e-dra-pool-gpu-2: taint
e2e.gpugate.io/xid=79:NoExecute`.  /metrics' gpugate_pool_devices_tainted
{flavor="h100-dra"} follows the flavor's devicesTainted.

Every taint and rule is undone by the `taints` fixture (the slice put back
untainted at a new generation, the rules deleted), pass or fail: the DRA
fleet is the module's, its slices are gone with it anyway.
"""

from __future__ import annotations

import json
import re
import time

import pytest
from test_dra_classes import CLASS, FLAVOR, NS, pod_claim, running_with_devices, used
from test_dra_doors import events
from test_pool import pool_of

from gpugate_e2e import DRA_DRIVER, allocated_devices, container, pod, wait_until

NODE = "h100-80gb-dra-0"
DEVICES = [f"gpu-{i}" for i in range(8)]
HOSTNAME = "kubernetes.io/hostname"
KEY = "e2e.gpugate.io/xid"       # the taints' key, as a health agent would set one
VALUE = "79"
RULE_LABEL = "e2e.gpugate.io/dra-pool"
SLICE_TAINTED = "gpu-1"          # NoSchedule in the slice
RULE_TAINTED = "gpu-2"           # NoExecute by DeviceTaintRule RULE
RULE = "e2e-dra-pool-gpu-2"
UNTAINTED = [d for d in DEVICES if d not in (SLICE_TAINTED, RULE_TAINTED)]
# The fleet: 6 DRA H100 nodes of 8 devices.
FLEET_DEVICES = 48


# ---------------------------------------------------------------------------
# taints, as the admin


def slice_name(node: str) -> str:
    return f"{node}-{DRA_DRIVER}"


def taint(effect: str) -> dict:
    return {"key": KEY, "value": VALUE, "effect": effect}


def taint_rule(name: str, node: str, device: str, effect: str = "NoExecute") -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
            "metadata": {"name": name, "labels": {RULE_LABEL: "1"}},
            "spec": {"deviceSelector": {"driver": DRA_DRIVER, "pool": node, "device": device},
                     "taint": taint(effect)}}


class Taints:
    """Device taints on the fleet's slices and DeviceTaintRules, undone by
    restore()."""

    def __init__(self, kubectl):
        self.kubectl = kubectl
        self.slices: set[str] = set()   # nodes whose slice was changed

    def publish(self, node: str, taints: dict[str, list[dict]], bump: bool = False) -> dict:
        """Node's slice with TAINTS (device -> its taints; the other devices
        untainted), as a driver republishes it: in place, or at the pool's
        next generation (BUMP).  Returns the slice written."""
        k = self.kubectl
        s = k.get("resourceslice", slice_name(node))
        for d in s["spec"]["devices"]:
            if taints.get(d["name"]):
                d["taints"] = taints[d["name"]]
            else:
                d.pop("taints", None)
        if bump:
            s["spec"]["pool"]["generation"] += 1
        self.slices.add(node)
        r = k("replace", "-f", "-", "-o", "json", input=json.dumps(s))
        assert r.rc == 0, r
        return r.json()

    def rule(self, name: str, node: str, device: str, effect: str = "NoExecute") -> dict:
        r = self.kubectl("create", "-f", "-", "-o", "json",
                         input=json.dumps(taint_rule(name, node, device, effect)))
        assert r.rc == 0, r
        return r.json()

    def delete_rules(self) -> None:
        self.kubectl("delete", "devicetaintrules", "-l", f"{RULE_LABEL}=1",
                     "--wait=true").check()

    def restore(self) -> None:
        self.delete_rules()
        for node in sorted(self.slices):
            if self.kubectl("get", "resourceslice", slice_name(node)).rc == 0:
                self.publish(node, {}, bump=True)
        self.slices.clear()

    def row5(self) -> None:
        """Row 5's two taints on NODE: gpu-1 NoSchedule in its slice,
        DeviceTaintRule RULE NoExecute on gpu-2."""
        s = self.publish(NODE, {SLICE_TAINTED: [taint("NoSchedule")]})
        (d,) = [d for d in s["spec"]["devices"] if d["name"] == SLICE_TAINTED]
        # The apiserver stamps the taint's timeAdded.
        assert d["taints"][0].get("timeAdded"), d
        r = self.rule(RULE, NODE, RULE_TAINTED)
        assert r["spec"]["taint"].get("timeAdded"), r


@pytest.fixture
def taints(kubectl, dra_fleet):
    t = Taints(kubectl)
    try:
        yield t
    finally:
        t.restore()


# ---------------------------------------------------------------------------
# gpugate's /pool (the "dra" gpugate): the assertions of issue #33 step 4


def dra_flavor(gate) -> dict:
    return next(f for f in pool_of(gate)["flavors"] if f["name"] == FLAVOR)


def pool_node(flavor: dict, node: str = NODE) -> dict | None:
    return next((n for n in flavor.get("nodeList") or [] if n["name"] == node), None)


def why_slice(device: str = SLICE_TAINTED) -> str:
    return f"{device}: taint {KEY}={VALUE}:NoSchedule"


def why_rule(device: str = RULE_TAINTED, rule: str = RULE) -> str:
    return f"{device}: DeviceTaintRule {rule}: taint {KEY}={VALUE}:NoExecute"


def wait_pool(gate, what: str, want_flavor: dict, want_node: dict,
              why: str | None = None, timeout: float = 30.0) -> dict:
    """Waits until /pool's flavor h100-dra has the fields of WANT_FLAVOR and
    its node NODE those of WANT_NODE (a field 0: absent or 0), its
    deviceWhy WHY (None: absent); the flavor."""
    last: dict = {}

    def fields(obj: dict | None, want: dict) -> dict:
        return {k: (obj or {}).get(k) or None for k in want}

    def ok():
        f = dra_flavor(gate)
        n = pool_node(f)
        last.update(flavor={k: v for k, v in f.items() if k != "nodeList"}, node=n)
        if fields(f, want_flavor) != {k: v or None for k, v in want_flavor.items()}:
            return False
        if fields(n, want_node) != {k: v or None for k, v in want_node.items()}:
            return False
        return n is not None and n.get("deviceWhy") == why
    try:
        wait_until(f"/pool: {what}", ok, timeout, 0.25)
    except AssertionError as e:
        raise AssertionError(f"{e}; want flavor {want_flavor}, node {NODE} {want_node}, "
                             f"deviceWhy {why!r}; {gate.name} /pool: "
                             f"{json.dumps(last)}") from None
    f = dra_flavor(gate)
    # Units are devices; the node's numbers add up; /metrics says the same.
    assert f.get("units") == "devices", f
    assert f.get("known") is True, f
    assert f.get("approximate") is False, f  # DRA_POLICY has no dra.selectors (CEL)
    assert f["deviceClassName"] == DRA_DRIVER, f
    n = pool_node(f)
    assert n["state"] == "usable", n
    assert n["free"] == n["allocatable"] - n["allocated"], n
    assert f["free"] == f["allocatable"] - f["allocated"], f
    body = gate.metrics()
    assert re.search(r"^gpugate_pool_dra_known 1$", body, re.M), body
    m = re.search(r'^gpugate_pool_devices_tainted\{flavor="%s"\} (\d+)$' % FLAVOR, body, re.M)
    assert m and int(m.group(1)) == f.get("devicesTainted", 0), (m and m.group(0), f)
    print(f"/pool {FLAVOR}: {json.dumps({k: v for k, v in f.items() if k != 'nodeList'})}; "
          f"{NODE}: {json.dumps(n)}")
    return f


def wait_pool_tainted(gate, tainted: int, allocated: int, why: str,
                      timeout: float = 30.0) -> dict:
    """NODE with TAINTED of its 8 devices tainted and ALLOCATED of the
    others held, deviceWhy WHY (the first tainted device's, in the slice's
    order); no other node of the fleet tainted."""
    return wait_pool(
        gate, f"{NODE}: {tainted} devices tainted, {allocated} allocated",
        {"capacity": FLEET_DEVICES, "allocatable": FLEET_DEVICES - tainted,
         "devicesTainted": tainted},
        {"capacity": 8, "allocatable": 8 - tainted, "allocated": allocated,
         "free": 8 - tainted - allocated, "devicesTainted": tainted},
        why, timeout)


# ---------------------------------------------------------------------------
# pods


def pinned(name: str, gpus: int, node: str = NODE) -> dict:
    """A train-dra pod of GPUS devices on NODE only."""
    return pod(name, NS, CLASS, gpus, containers=[container()],
               nodeSelector={HOSTNAME: node})


def run_pinned(kubectl, files, *pods: tuple[str, int]) -> dict[str, list[str]]:
    """Creates the pinned pods, waits until each runs on NODE with its
    devices; {pod: its devices}."""
    for name, gpus in pods:
        r = kubectl.apply_file(files / f"{name}.yaml", pinned(name, gpus))
        assert r.rc == 0, r
    out = {}
    for name, gpus in pods:
        claim = running_with_devices(kubectl, name, gpus)
        assert kubectl.get("pod", name, NS)["spec"]["nodeName"] == NODE
        devs = allocated_devices(claim)
        assert {(d["driver"], d["pool"]) for d in devs} == {(DRA_DRIVER, NODE)}, devs
        out[name] = [d["device"] for d in devs]
    return out


def wait_used(stack, n: float, timeout: float = 60.0) -> None:
    wait_until(f"gpugate_quota_used{{tenant=dra,flavor={FLAVOR}}} == {n}",
               lambda: used(stack) == n, timeout, 0.25)


# ---------------------------------------------------------------------------
# a. both tainted devices out of /pool


def test_a_tainted_devices_are_out_of_the_pool(kubectl, stack, taints):
    gate = stack.gates["dra"]
    wait_pool(gate, "the fleet untainted",
              {"capacity": FLEET_DEVICES, "allocatable": FLEET_DEVICES,
               "devicesTainted": 0},
              {"capacity": 8, "allocatable": 8, "devicesTainted": 0})
    taints.row5()
    f = wait_pool_tainted(gate, 2, 0, why_slice())
    # Only NODE's devices: every other node of the fleet whole.
    for n in f["nodeList"]:
        if n["name"] != NODE:
            assert (n["capacity"], n["allocatable"], n.get("devicesTainted", 0)) == (8, 8, 0), n
    # A NoSchedule rule counts the same; effect None does not (it informs).
    taints.rule("e2e-dra-pool-gpu-3", NODE, "gpu-3", "NoSchedule")
    taints.rule("e2e-dra-pool-gpu-4", NODE, "gpu-4", "None")
    wait_pool_tainted(gate, 3, 0, why_slice())


# ---------------------------------------------------------------------------
# b. the scheduler allocates neither


def test_b_the_scheduler_allocates_no_tainted_device(kubectl, stack, clean, files, taints):
    clean(NS)
    taints.row5()
    held = run_pinned(kubectl, files, ("fill-4", 4), ("fill-2", 2))
    got = sorted(d for devs in held.values() for d in devs)
    assert got == UNTAINTED, f"NODE's devices allocated: {held}"
    wait_used(stack, 6)
    # One more device on NODE: only the tainted two are left.
    r = kubectl.apply_file(files / "one-more.yaml", pinned("one-more", 1))
    assert r.rc == 0, r
    uid = kubectl.get("pod", "one-more", NS)["metadata"]["uid"]
    wait_until("one-more: FailedScheduling",
               lambda: any(" FailedScheduling: " in e
                           for e in events(kubectl, NS, uids={uid})), 30, 0.5)
    end = time.monotonic() + 5
    while time.monotonic() < end:
        p = kubectl.get("pod", "one-more", NS)
        assert not p["spec"].get("nodeName"), p["spec"].get("nodeName")
        c = pod_claim(kubectl, "one-more")
        assert c is None or not allocated_devices(c), c
        time.sleep(0.5)
    wait_pool_tainted(stack.gates["dra"], 2, 6, why_slice())


# ---------------------------------------------------------------------------
# c. a NoExecute rule evicts the pod running on the device


def test_c_a_noexecute_rule_evicts_the_running_pod(kubectl, stack, clean, files, taints):
    clean(NS)
    taints.row5()
    held = run_pinned(kubectl, files, ("stays", 4), ("victim", 2))
    wait_used(stack, 6)
    gate = stack.gates["dra"]
    victim = kubectl.get("pod", "victim", NS)
    claim = pod_claim(kubectl, "victim")["metadata"]["name"]
    hit = held["victim"][0]
    t0 = time.monotonic()
    taints.rule("e2e-dra-pool-evict", NODE, hit)
    # Marked, deleted, stopped by KWOK, removed; its claim deleted.
    wait_until("victim and its claim gone",
               lambda: kubectl("get", "pod", "victim", "-n", NS).rc != 0
               and kubectl("get", "resourceclaim", claim, "-n", NS).rc != 0, 60, 0.25)
    took = time.monotonic() - t0
    ev = events(kubectl, NS, uids={victim["metadata"]["uid"]})
    assert "Pod/victim DeviceTaintManagerEviction: Marking for deletion" in ev, ev
    print(f"eviction: victim and its claim gone {took:.1f}s after the rule")
    assert kubectl.get("pod", "stays", NS)["status"]["phase"] == "Running"
    wait_used(stack, 4, timeout=30)
    wait_pool_tainted(gate, 3, 4, why_slice())

    def status():
        r = kubectl.get("devicetaintrule", "e2e-dra-pool-evict")
        return {c["type"]: c for c in (r.get("status") or {}).get("conditions") or []}
    wait_until("the rule's EvictionInProgress condition: Completed",
               lambda: (status().get("EvictionInProgress") or {}).get("reason") == "Completed",
               30, 0.5)
    print("rule status:", json.dumps(status()))


# ---------------------------------------------------------------------------
# d. untainted, the devices come back


def test_d_the_devices_come_back(kubectl, stack, clean, files, taints):
    clean(NS)
    taints.row5()
    gate = stack.gates["dra"]
    wait_pool_tainted(gate, 2, 0, why_slice())
    # The slice republished without its taint at the pool's next
    # generation, as a driver would: the rule's device is the first left.
    before = kubectl.get("resourceslice", slice_name(NODE))["spec"]["pool"]["generation"]
    s = taints.publish(NODE, {}, bump=True)
    assert s["spec"]["pool"]["generation"] == before + 1, s["spec"]["pool"]
    wait_pool_tainted(gate, 1, 0, why_rule())
    taints.delete_rules()
    wait_pool(gate, "the devices back",
              {"capacity": FLEET_DEVICES, "allocatable": FLEET_DEVICES,
               "devicesTainted": 0},
              {"capacity": 8, "allocatable": 8, "allocated": 0, "free": 8,
               "devicesTainted": 0})
    held = run_pinned(kubectl, files, ("back-a", 4), ("back-b", 4))
    assert sorted(d for devs in held.values() for d in devs) == DEVICES, held
    wait_used(stack, 8)
    wait_pool(gate, "the node full",
              {"capacity": FLEET_DEVICES, "allocatable": FLEET_DEVICES,
               "devicesTainted": 0},
              {"capacity": 8, "allocatable": 8, "allocated": 8, "free": 0,
               "devicesTainted": 0})
