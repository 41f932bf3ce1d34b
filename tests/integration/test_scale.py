"""kubectl scale in API mode: the scale subresource carries no pod template,
so gpugate reads the Deployment or StatefulSet from the API
(webhook/parents.c) and judges its template with the new replicas.  The
API is the scripted fake (fakekube.py)."""

from __future__ import annotations

import pytest

from conftest import Admission, SLOW, make_review
from test_watch import kube  # noqa: F401 (a fixture: the fake API)

SCALE_KIND = {"group": "autoscaling", "version": "v1", "kind": "Scale"}


@pytest.fixture
def gate(kube, fresh_server, custom_policy):
    return fresh_server(custom_policy, extra_args=("--kubeconfig", str(kube.kubeconfig)))


def serve_deployment(kind: str = "Deployment", gpus: str = "4") -> dict:
    return {
        "apiVersion": "apps/v1", "kind": kind,
        "metadata": {"name": "serve", "namespace": "strict"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "serve"}},
                 "template": {"metadata": {"labels": {
                     "app": "serve", "gpugate.io/class": "train-small",
                     "gpugate.io/gpus": gpus}},
                     "spec": {"containers": [{"name": "m", "image": "x"}]}}},
    }


def scale(srv, resource: str, uid: str, before: int, now: int,
          namespace: str = "strict") -> Admission:
    """The review the apiserver sends /validate for `kubectl scale`."""
    def obj(n: int) -> dict:
        spec = {"replicas": n} if n else {}  # the API leaves out 0
        return {"apiVersion": "autoscaling/v1", "kind": "Scale",
                "metadata": {"name": "serve", "namespace": namespace, "uid": uid},
                "spec": spec, "status": {"replicas": before}}
    rv = make_review(obj(now), old=obj(before), kind="Deployment", operation="UPDATE",
                     namespace=namespace, sub_resource="scale")
    req = rv["request"]
    req["kind"] = req["requestKind"] = SCALE_KIND
    req["resource"]["resource"] = req["requestResource"]["resource"] = resource
    with srv.client(timeout=10.0 * SLOW) as c:
        return Admission(rv, c.review("validate", rv), "validate")


def reads(kube, resource: str) -> int:
    """The requests gpugate made for the object scaled (GETs: it writes
    none); others, such as its Lease's, do not count."""
    path = f"/apis/apps/v1/namespaces/strict/{resource}/serve"
    return sum(1 for q in kube.requests() if q.path == path)


def test_a_scale_beyond_the_ceiling_is_denied_with_the_numbers(gate, kube):
    d = kube.create("deployments", "strict", serve_deployment())
    a = scale(gate, "deployments", d["metadata"]["uid"], 1, 3)
    assert not a.allowed
    assert a.code == 403
    assert a.message == ('gpugate: Deployment "serve" can never run all its replicas: '
                         'needs 12 h100-80gb (3 replicas x 4), tenant "strict" may '
                         "hold at most 8 (nominal 8)")
    assert reads(kube, "deployments") == 1

    a = scale(gate, "deployments", d["metadata"]["uid"], 1, 2)
    assert a.allowed, a.message
    assert a.warnings == ["gpugate: train-small -> 2 pods x 4 x h100-80gb for tenant "
                          "strict (each pod is charged when it is created)"]
    # A scale down, or to 0, is not read at all.
    for before, now in ((3, 2), (2, 0)):
        a = scale(gate, "deployments", d["metadata"]["uid"], before, now)
        assert a.allowed and not a.warnings
    assert reads(kube, "deployments") == 2

    s = kube.create("statefulsets", "strict", serve_deployment("StatefulSet", "3"))
    a = scale(gate, "statefulsets", s["metadata"]["uid"], 1, 3)
    assert not a.allowed
    assert a.message.startswith('gpugate: StatefulSet "serve" can never run all its '
                                "replicas: needs 9 h100-80gb"), a.message


def test_an_api_that_cannot_answer_lets_the_scale_through_with_a_warning(gate, kube):
    d = kube.create("deployments", "strict", serve_deployment())
    uid = d["metadata"]["uid"]
    path = "/apis/apps/v1/namespaces/strict/deployments/serve"

    # RBAC without get on deployments.
    kube.fault(method="GET", path=path, status=403, reason="Forbidden", times=1,
               message='deployments.apps "serve" is forbidden')
    a = scale(gate, "deployments", uid, 1, 3)
    assert a.allowed
    assert a.warnings == [
        'gpugate: the scale of Deployment "serve" to 3 was not judged: GET '
        f'{path}: 403 Forbidden: deployments.apps "serve" is forbidden; its pods '
        "still meet the quota one by one"], a.warnings

    # An apiserver slower than the read's bound: the review is answered in
    # time all the same.
    kube.fault(method="GET", path=path, delay=3.0, times=1)
    a = scale(gate, "deployments", uid, 1, 3)
    assert a.allowed
    assert "was not judged" in a.warnings[0] and "2000 ms" in a.warnings[0], a.warnings

    # Gone (deleted since): nothing to judge.
    a = scale(gate, "deployments", uid, 1, 3, namespace="elsewhere")
    assert a.allowed and "404" in a.warnings[0], a.warnings

    # And the API answers again: judged.
    a = scale(gate, "deployments", uid, 1, 3)
    assert not a.allowed
