"""GPUs asked for through Dynamic Resource Allocation (resource.k8s.io/v1,
served by default since Kubernetes 1.34), against the real apiserver and
kube-controller-manager's resourceclaim controller (cluster.sh runs it).

The example policy maps the DeviceClass gpu.nvidia.com (NVIDIA's DRA
driver: whole GPUs) to flavor h100-80gb; tenant research has nominal 32 of
it, in cohort lab.  gpugate charges the ResourceClaim, not the pod, from its
creation until it is deleted (docs/quota.md, "GPUs asked for through DRA");
claims do not borrow.  No kubelet or scheduler runs: nothing is allocated,
which changes nothing to what is charged.
"""

from __future__ import annotations

from test_kubectl_admission import denied_by, warning

from gpugate_e2e import container, pod, wait_until

NS = "research"
CLASS = "gpu.nvidia.com"


def device_class(name: str) -> dict:
    """A DeviceClass as NVIDIA's DRA driver installs it (cluster-scoped,
    created by the cluster admin; gpugate does not see it)."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {
                "expression": f"device.driver == '{name}'"}}]}}


def devices(count: int, cls: str = CLASS) -> dict:
    return {"devices": {"requests": [{"name": "gpu", "exactly": {
        "deviceClassName": cls, "allocationMode": "ExactCount", "count": count}}]}}


def claim(name: str, count: int, cls: str = CLASS) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": NS}, "spec": devices(count, cls)}


def template(name: str, count: int) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"spec": devices(count)}}


def generated_claims(kubectl, pod_name: str) -> list[dict]:
    items = kubectl("get", "resourceclaims", "-n", NS, "-o", "json").json()["items"]
    return [c for c in items
            if any(o.get("kind") == "Pod" and o.get("name") == pod_name
                   for o in c["metadata"].get("ownerReferences", []))]


def test_claims_are_charged_from_creation_until_deletion(kubectl, example, clean, files):
    clean(NS)
    kubectl.apply(device_class(CLASS)).check()
    try:
        # A claim of 2 GPUs: charged at once, at /validate.
        r = kubectl.apply_file(files / "two.yaml", claim("two", 2))
        assert (r.rc, r.out) == (0, "resourceclaim.resource.k8s.io/two created\n"), r
        assert r.err == warning(
            "gpugate: claim -> 2 x h100-80gb for tenant research (2/32 in use)"), r
        example.wait_used(NS, 2)

        # Over nominal quota: denied, whatever the cohort could lend.
        r = kubectl.apply_file(files / "big.yaml", claim("big", 31))
        assert (r.rc, r.out) == (1, ""), r
        assert r.err == denied_by(
            "validate.gpugate.io",
            'gpugate: tenant "research" is over its h100-80gb quota: requested 31 '
            "(claim, device class gpu.nvidia.com), in use 2 of nominal 32, claims "
            'do not borrow from cohort "lab"', file="big.yaml"), r

        # A GPU device class no flavor maps: a raw GPU request, rejected.
        r = kubectl.apply_file(files / "mig.yaml", claim("mig", 1, "mig.nvidia.com"))
        assert (r.rc, r.out) == (1, ""), r
        assert r.err == denied_by(
            "validate.gpugate.io",
            'gpugate: this claim asks for devices of class "mig.nvidia.com", which '
            'maps to no GPU flavor; use a device class tenant "research" may use: '
            "gpu.nvidia.com", file="mig.yaml"), r

        # A template holds nothing; the claim the resourceclaim controller
        # makes from it for the pod is charged.
        r = kubectl.apply_file(files / "tmpl.yaml", template("three", 3))
        assert (r.rc, r.out) == (
            0, "resourceclaimtemplate.resource.k8s.io/three created\n"), r
        assert r.err == warning(
            "gpugate: claim template -> 3 x h100-80gb per claim for tenant research "
            "(each claim made from it is charged)"), r
        assert example.quota_used(NS) == 2
        p = pod("dra-pod", NS, containers=[container(
            resources={"claims": [{"name": "gpu"}]})],
            resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "three"}])
        r = kubectl.apply_file(files / "pod.yaml", p)
        assert (r.rc, r.out, r.err) == (0, "pod/dra-pod created\n", ""), r
        made = wait_until("the claim made for dra-pod",
                          lambda: generated_claims(kubectl, "dra-pod"), 60)
        assert len(made) == 1, made
        assert made[0]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 3, made
        example.wait_used(NS, 5)

        # The claim goes with its pod (the garbage collector, or the
        # resourceclaim controller, deletes it).
        r = kubectl("delete", "pod", "dra-pod", "-n", NS, "--wait=true")
        assert r.rc == 0, r
        wait_until("the claim of dra-pod deleted",
                   lambda: not generated_claims(kubectl, "dra-pod"), 60)
        example.wait_used(NS, 2)

        r = kubectl("delete", "resourceclaim", "two", "-n", NS)
        assert r.rc == 0, r
        example.wait_used(NS, 0)
    finally:
        kubectl("delete", "pod", "dra-pod", "-n", NS, "--ignore-not-found",
                "--wait=true", timeout=120)
        kubectl("delete", "resourceclaims,resourceclaimtemplates", "--all", "-n", NS,
                "--wait=true", timeout=120)
        kubectl("delete", "deviceclass", CLASS, "--ignore-not-found")
        example.wait_used(NS, 0)
