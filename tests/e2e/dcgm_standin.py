"""A stand-in for NVIDIA's dcgm-exporter in its Kubernetes mode, for the
idle GPU tests (test_idle.py, issue #31): GET /metrics serves the two
utilization fields gpugate reads, per GPU, labelled the way the exporter
labels a GPU that a pod holds, with values the test sets per pod.

What is copied from the exporter (github.com/NVIDIA/dcgm-exporter, release
4.5.3-4.8.2, read there, not guessed):

- the metric names and HELP texts: etc/default-counters.csv,
  `DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization (in %).` and
  `DCGM_FI_PROF_GR_ENGINE_ACTIVE, gauge, Ratio of time the graphics engine
  is active.` (a percent 0..100, and a ratio 0..1);
- the device labels: internal/pkg/rendermetrics/render_metrics.go, the
  template gpuMetricsFormat: gpu, UUID, pci_bus_id, device, modelName, then
  Hostname (renamed `hostname` on the exporter's main branch after that
  release, commit d5e5f51, #655); device is "nvidia<N>"
  (internal/pkg/collector/gpu_collector.go);
- the pod labels: internal/pkg/transformation/const.go, podAttribute
  "pod", namespaceAttribute "namespace", containerAttribute "container",
  uidAttribute "pod_uid" (kubernetes.go sets the four on each series of a
  device a pod holds; the old names pod_name, pod_namespace,
  container_name only with the exporter's old-names switch).  A GPU that
  no pod holds is served without them.

Values, per (namespace, pod): one per device the pod holds, and which of
the two fields the "exporter" serves for it (both, or only
DCGM_FI_DEV_GPU_UTIL, as on a node without the profiling module; the
percent is the ratio times 100).  Set from the test (set/drop, thread
safe) or over HTTP: PUT /pods/<ns>/<pod> with {"values": [0.01, ...],
"fields": "both"|"util", "node": "...", "uid": "..."}, DELETE
/pods/<ns>/<pod>.

Run alone (python3 tests/e2e/dcgm_standin.py [PORT]) it prints its URL
and serves until interrupted.
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PROF = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
UTIL = "DCGM_FI_DEV_GPU_UTIL"
HELP = {
    UTIL: "GPU utilization (in %).",
    PROF: "Ratio of time the graphics engine is active.",
}
MODEL = "NVIDIA L40S"


@dataclass
class Holder:
    """A pod's devices, as the exporter sees them on one node."""
    namespace: str
    pod: str
    values: list[float]          # 0..1 per device
    fields: str = "both"         # "both" or "util"
    node: str = "gpu-node"
    container: str = "trainer"
    uid: str = ""
    first_gpu: int = 0           # the index of its first device on the node


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _uuid(node: str, gpu: int) -> str:
    h = hashlib.sha1(f"{node}/{gpu}".encode()).hexdigest()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


@dataclass
class Standin:
    """The exporter's state: the pods it maps, and free GPUs per node."""
    holders: dict[tuple[str, str], Holder] = field(default_factory=dict)
    free: dict[str, int] = field(default_factory=dict)  # node -> free GPUs served
    lock: threading.Lock = field(default_factory=threading.Lock)
    scrapes: int = 0

    def set(self, namespace: str, pod: str, values: list[float], *, fields: str = "both",
            node: str = "gpu-node", uid: str = "", container: str = "trainer") -> None:
        assert fields in ("both", "util"), fields
        assert values and all(0.0 <= v <= 1.0 for v in values), values
        with self.lock:
            old = self.holders.get((namespace, pod))
            first = old.first_gpu if old and old.node == node else self._next_gpu(node)
            self.holders[(namespace, pod)] = Holder(namespace, pod, list(values), fields,
                                                    node, container, uid, first)

    def drop(self, namespace: str, pod: str) -> None:
        with self.lock:
            self.holders.pop((namespace, pod), None)

    def _next_gpu(self, node: str) -> int:
        used = [h.first_gpu + len(h.values) for h in self.holders.values() if h.node == node]
        return max(used, default=0)

    def render(self) -> str:
        """The /metrics body, in the exporter's order: per field its HELP
        and TYPE, then one series per device."""
        with self.lock:
            self.scrapes += 1
            holders = sorted(self.holders.values(), key=lambda h: (h.node, h.first_gpu))
            free = dict(self.free)
        out = []
        for name in (UTIL, PROF):
            out.append(f"# HELP {name} {HELP[name]}")
            out.append(f"# TYPE {name} gauge")
            for h in holders:
                if name == PROF and h.fields != "both":
                    continue
                for i, v in enumerate(h.values):
                    out.append(self._line(name, h.node, h.first_gpu + i, v, h))
            for node, n in sorted(free.items()):
                base = max([h.first_gpu + len(h.values) for h in holders if h.node == node],
                           default=0)
                for i in range(n):
                    out.append(self._line(name, node, base + i, 0.0, None))
        return "\n".join(out) + "\n"

    @staticmethod
    def _line(name: str, node: str, gpu: int, ratio: float, h: Holder | None) -> str:
        value = ratio * 100 if name == UTIL else ratio
        labels = [("gpu", str(gpu)), ("UUID", _uuid(node, gpu)),
                  ("pci_bus_id", f"00000000:{0x17 + gpu:02X}:00.0"),
                  ("device", f"nvidia{gpu}"), ("modelName", MODEL), ("Hostname", node)]
        if h is not None:
            # The template writes the attributes in Go's map order (sorted).
            labels += [("container", h.container), ("namespace", h.namespace),
                       ("pod", h.pod), ("pod_uid", h.uid)]
        body = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
        # As the exporter prints them (gpu_collector.go toString): an int64
        # field (the percent) with %d, a double (the ratio) with %f.
        text = f"{int(round(value))}" if name == UTIL else f"{value:f}"
        return f"{name}{{{body}}} {text}"


class _Handler(BaseHTTPRequestHandler):
    standin: Standin  # set on the subclass

    def log_message(self, fmt, *args):  # quiet: Prometheus scrapes every second
        pass

    def _send(self, code: int, body: str, ctype: str = "text/plain; charset=utf-8") -> None:
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _pod(self) -> tuple[str, str] | None:
        parts = self.path.split("?")[0].strip("/").split("/")
        return (parts[1], parts[2]) if len(parts) == 3 and parts[0] == "pods" else None

    def do_GET(self):
        if self.path.split("?")[0] == "/metrics":
            self._send(200, self.standin.render(), "text/plain; version=0.0.4; charset=utf-8")
        else:
            self._send(404, "not found\n")

    def do_PUT(self):
        key = self._pod()
        if not key:
            return self._send(404, "PUT /pods/<namespace>/<pod>\n")
        try:
            doc = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            self.standin.set(*key, [float(v) for v in doc["values"]],
                             fields=doc.get("fields", "both"),
                             node=doc.get("node", "gpu-node"), uid=doc.get("uid", ""))
        except (ValueError, KeyError, TypeError, AssertionError) as e:
            return self._send(400, f"{e!r}\n")
        self._send(204, "")

    def do_DELETE(self):
        key = self._pod()
        if not key:
            return self._send(404, "DELETE /pods/<namespace>/<pod>\n")
        self.standin.drop(*key)
        self._send(204, "")


class Server:
    """The stand-in served on 127.0.0.1:port (0: a free one) in a thread."""

    def __init__(self, standin: Standin | None = None, port: int = 0):
        self.standin = standin or Standin()
        handler = type("Handler", (_Handler,), {"standin": self.standin})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True,
                                       name="dcgm-standin")

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> "Server":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)


if __name__ == "__main__":
    s = Server(port=int(sys.argv[1]) if len(sys.argv) > 1 else 0).start()
    print(f"http://{s.target}/metrics", flush=True)
    try:
        s.thread.join()
    except KeyboardInterrupt:
        s.stop()
