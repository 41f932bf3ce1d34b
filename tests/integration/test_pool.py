"""The pool (issue #16) over the fake API: gpugate serve --kubeconfig lists
and watches the Nodes and the Pods bound to them (usage/inventory.c), and
admission says what the pool says (policy/decide-pool.c decide_pool): a request
that no usable node of its flavor could ever hold is denied at /mutate
(naming the largest node and the excluded ones, and why); at /validate an
admitted request is told when there is no room now (fragmentation, a gang
that does not fit one topology domain), when no node of its flavor is in the
cluster, or when every one is excluded.  GET /pool, the gpugate_pool_*
metrics and `gpugate pool` show the same inventory.

Every message is asserted verbatim.  Watch events are waited for on /pool
(the same inventory admission reads), never by sleeping.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import EXAMPLE_POLICY, LINE_POLICY, SLOW, metrics, poll
from fakekube import SELECTOR_KEY
from objects import CLASS, DECISION, GPUS, job, pod, pod_of_job
from test_watch import kube  # noqa: F401  (the fixture)

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
L4 = {"nvidia.com/gpu.product": "NVIDIA-L4"}
A100 = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/mig.strategy": "mixed"}
CLIQUE = "nvidia.com/gpu.clique"
GPU = "nvidia.com/gpu"
USED = 'gpugate_quota_used{tenant="research",flavor="h100-80gb"}'
FLAVORS = ("h100-80gb", "a100-1g.10gb", "a100-3g.40gb", "l4-shared")


# ---------------------------------------------------------------------------
# objects as the API shows them


def api_node(name: str, gpus: int = 8, *, alloc: int | None = None,
             resource: str = GPU, labels: dict | None = None, product: dict = H100,
             clique: str | None = None, taints: list | None = None,
             conditions: list | None = None, ready: str | None = "True",
             unschedulable: bool = False, resources: dict | None = None) -> dict:
    """A GPU node as the device plugin and GPU feature discovery leave it:
    the product labels, the GPU taint the flavors tolerate, capacity and
    allocatable of the flavor's resource (resources: others beside it),
    the Ready condition (None: no Ready condition at all)."""
    lab = dict(product)
    if clique:
        lab[CLIQUE] = clique
    lab.update(labels or {})
    conds = [] if ready is None else [{"type": "Ready", "status": ready,
                                       "reason": "KubeletReady"}]
    conds += conditions or []
    cap = {"cpu": "224", "memory": "2Ti", "pods": "110", resource: str(gpus)}
    cap.update(resources or {})
    allocatable = dict(cap)
    if alloc is not None:
        allocatable[resource] = str(alloc)
    spec: dict = {"taints": [dict(GPU_TAINT)] + list(taints or [])}
    if unschedulable:
        spec["unschedulable"] = True
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": f"uid-node-{name}", "labels": lab},
            "spec": spec,
            "status": {"capacity": cap, "allocatable": allocatable, "conditions": conds}}


def cpu_node(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": f"uid-node-{name}",
                         "labels": {"kubernetes.io/hostname": name}},
            "spec": {},
            "status": {"capacity": {"cpu": "32", "memory": "128Gi", "pods": "110"},
                       "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def bound_pod(name: str, node: str | None, units: int, *, ns: str = "research",
              resource: str = GPU, phase: str = "Running", requests_only: bool = False,
              terminating: bool = False) -> dict:
    """A running Pod as the API shows it once the scheduler bound it
    (spec.nodeName; None: not bound yet)."""
    res = {resource: str(units)}
    spec: dict = {"containers": [{"name": "main", "image": "x", "resources": (
        {"requests": res} if requests_only else {"limits": res})}]}
    if node is not None:
        spec["nodeName"] = node
    meta = {"name": name, "namespace": ns, "uid": f"uid-pod-{ns}-{name}",
            "labels": {SELECTOR_KEY: ns}}
    if terminating:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec,
            "status": {"phase": phase}}


def condition(type_: str, status: str = "True", reason: str | None = None) -> dict:
    c = {"type": type_, "status": status}
    if reason:
        c["reason"] = reason
    return c


OUT_OF_SERVICE = {"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown",
                  "effect": "NoExecute"}
NVSENTINEL = "dgxc.nvidia.com/nvsentinel-state"


# ---------------------------------------------------------------------------
# gpugate on the fake


@pytest.fixture
def pool_gate(kube, fresh_server):
    """pool_gate(policy=EXAMPLE_POLICY, *extra): gpugate serve on the fake
    API, once its usage and its pool are synced."""
    def start(policy: Path = LINE_POLICY, *extra: str):
        srv = fresh_server(policy, extra_args=("--kubeconfig", str(kube.kubeconfig), *extra))
        with srv.client() as c:
            poll(lambda: c.get("/readyz").status == 200, "/readyz 200")
            poll(lambda: metrics(c).get("gpugate_pool_synced") == 1, "gpugate_pool_synced 1")
        poll(lambda: kube.open_watches("nodes") and kube.open_watches("pods"),
             "the node and pod watches open")
        return srv
    return start


def get_pool(srv) -> dict:
    with srv.client() as c:
        r = c.get("/pool")
    assert r.status == 200, r
    assert r.headers.get("Content-Type") == "application/json", r.headers
    return r.json()


def flavor(srv, name: str = "h100-80gb") -> dict:
    return next(f for f in get_pool(srv)["flavors"] if f["name"] == name)


def states(srv, name: str = "h100-80gb") -> dict[str, str]:
    """{node: state} of a flavor's nodes."""
    return {n["name"]: n["state"] for n in flavor(srv, name)["nodeList"]}


def wait_pool(srv, check, what: str, name: str = "h100-80gb") -> dict:
    """Polls /pool until check(flavor) is true (a watch event arrived)."""
    last = [None]

    def ok():
        last[0] = flavor(srv, name)
        return check(last[0])
    try:
        poll(ok, what)
    except AssertionError as e:
        raise AssertionError(f"{e}; last: {json.dumps(last[0])}") from None
    return last[0]


def used(srv, key: str = USED) -> float:
    with srv.client() as c:
        return metrics(c)[key]


def class_pod(name: str, cls: str = "train-large", ns: str = "research",
              gpus: str | None = None) -> dict:
    obj = pod(name, ns, cls=cls, gpus=gpus)
    obj["metadata"]["uid"] = f"uid-admitted-{name}"
    return obj


def class_job(name: str, parallelism: int, cls: str = "train-large",
              gpus: str | None = None, ns: str = "research") -> dict:
    labels = {CLASS: cls}
    if gpus:
        labels[GPUS] = gpus
    obj = job(name, ns, labels=labels, parallelism=parallelism)
    obj["metadata"]["uid"] = f"uid-admitted-{name}"
    return obj


def admit(srv, obj: dict, *, dry_run: bool = False):
    """/mutate, then /validate of the patched object, as the apiserver calls
    them for a create; (mutate, validate or None when /mutate denied)."""
    with srv.client() as c:
        m = c.admit("mutate", obj)
        if not m.allowed:
            return m, None
        return m, c.admit("validate", m.patched(), dry_run=dry_run)


def success(cls: str, n: int, in_use: int, tenant: str = "research",
            flavor_: str = "h100-80gb", nominal: int = 32, pods: int | None = None) -> str:
    what = f"{pods} pods x {n}" if pods else f"{n}"
    if pods == 1:
        what = f"1 pod x {n}"
    return (f"gpugate: {cls} -> {what} x {flavor_} for tenant {tenant} "
            f"({in_use}/{nominal} in use)")


# ---------------------------------------------------------------------------
# a pod that no usable node could ever hold


def test_never_fits_names_the_largest_and_each_exclusion(pool_gate, kube):
    """Per pod 8, the largest usable node offers 7: denied at /mutate.  The
    excluded nodes are named with the first reason that applies: a health
    taint, a health condition, NVSentinel's label, NotReady.  A node whose
    health condition is False, and one with the GPU taint the flavor
    tolerates, are usable."""
    kube.put("nodes",
             api_node("h100-0", alloc=7),
             api_node("h100-1", taints=[OUT_OF_SERVICE]),
             api_node("h100-2", conditions=[condition("GpuXidError", reason="Xid79")]),
             api_node("h100-3", labels={NVSENTINEL: "quarantined"}),
             api_node("h100-4", ready="False"),
             api_node("h100-5", alloc=6, conditions=[condition("GpuXidError", "False"),
                                                     condition("KernelDeadlock", "False")]))
    srv = pool_gate()
    msg = ("gpugate: no usable node of flavor h100-80gb can hold a pod of 8 nvidia.com/gpu: "
           "the largest offers 7 (h100-0); 4 nodes excluded: "
           "h100-1 (taint node.kubernetes.io/out-of-service=nodeshutdown:NoExecute), "
           "h100-2 (condition GpuXidError=True (reason Xid79)), "
           f"h100-3 (label {NVSENTINEL}=quarantined), h100-4 (NotReady)")
    m, v = admit(srv, class_pod("big"))
    assert v is None
    assert (m.allowed, m.code, m.message, m.warnings) == (False, 403, msg, []), m
    assert states(srv) == {"h100-0": "usable", "h100-1": "health", "h100-2": "health",
                           "h100-3": "health", "h100-4": "NotReady", "h100-5": "usable"}
    # The pool may shrink between /mutate and /validate: a 4-GPU pod that
    # fitted at /mutate is denied at /validate, in the same words, and
    # nothing is reserved for it.
    with srv.client() as c:
        v = c.admit("validate", c.admit("mutate", class_pod("fits", "train-small")).patched())
        assert v.allowed and v.warnings == [success("train-small", 1, 1)], v
        m = c.admit("mutate", class_pod("big2", "train-small", gpus="4"))
        assert m.allowed and m.warnings == [], m
        obj = m.patched()
    kube.event("nodes", "MODIFIED", api_node("h100-0", alloc=3))
    kube.event("nodes", "MODIFIED", api_node("h100-5", alloc=2))
    wait_pool(srv, lambda f: f["allocatable"] == 5, "h100-0 and h100-5 lowered")
    with srv.client() as c:
        v = c.admit("validate", obj)
    assert (v.allowed, v.code, v.message) == (False, 403, (
        "gpugate: no usable node of flavor h100-80gb can hold a pod of 4 nvidia.com/gpu: "
        "the largest offers 3 (h100-0); 4 nodes excluded: "
        "h100-1 (taint node.kubernetes.io/out-of-service=nodeshutdown:NoExecute), "
        "h100-2 (condition GpuXidError=True (reason Xid79)), "
        f"h100-3 (label {NVSENTINEL}=quarantined), h100-4 (NotReady)")), v
    assert used(srv) == 1, "the denied pod reserved nothing"
    tenant = next(t for t in get_pool(srv)["tenants"] if t["name"] == "research")
    # 5 usable units: research holds 1 of its 32, 5 free: 26 not backed
    assert tenant["quota"][0] == {"flavor": "h100-80gb", "used": 1, "nominal": 32,
                                  "borrowed": 0, "lent": 0, "backed": 6, "notBacked": 26}


def test_never_fits_cordoned_and_untolerated_taints(pool_gate, kube):
    """Cordoned (spec.unschedulable) and a NoSchedule/NoExecute taint the
    flavor does not tolerate exclude a node; a PreferNoSchedule taint, or
    the tolerated GPU taint, do not.  The first reason wins: NotReady
    before cordoned, cordoned before a taint, health before all."""
    maint = {"key": "maintenance", "value": "firmware", "effect": "NoSchedule"}
    kube.put("nodes",
             api_node("h100-0", alloc=4),
             api_node("h100-1", unschedulable=True),
             api_node("h100-2", taints=[maint]),
             api_node("h100-3", taints=[{"key": "nvidia.com/gpu", "value": "present",
                                         "effect": "NoExecute"}]),
             api_node("h100-4", alloc=2, taints=[{"key": "spot", "effect": "PreferNoSchedule"}]),
             api_node("h100-5", ready="Unknown", unschedulable=True, taints=[maint]),
             api_node("h100-6", ready=None))
    srv = pool_gate()
    m, _ = admit(srv, class_pod("big"))
    assert (m.allowed, m.message) == (False, (
        "gpugate: no usable node of flavor h100-80gb can hold a pod of 8 nvidia.com/gpu: "
        "the largest offers 4 (h100-0); 5 nodes excluded: h100-1 (cordoned), "
        "h100-2 (taint maintenance=firmware:NoSchedule), "
        "h100-3 (taint nvidia.com/gpu=present:NoExecute), h100-5 (NotReady), ...")), m
    f = flavor(srv)
    assert [(n["name"], n["state"], n.get("why")) for n in f["nodeList"]] == [
        ("h100-0", "usable", None),
        ("h100-1", "cordoned", "spec.unschedulable"),
        ("h100-2", "tainted", "taint maintenance=firmware:NoSchedule"),
        ("h100-3", "tainted", "taint nvidia.com/gpu=present:NoExecute"),
        ("h100-4", "usable", None),
        ("h100-5", "NotReady", "Ready=Unknown"),
        ("h100-6", "NotReady", "Ready=(none)"),
    ]
    assert f["states"] == {"usable": 2, "health": 0, "validating": 0, "NotReady": 2,
                           "cordoned": 1, "tainted": 2}


def test_warn_mode_tenant_gets_the_denial_as_a_warning(pool_gate, kube, custom_policy):
    """CUSTOM_POLICY: tenant warned (warn mode) and audited (audit mode).
    The pod is admitted; warn mode says why at /validate only, audit mode
    only logs and counts it; the quota is charged (a mode relaxes the
    verdict, never the accounting).  The enforce tenant is denied and
    reserves nothing."""
    kube.put("nodes", api_node("h100-0", alloc=2), api_node("h100-1", unschedulable=True))
    srv = pool_gate(custom_policy)
    msg = ("gpugate: no usable node of flavor h100-80gb can hold a pod of 4 nvidia.com/gpu: "
           "the largest offers 2 (h100-0); 1 node excluded: h100-1 (cordoned)")
    m, v = admit(srv, class_pod("big", "train-small", ns="warned", gpus="4"))
    assert m.allowed and m.warnings == [], m
    assert v.allowed, v
    # As any rule's violation in warn mode: the reason first, then the
    # success line.
    assert v.warnings == [msg, success("train-small", 4, 4, "warned", nominal=8)], v.warnings
    m, v = admit(srv, class_pod("big-a", "train-small", ns="audited", gpus="4"))
    assert m.allowed and m.warnings == [], m
    assert v.allowed and msg not in v.warnings, v
    assert used(srv, 'gpugate_quota_used{tenant="warned",flavor="h100-80gb"}') == 4
    assert used(srv, 'gpugate_quota_used{tenant="audited",flavor="h100-80gb"}') == 4
    log = srv.stderr_text()
    quoted = msg.replace('"', '\\"')
    for ns, name in (("warned", "big"), ("audited", "big-a")):
        for ep in ("mutate", "validate"):
            assert re.search(rf'msg="admission" endpoint={ep} uid=\S+ namespace={ns} kind=Pod '
                             rf'name={name} result={ns} class=train-small flavor=h100-80gb '
                             rf'tenant={ns} rule=pool quota=\w+ dry_run=false '
                             rf'message="{re.escape(quoted)}"', log), (ns, ep, log)
    with srv.client() as c:
        text = c.get("/metrics").text
    assert 'gpugate_admission_requests_total{endpoint="validate",kind="Pod",result="warned"} 1\n' \
        in text
    assert 'gpugate_admission_requests_total{endpoint="validate",kind="Pod",result="audited"} 1\n' \
        in text
    # The enforce tenant of the same policy is denied, and reserves nothing.
    m, _ = admit(srv, class_pod("big-s", "train-small", ns="strict", gpus="4"))
    assert (m.allowed, m.message) == (False, msg), m
    with srv.client() as c:
        v = c.admit("validate", m.review["request"]["object"])
    assert not v.allowed
    assert used(srv, 'gpugate_quota_used{tenant="strict",flavor="h100-80gb"}') == 0


@pytest.mark.parametrize("ns, prefix", [("warned", "warn: "), ("audited", "audit: would deny: ")])
def test_warn_and_audit_modes_record_the_pool_violation(pool_gate, kube, custom_policy, ns,
                                                        prefix):
    kube.put("nodes", api_node("h100-0", alloc=2))
    srv = pool_gate(custom_policy)
    m, v = admit(srv, class_pod("big", "train-small", ns=ns, gpus="4"), dry_run=True)
    assert m.patched()["metadata"]["annotations"][DECISION] == prefix + (
        "no usable node of flavor h100-80gb can hold a pod of 4 nvidia.com/gpu: "
        "the largest offers 2 (h100-0)")
    if ns == "audited":  # silent, as for every other rule (no success line either)
        assert v.warnings == [], v


# ---------------------------------------------------------------------------
# no room now: advice at /validate


def test_fragmentation_is_a_warning_at_validate_only(pool_gate, kube):
    """A pod of 8 that an empty node could hold is admitted; when no node
    has 8 free now, /validate says why it will wait, and calls it
    fragmentation when the free units add up to a pod; /mutate says nothing
    of it (kubectl prints the warnings of both calls)."""
    kube.put("nodes", api_node("h100-0"), api_node("h100-1"), api_node("h100-2"),
             api_node("h100-3", unschedulable=True))
    kube.put("pods", bound_pod("a", "h100-0", 5), bound_pod("b", "h100-1", 6),
             bound_pod("c", "h100-2", 6, ns="other"),
             bound_pod("d", "h100-3", 8, ns="other"))
    srv = pool_gate()
    assert used(srv) == 11
    m, v = admit(srv, class_pod("big"))
    assert m.allowed and m.warnings == [], m
    assert v.allowed, v
    assert v.warnings == [
        success("train-large", 8, 19),
        "gpugate: admitted, but no node of flavor h100-80gb has 8 nvidia.com/gpu free now: "
        "7 free on 3 nodes, at most 3 on one; the pod waits; 1 node excluded: "
        "h100-3 (cordoned)"], v.warnings
    # c ends, e takes half of h100-2: 3 + 2 + 4 = 9 free, at most 4 on one.
    kube.event("pods", "MODIFIED", bound_pod("c", "h100-2", 6, ns="other", phase="Succeeded"))
    kube.event("pods", "ADDED", bound_pod("e", "h100-2", 4))
    wait_pool(srv, lambda f: f["free"] == 9, "c Succeeded, e bound")
    m, v = admit(srv, class_pod("big2"), dry_run=True)
    assert m.allowed and m.warnings == [], m
    assert v.warnings == [
        success("train-large", 8, 31),
        "gpugate: admitted, but no node of flavor h100-80gb has 8 nvidia.com/gpu free now: "
        "9 free on 3 nodes, at most 4 on one (fragmentation); the pod waits; "
        "1 node excluded: h100-3 (cordoned)"], v.warnings
    # 11 (a, b) + 4 (e) + 8 (big, reserved); the dry run reserved nothing
    assert used(srv) == 23
    # A pod that fits says nothing of the pool.
    m, v = admit(srv, class_pod("small", "train-small", gpus="4"))
    assert v.warnings == [success("train-small", 4, 27)], v.warnings


def test_a_job_gang_that_never_fits_the_flavor(pool_gate, kube):
    """A Job without a required topology: its gang must fit the usable
    nodes of the flavor as a whole; per pod it must fit one node."""
    kube.put("nodes", api_node("h100-0"), api_node("h100-1", alloc=7),
             api_node("h100-2", labels={NVSENTINEL: "draining"}))
    srv = pool_gate()
    m, _ = admit(srv, class_job("sweep", 4, "train-small", gpus="4"))
    assert (m.allowed, m.message) == (False, (
        "gpugate: the usable nodes of flavor h100-80gb can hold at most 3 of the job's 4 pods "
        f"of 4 nvidia.com/gpu; 1 node excluded: h100-2 (label {NVSENTINEL}=draining)")), m
    m, _ = admit(srv, class_job("wide", 1, "train-large"))
    assert m.allowed, "1 x 8 fits h100-0"
    kube.event("nodes", "MODIFIED", api_node("h100-0", alloc=6))
    wait_pool(srv, lambda f: f["allocatable"] == 13, "h100-0 lowered")
    m, _ = admit(srv, class_job("wide", 1, "train-large"))
    assert (m.allowed, m.message) == (False, (
        "gpugate: no usable node of flavor h100-80gb can hold a pod of 8 nvidia.com/gpu: "
        "the largest offers 7 (h100-1); 1 node excluded: "
        f"h100-2 (label {NVSENTINEL}=draining)")), m
    # The Job's pods are weighed with their Job: never checked again.
    admitted = class_job("ok", 1, "train-small", gpus="4")
    m, v = admit(srv, admitted)
    assert v.allowed
    with srv.client() as c:
        p = c.admit("mutate", pod_of_job(m.patched()))
        assert p.allowed and p.warnings == [], p
        assert c.admit("validate", p.patched()).warnings == [
            "gpugate: train-small -> 4 x h100-80gb for tenant research (held by job ok)"], \
            "no pool advice for it"


def test_a_job_gang_without_room_now(pool_gate, kube):
    kube.put("nodes", api_node("h100-0"), api_node("h100-1"), api_node("h100-2"))
    kube.put("pods", bound_pod("a", "h100-0", 6), bound_pod("b", "h100-1", 1, ns="other"))
    srv = pool_gate()
    m, v = admit(srv, class_job("sweep", 4, "train-small", gpus="4"))
    assert m.allowed and m.warnings == [], m
    assert v.warnings == [
        success("train-small", 4, 22, pods=4),
        "gpugate: admitted, but flavor h100-80gb has room for 3 of the job's 4 pods of "
        "4 nvidia.com/gpu now (17 free, at most 8 on one node)"], v.warnings


TOPOLOGY_BUG = (
    "the required topology never reaches the pool check: webhook/handler.c passes "
    "ev->dec.plan.topology_key to inventory_fit() before decide_quota() -> finish() -> "
    "plan_mapping() has set it (and at /validate plan_mapping never runs), so a gang is "
    "weighed against the whole flavor: a train-large Job that no "
    "nvidia.com/gpu.clique domain can hold is admitted, one without room in any domain "
    "gets no warning, and when the whole flavor is too small the denial names the "
    "flavor's count as 'the largest holds N (no usable node has the label)'")


def clique_cluster(kube) -> None:
    """Cliques c-a (2 nodes), c-b (2), c-c (1 usable + 1 cordoned)."""
    kube.put("nodes",
             api_node("h100-0", clique="c-a"), api_node("h100-1", clique="c-a"),
             api_node("h100-2", clique="c-b"), api_node("h100-3", clique="c-b"),
             api_node("h100-4", clique="c-c"),
             api_node("h100-5", clique="c-c", unschedulable=True))


def test_a_gang_with_a_required_topology_that_fits(pool_gate, kube):
    """train-large (required topology nvidia.com/gpu.clique): a gang that
    one domain holds now is admitted with nothing said of the pool; a
    1-pod Job is weighed per pod."""
    clique_cluster(kube)
    srv = pool_gate()
    m, v = admit(srv, class_job("pair", 2))
    assert m.allowed and m.warnings == [], m
    assert v.warnings == [success("train-large", 8, 16, pods=2)], v.warnings
    m, v = admit(srv, class_job("one", 1), dry_run=True)
    assert v.warnings == [success("train-large", 8, 24, pods=1)], v.warnings


def test_a_gang_that_no_topology_domain_can_hold_is_denied(pool_gate, kube):
    """5 usable nodes could hold the 3 pods, but no clique has more than 2."""
    clique_cluster(kube)
    srv = pool_gate()
    m, _ = admit(srv, class_job("pretrain", 3))
    assert (m.allowed, m.message) == (False, (
        "gpugate: no nvidia.com/gpu.clique domain of flavor h100-80gb can hold the job's "
        "3 pods of 8 nvidia.com/gpu: the largest holds 2; 1 node excluded: h100-5 (cordoned)")), m


def test_a_gang_too_big_for_the_flavor_names_the_largest_domain(pool_gate, kube):
    """4 usable nodes in 2 cliques of 2: a gang of 5 never fits.  Today's
    denial says 'the largest holds 4 (no usable node has the label)'."""
    kube.put("nodes",
             api_node("h100-0", clique="c-a"), api_node("h100-1", clique="c-a"),
             api_node("h100-2", clique="c-b"), api_node("h100-3", clique="c-b"))
    srv = pool_gate()
    m, _ = admit(srv, class_job("pretrain", 5))
    assert (m.allowed, m.message) == (False, (
        "gpugate: no nvidia.com/gpu.clique domain of flavor h100-80gb can hold the job's "
        "5 pods of 8 nvidia.com/gpu: the largest holds 2")), m


def test_a_gang_without_room_in_any_topology_domain_now(pool_gate, kube):
    """c-b gains a third node (so it could hold 3) but has room for 1 now;
    c-a, the best, for 2: admitted, with the warning at /validate."""
    clique_cluster(kube)
    kube.put("nodes", api_node("h100-6", clique="c-b"))
    kube.put("pods", bound_pod("x", "h100-2", 1, ns="other"),
             bound_pod("y", "h100-3", 8, ns="other"))
    srv = pool_gate()
    m, v = admit(srv, class_job("pretrain", 3), dry_run=True)
    assert m.allowed and m.warnings == [], m
    assert v.warnings == [
        success("train-large", 8, 24, pods=3),
        "gpugate: admitted, but no nvidia.com/gpu.clique domain of flavor h100-80gb has room "
        "for the job's 3 pods of 8 nvidia.com/gpu now: the best (c-a) has room for 2; "
        "1 node excluded: h100-5 (cordoned)"], v.warnings


def test_a_gang_on_nodes_without_the_topology_label(pool_gate, kube):
    kube.put("nodes", api_node("h100-0"), api_node("h100-1"))
    srv = pool_gate()
    m, _ = admit(srv, class_job("pair", 2))
    assert (m.allowed, m.message) == (False, (
        "gpugate: no nvidia.com/gpu.clique domain of flavor h100-80gb can hold the job's "
        "2 pods of 8 nvidia.com/gpu: the largest holds 0 (no usable node has the label)")), m


# ---------------------------------------------------------------------------
# no node of the flavor, every node excluded, no node at all


def test_no_node_of_the_flavor_is_a_warning(pool_gate, kube):
    kube.put("nodes", api_node("h100-0"), cpu_node("cpu-0"))
    srv = pool_gate()
    m, v = admit(srv, class_pod("nb", "dev-shared"))
    assert m.allowed and m.warnings == [], m
    assert v.warnings == [
        success("dev-shared", 1, 1, flavor_="l4-shared", nominal=8),
        "gpugate: no node of flavor l4-shared is in the cluster: the pod waits until one "
        "joins"], v.warnings
    m, v = admit(srv, class_job("ci", 2, "dev-shared"))
    assert v.warnings == [
        success("dev-shared", 1, 3, flavor_="l4-shared", nominal=8, pods=2),
        "gpugate: no node of flavor l4-shared is in the cluster: the job waits until one "
        "joins"], v.warnings
    # One joins: nothing to say.
    kube.event("nodes", "ADDED", api_node("l4-0", 16, resource="nvidia.com/gpu.shared",
                                          product=L4))
    wait_pool(srv, lambda f: f["nodes"] == 1, "l4-0", "l4-shared")
    m, v = admit(srv, class_pod("nb2", "dev-shared"))
    assert v.warnings == [success("dev-shared", 1, 4, flavor_="l4-shared", nominal=8)]


def test_every_node_excluded_is_advice_not_a_denial(pool_gate, kube):
    """A broken health feed must not stop every GPU pod at the door: when
    all nodes of the flavor are excluded the request is admitted, with a
    warning, and counted."""
    kube.put("nodes", api_node("h100-0", unschedulable=True), api_node("h100-1", ready="False"),
             api_node("h100-2", alloc=4, conditions=[condition("ReadonlyFilesystem",
                                                               reason="FilesystemIsReadOnly")]))
    srv = pool_gate()
    m, v = admit(srv, class_pod("big"))
    assert m.allowed and m.warnings == [], m
    assert v.allowed
    assert v.warnings == [
        success("train-large", 8, 8),
        "gpugate: all 3 nodes of flavor h100-80gb are excluded, the pod waits until one is "
        "back; 3 nodes excluded: h100-0 (cordoned), h100-1 (NotReady), "
        "h100-2 (condition ReadonlyFilesystem=True (reason FilesystemIsReadOnly))"], v.warnings
    assert used(srv) == 8
    m, v = admit(srv, class_job("gang", 2))
    assert v.warnings[1] == (
        "gpugate: all 3 nodes of flavor h100-80gb are excluded, the job waits until one is "
        "back; 3 nodes excluded: h100-0 (cordoned), h100-1 (NotReady), "
        "h100-2 (condition ReadonlyFilesystem=True (reason FilesystemIsReadOnly))"), v.warnings


def test_a_long_exclusion_list_is_not_cut_mid_reason(pool_gate, kube):
    l4 = dict(gpus=16, resource="nvidia.com/gpu.shared", product=L4)
    kube.put("nodes",
             api_node("l4-0", labels={NVSENTINEL: "remediation-failed"}, **l4),
             api_node("l4-1", conditions=[condition("SysLogsXIDError",
                                                    reason="XidCriticalError")], **l4),
             api_node("l4-2", taints=[OUT_OF_SERVICE], **l4),
             api_node("l4-3", unschedulable=True, **l4))
    srv = pool_gate()
    w = admit(srv, class_pod("nb", "dev-shared"), dry_run=True)[1].warnings[1]
    assert w.startswith("gpugate: all 4 nodes of flavor l4-shared are excluded"), w
    assert w.endswith(", l4-3 (cordoned)") or w.endswith("..."), w


def test_a_cluster_without_nodes_says_nothing(pool_gate, kube):
    """A control plane alone (no Node at all): nothing about the pool,
    though /pool lists the flavors (empty) and the tenants."""
    srv = pool_gate()
    m, v = admit(srv, class_job("pretrain", 4))
    assert m.allowed and m.warnings == [] and v.warnings == [
        success("train-large", 8, 32, pods=4)], (m, v)
    p = get_pool(srv)
    assert p["synced"] is True
    assert [(f["name"], f["nodes"], f["nodeList"]) for f in p["flavors"]] == [
        (name, 0, []) for name in FLAVORS]
    # Any Node at all (here a CPU node) and the pool speaks.
    kube.event("nodes", "ADDED", cpu_node("cpu-0"))
    # (the Job holds all 32 of research's nominal: the pod borrows one)
    poll(lambda: admit(srv, class_pod("one", "train-small"), dry_run=True)[1].warnings[1:] == [
        "gpugate: borrowed 1 h100-80gb from cohort lab: gpugate takes them back when a "
        "lender needs them, after a checkpoint",
        "gpugate: no node of flavor h100-80gb is in the cluster: the pod waits until one "
        "joins"], "the no-node warning")


def test_pool_unknown_until_nodes_are_listed(kube, fresh_server):
    """Readiness does not wait for Nodes (quota does not need them), and
    until they are listed the pool says nothing: /pool synced false,
    gpugate_pool_synced 0, no advice."""
    kube.put("nodes", api_node("h100-0", alloc=2))
    kube.hang_lists("nodes", True)
    srv = fresh_server(LINE_POLICY, extra_args=("--kubeconfig", str(kube.kubeconfig)))
    with srv.client() as c:
        poll(lambda: c.get("/readyz").status == 200, "/readyz 200")
        text = c.get("/metrics").text
    assert "gpugate_pool_synced 0\n" in text
    assert "gpugate_pool_nodes" not in text
    p = get_pool(srv)
    assert p["synced"] is False and p["flavors"] == [], p
    assert [t["name"] for t in p["tenants"]] == ["research", "product", "sandbox"]
    m, v = admit(srv, class_pod("big"))
    assert m.allowed and v.warnings == [success("train-large", 8, 8)], (m, v)
    kube.hang_lists("nodes", False)
    poll(lambda: get_pool(srv)["synced"], "the nodes listed")
    m, _ = admit(srv, class_pod("big2"))
    assert m.message == ("gpugate: no usable node of flavor h100-80gb can hold a pod of 8 "
                         "nvidia.com/gpu: the largest offers 2 (h100-0)"), m


# ---------------------------------------------------------------------------
# the watch keeps the pool current


def test_watch_events_reach_the_next_decision(pool_gate, kube):
    """Pods bound later, a node cordoned later, a pod that succeeds or is
    deleted, a Terminating pod, a node that goes or loses devices: each is
    in the next decision."""
    kube.put("nodes", api_node("h100-0"), api_node("h100-1"), api_node("h100-2"))
    srv = pool_gate()

    def warnings(name: str) -> list[str]:
        return admit(srv, class_pod(name), dry_run=True)[1].warnings

    assert warnings("p1") == [success("train-large", 8, 8)]
    # Pods created unbound hold nothing on a node; once bound they do.
    kube.event("pods", "ADDED", bound_pod("a", None, 4))
    kube.event("pods", "ADDED", bound_pod("b", None, 4, ns="other", requests_only=True))
    poll(lambda: used(srv) == 4, "a counted in quota")
    assert flavor(srv)["allocated"] == 0
    kube.event("pods", "MODIFIED", bound_pod("a", "h100-0", 4))
    kube.event("pods", "MODIFIED", bound_pod("b", "h100-0", 4, ns="other", requests_only=True))
    kube.event("pods", "ADDED", bound_pod("c", "h100-1", 4, ns="other"))
    wait_pool(srv, lambda f: f["allocated"] == 12, "a and b bound, c")
    assert warnings("p2") == [success("train-large", 8, 12)], "h100-2 is empty"
    # h100-2 is cordoned later.
    kube.event("nodes", "MODIFIED", api_node("h100-2", unschedulable=True))
    wait_pool(srv, lambda f: f["usable"] == 2, "h100-2 cordoned")
    assert warnings("p3") == [
        success("train-large", 8, 12),
        "gpugate: admitted, but no node of flavor h100-80gb has 8 nvidia.com/gpu free now: "
        "4 free on 2 nodes, at most 4 on one; the pod waits; 1 node excluded: "
        "h100-2 (cordoned)"]
    # a succeeds, b is deleted: h100-0 is empty again.
    kube.event("pods", "MODIFIED", bound_pod("a", "h100-0", 4, phase="Succeeded"))
    wait_pool(srv, lambda f: f["allocated"] == 8, "a Succeeded")
    assert used(srv) == 0
    kube.event("pods", "DELETED", bound_pod("b", "h100-0", 4, ns="other"))
    wait_pool(srv, lambda f: f["allocated"] == 4, "b deleted")
    assert warnings("p4") == [success("train-large", 8, 8)]
    # A Terminating pod still holds its GPUs.
    kube.event("pods", "ADDED", bound_pod("t", "h100-0", 2, ns="other", terminating=True))
    wait_pool(srv, lambda f: f["allocated"] == 6, "t Terminating")
    assert warnings("p5") == [
        success("train-large", 8, 8),
        "gpugate: admitted, but no node of flavor h100-80gb has 8 nvidia.com/gpu free now: "
        "10 free on 2 nodes, at most 6 on one (fragmentation); the pod waits; "
        "1 node excluded: h100-2 (cordoned)"]
    # h100-1 and h100-2 are deleted; h100-0 loses two devices (allocatable 6).
    kube.event("nodes", "DELETED", api_node("h100-1"))
    kube.event("nodes", "DELETED", api_node("h100-2"))
    kube.event("nodes", "MODIFIED", api_node("h100-0", alloc=6))
    wait_pool(srv, lambda f: f["nodes"] == 1 and f["allocatable"] == 6, "h100-1, 2 gone")
    m, _ = admit(srv, class_pod("p6"))
    assert m.message == ("gpugate: no usable node of flavor h100-80gb can hold a pod of 8 "
                         "nvidia.com/gpu: the largest offers 6 (h100-0)"), m


def test_one_node_is_singular_in_the_advice(pool_gate, kube):
    kube.put("nodes", api_node("h100-0"), api_node("h100-1", unschedulable=True),
             api_node("l4-0", 16, resource="nvidia.com/gpu.shared", product=L4,
                      unschedulable=True))
    kube.put("pods", bound_pod("a", "h100-0", 4, ns="other"))
    srv = pool_gate()
    frag = admit(srv, class_pod("p"), dry_run=True)[1].warnings[1]
    assert frag.startswith("gpugate: admitted, but no node of flavor h100-80gb has 8 "
                           "nvidia.com/gpu free now: 4 free on "), frag
    excluded = admit(srv, class_pod("nb", "dev-shared"), dry_run=True)[1].warnings[1]
    assert excluded.startswith("gpugate: ") and "l4-shared" in excluded, excluded
    assert "1 nodes" not in frag, frag
    assert "1 nodes" not in excluded, excluded


def test_a_relist_forgets_nodes_that_went_while_nobody_watched(pool_gate, kube):
    kube.put("nodes", api_node("h100-0"), api_node("h100-1", alloc=4))
    srv = pool_gate()
    assert states(srv) == {"h100-0": "usable", "h100-1": "usable"}
    kube.remove("nodes", "uid-node-h100-0")
    kube.expire("nodes")
    wait_pool(srv, lambda f: f["nodes"] == 1, "h100-0 forgotten")
    m, _ = admit(srv, class_pod("big"))
    assert m.message == ("gpugate: no usable node of flavor h100-80gb can hold a pod of 8 "
                         "nvidia.com/gpu: the largest offers 4 (h100-1)"), m


# ---------------------------------------------------------------------------
# policy health settings


HEALTH = """
health:
  defaults: {defaults}
  taints:
    - example.com/gpu-broken:NoSchedule
    - example.com/ecc=uncorrectable
  conditions:
    - GpuHealthy=False
    - NvlinkDegraded
  labels:
    - example.com/quarantine=yes
"""


def health_policy(tmp_path: Path, defaults: str) -> Path:
    p = tmp_path / f"health-{defaults}.yaml"
    p.write_text(EXAMPLE_POLICY.read_text() + HEALTH.format(defaults=defaults))
    return p


HEALTH_NODES = (
    # name, extra args, state with defaults off, with defaults on
    ("h100-0", {"labels": {NVSENTINEL: "quarantined"}}, "usable", "health"),
    ("h100-1", {"conditions": [condition("GpuXidError")]}, "usable", "health"),
    ("h100-2", {"taints": [OUT_OF_SERVICE]}, "tainted", "health"),
    ("h100-3", {"taints": [{"key": "example.com/gpu-broken", "value": "x",
                            "effect": "NoSchedule"}]}, "health", "health"),
    # the effect does not match the entry's: an untolerated taint all the same
    ("h100-4", {"taints": [{"key": "example.com/gpu-broken", "effect": "NoExecute"}]},
     "tainted", "tainted"),
    # any effect, this value; another value is not a health signal
    ("h100-5", {"taints": [{"key": "example.com/ecc", "value": "uncorrectable",
                            "effect": "PreferNoSchedule"}]}, "health", "health"),
    ("h100-6", {"taints": [{"key": "example.com/ecc", "value": "corrected",
                            "effect": "PreferNoSchedule"}]}, "usable", "usable"),
    ("h100-7", {"conditions": [condition("GpuHealthy", "False", "DcgmWatch")]},
     "health", "health"),
    ("h100-8", {"conditions": [condition("GpuHealthy", "True")]}, "usable", "usable"),
    ("h100-9", {"conditions": [condition("NvlinkDegraded")]}, "health", "health"),
    ("h100-10", {"labels": {"example.com/quarantine": "yes"}}, "health", "health"),
    ("h100-11", {"labels": {"example.com/quarantine": "no"}}, "usable", "usable"),
)


@pytest.mark.parametrize("defaults", ["false", "true"])
def test_policy_health_settings(pool_gate, kube, tmp_path, gpugate_bin, defaults):
    policy = health_policy(tmp_path, defaults)
    r = subprocess.run([str(gpugate_bin), "check", "--quiet", str(policy)],
                       capture_output=True, text=True, timeout=30 * SLOW)
    # The example's one warning (a borrowingLimit, tests/integration/test_cli.py)
    # and no other.
    assert r.returncode == 0, r
    assert [l for l in r.stderr.splitlines() if "borrowingLimit" not in l] == [], r
    kube.put("nodes", *(api_node(name, **kw) for name, kw, _, _ in HEALTH_NODES))
    srv = pool_gate(policy)
    want = {name: (off if defaults == "false" else on) for name, _, off, on in HEALTH_NODES}
    assert states(srv) == want
    whys = {n["name"]: n.get("why") for n in flavor(srv)["nodeList"]}
    assert whys["h100-3"] == "taint example.com/gpu-broken=x:NoSchedule"
    assert whys["h100-4"] == "taint example.com/gpu-broken:NoExecute"
    assert whys["h100-5"] == "taint example.com/ecc=uncorrectable:PreferNoSchedule"
    assert whys["h100-7"] == "condition GpuHealthy=False (reason DcgmWatch)"
    assert whys["h100-9"] == "condition NvlinkDegraded=True"
    assert whys["h100-10"] == "label example.com/quarantine=yes"
    if defaults == "false":
        assert whys["h100-2"] == "taint node.kubernetes.io/out-of-service=nodeshutdown:NoExecute"


def test_policy_health_entries_are_validated(tmp_path, gpugate_bin):
    p = tmp_path / "bad.yaml"
    p.write_text(EXAMPLE_POLICY.read_text() + """
health:
  taints: ["-bad-:NoSchedule", "ok", "ok"]
  conditions: ["GpuXidError=Maybe"]
  labels: ["example.com/q=not ok"]
""")
    r = subprocess.run([str(gpugate_bin), "check", str(p)], capture_output=True, text=True,
                       timeout=30 * SLOW)
    assert r.returncode == 1, r
    lines = r.stderr.splitlines()
    n = len(EXAMPLE_POLICY.read_text().splitlines())
    assert lines == [
        f'{p}:{n + 3}: health: taint "-bad-:NoSchedule": "-bad-" is not a valid taint key',
        f'{p}:{n + 3}: health: taint "ok" is listed twice',
        f'{p}:{n + 4}: health: condition "GpuXidError=Maybe": the status must be True, '
        f'False or Unknown',
        f'{p}:{n + 5}: health: label "example.com/q=not ok": "not ok" is not a valid label '
        f'value',
        f"{p}: 4 errors"], r.stderr


def test_membership_follows_the_policy_across_reloads(pool_gate, kube, tmp_path):
    """The H100 flavor's nodeSelector is switched to H200 and back, by
    SIGHUP reloads; after each round the two H100 nodes are the flavor's."""
    text = LINE_POLICY.read_text()
    h200 = text.replace("NVIDIA-H100-80GB-HBM3", "NVIDIA-H200-141GB-HBM3e")
    policy = tmp_path / "policy.yaml"
    policy.write_text(text)
    kube.put("nodes", api_node("h100-0"), api_node("h100-1"))
    srv = pool_gate(policy)

    def reload(t: str) -> None:
        policy.write_text(t)
        n = srv.stderr_text().count('msg="policy reloaded"')
        srv.proc.send_signal(signal.SIGHUP)
        poll(lambda: srv.stderr_text().count('msg="policy reloaded"') > n, "a reload")

    for i in range(25):
        reload(h200)
        # a decision under the H200 policy: the nodes are not the flavor's
        m, v = admit(srv, class_pod(f"a{i}", "train-small"), dry_run=True)
        assert v.warnings[1:] == ["gpugate: no node of flavor h100-80gb is in the cluster: "
                                  "the pod waits until one joins"], (i, v.warnings)
        reload(text)
        reload(text)
        m, v = admit(srv, class_pod(f"b{i}", "train-small"), dry_run=True)
        assert v.warnings == [success("train-small", 1, 1)], (i, v.warnings)


# ---------------------------------------------------------------------------
# GET /pool and the metrics


def pool_cluster(kube) -> None:
    """Nodes of every flavor, pods of research (bound, unbound, Succeeded,
    Terminating) and of product, a pod on a node that is not there."""
    kube.put("nodes",
             api_node("h100-0", clique="c-a"), api_node("h100-1", clique="c-a", alloc=7),
             api_node("h100-2", clique="c-b", unschedulable=True),
             api_node("h100-3", clique="c-b", labels={NVSENTINEL: "remediating"}),
             api_node("a100-0", 56, resource="nvidia.com/mig-1g.10gb", product=A100),
             api_node("a100-1", 16, resource="nvidia.com/mig-3g.40gb", product=A100),
             # both profiles on one node: a member of both flavors
             api_node("a100-2", 28, resource="nvidia.com/mig-1g.10gb", product=A100,
                      resources={"nvidia.com/mig-3g.40gb": "8"}),
             api_node("l4-0", 16, resource="nvidia.com/gpu.shared", product=L4,
                      ready="False"),
             cpu_node("cpu-0"))
    kube.put("pods",
             bound_pod("a", "h100-0", 8), bound_pod("b", "h100-1", 3),
             bound_pod("c", "h100-2", 4),          # on the cordoned node
             bound_pod("pending", None, 8),        # in quota, on no node
             bound_pod("done", "h100-1", 4, phase="Succeeded"),
             bound_pod("t", "h100-1", 2, terminating=True),
             bound_pod("ghost", "h100-9", 8),      # no such Node (yet)
             bound_pod("m", "a100-2", 7, ns="product-inference",
                       resource="nvidia.com/mig-1g.10gb"),
             bound_pod("h", "h100-1", 1, ns="product-staging"))


def test_pool_json(pool_gate, kube):
    pool_cluster(kube)
    srv = pool_gate()
    p = get_pool(srv)
    # The nodes come in the order the inventory first saw them (a pod's
    # nodeName or the Node): compared by name.
    for f in p["flavors"]:
        f["nodeList"].sort(key=lambda n: n["name"])
    h100, mig1, mig3, l4 = p["flavors"]
    assert p["synced"] is True
    # Effective capacity (policy/capacity.h): h100 promises 32 + 16, its
    # usable nodes hold 15, 1 free; research holds more than its nominal,
    # product 1 of 16: 15 to go, 1 free, 1 research borrows: 13 short.
    effective = {f["name"]: f.pop("effective") for f in p["flavors"]}
    assert effective == {
        "h100-80gb": {"known": True, "usable": 15, "promised": 48, "unbacked": 33,
                      "tenants": [
                          {"tenant": "research", "nominal": 32, "used": 33,
                           "reclaimable": 0, "short": 0},
                          {"tenant": "product", "nominal": 16, "used": 1,
                           "reclaimable": 1, "short": 13}]},
        "a100-1g.10gb": {"known": True, "usable": 84, "promised": 112, "unbacked": 28,
                         "tenants": [{"tenant": "product", "nominal": 112, "used": 7,
                                      "reclaimable": 0, "short": 28}]},
        "a100-3g.40gb": {"known": True, "usable": 24, "promised": 32, "unbacked": 8,
                         "tenants": [{"tenant": "product", "nominal": 32, "used": 0,
                                      "reclaimable": 0, "short": 8}]},
        "l4-shared": {"known": True, "usable": 0, "promised": 32, "unbacked": 32,
                      "tenants": [
                          {"tenant": "research", "nominal": 8, "used": 0,
                           "reclaimable": 0, "short": 8},
                          {"tenant": "sandbox", "nominal": 24, "used": 0,
                           "reclaimable": 0, "short": 24}]}}
    assert h100 == {
        "name": "h100-80gb", "resource": "nvidia.com/gpu", "sharing": "exclusive",
        "nodes": 4, "usable": 2,
        "states": {"usable": 2, "health": 1, "validating": 0, "NotReady": 0, "cordoned": 1,
                   "tainted": 0},
        "capacity": 32, "allocatable": 15, "allocated": 14, "free": 1, "largestFree": 1,
        "largestFreeNode": "h100-1", "excludedUnits": 16,
        "nodeList": [
            {"name": "h100-0", "state": "usable", "capacity": 8, "allocatable": 8,
             "allocated": 8, "free": 0},
            {"name": "h100-1", "state": "usable", "capacity": 8, "allocatable": 7,
             "allocated": 6, "free": 1},
            {"name": "h100-2", "state": "cordoned", "why": "spec.unschedulable",
             "capacity": 8, "allocatable": 8, "allocated": 4, "free": 4},
            {"name": "h100-3", "state": "health",
             "why": f"label {NVSENTINEL}=remediating",
             "capacity": 8, "allocatable": 8, "allocated": 0, "free": 8}]}
    assert mig1 == {
        "name": "a100-1g.10gb", "resource": "nvidia.com/mig-1g.10gb", "sharing": "mig",
        "nodes": 2, "usable": 2,
        "states": {"usable": 2, "health": 0, "validating": 0, "NotReady": 0, "cordoned": 0,
                   "tainted": 0},
        "capacity": 84, "allocatable": 84, "allocated": 7, "free": 77, "largestFree": 56,
        "largestFreeNode": "a100-0", "excludedUnits": 0,
        "nodeList": [
            {"name": "a100-0", "state": "usable", "capacity": 56, "allocatable": 56,
             "allocated": 0, "free": 56},
            {"name": "a100-2", "state": "usable", "capacity": 28, "allocatable": 28,
             "allocated": 7, "free": 21}]}
    assert [(n["name"], n["free"]) for n in mig3["nodeList"]] == [("a100-1", 16), ("a100-2", 8)]
    assert (mig3["capacity"], mig3["free"], mig3["largestFree"]) == (24, 24, 16)
    assert l4 == {
        "name": "l4-shared", "resource": "nvidia.com/gpu.shared", "sharing": "time-slicing",
        "nodes": 1, "usable": 0,
        "states": {"usable": 0, "health": 0, "validating": 0, "NotReady": 1, "cordoned": 0,
                   "tainted": 0},
        "capacity": 16, "allocatable": 0, "allocated": 0, "free": 0, "largestFree": 0,
        "excludedUnits": 16,
        "nodeList": [{"name": "l4-0", "state": "NotReady", "why": "Ready=False",
                      "capacity": 16, "allocatable": 16, "allocated": 0, "free": 16}]}
    # Quota counts every pod that is not Succeeded or Failed, bound or not:
    # research 8 + 3 + 4 + 8 + 2 + 8 = 33, one borrowed from product, which
    # lends it (its nominal 16, lending limit 8).
    # With the pool known, each says how much of its nominal is backed.
    assert [t.pop("busyShare") for t in p["tenants"]] == [None, None, None]
    assert p["tenants"] == [
        {"name": "research", "cohort": "lab", "quota": [
            {"flavor": "h100-80gb", "used": 33, "nominal": 32, "borrowed": 1, "lent": 0,
             "backed": 32, "notBacked": 0},
            {"flavor": "l4-shared", "used": 0, "nominal": 8, "borrowed": 0, "lent": 0,
             "backed": 0, "notBacked": 8}]},
        {"name": "product", "cohort": "lab", "quota": [
            {"flavor": "a100-1g.10gb", "used": 7, "nominal": 112, "borrowed": 0, "lent": 0,
             "backed": 84, "notBacked": 28},
            {"flavor": "a100-3g.40gb", "used": 0, "nominal": 32, "borrowed": 0, "lent": 0,
             "backed": 24, "notBacked": 8},
            {"flavor": "h100-80gb", "used": 1, "nominal": 16, "borrowed": 0, "lent": 1,
             "backed": 3, "notBacked": 13}]},
        {"name": "sandbox", "quota": [
            {"flavor": "l4-shared", "used": 0, "nominal": 24, "borrowed": 0, "lent": 0,
             "backed": 0, "notBacked": 24}]}]
    # Idle GPUs (SPEC 10): no pod carries gpugate.io/idle-since, and no
    # Prometheus is read: no idle pod, no busy share.
    assert p["idle"] == []
    # The node the ghost pod names joins: its 8 are allocated at once.
    kube.event("nodes", "ADDED", api_node("h100-9"))
    f = wait_pool(srv, lambda f: f["nodes"] == 5, "h100-9")
    assert {"name": "h100-9", "state": "usable", "capacity": 8, "allocatable": 8,
            "allocated": 8, "free": 0} in f["nodeList"]


def test_pool_metrics(pool_gate, kube):
    pool_cluster(kube)
    srv = pool_gate()
    with srv.client() as c:
        text = c.get("/metrics").text
    lines = [ln for ln in text.splitlines() if ln.startswith("gpugate_pool_")]
    want = ["gpugate_pool_synced 1"]
    nodes = {"h100-80gb": (2, 1, 0, 0, 1, 0), "a100-1g.10gb": (2, 0, 0, 0, 0, 0),
             "a100-3g.40gb": (2, 0, 0, 0, 0, 0), "l4-shared": (0, 0, 0, 1, 0, 0)}
    for f, counts in nodes.items():
        for state, n in zip(("usable", "health", "validating", "NotReady", "cordoned",
                             "tainted"), counts):
            want.append(f'gpugate_pool_nodes{{flavor="{f}",state="{state}"}} {n}')
    gauges = {"capacity": (32, 84, 24, 16), "allocatable": (15, 84, 24, 0),
              "allocated": (14, 7, 0, 0), "free": (1, 77, 24, 0),
              "largest_free": (1, 56, 16, 0), "excluded": (16, 0, 0, 16)}
    for g, values in gauges.items():
        for f, v in zip(FLAVORS, values):
            want.append(f'gpugate_pool_{g}_units{{flavor="{f}"}} {v}')
    assert lines == want
    for g in ("nodes", "capacity_units", "allocatable_units", "allocated_units",
              "free_units", "largest_free_units", "excluded_units", "synced"):
        assert f"# TYPE gpugate_pool_{g} gauge\n" in text
        assert re.search(rf"^# HELP gpugate_pool_{g} \S", text, re.M)


def test_effective_capacity_shrinks_with_the_usable_nodes(pool_gate, kube, gpugate_bin):
    """Effective capacity (policy/capacity.h): six H100 nodes hold the 48
    the example policy promises (research 32, product 16); research holds
    8.  Three nodes cordoned: 24 usable, 24 not backed, and research,
    with 24 of its nominal to go and 16 free, is 8 short; /pool, the
    metrics and `gpugate pool` say so, and say it no more once they are
    back."""
    kube.put("nodes", *[api_node(f"h100-{i}") for i in range(6)])
    kube.put("pods", bound_pod("a", "h100-0", 8))
    srv = pool_gate()
    e = flavor(srv)["effective"]
    assert (e["usable"], e["promised"], e["unbacked"]) == (48, 48, 0)
    assert [t["short"] for t in e["tenants"]] == [0, 0]
    for i in (1, 2, 3):
        kube.event("nodes", "MODIFIED", api_node(f"h100-{i}", unschedulable=True))
    f = wait_pool(srv, lambda f: f["usable"] == 3, "three nodes cordoned")
    assert f["effective"] == {
        "known": True, "usable": 24, "promised": 48, "unbacked": 24,
        "tenants": [{"tenant": "research", "nominal": 32, "used": 8, "reclaimable": 0,
                     "short": 8},
                    {"tenant": "product", "nominal": 16, "used": 0, "reclaimable": 0,
                     "short": 0}]}
    with srv.client() as c:
        m = metrics(c)
    assert m['gpugate_capacity_usable{flavor="h100-80gb"}'] == 24
    assert m['gpugate_capacity_promised{flavor="h100-80gb"}'] == 48
    assert m['gpugate_capacity_unbacked{flavor="h100-80gb"}'] == 24
    assert m['gpugate_tenant_unbacked{tenant="research",flavor="h100-80gb"}'] == 8
    assert m['gpugate_tenant_unbacked{tenant="product",flavor="h100-80gb"}'] == 0
    assert m['gpugate_tenant_unbacked{tenant="sandbox",flavor="l4-shared"}'] == 0
    assert not any(k.startswith('gpugate_tenant_unbacked{tenant="sandbox",flavor="h100')
                   for k in m), "no quota entry, no series"
    r = gpugate_pool(gpugate_bin, "--policy", str(EXAMPLE_POLICY),
                     "--kubeconfig", str(kube.kubeconfig))
    assert r.returncode == 0, r
    assert ("h100-80gb: effective: 24 of 48 promised usable (24 on excluded nodes): "
            "24 not backed\n"
            "  tenant research: nominal 32, holds 8, 16 free now: 8 of its nominal not "
            "backed\n") in r.stdout, r.stdout
    r = subprocess.run([str(gpugate_bin), "check", "-q", "--kubeconfig", str(kube.kubeconfig),
                        str(EXAMPLE_POLICY)], capture_output=True, text=True, timeout=60 * SLOW)
    assert (r.returncode, r.stdout) == (0, ""), r
    assert (f"{EXAMPLE_POLICY}: warning: flavor h100-80gb: the tenants' nominal quota sums "
            "to 48, the usable nodes offer 24 nvidia.com/gpu: over-committed by 24 (100 %) "
            "(excluded nodes not counted); not backed now: tenant research 8 of its nominal "
            '32 (docs/quota.md, "Effective capacity")\n') in r.stderr, r.stderr
    for i in (1, 2, 3):
        kube.event("nodes", "MODIFIED", api_node(f"h100-{i}"))
    f = wait_pool(srv, lambda f: f["usable"] == 6, "the nodes back")
    assert (f["effective"]["unbacked"], f["effective"]["tenants"][0]["short"]) == (0, 0)


def test_no_pool_without_an_api(fresh_server):
    """Without --kubeconfig there is no pool: /pool says so, the metrics
    have no gpugate_pool_* lines, admission says nothing of it."""
    srv = fresh_server(LINE_POLICY)
    p = get_pool(srv)
    assert (p["synced"], p["flavors"]) == (False, [])
    assert p["tenants"][0]["quota"][0] == {"flavor": "h100-80gb", "used": 0, "nominal": 32,
                                           "borrowed": 0, "lent": 0}
    with srv.client() as c:
        assert "gpugate_pool_" not in c.get("/metrics").text
        m = c.admit("mutate", class_pod("big"))
        v = c.admit("validate", m.patched(), dry_run=True)
    assert m.allowed and v.warnings == [success("train-large", 8, 8)]


# ---------------------------------------------------------------------------
# gpugate pool


def gpugate_pool(gpugate_bin, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess:
    return subprocess.run([str(gpugate_bin), "pool", *args], capture_output=True, text=True,
                          timeout=timeout * SLOW)


def only_logs(stderr: str) -> None:
    """What gpugate pool writes on stderr when it succeeds: nothing (the
    feed's info lines are not the command's output; its warnings would
    be)."""
    assert stderr == "", stderr


POOL_TEXT = """\
FLAVOR               NODES USABLE CAPACITY ALLOCATED  FREE LARGEST-FREE  EXCLUDED
h100-80gb                4      2       32        14     1            1  h100-2 (cordoned), h100-3 (label dgxc.nvidia.com/nvsentinel-state=remediating)
a100-1g.10gb             2      2       84         7    77           56  -
a100-3g.40gb             2      2       24         0    24           16  -
l4-shared                1      0       16         0     0            0  l4-0 (NotReady)

h100-80gb: effective: 15 of 48 promised usable (16 on excluded nodes): 33 not backed
  tenant product: nominal 16, holds 1, 1 free now, 1 borrowed by its cohort: 13 of its nominal not backed
a100-1g.10gb: effective: 84 of 112 promised usable: 28 not backed
  tenant product: nominal 112, holds 7, 77 free now: 28 of its nominal not backed
a100-3g.40gb: effective: 24 of 32 promised usable: 8 not backed
  tenant product: nominal 32, holds 0, 24 free now: 8 of its nominal not backed
l4-shared: effective: 0 of 32 promised usable (16 on excluded nodes): 32 not backed
  tenant research: nominal 8, holds 0, 0 free now: 8 of its nominal not backed
  tenant sandbox: nominal 24, holds 0, 0 free now: 24 of its nominal not backed

TENANT               FLAVOR                 USED  NOMINAL  BORROWED   LENT
research             h100-80gb                33       32         1      0
research             l4-shared                 0        8         0      0
product              a100-1g.10gb              7      112         0      0
product              a100-3g.40gb              0       32         0      0
product              h100-80gb                 1       16         0      1
sandbox              l4-shared                 0       24         0      0
"""


def test_gpugate_pool_text_and_json(pool_gate, kube, gpugate_bin):
    pool_cluster(kube)
    r = gpugate_pool(gpugate_bin, "--policy", str(EXAMPLE_POLICY),
                     "--kubeconfig", str(kube.kubeconfig))
    assert r.returncode == 0, r
    assert r.stdout == POOL_TEXT
    only_logs(r.stderr)
    r = gpugate_pool(gpugate_bin, "--policy", str(EXAMPLE_POLICY),
                     "--kubeconfig", str(kube.kubeconfig), "-o", "json")
    assert r.returncode == 0, r
    only_logs(r.stderr)
    doc = json.loads(r.stdout)
    # The document GET /pool serves, from the same cluster.
    srv = pool_gate()
    served = get_pool(srv)
    for d in (doc, served):
        for f in d["flavors"]:
            f["nodeList"].sort(key=lambda n: n["name"])
    assert doc == served
    assert r.stdout.startswith('{\n  "synced": true,\n  "flavors": [\n'), r.stdout[:80]


def test_gpugate_pool_shows_three_exclusions_then_dots(kube, gpugate_bin):
    kube.put("nodes", api_node("h100-0", unschedulable=True), api_node("h100-1", ready="False"),
             api_node("h100-2", taints=[OUT_OF_SERVICE]), api_node("h100-3", unschedulable=True),
             api_node("h100-4"))
    r = gpugate_pool(gpugate_bin, "--policy", str(EXAMPLE_POLICY), "--kubeconfig",
                     str(kube.kubeconfig), "--timeout", "30")
    assert r.returncode == 0, r
    assert r.stdout.splitlines()[1] == (
        "h100-80gb                5      1       40         0     8            8  "
        "h100-0 (cordoned), h100-1 (NotReady), "
        "h100-2 (taint node.kubernetes.io/out-of-service=nodeshutdown:NoExecute), ...")


def test_gpugate_pool_on_an_empty_cluster(kube, gpugate_bin):
    r = gpugate_pool(gpugate_bin, "--policy", str(EXAMPLE_POLICY), "--kubeconfig",
                     str(kube.kubeconfig))
    assert r.returncode == 0, r
    assert r.stdout.splitlines()[:5] == [
        "FLAVOR               NODES USABLE CAPACITY ALLOCATED  FREE LARGEST-FREE  EXCLUDED",
        "h100-80gb                0      0        0         0     0            0  -",
        "a100-1g.10gb             0      0        0         0     0            0  -",
        "a100-3g.40gb             0      0        0         0     0            0  -",
        "l4-shared                0      0        0         0     0            0  -"]


USAGE_FIRST = "usage: gpugate pool --policy FILE --kubeconfig FILE [-o text|json]\n"


@pytest.mark.parametrize("args, error", [
    ((), "--policy and --kubeconfig are required"),
    (("--policy", "P"), "--policy and --kubeconfig are required"),
    (("--kubeconfig", "K"), "--policy and --kubeconfig are required"),
    (("--policy", "P", "--kubeconfig", "K", "-o", "yaml"), "-o wants text or json, not 'yaml'"),
    (("--policy", "P", "--kubeconfig", "K", "--timeout", "0"),
     "--timeout wants 1 to 3600 seconds"),
    (("--policy", "P", "--kubeconfig", "K", "--timeout", "3601"),
     "--timeout wants 1 to 3600 seconds"),
    (("--policy", "P", "--kubeconfig", "K", "--timeout", "5s"),
     "--timeout wants 1 to 3600 seconds"),
    (("--policy", "P", "--kubeconfig", "K", "extra"), "unexpected argument 'extra'"),
    (("--nope",), "unknown option '--nope'"),
])
def test_gpugate_pool_usage_errors(gpugate_bin, kube, args, error):
    args = tuple(str(EXAMPLE_POLICY) if a == "P" else str(kube.kubeconfig) if a == "K" else a
                 for a in args)
    r = gpugate_pool(gpugate_bin, *args)
    assert (r.returncode, r.stdout) == (2, ""), r
    assert r.stderr == f"gpugate pool: {error}; run 'gpugate pool --help'\n", r.stderr
    assert not kube.requests(), "nothing was asked of the API"


def test_gpugate_pool_help(gpugate_bin):
    r = gpugate_pool(gpugate_bin, "--help")
    assert (r.returncode, r.stderr) == (0, ""), r
    assert r.stdout.startswith(USAGE_FIRST)
    assert r.stdout.endswith("Exit status: 0 shown; 1 the cluster could not be read; 2 usage "
                             "error or\ninvalid policy; 3 the pool is forbidden, the GPUQuota "
                             "objects of -n NS\nwere shown instead.\n"), r.stdout


def test_gpugate_pool_invalid_policy_is_2(gpugate_bin, kube, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nflavors: []\n")
    r = gpugate_pool(gpugate_bin, "--policy", str(bad), "--kubeconfig", str(kube.kubeconfig))
    assert (r.returncode, r.stdout) == (2, ""), r
    assert r.stderr.startswith(f"{bad}:"), r.stderr
    r = gpugate_pool(gpugate_bin, "--policy", str(tmp_path / "missing.yaml"),
                     "--kubeconfig", str(kube.kubeconfig))
    assert (r.returncode, r.stdout) == (2, ""), r
    assert not kube.requests()


def test_gpugate_pool_bad_kubeconfig_is_1(gpugate_bin, tmp_path):
    missing = tmp_path / "missing.kubeconfig"
    r = gpugate_pool(gpugate_bin, "--policy", str(EXAMPLE_POLICY), "--kubeconfig", str(missing))
    assert (r.returncode, r.stdout) == (1, ""), r
    assert r.stderr.startswith(f"gpugate pool: {missing}: "), r.stderr
    assert r.stderr.endswith("\n") and r.stderr.count("\n") == 1, r.stderr
    garbage = tmp_path / "garbage.kubeconfig"
    garbage.write_text("apiVersion: v1\nkind: Config\nclusters: []\n")
    r = gpugate_pool(gpugate_bin, "--policy", str(EXAMPLE_POLICY), "--kubeconfig", str(garbage))
    assert (r.returncode, r.stdout) == (1, ""), r
    assert r.stderr.startswith(f"gpugate pool: {garbage}"), r.stderr


def test_gpugate_pool_timeout_is_1(gpugate_bin, kube):
    """The Nodes are never listed (a hang): after --timeout, exit 1."""
    kube.hang_lists("nodes", True)
    r = gpugate_pool(gpugate_bin, "--policy", str(EXAMPLE_POLICY),
                     "--kubeconfig", str(kube.kubeconfig), "--timeout", "1")
    kube.hang_lists("nodes", False)
    assert (r.returncode, r.stdout) == (1, ""), r
    assert r.stderr.endswith(
        f"gpugate pool: {kube.url}: the Pods, Jobs, ResourceClaims and Nodes were not all "
        "listed within 1 s (see the log above)\n"), r.stderr
    # A list that fails with 401 or 5xx is retried by the feed until the
    # timeout, as before (the one look for a 403 costs no wait).
    for status in (401, 503):
        kube.fail_lists("nodes", status)
        t0 = time.monotonic()
        r = gpugate_pool(gpugate_bin, "--policy", str(EXAMPLE_POLICY),
                         "--kubeconfig", str(kube.kubeconfig), "--timeout", "2")
        took = time.monotonic() - t0
        assert r.returncode == 1, r
        assert f"kind=nodes status={status}" in r.stderr, r.stderr
        assert r.stderr.endswith("were not all listed within 2 s (see the log above)\n"), \
            r.stderr
        assert took < 2 + 1.5 * SLOW, took


def test_gpugate_pool_forbidden_is_said_at_once(gpugate_bin, kube):
    """A 403 (no RBAC: a tenant's edit) is not retried for the timeout
    (issue #27: a minute of retries, then a vague message): it ends the
    command at once, saying what is missing and what a tenant reads."""
    for kind, resource in (("nodes", "nodes"), ("jobs", "jobs.batch")):
        kube.fail_lists(kind, 403)
        t0 = time.monotonic()
        r = gpugate_pool(gpugate_bin, "--policy", str(EXAMPLE_POLICY),
                         "--kubeconfig", str(kube.kubeconfig), "--timeout", "60")
        took = time.monotonic() - t0
        kube.fail_lists(kind, None)
        assert (r.returncode, r.stdout) == (1, ""), r
        assert r.stderr == (
            f"gpugate pool: forbidden: cannot list {resource} at the cluster scope (pool "
            "needs list on nodes, pods, jobs.batch and resourceclaims.resource.k8s.io in "
            "all namespaces); as a tenant, read your quota with: kubectl get gpuquota -n "
            "YOUR-NAMESPACE\n"), r.stderr
        assert took < 5 * SLOW, took
    # No feed was started: no watch, one list of each kind at most.
    assert not kube.requests(watch=True)
