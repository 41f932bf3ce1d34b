#!/usr/bin/env python3
"""bench/burst-syscalls.py - where a burst's gpugate CPU goes: system calls
and CPU per create, per side, during bursts of concurrent creates through
the kube-apiserver (docs/benchmarks.md "Handshakes that spun").

The sides of bench/replica-speed.py (ledger: one `--usage-store memory`;
leader: 3 `--usage-store leader` replicas; spread: 3 replicas that never
forward), each behind a harness Balancer, on the e2e control plane.  After
one burst a side to open connections, for each side in turn: `perf stat`
attached to the side's processes (task clock, context switches, and the
system calls recvfrom, sendmsg, poll, epoll_wait, futex, accept4, with
recvfrom's failures counted apart), then --bursts B (6) bursts of --size N
(100) concurrent creates into the side's namespace.  Prints, per side, the
rate, the CPU per create (/proc, as bench/replica-speed.py counts it) and
each counter per create.  A recvfrom count in the thousands a create,
nearly all failing, is a worker polling a socket that has nothing: what
libmicrohttpd 0.9.75's epoll mode did during every TLS handshake.

  bench/burst-syscalls.py [--gpugate build/gpugate] [--bursts 6] [--size 100]

Needs the e2e tools (make e2e-tools-check) and perf (linux-perf), run as
root (perf's syscall tracepoints); about 60 s.  Figures, not a test.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("replica_speed", HERE / "replica-speed.py")
rs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rs)
e2e = rs.e2e

SYSCALLS = ("recvfrom", "sendmsg", "poll", "epoll_wait", "futex", "accept4")


def perf_stat(pids: str, out: Path) -> subprocess.Popen:
    events = ",".join(f"syscalls:sys_enter_{c}" for c in SYSCALLS)
    return subprocess.Popen(
        ["perf", "stat", "-x", ",", "-o", str(out), "-p", pids,
         "-e", f"task-clock,context-switches,{events}",
         "-e", "syscalls:sys_exit_recvfrom", "--filter", "ret < 0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def read_stat(path: Path) -> dict[str, float]:
    """perf stat -x , lines: value,unit,event,..."""
    got: dict[str, float] = {}
    for line in path.read_text().splitlines():
        f = line.split(",")
        if len(f) < 3 or line.startswith("#"):
            continue
        try:
            v = float(f[0])
        except ValueError:
            continue
        name = f[2].replace("syscalls:sys_enter_", "").replace(
            "syscalls:sys_exit_recvfrom", "recvfrom failed")
        got[name] = v
    return got


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpugate", default=os.environ.get("GPUGATE_BIN",
                                                        str(rs.ROOT / "build" / "gpugate")))
    ap.add_argument("--bursts", type=int, default=6)
    ap.add_argument("--size", type=int, default=100)
    a = ap.parse_args()
    binary = Path(a.gpugate).resolve()
    os.environ["GPUGATE_BIN"] = str(binary)
    tmp = Path(tempfile.mkdtemp(prefix="gpugate-burst-syscalls."))
    cluster = e2e.Cluster(tmp / "cluster")
    sides: list = []
    try:
        names = ("ledger", "leader", "spread")
        k, api, certs, policy = rs.prepare(cluster, binary, tmp, names)
        kc = cluster.env["KUBECONFIG"]
        args = {"ledger": (1, rs.LEDGER_ARGS), "leader": (3, rs.LEADER_ARGS),
                "spread": (3, rs.SPREAD_ARGS)}
        sides = [rs.Side(n, args[n][0], args[n][1], binary, certs, policy, tmp / "gpugate", kc)
                 for n in names]
        for s in sides:
            s.start(k, certs.ca_bundle)
        for s in sides:
            rs.wait_called(k, s.ns)
        e2e.wait_until("the leader side to admit", lambda: api.request(
            "POST", "/api/v1/namespaces/bench-leader/pods",
            e2e.pod("first", "bench-leader", "gpu"))[0] == 201, 60, 0.5)
        for s in sides:
            rs.burst(api, s.ns, "warm", a.size)
        rev = subprocess.run(["git", "-C", str(rs.ROOT), "describe", "--always", "--dirty"],
                             capture_output=True, text=True).stdout.strip()
        print(f"burst syscalls (bench/burst-syscalls.py), "
              f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, source {rev}, "
              f"{a.bursts} bursts of {a.size} a side")
        for s in sides:
            out = tmp / f"{s.name}.perf"
            p = perf_stat(",".join(str(g.pid) for g in s.gates), out)
            time.sleep(1.0)  # perf attached
            c0, created, wall = s.cpu(), 0, 0.0
            for r in range(a.bursts):
                n, w, bad = rs.burst(api, s.ns, f"s{r}", a.size)
                if bad:
                    print(f"  {s.name}: {len(bad)} creates failed, e.g. {bad[0]}")
                    return 1
                created, wall = created + n, wall + w
            cpu = s.cpu() - c0
            p.send_signal(signal.SIGINT)
            p.wait()
            st = read_stat(out)
            per = ", ".join(f"{name} {v / created:.1f}" for name, v in st.items()
                            if name not in ("task-clock",))
            print(f"  {s.name} ({s.k} process{'es' if s.k > 1 else ''}): "
                  f"{created / wall:.0f} creates/s, gpugate CPU {cpu / created * 1e6:.0f} us "
                  f"a create; a create: {per}", flush=True)
        return 0
    finally:
        for s in sides:
            s.stop()
        cluster.down()


if __name__ == "__main__":
    sys.exit(main())
