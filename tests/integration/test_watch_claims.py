"""API mode and DRA: gpugate lists and watches every ResourceClaim
(/apis/resource.k8s.io/v1/resourceclaims) of the scripted fake API beside
its Pods and Jobs, and charges them; an API that does not serve
resource.k8s.io/v1 does not hold readiness back.  The example policy maps
the DeviceClass gpu.nvidia.com to h100-80gb (research: nominal 32).
"""

from __future__ import annotations

import time

import pytest

from conftest import LINE_POLICY, poll
from fakekube import api_claim, api_pod
from test_watch import TTL, WAIT, kube, srv_metrics  # noqa: F401 (kube: a fixture)

USED = 'gpugate_quota_used{tenant="research",flavor="h100-80gb"}'


@pytest.fixture
def gate(kube, fresh_server):
    def start(*extra: str):
        return fresh_server(LINE_POLICY,
                            extra_args=("--kubeconfig", str(kube.kubeconfig), *extra))
    return start


def used(srv) -> float:
    return srv_metrics(srv)[USED]


def wait_used(srv, n: float, timeout: float = WAIT) -> None:
    poll(lambda: used(srv) == n, f"{USED} == {n} (it is {used(srv)})", timeout)


def ready(srv) -> bool:
    with srv.client() as c:
        return c.get("/readyz").status == 200


def connected(srv) -> bool:
    return srv_metrics(srv)["gpugate_kube_watch_connected"] == 1


def test_claims_are_listed_watched_and_charged(gate, kube):
    kube.put("claims", api_claim("two", "research", 2),
             api_claim("web", "web", 8),  # outside every tenant
             api_claim("nic", "research", 4, device_class="nic.example.com"))
    srv = gate()
    poll(lambda: ready(srv), "/readyz 200")
    assert used(srv) == 2, "only the GPU claim of a tenant"
    lists = kube.requests("claims", watch=False)
    assert lists and "labelSelector" not in lists[0].query, "every claim: none is stamped"
    poll(lambda: connected(srv) and kube.open_watches("claims"), "the claim watch open")
    made = api_claim("p-gpu-x7k2q", "research", 3, owner_pod="p")
    kube.event("claims", "ADDED", made)
    wait_used(srv, 5)
    kube.event("claims", "DELETED", made)  # its pod is gone: the GC deleted it
    wait_used(srv, 2)
    assert 'msg="usage synced" kind=claims entries=' in srv.stderr_text()


def test_a_reserved_claim_is_the_claim_the_watch_shows(gate, kube):
    srv = gate("--reservation-ttl", str(TTL))
    poll(lambda: ready(srv) and connected(srv), "ready and connected")
    obj = api_claim("two", "research", 2)
    with srv.client() as c:
        v = c.admit("validate", obj)
        assert v.allowed, v
        assert v.warnings == [
            "gpugate: claim -> 2 x h100-80gb for tenant research (2/32 in use)"]
        lost = c.admit("validate", api_claim("lost", "research", 4))
        assert lost.allowed, lost
    assert used(srv) == 6
    kube.event("claims", "ADDED", obj)
    # The one that shows stays; the one that never does expires.
    wait_used(srv, 2, timeout=TTL + WAIT)
    time.sleep(TTL + 1)
    assert used(srv) == 2


def test_an_api_without_resource_claims_is_ready(gate, kube):
    kube.serve("claims", False)
    srv = gate()
    poll(lambda: ready(srv), "/readyz 200 without resource.k8s.io/v1")
    poll(lambda: connected(srv), "connected: no claims to miss")
    assert srv_metrics(srv)["gpugate_kube_synced"] == 1
    log = srv.stderr_text()
    assert log.count('msg="not served" kind=claims '
                     'path=/apis/resource.k8s.io/v1/resourceclaims retry_s=300') == 1, log
    assert "kind=claims status=404" not in log, "a 404 here is not a failure"
    assert not kube.requests("claims", watch=True), "nothing to watch"
    # Admission goes on: a claim is still judged and reserved at /validate.
    with srv.client() as c:
        v = c.admit("validate", api_claim("two", "research", 2))
    assert v.allowed, v
    assert used(srv) == 2


def test_the_schedulers_claim_rides_on_its_pod(gate, kube):
    """A pod of 2 H100 that the kube-scheduler serves through DRA (a
    DeviceClass with extendedResourceName: nvidia.com/gpu) is charged 2,
    not 2 for the pod and 2 for the claim the scheduler makes for it
    (docs/quota.md, "What each door costs")."""
    pod = api_pod("p", "research", 2)
    uid = pod["metadata"]["uid"]
    kube.put("pods", pod)
    srv = gate()
    poll(lambda: ready(srv) and connected(srv), "ready and connected")
    assert used(srv) == 2
    claim = api_claim("p-extended-resources-k8x2z", "research", 2, owner_pod="p",
                      owner_pod_uid=uid, extended=True)
    with srv.client() as c:
        v = c.admit("validate", claim)
        assert v.allowed, v
        assert v.warnings == [
            "gpugate: claim -> 2 x h100-80gb for tenant research (held by pod p)"
        ], v.warnings
    kube.event("claims", "ADDED", claim)
    time.sleep(1)
    assert used(srv) == 2, "charged once"
    # The same claim without the scheduler's annotation is a claim of its
    # own: a tenant who forges the owner buys nothing.
    forged = api_claim("forged", "research", 3, owner_pod="p", owner_pod_uid=uid)
    kube.event("claims", "ADDED", forged)
    wait_used(srv, 5)
    kube.event("claims", "DELETED", forged)
    kube.event("pods", "DELETED", pod)
    wait_used(srv, 2)  # the claim holds its devices until it is deleted
    kube.event("claims", "DELETED", claim)
    wait_used(srv, 0)
