"""A small scriptable fake of the Kubernetes API, over HTTPS, for the tests of
gpugate's list and watch (kube/informer.c and kube/feed.c,
tests/integration/test_watch.py).

It serves what gpugate asks for and nothing else:

    GET /api/v1/pods, GET /apis/batch/v1/jobs
    and GET /apis/resource.k8s.io/v1/resourceclaims (404 while `serve`d off)
        ?labelSelector=KEY           objects that carry label KEY
        &limit=N&continue=TOKEN      pages (a page may be shorter: page_size)
        &watch=1&resourceVersion=RV  a chunked stream of newline-delimited
                                     events after RV: ADDED, MODIFIED,
                                     DELETED, BOOKMARK, ERROR (410 when RV is
                                     older than the last compaction)

and, for the tests of the API client's write verbs (kube/client.c), a store
of namespaced ConfigMaps and Leases with GET, POST, PUT, PATCH and DELETE
(the "objects" section below; as a program, `python3 fakekube.py --ca ...`,
see _main at the end).

Resource versions are one counter for all kinds, as in etcd.  A test
scripts it: objects put in place without events (`put`, `remove`), events
(`event`, `bookmark`, `expire`: an ERROR 410 on the open watches), faults
(`fail_lists`, `hang_lists`, `fail_watches`, `hang_watches`, `drop`,
`serve`: a resource the API does not serve), and reads back every request
gpugate made (`requests`).  A test that is not Python scripts `serve` and
`event` through POST /_fake/served and /_fake/events (see _control).  Every request must
carry the bearer token of the kubeconfig it writes (`kubeconfig`), else 401.

Python 3.11 standard library only; the serving certificate is the one of
the `certs` fixture (`gpugate certs`, valid for 127.0.0.1).
"""

from __future__ import annotations

import base64
import copy
import datetime
import json
import re
import socket
import ssl
import sys
import threading
import time
import uuid
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
    kind: str             # "pods", "jobs", "claims", or "" for any other path
    path: str
    query: dict[str, str]
    at: float             # time.monotonic()

    @property
    def watch(self) -> bool:
        return self.query.get("watch") in ("1", "true")


@dataclass
class _Resource:
    kind: str                            # "pods" / "jobs" / "claims"
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
    served: bool = True                  # False: 404, as an API without it


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

    # The write verbs reach only the object store (see "objects" below).
    def do_POST(self):
        self.server.fake._serve(self)

    def do_PUT(self):
        self.server.fake._serve(self)

    def do_PATCH(self):
        self.server.fake._serve(self)

    def do_DELETE(self):
        self.server.fake._serve(self)


# ---------------------------------------------------------------------------
# objects: namespaced ConfigMaps and Leases with the write verbs, for the API
# client's tests (kube/client.c; tests/unit/kube/client_test.c starts this
# file as a program, see _main below)
#
#   /api/v1/namespaces/NS/configmaps[/NAME]
#   /apis/coordination.k8s.io/v1/namespaces/NS/leases[/NAME]
#
#   GET     one object (404 NotFound), or the collection as a list
#   POST    to the collection: 201 with uid, resourceVersion and
#           creationTimestamp set; 409 AlreadyExists when the name is taken;
#           500 when the object carries a resourceVersion (as etcd3 storage)
#   PUT     404 when absent; 409 Conflict when metadata.resourceVersion is
#           set and stale (or metadata.uid differs); without a
#           resourceVersion the write is unconditional (ConfigMaps and
#           Leases allow that)
#   PATCH   merge patch (strategic is taken as merge: these kinds hold maps)
#           or JSON patch; a merge patch's metadata.resourceVersion is a
#           precondition (409 Conflict when stale)
#   DELETE  with an optional DeleteOptions body whose preconditions (uid,
#           then resourceVersion) must hold, else 409 Conflict
#
# Every write takes a new resourceVersion from the one counter.  Status
# bodies are shaped and worded as the apiserver's (k8s.io/apimachinery
# pkg/api/errors); a failed precondition's message leaves out the storage
# error the apiserver wraps around it.
#
# Faults (`fault()`; from a test that is not Python, POST /_fake/faults with
# the same fields as JSON, DELETE /_fake/faults to clear): the next matching
# requests are delayed, answered with a status, or cut before or after they
# are applied.  GET /_fake/stats counts object requests by verb and by verb
# and status ("PUT 409").

_OBJECT_ROUTES = (
    # (path pattern, resource, group, kind, apiVersion)
    (re.compile(r"^/api/v1/namespaces/([^/]+)/configmaps(?:/([^/]+))?$"),
     "configmaps", "", "ConfigMap", "v1"),
    (re.compile(r"^/apis/coordination\.k8s\.io/v1/namespaces/([^/]+)/leases(?:/([^/]+))?$"),
     "leases", "coordination.k8s.io", "Lease", "coordination.k8s.io/v1"),
)

_CONFLICT = ("the object has been modified; please apply your changes to the "
             "latest version and try again")


@dataclass
class Fault:
    """What happens to the next object requests that match."""
    method: str | None = None       # None: any verb
    path: str | None = None         # a path prefix; None: any object path
    status: int | None = None       # answer this Status instead
    reason: str | None = None       # its reason (default: from the status)
    message: str | None = None
    retry_after: int | None = None  # Retry-After and details.retryAfterSeconds
    delay: float = 0.0              # seconds before the request is handled
    drop: str | None = None         # "before": cut, nothing applied;
                                    # "after": applied, then cut
    times: int | None = None        # None: until cleared


_REASONS = {400: "BadRequest", 404: "NotFound", 409: "Conflict", 410: "Expired",
            415: "UnsupportedMediaType", 422: "Invalid",
            429: "TooManyRequests", 500: "InternalError",
            503: "ServiceUnavailable", 504: "Timeout"}


def _object_status(code: int, reason: str, message: str, **details: Any) -> dict:
    st = _status(code, reason, message)
    if details:
        st["details"] = details
    return st


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = _merge_patch(out.get(k), v)
    return out


def _cut(h: _Handler) -> None:
    """Ends the connection without an answer."""
    try:
        h.connection.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    h.close_connection = True


class _Objects:
    """The object store, mixed into FakeKube (which owns the lock, the
    resourceVersion counter and the request log)."""

    def _objects_init(self) -> None:
        self._objects: dict[tuple[str, str, str], dict] = {}
        self._faults: list[Fault] = []
        self._stats: dict[str, int] = {}

    # -- the state a test scripts --

    def fault(self, **kw: Any) -> Fault:
        f = Fault(**kw)
        with self._cond:
            self._faults.append(f)
        return f

    def clear_faults(self) -> None:
        with self._cond:
            self._faults.clear()

    def object(self, resource: str, namespace: str, name: str) -> dict | None:
        with self._cond:
            o = self._objects.get((resource, namespace, name))
            return copy.deepcopy(o) if o else None

    def stats(self) -> dict[str, int]:
        with self._cond:
            return dict(self._stats)

    # -- serving --

    def _objects_serve(self, h: _Handler, path: str) -> bool:
        """Answers the request when it is for the store (or /_fake/);
        False when it is for another part of the fake."""
        if path.startswith("/_fake/"):
            h.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._control(h, path)
            return True
        for rx, *route in _OBJECT_ROUTES:
            m = rx.match(path)
            if m:
                break
        else:
            return False
        # Answers go out as two writes (headers, body): without this the
        # second waits for the client's delayed ACK, 40 ms a request.
        h.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        body = _read_body(h)
        if body is None:
            _send_json(h, 411, _object_status(411, "BadRequest", "length required"))
            h.close_connection = True
            return True
        f = self._take_fault(h.command, path)
        if f and f.delay:
            time.sleep(f.delay)
        if f and f.drop == "before":
            _cut(h)
            return True
        if f and f.status:
            status = f.status
            reason = f.reason or _REASONS.get(status, "InternalError")
            message = f.message or (f"Operation cannot be fulfilled: {_CONFLICT}"
                                    if status == 409 else "scripted failure")
            answer = _object_status(status, reason, message,
                                    **({"retryAfterSeconds": f.retry_after}
                                       if f.retry_after is not None else {}))
        else:
            ctype = (h.headers.get("Content-Type") or "").split(";")[0].strip()
            with self._cond:
                status, answer = self._object_do(h.command, tuple(route),
                                                 m.group(1), m.group(2), body, ctype)
        with self._cond:
            for key in (h.command, f"{h.command} {status}"):
                self._stats[key] = self._stats.get(key, 0) + 1
        if f and f.drop == "after":
            _cut(h)
            return True
        headers = {}
        if f and f.retry_after is not None:
            headers["Retry-After"] = str(f.retry_after)
        _send_json_headers(h, status, answer, headers)
        return True

    def _take_fault(self, method: str, path: str) -> Fault | None:
        with self._cond:
            for f in self._faults:
                if ((f.method is None or f.method == method) and
                        (f.path is None or path.startswith(f.path))):
                    if f.times is not None:
                        f.times -= 1
                        if f.times <= 0:
                            self._faults.remove(f)
                    return f
        return None

    def _control(self, h: _Handler, path: str) -> None:
        body = _read_body(h)
        if path == "/_fake/faults" and h.command == "POST":
            try:
                self.fault(**json.loads(body or b"{}"))
            except (TypeError, ValueError) as e:
                _send_json(h, 400, _object_status(400, "BadRequest", str(e)))
                return
            _send_json(h, 201, {})
        elif path == "/_fake/faults" and h.command == "DELETE":
            self.clear_faults()
            _send_json(h, 200, {})
        elif path == "/_fake/stats" and h.command == "GET":
            _send_json(h, 200, self.stats())
        elif path == "/_fake/served" and h.command == "POST":
            # {"kind": "claims", "served": false}
            try:
                req = json.loads(body or b"{}")
                self.serve(req["kind"], bool(req["served"]))
            except (KeyError, TypeError, ValueError) as e:
                _send_json(h, 400, _object_status(400, "BadRequest", str(e)))
                return
            _send_json(h, 200, {})
        elif path == "/_fake/events" and h.command == "POST":
            # {"kind": "claims", "type": "ADDED", "object": {...}}
            try:
                req = json.loads(body or b"{}")
                rv = self.event(req["kind"], req["type"], req["object"])
            except (KeyError, TypeError, ValueError) as e:
                _send_json(h, 400, _object_status(400, "BadRequest", str(e)))
                return
            _send_json(h, 201, {"resourceVersion": str(rv)})
        else:
            _send_json(h, 404, _object_status(404, "NotFound", f"no {h.command} {path}"))

    def _object_do(self, method: str, route: tuple, ns: str, name: str | None,
                   body: bytes, ctype: str) -> tuple[int, dict]:
        """With the lock: the verb on the store; (status, answer)."""
        resource, group, kind, api_version = route
        qualified = f"{resource}.{group}" if group else resource
        det = {"group": group, "kind": resource} if group else {"kind": resource}

        def not_found(n: str) -> tuple[int, dict]:
            return 404, _object_status(404, "NotFound", f'{qualified} "{n}" not found',
                                       name=n, **det)

        def conflict(n: str, why: str) -> tuple[int, dict]:
            return 409, _object_status(409, "Conflict", "Operation cannot be fulfilled "
                                       f'on {qualified} "{n}": {why}', name=n, **det)

        def bad(msg: str) -> tuple[int, dict]:
            return 400, _object_status(400, "BadRequest", msg)

        def parsed() -> Any:
            try:
                return json.loads(body) if body else None
            except ValueError as e:
                return e

        if name is None:
            if method == "GET":
                items = [copy.deepcopy(o) for (r, n, _), o in sorted(self._objects.items())
                         if r == resource and n == ns]
                return 200, {"kind": f"{kind}List", "apiVersion": api_version,
                             "metadata": {"resourceVersion": str(self._rv)}, "items": items}
            if method != "POST":
                return 405, _object_status(405, "MethodNotAllowed",
                                           f"{method} is not supported on a collection here")
            obj = parsed()
            if not isinstance(obj, dict):
                return bad(f"the body is not a JSON object: {obj}")
            meta = obj.setdefault("metadata", {})
            if not isinstance(meta, dict):
                return bad("metadata is not an object")
            new = meta.get("name")
            if not new and meta.get("generateName"):
                new = meta["generateName"] + uuid.uuid4().hex[:5]
            if not new:
                return 422, _object_status(422, "Invalid", f'{kind} "" is invalid: '
                                           "metadata.name: Required value: name or "
                                           "generateName is required", **det)
            if meta.get("namespace", ns) != ns:
                return bad("the namespace of the provided object does not match the "
                           "namespace sent on the request")
            if meta.get("resourceVersion"):
                return 500, _object_status(500, "InternalError", "Internal error "
                                           "occurred: resourceVersion should not be "
                                           "set on objects to be created")
            if (resource, ns, new) in self._objects:
                return 409, _object_status(409, "AlreadyExists",
                                           f'{qualified} "{new}" already exists',
                                           name=new, **det)
            meta.update(name=new, namespace=ns, uid=str(uuid.uuid4()),
                        resourceVersion=str(self._next_rv()),
                        creationTimestamp=datetime.datetime.now(datetime.timezone.utc)
                        .strftime("%Y-%m-%dT%H:%M:%SZ"))
            obj["apiVersion"], obj["kind"] = api_version, kind
            self._objects[(resource, ns, new)] = obj
            return 201, copy.deepcopy(obj)

        key = (resource, ns, name)
        cur = self._objects.get(key)
        if method == "POST":
            return 405, _object_status(405, "MethodNotAllowed",
                                       "POST is not supported on an object")
        if method not in ("GET", "PUT", "PATCH", "DELETE"):
            return 405, _object_status(405, "MethodNotAllowed", f"{method} is not supported")
        if cur is None:
            return not_found(name)
        cmeta = cur["metadata"]
        if method == "GET":
            return 200, copy.deepcopy(cur)
        if method == "DELETE":
            opts = parsed()
            if isinstance(opts, ValueError):
                return bad(f"the DeleteOptions are not JSON: {opts}")
            pre = (opts or {}).get("preconditions") or {}
            if pre.get("uid") is not None and pre["uid"] != cmeta["uid"]:
                return conflict(name, f"Precondition failed: UID in precondition: "
                                f"{pre['uid']}, UID in object meta: {cmeta['uid']}")
            if (pre.get("resourceVersion") is not None and
                    pre["resourceVersion"] != cmeta["resourceVersion"]):
                return conflict(name, "Precondition failed: ResourceVersion in "
                                f"precondition: {pre['resourceVersion']}, "
                                f"ResourceVersion in object meta: {cmeta['resourceVersion']}")
            del self._objects[key]
            self._next_rv()
            return 200, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                         "status": "Success",
                         "details": {"name": name, "uid": cmeta["uid"], **det}}
        doc = parsed()
        if isinstance(doc, ValueError):
            return bad(f"the body is not JSON: {doc}")
        if method == "PUT":
            new = doc
            if not isinstance(new, dict) or not isinstance(new.get("metadata"), dict):
                return bad("the body is not an object with metadata")
        elif ctype in ("application/merge-patch+json",
                       "application/strategic-merge-patch+json"):
            if not isinstance(doc, dict):
                return bad("a merge patch must be a JSON object")
            new = _merge_patch(cur, doc)
            # A resourceVersion in the patch is a precondition; without
            # one the patch applies to whatever is there.
            want = (doc.get("metadata") or {}).get("resourceVersion") \
                if isinstance(doc.get("metadata"), dict) else None
            new.setdefault("metadata", {})["resourceVersion"] = \
                want if want else cmeta["resourceVersion"]
        elif ctype == "application/json-patch+json":
            from jsonpatch_strict import PatchError, apply
            try:
                new = apply(cur, doc)
            except PatchError as e:
                return 422, _object_status(422, "Invalid", str(e), name=name, **det)
            if not isinstance(new, dict) or not isinstance(new.get("metadata"), dict):
                return 422, _object_status(422, "Invalid", "metadata is gone",
                                           name=name, **det)
        else:
            return 415, _object_status(415, "UnsupportedMediaType",
                                       f"the body of the request was in an unknown "
                                       f"format ({ctype or 'no Content-Type'}) - accepted "
                                       "media types include: application/json-patch+json, "
                                       "application/merge-patch+json")
        meta = new["metadata"]
        if meta.get("name", name) != name:
            return bad(f"the name of the object ({meta.get('name')}) does not match "
                       f"the name on the URL ({name})")
        if meta.get("namespace", ns) != ns:
            return bad("the namespace of the provided object does not match the "
                       "namespace sent on the request")
        if meta.get("uid") and meta["uid"] != cmeta["uid"]:
            return conflict(name, f"Precondition failed: UID in precondition: "
                            f"{meta['uid']}, UID in object meta: {cmeta['uid']}")
        if meta.get("resourceVersion") and meta["resourceVersion"] != cmeta["resourceVersion"]:
            return conflict(name, _CONFLICT)
        meta.update(name=name, namespace=ns, uid=cmeta["uid"],
                    creationTimestamp=cmeta.get("creationTimestamp"),
                    resourceVersion=str(self._next_rv()))
        new["apiVersion"], new["kind"] = api_version, kind
        self._objects[key] = new
        return 200, copy.deepcopy(new)


def _read_body(h: _Handler) -> bytes | None:
    """The request body (b"" when none); None when it is chunked (not
    supported: gpugate always sends a Content-Length)."""
    if "chunked" in (h.headers.get("Transfer-Encoding") or ""):
        return None
    n = int(h.headers.get("Content-Length") or 0)
    return h.rfile.read(n) if n else b""


def _send_json_headers(h: _Handler, status: int, body: dict,
                       headers: dict[str, str]) -> None:
    data = json.dumps(body).encode()
    try:
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        for k, v in headers.items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(data)
        h.wfile.flush()
    except (OSError, ssl.SSLError):
        pass


class FakeKube(_Objects):
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
            "claims": _Resource("claims", "/apis/resource.k8s.io/v1/resourceclaims",
                                "ResourceClaimList", "ResourceClaim",
                                "resource.k8s.io/v1"),
        }
        self._by_path = {r.path: r for r in self._res.values()}
        self._objects_init()
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

    def serve(self, kind: str, on: bool) -> None:
        """Whether the API serves the resource: off, its lists and watches
        get 404 NotFound (a cluster without resource.k8s.io/v1, say)."""
        with self._cond:
            self._res[kind].served = on
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
        if self._objects_serve(h, u.path):
            return
        if h.command != "GET":
            _send_json(h, 405, _status(405, "MethodNotAllowed",
                                       f"{h.command} is not supported here"))
            return
        if r is None or not r.served:
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


def api_claim(name: str, namespace: str, devices: int, *,
              device_class: str = "gpu.nvidia.com", uid: str | None = None,
              owner_pod: str | None = None) -> dict:
    """A ResourceClaim (resource.k8s.io/v1) as the API shows it: one request
    of `devices` devices of `device_class`; `owner_pod` makes it a claim
    the resourceclaim controller made for that pod from a template."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace,
                            "uid": uid or f"uid-claim-{namespace}-{name}"}
    if owner_pod:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod",
                                    "name": owner_pod, "uid": f"uid-{owner_pod}",
                                    "controller": True, "blockOwnerDeletion": True}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": meta,
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": device_class, "allocationMode": "ExactCount",
                "count": devices}}]}},
            "status": {}}


# ---------------------------------------------------------------------------
# as a program, for tests in other languages (tests/unit/kube/fakekube_proc.c)


def _main(argv: list[str]) -> int:
    """Serves until stdin closes (the parent went away or is done); prints
    "ready PORT KUBECONFIG" once listening."""
    import argparse

    ap = argparse.ArgumentParser(description="The fake Kubernetes API over "
                                 "HTTPS, until stdin closes.")
    ap.add_argument("--ca", required=True, type=Path)
    ap.add_argument("--cert", required=True, type=Path)
    ap.add_argument("--key", required=True, type=Path)
    ap.add_argument("--workdir", required=True, type=Path)
    a = ap.parse_args(argv)
    k = FakeKube(a.ca, a.cert, a.key, a.workdir).start()
    print(f"ready {k.port} {k.kubeconfig}", flush=True)
    try:
        while sys.stdin.buffer.read(4096):
            pass
    except KeyboardInterrupt:
        pass
    k.stop()
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
