"""Issue #15: placement and lifecycle on a fake GPU fleet, proved against the
real kube-scheduler.  KWOK plays the kubelets (tests/e2e/kwok/stages.yaml):
a pod bound to a fleet node turns Running at once, completes or fails when
annotated fleet.gpugate.io/exit, and when deleted stops at once or, with
fleet.gpugate.io/on-sigterm: ignore, at the end of its grace period.

The fleet is the example policy's (e2e.EXAMPLE_FLEET, the module fixture
`fleet`): h100-80gb-0..5 in two NVLink domains (nvidia.com/gpu.clique) of 3,
a100-1g-10gb-0..1 (56 x nvidia.com/mig-1g.10gb), a100-3g-40gb-0..1 (16 x
nvidia.com/mig-3g.40gb), l4-shared-0..3 (16 x nvidia.com/gpu.shared), every
GPU node tainted nvidia.com/gpu=present:NoSchedule, and cpu-0..1.  The
QUOTA_POLICY flavor h100-80gb selects the same nodes, so the quota tenants'
pods (solo, batch, near) run on the H100 nodes too.

What gpugate writes for topology (webhook/apply.c map_topology, policy/
decide.c plan_mapping): only a Job with parallelism > 1 of a class with a
topology gets it, as a podAffinity term on its own gang label,
{labelSelector: {matchLabels: {gpugate.io/gang: g-...}}, topologyKey:
nvidia.com/gpu.clique}, required or preferred (weight 100).  That keeps the
gang's pods together relative to each other and nothing more: the first pod
goes wherever it fits (a pod whose term matches only itself may land in any
domain), the others must (required) or should (preferred) follow it into
its domain.  There is no all-or-nothing gang scheduling, so when a domain
cannot hold a required gang, the pods that fit there run and the rest stay
Pending, while a free node in another domain stays free: the gang waits for
its domain rather than split (test_a_required_gang_waits_for_its_clique).

On an empty fleet a gang of 3 whole nodes may land in one domain by chance
(and this scheduler's tie-breaking often does), so the "lands in one clique"
tests first load the H100 nodes' CPUs in a staircase that alternates
between the domains (staircase()): ranked by resources alone the gang
would split, and only its affinity keeps it together.  Nodes are taken
away by "blockers" of priority 1000: train-large has PriorityClass
training (1000), and the scheduler preempts lower-priority pods for it.

Every test ends with the invariant (assert_invariant) for the tenants it
used.
"""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest

from gpugate_e2e import (CLASS, FLAVOR, GANG, GPU_TOLERATION, JOB_NAME, assert_invariant, job,
                         pod, pod_terminal, wait_until)
from test_kubectl_admission import denied_by, gpu_container_of, warning
from test_kubectl_quota import admitted, over

CLIQUE = "nvidia.com/gpu.clique"
HOSTNAME = "kubernetes.io/hostname"
EXIT = "fleet.gpugate.io/exit"
RUN_FOR = "fleet.gpugate.io/run-for"
ON_SIGTERM = "fleet.gpugate.io/on-sigterm"
H100, GPU = "h100-80gb", "nvidia.com/gpu"

# The checkpoint claims the example policy's preemptible classes mount
# (checkpoint.claimName "{tenant}-checkpoints"): without them the scheduler
# keeps train-small and dev-shared pods Pending ('persistentvolumeclaim
# "research-checkpoints" not found').
CHECKPOINT_CLAIMS = {"research": "research-checkpoints", "sandbox-1": "sandbox-checkpoints"}


# ---------------------------------------------------------------------------
# helpers


def pods_of(kubectl, ns: str, selector: str | None = None) -> list[dict]:
    sel = ["-l", selector] if selector else []
    return kubectl("get", "pods", "-n", ns, *sel, "-o", "json").json()["items"]


def phase(p: dict) -> str | None:
    return (p.get("status") or {}).get("phase")


def node_of(p: dict) -> str | None:
    return p["spec"].get("nodeName")


def wait_phase(kubectl, ns: str, name: str, want: str, timeout: float = 60.0) -> dict:
    """The pod once it is in phase WANT (Running: bound and started)."""
    last = [None]

    def ok():
        r = kubectl("get", "pod", name, "-n", ns, "-o", "json")
        last[0] = phase(r.json()) if r.rc == 0 else r.err.strip()
        return r.json() if r.rc == 0 and last[0] == want else None
    try:
        return wait_until(f"pod {ns}/{name} to be {want}", ok, timeout)
    except AssertionError:
        raise AssertionError(f"pod {ns}/{name} is {last[0]}, not {want}") from None


def wait_job_phases(kubectl, ns: str, name: str, want: dict, timeout: float = 60.0) -> list[dict]:
    """The Job's pods once their phases count exactly WANT ({"Running": 2,
    "Pending": 1}): no more pods than that, and a Pending one only once the
    scheduler has found it unschedulable (its PodScheduled condition)."""
    last = [None]

    def ok():
        items = pods_of(kubectl, ns, f"{JOB_NAME}={name}")
        last[0] = Counter(phase(p) for p in items)
        if last[0] != Counter(want):
            return None
        if any(phase(p) == "Pending" and unschedulable(p) is None for p in items):
            return None
        return items
    try:
        return wait_until(f"the pods of job {ns}/{name} to be {want}", ok, timeout)
    except AssertionError:
        raise AssertionError(f"the pods of job {ns}/{name} are {dict(last[0] or {})}, "
                             f"not {want}") from None


def unschedulable(p: dict) -> str | None:
    """The scheduler's message when it found no node for the pod, else None."""
    for c in (p.get("status") or {}).get("conditions") or []:
        if c["type"] == "PodScheduled" and c["status"] == "False" \
                and c.get("reason") == "Unschedulable":
            return c.get("message", "")
    return None


def cliques(fleet) -> dict[str, list[str]]:
    """NVLink domain -> its H100 nodes, sorted."""
    out: dict[str, list[str]] = {}
    for name in sorted(fleet.by_name):
        c = fleet.label(name, CLIQUE)
        if c:
            out.setdefault(c, []).append(name)
    return out


def created(r, name: str, kind: str = "pod") -> None:
    assert (r.rc, r.out) == (0, f"{kind}/{name} created\n"), r


def occupy(kubectl, files, nodes: list[str]) -> dict[str, str]:
    """One 8-GPU pod of tenant batch (nominal 16) on each of NODES (by its
    hostname label), Running: {node: pod name}.  They have priority 1000
    (PriorityClass training), as train-large: the scheduler may not preempt
    them for a train-large gang (it does preempt priority-0 pods)."""
    held = {}
    for i, node in enumerate(nodes):
        name = f"blocker-{i}"
        r = kubectl.apply_file(files / f"{name}.yaml", pod(
            name, "batch", "gpu8", nodeSelector={HOSTNAME: node}, priorityClassName="training"))
        created(r, name)
        assert r.err == warning(f"gpugate: gpu8 -> 8 x h100-80gb for tenant batch "
                                f"({8 * (i + 1)}/16 in use)")
        held[node] = name
    for node, name in held.items():
        assert node_of(wait_phase(kubectl, "batch", name, "Running")) == node
    return held


def staircase(kubectl, files, domains: dict[str, list[str]]) -> list[str]:
    """CPU load on the H100 nodes, rising in steps of 22 cores (of 224) and
    alternating between the two domains: a0 0, b0 22, a1 44, b1 66, a2 88,
    b2 110.  The scheduler's resource scores (least allocated, balanced)
    then rank the nodes in that order, so that a gang placed by them alone
    takes a0, b0, a1: split.  Only the gang's pod affinity keeps it in one
    domain.  The load: plain pods of namespace batch (no GPU) that tolerate
    the GPU taint, one per node by its hostname label.  The nodes in rank
    order."""
    a, b = domains.values()
    order = [n for pair in zip(a, b) for n in pair]
    loaded = []
    for i, node in enumerate(order[1:], start=1):
        name = f"load-{node}"
        r = kubectl.apply_file(files / f"{name}.yaml", pod(
            name, "batch", nodeSelector={HOSTNAME: node}, tolerations=[GPU_TOLERATION],
            containers=[{"name": "etl", "image": "busybox",
                         "resources": {"requests": {"cpu": str(22 * i)}}}]))
        assert (r.rc, r.out, r.err) == (0, f"pod/{name} created\n", ""), r
        loaded.append((name, node))
    for name, node in loaded:
        assert node_of(wait_phase(kubectl, "batch", name, "Running")) == node
    return order


def gang_affinity(gang: str, mode: str) -> dict:
    """The podAffinity gpugate writes on a gang's pods (webhook/apply.c)."""
    term = {"labelSelector": {"matchLabels": {GANG: gang}}, "topologyKey": CLIQUE}
    if mode == "required":
        return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    return {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "podAffinityTerm": term}]}}


def invariant(stack, tenant: str, namespaces: list[str], flavor: str = H100,
              resource: str = GPU, ceiling: int | None = None, gate: str = "quota"):
    return assert_invariant(stack.kubectl, stack.gates[gate], tenant, namespaces, flavor,
                            resource, ceiling)


def research_invariant(stack):
    # nominal 32 + borrowingLimit 16
    return invariant(stack, "research", ["research", "research-jobs"], ceiling=48,
                     gate="example")


@pytest.fixture(scope="module")
def checkpoint_claims(stack):
    """The checkpoint claims of research and sandbox-1, bound: the stack
    creates them for every test (gpugate_e2e.create_checkpoint_claims)."""
    k = stack.kubectl
    for ns, claim in CHECKPOINT_CLAIMS.items():
        pvc = k.get("pvc", claim, ns)
        assert pvc["status"]["phase"] == "Bound", pvc
    return CHECKPOINT_CLAIMS


# ---------------------------------------------------------------------------
# 1. every class lands on a node of its flavor

# class, namespace, gpugate.io/gpus (None: the class's default), gpus, tenant,
# flavor, resource, position in the admission warning, ceiling
CLASSES = [
    ("train-large", "research", None, 8, "research", "h100-80gb", GPU, "8/32", 48),
    ("train-small", "research", 2, 2, "research", "h100-80gb", GPU, "2/32", 48),
    ("inference-mig", "product-inference", 2, 2, "product", "a100-1g.10gb",
     "nvidia.com/mig-1g.10gb", "2/112", 112),
    ("inference-mig-large", "product-inference", None, 1, "product", "a100-3g.40gb",
     "nvidia.com/mig-3g.40gb", "1/32", 32),
    ("dev-shared", "sandbox-1", None, 1, "sandbox", "l4-shared", "nvidia.com/gpu.shared",
     "1/24", 24),
]


@pytest.mark.parametrize("cls,ns,label,gpus,tenant,flavor,resource,position,ceiling",
                         CLASSES, ids=[c[0] for c in CLASSES])
def test_a_class_pod_runs_on_a_node_of_its_flavor(stack, kubectl, example, fleet,
                                                  checkpoint_claims, clean, files, cls, ns,
                                                  label, gpus, tenant, flavor, resource,
                                                  position, ceiling):
    clean(ns)
    name = f"{cls}-0"
    r = kubectl.apply_file(files / "pod.yaml", pod(name, ns, cls, label))
    created(r, name)
    assert r.err == warning(f"gpugate: {cls} -> {gpus} x {flavor} for tenant {tenant} "
                            f"({position} in use)")

    p = wait_phase(kubectl, ns, name, "Running")
    node = node_of(p)
    assert fleet.flavor_of(node) == flavor, f"{cls} pod on {node} ({fleet.flavor_of(node)})"
    assert p["metadata"]["labels"][FLAVOR] == flavor
    assert gpu_container_of(p)["resources"]["limits"][resource] == str(gpus)
    assert fleet.by_name[node]["status"]["allocatable"][resource] == \
        str(next(f["gpusPerNode"] for f in fleet.policy["flavors"] if f["name"] == flavor))
    assert p["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]
    example.wait_used(tenant, gpus, flavor)
    invariant(stack, tenant, [ns], flavor, resource, ceiling, gate="example")


# ---------------------------------------------------------------------------
# 2. a required-topology gang in one NVLink domain


def test_a_required_gang_lands_in_one_clique(stack, kubectl, example, quota, fleet, clean,
                                             files):
    """train-large x 3 (8 GPUs, 96 CPUs each) on the staircase: its pod
    affinity alone keeps it from a0, b0, a1."""
    clean("research", "batch")
    domains = cliques(fleet)
    assert sorted(map(len, domains.values())) == [3, 3], domains
    staircase(kubectl, files, domains)

    r = kubectl.apply_file(files / "job.yaml", job("allreduce", "research", "train-large",
                                                   parallelism=3))
    created(r, "allreduce", "job.batch")
    assert r.err == warning(
        "gpugate: train-large -> 3 pods x 8 x h100-80gb for tenant research (24/32 in use)")

    pods = wait_job_phases(kubectl, "research", "allreduce", {"Running": 3})
    nodes = sorted(node_of(p) for p in pods)
    assert len(set(nodes)) == 3, nodes  # 8 GPUs each: one whole node each
    assert {fleet.flavor_of(n) for n in nodes} == {H100}, nodes
    assert len({fleet.label(n, CLIQUE) for n in nodes}) == 1, \
        {n: fleet.label(n, CLIQUE) for n in nodes}
    assert nodes in domains.values(), (nodes, domains)
    gang = kubectl.get("job", "allreduce", "research")["metadata"]["labels"][GANG]
    for p in pods:
        assert p["spec"].get("affinity") == gang_affinity(gang, "required")
    example.wait_used("research", 24)
    research_invariant(stack)
    invariant(stack, "batch", ["batch"], ceiling=16)


def test_a_required_gang_waits_for_its_clique(stack, kubectl, example, quota, fleet, clean,
                                              files):
    """One node of each domain taken: the gang of 3 finds 2 free nodes in
    either.  The first two pods run in one domain; the third does not go to
    the other domain's 2 free nodes (the pod affinity), it stays Pending,
    charged with its gang, until a node of its own domain is free."""
    clean("research", "batch")
    domains = cliques(fleet)
    blockers = occupy(kubectl, files, [nodes[0] for nodes in domains.values()])

    r = kubectl.apply_file(files / "job.yaml", job("allreduce", "research", "train-large",
                                                   parallelism=3))
    created(r, "allreduce", "job.batch")
    # gpugate saw it coming (issue #16): each domain has room for 2 of the
    # 3; the best named is the first of equals in the inventory's order,
    # the nodes as the apiserver lists them (by name).
    first = fleet.label(sorted(n for n in fleet.by_name if fleet.flavor_of(n) == H100)[0],
                        CLIQUE)
    assert r.err == warning(
        "gpugate: train-large -> 3 pods x 8 x h100-80gb for tenant research (24/32 in use)",
        "gpugate: admitted, but no nvidia.com/gpu.clique domain of flavor h100-80gb has "
        "room for the job's 3 pods of 8 nvidia.com/gpu now: the best "
        f"({first}) has room for 2")
    pods = wait_job_phases(kubectl, "research", "allreduce", {"Running": 2, "Pending": 1})
    running = sorted(node_of(p) for p in pods if phase(p) == "Running")
    (pending,) = [p for p in pods if phase(p) == "Pending"]
    (domain,) = {fleet.label(n, CLIQUE) for n in running}
    assert running == domains[domain][1:], (running, domains)
    (other,) = set(domains) - {domain}
    gpu_nodes = sum(1 for n in fleet.by_name if fleet.flavor_of(n) == H100)
    assert unschedulable(pending).startswith(
        f"0/{len(fleet.items)} nodes are available: "
        f"{len(fleet.items) - gpu_nodes} node(s) didn't match Pod's node affinity/selector, "
        f"2 node(s) didn't match pod affinity rules, 4 Insufficient nvidia.com/gpu. "), \
        unschedulable(pending)
    # the other domain's two nodes are still free
    on_other = [p["metadata"]["name"] for ns in ("research", "batch") for p in pods_of(kubectl, ns)
                if node_of(p) in domains[other][1:]]
    assert on_other == [], on_other
    # the Pending pod is held by its gang: 24, and the blockers' 16
    example.wait_used("research", 24)
    quota.wait_used("batch", 16)
    research_invariant(stack)
    p = kubectl.get("pod", pending["metadata"]["name"], "research")
    assert (phase(p), node_of(p)) == ("Pending", None)

    # its domain's blocker ends: the third pod runs there, next to the others
    freed = domains[domain][0]
    r = kubectl("delete", "pod", blockers[freed], "-n", "batch", "--wait=false")
    assert (r.rc, r.out) == (0, f'pod "{blockers[freed]}" deleted from batch namespace\n'), r
    p = wait_phase(kubectl, "research", pending["metadata"]["name"], "Running")
    assert node_of(p) == freed
    quota.wait_used("batch", 8)
    research_invariant(stack)
    invariant(stack, "batch", ["batch"], ceiling=16)


# ---------------------------------------------------------------------------
# 3. preferred topology: one domain where the gang fits, else anywhere


def test_a_preferred_gang_lands_in_one_clique(stack, kubectl, quota, fleet, clean, files):
    """QUOTA_POLICY's gpu-near (topology preferred), 3 x 8 GPUs, on the
    staircase: the preference (weight 100) outweighs the resource scores
    that would split it."""
    clean("near", "batch")
    domains = cliques(fleet)
    staircase(kubectl, files, domains)
    r = kubectl.apply_file(files / "job.yaml", job("near", "near", "gpu-near", 8,
                                                   parallelism=3))
    created(r, "near", "job.batch")
    assert r.err == warning(
        "gpugate: gpu-near -> 3 pods x 8 x h100-80gb for tenant near (24/24 in use)")
    pods = wait_job_phases(kubectl, "near", "near", {"Running": 3})
    nodes = sorted(node_of(p) for p in pods)
    assert nodes in domains.values(), (nodes, domains)
    gang = kubectl.get("job", "near", "near")["metadata"]["labels"][GANG]
    for p in pods:
        assert p["spec"].get("affinity") == gang_affinity(gang, "preferred")
    quota.wait_used("near", 24)
    invariant(stack, "near", ["near"], ceiling=24)
    invariant(stack, "batch", ["batch"], ceiling=16)


def test_a_preferred_gang_splits_rather_than_waits(stack, kubectl, quota, fleet, clean,
                                                   files):
    """The layout that keeps a required gang's third pod Pending: a
    preferred gang runs all its pods, 2 in one domain and 1 in the other."""
    clean("near", "batch")
    domains = cliques(fleet)
    occupy(kubectl, files, [nodes[0] for nodes in domains.values()])
    free = sorted(n for nodes in domains.values() for n in nodes[1:])

    r = kubectl.apply_file(files / "job.yaml", job("near", "near", "gpu-near", 8,
                                                   parallelism=3))
    created(r, "near", "job.batch")
    pods = wait_job_phases(kubectl, "near", "near", {"Running": 3})
    nodes = [node_of(p) for p in pods]
    assert len(set(nodes)) == 3 and set(nodes) <= set(free), (nodes, free)
    assert sorted(Counter(fleet.label(n, CLIQUE) for n in nodes).values()) == [1, 2], \
        {n: fleet.label(n, CLIQUE) for n in nodes}
    quota.wait_used("near", 24)
    invariant(stack, "near", ["near"], ceiling=24)
    invariant(stack, "batch", ["batch"], ceiling=16)


# ---------------------------------------------------------------------------
# 4. pods without a class stay off the GPU nodes


def test_pods_without_a_class_run_on_cpu_nodes_only(stack, kubectl, example, fleet, clean,
                                                   files):
    namespaces = ["research", "product-inference", "sandbox-1", "no-tenant", "solo", "near"]
    clean(*namespaces)
    cpu_nodes = sorted(n for n in fleet.by_name if n.startswith("cpu-"))
    assert cpu_nodes == ["cpu-0", "cpu-1"]
    for ns in namespaces:
        for i in range(2):
            r = kubectl.apply_file(files / f"{ns}-{i}.yaml", pod(f"web-{i}", ns))
            assert (r.rc, r.out, r.err) == (0, f"pod/web-{i} created\n", ""), r
    for ns in namespaces:
        for i in range(2):
            p = wait_phase(kubectl, ns, f"web-{i}", "Running")
            assert node_of(p) in cpu_nodes, f"{ns}/web-{i} on {node_of(p)}"
            assert fleet.flavor_of(node_of(p)) is None
            assert CLASS not in (p["metadata"].get("labels") or {})

    # more CPU than a CPU node has: the GPU nodes have room, but their taint
    # keeps it Pending
    r = kubectl.apply_file(files / "big.yaml", pod(
        "big", "research", containers=[{"name": "etl", "image": "busybox",
                                        "resources": {"requests": {"cpu": "48"}}}]))
    created(r, "big")
    gpu_nodes = len(fleet.items) - len(cpu_nodes)
    msg = wait_until("the scheduler to find no node for research/big",
                     lambda: unschedulable(kubectl.get("pod", "big", "research")))
    assert msg.startswith(f"0/{len(fleet.items)} nodes are available: {gpu_nodes} node(s) had "
                          f"untolerated taint(s), 2 Insufficient cpu. "), msg
    assert node_of(kubectl.get("pod", "big", "research")) is None
    for tenant, flavor in (("research", H100), ("product", "a100-1g.10gb"),
                           ("sandbox", "l4-shared")):
        assert example.quota_used(tenant, flavor) == 0
    research_invariant(stack)


# ---------------------------------------------------------------------------
# 5. a pod or Job that completes gives its quota back through the watch


def test_a_pod_that_completes_makes_room_for_the_denied_one(stack, kubectl, quota, fleet,
                                                            clean, files):
    clean("solo")
    r = kubectl.apply_file(files / "first.yaml", pod("first", "solo", "gpu", 4))
    created(r, "first")
    assert r.err == admitted("solo", 4, "4/4 in use")
    first = wait_phase(kubectl, "solo", "first", "Running")
    assert fleet.flavor_of(node_of(first)) == H100

    r = kubectl.apply_file(files / "second.yaml", pod("second", "solo", "gpu", 4))
    assert (r.rc, r.out) == (1, ""), r
    assert r.err == denied_by("mutate.gpugate.io", over("solo", 4, 4, 4,
                                                        "no cohort to borrow from"),
                              file="second.yaml")

    # the trainer finishes: KWOK ends its container with exit code 0
    r = kubectl("annotate", "pod", "first", "-n", "solo", f"{EXIT}=Succeeded")
    assert (r.rc, r.out) == (0, "pod/first annotated\n"), r
    first = wait_phase(kubectl, "solo", "first", "Succeeded")
    assert first["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    quota.wait_used("solo", 0)

    r = kubectl.apply_file(files / "second.yaml")
    created(r, "second")
    assert r.err == admitted("solo", 4, "4/4 in use")
    second = wait_phase(kubectl, "solo", "second", "Running")
    assert fleet.flavor_of(node_of(second)) == H100
    invariant(stack, "solo", ["solo"], ceiling=4)


def test_a_job_that_completes_gives_its_gang_back(stack, kubectl, quota, fleet, clean, files):
    clean("batch")
    j = job("finite", "batch", "gpu", 4, parallelism=2, completions=2)
    j["spec"]["template"]["metadata"] = {"annotations": {EXIT: "Succeeded", RUN_FOR: "3s"}}
    r = kubectl.apply_file(files / "job.yaml", j)
    created(r, "finite", "job.batch")
    assert r.err == warning("gpugate: gpu -> 2 pods x 4 x h100-80gb for tenant batch "
                            "(8/16 in use)")

    def complete():
        conds = (kubectl.get("job", "finite", "batch").get("status") or {}).get("conditions")
        return any(c["type"] == "Complete" and c["status"] == "True" for c in conds or [])
    wait_until("job batch/finite to be Complete", complete, 60)
    status = kubectl.get("job", "finite", "batch")["status"]
    assert (status.get("succeeded"), status.get("failed")) == (2, None), status
    pods = pods_of(kubectl, "batch", f"{JOB_NAME}=finite")
    assert [phase(p) for p in pods] == ["Succeeded", "Succeeded"]
    for p in pods:
        # they ran on H100 nodes (KWOK gave them an IP and a start) and exited 0
        assert fleet.flavor_of(node_of(p)) == H100
        assert p["status"].get("podIP") and p["status"].get("startTime"), p["status"]
        assert p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    quota.wait_used("batch", 0)
    invariant(stack, "batch", ["batch"], ceiling=16)


# ---------------------------------------------------------------------------
# 6. an evicted pod holds its GPUs for its whole grace period

GRACE = 8


def test_an_evicted_pod_is_charged_until_it_is_gone(stack, kubectl, quota, fleet, clean,
                                                    files):
    """A trainer that ignores SIGTERM, evicted with an 8 s grace period: it
    keeps running (Terminating) and keeps its 4 GPUs of solo's 4 until KWOK
    kills it at the end of the grace period; only then does the next 4-GPU
    pod fit."""
    clean("solo")
    r = kubectl.apply_file(files / "stubborn.yaml", pod(
        "stubborn", "solo", "gpu", 4, annotations={ON_SIGTERM: "ignore"}))
    created(r, "stubborn")
    wait_phase(kubectl, "solo", "stubborn", "Running")
    quota.wait_used("solo", 4)

    eviction = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": "stubborn", "namespace": "solo"},
                "deleteOptions": {"gracePeriodSeconds": GRACE}}
    r = kubectl("create", "--raw", "/api/v1/namespaces/solo/pods/stubborn/eviction",
                "-f", "-", input=json.dumps(eviction))
    assert r.rc == 0 and json.loads(r.out)["status"] == "Success", r
    p = kubectl.get("pod", "stubborn", "solo")
    assert p["metadata"]["deletionTimestamp"] and \
        p["metadata"]["deletionGracePeriodSeconds"] == GRACE, p["metadata"]

    # Through the grace period: each sample reads gpugate's usage first,
    # then the pod; a pod still Running was Running at the read as well.
    samples, denied = 0, False
    deadline = time.monotonic() + GRACE + 30
    while True:
        assert time.monotonic() < deadline, "the evicted pod was never removed"
        used = quota.quota_used("solo")
        r = kubectl("get", "pod", "stubborn", "-n", "solo", "-o", "json",
                    "--ignore-not-found")
        p = json.loads(r.check().out) if r.out.strip() else None
        if p is None:
            break
        if pod_terminal(p):  # killed at the end of the grace period
            time.sleep(0.2)
            continue
        assert phase(p) == "Running" and p["metadata"]["deletionTimestamp"], p["status"]
        assert used == 4, f"sample {samples}: gpugate counts {used} of the Terminating pod's 4"
        samples += 1
        if samples == 2:
            r = kubectl.apply_file(files / "next.yaml", pod("next", "solo", "gpu", 4))
            assert (r.rc, r.out) == (1, ""), r
            assert r.err == denied_by("mutate.gpugate.io", over(
                "solo", 4, 4, 4, "no cohort to borrow from"), file="next.yaml")
            denied = True
        time.sleep(0.5)
    assert denied and samples >= 3, (samples, denied)

    quota.wait_used("solo", 0)
    r = kubectl.apply_file(files / "next.yaml")
    created(r, "next")
    assert r.err == admitted("solo", 4, "4/4 in use")
    wait_phase(kubectl, "solo", "next", "Running")
    invariant(stack, "solo", ["solo"], ceiling=4)
