"""Idle GPUs (issue #31 item 5; SPEC section 10) on a fake GPU fleet of its
own, with a real Prometheus (Debian's `prometheus` package) scraping a
stand-in for NVIDIA's dcgm-exporter (dcgm_standin.py: the exporter's
metric names and label set, values set here per pod).

A gpugate of this module (stack.gates["idle"], namespaces labelled
e2e.gpugate.io/policy=idle) serves IDLE_POLICY: flavor l40s-48gb on three
KWOK nodes of 4 GPUs, class `gpu` (no idle rule of its own) and class
`ckpt` (preemptible, `idle: {below: 5%, for: 1m, action: reclaim}`);
tenant `ruled` (namespace idle-a) with `idle: {below: 5%, for: 1m,
action: warn}` (so its `gpu` pods are warned, its `ckpt` pods taken back:
the class wins), tenant `unruled` (namespace idle-b) with no rule;
checkpoint.timeoutSeconds 10.  It is the only gpugate of the session given
a Prometheus (`--prometheus-url`, `--idle-interval 10`, the least that
serve takes), and runs with
--no-node-health like the session's.  The session's gates have no idle
rule and no Prometheus, and do not serve these namespaces (the policy
label) nor this flavor.

Prometheus scrapes the stand-in every second with honor_labels: true.
The scrape target carries `namespace` and `pod` labels of its own, those
of the exporter's pod, as Kubernetes service discovery gives them: with
honor_labels the exporter's `namespace` and `pod` (the GPU's holder) win;
without it Prometheus renames them exported_namespace and exported_pod
and gpugate would find no pod.  Neither installer turns it on by default:
the dcgm-exporter chart's serviceMonitor.honorLabels (deployment/
values.yaml: false), the GPU Operator's ClusterPolicy
spec.dcgmExporter.serviceMonitor.honorLabels (api/nvidia/v1/
clusterpolicy_types.go: unset).  --query.lookback-delta 30s: a pod's series ends soon after the
exporter stops serving it.

The workloads, all started at once (`for` is at least a minute: one
clock for the whole module, the tests in file order read it):

  idle-a (ruled)   sleepy   pod, class gpu, 1 GPU at 1.2 %   -> warned
                   stalled  Job, class ckpt, 2 GPUs at 3 %, served as
                            DCGM_FI_DEV_GPU_UTIL only       -> reclaimed
                   busy     Job, class ckpt, 2 GPUs at 50 % and 70 %
                                                             -> runs on
                   dark     pod, class ckpt, 1 GPU, no series -> never idle
  idle-b (unruled) loafer   pod, class gpu, 1 GPU at 0 %     -> never acted on
                   worker   pod, class gpu, 1 GPU at 50 %    (the meters)

  test_young_pods_are_not_judged        the series reach Prometheus with
      the holders' labels; for the first `for` nothing is annotated or
      told; the meters' first reading;
  test_an_idle_job_is_reclaimed_while_a_busy_one_runs  stalled: warned,
      asked to checkpoint, reports, suspended with gpugate.io/reclaimed=
      idle, GPUIdleReclaimed, not resumed; its quota released; busy runs
      on, untouched (first: it has checkpoint.timeoutSeconds from the
      signal to report);
  test_an_idle_pod_is_warned            sleepy, found idle in the same
      round: gpugate.io/idle-since, the Event GPUIdle, gpugate_idle_gpus,
      `gpugate pool`; not signalled;
  test_a_pod_without_series_is_never_idle   dark;
  test_a_tenant_without_a_rule_is_never_acted_on   loafer;
  test_the_meters_move                  gpugate_gpu_seconds_total and
      gpugate_gpu_busy_seconds_total, the busy share as the stand-in's
      values say.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml

from dcgm_standin import PROF, UTIL, Server
from gpugate_e2e import (JOB_NAME, NO_NODE_HEALTH, POLICY_LABEL, PREEMPTIBLE, Fleet, Gate,
                         assert_invariant, job, log, pod, register, wait_service_accounts,
                         wait_until, wait_webhooks)
from test_fleet import node_of, phase

pytestmark = pytest.mark.plain_only

GATE = "idle"            # stack.gates key, the webhook configurations' policy label
HOME = "gpugate-idle"    # this gpugate's namespace (--namespace: Leases, reclaim state)
NS = "idle-a"            # tenant ruled
NS_FREE = "idle-b"       # tenant unruled
RULED, UNRULED = "ruled", "unruled"
FLAVOR = "l40s-48gb"
GPU = "nvidia.com/gpu"
NOMINAL = {RULED: 8, UNRULED: 4}
FOR_S = 60               # idle.for: the policy's minimum
TIMEOUT_S = 10           # checkpoint.timeoutSeconds: time for the test to report
IDLE_ROUND_S = 10        # --idle-interval (its minimum)
RECLAIM_ROUND_S = 2      # the reclaimer's interval
POLL = 0.5

IDLE_SINCE = "gpugate.io/idle-since"
REQUESTED = "gpugate.io/checkpoint-requested"
DONE = "gpugate.io/checkpoint-done"
RECLAIMED = "gpugate.io/reclaimed"
RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")

IDLE_POLICY = f"""\
version: 1
settings:
  admissionWarnings: all
  rawGpuRequests: reject
  mode: enforce
flavors:
  - name: {FLAVOR}
    resource: {GPU}
    sharing: exclusive
    nodeSelector: ["nvidia.com/gpu.product=NVIDIA-L40S"]
    tolerations:
      - {{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}}
    gpusPerNode: 4
classes:
  - name: gpu
    description: 1 to 4 L40S, not preemptible, no idle rule of its own
    flavor: {FLAVOR}
    gpus: 1
    maxGpus: 4
  - name: ckpt
    description: 1 to 4 L40S, preemptible; taken back when idle
    flavor: {FLAVOR}
    gpus: 1
    maxGpus: 4
    preemptible: true
    idle: {{below: "5%", for: 1m, action: reclaim}}
tenants:
  - name: {RULED}
    namespaces: [{NS}]
    quota:
      - {{flavor: {FLAVOR}, nominal: {NOMINAL[RULED]}}}
    idle: {{below: "5%", for: 1m, action: warn}}
  - name: {UNRULED}
    namespaces: [{NS_FREE}]
    quota:
      - {{flavor: {FLAVOR}, nominal: {NOMINAL[UNRULED]}}}
checkpoint:
  timeoutSeconds: {TIMEOUT_S}
  gracePeriodSeconds: 5
"""


# ---------------------------------------------------------------------------
# Prometheus


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prometheus:
    """Debian's prometheus scraping the stand-in every second."""

    JOB = "nvidia-dcgm-exporter"
    # What Kubernetes service discovery would put on the exporter's target
    # (its own pod): honor_labels keeps the series' own namespace and pod.
    TARGET_LABELS = {"namespace": "gpu-operator", "pod": "nvidia-dcgm-exporter-x7k2p",
                     "container": "nvidia-dcgm-exporter"}

    def __init__(self, binary: str, workdir: Path, target: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
            "scrape_configs": [{
                "job_name": self.JOB, "honor_labels": True, "metrics_path": "/metrics",
                "static_configs": [{"targets": [target], "labels": self.TARGET_LABELS}],
            }],
        }
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.log = workdir / "prometheus.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [binary, f"--config.file={workdir / 'prometheus.yml'}",
                 f"--storage.tsdb.path={workdir / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}",
                 "--query.lookback-delta=30s"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def query(self, expr: str) -> list[dict]:
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return body["data"]["result"]

    def up(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"prometheus exited:\n{self.log_tail()}")
        try:
            return bool(self.query(f'up{{job="{self.JOB}"}} == 1'))
        except OSError:
            return False

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def log_tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])


# ---------------------------------------------------------------------------
# what gpugate says


def metric(gate: Gate, name: str, **labels: str) -> float | None:
    for line in gate.metrics().splitlines():
        m = re.match(r"^(\w+)(?:\{(.*)\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        have = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            return float(m.group(3))
    return None


def annotations(obj: dict) -> dict:
    return obj["metadata"].get("annotations") or {}


def events(k, ns: str, kind: str, name: str, reason: str) -> list[dict]:
    return k("get", "events", "-n", ns, "--field-selector",
             f"involvedObject.kind={kind},involvedObject.name={name},reason={reason}",
             "-o", "json").json()["items"]


def idle_events(k, ns: str) -> list[str]:
    """Every GPUIdle or GPUIdleReclaimed Event of NS: "Kind/name reason"."""
    out = []
    for e in k("get", "events", "-n", ns, "-o", "json").json()["items"]:
        if e.get("reason") in ("GPUIdle", "GPUIdleReclaimed"):
            o = e["involvedObject"]
            out.append(f"{o['kind']}/{o['name']} {e['reason']}: {e.get('message')}")
    return out


def wait_events(k, ns: str, kind: str, name: str, reason: str,
                timeout: float = 15.0) -> list[dict]:
    try:
        return wait_until(f"Event {reason} on {kind} {ns}/{name}",
                          lambda: events(k, ns, kind, name, reason), timeout, POLL)
    except AssertionError:
        raise AssertionError(f"no Event {reason} on {kind} {ns}/{name} within {timeout:.0f}s;"
                             f" the idle Events of {ns}: {idle_events(k, ns)}") from None


def count(e: dict) -> int:
    return int(e.get("count") or (e.get("series") or {}).get("count") or 1)


def rfc3339(text: str) -> float:
    assert RFC3339.fullmatch(text), f"{IDLE_SINCE} is not RFC 3339 UTC seconds: {text!r}"
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=timezone.utc).timestamp()


def started(p: dict) -> float:
    """The pod's status.startTime, Unix seconds."""
    return rfc3339(p["status"]["startTime"])


def gpugate_pool(stack, gate: Gate, *args: str) -> str:
    r = subprocess.run([str(stack.binary), "pool", "--policy", str(gate.policy),
                        "--kubeconfig", stack.cluster.env["KUBECONFIG"], *args],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r
    return r.stdout


# ---------------------------------------------------------------------------
# the scene


@dataclass
class Scene:
    k: object
    stack: object
    gate: Gate
    prom: Prometheus
    exporter: Server
    t0: float = 0.0           # monotonic: when every pod ran and had its values
    idle_seen: float = 0.0    # monotonic: when sleepy was first seen idle
    pods: dict = field(default_factory=dict)     # short name -> pod object (at start)
    meters: list = field(default_factory=list)   # [(monotonic, {(name, tenant): v})]

    def pod(self, short: str) -> dict:
        p = self.pods[short]
        return self.k.get("pod", p["metadata"]["name"], p["metadata"]["namespace"])

    def wait_idle(self, short: str = "sleepy") -> dict:
        """The pod SHORT once gpugate annotated it idle (by the first idle
        round after it ran for `for`, and a round of slack)."""
        deadline = self.t0 + FOR_S + 2 * IDLE_ROUND_S + 5
        try:
            p = wait_until(f"{IDLE_SINCE} on {short}",
                           lambda: (lambda p: p if IDLE_SINCE in annotations(p) else None)(
                               self.pod(short)),
                           max(deadline - time.monotonic(), 5), POLL)
        except AssertionError:
            raise AssertionError(
                f"{short} not found idle {time.monotonic() - self.t0:.0f} s after it "
                f"started (rule: below 5% for 1m, rounds every {IDLE_ROUND_S} s); "
                f"gpugate_prometheus_up {metric(self.gate, 'gpugate_prometheus_up')}; "
                f"gpugate stderr:\n{self.gate.stderr_tail(15)}") from None
        if short == "sleepy" and not self.idle_seen:
            self.idle_seen = time.monotonic()
        return p

    def wait_judged(self) -> None:
        """Until the idle controller has judged every pod of the scene old
        enough: sleepy is idle, and one idle round more (the pods started
        within seconds of each other; the round that found sleepy idle may
        have found the last one a second too young)."""
        self.wait_idle()
        rest = self.idle_seen + IDLE_ROUND_S + 1 - time.monotonic()
        if rest > 0:
            time.sleep(rest)

    def read_meters(self) -> dict:
        out = {}
        for name in ("gpugate_gpu_seconds_total", "gpugate_gpu_busy_seconds_total"):
            for t in (RULED, UNRULED):
                out[(name, t)] = metric(self.gate, name, tenant=t, flavor=FLAVOR)
        self.meters.append((time.monotonic(), out))
        return out


def job_pod(k, ns: str, name: str, timeout: float = 30.0) -> dict:
    def ok():
        items = k("get", "pods", "-n", ns, "-l", f"{JOB_NAME}={name}", "-o",
                  "json").json()["items"]
        live = [p for p in items if not p["metadata"].get("deletionTimestamp")]
        return live[0] if len(live) == 1 and phase(live[0]) == "Running" else None
    return wait_until(f"the pod of job {ns}/{name} to run", ok, timeout, POLL)


def running(k, ns: str, name: str, timeout: float = 30.0) -> dict:
    return wait_until(f"pod {ns}/{name} Running",
                      lambda: (lambda p: p if phase(p) == "Running" else None)(
                          k.get("pod", name, ns)), timeout, POLL)


def create(k, files: Path, obj: dict) -> None:
    name = obj["metadata"]["name"]
    r = k.apply_file(files / f"{name}.yaml", obj)
    kind = obj["kind"].lower() + (".batch" if obj["kind"] == "Job" else "")
    assert (r.rc, r.out) == (0, f"{kind}/{name} created\n"), r


# (short name, namespace, kind, class, GPUs, per-device values or None, fields)
WORKLOADS = [
    ("sleepy", NS, "Pod", "gpu", 1, [0.012], "both"),
    ("stalled", NS, "Job", "ckpt", 2, [0.03, 0.03], "util"),
    ("busy", NS, "Job", "ckpt", 2, [0.5, 0.7], "both"),
    ("dark", NS, "Pod", "ckpt", 1, None, None),
    ("loafer", NS_FREE, "Pod", "gpu", 1, [0.0], "both"),
    ("worker", NS_FREE, "Pod", "gpu", 1, [0.5], "both"),
]


@pytest.fixture(scope="module")
def scene(stack, tmp_path_factory):
    """This module's exporter, Prometheus and gpugate on its own fleet, and
    the workloads running with their values set.  Everything removed at
    the end."""
    binary = shutil.which("prometheus")
    assert binary, "prometheus is not installed: scripts/deps.sh installs it (Debian package)"
    k = stack.kubectl
    d = tmp_path_factory.mktemp("idle")
    policy = d / "idle-policy.yaml"
    policy.write_text(IDLE_POLICY)
    fleet = Fleet(k, policy, name="idle", nodes={FLAVOR: 3}, cpu_nodes=0, clique_size=3)
    exporter = Server().start()
    prom = None
    try:
        prom = Prometheus(binary, d / "prometheus", exporter.target)
        k.apply({"apiVersion": "v1", "kind": "List", "items": [
            *({"apiVersion": "v1", "kind": "Namespace",
               "metadata": {"name": ns, "labels": {POLICY_LABEL: GATE}}}
              for ns in (NS, NS_FREE)),
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": HOME}}]}).check()
        wait_service_accounts(k, [NS, NS_FREE])
        fleet.create()
        wait_until("prometheus scraping the stand-in exporter", prom.up, 60, POLL)
        g = Gate(stack.binary, stack.certs, policy, d / "gpugate",
                 stack.cluster.env["KUBECONFIG"], name=GATE,
                 args=["--namespace", HOME, "--no-gpuclasses", "--no-gpuquotas",
                       NO_NODE_HEALTH, "--prometheus-url", prom.url,
                       "--idle-interval", str(IDLE_ROUND_S)]).start()
        stack.gates[GATE] = g
        g.wait_ready()
        register(k, "gpugate-idle", g, GATE)
        wait_webhooks(k, GATE)

        sc = Scene(k, stack, g, prom, exporter)
        files = d / "files"
        files.mkdir()
        for short, ns, kind, cls, gpus, _, _ in WORKLOADS:
            create(k, files, (pod if kind == "Pod" else job)(short, ns, cls, gpus))
        for short, ns, kind, _, _, values, fields in WORKLOADS:
            p = running(k, ns, short) if kind == "Pod" else job_pod(k, ns, short)
            sc.pods[short] = p
            if values is not None:
                # As the exporter does once the pod holds the devices.
                exporter.standin.set(ns, p["metadata"]["name"], values, fields=fields,
                                     node=node_of(p), uid=p["metadata"]["uid"])
        # The devices no served pod holds (dark's among them: an exporter
        # that lost its pod mapping) are served without pod labels.
        for node in sorted(fleet.by_name):
            held = sum(len(v) for short, ns, _, _, _, v, _ in WORKLOADS
                       if v and node_of(sc.pods[short]) == node)
            exporter.standin.free[node] = 4 - held
        sc.t0 = time.monotonic()
        yield sc
    finally:
        k("delete", "mutatingwebhookconfiguration,validatingwebhookconfiguration",
          "gpugate-idle", "--ignore-not-found")
        k("delete", "jobs,pods", "--all", "-n", NS, "--wait=false")
        k("delete", "jobs,pods", "--all", "-n", NS_FREE, "--wait=false")
        k("delete", "namespace", NS, NS_FREE, HOME, "--wait=false")
        k("delete", "nodes", "-l", "fleet.gpugate.io/fleet=idle", "--wait=false")
        if prom is not None:
            prom.stop()
        exporter.stop()
        g = stack.gates.pop(GATE, None)
        if g is not None:
            problems = g.stop_and_check()
            stack.retired.append(g)
            assert problems == [], problems


def not_idle(sc: Scene, short: str) -> dict:
    """SHORT (and its Job) carries no idle annotation and no checkpoint
    request, has no idle Event, and runs: the pod."""
    k = sc.k
    p = sc.pod(short)
    ns, name = p["metadata"]["namespace"], p["metadata"]["name"]
    assert phase(p) == "Running" and not p["metadata"].get("deletionTimestamp"), p["status"]
    assert p["metadata"]["uid"] == sc.pods[short]["metadata"]["uid"], "a new pod"
    for key in (IDLE_SINCE, REQUESTED):
        assert key not in annotations(p), (short, annotations(p))
    objs = [("Pod", name)]
    if (p["metadata"].get("labels") or {}).get(JOB_NAME):
        j = k.get("job", short, ns)
        assert not j["spec"].get("suspend"), j["spec"]
        for key in (IDLE_SINCE, REQUESTED):
            assert key not in annotations(j), (short, annotations(j))
        objs.append(("Job", short))
    for kind, n in objs:
        for reason in ("GPUIdle", "GPUIdleReclaimed"):
            assert not events(k, ns, kind, n, reason), (kind, n, reason)
    return p


# ---------------------------------------------------------------------------
# a. nothing before `for`


def test_young_pods_are_not_judged(scene):
    sc, k = scene, scene.k
    # The series reached Prometheus with the holders' namespace and pod
    # (honor_labels): sleepy by the profiling field, stalled by the
    # utilization only (no profiling module), dark not at all.
    stalled = sc.pods["stalled"]["metadata"]["name"]
    busy = sc.pods["busy"]["metadata"]["name"]

    def series():
        prof = {(s["metric"].get("namespace"), s["metric"].get("pod")): float(s["value"][1])
                for s in sc.prom.query(f'avg by (namespace, pod) ({PROF})')}
        util = {(s["metric"].get("namespace"), s["metric"].get("pod")): float(s["value"][1])
                for s in sc.prom.query(f'avg by (namespace, pod) ({UTIL})')}
        # Every series the scene set, not a few: the stand-in's values are
        # set one pod at a time, and a scrape may fall between two of them.
        want_prof = {(ns, sc.pods[short]["metadata"]["name"])
                     for short, ns, _, _, _, values, fields in WORKLOADS
                     if values is not None and fields == "both"}
        want_util = {(ns, sc.pods[short]["metadata"]["name"])
                     for short, ns, _, _, _, values, _ in WORKLOADS if values is not None}
        # and the free GPUs, set last (served under the exporter's own pod)
        want_util.add((Prometheus.TARGET_LABELS["namespace"], Prometheus.TARGET_LABELS["pod"]))
        return (prof, util) if want_prof <= prof.keys() and want_util <= util.keys() else None
    prof, util = wait_until("the stand-in's series in Prometheus", series, 15, POLL)
    assert prof[(NS, "sleepy")] == pytest.approx(0.012)
    assert prof[(NS, busy)] == pytest.approx(0.6)
    assert prof[(NS_FREE, "worker")] == pytest.approx(0.5)
    assert util[(NS, stalled)] == pytest.approx(3)
    assert (NS, stalled) not in prof
    assert not any(p == "dark" for _, p in list(prof) + list(util))
    # The free GPUs' series carry the exporter's own pod (honor_labels
    # adds a target label the series does not have): no GPU pod.
    assert (Prometheus.TARGET_LABELS["namespace"], Prometheus.TARGET_LABELS["pod"]) in util
    assert not sc.prom.query(f'{PROF}{{exported_pod!=""}}'), "honor_labels did not apply"

    # (shown once an idle round ran)
    wait_until("gpugate_prometheus_up 1",
               lambda: metric(sc.gate, "gpugate_prometheus_up") == 1, IDLE_ROUND_S + 10, POLL)

    # Younger than `for`: nothing is judged idle, whatever the data says,
    # until the first pod has run a minute (by its status.startTime, which
    # gpugate reads too; the same clock). The meters' first reading on the
    # way (test_the_meters_move).
    earliest = min(started(p) for p in sc.pods.values())
    read_at = sc.t0 + 3 * IDLE_ROUND_S  # a few metered rounds in
    while time.time() < earliest + FOR_S - 1:
        if sc.meters == [] and time.monotonic() >= read_at:
            sc.read_meters()
        for short in ("sleepy", "stalled", "loafer"):
            p = sc.pod(short)
            assert IDLE_SINCE not in annotations(p) or time.time() >= started(p) + FOR_S, (
                f"{short} idle {time.time() - started(p):.1f} s after it started "
                f"(for: 1m): {annotations(p)}")
        seen = idle_events(k, NS) + idle_events(k, NS_FREE)
        assert not seen or time.time() >= earliest + FOR_S, seen
        time.sleep(1)
    assert sc.meters, "no meter reading"


# ---------------------------------------------------------------------------
# b. reclaim, first: the checkpoint timeout runs from the signal


def test_an_idle_job_is_reclaimed_while_a_busy_one_runs(scene):
    sc, k = scene, scene.k
    pod_name = sc.pods["stalled"]["metadata"]["name"]
    busy_pod = sc.pods["busy"]["metadata"]["name"]

    def marked():
        j = k.get("job", "stalled", NS)
        return j if IDLE_SINCE in annotations(j) else None
    try:
        j = wait_until(f"{IDLE_SINCE} on job stalled", marked,
                       max(sc.t0 + FOR_S + 2 * IDLE_ROUND_S + 5 - time.monotonic(), 5), POLL)
    except AssertionError:
        raise AssertionError(f"job stalled (3 %, DCGM_FI_DEV_GPU_UTIL only) not found idle "
                             f"{time.monotonic() - sc.t0:.0f} s after it started; the idle "
                             f"Events: {idle_events(k, NS)}") from None
    sc.wait_idle("sleepy")  # the same round found sleepy idle (test_an_idle_pod_is_warned)
    since_text = annotations(j)[IDLE_SINCE]
    rfc3339(since_text)
    why = f"below 5% for 1m (highest 3.0%)"
    ev = wait_events(k, NS, "Job", "stalled", "GPUIdle")
    assert len(ev) == 1 and ev[0]["type"] == "Warning", ev
    assert ev[0]["message"] == (
        f"its pods' GPUs were {why} since {since_text}: use them, or release them (delete "
        "or suspend the Job) so that others can; otherwise gpugate takes them back: it asks "
        f"for a checkpoint (annotation {REQUESTED}), then suspends the Job"), ev
    ev = wait_events(k, NS, "Pod", pod_name, "GPUIdle")
    assert ev[0]["message"] == (
        f"its GPUs were {why} since {since_text}: use them, or release them (delete or "
        "suspend its Job) so that others can; otherwise gpugate takes them back: it asks "
        f"for a checkpoint (annotation {REQUESTED}), then suspends the Job"), ev
    assert annotations(k.get("pod", pod_name, NS)).get(IDLE_SINCE) == since_text

    # The checkpoint path: asked (the Job and its pod), it reports.
    def asked():
        j = k.get("job", "stalled", NS)
        p = k.get("pod", pod_name, NS)
        return annotations(j).get(REQUESTED) if REQUESTED in annotations(j) and \
            REQUESTED in annotations(p) else None
    requested = wait_until("the checkpoint request on job stalled and its pod", asked,
                           2 * RECLAIM_ROUND_S + 10, POLL)
    assert k.get("job", "stalled", NS)["spec"]["template"]["metadata"]["labels"].get(
        PREEMPTIBLE) == "true"
    ev = wait_events(k, NS, "Job", "stalled", "GPUReclaim")
    assert [e["message"] for e in ev] == [
        f"checkpoint requested: gpugate takes back 2 {FLAVOR} idle since {since_text}, {why} "
        f"(the idle rule says reclaim); write the checkpoint and annotate {DONE}=<time>, or it "
        f"is suspended in {TIMEOUT_S} s; gpugate does not bring it back: use the GPUs, or "
        "resume the Job yourself once it will"], ev
    k("annotate", "pod", pod_name, "-n", NS,
      f"{DONE}={time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}", "--overwrite").check()

    # Suspended, labelled idle, said why.
    def suspended():
        j = k.get("job", "stalled", NS)
        return j if j["spec"].get("suspend") and \
            (j["metadata"].get("labels") or {}).get(RECLAIMED) == "idle" else None
    j = wait_until(f"job stalled suspended with {RECLAIMED}=idle", suspended,
                   TIMEOUT_S + 2 * RECLAIM_ROUND_S + 10, POLL)
    assert annotations(j)[REQUESTED] == requested, "asked again"
    ev = wait_events(k, NS, "Job", "stalled", "GPUIdleReclaimed")
    assert len(ev) == 1 and ev[0]["type"] == "Warning", ev
    assert ev[0]["message"] == (
        f"checkpointed and suspended to free 2 {FLAVOR} idle since {since_text}, {why}; "
        "gpugate does not resume it: resume it (spec.suspend: false) when it will use its "
        "GPUs"), ev[0]["message"]

    # Its pod goes (the job controller), the exporter stops serving it, the
    # quota comes back: sleepy 1 + busy 2 + dark 1.
    def gone():
        r = k("get", "pod", pod_name, "-n", NS, "-o", "json")
        return r.rc != 0
    wait_until(f"pod {pod_name} gone", gone, 30, POLL)
    sc.exporter.standin.drop(NS, pod_name)
    sc.gate.wait_used(RULED, 4, FLAVOR)
    assert_invariant(k, sc.gate, RULED, [NS], FLAVOR, GPU, NOMINAL[RULED])
    # (the gauge is the idle round's: the next one)
    wait_until("gpugate_idle_gpus{tenant=ruled} == 1 (sleepy)", lambda: metric(
        sc.gate, "gpugate_idle_gpus", tenant=RULED, flavor=FLAVOR) == 1, IDLE_ROUND_S + 10,
        POLL)

    # Not resumed: gpugate gives the GPUs back to no idle work; a few
    # reclaimer rounds on, still suspended and labelled.
    until = time.monotonic() + 3 * RECLAIM_ROUND_S + 1
    while time.monotonic() < until:
        j = k.get("job", "stalled", NS)
        assert j["spec"].get("suspend") is True, "gpugate resumed a Job it took back idle"
        assert (j["metadata"].get("labels") or {}).get(RECLAIMED) == "idle", j["metadata"]
        assert not [p for p in k("get", "pods", "-n", NS, "-l", f"{JOB_NAME}=stalled",
                                 "-o", "json").json()["items"]]
        time.sleep(POLL)

    # The busy Job of the same rule ran on, untouched, on the same pod.
    p = not_idle(sc, "busy")
    assert p["metadata"]["name"] == busy_pod
    assert_invariant(k, sc.gate, RULED, [NS], FLAVOR, GPU, NOMINAL[RULED])


# ---------------------------------------------------------------------------
# c. warn


def test_an_idle_pod_is_warned(stack, scene):
    sc, k = scene, scene.k
    p = sc.wait_idle("sleepy")
    found_at = time.time()
    since_text = annotations(p)[IDLE_SINCE]
    since = rfc3339(since_text)
    assert started(p) - FOR_S <= since <= found_at, (annotations(p), p["status"]["startTime"])

    # The Event: says what, since when, and what to do.
    ev = wait_events(k, NS, "Pod", "sleepy", "GPUIdle")
    assert len(ev) == 1 and ev[0]["type"] == "Warning", ev
    # warn: no word of taking them back.
    assert ev[0]["message"] == (
        f"its GPUs were below 5% for 1m (highest 1.2%) since {since_text}: use them, or "
        "release them (delete the pod) so that others can"), ev[0]["message"]

    # The gauge, and `gpugate pool`.
    wait_until("gpugate_idle_gpus{tenant=ruled} >= 1", lambda: (metric(
        sc.gate, "gpugate_idle_gpus", tenant=RULED, flavor=FLAVOR) or 0) >= 1, 10, POLL)
    text = gpugate_pool(stack, sc.gate)
    assert re.search(rf"^IDLE \(gpugate\.io/idle-since on the pod\)\n.*\n(.*\n)*"
                     rf"{NS}/sleepy +{RULED} +{FLAVOR} +1  {since_text}  ", text, re.M), text
    doc = json.loads(gpugate_pool(stack, sc.gate, "-o", "json"))
    rows = [x for x in doc["idle"] if x["pod"] == "sleepy"]
    assert len(rows) == 1 and {k: rows[0][k] for k in ("namespace", "tenant", "flavor", "units",
                                                       "since")} == {
        "namespace": NS, "tenant": RULED, "flavor": FLAVOR, "units": 1,
        "since": since_text}, doc["idle"]
    assert not [x for x in doc["idle"] if x["namespace"] == NS_FREE], doc["idle"]

    # warn only: rounds later, not signalled, told once, still running.
    time.sleep(max(0.0, sc.idle_seen + IDLE_ROUND_S + 1 - time.monotonic()))
    p = sc.pod("sleepy")
    assert phase(p) == "Running" and not p["metadata"].get("deletionTimestamp")
    assert REQUESTED not in annotations(p), annotations(p)
    assert annotations(p)[IDLE_SINCE] == since_text, annotations(p)
    ev = events(k, NS, "Pod", "sleepy", "GPUIdle")
    assert len(ev) == 1 and count(ev[0]) == 1, [(e["message"], count(e)) for e in ev]
    assert not events(k, NS, "Pod", "sleepy", "GPUIdleReclaimed")


# ---------------------------------------------------------------------------
# d. no data, no rule


def judged(sc: Scene) -> None:
    """The controller has judged: sleepy, beside the pod checked, was found
    idle a round ago (so that "not idle" below is not for want of a
    controller)."""
    sc.wait_judged()


def test_a_pod_without_series_is_never_idle(scene):
    sc = scene
    judged(sc)
    not_idle(sc, "dark")
    assert not [s for s in sc.prom.query(f'{PROF} or {UTIL}')
                if s["metric"].get("pod") == "dark"]


def test_a_tenant_without_a_rule_is_never_acted_on(scene):
    sc, k = scene, scene.k
    judged(sc)
    for short in ("loafer", "worker"):
        not_idle(sc, short)
    assert not idle_events(k, NS_FREE), idle_events(k, NS_FREE)
    assert (metric(sc.gate, "gpugate_idle_gpus", tenant=UNRULED, flavor=FLAVOR) or 0) == 0
    assert_invariant(k, sc.gate, UNRULED, [NS_FREE], FLAVOR, GPU, NOMINAL[UNRULED])
    assert sc.gate.quota_used(UNRULED, FLAVOR) == 2


# ---------------------------------------------------------------------------
# e. the meters


def test_the_meters_move(stack, scene):
    sc = scene
    sc.wait_judged()
    if not sc.meters:  # run alone
        sc.read_meters()
    t1, first = sc.meters[0]
    time.sleep(max(0.0, t1 + 4 * IDLE_ROUND_S - time.monotonic()))
    t2, last = time.monotonic(), sc.read_meters()
    held = {t: (last[("gpugate_gpu_seconds_total", t)] or 0) -
            (first[("gpugate_gpu_seconds_total", t)] or 0) for t in (RULED, UNRULED)}
    busy = {t: (last[("gpugate_gpu_busy_seconds_total", t)] or 0) -
            (first[("gpugate_gpu_busy_seconds_total", t)] or 0) for t in (RULED, UNRULED)}
    dt = t2 - t1
    log(f"test_idle meters over {dt:.0f} s: held {held}, busy {busy}")
    # The busy meter grows once an idle round (by the units, the round's
    # seconds and the pod's mean over them): over dt it counts dt give or
    # take a round (and a little for the round's own time).
    lo, hi = dt - IDLE_ROUND_S - 2, dt + IDLE_ROUND_S + 2
    # unruled holds 2 GPUs all along: loafer at 0 %, worker at 50 %.
    assert held[UNRULED] == pytest.approx(2 * dt, rel=0.15, abs=4), (held, dt)
    assert 0.5 * lo <= busy[UNRULED] <= 0.5 * hi, (busy, dt)
    # ruled: sleepy 1 x 1.2 % + busy 2 x 60 %, dark 1 without data (not
    # busy), stalled 2 x 3 % until it was taken back: 1.212 to 1.272 busy
    # GPU-seconds a second.
    assert held[RULED] > 0, held
    assert 1.212 * lo <= busy[RULED] <= 1.272 * hi, (busy, dt)
    for t in (RULED, UNRULED):
        assert last[("gpugate_gpu_busy_seconds_total", t)] <= \
            last[("gpugate_gpu_seconds_total", t)], last

    # /pool: each tenant's busy share of what it holds now, over the last
    # hour (the pods' whole lives here): unruled (1 x 0 + 1 x 0.5) / 2;
    # ruled (sleepy 1 x 0.012 + busy 2 x 0.6) / 3, dark without data left
    # out (stalled is gone).
    status, body = sc.gate.get("/pool")
    assert status == 200, (status, body)
    share = {t["name"]: t.get("busyShare") for t in json.loads(body)["tenants"]}
    assert share[UNRULED] == pytest.approx(0.25, abs=0.02), share
    assert share[RULED] == pytest.approx((0.012 + 1.2) / 3, abs=0.02), share
    # `gpugate pool --prometheus-url` reads the same from Prometheus itself;
    # without it, no busy share (it has no other source).
    doc = json.loads(gpugate_pool(stack, sc.gate, "-o", "json", "--prometheus-url",
                                  sc.prom.url))
    cli = {t["name"]: t.get("busyShare") for t in doc["tenants"]}
    assert cli[UNRULED] == pytest.approx(0.25, abs=0.02), cli
    assert cli[RULED] == pytest.approx((0.012 + 1.2) / 3, abs=0.02), cli
    text = gpugate_pool(stack, sc.gate, "--prometheus-url", sc.prom.url)
    m = re.search(r"^BUSY \(last hour, of the GPUs each tenant holds now\)\nTENANT +BUSY\n"
                  r"((?:.+\n)+)", text, re.M)
    assert m, text
    rows = dict(line.split() for line in m.group(1).splitlines())
    assert rows == {RULED: "40.4%", UNRULED: "25.0%"}, rows
    assert "BUSY" not in gpugate_pool(stack, sc.gate)
