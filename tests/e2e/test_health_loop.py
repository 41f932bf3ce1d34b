"""The health loop closed (issue #30 item 6) on a fake GPU fleet of its own.

A gpugate of this module (stack.gates["health"], namespaces labelled
e2e.gpugate.io/policy=health) serves HEALTH_POLICY: flavor h200-141gb on
three KWOK nodes made here (h200-141gb-0..2, 8 GPUs each), class `gpu`
(not preemptible) and class `ckpt` (preemptible), tenant hl (namespace
health-a), checkpoint.timeoutSeconds 4, and
health.returnAfter {validationLabel: gpugate.io/validated=true,
settleSeconds: 2}.  It is the only gpugate of the session that runs the
health controller (the session's gates run with --no-node-health,
gpugate_e2e.NO_NODE_HEALTH): gpugate's taint and record on a Node are
written by one policy, as in a cluster, and the session's gates, for which
these nodes are of no flavor, would otherwise remove them.  Its own flavor keeps the
session's gates' reclaimers off these nodes too (a failing node of theirs
would tell this tenant's pods "no tenant's workload").

What a health system does is done here as the admin: a condition
GpuXidError=True (NVSentinel's GPU health monitor, a default signal) put on
the Node through the status subresource, then False, as NVSentinel's
platform connector writes them; KWOK leaves a condition it does not own
alone (its node stages patch status.conditions by strategic merge, keyed by
type, and rewrite only the kubelet's five); NVSentinel's state
label dgxc.nvidia.com/nvsentinel-state=draining (a default signal and the
default health.drainedBy).  The validation label is what a DCGM diagnostic
or a remediation would set.

  test_a_failing_node_moves_preemptible_work_and_tells_the_rest
      a preemptible Job on node A, a preemptible bare pod and a
      non-preemptible pod beside it; A gets GpuXidError: A is tainted
      gpugate.io/unhealthy=health:NoSchedule with gpugate's record and a
      GPUNodeUnhealthy Event; the Job, its pod and the bare pod get the
      checkpoint request and a GPUReclaim Event "node A is failing (...)";
      the trainer reports; the Job is suspended (label gpugate.io/reclaimed),
      resumed by gpugate, and its new pod runs on another node; the bare
      pod, which never reports, is evicted after the checkpoint timeout; the
      non-preemptible pod gets one GPUNodeFailing Event and is neither
      signalled nor evicted, past the checkpoint timeout.
  test_a_cleared_node_is_validated_before_it_returns
      the condition turns False: A stays out, `validating` (taint value,
      record cleared, GPUNodeValidating, /pool and `gpugate pool`), a pod
      pinned to A waits on the taint; the settle time alone does not bring
      it back; the validation label does: marks gone, GPUNodeReturned, the
      pinned pod runs on A.
  test_a_node_nvsentinel_drains_gets_one_signal_and_no_eviction
      NVSentinel's draining label on the node of a preemptible Job: one
      checkpoint request, and the Job is never suspended nor its pod
      evicted by gpugate, well past the checkpoint timeout.

  test_a_failing_dra_node_moves_its_preemptible_work
      the same on a node whose GPUs are DRA devices (flavor h200-dra, two
      KWOK nodes h200-141gb-dra-0..1 of its own fleet, a ResourceSlice
      each, DeviceClass h200.health.e2e.gpugate.io): a preemptible Job of
      class ckpt-dra runs with its claim allocated on node D; D gets
      GpuXidError: tainted, the Job asked to checkpoint (gpugate finds the
      pod by its claim, not by an extended resource), suspended on the
      report, resumed, and its new pod runs on the other DRA node with a
      claim allocated there; usage follows.

Every test ends with the invariant (what the tenant's pods and Jobs hold is
what gpugate counts); the `scene` fixture empties the namespace and brings
every node back (signals off, the validation label on until gpugate's
marks are gone, then off) before and after each test.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest

from fleet import device_class
from gpugate_e2e import (JOB_NAME, POLICY_LABEL, PREEMPTIBLE, Fleet, Gate, allocated_devices,
                         assert_invariant, force_delete, job, pod, pod_claim, register,
                         terminating, wait_service_accounts, wait_until, wait_webhooks)
from test_fleet import HOSTNAME, node_of, phase

pytestmark = pytest.mark.plain_only

NS = "health-a"          # tenant hl
HOME = "gpugate-health"  # this gpugate's namespace (--namespace: its Leases, reclaim state)
GATE = "health"          # stack.gates key, the webhook configurations' policy label
TENANT = "hl"
FLAVOR = "h200-141gb"
GPU = "nvidia.com/gpu"
NODES = [f"{FLAVOR}-{i}" for i in range(3)]
NOMINAL = 24
# The DRA flavor (docs/design/dra.md): its own two nodes, told apart from
# the H200 device-plugin nodes by a label and a taint only its pods
# tolerate, and its own DeviceClass (no extendedResourceName: no pod of
# FLAVOR is served through DRA on them).
DRA_FLAVOR = "h200-dra"
DRA_CLASS = "h200.health.e2e.gpugate.io"
DRA_DRIVER = "gpu.nvidia.com"
DRA_POOL_LABEL = "e2e.gpugate.io/pool=health-dra"
DRA_TAINT_KEY = "e2e.gpugate.io/health-dra"
DRA_NODES = [f"{FLAVOR}-dra-{i}" for i in range(2)]
DRA_NOMINAL = 16
TIMEOUT_S = 4            # checkpoint.timeoutSeconds
SETTLE_S = 2             # health.returnAfter.settleSeconds
ROUND_S = 2              # the reclaimer's and the health controller's interval
POLL = 0.25

TAINT = "gpugate.io/unhealthy"
RECORD = "gpugate.io/health"
VALIDATED = ("gpugate.io/validated", "true")
NVSENTINEL = "dgxc.nvidia.com/nvsentinel-state"
XID = "GpuXidError"
REQUESTED = "gpugate.io/checkpoint-requested"
DONE = "gpugate.io/checkpoint-done"
RECLAIMED = "gpugate.io/reclaimed"

HEALTH_POLICY = f"""\
version: 1
settings:
  admissionWarnings: all
  rawGpuRequests: reject
  mode: enforce
flavors:
  - name: {FLAVOR}
    resource: {GPU}
    sharing: exclusive
    nodeSelector: ["nvidia.com/gpu.product=NVIDIA-H200"]
    tolerations:
      - {{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}}
    gpusPerNode: 8
  - name: {DRA_FLAVOR}
    sharing: exclusive
    nodeSelector: ["nvidia.com/gpu.product=NVIDIA-H200", "{DRA_POOL_LABEL}"]
    tolerations:
      - {{key: {DRA_TAINT_KEY}, operator: Exists, effect: NoSchedule}}
    gpusPerNode: 8
    dra:
      deviceClassName: {DRA_CLASS}
      driver: {DRA_DRIVER}
      attributes: ["productName=NVIDIA H200"]
classes:
  - name: gpu
    description: 1 to 8 H200, not preemptible
    flavor: {FLAVOR}
    gpus: 1
    maxGpus: 8
  - name: ckpt
    description: 1 to 8 H200, preemptible (checkpoints when asked)
    flavor: {FLAVOR}
    gpus: 1
    maxGpus: 8
    preemptible: true
  - name: ckpt-dra
    description: 1 to 8 H200 through DRA, preemptible
    flavor: {DRA_FLAVOR}
    gpus: 1
    maxGpus: 8
    preemptible: true
tenants:
  - name: {TENANT}
    namespaces: [{NS}]
    quota:
      - {{flavor: {FLAVOR}, nominal: {NOMINAL}}}
      - {{flavor: {DRA_FLAVOR}, nominal: {DRA_NOMINAL}}}
checkpoint:
  timeoutSeconds: {TIMEOUT_S}
  gracePeriodSeconds: 5
health:
  # onUnhealthy: checkpoint (the default)
  returnAfter: {{validationLabel: "{VALIDATED[0]}={VALIDATED[1]}", settleSeconds: {SETTLE_S}}}
"""

# What tests/e2e/fleet.py makes the DRA nodes from: the flavor's labels
# and taint, and (its generator wants one) the resource they do NOT
# advertise; their devices are H200s in one ResourceSlice each.
DRA_FLEET_POLICY = f"""\
version: 1
flavors:
  - name: {FLAVOR}
    resource: {GPU}
    sharing: exclusive
    nodeSelector: ["nvidia.com/gpu.product=NVIDIA-H200", "{DRA_POOL_LABEL}"]
    tolerations:
      - {{key: {DRA_TAINT_KEY}, operator: Exists, effect: NoSchedule}}
    gpusPerNode: 8
classes: []
tenants: []
"""


# ---------------------------------------------------------------------------
# the node, as the health systems and gpugate write it


def get_node(k, name: str) -> dict:
    return k.get("node", name)


def taint_of(n: dict) -> str | None:
    """The value of gpugate's taint on node n (None: none)."""
    for t in n["spec"].get("taints") or []:
        if t["key"] == TAINT:
            assert t.get("effect") == "NoSchedule", t
            return t.get("value", "")
    return None


def record_of(n: dict) -> dict | None:
    """gpugate's record "o=<ms> c=<ms> n=<N> t=<why>", parsed (None: none)."""
    text = (n["metadata"].get("annotations") or {}).get(RECORD)
    if text is None:
        return None
    m = re.fullmatch(r"o=(\d+) c=(\d+) n=(\d+) t=(.+)", text)
    assert m, f"{RECORD} is not o=<ms> c=<ms> n=<N> t=<why>: {text!r}"
    return {"o": int(m.group(1)), "c": int(m.group(2)), "n": int(m.group(3)),
            "t": m.group(4)}


def marks(k, name: str) -> tuple[str | None, dict | None]:
    n = get_node(k, name)
    return taint_of(n), record_of(n)


def wait_marks(k, name: str, taint: str | None, what: str, timeout: float = 20.0) -> dict:
    """Until gpugate's taint on the node has the value TAINT (None: gone,
    and the record with it); the node."""
    last = [None]

    def ok():
        n = get_node(k, name)
        last[0] = (taint_of(n), (n["metadata"].get("annotations") or {}).get(RECORD))
        if taint is None:
            return n if last[0] == (None, None) else None
        return n if last[0][0] == taint and last[0][1] is not None else None
    try:
        return wait_until(what, ok, timeout, POLL)
    except AssertionError:
        raise AssertionError(f"{what}: node {name} has taint {TAINT}={last[0][0]!r} and "
                             f"record {last[0][1]!r} (waited {timeout:.0f}s)") from None


def set_condition(k, name: str, status: str, reason: str, message: str) -> None:
    """As NVSentinel's platform connector writes a health check's result."""
    k("patch", "node", name, "--subresource=status", "--type=strategic", "-p",
      json.dumps({"status": {"conditions": [{
          "type": XID, "status": status, "reason": reason, "message": message,
          "lastHeartbeatTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
          "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}]}})
      ).check()


def xid_on(k, name: str) -> None:
    set_condition(k, name, "True", f"{XID}IsNotHealthy",
                  "GPU 3: XID 79 (GPU has fallen off the bus)")


def xid_off(k, name: str) -> None:
    set_condition(k, name, "False", f"{XID}IsHealthy", "no XID error")


def drop_condition(k, name: str) -> None:
    k("patch", "node", name, "--subresource=status", "--type=strategic", "-p",
      json.dumps({"status": {"conditions": [{"type": XID, "$patch": "delete"}]}})).check()


def node_events(k, name: str, reason: str) -> list[dict]:
    """gpugate's Events regarding Node NAME (whatever namespace they went
    to: "default" for a cluster-scoped object)."""
    items = k("get", "events", "-A", "--field-selector",
              f"involvedObject.kind=Node,involvedObject.name={name},reason={reason}",
              "-o", "json").json()["items"]
    return items


def events(k, name: str, reason: str) -> list[dict]:
    return k("get", "events", "-n", NS, "--field-selector",
             f"involvedObject.name={name},reason={reason}", "-o", "json").json()["items"]


def messages(evs: list[dict]) -> list[str]:
    return [e.get("message", "") for e in evs]


def wait_event(k, name: str, prefix: str, reason: str = "GPUReclaim") -> list[str]:
    """Until NAME has an Event of REASON whose message starts with PREFIX
    (gpugate writes it just after the change it tells of): the messages of
    its Events of that reason."""
    last: list = [[]]

    def ok():
        last[0] = messages(events(k, name, reason))
        return any(m.startswith(prefix) for m in last[0])
    try:
        wait_until(f"Event {reason} '{prefix}...' on {name}", ok, 10, POLL)
    except AssertionError:
        raise AssertionError(f"no Event {reason} '{prefix}...' on {NS}/{name}: "
                             f"{last[0]}") from None
    return last[0]


def pool_states(gate: Gate, flavor: str = FLAVOR) -> dict[str, str]:
    status, body = gate.get("/pool")
    assert status == 200, (status, body)
    f = next(f for f in json.loads(body)["flavors"] if f["name"] == flavor)
    return {n["name"]: n["state"] for n in f["nodeList"]}


def metric(gate: Gate, name: str, **labels: str) -> float | None:
    for line in gate.metrics().splitlines():
        m = re.match(r"^(\w+)(?:\{(.*)\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        have = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            return float(m.group(3))
    return None


# ---------------------------------------------------------------------------
# the work


def annotations(obj: dict) -> dict:
    return obj["metadata"].get("annotations") or {}


def live_pods(k, job_name: str) -> list[dict]:
    items = k("get", "pods", "-n", NS, "-l", f"{JOB_NAME}={job_name}", "-o",
              "json").json()["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")
            and phase(p) not in ("Succeeded", "Failed")]


def wait_job_running(k, job_name: str, timeout: float = 30.0) -> dict:
    """The Job's one pod once it runs (bound, Running, not being deleted)."""
    def ok():
        pods = live_pods(k, job_name)
        return pods[0] if len(pods) == 1 and phase(pods[0]) == "Running" else None
    return wait_until(f"the pod of job {NS}/{job_name} to run", ok, timeout, POLL)


def create(k, files: Path, obj: dict) -> str:
    """kubectl apply of a new object; its stderr (gpugate's warnings)."""
    name = obj["metadata"]["name"]
    r = k.apply_file(files / f"{name}.yaml", obj)
    kind = obj["kind"].lower() + (".batch" if obj["kind"] == "Job" else "")
    assert (r.rc, r.out) == (0, f"{kind}/{name} created\n"), r
    return r.err


def preemptible_job(k, files: Path, name: str, gpus: int) -> dict:
    """A Job of class ckpt (preemptible), its pod Running: the pod."""
    create(k, files, job(name, NS, "ckpt", gpus))
    j = k.get("job", name, NS)
    assert j["spec"]["template"]["metadata"]["labels"].get(PREEMPTIBLE) == "true", j
    return wait_job_running(k, name)


def wait_signalled(k, job_name: str, timeout: float = 15.0) -> str:
    """Until the Job and its pod carry the checkpoint request: its time."""
    def ok():
        j = k.get("job", job_name, NS)
        pods = live_pods(k, job_name)
        if REQUESTED in annotations(j) and pods and all(REQUESTED in annotations(p)
                                                       for p in pods):
            return annotations(j)[REQUESTED]
        return None
    return wait_until(f"the checkpoint request on job {NS}/{job_name} and its pod", ok,
                      timeout, POLL)


def report_checkpoint(k, job_name: str) -> None:
    """The trainer of JOB_NAME reports its checkpoint on each of its pods."""
    for p in live_pods(k, job_name):
        k("annotate", "pod", p["metadata"]["name"], "-n", NS,
          f"{DONE}={time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}",
          "--overwrite").check()


def wait_suspended(k, job_name: str) -> dict:
    """Until gpugate has suspended the Job and labelled it reclaimed: it."""
    def suspended():
        j = k.get("job", job_name, NS)
        return j if j["spec"].get("suspend") and (
            j["metadata"].get("labels") or {}).get(RECLAIMED) == "true" else None
    return wait_until(f"job {job_name} suspended and labelled reclaimed", suspended, 15,
                      POLL)


def wait_resumed(k, job_name: str) -> None:
    """Until gpugate has resumed the Job (no suspend, no reclaimed label)."""
    def resumed():
        j = k.get("job", job_name, NS)
        return not j["spec"].get("suspend") and RECLAIMED not in (
            j["metadata"].get("labels") or {})
    wait_until(f"job {job_name} resumed by gpugate", resumed, 20, POLL)


def invariant(k, gate: Gate) -> None:
    assert_invariant(k, gate, TENANT, [NS], FLAVOR, GPU, NOMINAL)


# ---------------------------------------------------------------------------
# fixtures


@pytest.fixture(scope="module")
def health_gate(stack, tmp_path_factory):
    """This module's gpugate on its own fleet: namespaces, the 3 nodes
    (Ready), the gate registered for NS.  Everything removed at the end
    (the nodes with gpugate's marks on them)."""
    k = stack.kubectl
    d = tmp_path_factory.mktemp("health")
    policy = d / "health-policy.yaml"
    policy.write_text(HEALTH_POLICY)
    k.apply({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Namespace",
         "metadata": {"name": NS, "labels": {POLICY_LABEL: GATE}}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": HOME}}]}).check()
    fleet = Fleet(k, policy, name="health", nodes={FLAVOR: len(NODES)}, cpu_nodes=0,
                  clique_size=len(NODES))
    assert sorted(fleet.by_name) == NODES, sorted(fleet.by_name)
    dra_policy = d / "health-dra-fleet.yaml"
    dra_policy.write_text(DRA_FLEET_POLICY)
    dra_fleet = Fleet(k, dra_policy, name="health-dra", nodes={}, default_nodes=0,
                      cpu_nodes=0, dra_nodes={FLAVOR: len(DRA_NODES)})
    assert dra_fleet.dra_nodes == DRA_NODES, dra_fleet.dra_nodes
    try:
        wait_service_accounts(k, [NS])
        fleet.create()
        k.apply(device_class(DRA_CLASS, DRA_DRIVER)).check()
        dra_fleet.create()
        g = Gate(stack.binary, stack.certs, policy, d / "gpugate",
                 stack.cluster.env["KUBECONFIG"], name=GATE,
                 args=["--namespace", HOME, "--no-gpuclasses", "--no-gpuquotas"]).start()
        stack.gates[GATE] = g
        g.wait_ready()
        register(k, "gpugate-health", g, GATE)
        wait_webhooks(k, GATE)
        wait_until("the 3 H200 nodes usable for the health gpugate",
                   lambda: set(pool_states(g).values()) == {"usable"}
                   and len(pool_states(g)) == 3, 30, POLL)
        wait_until("the 2 DRA nodes usable for the health gpugate",
                   lambda: pool_states(g, DRA_FLAVOR) == dict.fromkeys(DRA_NODES, "usable"),
                   30, POLL)
        yield g
    finally:
        k("delete", "mutatingwebhookconfiguration,validatingwebhookconfiguration",
          "gpugate-health", "--ignore-not-found")
        k("delete", "jobs,pods", "--all", "-n", NS, "--wait=false")
        k("delete", "namespace", NS, HOME, "--wait=false")
        k("delete", "nodes", "-l", "fleet.gpugate.io/fleet=health", "--wait=false")
        k("delete", "resourceslices", "-l", "fleet.gpugate.io/fleet=health-dra",
          "--wait=false")
        k("delete", "nodes", "-l", "fleet.gpugate.io/fleet=health-dra", "--wait=false")
        k("delete", "deviceclass", DRA_CLASS, "--ignore-not-found", "--wait=false")
        g = stack.gates.pop(GATE, None)
        if g is not None:
            problems = g.stop_and_check()
            stack.retired.append(g)
            assert problems == [], problems


def empty_namespace(k, gate: Gate) -> None:
    k("delete", "jobs,pods", "--all", "-n", NS, "--cascade=foreground", "--wait=false",
      timeout=60).check()

    def gone() -> bool:
        items = k("get", "jobs,pods", "-n", NS, "-o", "json").json()["items"]
        force_delete(k, NS, terminating(items))
        return not items
    wait_until(f"namespace {NS} to be empty", gone, 60, POLL)
    gate.wait_used(TENANT, 0, FLAVOR)
    gate.wait_used(TENANT, 0, DRA_FLAVOR)


def bring_back(k) -> None:
    """Every node without a signal, and without gpugate's marks: the
    validation label until they are gone (settleSeconds included), then
    not."""
    for n in NODES + DRA_NODES:
        drop_condition(k, n)
        k("label", "node", n, f"{NVSENTINEL}-", f"{VALIDATED[0]}={VALIDATED[1]}",
          "--overwrite").check()
    for n in NODES + DRA_NODES:
        wait_marks(k, n, None, f"gpugate's marks off {n}", 30)
    for n in NODES + DRA_NODES:
        k("label", "node", n, f"{VALIDATED[0]}-").check()


@pytest.fixture
def scene(stack, health_gate):
    """NS empty, every node back and usable, the Events of NS and of the
    nodes deleted (so that a test counts its own); the same after the
    test, pass or fail."""
    k = stack.kubectl
    gate = stack.gates[GATE]

    def reset():
        empty_namespace(k, gate)
        bring_back(k)
        wait_until("the 3 H200 nodes usable again",
                   lambda: set(pool_states(gate).values()) == {"usable"}, 30, POLL)
        wait_until("the 2 DRA nodes usable again",
                   lambda: set(pool_states(gate, DRA_FLAVOR).values()) == {"usable"}, 30,
                   POLL)
        k("delete", "events", "--all", "-n", NS).check()
        for n in NODES + DRA_NODES:
            k("delete", "events", "-A", "--field-selector",
              f"involvedObject.kind=Node,involvedObject.name={n}").check()
    reset()
    yield gate
    reset()


# ---------------------------------------------------------------------------
# a. and b.: the work on a failing node


def test_a_failing_node_moves_preemptible_work_and_tells_the_rest(stack, kubectl, scene,
                                                                 files):
    """trainer (a preemptible Job) lands on A; beside it, pinned there by
    their users, steady (not preemptible) and loner (a preemptible bare pod
    that never reports).  A fails."""
    k, gate = kubectl, scene
    trainer = preemptible_job(k, files, "trainer", 4)
    a = node_of(trainer)
    assert a in NODES, a
    create(k, files, pod("steady", NS, "gpu", 2, nodeSelector={HOSTNAME: a}))
    create(k, files, pod("loner", NS, "ckpt", 2, nodeSelector={HOSTNAME: a}))
    for name in ("steady", "loner"):
        wait_until(f"{name} Running on A", lambda name=name: (lambda p: (
            phase(p), node_of(p)))(k.get("pod", name, NS)) == ("Running", a), 30, POLL)
    invariant(k, gate)
    signalled_before = metric(gate, "gpugate_reclaims_total", result="signalled") or 0

    xid_on(k, a)
    failed_at = time.monotonic()
    # The node: out, tainted, recorded, an Event.
    n = wait_marks(k, a, "health", f"{a} tainted {TAINT}=health")
    rec = record_of(n)
    assert rec["c"] == 0 and rec["n"] == 1 and XID in rec["t"], rec
    assert pool_states(gate)[a] == "health"
    unhealthy = wait_until(f"Event GPUNodeUnhealthy on {a}",
                           lambda: node_events(k, a, "GPUNodeUnhealthy"), 10, POLL)
    assert len(unhealthy) == 1 and unhealthy[0]["type"] == "Warning", unhealthy
    assert XID in unhealthy[0]["message"], unhealthy[0]["message"]

    # The preemptible Job: asked to checkpoint, saying why.
    asked = wait_signalled(k, "trainer")
    failing = f"node {a} is failing (condition {XID}=True"
    msgs = wait_event(k, "trainer", "checkpoint requested: ")
    assert any(m.startswith("checkpoint requested: ") and failing in m for m in msgs), msgs
    # Verbatim, the signal (rec["t"] is the pool's word for the signal).
    assert (f"checkpoint requested: node {a} is failing ({rec['t']}); write the "
            f"checkpoint and annotate {DONE}=<time>, or it is suspended in {TIMEOUT_S} s "
            "and resumed on another node") in msgs, msgs
    if time.monotonic() - failed_at < TIMEOUT_S - 1:  # not asserted on a slow machine
        assert not k.get("job", "trainer", NS)["spec"].get("suspend"), \
            "suspended before the report and before the timeout"
    # The preemptible pod: asked too.
    wait_until("the checkpoint request on loner",
               lambda: REQUESTED in annotations(k.get("pod", "loner", NS)), 10, POLL)
    msgs = wait_event(k, "loner", "checkpoint requested: ")
    assert any(m.startswith("checkpoint requested: ") and failing in m for m in msgs), msgs
    # The non-preemptible pod: told, not asked.
    told = wait_until("Event GPUNodeFailing on steady",
                      lambda: events(k, "steady", "GPUNodeFailing"), 10, POLL)
    assert told[0]["type"] == "Warning" and failing in told[0]["message"], told
    assert told[0]["message"] == (
        f"node {a} is failing ({rec['t']}) and is out of the GPU pool; it is not "
        "preemptible (gpugate.io/preemptible), so gpugate does not checkpoint it: "
        "save your work, it may be drained"), told

    # The trainer reports its checkpoint; the Job is suspended, its pod goes.
    report_checkpoint(k, "trainer")
    j = wait_suspended(k, "trainer")
    assert annotations(j)[REQUESTED] == asked, "asked again"
    msgs = wait_event(k, "trainer", "checkpointed and suspended")
    assert any(m.startswith("checkpointed and suspended to move ") and
               f" off failing node {a} ({rec['t']}); gpugate resumes it when it fits "
               "again" in m for m in msgs), msgs

    # ... and is resumed by gpugate: its new pod runs elsewhere (gpugate's
    # taint keeps the scheduler off A).
    wait_resumed(k, "trainer")
    moved = wait_job_running(k, "trainer")
    assert moved["metadata"]["uid"] != trainer["metadata"]["uid"]
    assert node_of(moved) in NODES and node_of(moved) != a, (node_of(moved), a)
    assert REQUESTED not in annotations(k.get("job", "trainer", NS))
    wait_event(k, "trainer", "resumed")
    resumes = [e for e in events(k, "trainer", "GPUReclaim")
               if e.get("message", "").startswith("resumed")]
    assert len(resumes) == 1 and resumes[0]["type"] == "Normal", messages(
        events(k, "trainer", "GPUReclaim"))
    assert resumes[0]["message"] == (
        "resumed: its pods start again, from the checkpoint volume, away from the "
        "failing node (gpugate's taint keeps new pods off it)"), resumes

    # loner never reports: evicted once the timeout has passed (a bare pod
    # does not come back).
    def evicted():
        r = k("get", "pod", "loner", "-n", NS, "-o", "json")
        return r.rc != 0 or bool(r.json()["metadata"].get("deletionTimestamp"))
    wait_until("loner evicted after the checkpoint timeout", evicted,
               TIMEOUT_S + 4 * ROUND_S + 10, POLL)
    waited = time.monotonic() - failed_at
    assert waited >= TIMEOUT_S - 1, f"loner evicted {waited:.1f} s after A failed"
    msgs = wait_event(k, "loner", "checkpoint not reported in time")
    assert any(m.startswith("checkpoint not reported in time") and "evicted" in m
               for m in msgs), msgs

    # The non-preemptible pod, well past the checkpoint timeout: still
    # running on A, never asked, told once.
    rest = failed_at + TIMEOUT_S + 2 * ROUND_S - time.monotonic()
    if rest > 0:
        time.sleep(rest)
    steady = k.get("pod", "steady", NS)
    assert (phase(steady), node_of(steady)) == ("Running", a), steady["status"]
    assert not steady["metadata"].get("deletionTimestamp"), "gpugate evicted steady"
    assert REQUESTED not in annotations(steady), annotations(steady)
    assert len(events(k, "steady", "GPUNodeFailing")) == 1, messages(
        events(k, "steady", "GPUNodeFailing"))
    # Asked: trainer and loner, once each.
    assert metric(gate, "gpugate_reclaims_total", result="signalled") == signalled_before + 2
    # A is still out: its signal is on.
    assert marks(k, a)[0] == "health"
    invariant(k, gate)


# ---------------------------------------------------------------------------
# c.: back only once validated


def test_a_cleared_node_is_validated_before_it_returns(stack, kubectl, scene, files):
    k, gate = kubectl, scene
    a = NODES[1]
    xid_on(k, a)
    out = record_of(wait_marks(k, a, "health", f"{a} tainted {TAINT}=health"))
    # The gauges read the marks from gpugate's Node watch: a moment after.
    since = wait_until("gpugate_node_out_since_seconds{state=health}", lambda: metric(
        gate, "gpugate_node_out_since_seconds", flavor=FLAVOR, node=a, state="health"), 10,
        POLL)
    assert since == pytest.approx(out["o"] / 1000, abs=1), (since, out)

    # The signal clears (NVSentinel writes the check False): A stays out.
    xid_off(k, a)
    cleared_at = time.monotonic()
    n = wait_marks(k, a, "validating", f"{a} tainted {TAINT}=validating")
    rec = record_of(n)
    assert rec["o"] == out["o"] and rec["c"] >= rec["o"] and rec["n"] == 1, (out, rec)
    assert XID in rec["t"], rec
    ev = wait_until(f"Event GPUNodeValidating on {a}",
                    lambda: node_events(k, a, "GPUNodeValidating"), 10, POLL)
    assert len(ev) == 1 and ev[0]["type"] == "Normal", ev
    assert f"{VALIDATED[0]}={VALIDATED[1]}" in ev[0]["message"], ev[0]["message"]
    wait_until(f"/pool: {a} validating", lambda: pool_states(gate)[a] == "validating", 10,
               POLL)
    r = subprocess.run([str(stack.binary), "pool", "--policy", str(gate.policy),
                        "--kubeconfig", stack.cluster.env["KUBECONFIG"], "-o", "json"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r
    f = next(f for f in json.loads(r.stdout)["flavors"] if f["name"] == FLAVOR)
    assert {x["name"]: x["state"] for x in f["nodeList"]}[a] == "validating", f
    assert metric(gate, "gpugate_node_out_since_seconds", flavor=FLAVOR, node=a,
                  state="validating") is not None
    assert metric(gate, "gpugate_nodes_out_seconds", flavor=FLAVOR) > 0

    # New work stays off A: a pod pinned there waits on gpugate's taint.
    create(k, files, pod("probe", NS, "gpu", 4, nodeSelector={HOSTNAME: a}))

    def unschedulable():
        p = k.get("pod", "probe", NS)
        for c in p["status"].get("conditions") or []:
            if c["type"] == "PodScheduled" and c["status"] == "False":
                return c.get("reason") == "Unschedulable" and c.get("message")
        return None
    why = wait_until("probe Unschedulable", unschedulable, 20, POLL)
    # The scheduler's words (v1.37 names no taint): A's only taint it does
    # not tolerate is gpugate's (the flavor's nvidia.com/gpu is tolerated);
    # the DRA nodes' own taint fails the same filter first (TaintToleration
    # runs before NodeAffinity).
    assert f"{1 + len(DRA_NODES)} node(s) had untolerated taint(s)" in why, why
    # The settle time alone does not bring A back (the label is missing).
    rest = cleared_at + SETTLE_S + ROUND_S - time.monotonic()
    if rest > 0:
        time.sleep(rest)
    assert marks(k, a)[0] == "validating"
    assert not node_of(k.get("pod", "probe", NS))

    # Validated: back, and the waiting pod runs there.
    k("label", "node", a, f"{VALIDATED[0]}={VALIDATED[1]}").check()
    wait_marks(k, a, None, f"gpugate's marks off {a}")
    ev = wait_until(f"Event GPUNodeReturned on {a}",
                    lambda: node_events(k, a, "GPUNodeReturned"), 10, POLL)
    assert len(ev) == 1 and ev[0]["type"] == "Normal", ev
    wait_until(f"{a} usable", lambda: pool_states(gate)[a] == "usable", 10, POLL)
    assert metric(gate, "gpugate_node_out_since_seconds", flavor=FLAVOR, node=a,
                  state="validating") is None
    assert metric(gate, "gpugate_nodes_out_seconds", flavor=FLAVOR) == 0
    wait_until("probe Running on A", lambda: (lambda p: (phase(p), node_of(p)))(
        k.get("pod", "probe", NS)) == ("Running", a), 30, POLL)
    invariant(k, gate)


# ---------------------------------------------------------------------------
# d.: NVSentinel drains the node itself: gpugate only signals


def test_a_node_nvsentinel_drains_gets_one_signal_and_no_eviction(stack, kubectl, scene,
                                                                  files):
    k, gate = kubectl, scene
    trainer = preemptible_job(k, files, "drained", 4)
    a = node_of(trainer)
    signalled_before = metric(gate, "gpugate_reclaims_total", result="signalled") or 0
    k("label", "node", a, f"{NVSENTINEL}=draining").check()
    labelled_at = time.monotonic()
    wait_marks(k, a, "health", f"{a} tainted {TAINT}=health")
    asked = wait_signalled(k, "drained")
    msgs = wait_event(k, "drained", "checkpoint requested: ")
    assert len(msgs) == 1, msgs
    assert msgs[0].startswith("checkpoint requested: ") and \
        f"node {a} is failing (label {NVSENTINEL}=draining)" in msgs[0], msgs
    assert msgs[0] == (
        f"checkpoint requested: node {a} is failing (label {NVSENTINEL}=draining); "
        f"write the checkpoint now and annotate {DONE}=<time>: another system drains "
        "the node, gpugate does not suspend or evict it"), msgs

    # Well past the checkpoint timeout, a few rounds on: the Job runs on,
    # asked once, never suspended, its pod never evicted.
    deadline = labelled_at + TIMEOUT_S + 3 * ROUND_S
    while time.monotonic() < deadline:
        j = k.get("job", "drained", NS)
        assert not j["spec"].get("suspend"), "gpugate suspended a Job NVSentinel drains"
        assert RECLAIMED not in (j["metadata"].get("labels") or {}), j["metadata"]
        assert annotations(j).get(REQUESTED) == asked, annotations(j)
        p = k.get("pod", trainer["metadata"]["name"], NS)
        assert not p["metadata"].get("deletionTimestamp"), "gpugate evicted the pod"
        assert phase(p) == "Running", p["status"]
        time.sleep(0.5)
    assert len(events(k, "drained", "GPUReclaim")) == 1, messages(
        events(k, "drained", "GPUReclaim"))
    assert metric(gate, "gpugate_reclaims_total", result="signalled") == signalled_before + 1
    invariant(k, gate)


# ---------------------------------------------------------------------------
# e.: a failing node whose GPUs are DRA devices


def wait_allocated(k, p: dict, count: int) -> dict:
    """Until pod P's claim is allocated COUNT devices: the claim."""
    def ok():
        c = pod_claim(k, NS, p["metadata"]["name"])
        return c if c and len(allocated_devices(c)) == count else None
    return wait_until(f"the claim of pod {p['metadata']['name']} allocated {count} devices",
                      ok, 30, POLL)


def test_a_failing_dra_node_moves_its_preemptible_work(stack, kubectl, scene, files):
    """dra-trainer (a preemptible Job of a DRA class, 2 devices) runs on
    DRA node D; D fails.  gpugate knows the pod holds D's GPUs by its claim
    (the pod asks for no extended resource): asked, suspended on its
    report, resumed on the other DRA node with a new claim there."""
    k, gate = kubectl, scene
    create(k, files, job("dra-trainer", NS, "ckpt-dra", 2))
    j = k.get("job", "dra-trainer", NS)
    assert j["spec"]["template"]["metadata"]["labels"].get(PREEMPTIBLE) == "true", j
    assert [c["name"] for c in j["spec"]["template"]["spec"]["resourceClaims"]] == \
        ["gpugate-gpu"], j["spec"]["template"]["spec"]
    trainer = wait_job_running(k, "dra-trainer", 60)
    d = node_of(trainer)
    assert d in DRA_NODES, d
    claim = wait_allocated(k, trainer, 2)
    assert {r["pool"] for r in allocated_devices(claim)} == {d}, allocated_devices(claim)
    gate.wait_used(TENANT, 2, DRA_FLAVOR)
    signalled_before = metric(gate, "gpugate_reclaims_total", result="signalled") or 0

    xid_on(k, d)
    rec = record_of(wait_marks(k, d, "health", f"{d} tainted {TAINT}=health"))
    assert XID in rec["t"], rec
    wait_until(f"/pool: {d} out for health",
               lambda: pool_states(gate, DRA_FLAVOR)[d] == "health", 10, POLL)
    asked = wait_signalled(k, "dra-trainer")
    msgs = wait_event(k, "dra-trainer", "checkpoint requested: ")
    assert (f"checkpoint requested: node {d} is failing ({rec['t']}); write the "
            f"checkpoint and annotate {DONE}=<time>, or it is suspended in {TIMEOUT_S} s "
            "and resumed on another node") in msgs, msgs

    report_checkpoint(k, "dra-trainer")
    j = wait_suspended(k, "dra-trainer")
    assert annotations(j)[REQUESTED] == asked, "asked again"
    msgs = wait_event(k, "dra-trainer", "checkpointed and suspended")
    assert any(f" off failing node {d} ({rec['t']})" in m for m in msgs), msgs

    wait_resumed(k, "dra-trainer")
    moved = wait_job_running(k, "dra-trainer", 60)
    assert moved["metadata"]["uid"] != trainer["metadata"]["uid"]
    (other,) = [n for n in DRA_NODES if n != d]
    assert node_of(moved) == other, (node_of(moved), d)
    new_claim = wait_allocated(k, moved, 2)
    assert new_claim["metadata"]["uid"] != claim["metadata"]["uid"]
    assert {r["pool"] for r in allocated_devices(new_claim)} == {other}, \
        allocated_devices(new_claim)
    # The old pod's claim goes with it; the Job holds its 2 devices once.
    wait_until("the first pod's claim deleted", lambda: k(
        "get", "resourceclaim", claim["metadata"]["name"], "-n", NS).rc != 0, 30, POLL)
    gate.wait_used(TENANT, 2, DRA_FLAVOR)
    assert metric(gate, "gpugate_reclaims_total", result="signalled") == signalled_before + 1
    assert marks(k, d)[0] == "health"
    invariant(k, gate)
