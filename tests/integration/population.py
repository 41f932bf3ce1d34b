"""Generated Pods and Jobs for fakekube.py: a cluster of N objects that costs
the fake next to no memory (bench/feed-memory.sh, docs/benchmarks.md "Watch
memory").

A `Population` is one kind's objects, numbered 0..total-1 and made on
demand from a template, so a list of 100,000 Pods is 450 MiB of JSON that is
never held at once.  The objects are shaped as the API shows running ones:
managedFields of the client that created them and of the kubelet (or the
Job controller) that writes their status, a status with conditions and
container states, the defaulted fields of the apiserver.  Sizes (compact
JSON): a plain Pod 4.7 KiB, a GPU Pod 6.8 KiB, a plain Job 2.9 KiB, a GPU
Job 3.3 KiB.

Of the `total`, `gpu` hold nvidia.com/gpu, in the tenant namespaces of
policy/examples/gpu-cluster.yaml, and carry gpugate's label
gpugate.io/tenant (they went through /mutate); the others are in namespaces
no tenant owns and carry no gpugate label.  A GPU Pod is a train-small of 2
GPUs (h100-80gb); a GPU Job a train-large gang of 4 pods x 8 GPUs.

Objects are in key order ("namespace/name", the order in which the
apiserver lists them): each namespace holds one block of consecutive
numbers, and names carry the number zero-padded.
"""

from __future__ import annotations

import bisect
import json
import re
from typing import Iterator

SELECTOR_KEY = "gpugate.io/tenant"

# Namespaces of tenants of policy/examples/gpu-cluster.yaml (research:
# research and research-*; product: product-inference, product-staging).
TENANT_NAMESPACES = {
    "research": "research", "research-nlp": "research", "research-vision": "research",
    "product-inference": "product", "product-staging": "product",
}
# Namespaces no tenant owns, for everything else.
PLAIN_NAMESPACES = [f"apps-{k:02d}" for k in range(40)]

TS = "2026-11-29T09:11:27Z"


def _fields(*paths: str) -> dict:
    """managedFields' fieldsV1 from "f:a/f:b" paths (each level below the
    top gets its "." marker when it has children)."""
    root: dict = {}
    for p in paths:
        node = root
        # "/" also appears in label keys: a new level starts with "f:" or "k:".
        for part in re.split(r"/(?=[fk]:)", p):
            node = node.setdefault(part, {})
    def mark(d: dict) -> dict:
        out = {".": {}} if d else {}
        for k, v in d.items():
            out[k] = mark(v) if v else {}
        return out
    return {k: {kk: mark(vv) for kk, vv in v.items()} for k, v in root.items()}


def _mf(manager: str, api: str, fields: dict, subresource: str | None = None) -> dict:
    m = {"manager": manager, "operation": "Update", "apiVersion": api, "time": TS,
         "fieldsType": "FieldsV1", "fieldsV1": fields}
    if subresource:
        m["subresource"] = subresource
    return m


def _conditions(ready: str) -> list[dict]:
    return [{"type": t, "status": ready if t in ("Ready", "ContainersReady") else "True",
             "lastProbeTime": None,
             "lastTransitionTime": "%(t)s" if t == "Ready" else TS}
            for t in ("PodReadyToStartContainers", "Initialized", "Ready",
                      "ContainersReady", "PodScheduled")]


def _kubelet_fields(container: str) -> dict:
    conds = [f'f:status/f:conditions/k:{{"type":"{t}"}}/{f}'
             for t in ("ContainersReady", "Initialized", "PodReadyToStartContainers",
                       "PodScheduled", "Ready")
             for f in ("f:lastProbeTime", "f:lastTransitionTime", "f:status", "f:type")]
    return _fields(*conds, "f:status/f:containerStatuses", "f:status/f:hostIP",
                   "f:status/f:hostIPs", "f:status/f:phase", "f:status/f:podIP",
                   'f:status/f:podIPs/k:{"ip":"%(podip)s"}/f:ip', "f:status/f:startTime")


def _sa_volume(suffix: str) -> dict:
    return {"name": f"kube-api-access-{suffix}", "projected": {"sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt",
                       "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {
            "apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}],
        "defaultMode": 420}}


def _container_status(name: str, image: str, image_id: str) -> dict:
    return {"name": name, "state": {"running": {"startedAt": TS}}, "lastState": {},
            "ready": True, "restartCount": 0, "image": image,
            "imageID": f"{image_id}@sha256:{'4f' * 32}",
            "containerID": "containerd://%(cid)s", "started": True}


def _pod_status(container: dict, qos: str) -> dict:
    return {"phase": "%(phase)s", "conditions": _conditions("True"),
            "hostIP": "%(hostip)s", "hostIPs": [{"ip": "%(hostip)s"}],
            "podIP": "%(podip)s", "podIPs": [{"ip": "%(podip)s"}], "startTime": TS,
            "containerStatuses": [container], "qosClass": qos}


# What the apiserver adds to every Pod's spec.
_POD_DEFAULTS = {
    "priority": 0, "enableServiceLinks": True, "preemptionPolicy": "PreemptLowerPriority"}
_NODE_TOLERATIONS = [
    {"key": f"node.kubernetes.io/{t}", "operator": "Exists", "effect": "NoExecute",
     "tolerationSeconds": 300} for t in ("not-ready", "unreachable")]


def _meta(labels: dict, annotations: dict | None = None, **more) -> dict:
    m = {"name": "%(name)s", "namespace": "%(ns)s", "uid": "%(uid)s",
         "resourceVersion": "%(rv)s", "generation": 1, "creationTimestamp": TS,
         "labels": labels}
    if annotations:
        m["annotations"] = annotations
    m.update(more)
    return m


PLAIN_POD = {
    "kind": "Pod", "apiVersion": "v1",
    "metadata": _meta(
        {"app.kubernetes.io/name": "checkout", "pod-template-hash": "7d4b9c5f8"},
        None,
        generateName="checkout-7d4b9c5f8-",
        ownerReferences=[{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                          "name": "checkout-7d4b9c5f8",
                          "uid": "0c3e5a7b-1d2f-4e6a-8b9c-0d1e2f3a4b5c",
                          "controller": True, "blockOwnerDeletion": True}],
        managedFields=[
            _mf("kube-controller-manager", "v1", _fields(
                "f:metadata/f:generateName",
                "f:metadata/f:labels/f:app.kubernetes.io/name",
                "f:metadata/f:labels/f:pod-template-hash",
                'f:metadata/f:ownerReferences/k:{"uid":"0c3e5a7b-1d2f-4e6a-8b9c-0d1e2f3a4b5c"}',
                'f:spec/f:containers/k:{"name":"app"}/f:image',
                'f:spec/f:containers/k:{"name":"app"}/f:imagePullPolicy',
                'f:spec/f:containers/k:{"name":"app"}/f:name',
                'f:spec/f:containers/k:{"name":"app"}/f:ports/'
                'k:{"containerPort":8080,"protocol":"TCP"}/f:containerPort',
                'f:spec/f:containers/k:{"name":"app"}/f:resources/f:limits/f:memory',
                'f:spec/f:containers/k:{"name":"app"}/f:resources/f:requests/f:cpu',
                'f:spec/f:containers/k:{"name":"app"}/f:resources/f:requests/f:memory',
                'f:spec/f:containers/k:{"name":"app"}/f:terminationMessagePath',
                "f:spec/f:dnsPolicy", "f:spec/f:enableServiceLinks",
                "f:spec/f:restartPolicy", "f:spec/f:schedulerName",
                "f:spec/f:securityContext", "f:spec/f:terminationGracePeriodSeconds")),
            _mf("kubelet", "v1", _kubelet_fields("app"), "status"),
        ]),
    "spec": {
        "volumes": [_sa_volume("zw6rh")],
        "containers": [{
            "name": "app", "image": "registry.example.com/shop/checkout:3.14.2",
            "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
            "resources": {"limits": {"memory": "512Mi"},
                          "requests": {"cpu": "250m", "memory": "256Mi"}},
            "volumeMounts": [{"name": "kube-api-access-zw6rh", "readOnly": True,
                              "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"}],
        "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst", "serviceAccountName": "default",
        "serviceAccount": "default", "nodeName": "%(node)s", "securityContext": {},
        "schedulerName": "default-scheduler", "tolerations": _NODE_TOLERATIONS,
        **_POD_DEFAULTS},
    "status": _pod_status(_container_status(
        "app", "registry.example.com/shop/checkout:3.14.2",
        "registry.example.com/shop/checkout"), "Burstable"),
}

_TRAINER_FIELDS = [f'f:spec/f:containers/k:{{"name":"trainer"}}/{f}' for f in (
    "f:args", "f:command", 'f:env/k:{"name":"DATA_DIR"}/f:value',
    'f:env/k:{"name":"NCCL_DEBUG"}/f:value', 'f:env/k:{"name":"OMP_NUM_THREADS"}/f:value',
    'f:env/k:{"name":"WANDB_PROJECT"}/f:value', "f:image", "f:imagePullPolicy", "f:name",
    'f:ports/k:{"containerPort":9100,"protocol":"TCP"}/f:containerPort', "f:resources",
    "f:terminationMessagePath", "f:terminationMessagePolicy",
    'f:volumeMounts/k:{"mountPath":"/data"}/f:readOnly',
    'f:volumeMounts/k:{"mountPath":"/dev/shm"}/f:name',
    'f:volumeMounts/k:{"mountPath":"/etc/train"}/f:name', "f:workingDir")]

GPU_POD = {
    "kind": "Pod", "apiVersion": "v1",
    "metadata": _meta(
        {"app.kubernetes.io/name": "resnet-sweep",
         "app.kubernetes.io/part-of": "vision-experiments",
         "gpugate.io/class": "train-small", "gpugate.io/flavor": "h100-80gb",
         "gpugate.io/gpus": "2", "gpugate.io/preemptible": "true",
         SELECTOR_KEY: "%(tenant)s", "team": "vision"},
        {"gpugate.io/decision": "train-small: 2 x h100-80gb for tenant %(tenant)s; 2/32 in use",
         "research.example.com/experiment": "resnet50-lr-sweep-0042",
         "research.example.com/owner": "alice@example.com"},
        managedFields=[
            _mf("kubectl-create", "v1", _fields(
                "f:metadata/f:annotations/f:research.example.com/experiment",
                "f:metadata/f:annotations/f:research.example.com/owner",
                "f:metadata/f:labels/f:app.kubernetes.io/name",
                "f:metadata/f:labels/f:app.kubernetes.io/part-of",
                "f:metadata/f:labels/f:gpugate.io/class", "f:metadata/f:labels/f:gpugate.io/gpus",
                "f:metadata/f:labels/f:team", *_TRAINER_FIELDS,
                "f:spec/f:dnsPolicy", "f:spec/f:enableServiceLinks", "f:spec/f:restartPolicy",
                "f:spec/f:schedulerName", "f:spec/f:securityContext",
                "f:spec/f:terminationGracePeriodSeconds",
                'f:spec/f:volumes/k:{"name":"config"}/f:configMap/f:name',
                'f:spec/f:volumes/k:{"name":"data"}/f:persistentVolumeClaim/f:claimName',
                'f:spec/f:volumes/k:{"name":"dshm"}/f:emptyDir/f:medium')),
            _mf("kubelet", "v1", _kubelet_fields("trainer"), "status"),
        ]),
    "spec": {
        "volumes": [
            {"name": "data", "persistentVolumeClaim": {"claimName": "imagenet", "readOnly": True}},
            {"name": "config", "configMap": {"name": "resnet-sweep-config", "defaultMode": 420}},
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}},
            _sa_volume("qmr49"),
            {"name": "gpugate-checkpoint",
             "persistentVolumeClaim": {"claimName": "%(tenant)s-checkpoints"}}],
        "containers": [{
            "name": "trainer", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
            "command": ["python", "train.py"],
            "args": ["--config", "/etc/train/config.yaml", "--resume-from", "/checkpoint",
                     "--epochs", "90"],
            "workingDir": "/workspace",
            "ports": [{"name": "metrics", "containerPort": 9100, "protocol": "TCP"}],
            "env": [{"name": "NCCL_DEBUG", "value": "WARN"},
                    {"name": "OMP_NUM_THREADS", "value": "12"},
                    {"name": "WANDB_PROJECT", "value": "resnet-sweep"},
                    {"name": "DATA_DIR", "value": "/data/imagenet"},
                    {"name": "POD_NAME", "valueFrom": {"fieldRef": {
                        "apiVersion": "v1", "fieldPath": "metadata.name"}}},
                    {"name": "GPUGATE_CHECKPOINT_DIR", "value": "/checkpoint"}],
            "resources": {"limits": {"cpu": "12", "memory": "120Gi", "nvidia.com/gpu": "2"},
                          "requests": {"cpu": "12", "memory": "120Gi", "nvidia.com/gpu": "2"}},
            "volumeMounts": [
                {"name": "data", "readOnly": True, "mountPath": "/data"},
                {"name": "config", "mountPath": "/etc/train"},
                {"name": "dshm", "mountPath": "/dev/shm"},
                {"name": "kube-api-access-qmr49", "readOnly": True,
                 "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"},
                {"name": "gpugate-checkpoint", "mountPath": "/checkpoint"}],
            "lifecycle": {"preStop": {"exec": {"command": [
                "/bin/sh", "-c", "kill -TERM 1; sleep 30"]}}},
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"}],
        "restartPolicy": "Always", "terminationGracePeriodSeconds": 600,
        "dnsPolicy": "ClusterFirst", "serviceAccountName": "default",
        "serviceAccount": "default", "nodeName": "%(node)s",
        "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        "securityContext": {}, "schedulerName": "default-scheduler",
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                         "effect": "NoSchedule"}, *_NODE_TOLERATIONS],
        **_POD_DEFAULTS},
    "status": _pod_status(_container_status(
        "trainer", "nvcr.io/nvidia/pytorch:24.05-py3", "nvcr.io/nvidia/pytorch"), "Guaranteed"),
}


def _job(labels: dict, annotations: dict | None, template_labels: dict, container: dict,
         pod_spec_more: dict, parallelism: int, status: dict, status_fields: tuple) -> dict:
    c = f'f:spec/f:template/f:spec/f:containers/k:{{"name":"{container["name"]}"}}'
    return {
        "kind": "Job", "apiVersion": "batch/v1",
        "metadata": _meta(labels, annotations, managedFields=[
            _mf("kubectl-create", "batch/v1", _fields(
                *(f"f:metadata/f:labels/f:{k}" for k in labels if not k.startswith("gpugate.io/")),
                "f:spec/f:backoffLimit", "f:spec/f:completionMode", "f:spec/f:completions",
                "f:spec/f:manualSelector", "f:spec/f:parallelism",
                "f:spec/f:podReplacementPolicy", "f:spec/f:suspend",
                *(f"f:spec/f:template/f:metadata/f:labels/f:{k}" for k in template_labels
                  if not k.startswith(("gpugate.io/", "batch.", "controller-uid", "job-name"))),
                f"{c}/f:image", f"{c}/f:command", f"{c}/f:resources",
                "f:spec/f:template/f:spec/f:dnsPolicy", "f:spec/f:template/f:spec/f:restartPolicy",
                "f:spec/f:template/f:spec/f:schedulerName",
                "f:spec/f:template/f:spec/f:terminationGracePeriodSeconds")),
            _mf("kube-controller-manager", "batch/v1", _fields(*status_fields), "status"),
        ]),
        "spec": {
            "parallelism": parallelism, "completions": parallelism, "backoffLimit": 0,
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "%(uid)s"}},
            "manualSelector": False,
            "template": {
                "metadata": {"labels": {**template_labels,
                                        "batch.kubernetes.io/controller-uid": "%(uid)s",
                                        "batch.kubernetes.io/job-name": "%(name)s",
                                        "controller-uid": "%(uid)s", "job-name": "%(name)s"}},
                "spec": {"containers": [container], "restartPolicy": "Never",
                         "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
                         "securityContext": {}, "schedulerName": "default-scheduler",
                         **pod_spec_more}},
            "completionMode": "Indexed", "suspend": False,
            "podReplacementPolicy": "TerminatingOrFailed"},
        "status": status,
    }


PLAIN_JOB = _job(
    {"app.kubernetes.io/name": "nightly-etl", "team": "data"},
    {"batch.kubernetes.io/cronjob-scheduled-timestamp": TS},
    {"app.kubernetes.io/name": "nightly-etl"},
    {"name": "etl", "image": "registry.example.com/data/etl:2.3.0",
     "command": ["python", "-m", "etl.run", "--date", "2026-11-28"],
     "env": [{"name": "WAREHOUSE_URL", "value": "postgres://warehouse.data.svc:5432/dw"}],
     "resources": {"limits": {"memory": "2Gi"}, "requests": {"cpu": "1", "memory": "2Gi"}},
     "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
     "imagePullPolicy": "IfNotPresent"},
    {}, 1,
    {"conditions": [
        {"type": "SuccessCriteriaMet", "status": "True", "lastProbeTime": TS,
         "lastTransitionTime": TS},
        {"type": "Complete", "status": "True", "lastProbeTime": TS, "lastTransitionTime": TS}],
     "startTime": TS, "completionTime": TS, "succeeded": 1, "terminating": 0,
     "completedIndexes": "0", "uncountedTerminatedPods": {}, "ready": 0},
    ('f:status/f:conditions', 'f:status/f:completionTime', 'f:status/f:completedIndexes',
     'f:status/f:ready', 'f:status/f:startTime', 'f:status/f:succeeded',
     'f:status/f:terminating', 'f:status/f:uncountedTerminatedPods'))

GPU_JOB = _job(
    {"gpugate.io/class": "train-large", "gpugate.io/flavor": "h100-80gb",
     "gpugate.io/gang": "g-386c3c1c0a9097f0", SELECTOR_KEY: "%(tenant)s", "team": "llm"},
    {"gpugate.io/decision":
     "train-large: 4 pods x 8 x h100-80gb for tenant %(tenant)s; 32/32 in use"},
    {"app.kubernetes.io/name": "llm-pretrain", "gpugate.io/class": "train-large",
     "gpugate.io/flavor": "h100-80gb", "gpugate.io/gang": "g-386c3c1c0a9097f0",
     SELECTOR_KEY: "%(tenant)s"},
    {"name": "trainer", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
     "command": ["torchrun", "--nnodes=4", "--nproc-per-node=8", "train.py"],
     "env": [{"name": "NCCL_DEBUG", "value": "WARN"}, {"name": "NCCL_IB_DISABLE", "value": "0"}],
     "resources": {"limits": {"nvidia.com/gpu": "8"},
                   "requests": {"cpu": "96", "memory": "1000Gi"}},
     "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
     "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
     "imagePullPolicy": "IfNotPresent"},
    {"volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
     "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
     "affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
         {"labelSelector": {"matchLabels": {"gpugate.io/gang": "g-386c3c1c0a9097f0"}},
          "topologyKey": "nvidia.com/gpu.clique"}]}},
     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
     "priorityClassName": "training"},
    4,
    {"startTime": TS, "active": 4, "ready": 4, "terminating": 0,
     "uncountedTerminatedPods": {}, "conditions": "%(jobcond)s"},
    ('f:status/f:active', 'f:status/f:ready', 'f:status/f:startTime',
     'f:status/f:terminating', 'f:status/f:uncountedTerminatedPods'))

# What a finished GPU Job's conditions are (the marker's JSON, quoted out).
_COMPLETE = json.dumps([{"type": "Complete", "status": "True", "lastProbeTime": TS,
                         "lastTransitionTime": TS}], separators=(",", ":"))


def _template(obj: dict) -> str:
    text = json.dumps(obj, separators=(",", ":"))
    assert "%" not in text.replace("%(", ""), "a stray % in a template"
    # The conditions of a GPU Job are a JSON value, not a string.
    return text.replace('"%(jobcond)s"', "%(jobcond)s")


_TEMPLATES = {("pods", False): _template(PLAIN_POD), ("pods", True): _template(GPU_POD),
              ("jobs", False): _template(PLAIN_JOB), ("jobs", True): _template(GPU_JOB)}
_NAMES = {("pods", False): "checkout-7d4b9c5f8-%06d", ("pods", True): "train-%06d",
          ("jobs", False): "nightly-etl-%06d", ("jobs", True): "pretrain-%06d"}


class Population:
    """`total` objects of `kind` ("pods" or "jobs"), `gpu` of them holding
    GPUs; object i has resourceVersion first_rv + i until modified."""

    def __init__(self, kind: str, total: int, gpu: int, first_rv: int):
        if kind not in ("pods", "jobs") or not 0 <= gpu <= total:
            raise ValueError(f"population: bad kind or counts ({kind}, {total}, {gpu})")
        self.kind = kind
        self.total = total
        self.gpu = gpu
        self.first_rv = first_rv
        self.modified: dict[int, int] = {}   # i -> resourceVersion
        self.finished: set[int] = set()      # Succeeded pods, Complete Jobs
        blocks = []
        for names, count, is_gpu in ((PLAIN_NAMESPACES, total - gpu, False),
                                     (sorted(TENANT_NAMESPACES), gpu, True)):
            each, extra = divmod(count, len(names))
            for k, ns in enumerate(names):
                n = each + (1 if k < extra else 0)
                if n:
                    if n > 999999:
                        raise ValueError("population: over 999,999 objects in a namespace")
                    blocks.append((ns, n, is_gpu))
        # The apiserver's order: by key, "namespace/name".
        blocks.sort(key=lambda b: b[0] + "/")
        self._blocks = []  # (start, ns, count, gpu)
        start = 0
        for ns, n, is_gpu in blocks:
            self._blocks.append((start, ns, n, is_gpu))
            start += n
        self._starts = [b[0] for b in self._blocks]

    def _block(self, i: int) -> tuple[int, str, int, bool]:
        return self._blocks[bisect.bisect_right(self._starts, i) - 1]

    def key(self, i: int) -> str:
        start, ns, _, is_gpu = self._block(i)
        return f"{ns}/{_NAMES[self.kind, is_gpu] % (i - start)}"

    def labeled(self, i: int) -> bool:
        """It carries gpugate.io/tenant (it holds GPUs)."""
        return self._block(i)[3]

    def gpu_indexes(self) -> Iterator[int]:
        for start, _, n, is_gpu in self._blocks:
            if is_gpu:
                yield from range(start, start + n)

    def encode(self, i: int, rv: int | None = None, finished: bool | None = None) -> bytes:
        """Object i as the API shows it (compact JSON), at resourceVersion rv
        (default: its current one)."""
        start, ns, _, is_gpu = self._block(i)
        if rv is None:
            rv = self.modified.get(i, self.first_rv + i)
        if finished is None:
            finished = i in self.finished
        node = i // 30
        fields = {
            "name": _NAMES[self.kind, is_gpu] % (i - start), "ns": ns,
            "uid": "6f1c2a9e-%04x-4d2b-9a1e-%012x" % (1 if self.kind == "pods" else 2, i),
            "rv": rv, "tenant": TENANT_NAMESPACES.get(ns, ""),
            "node": f"node-{node:05d}", "hostip": f"10.0.{node // 250}.{node % 250 + 1}",
            "podip": f"10.{64 + i // 65000}.{i // 250 % 260}.{i % 250 + 1}",
            "cid": "%064x" % (i * 2654435761 + 1), "t": TS,
            "phase": "Succeeded" if finished else "Running",
            "jobcond": _COMPLETE if finished else "[]",
        }
        return (_TEMPLATES[self.kind, is_gpu] % fields).encode()

    def first_at(self, key: str) -> int:
        """The number of the first object whose key is >= key."""
        return bisect.bisect_left(range(self.total), key, key=self.key)

    def iter_from(self, key: str, labeled_only: bool) -> Iterator[tuple[str, int]]:
        """(key, number) of the objects from key on, in key order."""
        i0 = self.first_at(key)
        for start, ns, n, is_gpu in self._blocks:
            if start + n <= i0 or (labeled_only and not is_gpu):
                continue
            fmt = _NAMES[self.kind, is_gpu]
            for i in range(max(start, i0), start + n):
                yield f"{ns}/{fmt % (i - start)}", i

    def count_from(self, key: str, labeled_only: bool) -> int:
        i0 = self.first_at(key)
        return sum(start + n - max(start, i0) for start, _, n, is_gpu in self._blocks
                   if start + n > i0 and (is_gpu or not labeled_only))

    def picks(self, count: int) -> list[int]:
        """count numbers spread evenly over the population."""
        count = min(count, self.total)
        return [k * self.total // count for k in range(count)] if count else []
