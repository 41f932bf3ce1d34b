"""Issue #33 step 1, "every existing DRA door counted once", on GPUs the
real kube-scheduler serves through Dynamic Resource Allocation (fixture
`dra_fleet`: six KWOK H100 nodes h100-80gb-dra-0..5 with no nvidia.com/gpu
allocatable, a ResourceSlice of 8 devices each, DeviceClass gpu.nvidia.com
with extendedResourceName nvidia.com/gpu; docs/design/dra.md F3 and D2).

What the scheduler does with a pod that asks for nvidia.com/gpu there
(recorded on v1.37.2, asserted in test_a): in PreBind it creates a
ResourceClaim as system:kube-scheduler, `<pod>-extended-resources-xxxxx`,
annotation resource.kubernetes.io/extended-resource-claim: "true", a
controller ownerReference to the Pod, one ExactCount request a container
and resource (`container-<i>-request-<j>`, count from the container's
requests); adds the finalizer resource.kubernetes.io/delete-protection;
writes status.allocation (the devices, a nodeSelector on the node) and
status.reservedFor [the pod]; writes the pod's
status.extendedResourceClaimStatus {requestMappings, resourceClaimName};
binds the pod.  KWOK runs it.  When the pod is gone the resourceclaim
controller deletes the claim.

The rule under test (D2, the ride): such a claim holds max(0, its devices -
its pod's units) when it is that pod's claim (the pod's
extendedResourceClaimStatus names it or, before that is written, it is the
pod's earliest such claim), the pod does not name it in spec.resourceClaims,
and its reservedFor names no other consumer; any other claim holds all its
devices.  And a container's deviceclass.resource.kubernetes.io/<class>,
class mapped by a flavor, is a GPU request of that flavor charged at the
door from its requests: refused as a raw request under rawGpuRequests:
reject (research), charged under allow (rawgpu, the "raw" gpugate).

The attacks run as research's tenant (a ServiceAccount bound to the
built-in edit role, which may create ResourceClaims with any annotation
and ownerReference).  Note what the scheduler does with a claim forged for
a pod it has yet to schedule (test_d_forged_claim_of_a_gated_pod): it takes
it for the pod's own (its findExtendedResourceClaim looks at the annotation
and the controller ownerReference only), finds it "from a prior scheduling
cycle" and deletes it (PostFilter), then makes its own.
"""

from __future__ import annotations

import json
import re
import time

import pytest
from test_integrity import created, gpugate_denial
from test_kubectl_admission import warning

import gpugate_e2e as e2e
from gpugate_e2e import (DEVICECLASS_PREFIX, DRA_CLASS, EXTENDED_RESOURCE_CLAIM, GPU_TOLERATION,
                         RAW_H100, allocated_devices, container, pod, special_claims,
                         wait_until)

NS = "research"          # example policy: h100-80gb nominal 32, cohort lab, reject
RAW_NS = "rawgpu"        # RAW_POLICY: h100-80gb nominal 8, no cohort, allow
FLAVOR = "h100-80gb"
DOOR = DEVICECLASS_PREFIX + DRA_CLASS   # deviceclass.resource.kubernetes.io/gpu.nvidia.com
HOLD = "example.com/hold"               # a scheduling gate of the user's
FINALIZER = "resource.kubernetes.io/delete-protection"
# research may hold 32 + min(borrowingLimit 16, what product can ever lend: 8)
# (docs/quota.md, "Worked example"), product using no H100.
RESEARCH_CEILING = 40


# ---------------------------------------------------------------------------
# helpers


def door_pod(name: str, ns: str, requests: int | None, limits: int | None = None,
             gated: bool = False, **spec) -> dict:
    """A pod without a class asking for DRA GPUs by the DeviceClass's
    implicit extended resource name."""
    res: dict = {}
    if requests is not None:
        res["requests"] = {DOOR: str(requests)}
    if limits is not None:
        res["limits"] = {DOOR: str(limits)}
    if gated:
        spec["schedulingGates"] = [{"name": HOLD}]
    return pod(name, ns, containers=[container(resources=res)], **spec)


def class_pod(name: str, gpus: int, gated: bool = False, **spec) -> dict:
    if gated:
        spec["schedulingGates"] = [{"name": HOLD}]
    return pod(name, NS, "train-small", gpus, **spec)


def ungate(k, ns: str, name: str) -> None:
    r = k("patch", "pod", name, "-n", ns, "--type=json",
          "-p", json.dumps([{"op": "remove", "path": "/spec/schedulingGates"}]))
    assert (r.rc, r.out) == (0, f"pod/{name} patched\n"), r


def forged_claim(name: str, owner: dict, count: int) -> dict:
    """A claim as the scheduler makes its own, written by someone else."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": owner["metadata"]["namespace"],
                         "annotations": {EXTENDED_RESOURCE_CLAIM: "true"},
                         "ownerReferences": [{
                             "apiVersion": "v1", "kind": "Pod",
                             "name": owner["metadata"]["name"],
                             "uid": owner["metadata"]["uid"], "controller": True}]},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": DRA_CLASS, "allocationMode": "ExactCount",
                "count": count}}]}}}


def events(k, ns: str, name: str | None = None, uids: set[str] | None = None) -> list[str]:
    """The events of NS (of objects named NAME, of objects of these UIDS:
    events outlive their objects, and names come back from test to test)."""
    args = ["get", "events", "-n", ns, "-o", "json"]
    if name:
        args += ["--field-selector", f"involvedObject.name={name}"]
    return [f"{e['involvedObject']['kind']}/{e['involvedObject']['name']} {e['reason']}: "
            f"{e['message']}" for e in k(*args).json()["items"]
            if uids is None or e["involvedObject"].get("uid") in uids]


def refusals(k, ns: str, uids: set[str]) -> list[str]:
    """Events of the objects of these UIDS in NS that carry a webhook's
    refusal (the scheduler's FailedScheduling when gpugate refused the
    claim it made for the pod)."""
    return [e for e in events(k, ns, uids=uids) if "denied the request" in e]


def running_with_claim(k, ns: str, name: str, nodes: list[str],
                       timeout: float = 60.0, nudge=None) -> tuple[dict, dict]:
    """Waits until pod NAME runs on one of NODES with its scheduler-made
    claim allocated and reserved for it, and the pod's status names that
    claim; (pod, claim).  Fails at once, with the refusal, when a webhook
    refused what the scheduler did for the pod (gpugate refusing its claim
    leaves the pod Pending for ever).  NUDGE: called every 2 s meanwhile
    (DraFleet.requeue)."""
    last: dict = {}
    nudged = [time.monotonic()]

    def ok():
        if nudge is not None and time.monotonic() - nudged[0] >= 2:
            nudge()
            nudged[0] = time.monotonic()
        p = k.get("pod", name, ns)
        last["uid"] = p["metadata"]["uid"]
        bad = refusals(k, ns, {last["uid"]})
        assert not bad, f"a webhook refused what the scheduler did for {ns}/{name}: {bad}"
        claims = special_claims(k, ns, name)
        last.update(status=p.get("status"), node=p["spec"].get("nodeName"),
                    claims=[(c["metadata"]["name"], c.get("status")) for c in claims])
        if (p.get("status") or {}).get("phase") != "Running" or p["spec"].get("nodeName") \
                not in nodes or len(claims) != 1:
            return None
        c = claims[0]
        status = p["status"].get("extendedResourceClaimStatus") or {}
        reserved = [r.get("uid") for r in (c.get("status") or {}).get("reservedFor") or []]
        if allocated_devices(c) and reserved == [p["metadata"]["uid"]] and \
                status.get("resourceClaimName") == c["metadata"]["name"]:
            return p, c
        return None
    try:
        return wait_until(f"{ns}/{name} Running on a DRA node with its claim allocated",
                          ok, timeout, 0.25)
    except AssertionError as e:
        raise AssertionError(f"{e}; last seen: {json.dumps(last)}; events of {name}: "
                             f"{events(k, ns, uids={last.get('uid')})}") from None


def holds(gate, tenant: str, want: int, seconds: float = 3.0) -> None:
    """gpugate_quota_used{tenant, h100-80gb} is WANT at every sample (every
    0.25 s) for SECONDS: once it got there, nothing adds a second charge."""
    gate.wait_used(tenant, want, FLAVOR, timeout=15)
    samples = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        samples.append(gate.quota_used(tenant, FLAVOR))
        time.sleep(0.25)
    assert set(samples) == {want}, (f"gpugate_quota_used{{tenant={tenant}}} should stay "
                                    f"{want} for {seconds:.0f}s, samples: {samples}")


def settled(gate, tenant: str, seconds: float = 2.0, timeout: float = 20.0) -> int:
    """Usage once it has not changed for SECONDS."""
    last = [gate.quota_used(tenant, FLAVOR), time.monotonic()]

    def still():
        u = gate.quota_used(tenant, FLAVOR)
        if u != last[0]:
            last[:] = [u, time.monotonic()]
        return time.monotonic() - last[1] >= seconds
    wait_until(f"gpugate_quota_used{{tenant={tenant}}} to settle", still, timeout, 0.25)
    return last[0]


def gone(k, ns: str, name: str, timeout: float = 60.0) -> None:
    """Pod NAME and the claims made for it are gone."""
    wait_until(f"{ns}/{name} and its claims gone",
               lambda: k("get", "pod", name, "-n", ns).rc != 0
               and not special_claims(k, ns, name), timeout, 0.25)


def delete_claims(k, *namespaces: str) -> None:
    for ns in namespaces:
        k("delete", "resourceclaims", "--all", "-n", ns, "--wait=false", timeout=60)


@pytest.fixture
def dra_clean(kubectl, clean):
    """dra_clean("ns", ...): clean() (the namespaces empty, their usage 0,
    emptied again after the test), and their ResourceClaims deleted before
    and after the test (a forged claim owned by no pod would hold its units
    for ever; this teardown runs before clean's, which waits for usage 0)."""
    used: list[str] = []

    def start(*namespaces: str) -> None:
        used.extend(namespaces)
        delete_claims(kubectl, *namespaces)
        clean(*namespaces)
    yield start
    delete_claims(kubectl, *used)


# ---------------------------------------------------------------------------
# a. the class pod served through DRA


def test_a_class_pod_served_through_dra_is_charged_once(kubectl, example, dra_clean,
                                                        dra_fleet):
    """A train-small pod of 2 runs on a DRA node through the scheduler's
    claim: research holds 2, not 2 for the pod and 2 more for its claim."""
    dra_clean(NS)
    r = kubectl.create(class_pod("small", 2))
    created(r, "small")
    assert r.err.startswith(warning(
        "gpugate: train-small -> 2 x h100-80gb for tenant research (2/32 in use)")), r

    p, c = running_with_claim(kubectl, NS, "small", dra_fleet.nodes)
    node, uid = p["spec"]["nodeName"], p["metadata"]["uid"]
    meta = c["metadata"]
    # What the scheduler made (docs/design/dra.md F3), as recorded.
    assert meta["generateName"] == "small-extended-resources-", meta
    assert re.fullmatch(r"small-extended-resources-[a-z0-9]{5}", meta["name"]), meta
    assert meta["annotations"] == {EXTENDED_RESOURCE_CLAIM: "true"}, meta
    assert meta["ownerReferences"] == [{"apiVersion": "v1", "kind": "Pod", "name": "small",
                                        "uid": uid, "controller": True}], meta
    assert meta["finalizers"] == [FINALIZER], meta
    req, = c["spec"]["devices"]["requests"]
    assert re.fullmatch(r"container-0-request-\d+", req["name"]), req
    assert req["exactly"] == {"deviceClassName": DRA_CLASS, "allocationMode": "ExactCount",
                              "count": 2}, req
    results = allocated_devices(c)
    assert len(results) == 2 and all(
        x["driver"] == e2e.DRA_DRIVER and x["pool"] == node and x["request"] == req["name"]
        and re.fullmatch(r"gpu-[0-7]", x["device"]) for x in results), results
    assert c["status"]["allocation"]["nodeSelector"] == {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}, c
    assert c["status"]["reservedFor"] == [{"resource": "pods", "name": "small", "uid": uid}], c
    assert p["status"]["extendedResourceClaimStatus"] == {
        "requestMappings": [{"containerName": "trainer", "resourceName": "nvidia.com/gpu",
                             "requestName": req["name"]}],
        "resourceClaimName": meta["name"]}, p["status"]
    assert "resourceClaims" not in p["spec"], p["spec"]

    # The claim rides on its pod: 2 in all, while both exist.
    holds(example, NS, 2)

    r = kubectl("delete", "pod", "small", "-n", NS, "--wait=false")
    assert r.rc == 0, r
    gone(kubectl, NS, "small")
    example.wait_used(NS, 0)


# ---------------------------------------------------------------------------
# b. quota through this door


def test_b_research_fills_its_quota_through_dra(kubectl, example, dra_clean,
                                                dra_fleet):
    """train-small pods of 4 until research's ceiling (40: nominal 32 and 8
    borrowed from lab): each runs through the scheduler's claim, none of the
    claims is refused (not even those of the pods that borrow: claims do
    not borrow, a riding claim holds nothing), usage is the pods' GPUs, and
    the eleventh pod is denied with the numbers."""
    dra_clean(NS, "product-inference")
    admitted = {}
    for i in range(RESEARCH_CEILING // 4):
        name = f"fill-{i}"
        r = kubectl.create(class_pod(name, 4))
        created(r, name)
        p, _ = running_with_claim(kubectl, NS, name, dra_fleet.nodes)
        admitted[name] = p["metadata"]["uid"]
    holds(example, NS, 4 * len(admitted), 2)

    r = kubectl.create(class_pod("one-too-many", 4))
    assert gpugate_denial(r) == (
        'gpugate: tenant "research" is over its h100-80gb quota: requested 4 '
        '(class train-small), in use 40 of nominal 32, cohort "lab" can lend 0'), r
    assert 'admission webhook "mutate.gpugate.io"' in r.err, r

    # Every admitted pod's claim is still there, allocated; none refused.
    assert refusals(kubectl, NS, set(admitted.values())) == []
    claims = special_claims(kubectl, NS)
    assert sorted(e2e.claim_owner(c)["name"] for c in claims) == sorted(admitted), claims
    assert all(len(allocated_devices(c)) == 4 for c in claims), claims
    assert example.quota_used(NS) == RESEARCH_CEILING


# ---------------------------------------------------------------------------
# c. the deviceclass door


def test_c_deviceclass_door_is_a_raw_request_under_reject(kubectl, example, dra_clean,
                                                          files):
    """research (rawGpuRequests: reject): deviceclass.resource.kubernetes.io/
    gpu.nvidia.com without a class is refused like a raw nvidia.com/gpu."""
    dra_clean(NS)
    r = kubectl.apply_file(files / "pod.yaml", door_pod("by-class-name", NS, None, 2))
    msg = gpugate_denial(r)
    assert DOOR in msg and "class" in msg, msg
    assert f"asks for {DOOR} directly" in msg, msg
    assert example.quota_used(NS) == 0


def test_c_deviceclass_door_is_charged_under_allow(stack, kubectl, tenant_kubectl, dra_clean,
                                                   dra_fleet):
    """rawgpu (allow, nominal 8), as its tenant: a pod asking for 2 of the
    class's implicit resource is charged 2 at the door (held back by a
    scheduling gate: no claim yet), runs through the scheduler's claim of 2
    and still holds 2 in all; one asking requests 1, limits 2 (the apiserver
    accepts requests != limits for this name; the scheduler allocates the
    requests) adds 1; one asking 6 more is over quota."""
    raw = stack.gates["raw"]
    dra_clean(RAW_NS)
    t = tenant_kubectl(RAW_NS)
    placed = {"tolerations": [GPU_TOLERATION], "nodeSelector": dict(RAW_H100)}

    created(t.create(door_pod("two", RAW_NS, None, 2, gated=True, **placed)), "two")
    assert special_claims(kubectl, RAW_NS) == []
    raw.wait_used(RAW_NS, 2, FLAVOR, timeout=10)

    ungate(t, RAW_NS, "two")
    two, c = running_with_claim(kubectl, RAW_NS, "two", dra_fleet.nodes)
    assert c["spec"]["devices"]["requests"][0]["exactly"]["count"] == 2, c
    holds(raw, RAW_NS, 2)

    created(t.create(door_pod("one", RAW_NS, 1, 2, **placed)), "one")
    one, c = running_with_claim(kubectl, RAW_NS, "one", dra_fleet.nodes)
    assert c["spec"]["devices"]["requests"][0]["exactly"]["count"] == 1, c
    assert len(allocated_devices(c)) == 1, c
    holds(raw, RAW_NS, 3)

    msg = gpugate_denial(t.create(door_pod("six", RAW_NS, None, 6, **placed)))
    assert re.match(r'gpugate: tenant "rawgpu" is over its h100-80gb quota: requested 6\b.*'
                    r'in use 3 of nominal 8', msg), msg
    uids = {two["metadata"]["uid"], one["metadata"]["uid"]}
    assert refusals(kubectl, RAW_NS, uids) == []
    holds(raw, RAW_NS, 3, 1)

    for name in ("two", "one"):
        t("delete", "pod", name, "--wait=false").check()
        gone(kubectl, RAW_NS, name)
    raw.wait_used(RAW_NS, 0)


# ---------------------------------------------------------------------------
# d. forged claims, as the tenant (edit)


def test_d_forged_claims_pay_in_full(kubectl, tenant_kubectl, example, dra_clean,
                                     dra_fleet):
    """The tenant's own pod runs through DRA.  A claim the tenant makes look
    like its special claim (annotation, controller ownerReference to that
    running pod) asking 8 devices is charged 8: the pod's status names its
    real claim.  A claim past the quota so forged is denied.  A pod that
    names a forged claim in spec.resourceClaims gets no discount either."""
    dra_clean(NS)
    t = tenant_kubectl(NS)

    created(t.create(class_pod("mine", 2)), "mine")
    mine, _ = running_with_claim(kubectl, NS, "mine", dra_fleet.nodes)
    base = settled(example, NS)
    assert base in (2, 4), base  # 2: the pod; (4: its claim charged again, before #33)

    r = t.create(forged_claim("forged-eight", mine, 8))
    created(r, "forged-eight", "resourceclaim.resource.k8s.io")
    holds(example, NS, base + 8)
    # The scheduler does not touch it (its pod is bound): nothing allocates it.
    assert allocated_devices(kubectl.get("resourceclaim", "forged-eight", NS)) == []

    over = 32 - (base + 8) + 1
    msg = gpugate_denial(t.create(forged_claim("forged-over", mine, over)))
    assert re.match(rf'gpugate: tenant "research" is over its h100-80gb quota: requested '
                    rf'{over}\b.*in use {base + 8} of nominal 32', msg), msg
    assert example.quota_used(NS) == base + 8

    # A gated class pod naming its forged claim: the pod is charged at the
    # door, the claim in full.
    named = class_pod("named", 2, gated=True,
                      resourceClaims=[{"name": "extra", "resourceClaimName": "forged-named"}],
                      containers=[container(resources={"claims": [{"name": "extra"}]})])
    created(t.create(named), "named")
    example.wait_used(NS, base + 8 + 2)
    named = kubectl.get("pod", "named", NS)
    r = t.create(forged_claim("forged-named", named, 4))
    created(r, "forged-named", "resourceclaim.resource.k8s.io")
    holds(example, NS, base + 8 + 2 + 4)


def test_d_forged_claim_of_a_gated_pod(kubectl, tenant_kubectl, example, dra_clean,
                                       dra_fleet):
    """A claim forged for the tenant's pod before the scheduler has made one
    (the pod held by a scheduling gate) is, by the rule, that pod's earliest
    such claim: it buys at most what the pod pays for (2), so the 8 devices
    cost at least 6 more.  Once the gate is off, the scheduler takes the
    forged claim for the pod's own from an earlier cycle and deletes it,
    makes its own, and the pod runs."""
    dra_clean(NS)
    t = tenant_kubectl(NS)

    created(t.create(class_pod("held", 2, gated=True)), "held")
    example.wait_used(NS, 2)
    held = kubectl.get("pod", "held", NS)
    r = t.create(forged_claim("forged-held", held, 8))
    created(r, "forged-held", "resourceclaim.resource.k8s.io")
    rise = settled(example, NS) - 2
    assert 6 <= rise <= 8, f"a forged claim of 8 for a pod of 2 added {rise}"

    ungate(t, NS, "held")
    wait_until("the scheduler to delete forged-held",
               lambda: kubectl("get", "resourceclaim", "forged-held", "-n", NS).rc != 0, 30)
    # It does not try the pod again by itself (DraFleet.requeue).
    _, c = running_with_claim(kubectl, NS, "held", dra_fleet.nodes, nudge=dra_fleet.requeue)
    assert c["metadata"]["name"].startswith("held-extended-resources-"), c["metadata"]
    assert any("deletion of ResourceClaim completed" in e
               for e in events(kubectl, NS, uids={held["metadata"]["uid"]})), \
        events(kubectl, NS, uids={held["metadata"]["uid"]})
    # What a scheduler's claim adds on this tree (0 once it rides).
    after = settled(example, NS)
    assert after in (2, 4), after
