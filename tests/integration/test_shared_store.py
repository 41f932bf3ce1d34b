"""The shared usage store (--usage-store shared, usage/shared-backend.h) over the fake
API: two gpugate processes, one set of reservations in ConfigMaps; quota is
denied, and nothing else, while the store cannot be reached."""

from __future__ import annotations

import json
import threading

from conftest import poll
from fakekube import api_pod
from test_watch import admit, gate, kube, over_quota, started, wait_used  # noqa: F401

NS = "gpugate"
DOMAIN = "gpugate-usage-t-strict"  # tenant strict is in no cohort


def shared(gate, name: str):
    srv = gate("--usage-store", "shared", "--namespace", NS, "--identity", name,
               "--reservation-ttl", "5")
    return srv


def records(kube) -> list[dict]:
    cm = kube.object("configmaps", NS, DOMAIN)
    return json.loads((cm or {}).get("data", {}).get("reservations") or "[]")


def test_two_processes_share_one_quota(gate, kube):
    a, b = shared(gate, "a"), shared(gate, "b")
    started(a, kube)
    started(b, kube)
    # strict: nominal 8, no cohort.  a reserves 4 + 3; b knows of them only
    # from the ConfigMap, not from any watch (the pods are never created).
    assert admit(a, "p1", 4).allowed
    assert admit(a, "p2", 3).allowed
    assert [r["uid"] for r in records(kube)] == ["uid-admitted-p1", "uid-admitted-p2"]
    r = admit(b, "p3", 2)
    assert not r.allowed and r.message == over_quota(2, 7), r.message
    assert admit(b, "p4", 1).allowed
    assert sorted(r["replica"] for r in records(kube)) == ["a", "a", "b"]


def test_concurrent_creates_on_two_processes_admit_exactly_the_quota(gate, kube):
    a, b = shared(gate, "a"), shared(gate, "b")
    started(a, kube)
    started(b, kube)
    results: list[bool] = []
    lock = threading.Lock()

    def create(i: int) -> None:
        r = admit(a if i % 2 else b, f"c{i}", 1)
        with lock:
            results.append(r.allowed)

    threads = [threading.Thread(target=create, args=(i,)) for i in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(results) == 8, results
    assert len(records(kube)) == 8


def test_unreachable_store_denies_quota_and_serves_the_rest(gate, kube):
    a = shared(gate, "a")
    started(a, kube)
    kube.fault(path=f"/api/v1/namespaces/{NS}/configmaps", status=503)
    r = admit(a, "p1", 1)
    assert not r.allowed
    assert r.message.startswith('gpugate: cannot reserve quota for tenant "strict" now ('), \
        r.message
    assert r.message.endswith("nothing was admitted: retry in a moment"), r.message
    # A pod that holds no quota does not need the store.
    with a.client() as c:
        m = c.admit("validate", {"apiVersion": "v1", "kind": "Pod",
                                 "metadata": {"name": "web", "namespace": "strict",
                                              "uid": "uid-web"},
                                 "spec": {"containers": [{"name": "c", "image": "x"}]}})
        assert m.allowed, m
    kube.clear_faults()
    assert admit(a, "p1", 1).allowed


def test_the_leader_prunes_what_the_watch_shows(gate, kube):
    a = shared(gate, "a")
    started(a, kube)
    assert admit(a, "p1", 2).allowed
    assert len(records(kube)) == 1
    p = api_pod("p1", "strict", 2, uid="uid-admitted-p1")
    kube.event("pods", "ADDED", p)
    wait_used(a, 2)
    # Shown for the grace period (5 s), then gone from the document; the
    # usage stays (the watch counts it).
    poll(lambda: not records(kube), "the record pruned", 20)
    wait_used(a, 2)
