"""What a user sees with the real kubectl against a real kube-apiserver, with
gpugate registered as mutate.gpugate.io / validate.gpugate.io and serving
the example policy (policy/examples/gpu-cluster.yaml).

Outputs are asserted verbatim: kubectl's stdout and its whole stderr (the
warning lines gpugate returns, or the Forbidden line with gpugate's text).
Each test starts and ends with the research namespaces empty, so that the
quota positions ("8/32 in use") do not depend on test order.
"""

from __future__ import annotations

import pytest

from gpugate_e2e import (BORROWED, CLASS, CONTAINER, DECISION, FLAVOR, GANG, GPU_TOLERATION,
                         GPUS, H100_SELECTOR, PRE_STOP, PREEMPTIBLE, ROOT, TENANT, container,
                         job, pod)

RESEARCH_CLASSES = "train-large, train-small, dev-shared"


def denied_by(webhook: str, message: str, file: str | None = "pod.yaml") -> str:
    """kubectl's stderr line for a denial by one of gpugate's webhooks."""
    where = f'error when creating "{file}": ' if file else ""
    return (f"Error from server (Forbidden): {where}admission webhook \"{webhook}\" "
            f"denied the request: {message}\n")


def warning(*lines: str) -> str:
    return "".join(f"Warning: {line}\n" for line in lines)


def assert_absent(kubectl, kind: str, name: str, ns: str) -> None:
    r = kubectl("get", kind, name, "-n", ns, "-o", "name")
    assert r.rc != 0 and "NotFound" in r.err, (r.rc, r.out, r.err)


def gpu_container_of(obj: dict, name: str = "trainer") -> dict:
    spec = obj["spec"]["template"]["spec"] if obj["kind"] == "Job" else obj["spec"]
    return next(c for c in spec["containers"] if c["name"] == name)


def env_of(c: dict) -> dict:
    return {e["name"]: e.get("value") for e in c.get("env", [])}


# ---------------------------------------------------------------------------
# admitted and mutated


def test_class_pod_is_mutated_and_warned(kubectl, example, clean, files):
    clean("research")
    r = kubectl.apply_file(files / "pod.yaml", pod("pretrain-0", "research", "train-large"))
    assert (r.rc, r.out) == (0, "pod/pretrain-0 created\n"), r
    assert r.err == warning(
        "gpugate: train-large -> 8 x h100-80gb for tenant research (8/32 in use)")

    live = kubectl.get("pod", "pretrain-0", "research")
    meta, spec = live["metadata"], live["spec"]
    c = gpu_container_of(live)
    assert c["resources"]["limits"] == {"nvidia.com/gpu": "8"}
    # The class's cpu and memory, and the apiserver's defaulting of the
    # extended resource's request from its limit.
    assert c["resources"]["requests"] == {"cpu": "96", "memory": "1000Gi",
                                          "nvidia.com/gpu": "8"}
    assert spec["nodeSelector"] == H100_SELECTOR
    assert GPU_TOLERATION in spec["tolerations"]
    assert meta["labels"] == {CLASS: "train-large", TENANT: "research",
                              FLAVOR: "h100-80gb"}
    assert meta["annotations"][DECISION] == \
        "train-large: 8 x h100-80gb for tenant research; 8/32 in use"
    # gpugate set the class's PriorityClass; the apiserver's own Priority
    # admission then resolved it (it runs again after a webhook's change).
    assert spec["priorityClassName"] == "training"
    assert spec["priority"] == 1000
    assert "affinity" not in spec  # a bare pod: no gang
    assert "lifecycle" not in c  # train-large is not preemptible
    assert live["status"]["phase"] == "Pending"
    example.wait_used("research", 8)


def test_example_pod_train_small(kubectl, example, clean):
    """examples/pod-train-small.yaml as a user applies it."""
    clean("research")
    r = kubectl("apply", "-f", "examples/pod-train-small.yaml", cwd=ROOT)
    assert (r.rc, r.out) == (0, "pod/experiment-42 created\n"), r
    assert r.err == warning(
        "gpugate: train-small -> 2 x h100-80gb for tenant research (2/32 in use)")

    live = kubectl.get("pod", "experiment-42", "research")
    meta, spec = live["metadata"], live["spec"]
    c = gpu_container_of(live)
    assert c["resources"]["limits"] == {"nvidia.com/gpu": "2"}
    assert c["resources"]["requests"] == {"cpu": "12", "memory": "120Gi",
                                          "nvidia.com/gpu": "2"}
    assert meta["labels"] == {CLASS: "train-small", GPUS: "2", TENANT: "research",
                              FLAVOR: "h100-80gb", PREEMPTIBLE: "true"}
    assert meta["annotations"][DECISION] == \
        "train-small: 2 x h100-80gb for tenant research; 2/32 in use"
    # checkpoint hooks (SPEC section 6)
    assert env_of(c) == {"GPUGATE_CHECKPOINT_DIR": "/checkpoint", "GPUGATE_PREEMPTIBLE": "1",
        "GPUGATE_CHECKPOINT_SIGNAL": "/etc/gpugate/signal/checkpoint-requested"}
    assert {"name": "gpugate-checkpoint", "mountPath": "/checkpoint"} in c["volumeMounts"]
    assert {"name": "gpugate-checkpoint",
            "persistentVolumeClaim": {"claimName": "research-checkpoints"}} in spec["volumes"]
    # the checkpoint signal (#17): the apiserver takes the downward API volume
    assert {"name": "gpugate-signal", "mountPath": "/etc/gpugate/signal",
            "readOnly": True} in c["volumeMounts"]
    assert {"name": "gpugate-signal", "downwardAPI": {"defaultMode": 420, "items": [
        {"path": "checkpoint-requested", "fieldRef": {
            "apiVersion": "v1",
            "fieldPath": "metadata.annotations['gpugate.io/checkpoint-requested']"}}]}} \
        in spec["volumes"], spec["volumes"]
    assert c["lifecycle"] == {"preStop": {"exec": {"command": PRE_STOP}}}
    assert spec["terminationGracePeriodSeconds"] == 600
    assert "priorityClassName" not in spec and spec["priority"] == 0
    example.wait_used("research", 2)


def test_kubectl_run_with_a_class_label(kubectl, example, clean):
    clean("research")
    r = kubectl("run", "notebook", "-n", "research", "--image=jupyter/base-notebook",
                "--labels=gpugate.io/class=train-small")
    assert (r.rc, r.out) == (0, "pod/notebook created\n"), r
    assert r.err == warning(
        "gpugate: train-small -> 1 x h100-80gb for tenant research (1/32 in use)")
    c = gpu_container_of(kubectl.get("pod", "notebook", "research"), "notebook")
    assert c["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    example.wait_used("research", 1)


def test_gpu_container_annotation_and_own_prestop(kubectl, example, clean, files):
    """Several containers: the annotation picks the GPU container; the user's
    preStop hook and env are kept (with a warning), the sidecar gets the
    checkpoint env and volume but no GPUs; the user's nodeSelector and
    tolerations are kept next to the flavor's."""
    clean("research")
    own_stop = {"preStop": {"exec": {"command": ["/bin/save-checkpoint"]}}}
    obj = pod("multi", "research", "train-small", 3,
              annotations={CONTAINER: "trainer"},
              containers=[container("logger", image="busybox", command=["tail", "-f"]),
                          container("trainer", lifecycle=own_stop,
                                    env=[{"name": "GPUGATE_CHECKPOINT_DIR",
                                          "value": "/mine"}])],
              nodeSelector={"topology.kubernetes.io/zone": "z1"},
              tolerations=[{"key": "dedicated", "operator": "Equal", "value": "ml",
                            "effect": "NoSchedule"}])
    r = kubectl.apply_file(files / "pod.yaml", obj)
    assert (r.rc, r.out) == (0, "pod/multi created\n"), r
    assert r.err == warning(
        'gpugate: container "trainer" keeps its own preStop hook; make sure it '
        'checkpoints within 600s',
        "gpugate: train-small -> 3 x h100-80gb for tenant research (3/32 in use)")
    live = kubectl.get("pod", "multi", "research")
    spec = live["spec"]
    trainer, logger = gpu_container_of(live), gpu_container_of(live, "logger")
    assert trainer["resources"]["limits"] == {"nvidia.com/gpu": "3"}
    assert "limits" not in logger.get("resources", {})
    assert trainer["lifecycle"] == own_stop
    assert env_of(trainer) == {"GPUGATE_CHECKPOINT_DIR": "/mine", "GPUGATE_PREEMPTIBLE": "1",
        "GPUGATE_CHECKPOINT_SIGNAL": "/etc/gpugate/signal/checkpoint-requested"}
    assert env_of(logger) == {"GPUGATE_CHECKPOINT_DIR": "/checkpoint",
                              "GPUGATE_PREEMPTIBLE": "1",
        "GPUGATE_CHECKPOINT_SIGNAL": "/etc/gpugate/signal/checkpoint-requested"}
    assert {"name": "gpugate-checkpoint", "mountPath": "/checkpoint"} in logger["volumeMounts"]
    assert spec["nodeSelector"] == {"topology.kubernetes.io/zone": "z1", **H100_SELECTOR}
    assert {"key": "dedicated", "operator": "Equal", "value": "ml",
            "effect": "NoSchedule"} in spec["tolerations"]
    assert GPU_TOLERATION in spec["tolerations"]
    example.wait_used("research", 3)


def test_forged_stamps_are_overwritten(kubectl, example, clean, files):
    """A user cannot pick the tenant that pays, or claim a decision."""
    clean("research", "product-inference")
    obj = pod("forger", "research", "train-small",
              labels={TENANT: "product", FLAVOR: "cheap", GANG: "g-0000000000000000"},
              annotations={BORROWED: "8", DECISION: "approved by the boss"})
    r = kubectl.apply_file(files / "pod.yaml", obj)
    assert (r.rc, r.out) == (0, "pod/forger created\n"), r
    assert r.err == warning(
        "gpugate: train-small -> 1 x h100-80gb for tenant research (1/32 in use)")
    meta = kubectl.get("pod", "forger", "research")["metadata"]
    assert meta["labels"] == {CLASS: "train-small", TENANT: "research", FLAVOR: "h100-80gb",
                              PREEMPTIBLE: "true"}
    assert BORROWED not in meta["annotations"]
    assert meta["annotations"][DECISION] == \
        "train-small: 1 x h100-80gb for tenant research; 1/32 in use"
    example.wait_used("research", 1)
    assert example.quota_used("product") == 0


def test_warn_mode_tenant_is_admitted_with_the_reason(kubectl, example, clean, files):
    """Tenant sandbox is in warn mode: a class it may not use is admitted,
    and kubectl shows why it would have been refused."""
    clean("sandbox-1")
    r = kubectl.apply_file(files / "pod.yaml", pod("big-idea", "sandbox-1", "train-small"))
    assert (r.rc, r.out) == (0, "pod/big-idea created\n"), r
    assert r.err == warning(
        'gpugate: class "train-small" is not allowed for tenant "sandbox"; allowed: dev-shared')
    r = kubectl.apply_file(files / "ok.yaml", pod("notebook", "sandbox-1", "dev-shared"))
    assert (r.rc, r.out) == (0, "pod/notebook created\n"), r
    assert r.err == warning(
        "gpugate: dev-shared -> 1 x l4-shared for tenant sandbox (1/24 in use)")
    example.wait_used("sandbox", 1, "l4-shared")


def test_apply_again_client_and_server_side(kubectl, example, clean, files):
    """CI pipelines and GitOps tools apply the same manifests again and again:
    that must neither fail nor trip over gpugate's stamps (the second apply
    is an UPDATE), client-side or server-side (what Argo CD and Flux use)."""
    clean("research", "research-jobs")
    r = kubectl("apply", "-f", "examples/pod-train-small.yaml", cwd=ROOT)
    assert r.rc == 0, r
    r = kubectl("apply", "-f", "examples/pod-train-small.yaml", cwd=ROOT)
    assert (r.rc, r.out, r.err) == (0, "pod/experiment-42 unchanged\n", ""), r
    obj = pod("reapplied", "research", "train-small", labels={"team": "vision"})
    r = kubectl.apply_file(files / "pod.yaml", obj)
    assert r.rc == 0, r
    obj["metadata"]["labels"]["team"] = "audio"
    r = kubectl.apply_file(files / "pod.yaml", obj)
    assert (r.rc, r.out, r.err) == (0, "pod/reapplied configured\n", ""), r
    for manifest in (pod("ssa", "research", "train-small"),
                     job("ssa", "research-jobs", "train-large", parallelism=2)):
        kind = "pod" if manifest["kind"] == "Pod" else "job.batch"
        r = kubectl.apply_file(files / "ssa.yaml", manifest, "--server-side")
        assert (r.rc, r.out) == (0, f"{kind}/ssa serverside-applied\n"), r
        assert r.err.startswith("Warning: gpugate: "), r
        r = kubectl.apply_file(files / "ssa.yaml", manifest, "--server-side")
        assert (r.rc, r.out, r.err) == (0, f"{kind}/ssa serverside-applied\n", ""), r
        live = kubectl.get(kind, "ssa", manifest["metadata"]["namespace"])
        assert live["metadata"]["labels"][TENANT] == "research"
    # 2 + 1 + 1 bare pods, and a Job of 2 x 8
    example.wait_used("research", 20)


# ---------------------------------------------------------------------------
# denials: the user sees gpugate's text, through the apiserver, at once


def raw_gpu_pod(name: str, ns: str, **kw) -> dict:
    return pod(name, ns, containers=[container(resources={"limits": {"nvidia.com/gpu": "1"}})],
               **kw)


DENIALS = {
    "unknown-class": (
        pod("p", "research", "train-huge"),
        'gpugate: unknown GPU class "train-huge"; tenant "research" may use: '
        + RESEARCH_CLASSES),
    "class-not-allowed": (
        pod("p", "research", "inference-mig"),
        'gpugate: class "inference-mig" is not allowed for tenant "research"; allowed: '
        + RESEARCH_CLASSES),
    "namespace-without-tenant": (
        pod("p", "no-tenant", "train-small"),
        'gpugate: namespace "no-tenant" belongs to no tenant, so it cannot use GPU class '
        '"train-small"; ask the platform team to add it to a tenant in the gpugate policy'),
    "raw-gpu-request": (
        raw_gpu_pod("p", "research"),
        "gpugate: this workload asks for nvidia.com/gpu directly; request GPUs with a class "
        "instead: set label gpugate.io/class to one of: " + RESEARCH_CLASSES),
    "raw-gpu-request-without-tenant": (
        raw_gpu_pod("p", "no-tenant"),
        'gpugate: namespace "no-tenant" belongs to no tenant, so it cannot use '
        "nvidia.com/gpu; ask the platform team to add it to a tenant in the gpugate policy"),
    "privileged-gpu-container": (
        pod("p", "research", "train-small",
            containers=[container(securityContext={"privileged": True})]),
        'gpugate: container "trainer" is privileged; a privileged GPU container bypasses '
        "the device plugin's isolation: remove securityContext.privileged"),
    "nvidia-visible-devices": (
        pod("p", "research", "train-small",
            containers=[container(env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}])]),
        'gpugate: container "trainer" sets NVIDIA_VISIBLE_DEVICES, which bypasses the device '
        "plugin's GPU isolation: remove it and ask for GPUs with a class"),
    "hostpath-dev-nvidia": (
        pod("p", "research", "train-small",
            containers=[container(volumeMounts=[{"name": "dev", "mountPath": "/dev/nvidia0"}])],
            volumes=[{"name": "dev", "hostPath": {"path": "/dev/nvidia0"}}]),
        'gpugate: container "trainer" mounts host path /dev/nvidia0 (volume "dev"), which '
        "bypasses the device plugin's GPU isolation: remove the hostPath volume"),
    "gpus-out-of-range": (
        pod("p", "research", "train-small", 5),
        'gpugate: label gpugate.io/gpus="5" must be a whole number from 1 to 4 for class '
        "train-small"),
    "conflicting-node-selector": (
        pod("p", "research", "train-small",
            nodeSelector={"nvidia.com/gpu.product": "NVIDIA-L4"}),
        "gpugate: nodeSelector nvidia.com/gpu.product=NVIDIA-L4 conflicts with flavor "
        "h100-80gb, which needs nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3: remove it, "
        "the class chooses the nodes"),
    "job-and-template-classes-differ": (
        job("j", "research", "train-large", template_labels={CLASS: "train-small"}),
        'gpugate: the Job asks for class "train-large" but its pod template asks for class '
        '"train-small"; use one'),
}


@pytest.mark.parametrize("case", list(DENIALS))
def test_denial_reaches_the_user(kubectl, example, case, files):
    obj, message = DENIALS[case]
    kind = "job" if obj["kind"] == "Job" else "pod"
    name, ns = obj["metadata"]["name"], obj["metadata"]["namespace"]
    try:
        r = kubectl.apply_file(files / "pod.yaml", obj)
        assert r.rc == 1, r
        assert r.out == ""
        assert r.err == denied_by("mutate.gpugate.io", message)
        assert_absent(kubectl, kind, name, ns)
        assert example.quota_used("research") == 0
    finally:
        kubectl("delete", kind, name, "-n", ns, "--ignore-not-found", "--wait=true")


def test_example_job_too_big_can_never_be_admitted(kubectl, example):
    """examples/job-too-big.yaml, the README's message word for word."""
    r = kubectl("apply", "-f", "examples/job-too-big.yaml", cwd=ROOT)
    assert r.rc == 1 and r.out == "", r
    assert r.err == denied_by(
        "mutate.gpugate.io",
        'gpugate: job can never be admitted: needs 64 h100-80gb (parallelism 8 x 8), '
        'tenant "research" may hold at most 40 (nominal 32 + 8 that cohort "lab" can lend)',
        file="examples/job-too-big.yaml")
    assert_absent(kubectl, "job", "too-big", "research")
    assert example.quota_used("research") == 0


# ---------------------------------------------------------------------------
# namespaces gpugate never sees


@pytest.mark.parametrize("ns", ["kube-system", "gpugate"])
def test_excluded_namespaces_are_not_intercepted(kubectl, ns, files):
    """kube-system and gpugate's own namespace are outside the
    namespaceSelector: a raw GPU request there is admitted untouched, and a
    class label means nothing (in research both would be refused or
    mutated)."""
    try:
        r = kubectl.apply_file(files / "raw.yaml", raw_gpu_pod("raw-gpu", ns))
        assert (r.rc, r.out, r.err) == (0, "pod/raw-gpu created\n", ""), r
        r = kubectl.apply_file(files / "class.yaml", pod("class-pod", ns, "train-large"))
        assert (r.rc, r.out, r.err) == (0, "pod/class-pod created\n", ""), r
        raw = kubectl.get("pod", "raw-gpu", ns)
        cls = kubectl.get("pod", "class-pod", ns)
        for live in (raw, cls):
            labels = live["metadata"].get("labels", {})
            annotations = live["metadata"].get("annotations", {})
            assert not [k for k in labels if k.startswith("gpugate.io/")
                        and k != CLASS], labels
            assert not [k for k in annotations if k.startswith("gpugate.io/")], annotations
            assert "nodeSelector" not in live["spec"]
            assert "priorityClassName" not in live["spec"]
        assert gpu_container_of(raw)["resources"]["limits"] == {"nvidia.com/gpu": "1"}
        assert gpu_container_of(cls).get("resources", {}) == {}
    finally:
        kubectl("delete", "pod", "raw-gpu", "class-pod", "-n", ns, "--ignore-not-found")


# ---------------------------------------------------------------------------
# server-side dry runs: the webhooks run, nothing is reserved


def test_dry_run_shows_the_decision_and_reserves_nothing(kubectl, example, clean, files):
    clean("research")
    obj = pod("rehearsal", "research", "train-large")
    for _ in range(2):  # twice: the first left nothing behind
        r = kubectl.apply_file(files / "pod.yaml", obj, "--dry-run=server")
        assert (r.rc, r.out) == (0, "pod/rehearsal created (server dry run)\n"), r
        assert r.err == warning(
            "gpugate: train-large -> 8 x h100-80gb for tenant research (8/32 in use)")
    r = kubectl("apply", "--dry-run=server", "-f", "examples/job-train-large.yaml", cwd=ROOT)
    assert (r.rc, r.out) == (0, "job.batch/llm-pretrain created (server dry run)\n"), r
    assert r.err == warning(
        "gpugate: train-large -> 3 pods x 8 x h100-80gb for tenant research (24/32 in use)")
    r = kubectl("apply", "--dry-run=server", "-f", "examples/job-too-big.yaml", cwd=ROOT)
    assert r.rc == 1 and "gpugate: job can never be admitted: needs 64 h100-80gb" in r.err, r
    assert_absent(kubectl, "pod", "rehearsal", "research")
    assert_absent(kubectl, "job", "llm-pretrain", "research")
    assert example.quota_used("research") == 0
    # and the real thing starts from zero
    r = kubectl.apply_file(files / "pod.yaml", obj)
    assert (r.rc, r.out) == (0, "pod/rehearsal created\n"), r
    assert r.err == warning(
        "gpugate: train-large -> 8 x h100-80gb for tenant research (8/32 in use)")
    example.wait_used("research", 8)
    r = kubectl.apply_file(files / "pod2.yaml", pod("rehearsal-2", "research", "train-large"),
                           "--dry-run=server")
    assert r.rc == 0 and r.err == warning(
        "gpugate: train-large -> 8 x h100-80gb for tenant research (16/32 in use)"), r
    assert example.quota_used("research") == 8


# ---------------------------------------------------------------------------
# UPDATE


@pytest.fixture
def stamped_pod(kubectl, clean, files):
    clean("research")
    r = kubectl.apply_file(files / "pod.yaml", pod("stamped", "research", "train-small"))
    assert r.rc == 0, r
    return "stamped"


def test_relabel_and_annotate_are_allowed(kubectl, stamped_pod):
    r = kubectl("label", "pod", stamped_pod, "-n", "research", "team=vision")
    assert (r.rc, r.out, r.err) == (0, "pod/stamped labeled\n", ""), r
    r = kubectl("annotate", "pod", stamped_pod, "-n", "research", "owner=alice")
    assert (r.rc, r.out, r.err) == (0, "pod/stamped annotated\n", ""), r
    r = kubectl("label", "pod", stamped_pod, "-n", "research", "team-")
    assert (r.rc, r.out, r.err) == (0, "pod/stamped unlabeled\n", ""), r
    # (The class label is the user's own, not a stamp, but it is what the
    # pod was admitted and charged for: since #31 it cannot change either,
    # STAMP_CHANGES below.)


POD_REQUEST_CHANGED = ("of a pod cannot be changed or removed by an update (it is "
                       "\"{}\"): the pod was admitted and charged for it, and is judged "
                       "by it while it runs; create a new pod instead")


STAMP_CHANGES = {
    "remove-tenant": (["gpugate.io/tenant-"],
                      'label gpugate.io/tenant is set by gpugate and cannot be changed or '
                      'removed (it is "research")'),
    "change-tenant": (["--overwrite", "gpugate.io/tenant=product"],
                      'label gpugate.io/tenant is set by gpugate and cannot be changed or '
                      'removed (it is "research")'),
    "change-flavor": (["--overwrite", "gpugate.io/flavor=l4-shared"],
                      'label gpugate.io/flavor is set by gpugate and cannot be changed or '
                      'removed (it is "h100-80gb")'),
    "drop-preemptible": (["gpugate.io/preemptible-"],
                         'label gpugate.io/preemptible is set by gpugate and cannot be '
                         'changed or removed (it is "true")'),
    "add-gang": (["gpugate.io/gang=g-1234"],
                 "label gpugate.io/gang is set by gpugate and cannot be added by an update"),
    # Not stamps, but what the pod was admitted and charged for (#31).
    "change-class": (["--overwrite", "gpugate.io/class=train-large"],
                     "label gpugate.io/class " + POD_REQUEST_CHANGED.format("train-small")),
    "remove-class": (["gpugate.io/class-"],
                     "label gpugate.io/class " + POD_REQUEST_CHANGED.format("train-small")),
    "add-gpus": (["gpugate.io/gpus=2"],
                 "label gpugate.io/gpus cannot be added to a pod by an update: the pod was "
                 "admitted and charged without it; create a new pod instead"),
}


@pytest.mark.parametrize("case", list(STAMP_CHANGES))
def test_stamp_changes_are_denied(kubectl, stamped_pod, case):
    args, message = STAMP_CHANGES[case]
    r = kubectl("label", "pod", stamped_pod, "-n", "research", *args)
    assert r.rc == 1 and r.out == "", r
    assert r.err == denied_by("validate.gpugate.io", f"gpugate: {message}", file=None)
    labels = kubectl.get("pod", stamped_pod, "research")["metadata"]["labels"]
    assert labels[TENANT] == "research" and labels[FLAVOR] == "h100-80gb"
    assert labels[PREEMPTIBLE] == "true" and GANG not in labels
    assert labels[CLASS] == "train-small" and GPUS not in labels


def test_stamp_cannot_be_added_to_a_plain_pod(kubectl, clean, files):
    clean("research")
    r = kubectl.apply_file(files / "pod.yaml", pod("plain", "research",
                                                  containers=[container(image="busybox")]))
    assert (r.rc, r.out, r.err) == (0, "pod/plain created\n", ""), r
    r = kubectl("label", "pod", "plain", "-n", "research", "gpugate.io/tenant=research")
    assert r.rc == 1, r
    assert r.err == denied_by(
        "validate.gpugate.io",
        "gpugate: label gpugate.io/tenant is set by gpugate and cannot be added by an update",
        file=None)


def test_delete_is_allowed_and_releases(kubectl, example, stamped_pod):
    example.wait_used("research", 1)
    r = kubectl("delete", "pod", stamped_pod, "-n", "research")
    assert (r.rc, r.out, r.err) == (0, 'pod "stamped" deleted from research namespace\n', ""), r
    example.wait_used("research", 0)
