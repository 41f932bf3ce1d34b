#!/usr/bin/env python3
"""bench/replica-speed.py - several replicas at the speed of one (issue #32,
deliverable 3; docs/benchmarks.md "Several replicas at the speed of one").

On the e2e control plane (tests/e2e/cluster.sh: etcd, kube-apiserver
v1.37.2), in ONE run, three sides side by side:

  none    namespace bench-none: no webhook at all (the apiserver alone)
  ledger  namespace bench-ledger: one `gpugate serve` (--usage-store
          memory: one ledger), behind a harness Balancer of one backend
  leader  namespace bench-leader: 3 `gpugate serve --usage-store leader`
          replicas (the shipped configuration) behind the round-robin
          Balancer of the e2e suite (gpugate_e2e.Balancer)
  spread  namespace bench-spread (bursts only; --no-control leaves it
          out): as many `gpugate serve --usage-store memory` replicas
          with one identity, so that each decides on its own ledger and
          none forwards, behind a Balancer: the control, what that many
          processes sharing a burst cost without the leader store

Each side's gpugate has its own webhook configurations, selecting its
namespace only; both serve the same policy (one tenant per namespace,
room for every create: one quota domain each).  Both go through a
Balancer, so that the Python relay's cost is on both sides.

  latency  --rounds R (default 5) rounds; in each, the sides in a rotating
           order, each --creates N (default 60) sequential creates of a
           class-gpu pod on one kept-alive connection (after 10 to warm
           up), gpugate_e2e.create_latency.  Added = the side's mean minus
           the `none` side's mean in the same round.  Before each leader
           round the balancer closes the apiserver's webhook connection
           (Balancer.max_age during a pause), so that the rounds rotate
           over the replicas: the one that serves a round is printed, and
           whether it held the Lease (a follower forwards each decision).
  interleaved  the primary latency figure: --rounds R rounds (the
           leader side's webhook connection renewed before each, as
           above), in each --creates N creates a side (after 10 to warm
           up) taking turns, one create to each side in a rotating order
           (gpugate_e2e.create_latency_interleaved): the moments when the
           machine is slow fall on every side alike.  Added = the side's
           mean minus `none`'s in the same round; the summary's ratio is
           of the medians over rounds.  The blocks above (each side's
           creates in a row) are runs 1-16's figure, still printed: a side
           whose block meets a slow moment of the shared machine gets all
           of it (docs/benchmarks.md, run 17).
  bursts   after a burst of the largest size a side, not counted (it
           opens the connections the others reuse), --bursts B (default
           4) rounds of concurrent creates (--burst-sizes, default 25, 50,
           100 at once, each on its own connection, released together)
           into each gpugate side's one domain, interleaved: creates/s
           from the release to the last answer, and the side's gpugate
           CPU per create; every create must be admitted.

Prints a line per measurement and the summary: the added latency of each
side (median over rounds of the mean, and of the p50), leader/ledger; the
burst rate of each side (all creates / all seconds), leader/ledger and
leader/spread.  The
targets of issue #32: added latency <= 1.2 x, bursts >= 0.9 x.  Figures,
not a test: the exit status is 0 when the run completed.

  make bench-replicas [REPLICAS_ARGS="--rounds 5 --creates 60"]
  bench/replica-speed.py [--gpugate build/gpugate] [--leader-args ARGS]

Needs the e2e tools (make e2e-tools-check); about 70 s.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

import gpugate_e2e as e2e  # noqa: E402

STORE_NS = "gpugate-bench"  # the leader replicas' Lease
LABEL = "bench.gpugate.io/side"
POLICY = """\
version: 1
settings:
  admissionWarnings: all
  rawGpuRequests: reject
  mode: enforce
""" + e2e.H100_FLAVOR_AND_CLASS_GPU + """\
tenants:
  - name: bench-ledger
    namespaces: [bench-ledger]
    quota:
      - {flavor: h100-80gb, nominal: 100000}
  - name: bench-leader
    namespaces: [bench-leader]
    quota:
      - {flavor: h100-80gb, nominal: 100000}
  - name: bench-spread
    namespaces: [bench-spread]
    quota:
      - {flavor: h100-80gb, nominal: 100000}
"""
LEADER_ARGS = f"--usage-store leader --namespace {STORE_NS} --identity bench-{{index}}"
LEDGER_ARGS = "--usage-store memory"
# The control of the bursts: as many replicas, none forwarding.  One
# identity, so that each takes the Lease as its own and decides on its own
# ledger (over-admitting, which room for every create hides): what K
# processes sharing a burst cost, without the leader store.
SPREAD_NS = "gpugate-spread"
SPREAD_ARGS = f"--usage-store memory --namespace {SPREAD_NS} --identity spread"
WARM = 10
BURSTS = (25, 50, 100)


def log(msg: str) -> None:
    print(f"replica-speed: {time.strftime('%H:%M:%S')} {msg}", file=sys.stderr, flush=True)


def ms(s: float) -> str:
    return f"{s * 1000:.2f} ms"


class Side:
    """K gpugate processes behind a Balancer, registered for namespace NS."""

    def __init__(self, name: str, k: int, args: str, binary: Path, certs: e2e.Certs,
                 policy: Path, workdir: Path, kubeconfig: str):
        self.name, self.ns, self.k = name, f"bench-{name}", k
        self.gates = [e2e.Gate(binary, certs, policy, workdir, kubeconfig,
                               name=f"{name}-{i}",
                               args=[w.format(index=i) for w in shlex.split(args)])
                      for i in range(k)]
        self.balancer: e2e.Balancer | None = None

    def start(self, kubectl: e2e.Kubectl, ca_bundle: str) -> "Side":
        for g in self.gates:
            g.start()
        for g in self.gates:
            g.wait_ready()
        self.balancer = e2e.Balancer([g.port for g in self.gates]).start()
        items = e2e.webhook_configs(f"gpugate-bench-{self.name}", self.balancer.url,
                                    ca_bundle, "bench")
        for cfg in items:
            for w in cfg["webhooks"]:
                w["namespaceSelector"] = {"matchLabels": {LABEL: self.name}}
        kubectl.apply({"apiVersion": "v1", "kind": "List", "items": items}).check()
        return self

    def cpus(self) -> list[float]:
        """CPU seconds of each of the side's processes so far."""
        out = []
        for g in self.gates:
            f = Path(f"/proc/{g.pid}/stat").read_text().rsplit(")", 1)[1].split()
            out.append((int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK"))
        return out

    def cpu(self) -> float:
        return sum(self.cpus())

    def validate_counts(self) -> list[int]:
        return [g.requests("validate") for g in self.gates]

    def next_replica(self) -> None:
        """Closes the apiserver's webhook connection during a pause
        (Balancer.max_age), so that the next creates go to the next
        replica."""
        b = self.balancer
        b.max_age = 0.0
        time.sleep(2 * b.idle + 0.1)
        b.max_age = None

    def stop(self) -> list[str]:
        problems: list[str] = []
        for g in self.gates:
            problems += g.stop_and_check()
        if self.balancer is not None:
            self.balancer.stop()
        return problems


def wait_called(kubectl: e2e.Kubectl, ns: str) -> None:
    probe = e2e.to_yaml(e2e.pod("webhook-probe", ns, "gpu"))

    def called():
        r = kubectl("create", "--dry-run=server", "-o", "jsonpath={.metadata.labels}",
                    "-f", "-", input=probe)
        return r.rc == 0 and "gpugate.io/tenant" in r.out
    e2e.wait_until(f"the webhooks of {ns} to be called", called, 30, 0.3)


def empty(api: e2e.Api, ns: str, side: Side | None) -> None:
    api.delete_pods(ns)
    e2e.wait_until(f"the pods of {ns} to be gone", lambda: not api.pod_names(ns), 60, 0.1)
    if side is not None:
        for g in side.gates:
            g.wait_used(ns, 0, timeout=30)


def burst(api: e2e.Api, ns: str, prefix: str, n: int) -> tuple[int, float, list]:
    """N concurrent creates released together (e2e.burst_creates): (created,
    seconds from the release to the last answer, the answers that were not
    201)."""
    results, wall = e2e.burst_creates(api, ns, prefix, n, timeout=120.0)
    bad = [(s, str(b)[:200]) for s, b in results if s != 201]
    return n - len(bad), wall, bad


def prepare(cluster: e2e.Cluster, binary: Path, tmp: Path,
            names) -> tuple[e2e.Kubectl, e2e.Api, e2e.Certs, Path]:
    """The control plane up, the certificates and the policy in TMP, a
    namespace bench-NAME (labelled for its side's webhooks) for each of
    NAMES and the stores' namespaces: (kubectl, api, certs, policy)."""
    cluster.up()
    k = cluster.kubectl()
    api = e2e.Api(cluster)
    certs = e2e.make_certs(binary, tmp / "certs")
    policy = tmp / "policy.yaml"
    policy.write_text(POLICY)
    objs = [{"apiVersion": "v1", "kind": "Namespace",
             "metadata": {"name": f"bench-{s}", "labels": {LABEL: s}}} for s in names]
    # the Leases: the leader side's, the one ledger's default (--usage-store
    # memory: only the holder of gpugate/gpugate-memory decides), the spread's
    objs += [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}
             for n in (STORE_NS, "gpugate", SPREAD_NS)]
    k.apply({"apiVersion": "v1", "kind": "List", "items": objs}).check()
    e2e.wait_service_accounts(k, [f"bench-{s}" for s in names])
    return k, api, certs, policy


def lease_holder(api: e2e.Api) -> str:
    status, body = api.request(
        "GET", f"/apis/coordination.k8s.io/v1/namespaces/{STORE_NS}/leases/gpugate-memory")
    return ((body.get("spec") or {}).get("holderIdentity") or "") if status == 200 else ""


def add_round(added: dict, added50: dict, means: dict, p50s: dict) -> None:
    """One round's added latency of the ledger and leader sides: their mean
    and p50 minus the `none` side's."""
    for n in ("ledger", "leader"):
        added[n].append(means[n] - means["none"])
        added50[n].append(p50s[n] - p50s["none"])


def summarize_added(how: str, added: dict, added50: dict) -> tuple[float, float]:
    """Prints each side's added latency (the median over rounds of the
    round's mean and p50, and the rounds' means) and returns leader/ledger
    of the medians of the means and of the p50s."""
    med = {n: statistics.median(v) for n, v in added.items()}
    med50 = {n: statistics.median(v) for n, v in added50.items()}
    for n in ("ledger", "leader"):
        print(f"  added per create, {how}{n:<6}  median of round means {ms(med[n])}, "
              f"of round p50s {ms(med50[n])}; rounds "
              + ", ".join(f"{x * 1000:.2f}" for x in added[n]) + " ms")

    def ratio(m: dict) -> float:
        return m["leader"] / m["ledger"] if m["ledger"] > 0 else float("nan")
    return ratio(med), ratio(med50)


def served_by(api: e2e.Api, side: Side, v0: list[int]) -> str:
    """Which replica of SIDE served since its validate counts were V0,
    and whether it held the Lease (a follower forwards each decision)."""
    v = [x - y for x, y in zip(side.validate_counts(), v0)]
    served = max(range(len(v)), key=lambda i: v[i])
    holder = lease_holder(api) == f"bench-{served}"
    return (f"leader side served by replica {served} "
            f"({'the Lease holder' if holder else 'a follower'}; "
            f"validate per replica {'/'.join(map(str, v))})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpugate", default=os.environ.get("GPUGATE_BIN",
                                                        str(ROOT / "build" / "gpugate")))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--creates", type=int, default=60)
    ap.add_argument("--bursts", type=int, default=4)
    ap.add_argument("--replicas", type=int, default=3)
    ap.add_argument("--burst-sizes", default=",".join(map(str, BURSTS)),
                    help="creates at once, comma-separated (default 25,50,100)")
    ap.add_argument("--leader-args", default=LEADER_ARGS,
                    help=f"the replicas' extra arguments ({{index}}: 0..K-1); default "
                         f"{LEADER_ARGS!r}")
    ap.add_argument("--ledger-args", default=LEDGER_ARGS)
    ap.add_argument("--no-control", dest="control", action="store_false",
                    help="no `spread` side (the bursts' control)")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    sizes = [int(x) for x in a.burst_sizes.split(",") if x]
    binary = Path(a.gpugate).resolve()
    os.environ["GPUGATE_BIN"] = str(binary)

    tmp = Path(tempfile.mkdtemp(prefix="gpugate-replica-speed."))
    cluster = e2e.Cluster(tmp / "cluster")
    sides: list[Side] = []
    ok = False
    t_start = time.monotonic()
    try:
        k, api, certs, policy = prepare(cluster, binary, tmp,
                                        ("none", "ledger", "leader", "spread"))
        kc = cluster.env["KUBECONFIG"]
        ledger = Side("ledger", 1, a.ledger_args, binary, certs, policy, tmp / "gpugate", kc)
        leader = Side("leader", a.replicas, a.leader_args, binary, certs, policy,
                      tmp / "gpugate", kc)
        spread = None
        if a.control:
            spread = Side("spread", a.replicas, SPREAD_ARGS, binary, certs, policy,
                          tmp / "gpugate", kc)
        sides = [ledger, leader] + ([spread] if spread else [])
        for s in sides:
            s.start(k, certs.ca_bundle)
        for s in sides:
            wait_called(k, s.ns)
        rev = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
                             capture_output=True, text=True).stdout.strip()
        print(f"replica speed (bench/replica-speed.py, issue #32), "
              f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, source {rev}, "
              f"{os.cpu_count()} CPUs, load {' '.join(open('/proc/loadavg').read().split()[:3])}")
        print(f"  ledger: 1 x `gpugate serve {a.ledger_args}`; leader: {a.replicas} x "
              f"`gpugate serve {a.leader_args}`"
              + (f"; spread: {a.replicas} x `gpugate serve {SPREAD_ARGS}`" if spread else "")
              + "; each behind a harness Balancer")
        # the leader side decides once a replica holds the Lease and passed
        # its start gate: a real create shows it
        e2e.wait_until("the leader side to admit", lambda: api.request(
            "POST", "/api/v1/namespaces/bench-leader/pods",
            e2e.pod("first", "bench-leader", "gpu"))[0] == 201, 60, 0.5)
        empty(api, "bench-leader", leader)

        # -- latency --
        added: dict[str, list[float]] = {"ledger": [], "leader": []}
        added50: dict[str, list[float]] = {"ledger": [], "leader": []}
        order = ["none", "ledger", "leader"]
        for r in range(a.rounds):
            means, p50s, notes = {}, {}, []
            for name in order[r % 3:] + order[:r % 3]:
                side = {"ledger": ledger, "leader": leader}.get(name)
                ns = f"bench-{name}"
                if side is leader:
                    leader.next_replica()
                v0 = side.validate_counts() if side else None
                e2e.create_latency(api, ns, WARM, prefix=f"w{r}")
                t = e2e.create_latency(api, ns, a.creates, prefix=f"r{r}")
                s = sorted(t)
                means[name], p50s[name] = statistics.fmean(s), e2e.percentile(s, 50)
                if side is leader:
                    notes.append(served_by(api, leader, v0))
                empty(api, ns, side)
            add_round(added, added50, means, p50s)
            print(f"round {r + 1}: mean none {ms(means['none'])}, ledger {ms(means['ledger'])}, "
                  f"leader {ms(means['leader'])}; added ledger "
                  f"{ms(added['ledger'][-1])}, leader {ms(added['leader'][-1])}; "
                  + "; ".join(notes), flush=True)

        # -- latency, interleaved: the primary figure --
        iadded: dict[str, list[float]] = {"ledger": [], "leader": []}
        iadded50: dict[str, list[float]] = {"ledger": [], "leader": []}
        nss = [f"bench-{n}" for n in order]
        for r in range(a.rounds):
            leader.next_replica()
            v0 = leader.validate_counts()
            e2e.create_latency_interleaved(api, nss, WARM, prefix=f"iw{r}")
            t = e2e.create_latency_interleaved(api, nss, a.creates, prefix=f"i{r}")
            mean = {n: statistics.fmean(t[f"bench-{n}"]) for n in order}
            p50 = {n: e2e.percentile(sorted(t[f"bench-{n}"]), 50) for n in order}
            add_round(iadded, iadded50, mean, p50)
            print(f"interleaved round {r + 1}: mean none {ms(mean['none'])}, ledger "
                  f"{ms(mean['ledger'])}, leader {ms(mean['leader'])}; added ledger "
                  f"{ms(iadded['ledger'][-1])}, leader {ms(iadded['leader'][-1])}; p50 added "
                  f"ledger {ms(iadded50['ledger'][-1])}, leader {ms(iadded50['leader'][-1])}; "
                  + served_by(api, leader, v0), flush=True)
            for n in order:
                empty(api, f"bench-{n}", {"ledger": ledger, "leader": leader}.get(n))

        # -- bursts --
        bsides = [ledger, leader] + ([spread] if spread else [])
        names = [b.name for b in bsides]
        rate: dict[str, list[tuple[int, float]]] = {n: [] for n in names}
        cpu = {n: 0.0 for n in names}  # the side's gpugate CPU in its bursts
        per = {b.name: [0.0] * b.k for b in bsides}  # ... of each process
        others = {n: 0.0 for n in names}  # the other sides' (their watches)
        conns = {n: 0 for n in names}  # new webhook connections in its bursts
        # not counted: the connections a burst needs (the apiserver's to the
        # webhooks, a follower's to the leader) are opened by the first
        for side in bsides:
            burst(api, side.ns, "warm", max(sizes))
            empty(api, side.ns, side)
        for r in range(a.bursts):
            for n in sizes:
                for side in bsides[r % len(bsides):] + bsides[:r % len(bsides)]:
                    rest = [b for b in bsides if b is not side]
                    c0 = side.cpus()
                    o0 = sum(b.cpu() for b in rest)
                    k0 = sum(side.balancer.counts())
                    created, wall, bad = burst(api, side.ns, f"b{r}-{n}", n)
                    conns[side.name] += sum(side.balancer.counts()) - k0
                    others[side.name] += sum(b.cpu() for b in rest) - o0
                    per[side.name] = [x + y - z for x, y, z in
                                      zip(per[side.name], side.cpus(), c0)]
                    cpu[side.name] = sum(per[side.name])
                    rate[side.name].append((created, wall))
                    print(f"burst {r + 1}, {n} at once, {side.name}: {created} created in "
                          f"{wall:.2f}s = {created / wall:.0f} creates/s"
                          + (f"; NOT CREATED {len(bad)}: {bad[:2]}" if bad else ""),
                          flush=True)
                    empty(api, side.ns, side)

        print()
        print(f"summary ({a.rounds} rounds of {a.creates} sequential creates, "
              f"{a.bursts} x {'/'.join(map(str, sizes))} burst creates a side)")
        ratio, _ = summarize_added("", added, added50)
        print(f"  added latency leader/ledger, in blocks: {ratio:.2f} x (runs 1-16's "
              f"figure: each side's {a.creates} creates in a block, the sides in turn)")
        iratio, iratio50 = summarize_added("interleaved, ", iadded, iadded50)
        print(f"  added latency leader/ledger: {iratio:.2f} x (target <= 1.2 x; interleaved "
              f"creates, of the means; of the p50s {iratio50:.2f} x)")
        rates = {n: sum(c for c, _ in v) / sum(w for _, w in v) for n, v in rate.items()}
        for n in names:
            created = sum(c for c, _ in rate[n])
            print(f"  bursts into one domain, {n:<6}  {rates[n]:.0f} creates/s; the side's "
                  f"gpugate CPU {cpu[n] / max(created, 1) * 1e6:.0f} us a create "
                  f"(its processes, during its bursts"
                  + ("" if len(per[n]) < 2 else ": " + ", ".join(
                      f"{n}-{i} {x / max(created, 1) * 1e6:.0f}" for i, x in enumerate(per[n])))
                  + f"); the other sides' meanwhile "
                  f"{others[n] / max(created, 1) * 1e6:.0f} us (they watch these pods too); "
                  f"new webhook connections {conns[n] / max(created, 1):.2f} a create")
        print(f"  Lease holder at the end: {lease_holder(api) or 'none'}")
        print(f"  burst rate leader/ledger: {rates['leader'] / rates['ledger']:.2f} x "
              f"(target >= 0.9 x)")
        if spread:
            print(f"  burst rate leader/spread: {rates['leader'] / rates['spread']:.2f} x "
                  f"(the control: as many processes, none forwarding: what the leader "
                  f"store itself costs in a burst)")
        print(f"  whole run {time.monotonic() - t_start:.0f} s, load "
              f"{' '.join(open('/proc/loadavg').read().split()[:3])}")
        ok = True
    finally:
        problems = []
        for s in sides:
            problems += s.stop()
        cluster.down()
        for p in problems:
            log(p)
        if a.keep or not ok or problems:
            log(f"kept {tmp}")
        else:
            import shutil
            shutil.rmtree(tmp, ignore_errors=True)
    return 0 if ok and not problems else 1


if __name__ == "__main__":
    sys.exit(main())
