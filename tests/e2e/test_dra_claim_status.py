"""Who may write a ResourceClaim's allocation, and what gpugate charges a
claim once the scheduler has allocated it (docs/design/dra.md, "Step 5b"),
against the real kube-apiserver and kube-scheduler v1.37.2 on the KWOK
fleet's DRA nodes (fixture `dra_fleet`: h100-80gb-dra-0..5, a
ResourceSlice of 8 devices each, DeviceClass gpu.nvidia.com, which the
example policy maps to h100-80gb; research: nominal 32, claims do not
borrow).

gpugate charges a claim its spec from creation until deletion, allocated
or not (Kubernetes ResourceQuota's rule): a claim of firstAvailable
[big: 4, small: 1] holds 4 even when the scheduler gives it `small`,
because the resourceclaim controller removes an allocation once the
claim's last pod is gone, and the scheduler may then give the same claim
`big` for its next pod without asking anyone.  As research's tenant (a
ServiceAccount bound to the built-in edit role, tenant_kubectl):

a. a claim created with status.allocation filled in: the apiserver stores
   no status (the create strategy drops it), gpugate charges the spec;
b. a patch of resourceclaims/status: forbidden (edit grants no status);
c. an update of the claim's main resource carrying a status: the status
   stays as it was (the update strategy keeps the old one);
d. the real scheduler gives a firstAvailable claim `small` on a node with
   2 free devices: gpugate still charges 4, so nothing is admitted in the
   3 it did not get; its pod gone, the allocation goes, and the claim's
   next pod (on a node with room) gets `big`, 4 devices: still within
   what gpugate counted all along.

After each: what research's claims hold (their results once allocated,
else their spec) never exceeds what gpugate counts, which is their spec
summed, within the nominal 32.
"""

from __future__ import annotations

import json
import re

from test_dra_doors import FLAVOR, dra_clean, holds  # noqa: F401 (dra_clean: a fixture)
from test_integrity import created, gpugate_denial

from gpugate_e2e import (DRA_CLASS, DRA_DRIVER, GPU_TOLERATION, allocated_devices,
                         container, pod, wait_until)

NS = "research"
NOMINAL = 32
NODE = "h100-80gb-dra-0"
HOSTNAME = "kubernetes.io/hostname"


def fa_claim(name: str) -> dict:
    """firstAvailable: 4 devices ("big"), else 1 ("small")."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"devices": {"requests": [{"name": "gpus", "firstAvailable": [
                {"name": "big", "deviceClassName": DRA_CLASS, "count": 4},
                {"name": "small", "deviceClassName": DRA_CLASS, "count": 1}]}]}}}


def exact_claim(name: str, count: int) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": DRA_CLASS, "allocationMode": "ExactCount",
                "count": count}}]}}}


def forged_allocation(devices: int = 1, request: str = "gpus/small") -> dict:
    """status.allocation as the scheduler would write it."""
    return {"allocation": {
        "devices": {"results": [{"request": request, "driver": DRA_DRIVER, "pool": NODE,
                                 "device": f"gpu-{i}"} for i in range(devices)]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{
            "key": "metadata.name", "operator": "In", "values": [NODE]}]}]}}}


def claim_pod(name: str, claim: str) -> dict:
    """A pod without a class pinned to NODE, using CLAIM."""
    return pod(name, NS, containers=[container(resources={"claims": [{"name": "gpu"}]})],
               resourceClaims=[{"name": "gpu", "resourceClaimName": claim}],
               tolerations=[GPU_TOLERATION], nodeSelector={HOSTNAME: NODE})


def spec_units(claim: dict) -> int:
    """What gpugate charges a claim of DRA_CLASS before allocation."""
    units = 0
    for r in claim["spec"]["devices"]["requests"]:
        if "exactly" in r:
            units += r["exactly"].get("count", 1)
        else:
            units += max(s.get("count", 1) for s in r["firstAvailable"])
    return units


def held_by_allocation(kubectl) -> dict[str, int]:
    """research's claims: the devices each holds, its results once
    allocated, else its spec."""
    items = kubectl("get", "resourceclaims", "-n", NS, "-o", "json").json()["items"]
    out = {}
    for c in items:
        if (c.get("status") or {}).get("allocation"):
            out[c["metadata"]["name"]] = min(len(allocated_devices(c)), spec_units(c))
        else:
            out[c["metadata"]["name"]] = spec_units(c)
    return out


def charged(kubectl) -> dict[str, int]:
    """research's claims: what gpugate charges each, its spec."""
    items = kubectl("get", "resourceclaims", "-n", NS, "-o", "json").json()["items"]
    return {c["metadata"]["name"]: spec_units(c) for c in items}


def agrees(kubectl, example) -> int:
    """gpugate counts the claims' specs; what they hold by allocation is
    never more, and the count is within the nominal quota; the count."""
    held, count = held_by_allocation(kubectl), sum(charged(kubectl).values())
    holds(example, NS, count)
    assert sum(held.values()) <= count <= NOMINAL, (held, count)
    return count


def over(requested: int, in_use: int) -> str:
    return (f'gpugate: tenant "research" is over its {FLAVOR} quota: requested {requested} '
            f"(claim, device class {DRA_CLASS}), in use {in_use} of nominal {NOMINAL}, "
            'claims do not borrow from cohort "lab"')


# ---------------------------------------------------------------------------
# a-c. the tenant cannot write an allocation


def test_a_a_tenants_claim_is_created_without_the_status_it_carries(
        kubectl, tenant_kubectl, example, dra_clean, dra_fleet):
    dra_clean(NS)
    t = tenant_kubectl(NS)
    obj = fa_claim("self-allocated")
    obj["status"] = forged_allocation()
    r = t.create(obj, "-o", "json")
    assert r.rc == 0, r
    stored = kubectl.get("resourceclaim", "self-allocated", NS)
    assert not (stored.get("status") or {}).get("allocation"), stored
    assert stored.get("status") in (None, {}), stored["status"]
    holds(example, NS, 4)
    assert agrees(kubectl, example) == 4


def test_b_a_tenant_may_not_write_a_claims_status(kubectl, tenant_kubectl, example,
                                                   dra_clean, dra_fleet):
    dra_clean(NS)
    t = tenant_kubectl(NS)
    created(t.create(fa_claim("mine")), "mine", "resourceclaim.resource.k8s.io")
    holds(example, NS, 4)
    for verb in ("merge", "json"):
        patch = (json.dumps({"status": forged_allocation()}) if verb == "merge" else
                 json.dumps([{"op": "add", "path": "/status/allocation",
                              "value": forged_allocation()["allocation"]}]))
        r = t("patch", "resourceclaim", "mine", "-n", NS, "--subresource=status",
              f"--type={verb}", "-p", patch)
        assert r.rc != 0, r
        assert re.search(r'Error from server \(Forbidden\): resourceclaims.resource.k8s.io '
                         r'"mine" is forbidden: User "system:serviceaccount:research:tenant" '
                         r'cannot patch resource "resourceclaims/status" in API group '
                         r'"resource.k8s.io" in the namespace "research"', r.err), r.err
    # (kubectl auth can-i reads "resourceclaims/status" as a claim named
    # "status": the subresource is a flag.)
    for sub in ("status", "binding"):
        r = t("auth", "can-i", "update", "resourceclaims", f"--subresource={sub}", "-n", NS)
        assert (r.rc, r.out.strip()) == (1, "no"), r
    r = t("auth", "can-i", "update", "resourceclaims", "-n", NS)
    assert (r.rc, r.out.strip()) == (0, "yes"), r
    assert allocated_devices(kubectl.get("resourceclaim", "mine", NS)) == []
    assert agrees(kubectl, example) == 4


def test_c_an_update_of_the_claim_keeps_its_status(kubectl, tenant_kubectl, example,
                                                    dra_clean, dra_fleet):
    dra_clean(NS)
    t = tenant_kubectl(NS)
    created(t.create(fa_claim("mine")), "mine", "resourceclaim.resource.k8s.io")
    holds(example, NS, 4)
    obj = t.get("resourceclaim", "mine", NS)
    obj["status"] = forged_allocation()
    r = t("replace", "-f", "-", "-o", "json", input=json.dumps(obj))
    assert r.rc == 0, r
    assert not (r.json().get("status") or {}).get("allocation"), r.out
    stored = kubectl.get("resourceclaim", "mine", NS)
    assert not (stored.get("status") or {}).get("allocation"), stored
    # An apply with a status: the same.
    obj = fa_claim("mine")
    obj["status"] = forged_allocation()
    r = t.apply(obj, "--server-side", "--force-conflicts")
    assert r.rc == 0, r
    assert allocated_devices(kubectl.get("resourceclaim", "mine", NS)) == []
    assert agrees(kubectl, example) == 4


# ---------------------------------------------------------------------------
# d. the scheduler allocates the small entry, then the big one


def test_d_a_claim_holds_its_spec_whatever_the_scheduler_gives_it(
        kubectl, tenant_kubectl, example, dra_clean, dra_fleet):
    dra_clean(NS)
    t = tenant_kubectl(NS)

    # NODE's 8 devices: 6 taken by a pod's claim, 2 left.
    created(t.create(exact_claim("six", 6)), "six", "resourceclaim.resource.k8s.io")
    created(t.create(claim_pod("six-pod", "six")), "six-pod")
    wait_until("six allocated 6 devices on NODE",
               lambda: len(allocated_devices(kubectl.get("resourceclaim", "six", NS))) == 6,
               60, 0.25)
    holds(example, NS, 6)

    # The firstAvailable claim: 4 at the door; then fillers to 30 of 32.
    created(t.create(fa_claim("fa")), "fa", "resourceclaim.resource.k8s.io")
    holds(example, NS, 10)
    for name, n in (("fill-a", 8), ("fill-b", 8), ("fill-c", 4)):
        created(t.create(exact_claim(name, n)), name, "resourceclaim.resource.k8s.io")
    holds(example, NS, 30)
    assert gpugate_denial(t.create(exact_claim("three", 3))) == over(3, 30)

    # Its pod on NODE: "big" (4) cannot fit in 2, the scheduler gives
    # "small".  gpugate still counts 4: the 3 it did not get stay out of
    # reach.
    created(t.create(claim_pod("fa-pod", "fa")), "fa-pod")
    fa = wait_until("fa allocated", lambda: allocated_devices(
        kubectl.get("resourceclaim", "fa", NS)), 60, 0.25)
    assert [(d["request"], d["driver"], d["pool"]) for d in fa] == [
        ("gpus/small", DRA_DRIVER, NODE)], fa
    wait_until("fa-pod running on NODE", lambda: (
        kubectl.get("pod", "fa-pod", NS).get("status", {}).get("phase") == "Running"), 60)
    assert held_by_allocation(kubectl)["fa"] == 1
    assert agrees(kubectl, example) == 30
    assert gpugate_denial(t.create(exact_claim("three", 3))) == over(3, 30)

    # Its pod gone, the resourceclaim controller removes the allocation;
    # the claim's next pod, on a node with room, gets "big": 4 devices,
    # what gpugate counted all along.
    r = kubectl("delete", "pod", "fa-pod", "-n", NS, "--wait=true", timeout=120)
    assert r.rc == 0, r
    wait_until("fa deallocated", lambda: not (
        kubectl.get("resourceclaim", "fa", NS).get("status") or {}).get("allocation"), 60)
    again = claim_pod("fa-pod-2", "fa")
    again["spec"]["nodeSelector"] = {HOSTNAME: "h100-80gb-dra-1"}
    created(t.create(again), "fa-pod-2")
    fa = wait_until("fa allocated again", lambda: allocated_devices(
        kubectl.get("resourceclaim", "fa", NS)), 60, 0.25)
    assert sorted({d["request"] for d in fa}) == ["gpus/big"] and len(fa) == 4, fa
    assert held_by_allocation(kubectl)["fa"] == 4
    assert agrees(kubectl, example) == 30
