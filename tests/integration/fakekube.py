"""A small scriptable fake of the Kubernetes API, over HTTPS, for the tests of
gpugate's list and watch (kube/informer.c and kube/feed.c,
tests/integration/test_watch.py).

It serves what gpugate asks for and nothing else:

    GET /api/v1/pods             and  GET /apis/batch/v1/jobs
        ?labelSelector=KEY           objects that carry label KEY
        &limit=N&continue=TOKEN      pages (a page may be shorter: page_size)
        &watch=1&resourceVersion=RV  a chunked stream of newline-delimited
                                     events after RV: ADDED, MODIFIED,
                                     DELETED, BOOKMARK, ERROR (410 when RV is
                                     older than the last compaction)

Resource versions are one counter for both kinds, as in etcd.  A test
scripts it: objects put in place without events (`put`, `remove`), events
(`event`, `bookmark`, `expire`: an ERROR 410 on the open watches), faults
(`fail_lists`, `hang_lists`, `fail_watches`, `hang_watches`, `drop`), and
reads back every request gpugate made (`requests`).  Every request must
carry the bearer token of the kubeconfig it writes (`kubeconfig`), else 401.

Python 3.11 standard library only; the serving certificate is the one of
the `certs` fixture (`gpugate certs`, valid for 127.0.0.1).
"""

from __future__ import annotations

import base64
import json
import socket
import ssl
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

TOKEN = "fake-kube-token"
SELECTOR_KEY = "gpugate.io/tenant"


@dataclass
class Request:
    """One GET the fake received."""
    kind: str             # "pods", "jobs", or "" for any other path
    path: str
    query: dict[str, str]
    at: float             # time.monotonic()

    @property
    def watch(self) -> bool:
        return self.query.get("watch") in ("1", "true")


@dataclass
class _Resource:
    kind: str                            # "pods" / "jobs"
    path: str
    list_kind: str
    obj_kind: str
    api_version: str
    objects: dict[str, dict] = field(default_factory=dict)   # uid -> object
    history: list[tuple[int, dict]] = field(default_factory=list)
    compacted: int = 0                   # watches from before this get 410
    page_size: int | None = None         # server-side cap on a page
    list_status: int | None = None       # fail lists with this status
    list_failures: int | None = None     # ... this many times (None: until cleared)
    list_hang: bool = False
    watch_status: int | None = None
    watch_hang: bool = False
    drop_generation: int = 0
    open_watches: int = 0


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, fake: "FakeKube", context: ssl.SSLContext):
        self.fake = fake
        self.context = context
        super().__init__(("127.0.0.1", 0), _Handler)

    def finish_request(self, request, client_address):
        # The TLS handshake happens in the request's own thread: a client
        # that stalls it never blocks the accept loop.
        try:
            tls = self.context.wrap_socket(request, server_side=True)
        except (OSError, ssl.SSLError):
            return
        try:
            self.RequestHandlerClass(tls, client_address, self)
        except (OSError, ssl.SSLError):
            pass
        finally:
            try:
                tls.close()
            except OSError:
                pass

    def handle_error(self, request, client_address):
        pass  # a client that went away is no test failure


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, fmt, *args):
        pass

    def do_GET(self):
        self.server.fake._serve(self)


class FakeKube:
    def __init__(self, ca: Path, cert: Path, key: Path, workdir: Path):
        self.ca = Path(ca)
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(cert), str(key))
        self._cond = threading.Condition()
        self._rv = 1000
        self._stopping = False
        self._requests: list[Request] = []
        self._res = {
            "pods": _Resource("pods", "/api/v1/pods", "PodList", "Pod", "v1"),
            "jobs": _Resource("jobs", "/apis/batch/v1/jobs", "JobList", "Job",
                              "batch/v1"),
        }
        self._by_path = {r.path: r for r in self._res.values()}
        self._httpd = _Server(self, ctx)
        self.port = self._httpd.server_address[1]
        self.url = f"https://127.0.0.1:{self.port}"
        self.kubeconfig = self.workdir / "kubeconfig"
        self._write_kubeconfig()
        self._thread: threading.Thread | None = None

    # -- lifecycle --

    def start(self) -> "FakeKube":
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.1}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._httpd.shutdown()
        self._httpd.server_close()

    def _write_kubeconfig(self) -> None:
        ca = base64.b64encode(self.ca.read_bytes()).decode()
        self.kubeconfig.write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: fake\n"
            "clusters:\n"
            f"- name: fake\n  cluster:\n    server: {self.url}\n"
            f"    certificate-authority-data: {ca}\n"
            "users:\n"
            f"- name: gpugate\n  user:\n    token: {TOKEN}\n"
            "contexts:\n"
            "- name: fake\n  context: {cluster: fake, user: gpugate}\n")

    # -- the state a test scripts --

    def _next_rv(self) -> int:
        self._rv += 1
        return self._rv

    @property
    def resource_version(self) -> int:
        with self._cond:
            return self._rv

    def put(self, kind: str, *objs: dict) -> None:
        """Objects as a list shows them, without a watch event (what was
        there before gpugate started, or what changed while nobody
        watched)."""
        with self._cond:
            for obj in objs:
                obj["metadata"]["resourceVersion"] = str(self._next_rv())
                self._res[kind].objects[obj["metadata"]["uid"]] = obj

    def remove(self, kind: str, uid: str) -> None:
        """Deletes an object without a watch event."""
        with self._cond:
            self._res[kind].objects.pop(uid, None)

    def event(self, kind: str, type_: str, obj: dict) -> int:
        """ADDED, MODIFIED or DELETED: updates the store, streams the event
        to open watches (and to later ones from an older version).  Returns
        its resourceVersion."""
        with self._cond:
            r = self._res[kind]
            rv = self._next_rv()
            obj = json.loads(json.dumps(obj))
            obj["metadata"]["resourceVersion"] = str(rv)
            if type_ == "DELETED":
                r.objects.pop(obj["metadata"]["uid"], None)
            else:
                r.objects[obj["metadata"]["uid"]] = obj
            r.history.append((rv, {"type": type_, "object": obj}))
            self._cond.notify_all()
            return rv

    def bookmark(self, kind: str, jump: int = 100) -> int:
        """A BOOKMARK `jump` versions ahead (other resources moved on);
        returns its resourceVersion."""
        with self._cond:
            r = self._res[kind]
            self._rv += jump
            rv = self._rv
            r.history.append((rv, {"type": "BOOKMARK", "object": {
                "kind": r.obj_kind, "apiVersion": r.api_version,
                "metadata": {"resourceVersion": str(rv)}}}))
            self._cond.notify_all()
            return rv

    def compact(self, kind: str) -> int:
        """Forgets history: a watch from an older version gets 410."""
        with self._cond:
            r = self._res[kind]
            r.compacted = self._next_rv()
            r.history.clear()
            return r.compacted

    def expire(self, kind: str) -> int:
        """Compacts, and ends the open watches with ERROR 410 (Expired)."""
        with self._cond:
            rv = self.compact(kind)
            self._res[kind].history.append((rv, _status_event(410, "Expired",
                                                              "too old resource version")))
            self._cond.notify_all()
            return rv

    def drop(self, kind: str) -> None:
        """Cuts the open watch connections (no end of stream)."""
        with self._cond:
            self._res[kind].drop_generation += 1
            self._cond.notify_all()

    def page_size(self, kind: str, n: int | None) -> None:
        with self._cond:
            self._res[kind].page_size = n

    def fail_lists(self, kind: str, status: int | None, times: int | None = None) -> None:
        """Lists answer `status` (None: stop failing), `times` times or
        until changed."""
        with self._cond:
            self._res[kind].list_status = status
            self._res[kind].list_failures = times

    def hang_lists(self, kind: str, on: bool) -> None:
        """Lists get no answer until turned off (then they are served)."""
        with self._cond:
            self._res[kind].list_hang = on
            self._cond.notify_all()

    def fail_watches(self, kind: str, status: int | None) -> None:
        with self._cond:
            self._res[kind].watch_status = status

    def hang_watches(self, kind: str, on: bool) -> None:
        """Watches get no response headers until turned off."""
        with self._cond:
            self._res[kind].watch_hang = on
            self._cond.notify_all()

    def open_watches(self, kind: str) -> int:
        with self._cond:
            return self._res[kind].open_watches

    # -- what gpugate asked --

    def requests(self, kind: str | None = None, watch: bool | None = None) -> list[Request]:
        with self._cond:
            return [q for q in self._requests
                    if (kind is None or q.kind == kind) and
                    (watch is None or q.watch == watch)]

    # -- serving --

    def _serve(self, h: _Handler) -> None:
        u = urlsplit(h.path)
        query = {k: v[-1] for k, v in parse_qs(u.query, keep_blank_values=True).items()}
        r = self._by_path.get(u.path)
        req = Request(r.kind if r else "", u.path, query, time.monotonic())
        with self._cond:
            self._requests.append(req)
        if h.headers.get("Authorization") != f"Bearer {TOKEN}":
            _send_json(h, 401, _status(401, "Unauthorized", "Unauthorized"))
            return
        if r is None:
            _send_json(h, 404, _status(404, "NotFound", "the server could not "
                                       "find the requested resource"))
            return
        if req.watch:
            self._watch(h, r, query)
        else:
            self._list(h, r, query)

    def _held(self, hang) -> bool:
        """With the lock: waits while hang() says so; False when the fake
        is stopping (the request then gets no answer)."""
        while hang() and not self._stopping:
            self._cond.wait(0.2)
        return not self._stopping

    def _selected(self, r: _Resource, query: dict[str, str]) -> list[dict]:
        sel = query.get("labelSelector")
        objs = list(r.objects.values())
        if sel:
            assert sel == SELECTOR_KEY, f"fake kube: unsupported selector {sel!r}"
            objs = [o for o in objs if sel in (o["metadata"].get("labels") or {})]
        return objs

    def _list(self, h: _Handler, r: _Resource, query: dict[str, str]) -> None:
        with self._cond:
            if not self._held(lambda: r.list_hang):
                return
            if r.list_status is not None:
                status = r.list_status
                if r.list_failures is not None:
                    r.list_failures -= 1
                    if r.list_failures <= 0:
                        r.list_status = r.list_failures = None
                body = _status(status, "InternalError", "scripted failure")
            else:
                status = 200
                body = self._page(r, query)
        _send_json(h, status, body)

    def _page(self, r: _Resource, query: dict[str, str]) -> dict:
        cont = query.get("continue")
        if cont:
            offset, rv = (int(x) for x in base64.b64decode(cont).decode().split(":"))
        else:
            offset, rv = 0, self._rv
        objs = self._selected(r, query)
        n = int(query["limit"]) if query.get("limit") else len(objs)
        if r.page_size:
            n = min(n, r.page_size)
        items = objs[offset:offset + n]
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if offset + n < len(objs):
            meta["continue"] = base64.b64encode(f"{offset + n}:{rv}".encode()).decode()
            meta["remainingItemCount"] = len(objs) - offset - n
        return {"kind": r.list_kind, "apiVersion": r.api_version, "metadata": meta,
                "items": items}

    def _watch(self, h: _Handler, r: _Resource, query: dict[str, str]) -> None:
        since = int(query.get("resourceVersion") or 0)
        timeout = float(query.get("timeoutSeconds") or 1800)
        with self._cond:
            if not self._held(lambda: r.watch_hang):
                return
            if r.watch_status is not None:
                status = r.watch_status
            else:
                status = 200
                gone = since < r.compacted
                generation = r.drop_generation
                r.open_watches += 1
        if status != 200:
            _send_json(h, status, _status(status, "InternalError", "scripted failure"))
            return
        try:
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            h.send_header("Transfer-Encoding", "chunked")
            h.end_headers()
            h.wfile.flush()
            if gone:
                _chunk(h, _status_event(410, "Expired", "too old resource version"))
                _end(h)
                return
            self._stream(h, r, since, generation, time.monotonic() + timeout)
        except (OSError, ssl.SSLError):
            pass
        finally:
            with self._cond:
                r.open_watches -= 1

    def _stream(self, h: _Handler, r: _Resource, sent: int, generation: int,
                deadline: float) -> None:
        """Events after version `sent`, as they come."""
        while True:
            with self._cond:
                while (not any(rv > sent for rv, _ in r.history)
                       and r.drop_generation == generation
                       and not self._stopping and time.monotonic() < deadline):
                    self._cond.wait(0.2)
                pending = [ev for rv, ev in r.history if rv > sent]
                sent = max([sent] + [rv for rv, _ in r.history])
                dropped = r.drop_generation != generation
                stopping = self._stopping
            for ev in pending:
                _chunk(h, ev)
                if ev["type"] == "ERROR":
                    _end(h)
                    return
            if dropped or stopping:
                # Cut the connection: what was written arrives, then EOF in
                # the middle of the chunked body.
                h.connection.shutdown(socket.SHUT_RDWR)
                h.close_connection = True
                return
            if time.monotonic() >= deadline:
                _end(h)
                return


def _status(code: int, reason: str, message: str) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


def _status_event(code: int, reason: str, message: str) -> dict:
    return {"type": "ERROR", "object": _status(code, reason, message)}


def _send_json(h: _Handler, status: int, body: dict) -> None:
    data = json.dumps(body).encode()
    try:
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)
        h.wfile.flush()
    except (OSError, ssl.SSLError):
        pass


def _chunk(h: _Handler, ev: dict) -> None:
    data = json.dumps(ev).encode() + b"\n"
    h.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
    h.wfile.flush()


def _end(h: _Handler) -> None:
    h.wfile.write(b"0\r\n\r\n")
    h.wfile.flush()
    h.close_connection = True


# ---------------------------------------------------------------------------
# objects as the API returns them

H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}


def api_pod(name: str, namespace: str, gpus: int, *, uid: str | None = None,
            phase: str = "Running", owner_job_uid: str | None = None,
            tenant: str | None = None) -> dict:
    """A Pod gpugate stamped, as the API shows it: GPU limit, the flavor's
    node selector, a phase."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace,
                            "uid": uid or f"uid-pod-{namespace}-{name}",
                            "labels": {SELECTOR_KEY: tenant or namespace}}
    if owner_job_uid:
        meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job",
                                    "name": "job", "uid": owner_job_uid,
                                    "controller": True}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"nodeSelector": dict(H100), "containers": [
                {"name": "main", "image": "x",
                 "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]},
            "status": {"phase": phase}}


def api_job(name: str, namespace: str, parallelism: int, gpus: int, *,
            uid: str | None = None, condition: str | None = None,
            tenant: str | None = None) -> dict:
    """A Job gpugate stamped; `condition` "Complete" or "Failed" finishes it."""
    status: dict[str, Any] = {"active": parallelism}
    if condition:
        status = {"conditions": [{"type": condition, "status": "True"}]}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace,
                         "uid": uid or f"uid-job-{namespace}-{name}",
                         "labels": {SELECTOR_KEY: tenant or namespace}},
            "spec": {"parallelism": parallelism, "completions": parallelism,
                     "template": {"spec": {
                         "restartPolicy": "Never", "nodeSelector": dict(H100),
                         "containers": [{"name": "main", "image": "x", "resources": {
                             "limits": {"nvidia.com/gpu": str(gpus)}}}]}}},
            "status": status}
