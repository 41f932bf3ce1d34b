"""--usage-store leader (issue #32): the holder of Lease gpugate-memory
decides quota in memory, the other replicas forward their reserving
/validate to it (POST /peer/decide), so that three replicas never hand out
the same last GPUs and none writes to the API per decision.  A new holder
decides only after G (5 s) and a whole list begun after it; a forward that
cannot be answered is denied, never decided twice."""

from __future__ import annotations

import json
import os
import signal
import ssl
import http.client

from conftest import metrics, poll
from test_watch import admit, gate, kube, started  # noqa: F401

NS = "gpugate"
GATE_S = 5


def leader(gate, name: str):
    return gate("--usage-store", "leader", "--namespace", NS, "--identity", name)


def holder(kube) -> str | None:
    lease = kube.object("leases", NS, "gpugate-memory")
    return ((lease or {}).get("spec") or {}).get("holderIdentity")


def annotations(kube) -> dict:
    lease = kube.object("leases", NS, "gpugate-memory") or {}
    return (lease.get("metadata") or {}).get("annotations") or {}


def refused(reason: str) -> str:
    return (f'gpugate: cannot reserve quota for tenant "strict" now ({reason}); nothing '
            f"was admitted: retry in a moment")


def three(gate, kube):
    a = leader(gate, "a")
    started(a, kube)
    poll(lambda: holder(kube) == "a", "a to hold gpugate-memory")
    b, c = leader(gate, "b"), leader(gate, "c")
    started(b, kube)
    started(c, kube)
    return a, b, c


def test_followers_forward_and_the_leader_never_over_admits(gate, kube):
    a, b, c = three(gate, kube)
    assert annotations(kube).get("gpugate.io/peer-identity") == "a"
    assert annotations(kube).get("gpugate.io/peer-address") == f"127.0.0.1:{a.port}"
    # The leader's gate: G, then a whole list, before its first decision.
    poll(lambda: admit(b, "p0", 1).allowed, "the leader's gate to open", GATE_S + 10)
    assert 'msg="quota decisions on" usage_store=leader' in a.stderr_text()
    assert admit(c, "p1", 4).allowed
    assert admit(a, "p2", 3).allowed
    r = admit(b, "p3", 1)
    assert not r.allowed
    assert r.message == (
        'gpugate: tenant "strict" is over its h100-80gb quota: requested 1 (class '
        'train-small), in use 8 of nominal 8, no cohort to borrow from'), r.message
    # Asked again for what it holds (a retried request): judged without its
    # own units, not counted twice.
    assert admit(c, "p1", 4).allowed
    # The leader holds the reservations; the followers hold nothing of their own.
    with a.client() as x:
        m = metrics(x)
    assert m['gpugate_quota_used{tenant="strict",flavor="h100-80gb"}'] == 8
    assert m["gpugate_quota_leader"] == 1
    with b.client() as x:
        mb = metrics(x)
    assert mb["gpugate_quota_leader"] == 0
    assert mb['gpugate_quota_forwards_total{result="answered"}'] >= 2
    assert mb["gpugate_quota_forward_seconds_count"] == \
        mb['gpugate_quota_forwards_total{result="answered"}']
    # No write to the API per decision: no domain documents.
    assert not [k for k in kube.stats() if "configmaps" in k.lower()], kube.stats()


def test_a_new_leader_waits_then_decides_and_a_dead_ones_followers_deny(gate, kube):
    a, b, c = three(gate, kube)
    poll(lambda: admit(b, "p0", 1).allowed, "the leader's gate to open", GATE_S + 10)
    # The leader stopped (SIGSTOP): forwards time out, denied, not decided here.
    os.kill(a.proc.pid, signal.SIGSTOP)
    try:
        r = admit(b, "p1", 1)
        assert not r.allowed
        assert "the replica that decides quota (127.0.0.1:%d) did not answer" % a.port \
            in r.message, r.message
    finally:
        os.kill(a.proc.pid, signal.SIGCONT)
    # a stops cleanly: it releases the Lease, b or c takes it and waits G.
    a.stop_and_check()
    poll(lambda: holder(kube) in ("b", "c"), "b or c to take the Lease", 10)
    new = b if holder(kube) == "b" else c
    other = c if new is b else b
    r = admit(other, "p2", 1)
    if not r.allowed:  # within the new leader's wait, or still forwarding to a
        assert ("decides after 5 s and a relist" in r.message or
                f"(127.0.0.1:{a.port}) did not answer" in r.message), r.message
    poll(lambda: admit(other, "p3", 1).allowed, "the new leader's gate", GATE_S + 10)
    assert 'msg="quota decisions on" usage_store=leader' in new.stderr_text()
    assert 'msg="relisted" kind=pods' in new.stderr_text()


def post_peer(srv, body: bytes, token: str | None):
    ctx = ssl.create_default_context(cafile=str(srv.certs.ca))
    ctx.check_hostname = False
    conn = http.client.HTTPSConnection("127.0.0.1", srv.port, context=ctx, timeout=10)
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = "Bearer " + token
    conn.request("POST", "/peer/decide", body=body, headers=headers)
    r = conn.getresponse()
    out = (r.status, r.read().decode())
    conn.close()
    return out


def test_the_peer_route_refuses_whoever_lacks_the_key(gate, kube):
    a = leader(gate, "a")
    started(a, kube)
    status, text = post_peer(a, b"{}", None)
    assert status == 401, (status, text)
    assert "not a gpugate replica of this installation" in text
    status, text = post_peer(a, b"{}", "0" * 64)
    assert status == 401, (status, text)


def test_a_memory_replica_has_no_peer_route(gate, kube):
    m = gate("--usage-store", "memory", "--namespace", NS, "--identity", "m")
    started(m, kube)
    status, text = post_peer(m, b"{}", "0" * 64)
    assert status == 404, (status, text)
