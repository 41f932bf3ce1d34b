"""A small fake of a Prometheus server's instant query API, for the tests
of the idle controller (controllers/idle.c, tests/integration/test_idle.py).

It serves GET /api/v1/query?query=Q&time=T as Prometheus does, a vector
keyed by the DCGM exporter's `namespace` and `pod` labels, and answers
each of the queries of policy/idle.c idle_query_text() from what a test
set per pod and per metric:

    peak     max_over_time(...)                       IDLE_Q_PEAK
    first    min_over_time(timestamp(...))            IDLE_Q_FIRST (Unix s)
    recent   avg_over_time(...[Ns]) with N != 3600    IDLE_Q_RECENT (metering)
    hour     avg_over_time(...[3600s])                IDLE_Q_RECENT (the share)

The metric is told by the query's text (DCGM_FI_PROF_GR_ENGINE_ACTIVE or
DCGM_FI_DEV_GPU_UTIL); the values are the ratios the queries compute (the
UTIL query divides by 100 itself, so a test gives a ratio for both).

A test scripts failures (`fail`: a status and body, garbage, or a delay)
and reads the queries it was sent (`queries`, `asked`).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

PROF = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
UTIL = "DCGM_FI_DEV_GPU_UTIL"
KINDS = ("peak", "first", "recent", "hour")


@dataclass
class Query:
    text: str
    time: float | None
    metric: str
    kind: str


@dataclass
class _Fault:
    status: int = 200
    body: bytes | None = None
    delay: float = 0.0


@dataclass
class FakeProm:
    server: ThreadingHTTPServer | None = None
    # metric -> (namespace, pod) -> kind -> value
    series: dict[str, dict[tuple[str, str], dict[str, float]]] = field(
        default_factory=lambda: {PROF: {}, UTIL: {}})
    queries: list[Query] = field(default_factory=list)
    fault: _Fault | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    # -- what the test scripts -------------------------------------------

    def pod(self, namespace: str, pod: str, *, metric: str = PROF, peak: float | None = None,
            first: float | None = None, recent: float | None = None,
            hour: float | None = None) -> None:
        """Sets (a value) or leaves (None) each answer for one pod.  first
        is a Unix time: where the pod's data starts."""
        with self.lock:
            s = self.series[metric].setdefault((namespace, pod), {})
            for k, v in (("peak", peak), ("first", first), ("recent", recent),
                         ("hour", hour)):
                if v is not None:
                    s[k] = v

    def idle(self, namespace: str, pod: str, *, level: float = 0.01, since: float = 7200,
             metric: str = PROF) -> None:
        """The pod's GPUs at `level` for the last `since` seconds."""
        self.pod(namespace, pod, metric=metric, peak=level, first=time.time() - since,
                 recent=level, hour=level)

    def forget(self, namespace: str, pod: str) -> None:
        with self.lock:
            for m in self.series.values():
                m.pop((namespace, pod), None)

    def fail(self, status: int = 503, body: bytes | str | None = None,
             delay: float = 0.0) -> None:
        """Every answer from now: status with body (default Prometheus'
        error JSON), after delay seconds; status 200 with a body is
        garbage of the test's choosing."""
        if isinstance(body, str):
            body = body.encode()
        if body is None and status != 200:
            body = json.dumps({"status": "error", "errorType": "unavailable",
                               "error": "scripted failure"}).encode()
        with self.lock:
            self.fault = _Fault(status, body, delay)

    def heal(self) -> None:
        with self.lock:
            self.fault = None

    def asked(self, metric: str | None = None, kind: str | None = None) -> list[Query]:
        with self.lock:
            return [q for q in self.queries
                    if (metric is None or q.metric == metric)
                    and (kind is None or q.kind == kind)]

    # -- serving ------------------------------------------------------------

    def answer(self, text: str, at: float | None) -> tuple[int, bytes, float]:
        metric = PROF if PROF in text else UTIL if UTIL in text else ""
        if text.startswith("max_over_time"):
            kind = "peak"
        elif text.startswith("min_over_time(timestamp"):
            kind = "first"
        elif "[3600s]" in text:
            kind = "hour"
        else:
            kind = "recent"
        with self.lock:
            self.queries.append(Query(text, at, metric, kind))
            f = self.fault
            if f is not None:
                return f.status, f.body or b"", f.delay
            now = at if at is not None else time.time()
            result = [{"metric": {"namespace": ns, "pod": pod},
                       "value": [now, repr(float(v[kind]))]}
                      for (ns, pod), v in sorted(self.series.get(metric, {}).items())
                      if kind in v]
        return 200, json.dumps({"status": "success", "data": {
            "resultType": "vector", "result": result}}).encode(), 0.0


class _Handler(BaseHTTPRequestHandler):
    prom: FakeProm

    def log_message(self, *args):  # quiet
        pass

    def do_GET(self):
        u = urlparse(self.path)
        if u.path != "/api/v1/query":
            self._send(404, b'{"status":"error","error":"not found"}')
            return
        q = parse_qs(u.query)
        text = (q.get("query") or [""])[0]
        at = float(q["time"][0]) if q.get("time") else None
        status, body, delay = self.server.prom.answer(text, at)  # type: ignore[attr-defined]
        if delay:
            time.sleep(delay)
        self._send(status, body)

    def _send(self, status: int, body: bytes) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass


def start() -> FakeProm:
    fp = FakeProm()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.daemon_threads = True
    srv.prom = fp  # type: ignore[attr-defined]
    fp.server = srv
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return fp


def stop(fp: FakeProm) -> None:
    if fp.server is not None:
        fp.server.shutdown()
        fp.server.server_close()
