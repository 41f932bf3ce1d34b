#!/usr/bin/env python3
"""bench/replica-floors.py - the floors of issue #32's two ways, measured
(docs/design/replicas-speed.md "The choice, and what must be measured
first"; docs/benchmarks.md "Several replicas: the floors of the two ways").

Starts the e2e control plane (tests/e2e/cluster.sh) and gpugate serve on
it, then times, one request at a time on one kept-alive TLS connection
each:

  get+put  today's shared store: GET of a quota domain's ConfigMap, then a
           PUT of it at the resourceVersion read (one record appended);
  put      way B's floor: the PUT alone, at the resourceVersion of the
           previous answer (a cached object, no GET);
  forward  way A's floor: a round trip to another gpugate replica's HTTPS
           server (libmicrohttpd and GnuTLS, as a forward would reach
           it), GET /healthz on its port: the hop without the decision.

The document is the size of a busy domain's: 50 records as
usage/reservations.c writes them.  Prints the median, p90 and mean of each
in ms, and the rounds.

  bench/replica-floors.py [--rounds N] [--gpugate build/gpugate]

Needs the e2e tools (make e2e-tools-check) and about 30 s.
"""
from __future__ import annotations

import argparse
import http.client
import json
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLUSTER = ROOT / "tests" / "e2e" / "cluster.sh"
NS = "default"
NAME = "gpugate-usage-c-bench"


def record(i: int) -> dict:
    return {"uid": f"00000000-0000-0000-0000-{i:012d}", "kind": "pod",
            "namespace": "research", "name": f"train-{i}", "tenant": "research",
            "flavor": "h100-80gb", "perPod": 8, "slots": 1, "ownerJob": None,
            "generation": 1, "replica": "gpugate-7d9c5b6f4-abcde",
            "at": 1764680000123 + i}


def stats(xs: list[float]) -> str:
    xs = sorted(xs)
    p90 = xs[int(0.9 * (len(xs) - 1))]
    return (f"median {statistics.median(xs):6.2f} ms  p90 {p90:6.2f} ms  "
            f"mean {statistics.fmean(xs):6.2f} ms")


def env_of(cluster_dir: Path) -> dict[str, str]:
    out = {}
    for line in (cluster_dir / "env").read_text().splitlines():
        if line.startswith("export "):
            k, _, v = line[len("export "):].partition("=")
            out[k] = v.strip("'\"")
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--gpugate", default=str(ROOT / "build" / "gpugate"))
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="gpugate-floors-") as tmp:
        cdir = Path(tmp) / "cluster"
        subprocess.run([str(CLUSTER), "up", str(cdir)], check=True,
                       stdout=subprocess.DEVNULL)
        srv = None
        try:
            env = env_of(cdir)
            pki = cdir / "pki"
            ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
            ctx.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
            api = http.client.HTTPSConnection("127.0.0.1", int(env["APISERVER_PORT"]),
                                              context=ctx)
            hdr = {"Content-Type": "application/json", "Accept": "application/json"}
            recs = [record(i) for i in range(50)]
            cm = {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": NAME, "namespace": NS},
                  "data": {"reservations": json.dumps(recs)}}
            api.request("POST", f"/api/v1/namespaces/{NS}/configmaps", json.dumps(cm), hdr)
            r = api.getresponse()
            cur = json.loads(r.read())
            assert r.status == 201, cur
            path = f"/api/v1/namespaces/{NS}/configmaps/{NAME}"

            def put(obj: dict, n: int) -> dict:
                data = json.loads(obj["data"]["reservations"])
                data[-1] = record(1000 + n)
                obj["data"]["reservations"] = json.dumps(data)
                api.request("PUT", path, json.dumps(obj), hdr)
                r = api.getresponse()
                body = json.loads(r.read())
                assert r.status == 200, body
                return body

            getput, putonly = [], []
            for n in range(args.rounds):
                t = time.perf_counter()
                api.request("GET", path, headers=hdr)
                r = api.getresponse()
                obj = json.loads(r.read())
                cur = put(obj, n)
                getput.append((time.perf_counter() - t) * 1000)
            for n in range(args.rounds):
                t = time.perf_counter()
                cur = put(cur, n)
                putonly.append((time.perf_counter() - t) * 1000)

            # Another replica's HTTPS server: gpugate serve on the cluster.
            certs = Path(tmp) / "certs"
            subprocess.run([args.gpugate, "certs", "--out", str(certs), "--ip", "127.0.0.1"],
                           check=True, stdout=subprocess.DEVNULL)
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            srv = subprocess.Popen(
                [args.gpugate, "serve", "--policy",
                 str(ROOT / "policy" / "examples" / "gpu-cluster.yaml"),
                 "--tls-cert", str(certs / "tls.crt"), "--tls-key", str(certs / "tls.key"),
                 "--listen", f"127.0.0.1:{port}",
                 "--kubeconfig", str(cdir / "admin.kubeconfig")],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            gctx = ssl.create_default_context(cafile=str(certs / "ca.crt"))
            deadline = time.monotonic() + 30
            while True:
                try:
                    g = http.client.HTTPSConnection("127.0.0.1", port, context=gctx)
                    g.request("GET", "/healthz")
                    if g.getresponse().status == 200:
                        break
                except OSError:
                    pass
                if time.monotonic() > deadline or srv.poll() is not None:
                    raise SystemExit("gpugate serve did not start")
                time.sleep(0.2)
            g = http.client.HTTPSConnection("127.0.0.1", port, context=gctx)
            fwd = []
            for _ in range(args.rounds):
                t = time.perf_counter()
                g.request("GET", "/healthz")
                r = g.getresponse()
                r.read()
                fwd.append((time.perf_counter() - t) * 1000)

            print(f"replica floors, {args.rounds} sequential requests each, one kept-alive "
                  f"TLS connection each")
            print(f"  get+put (shared store today)  {stats(getput)}")
            print(f"  put     (way B's floor)       {stats(putonly)}")
            print(f"  forward (way A's floor)       {stats(fwd)}")
        finally:
            if srv:
                srv.terminate()
                srv.wait(timeout=10)
            subprocess.run([str(CLUSTER), "down", str(cdir)], stdout=subprocess.DEVNULL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
