"""--usage-store memory with the API (#26 item 7): a replica's ledger is its
own, so only the holder of Lease gpugate-memory decides quota, and none
while replicas of the shared store hold gpugate-leader.  Two replicas of a
hand-written Deployment no longer hand out the same last GPUs silently."""

from __future__ import annotations

from conftest import metrics, poll
from test_watch import admit, gate, kube, started  # noqa: F401

NS = "gpugate"


def memory(gate, name: str):
    return gate("--usage-store", "memory", "--namespace", NS, "--identity", name)


def refused(reason: str) -> str:
    return (f'gpugate: cannot reserve quota for tenant "strict" now ({reason}); nothing '
            f"was admitted: retry in a moment")


def holder(kube, name: str) -> str | None:
    lease = kube.object("leases", NS, name)
    return ((lease or {}).get("spec") or {}).get("holderIdentity")


def test_one_memory_replica_decides_quota_the_other_refuses(gate, kube):
    a = memory(gate, "a")
    started(a, kube)
    poll(lambda: holder(kube, "gpugate-memory") == "a", "a to hold gpugate-memory")
    b = memory(gate, "b")
    started(b, kube)
    assert admit(a, "p1", 4).allowed
    r = admit(b, "p2", 4)
    assert not r.allowed
    assert r.message == refused("replica a holds Lease gpugate/gpugate-memory: with "
                                "--usage-store memory one replica decides quota"), r.message
    assert 'msg="quota decisions refused" usage_store=memory' in b.stderr_text()
    # The same gauge as --usage-store leader's: who decides quota now.
    with a.client() as x:
        assert metrics(x)["gpugate_quota_leader"] == 1
    with b.client() as x:
        assert metrics(x)["gpugate_quota_leader"] == 0
    # What holds no quota is still b's to admit.
    with b.client() as c:
        m = c.admit("validate", {"apiVersion": "v1", "kind": "Pod",
                                 "metadata": {"name": "web", "namespace": "strict",
                                              "uid": "uid-web"},
                                 "spec": {"containers": [{"name": "c", "image": "x"}]}})
        assert m.allowed, m
    # a stops (and releases the Lease): b takes over within a try.
    a.stop_and_check()
    poll(lambda: admit(b, "p3", 1).allowed, "b to decide quota once a is gone", 10)
    assert holder(kube, "gpugate-memory") == "b"
    assert 'msg="quota decisions on" usage_store=memory' in b.stderr_text()


def test_a_memory_replica_refuses_quota_beside_shared_replicas(gate, kube):
    s = gate("--usage-store", "shared", "--namespace", NS, "--identity", "s")
    started(s, kube)
    poll(lambda: holder(kube, "gpugate-leader") == "s", "s to lead")
    m = memory(gate, "m")
    started(m, kube)
    poll(lambda: not admit(m, "p1", 1).allowed, "m to see s")
    r = admit(m, "p2", 1)
    assert r.message == refused("replica s of --usage-store shared holds Lease "
                                "gpugate/gpugate-leader, and this one keeps usage in "
                                "memory"), r.message
    assert admit(s, "p3", 1).allowed
    assert holder(kube, "gpugate-leader") == "s", "m only watches the shared Lease"
