"""The pool (issue #16) on a real control plane with the scheduler and the
example policy's fake GPU fleet (the `fleet` fixture: 6 H100 nodes
h100-80gb-0..5 in two NVLink cliques of 3, MIG and L4 nodes, run by KWOK):
a node cordoned (`kubectl cordon`), NotReady, or carrying a health taint or
NVSentinel's label is excluded and named in the denial or the warning, as
kubectl prints them; `gpugate pool --kubeconfig` shows what running pods
hold.

Every change to a node is undone by the `nodes` fixture, pass or fail, and
the fixture waits until gpugate sees the whole fleet usable again: the fleet
is shared by the tests of this module.

NotReady with KWOK: KWOK plays the kubelet of every node annotated
kwok.x-k8s.io/node=fake, and its node-initialize stage
(tests/e2e/kwok/stages.yaml) resets any node whose Ready condition is not
True at once (a status patch to Ready=False was back to True within a
second, measured).  So the node is first taken from KWOK (the annotation
removed: KWOK stops renewing its Lease and leaves its status alone), then
patched Ready=False through the status subresource, which then holds: the
node-lifecycle controller adds the not-ready taints and, once the Lease is
older than its grace period, would only turn Ready to Unknown (NotReady all
the same).  Putting the annotation back makes KWOK initialize the node
again (Ready=True within a second, the controller removes the taints).  A
node made NotReady must hold no pods (KWOK no longer runs them).
"""

from __future__ import annotations

import json
import re
import subprocess

import pytest

import gpugate_e2e as e2e
from gpugate_e2e import EXAMPLE_POLICY, pod, wait_until
from test_kubectl_admission import denied_by, warning

H100 = [f"h100-80gb-{i}" for i in range(6)]
L4 = [f"l4-shared-{i}" for i in range(4)]
HOSTNAME = "kubernetes.io/hostname"
OUT_OF_SERVICE = "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute"
NVSENTINEL = "dgxc.nvidia.com/nvsentinel-state"
KWOK = "kwok.x-k8s.io/node"


def pool_of(gate) -> dict:
    status, body = gate.get("/pool")
    assert status == 200, (status, body)
    return json.loads(body)


def flavor_of(gate, name: str = "h100-80gb") -> dict:
    return next(f for f in pool_of(gate)["flavors"] if f["name"] == name)


def states(gate, name: str = "h100-80gb") -> dict[str, str]:
    return {n["name"]: n["state"] for n in flavor_of(gate, name)["nodeList"]}


def wait_flavor(gate, check, what: str, name: str = "h100-80gb", timeout: float = 30.0):
    last = [None]

    def ok():
        last[0] = flavor_of(gate, name)
        return check(last[0])
    try:
        return wait_until(what, ok, timeout, 0.25) and last[0]
    except AssertionError as e:
        raise AssertionError(f"{e}; {gate.name} /pool: {json.dumps(last[0])}") from None


class Nodes:
    """Changes to fleet nodes, each undone by restore() (in reverse order)."""

    def __init__(self, kubectl, fleet):
        self.kubectl = kubectl
        self.fleet = fleet
        self.undo: list = []

    def _run(self, *args: str) -> None:
        self.kubectl(*args).check()

    def cordon(self, node: str) -> None:
        r = self.kubectl("cordon", node)
        assert (r.rc, r.out) == (0, f"node/{node} cordoned\n"), r
        self.undo.append(lambda: self._run("uncordon", node))

    def taint(self, node: str, taint: str) -> None:
        self._run("taint", "nodes", node, taint)
        key_effect = re.sub(r"=[^:]*", "", taint)
        self.undo.append(lambda: self._run("taint", "nodes", node, f"{key_effect}-"))

    def label(self, node: str, key: str, value: str) -> None:
        self._run("label", "nodes", node, f"{key}={value}")
        self.undo.append(lambda: self._run("label", "nodes", node, f"{key}-"))

    def allocatable(self, node: str, resource: str, units: int) -> None:
        """What a device plugin reports when devices turn unhealthy."""
        before = self.kubectl.get("node", node)["status"]["allocatable"][resource]

        def patch(v: str) -> None:
            self._run("patch", "node", node, "--subresource=status", "--type=merge", "-p",
                      json.dumps({"status": {"allocatable": {resource: v}}}))
        patch(str(units))
        self.undo.append(lambda: patch(before))

    def not_ready(self, node: str) -> None:
        """Ready=False, held (see the module's docstring)."""
        self._run("annotate", "node", node, f"{KWOK}-")
        self.undo.append(lambda: self._run("annotate", "node", node, f"{KWOK}=fake"))
        self._run("patch", "node", node, "--subresource=status", "--type=strategic", "-p",
                  json.dumps({"status": {"conditions": [{
                      "type": "Ready", "status": "False", "reason": "KubeletNotReady",
                      "message": "gpugate e2e: container runtime is down"}]}}))

        def ready() -> str | None:
            n = self.kubectl.get("node", node)
            return {c["type"]: c["status"] for c in n["status"]["conditions"]}.get("Ready")
        wait_until(f"{node} Ready=False", lambda: ready() == "False", 10)

    def restore(self) -> None:
        problems = []
        while self.undo:
            try:
                self.undo.pop()()
            except AssertionError as e:
                problems.append(str(e))
        wait_until("the fleet Ready again", self.fleet.ready, 60, 0.5)
        assert not problems, problems


@pytest.fixture
def nodes(kubectl, fleet, example, quota):
    """Node changes for one test; undone afterwards, and then every gpugate
    sees the fleet whole (all H100 and L4 nodes usable, 8 each)."""
    n = Nodes(kubectl, fleet)
    try:
        yield n
    finally:
        n.restore()
        for gate in (example, quota):
            wait_flavor(gate, lambda f: f["usable"] == 6 and f["allocatable"] == 48,
                        f"{gate.name}: the 6 H100 nodes usable again")
        wait_flavor(example, lambda f: f["usable"] == 4, "the L4 nodes usable again",
                    "l4-shared")


def deployment(name: str, cls: str, replicas: int, gpus: int | None = None) -> dict:
    labels = {"app": name, "gpugate.io/class": cls}
    if gpus is not None:
        labels["gpugate.io/gpus"] = str(gpus)
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "research"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [e2e.container()]}}}}


def pinned(name: str, ns: str, cls: str, gpus: int | None, node: str, **kw) -> dict:
    """A class pod that must run on that node (a nodeSelector of the user,
    merged with the flavor's)."""
    return pod(name, ns, cls, gpus, nodeSelector={HOSTNAME: node}, **kw)


def wait_running(kubectl, ns: str, names: dict[str, str], timeout: float = 60.0) -> None:
    """Until each pod (name -> node) runs on its node."""
    def ok():
        items = kubectl("get", "pods", "-n", ns, "-o", "json").json()["items"]
        where = {p["metadata"]["name"]: (p["spec"].get("nodeName"), p["status"].get("phase"))
                 for p in items}
        return all(where.get(n) == (node, "Running") for n, node in names.items())
    wait_until(f"pods {sorted(names)} of {ns} running on their nodes", ok, timeout)


def unschedulable(kubectl, ns: str, name: str) -> str:
    """The scheduler's message for a pod it could not place, once there."""
    def cond():
        p = kubectl.get("pod", name, ns)
        for c in p["status"].get("conditions") or []:
            if c["type"] == "PodScheduled" and c["status"] == "False":
                return c.get("reason") == "Unschedulable" and c.get("message")
        return None
    return wait_until(f"{ns}/{name} marked Unschedulable", cond, 30)


# ---------------------------------------------------------------------------


def test_excluded_nodes_are_named_in_the_never_fits_denial(kubectl, example, fleet, nodes,
                                                            clean, files, stack):
    """A train-large pod (8 H100) that no usable node could ever hold: two
    nodes lost devices (allocatable 7 and 6), the other four are cordoned,
    NotReady, tainted out-of-service, quarantined by NVSentinel.  kubectl
    prints gpugate's denial, which names the largest node and the four
    excluded ones."""
    clean("research")
    nodes.allocatable(H100[0], "nvidia.com/gpu", 7)
    nodes.allocatable(H100[1], "nvidia.com/gpu", 6)
    nodes.cordon(H100[2])
    nodes.not_ready(H100[3])
    nodes.taint(H100[4], OUT_OF_SERVICE)
    nodes.label(H100[5], NVSENTINEL, "quarantined")
    wait_flavor(example, lambda f: f["usable"] == 2 and f["allocatable"] == 13,
                "the H100 nodes excluded or lowered")
    assert states(example) == {H100[0]: "usable", H100[1]: "usable", H100[2]: "cordoned",
                               H100[3]: "NotReady", H100[4]: "health", H100[5]: "health"}

    r = kubectl.apply_file(files / "pod.yaml", pod("pretrain", "research", "train-large"))
    assert (r.rc, r.out) == (1, ""), r
    assert r.err == denied_by("mutate.gpugate.io", (
        "gpugate: no usable node of flavor h100-80gb can hold a pod of 8 nvidia.com/gpu: "
        "the largest offers 7 (h100-80gb-0); 4 nodes excluded: h100-80gb-2 (cordoned), "
        "h100-80gb-3 (NotReady), "
        "h100-80gb-4 (taint node.kubernetes.io/out-of-service=nodeshutdown:NoExecute), "
        f"h100-80gb-5 (label {NVSENTINEL}=quarantined)")), r.err
    # What a usable node can hold is admitted.
    r = kubectl.apply_file(files / "probe.yaml", pod("probe", "research", "train-small", 4))
    assert (r.rc, r.out) == (0, "pod/probe created\n"), r
    assert r.err == warning(
        "gpugate: train-small -> 4 x h100-80gb for tenant research (4/32 in use)")
    # A Deployment whose pod no usable node could hold is refused at apply
    # (#18), not left to fail pod by pod.
    r = kubectl.apply_file(files / "deploy.yaml", deployment("serve", "train-large", 1))
    assert (r.rc, r.out) == (1, ""), r
    assert r.err == denied_by("mutate-templates.gpugate.io", (
        'gpugate: Deployment "serve" can never run a pod: no usable node of flavor '
        "h100-80gb can hold one of 8 nvidia.com/gpu, the largest offers 7 (h100-80gb-0); "
        "4 nodes excluded: h100-80gb-2 (cordoned), h100-80gb-3 (NotReady), "
        "h100-80gb-4 (taint node.kubernetes.io/out-of-service=nodeshutdown:NoExecute), "
        f"h100-80gb-5 (label {NVSENTINEL}=quarantined)"), file="deploy.yaml"), r.err
    # More replicas than the usable nodes hold, even empty, is a warning: a
    # Deployment runs with some (a server-side dry run: nothing is made).
    r = kubectl.apply_file(files / "deploy.yaml", deployment("serve", "train-small", 3, 4),
                           "--dry-run=server")
    assert (r.rc, r.out) == (0, "deployment.apps/serve created (server dry run)\n"), r
    assert ("Warning: gpugate: the usable nodes of flavor h100-80gb can hold at most 2 of "
            'Deployment "serve"\'s 3 pods of 4 nvidia.com/gpu, even empty: the others stay '
            "Pending until nodes join\n") in r.err, r.err
    e2e.assert_invariant(kubectl, example, "research", ["research", "research-jobs"],
                         "h100-80gb", "nvidia.com/gpu", 48)


def test_fragmentation_warning_as_kubectl_prints_it(kubectl, example, quota, fleet, nodes,
                                                     clean, files):
    """Four usable H100 nodes with 4 of 8 taken on each (tenant batch of the
    quota policy, pinned), one cordoned, one NotReady: 16 free, at most 4 on
    a node.  A train-large pod is admitted (quota has room, an empty node
    could hold it) and kubectl prints why it will wait; the scheduler then
    says the same in its own words.  Once a node is uncordoned it runs.

    The fill pods run at train-large's priority (PriorityClass training):
    with priority 0 the scheduler preempts one of them and runs the pod at
    once (seen on the first run of this test), which gpugate's advice, on
    free units alone, does not foresee."""
    clean("research", "batch")
    nodes.cordon(H100[4])
    nodes.not_ready(H100[5])
    fill = {f"fill-{i}": H100[i] for i in range(4)}
    for name, node in fill.items():
        r = kubectl.apply_file(files / f"{name}.yaml", pinned(name, "batch", "gpu", 4, node,
                                                              priorityClassName="training"))
        assert (r.rc, r.out) == (0, f"pod/{name} created\n"), r
    wait_running(kubectl, "batch", fill)
    wait_flavor(example, lambda f: f["allocated"] == 16 and f["usable"] == 4,
                "16 allocated on 4 usable nodes")

    r = kubectl.apply_file(files / "pod.yaml", pod("pretrain", "research", "train-large"))
    assert (r.rc, r.out) == (0, "pod/pretrain created\n"), r
    assert r.err == warning(
        "gpugate: train-large -> 8 x h100-80gb for tenant research (8/32 in use)",
        "gpugate: admitted, but no node of flavor h100-80gb has 8 nvidia.com/gpu free now: "
        "16 free on 4 nodes, at most 4 on one (fragmentation); the pod waits; "
        "2 nodes excluded: h100-80gb-4 (cordoned), h100-80gb-5 (NotReady)"), r.err
    msg = unschedulable(kubectl, "research", "pretrain")
    assert "4 Insufficient nvidia.com/gpu" in msg, msg
    e2e.assert_invariant(kubectl, example, "research", ["research", "research-jobs"],
                         "h100-80gb", "nvidia.com/gpu", 48)
    e2e.assert_invariant(kubectl, quota, "batch", ["batch"], "h100-80gb", "nvidia.com/gpu", 16)

    # The cordon is lifted: the pod the warning was about runs there.
    r = kubectl("uncordon", H100[4])
    assert (r.rc, r.out) == (0, f"node/{H100[4]} uncordoned\n"), r
    wait_running(kubectl, "research", {"pretrain": H100[4]})
    f = wait_flavor(example, lambda f: f["allocated"] == 24, "pretrain on h100-80gb-4")
    assert (f["usable"], f["free"], f["largestFree"]) == (5, 16, 4), f


def test_a_health_taint_and_every_node_excluded(kubectl, example, fleet, nodes, clean, files):
    """All four L4 nodes excluded (cordoned, NotReady, tainted
    out-of-service, cordoned): a dev-shared pod is admitted, not denied (a
    broken health feed must not stop every pod), and told why it waits."""
    clean("sandbox-1")
    nodes.cordon(L4[0])
    nodes.not_ready(L4[1])
    nodes.taint(L4[2], OUT_OF_SERVICE)
    nodes.cordon(L4[3])
    wait_flavor(example, lambda f: f["usable"] == 0, "every L4 node excluded", "l4-shared")
    r = kubectl.apply_file(files / "pod.yaml", pod("notebook", "sandbox-1", "dev-shared"))
    assert (r.rc, r.out) == (0, "pod/notebook created\n"), r
    assert r.err == warning(
        "gpugate: dev-shared -> 1 x l4-shared for tenant sandbox (1/24 in use)",
        "gpugate: all 4 nodes of flavor l4-shared are excluded, the pod waits until one is "
        "back; 4 nodes excluded: l4-shared-0 (cordoned), l4-shared-1 (NotReady), "
        "l4-shared-2 (taint node.kubernetes.io/out-of-service=nodeshutdown:NoExecute), "
        "l4-shared-3 (cordoned)"), r.err
    unschedulable(kubectl, "sandbox-1", "notebook")
    e2e.assert_invariant(kubectl, example, "sandbox", ["sandbox-1"], "l4-shared",
                         "nvidia.com/gpu.shared", None)


POOL_HEADER = ("FLAVOR               NODES USABLE CAPACITY ALLOCATED  FREE LARGEST-FREE  "
               "EXCLUDED")


def test_gpugate_pool_shows_what_running_pods_hold(kubectl, example, quota, fleet, nodes,
                                                   clean, files, stack):
    """`gpugate pool --kubeconfig` against the live cluster: per flavor the
    nodes, what the running pods hold (and not what a Pending or a
    Succeeded pod asks), the excluded node; per tenant what quota counts."""
    clean("research", "product-inference", "batch")
    nodes.cordon(H100[5])
    placed = {"a": (H100[0], 8), "b": (H100[1], 3), "c": (H100[3], 3)}
    for name, (node, gpus) in placed.items():
        r = kubectl.apply_file(files / f"{name}.yaml", pinned(name, "batch", "gpu", gpus, node))
        assert r.rc == 0, r
    r = kubectl.apply_file(files / "serve.yaml", pinned("serve", "product-inference",
                                                        "inference-mig", 2, "a100-1g-10gb-1"))
    assert r.rc == 0, r
    # A research pod that cannot be placed (pinned to the cordoned node):
    # in quota, on no node.
    r = kubectl.apply_file(files / "stuck.yaml", pinned("stuck", "research", "train-large",
                                                        None, H100[5]))
    assert r.rc == 0, r
    # One that ran and succeeded holds nothing.
    r = kubectl.apply_file(files / "done.yaml", pinned(
        "done", "batch", "gpu", 2, H100[2], annotations={"fleet.gpugate.io/exit": "Succeeded"}))
    assert r.rc == 0, r
    wait_running(kubectl, "batch", {n: node for n, (node, _) in placed.items()})
    wait_running(kubectl, "product-inference", {"serve": "a100-1g-10gb-1"})
    wait_until("done Succeeded", lambda: kubectl.get("pod", "done", "batch")["status"].get(
        "phase") == "Succeeded", 60)
    unschedulable(kubectl, "research", "stuck")
    wait_flavor(example, lambda f: f["allocated"] == 14, "14 allocated")

    r = subprocess.run([str(stack.binary), "pool", "--policy", str(EXAMPLE_POLICY),
                        "--kubeconfig", stack.cluster.env["KUBECONFIG"]],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r
    assert r.stdout == f"""\
{POOL_HEADER}
h100-80gb                6      5       48        14    26            8  h100-80gb-5 (cordoned)
a100-1g.10gb             2      2      112         2   110           56  -
a100-3g.40gb             2      2       32         0    32           16  -
l4-shared                4      4       64         0    64           16  -

h100-80gb: effective: 40 of 48 promised usable (8 on excluded nodes): 8 not backed
a100-1g.10gb: effective: 112 usable back the 112 promised
a100-3g.40gb: effective: 32 usable back the 32 promised
l4-shared: effective: 64 usable back the 32 promised

TENANT               FLAVOR                 USED  NOMINAL  BORROWED   LENT
research             h100-80gb                 8       32         0      0
research             l4-shared                 0        8         0      0
product              a100-1g.10gb              2      112         0      0
product              a100-3g.40gb              0       32         0      0
product              h100-80gb                 0       16         0      0
sandbox              l4-shared                 0       24         0      0
""", r.stdout
    r = subprocess.run([str(stack.binary), "pool", "--policy", str(EXAMPLE_POLICY),
                        "--kubeconfig", stack.cluster.env["KUBECONFIG"], "-o", "json"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r
    h100 = json.loads(r.stdout)["flavors"][0]
    assert {n["name"]: (n["state"], n["allocated"], n["free"]) for n in h100["nodeList"]} == {
        H100[0]: ("usable", 8, 0), H100[1]: ("usable", 3, 5), H100[2]: ("usable", 0, 8),
        H100[3]: ("usable", 3, 5), H100[4]: ("usable", 0, 8), H100[5]: ("cordoned", 0, 8)}
    assert h100["largestFreeNode"] in (H100[2], H100[4])
    e2e.assert_invariant(kubectl, example, "research", ["research", "research-jobs"],
                         "h100-80gb", "nvidia.com/gpu", 48)
    e2e.assert_invariant(kubectl, example, "product", ["product-inference"],
                         "a100-1g.10gb", "nvidia.com/mig-1g.10gb", 112)
    e2e.assert_invariant(kubectl, quota, "batch", ["batch"], "h100-80gb", "nvidia.com/gpu", 16)
