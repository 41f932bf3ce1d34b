"""The end-to-end stack: a local control plane (cluster.sh), gpugate serving
against it in API mode, and the webhook configurations that connect them.

Used by conftest.py (the pytest fixtures) and by demo.sh through the small
command line at the bottom:

    python3 tests/e2e/gpugate_e2e.py up [--fleet] DIR   # cluster + gpugate + webhooks
                                                        # (+ EXAMPLE_FLEET, Ready)
    python3 tests/e2e/gpugate_e2e.py down DIR   # stop gpugate (SIGTERM), cluster down

Four gpugate processes serve one cluster, each with its own policy and its
own pair of webhook configurations:

  - "example": policy/examples/gpu-cluster.yaml, for every namespace except
    kube-system, gpugate and the namespaces labelled e2e.gpugate.io/policy
    with the name of another process;
  - "quota": QUOTA_POLICY (small numbers), only for namespaces labelled
    e2e.gpugate.io/policy=quota;
  - "raw": RAW_POLICY (rawGpuRequests: allow, a global setting; two
    flavors share nvidia.com/gpu), only for namespaces labelled
    e2e.gpugate.io/policy=raw;
  - "dra": DRA_POLICY (a class served through DRA), only for namespaces
    labelled e2e.gpugate.io/policy=dra.

All register their webhooks as mutate.gpugate.io and validate.gpugate.io
(names need only be unique within one configuration), so users see the
same messages as in a real installation.  The namespace sets of the
policies are disjoint, so no process counts another's workloads.

test_integrity.py attacks gpugate as a tenant bound to the built-in `edit`
ClusterRole (Stack.tenant_kubectl) and checks, after every scenario, that
what gpugate counts is what the tenant's pods hold, computed here from the
pods and Jobs themselves (assert_invariant).

test_replicas.py (issue #14) starts, on demand (Stack.start_replicas), K
more gpugate processes serving one policy (REPLICAS_POLICY, namespaces
labelled e2e.gpugate.io/policy=replicas) behind a round-robin TCP balancer
of this file (Balancer), registered once with the balancer's url, and
races concurrent creates through the apiserver (Api) for the last units of
a quota.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import re
import shlex
import signal
import ssl
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CLUSTER_SH = HERE / "cluster.sh"
EXAMPLE_POLICY = ROOT / "policy" / "examples" / "gpu-cluster.yaml"


def with_success_lines(text: str) -> str:
    """A policy's text with settings.admissionWarnings: all.  The stack's
    gpugates run their policies so: every admitted workload then also gets
    its success line ("gpugate: train-large -> 8 x h100-80gb for tenant
    research (8/32 in use)"), which the tests read as their probe of what
    gpugate counts, and wait_webhooks() as the sign that it is called.  The
    default (problems) is tested with gpugates of their own
    (test_checkpoint_claims.py)."""
    assert "\nsettings:\n" in text
    return text.replace("\nsettings:\n", "\nsettings:\n  admissionWarnings: all\n", 1)

SANITIZER_MARKERS = (
    "ERROR: AddressSanitizer",
    "ERROR: LeakSanitizer",
    "ERROR: ThreadSanitizer",
    "ERROR: MemorySanitizer",
    "runtime error:",
    "AddressSanitizer:DEADLYSIGNAL",
    "UndefinedBehaviorSanitizer",
)

POLICY_LABEL = "e2e.gpugate.io/policy"

# Small numbers that make quota scenarios easy to follow.  One tenant per
# scenario, so that the tests do not depend on each other's usage.
# The flavor and the first class of both test policies.
H100_FLAVOR_AND_CLASS_GPU = """\
flavors:
  - name: h100-80gb
    resource: nvidia.com/gpu
    sharing: exclusive
    nodeSelector: ["nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3"]
    tolerations:
      - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
    gpusPerNode: 8
classes:
  - name: gpu
    description: 1 to 8 H100, not preemptible
    flavor: h100-80gb
    gpus: 1
    maxGpus: 8
"""

QUOTA_POLICY = """\
version: 1
settings:
  admissionWarnings: all
  rawGpuRequests: reject
  mode: enforce
""" + H100_FLAVOR_AND_CLASS_GPU + """\
  - name: gpu8
    description: 8 H100
    flavor: h100-80gb
    gpus: 8
  # test_fleet.py: a Job's pods in one NVLink domain where the scheduler can
  # (podAffinity preferred), anywhere else otherwise.
  - name: gpu-near
    description: 1 to 8 H100, a Job's pods in one NVLink domain when they fit
    flavor: h100-80gb
    gpus: 1
    maxGpus: 8
    topology: {key: nvidia.com/gpu.clique, mode: preferred}
tenants:
  # borrowing: alpha borrows up to 4 beyond its 8; beta lends up to 4.
  - name: alpha
    namespaces: [alpha]
    cohort: lab
    quota:
      - {flavor: h100-80gb, nominal: 8, borrowingLimit: 4}
  - name: beta
    namespaces: [beta]
    cohort: lab
    quota:
      - {flavor: h100-80gb, nominal: 8, lendingLimit: 4}
  # fill, deny, Succeeded, admit again: no cohort.
  - name: solo
    namespaces: [solo]
    quota:
      - {flavor: h100-80gb, nominal: 4}
  # Jobs: gangs counted once, released on delete.
  - name: batch
    namespaces: [batch]
    quota:
      - {flavor: h100-80gb, nominal: 16}
  # dry runs reserve nothing.
  - name: dry
    namespaces: [dry]
    quota:
      - {flavor: h100-80gb, nominal: 4}
  # usage rebuilt from the API after a restart.
  - name: durable
    namespaces: [durable]
    quota:
      - {flavor: h100-80gb, nominal: 16}
  # warn mode: over quota is admitted with a warning.
  - name: lenient
    namespaces: [lenient]
    mode: warn
    quota:
      - {flavor: h100-80gb, nominal: 2}
  # test_integrity.py: mallory attacks (as a ServiceAccount bound to edit),
  # victim owns the Job mallory's pods name; loose (warn) and quiet (audit)
  # admit what enforce would deny, and must count it all the same.
  - name: mallory
    namespaces: [mallory]
    quota:
      - {flavor: h100-80gb, nominal: 8}
  - name: victim
    namespaces: [victim]
    quota:
      - {flavor: h100-80gb, nominal: 8}
  - name: loose
    namespaces: [loose]
    mode: warn
    quota:
      - {flavor: h100-80gb, nominal: 8}
  - name: quiet
    namespaces: [quiet]
    mode: audit
    quota:
      - {flavor: h100-80gb, nominal: 8}
  # test_fleet.py: preferred topology on the fake fleet (3 whole H100 nodes).
  - name: near
    namespaces: [near]
    quota:
      - {flavor: h100-80gb, nominal: 24}
  # test_reclaim.py (#17): lent GPUs come back.  owner lends all of its 8
  # and takes them back (Any, the default); taker lives on borrowed quota.
  # keeper (Never) waits instead while holder borrows from it.
  - name: owner
    namespaces: [owner]
    cohort: rc
    quota:
      - {flavor: h100-80gb, nominal: 8}
  - name: taker
    namespaces: [taker]
    cohort: rc
    quota:
      - {flavor: h100-80gb, nominal: 0}
  - name: keeper
    namespaces: [keeper]
    cohort: rn
    reclaimWithinCohort: Never
    quota:
      - {flavor: h100-80gb, nominal: 8}
  - name: holder
    namespaces: [holder]
    cohort: rn
    quota:
      - {flavor: h100-80gb, nominal: 0}
  # modest (LowerPriority) takes back only from eager's workloads of lower
  # priority than its request (PriorityClasses the test creates).
  - name: modest
    namespaces: [modest]
    cohort: rl
    reclaimWithinCohort: LowerPriority
    quota:
      - {flavor: h100-80gb, nominal: 8}
  - name: eager
    namespaces: [eager]
    cohort: rl
    quota:
      - {flavor: h100-80gb, nominal: 0}
  # test_kueue.py (#18): kq lets Kueue own its quota and queues its Jobs in
  # kq-queue; gq keeps gpugate's quota for the Jobs Kueue queues.
  - name: kq
    namespaces: [kq]
    kueue: {quotaOwner: kueue, localQueue: kq-queue}
    quota:
      - {flavor: h100-80gb, nominal: 4}
  - name: gq
    namespaces: [gq]
    quota:
      - {flavor: h100-80gb, nominal: 4}
checkpoint:
  # test_reclaim.py: a victim that does not report is released after this.
  timeoutSeconds: 12
  # test_attack_reclaim.py (#26): a released pod still there this long after
  # is deleted; a preemptible workload's grace period is exactly this.
  gracePeriodSeconds: 15
  mountPath: /checkpoint
  preStop: ["/bin/sh", "-c", "kill -TERM 1; sleep 30"]
  env: ["GPUGATE_CHECKPOINT_DIR=/checkpoint"]
"""

# rawGpuRequests is a global setting: a Pod asking for nvidia.com/gpu
# without a class (init containers, sidecars) is admitted and charged only
# under a policy that allows it.
# a100-80gb shares nvidia.com/gpu with h100-80gb (#26): a raw request must
# select one of them by its nodeSelector (RAW_H100 selects h100-80gb), and
# rawgpu has no A100 quota.  h100-80gb also takes DRA's whole GPUs
# (deviceClassNames, as in the example policy): test_dra_doors.py asks for
# them through deviceclass.resource.kubernetes.io/gpu.nvidia.com.
RAW_POLICY = """\
version: 1
settings:
  admissionWarnings: all
  rawGpuRequests: allow
  mode: enforce
flavors:
  - name: a100-80gb
    resource: nvidia.com/gpu
    sharing: exclusive
    nodeSelector: ["nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB"]
    gpusPerNode: 8
""" + H100_FLAVOR_AND_CLASS_GPU.replace("flavors:\n", "", 1).replace(
    "    gpusPerNode: 8\nclasses:",
    "    gpusPerNode: 8\n    deviceClassNames: [gpu.nvidia.com]\nclasses:", 1) + """\
tenants:
  - name: rawgpu
    namespaces: [rawgpu]
    quota:
      - {flavor: h100-80gb, nominal: 8}
"""
RAW_H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}

# test_replicas.py (issue #14): one tenant whose last units K replicas
# compete for, and one with room for a latency measurement.  Served only by
# the replicas (Stack.start_replicas), in namespaces labelled
# e2e.gpugate.io/policy=replicas.
REPLICAS_POLICY = """\
version: 1
settings:
  admissionWarnings: all
  rawGpuRequests: reject
  mode: enforce
""" + H100_FLAVOR_AND_CLASS_GPU + """\
tenants:
  - name: race
    namespaces: [race]
    quota:
      - {flavor: h100-80gb, nominal: 8}
  - name: race-bench
    namespaces: [race-bench]
    quota:
      - {flavor: h100-80gb, nominal: 1000}
  # test_leader_attacks.py (issue #32): one cohort of two tenants, 8 + 8,
  # each free to borrow all the other leaves unused, so that the cohort
  # holds at most 16 and either tenant at most 16.  Never reclaim: a
  # lender waits instead of preempting borrowers, so the cohort never
  # holds more than 16, not even for the moment a reclaim takes.
  - name: pair-a
    namespaces: [pair-a]
    cohort: pair
    reclaimWithinCohort: Never
    quota:
      - {flavor: h100-80gb, nominal: 8}
  - name: pair-b
    namespaces: [pair-b]
    cohort: pair
    reclaimWithinCohort: Never
    quota:
      - {flavor: h100-80gb, nominal: 8}
"""

# The example policy's checkpoint claims ("{tenant}-checkpoints"), which a
# cluster admin creates in each namespace of a tenant with preemptible work
# (docs/operations.md): ReadWriteMany, each bound to a PersistentVolume of
# its own (static provisioning: cluster.sh runs no persistent-volume
# controller, so what it would write is written here: the bind-completed
# annotation the scheduler checks, phase Bound).  Without them gpugate warns
# at admission, and the scheduler keeps the pods Pending.
CHECKPOINT_CLAIMS = {"research": "research-checkpoints",
                     "research-jobs": "research-checkpoints",
                     "sandbox-1": "sandbox-checkpoints",
                     "product-inference": "product-checkpoints"}


def create_checkpoint_claims(k: "Kubectl") -> None:
    items = []
    for ns, claim in CHECKPOINT_CLAIMS.items():
        pv = f"ckpt-{ns}"
        items += [
            {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv},
             "spec": {"capacity": {"storage": "100Gi"}, "accessModes": ["ReadWriteMany"],
                      "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "",
                      "hostPath": {"path": f"/checkpoint/{ns}"},
                      "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                   "namespace": ns, "name": claim}}},
            {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
             "metadata": {"name": claim, "namespace": ns,
                          "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
             "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "",
                      "volumeName": pv, "resources": {"requests": {"storage": "100Gi"}}}}]
    k.apply({"apiVersion": "v1", "kind": "List", "items": items}).check()
    for ns, claim in CHECKPOINT_CLAIMS.items():
        k("patch", "pv", f"ckpt-{ns}", "--subresource=status", "--type=merge",
          "-p", json.dumps({"status": {"phase": "Bound"}})).check()
        k("patch", "pvc", claim, "-n", ns, "--subresource=status", "--type=merge",
          "-p", json.dumps({"status": {"phase": "Bound", "accessModes": ["ReadWriteMany"],
                                       "capacity": {"storage": "100Gi"}}})).check()


# Namespaces created at start-up, by the gpugate that serves them.
EXAMPLE_NAMESPACES = ["research", "research-jobs", "product-inference",
                      "sandbox-1", "no-tenant", "gpugate"]
QUOTA_NAMESPACES = ["alpha", "beta", "solo", "batch", "dry", "durable", "lenient",
                    "mallory", "victim", "loose", "quiet", "near", "owner", "taker",
                    "keeper", "holder", "modest", "eager", "kq", "gq"]
RAW_NAMESPACES = ["rawgpu"]

# test_dra_classes.py (issue #33 step 2-3): a class served through DRA (a
# flavor with a dra block), its templates kept by gpugate, on the KWOK
# fleet's DRA nodes (DraFleet).  Served by the "dra" gpugate, in namespaces
# labelled e2e.gpugate.io/policy=dra.  The devices the template asks for:
# driver gpu.nvidia.com, productName H100 (fleet.py's DRA slices; the test
# adds A100 devices beside them that it must never get).  test_dra_share.py
# (consumable capacity): class notebook of flavor l40s-share, tenant
# dra-share, on L40S devices that allow multiple allocations, published
# by that module on the same DRA nodes.
DRA_POLICY = """\
version: 1
settings:
  admissionWarnings: all
  rawGpuRequests: reject
  mode: enforce
flavors:
  - name: h100-dra
    sharing: exclusive
    nodeSelector: ["nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3"]
    tolerations:
      - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
    gpusPerNode: 8
    dra:
      deviceClassName: gpu.nvidia.com
      driver: gpu.nvidia.com
      attributes: ["productName=NVIDIA H100 80GB HBM3"]
      minCapacity: ["memory=80Gi"]
  - name: l40s-share
    sharing: time-slicing
    nodeSelector: ["fleet.gpugate.io/dra=gpu.nvidia.com"]
    tolerations:
      - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
    gpusPerNode: 32
    dra:
      deviceClassName: gpu.nvidia.com
      driver: gpu.nvidia.com
      attributes: ["productName=NVIDIA L40S"]
      sharedCapacity: {name: memory, perUnit: 12Gi, unitsPerDevice: 4}
classes:
  - name: train-dra
    description: 1 to 4 H100 through DRA
    flavor: h100-dra
    gpus: 1
    maxGpus: 4
  - name: notebook
    description: 1 to 4 shares of 12Gi of an L40S through DRA (consumable capacity)
    flavor: l40s-share
    gpus: 1
    maxGpus: 4
tenants:
  - name: dra
    namespaces: [dra-team]
    classes: [train-dra]
    quota:
      - {flavor: h100-dra, nominal: 8}
  - name: dra-share
    namespaces: [dra-share]
    classes: [notebook]
    quota:
      - {flavor: l40s-share, nominal: 10}
"""
DRA_NAMESPACES = ["dra-team", "dra-share"]
# Created by Stack.start_replicas; REPLICA_STORE_NAMESPACE is where a shared
# usage store may keep its objects (--namespace in GPUGATE_E2E_REPLICA_ARGS).
REPLICA_NAMESPACES = ["race", "race-bench", "pair-a", "pair-b"]
REPLICA_STORE_NAMESPACE = "gpugate-e2e"
# The processes that serve only the namespaces labelled with their name.
# "defaults": a gpugate with a policy as shipped, of a test of its own
# (test_checkpoint_claims.py).
# "gang": the gpugate of test_gang_start.py (its own policy, a class with
# gang: true).
# "health": the gpugate of test_health_loop.py (its own policy and fleet,
# the only one that runs the health controller: see GATE_ARGS).
# "idle": the gpugate of test_idle.py (its own policy with idle rules, its
# own fleet, the only one given a Prometheus: --prometheus-url).
LABELLED_POLICIES = ("quota", "raw", "dra", "replicas", "defaults", "gang", "health", "idle")

ASAN_DEFAULTS = "detect_leaks=1:abort_on_error=0:halt_on_error=1"
UBSAN_DEFAULTS = "print_stacktrace=1:halt_on_error=0"


def log(msg: str) -> None:
    print(f"e2e: {msg}", file=sys.stderr, flush=True)


# The two passes of the suite (run.sh): every module runs on a cluster
# without the workload-aware scheduling gates; the tests marked `was` run
# again on a GPUGATE_WAS=1 cluster (cluster.sh), so that the second pass
# costs only what needs it (a module says `pytestmark = pytest.mark.was`).
PASS_MARKERS = (
    "was: also run in the second pass, on a GPUGATE_WAS=1 cluster "
    "(workload-aware scheduling gates on)",
    "was_only: only in the GPUGATE_WAS=1 pass (needs Job spec.scheduling, "
    "PodGroup, Workload)",
    "plain_only: not in the GPUGATE_WAS=1 pass (needs a cluster without the gates)",
)


def was_pass() -> bool:
    """This pytest process runs the GPUGATE_WAS=1 pass (its cluster gets
    the gates from the same variable, cluster.sh)."""
    return os.environ.get("GPUGATE_WAS", "0") == "1"


def pass_name() -> str:
    return "GPUGATE_WAS=1" if was_pass() else "plain"


def selected(marker: Callable[[str], Any]) -> bool:
    """Whether a test with these markers (item.get_closest_marker) runs in
    this pass."""
    if was_pass():
        return ((marker("was") or marker("was_only")) is not None
                and marker("plain_only") is None)
    return marker("was_only") is None


def gpugate_bin() -> Path:
    b = Path(os.environ.get("GPUGATE_BIN") or ROOT / "build" / "gpugate")
    if not b.is_absolute():
        b = ROOT / b
    return b


def wait_until(what: str, check: Callable[[], Any], timeout: float = 30.0,
               interval: float = 0.2) -> Any:
    """Polls check() until it returns something truthy; returns it."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        last = check()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} "
                                 f"(last: {last!r})")
        time.sleep(interval)


# ---------------------------------------------------------------------------
# objects, shaped like what users write

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
IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"


def to_yaml(obj: Any) -> str:
    """YAML when PyYAML is there, else JSON (which is YAML too): kubectl
    reads either, and only the file name shows in its messages."""
    try:
        import yaml
    except ImportError:
        return json.dumps(obj, indent=2) + "\n"
    return yaml.safe_dump(obj, sort_keys=False, default_flow_style=False)


def container(name: str = "trainer", **extra: Any) -> dict:
    c: dict[str, Any] = {"name": name, "image": IMAGE, "command": ["python", "train.py"]}
    c.update(extra)
    return c


def labels_for(cls: str | None, gpus: int | str | None, labels: dict | None) -> dict:
    lab = dict(labels or {})
    if cls is not None:
        lab[CLASS] = cls
    if gpus is not None:
        lab[GPUS] = str(gpus)
    return lab


def pod(name: str, namespace: str, cls: str | None = None, gpus: int | str | None = None,
        *, labels: dict | None = None, annotations: dict | None = None,
        containers: list | None = None, **spec: Any) -> dict:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    lab = labels_for(cls, gpus, labels)
    if lab:
        meta["labels"] = lab
    if annotations:
        meta["annotations"] = dict(annotations)
    s: dict[str, Any] = {"containers": containers or [container()]}
    s.update(spec)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": s}


def job(name: str, namespace: str, cls: str | None = None, gpus: int | str | None = None,
        *, parallelism: int = 1, completions: int | None = None,
        labels: dict | None = None, template_labels: dict | None = None,
        restart_policy: str = "Never", containers: list | None = None,
        **jobspec: Any) -> dict:
    """A Job; the class label goes on the Job (template_labels: on the pod
    template, as users may do either)."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    lab = labels_for(cls, gpus, labels)
    if lab:
        meta["labels"] = lab
    tmpl: dict[str, Any] = {"spec": {"restartPolicy": restart_policy,
                                     "containers": containers or [container()]}}
    if template_labels:
        tmpl["metadata"] = {"labels": dict(template_labels)}
    s: dict[str, Any] = {"parallelism": parallelism}
    if completions is not None:
        s["completions"] = completions
    s.update(jobspec)
    s["template"] = tmpl
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": s}


# ---------------------------------------------------------------------------
# kubectl


@dataclass
class Result:
    rc: int
    out: str
    err: str
    args: list[str]

    def __iter__(self):  # rc, out, err = kubectl(...)
        return iter((self.rc, self.out, self.err))

    def check(self) -> "Result":
        if self.rc != 0:
            raise AssertionError(f"kubectl {' '.join(self.args)} failed ({self.rc}):\n"
                                 f"stdout: {self.out}\nstderr: {self.err}")
        return self

    def json(self) -> Any:
        return json.loads(self.check().out)


class Kubectl:
    """The real kubectl from the cluster's env, with the admin kubeconfig
    (or a tenant's: Stack.tenant_kubectl)."""

    def __init__(self, binary: str, kubeconfig: str, cache_dir: str | None = None):
        self.binary = binary
        self.kubeconfig = kubeconfig
        self.env = dict(os.environ)
        self.env.pop("KUBECONFIG", None)
        if cache_dir:  # discovery cache off $HOME
            self.env["KUBECACHEDIR"] = cache_dir

    def __call__(self, *args: str, input: str | None = None, timeout: float = 60.0,
                 cwd: Path | str | None = None) -> Result:
        argv = [self.binary, "--kubeconfig", self.kubeconfig, *args]
        p = subprocess.run(argv, input=input, capture_output=True, text=True,
                           timeout=timeout, cwd=cwd or ROOT, env=self.env)
        return Result(p.returncode, p.stdout, p.stderr, list(args))

    def apply_file(self, path: Path, obj: dict | None = None, *extra: str,
                   verb: str = "apply") -> Result:
        """Writes obj (if given) to path as YAML and runs `kubectl apply -f
        NAME` in path's directory, so that messages name the file the way a
        user sees them: error when creating "NAME"."""
        if obj is not None:
            path.write_text(to_yaml(obj))
        return self(verb, *extra, "-f", path.name, cwd=path.parent)

    def apply(self, obj: dict | str, *extra: str) -> Result:
        """kubectl apply -f - (an object, or YAML/JSON text)."""
        text = obj if isinstance(obj, str) else json.dumps(obj)
        return self("apply", *extra, "-f", "-", input=text)

    def create(self, obj: dict | str, *extra: str) -> Result:
        text = obj if isinstance(obj, str) else json.dumps(obj)
        return self("create", *extra, "-f", "-", input=text)

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict:
        ns = ["-n", namespace] if namespace else []
        return self("get", kind, name, *ns, "-o", "json").json()


class Watch:
    """`kubectl get KIND --watch --output-watch-events -o json` in the
    background: every version of the objects, as the apiserver sent them
    (ADDED with the object as created, then each MODIFIED), so that a test
    can tell what an object looked like at a moment it could not poll (a
    pod created with a scheduling gate that was removed a second later).
    events: [(type, object)]; stop() ends kubectl (also on `with` exit)."""

    def __init__(self, kubectl: Kubectl, kind: str, namespace: str, *args: str):
        self.events: list[tuple[str, dict]] = []
        self._lock = threading.Lock()
        argv = [kubectl.binary, "--kubeconfig", kubectl.kubeconfig, "get", kind,
                "-n", namespace, *args, "--watch", "--output-watch-events", "-o", "json"]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     stdin=subprocess.DEVNULL, text=True, env=kubectl.env)
        self._thread = threading.Thread(target=self._read, name="e2e-watch", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        dec = json.JSONDecoder()
        buf = ""
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            buf += line
            while True:
                buf = buf.lstrip()
                if not buf:
                    break
                try:
                    obj, end = dec.raw_decode(buf)
                except ValueError:
                    break  # an object not whole yet
                buf = buf[end:]
                if isinstance(obj, dict) and "object" in obj:
                    with self._lock:
                        self.events.append((obj.get("type", ""), obj["object"]))

    def objects(self, uid: str | None = None) -> list[dict]:
        """Every version seen (of the object UID), in order."""
        with self._lock:
            return [o for _, o in self.events
                    if uid is None or o.get("metadata", {}).get("uid") == uid]

    def first_versions(self) -> dict[str, dict]:
        """uid -> the first version seen of each object."""
        out: dict[str, dict] = {}
        for o in self.objects():
            out.setdefault(o["metadata"]["uid"], o)
        return out

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self._thread.join(10)

    def __enter__(self) -> "Watch":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


# ---------------------------------------------------------------------------
# pods never run: what a scheduler and a kubelet would do, done as admin

# No Node of this name exists, and nothing checks: a pod bound to it stays
# where it is (no kubelet starts it, no pod GC removes it).
NODE = "gpu-node-0"
JOB_NAME = "batch.kubernetes.io/job-name"
CONTROLLER_UID = "batch.kubernetes.io/controller-uid"


def ensure_crd(kubectl: Kubectl, path: Path, name: str, timeout: float = 90.0) -> None:
    """Applies the CRD at path and waits until it is established -- once
    a deletion still under way (a module before may have uninstalled the
    chart, which deletes its CRDs) is over, or the apply is undone."""
    def established() -> bool:
        r = kubectl("get", "crd", name, "-o", "json")
        if r.rc != 0:
            kubectl("apply", "-f", str(path)).check()
            return False
        o = json.loads(r.out)
        if o["metadata"].get("deletionTimestamp"):
            return False
        kubectl("apply", "-f", str(path)).check()
        return any(c["type"] == "Established" and c["status"] == "True"
                   for c in o.get("status", {}).get("conditions", []))
    wait_until(f"CRD {name} established", established, timeout, interval=0.5)


def job_pods(kubectl: Kubectl, name: str, ns: str) -> list[dict]:
    return kubectl("get", "pods", "-n", ns, "-l", f"{JOB_NAME}={name}",
                   "-o", "json").json()["items"]


def set_phase(kubectl: Kubectl, ns: str, pod_name: str, phase: str) -> None:
    """What the kubelet reports when a pod's containers end: the phase,
    through the status subresource."""
    r = kubectl("patch", "pod", pod_name, "-n", ns, "--subresource=status", "--type=merge",
                "-p", json.dumps({"status": {"phase": phase}}))
    assert (r.rc, r.out) == (0, f"pod/{pod_name} patched\n"), r


def bind_pod(kubectl: Kubectl, ns: str, name: str, node: str = NODE) -> None:
    """What the scheduler does: POST pods/NAME/binding.  A bound pod that
    is deleted gracefully stays Terminating (deletionTimestamp set, still in
    the API) until its kubelet confirms: here, until finish_terminating."""
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
               "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
    kubectl("create", "--raw", f"/api/v1/namespaces/{ns}/pods/{name}/binding",
            "-f", "-", input=json.dumps(binding)).check()


def bind_job_pods(kubectl: Kubectl, name: str, ns: str) -> list[str]:
    """Binds every pod of Job NAME that is not bound yet; their names."""
    bound = []
    for p in job_pods(kubectl, name, ns):
        if not p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp"):
            bind_pod(kubectl, ns, p["metadata"]["name"])
            bound.append(p["metadata"]["name"])
    return bound


def terminating(items: Iterable[dict]) -> list[str]:
    """The names of the Terminating pods among items."""
    return [o["metadata"]["name"] for o in items
            if o["kind"] == "Pod" and o["metadata"].get("deletionTimestamp")]


def force_delete(kubectl: Kubectl, ns: str, names: Iterable[str]) -> None:
    """What a kubelet does once a deleted pod's containers have stopped: the
    final delete (a Job's pod then goes once the job controller has dropped
    its tracking finalizer)."""
    for name in names:
        kubectl("delete", "pod", name, "-n", ns, "--grace-period=0", "--force",
                "--ignore-not-found", "--wait=false")


def finish_terminating(kubectl: Kubectl, ns: str, names: Iterable[str] | None = None,
                       timeout: float = 60.0) -> list[str]:
    """Finishes the Terminating pods of NS (all, or those named) and waits
    until they are gone.  Their names."""
    if names is None:
        names = terminating(kubectl("get", "pods", "-n", ns, "-o", "json").json()["items"])
    want = set(names)
    force_delete(kubectl, ns, sorted(want))

    def gone():
        items = kubectl("get", "pods", "-n", ns, "-o", "json").json()["items"]
        return not want & {p["metadata"]["name"] for p in items}
    wait_until(f"the Terminating pods {sorted(want)} of {ns} to be gone", gone, timeout)
    return sorted(want)


# ---------------------------------------------------------------------------
# the invariant, computed from the pods and Jobs alone (never from gpugate)
#
# For a tenant and a flavor's resource:
#   held    = the sum, over the pods of the tenant's namespaces that are not
#             Succeeded or Failed (Terminating ones included), of each pod's
#             effective request (effective_request);
#   pending = for each Job that is neither suspended nor finished, the slots
#             min(parallelism, completions) that none of its own pods fills
#             yet, times its template's effective request.  A pod fills a
#             slot when it is in the Job's namespace, has the Job as its
#             controller ownerReference and the label controller-uid = the
#             Job's uid, and asks for what the template asks for;
# and gpugate_quota_used{tenant, flavor} must be held + pending (a Job
# holds its slots whether its pods exist yet or not; its pods ride on them;
# its pods beyond them, and every other pod, count on their own), and never
# more than the tenant's ceiling (nominal + borrowing limit).  Flavors are
# told apart by resource name only: each e2e policy has one flavor per
# resource.


def quantity_units(q: Any) -> int:
    """An extended resource's quantity: a whole number ("8", 8)."""
    if isinstance(q, int):
        return q
    if not re.fullmatch(r"\d+", str(q)):
        raise AssertionError(f"quantity {q!r} is not a whole number of units")
    return int(q)


def container_request(c: dict, resource: str) -> int:
    res = c.get("resources") or {}
    for key in ("limits", "requests"):
        v = (res.get(key) or {}).get(resource)
        if v is not None:
            return quantity_units(v)
    return 0


def effective_request(spec: dict, resource: str) -> int:
    """What the scheduler reserves on a node for a pod: the larger of the
    regular containers plus the native sidecars (init containers with
    restartPolicy Always), and of each classic init container plus the
    sidecars started before it."""
    sidecars = peak = 0
    for c in spec.get("initContainers") or []:
        if c.get("restartPolicy") == "Always":
            sidecars += container_request(c, resource)
        else:
            peak = max(peak, container_request(c, resource) + sidecars)
    regular = sum(container_request(c, resource) for c in spec.get("containers") or [])
    return max(peak, regular + sidecars)


def pod_terminal(p: dict) -> bool:
    return (p.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def job_active(j: dict) -> bool:
    if j["spec"].get("suspend"):
        return False
    return not any(c["type"] in ("Complete", "Failed") and c["status"] == "True"
                   for c in (j.get("status") or {}).get("conditions") or [])


def job_slots(j: dict) -> int:
    parallelism = j["spec"].get("parallelism", 1)
    completions = j["spec"].get("completions")
    return parallelism if completions is None else min(parallelism, completions)


def fills_slot(p: dict, j: dict, per_pod: int, resource: str) -> bool:
    uid = j["metadata"]["uid"]
    meta = p["metadata"]
    controller = [o for o in meta.get("ownerReferences") or [] if o.get("controller")]
    return (meta["namespace"] == j["metadata"]["namespace"]
            and len(controller) == 1 and controller[0].get("uid") == uid
            and (meta.get("labels") or {}).get(CONTROLLER_UID) == uid
            and effective_request(p["spec"], resource) == per_pod)


@dataclass
class Holdings:
    held: int      # what the non-terminal pods ask for
    pending: int   # Job slots no pod of the Job fills yet
    pods: dict     # "ns/name" -> effective request, of the non-terminal pods
    jobs: dict     # "ns/name" -> {slots, per_pod, filled} of the active Jobs

    @property
    def total(self) -> int:
        return self.held + self.pending


def holdings(kubectl: Kubectl, namespaces: Iterable[str], resource: str) -> Holdings:
    h = Holdings(0, 0, {}, {})
    for ns in namespaces:
        items = kubectl("get", "pods,jobs", "-n", ns, "-o", "json").json()["items"]
        pods = [o for o in items if o["kind"] == "Pod" and not pod_terminal(o)]
        for p in pods:
            units = effective_request(p["spec"], resource)
            h.held += units
            if units:
                h.pods[f"{ns}/{p['metadata']['name']}"] = units
        for j in items:
            if j["kind"] != "Job" or not job_active(j):
                continue
            per_pod = effective_request(j["spec"]["template"]["spec"], resource)
            if not per_pod:
                continue
            filled = sum(1 for p in pods if fills_slot(p, j, per_pod, resource))
            slots = job_slots(j)
            h.pending += max(0, slots - filled) * per_pod
            h.jobs[f"{ns}/{j['metadata']['name']}"] = {"slots": slots, "per_pod": per_pod,
                                                      "filled": filled}
    return h


def assert_invariant(kubectl: Kubectl, gate: Gate, tenant: str, namespaces: Iterable[str],
                     flavor: str, resource: str, ceiling: int | None,
                     timeout: float = 30.0) -> Holdings:
    """Waits until gpugate_quota_used{tenant, flavor} equals what the
    tenant's pods hold plus its Jobs' unfilled slots (see above), then
    asserts that this is within ceiling (None: not checked, for warn and
    audit modes, which admit over quota by design but must count it).
    kubectl must see every pod (the admin's).  Returns the holdings."""
    namespaces = list(namespaces)
    last: list = [None, None]

    def equal():
        last[0] = holdings(kubectl, namespaces, resource)
        last[1] = gate.quota_used(tenant, flavor)
        return last[1] == last[0].total
    try:
        wait_until(f"gpugate_quota_used{{tenant={tenant}}} == what it holds", equal,
                   timeout, 0.25)
    except AssertionError:
        h, used = last
        raise AssertionError(
            f"gpugate_quota_used{{tenant=\"{tenant}\",flavor=\"{flavor}\"}} is {used}, "
            f"but the tenant holds {h.total} = pods {h.held} + unfilled Job slots "
            f"{h.pending} (waited {timeout:.0f}s); pods {h.pods}, Jobs {h.jobs}") from None
    h = last[0]
    if ceiling is not None:
        assert h.total <= ceiling, (
            f"tenant {tenant} holds {h.total} {resource} (pods {h.pods}, Jobs {h.jobs}), "
            f"more than its ceiling {ceiling}")
    return h


# ---------------------------------------------------------------------------
# the control plane


class Cluster:
    def __init__(self, dir: Path):
        self.dir = Path(dir)
        self.env: dict[str, str] = {}

    def up(self) -> "Cluster":
        p = subprocess.run([str(CLUSTER_SH), "up", str(self.dir)], cwd=ROOT,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=1800)
        if p.returncode != 0:
            raise RuntimeError(f"cluster.sh up failed ({p.returncode}):\n{p.stderr}")
        self.env = self.read_env()
        return self

    def read_env(self) -> dict[str, str]:
        env = {}
        for line in (self.dir / "env").read_text().splitlines():
            m = re.match(r"export (\w+)=(.*)$", line)
            if m:
                # cluster.sh writes printf %q values; none of ours need
                # unquoting beyond plain words.
                env[m.group(1)] = m.group(2).strip("'")
        return env

    def down(self) -> int:
        p = subprocess.run([str(CLUSTER_SH), "down", str(self.dir)], cwd=ROOT,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=120)
        return p.returncode

    def kubectl(self) -> Kubectl:
        return Kubectl(self.env["KUBECTL"], self.env["KUBECONFIG"],
                       str(self.dir / "kubectl-cache"))


# ---------------------------------------------------------------------------
# gpugate


class Certs:
    def __init__(self, dir: Path, ca_bundle: str):
        self.dir = dir
        self.ca = dir / "ca.crt"
        self.cert = dir / "tls.crt"
        self.key = dir / "tls.key"
        self.ca_bundle = ca_bundle


def make_certs(binary: Path, d: Path) -> Certs:
    d.mkdir(parents=True, exist_ok=True)
    p = subprocess.run([str(binary), "certs", "--out", str(d), "--dns", "localhost",
                        "--ip", "127.0.0.1"], capture_output=True, text=True,
                       timeout=120, cwd=ROOT)
    if p.returncode != 0:
        raise RuntimeError(f"gpugate certs failed ({p.returncode}): {p.stderr}")
    bundle = p.stdout.strip().splitlines()[0]
    return Certs(d, bundle)


def sanitizer_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("ASAN_OPTIONS", ASAN_DEFAULTS)
    env.setdefault("UBSAN_OPTIONS", UBSAN_DEFAULTS)
    return env


# What the session's gates run with beyond policy, certificates, listen
# address and kubeconfig: a GPU pod that waited 2 s gets gpugate's
# GPUWaiting Event (the waiter looks every 10 s; test_waiting.py).  They
# keep no GPUClass objects: serving three policies, they would take turns
# rewriting them (test_classes.py runs a gate of its own that does).
GATE_ARGS = ("--waiting-reason-after", "2", "--no-gpuclasses", "--no-gpuquotas")
# ... and the health controller, which writes gpugate's taint and record on
# Nodes, runs in one of them only: each would take the marks of the others
# off the nodes of none of its flavors (controllers/health.h), and their
# returnAfter differ.  test_health_loop.py runs a gpugate of its own that
# does; demo.sh's one gpugate does (Stack(node_health=True)).
NO_NODE_HEALTH = "--no-node-health"


class Gate:
    """One `gpugate serve` process, in its own session, stdout and stderr in
    files (so that it may outlive the Python process that started it, as in
    demo.sh)."""

    def __init__(self, binary: Path, certs: Certs, policy: Path, workdir: Path,
                 kubeconfig: str | None, name: str = "gpugate", listen: str = "127.0.0.1:0",
                 args: Iterable[str] = ()):
        self.binary = binary
        self.args = list(args)  # appended to `gpugate serve ...`
        self.certs = certs
        self.policy = policy
        self.workdir = workdir
        self.kubeconfig = kubeconfig
        self.name = name
        self.listen = listen
        self.proc: subprocess.Popen | None = None
        self.pid = 0
        self.port = 0
        self.exit_code: int | None = None
        self.stdout_path = workdir / f"{name}.stdout"
        self.stderr_path = workdir / f"{name}.stderr"

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> "Gate":
        self.workdir.mkdir(parents=True, exist_ok=True)
        cmd = [str(self.binary), "serve", "--policy", str(self.policy),
               "--tls-cert", str(self.certs.cert), "--tls-key", str(self.certs.key),
               "--listen", self.listen]
        if self.kubeconfig:
            cmd += ["--kubeconfig", self.kubeconfig]
        cmd += self.args
        self.stderr_path.write_bytes(b"")
        # O_APPEND: nothing written to the file by others is overwritten
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "ab") as err:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=err,
                                         stdin=subprocess.DEVNULL, cwd=ROOT,
                                         env=sanitizer_env(), start_new_session=True)
        self.pid = self.proc.pid
        (self.workdir / f"{self.name}.pid").write_text(f"{self.pid}\n")
        deadline = time.monotonic() + timeout
        while True:
            m = re.search(r"listening on https://127\.0\.0\.1:(\d+)\n",
                          self.stdout_path.read_text(errors="replace"))
            if m:
                self.port = int(m.group(1))
                return self
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name}: gpugate serve exited "
                                     f"({self.proc.returncode}) before listening; "
                                     f"stderr:\n{self.stderr_tail()}")
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"{self.name}: gpugate serve did not print "
                                     f"'listening on' within {timeout:.0f}s; "
                                     f"stderr:\n{self.stderr_tail()}")
            time.sleep(0.05)

    # -- HTTP --

    def ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.certs.ca))

    def get(self, path: str, timeout: float = 10.0) -> tuple[int, str]:
        c = http.client.HTTPSConnection("127.0.0.1", self.port, timeout=timeout,
                                        context=self.ssl_context())
        try:
            c.request("GET", path)
            r = c.getresponse()
            return r.status, r.read().decode(errors="replace")
        finally:
            c.close()

    def wait_ready(self, timeout: float = 60.0) -> None:
        def ready():
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"{self.name}: gpugate exited "
                                     f"({self.proc.returncode}); stderr:\n"
                                     f"{self.stderr_tail()}")
            try:
                return self.get("/readyz")[0] == 200
            except OSError:
                return False
        wait_until(f"{self.name} /readyz 200", ready, timeout)

    def metrics(self) -> str:
        status, body = self.get("/metrics")
        assert status == 200, (status, body)
        return body

    def requests(self, endpoint: str = "validate") -> int:
        """gpugate_admission_requests_total{endpoint}, summed over kind and
        result: the reviews this process answered there."""
        return sum(int(float(v)) for v in re.findall(
            r'^gpugate_admission_requests_total\{endpoint="%s",[^}]*\} (\S+)$'
            % re.escape(endpoint), self.metrics(), re.M))

    def quota_used(self, tenant: str, flavor: str = "h100-80gb") -> int:
        body = self.metrics()
        m = re.search(r'^gpugate_quota_used\{tenant="%s",flavor="%s"\} (\S+)$'
                      % (re.escape(tenant), re.escape(flavor)), body, re.M)
        assert m, f"no gpugate_quota_used for {tenant}/{flavor} in /metrics"
        return int(float(m.group(1)))

    def wait_used(self, tenant: str, want: int, flavor: str = "h100-80gb",
                  timeout: float = 30.0) -> int:
        last = [None]

        def ok():
            last[0] = self.quota_used(tenant, flavor)
            return last[0] == want
        try:
            wait_until(f"gpugate_quota_used{{tenant={tenant}}} == {want}", ok, timeout)
        except AssertionError:
            raise AssertionError(f"gpugate_quota_used{{tenant=\"{tenant}\",flavor="
                                 f"\"{flavor}\"}} is {last[0]}, expected {want} "
                                 f"(waited {timeout:.0f}s)") from None
        return want

    # -- lifecycle --

    @property
    def alive(self) -> bool:
        if self.proc is not None:
            return self.proc.poll() is None
        try:
            os.kill(self.pid, 0)
            return True
        except OSError:
            return False

    def terminate(self, timeout: float = 30.0) -> int | None:
        """SIGTERM and wait: the exit code, or None if it had to be killed."""
        if self.proc is None:
            return self.exit_code
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.exit_code = self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                self.exit_code = None
        else:
            self.exit_code = self.proc.returncode
        return self.exit_code

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass

    def stderr_text(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""

    def stderr_tail(self, n: int = 40) -> str:
        return "\n".join(self.stderr_text().splitlines()[-n:])

    def sanitizer_report(self) -> str | None:
        text = self.stderr_text()
        for marker in SANITIZER_MARKERS:
            i = text.find(marker)
            if i >= 0:
                return text[max(0, i - 200):i + 4000]
        return None

    def stop_and_check(self) -> list[str]:
        """SIGTERM; the problems found (empty when it exited 0 cleanly)."""
        rc = self.terminate()
        problems = []
        if rc is None:
            problems.append(f"{self.name}: did not exit within 30s of SIGTERM (SIGKILLed)")
        elif rc != 0:
            problems.append(f"{self.name}: exited {rc} after SIGTERM, not 0; stderr:\n"
                            f"{self.stderr_tail()}")
        report = self.sanitizer_report()
        if report:
            problems.append(f"{self.name}: sanitizer report on stderr:\n{report}")
        return problems


# ---------------------------------------------------------------------------
# webhook configurations


def _shipped_excluded() -> list[str]:
    import yaml
    docs = yaml.safe_load_all((ROOT / "manifests" / "webhooks.yaml").read_text())
    w = next(d for d in docs if d)["webhooks"][0]
    e, = [e for e in w["namespaceSelector"]["matchExpressions"]
          if e["key"] == "kubernetes.io/metadata.name"]
    return e["values"]


# The namespaces an install never sends (manifests/webhooks.yaml): kube-system,
# gpugate's, and the GPU stack's (the policy's default exemptions).
EXCLUDED_NAMESPACES = _shipped_excluded()


def selector(policy: str) -> dict:
    """The namespaceSelector of the installation (NotIn kube-system,
    gpugate, the GPU stack's namespaces) plus the split between the e2e
    gpugate processes."""
    exprs = [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
              "values": EXCLUDED_NAMESPACES}]
    if policy in LABELLED_POLICIES:
        exprs.append({"key": POLICY_LABEL, "operator": "In", "values": [policy]})
    else:
        exprs.append({"key": POLICY_LABEL, "operator": "NotIn",
                      "values": list(LABELLED_POLICIES)})
    return {"matchExpressions": exprs}


# The matchConditions of each webhook, read from manifests/webhooks.yaml, so
# that every test runs under what an install registers (test_chart.py holds
# the chart to the same text).  validate.gpugate.io: creates; kubectl debug;
# Job updates; a pod update that changes where it may run; any update,
# status writes included, that touches the stamps; and of those, only what
# gpugate has an opinion on ("gpu-work").
def _shipped_conditions() -> dict[str, list[dict]]:
    import yaml
    docs = yaml.safe_load_all((ROOT / "manifests" / "webhooks.yaml").read_text())
    return {w["name"]: w.get("matchConditions", []) for d in docs if d
            for w in d.get("webhooks", [])}


MATCH_CONDITIONS = _shipped_conditions()


def webhook_configs(config_name: str, url: str, ca_bundle: str, policy: str) -> list[dict]:
    sel = selector(policy)
    common = {
        "namespaceSelector": sel,
        "sideEffects": "NoneOnDryRun",
        "admissionReviewVersions": ["v1"],
        "failurePolicy": "Fail",
        "timeoutSeconds": 10,
    }

    def rules(ops):
        return [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ops,
                 "resources": ["pods"], "scope": "Namespaced"},
                {"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ops,
                 "resources": ["jobs"], "scope": "Namespaced"}]

    # Pod-template controllers (#18): judged and mapped at the door, failing
    # open, never their Deployment's ReplicaSets, only when the spec changes.
    templates = dict(common, failurePolicy="Ignore", rules=[
        {"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
         "resources": ["deployments", "statefulsets", "replicasets", "daemonsets"],
         "scope": "Namespaced"},
        {"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
         "resources": ["cronjobs"], "scope": "Namespaced"}],
        matchConditions=MATCH_CONDITIONS["mutate-templates.gpugate.io"])

    # kubectl scale: a Scale, judged against the template of the object
    # scaled (gpugate reads it).
    scale = {"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["UPDATE"],
             "resources": ["deployments/scale", "statefulsets/scale", "replicasets/scale"],
             "scope": "Namespaced"}

    # DRA claims and templates: validated (and claims charged), never mutated;
    # a template's UPDATE too (gpugate's label on gpugate's templates: the
    # shipped matchConditions send it only when that label changes).
    dra = [{"apiGroups": ["resource.k8s.io"], "apiVersions": ["v1"],
            "operations": ["CREATE"], "scope": "Namespaced",
            "resources": ["resourceclaims"]},
           {"apiGroups": ["resource.k8s.io"], "apiVersions": ["v1"],
            "operations": ["CREATE", "UPDATE"], "scope": "Namespaced",
            "resources": ["resourceclaimtemplates"]}]

    mutating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": config_name},
        "webhooks": [dict(common, name="mutate.gpugate.io",
                          clientConfig={"url": f"{url}/mutate", "caBundle": ca_bundle},
                          rules=rules(["CREATE"]), reinvocationPolicy="IfNeeded",
                          matchConditions=MATCH_CONDITIONS["mutate.gpugate.io"]),
                     dict(templates, name="mutate-templates.gpugate.io",
                          clientConfig={"url": f"{url}/mutate", "caBundle": ca_bundle},
                          reinvocationPolicy="IfNeeded")],
    }
    # kubectl debug: the whole Pod with its new spec.ephemeralContainers;
    # status writes, sent when they touch the stamps.
    debug = [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"],
              "resources": ["pods/ephemeralcontainers", "pods/status"],
              "scope": "Namespaced"},
             {"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["UPDATE"],
              "resources": ["jobs/status"], "scope": "Namespaced"}]
    validating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": config_name},
        "webhooks": [dict(common, name="validate.gpugate.io",
                          clientConfig={"url": f"{url}/validate", "caBundle": ca_bundle},
                          rules=rules(["CREATE", "UPDATE", "DELETE"]) + debug + dra,
                          matchConditions=MATCH_CONDITIONS["validate.gpugate.io"]),
                     dict(templates, name="validate-templates.gpugate.io",
                          clientConfig={"url": f"{url}/validate", "caBundle": ca_bundle},
                          rules=templates["rules"] + [scale],
                          matchConditions=MATCH_CONDITIONS["validate-templates.gpugate.io"])],
    }
    return [mutating, validating]


def register(kubectl: Kubectl, config_name: str, gate: Gate, policy: str) -> None:
    items = webhook_configs(config_name, gate.url, gate.certs.ca_bundle, policy)
    kubectl.apply({"apiVersion": "v1", "kind": "List", "items": items}).check()


# A namespace and class each gpugate admits, for probes (dry runs: nothing
# is reserved).
PROBES = {"example": ("research", "train-small"), "quota": ("solo", "gpu"),
          "raw": ("rawgpu", "gpu"), "dra": ("dra-team", "train-dra"),
          "replicas": ("race", "gpu"),
          "gang": ("gang-a", "solo"), "health": ("health-a", "gpu"),
          "idle": ("idle-a", "gpu")}


def wait_webhooks(kubectl: Kubectl, policy: str, timeout: float = 30.0) -> None:
    """Until the apiserver calls the registered webhook: a server-side dry
    run of a class Pod comes back mapped, with gpugate's stamp (the
    apiserver loads webhook configurations asynchronously).  Not by its
    warning: with settings.admissionWarnings problems (the default) a pod
    that fits gets none."""
    ns, cls = PROBES[policy]
    probe = json.dumps(pod("webhook-probe", ns, cls))

    def called():
        r = kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", input=probe)
        return r.rc == 0 and "gpugate.io/tenant" in (
            json.loads(r.out)["metadata"].get("labels") or {})
    wait_until(f"the {policy} webhooks to be called", called, timeout, 0.3)


# ---------------------------------------------------------------------------
# the whole stack


def namespace_obj(name: str, policy: str) -> dict:
    labels = {POLICY_LABEL: policy}
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": labels}}


def wait_service_accounts(kubectl: Kubectl, namespaces: Iterable[str],
                          timeout: float = 60.0) -> None:
    for ns in namespaces:
        wait_until(f"ServiceAccount {ns}/default",
                   lambda: kubectl("-n", ns, "get", "serviceaccount", "default").rc == 0,
                   timeout)


def priority_classes() -> list[dict]:
    """The PriorityClasses the install ships (manifests/priorityclass.yaml:
    training, which the example policy's train-large names), as the stack
    creates them and puts them back after a test uninstalls the base."""
    import yaml
    return [d for d in yaml.safe_load_all((ROOT / "manifests" / "priorityclass.yaml")
                                          .read_text()) if d]


# ---------------------------------------------------------------------------
# the fake GPU fleet (tests/e2e/fleet.py; KWOK runs its nodes, cluster.sh)

# The example policy's cluster, as its header describes it: 6 H100 nodes in
# two NVLink domains of 3, 4 A100 nodes in MIG mixed strategy (2 cut into
# 1g.10gb slices, 2 into 3g.40gb), 4 time-sliced L4 nodes, and 2 CPU nodes.
EXAMPLE_FLEET = {"nodes": {"h100-80gb": 6, "a100-1g.10gb": 2, "a100-3g.40gb": 2,
                           "l4-shared": 4},
                 "cpu_nodes": 2, "clique_size": 3}
FLEET_LABEL = "fleet.gpugate.io/fleet"


class Fleet:
    """Nodes made by fleet.make_fleet from a policy, created in the cluster
    and managed by KWOK: a node is Ready (no not-ready taint) before
    create() returns, and pods bound to it run (tests/e2e/kwok/stages.yaml)."""

    def __init__(self, kubectl: Kubectl, policy: Path = EXAMPLE_POLICY,
                 name: str = "e2e", nodes: dict[str, int] | None = None,
                 default_nodes: int = 2, cpu_nodes: int = 2, clique_size: int = 2,
                 dra_nodes: dict[str, int] | None = None):
        """dra_nodes: {flavor: N} more nodes served through DRA
        (fleet.make_dra_nodes: no device-plugin resource, one ResourceSlice
        each, created after the nodes and deleted before them).  Which
        DeviceClass serves them is the caller's (see DraFleet)."""
        import fleet  # tests/e2e/fleet.py: needs PyYAML
        import yaml

        self.kubectl = kubectl
        self.name = name
        self.policy = yaml.safe_load(Path(policy).read_text())
        self.items = fleet.make_fleet(self.policy, default_nodes, nodes or {},
                                      cpu_nodes, clique_size, name=name)
        dra, self.slices = fleet.make_dra_nodes(self.policy, dra_nodes or {}, name)
        self.items += dra
        self.by_name = {n["metadata"]["name"]: n for n in self.items}
        # DRA node -> its flavor (its allocatable does not name the resource)
        self.dra_flavors = {f"{fleet.dns_label(f)}-dra-{i}": f
                            for f, count in (dra_nodes or {}).items() for i in range(count)}
        assert set(self.dra_flavors) == {n["metadata"]["name"] for n in dra}

    def create(self, timeout: float = 60.0) -> "Fleet":
        t0 = time.monotonic()
        self.kubectl.create({"apiVersion": "v1", "kind": "List",
                             "items": self.items}).check()
        if self.slices:
            self.kubectl.create({"apiVersion": "v1", "kind": "List",
                                 "items": self.slices}).check()
        wait_until(f"the {len(self.items)} nodes of fleet {self.name} to be Ready",
                   self.ready, timeout, interval=0.5)
        log(f"fleet {self.name}: {len(self.items)} nodes Ready in "
            f"{time.monotonic() - t0:.1f}s"
            + (f", {len(self.slices)} of them served through DRA" if self.slices else ""))
        return self

    @property
    def dra_nodes(self) -> list[str]:
        return sorted(self.dra_flavors)

    def ready(self) -> bool:
        items = self.kubectl("get", "nodes", "-l", f"{FLEET_LABEL}={self.name}",
                             "-o", "json").json()["items"]
        ok = 0
        for n in items:
            conds = {c["type"]: c["status"] for c in n["status"].get("conditions", [])}
            taints = {t["key"] for t in n["spec"].get("taints", [])}
            if conds.get("Ready") == "True" and "node.kubernetes.io/not-ready" not in taints:
                ok += 1
        return ok == len(self.items)

    def delete(self, timeout: float = 60.0) -> None:
        if self.slices:
            self.kubectl("delete", "resourceslices", "-l", f"{FLEET_LABEL}={self.name}",
                         "--wait=true", timeout=timeout).check()
        self.kubectl("delete", "nodes", "-l", f"{FLEET_LABEL}={self.name}",
                     "--wait=true", timeout=timeout).check()

    def flavor_of(self, node_name: str) -> str | None:
        """The flavor a fleet node was made for (a DRA node's too); None
        for a CPU node or a node that is not the fleet's."""
        n = self.by_name.get(node_name)
        if not n:
            return None
        if node_name in self.dra_flavors:
            return self.dra_flavors[node_name]
        for f in self.policy.get("flavors") or []:
            if f["resource"] in n["status"]["allocatable"]:
                sel = dict(s.split("=", 1) for s in f.get("nodeSelector") or [])
                if all(n["metadata"]["labels"].get(k) == v for k, v in sel.items()):
                    return f["name"]
        return None

    def label(self, node_name: str, key: str) -> str | None:
        return self.by_name[node_name]["metadata"]["labels"].get(key)


# ---------------------------------------------------------------------------
# GPUs served through DRA on the fake fleet (issue #33, docs/design/dra.md F3)
#
# A DraFleet is KWOK nodes that look like a flavor's nodes to gpugate's
# class mapping (its nodeSelector labels, its taints) but advertise none of
# its resource: NVIDIA's DRA driver publishes their GPUs instead, one
# ResourceSlice a node (fleet.make_dra_nodes, created here as the admin),
# and a DeviceClass with extendedResourceName makes the kube-scheduler serve
# the extended resource (nvidia.com/gpu) from those devices: for a pod that
# asks for it, it creates a ResourceClaim of its own in PreBind (the
# "special claim": generateName <pod>-extended-resources-, annotation
# resource.kubernetes.io/extended-resource-claim: "true", a controller
# ownerReference to the Pod), allocates it, and writes the pod's
# status.extendedResourceClaimStatus before it binds the pod.  In 1.37.2
# DynamicResourceAllocation and DRAExtendedResource are GA: no feature gate.

DRA_DRIVER = "gpu.nvidia.com"
DRA_CLASS = "gpu.nvidia.com"  # the example policy's h100-80gb lists it
EXTENDED_RESOURCE_CLAIM = "resource.kubernetes.io/extended-resource-claim"
DEVICECLASS_PREFIX = "deviceclass.resource.kubernetes.io/"
# Six H100 nodes of 8 devices: 48 GPUs, more than research may hold (40).
DRA_FLEET = {"name": "dra", "nodes": {}, "default_nodes": 0, "cpu_nodes": 0,
             "dra_nodes": {"h100-80gb": 6}}


def put_device_class(kubectl: Kubectl, obj: dict) -> Callable[[], None]:
    """Creates DeviceClass OBJ in place of any DeviceClass of its name (that
    one deleted first, so that none of its fields survive, e.g. a
    test_dra.py class without extendedResourceName).  Returns restore(),
    which deletes OBJ's class and puts back the one it replaced, if any
    (its name, labels, annotations and spec)."""
    name = obj["metadata"]["name"]
    r = kubectl("get", "deviceclass", name, "-o", "json")
    old = json.loads(r.out) if r.rc == 0 else None
    if old is not None:
        kubectl("delete", "deviceclass", name, "--wait=true").check()
    kubectl.create(obj).check()

    def restore() -> None:
        kubectl("delete", "deviceclass", name, "--ignore-not-found", "--wait=true").check()
        if old is not None:
            meta = {k: v for k, v in old["metadata"].items()
                    if k in ("name", "labels", "annotations")}
            kubectl.create({"apiVersion": old["apiVersion"], "kind": "DeviceClass",
                            "metadata": meta, "spec": old["spec"]}).check()
    return restore


def claim_owner(claim: dict) -> dict | None:
    """The controller ownerReference of a claim (None without one)."""
    for o in claim["metadata"].get("ownerReferences") or []:
        if o.get("controller"):
            return o
    return None


def special_claims(kubectl: Kubectl, ns: str, pod_name: str | None = None) -> list[dict]:
    """The ResourceClaims of NS that the scheduler would take for a pod's
    extended-resource claim (its findExtendedResourceClaim: the annotation
    "true" and a controller ownerReference to the Pod), of pod POD_NAME
    only when given; oldest first."""
    items = kubectl("get", "resourceclaims", "-n", ns, "-o", "json").json()["items"]
    out = []
    for c in items:
        owner = claim_owner(c)
        if ((c["metadata"].get("annotations") or {}).get(EXTENDED_RESOURCE_CLAIM) == "true"
                and owner and owner.get("kind") == "Pod" and owner.get("apiVersion") == "v1"
                and (pod_name is None or owner.get("name") == pod_name)):
            out.append(c)
    return sorted(out, key=lambda c: (c["metadata"]["creationTimestamp"], c["metadata"]["name"]))


def allocated_devices(claim: dict) -> list[dict]:
    """status.allocation.devices.results ([] while not allocated)."""
    return (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}
            ).get("results") or []


def pod_claim(k: "Kubectl", ns: str, name: str) -> dict | None:
    """The claim the resourceclaim controller made for pod NS/NAME's entry
    gpugate-gpu (its status.resourceClaimStatuses), or None."""
    p = k.get("pod", name, ns)
    for st in (p.get("status") or {}).get("resourceClaimStatuses") or []:
        if st.get("name") == "gpugate-gpu" and st.get("resourceClaimName"):
            r = k("get", "resourceclaim", st["resourceClaimName"], "-n", ns, "-o", "json")
            return r.json() if r.rc == 0 else None
    return None


def running_with_claim(k: "Kubectl", ns: str, name: str, results: int,
                       timeout: float = 60.0) -> dict:
    """Waits until pod NS/NAME runs with its gpugate-gpu claim allocated
    RESULTS results (devices, or one share); returns the claim.  Fails
    with the pod's events."""
    out: dict = {}

    def ok():
        p = k.get("pod", name, ns)
        c = pod_claim(k, ns, name)
        if (p.get("status") or {}).get("phase") != "Running" or not c:
            return False
        if len(allocated_devices(c)) != results:
            return False
        out.update(c)
        return True
    try:
        wait_until(f"pod {name} Running with {results} allocated", ok, timeout, 0.5)
    except AssertionError:
        ev = k("get", "events", "-n", ns, "--field-selector",
               f"involvedObject.name={name}", "-o", "json").json()["items"]
        raise AssertionError(f"pod {name}: " + "; ".join(
            f"{e.get('reason')}: {e.get('message')}" for e in ev)) from None
    return out


class DraFleet:
    """DRA nodes on KWOK (Fleet with dra_nodes only) and the DeviceClass
    that serves their devices as an extended resource (put_device_class:
    whatever class of that name was there comes back after delete()).
    create() returns once the nodes are Ready and a probe pod in
    kube-system (no gpugate webhook there) asking for 1 of the extended
    resource has run on one of them through the scheduler's claim."""

    def __init__(self, kubectl: Kubectl, policy: Path = EXAMPLE_POLICY,
                 name: str = DRA_FLEET["name"], nodes: dict[str, int] | None = None,
                 device_class: str = DRA_CLASS, driver: str = DRA_DRIVER,
                 extended_resource: str | None = "nvidia.com/gpu"):
        import fleet  # tests/e2e/fleet.py: needs PyYAML
        self.kubectl = kubectl
        self.fleet = Fleet(kubectl, policy, name, nodes={}, default_nodes=0, cpu_nodes=0,
                           dra_nodes=nodes or DRA_FLEET["dra_nodes"])
        self.device_class = fleet.device_class(device_class, driver, extended_resource)
        self.class_name = device_class
        self.driver = driver
        self.extended_resource = extended_resource
        self._restore: Callable[[], None] | None = None

    @property
    def nodes(self) -> list[str]:
        return self.fleet.dra_nodes

    def create(self, timeout: float = 60.0) -> "DraFleet":
        t0 = time.monotonic()
        self._restore = put_device_class(self.kubectl, self.device_class)
        try:
            self.fleet.create(timeout)
            self.probe(timeout)
        except BaseException:
            self.delete()
            raise
        log(f"DRA fleet {self.fleet.name}: {len(self.nodes)} nodes, DeviceClass "
            f"{self.class_name} ({self.extended_resource}), probe ran, in "
            f"{time.monotonic() - t0:.1f}s")
        return self

    def probe(self, timeout: float = 60.0) -> None:
        """A pod asking for 1 of the extended resource (or of the class's
        implicit name) runs on a DRA node with its claim allocated; then it
        and its claim are gone again.  Fails with the pod's events."""
        k, ns, name = self.kubectl, "kube-system", "gpugate-e2e-dra-probe"
        res = self.extended_resource or DEVICECLASS_PREFIX + self.class_name
        k.create(pod(name, ns, containers=[container(resources={"limits": {res: "1"}})],
                     tolerations=[{"operator": "Exists"}],
                     nodeSelector={"fleet.gpugate.io/dra": self.driver})).check()
        try:
            def ran():
                p = k.get("pod", name, ns)
                claims = special_claims(k, ns, name)
                return ((p.get("status") or {}).get("phase") == "Running"
                        and p["spec"].get("nodeName") in self.nodes
                        and claims and allocated_devices(claims[0]))
            try:
                wait_until("the DRA probe pod to run on a DRA node with its claim", ran,
                           timeout, 0.25)
            except AssertionError as e:
                ev = k("get", "events", "-n", ns, "--field-selector",
                       f"involvedObject.name={name}", "-o",
                       "jsonpath={range .items[*]}{.reason}: {.message}{'\\n'}{end}").out
                raise AssertionError(f"{e}; the probe pod's events:\n{ev}") from None
        finally:
            k("delete", "pod", name, "-n", ns, "--ignore-not-found", "--wait=false")
            wait_until("the DRA probe pod and its claim gone",
                       lambda: k("get", "pod", name, "-n", ns).rc != 0
                       and not special_claims(k, ns, name), timeout)

    def requeue(self) -> None:
        """Makes the scheduler try again every pod waiting for DRA devices:
        an update of the DeviceClass (a label) is an event its
        DynamicResources plugin registers without a queueing hint.  Needed
        where the scheduler itself does not requeue a pod: it deletes a
        claim it takes for the pod's own from an earlier cycle (PostFilter),
        and that claim's deletion (it had no allocation) is QueueSkip
        (isSchedulableAfterClaimChange), so the pod would wait for the
        5-minute flush of unschedulable pods."""
        self._requeues = getattr(self, "_requeues", 0) + 1
        self.kubectl("label", "deviceclass", self.class_name,
                     f"e2e.gpugate.io/requeue={self._requeues}", "--overwrite").check()

    def delete(self, timeout: float = 60.0) -> None:
        try:
            self.fleet.delete(timeout)
        finally:
            if self._restore is not None:
                self._restore()
                self._restore = None


# ---------------------------------------------------------------------------
# several replicas behind one address (test_replicas.py, issue #14)


def burst_creates(api: "Api", ns: str, prefix: str, n: int, during=None,
                  timeout: float = 60.0) -> tuple[list, float]:
    """N concurrent creates of 1-GPU class pods in NS, released together
    (each thread has its TLS connection up first).  during(): run in one
    more thread once the first answer is in.  [(status, body)], wall time
    from the release to the last answer."""
    gate = threading.Barrier(n + 1)
    first = threading.Event()
    results: list = [None] * n

    def one(i: int) -> None:
        conn = api.connection()
        try:
            conn.connect()
            gate.wait()
            results[i] = api.request("POST", f"/api/v1/namespaces/{ns}/pods",
                                     pod(f"{prefix}-{i}", ns, "gpu"), conn=conn)
        except Exception as e:  # noqa: BLE001 - the caller counts it as failed
            results[i] = (0, repr(e))
        finally:
            conn.close()
            first.set()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    if during is not None:
        threads.append(threading.Thread(target=lambda: (first.wait(30), during())))
    for t in threads:
        t.start()
    gate.wait()
    t0 = time.monotonic()
    for t in threads[:n]:
        t.join(timeout)
    wall = time.monotonic() - t0
    for t in threads[n:]:
        t.join(timeout)
    return results, wall


class _Relay:
    """What Balancer and ApiProxy share: an asyncio server on 127.0.0.1:PORT
    (port 0 picks one) run by a thread of its own, each accepted connection
    handed to the subclass's async _handle(reader, writer), which registers
    its task in _tasks so that stop() can cancel it."""

    THREAD = "e2e-relay"

    def __init__(self) -> None:
        self.port = 0
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set = set()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def start(self):
        ready = threading.Event()
        failed: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop

            async def listen() -> None:
                self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
                self.port = self._server.sockets[0].getsockname()[1]
            try:
                loop.run_until_complete(listen())
            except BaseException as e:  # noqa: BLE001 - reported to start()
                failed.append(e)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.close()
        self._thread = threading.Thread(target=run, name=self.THREAD, daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError(f"{self.THREAD} did not start listening within 10s")
        if failed:
            raise failed[0]
        return self

    def stop(self) -> None:
        loop = self._loop
        if loop is None or self._thread is None:
            return

        async def shutdown() -> None:
            if self._server is not None:
                self._server.close()
            for t in list(self._tasks):
                t.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            loop.stop()
        if loop.is_running():
            asyncio.run_coroutine_threadsafe(shutdown(), loop)
        self._thread.join(10)
        self._thread = None


    async def _handle(self, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError


class Balancer(_Relay):
    """A round-robin TCP balancer, what a Service's ClusterIP is to the
    apiserver: listens on 127.0.0.1:PORT and forwards each accepted
    connection, as raw bytes (TLS passes through: the gates' certificate
    has SAN 127.0.0.1), to the next of its backends (ports on 127.0.0.1).
    A backend that refuses the connection is skipped for that connection,
    so a replica killed with SIGKILL costs only the connections it had.
    connections[i] counts the connections forwarded to backend i.

    The apiserver keeps its webhook connections alive and reuses them, so
    a connection count says little about requests; Gate.requests() does.
    max_age (seconds, None: never; may be changed at any time): a
    connection older than that is closed once it is idle (nothing in either
    direction for `idle` seconds, the last bytes having gone backend ->
    client, i.e. an answer delivered), so that the apiserver has to open a
    new one, which goes to the next backend.  It is not safe under load:
    Go's transport notices the close of an idle connection and dials
    again, but a POST it writes at that very moment fails ("failed calling
    webhook ... EOF", not retried: not idempotent); measured, 1-4 of 30
    creates in a burst.  Use it only with a pause longer than `idle`
    between requests (create_latency's spread mode).  Off by default."""

    THREAD = "e2e-balancer"

    def __init__(self, ports: Iterable[int], max_age: float | None = None,
                 idle: float = 0.05):
        super().__init__()
        self.ports = list(ports)
        self.connections = [0] * len(self.ports)
        self.refused = [0] * len(self.ports)
        self.aged_out = 0  # connections closed by max_age
        self.max_age = max_age
        self.idle = idle
        self._next = 0

    def set_backend(self, i: int, port: int) -> None:
        """Backend i is now PORT (a restarted replica listens on a new one)."""
        with self._lock:
            self.ports[i] = port

    def counts(self) -> list[int]:
        with self._lock:
            return list(self.connections)

    def _pick(self) -> tuple[int, int]:
        with self._lock:
            i = self._next
            self._next = (i + 1) % len(self.ports)
            return i, self.ports[i]

    async def _handle(self, creader: asyncio.StreamReader,
                      cwriter: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._tasks.add(task)
        try:
            for _ in range(len(self.ports)):
                i, port = self._pick()
                try:
                    breader, bwriter = await asyncio.open_connection("127.0.0.1", port)
                except OSError:
                    with self._lock:
                        self.refused[i] += 1
                    continue
                with self._lock:
                    self.connections[i] += 1
                try:
                    await self._relay(creader, cwriter, breader, bwriter)
                finally:
                    bwriter.close()
                    cwriter.close()
                return
            cwriter.close()  # every backend refused: so does the balancer
        finally:
            self._tasks.discard(task)

    async def _relay(self, creader: asyncio.StreamReader, cwriter: asyncio.StreamWriter,
                     breader: asyncio.StreamReader, bwriter: asyncio.StreamWriter) -> None:
        """Copies both ways until either side closes (or max_age), then
        returns; the caller closes both."""
        loop = asyncio.get_running_loop()
        state = {"start": loop.time(), "last": loop.time(), "down": False}

        async def pump(r: asyncio.StreamReader, w: asyncio.StreamWriter, down: bool) -> None:
            try:
                while True:
                    data = await r.read(65536)
                    if not data:
                        return
                    state["last"], state["down"] = loop.time(), down
                    w.write(data)
                    await w.drain()
            except OSError:
                return

        async def age() -> None:
            while True:
                max_age = self.max_age  # may be changed while connections are open
                if max_age is None:
                    await asyncio.sleep(0.25)
                    continue
                await asyncio.sleep(self.idle / 2)
                now = loop.time()
                if (now - state["start"] >= max_age and state["down"]
                        and now - state["last"] >= self.idle):
                    with self._lock:
                        self.aged_out += 1
                    return

        tasks = {asyncio.ensure_future(pump(creader, bwriter, False)),
                 asyncio.ensure_future(pump(breader, cwriter, True)),
                 asyncio.ensure_future(age())}
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


class ApiProxy(_Relay):
    """A TCP proxy in front of the apiserver that can be cut (issue #32:
    the apiserver unreachable from one replica): listens on
    127.0.0.1:PORT and relays each connection, as raw bytes (TLS passes
    through: the apiserver's certificate has SAN 127.0.0.1), to
    TARGET_PORT on 127.0.0.1.  kubeconfig(src, dst) writes a copy of a
    kubeconfig whose server is this proxy.

    cut(): a blackhole, as a partition is: from then on no byte is relayed
    in either direction on the open connections (what arrives is read and
    dropped, nothing is answered, nothing is closed), and new connections
    are accepted and then left silent, so that the client sees timeouts,
    not refusals.  restore(): relays again; the connections that lived
    through the cut are closed (their TLS streams lost bytes), new ones
    relay.  cut_at: time.monotonic() of the last cut (None when it
    relays)."""

    THREAD = "e2e-api-proxy"

    def __init__(self, target_port: int):
        super().__init__()
        self.target_port = target_port
        self.cut_at: float | None = None
        self.connections = 0
        self._conns: dict = {}  # the client side of each open connection

    @property
    def is_cut(self) -> bool:
        return self.cut_at is not None

    def kubeconfig(self, src: str | Path, dst: Path) -> Path:
        text = Path(src).read_text()
        new, n = re.subn(r"(server:\s*)https://127\.0\.0\.1:\d+",
                         lambda m: m.group(1) + self.url, text)
        assert n >= 1, f"no server: https://127.0.0.1:PORT in {src}"
        dst.write_text(new)
        dst.chmod(0o600)
        return dst

    def cut(self) -> None:
        with self._lock:
            self.cut_at = time.monotonic()

    def restore(self) -> None:
        # every connection open now lived through the cut (or was accepted
        # during it): closed; new ones relay
        with self._lock:
            if self.cut_at is None:
                return
            self.cut_at = None
            doomed = list(self._conns)
        loop = self._loop
        if loop is not None and doomed:
            def close() -> None:
                for w in doomed:
                    w.close()
            loop.call_soon_threadsafe(close)

    async def _handle(self, creader: asyncio.StreamReader,
                      cwriter: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._tasks.add(task)
        with self._lock:
            self.connections += 1
            self._conns[cwriter] = True
        bwriter = None
        try:
            if self.is_cut:  # accepted, then silent: a blackholed SYN-ACK
                while self.is_cut and await creader.read(65536):
                    pass
                return
            try:
                breader, bwriter = await asyncio.open_connection("127.0.0.1",
                                                                 self.target_port)
            except OSError:
                return

            async def pump(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
                try:
                    while True:
                        data = await r.read(65536)
                        if not data:
                            return
                        if self.is_cut:
                            continue  # dropped on the floor
                        w.write(data)
                        await w.drain()
                except OSError:
                    return
            tasks = {asyncio.ensure_future(pump(creader, bwriter)),
                     asyncio.ensure_future(pump(breader, cwriter))}
            try:
                await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            with self._lock:
                self._conns.pop(cwriter, None)
            if bwriter is not None:
                bwriter.close()
            cwriter.close()
            self._tasks.discard(task)


class Api:
    """Requests straight to the apiserver as the admin (the client
    certificate of the admin kubeconfig), with http.client: a burst of
    creates without kubectl's start-up (~0.1 s of CPU each) in between."""

    def __init__(self, cluster: Cluster, token: str | None = None):
        """token: a bearer token to be instead of the admin (then no client
        certificate is presented: the apiserver would take it first)."""
        m = re.fullmatch(r"https://([^:/]+):(\d+)/?", cluster.env["APISERVER_URL"])
        assert m, cluster.env["APISERVER_URL"]
        self.host, self.port = m.group(1), int(m.group(2))
        self.token = token
        pki = cluster.dir / "pki"
        self.context = ssl.create_default_context(cafile=cluster.env["CA_CERT"])
        if token is None:
            self.context.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))

    def connection(self, timeout: float = 30.0) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(self.host, self.port, context=self.context,
                                           timeout=timeout)

    def request(self, method: str, path: str, body: Any = None,
                conn: http.client.HTTPSConnection | None = None,
                content_type: str = "application/json") -> tuple[int, Any]:
        """(status, the decoded JSON answer or its text).  conn: reuse a
        kept-alive connection (closed here when not given)."""
        c = conn or self.connection()
        headers = {"Content-Type": content_type, "Accept": "application/json"}
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        try:
            data = None if body is None else json.dumps(body)
            c.request(method, path, data, headers)
            r = c.getresponse()
            raw = r.read().decode(errors="replace")
        finally:
            if conn is None:
                c.close()
        try:
            return r.status, json.loads(raw)
        except ValueError:
            return r.status, raw

    def pod_names(self, ns: str) -> list[str]:
        status, body = self.request("GET", f"/api/v1/namespaces/{ns}/pods")
        assert status == 200, (status, body)
        return sorted(p["metadata"]["name"] for p in body["items"])

    def delete_pods(self, ns: str) -> None:
        """Every pod of NS (deletecollection).  Pods no scheduler bound are
        deleted at once (no grace period applies without a node)."""
        status, body = self.request("DELETE", f"/api/v1/namespaces/{ns}/pods")
        if webhook_connection_race(status, body):
            status, body = self.request("DELETE", f"/api/v1/namespaces/{ns}/pods")
        assert status == 200, (status, body)


# What the replicas run with unless told otherwise: the shared usage store.
SHARED_REPLICA_ARGS = ("--usage-store shared --namespace gpugate-e2e --reservation-ttl 10 "
                       "--identity replica-{index}")


def replica_args(index: int, name: str, args: str | Iterable[str] | None = None) -> list[str]:
    """The extra `gpugate serve` arguments of replica INDEX: ARGS (a shell
    word string or a list), else $GPUGATE_E2E_REPLICA_ARGS, else
    SHARED_REPLICA_ARGS ("" runs them each on its own ledger, to see what
    the store prevents); {index} and {name} in each word become the
    replica's."""
    if args is None:
        args = os.environ.get("GPUGATE_E2E_REPLICA_ARGS", SHARED_REPLICA_ARGS)
    words = shlex.split(args) if isinstance(args, str) else list(args)
    return [w.format(index=index, name=name) for w in words]


class Replicas:
    """K gpugate processes serving REPLICAS_POLICY behind one Balancer,
    registered once (MutatingWebhookConfiguration and
    ValidatingWebhookConfiguration gpugate-replicas, url: the balancer's)
    for the namespaces labelled e2e.gpugate.io/policy=replicas.  Replica i
    is stack.gates["replica-i"]; a killed one goes to stack.retired (its
    stderr is still checked for sanitizer reports).

    proxied: each replica reaches the apiserver through an ApiProxy of its
    own (proxies[i], its kubeconfig kept across restarts), so that a test
    can cut one replica off the apiserver (proxies[i].cut()) and no other;
    otherwise they use the admin kubeconfig directly."""

    def __init__(self, stack: "Stack", k: int, args: str | Iterable[str] | None = None,
                 max_age: float | None = None, proxied: bool = False):
        self.stack = stack
        self.k = k
        self.args = args
        self.max_age = max_age
        self.proxied = proxied
        self.proxies: list[ApiProxy] = []
        self.policy = stack.dir / "replicas-policy.yaml"
        self.balancer: Balancer | None = None
        self.restarts = [0] * k

    def key(self, i: int) -> str:
        return f"replica-{i}"

    @property
    def gates(self) -> list[Gate]:
        return [self.stack.gates[self.key(i)] for i in range(self.k)]

    def _new_gate(self, i: int) -> Gate:
        st = self.stack
        name = self.key(i) + (f".{self.restarts[i]}" if self.restarts[i] else "")
        kubeconfig = st.cluster.env["KUBECONFIG"]
        if self.proxied:
            kubeconfig = str(st.dir / f"{self.key(i)}-via-proxy.kubeconfig")
        return Gate(st.binary, st.certs, self.policy, st.dir / "gpugate",
                    kubeconfig, name=name, args=replica_args(i, name, self.args))

    def start(self) -> "Replicas":
        st, k = self.stack, self.stack.kubectl
        t0 = time.monotonic()
        self.policy.write_text(REPLICAS_POLICY)
        objs = [namespace_obj(ns, "replicas") for ns in REPLICA_NAMESPACES]
        objs.append({"apiVersion": "v1", "kind": "Namespace",
                     "metadata": {"name": REPLICA_STORE_NAMESPACE}})
        k.apply({"apiVersion": "v1", "kind": "List", "items": objs}).check()
        if self.proxied:
            target = int(re.fullmatch(r"https://127\.0\.0\.1:(\d+)/?",
                                      st.cluster.env["APISERVER_URL"]).group(1))
            for i in range(self.k):
                px = ApiProxy(target).start()
                self.proxies.append(px)
                px.kubeconfig(st.cluster.env["KUBECONFIG"],
                              st.dir / f"{self.key(i)}-via-proxy.kubeconfig")
        for i in range(self.k):
            st.gates[self.key(i)] = self._new_gate(i).start()
        for g in self.gates:
            g.wait_ready()
        self.balancer = Balancer([g.port for g in self.gates], self.max_age).start()
        k.apply({"apiVersion": "v1", "kind": "List", "items": webhook_configs(
            "gpugate-replicas", self.balancer.url, st.certs.ca_bundle, "replicas")}).check()
        wait_service_accounts(k, REPLICA_NAMESPACES)
        wait_webhooks(k, "replicas")
        log(f"{self.k} replicas up in {time.monotonic() - t0:.1f}s behind "
            f"{self.balancer.url}: " + ", ".join(f"{g.name} on {g.port}" for g in self.gates)
            + (f"; extra args {self.gates[0].args}" if self.gates[0].args else ""))
        return self

    def kill(self, i: int) -> Gate:
        """SIGKILL replica i (no clean-up of any kind runs)."""
        g = self.stack.gates[self.key(i)]
        g.kill()
        self.stack.retired.append(g)
        return g

    def restart(self, i: int) -> Gate:
        """A new process for replica i (same index and extra arguments, a
        new port), once it is ready (/readyz: usage synced from the API),
        behind the balancer in the old one's place."""
        self.restarts[i] += 1
        g = self._new_gate(i).start()
        self.stack.gates[self.key(i)] = g
        g.wait_ready()
        self.balancer.set_backend(i, g.port)
        return g

    def requests(self, endpoint: str = "validate") -> list[int | None]:
        """Each replica's gpugate_admission_requests_total{endpoint} (None
        for one that is not running)."""
        out: list[int | None] = []
        for g in self.gates:
            try:
                out.append(g.requests(endpoint) if g.alive else None)
            except OSError:
                out.append(None)
        return out

    def used(self, tenant: str, flavor: str = "h100-80gb") -> list[int]:
        return [g.quota_used(tenant, flavor) for g in self.gates]

    def wait_used(self, tenant: str, want: int, flavor: str = "h100-80gb",
                  timeout: float = 30.0) -> None:
        for g in self.gates:
            g.wait_used(tenant, want, flavor, timeout)

    def stop(self) -> list[str]:
        """Unregisters the webhooks, stops every replica (SIGTERM, exit 0
        expected; they go to stack.retired) and the balancer.  The problems
        of the replicas' shutdown."""
        problems: list[str] = []
        st = self.stack
        if st.kubectl is not None:
            try:  # best effort: also runs in the stack's teardown
                st.kubectl("delete", "mutatingwebhookconfiguration,"
                           "validatingwebhookconfiguration", "gpugate-replicas",
                           "--ignore-not-found", timeout=20)
            except (subprocess.TimeoutExpired, OSError) as e:
                problems.append(f"deleting the replicas' webhook configurations: {e}")
        for i in range(self.k):
            g = st.gates.pop(self.key(i), None)
            if g is not None:
                problems += g.stop_and_check()
                st.retired.append(g)
        if self.balancer is not None:
            self.balancer.stop()
        for px in self.proxies:
            px.stop()
        return problems


def percentile(sorted_values: list[float], q: float) -> float:
    """The q-th percentile (0..100) by the nearest-rank method."""
    if not sorted_values:
        return float("nan")
    rank = max(1, -(-len(sorted_values) * q // 100))
    return sorted_values[int(min(rank, len(sorted_values))) - 1]


def create_latency(api: Api, ns: str, n: int = 200, cls: str = "gpu",
                   prefix: str = "lat", pause_every: int = 0,
                   pause: float = 0.0) -> list[float]:
    """Creates N class pods in NS one after the other through the apiserver
    (one kept-alive connection, as a controller's client does) and returns
    each create's latency as the client saw it, in seconds, in order.  Every
    create must succeed (the tenant needs room for N).  pause_every: before
    the first create and every PAUSE_EVERY-th, sleep PAUSE seconds (not
    timed): with
    Balancer.max_age set, the quiet lets the balancer close the apiserver's
    webhook connection safely, and the next create goes to the next
    replica."""
    conn = api.connection()
    times = []
    try:
        for i in range(n):
            if pause_every and i % pause_every == 0:
                time.sleep(pause)
            t = time.perf_counter()
            status, body = api.request("POST", f"/api/v1/namespaces/{ns}/pods",
                                       pod(f"{prefix}-{i}", ns, cls), conn=conn)
            if webhook_connection_race(status, body):
                # This client retries, once, and times the retry.
                t = time.perf_counter()
                status, body = api.request("POST", f"/api/v1/namespaces/{ns}/pods",
                                           pod(f"{prefix}-{i}", ns, cls), conn=conn)
            times.append(time.perf_counter() - t)
            assert status == 201, (f"create {i} of {n} in {ns}: {status}", body)
    finally:
        conn.close()
    return times


def create_latency_interleaved(api: Api, namespaces: list[str], n: int,
                               cls: str = "gpu", prefix: str = "lat") -> dict[str, list[float]]:
    """N class pods in each of NAMESPACES, one create at a time through the
    apiserver on one kept-alive connection, the namespaces taking turns
    (create i goes to each namespace in turn, the order rotated by one each
    time): each namespace's latencies, in seconds, in order.  What slows
    the machine for a moment slows every namespace alike, so that the
    differences between them are the webhooks', not the moment's (a paired
    design; create_latency() times one namespace's creates in a block).
    Every create must succeed; a webhook connection race is retried once
    and the retry timed, as in create_latency()."""
    conn = api.connection()
    times: dict[str, list[float]] = {ns: [] for ns in namespaces}
    try:
        for i in range(n):
            k = i % len(namespaces)
            for ns in namespaces[k:] + namespaces[:k]:
                obj = pod(f"{prefix}-{i}", ns, cls)
                t = time.perf_counter()
                status, body = api.request("POST", f"/api/v1/namespaces/{ns}/pods",
                                           obj, conn=conn)
                if webhook_connection_race(status, body):
                    t = time.perf_counter()
                    status, body = api.request("POST", f"/api/v1/namespaces/{ns}/pods",
                                               obj, conn=conn)
                times[ns].append(time.perf_counter() - t)
                assert status == 201, (f"create {i} of {n} in {ns}: {status}", body)
    finally:
        conn.close()
    return times


def webhook_connection_race(status: int, body) -> bool:
    """The test Balancer closed a kept-alive webhook connection (max_age,
    or idle) just as the apiserver reused it: "broken pipe" or "connection
    reset by peer" from the webhook call.  The apiserver does not retry a
    webhook POST; the callers that go through a Balancer retry once.  A
    gpugate that died would refuse the retry too."""
    text = json.dumps(body)
    return status == 500 and "failed calling webhook" in text and (
        "broken pipe" in text or "connection reset by peer" in text)


class Stack:
    """cluster + certs + the two gpugate processes + webhooks + namespaces."""

    def __init__(self, dir: Path, binary: Path | None = None, quota: bool = True,
                 node_health: bool = False):
        self.dir = Path(dir)
        self.binary = binary or gpugate_bin()
        self.with_quota = quota
        # node_health: the gates keep gpugate's health taint and record on
        # Nodes (demo.sh: one gpugate); otherwise NO_NODE_HEALTH.
        self.gate_args = GATE_ARGS + (() if node_health else (NO_NODE_HEALTH,))
        self.cluster = Cluster(self.dir / "cluster")
        self.kubectl: Kubectl | None = None
        self.certs: Certs | None = None
        self.example_policy = self.dir / "example-policy.yaml"
        self.quota_policy = self.dir / "quota-policy.yaml"
        self.raw_policy = self.dir / "raw-policy.yaml"
        self.dra_policy = self.dir / "dra-policy.yaml"
        self.gates: dict[str, Gate] = {}
        self.retired: list[Gate] = []  # stopped by tests; checked at the end
        self.tenants: dict[str, Kubectl] = {}  # namespace -> its tenant's kubectl
        self.replicas: Replicas | None = None  # start_replicas
        self._api: Api | None = None

    def up(self) -> "Stack":
        t0 = time.monotonic()
        self.dir.mkdir(parents=True, exist_ok=True)
        if not os.access(self.binary, os.X_OK):
            raise RuntimeError(f"{self.binary} is not built: run `make` (or set GPUGATE_BIN)")
        self.cluster.up()
        log(f"control plane up in {time.monotonic() - t0:.1f}s: "
            f"{self.cluster.env['APISERVER_URL']}")
        self.kubectl = self.cluster.kubectl()
        self.certs = make_certs(self.binary, self.dir / "certs")
        self.example_policy.write_text(with_success_lines(EXAMPLE_POLICY.read_text()))
        self.quota_policy.write_text(QUOTA_POLICY)
        self.raw_policy.write_text(RAW_POLICY)
        self.dra_policy.write_text(DRA_POLICY)
        policies = {"example": self.example_policy}
        if self.with_quota:
            policies["quota"] = self.quota_policy
            policies["raw"] = self.raw_policy
            policies["dra"] = self.dra_policy
        for name, policy in policies.items():
            self.gates[name] = self.start_gate(name, policy)
        for name, gate in self.gates.items():
            gate.wait_ready()
            register(self.kubectl, f"gpugate-{name}", gate, name)
        k = self.kubectl
        objs: list[dict] = [namespace_obj(ns, "example") for ns in EXAMPLE_NAMESPACES]
        if self.with_quota:
            objs += [namespace_obj(ns, "quota") for ns in QUOTA_NAMESPACES]
            objs += [namespace_obj(ns, "raw") for ns in RAW_NAMESPACES]
            objs += [namespace_obj(ns, "dra") for ns in DRA_NAMESPACES]
        objs += priority_classes()
        k.apply({"apiVersion": "v1", "kind": "List", "items": objs}).check()
        create_checkpoint_claims(k)
        wait_service_accounts(k, [o["metadata"]["name"] for o in objs
                                  if o["kind"] == "Namespace"] + ["kube-system"])
        for name in self.gates:
            wait_webhooks(k, name)
        log(f"stack up in {time.monotonic() - t0:.1f}s: " + ", ".join(
            f"gpugate {n} on {g.url}" for n, g in self.gates.items()))
        return self

    @property
    def api(self) -> Api:
        """Direct requests to the apiserver as the admin."""
        if self._api is None:
            self._api = Api(self.cluster)
        return self._api

    def start_replicas(self, k: int = 3, args: str | Iterable[str] | None = None,
                       max_age: float | None = None, proxied: bool = False) -> Replicas:
        """K gpugate processes serving REPLICAS_POLICY behind a Balancer
        (see Replicas), started once per session; ARGS: extra `gpugate
        serve` arguments (default $GPUGATE_E2E_REPLICA_ARGS); PROXIED:
        each through an ApiProxy of its own to the apiserver."""
        if self.replicas is None:
            r = Replicas(self, k, args, max_age, proxied)
            self.replicas = r  # so that down() stops what start() got to
            r.start()
        assert self.replicas.k == k, f"replicas already started with k={self.replicas.k}"
        return self.replicas

    def stop_replicas(self) -> list[str]:
        """Stops what start_replicas started (the problems, see
        Replicas.stop); a later start_replicas starts them anew."""
        r, self.replicas = self.replicas, None
        return r.stop() if r is not None else []

    def tenant_kubectl(self, namespace: str) -> Kubectl:
        """kubectl as a tenant of NAMESPACE and nothing more: ServiceAccount
        NAMESPACE/tenant, bound by RoleBinding tenant-edit to the built-in
        ClusterRole edit (its aggregated rules: cluster.sh runs the
        aggregation controller), in that namespace only; its token from
        `kubectl create token`.  One per namespace and session."""
        if namespace in self.tenants:
            return self.tenants[namespace]
        k = self.kubectl
        k.apply({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "ServiceAccount",
             "metadata": {"name": "tenant", "namespace": namespace}},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": {"name": "tenant-edit", "namespace": namespace},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                         "name": "edit"},
             "subjects": [{"kind": "ServiceAccount", "name": "tenant",
                           "namespace": namespace}]}]}).check()
        token = k("create", "token", "tenant", "-n", namespace,
                  "--duration=4h").check().out.strip()
        kubeconfig = self.dir / f"tenant-{namespace}.kubeconfig"
        kubeconfig.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "tenant",
            "clusters": [{"name": "e2e", "cluster": {
                "server": self.cluster.env["APISERVER_URL"],
                "certificate-authority": self.cluster.env["CA_CERT"]}}],
            "users": [{"name": "tenant", "user": {"token": token}}],
            "contexts": [{"name": "tenant", "context": {
                "cluster": "e2e", "user": "tenant", "namespace": namespace}}]}))
        kubeconfig.chmod(0o600)
        tk = Kubectl(self.cluster.env["KUBECTL"], str(kubeconfig),
                     str(self.dir / "kubectl-cache"))
        # the RBAC authorizer learns of the binding through a watch
        wait_until(f"the tenant of {namespace} to be bound to edit",
                   lambda: tk("auth", "can-i", "create", "pods", "-n", namespace
                              ).out.strip() == "yes", 30)
        self.tenants[namespace] = tk
        return tk

    def start_gate(self, name: str, policy: Path, listen: str = "127.0.0.1:0",
                   kubeconfig: str | None = None) -> Gate:
        gate = Gate(self.binary, self.certs, policy, self.dir / "gpugate",
                    kubeconfig or self.cluster.env["KUBECONFIG"], name=name, listen=listen,
                    args=self.gate_args)
        return gate.start()

    def restart_gate(self, name: str) -> tuple[Gate, list[str]]:
        """Stops gpugate NAME with SIGTERM, starts a new one on a new port,
        waits for /readyz, points the webhooks at it.  Returns the new gate
        and the problems of the old one's shutdown."""
        old = self.gates[name]
        problems = old.stop_and_check()
        self.retired.append(old)
        n = sum(1 for g in self.retired if g.name.startswith(name))
        gate = Gate(self.binary, self.certs, old.policy, self.dir / "gpugate",
                    old.kubeconfig, name=f"{name}-{n + 1}", args=old.args).start()
        self.gates[name] = gate
        gate.wait_ready()
        register(self.kubectl, f"gpugate-{name}", gate, name)
        wait_webhooks(self.kubectl, name)
        return gate, problems

    def down(self) -> list[str]:
        problems: list[str] = []
        problems += self.stop_replicas()
        for gate in self.gates.values():
            problems += gate.stop_and_check()
        for gate in self.retired:
            r = gate.sanitizer_report()
            if r:
                problems.append(f"{gate.name}: sanitizer report on stderr:\n{r}")
        self.cluster.down()
        return problems


# ---------------------------------------------------------------------------
# command line for demo.sh: the gpugate processes must outlive this process,
# so `down` finds them through their pid files.


def _cli_up(dir: Path, fleet: bool = False) -> int:
    """FLEET: also the example policy's fake GPU fleet (EXAMPLE_FLEET), its
    nodes Ready.  `down` needs nothing more: the nodes go with etcd."""
    st = Stack(dir, quota=False, node_health=True)
    try:
        st.up()
        if fleet:
            Fleet(st.kubectl, **EXAMPLE_FLEET).create()
    except BaseException as e:  # leave nothing behind
        log(f"up failed: {e}")
        for g in st.gates.values():
            g.kill()
        st.cluster.down()
        return 1
    g = st.gates["example"]
    with open(dir / "env", "w") as f:
        for k, v in st.cluster.env.items():
            f.write(f"export {k}={v}\n")
        f.write(f"export GPUGATE_URL={g.url}\nexport GPUGATE_PID={g.pid}\n"
                f"export GPUGATE_CA={st.certs.ca}\n"
                f"export GPUGATE_STDERR={g.stderr_path}\n"
                f"export GPUGATE_POLICY={st.example_policy}\n")
    return 0


def _cli_down(dir: Path) -> int:
    rc = 0
    for pidfile in sorted((dir / "gpugate").glob("*.pid")):
        pid = int(pidfile.read_text())
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue  # already gone
        if b"serve" not in cmdline or str(dir).encode() not in cmdline:
            continue  # not ours any more
        os.kill(pid, signal.SIGTERM)
        for _ in range(300):
            if not Path(f"/proc/{pid}").exists() or \
                    Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
                break
            time.sleep(0.1)
        else:
            os.kill(pid, signal.SIGKILL)
            log(f"gpugate (pid {pid}) did not stop within 30s of SIGTERM")
            rc = 1
    for err in sorted((dir / "gpugate").glob("*.stderr")):
        text = err.read_text(errors="replace")
        if any(m in text for m in SANITIZER_MARKERS):
            log(f"sanitizer report in {err}")
            rc = 1
    Cluster(dir / "cluster").down()
    return rc


def main(argv: list[str]) -> int:
    args = argv[1:]
    fleet = args[0:1] == ["up"] and "--fleet" in args
    if fleet:
        args.remove("--fleet")
    if len(args) != 2 or args[0] not in ("up", "down") or not args[1]:  # "" is not "."
        print(f"usage: {argv[0]} up [--fleet] DIR | down DIR", file=sys.stderr)
        return 2
    d = Path(args[1]).resolve()
    return _cli_up(d, fleet) if args[0] == "up" else _cli_down(d)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
