"""The end-to-end stack: a local control plane (cluster.sh), gpugate serving
against it in API mode, and the webhook configurations that connect them.

Used by conftest.py (the pytest fixtures) and by demo.sh through the small
command line at the bottom:

    python3 tests/e2e/gpugate_e2e.py up DIR     # cluster + gpugate + webhooks
    python3 tests/e2e/gpugate_e2e.py down DIR   # stop gpugate (SIGTERM), cluster down

Two gpugate processes serve one cluster, each with its own policy and its
own pair of webhook configurations:

  - "example": policy/examples/gpu-cluster.yaml, for every namespace except
    kube-system, gpugate and the namespaces labelled
    e2e.gpugate.io/policy=quota;
  - "quota": QUOTA_POLICY (small numbers), only for namespaces labelled
    e2e.gpugate.io/policy=quota.

Both register their webhooks as mutate.gpugate.io and validate.gpugate.io
(names need only be unique within one configuration), so users see the
same messages as in a real installation.  The namespace sets of the two
policies are disjoint, so neither process counts the other's workloads.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import ssl
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CLUSTER_SH = HERE / "cluster.sh"
EXAMPLE_POLICY = ROOT / "policy" / "examples" / "gpu-cluster.yaml"

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
QUOTA_POLICY = """\
version: 1
settings:
  rawGpuRequests: reject
  mode: enforce
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
checkpoint:
  gracePeriodSeconds: 300
  mountPath: /checkpoint
  preStop: ["/bin/sh", "-c", "kill -TERM 1; sleep 30"]
  env: ["GPUGATE_CHECKPOINT_DIR=/checkpoint"]
"""

# Namespaces created at start-up: name -> which gpugate serves it.
EXAMPLE_NAMESPACES = ["research", "research-jobs", "product-inference",
                      "sandbox-1", "no-tenant", "gpugate"]
QUOTA_NAMESPACES = ["alpha", "beta", "solo", "batch", "dry", "durable", "lenient"]

ASAN_DEFAULTS = "detect_leaks=1:abort_on_error=0:halt_on_error=1"
UBSAN_DEFAULTS = "print_stacktrace=1:halt_on_error=0"


def log(msg: str) -> None:
    print(f"e2e: {msg}", file=sys.stderr, flush=True)


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
    """The real kubectl from the cluster's env, with the admin kubeconfig."""

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


class Gate:
    """One `gpugate serve` process, in its own session, stdout and stderr in
    files (so that it may outlive the Python process that started it, as in
    demo.sh)."""

    def __init__(self, binary: Path, certs: Certs, policy: Path, workdir: Path,
                 kubeconfig: str | None, name: str = "gpugate", listen: str = "127.0.0.1:0"):
        self.binary = binary
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


def selector(policy: str) -> dict:
    """The namespaceSelector of the installation (NotIn kube-system,
    gpugate) plus the split between the two e2e gpugate processes."""
    exprs = [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
              "values": ["kube-system", "gpugate"]}]
    if policy == "quota":
        exprs.append({"key": POLICY_LABEL, "operator": "In", "values": ["quota"]})
    else:
        exprs.append({"key": POLICY_LABEL, "operator": "NotIn", "values": ["quota"]})
    return {"matchExpressions": exprs}


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

    # DRA claims and templates: validated (and claims charged), never mutated.
    dra = [{"apiGroups": ["resource.k8s.io"], "apiVersions": ["v1"],
            "operations": ["CREATE"], "scope": "Namespaced",
            "resources": ["resourceclaims", "resourceclaimtemplates"]}]

    mutating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": config_name},
        "webhooks": [dict(common, name="mutate.gpugate.io",
                          clientConfig={"url": f"{url}/mutate", "caBundle": ca_bundle},
                          rules=rules(["CREATE"]), reinvocationPolicy="IfNeeded")],
    }
    validating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": config_name},
        "webhooks": [dict(common, name="validate.gpugate.io",
                          clientConfig={"url": f"{url}/validate", "caBundle": ca_bundle},
                          rules=rules(["CREATE", "UPDATE", "DELETE"]) + dra)],
    }
    return [mutating, validating]


def register(kubectl: Kubectl, config_name: str, gate: Gate, policy: str) -> None:
    items = webhook_configs(config_name, gate.url, gate.certs.ca_bundle, policy)
    kubectl.apply({"apiVersion": "v1", "kind": "List", "items": items}).check()


# A namespace and class each gpugate admits, for probes (dry runs: nothing
# is reserved).
PROBES = {"example": ("research", "train-small"), "quota": ("solo", "gpu")}


def wait_webhooks(kubectl: Kubectl, policy: str, timeout: float = 30.0) -> None:
    """Until the apiserver calls the registered webhook: a server-side dry
    run of a class Pod comes back with gpugate's warning (the apiserver
    loads webhook configurations asynchronously)."""
    ns, cls = PROBES[policy]
    probe = json.dumps(pod("webhook-probe", ns, cls))

    def called():
        r = kubectl("create", "--dry-run=server", "-f", "-", input=probe)
        return r.rc == 0 and "Warning: gpugate: " in r.err
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


class Stack:
    """cluster + certs + the two gpugate processes + webhooks + namespaces."""

    def __init__(self, dir: Path, binary: Path | None = None, quota: bool = True):
        self.dir = Path(dir)
        self.binary = binary or gpugate_bin()
        self.with_quota = quota
        self.cluster = Cluster(self.dir / "cluster")
        self.kubectl: Kubectl | None = None
        self.certs: Certs | None = None
        self.quota_policy = self.dir / "quota-policy.yaml"
        self.gates: dict[str, Gate] = {}
        self.retired: list[Gate] = []  # stopped by tests; checked at the end

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
        self.quota_policy.write_text(QUOTA_POLICY)
        policies = {"example": EXAMPLE_POLICY}
        if self.with_quota:
            policies["quota"] = self.quota_policy
        for name, policy in policies.items():
            self.gates[name] = self.start_gate(name, policy)
        for name, gate in self.gates.items():
            gate.wait_ready()
            register(self.kubectl, f"gpugate-{name}", gate, name)
        k = self.kubectl
        objs: list[dict] = [namespace_obj(ns, "example") for ns in EXAMPLE_NAMESPACES]
        if self.with_quota:
            objs += [namespace_obj(ns, "quota") for ns in QUOTA_NAMESPACES]
        objs.append({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                     "metadata": {"name": "training"}, "value": 1000,
                     "description": "gpugate e2e: class train-large"})
        k.apply({"apiVersion": "v1", "kind": "List", "items": objs}).check()
        wait_service_accounts(k, [o["metadata"]["name"] for o in objs
                                  if o["kind"] == "Namespace"] + ["kube-system"])
        for name in self.gates:
            wait_webhooks(k, name)
        log(f"stack up in {time.monotonic() - t0:.1f}s: " + ", ".join(
            f"gpugate {n} on {g.url}" for n, g in self.gates.items()))
        return self

    def start_gate(self, name: str, policy: Path, listen: str = "127.0.0.1:0",
                   kubeconfig: str | None = None) -> Gate:
        gate = Gate(self.binary, self.certs, policy, self.dir / "gpugate", 
                    kubeconfig or self.cluster.env["KUBECONFIG"], name=name, listen=listen)
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
                    old.kubeconfig, name=f"{name}-{n + 1}").start()
        self.gates[name] = gate
        gate.wait_ready()
        register(self.kubectl, f"gpugate-{name}", gate, name)
        wait_webhooks(self.kubectl, name)
        return gate, problems

    def down(self) -> list[str]:
        problems: list[str] = []
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


def _cli_up(dir: Path) -> int:
    st = Stack(dir, quota=False)
    try:
        st.up()
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
                f"export GPUGATE_STDERR={g.stderr_path}\n")
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
    if len(argv) != 3 or argv[1] not in ("up", "down"):
        print(f"usage: {argv[0]} up|down DIR", file=sys.stderr)
        return 2
    d = Path(argv[2]).resolve()
    return _cli_up(d) if argv[1] == "up" else _cli_down(d)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
