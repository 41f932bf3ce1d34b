"""Issue #26, "no way around the quota, round 3": the doors found open at
46bf495, each tried again by a tenant bound only to the built-in `edit`
role (Stack.tenant_kubectl), against the real apiserver, and each ending
with the invariant of test_integrity.py: what the tenant's pods hold is
what gpugate counts, never more than the policy allows.

  1. an elastic Indexed Job admitted as a gang of 1, grown by completions;
  5. Kueue's queue label on a bare Pod where Kueue holds nothing;
  6. isolation decided once at CREATE: a gated privileged pod steered to
     GPU nodes by a later PATCH, and a pod that names a GPU node;
  7. the NVIDIA toolkit's device list mounted by a pod, and a CDI
     annotation naming GPUs;
  8. the stamps of a Job removed through jobs/status;
 10. a raw request on a resource two flavors share, selecting one flavor's
     nodes by another label, charged to the other;
 #31. a running bare Pod's class label relabelled (the idle rule of a pod
     is its class's), removed, or added to a pod admitted without one.

(The numbers are the issue's.)  The admin plays what only a controller may
do: the status writes of items 8 and #31.
"""

from __future__ import annotations

import json

import pytest

from gpugate_e2e import GPU_TOLERATION, RAW_H100, TENANT, Kubectl, container, job, pod
from test_fleet import wait_phase
from test_integrity import created, gpugate_denial, gpus, invariant

H100 = "h100-80gb"
PRODUCT = "nvidia.com/gpu.product"


@pytest.fixture
def mallory(clean, tenant_kubectl) -> Kubectl:
    clean("mallory")
    return tenant_kubectl("mallory")


def privileged(name: str = "tool") -> dict:
    return container(name, securityContext={"privileged": True})


# ---------------------------------------------------------------------------
# 1. elastic Indexed Jobs


def test_an_elastic_jobs_completions_cannot_grow_its_gang(stack, kubectl, mallory):
    """parallelism 8, completions 1 of an 8-GPU class holds one slot of 8;
    raising completions to 8 would start 7 more pods nobody judged."""
    j = job("elastic", "mallory", "gpu8", parallelism=8, completions=1,
            completionMode="Indexed")
    created(mallory.create(j), "elastic", "job.batch")
    assert invariant(stack, "mallory").total == 8
    r = mallory("patch", "job", "elastic", "-n", "mallory", "--type=merge",
                "-p", json.dumps({"spec": {"completions": 8}}))
    assert gpugate_denial(r) == (
        "gpugate: a GPU Job cannot be made to run more pods at once (from 1 to 8: "
        "parallelism 8, completions 8): its gang was admitted for 1; create a new "
        "Job instead")
    assert kubectl.get("job", "elastic", "mallory")["spec"]["completions"] == 1
    # Shrinking is fine (both together, as elastic Jobs require).
    r = mallory("patch", "job", "elastic", "-n", "mallory", "--type=merge",
                "-p", json.dumps({"spec": {"completions": 1, "parallelism": 1}}))
    assert r.rc == 0, r
    assert invariant(stack, "mallory").total == 8


def test_a_suspended_elastic_job_may_grow_and_its_resume_is_judged(stack, kubectl, mallory):
    j = job("grows", "mallory", "gpu8", parallelism=1, completions=1,
            completionMode="Indexed", suspend=True)
    created(mallory.create(j), "grows", "job.batch")
    r = mallory("patch", "job", "grows", "-n", "mallory", "--type=merge",
                "-p", json.dumps({"spec": {"completions": 2, "parallelism": 2}}))
    assert r.rc == 0, r
    # Resumed, it asks for 2 x 8 of mallory's 8: refused with the numbers.
    r = mallory("patch", "job", "grows", "-n", "mallory", "--type=merge",
                "-p", json.dumps({"spec": {"suspend": False}}))
    assert "can never be admitted: needs 16 h100-80gb (parallelism 2 x 8)" in \
        gpugate_denial(r), r
    assert kubectl.get("job", "grows", "mallory")["spec"]["suspend"] is True
    assert invariant(stack, "mallory").total == 0


# ---------------------------------------------------------------------------
# 5. Kueue's label where Kueue holds nothing


def test_kueues_label_alone_does_not_lift_the_quota(stack, clean, tenant_kubectl, quota):
    """kq lets Kueue own its quota (4 H100).  No Kueue pod integration runs
    here: a bare Pod with the label and without Kueue's gate is gpugate's."""
    clean("kq")
    t = tenant_kubectl("kq")
    label = {"kueue.x-k8s.io/queue-name": "kq-queue"}
    created(t.create(pod("first", "kq", "gpu", 4, labels=label)), "first")
    r = t.create(pod("second", "kq", "gpu", 4, labels=label))
    assert "is over its h100-80gb quota" in gpugate_denial(r), r
    # Behind Kueue's scheduling gate, Kueue holds it: counted, warned.
    gated = pod("gated", "kq", "gpu", 4, labels=label,
                schedulingGates=[{"name": "kueue.x-k8s.io/admission"}])
    r = t.create(gated)
    assert (r.rc, r.out) == (0, "pod/gated created\n"), r
    assert 'gpugate: tenant "kq" is over its h100-80gb quota' in r.err, r
    quota.wait_used("kq", 8)
    from gpugate_e2e import assert_invariant
    assert_invariant(stack.kubectl, quota, "kq", ["kq"], H100, "nvidia.com/gpu", None)


# ---------------------------------------------------------------------------
# 6. isolation after CREATE


def test_a_gated_pod_steered_to_gpu_nodes_is_judged(stack, kubectl, mallory):
    """Admitted gated, privileged and with no GPU selector; then the GPU
    nodeSelector and taint toleration (allowed on gated pods since 1.30)."""
    p = pod("sneak", "mallory", containers=[privileged()],
            schedulingGates=[{"name": "example.com/wait"}])
    created(mallory.create(p), "sneak")
    steer = {"spec": {"nodeSelector": {PRODUCT: "NVIDIA-H100-80GB-HBM3"},
                      "tolerations": [GPU_TOLERATION]}}
    r = mallory("patch", "pod", "sneak", "-n", "mallory", "--type=merge",
                "-p", json.dumps(steer))
    assert gpugate_denial(r) == (
        'gpugate: container "tool" is privileged and the pod can reach GPU nodes (it '
        'tolerates the nvidia.com/gpu taint of flavor h100-80gb); a privileged container '
        'sees every GPU on the node: remove securityContext.privileged')
    spec = kubectl.get("pod", "sneak", "mallory")["spec"]
    assert "nodeSelector" not in spec and spec["schedulingGates"], spec
    # An update that keeps it off GPU nodes goes through, and so does the
    # gate's removal.
    r = mallory("patch", "pod", "sneak", "-n", "mallory", "--type=json", "-p",
                json.dumps([{"op": "remove", "path": "/spec/schedulingGates"}]))
    assert (r.rc, r.err) == (0, ""), r
    assert invariant(stack, "mallory").total == 0


def test_a_pod_that_names_a_gpu_node_is_judged(stack, kubectl, mallory, fleet):
    node = next(n for n in fleet.by_name if fleet.flavor_of(n) == H100)
    cpu = next(n for n in fleet.by_name if fleet.flavor_of(n) is None)
    r = mallory.create(pod("direct", "mallory", containers=[privileged()], nodeName=node))
    assert gpugate_denial(r) == (
        f'gpugate: container "tool" is privileged and the pod can reach GPU nodes (its '
        f'nodeName {node} is a node of flavor h100-80gb); a privileged container sees '
        f'every GPU on the node: remove securityContext.privileged')
    r = mallory.create(pod("cpu", "mallory", containers=[privileged()], nodeName=cpu))
    assert (r.rc, r.out) == (0, "pod/cpu created\n"), r
    assert invariant(stack, "mallory").total == 0


# ---------------------------------------------------------------------------
# 7. the toolkit's device list, CDI


def test_the_toolkits_device_list_cannot_be_mounted(stack, mallory):
    vol = [{"name": "null", "hostPath": {"path": "/dev/null"}}]
    mount = [{"name": "null", "mountPath": "/var/run/nvidia-container-devices/all"}]
    # In a class pod's sidecar...
    p = pod("side", "mallory", "gpu", 1, volumes=vol,
            containers=[container(), container("side", volumeMounts=mount)])
    assert gpugate_denial(mallory.create(p)).startswith(
        'gpugate: container "side" mounts volume "null" at '
        '/var/run/nvidia-container-devices/all, where the NVIDIA container toolkit reads '
        'which GPUs to give a container')
    # ...and in a pod without GPUs that tolerates the GPU taint.
    p = pod("bare", "mallory", volumes=vol, tolerations=[GPU_TOLERATION],
            containers=[container("m", volumeMounts=mount)])
    assert "mounts volume \"null\" at /var/run/nvidia-container-devices/all" in \
        gpugate_denial(mallory.create(p))
    assert invariant(stack, "mallory").total == 0


def test_a_cdi_annotation_naming_gpus_is_denied(stack, mallory):
    p = pod("cdi", "mallory", annotations={"cdi.k8s.io/gpus": "nvidia.com/gpu=all"},
            tolerations=[GPU_TOLERATION])
    assert gpugate_denial(mallory.create(p)) == (
        "gpugate: annotation cdi.k8s.io/gpus asks the container runtime for CDI device "
        "nvidia.com/gpu=all, which bypasses the device plugin's GPU isolation: remove the "
        "annotation and ask for GPUs with a class")
    assert invariant(stack, "mallory").total == 0


# ---------------------------------------------------------------------------
# 8. jobs/status


def test_a_jobs_stamps_cannot_be_removed_through_its_status(stack, kubectl, mallory):
    """edit may not write jobs/status (test_what_edit_may_do); a controller
    may: here the admin.  The stamps stay, and what the Job holds too."""
    created(mallory.create(job("stamped", "mallory", "gpu", 4, suspend=True)),
            "stamped", "job.batch")
    r = kubectl("patch", "job", "stamped", "-n", "mallory", "--subresource=status",
                "--type=json", "-p", json.dumps([{
                    "op": "remove", "path": "/metadata/labels/" + TENANT.replace("/", "~1")}]))
    assert gpugate_denial(r) == (
        'gpugate: label gpugate.io/tenant is set by gpugate and cannot be changed or '
        'removed (it is "mallory")')
    # The job controller's own status writes are not even sent.
    r = kubectl("patch", "job", "stamped", "-n", "mallory", "--subresource=status",
                "--type=merge", "-p", json.dumps({"metadata": {"labels": {"x": "y"}}}))
    assert r.rc == 0, r
    r = mallory("patch", "job", "stamped", "-n", "mallory", "--type=merge",
                "-p", json.dumps({"spec": {"suspend": False}}))
    assert r.rc == 0, r
    assert invariant(stack, "mallory").total == 4


# ---------------------------------------------------------------------------
# 10. a raw request on a shared resource


def test_a_raw_request_must_select_one_flavor_of_a_shared_resource(stack, clean,
                                                                   tenant_kubectl):
    """RAW_POLICY: a100-80gb (first) and h100-80gb share nvidia.com/gpu;
    rawgpu has H100 quota only.  Selecting Hopper nodes by another GFD
    label would have been charged as A100."""
    clean("rawgpu")
    t = tenant_kubectl("rawgpu")
    sneaky = pod("hopper", "rawgpu", containers=[gpus(8)],
                 nodeSelector={"nvidia.com/gpu.family": "hopper"})
    assert gpugate_denial(t.create(sneaky)) == (
        "gpugate: this workload asks for nvidia.com/gpu, which several flavors share, and "
        "its nodeSelector does not select exactly one of them: set the nodeSelector of "
        "one (a100-80gb: nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB; h100-80gb: "
        "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3), or ask for GPUs with a class")
    created(t.create(pod("h100", "rawgpu", containers=[gpus(8)], nodeSelector=RAW_H100)),
            "h100")
    assert invariant(stack, "rawgpu").total == 8


# ---------------------------------------------------------------------------
# #31. the class of a running pod


def test_a_running_pods_class_and_gpus_labels_cannot_change(stack, kubectl, mallory, fleet):
    """What a pod was admitted and charged for, and is judged by while it
    runs (idle GPUs: the idle rule of its class): `kubectl label --overwrite`
    was not even sent to gpugate, as only the stamps were guarded."""
    created(mallory.create(pod("nb", "mallory", "gpu", 2)), "nb")
    wait_phase(kubectl, "mallory", "nb", "Running")
    changed = ("of a pod cannot be changed or removed by an update (it is \"{}\"): the "
               "pod was admitted and charged for it, and is judged by it while it runs; "
               "create a new pod instead")
    for args, label, was in ((["gpugate.io/class=gpu8", "--overwrite"], "class", "gpu"),
                             (["gpugate.io/class-"], "class", "gpu"),
                             (["gpugate.io/gpus=1", "--overwrite"], "gpus", "2")):
        r = mallory("label", "pod", "nb", "-n", "mallory", *args)
        assert gpugate_denial(r) == f"gpugate: label gpugate.io/{label} " + \
            changed.format(was), r
    # Through pods/status (edit may not write it: the admin plays a status
    # writer, as in item 8).
    r = kubectl("patch", "pod", "nb", "-n", "mallory", "--subresource=status",
                "--type=merge", "-p", json.dumps({"metadata": {"labels": {
                    "gpugate.io/class": "gpu8"}}}))
    assert gpugate_denial(r) == "gpugate: label gpugate.io/class " + changed.format("gpu"), r
    labels = kubectl.get("pod", "nb", "mallory")["metadata"]["labels"]
    assert (labels["gpugate.io/class"], labels["gpugate.io/gpus"]) == ("gpu", "2"), labels
    # Any other label is the tenant's.
    r = mallory("label", "pod", "nb", "-n", "mallory", "team=vision")
    assert (r.rc, r.err) == (0, ""), r
    # Added to a pod admitted without one: the label alone makes a plain
    # pod gpugate's business, so the update is sent, and refused.
    created(mallory.create(pod("plain", "mallory")), "plain")
    r = mallory("label", "pod", "plain", "-n", "mallory", "gpugate.io/class=gpu")
    assert gpugate_denial(r) == (
        "gpugate: label gpugate.io/class cannot be added to a pod by an update: the pod "
        "was admitted and charged without it; create a new pod instead"), r
    assert "gpugate.io/class" not in (
        kubectl.get("pod", "plain", "mallory")["metadata"].get("labels") or {})
    assert invariant(stack, "mallory").total == 2
