"""Gang start, all or nothing (issue #29, SPEC section 9, docs/design/
gang-start.md "End to end"), on two clusters: the suite's plain one (no
workload-aware scheduling gates: gpugate gates the pods, route `gates`)
and, in run.sh's second pass, a GPUGATE_WAS=1 one (cluster.sh: Job
spec.scheduling served, route `workload`; `podgroup` when the policy says
so).  Every test here runs in both passes unless marked plain_only (the
gates route) or was_only (needs Job spec.scheduling or PodGroups).

The fleet, "one node short": the example policy's six H100 nodes
(`fleet`, e2e.EXAMPLE_FLEET), two NVLink cliques of 3 (h100-80gb-0..2 and
-3..5, label nvidia.com/gpu.clique=<uuid>.0 and .1), 8 GPUs each, and a
blocker pod taking the 8 GPUs of the first node of each clique: 4 free
nodes, no clique with 3.  A train-large Job of 3 pods (8 GPUs each, topology
required on the clique) has room for 2 of its 3 pods in either clique.

gpugate here is one of this module's own (stack.gates["gang"]), serving
GANG_POLICY, written below from the example policy's flavor h100-80gb and
class train-large with `gang: true`, for the namespaces labelled
e2e.gpugate.io/policy=gang: gang-a (tenant gang) and gang-block (tenant
block, the blockers).  It runs with --namespace gpugate-gang (its Lease and
the record ConfigMap gpugate-gangs are there) and, as the stack's do,
--waiting-reason-after 2.

The blockers have PriorityClass training, as train-large: the scheduler
preempts nothing for the gang (it would evict lower-priority pods).

Until gang start is built these fail for the reason they exist: the
gang's pods are bound as they fit (2 of 3), nothing is gated or stamped.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from gpugate_e2e import (EXAMPLE_POLICY, GANG, JOB_NAME, POLICY_LABEL, Gate, Watch,
                         force_delete, job, pod, register, terminating, wait_service_accounts,
                         wait_until, wait_webhooks)
from test_fleet import CLIQUE, HOSTNAME, cliques, node_of, phase

pytestmark = pytest.mark.was

NS = "gang-a"            # tenant gang: the gangs
BLOCK_NS = "gang-block"  # tenant block: the blockers
HOME = "gpugate-gang"    # gpugate's own namespace (--namespace)
GATE = "gang"            # stack.gates key, the webhook configurations' policy label
ROUTE = "gpugate.io/gang-route"
GANG_GATE = "gpugate.io/gang"
START = "fleet.gpugate.io/start"  # kwok/stages.yaml: "never" keeps a pod short of Running
RECORD = "gpugate-gangs"
VALIDATE = 'admission webhook "validate.gpugate.io" denied the request: gpugate'
POLL = 0.5


def gang_policy(gang_start: str | None = None) -> str:
    """The example policy's h100-80gb and train-large, train-large now a
    gang; train-split the same without gang (the control); block, 8 H100
    for the blockers (priority as train-large's); solo, the webhook probe.
    gangTimeoutSeconds 20 for the timeout test (the gangs of the other
    tests run at once, KWOK)."""
    ex = yaml.safe_load(EXAMPLE_POLICY.read_text())
    flavor = next(f for f in ex["flavors"] if f["name"] == "h100-80gb")
    large = next(c for c in ex["classes"] if c["name"] == "train-large")
    assert large["topology"] == {"key": CLIQUE, "mode": "required"}, large
    gang = dict(large, gang=True)
    split = dict(copy.deepcopy(large), name="train-split",
                 description="train-large without gang start (the control)")
    settings = {"admissionWarnings": "all", "gangTimeoutSeconds": 20}
    if gang_start:
        settings["gangStart"] = gang_start
    doc = {
        "version": 1,
        "settings": settings,
        "flavors": [flavor],
        "classes": [
            gang, split,
            {"name": "block", "description": "a whole H100 node, to take one away",
             "flavor": "h100-80gb", "gpus": 8, "priorityClassName": "training"},
            {"name": "solo", "description": "one H100", "flavor": "h100-80gb", "gpus": 1},
        ],
        "tenants": [
            {"name": "gang", "namespaces": [NS],
             "quota": [{"flavor": "h100-80gb", "nominal": 48}]},
            {"name": "block", "namespaces": [BLOCK_NS],
             "quota": [{"flavor": "h100-80gb", "nominal": 16}]},
        ],
    }
    return yaml.safe_dump(doc, sort_keys=False)


# ---------------------------------------------------------------------------
# helpers


def metric(gate: Gate, name: str, **labels: str) -> float | None:
    """The value of the sample NAME whose labels include LABELS (None:
    no such sample)."""
    for line in gate.metrics().splitlines():
        m = re.match(r"^(\w+)(?:\{(.*)\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        have = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            return float(m.group(3))
    return None


def pods_of(k, name: str) -> list[dict]:
    return k("get", "pods", "-n", NS, "-l", f"{JOB_NAME}={name}", "-o", "json").json()["items"]


def live(pods: list[dict]) -> list[dict]:
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def gates_of(obj: dict) -> list[str]:
    spec = obj["spec"]["template"]["spec"] if obj.get("kind") == "Job" else obj["spec"]
    return [g["name"] for g in spec.get("schedulingGates") or []]


def annotations(obj: dict) -> dict:
    return obj["metadata"].get("annotations") or {}


def template_meta(j: dict) -> dict:
    return j["spec"]["template"].get("metadata") or {}


def gang_job(name: str, cls: str = "train-large", **extra) -> dict:
    """A Job of 3 pods (parallelism 3, completions 3) of CLS in gang-a."""
    return job(name, NS, cls, parallelism=3, completions=3, **extra)


def create(k, files: Path, obj: dict) -> None:
    kind = obj["kind"].lower() + (".batch" if obj["kind"] == "Job" else "")
    name = obj["metadata"]["name"]
    r = k.apply_file(files / f"{name}.yaml", obj, verb="create")
    assert (r.rc, r.out) == (0, f"{kind}/{name} created\n"), r


def wait_pods(k, name: str, n: int = 3, timeout: float = 30.0) -> list[dict]:
    """The Job's N pods once they all exist."""
    return wait_until(f"the {n} pods of job {NS}/{name}",
                      lambda: (lambda ps: ps if len(ps) == n else None)(live(pods_of(k, name))),
                      timeout, POLL)


def wait_gated(k, name: str, n: int = 3, timeout: float = 30.0) -> list[dict]:
    """The Job's N pods once all exist and carry the gang gate (route gates)."""
    last: list = [None]

    def ok():
        ps = live(pods_of(k, name))
        last[0] = {p["metadata"]["name"]: (gates_of(p), node_of(p)) for p in ps}
        return ps if len(ps) == n and all(GANG_GATE in gates_of(p) for p in ps) else None
    try:
        return wait_until(f"the {n} pods of job {NS}/{name} gated {GANG_GATE}", ok, timeout, POLL)
    except AssertionError:
        raise AssertionError(f"the pods of job {NS}/{name} are not all gated {GANG_GATE}: "
                             f"(gates, node) {last[0]}") from None


def hold_unbound(k, gate: Gate, name: str, seconds: float, used: int = 24) -> list[dict]:
    """For SECONDS (poll 0.5 s) no pod of the Job has a node and the
    tenant's usage is USED throughout.  The pods at the end."""
    deadline = time.monotonic() + seconds
    while True:
        ps = pods_of(k, name)
        bound = {p["metadata"]["name"]: node_of(p) for p in ps if node_of(p)}
        assert not bound, f"pods of the gang {name} bound before the whole gang fits: {bound}"
        assert gate.quota_used("gang") == used, \
            f"gpugate_quota_used{{tenant=gang}} is {gate.quota_used('gang')}, not {used}"
        if time.monotonic() >= deadline:
            return ps
        time.sleep(POLL)


def wait_bound(k, name: str, n: int = 3, timeout: float = 20.0) -> list[dict]:
    """The Job's N pods once all are bound."""
    last: list = [None]

    def ok():
        ps = live(pods_of(k, name))
        last[0] = {p["metadata"]["name"]: node_of(p) for p in ps}
        return ps if len(ps) == n and all(node_of(p) for p in ps) else None
    try:
        return wait_until(f"the {n} pods of job {NS}/{name} bound", ok, timeout, POLL)
    except AssertionError:
        raise AssertionError(f"the pods of job {NS}/{name} are not all bound within "
                             f"{timeout:.0f}s: {last[0]}") from None


def empty(k, gate: Gate) -> None:
    """gang-a without Jobs and pods, tenant gang's usage 0."""
    k("delete", "jobs,pods", "--all", "-n", NS, "--cascade=foreground", "--wait=false",
      timeout=120).check()

    def gone() -> bool:
        items = k("get", "jobs,pods", "-n", NS, "-o", "json").json()["items"]
        force_delete(k, NS, terminating(items))
        return not items
    wait_until(f"namespace {NS} to be empty", gone, 120, POLL)
    gate.wait_used("gang", 0)


def ensure_blockers(k, fleet, files: Path) -> dict[str, str]:
    """A Running blocker on the first node of each clique: {clique: pod}.
    Kept from test to test; made again when a test deleted one."""
    domains = cliques(fleet)
    assert sorted(map(len, domains.values())) == [3, 3], domains
    want = {}
    for i, (clique, nodes) in enumerate(sorted(domains.items())):
        name = f"block-{i}"
        want[clique] = name
        r = k("get", "pod", name, "-n", BLOCK_NS, "-o", "json")
        if r.rc == 0 and not json.loads(r.out)["metadata"].get("deletionTimestamp"):
            continue
        if r.rc == 0:
            force_delete(k, BLOCK_NS, [name])
            wait_until(f"pod {BLOCK_NS}/{name} gone",
                       lambda: k("get", "pod", name, "-n", BLOCK_NS).rc != 0, 30, POLL)
        create(k, files, pod(name, BLOCK_NS, "block", nodeSelector={HOSTNAME: nodes[0]}))
    for clique, name in want.items():
        def running(name=name):
            p = k.get("pod", name, BLOCK_NS)
            return p if phase(p) == "Running" else None
        p = wait_until(f"blocker {BLOCK_NS}/{name} Running", running, 60, POLL)
        assert node_of(p) == domains[clique][0], (name, node_of(p), domains)
    return want


def delete_blocker(k, name: str) -> None:
    k("delete", "pod", name, "-n", BLOCK_NS, "--wait=false").check()
    wait_until(f"blocker {BLOCK_NS}/{name} gone",
               lambda: k("get", "pod", name, "-n", BLOCK_NS).rc != 0, 30, POLL)


def first_clique(fleet) -> tuple[str, list[str]]:
    """The clique of block-0 and its nodes."""
    return sorted(cliques(fleet).items())[0]


def start_gate(stack, policy: Path, name: str = GATE) -> Gate:
    g = Gate(stack.binary, stack.certs, policy, policy.parent / "gpugate",
             stack.cluster.env["KUBECONFIG"], name=name,
             args=["--namespace", HOME, "--waiting-reason-after", "2",
                   "--no-gpuclasses", "--no-gpuquotas"]).start()
    g.wait_ready()
    register(stack.kubectl, "gpugate-gang", g, GATE)
    wait_webhooks(stack.kubectl, GATE)
    # The route of a Job is chosen at its admission from what the probe
    # last found: give the first probe a moment (gpugate_gang_route says
    # what auto picks).  Not asserted here: the tests say what is wrong.
    want = "workload" if stack.cluster.env.get("GPUGATE_WAS") == "1" else "gates"
    try:
        wait_until(f'gpugate_gang_route{{route="{want}"}} 1',
                   lambda: metric(g, "gpugate_gang_route", route=want) == 1, 10, 0.2)
    except AssertionError as e:
        print(f"test_gang_start: {e}")
    return g


# ---------------------------------------------------------------------------
# fixtures


@pytest.fixture(scope="module")
def policy(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("gang") / "gang-policy.yaml"
    p.write_text(gang_policy())
    return p


@pytest.fixture(scope="module")
def gang_gate(stack, fleet, policy):
    """This module's gpugate (stack.gates["gang"]: checked alive and clean
    after every test, stopped at the end), its namespaces, on the fleet."""
    k = stack.kubectl
    k.apply({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Namespace",
         "metadata": {"name": n, "labels": {POLICY_LABEL: GATE}}} for n in (NS, BLOCK_NS)
    ] + [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": HOME}}]}).check()
    wait_service_accounts(k, [NS, BLOCK_NS])
    stack.gates[GATE] = start_gate(stack, policy)
    try:
        yield stack.gates[GATE]
    finally:
        k("delete", "mutatingwebhookconfiguration,validatingwebhookconfiguration",
          "gpugate-gang", "--ignore-not-found")
        k("delete", "namespace", NS, BLOCK_NS, HOME, "--wait=false")
        g = stack.gates.pop(GATE, None)
        if g is not None:
            problems = g.stop_and_check()
            stack.retired.append(g)
            assert problems == [], problems


@pytest.fixture
def gang(stack, gang_gate) -> Gate:
    """This module's gpugate now (a test may have restarted it)."""
    return stack.gates[GATE]


@pytest.fixture
def blocked(stack, gang_gate, fleet, files):
    """gang-a empty (before and after), the blockers in place: {clique: pod}."""
    k = stack.kubectl
    empty(k, stack.gates[GATE])
    held = ensure_blockers(k, fleet, files)
    yield held
    empty(k, stack.gates[GATE])


@pytest.fixture(scope="module")
def waiting(stack, gang_gate, fleet, tmp_path_factory):
    """The gang the first tests share: train-large x 3 "allreduce", created
    on the blocked fleet."""
    k = stack.kubectl
    files = tmp_path_factory.mktemp("waiting")
    empty(k, stack.gates[GATE])
    ensure_blockers(k, fleet, files)
    t0 = time.monotonic()
    create(k, files, gang_job("allreduce"))
    yield {"name": "allreduce", "created": t0, "manifest": files / "allreduce.yaml"}
    empty(k, stack.gates[GATE])


@pytest.fixture
def route(was) -> str:
    """The route auto picks on this cluster."""
    return "workload" if was else "gates"


# ---------------------------------------------------------------------------
# the gang waits whole, then starts whole


def test_a_gang_waits_whole(stack, kubectl, gang, waiting, was, route):
    """No pod of it is bound while only 2 of its 3 fit in a clique: 20 s,
    polled every 0.5 s; its quota is held whole (24) throughout."""
    name = waiting["name"]
    ps = hold_unbound(kubectl, gang, name, 20)
    assert len(live(ps)) == 3, [p["metadata"]["name"] for p in ps]
    if was:
        return
    # The waiter says why on the pod (`kubectl describe pod`).
    def said() -> str | None:
        for p in live(pods_of(kubectl, name)):
            d = " ".join(kubectl("describe", "pod", p["metadata"]["name"], "-n", NS)
                         .check().out.split())
            if "waits for its gang" in d and "2 of 3 pods fit now" in d:
                return d
        return None
    d = wait_until("`kubectl describe pod` to say the pod waits for its gang", said, 30, 1)
    gang_id = kubectl.get("job", name, NS)["spec"]["template"]["metadata"]["labels"][GANG]
    assert f"waits for its gang {gang_id} (route gates): 2 of 3 pods fit now" in d, d
    assert re.search(r"Warning GPUWaiting .*? gpugate waits for its gang", d), d
    wait_until(f'gpugate_gangs_waiting{{route="{route}"}} 1',
               lambda: metric(gang, "gpugate_gangs_waiting", route=route, tenant="gang",
                              flavor="h100-80gb") == 1, 15, POLL)


def test_the_route_is_chosen_and_stamped(stack, kubectl, gang, policy, waiting, was, route):
    name = waiting["name"]
    j = kubectl.get("job", name, NS)
    assert annotations(j).get(ROUTE) == route, annotations(j)
    assert (template_meta(j).get("annotations") or {}).get(ROUTE) == route, template_meta(j)
    if was:
        sched = j["spec"].get("scheduling") or {}
        assert "gang" in (sched.get("schedulingPolicy") or {}), j["spec"]
        # min(parallelism, completions) = parallelism: gang {} (the Job's
        # parallelism is the default), or the explicit 3.
        assert sched["schedulingPolicy"]["gang"].get("minCount", 3) == 3, sched
        # required topology, and this apiserver keeps the constraint
        assert (sched.get("schedulingConstraints") or {}).get("topology") == [{"key": CLIQUE}], \
            sched
        assert GANG_GATE not in gates_of(j), j["spec"]["template"]["spec"]
    else:
        assert GANG_GATE in gates_of(j), j["spec"]["template"]["spec"]
        ps = wait_gated(kubectl, name)
        for p in ps:
            assert annotations(p).get(ROUTE) == "gates", annotations(p)
    # explain says it too, for the manifest as the user wrote it
    r = subprocess.run([str(stack.binary), "explain", "--policy", str(policy),
                        "--namespace", NS, "--kubeconfig", stack.cluster.env["KUBECONFIG"],
                        str(waiting["manifest"])], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    assert "gang start:" in r.stdout, r.stdout


def test_a_gang_starts_whole(stack, kubectl, gang, fleet, waiting, was, route):
    """The blocker of clique 0 goes: all 3 pods are bound within 20 s, all
    in clique 0; on route gates gpugate_gang_start_seconds observes the
    start."""
    name = waiting["name"]
    assert not [p for p in pods_of(kubectl, name) if node_of(p)], "bound before the start"
    before = metric(gang, "gpugate_gang_start_seconds_count", route=route) or 0
    clique, nodes = first_clique(fleet)
    delete_blocker(kubectl, "block-0")
    ps = wait_bound(kubectl, name, 3, 20)
    assert sorted(node_of(p) for p in ps) == nodes, ([node_of(p) for p in ps], clique, nodes)
    assert gang.quota_used("gang") == 24
    if route == "gates":  # from its release to all Running: gpugate released it
        wait_until(f"gpugate_gang_start_seconds_count{{route={route}}} to grow",
                   lambda: (metric(gang, "gpugate_gang_start_seconds_count", route=route)
                            or 0) > before, 20, POLL)


# ---------------------------------------------------------------------------
# the cluster itself: what routes workload and podgroup rely on


@pytest.mark.was_only
@pytest.mark.parametrize("how", ["workload", "podgroup"])
def test_the_scheduler_starts_a_hand_made_gang_whole(stack, kubectl, gang, fleet, blocked,
                                                     files, how):
    """Not gpugate's doing: what its routes 1 and 2 ask of the GPUGATE_WAS=1
    cluster, written by hand.  A Job with its own spec.scheduling (gang,
    topology on the clique: gpugate leaves it alone), or naming a PodGroup
    made here (minCount 3, the topology, and the pods' priority class:
    without it the scheduler refuses the group, "all pods in a single pod
    group should have the same priority as the pod group's priority, got
    1000 and 0"), waits while 2 of 3 fit and starts whole in clique 0."""
    k = kubectl
    topology = {"topology": [{"key": CLIQUE}]}
    if how == "workload":
        obj = gang_job("by-hand", scheduling={"schedulingPolicy": {"gang": {}},
                                              "schedulingConstraints": topology})
    else:
        k.create({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                  "metadata": {"name": "by-hand", "namespace": NS},
                  "spec": {"priorityClassName": "training",
                           "schedulingPolicy": {"gang": {"minCount": 3}},
                           "schedulingConstraints": topology}}).check()
        obj = gang_job("by-hand")
        obj["spec"]["template"]["spec"]["schedulingGroup"] = {"podGroupName": "by-hand"}
    try:
        create(k, files, obj)
        wait_pods(k, "by-hand")
        hold_unbound(k, gang, "by-hand", 5)
        clique, nodes = first_clique(fleet)
        delete_blocker(k, "block-0")
        ps = wait_bound(k, "by-hand", 3, 20)
        assert sorted(node_of(p) for p in ps) == nodes, ([node_of(p) for p in ps], nodes)
    finally:
        if how == "podgroup":
            k("delete", "jobs", "by-hand", "-n", NS, "--cascade=foreground", "--wait=false")
            k("delete", "podgroups.scheduling.k8s.io", "by-hand", "-n", NS, "--wait=false")


# ---------------------------------------------------------------------------
# the other routes and the control


@pytest.mark.was_only
def test_route_podgroup_makes_the_podgroup(stack, kubectl, gang, fleet, policy, blocked, files):
    """settings.gangStart: podgroup: the template names the PodGroup (the
    gang id), gpugate creates it, owned by the Job, minCount 3; the Job
    controller makes no Workload of its own (manageNone).  The gang waits,
    then starts whole once clique 0 has room."""
    k = kubectl
    probe = json.dumps(gang_job("probe"))

    def route_now() -> str | None:
        r = k("create", "--dry-run=server", "-o", "json", "-f", "-", input=probe)
        return annotations(json.loads(r.out)).get(ROUTE) if r.rc == 0 else None
    policy.write_text(gang_policy("podgroup"))
    try:
        wait_until("gpugate to take gangStart: podgroup",
                   lambda: route_now() == "podgroup", 30, POLL)
        create(k, files, gang_job("pg"))
        j = k.get("job", "pg", NS)
        gang_id = j["spec"]["template"]["metadata"]["labels"][GANG]
        assert annotations(j).get(ROUTE) == "podgroup", annotations(j)
        assert j["spec"]["template"]["spec"].get("schedulingGroup") == \
            {"podGroupName": gang_id}, j["spec"]["template"]["spec"]
        assert not j["spec"].get("scheduling"), j["spec"]
        pg = wait_until(f"PodGroup {NS}/{gang_id}", lambda: (lambda r: json.loads(r.out) if r.rc == 0
                        else None)(k("get", "podgroups.scheduling.k8s.io", gang_id, "-n", NS,
                                     "-o", "json")), 20, POLL)
        owners = [(o["kind"], o["name"], o["uid"], o.get("controller"))
                  for o in pg["metadata"].get("ownerReferences") or []]
        assert ("Job", "pg", j["metadata"]["uid"], True) in owners, owners
        assert pg["spec"]["schedulingPolicy"] == {"gang": {"minCount": 3}}, pg["spec"]
        for p in wait_pods(k, "pg"):
            assert p["spec"].get("schedulingGroup") == {"podGroupName": gang_id}, p["spec"]
            assert not node_of(p), p["metadata"]["name"]  # 2 of 3 fit: the gang waits
        workloads = k("get", "workloads.scheduling.k8s.io", "-n", NS, "-o", "json").json()["items"]
        mine = [w["metadata"]["name"] for w in workloads
                if any(o.get("uid") == j["metadata"]["uid"]
                       for o in w["metadata"].get("ownerReferences") or [])]
        assert set(mine) <= {gang_id}, mine  # no Job-controller Workload
        # And it starts whole.  (A PodGroup without the pods' priority
        # class never does: the scheduler refuses the group, "all pods in
        # a single pod group should have the same priority as the pod
        # group's priority, got 1000 and 0".)
        hold_unbound(k, gang, "pg", 3)
        clique, nodes = first_clique(fleet)
        delete_blocker(k, "block-0")
        ps = wait_bound(k, "pg", 3, 20)
        assert sorted(node_of(p) for p in ps) == nodes, ([node_of(p) for p in ps], nodes)
    finally:
        policy.write_text(gang_policy())
        wait_until("gpugate back on gangStart: auto", lambda: route_now() != "podgroup", 30,
                   POLL)


def test_a_job_of_a_class_without_gang_splits_as_before(stack, kubectl, gang, blocked, files):
    """train-split (train-large without gang): 2 of its 3 pods run in one
    clique, the third waits for a node there; no gate, no stamp."""
    create(kubectl, files, gang_job("split", "train-split"))
    last: list = [None]

    def two_bound():
        ps = live(pods_of(kubectl, "split"))
        last[0] = {p["metadata"]["name"]: (node_of(p), phase(p)) for p in ps}
        bound = [p for p in ps if node_of(p) and phase(p) == "Running"]
        return ps if len(ps) == 3 and len(bound) == 2 else None
    try:
        wait_until("2 of the 3 pods of split Running", two_bound, 30, POLL)
    except AssertionError:
        raise AssertionError(f"split's pods: {last[0]}") from None
    time.sleep(3)
    ps = live(pods_of(kubectl, "split"))
    bound = [node_of(p) for p in ps if node_of(p)]
    assert len(bound) == 2, {p["metadata"]["name"]: node_of(p) for p in ps}
    assert len({kubectl.get("node", n, None)["metadata"]["labels"][CLIQUE] for n in bound}) == 1
    j = kubectl.get("job", "split", NS)
    assert ROUTE not in annotations(j), annotations(j)
    assert not gates_of(j) and not any(gates_of(p) for p in ps)
    assert gang.quota_used("gang") == 24


# ---------------------------------------------------------------------------
# route gates: a restart, the timeout


@pytest.mark.plain_only
def test_a_waiting_gang_survives_a_restart(stack, kubectl, gang, fleet, blocked, files):
    """kill -9 while the gang waits: the gates are cluster state; the new
    gpugate finds them and releases the gang once the blocker goes."""
    k = kubectl
    create(k, files, gang_job("survivor"))
    wait_gated(k, "survivor")
    old = stack.gates[GATE]
    old.kill()  # SIGKILL
    stack.retired.append(old)
    new = start_gate(stack, old.policy, name=f"{GATE}-restarted")
    stack.gates[GATE] = new
    ps = hold_unbound(k, new, "survivor", 3)
    assert all(GANG_GATE in gates_of(p) for p in live(ps)), [gates_of(p) for p in ps]
    clique, nodes = first_clique(fleet)
    delete_blocker(k, "block-0")
    ps = wait_bound(k, "survivor", 3, 20)
    assert sorted(node_of(p) for p in ps) == nodes, ([node_of(p) for p in ps], nodes)


@pytest.mark.plain_only
def test_a_released_gang_not_running_in_time_is_gated_again(stack, kubectl, gang, fleet,
                                                            blocked, files):
    """gangTimeoutSeconds 20: one pod of a released gang never starts (the
    KWOK stage holds it Pending on its node).  After 20 s the Job is
    suspended and resumed (not its pods deleted: those would count as
    failures), its pods recreated gated; the record (ConfigMap
    gpugate-gangs, data[<job uid>], which lives from the release to the
    start) says n=1; status.failed unchanged.  The recreated pods start
    (they lack the annotation)."""
    k = kubectl
    create(k, files, gang_job("slow"))
    ps = wait_gated(k, "slow")
    originals = {p["metadata"]["uid"] for p in ps}
    stuck = sorted(p["metadata"]["name"] for p in ps)[0]
    k("annotate", "pod", stuck, "-n", NS, f"{START}=never").check()
    j = k.get("job", "slow", NS)
    uid, failed = j["metadata"]["uid"], (j.get("status") or {}).get("failed", 0)
    regates = metric(gang, "gpugate_gang_regates_total", tenant="gang") or 0

    # The record lives from the release to the start: watched, not polled.
    with Watch(k, "pods", NS, "-l", f"{JOB_NAME}=slow") as pods_w, \
            Watch(k, "jobs", NS, "--field-selector", "metadata.name=slow") as job_w, \
            Watch(k, "configmaps", HOME, "--field-selector",
                  f"metadata.name={RECORD}") as rec_w:
        delete_blocker(k, "block-0")
        wait_bound(k, "slow", 3, 20)
        released = time.monotonic()

        def renewed():
            now = live(pods_of(k, "slow"))
            return now if (len(now) == 3 and not {p["metadata"]["uid"] for p in now} & originals
                           and all(phase(p) == "Running" for p in now)) else None
        wait_until("the gang regated, recreated and Running", renewed, 90, POLL)
        took = time.monotonic() - released
        assert took >= 15, f"regated {took:.0f}s after the release, before gangTimeoutSeconds"
        time.sleep(1)
    new = {u: o for u, o in pods_w.first_versions().items() if u not in originals}
    assert len(new) >= 3, sorted(new)
    for o in new.values():
        assert GANG_GATE in gates_of(o), (o["metadata"]["name"], o["spec"].get("schedulingGates"))
    assert any(v["spec"].get("suspend") for v in job_w.objects(uid)), \
        "the Job was never suspended"
    j = k.get("job", "slow", NS)
    assert not j["spec"].get("suspend"), j["spec"]
    assert (j.get("status") or {}).get("failed", 0) == failed, j.get("status")
    records = [(o.get("data") or {}).get(uid, "") for o in rec_w.objects()]
    assert any(re.search(r"(^|\s)n=1(\s|$)", r) for r in records), records
    assert metric(gang, "gpugate_gang_regates_total", tenant="gang") == regates + 1
    events = k("get", "events", "-n", NS, "--field-selector",
               "involvedObject.kind=Job,involvedObject.name=slow", "-o", "json").json()["items"]
    assert "GPUGangRegated" in {e.get("reason") for e in events}, [e.get("reason") for e in events]


# ---------------------------------------------------------------------------
# attacks, as a tenant bound to the built-in edit role


@pytest.mark.plain_only
def test_a_tenant_cannot_remove_the_gang_gate(stack, kubectl, gang, blocked, files):
    tk = stack.tenant_kubectl(NS)
    create(kubectl, files, gang_job("gated"))
    p = sorted(wait_gated(kubectl, "gated"), key=lambda p: p["metadata"]["name"])[0]
    name = p["metadata"]["name"]
    i = gates_of(p).index(GANG_GATE)
    r = tk("patch", "pod", name, "-n", NS, "--type=json", "-p", json.dumps(
        [{"op": "remove", "path": f"/spec/schedulingGates/{i}"}]))
    assert r.rc != 0 and VALIDATE in r.err and GANG_GATE in r.err, r
    p = kubectl.get("pod", name, NS)
    p["spec"]["schedulingGates"] = [g for g in p["spec"]["schedulingGates"]
                                    if g["name"] != GANG_GATE]
    r = tk("replace", "-f", "-", input=json.dumps(p))
    assert r.rc != 0 and VALIDATE in r.err and GANG_GATE in r.err, r
    assert GANG_GATE in gates_of(kubectl.get("pod", name, NS))


@pytest.mark.parametrize("how", ["template", "owner"])
def test_a_tenant_cannot_bind_a_gang_pod_itself(stack, kubectl, gang, blocked, files, how):
    """A pod of the gang's Job with spec.nodeName, skipping the scheduler
    and the gang: denied.  template: the Job's pod template as gpugate
    stamped it (its labels and annotations, the route among them), less
    the gate, plus nodeName; owner: a class pod that names the Job as its
    controller (ownerReference, controller-uid label) and nothing of the
    template's stamps (design, "What /validate refuses": a pod owned by, or
    labelled with the controller-uid of, a gang's Job)."""
    tk = stack.tenant_kubectl(NS)
    create(kubectl, files, gang_job("owned"))
    j = kubectl.get("job", "owned", NS)
    uid = j["metadata"]["uid"]
    free = sorted(free_h100_nodes(kubectl))[0]
    owner = [{"apiVersion": "batch/v1", "kind": "Job", "name": "owned", "uid": uid,
              "controller": True}]
    if how == "template":
        tmpl = copy.deepcopy(j["spec"]["template"])
        spec = dict(tmpl["spec"], nodeName=free)
        spec.pop("schedulingGates", None)
        p = {"apiVersion": "v1", "kind": "Pod",
             "metadata": dict(tmpl.get("metadata") or {}, name="owned-extra", namespace=NS,
                              ownerReferences=owner),
             "spec": spec}
        assert annotations(p).get(ROUTE), p["metadata"]  # the stamp is copied
    else:
        p = pod("owned-extra", NS, "train-large",
                labels={"batch.kubernetes.io/controller-uid": uid, JOB_NAME: "owned"},
                nodeName=free, restartPolicy="Never")
        p["metadata"]["ownerReferences"] = owner
    r = tk("create", "-f", "-", input=json.dumps(p))
    denied = "denied the request: gpugate" in r.err and "nodeName" in r.err
    # Route gates: /mutate gives a pod stamped gates its gate back, and the
    # apiserver itself then refuses the nodeName of a gated pod.
    regated = "spec.nodeName: Forbidden: cannot be set until all schedulingGates have " \
        "been cleared" in r.err and annotations(p).get(ROUTE) == "gates"
    assert r.rc != 0 and (denied or regated), r
    assert kubectl("get", "pod", "owned-extra", "-n", NS).rc != 0


def free_h100_nodes(k) -> list[str]:
    """H100 nodes no pod is bound to."""
    busy = {node_of(p) for p in k("get", "pods", "-A", "-o", "json").json()["items"]
            if node_of(p) and phase(p) not in ("Succeeded", "Failed")}
    nodes = k("get", "nodes", "-l", CLIQUE, "-o", "json").json()["items"]
    return [n["metadata"]["name"] for n in nodes if n["metadata"]["name"] not in busy]


@pytest.mark.was_only
def test_a_tenant_cannot_lower_the_gang_min_count(stack, kubectl, gang, blocked, files):
    """spec.scheduling.schedulingPolicy.gang.minCount is the one mutable
    part of Job spec.scheduling, and edit may write it: 1 would start a
    third of the gang.  Denied."""
    tk = stack.tenant_kubectl(NS)
    create(kubectl, files, gang_job("mc"))
    before = kubectl.get("job", "mc", NS)["spec"].get("scheduling")
    assert before and "gang" in before.get("schedulingPolicy", {}), \
        f"no gang in the Job's spec.scheduling (route workload not taken): {before}"
    r = tk("patch", "job", "mc", "-n", NS, "--type=merge", "-p", json.dumps(
        {"spec": {"scheduling": {"schedulingPolicy": {"gang": {"minCount": 1}}}}}))
    assert r.rc != 0 and VALIDATE in r.err and "minCount" in r.err, r
    assert kubectl.get("job", "mc", NS)["spec"]["scheduling"] == before


# ---------------------------------------------------------------------------
# left to others


def assert_untouched(k, name: str) -> dict:
    j = k.get("job", name, NS)
    assert ROUTE not in annotations(j), annotations(j)
    assert ROUTE not in (template_meta(j).get("annotations") or {}), template_meta(j)
    assert GANG_GATE not in gates_of(j), j["spec"]["template"]["spec"]
    for p in wait_pods(k, name):
        assert GANG_GATE not in gates_of(p) and ROUTE not in annotations(p), p["metadata"]
    return j


@pytest.mark.was_only
def test_a_job_with_its_own_scheduling_is_left_alone(stack, kubectl, gang, blocked, files):
    own = {"schedulingPolicy": {"basic": {}}}
    create(kubectl, files, gang_job("own", scheduling=own))
    j = assert_untouched(kubectl, "own")
    assert j["spec"]["scheduling"]["schedulingPolicy"] == {"basic": {}}, j["spec"]["scheduling"]


def test_a_job_for_another_scheduler_is_left_alone(stack, kubectl, gang, blocked, files, was):
    obj = gang_job("elsewhere")
    obj["spec"]["template"]["spec"]["schedulerName"] = "other-scheduler"
    create(kubectl, files, obj)
    j = assert_untouched(kubectl, "elsewhere")
    if was:
        assert not j["spec"].get("scheduling"), j["spec"]
