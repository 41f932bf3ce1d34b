"""POST /validate-policy (issue #27 item 5): the policy ConfigMap is checked
where it is applied, as `gpugate check` checks a file -- every error with
its line, warnings as admission warnings -- and nothing is loaded.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import make_review

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = (ROOT / "policy" / "examples" / "gpu-cluster.yaml").read_text()


def configmap(text: str | None, key: str = "policy.yaml") -> dict:
    cm = {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": "gpugate-policy", "namespace": "gpugate"}}
    if text is not None:
        cm["data"] = {key: text}
    return cm


def review(client, obj, **kw):
    rv = make_review(obj, kind="ConfigMap", **kw)
    r = client.post("/validate-policy", rv)
    assert r.status == 200, r
    out = r.json()
    assert out["apiVersion"] == "admission.k8s.io/v1" and out["kind"] == "AdmissionReview"
    assert out["response"]["uid"] == rv["request"]["uid"]
    assert "patch" not in out["response"]
    return out["response"]


@pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
def test_the_shipped_policy_is_admitted(client, operation):
    r = review(client, configmap(EXAMPLE), operation=operation,
               old=configmap(EXAMPLE) if operation == "UPDATE" else None)
    assert r["allowed"] is True, r
    assert "warnings" not in r or r["warnings"] == [
        w for w in r["warnings"] if w.startswith("gpugate: policy.yaml:")], r


def test_a_broken_policy_is_refused_with_every_error_and_its_line(client):
    bad = EXAMPLE.replace("gpusPerNode: 8\n", "gpusPerNode: 0\n", 1).replace(
        "sharing: mig\n", "sharing: halves\n", 1)
    r = review(client, configmap(bad), operation="UPDATE", old=configmap(EXAMPLE))
    assert r["allowed"] is False
    assert r["status"]["code"] == 422
    msg = r["status"]["message"]
    # The shape is checked first: the enum error alone, at its line.
    line = bad[:bad.index("sharing: halves")].count("\n") + 1
    assert msg == ("gpugate: the policy in ConfigMap gpugate/gpugate-policy is invalid "
                   "(1 error; the running gpugate keeps its current policy; check it "
                   f"with `gpugate check FILE`): policy.yaml:{line}: flavors[1].sharing: "
                   '"halves" is not one of: exclusive, mig, time-slicing, mps'), msg


def test_every_semantic_error_is_listed(client):
    bad = EXAMPLE.replace("gpusPerNode: 8\n", "gpusPerNode: 0\n", 1).replace(
        "tolerations:\n      - {key: nvidia.com/gpu,",
        "tolerations:\n      - {key: node.kubernetes.io/unschedulable,", 1)
    r = review(client, configmap(bad))
    assert r["allowed"] is False
    msg = r["status"]["message"]
    assert "(2 errors;" in msg, msg
    assert msg.count("; policy.yaml:") == 1 and msg.count(": policy.yaml:") == 1, msg
    assert 'flavor "h100-80gb": gpusPerNode 0 must be between 1 and 1024' in msg
    assert 'toleration key "node.kubernetes.io/unschedulable" is a taint Kubernetes' in msg


def test_warnings_reach_kubectl(client):
    text = EXAMPLE.replace("classLabel: gpugate.io/class", "classLabel: example.com/class")
    r = review(client, configmap(text))
    assert r["allowed"] is True, r
    assert any(w.startswith("gpugate: policy.yaml:") and "example.com/class" in w
               and "webhook.extraLabelKeys" in w for w in r["warnings"]), r


@pytest.mark.parametrize("cm,why", [
    (configmap(None), "has no key policy.yaml"),
    (configmap(EXAMPLE, key="policy.yml"), "has no key policy.yaml"),
])
def test_a_configmap_without_the_key_is_refused(client, cm, why):
    r = review(client, cm)
    assert r["allowed"] is False and why in r["status"]["message"], r


def test_hostile_text_is_refused_cleanly(client):
    for text in ["", "\x00", "a: [" * 5000, "version: 1\n" + "x" * 100000,
                 "&a [*a, *a]"]:
        r = review(client, configmap(text))
        assert r["allowed"] is False, (text[:20], r)
        assert r["status"]["message"].startswith("gpugate: the policy in ConfigMap"), r


def test_a_delete_or_a_malformed_review_is_not_judged(client):
    r = review(client, None, operation="DELETE", old=configmap("garbage: ["))
    assert r["allowed"] is True
    assert client.post("/validate-policy", "{").status == 400
