#!/usr/bin/env python3
"""bench/fleet-scale.py - the scale run (issue #15): one control plane, a
fake GPU fleet of 1,000 KWOK nodes, gpugate registered as the webhook, and
10,000 admitted GPU pods scheduled by the real kube-scheduler and Running.

  make bench-fleet [FLEET_ARGS="..."]
  GPUGATE_BIN=/abs/path/to/gpugate bench/fleet-scale.py [options]

Options:
  --nodes N            fake nodes (default 1000): 40 % H100 (8 GPUs), 30 %
                       A100 MIG 1g.10gb (56 slices), 25 % time-sliced L4
                       (16), 5 % CPU nodes; see bench/policy-fleet.yaml
  --pods P             class pods created and Running (default 10000), over
                       5 tenants x 2 namespaces; per 20 pods: 4 H100 (one of
                       2 GPUs), 10 MIG (two of 2 slices), 6 L4
  --threads T          concurrent creators, one kept-alive connection each
                       (default 4)
  --latency-creates L  sequential creates per latency measurement (default 200)
  --churn-rate R       background churn: class pods created a second, each
                       completing after --churn-run-for and deleted after
                       --churn-lifetime (default 20)
  --churn-run-for S    seconds a churn pod runs before it Succeeds (default 2)
  --churn-lifetime S   seconds from a churn pod's create to its delete (default 4)
  --usage-store S      memory, shared or both (default both: the memory
                       ledger first, then gpugate restarted with
                       --usage-store shared, and the restart and latency
                       figures again)
  --compare-replicas K  issue #32: K more gpugate serve --usage-store leader
                       replicas behind a round-robin balancer (the e2e
                       suite's); the bulk create alternates, in chunks of
                       --chunk pods (default: a tenth of --pods), between the one gpugate
                       (its own ledger) and the K replicas, re-registering
                       the webhooks between chunks (not timed): creates/s of
                       each side and leader/one; each replica's usage must
                       then be the truth; they are stopped before the rest
  --timeout S          seconds to wait for all pods Running (default 600)
  --keep               keep the temporary directory (logs, kubeconfig)
  --small              --nodes 100 --pods 1000 --latency-creates 100: a quick
                       run for development and CI

What it measures, in order (docs/benchmarks.md, "Scale run"): the fleet's
creation; the pods' creation (creates/s, latency) and the time until all
are Running; gpugate's VmRSS and VmHWM once its usage equals the truth
(computed from the pods, never from gpugate); a restart (SIGTERM, a new
process on the same port) timed to /readyz 200 and to usage equal to the
truth; create latency of class pods (client p50/p99, gpugate's own p50/p99
from its histogram) without and with the background churn.

The report goes to stdout and build/bench/fleet-scale.txt, progress to
stderr.  Exit status 0 when the run completed (figures are not judged), 1
when it could not (a create refused, a pod never Running, gpugate's usage
never the truth, a gpugate that did not exit 0 on SIGTERM or printed a
sanitizer report), 130 when interrupted.  Everything started here (the
cluster, gpugate) is stopped on every exit; the temporary directory is
removed unless --keep or a failure, in which case its path is printed.
"""

from __future__ import annotations

import argparse
import collections
import fnmatch
import http.client
import json
import math
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

import gpugate_e2e as e2e  # noqa: E402

POLICY = HERE / "policy-fleet.yaml"
REPORT_FILE = ROOT / "build" / "bench" / "fleet-scale.txt"
RUN_LABEL = "bench.gpugate.io/run"
TEAMS = ["team-a", "team-b", "team-c", "team-d", "team-e"]
NAMESPACES = [f"{t}-{i}" for t in TEAMS for i in (1, 2)]
CHURN_NS = "churn"
LATENCY_NS = "latency"
STORE_NS = "gpugate"  # the shared store's ConfigMaps and Lease
LEADER_NS = "gpugate-leader"  # the Lease of the --compare-replicas replicas
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"

# Share of the nodes per flavor (the rest, CPU nodes, gets what is left).
NODE_SHARE = {"h100-80gb": 0.40, "a100-1g.10gb": 0.30, "l4-shared": 0.25}
CPU_SHARE = 0.05
UNITS_PER_NODE = {"h100-80gb": 8, "a100-1g.10gb": 56, "l4-shared": 16}
# Units asked for per pod, on average, by the mix of pod_plan().
UNITS_PER_POD = {"h100-80gb": 5 / 20, "a100-1g.10gb": 12 / 20, "l4-shared": 6 / 20}


def log(msg: str) -> None:
    print(f"fleet-scale: {time.strftime('%H:%M:%S')} {msg}", file=sys.stderr, flush=True)


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


class Interrupted(Exception):
    pass


# ---------------------------------------------------------------------------
# the report


class Report:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def say(self, line: str = "") -> None:
        print(line, flush=True)
        self.lines.append(line)

    def figure(self, what: str, value: str) -> None:
        """One figure a line, with the load average when it was taken."""
        self.say(f"{what + ':':<52} {value}   [load {loadavg()}]")

    def save(self) -> None:
        REPORT_FILE.parent.mkdir(parents=True, exist_ok=True)
        REPORT_FILE.write_text("\n".join(self.lines) + "\n")


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def mib(kib: int) -> str:
    return f"{kib / 1024:.1f} MiB"


# ---------------------------------------------------------------------------
# sizes


def node_counts(n: int) -> tuple[dict[str, int], int]:
    cpu = max(1, round(n * CPU_SHARE))
    counts = {f: max(1, round(n * s)) for f, s in NODE_SHARE.items()}
    counts["l4-shared"] = max(1, n - cpu - counts["h100-80gb"] - counts["a100-1g.10gb"])
    return counts, cpu


def pod_plan(p: int):
    """(namespace, name, class, gpus or None) of the P pods: each block of 20
    consecutive pods in one namespace, with the whole mix."""
    for i in range(p):
        r = i % 20
        if r < 4:
            cls, gpus = "h100", 2 if r == 0 else None
        elif r < 14:
            cls, gpus = "mig", 2 if r in (4, 9) else None
        else:
            cls, gpus = "l4", None
        yield NAMESPACES[(i // 20) % len(NAMESPACES)], f"fleet-{i}", cls, gpus


def check_sizes(args, counts: dict[str, int]) -> list[str]:
    """Problems with the sizes: what no fleet of that size can run."""
    problems = []
    extra_mig = args.latency_creates + args.churn_rate * args.churn_lifetime + 50
    for flavor, nodes in counts.items():
        cap = nodes * UNITS_PER_NODE[flavor]
        need = math.ceil(args.pods * UNITS_PER_POD[flavor])
        if flavor == "a100-1g.10gb":
            need += extra_mig
        if need > 0.9 * cap:
            problems.append(f"{flavor}: {need} units asked for, {cap} on {nodes} nodes "
                            f"(at most 90 % are used): more --nodes or fewer --pods")
    return problems


# ---------------------------------------------------------------------------
# the API


def get(api: e2e.Api, conn: http.client.HTTPSConnection, path: str,
        accept: str = "application/json") -> dict:
    conn.request("GET", path, headers={"Accept": accept})
    r = conn.getresponse()
    body = r.read()
    if r.status != 200:
        raise RuntimeError(f"GET {path}: {r.status} {body[:300]!r}")
    return json.loads(body)


def count_pods(api: e2e.Api, conn, field_selector: str, label: str | None = None) -> int:
    q = {"fieldSelector": field_selector, "includeObject": "None"}
    if label:
        q["labelSelector"] = label
    return len(get(api, conn, "/api/v1/pods?" + urllib.parse.urlencode(q), TABLE)["rows"])


class Truth:
    """What the pods hold, per (tenant, flavor), computed from the API: every
    pod not Succeeded or Failed holds its effective request (the e2e
    invariant's rule; these pods have no Jobs)."""

    def __init__(self, policy: dict):
        self.tenants = [(t["name"], t["namespaces"]) for t in policy["tenants"]]
        self.flavors = {f["resource"]: f["name"] for f in policy["flavors"]}

    def tenant_of(self, ns: str) -> str | None:
        for name, patterns in self.tenants:
            if any(fnmatch.fnmatchcase(ns, p) for p in patterns):
                return name
        return None

    def compute(self, api: e2e.Api) -> tuple[dict, int, collections.Counter]:
        """(usage, GPU pods holding units, phases of all pods), page by page."""
        usage: dict[tuple[str, str], int] = collections.defaultdict(int)
        holders = 0
        phases: collections.Counter = collections.Counter()
        conn = api.connection(timeout=120)
        cont = ""
        try:
            while True:
                path = "/api/v1/pods?limit=500" + (
                    "&continue=" + urllib.parse.quote(cont) if cont else "")
                page = get(api, conn, path)
                for p in page["items"]:
                    phases[(p.get("status") or {}).get("phase", "?")] += 1
                    if e2e.pod_terminal(p):
                        continue
                    tenant = self.tenant_of(p["metadata"]["namespace"])
                    if tenant is None:
                        continue
                    held = False
                    for resource, flavor in self.flavors.items():
                        units = e2e.effective_request(p["spec"], resource)
                        if units:
                            usage[(tenant, flavor)] += units
                            held = True
                    holders += held
                cont = page["metadata"].get("continue") or ""
                if not cont:
                    break
        finally:
            conn.close()
        return dict(usage), holders, phases


# ---------------------------------------------------------------------------
# gpugate's metrics


def quota_used(text: str) -> dict[tuple[str, str], int]:
    return {(t, f): int(float(v)) for t, f, v in re.findall(
        r'^gpugate_quota_used\{tenant="([^"]*)",flavor="([^"]*)"\} (\S+)$', text, re.M)}


def gauge(text: str, name: str) -> float | None:
    m = re.search(r"^%s (\S+)$" % re.escape(name), text, re.M)
    return float(m.group(1)) if m else None


def histogram(text: str, endpoint: str) -> list[tuple[float, float]]:
    """gpugate_admission_duration_seconds{endpoint}: [(le, cumulative count)]."""
    out = []
    for le, v in re.findall(r'^gpugate_admission_duration_seconds_bucket\{endpoint="%s",'
                            r'le="([^"]+)"\} (\S+)$' % re.escape(endpoint), text, re.M):
        out.append((math.inf if le == "+Inf" else float(le), float(v)))
    return out


def hist_quantile(before: list, after: list, q: float) -> tuple[float, int]:
    """The q-quantile (0..1) of what was observed between two scrapes, by
    linear interpolation inside the bucket (Prometheus' histogram_quantile),
    and the number of observations."""
    delta = [(le, a - b) for (le, a), (_, b) in zip(after, before)]
    if not delta or delta[-1][1] <= 0:
        return math.nan, 0
    total = delta[-1][1]
    rank = q * total
    prev_le, prev_c = 0.0, 0.0
    for le, c in delta:
        if c >= rank:
            if math.isinf(le):
                return prev_le, int(total)
            return prev_le + (le - prev_le) * (rank - prev_c) / max(c - prev_c, 1e-12), int(total)
        prev_le, prev_c = le, c
    return math.nan, int(total)


def proc_status(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        k, _, v = line.partition(":")
        if k in ("VmRSS", "VmHWM"):
            out[k] = int(v.split()[0])
    return out


def cpu_seconds(pid: int) -> float:
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------------------
# load


def create_pods(api: e2e.Api, plan: list, threads: int, labels: dict,
                stop: threading.Event) -> tuple[list[float], list[str], int]:
    """Creates the pods of PLAN with THREADS kept-alive connections; the
    latency of each create, the failures, and the creates that needed a
    retry (a broken connection, 429/5xx)."""
    lock = threading.Lock()
    it = iter(plan)
    lat: list[float] = []
    failures: list[str] = []
    retried = [0]

    def worker() -> None:
        conn = api.connection()
        try:
            while not stop.is_set():
                with lock:
                    item = next(it, None)
                if item is None:
                    return
                ns, name, cls, gpus = item
                obj = e2e.pod(name, ns, cls, gpus, labels=labels)
                path = f"/api/v1/namespaces/{ns}/pods"
                for attempt in range(5):
                    t = time.perf_counter()
                    try:
                        status, body = api.request("POST", path, obj, conn=conn)
                    except (OSError, http.client.HTTPException) as e:
                        conn.close()
                        conn = api.connection()
                        status, body = None, str(e)
                    dt = time.perf_counter() - t
                    if status == 201 or (status == 409 and attempt > 0):
                        with lock:
                            lat.append(dt)
                            retried[0] += attempt > 0
                        break
                    if status is None or status == 429 or status >= 500:
                        time.sleep(0.2 * (attempt + 1))
                        continue
                    break
                else:
                    status = status or "no answer"
                if status not in (201, 409):
                    msg = body.get("message") if isinstance(body, dict) else str(body)
                    with lock:
                        failures.append(f"{ns}/{name}: {status} {str(msg)[:200]}")
        finally:
            conn.close()

    ts = [threading.Thread(target=worker, daemon=True, name=f"create-{i}")
          for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        while t.is_alive():
            t.join(0.5)
    return lat, failures, retried[0]


class EventCounter:
    """Counts the Pod watch events the apiserver sends from now on (a watch
    of every pod, as gpugate's feed has): what gpugate's watch receives."""

    def __init__(self, api: e2e.Api):
        self.api = api
        self.counts: collections.Counter = collections.Counter()
        self.conn: http.client.HTTPSConnection | None = None
        self.thread: threading.Thread | None = None
        self.t0 = self.t1 = 0.0

    def start(self) -> "EventCounter":
        conn = self.api.connection(timeout=900)
        rv = get(self.api, conn, "/api/v1/pods?limit=1")["metadata"]["resourceVersion"]
        conn.request("GET", f"/api/v1/pods?watch=1&resourceVersion={rv}&timeoutSeconds=900",
                     headers={"Accept": "application/json"})
        r = conn.getresponse()
        assert r.status == 200, r.status
        self.conn = conn
        self.t0 = time.monotonic()

        def run() -> None:
            try:
                while True:
                    line = r.readline()
                    if not line:
                        return
                    m = re.match(rb'\{"type":"(\w+)"', line)
                    self.counts[m.group(1).decode() if m else "?"] += 1
            except (OSError, ValueError, http.client.HTTPException, AttributeError):
                return
        self.thread = threading.Thread(target=run, daemon=True, name="events")
        self.thread.start()
        return self

    def stop(self) -> collections.Counter:
        self.t1 = time.monotonic()
        counts = collections.Counter(self.counts)
        if self.conn is not None and self.conn.sock is not None:
            try:
                self.conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self.conn.close()
        if self.thread is not None:
            self.thread.join(5)
        return counts

    @property
    def seconds(self) -> float:
        return (self.t1 or time.monotonic()) - self.t0


class Churn:
    """Background watch churn: class pods in CHURN_NS created at RATE a
    second (annotations of tests/e2e/kwok/stages.yaml: Succeeded after
    RUN_FOR seconds), each deleted LIFETIME seconds after its create; each
    makes ~5 watch events (ADDED, bound, Running, Succeeded, DELETED) and 3
    admission reviews (mutate, validate CREATE and DELETE).  Creates and
    deletes each go over THREADS kept-alive connections, so that the rate
    does not depend on one request's latency."""

    def __init__(self, api: e2e.Api, rate: float, run_for: float, lifetime: float,
                 threads: int = 3):
        self.api = api
        self.rate = rate
        self.run_for = run_for
        self.lifetime = lifetime
        self.nthreads = threads
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.due: collections.deque = collections.deque()
        self.created = self.deleted = self.errors = 0
        self.n = 0
        self.creators = 0
        self.threads: list[threading.Thread] = []
        self.t0 = 0.0

    def start(self) -> "Churn":
        self.t0 = time.monotonic()
        self.creators = self.nthreads
        for i in range(self.nthreads):
            for target, name in ((self._create, "churn-create"), (self._delete, "churn-delete")):
                t = threading.Thread(target=target, daemon=True, name=f"{name}-{i}")
                t.start()
                self.threads.append(t)
        return self

    def _create(self) -> None:
        conn = self.api.connection()
        ann = {"fleet.gpugate.io/exit": "Succeeded",
               "fleet.gpugate.io/run-for": f"{self.run_for:g}s"}
        try:
            while not self.stopping.is_set():
                with self.lock:
                    k = self.n
                    self.n += 1
                wait = self.t0 + k / self.rate - time.monotonic()
                if wait > 0 and self.stopping.wait(wait):
                    return
                name = f"churn-{k}"
                obj = e2e.pod(name, CHURN_NS, "mig", labels={RUN_LABEL: "churn"},
                              annotations=ann)
                try:
                    status, _ = self.api.request("POST", f"/api/v1/namespaces/{CHURN_NS}/pods",
                                                 obj, conn=conn)
                except (OSError, http.client.HTTPException):
                    conn.close()
                    conn = self.api.connection()
                    status = None
                with self.lock:
                    if status == 201:
                        self.created += 1
                        self.due.append((time.monotonic() + self.lifetime, name))
                    else:
                        self.errors += 1
        finally:
            conn.close()
            with self.lock:
                self.creators -= 1

    def _delete(self) -> None:
        conn = self.api.connection()
        try:
            while True:
                with self.lock:
                    if self.stopping.is_set() and not self.creators:
                        return  # the rest goes with the deletecollection
                    item = self.due.popleft() if self.due and \
                        self.due[0][0] <= time.monotonic() else None
                if item is None:
                    time.sleep(0.02)
                    continue
                try:
                    status, _ = self.api.request(
                        "DELETE", f"/api/v1/namespaces/{CHURN_NS}/pods/{item[1]}", conn=conn)
                except (OSError, http.client.HTTPException):
                    conn.close()
                    conn = self.api.connection()
                    status = None
                with self.lock:
                    if status in (200, 202, 404):
                        self.deleted += 1
                    else:
                        self.errors += 1
        finally:
            conn.close()

    def stop(self) -> None:
        self.stopping.set()
        self.t1 = time.monotonic()
        for t in self.threads:
            t.join(30)

    @property
    def achieved(self) -> float:
        return self.created / max(getattr(self, "t1", time.monotonic()) - self.t0, 1e-9)


class WriteProbe:
    """The apiserver's own write latency, beside the creates: every PERIOD
    seconds a GET and a PUT of ConfigMap bench-probe in STORE_NS (what the
    shared store does for each reservation, on a document of its own)."""

    def __init__(self, api: e2e.Api, period: float = 0.1):
        self.api = api
        self.period = period
        self.times: list[float] = []
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self) -> "WriteProbe":
        self.thread = threading.Thread(target=self._run, daemon=True, name="write-probe")
        self.thread.start()
        return self

    def _run(self) -> None:
        path = f"/api/v1/namespaces/{STORE_NS}/configmaps"
        conn = self.api.connection()
        try:
            status, _ = self.api.request("POST", path, {
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "bench-probe"}, "data": {"n": "0"}}, conn=conn)
            n = 0
            while not self.stopping.wait(self.period):
                t = time.perf_counter()
                status, cm = self.api.request("GET", f"{path}/bench-probe", conn=conn)
                if status != 200:
                    continue
                n += 1
                cm["data"] = {"n": str(n)}
                status, _ = self.api.request("PUT", f"{path}/bench-probe", cm, conn=conn)
                if status == 200:
                    self.times.append(time.perf_counter() - t)
        except (OSError, http.client.HTTPException):
            return
        finally:
            conn.close()

    def stop(self) -> list[float]:
        self.stopping.set()
        if self.thread is not None:
            self.thread.join(10)
        return sorted(self.times)


def store_documents(api: e2e.Api) -> tuple[int, int, int, int]:
    """The shared store's ConfigMaps in STORE_NS: (count, total bytes of
    data, largest, reservation records), the probe's left out."""
    status, body = api.request("GET", f"/api/v1/namespaces/{STORE_NS}/configmaps")
    if status != 200:
        return 0, 0, 0, 0
    sizes, records = [], 0
    for cm in body["items"]:
        if cm["metadata"]["name"] in ("bench-probe", "kube-root-ca.crt"):
            continue
        data = cm.get("data") or {}
        sizes.append(sum(len(k) + len(v) for k, v in data.items()))
        try:
            records += len(json.loads(data.get("reservations") or "[]"))
        except ValueError:
            pass
    return len(sizes), sum(sizes), max(sizes, default=0), records


def machine_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the machine since boot (/proc/stat)."""
    f = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    hz = os.sysconf("SC_CLK_TCK")
    idle = f[3] + f[4]
    return (sum(f[:8]) - idle) / hz, sum(f[:8]) / hz


# ---------------------------------------------------------------------------
# the run


class Run:
    def __init__(self, args):
        import yaml
        self.args = args
        self.binary = e2e.gpugate_bin()
        self.policy = yaml.safe_load(POLICY.read_text())
        self.truth_rule = Truth(self.policy)
        self.keep = args.keep
        self.dir = Path(tempfile.mkdtemp(prefix="gpugate-fleet."))
        self.cluster = e2e.Cluster(self.dir / "cluster")
        self.cluster_started = False
        self.gates: list[e2e.Gate] = []  # every one started; the last serves
        # --compare-replicas: the leader replicas and their balancer
        self.leaders: list[e2e.Gate] = []
        self.balancer: e2e.Balancer | None = None
        self.leaders_deciding = False  # past the Lease holder's start gate
        self.report = Report()
        self.api: e2e.Api | None = None
        self.kubectl: e2e.Kubectl | None = None
        self.certs: e2e.Certs | None = None
        self.truth: dict = {}
        self.holders = 0
        self.port = 0
        self.t_start = time.monotonic()
        self.busy0 = machine_busy()
        self.gate_cpu = 0.0  # of the gpugate processes stopped

    # -- processes --

    @property
    def gate(self) -> e2e.Gate:
        return self.gates[-1]

    def start_gate(self, store: str) -> e2e.Gate:
        n = len(self.gates) + 1
        extra = []
        if store == "shared":
            extra = ["--usage-store", "shared", "--namespace", STORE_NS,
                     "--identity", f"bench-{n}"]
        listen = f"127.0.0.1:{self.port}" if self.port else "127.0.0.1:0"
        g = e2e.Gate(self.binary, self.certs, POLICY, self.dir / "gpugate",
                     self.cluster.env["KUBECONFIG"], name=f"fleet-{n}", listen=listen,
                     args=extra)
        self.gates.append(g)
        g.start()
        self.port = g.port
        return g

    def stop_gate(self) -> tuple[int | None, float]:
        self.gate_cpu += cpu_seconds(self.gate.pid)
        t = time.monotonic()
        rc = self.gate.terminate()
        return rc, time.monotonic() - t

    def stop_leaders(self) -> None:
        """Stops the --compare-replicas replicas (their CPU counted as
        gpugate's) and their balancer."""
        for g in self.leaders:
            if g.alive:
                self.gate_cpu += cpu_seconds(g.pid)
                rc = g.terminate()
                if rc != 0:
                    raise RuntimeError(f"{g.name} exited {rc} after SIGTERM, not 0; "
                                       f"stderr:\n{g.stderr_tail()}")
        if self.balancer is not None:
            self.balancer.stop()
            self.balancer = None

    def cleanup(self, ok: bool) -> bool:
        """Stops everything; False when a gpugate did not exit 0 on SIGTERM
        or printed a sanitizer report (or ok was False already)."""
        if self.balancer is not None:
            self.balancer.stop()
        for g in self.gates + self.leaders:
            if g.alive:
                rc = g.terminate()
                if rc != 0:
                    log(f"{g.name}: exit {rc} after SIGTERM; stderr:\n{g.stderr_tail()}")
                    ok = False
        for g in self.gates + self.leaders:
            r = g.sanitizer_report()
            if r:
                log(f"{g.name}: sanitizer report:\n{r}")
                ok = False
        if self.cluster_started:
            self.cluster.down()
        if self.keep or not ok:
            log(f"temporary files kept in {self.dir}")
        else:
            shutil.rmtree(self.dir, ignore_errors=True)
        return ok

    # -- steps --

    def header(self, counts: dict, cpu: int) -> None:
        a, say = self.args, self.report.say
        rev = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
                             capture_output=True, text=True).stdout.strip() or "unknown"
        version = subprocess.run([str(self.binary), "version"], capture_output=True,
                                 text=True).stdout.strip().splitlines()[:1]
        model = next((l.split(":", 1)[1].strip() for l in
                      Path("/proc/cpuinfo").read_text().splitlines()
                      if l.startswith("model name")), "?")
        mem = int(Path("/proc/meminfo").read_text().split()[1]) / 1048576
        say("gpugate scale run (bench/fleet-scale.py, issue #15)")
        say("=" * 52)
        say(f"date:       {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}")
        say(f"machine:    {os.cpu_count()} CPUs ({model}), {mem:.0f} GiB")
        say(f"source:     {rev}; gpugate {' '.join(version)} ({self.binary})")
        say(f"load avg:   {loadavg()} at start (other work on the machine skews every time)")
        say(f"fleet:      {sum(counts.values()) + cpu} nodes: "
            + ", ".join(f"{f} {n}" for f, n in counts.items()) + f", cpu {cpu}")
        say(f"pods:       {a.pods} class pods in {len(NAMESPACES)} namespaces of "
            f"{len(TEAMS)} tenants, {a.threads} creating threads")
        say(f"churn:      {a.churn_rate:g} pods/s, Succeeded after {a.churn_run_for:g} s, "
            f"deleted after {a.churn_lifetime:g} s; {a.latency_creates} timed creates a side")
        say(f"stores:     {a.usage_store}"
            + (f"; bulk create alternating with {a.compare_replicas} leader replicas, "
               f"chunks of {a.chunk}" if a.compare_replicas else ""))
        say("")

    def up(self) -> None:
        t = time.monotonic()
        self.cluster_started = True  # down is idempotent: also after a failed up
        self.cluster.up()
        self.report.figure("control plane up (cluster.sh up)", f"{time.monotonic() - t:.1f} s")
        self.kubectl = self.cluster.kubectl()
        self.api = e2e.Api(self.cluster)
        self.certs = e2e.make_certs(self.binary, self.dir / "certs")
        objs = [e2e.namespace_obj(ns, "fleet") for ns in NAMESPACES + [CHURN_NS, LATENCY_NS]]
        objs += [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}
                 for n in (STORE_NS, LEADER_NS)]
        self.kubectl.apply({"apiVersion": "v1", "kind": "List", "items": objs}).check()
        e2e.wait_service_accounts(self.kubectl, NAMESPACES + [CHURN_NS, LATENCY_NS])
        first = "shared" if self.args.usage_store == "shared" else "memory"
        self.start_gate(first).wait_ready()
        e2e.register(self.kubectl, "gpugate-fleet", self.gate, "fleet")
        probe = json.dumps(e2e.pod("webhook-probe", LATENCY_NS, "mig"))

        def called():  # mapped: gpugate's stamp (a pod that fits gets no warning)
            r = self.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-",
                             input=probe)
            return r.rc == 0 and "gpugate.io/tenant" in (
                json.loads(r.out)["metadata"].get("labels") or {})
        e2e.wait_until("the webhooks to be called", called, 30, 0.3)
        log(f"gpugate ({first} store) on {self.gate.url}, registered")
        if self.args.compare_replicas:
            for i in range(self.args.compare_replicas):
                g = e2e.Gate(self.binary, self.certs, POLICY, self.dir / "gpugate",
                             self.cluster.env["KUBECONFIG"], name=f"leader-{i}",
                             args=[w.format(index=i) for w in
                                   shlex.split(self.args.leader_args)])
                self.leaders.append(g)
                g.start()
            for g in self.leaders:
                g.wait_ready()
            self.balancer = e2e.Balancer([g.port for g in self.leaders]).start()
            log(f"{len(self.leaders)} leader replicas behind {self.balancer.url}")

    def serve_with(self, side: str) -> None:
        """The webhooks go to SIDE ("one": the one gpugate; "leader": the
        balancer of the replicas) from now on: re-registered, then dry-run
        creates until one reaches that side's /mutate and, at the same
        moment, none the other's."""
        url = self.gate.url if side == "one" else self.balancer.url
        self.kubectl.apply({"apiVersion": "v1", "kind": "List", "items": e2e.webhook_configs(
            "gpugate-fleet", url, self.certs.ca_bundle, "fleet")}).check()
        mine = [self.gate] if side == "one" else self.leaders
        other = self.leaders if side == "one" else [self.gate]
        probe = e2e.pod("webhook-probe", LATENCY_NS, "mig")

        def count(gs):
            return sum(g.requests("mutate") for g in gs)

        def switched():
            m0, o0 = count(mine), count(other)
            self.api.request("POST", f"/api/v1/namespaces/{LATENCY_NS}/pods?dryRun=All", probe)
            return count(mine) > m0 and count(other) == o0
        e2e.wait_until(f"the webhooks to call the {side} side", switched, 30, 0.2)
        if side == "leader" and not self.leaders_deciding:
            # the Lease holder decides once past its start gate (5 s and a
            # relist): a real create shows it (a dry run does not wait for
            # the gate), deleted again
            path = f"/api/v1/namespaces/{LATENCY_NS}/pods"
            e2e.wait_until("the leader replicas to decide", lambda: self.api.request(
                "POST", path, e2e.pod("leader-probe", LATENCY_NS, "mig"))[0] in (201, 409),
                60, 0.5)
            self.api.request("DELETE", f"{path}/leader-probe")
            e2e.wait_until("pod leader-probe to be gone", lambda: self.api.request(
                "GET", f"{path}/leader-probe")[0] == 404, 30, 0.2)
            self.leaders_deciding = True

    def fleet(self, counts: dict, cpu: int) -> None:
        n = sum(counts.values()) + cpu
        t = time.monotonic()
        fl = e2e.Fleet(self.kubectl, policy=POLICY, name="bench", nodes=counts,
                       default_nodes=0, cpu_nodes=cpu, clique_size=8)
        fl.create(timeout=max(120.0, n * 0.5))
        self.report.figure(f"fleet creation ({n} nodes, all Ready)",
                           f"{time.monotonic() - t:.1f} s")

    def pods(self) -> None:
        a, rep = self.args, self.report
        plan = list(pod_plan(a.pods))
        stop = threading.Event()
        cpu0 = cpu_seconds(self.gate.pid)
        log(f"creating {len(plan)} pods with {a.threads} threads")
        t0 = time.monotonic()
        result: dict = {}

        sides: dict[str, list[float]] = {"one": [0, 0.0], "leader": [0, 0.0]}

        def creator() -> None:
            if not a.compare_replicas:
                result["v"] = create_pods(self.api, plan, a.threads, {RUN_LABEL: "fleet"},
                                          stop)
                return
            lat, failures, retried = [], [], 0
            try:
                for n, i in enumerate(range(0, len(plan), a.chunk)):
                    side = "one" if n % 2 == 0 else "leader"
                    self.serve_with(side)
                    t = time.monotonic()
                    lt, fl, rt = create_pods(self.api, plan[i:i + a.chunk], a.threads,
                                             {RUN_LABEL: "fleet"}, stop)
                    sides[side][0] += len(plan[i:i + a.chunk])
                    sides[side][1] += time.monotonic() - t
                    lat += lt
                    failures += fl
                    retried += rt
                    if fl or stop.is_set():
                        break
                self.serve_with("one")
            except Exception as e:  # noqa: BLE001 - reported as a failure
                failures.append(f"switching the webhooks: {e}")
            result["v"] = (lat, failures, retried)
        ct = threading.Thread(target=creator, daemon=True, name="creator")
        ct.start()
        conn = self.api.connection(timeout=120)
        t_created = None
        t_running = None
        last_log = 0.0
        label = f"{RUN_LABEL}=fleet"
        try:
            while True:
                if t_created is None and not ct.is_alive():
                    t_created = time.monotonic()
                    lat, failures, retried = result["v"]
                    cpu_create = cpu_seconds(self.gate.pid) - cpu0
                    if failures:
                        raise RuntimeError(f"{len(failures)} of {len(plan)} creates failed, "
                                           f"e.g. " + "; ".join(failures[:3]))
                if t_created is not None:
                    pending = count_pods(self.api, conn, "status.phase!=Running", label)
                    if pending == 0:
                        t_running = time.monotonic()
                        break
                    if time.monotonic() - t0 > a.timeout:
                        unbound = count_pods(self.api, conn, "spec.nodeName=", label)
                        raise RuntimeError(f"after {a.timeout} s, {pending} pods are not "
                                           f"Running ({unbound} not scheduled)")
                if time.monotonic() - last_log > 10:
                    last_log = time.monotonic()
                    running = count_pods(self.api, conn, "status.phase=Running", label)
                    log(f"{time.monotonic() - t0:.0f} s: {running} Running"
                        + ("" if t_created else ", creating"))
                time.sleep(0.5 if t_created else 1.0)
        except BaseException:
            stop.set()
            raise
        finally:
            conn.close()
        lat.sort()
        created_s = t_created - t0
        rep.figure(f"pods created ({len(plan)}, {a.threads} threads)",
                   f"{created_s:.1f} s = {len(plan) / created_s:.0f} creates/s"
                   + (f" ({retried} retried)" if retried else ""))
        if a.compare_replicas:
            rate = {k: n / max(w, 1e-9) for k, (n, w) in sides.items()}
            rep.figure(f"  of which with the one gpugate (chunks of {a.chunk})",
                       f"{sides['one'][0]} in {sides['one'][1]:.1f} s = "
                       f"{rate['one']:.0f} creates/s")
            rep.figure(f"  of which with {len(self.leaders)} leader replicas",
                       f"{sides['leader'][0]} in {sides['leader'][1]:.1f} s = "
                       f"{rate['leader']:.0f} creates/s")
            rep.figure(f"  {len(self.leaders)} leader replicas / one",
                       f"{rate['leader'] / max(rate['one'], 1e-9):.2f} x (issue #32: >= 0.9 x)")
        rep.figure("create latency during the bulk create",
                   f"p50 {ms(e2e.percentile(lat, 50))}, p99 {ms(e2e.percentile(lat, 99))}, "
                   f"max {ms(lat[-1])}")
        rep.figure("gpugate CPU during the bulk create", f"{cpu_create:.1f} s "
                   f"({cpu_create / len(plan) * 1e6:.0f} us a pod, both reviews and the watch)")
        rep.figure("all pods Running", f"{t_running - t0:.1f} s after the first create, "
                   f"{t_running - t_created:.1f} s after the last")

    def compute_truth(self) -> None:
        t = time.monotonic()
        self.truth, self.holders, phases = self.truth_rule.compute(self.api)
        log(f"truth from the API in {time.monotonic() - t:.1f} s: {self.holders} pods "
            f"hold units; phases {dict(phases)}")

    def usage_true(self, gate: e2e.Gate) -> tuple[bool, str]:
        try:
            status, text = gate.get("/metrics")
        except OSError:
            return False, ""
        if status != 200:
            return False, ""
        used = quota_used(text)
        keys = set(used) | set(self.truth)
        return all(used.get(k, 0) == self.truth.get(k, 0) for k in keys), text

    def wait_usage_true(self, timeout: float = 120.0, gate: e2e.Gate | None = None) -> str:
        last = [""]
        gate = gate or self.gate

        def ok():
            good, last[0] = self.usage_true(gate)
            return good
        try:
            e2e.wait_until("gpugate_quota_used == the truth", ok, timeout, 0.2)
        except AssertionError:
            used = quota_used(last[0])
            diff = {f"{t}/{f}": (used.get((t, f), 0), self.truth.get((t, f), 0))
                    for t, f in sorted(set(used) | set(self.truth))
                    if used.get((t, f), 0) != self.truth.get((t, f), 0)}
            raise RuntimeError(f"{gate.name}'s usage is not the truth after {timeout:.0f} s: "
                               f"(gpugate, truth) {diff}") from None
        return last[0]

    def memory(self) -> None:
        text = self.wait_usage_true()
        st = proc_status(self.gate.pid)
        entries = gauge(text, "gpugate_ledger_entries")
        total = sum(self.truth.values())
        self.report.figure(f"gpugate memory, {self.args.pods} pods Running",
                           f"VmRSS {mib(st['VmRSS'])}, VmHWM {mib(st['VmHWM'])}")
        self.report.figure("gpugate usage = the truth",
                           f"{total} units over {len(self.truth)} tenant/flavor pairs; "
                           f"ledger entries {entries:.0f}, pods holding units {self.holders}")
        pids = {k: self.cluster.env.get(f"{k.upper()}_PID") for k in
                ("etcd", "apiserver", "scheduler", "kwok", "controller_manager")}
        rss = []
        for k, pid in pids.items():
            try:
                rss.append(f"{k.replace('_', '-')} {mib(proc_status(int(pid))['VmRSS'])}")
            except (OSError, TypeError, ValueError, KeyError):
                pass
        self.report.figure("control plane VmRSS", ", ".join(rss))

    def restart(self, store: str) -> None:
        rep = self.report
        rc, stop_s = self.stop_gate()
        if rc != 0:
            raise RuntimeError(f"{self.gate.name} exited {rc} after SIGTERM, not 0")
        t0 = time.monotonic()
        g = self.start_gate(store)
        t_listen = time.monotonic() - t0
        t_ready = t_true = None
        while time.monotonic() - t0 < 300:
            if t_ready is None:
                try:
                    if g.get("/readyz")[0] == 200:
                        t_ready = time.monotonic() - t0
                except OSError:
                    pass
            if t_ready is not None and self.usage_true(g)[0]:
                t_true = time.monotonic() - t0
                break
            if not g.alive:
                raise RuntimeError(f"{g.name} exited; stderr:\n{g.stderr_tail()}")
            time.sleep(0.05)
        if t_true is None:
            raise RuntimeError(f"{g.name}: not ready with the true usage 300 s after its start")
        st = proc_status(g.pid)
        cpu = cpu_seconds(g.pid)
        rep.figure(f"restart ({store} store): SIGTERM to exit 0", f"{stop_s:.2f} s")
        rep.figure(f"restart ({store}): exec to listening / ready / usage true",
                   f"{t_listen:.2f} s / {t_ready:.2f} s / {t_true:.2f} s "
                   f"(gpugate CPU {cpu:.2f} s)")
        rep.figure(f"restart ({store}): memory once caught up",
                   f"VmRSS {mib(st['VmRSS'])}, VmHWM {mib(st['VmHWM'])}")

    def clear(self, namespaces: list[str], timeout: float = 180.0) -> None:
        """Deletes every pod of NAMESPACES and waits until they are gone and
        gpugate's usage is the truth again (the 10,000 alone)."""
        conn = self.api.connection()
        try:
            for ns in namespaces:
                conn.request("DELETE", f"/api/v1/namespaces/{ns}/pods")
                r = conn.getresponse()
                r.read()
                assert r.status == 200, (ns, r.status)
            for ns in namespaces:
                e2e.wait_until(f"the pods of {ns} to be gone", lambda: not get(
                    self.api, conn, f"/api/v1/namespaces/{ns}/pods?limit=1")["items"],
                    timeout, 0.5)
        finally:
            conn.close()
        self.wait_usage_true()

    def latency(self, store: str, churn: bool) -> None:
        a, rep = self.args, self.report
        side = "with churn" if churn else "quiet"
        ch = None
        if churn:
            ch = Churn(self.api, a.churn_rate, a.churn_run_for, a.churn_lifetime).start()
            time.sleep(a.churn_lifetime + a.churn_run_for + 1)  # to its steady state
        _, before = self.gate.get("/metrics")
        cpu0 = cpu_seconds(self.gate.pid)
        events = EventCounter(self.api).start()
        probe = WriteProbe(self.api).start()
        t = time.monotonic()
        try:
            lat = sorted(e2e.create_latency(self.api, LATENCY_NS, a.latency_creates, cls="mig",
                                            prefix=f"lat-{store}-{'churn' if churn else 'quiet'}"))
        finally:
            window = time.monotonic() - t
            counts = events.stop()
            writes = probe.stop()
            docs = store_documents(self.api) if store == "shared" else None
            if ch is not None:
                ch.stop()
        cpu = cpu_seconds(self.gate.pid) - cpu0
        _, after = self.gate.get("/metrics")
        own = []
        for ep in ("mutate", "validate"):
            hb, ha = histogram(before, ep), histogram(after, ep)
            p50, n = hist_quantile(hb, ha, 0.50)
            p99, _ = hist_quantile(hb, ha, 0.99)
            own.append(f"{ep} {ms(p50)} / {ms(p99)} (of {n})")
        n_events = sum(counts.values())
        rep.figure(f"create latency, {store} store, {side}",
                   f"p50 {ms(e2e.percentile(lat, 50))}, p99 {ms(e2e.percentile(lat, 99))}, "
                   f"max {ms(lat[-1])} ({len(lat)} sequential creates in {window:.1f} s)")
        rep.figure(f"  gpugate's own p50 / p99 ({side})", ", ".join(own))
        rep.figure(f"  pod watch events ({side})",
                   f"{n_events / window:.0f}/s ({n_events} in {window:.1f} s: "
                   + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
                   + f"); gpugate CPU {cpu / window * 100:.0f} %")
        if writes:
            rep.figure(f"  apiserver ConfigMap GET+PUT ({side})",
                       f"p50 {ms(e2e.percentile(writes, 50))}, p99 "
                       f"{ms(e2e.percentile(writes, 99))} ({len(writes)}, one each 0.1 s)")
        if docs is not None:
            rep.figure(f"  shared store documents ({side})",
                       f"{docs[0]} ConfigMaps, {docs[3]} records, {docs[1] / 1024:.1f} KiB "
                       f"of data, largest {docs[2] / 1024:.1f} KiB (at the window's end)")
        if ch is not None:
            rep.figure("  churn achieved", f"{ch.achieved:.1f} creates/s, {ch.created} created, "
                       f"{ch.deleted} deleted, {ch.errors} errors")
        self.clear([LATENCY_NS] + ([CHURN_NS] if ch is not None else []))

    def run(self) -> None:
        a = self.args
        counts, cpu = node_counts(a.nodes)
        problems = check_sizes(a, counts)
        if problems:
            raise SystemExit("fleet-scale: sizes that cannot run:\n  " + "\n  ".join(problems))
        self.header(counts, cpu)
        self.up()
        self.fleet(counts, cpu)
        self.pods()
        self.compute_truth()
        if self.leaders:
            for g in self.leaders:
                self.wait_usage_true(timeout=120, gate=g)
            cpu = sum(cpu_seconds(g.pid) for g in self.leaders)
            self.report.figure(f"{len(self.leaders)} leader replicas: usage = the truth",
                               f"on each; their CPU over the run {cpu:.1f} s; stopped now")
            self.stop_leaders()
        self.memory()
        stores = ["memory", "shared"] if a.usage_store == "both" else [a.usage_store]
        for i, store in enumerate(stores):
            self.restart(store)
            self.latency(store, churn=False)
            self.latency(store, churn=True)
        self.report.figure("pods at the end", f"{sum(1 for _ in pod_plan(a.pods))} "
                           f"Running, usage still the truth")
        total = time.monotonic() - self.t_start
        busy, avail = machine_busy()
        t = os.times()
        gpugate = self.gate_cpu + cpu_seconds(self.gate.pid)
        # this process and its waited-for children: kubectl, cluster.sh, the
        # stopped gpugate processes (counted above)
        ours = t.user + t.system + t.children_user + t.children_system
        parts = {"gpugate": gpugate, "this script, kubectl": ours - self.gate_cpu}
        ours += cpu_seconds(self.gate.pid)
        for k in ("APISERVER", "ETCD", "SCHEDULER", "KWOK", "CONTROLLER_MANAGER"):
            try:
                c = cpu_seconds(int(self.cluster.env[f"{k}_PID"]))
            except (OSError, KeyError, ValueError):
                continue
            parts[k.lower().replace("_", "-")] = c
            ours += c
        busy -= self.busy0[0]
        avail -= self.busy0[1]
        self.report.say("")
        self.report.figure("whole run (wall time)", f"{total:.0f} s = {total / 60:.1f} min")
        self.report.figure("CPU over the run", f"machine busy {busy:.0f} of {avail:.0f} "
                           f"CPU-s ({busy / avail * 100:.0f} %); this run's processes "
                           f"{ours:.0f} CPU-s, the rest of the machine {max(busy - ours, 0):.0f}")
        self.report.figure("  CPU-s by process", ", ".join(
            f"{k} {v:.0f}" if v >= 10 else f"{k} {v:.1f}" for k, v in
            sorted(parts.items(), key=lambda kv: -kv[1])))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description="gpugate scale run: KWOK fleet, 10,000 pods (docs/benchmarks.md)")
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=10000)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--latency-creates", type=int, default=200)
    ap.add_argument("--churn-rate", type=float, default=20.0)
    ap.add_argument("--churn-run-for", type=float, default=2.0)
    ap.add_argument("--churn-lifetime", type=float, default=4.0)
    ap.add_argument("--usage-store", choices=["memory", "shared", "both"], default="both")
    ap.add_argument("--compare-replicas", type=int, default=0, metavar="K")
    ap.add_argument("--chunk", type=int, default=0,
                    help="pods a chunk of --compare-replicas (default: a tenth of --pods)")
    ap.add_argument("--leader-args", default=f"--usage-store leader --namespace {LEADER_NS} "
                                             f"--identity leader-{{index}}",
                    help="the --compare-replicas replicas' extra arguments ({index}: 0..K-1)")
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--small", action="store_true",
                    help="--nodes 100 --pods 1000 --latency-creates 100")
    args = ap.parse_args(argv)
    if args.small:
        args.nodes, args.pods, args.latency_creates = 100, 1000, 100
    if args.chunk < 1:
        args.chunk = max(1, args.pods // 10)
    for name in ("nodes", "pods", "threads", "latency_creates"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.churn_rate <= 0 or args.churn_lifetime < args.churn_run_for:
        ap.error("--churn-rate must be > 0 and --churn-lifetime >= --churn-run-for")
    binary = e2e.gpugate_bin()
    if not os.access(binary, os.X_OK):
        print(f"fleet-scale: {binary} is not built: run `make` (or set GPUGATE_BIN)",
              file=sys.stderr)
        return 1

    def on_signal(signum, frame):
        raise Interrupted(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    run = Run(args)
    ok = False
    try:
        run.run()
        ok = True
    except Interrupted as e:
        log(f"interrupted ({e})")
        return 130
    except SystemExit:
        raise
    except Exception as e:  # noqa: BLE001 - reported, then clean-up
        log(f"error: {type(e).__name__}: {e}")
        return 1
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if run.report.lines:
            run.report.save()
            log(f"report saved to {REPORT_FILE}")
        clean = run.cleanup(ok)
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
