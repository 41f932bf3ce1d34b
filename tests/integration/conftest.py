"""Fixtures for the integration tests: the real gpugate binary over HTTPS.

Nothing is built here: run `make` first.  The binary is build/gpugate, or
$GPUGATE_BIN (for example build/san-address-undefined/gpugate).  With
GPUGATE_VALGRIND=1 the server runs under valgrind and must exit 0 (valgrind's
--error-exitcode=99 turns memory errors and leaks into a failure).

Every server started here is stopped with SIGTERM and must exit 0 within
15 seconds (SIGKILL is only a fallback so that nothing is left behind); its
stderr must hold no sanitizer report.  Certificates are throw-away ones made
with `gpugate certs` in a temporary directory.
"""

from __future__ import annotations

import base64
import copy
import http.client
import json
import os
import re
import select
import signal
import ssl
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
EXAMPLE_POLICY = ROOT / "policy" / "examples" / "gpu-cluster.yaml"


def _with_success_lines(example: Path) -> Path:
    """The example policy with settings.admissionWarnings: all: every
    admitted class workload also gets its success line ("gpugate: train-large
    -> 8 x h100-80gb for tenant research (8/32 in use)"), which the tests of
    quota, pool and watch read as their probe of what gpugate counts.  The
    default (problems) is tested on EXAMPLE_POLICY itself."""
    text = example.read_text()
    assert "\nsettings:\n" in text
    out = ROOT / "build" / "tests" / "gpu-cluster-all-warnings.yaml"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text.replace("\nsettings:\n", "\nsettings:\n  admissionWarnings: all\n", 1))
    return out


LINE_POLICY = _with_success_lines(EXAMPLE_POLICY)

sys.path.insert(0, str(HERE))

VALGRIND = os.environ.get("GPUGATE_VALGRIND") == "1"
# Valgrind makes everything ~30x slower.
SLOW = 20.0 if VALGRIND else 1.0
START_TIMEOUT = 20.0 * (5 if VALGRIND else 1)
STOP_TIMEOUT = 15.0 * (4 if VALGRIND else 1)

SANITIZER_MARKERS = (
    "ERROR: AddressSanitizer",
    "ERROR: LeakSanitizer",
    "ERROR: ThreadSanitizer",
    "runtime error:",
    "AddressSanitizer:DEADLYSIGNAL",
)

# The custom policy of the `custom_server` fixture: one tenant per mode,
# raw GPU requests allowed.
CUSTOM_POLICY = """\
version: 1
settings:
  admissionWarnings: all
  rawGpuRequests: allow
  mode: enforce
flavors:
  - name: h100-80gb
    resource: nvidia.com/gpu
    sharing: exclusive
    nodeSelector: ["nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3"]
    tolerations:
      - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
    gpusPerNode: 8
  - name: l4-shared
    resource: nvidia.com/gpu.shared
    sharing: time-slicing
    nodeSelector: ["nvidia.com/gpu.product=NVIDIA-L4"]
    gpusPerNode: 16
classes:
  - name: train-small
    flavor: h100-80gb
    gpus: 1
    maxGpus: 4
  - name: dev-shared
    flavor: l4-shared
    gpus: 1
  - name: inference-with-a-really-quite-long-class-name-for-line-limits
    flavor: h100-80gb
    gpus: 1
tenants:
  - name: strict
    namespaces: [strict]
    classes: [train-small]
    quota:
      - {flavor: h100-80gb, nominal: 8}
  - name: warned
    namespaces: [warned]
    classes: [train-small]
    mode: warn
    quota:
      - {flavor: h100-80gb, nominal: 8}
  - name: audited
    namespaces: [audited]
    classes: [train-small]
    mode: audit
    quota:
      - {flavor: h100-80gb, nominal: 8}
  - name: noshare
    namespaces: [noshare]
    sharing: [exclusive]
    quota:
      - {flavor: h100-80gb, nominal: 4}
      - {flavor: l4-shared, nominal: 4}
  - name: a-tenant-with-a-rather-long-name-too
    namespaces: [longnames]
    quota:
      - {flavor: h100-80gb, nominal: 8}
checkpoint:
  gracePeriodSeconds: 300
  mountPath: /ckpt
"""


# ---------------------------------------------------------------------------
# the binary and certificates


def _binary() -> Path:
    b = Path(os.environ.get("GPUGATE_BIN") or ROOT / "build" / "gpugate")
    if not b.is_absolute():
        b = ROOT / b
    return b


@pytest.fixture(scope="session")
def gpugate_bin() -> Path:
    b = _binary()
    if not os.access(b, os.X_OK):
        pytest.exit(f"{b} is not built: run `make` first (or set GPUGATE_BIN)", 2)
    return b


class Certs:
    def __init__(self, d: Path, ca_bundle: str):
        self.dir = d
        self.ca = d / "ca.crt"
        self.cert = d / "tls.crt"
        self.key = d / "tls.key"
        self.ca_bundle = ca_bundle


def make_certs(binary: Path, d: Path) -> Certs:
    d.mkdir(parents=True, exist_ok=True)
    p = subprocess.run(
        [str(binary), "certs", "--out", str(d), "--dns", "localhost", "--ip", "127.0.0.1"],
        capture_output=True, text=True, timeout=60 * SLOW, cwd=ROOT,
    )
    assert p.returncode == 0, f"gpugate certs failed ({p.returncode}): {p.stderr}"
    for f in ("ca.crt", "tls.crt", "tls.key"):
        assert (d / f).is_file(), f"gpugate certs did not write {f}"
    bundle = p.stdout.strip().splitlines()[0] if p.stdout.strip() else ""
    return Certs(d, bundle)


@pytest.fixture(scope="session")
def certs(gpugate_bin, tmp_path_factory) -> Certs:
    return make_certs(gpugate_bin, tmp_path_factory.mktemp("certs"))


# ---------------------------------------------------------------------------
# the server


class Server:
    """One `gpugate serve` process on 127.0.0.1 with an ephemeral port."""

    def __init__(self, binary: Path, certs: Certs, policy: Path, workdir: Path,
                 extra_args: tuple[str, ...] = (), env: dict[str, str] | None = None):
        self.binary = binary
        self.certs = certs
        self.policy = policy
        self.workdir = workdir
        self.extra_args = extra_args
        self.env = env  # added to the environment (GPUGATE_TEST_ROUND_MS)
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.stderr_path = workdir / "gpugate.stderr"
        self.stdout_lines: list[str] = []
        self.exit_code: int | None = None

    # -- lifecycle --

    def start(self) -> "Server":
        cmd = [str(self.binary), "serve", "--policy", str(self.policy),
               "--tls-cert", str(self.certs.cert), "--tls-key", str(self.certs.key),
               "--listen", "127.0.0.1:0", *self.extra_args]
        if VALGRIND:
            cmd = ["valgrind", "--error-exitcode=99", "--leak-check=full",
                   "--errors-for-leak-kinds=definite", "--quiet", *cmd]
        self._stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._stderr,
                                     stdin=subprocess.DEVNULL, cwd=ROOT,
                                     env={**os.environ, **self.env} if self.env else None)
        deadline = time.monotonic() + START_TIMEOUT
        buf = b""
        fd = self.proc.stdout.fileno()
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise AssertionError(
                    f"gpugate serve did not print 'listening on' within "
                    f"{START_TIMEOUT:.0f}s; stderr tail:\n{self.stderr_tail()}")
            r, _, _ = select.select([fd], [], [], min(left, 0.5))
            if r:
                chunk = os.read(fd, 4096)
                if not chunk:
                    rc = self.proc.wait(timeout=5)
                    raise AssertionError(
                        f"gpugate serve exited ({rc}) before listening; stderr "
                        f"tail:\n{self.stderr_tail()}")
                buf += chunk
                m = re.search(rb"listening on https://127\.0\.0\.1:(\d+)\n", buf)
                if m:
                    self.port = int(m.group(1))
                    self.stdout_lines = buf.decode(errors="replace").splitlines()
                    break
            elif self.proc.poll() is not None:
                raise AssertionError(
                    f"gpugate serve exited ({self.proc.returncode}) before "
                    f"listening; stderr tail:\n{self.stderr_tail()}")
        # Keep draining stdout so that the server can never block on it.
        threading.Thread(target=self._drain, daemon=True).start()
        return self

    def _drain(self) -> None:
        try:
            for line in self.proc.stdout:
                self.stdout_lines.append(line.decode(errors="replace").rstrip("\n"))
        except (OSError, ValueError):
            pass

    def terminate(self, timeout: float = STOP_TIMEOUT) -> int | None:
        """SIGTERM and wait; returns the exit code, or None when it hung (it
        is then SIGKILLed)."""
        if self.proc is None:
            return self.exit_code
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.exit_code = self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                self.exit_code = None
        else:
            self.exit_code = self.proc.returncode
        self._close_files()
        return self.exit_code

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self._close_files()

    def _close_files(self) -> None:
        try:
            self._stderr.close()
        except Exception:
            pass

    def stop_and_check(self) -> None:
        """The fixture teardown: must exit 0, no sanitizer report."""
        rc = self.terminate()
        problems = []
        if rc is None:
            problems.append(f"did not exit within {STOP_TIMEOUT:.0f}s of SIGTERM "
                            f"(SIGKILLed)")
        elif rc != 0:
            problems.append(f"exited {rc} after SIGTERM, not 0")
        report = self.sanitizer_report()
        if report:
            problems.append("sanitizer/valgrind report on stderr")
        if problems:
            raise AssertionError(
                "gpugate serve: " + "; ".join(problems) + "\nstderr tail:\n" +
                self.stderr_tail(80))

    # -- introspection --

    def stderr_text(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""

    def stderr_tail(self, n: int = 30) -> str:
        return "\n".join(self.stderr_text().splitlines()[-n:])

    def sanitizer_report(self) -> bool:
        text = self.stderr_text()
        if any(m in text for m in SANITIZER_MARKERS):
            return True
        # valgrind --quiet prints only errors, each line starting "==PID=="
        return VALGRIND and re.search(r"^==\d+== ", text, re.M) is not None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    # -- clients --

    def ssl_context(self, **kw) -> ssl.SSLContext:
        return tls_context(self.certs, **kw)

    def client(self, host: str = "localhost", timeout: float = 10.0) -> "Client":
        return Client(self, host=host, timeout=timeout * SLOW)


def tls_context(certs: Certs, minimum: ssl.TLSVersion | None = None,
                maximum: ssl.TLSVersion | None = None) -> ssl.SSLContext:
    """Verifying client context: the CA from `gpugate certs`, hostname checks
    on."""
    ctx = ssl.create_default_context(cafile=str(certs.ca))
    assert ctx.check_hostname and ctx.verify_mode == ssl.CERT_REQUIRED
    if minimum is not None:
        ctx.minimum_version = minimum
    if maximum is not None:
        ctx.maximum_version = maximum
    return ctx


def _start(binary, certs, policy, workdir, extra_args: tuple[str, ...] = (),
           env: dict[str, str] | None = None) -> Server:
    workdir.mkdir(parents=True, exist_ok=True)
    return Server(binary, certs, policy, workdir, extra_args, env).start()


@pytest.fixture(scope="session")
def server(gpugate_bin, certs, tmp_path_factory):
    """gpugate serve with the example policy and its success lines
    (LINE_POLICY), for the whole session."""
    s = _start(gpugate_bin, certs, LINE_POLICY, tmp_path_factory.mktemp("srv"))
    try:
        yield s
    finally:
        s.stop_and_check()


@pytest.fixture(scope="session")
def custom_policy(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("policy") / "custom.yaml"
    p.write_text(CUSTOM_POLICY)
    return p


@pytest.fixture(scope="session")
def custom_server(gpugate_bin, certs, custom_policy, tmp_path_factory):
    """gpugate serve with CUSTOM_POLICY (enforce, warn and audit tenants;
    rawGpuRequests: allow)."""
    s = _start(gpugate_bin, certs, custom_policy, tmp_path_factory.mktemp("srv-custom"))
    try:
        yield s
    finally:
        s.stop_and_check()


@pytest.fixture
def fresh_server(gpugate_bin, certs, tmp_path):
    """A factory for servers a test owns (shutdown tests); whatever it
    starts is stopped at the end (the test may have stopped it already)."""
    started: list[Server] = []

    def start(policy: Path = LINE_POLICY, own_certs: Certs | None = None,
              extra_args: tuple[str, ...] = (), env: dict[str, str] | None = None) -> Server:
        s = _start(gpugate_bin, own_certs or certs, policy, tmp_path / f"srv{len(started)}",
                   extra_args, env)
        started.append(s)
        return s

    yield start
    for s in started:
        if s.alive:
            s.stop_and_check()
        else:
            s.kill()
            assert not s.sanitizer_report(), s.stderr_tail(80)


# ---------------------------------------------------------------------------
# the client


class Response:
    def __init__(self, status: int, headers: http.client.HTTPMessage, body: bytes):
        self.status = status
        self.headers = headers
        self.body = body

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return json.loads(self.body)

    def __repr__(self) -> str:
        return f"<Response {self.status} {self.body[:300]!r}>"


class Client:
    """A keep-alive HTTPS client that verifies the server certificate (CA
    from `gpugate certs`, hostname checks on).  Reconnects when the server
    closed the connection (after a 4xx with Connection: close)."""

    def __init__(self, server: Server, host: str = "localhost", timeout: float = 10.0,
                 context: ssl.SSLContext | None = None):
        self.server = server
        self.host = host
        self.timeout = timeout
        self.context = context or server.ssl_context()
        self.conn: http.client.HTTPSConnection | None = None
        self.connects = 0

    def _connect(self) -> http.client.HTTPSConnection:
        if self.conn is None:
            self.conn = http.client.HTTPSConnection(
                self.host, self.server.port, context=self.context, timeout=self.timeout)
            self.connects += 1
        return self.conn

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()

    def request(self, method: str, path: str, body: bytes | str | None = None,
                headers: dict[str, str] | None = None) -> Response:
        if isinstance(body, str):
            body = body.encode()
        h = dict(headers or {})
        if body is not None and "Content-Type" not in h:
            h["Content-Type"] = "application/json"
        for attempt in (0, 1):
            conn = self._connect()
            fresh = conn.sock is None
            try:
                conn.request(method, path, body=body, headers=h)
                r = conn.getresponse()
                data = r.read()
            except (http.client.RemoteDisconnected, BrokenPipeError,
                    ConnectionResetError, http.client.CannotSendRequest):
                # A keep-alive connection the server closed: retry once on a
                # new one (what Go's http client does for idempotent-safe
                # reuse failures).
                self.close()
                if attempt or fresh:
                    raise
                continue
            if r.will_close or (r.getheader("Connection", "") or "").lower() == "close":
                self.close()
            return Response(r.status, r.headers, data)
        raise AssertionError("unreachable")

    def get(self, path: str) -> Response:
        return self.request("GET", path)

    def post(self, path: str, body, headers=None) -> Response:
        if not isinstance(body, (bytes, str)):
            body = json.dumps(body)
        return self.request("POST", path, body, headers)

    # -- admission --

    def review(self, endpoint: str, review: dict) -> dict:
        """POSTs an AdmissionReview to /mutate or /validate; returns the
        parsed response review after checking the envelope."""
        r = self.post(f"/{endpoint}?timeout=10s", review)
        assert r.status == 200, f"/{endpoint}: HTTP {r.status}: {r.text}"
        assert r.headers.get("Content-Type", "").startswith("application/json"), r.headers
        out = r.json()
        check_envelope(out, review, endpoint)
        return out

    def admit(self, endpoint: str, obj: dict | None, **kw) -> "Admission":
        rv = make_review(obj, **kw)
        return Admission(rv, self.review(endpoint, rv), endpoint)


# ---------------------------------------------------------------------------
# AdmissionReview helpers

KINDS = {
    "Pod": ({"group": "", "version": "v1", "kind": "Pod"},
            {"group": "", "version": "v1", "resource": "pods"}),
    "Job": ({"group": "batch", "version": "v1", "kind": "Job"},
            {"group": "batch", "version": "v1", "resource": "jobs"}),
    "ResourceClaim": ({"group": "resource.k8s.io", "version": "v1",
                       "kind": "ResourceClaim"},
                      {"group": "resource.k8s.io", "version": "v1",
                       "resource": "resourceclaims"}),
    "ResourceClaimTemplate": ({"group": "resource.k8s.io", "version": "v1",
                               "kind": "ResourceClaimTemplate"},
                              {"group": "resource.k8s.io", "version": "v1",
                               "resource": "resourceclaimtemplates"}),
    "ConfigMap": ({"group": "", "version": "v1", "kind": "ConfigMap"},
                  {"group": "", "version": "v1", "resource": "configmaps"}),
    "Deployment": ({"group": "apps", "version": "v1", "kind": "Deployment"},
                   {"group": "apps", "version": "v1", "resource": "deployments"}),
    "ControllerRevision": ({"group": "apps", "version": "v1", "kind": "ControllerRevision"},
                           {"group": "apps", "version": "v1",
                            "resource": "controllerrevisions"}),
}


def new_uid() -> str:
    return str(uuid.uuid4())


def make_review(obj: dict | None, *, operation: str = "CREATE", namespace: str | None = None,
                kind: str | None = None, dry_run: bool = False, old: dict | None = None,
                name: str | None = None, uid: str | None = None,
                sub_resource: str | None = None) -> dict:
    """An AdmissionReview v1 as the kube-apiserver sends it."""
    src = obj if obj is not None else old
    kind = kind or (src or {}).get("kind", "Pod")
    gvk, gvr = KINDS[kind]
    meta = (src or {}).get("metadata", {})
    if namespace is None:
        namespace = meta.get("namespace", "default")
    if name is None:
        name = meta.get("name", "")
    req: dict[str, Any] = {
        "uid": uid or new_uid(),
        "kind": gvk,
        "resource": gvr,
        "requestKind": gvk,
        "requestResource": gvr,
        "name": name,
        "namespace": namespace,
        "operation": operation,
        "userInfo": {"username": "alice", "uid": "u-1",
                     "groups": ["system:authenticated"]},
        "object": obj,
        "oldObject": old,
        "dryRun": dry_run,
        "options": {"apiVersion": "meta.k8s.io/v1",
                    "kind": {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions",
                             "DELETE": "DeleteOptions"}.get(operation, "CreateOptions")},
    }
    if sub_resource:
        req["subResource"] = sub_resource
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}


def check_envelope(out: dict, review: dict, endpoint: str) -> None:
    """What the kube-apiserver requires of every response."""
    assert out.get("apiVersion") == "admission.k8s.io/v1", out
    assert out.get("kind") == "AdmissionReview", out
    resp = out.get("response")
    assert isinstance(resp, dict), out
    assert resp.get("uid") == review["request"]["uid"], (resp.get("uid"), review["request"]["uid"])
    assert isinstance(resp.get("allowed"), bool), resp
    assert ("patch" in resp) == ("patchType" in resp), resp
    if "patch" in resp:
        assert resp["patchType"] == "JSONPatch", resp
        assert endpoint == "mutate", f"/{endpoint} returned a patch: {resp}"
        assert resp["allowed"] is True, resp
        patch = decode_patch(resp["patch"])
        assert isinstance(patch, list) and patch, f"empty patch sent: {patch!r}"
    if not resp["allowed"]:
        st = resp.get("status")
        assert isinstance(st, dict), resp
        assert isinstance(st.get("code"), int) and 400 <= st["code"] <= 599, st
        assert isinstance(st.get("message"), str) and st["message"], st
    for w in resp.get("warnings", []) or []:
        assert isinstance(w, str), resp
        assert "\n" not in w and "\r" not in w, w
        assert all(ord(c) >= 0x20 for c in w), repr(w)


def decode_patch(b64: str) -> list:
    raw = base64.b64decode(b64, validate=True)
    return json.loads(raw)


class Admission:
    """One answered review."""

    def __init__(self, review: dict, out: dict, endpoint: str):
        self.review = review
        self.out = out
        self.endpoint = endpoint
        self.resp = out["response"]

    @property
    def allowed(self) -> bool:
        return self.resp["allowed"]

    @property
    def message(self) -> str | None:
        return (self.resp.get("status") or {}).get("message")

    @property
    def code(self) -> int | None:
        return (self.resp.get("status") or {}).get("code")

    @property
    def warnings(self) -> list[str]:
        return list(self.resp.get("warnings") or [])

    @property
    def patch(self) -> list | None:
        return decode_patch(self.resp["patch"]) if "patch" in self.resp else None

    def patched(self) -> dict:
        """The object after the patch, applied with the strict applier the
        way the kube-apiserver applies it."""
        from jsonpatch_strict import apply
        obj = self.review["request"]["object"]
        p = self.patch
        return copy.deepcopy(obj) if p is None else apply(obj, p)

    def __repr__(self) -> str:
        r = dict(self.resp)
        if "patch" in r:
            r["patch"] = self.patch
        return json.dumps(r, indent=1)


def metrics(client: Client) -> dict[str, float]:
    """GET /metrics, as {"name{labels}": value}."""
    r = client.get("/metrics")
    assert r.status == 200, r
    assert r.headers.get("Content-Type", "").startswith("text/plain"), r.headers
    out = {}
    for line in r.text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        out[name] = float(value)
    return out


def poll(check, what: str, timeout: float = 15.0 * SLOW) -> Any:
    """Calls check() until it returns something truthy, and returns that;
    fails naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        v = check()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.05)


@pytest.fixture
def client(server):
    c = server.client()
    yield c
    c.close()


@pytest.fixture
def custom_client(custom_server):
    c = custom_server.client()
    yield c
    c.close()
