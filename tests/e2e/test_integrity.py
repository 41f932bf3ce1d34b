"""Issue #13, "no way around the quota": gpugate attacked by a tenant that
holds nothing but the built-in ClusterRole `edit` in its own namespace
(Stack.tenant_kubectl), and after every scenario the invariant
(gpugate_e2e.assert_invariant): what gpugate counts, gpugate_quota_used, is
what the tenant's pods hold, computed here from the pods and Jobs alone, and
never more than the tenant may hold.

Tenants (QUOTA_POLICY and RAW_POLICY in gpugate_e2e.py), 8 H100 each, no
cohort, one namespace each:

  mallory  the attacker, enforce mode
  victim   another tenant, whose Job mallory's pods name
  loose    warn mode, quiet  audit mode: they admit what enforce denies,
           and must count it all the same
  rawgpu   served by the "raw" gpugate (rawGpuRequests: allow)

Classes: gpu (1 H100; up to 8 with gpugate.io/gpus) and gpu8 (8 H100).

Pods never run.  The admin plays the scheduler (bind_pod: pods/binding),
the kubelet (set_phase: pods/status) and the kubelet's confirmation that a
deleted pod's containers stopped (finish_terminating: a force delete): a
bound pod that is deleted stays Terminating until then, still holding its
GPUs.  What edit may do is printed by test_what_edit_may_do.
"""

from __future__ import annotations

import json
import re
import time

import pytest

from gpugate_e2e import (CLASS, CONTROLLER_UID, GPU_TOLERATION, GPUS, JOB_NAME, NODE, RAW_H100,
                         TENANT,
                         Holdings, Kubectl, assert_invariant, bind_job_pods, container,
                         finish_terminating, job, job_pods, pod, set_phase, terminating,
                         wait_until)

FLAVOR, RESOURCE = "h100-80gb", "nvidia.com/gpu"

# tenant -> (the gpugate that serves it, its namespaces, its ceiling: nominal
# + borrowing limit; None where warn or audit mode admit over it by design)
TENANTS = {
    "mallory": ("quota", ["mallory"], 8),
    "victim": ("quota", ["victim"], 8),
    "loose": ("quota", ["loose"], None),
    "quiet": ("quota", ["quiet"], None),
    "rawgpu": ("raw", ["rawgpu"], 8),
}


def invariant(stack, tenant: str, timeout: float = 20.0) -> Holdings:
    gate, namespaces, ceiling = TENANTS[tenant]
    return assert_invariant(stack.kubectl, stack.gates[gate], tenant, namespaces, FLAVOR,
                            RESOURCE, ceiling, timeout)


@pytest.fixture
def mallory(clean, tenant_kubectl) -> Kubectl:
    """kubectl as tenant mallory (edit in namespace mallory, nothing else);
    the namespace starts and ends empty."""
    clean("mallory")
    return tenant_kubectl("mallory")


def created(r, name: str, kind: str = "pod") -> None:
    assert (r.rc, r.out) == (0, f"{kind}/{name} created\n"), r


def gpugate_denial(r) -> str:
    """gpugate's message in the stderr of a refused kubectl command."""
    m = re.search(r'admission webhook "(?:mutate|validate)\.gpugate\.io" denied the request: '
                  r'(.*)', r.err)
    assert r.rc != 0 and m, (f"expected gpugate to deny `kubectl {' '.join(r.args)}`, got "
                             f"rc {r.rc}, stdout {r.out!r}, stderr {r.err!r}")
    return m.group(1)


def over_quota(r) -> str:
    msg = gpugate_denial(r)
    assert f"is over its {FLAVOR} quota" in msg, msg
    return msg


def gpus(n: int, name: str = "trainer", **extra) -> dict:
    """A container that asks for n nvidia.com/gpu itself."""
    return container(name, resources={"limits": {RESOURCE: str(n)}}, **extra)


def owned_by(obj: dict, owner: dict, label: bool = True) -> dict:
    """obj with Job owner as its controller ownerReference and (label) the
    labels the job controller puts on its pods, as a tenant may write them."""
    meta, uid = obj["metadata"], owner["metadata"]["uid"]
    meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "controller": True,
                                "name": owner["metadata"]["name"], "uid": uid}]
    if label:
        meta.setdefault("labels", {}).update({CONTROLLER_UID: uid,
                                              JOB_NAME: owner["metadata"]["name"]})
    return obj


def live_pods(kubectl, job_name: str, ns: str) -> list[dict]:
    """The Job's pods that are not Terminating."""
    return [p for p in job_pods(kubectl, job_name, ns)
            if not p["metadata"].get("deletionTimestamp")]


def wait_live_pods(kubectl, job_name: str, ns: str, n: int, timeout: float = 60.0) -> list[dict]:
    def ready():
        pods = live_pods(kubectl, job_name, ns)
        return pods if len(pods) == n else None
    return wait_until(f"{n} pods of job {ns}/{job_name} not Terminating", ready, timeout)


def failed_creates(kubectl, job_name: str, ns: str) -> list[str]:
    """The job controller's FailedCreate events for the Job, their messages."""
    items = kubectl("get", "events", "-n", ns, "-o", "json").json()["items"]
    return [e["message"] for e in items if e["reason"] == "FailedCreate"
            and e["involvedObject"].get("kind") == "Job"
            and e["involvedObject"].get("name") == job_name]


# ---------------------------------------------------------------------------
# the tenant


# (verb, resource, subresource, may edit do it in its namespace?)
EDIT_RIGHTS = [
    ("create", "pods", "", "yes"),
    ("patch", "pods", "", "yes"),
    ("delete", "pods", "", "yes"),
    ("create", "pods", "eviction", "yes"),
    ("patch", "pods", "status", "no"),
    ("patch", "pods", "ephemeralcontainers", "no"),
    ("patch", "pods", "resize", "no"),
    ("create", "pods", "binding", "no"),
    ("create", "jobs.batch", "", "yes"),
    ("patch", "jobs.batch", "", "yes"),
    ("patch", "jobs.batch", "status", "no"),
    ("create", "deployments.apps", "", "yes"),
    ("patch", "deployments.apps", "scale", "yes"),
    ("create", "configmaps", "", "yes"),
    ("create", "resourceclaims.resource.k8s.io", "", "yes"),
]


def test_what_edit_may_do(tenant_kubectl, capsys):
    """Documents what a tenant bound to edit may do (the attacks below use
    only that, and the admin for what a scheduler or kubelet does)."""
    k = tenant_kubectl("mallory")
    rows = []
    for verb, resource, sub, _ in EDIT_RIGHTS:
        extra = [f"--subresource={sub}"] if sub else []
        r = k("auth", "can-i", verb, resource, *extra, "-n", "mallory")
        rows.append((verb, resource + (f"/{sub}" if sub else ""), r.out.strip() or r.err.strip()))
    other = k("auth", "can-i", "create", "pods", "-n", "victim").out.strip()
    with capsys.disabled():
        print("\nClusterRole edit, bound in namespace mallory (kubectl auth can-i):")
        for verb, what, answer in rows:
            print(f"  {verb:7} {what:36} {answer}")
        print(f"  {'create':7} {'pods in namespace victim':36} {other}")
    assert [r[2] for r in rows] == [e[3] for e in EDIT_RIGHTS], rows
    assert other == "no"


# ---------------------------------------------------------------------------
# attack 1: ownership forged


def test_forged_owner_of_a_running_job_is_charged(stack, kubectl, mallory):
    """Bare pods that name a 1-GPU Job as their controller, but ask for more
    than its template, are bare pods: charged, and denied over quota."""
    created(mallory.create(job("decoy", "mallory", "gpu", parallelism=1, completions=1)),
            "decoy", "job.batch")
    wait_live_pods(kubectl, "decoy", "mallory", 1)
    decoy = kubectl.get("job", "decoy", "mallory")
    invariant(stack, "mallory")

    # 7 GPUs, the Job as controller (no controller-uid label): 1 + 7 = 8
    created(mallory.create(owned_by(pod("forged-7", "mallory", "gpu", 7), decoy, label=False)),
            "forged-7")
    assert invariant(stack, "mallory").total == 8
    # the 8-GPU class, with the label forged too: over quota
    over_quota(mallory.create(owned_by(pod("forged-8", "mallory", "gpu8"), decoy)))
    invariant(stack, "mallory")


def test_pods_of_an_unmanaged_job_beyond_its_slots_are_charged(stack, kubectl, mallory):
    """A Job managed by some other controller (spec.managedBy: the job
    controller leaves it alone) holds its 2 slots; the pods the tenant makes
    for it ride on them up to 2, and count on their own beyond."""
    created(mallory.create(job("ghost", "mallory", "gpu", parallelism=2,
                               managedBy="example.com/nobody")), "ghost", "job.batch")
    ghost = kubectl.get("job", "ghost", "mallory")
    assert invariant(stack, "mallory").total == 2
    for i in range(3):
        created(mallory.create(owned_by(pod(f"ghost-{i}", "mallory", "gpu"), ghost)),
                f"ghost-{i}")
    assert invariant(stack, "mallory").total == 3
    # one of the 8-GPU class for the same Job: not what it asks for
    over_quota(mallory.create(owned_by(pod("ghost-8", "mallory", "gpu8"), ghost)))
    invariant(stack, "mallory")


def test_a_pod_naming_another_tenants_job_is_charged_to_its_own(stack, kubectl, mallory,
                                                                 clean, tenant_kubectl):
    """mallory's pods name victim's Job as their controller.  The garbage
    collector deletes a pod whose owner is not in its namespace, so they are
    created bound to a node: they stay Terminating, and hold their GPUs."""
    clean("victim")
    victim = tenant_kubectl("victim")
    created(victim.create(job("theirs", "victim", "gpu8")), "theirs", "job.batch")
    wait_live_pods(kubectl, "theirs", "victim", 1)
    theirs = kubectl.get("job", "theirs", "victim")
    assert invariant(stack, "victim").total == 8

    created(mallory.create(owned_by(pod("x-1", "mallory", "gpu8", nodeName=NODE), theirs)),
            "x-1")
    assert invariant(stack, "mallory").total == 8
    over_quota(mallory.create(owned_by(pod("x-2", "mallory", "gpu8", nodeName=NODE), theirs)))
    invariant(stack, "mallory")
    assert invariant(stack, "victim").total == 8


# ---------------------------------------------------------------------------
# attack 2: suspended Jobs


def test_a_suspended_job_holds_nothing_and_resuming_it_is_judged(stack, mallory):
    created(mallory.create(job("later", "mallory", "gpu", 4, parallelism=2, suspend=True)),
            "later", "job.batch")
    assert invariant(stack, "mallory").total == 0
    created(mallory.create(pod("meanwhile", "mallory", "gpu", 8)), "meanwhile")
    over_quota(mallory("patch", "job", "later", "-n", "mallory", "--type=merge",
                       "-p", '{"spec":{"suspend":false}}'))
    invariant(stack, "mallory")


TEMPLATE_CHANGES = {
    "class-label": {"metadata": {"labels": {CLASS: "gpu8"}}},
    "gpus-label": {"metadata": {"labels": {GPUS: "8"}}},
    "container-limits": {"spec": {"containers": [
        {"name": "trainer", "resources": {"limits": {RESOURCE: "8"},
                                          "requests": {RESOURCE: "8"}}}]}},
}


@pytest.mark.parametrize("change", TEMPLATE_CHANGES)
def test_resuming_a_job_whose_template_grew_while_suspended(stack, kubectl, mallory, change):
    """A suspended 2 x 1-GPU Job whose pod template is changed to ask for 8
    per pod, then resumed: the resumption is judged (2 x 8 is over quota),
    or the pods get what the Job was charged for; never more than 8 held."""
    created(mallory.create(job("tamper", "mallory", "gpu", parallelism=2, suspend=True)),
            "tamper", "job.batch")
    r = mallory("patch", "job", "tamper", "-n", "mallory", "--type=strategic",
                "-p", json.dumps({"spec": {"template": TEMPLATE_CHANGES[change]}}))
    print(f"template change {change}: rc {r.rc} {r.out.strip()} {r.err.strip()}")
    r = mallory("patch", "job", "tamper", "-n", "mallory", "--type=merge",
                "-p", '{"spec":{"suspend":false}}')
    if r.rc != 0:
        over_quota(r)
        assert kubectl.get("job", "tamper", "mallory")["spec"]["suspend"] is True
    else:
        wait_until("the job controller to create the pods or fail to",
                   lambda: len(live_pods(kubectl, "tamper", "mallory")) == 2
                   or failed_creates(kubectl, "tamper", "mallory"), 30)
    invariant(stack, "mallory")


# ---------------------------------------------------------------------------
# attack 3: Terminating pods hold their GPUs


def test_lowered_parallelism_gives_gpus_back_when_the_pods_are_gone(stack, kubectl, mallory):
    created(mallory.create(job("shrink", "mallory", "gpu", 2, parallelism=4)),
            "shrink", "job.batch")
    wait_live_pods(kubectl, "shrink", "mallory", 4)
    bind_job_pods(kubectl, "shrink", "mallory")
    assert invariant(stack, "mallory").total == 8

    r = mallory("patch", "job", "shrink", "-n", "mallory", "--type=merge",
                "-p", '{"spec":{"parallelism":2}}')
    assert (r.rc, r.out) == (0, "job.batch/shrink patched\n"), r
    # the job controller deletes 2 pods: bound, they stay Terminating
    wait_live_pods(kubectl, "shrink", "mallory", 2)
    assert len(job_pods(kubectl, "shrink", "mallory")) == 4
    assert invariant(stack, "mallory").total == 8
    over_quota(mallory.create(pod("squeeze", "mallory", "gpu", 2)))

    assert len(finish_terminating(kubectl, "mallory")) == 2
    assert invariant(stack, "mallory").total == 4


def test_a_deleted_job_pod_holds_its_gpus_until_it_is_gone(stack, kubectl, mallory):
    """The job controller replaces a Terminating pod at once (the default
    podReplacementPolicy): while the old one holds its GPUs, the replacement
    is over quota and refused (FailedCreate), then created once it is gone."""
    created(mallory.create(job("steady", "mallory", "gpu", 4, parallelism=2)),
            "steady", "job.batch")
    pods = wait_live_pods(kubectl, "steady", "mallory", 2)
    bind_job_pods(kubectl, "steady", "mallory")
    assert invariant(stack, "mallory").total == 8

    leaving = pods[0]["metadata"]["name"]
    r = mallory("delete", "pod", leaving, "-n", "mallory", "--wait=false")
    assert r.rc == 0, r
    # the replacement comes after the job controller's pod failure back-off
    # (10 s): refused, or (where a Terminating pod is not counted) created
    wait_until("a replacement pod or a FailedCreate event",
               lambda: failed_creates(kubectl, "steady", "mallory")
               or len(live_pods(kubectl, "steady", "mallory")) == 2, 40)
    assert leaving in terminating(job_pods(kubectl, "steady", "mallory"))
    invariant(stack, "mallory")
    refused = failed_creates(kubectl, "steady", "mallory")
    assert refused and "is over its h100-80gb quota" in refused[0], refused
    assert len(live_pods(kubectl, "steady", "mallory")) == 1

    finish_terminating(kubectl, "mallory", [leaving])
    wait_live_pods(kubectl, "steady", "mallory", 2)
    assert invariant(stack, "mallory").total == 8


# ---------------------------------------------------------------------------
# attack 4: status writers, and restarts


def test_the_tenant_label_removed_through_pods_status(stack, kubectl, mallory):
    """pods/status may rewrite a pod's labels; edit may not write it (see
    test_what_edit_may_do), a kubelet or any controller with the right may:
    here the admin.  The stamps are refused there as on the pod itself, and
    what the pod holds does not change."""
    created(mallory.create(pod("marked", "mallory", "gpu", 4)), "marked")
    assert invariant(stack, "mallory").total == 4
    can = mallory("auth", "can-i", "patch", "pods", "--subresource=status",
                  "-n", "mallory").out.strip()
    writer = mallory if can == "yes" else kubectl
    print(f"pods/status written by {'the tenant' if can == 'yes' else 'the admin'}")
    remove = [{"op": "remove", "path": "/metadata/labels/" + TENANT.replace("/", "~1")}]
    r = writer("patch", "pod", "marked", "-n", "mallory", "--subresource=status",
               "--type=json", "-p", json.dumps(remove))
    # pods/status is registered for the writes that touch the stamps (#26).
    assert gpugate_denial(r) == (
        'gpugate: label gpugate.io/tenant is set by gpugate and cannot be changed or '
        'removed (it is "mallory")')
    assert kubectl.get("pod", "marked", "mallory")["metadata"]["labels"][TENANT] == "mallory"
    assert invariant(stack, "mallory").total == 4

    _, problems = stack.restart_gate("quota")
    assert problems == [], "\n".join(problems)
    assert invariant(stack, "mallory").total == 4


def test_a_create_of_a_taken_name_holds_nothing_for_long(stack, mallory):
    """Issue #26 (the memory store): a create of a pod name that exists is
    judged and reserved at /validate, then refused by the apiserver
    (AlreadyExists).  The reservation goes 5 s after it was made (the watch
    shows the name under another uid), not after the 60 s TTL."""
    created(mallory.create(pod("taken", "mallory", "gpu", 2)), "taken")
    r = mallory.create(pod("taken", "mallory", "gpu", 6))
    assert r.rc != 0 and ("AlreadyExists" in r.err or "already exists" in r.err), r
    t0 = time.monotonic()

    def fits():
        r = mallory.create(pod("fits", "mallory", "gpu", 6))
        if r.rc == 0:
            return True
        over_quota(r)
        return False
    wait_until("a pod of 6 beside the 2 held to be admitted", fits, 30, 0.5)
    took = time.monotonic() - t0
    print(f"taken name: the pod that fits admitted {took:.1f}s after the refused create")
    assert took < 15, f"the refused create held its 6 GPUs for {took:.1f}s"
    assert invariant(stack, "mallory").total == 8


def test_a_restart_mid_flight_resyncs(stack, kubectl, mallory):
    """gpugate restarted while the job controller is still creating pods,
    with a Succeeded pod (holds nothing) and a Terminating one (holds)."""
    created(mallory.create(pod("done", "mallory", "gpu", 1)), "done")
    set_phase(kubectl, "mallory", "done", "Succeeded")
    created(mallory.create(pod("leaving", "mallory", "gpu", 1, nodeName=NODE)), "leaving")
    assert mallory("delete", "pod", "leaving", "-n", "mallory", "--wait=false").rc == 0
    created(mallory.create(pod("bare", "mallory", "gpu", 2)), "bare")
    created(mallory.create(job("inflight", "mallory", "gpu", 2, parallelism=2)),
            "inflight", "job.batch")
    _, problems = stack.restart_gate("quota")
    assert problems == [], "\n".join(problems)
    assert invariant(stack, "mallory").total == 7
    wait_live_pods(kubectl, "inflight", "mallory", 2)
    assert invariant(stack, "mallory").total == 7


# ---------------------------------------------------------------------------
# attack 6: init containers and native sidecars (raw requests allowed)


def test_init_containers_and_sidecars_are_charged_as_the_scheduler_counts(
        stack, clean, tenant_kubectl):
    clean("rawgpu")
    t = tenant_kubectl("rawgpu")
    # a sidecar (1) runs through the classic init container (4), then
    # beside the trainer (2): the node needs max(1 + 4, 1 + 2) = 5
    # (nvidia.com/gpu is also a100-80gb's: each pod selects H100 nodes)
    staged = pod("staged", "rawgpu", containers=[gpus(2)], initContainers=[
        gpus(1, "monitor", restartPolicy="Always"), gpus(4, "fetch")],
        nodeSelector=RAW_H100)
    created(t.create(staged), "staged")
    assert invariant(stack, "rawgpu").pods == {"rawgpu/staged": 5}
    # GPUs in a classic init container only: 3
    warmup = pod("warmup", "rawgpu", initContainers=[gpus(3, "fetch")],
                 nodeSelector=RAW_H100)
    created(t.create(warmup), "warmup")
    assert invariant(stack, "rawgpu").total == 8
    over_quota(t.create(pod("one-more", "rawgpu", containers=[gpus(1)],
                            nodeSelector=RAW_H100)))
    invariant(stack, "rawgpu")


# ---------------------------------------------------------------------------
# attack 8: warn and audit modes admit, and count


@pytest.mark.parametrize("tenant", ["loose", "quiet"])
def test_warn_and_audit_modes_count_what_they_admit(stack, clean, tenant_kubectl, tenant):
    """Raw `nvidia.com/gpu: 8` pods (rawGpuRequests reject, which these
    modes only report): admitted, three times the quota, and counted."""
    clean(tenant)
    t = tenant_kubectl(tenant)
    for i in range(3):
        created(t.create(pod(f"raw-{i}", tenant, containers=[gpus(8)])), f"raw-{i}")
    assert invariant(stack, tenant).total == 24


# ---------------------------------------------------------------------------
# attack 9: a class pod asking for more in its own limits


def test_a_class_pod_asking_for_more_gpus_in_its_limits_is_denied(stack, mallory):
    msg = gpugate_denial(mallory.create(pod("greedy", "mallory", "gpu", containers=[gpus(4)])))
    assert "4" in msg and "1" in msg and GPUS in msg, msg
    assert invariant(stack, "mallory").total == 0


# ---------------------------------------------------------------------------
# isolation: no way to the devices around the device plugin


DEBUG_CONTAINERS = {
    "privileged": ["--profile=sysadmin"],
    "visible-devices": ["--env=NVIDIA_VISIBLE_DEVICES=all"],
}


@pytest.mark.parametrize("how", DEBUG_CONTAINERS)
def test_an_ephemeral_container_cannot_reach_a_gpu_pods_devices(stack, kubectl, mallory, how):
    """kubectl debug on a GPU pod.  edit may not add ephemeral containers
    (RBAC refuses the tenant); whoever may, gpugate refuses these."""
    created(mallory.create(pod("shared", "mallory", "gpu")), "shared")
    argv = ["debug", "pod/shared", "-n", "mallory", "--image=busybox", "--container=dbg",
            *DEBUG_CONTAINERS[how]]
    r = mallory(*argv)
    assert r.rc != 0 and "forbidden" in r.err.lower(), r
    gpugate_denial(kubectl(*argv))
    assert not kubectl.get("pod", "shared", "mallory")["spec"].get("ephemeralContainers")
    invariant(stack, "mallory")


def test_env_from_without_a_prefix_in_a_gpu_pod_is_denied(stack, kubectl, mallory):
    """A ConfigMap can hold NVIDIA_VISIBLE_DEVICES=all: envFrom without a
    prefix would set it in the GPU container."""
    mallory("delete", "configmap", "devices", "-n", "mallory", "--ignore-not-found")
    r = mallory("create", "configmap", "devices", "-n", "mallory",
                "--from-literal=NVIDIA_VISIBLE_DEVICES=all")
    assert r.rc == 0, r
    try:
        leaky = pod("leaky", "mallory", "gpu", containers=[
            container(envFrom=[{"configMapRef": {"name": "devices"}}])])
        gpugate_denial(mallory.create(leaky))
        invariant(stack, "mallory")
    finally:
        kubectl("delete", "configmap", "devices", "-n", "mallory", "--ignore-not-found")


PRIVILEGED_SIDECARS = {
    "container": {"containers": [container(), container(
        "sidecar", image="busybox", securityContext={"privileged": True})]},
    "native-sidecar": {"initContainers": [container(
        "sidecar", image="busybox", restartPolicy="Always",
        securityContext={"privileged": True})]},
}


@pytest.mark.parametrize("where", PRIVILEGED_SIDECARS)
def test_a_privileged_sidecar_in_a_class_pod_is_denied(stack, mallory, where):
    msg = gpugate_denial(mallory.create(pod("escort", "mallory", "gpu",
                                            **PRIVILEGED_SIDECARS[where])))
    assert "privileged" in msg, msg
    invariant(stack, "mallory")


def test_a_privileged_pod_that_tolerates_the_gpu_taint_is_denied(stack, mallory):
    """No GPU asked for, but the flavor's toleration: it may land on a GPU
    node, where a privileged container sees every device."""
    sneaky = pod("sneaky", "mallory", tolerations=[GPU_TOLERATION], containers=[
        container("tool", image="busybox", securityContext={"privileged": True})])
    msg = gpugate_denial(mallory.create(sneaky))
    assert "privileged" in msg, msg
    invariant(stack, "mallory")
