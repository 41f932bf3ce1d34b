"""DRA ResourceClaims and ResourceClaimTemplates (resource.k8s.io/v1)
through the real server: what /validate answers, what it charges, and what
a DELETE releases (embedded mode).  The example policy maps the DeviceClass
gpu.nvidia.com to flavor h100-80gb (research: nominal 32, cohort lab); the
custom policy maps none, with rawGpuRequests: allow.

The decision's every message is asserted in tests/unit/policy/
decide_dra_test.c; here, that the pipeline (review decoding, facts, the
decision, the ledger, the response) carries them.
"""

from __future__ import annotations

import copy

from conftest import CUSTOM_POLICY, LINE_POLICY, metrics

USED = 'gpugate_quota_used{tenant="research",flavor="h100-80gb"}'


def devices(count: int, cls: str = "gpu.nvidia.com", **extra) -> dict:
    exactly = {"deviceClassName": cls, "allocationMode": "ExactCount", "count": count}
    exactly.update(extra)
    return {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}


def claim(name: str, count: int, namespace: str = "research", **kw) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace,
                         "uid": f"uid-claim-{namespace}-{name}"},
            "spec": devices(count, **kw)}


def template(name: str, count: int, namespace: str = "research", **kw) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": namespace,
                         "uid": f"uid-tmpl-{namespace}-{name}"},
            "spec": {"metadata": {"labels": {"app": "train"}}, "spec": devices(count, **kw)}}


def used(c) -> float:
    return metrics(c)[USED]


def test_a_claim_is_charged_at_validate_and_released_by_its_delete(fresh_server):
    srv = fresh_server(LINE_POLICY)
    with srv.client() as c:
        m = c.admit("mutate", claim("two", 2))
        assert m.allowed and m.patch is None and m.warnings == [], m
        assert used(c) == 0, "/mutate only peeks"
        v = c.admit("validate", claim("two", 2))
        assert v.allowed and v.patch is None, v
        assert v.warnings == [
            "gpugate: claim -> 2 x h100-80gb for tenant research (2/32 in use)"]
        assert used(c) == 2
        assert metrics(c)["gpugate_ledger_entries"] == 1
        # Asked again (a retried request): judged without its own units.
        again = c.admit("validate", claim("two", 2))
        assert again.warnings == v.warnings and used(c) == 2

        dry = c.admit("validate", claim("dry", 30), dry_run=True)
        assert dry.allowed, dry
        assert used(c) == 2, "a dry run reserves nothing"
        over = c.admit("validate", claim("big", 31))
        assert not over.allowed and over.code == 403, over
        assert over.message == (
            'gpugate: tenant "research" is over its h100-80gb quota: requested 31 '
            "(claim, device class gpu.nvidia.com), in use 2 of nominal 32, claims do "
            'not borrow from cohort "lab"')
        assert used(c) == 2

        gone = c.admit("validate", None, operation="DELETE", old=claim("two", 2))
        assert gone.allowed, gone
        assert used(c) == 0


def test_a_template_is_judged_and_charged_nothing(fresh_server):
    srv = fresh_server(LINE_POLICY)
    with srv.client() as c:
        v = c.admit("validate", template("three", 3))
        assert v.allowed and v.patch is None, v
        assert v.warnings == [
            "gpugate: claim template -> 3 x h100-80gb per claim for tenant research "
            "(each claim made from it is charged)"]
        assert used(c) == 0
        assert metrics(c)["gpugate_ledger_entries"] == 0
        # The claim the resourceclaim controller makes from it for a pod.
        made = claim("p-gpu-x7k2q", 3)
        made["metadata"]["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "uid-p",
             "controller": True, "blockOwnerDeletion": True}]
        v = c.admit("validate", made)
        assert v.warnings == [
            "gpugate: claim -> 3 x h100-80gb for tenant research (3/32 in use)"], v
        assert used(c) == 3

        never = c.admit("validate", template("huge", 41))
        assert not never.allowed, never
        assert never.message == (
            "gpugate: the claims of this template can never be admitted: each needs "
            '41 h100-80gb, tenant "research" may hold at most 32 (nominal 32; claims '
            "do not borrow)")


def test_rules_before_quota(client):
    cases = [
        (claim("mig", 1, cls="mig.nvidia.com"),
         'gpugate: this claim asks for devices of class "mig.nvidia.com", which maps '
         'to no GPU flavor; use a device class tenant "research" may use: '
         "gpu.nvidia.com"),
        (template("mig", 1, cls="mig.nvidia.com"),
         'gpugate: this claim template asks for devices of class "mig.nvidia.com", '
         'which maps to no GPU flavor; use a device class tenant "research" may use: '
         "gpu.nvidia.com"),
        (claim("web", 1, namespace="web"),
         'gpugate: namespace "web" belongs to no tenant, so it cannot use device '
         'class "gpu.nvidia.com"; ask the platform team to add it to a tenant in the '
         "gpugate policy"),
        (claim("all", 1, allocationMode="All"),
         'gpugate: request "gpu" asks for all devices of class "gpu.nvidia.com" '
         "(allocationMode All), which cannot be counted against quota; ask for a "
         "number of devices (allocationMode ExactCount with a count)"),
    ]
    cases[3][0]["spec"]["devices"]["requests"][0]["exactly"].pop("count")
    for obj, message in cases:
        r = client.admit("validate", obj)
        assert not r.allowed and r.code == 403, (obj, r)
        assert r.message == message, r
    # Devices of no GPU class are none of gpugate's business, tenant or not.
    nic = claim("nic", 4, namespace="web", cls="nic.example.com")
    r = client.admit("validate", nic)
    assert r.allowed and r.warnings == [] and r.patch is None, r


def test_raw_claims_allowed_are_not_charged(custom_server):
    """CUSTOM_POLICY maps no device class and allows raw requests: a claim
    of gpu.nvidia.com (a GPU class by default) is admitted, uncharged."""
    assert "deviceClassNames" not in CUSTOM_POLICY
    with custom_server.client() as c:
        before = metrics(c)['gpugate_quota_used{tenant="strict",flavor="h100-80gb"}']
        r = c.admit("validate", claim("raw", 2, namespace="strict"))
        assert r.allowed and r.warnings == [] and r.patch is None, r
        after = metrics(c)['gpugate_quota_used{tenant="strict",flavor="h100-80gb"}']
        assert after == before


def test_malformed_claims_are_bad_requests(client):
    bad = claim("bad", 1)
    bad["spec"]["devices"]["requests"][0]["exactly"]["count"] = 0
    r = client.admit("validate", bad)
    assert not r.allowed and r.code == 400, r
    assert r.message == ("gpugate: malformed ResourceClaim: spec.devices.requests[0]."
                         "exactly.count is not a whole number of at least 1")
    beta = copy.deepcopy(claim("beta", 1))
    beta["apiVersion"] = "resource.k8s.io/v1beta2"
    r = client.admit("validate", beta)
    assert not r.allowed and r.code == 400, r
    assert r.message == ("gpugate: request.object is not a ResourceClaim "
                         "(request.kind says ResourceClaim)")
    tmpl = template("bad", 1)
    tmpl["spec"]["spec"] = []
    r = client.admit("validate", tmpl)
    assert not r.allowed and r.code == 400, r
    assert r.message == ("gpugate: malformed ResourceClaimTemplate: spec.spec is not "
                         "an object")
