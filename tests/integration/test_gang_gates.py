"""Gang start, route gates (SPEC section 9; controllers/gang-start.h) over
the fake API: gpugate serve --kubeconfig lists and watches the Nodes and
Pods (the inventory), and its gang-start controller takes the gate
gpugate.io/gang off every pod of a gang at once when the pool has room for
all of them, in one NVLink clique (the class train-large requires
nvidia.com/gpu.clique), keeping its record in the ConfigMap gpugate-gangs.

The fake plays the Job controller: it makes the gated pods, and deletes
them when the Job is suspended.  Changes are waited for on the fake's
record of what gpugate wrote, never by sleeping; where the test is that
nothing happens, on the fake's record of what gpugate read: a few whole
controller rounds (quiet()).  The rounds are 200 ms here, not 2 s
($GPUGATE_TEST_ROUND_MS, a test-only setting of gpugate serve).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from conftest import EXAMPLE_POLICY, SLOW, metrics, poll
from test_pool import CLIQUE, api_node
from test_watch import kube  # noqa: F401  (the fixture)

GATE = "gpugate.io/gang"
ROUTE = "gpugate.io/gang-route"
STATE = "gpugate-gangs"
NS = "gpugate-system"
ROUND = 0.2  # the controller's interval here (2 s by default)
ROUND_ENV = {"GPUGATE_TEST_ROUND_MS": str(int(ROUND * 1000))}


@pytest.fixture
def gang_policy(tmp_path) -> Path:
    """The example policy with train-large a gang class and a short
    timeout (the least the policy allows)."""
    text = EXAMPLE_POLICY.read_text()
    text = text.replace("    topology: {key: nvidia.com/gpu.clique, mode: required}\n",
                        "    topology: {key: nvidia.com/gpu.clique, mode: required}\n"
                        "    gang: true\n", 1)
    text = text.replace("  mode: enforce                  # tenants may override (see \"sandbox\")\n",
                        "  mode: enforce\n  gangTimeoutSeconds: 10\n", 1)
    assert "gang: true" in text and "gangTimeoutSeconds" in text
    p = tmp_path / "gang-policy.yaml"
    p.write_text(text)
    return p


@pytest.fixture
def gang_gate(kube, fresh_server, gang_policy):
    """gpugate serve on the fake, once its pool is synced."""
    def start():
        srv = fresh_server(gang_policy, extra_args=("--kubeconfig", str(kube.kubeconfig),
                                                    "--namespace", NS),
                           env=ROUND_ENV)
        with srv.client() as c:
            poll(lambda: c.get("/readyz").status == 200, "/readyz 200")
            poll(lambda: metrics(c).get("gpugate_pool_synced") == 1, "gpugate_pool_synced 1")
        return srv
    return start


def fleet(kube, busy: dict[str, int] | None = None) -> None:
    """Two cliques of 3 H100 nodes: h0..h2 in c0, h3..h5 in c1; busy: node
    -> GPUs a running blocker pod holds there."""
    kube.put("nodes", *[api_node(f"h{i}", clique="c0" if i < 3 else "c1")
                        for i in range(6)])
    for node, units in (busy or {}).items():
        kube.put("pods", blocker(node, units))


def blocker(node: str, units: int = 8) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"blocker-{node}", "namespace": "research",
                         "uid": f"uid-blocker-{node}",
                         "labels": {"gpugate.io/tenant": "research"}},
            "spec": {"nodeName": node, "containers": [{"name": "m", "resources": {
                "limits": {"nvidia.com/gpu": str(units)}}}]},
            "status": {"phase": "Running"}}


def gang_job(name: str, pods: int = 3, *, suspend: bool = False) -> dict:
    """A Job of train-large as gpugate's /mutate left it on route gates."""
    uid = f"uid-job-{name}"
    labels = {"gpugate.io/tenant": "research", "gpugate.io/flavor": "h100-80gb",
              "gpugate.io/gang": f"g-{name}", "gpugate.io/class": "train-large"}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "research", "uid": uid,
                         "labels": dict(labels), "annotations": {ROUTE: "gates"}},
            "spec": {"parallelism": pods, "completions": pods, "suspend": suspend,
                     "template": {"metadata": {"labels": dict(labels),
                                               "annotations": {ROUTE: "gates"}},
                                  "spec": {"schedulingGates": [{"name": GATE}],
                                           "containers": [container()]}}},
            "status": {}}


def container() -> dict:
    return {"name": "main", "image": "x",
            "resources": {"limits": {"nvidia.com/gpu": "8"}}}


def gang_pod(job: dict, i: int, *, gates=(GATE,), node: str | None = None,
             domain: str | None = None, phase: str = "Pending", gen: int = 0) -> dict:
    """Pod i of job as the Job controller makes it (gated)."""
    meta = job["metadata"]
    spec: dict = {"containers": [container()],
                  "schedulingGates": [{"name": g} for g in gates]}
    if node:
        spec["nodeName"] = node
    if domain:
        spec["nodeSelector"] = {CLIQUE: domain}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{meta['name']}-{gen}-{i}", "namespace": "research",
                         "uid": f"uid-pod-{meta['name']}-{gen}-{i}",
                         "labels": {**job["spec"]["template"]["metadata"]["labels"],
                                    "batch.kubernetes.io/controller-uid": meta["uid"]},
                         "annotations": {ROUTE: "gates"},
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                                              "name": meta["name"], "uid": meta["uid"],
                                              "controller": True}]},
            "spec": spec, "status": {"phase": phase}}


def pod_now(kube, uid: str) -> dict:
    with kube._cond:
        return kube._res["pods"].objects.get(uid)


def released(kube, uid: str) -> bool:
    p = pod_now(kube, uid)
    return p is not None and not any(g["name"] == GATE
                                     for g in p["spec"].get("schedulingGates") or [])


def record(kube, job_uid: str) -> dict | None:
    cm = kube.object("configmaps", NS, STATE)
    text = ((cm or {}).get("data") or {}).get(job_uid)
    if text is None:
        return None
    return dict(f.split("=", 1) for f in text.split(" "))


def set_record(kube, job_uid: str, rec: dict) -> None:
    """Writes gpugate's record of a Job (as a restart will read it)."""
    with kube._cond:
        cm = kube._objects[("configmaps", NS, STATE)]
        cm["data"][job_uid] = " ".join(f"{k}={v}" for k, v in rec.items())
        cm["metadata"]["resourceVersion"] = str(kube._next_rv())


def events(kube, reason: str) -> list[dict]:
    with kube._cond:
        return [e for e in kube.k8s_events if e.get("reason") == reason]


def rounds(kube) -> int:
    """The controller's rounds that read the gangs so far: each lists the
    gang pods (while the inventory shows a gated gang pod)."""
    return sum(1 for q in kube.requests("pods", watch=False)
               if q.query == {"labelSelector": "gpugate.io/gang"})


def record_reads(kube) -> int:
    return sum(1 for q in kube.requests() if q.path == f"/api/v1/namespaces/{NS}/configmaps/{STATE}")


def quiet(kube, n: int = 3, *, gated: bool = True) -> None:
    """n whole controller rounds in which nothing must happen.  gated: a
    gated gang pod is there, so that every round reads the gangs; waits
    for n + 1 more to begin (a round acts before the next reads).  Else a
    round reads the record once, finds it empty, and reads nothing more
    until a gated pod shows: that read, then n rounds' time (a timer, not
    work: valgrind stretches an idle round little)."""
    if gated:
        start = rounds(kube)
        poll(lambda: rounds(kube) >= start + n + 1, f"{n} more rounds of gang start")
    else:
        poll(lambda: record_reads(kube) > 0, "gang start's first round")
        time.sleep(n * ROUND + (2.0 if SLOW > 1 else 0.0))


def test_release_when_the_pool_has_room_for_all(kube, gang_gate):
    fleet(kube, busy={"h3": 8})  # c0: 3 free, c1: 2 free
    job = gang_job("g1")
    kube.put("jobs", job)
    pods = [gang_pod(job, i) for i in range(3)]
    kube.put("pods", *pods)
    gang_gate()
    for p in pods:
        poll(lambda p=p: released(kube, p["metadata"]["uid"]), "gate off")
    for p in pods:
        now = pod_now(kube, p["metadata"]["uid"])
        assert now["spec"]["nodeSelector"] == {CLIQUE: "c0"}, now["spec"]
        assert now["spec"]["schedulingGates"] == []
    rec = record(kube, "uid-job-g1")
    assert rec and int(rec["r"]) > 0 and rec["n"] == "0" and rec["s"] == "0" \
        and rec["t"] == "research", rec
    # One JSON patch a pod: test the gate, add the selector, remove the gate.
    ops = [b for k, _, _, t, b in kube.patches if k == "pods"]
    assert len(ops) == 3 and all(t == "application/json-patch+json"
                                 for k, _, _, t, _ in kube.patches if k == "pods")
    assert [o["op"] for o in ops[0]] == ["test", "add", "remove"], ops[0]
    assert ops[0][0] == {"op": "test", "path": "/spec/schedulingGates/0/name",
                         "value": GATE}
    poll(lambda: events(kube, "GPUGangStarted"), "GPUGangStarted on the Job")
    ev = events(kube, "GPUGangStarted")[0]
    assert ev["involvedObject"]["kind"] == "Job" and ev["involvedObject"]["name"] == "g1"
    assert "all in nvidia.com/gpu.clique=c0" in ev["message"], ev["message"]
    # All Running: the start is observed, the record dropped.
    for p in pods:
        now = pod_now(kube, p["metadata"]["uid"])
        now["spec"]["nodeName"] = "h0"
        now["status"]["phase"] = "Running"
        kube.event("pods", "MODIFIED", now)
    poll(lambda: record(kube, "uid-job-g1") is None, "record dropped once started")


def test_no_release_while_one_pod_is_missing(kube, gang_gate):
    fleet(kube)
    job = gang_job("g2")
    kube.put("jobs", job)
    pods = [gang_pod(job, i) for i in range(3)]
    kube.put("pods", *pods[:2])
    gang_gate()
    quiet(kube)
    assert not kube.patches, kube.patches
    assert record(kube, "uid-job-g2") is None
    poll(lambda: any("not every pod of it exists yet" in e["message"]
                     for e in events(kube, "GPUGangWaiting")), "GPUGangWaiting")
    kube.event("pods", "ADDED", pods[2])
    for p in pods:
        poll(lambda p=p: released(kube, p["metadata"]["uid"]), "gate off")


def test_no_release_with_a_foreign_gate(kube, gang_gate):
    fleet(kube)
    job = gang_job("g3")
    kube.put("jobs", job)
    kube.put("pods", gang_pod(job, 0), gang_pod(job, 1),
             gang_pod(job, 2, gates=(GATE, "kueue.x-k8s.io/topology")))
    gang_gate()
    quiet(kube)
    assert not kube.patches, kube.patches


def test_no_release_without_room_then_release_when_room_comes(kube, gang_gate):
    # No clique with 3 free nodes (the design's "one node short").
    fleet(kube, busy={"h0": 8, "h3": 8})
    job = gang_job("g4")
    kube.put("jobs", job)
    pods = [gang_pod(job, i) for i in range(3)]
    kube.put("pods", *pods)
    srv = gang_gate()
    quiet(kube)
    assert not kube.patches, kube.patches
    with srv.client() as c:
        m = metrics(c)
    assert m.get('gpugate_gangs_waiting{route="gates",tenant="research",'
                 'flavor="h100-80gb"}') == 1, {k: v for k, v in m.items() if "gang" in k}
    # A restart while it waits loses nothing: the gates are the cluster's.
    assert srv.terminate() == 0
    srv = gang_gate()
    kube.event("pods", "DELETED", blocker("h3"))
    for p in pods:
        poll(lambda p=p: released(kube, p["metadata"]["uid"]), "gate off")
    for p in pods:
        assert pod_now(kube, p["metadata"]["uid"])["spec"]["nodeSelector"] == {CLIQUE: "c1"}


def test_a_replacement_is_pinned_to_the_domain_of_its_bound_gang(kube, gang_gate):
    fleet(kube)  # both cliques empty: c0 would be as good as c1
    job = gang_job("g5")
    kube.put("jobs", job)
    bound = [gang_pod(job, i, gates=(), node=f"h{3 + i}", domain="c1", phase="Running")
             for i in range(2)]
    for b in bound:
        kube.put("pods", b)
    new = gang_pod(job, 2, gen=1)
    kube.put("pods", new)
    gang_gate()
    poll(lambda: released(kube, new["metadata"]["uid"]), "gate off")
    assert pod_now(kube, new["metadata"]["uid"])["spec"]["nodeSelector"] == {CLIQUE: "c1"}


def test_a_replacement_finds_the_domain_by_its_gangs_nodes(kube, gang_gate):
    """Pods bound without the selector (before gpugate released them): the
    domain is their nodes' label."""
    fleet(kube)
    job = gang_job("g8")
    kube.put("jobs", job)
    for i in range(2):
        kube.put("pods", gang_pod(job, i, gates=(), node=f"h{3 + i}", phase="Running"))
    new = gang_pod(job, 2, gen=1)
    kube.put("pods", new)
    gang_gate()
    poll(lambda: released(kube, new["metadata"]["uid"]), "gate off")
    assert pod_now(kube, new["metadata"]["uid"])["spec"]["nodeSelector"] == {CLIQUE: "c1"}


def test_regate_after_the_timeout_by_suspend_and_resume(kube, gang_gate):
    fleet(kube)
    job = gang_job("g6")
    kube.put("jobs", job)
    pods = [gang_pod(job, i) for i in range(3)]
    kube.put("pods", *pods)
    srv = gang_gate()
    for p in pods:
        poll(lambda p=p: released(kube, p["metadata"]["uid"]), "gate off")
    rec = record(kube, "uid-job-g6")
    assert int(rec["r"]) > 0 and rec["s"] == "0", rec
    # A restart after the release keeps its time (the record's r).  It is
    # down for the timeout: instead of 10 s, r is moved 10 s back while
    # it is down (the release as if 10 s earlier).
    assert srv.terminate() == 0
    r = int(rec["r"]) - 10_000
    set_record(kube, "uid-job-g6", {**rec, "r": str(r)})
    restarted = time.time()
    gang_gate()
    # Never Running: gangTimeoutSeconds (10) after r the Job is suspended.
    poll(lambda: _job(kube, "uid-job-g6")["spec"].get("suspend"), "Job suspended",
         timeout=30 * SLOW)
    rec = record(kube, "uid-job-g6")
    assert rec and rec["n"] == "1" and rec["s"] == "1" and rec["r"] == "0", rec
    poll(lambda: events(kube, "GPUGangRegated"), "GPUGangRegated")
    suspended_at = time.time()
    # The timeout, then the restart and a few rounds: 13 s of slack.
    assert suspended_at - r / 1000 < 10 + 13, "timed from the record's r"
    # Sooner than a timeout counted from the restart.
    assert suspended_at < restarted + 10, "timed from the record's r, not the restart"
    # The Job controller deletes its pods; then gpugate resumes it.
    for p in pods:
        kube.event("pods", "DELETED", pod_now(kube, p["metadata"]["uid"]))
    poll(lambda: _job(kube, "uid-job-g6")["spec"].get("suspend") is False, "Job resumed")
    # The Job controller makes the pods again, gated by /mutate.
    again = [gang_pod(job, i, gen=1) for i in range(3)]
    for p in again:
        kube.event("pods", "ADDED", p)
    poll(lambda: (record(kube, "uid-job-g6") or {}).get("s") == "0", "s cleared")
    for p in again:
        poll(lambda p=p: released(kube, p["metadata"]["uid"]), "released again")
    assert record(kube, "uid-job-g6")["n"] == "1"


def test_a_tenants_suspend_is_left_alone(kube, gang_gate):
    fleet(kube)
    job = gang_job("g7", suspend=True)
    kube.put("jobs", job)
    gang_gate()
    quiet(kube, gated=False)
    assert not kube.patches, kube.patches


def _job(kube, uid: str) -> dict:
    with kube._cond:
        return kube._res["jobs"].objects[uid]
