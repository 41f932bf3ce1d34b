"""Issue #26, deliverable 2: the shared usage store attacked on 3 replicas.

Three `gpugate serve --usage-store shared` replicas behind the harness's
balancer (test_replicas.py; REPLICAS_POLICY: tenant `race`, nominal 8 H100,
class gpu = 1 to 8 GPUs, namespace `race`).  The attacker is the tenant of
`race`, bound to the built-in ClusterRole `edit` there and nothing more
(Stack.tenant_kubectl); its creates go to the apiserver as direct HTTPS
requests with its token, so that they arrive together.  After every
scenario the invariant (gpugate_e2e.assert_invariant) on every replica:
gpugate_quota_used{race} is what the tenant's pods and Jobs hold, and that
never exceeds 8.

Scenarios (each found by the attack of issue #26 on the code before it):

  riders    a Job of 1 slot of 8 GPUs that no controller runs
            (spec.managedBy), then 12 pods at once, each the Job's template
            with its controller ownerReference and controller-uid label:
            exactly one rides on the slot, the rest are over quota
            (measured before: 6 of 12 admitted, 48 GPUs held)
  resumes   5 Jobs of 8 GPUs that ran once and were suspended, resumed at
            once: exactly one is admitted (before: 2 of 5, 16 held)
  ghost     a POST of a pod name that exists, asking for 6: gpugate admits
            it, the apiserver answers AlreadyExists; a pod of 6 that fits is
            admitted once the ghost's name shows another uid for 5 s, well
            before the 10 s TTL (before: refused until the TTL and a prune)
  restart   7 + 1 GPUs created, the 1 deleted, every replica kill -9'd and
            restarted: a pod of 1 (7 + 1 of 8) is admitted at once (before:
            the deleted pod's record counted until a new leader pruned it)

    make e2e E2E_ARGS='-k shared_attacks -x -s'
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from gpugate_e2e import (Api, CONTROLLER_UID, JOB_NAME, Replicas, assert_invariant, job, log, pod,
                         wait_until)

TENANT = NS = "race"
FLAVOR, RESOURCE = "h100-80gb", "nvidia.com/gpu"
NOMINAL = 8
K = 3
GRACE_S = 5.0       # G, docs/design/shared-usage-store.md
TTL_S = 10.0        # --reservation-ttl of the e2e replicas (SHARED_REPLICA_ARGS)
NOBODY = "example.com/nobody"
STORE = "gpugate-usage-t-race"  # the domain's ConfigMap in gpugate-e2e


@pytest.fixture(scope="module")
def replicas(stack) -> Replicas:
    r = stack.start_replicas(K)
    yield r
    problems = stack.stop_replicas()
    assert not problems, "\n\n".join(problems)


def tenant_api(stack, namespace: str) -> Api:
    """The apiserver as the tenant of a namespace (its ServiceAccount token,
    bound to edit there only, and no client certificate): requests without
    kubectl's start-up."""
    stack.tenant_kubectl(namespace)
    cfg = json.loads(Path(stack.dir / f"tenant-{namespace}.kubeconfig").read_text())
    return Api(stack.cluster, token=cfg["users"][0]["user"]["token"])


def together(fns) -> list:
    """Runs each fn(conn) in its own thread on its own connection, released
    at once; their results in order."""
    gate = threading.Barrier(len(fns) + 1)
    results: list = [None] * len(fns)

    def one(i, fn, conn):
        try:
            conn.connect()
            gate.wait()
            results[i] = fn(conn)
        except Exception as e:  # noqa: BLE001 - a failed request, reported
            results[i] = (0, repr(e))
        finally:
            conn.close()

    threads = [threading.Thread(target=one, args=(i, fn, fn.conn)) for i, fn in enumerate(fns)]
    for t in threads:
        t.start()
    gate.wait()
    for t in threads:
        t.join(60)
    return results


def message(body) -> str:
    return body.get("message", "") if isinstance(body, dict) else str(body)


def denied_by_gpugate(status: int, body) -> bool:
    return status in (400, 403) and "gpugate" in message(body)


def invariant(stack, replicas: Replicas) -> int:
    """assert_invariant on every replica; what the tenant holds."""
    total = 0
    for g in replicas.gates:
        total = assert_invariant(stack.kubectl, g, TENANT, [NS], FLAVOR, RESOURCE, NOMINAL,
                                 timeout=20).total
    return total


def pending_records(stack) -> int:
    r = stack.kubectl("get", "configmap", STORE, "-n", "gpugate-e2e", "-o", "json")
    if r.rc != 0:
        return 0 if "NotFound" in r.err else -1
    return len(json.loads((r.json().get("data") or {}).get("reservations") or "[]"))


def empty(stack, replicas: Replicas) -> None:
    """No pod, no Job, nothing counted, no reservation left in the store
    (so that a scenario does not pay for the one before)."""
    k = stack.kubectl
    k("delete", "jobs,pods", "--all", "-n", NS, "--wait=false", timeout=60)
    wait_until("namespace race to be empty",
               lambda: not k("get", "jobs,pods", "-n", NS, "-o", "name").out.strip(), 60)
    replicas.wait_used(TENANT, 0)
    wait_until(f"the reservations of {STORE} to be pruned",
               lambda: pending_records(stack) == 0, 60, 0.5)


@pytest.fixture
def race(stack, replicas):
    """The tenant of race, as an Api; race starts and ends empty."""
    empty(stack, replicas)
    t = tenant_api(stack, NS)
    yield t
    empty(stack, replicas)


def test_the_tenant_is_only_the_tenant(race):
    """What the attacks below send goes as the tenant: edit in race, and no
    more (an admin client certificate would be taken before the token)."""
    assert race.request("GET", f"/api/v1/namespaces/{NS}/pods")[0] == 200
    assert race.request("GET", "/api/v1/namespaces/kube-system/pods")[0] == 403
    assert race.request("PATCH", f"/api/v1/namespaces/{NS}/pods/x/status", {},
                        content_type="application/merge-patch+json")[0] == 403


def create_job(t: Api, obj: dict) -> dict:
    status, body = t.request("POST", f"/apis/batch/v1/namespaces/{NS}/jobs", obj)
    assert status == 201, (status, message(body))
    return body


def rider(name: str, j: dict) -> dict:
    """A pod made of Job j's template (as gpugate mapped it: class labels,
    limits, node selector), naming j as the job controller would: its
    controller ownerReference; the template carries the controller-uid
    label already."""
    tmpl = j["spec"]["template"]
    labels = dict((tmpl.get("metadata") or {}).get("labels") or {})
    labels.update({CONTROLLER_UID: j["metadata"]["uid"], JOB_NAME: j["metadata"]["name"]})
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": labels,
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                                              "controller": True,
                                              "name": j["metadata"]["name"],
                                              "uid": j["metadata"]["uid"]}]},
            "spec": tmpl["spec"]}


def post(t: Api, path: str, body: dict, method: str = "POST",
         content_type: str = "application/json"):
    def fn(conn):
        return t.request(method, path, body, conn=conn, content_type=content_type)
    fn.conn = t.connection()
    return fn


def test_riders_of_a_one_slot_job_nobody_runs_take_one_slot(stack, replicas, race):
    j = create_job(race, job("one-slot", NS, "gpu", 8, parallelism=1, managedBy=NOBODY))
    # every replica's watch shows the Job (its gang) before the pods come:
    # /mutate peeks at the local ledger only
    replicas.wait_used(TENANT, NOMINAL)
    results = together([post(race, f"/api/v1/namespaces/{NS}/pods", rider(f"rider-{i}", j))
                        for i in range(12)])
    admitted = sum(1 for s, _ in results if s == 201)
    denied = sum(1 for s, b in results if denied_by_gpugate(s, b))
    msgs = sorted({message(b)[:300] for s, b in results if s != 201})
    line = f"riders: {admitted} of 12 admitted, {denied} denied by gpugate; answers {msgs}"
    print(line)
    log(line)
    held = invariant(stack, replicas)
    assert admitted == 1, line
    assert held == NOMINAL, f"the Job's slot, held once: {held}"


def test_suspended_jobs_resumed_at_once_are_judged_each(stack, replicas, race):
    k = stack.kubectl
    names = [f"resume-{i}" for i in range(5)]
    for n in names:
        # runs (holds 8 of 8), then is suspended (holds nothing), one by one
        create_job(race, job(n, NS, "gpu", 8, parallelism=1, managedBy=NOBODY))
        replicas.wait_used(TENANT, NOMINAL)
        status, body = race.request(
            "PATCH", f"/apis/batch/v1/namespaces/{NS}/jobs/{n}", {"spec": {"suspend": True}},
            content_type="application/merge-patch+json")
        assert status == 200, (status, message(body))
        replicas.wait_used(TENANT, 0)
    results = together([post(race, f"/apis/batch/v1/namespaces/{NS}/jobs/{n}",
                             {"spec": {"suspend": False}}, "PATCH",
                             "application/merge-patch+json") for n in names])
    resumed = [n for n, (s, _) in zip(names, results) if s == 200]
    line = (f"resumes: {len(resumed)} of 5 resumed; answers "
            f"{[(s, message(b)[:100]) for s, b in results if s != 200]}")
    print(line)
    log(line)
    held = invariant(stack, replicas)
    active = [j["metadata"]["name"] for j in k("get", "jobs", "-n", NS, "-o", "json"
                                                ).json()["items"]
              if not j["spec"].get("suspend")]
    assert len(resumed) == 1 and active == resumed, line
    assert held == NOMINAL


def test_a_create_refused_as_already_existing_holds_nothing(stack, replicas, race):
    pods = f"/api/v1/namespaces/{NS}/pods"
    status, body = race.request("POST", pods, pod("taken", NS, "gpu", 2))
    assert status == 201, (status, message(body))
    replicas.wait_used(TENANT, 2)
    # the ghost: gpugate admits 6 (2 + 6 of 8), the apiserver refuses the name
    status, body = race.request("POST", pods, pod("taken", NS, "gpu", 6))
    t0 = time.monotonic()
    assert status == 409 and body.get("reason") == "AlreadyExists", (status, message(body))
    tries = []

    def fits():
        s, b = race.request("POST", pods, pod("fits", NS, "gpu", 6))
        tries.append((round(time.monotonic() - t0, 2), s))
        assert s == 201 or denied_by_gpugate(s, b), (s, message(b))
        return s == 201
    wait_until("a pod of 6 to be admitted beside the 2 held", fits, TTL_S + 20, 0.5)
    took = time.monotonic() - t0
    line = f"ghost: the pod that fits admitted {took:.1f}s after the ghost; tries {tries}"
    print(line)
    log(line)
    assert took < GRACE_S + 2.5, (
        f"{line}: the ghost held its 6 GPUs past {GRACE_S + 2.5:.1f}s "
        f"(the reservation TTL is {TTL_S:.0f}s)")
    assert invariant(stack, replicas) == NOMINAL


def test_a_pod_that_fits_right_after_every_replica_is_killed_and_restarted(
        stack, replicas, race):
    pods = f"/api/v1/namespaces/{NS}/pods"
    for name, n in (("seven", 7), ("gone", 1)):
        status, body = race.request("POST", pods, pod(name, NS, "gpu", n))
        assert status == 201, (status, message(body))
    t0 = time.monotonic()
    status, body = race.request("DELETE", f"{pods}/gone")
    assert status == 200, (status, message(body))
    wait_until("pod gone to be gone",
               lambda: race.request("GET", f"{pods}/gone")[0] == 404, 30, 0.2)
    # kill -9 before the leader prunes (records go 5 s after their object
    # showed); then the new processes list the pods 5 s (G) after the
    # reservations at least, so that in-flight creates are behind them
    for i in range(K):
        replicas.kill(i)
    killed = time.monotonic() - t0
    # whether the deleted pod's record outlived the replicas (the leader
    # may have pruned it first: then the restart has less to judge)
    r = stack.kubectl("get", "configmap", STORE, "-n", "gpugate-e2e", "-o", "json")
    left = [x["name"] for x in json.loads(
        ((r.json().get("data") or {}).get("reservations") or "[]") if r.rc == 0 else "[]")]
    time.sleep(max(0.0, GRACE_S + 0.5 - (time.monotonic() - t0)))
    t1 = time.monotonic()
    for i in range(K):
        replicas.restart(i)
    ready = time.monotonic() - t1
    status, body = race.request("POST", pods, pod("one-more", NS, "gpu", 1))
    line = (f"restart: killed {killed:.1f}s after the creates (records left: {left}), "
            f"restarted and ready in {ready:.1f}s; 7 + 1 of 8: {status} "
            f"{message(body)[:200]}")
    print(line)
    log(line)
    assert status == 201, line
    assert invariant(stack, replicas) == NOMINAL
