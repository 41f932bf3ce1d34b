"""A small scriptable fake of the Kubernetes API, over HTTPS, for the tests of
gpugate's list and watch (kube/informer.c and kube/feed.c,
tests/integration/test_watch.py).

It serves what gpugate asks for and nothing else:

    GET /api/v1/pods, GET /apis/batch/v1/jobs, GET /api/v1/nodes
    and GET /apis/resource.k8s.io/v1/resourceclaims (404 while `serve`d off),
    GET /apis/scheduling.k8s.io/v1/priorityclasses,
    GET /apis/resource.k8s.io/v1/deviceclasses, resourceslices and
    devicetaintrules (404 until `serve`d on)
        ?labelSelector=KEY           objects that carry label KEY (the only
                                     selector served: gpugate.io/tenant)
        &limit=N&continue=TOKEN      pages in key order (namespace/name), as
                                     the apiserver: the token is base64 of
                                     {"v","rv","start"}, every page carries
                                     the first page's resourceVersion and
                                     remainingItemCount; a page may be
                                     shorter (page_size); a token from
                                     before the last compaction is 410
        &watch=1&resourceVersion=RV  a chunked stream of newline-delimited
                                     events after RV: ADDED, MODIFIED,
                                     DELETED, BOOKMARK, ERROR (410 when RV is
                                     older than the last compaction); with
                                     the selector, filtered as the
                                     apiserver's watch cache does: an object
                                     that gains the label is ADDED, one that
                                     loses it DELETED

Besides the objects a test puts in place, a kind may hold a generated
population (`populate`, population.py: N objects made on demand, G of them
GPU workloads with gpugate's label), listed like the others, and modified in
bursts of watch events (`burst`); bench/feed-memory.sh runs the fake so,
as a program with --pods/--gpu-pods/--jobs/--gpu-jobs.

and, for the tests of the API client's write verbs (kube/client.c) and of
the controllers that write, a store of namespaced ConfigMaps, Leases and
ResourceClaimTemplates (the template keeper) with GET, POST, PUT, PATCH and
DELETE, with the lists across namespaces the template keeper reads (GET
/api/v1/namespaces, /apis/resource.k8s.io/v1/resourceclaimtemplates and
/api/v1/namespaces/NS/pods: `set_namespaces`, `serve_templates`)
(the "objects" section below; as a program, `python3 fakekube.py --ca ...`,
see _main at the end).

Resource versions are one counter for all kinds, as in etcd.  A test
scripts it: objects put in place without events (`put`, `remove`), events
(`event`, `bookmark`, `expire`: an ERROR 410 on the open watches), faults
(`fail_lists`, `hang_lists`, `fail_watches`, `hang_watches`,
`error_watches`, `drop`, `serve`: a resource the API does not serve), and reads back every request gpugate made
(`requests`).  Every request must carry the bearer token of the kubeconfig
it writes (`kubeconfig`), else 401.

From a test that is not Python, POST /_fake/call {"call": NAME, "args":
[...]} calls one of these (see _CALLS), and GET /_fake/stats counts lists
and watches ("LIST pods", "WATCH pods", and "LIST pods labelSelector" of
those with a selector), the objects the lists held ("ITEMS pods") and the
events the watches sent ("EVENTS pods").
A test that is not Python scripts `serve` and `event` through POST
/_fake/served and /_fake/events (see _control).

Python 3.11 standard library only; the serving certificate is the one of
the `certs` fixture (`gpugate certs`, valid for 127.0.0.1).
"""

from __future__ import annotations

import base64
import bisect
import copy
import datetime
import heapq
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

from population import Population  # beside this file: on sys.path

TOKEN = "fake-kube-token"
SELECTOR_KEY = "gpugate.io/tenant"
# The gang label: the gang-start controller lists Jobs and Pods by it.
GANG_KEY = "gpugate.io/gang"


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
    kind: str                            # "pods" / "jobs" / "claims" / "nodes"
    path: str
    list_kind: str
    obj_kind: str
    api_version: str
    objects: dict[str, dict] = field(default_factory=dict)   # uid -> object
    history: list["_Event"] = field(default_factory=list)
    population: Population | None = None
    compacted: int = 0                   # watches from before this get 410
    page_size: int | None = None         # server-side cap on a page
    list_status: int | None = None       # fail lists with this status
    list_failures: int | None = None     # ... this many times (None: until cleared)
    list_hang: bool = False
    watch_status: int | None = None
    watch_hang: bool = False
    watch_error: int | None = None       # watches open, then ERROR with this code
    raw_lists: dict[str, list[str]] = field(default_factory=dict)  # limit -> bodies
    drop_generation: int = 0
    open_watches: int = 0
    served: bool = True                  # False: 404, as an API without it


@dataclass
class _Event:
    """One entry of a kind's watch history."""
    rv: int
    ev: dict | None                      # the event (None: a population event)
    has_label: bool = True               # the object carries SELECTOR_KEY now ...
    had_label: bool = True               # ... and did before the event
    prev: dict | None = None             # its state before (DELETED with the selector)
    pop: tuple[int, bool] | None = None  # population event: number, finished


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
#   /apis/apps/v1/namespaces/NS/deployments|statefulsets|replicasets[/NAME]
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
    # what a kubectl scale is of (webhook/parents.c reads them)
    (re.compile(r"^/apis/apps/v1/namespaces/([^/]+)/deployments(?:/([^/]+))?$"),
     "deployments", "apps", "Deployment", "apps/v1"),
    (re.compile(r"^/apis/apps/v1/namespaces/([^/]+)/statefulsets(?:/([^/]+))?$"),
     "statefulsets", "apps", "StatefulSet", "apps/v1"),
    (re.compile(r"^/apis/apps/v1/namespaces/([^/]+)/replicasets(?:/([^/]+))?$"),
     "replicasets", "apps", "ReplicaSet", "apps/v1"),
    # the claim templates of DRA classes (controllers/claim-templates.c)
    (re.compile(r"^/apis/resource\.k8s\.io/v1/namespaces/([^/]+)/resourceclaimtemplates"
                r"(?:/([^/]+))?$"),
     "resourceclaimtemplates", "resource.k8s.io", "ResourceClaimTemplate",
     "resource.k8s.io/v1"),
)

# Lists across namespaces that the object store and the watched store
# answer (off until a test serves them: `namespaces`, `serve_templates`):
#
#   GET /api/v1/namespaces                          FakeKube.namespaces
#   GET /apis/resource.k8s.io/v1/resourceclaimtemplates   the store's
#   GET /api/v1/namespaces/NS/pods                  the watched pods of NS
_NAMESPACES = "/api/v1/namespaces"
_TEMPLATES = "/apis/resource.k8s.io/v1/resourceclaimtemplates"
_NS_PODS = re.compile(r"^/api/v1/namespaces/([^/]+)/pods$")

# What POST /_fake/call may call: FakeKube's scripting methods whose
# arguments and results are JSON.
_CALLS = ("populate", "burst", "event", "raw_list", "bookmark", "compact", "expire",
          "drop", "page_size", "fail_lists", "hang_lists", "fail_watches",
          "error_watches", "hang_watches", "open_watches")

# One Pod or Job of the watched store (the gang-start controller patches
# them), and Events.
_WATCHED_OBJECT = re.compile(
    r"^/(api/v1|apis/batch/v1)/namespaces/([^/]+)/(?:pods|jobs)/([^/]+)$")
_EVENTS = re.compile(r"^/api/v1/namespaces/([^/]+)/events$")
# One Node of the watched store (the health controller patches them).
_WATCHED_NODE = re.compile(r"^/api/v1/nodes/([^/]+)$")

_CONFLICT = ("the object has been modified; please apply your changes to the "
             "latest version and try again")


@dataclass
class Fault:
    """What happens to the next object requests that match."""
    method: str | None = None       # None: any verb
    path: str | None = None         # a path prefix; None: any object path
    body: str | None = None         # a text the request body must contain
                                    # (one writer's requests: its identity)
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

    def create(self, resource: str, namespace: str, obj: dict) -> dict:
        """POSTs obj into the store as a client would; the stored object."""
        route = next(tuple(r) for _, *r in _OBJECT_ROUTES if r[0] == resource)
        with self._cond:
            status, answer = self._object_do("POST", route, namespace, None,
                                             json.dumps(obj).encode(), "application/json")
        assert status == 201, answer
        return answer

    def object(self, resource: str, namespace: str, name: str) -> dict | None:
        with self._cond:
            o = self._objects.get((resource, namespace, name))
            return copy.deepcopy(o) if o else None

    def stats(self) -> dict[str, int]:
        with self._cond:
            return dict(self._stats)

    def _count(self, key: str, n: int = 1) -> None:
        """With the lock."""
        self._stats[key] = self._stats.get(key, 0) + n

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
        f = self._take_fault(h.command, path, body)
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

    def _take_fault(self, method: str, path: str, body: bytes = b"") -> Fault | None:
        with self._cond:
            for f in self._faults:
                if ((f.method is None or f.method == method) and
                        (f.path is None or path.startswith(f.path)) and
                        (f.body is None or f.body.encode() in body)):
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
        elif path == "/_fake/call" and h.command == "POST":
            try:
                req = json.loads(body or b"{}")
                if req.get("call") not in _CALLS:
                    raise ValueError(f"no call {req.get('call')!r} (one of {', '.join(_CALLS)})")
                result = getattr(self, req["call"])(*req.get("args", []))
            except (TypeError, ValueError, KeyError) as e:
                _send_json(h, 400, _object_status(400, "BadRequest", str(e)))
                return
            _send_json(h, 200, {"result": result})
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
        self.k8s_events: list[dict] = []           # Events gpugate POSTed
        self.patches: list[tuple] = []             # (kind, ns, name, type, body)
        self._res = {
            "pods": _Resource("pods", "/api/v1/pods", "PodList", "Pod", "v1"),
            "jobs": _Resource("jobs", "/apis/batch/v1/jobs", "JobList", "Job",
                              "batch/v1"),
            "claims": _Resource("claims", "/apis/resource.k8s.io/v1/resourceclaims",
                                "ResourceClaimList", "ResourceClaim",
                                "resource.k8s.io/v1"),
            "nodes": _Resource("nodes", "/api/v1/nodes", "NodeList", "Node", "v1"),
            # Off unless a test serves it: the daemon's PriorityClass feed
            # keeps the 404 it always had here.
            "priorityclasses": _Resource("priorityclasses",
                                         "/apis/scheduling.k8s.io/v1/priorityclasses",
                                         "PriorityClassList", "PriorityClass",
                                         "scheduling.k8s.io/v1", served=False),
            # Off unless a test serves it (gpugate check --kubeconfig, the
            # DRA pool).
            "deviceclasses": _Resource("deviceclasses",
                                       "/apis/resource.k8s.io/v1/deviceclasses",
                                       "DeviceClassList", "DeviceClass",
                                       "resource.k8s.io/v1", served=False),
            # The DRA pool (kube/feed.c): off unless a test serves them.
            "resourceslices": _Resource("resourceslices",
                                        "/apis/resource.k8s.io/v1/resourceslices",
                                        "ResourceSliceList", "ResourceSlice",
                                        "resource.k8s.io/v1", served=False),
            "devicetaintrules": _Resource("devicetaintrules",
                                          "/apis/resource.k8s.io/v1/devicetaintrules",
                                          "DeviceTaintRuleList", "DeviceTaintRule",
                                          "resource.k8s.io/v1", served=False),
        }
        self._by_path = {r.path: r for r in self._res.values()}
        self.namespaces: dict[str, str] | None = None
        self.templates_served = False
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

    def watched(self, kind: str, name: str, namespace: str | None = None) -> dict | None:
        """A copy of the object of kind named name (in namespace; None: a
        cluster-scoped one) as the fake holds it now, or None."""
        with self._cond:
            o = next((o for o in self._res[kind].objects.values()
                      if o["metadata"].get("namespace") == namespace
                      and o["metadata"]["name"] == name), None)
            return copy.deepcopy(o) if o else None

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
            uid = obj["metadata"]["uid"]
            prev = r.objects.get(uid)
            if type_ == "DELETED":
                r.objects.pop(uid, None)
            else:
                r.objects[uid] = obj
            if prev is not None:
                had = _labeled(prev)
            else:  # new, or a deletion the fake never saw the object of
                had = type_ == "DELETED" and _labeled(obj)
            r.history.append(_Event(rv, {"type": type_, "object": obj},
                                    has_label=type_ != "DELETED" and _labeled(obj),
                                    had_label=had, prev=prev))
            self._cond.notify_all()
            return rv

    def populate(self, kind: str, total: int, gpu: int) -> None:
        """Puts a generated population of `total` objects in place, `gpu`
        of them GPU workloads with gpugate's label (population.py), without
        events; it takes `total` resourceVersions."""
        with self._cond:
            r = self._res[kind]
            r.population = Population(kind, total, gpu, self._rv + 1)
            self._rv += total

    def burst(self, kind: str, count: int, finish: bool = True) -> int:
        """MODIFIED events of `count` objects of the population, spread over
        it (a status update of each: a new resourceVersion).  With finish,
        one more event after them: the first GPU object ends (a Pod
        Succeeded, a Job Complete), so that what watches it drops one ledger
        entry once it has read every event before.  Returns the last
        resourceVersion."""
        with self._cond:
            r = self._res[kind]
            p = r.population
            if p is None:
                raise ValueError(f"no population of {kind}")
            picks = p.picks(count)
            last = next(p.gpu_indexes(), None) if finish else None
            if last is not None:
                picks.append(last)
            for i in picks:
                rv = self._next_rv()
                done = i == last or i in p.finished
                p.modified[i] = rv
                if done:
                    p.finished.add(i)
                lab = p.labeled(i)
                r.history.append(_Event(rv, None, has_label=lab, had_label=lab,
                                        pop=(i, done)))
            self._cond.notify_all()
            return self._rv

    def bookmark(self, kind: str, jump: int = 100) -> int:
        """A BOOKMARK `jump` versions ahead (other resources moved on);
        returns its resourceVersion."""
        with self._cond:
            r = self._res[kind]
            self._rv += jump
            rv = self._rv
            r.history.append(_Event(rv, {"type": "BOOKMARK", "object": {
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
            self._res[kind].history.append(_Event(rv, _status_event(
                410, "Expired", "too old resource version")))
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

    def raw_list(self, kind: str, limit: str, body: str) -> None:
        """The next list of `kind` whose limit parameter is `limit` is
        answered 200 with `body`, as it is (a page the fake would not
        make: members in another order, odd white space, broken JSON).
        Bodies queue up, one a request; tests tell their informers apart
        by the page size they ask for."""
        with self._cond:
            self._res[kind].raw_lists.setdefault(str(limit), []).append(body)

    def error_watches(self, kind: str, code: int | None) -> None:
        """Watches are answered 200, then at once an ERROR event with this
        code (a Status: 500 InternalError, ...), and end (None: stop)."""
        with self._cond:
            self._res[kind].watch_error = code

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
            if r:
                self._count(f"{'WATCH' if req.watch else 'LIST'} {r.kind}")
                if query.get("labelSelector"):
                    self._count(f"{'WATCH' if req.watch else 'LIST'} {r.kind} labelSelector")
        if h.headers.get("Authorization") != f"Bearer {TOKEN}":
            _send_json(h, 401, _status(401, "Unauthorized", "Unauthorized"))
            return
        if self._objects_serve(h, u.path):
            return
        if self._watched_object(h, u.path):
            return
        if h.command == "GET" and self._cluster_list(h, u.path):
            return
        if h.command != "GET":
            # The body is read first: left in the stream it would be read
            # as the next request of a kept-alive connection.
            _read_body(h)
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

    def _cluster_list(self, h: _Handler, path: str) -> bool:
        """GET of the lists across namespaces above; False when path is
        none of them."""
        m = _NS_PODS.match(path)
        if path not in (_NAMESPACES, _TEMPLATES) and not m:
            return False
        with self._cond:
            self._count(f"GET {path}")
            if path == _NAMESPACES and self.namespaces is not None:
                items = [{"apiVersion": "v1", "kind": "Namespace",
                          "metadata": {"name": n, "uid": f"ns-{n}"},
                          "status": {"phase": phase}}
                         for n, phase in self.namespaces.items()]
                answer = {"kind": "NamespaceList", "apiVersion": "v1", "items": items}
            elif path == _TEMPLATES and self.templates_served:
                items = [copy.deepcopy(o) for (r, _, _), o in sorted(self._objects.items())
                         if r == "resourceclaimtemplates"]
                answer = {"kind": "ResourceClaimTemplateList",
                          "apiVersion": "resource.k8s.io/v1", "items": items}
            elif m:
                items = [copy.deepcopy(o) for o in self._res["pods"].objects.values()
                         if o["metadata"].get("namespace") == m.group(1)]
                answer = {"kind": "PodList", "apiVersion": "v1", "items": items}
            else:
                answer = None
            if answer is not None:
                answer["metadata"] = {"resourceVersion": str(self._rv)}
        if answer is None:
            _send_json(h, 404, _status(404, "NotFound", "the server could not "
                                       "find the requested resource"))
        else:
            _send_json(h, 200, answer)
        return True

    def set_namespaces(self, namespaces: dict[str, str] | None) -> None:
        """The Namespaces GET /api/v1/namespaces lists, name -> phase
        ("Active", "Terminating"); None: not served (404)."""
        with self._cond:
            self.namespaces = dict(namespaces) if namespaces is not None else None

    def serve_templates(self, on: bool) -> None:
        """Whether resource.k8s.io/v1 resourceclaimtemplates is served: off,
        the list across namespaces is 404 (the namespaced paths are the
        object store's, always there)."""
        with self._cond:
            self.templates_served = on

    def _watched_object(self, h: _Handler, path: str) -> bool:
        """GET and PATCH (merge, JSON) of one Pod, Job or Node of the
        watched store, the change streamed as MODIFIED (a merge patch's
        metadata.resourceVersion is a precondition: 409 when stale; a
        fault() with a status answers it instead); POST of an Event (kept
        in self.k8s_events).  False when path is none of them."""
        m = _WATCHED_OBJECT.match(path)
        ev = _EVENTS.match(path)
        if ev and h.command == "POST":
            body = _read_body(h) or b"{}"
            with self._cond:
                self.k8s_events.append(json.loads(body))
            _send_json(h, 201, json.loads(body))
            return True
        nm = _WATCHED_NODE.match(path)
        if not m and not nm:
            return False
        if nm:
            kind, ns, name = "nodes", None, nm.group(1)
        else:
            kind = "pods" if m.group(1) == "api/v1" else "jobs"
            ns, name = m.group(2), m.group(3)
        body = _read_body(h) or b""
        f = self._take_fault(h.command, path, body)
        if f and f.status:
            with self._cond:
                self._count(f"{h.command} {f.status}")
            _send_json(h, f.status, _object_status(
                f.status, f.reason or _REASONS.get(f.status, "InternalError"),
                f.message or (f"Operation cannot be fulfilled on {kind} \"{name}\": "
                              f"{_CONFLICT}" if f.status == 409 else "scripted failure")))
            return True
        with self._cond:
            r = self._res[kind]
            cur = next((o for o in r.objects.values()
                        if o["metadata"].get("namespace") == ns
                        and o["metadata"]["name"] == name), None)
            if cur is None:
                _send_json(h, 404, _status(404, "NotFound", f'{kind} "{name}" not found'))
                return True
            if h.command == "GET":
                _send_json(h, 200, cur)
                return True
            if h.command != "PATCH":
                _send_json(h, 405, _status(405, "MethodNotAllowed", h.command))
                return True
            ctype = (h.headers.get("Content-Type") or "").split(";")[0].strip()
            self.patches.append((kind, ns, name, ctype, json.loads(body)))
            if ctype == "application/json-patch+json":
                from jsonpatch_strict import PatchError, apply
                try:
                    new = apply(cur, json.loads(body))
                except PatchError as e:
                    _send_json(h, 422, _status(422, "Invalid", str(e)))
                    return True
            else:
                doc = json.loads(body)
                new = _merge_patch(cur, doc)
                # As the apiserver: a resourceVersion in a merge patch is
                # a precondition (the patched object is written at it).
                want = (doc.get("metadata") or {}).get("resourceVersion") \
                    if isinstance(doc, dict) and isinstance(doc.get("metadata"), dict) \
                    else None
                if want and want != cur["metadata"].get("resourceVersion"):
                    self._count("PATCH 409")
                    _send_json(h, 409, _object_status(
                        409, "Conflict", f'Operation cannot be fulfilled on {kind} '
                        f'"{name}": {_CONFLICT}'))
                    return True
            self.event(kind, "MODIFIED", new)
            _send_json(h, 200, r.objects[new["metadata"]["uid"]])
        return True

    def _held(self, hang) -> bool:
        """With the lock: waits while hang() says so; False when the fake
        is stopping (the request then gets no answer)."""
        while hang() and not self._stopping:
            self._cond.wait(0.2)
        return not self._stopping

    @staticmethod
    def _labeled_only(query: dict[str, str]) -> bool:
        """True when the request selects gpugate's label; no other selector
        is served (but GANG_KEY's, on a list: _page)."""
        sel = query.get("labelSelector")
        assert not sel or sel == SELECTOR_KEY, f"fake kube: unsupported selector {sel!r}"
        return bool(sel)

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
                body = json.dumps(_status(status, "InternalError", "scripted failure")).encode()
            elif r.raw_lists.get(query.get("limit", "")):
                status, body = 200, r.raw_lists[query["limit"]].pop(0).encode()
            else:
                status, body = self._page(r, query)
        _send_bytes(h, status, body)

    def _page(self, r: _Resource, query: dict[str, str]) -> tuple[int, bytes]:
        """With the lock: one page of the list (status, JSON)."""
        if query.get("labelSelector") == GANG_KEY:
            # The gang-start controller's lists (controllers/gang-start.c):
            # the objects labelled gpugate.io/gang, one page, no population.
            items = [o for o in r.objects.values()
                     if GANG_KEY in ((o.get("metadata") or {}).get("labels") or {})]
            items.sort(key=lambda o: (o["metadata"].get("namespace", ""),
                                      o["metadata"]["name"]))
            return 200, json.dumps({"kind": r.list_kind, "apiVersion": r.api_version,
                                    "metadata": {"resourceVersion": str(self._rv)},
                                    "items": items}).encode()
        labeled_only = self._labeled_only(query)
        cont = query.get("continue")
        if cont:
            tok = json.loads(base64.urlsafe_b64decode(cont + "=" * (-len(cont) % 4)))
            rv, start = int(tok["rv"]), tok["start"]
            if rv < r.compacted:
                return 410, json.dumps(_status(
                    410, "Expired", "The provided continue parameter is too old to display a "
                    "consistent list result. You can start a new list without the continue "
                    "parameter.")).encode()
        else:
            rv, start = self._rv, ""
        n = int(query["limit"]) if query.get("limit") else 0
        if r.page_size:
            n = min(n, r.page_size) if n else r.page_size
        # The objects a test put in place and the population, merged in key
        # order (namespace/name), from the token's key on.
        placed = sorted((f"{o['metadata'].get('namespace', '')}/{o['metadata']['name']}", o)
                        for o in r.objects.values() if not labeled_only or _labeled(o))
        placed_keys = [k for k, _ in placed]
        first = bisect.bisect_left(placed_keys, start)
        streams = [((k, o) for k, o in placed[first:])]
        if r.population:
            streams.append(r.population.iter_from(start, labeled_only))
        merged = heapq.merge(*streams, key=lambda t: t[0])
        items: list[bytes] = []
        last = None
        for k, v in merged:
            if n and len(items) == n:
                break
            last = k
            items.append(r.population.encode(v) if isinstance(v, int)
                         else json.dumps(v).encode())
        else:
            n = 0  # no more
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if n and last is not None:
            after = last + "\x00"
            remaining = len(placed_keys) - bisect.bisect_left(placed_keys, after)
            if r.population:
                remaining += r.population.count_from(after, labeled_only)
            tok = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": after},
                             separators=(",", ":")).encode()
            meta["continue"] = base64.urlsafe_b64encode(tok).decode().rstrip("=")
            meta["remainingItemCount"] = remaining
        self._count(f"ITEMS {r.kind}", len(items))
        head = json.dumps({"kind": r.list_kind, "apiVersion": r.api_version,
                           "metadata": meta}, separators=(",", ":")).encode()
        return 200, head[:-1] + b',"items":[' + b",".join(items) + b"]}"

    def _watch(self, h: _Handler, r: _Resource, query: dict[str, str]) -> None:
        since = int(query.get("resourceVersion") or 0)
        timeout = float(query.get("timeoutSeconds") or 1800)
        labeled_only = self._labeled_only(query)
        with self._cond:
            if not self._held(lambda: r.watch_hang):
                return
            if r.watch_status is not None:
                status = r.watch_status
            else:
                status = 200
                gone = since < r.compacted
                error = r.watch_error
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
            if gone or error is not None:
                _chunk(h, _status_event(410, "Expired", "too old resource version") if gone
                       else _status_event(error, _REASONS.get(error, "InternalError"),
                                          "scripted watch error"))
                _end(h)
                return
            self._stream(h, r, since, generation, time.monotonic() + timeout, labeled_only)
        except (OSError, ssl.SSLError):
            pass
        finally:
            with self._cond:
                r.open_watches -= 1

    def _stream(self, h: _Handler, r: _Resource, sent: int, generation: int,
                deadline: float, labeled_only: bool) -> None:
        """Events after version `sent`, as they come."""
        while True:
            with self._cond:
                while (not (r.history and r.history[-1].rv > sent)
                       and r.drop_generation == generation
                       and not self._stopping and time.monotonic() < deadline):
                    self._cond.wait(0.2)
                # History is in resourceVersion order.
                first = bisect.bisect_right(r.history, sent, key=lambda e: e.rv)
                pending = r.history[first:]
                sent = max(sent, r.history[-1].rv) if r.history else sent
                dropped = r.drop_generation != generation
                stopping = self._stopping
            out: list[bytes] = []
            size = 0
            for e in pending:
                line = self._event_line(r, e, labeled_only)
                if line is None:
                    continue
                with self._cond:
                    self._count(f"EVENTS {r.kind}")
                out.append(b"%x\r\n%s\r\n" % (len(line), line))
                size += len(out[-1])
                # Written in batches: one write a 256 KiB, not one an event.
                if size >= 256 << 10 or (e.ev and e.ev["type"] == "ERROR"):
                    h.wfile.write(b"".join(out))
                    h.wfile.flush()
                    out, size = [], 0
                if e.ev and e.ev["type"] == "ERROR":
                    _end(h)
                    return
            if out:
                h.wfile.write(b"".join(out))
                h.wfile.flush()
            if dropped or stopping:
                # Cut the connection: what was written arrives, then EOF in
                # the middle of the chunked body.
                h.connection.shutdown(socket.SHUT_RDWR)
                h.close_connection = True
                return
            if time.monotonic() >= deadline:
                _end(h)
                return

    @staticmethod
    def _event_line(r: _Resource, e: _Event, labeled_only: bool) -> bytes | None:
        """The line a watch gets for e (newline included), or None when its
        selector filters e out."""
        if e.ev is None:  # a population event (its labels never change)
            if labeled_only and not e.has_label:
                return None
            i, done = e.pop
            return (b'{"type":"MODIFIED","object":' +
                    r.population.encode(i, rv=e.rv, finished=done) + b"}\n")
        ev = e.ev
        if labeled_only and ev["type"] in ("ADDED", "MODIFIED", "DELETED"):
            # As the apiserver's watch cache: the event the selector sees.
            if not e.has_label and not e.had_label:
                return None
            if e.has_label and not e.had_label:
                ev = {"type": "ADDED", "object": ev["object"]}
            elif not e.has_label:
                old = copy.deepcopy(e.prev or ev["object"])
                old["metadata"]["resourceVersion"] = str(e.rv)
                ev = {"type": "DELETED", "object": old}
        return json.dumps(ev).encode() + b"\n"


def _labeled(obj: dict) -> bool:
    return SELECTOR_KEY in ((obj.get("metadata") or {}).get("labels") or {})


def _status(code: int, reason: str, message: str) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


def _status_event(code: int, reason: str, message: str) -> dict:
    return {"type": "ERROR", "object": _status(code, reason, message)}


def _send_json(h: _Handler, status: int, body: dict) -> None:
    _send_bytes(h, status, json.dumps(body).encode())


def _send_bytes(h: _Handler, status: int, data: bytes) -> None:
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
            tenant: str | None = None, controller_label: bool = True) -> dict:
    """A Pod gpugate stamped, as the API shows it: GPU limit, the flavor's
    node selector, a phase.  A Job's pod (owner_job_uid) carries the job
    controller's label too, unless controller_label is false (a forged
    ownerReference)."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace,
                            "uid": uid or f"uid-pod-{namespace}-{name}",
                            "labels": {SELECTOR_KEY: tenant or namespace}}
    if owner_job_uid:
        meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job",
                                    "name": "job", "uid": owner_job_uid,
                                    "controller": True}]
        if controller_label:
            meta["labels"]["batch.kubernetes.io/controller-uid"] = owner_job_uid
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
              owner_pod: str | None = None, owner_pod_uid: str | None = None,
              extended: bool = False) -> dict:
    """A ResourceClaim (resource.k8s.io/v1) as the API shows it: one request
    of `devices` devices of `device_class`; `owner_pod` makes it a claim
    the resourceclaim controller made for that pod from a template, and
    with `extended` the claim the kube-scheduler made for the pod's
    extended resources (KEP-5004: its annotation)."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace,
                            "uid": uid or f"uid-claim-{namespace}-{name}"}
    if owner_pod:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod",
                                    "name": owner_pod,
                                    "uid": owner_pod_uid or f"uid-{owner_pod}",
                                    "controller": True, "blockOwnerDeletion": True}]
    if extended:
        meta["annotations"] = {"resource.kubernetes.io/extended-resource-claim": "true"}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": meta,
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": device_class, "allocationMode": "ExactCount",
                "count": devices}}]}},
            "status": {}}


# ---------------------------------------------------------------------------
# as a program, for tests in other languages (tests/unit/kube/fakekube_proc.c)


def _main(argv: list[str]) -> int:
    """Serves until stdin closes (the parent went away or is done), or with
    --until-signal until SIGTERM or SIGINT; prints "ready PORT KUBECONFIG"
    once listening."""
    import argparse
    import signal

    ap = argparse.ArgumentParser(description="The fake Kubernetes API over "
                                 "HTTPS, until stdin closes.")
    ap.add_argument("--ca", required=True, type=Path)
    ap.add_argument("--cert", required=True, type=Path)
    ap.add_argument("--key", required=True, type=Path)
    ap.add_argument("--workdir", required=True, type=Path)
    ap.add_argument("--pods", type=int, default=0, help="generated Pods (population.py)")
    ap.add_argument("--gpu-pods", type=int, default=0, help="of which hold GPUs")
    ap.add_argument("--jobs", type=int, default=0, help="generated Jobs")
    ap.add_argument("--gpu-jobs", type=int, default=0, help="of which hold GPUs")
    ap.add_argument("--until-signal", action="store_true",
                    help="serve until SIGTERM or SIGINT, not until stdin closes")
    a = ap.parse_args(argv)
    k = FakeKube(a.ca, a.cert, a.key, a.workdir)
    for kind, n, g in (("pods", a.pods, a.gpu_pods), ("jobs", a.jobs, a.gpu_jobs)):
        if n or g:
            k.populate(kind, n, g)
    k.start()
    print(f"ready {k.port} {k.kubeconfig}", flush=True)
    try:
        if a.until_signal:
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
            while True:
                time.sleep(3600)
        while sys.stdin.buffer.read(4096):
            pass
    except (KeyboardInterrupt, SystemExit):
        pass
    k.stop()
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
