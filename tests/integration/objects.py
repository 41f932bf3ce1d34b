"""Pods and Jobs shaped like what `kubectl apply` sends (after the apiserver's
defaulting), for the integration tests."""

from __future__ import annotations

import copy
from typing import Any

CLASS = "gpugate.io/class"
GPUS = "gpugate.io/gpus"
TENANT = "gpugate.io/tenant"
FLAVOR = "gpugate.io/flavor"
PREEMPTIBLE = "gpugate.io/preemptible"
GANG = "gpugate.io/gang"
DECISION = "gpugate.io/decision"
BORROWED = "gpugate.io/borrowed"
CONTAINER = "gpugate.io/container"

H100_SELECTOR = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
PRE_STOP = ["/bin/sh", "-c", "kill -TERM 1; sleep 30"]
RESEARCH_CLASSES = "train-large, train-small, dev-shared"


def container(name: str = "main", **extra: Any) -> dict:
    c = {"name": name, "image": "nvcr.io/nvidia/pytorch:24.05-py3",
         "command": ["python", "train.py"]}
    c.update(extra)
    return c


def pod(name: str | None = "train-1", namespace: str = "research", *,
        labels: dict | None = None, annotations: dict | None = None,
        containers: list | None = None, cls: str | None = None,
        gpus: str | None = None, **spec: Any) -> dict:
    """A Pod; labels/annotations maps are omitted entirely when None."""
    meta: dict[str, Any] = {"namespace": namespace}
    if name is not None:
        meta["name"] = name
    lab = dict(labels or {})
    if cls is not None:
        lab[CLASS] = cls
    if gpus is not None:
        lab[GPUS] = gpus
    if lab or labels is not None:
        meta["labels"] = lab
    if annotations is not None:
        meta["annotations"] = dict(annotations)
    s = {"containers": containers if containers is not None else [container()]}
    s.update(spec)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": s}


def job(name: str | None = "train-job", namespace: str = "research", *,
        labels: dict | None = None, template_labels: dict | None = None,
        parallelism: int | None = None, restart_policy: str = "Never",
        containers: list | None = None, pod_failure_policy: dict | None = None,
        **template_spec: Any) -> dict:
    meta: dict[str, Any] = {"namespace": namespace}
    if name is not None:
        meta["name"] = name
    if labels is not None:
        meta["labels"] = dict(labels)
    tmeta: dict[str, Any] = {}
    if template_labels is not None:
        tmeta["labels"] = dict(template_labels)
    tspec = {"containers": containers if containers is not None else [container()],
             "restartPolicy": restart_policy}
    tspec.update(template_spec)
    spec: dict[str, Any] = {"template": {"metadata": tmeta, "spec": tspec},
                            "backoffLimit": 6, "completionMode": "NonIndexed"}
    if parallelism is not None:
        spec["parallelism"] = parallelism
        spec["completions"] = parallelism
    if pod_failure_policy is not None:
        spec["podFailurePolicy"] = pod_failure_policy
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}


def pod_of_job(job_obj: dict, index: int = 0, job_uid: str = "5d0c7e4e-0c2b-4c8e-9a51-1b7f3f5b0a01") -> dict:
    """The Pod the Job controller creates from the Job's (already mutated)
    template: template labels and annotations plus the controller's own,
    an ownerReference to the Job, the template spec."""
    jm = job_obj["metadata"]
    job_uid = jm.get("uid", job_uid)
    tmpl = copy.deepcopy(job_obj["spec"]["template"])
    meta = copy.deepcopy(tmpl.get("metadata", {}))
    labels = meta.setdefault("labels", {})
    labels.update({
        "batch.kubernetes.io/controller-uid": job_uid,
        "batch.kubernetes.io/job-name": jm["name"],
        "controller-uid": job_uid,
        "job-name": jm["name"],
    })
    meta["generateName"] = jm["name"] + "-"
    meta["namespace"] = jm["namespace"]
    meta["ownerReferences"] = [{
        "apiVersion": "batch/v1", "kind": "Job", "name": jm["name"],
        "uid": job_uid, "controller": True, "blockOwnerDeletion": True,
    }]
    meta.pop("name", None)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": tmpl["spec"]}


def gpu_container(obj: dict, index: int = 0) -> dict:
    spec = obj["spec"]["template"]["spec"] if obj["kind"] == "Job" else obj["spec"]
    return spec["containers"][index]


def pod_spec(obj: dict) -> dict:
    return obj["spec"]["template"]["spec"] if obj["kind"] == "Job" else obj["spec"]


def pod_meta(obj: dict) -> dict:
    return obj["spec"]["template"]["metadata"] if obj["kind"] == "Job" else obj["metadata"]


def env_of(c: dict) -> dict:
    return {e["name"]: e.get("value") for e in c.get("env", [])}
