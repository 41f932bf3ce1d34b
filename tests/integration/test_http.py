"""gpugate's HTTPS transport: routes, metrics, limits, hostile input, TLS
versions and names, concurrency, graceful shutdown (SPEC sections 7 and 8).
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import socket
import ssl
import subprocess
import threading
import time

import pytest

from conftest import (SLOW, Certs, Client, decode_patch, make_review, metrics, new_uid,
                      tls_context)
from jsonpatch_strict import apply
from objects import CLASS, container, job, pod

MiB = 1 << 20
SPEC_MIN_CAP = 3 * MiB   # must be accepted
SPEC_MAX_CAP = 8 * MiB   # above this: 413
SERVER_BODY_CAP = 6 * MiB  # gpugate's cap (http/server.h, docs/operations.md)


def raw_tls(server, host="localhost", timeout=10.0) -> ssl.SSLSocket:
    s = socket.create_connection(("127.0.0.1", server.port), timeout=timeout * SLOW)
    return tls_context(server.certs).wrap_socket(s, server_hostname=host)


def read_response(t: ssl.SSLSocket, timeout: float) -> bytes:
    """Reads until the peer closes, the timeout passes, or a full response
    with Content-Length has arrived."""
    t.settimeout(timeout)
    data = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = t.recv(65536)
        except (socket.timeout, TimeoutError):
            break
        except (ssl.SSLError, ConnectionResetError):
            break
        if not chunk:
            break
        data += chunk
        head, sep, body = data.partition(b"\r\n\r\n")
        m = re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", head)
        if sep and m and len(body) >= int(m.group(1)):
            break
    return data


def status_of(data: bytes) -> int | None:
    m = re.match(rb"HTTP/1\.[01] (\d{3}) ", data)
    return int(m.group(1)) if m else None


# ---------------------------------------------------------------------------
# routes


def test_healthz(client):
    r = client.get("/healthz")
    assert r.status == 200 and r.text.strip() == "ok", r


def test_readyz(client):
    r = client.get("/readyz")
    assert r.status == 200, r
    assert r.text.strip().endswith("ok")


def test_query_string_is_ignored(client):
    assert client.get("/healthz?verbose=1").status == 200
    rv = make_review(pod(cls="train-small"))
    r = client.post("/mutate?timeout=10s", rv)
    assert r.status == 200 and r.json()["response"]["uid"] == rv["request"]["uid"], r
    r = client.post("/validate?timeout=30s&x=y", make_review(pod(cls=None), dry_run=True))
    assert r.status == 200 and r.json()["response"]["allowed"] is True, r


def test_unknown_path_is_404(client):
    for path in ("/", "/mutate/", "/Mutate", "/validate/extra", "/metricsx", "/../healthz"):
        for method in ("GET", "HEAD"):
            r = client.request(method, path)
            assert r.status == 404, (method, path, r)
            assert r.text == ("not found\n" if method == "GET" else ""), r
    r = client.post("/admit", make_review(pod()))
    assert r.status == 404 and r.text == "not found\n", r
    assert r.headers.get("Connection", "").lower() == "close", r.headers


def test_refused_get_keeps_the_connection(server):
    # A probe of a wrong path or method is answered once its request is
    # complete: the keep-alive connection survives it.
    with server.client() as c:
        assert c.get("/nope").status == 404
        assert c.get("/mutate").status == 405
        assert c.get("/healthz").status == 200
        assert c.connects == 1


@pytest.mark.parametrize("method", ["GET", "HEAD", "PUT", "DELETE", "PATCH", "OPTIONS"])
def test_wrong_method_on_admission_routes_is_405(client, method):
    for path in ("/mutate", "/validate"):
        r = client.request(method, path, b"{}" if method not in ("GET", "HEAD") else None)
        assert r.status == 405, (method, path, r)
        assert r.headers.get("Allow") == "POST", r.headers
        assert r.text == ("method not allowed: use POST\n" if method != "HEAD" else ""), r


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE"])
def test_wrong_method_on_health_routes_is_405(client, method):
    for path in ("/healthz", "/readyz", "/metrics"):
        r = client.request(method, path, b"{}")
        assert r.status == 405 and r.text == "method not allowed: use GET\n", (path, r)
        assert r.headers.get("Allow") == "GET, HEAD", r.headers
        assert r.headers.get("Connection", "").lower() == "close", r.headers


def test_head_on_health_routes(client):
    for path in ("/healthz", "/readyz", "/metrics"):
        r = client.request("HEAD", path)
        assert r.status == 200 and r.body == b"", (path, r)
        assert int(r.headers["Content-Length"]) > 0, r.headers


@pytest.mark.parametrize("ctype", ["text/plain", "application/x-www-form-urlencoded",
                                   "application/jsonx", "application/yaml"])
def test_wrong_content_type_is_415(client, ctype):
    body = json.dumps(make_review(pod()))
    r = client.post("/mutate", body, headers={"Content-Type": ctype})
    assert r.status == 415, r
    assert r.text == "gpugate: bad request: Content-Type must be application/json\n", r
    assert r.headers.get("Connection", "").lower() == "close", r.headers


def test_missing_content_type_is_415(server):
    t = raw_tls(server)
    body = json.dumps(make_review(pod())).encode()
    t.sendall(b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Length: %d\r\n\r\n"
              % len(body) + body)
    assert status_of(read_response(t, 5 * SLOW)) == 415
    t.close()


def test_json_content_type_with_charset_is_accepted(client):
    r = client.post("/mutate", make_review(pod()),
                    headers={"Content-Type": "application/json; charset=utf-8"})
    assert r.status == 200, r


# ---------------------------------------------------------------------------
# metrics


def test_metrics_count_requests(client):
    key = 'gpugate_admission_requests_total{endpoint="mutate",kind="Pod",result="allowed"}'
    denied = 'gpugate_admission_requests_total{endpoint="mutate",kind="Pod",result="denied"}'
    vkey = 'gpugate_admission_requests_total{endpoint="validate",kind="Job",result="allowed"}'
    before = metrics(client)
    assert key in before and denied in before
    for _ in range(3):
        assert client.admit("mutate", pod(cls="train-small")).allowed
    assert not client.admit("mutate", pod(cls="bogus")).allowed
    client.admit("validate", {"apiVersion": "batch/v1", "kind": "Job",
                              "metadata": {"name": "j", "namespace": "default"},
                              "spec": {"template": {"spec": {"containers": [container()]}}}},
                 dry_run=True)
    after = metrics(client)
    assert after[key] == before[key] + 3
    assert after[denied] == before[denied] + 1
    assert after[vkey] == before.get(vkey, 0) + 1


def test_metrics_count_denials_by_tenant_flavor_and_rule(client):
    unknown = 'gpugate_denials_total{tenant="research",flavor="-",rule="class-unknown"}'
    never = 'gpugate_denials_total{tenant="research",flavor="h100-80gb",rule="quota"}'
    before = metrics(client)
    for _ in range(2):
        assert not client.admit("mutate", pod(cls="bogus")).allowed
    big = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "j", "namespace": "research", "labels": {CLASS: "train-large"}},
           "spec": {"parallelism": 9, "template": {"spec": {"containers": [container()]}}}}
    assert not client.admit("mutate", big).allowed
    after = metrics(client)
    assert after[unknown] == before.get(unknown, 0) + 2
    assert after[never] == before.get(never, 0) + 1
    assert "# TYPE gpugate_denials_total counter" in client.get("/metrics").text


def test_metrics_duration_histogram(client):
    before = metrics(client)
    client.admit("mutate", pod(cls="train-small"))
    m = metrics(client)
    count = 'gpugate_admission_duration_seconds_count{endpoint="mutate"}'
    assert m[count] >= before.get(count, 0) + 1
    assert 'gpugate_admission_duration_seconds_sum{endpoint="mutate"}' in m
    buckets = [(k, v) for k, v in m.items()
               if k.startswith('gpugate_admission_duration_seconds_bucket{endpoint="mutate"')]
    assert buckets, "no buckets"
    inf = m['gpugate_admission_duration_seconds_bucket{endpoint="mutate",le="+Inf"}']
    assert inf == m[count]
    values = [v for _, v in buckets]
    assert values == sorted(values), "buckets are not cumulative"
    text = client.get("/metrics").text
    assert "# TYPE gpugate_admission_duration_seconds histogram" in text
    assert "# TYPE gpugate_admission_requests_total counter" in text


def test_metrics_quota_and_reloads(client):
    m = metrics(client)
    assert m['gpugate_quota_nominal{tenant="research",flavor="h100-80gb"}'] == 32
    assert m['gpugate_quota_nominal{tenant="product",flavor="a100-1g.10gb"}'] == 112
    assert m['gpugate_quota_nominal{tenant="sandbox",flavor="l4-shared"}'] == 24
    reloads = [k for k in m if k.startswith("gpugate_policy_reloads_total")]
    assert reloads, "gpugate_policy_reloads_total missing"
    assert any('result="' in k for k in reloads), reloads


def test_metrics_quota_used(client):
    m = metrics(client)
    assert 'gpugate_quota_used{tenant="research",flavor="h100-80gb"}' in m


def test_metrics_build_process_readiness_and_certificate(client, server, gpugate_bin):
    """gpugate_build_info says what `gpugate version` says; process_* are
    this process's, read from /proc at the scrape; the certificate's expiry
    under its _timestamp_seconds name and, deprecated, the old one."""
    version = subprocess.run([str(gpugate_bin), "version"], capture_output=True, text=True,
                             timeout=30 * SLOW).stdout
    v, rev = re.fullmatch(r"gpugate (\S+) \((\S+)\)\n", version).groups()
    m = metrics(client)
    assert m[f'gpugate_build_info{{version="{v}",revision="{rev}"}}'] == 1, \
        [k for k in m if k.startswith("gpugate_build_info")]
    assert m["gpugate_ready"] == 1
    expiry = m["gpugate_certificate_expiry_timestamp_seconds"]
    assert m["gpugate_certificate_expiry_seconds"] == expiry
    assert time.time() < expiry < time.time() + 10 * 366 * 86400, expiry
    pid = server.proc.pid

    def proc_stat():  # (CPU seconds, start time) as proc(5) defines them
        tck = os.sysconf("SC_CLK_TCK")
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open("/proc/stat") as f:
            btime = next(int(ln.split()[1]) for ln in f if ln.startswith("btime "))
        # fields[0] is field 3 (state): utime 14, stime 15, starttime 22
        return (int(fields[11]) + int(fields[12])) / tck, btime + int(fields[19]) / tck

    cpu_before, started = proc_stat()
    m = metrics(client)
    cpu_after, _ = proc_stat()
    assert cpu_before - 0.01 <= m["process_cpu_seconds_total"] <= cpu_after + 0.01, \
        (cpu_before, m["process_cpu_seconds_total"], cpu_after)
    assert abs(m["process_start_time_seconds"] - started) < 0.02, \
        (m["process_start_time_seconds"], started)
    with open(f"/proc/{pid}/limits") as f:
        soft = next(ln.split()[3] for ln in f if ln.startswith("Max open files"))
    assert m["process_max_fds"] == (float("inf") if soft == "unlimited" else int(soft))
    # the listening socket, this client's connection, stdio at least; no
    # more than /proc shows (the scrape's own /proc/self/fd aside)
    assert 4 <= m["process_open_fds"] <= len(os.listdir(f"/proc/{pid}/fd")) + 1, \
        m["process_open_fds"]
    assert 1 << 20 < m["process_resident_memory_bytes"] < m["process_virtual_memory_bytes"]


# ---------------------------------------------------------------------------
# hostile input


@pytest.mark.parametrize("body", [b"", b"not json", b"{", b"{\"apiVersion\":", b"\xef\xbb\xbf{}",
                                  b"null", b"[]", b"1e999999"])
def test_non_json_body_is_400(client, body):
    r = client.post("/mutate", body)
    assert r.status == 400, r
    assert r.text.startswith("gpugate: bad request: "), r


@pytest.mark.parametrize("doc", [
    {},
    {"kind": "Pod", "apiVersion": "v1"},
    {"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview",
     "request": {"uid": "x", "operation": "CREATE"}},
    {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"},
    {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": "x"},
    {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
     "request": {"uid": "x", "operation": "EXPLODE"}},
    {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
     "request": {"uid": "x", "operation": "CREATE", "object": "a string"}},
])
def test_json_that_is_not_a_review_is_400(client, doc):
    for ep in ("mutate", "validate"):
        r = client.post(f"/{ep}", doc)
        assert r.status == 400, (ep, r)


@pytest.mark.parametrize("uid", [None, "", 7, "u" * 129])
def test_review_without_usable_uid_is_400(client, uid):
    rv = make_review(pod(cls="train-small"))
    if uid is None:
        del rv["request"]["uid"]
    else:
        rv["request"]["uid"] = uid
    r = client.post("/mutate", rv)
    assert r.status == 400, r
    if uid in (None, "", 7):
        assert "request.uid" in r.text


REVIEW = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}


@pytest.mark.parametrize("body, error", [
    (b"", "body is not valid JSON: no JSON value (line 1, column 1)"),
    (b"{", "body is not valid JSON: string or '}' expected (line 1, column 2)"),
    (b'{"a":1,"a":2}', 'body is not valid JSON: duplicate object key "a" (line 1, column 8)'),
    (b'{"a":"\xff"}', "body is not valid JSON: invalid UTF-8 byte 0xff (line 1, column 7)"),
    (b"[]", "body is not a JSON object"),
    ({}, "kind is not AdmissionReview"),
    ({"kind": "AdmissionReview"},
     "apiVersion is not admission.k8s.io/v1 (set admissionReviewVersions: [v1])"),
    (REVIEW, "review has no request"),
    (dict(REVIEW, request="x"), "review has no request"),
    (dict(REVIEW, request={}), "review has no request.uid"),
    (dict(REVIEW, request={"uid": "u" * 129}), "request.uid is too long"),
    (dict(REVIEW, request={"uid": "u", "kind": "Pod"}), "request.kind is not an object"),
    (dict(REVIEW, request={"uid": "u"}), "review has no request.operation"),
    (dict(REVIEW, request={"uid": "u", "operation": "PATCH"}),
     "request.operation is not CREATE, UPDATE, DELETE or CONNECT"),
    (dict(REVIEW, request={"uid": "u", "operation": "CREATE", "object": 7}),
     "request.object is not an object"),
])
def test_bad_request_bodies_verbatim(client, body, error):
    """docs/operations.md, "HTTP errors": every 400 body, as written there."""
    for ep in ("mutate", "validate"):
        r = client.post(f"/{ep}", body)
        assert r.status == 400, (ep, r)
        assert r.headers.get("Content-Type", "").startswith("text/plain"), r.headers
        assert r.text == f"gpugate: bad request: {error}\n", (ep, r)


def test_body_of_exactly_3_mib_is_accepted(client):
    rv = make_review(pod(cls="train-small", annotations={"pad": ""}))
    base = len(json.dumps(rv).encode())
    rv["request"]["object"]["metadata"]["annotations"]["pad"] = "x" * (SPEC_MIN_CAP - base)
    body = json.dumps(rv).encode()
    assert len(body) == SPEC_MIN_CAP
    r = client.post("/mutate", body)
    assert r.status == 200, r
    resp = r.json()["response"]
    assert resp["uid"] == rv["request"]["uid"] and resp["allowed"] is True
    patched = apply(rv["request"]["object"], decode_patch(resp["patch"]))
    assert patched["metadata"]["annotations"]["pad"] == "x" * (SPEC_MIN_CAP - base)


@pytest.mark.parametrize("declared", [SPEC_MAX_CAP + 1, 9 * MiB, 1 << 40])
def test_oversized_content_length_is_413_before_the_body(server, declared):
    t = raw_tls(server)
    t0 = time.monotonic()
    t.sendall(b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % declared)
    t.sendall(b'{"apiVersion":"admission.k8s.io/v1",' + b" " * 4096)
    data = read_response(t, 5 * SLOW)
    elapsed = time.monotonic() - t0
    t.close()
    assert status_of(data) == 413, data[:300]
    assert elapsed < 2 * SLOW, f"413 took {elapsed:.2f}s: the server waited for the body"
    assert data.endswith(b"\r\n\r\ngpugate: request body too large (%d bytes, at most %d)\n"
                         % (declared, SERVER_BODY_CAP)), data[-200:]


@pytest.mark.parametrize("size", [100, SPEC_MAX_CAP + 2 * MiB])
def test_chunked_bodies_are_refused_at_once(server, size):
    # A chunked body could only be refused once read: gpugate wants its
    # length up front (the kube-apiserver always sends Content-Length).
    t = raw_tls(server)
    t0 = time.monotonic()
    t.sendall(b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
              b"Transfer-Encoding: chunked\r\n\r\n")
    t.sendall(b"%x\r\n" % min(size, 4096) + b" " * min(size, 4096) + b"\r\n")
    data = read_response(t, 5 * SLOW)
    elapsed = time.monotonic() - t0
    t.close()
    assert status_of(data) == 411, data[:300]
    assert b"gpugate: bad request: a Content-Length is required (chunked bodies are not accepted)" in data
    assert elapsed < 2 * SLOW
    with server.client() as c:
        assert c.get("/healthz").status == 200


@pytest.mark.parametrize("request_head, status", [
    (b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
     b"Content-Length: abc\r\n\r\n", 400),
    (b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414),
    (b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n", 431),
    (b"GET /healthz HTTP/2.0\r\nHost: x\r\n\r\n", 505),
    # no answer at all: the connection is closed
    (b"GARBAGE\r\n\r\n", None),
    (b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
     b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", None),
], ids=["content-length-not-a-number", "uri-over-16k", "headers-over-16k",
        "http-2.0", "garbage", "length-and-chunked"])
def test_http_errors_from_libmicrohttpd(server, request_head, status):
    """Malformed HTTP is answered by libmicrohttpd itself (HTML bodies),
    before gpugate sees a request (docs/operations.md, "HTTP errors")."""
    t = raw_tls(server)
    t.sendall(request_head)
    data = read_response(t, 5 * SLOW)
    t.close()
    assert status_of(data) == status, data[:300]
    with server.client() as c:
        assert c.get("/healthz").status == 200


def test_readyz_is_503_until_usage_is_synced(fresh_server, tmp_path):
    # A Kubernetes API that cannot be reached: gpugate serves, but is not
    # ready (a replica that has not listed usage would admit against an
    # empty ledger).
    kc = tmp_path / "kubeconfig"
    kc.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\n")
    srv = fresh_server(extra_args=("--kubeconfig", str(kc)))
    with srv.client() as c:
        r = c.get("/readyz")
        assert r.status == 503, r
        assert r.text == "quota usage not synced from the Kubernetes API yet\n", r
        assert c.get("/healthz").status == 200


def _short_lived_certs(d, seconds: float) -> Certs:
    """A self-signed serving certificate for localhost that expires in
    `seconds` (`openssl ca` is the one tool that sets an end date to the
    second; gpugate certs counts in days)."""
    d.mkdir()
    (d / "index.txt").write_text("")
    (d / "serial").write_text("01\n")
    (d / "ca.cnf").write_text(
        "[ca]\ndefault_ca = d\n[d]\ndatabase = index.txt\nnew_certs_dir = .\n"
        "serial = serial\ndefault_md = sha256\npolicy = p\ncopy_extensions = copy\n"
        "[p]\ncommonName = supplied\n")
    end = time.strftime("%Y%m%d%H%M%SZ", time.gmtime(time.time() + seconds))
    for cmd in (["openssl", "req", "-new", "-newkey", "ec", "-pkeyopt",
                 "ec_paramgen_curve:P-256", "-nodes", "-keyout", "tls.key", "-subj",
                 "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                 "-out", "tls.csr"],
                ["openssl", "ca", "-batch", "-config", "ca.cnf", "-selfsign", "-keyfile",
                 "tls.key", "-in", "tls.csr", "-out", "tls.crt", "-startdate",
                 "20200101000000Z", "-enddate", end]):
        p = subprocess.run(cmd, cwd=d, capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, p.stderr
    return Certs(d, "")


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl tool")
def test_readyz_is_503_once_the_certificate_expired(fresh_server, tmp_path):
    lifetime = 3 + 3 * SLOW
    certs = _short_lived_certs(tmp_path / "pki", lifetime)
    expires = time.time() + lifetime
    srv = fresh_server(own_certs=certs)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # the certificate is about to expire
    data, _, _, _ = _get_over(srv, ctx, "localhost", "/readyz")
    assert status_of(data) == 200, data
    time.sleep(max(0.0, expires - time.time()) + 1.5)
    data, _, _, _ = _get_over(srv, ctx, "localhost", "/readyz")
    assert status_of(data) == 503, data
    assert data.endswith(b"\r\n\r\ncertificate expired\n"), data
    data, _, _, _ = _get_over(srv, ctx, "localhost", "/healthz")
    assert status_of(data) == 200, data


@pytest.mark.parametrize("bad", [b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80"])
def test_invalid_utf8_is_400(client, bad):
    rv = json.dumps(make_review(pod(cls="train-small", annotations={"n": "PLACEHOLDER"}))).encode()
    body = rv.replace(b"PLACEHOLDER", bad)
    r = client.post("/mutate", body)
    assert r.status == 400, r


@pytest.mark.parametrize("opener", [b"[", b'{"a":'])
def test_deeply_nested_json_is_400(client, server, opener):
    r = client.post("/mutate", opener * 100000)
    assert r.status == 400, r
    assert server.alive
    assert client.get("/healthz").status == 200


def test_deeply_nested_object_inside_a_review_is_handled(client):
    rv = json.dumps(make_review(pod(cls="train-small", annotations={"n": "X"}))).encode()
    nested = b"[" * 1500 + b"]" * 1500
    r = client.post("/mutate", rv.replace(b'"X"', nested))
    assert r.status in (200, 400), r
    if r.status == 200:
        assert r.json()["response"]["allowed"] is False  # annotations must be strings
    assert client.get("/healthz").status == 200


@pytest.mark.parametrize("where", ["top", "request", "object"])
def test_duplicate_keys_are_400(client, where):
    rv = make_review(pod(cls="train-small"))
    body = json.dumps(rv)
    if where == "top":
        body = body.replace('"kind": "AdmissionReview"',
                            '"kind": "AdmissionReview", "kind": "AdmissionReview"', 1)
    elif where == "request":
        body = body.replace('"operation": "CREATE"',
                            '"operation": "CREATE", "operation": "DELETE"', 1)
    else:
        body = body.replace('"gpugate.io/class": "train-small"',
                            '"gpugate.io/class": "train-small", "gpugate.io/class": "train-large"', 1)
    assert body.count('"kind"') > 0
    r = client.post("/mutate", body)
    assert r.status == 400, r
    assert "duplicate" in r.text


def test_object_kind_mismatch_is_denied_with_400(client):
    obj = pod(cls="train-small")
    obj["kind"] = "Job"
    obj["apiVersion"] = "batch/v1"
    for ep in ("mutate", "validate"):
        a = client.admit(ep, obj, kind="Pod")
        assert a.allowed is False and a.code == 400, a
        assert a.message == "gpugate: request.object is not a Pod (request.kind says Pod)", a
        assert a.resp["status"].get("reason") == "BadRequest"


@pytest.mark.parametrize("mangle, fragment", [
    (lambda o: o["spec"].__setitem__("containers", {"a": 1}), "spec.containers is not a list"),
    (lambda o: o["metadata"].__setitem__("labels", ["x"]), "metadata.labels is not an object"),
    (lambda o: o["metadata"]["labels"].__setitem__("n", 5), "is not a string"),
    (lambda o: o.__setitem__("spec", "x"), "spec is not an object"),
])
def test_malformed_object_is_denied_with_400(client, mangle, fragment):
    obj = pod(cls="train-small")
    mangle(obj)
    a = client.admit("mutate", obj)
    assert a.allowed is False and a.code == 400, a
    assert a.message.startswith("gpugate: malformed Pod: "), a.message
    assert fragment in a.message, a.message


def test_malformed_job_parallelism_is_denied_with_400(client):
    a = client.admit("mutate", job(labels={"gpugate.io/class": "train-large"}, parallelism=-1))
    assert a.allowed is False and a.code == 400, a
    assert a.message == ("gpugate: malformed Job: spec.parallelism is not a whole number "
                         "from 0 to 100000"), a


@pytest.mark.parametrize("obj, message", [
    (pod(cls="train-small", tolerations={}),
     "gpugate: cannot mutate the Pod: tolerations is not a list"),
    (job(labels={"gpugate.io/class": "train-large"}, parallelism=2, affinity=5),
     "gpugate: cannot mutate the Job: affinity is not an object"),
])
def test_object_gpugate_cannot_extend_is_denied_with_400(client, obj, message):
    # A field gpugate adds to has a type the apiserver would never let
    # through; the review is answered, not dropped.
    a = client.admit("mutate", obj)
    assert a.allowed is False and a.code == 400, a
    assert a.message == message, a
    assert a.resp["status"].get("reason") == "BadRequest"


@pytest.mark.parametrize("ep", ["mutate", "validate"])
def test_malformed_old_object_is_denied_with_400(client, ep):
    now = pod(cls="train-small")
    old = pod(cls="train-small")
    old["spec"]["containers"] = "x"
    a = client.admit(ep, now, operation="UPDATE", old=old, dry_run=True)
    assert a.allowed is False and a.code == 400, a
    assert a.message == "gpugate: malformed old Pod: spec.containers is not a list", a


def test_create_without_object_is_denied_with_400(client):
    a = client.admit("mutate", None, kind="Pod", namespace="research", name="x")
    assert a.allowed is False and a.code == 400, a
    assert a.message == "gpugate: CREATE of a Pod without request.object", a


@pytest.mark.parametrize("ep", ["mutate", "validate"])
def test_truncated_message_with_utf8_annotation(client, ep):
    # Annotation values are free text: the apiserver accepts any UTF-8.
    obj = pod(cls="train-small", annotations={"gpugate.io/container": "é" * 40})
    r = client.post(f"/{ep}", make_review(obj, dry_run=True))
    assert r.status == 200, r
    resp = r.json()["response"]
    assert resp["allowed"] is False
    assert resp["status"]["message"].startswith(
        "gpugate: annotation gpugate.io/container names container \"ééé")


def test_nul_escape_in_annotation_is_valid_json(client):
    obj = pod(cls="train-small", annotations={"note": "a\u0000b"})
    r = client.post("/mutate", make_review(obj))
    assert r.status == 200, r


def test_server_still_healthy_after_hostile_input(server, client):
    assert server.alive
    assert client.get("/healthz").status == 200
    assert client.admit("mutate", pod(cls="train-small")).allowed


# ---------------------------------------------------------------------------
# TLS


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1])
def test_old_tls_versions_refused(server, version):
    ctx = tls_context(server.certs, version, version)
    # Let the client offer the old version at all (OpenSSL 3 forbids it at
    # the default security level), so that the refusal is the server's.
    ctx.set_ciphers("ALL:@SECLEVEL=0")
    s = socket.create_connection(("127.0.0.1", server.port), timeout=5 * SLOW)
    with pytest.raises((ssl.SSLError, ConnectionResetError)) as e:
        with ctx.wrap_socket(s, server_hostname="localhost"):
            pass
    s.close()
    assert "NO_PROTOCOLS_AVAILABLE" not in str(e.value), "the client refused, not the server"


def _get_over(server, ctx: ssl.SSLContext, host: str, path: str = "/healthz"):
    """One GET over a fresh TLS connection; returns (response bytes, the
    negotiated version, cipher, peer certificate)."""
    s = socket.create_connection(("127.0.0.1", server.port), timeout=5 * SLOW)
    with ctx.wrap_socket(s, server_hostname=host) as t:
        t.sendall(b"GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (path.encode(), host.encode()))
        data = read_response(t, 5 * SLOW)
        return data, t.version(), t.cipher(), t.getpeercert()


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3])
def test_tls_12_and_13_accepted(server, version):
    data, got, cipher, _ = _get_over(server, tls_context(server.certs, version, version),
                                     "localhost")
    assert status_of(data) == 200, data
    assert got == {ssl.TLSVersion.TLSv1_2: "TLSv1.2", ssl.TLSVersion.TLSv1_3: "TLSv1.3"}[version]
    if version == ssl.TLSVersion.TLSv1_2:
        # AEAD with forward secrecy only
        assert "GCM" in cipher[0] or "CHACHA20" in cipher[0], cipher
        assert cipher[0].startswith("ECDHE"), cipher


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3])
def test_admission_over_each_tls_version(server, version):
    with Client(server, context=tls_context(server.certs, version, version)) as c:
        assert c.admit("mutate", pod(cls="train-small")).allowed


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1"])
def test_certificate_names_verify(server, host):
    data, _, _, cert = _get_over(server, tls_context(server.certs), host)
    assert status_of(data) == 200, data
    san = cert["subjectAltName"]
    assert ("DNS", "localhost") in san and ("IP Address", "127.0.0.1") in san
    with server.client(host=host) as c:  # the keep-alive client, by either name
        assert c.admit("mutate", pod(cls="train-small")).allowed


def test_admission_connections_are_kept_alive(server):
    with server.client() as c:
        for _ in range(5):
            assert c.admit("mutate", pod(cls="train-small")).allowed
            assert c.admit("validate", pod(cls=None), dry_run=True).allowed
        assert c.connects == 1


def test_certificate_does_not_verify_for_other_names(server):
    s = socket.create_connection(("127.0.0.1", server.port), timeout=5 * SLOW)
    with pytest.raises(ssl.SSLCertVerificationError):
        tls_context(server.certs).wrap_socket(s, server_hostname="gpugate.example.com")
    s.close()


def test_plain_http_is_not_served(server):
    s = socket.create_connection(("127.0.0.1", server.port), timeout=5 * SLOW)
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
    s.settimeout(3 * SLOW)
    try:
        data = s.recv(4096)
    except (ConnectionResetError, socket.timeout, TimeoutError):
        data = b""
    s.close()
    assert b"200" not in data and b"ok" not in data
    with server.client() as c:
        assert c.get("/healthz").status == 200


# ---------------------------------------------------------------------------
# concurrency


def test_concurrent_keep_alive_clients(server):
    threads, per_thread = 8, 200
    mut_obj = pod("conc", "research", cls="train-small", gpus="2")
    with server.client() as c:
        ref = c.admit("mutate", mut_obj)
    ref_patch = ref.patch
    patched = ref.patched()
    errors: list[str] = []
    connects: list[int] = []

    def work(n: int) -> None:
        c = server.client(timeout=30)
        try:
            for i in range(per_thread):
                uid = f"t{n}-{i}-{new_uid()}"
                if (i + n) % 2 == 0:
                    out = c.review("mutate", make_review(mut_obj, uid=uid))
                    resp = out["response"]
                    got = decode_patch(resp["patch"]) if "patch" in resp else None
                    if resp["uid"] != uid or not resp["allowed"] or got != ref_patch:
                        errors.append(f"mutate {uid}: {resp}")
                else:
                    out = c.review("validate", make_review(patched, uid=uid, dry_run=True))
                    resp = out["response"]
                    if resp["uid"] != uid or not resp["allowed"] or len(resp.get("warnings", [])) != 1:
                        errors.append(f"validate {uid}: {resp}")
            connects.append(c.connects)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"thread {n}: {type(e).__name__}: {e}")
        finally:
            c.close()

    ts = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
    t0 = time.monotonic()
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=120 * SLOW)
    assert not any(t.is_alive() for t in ts), "clients hung"
    assert not errors, f"{len(errors)} errors, first: {errors[:3]}"
    assert connects == [1] * threads, f"keep-alive not kept: connections per client {connects}"
    assert time.monotonic() - t0 < 60 * SLOW


# ---------------------------------------------------------------------------
# graceful shutdown


def test_sigterm_with_idle_keep_alive_connection(fresh_server):
    srv = fresh_server()
    c = srv.client()
    assert c.get("/healthz").status == 200  # the connection stays open
    t0 = time.monotonic()
    rc = srv.terminate(timeout=5 * SLOW)
    assert rc == 0, f"exit {rc}; stderr:\n{srv.stderr_tail()}"
    assert time.monotonic() - t0 < 5 * SLOW
    c.close()
    assert not srv.sanitizer_report(), srv.stderr_tail(80)
    assert 'msg="stopped"' in srv.stderr_text()


def test_sigterm_lets_a_request_in_progress_finish(fresh_server):
    srv = fresh_server()
    body = json.dumps(make_review(pod(cls="train-small"))).encode()
    t = raw_tls(srv)
    t.sendall(b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(body) + body[:100])
    time.sleep(0.3 * SLOW)  # the server has the headers: the request is in flight
    srv.proc.send_signal(signal.SIGTERM)
    time.sleep(0.5 * SLOW)
    assert srv.alive, "the server quit with a request in flight"
    # It has stopped accepting: a new connection is refused (or never served).
    try:
        late = raw_tls(srv, timeout=2)
    except (OSError, ssl.SSLError):
        pass
    else:
        late.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        assert status_of(read_response(late, 2)) is None, "served a new connection after SIGTERM"
        late.close()
    t.sendall(body[100:])
    data = read_response(t, 5 * SLOW)
    t.close()
    assert status_of(data) == 200, data[:300]
    assert json.loads(data.partition(b"\r\n\r\n")[2])["response"]["allowed"] is True
    assert srv.proc.wait(timeout=10 * SLOW) == 0
    assert not srv.sanitizer_report(), srv.stderr_tail(80)


def test_sigterm_gives_up_on_a_stalled_request(fresh_server):
    # A client that never finishes its body cannot hold the server past the
    # grace period (10 s in serve.c) plus a margin.
    srv = fresh_server()
    t = raw_tls(srv)
    t.sendall(b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
              b"Content-Length: 1000\r\n\r\n{")
    time.sleep(0.3 * SLOW)
    t0 = time.monotonic()
    rc = srv.terminate(timeout=15 * SLOW)
    t.close()
    assert rc == 0, f"exit {rc}; stderr:\n{srv.stderr_tail()}"
    assert time.monotonic() - t0 < 13 * SLOW


# ---------------------------------------------------------------------------
# reloads (SPEC 7: policy and certificate reloaded when they change on disk)


def _wait_metric(client, key: str, want: float, timeout: float = 10.0) -> dict:
    deadline = time.monotonic() + timeout * SLOW
    while True:
        m = metrics(client)
        if m.get(key) == want or time.monotonic() > deadline:
            return m
        time.sleep(0.2)


def _replace(path, text: str) -> None:
    """Atomically, as a ConfigMap or Secret volume update does."""
    tmp = path.with_name(path.name + ".new")
    tmp.write_text(text)
    tmp.replace(path)


def test_policy_reload_and_bad_policy_refused(fresh_server, tmp_path):
    from conftest import CUSTOM_POLICY
    policy = tmp_path / "policy.yaml"
    policy.write_text(CUSTOM_POLICY)
    srv = fresh_server(policy)
    ok = 'gpugate_policy_reloads_total{result="success"}'
    bad = 'gpugate_policy_reloads_total{result="failure"}'
    with srv.client() as c:
        assert c.admit("mutate", pod(namespace="strict", cls="train-small")).allowed
        # namespace "strict" moves to a new name: a good policy, reloaded
        _replace(policy, CUSTOM_POLICY.replace("namespaces: [strict]", "namespaces: [strict-2]"))
        m = _wait_metric(c, ok, 1)
        assert m[ok] == 1 and m[bad] == 0, m
        a = c.admit("mutate", pod(namespace="strict", cls="train-small"))
        assert not a.allowed and "belongs to no tenant" in a.message, a
        assert c.admit("mutate", pod(namespace="strict-2", cls="train-small")).allowed
        # a broken policy is refused and the last good one kept
        _replace(policy, CUSTOM_POLICY + "\nbogus: key\n")
        m = _wait_metric(c, bad, 1)
        assert m[bad] == 1 and m[ok] == 1, m
        assert c.admit("mutate", pod(namespace="strict-2", cls="train-small")).allowed
        assert c.get("/healthz").status == 200
    assert "policy reload refused" in srv.stderr_text()


def _served_cert(server) -> bytes:
    s = socket.create_connection(("127.0.0.1", server.port), timeout=5 * SLOW)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # only to read which certificate is served
    with ctx.wrap_socket(s, server_hostname="localhost") as t:
        return t.getpeercert(binary_form=True)


def test_certificate_reload(fresh_server, gpugate_bin, tmp_path):
    from conftest import make_certs
    first = make_certs(gpugate_bin, tmp_path / "first")
    srv = fresh_server(own_certs=first)
    second = make_certs(gpugate_bin, tmp_path / "second")  # a new CA too
    with srv.client() as c:  # an open keep-alive connection survives the swap
        assert c.admit("mutate", pod(cls="train-small")).allowed
        old = _served_cert(srv)
        _replace(first.key, second.key.read_text())
        _replace(first.cert, second.cert.read_text())
        deadline = time.monotonic() + 10 * SLOW
        while _served_cert(srv) == old and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _served_cert(srv) != old, "the new certificate is not served"
        assert c.admit("mutate", pod(cls="train-small")).allowed
        assert c.connects == 1
    # New handshakes get the new certificate: it verifies with the new CA
    # and no longer with the old one.
    data, _, _, _ = _get_over(srv, tls_context(second), "localhost", "/metrics")
    assert status_of(data) == 200
    assert b'gpugate_certificate_reloads_total{result="success"} 1' in data
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=5 * SLOW)
    with pytest.raises(ssl.SSLCertVerificationError):
        tls_context(first).wrap_socket(s, server_hostname="localhost")
    s.close()


# ---------------------------------------------------------------------------
# workers


def test_connections_opened_together_are_spread_over_the_workers(fresh_server):
    """gpugate accepts and hands connections to libmicrohttpd, which puts
    them on worker (fd mod workers): 8 connections opened one after the
    other are served 4 and 4, as /metrics shows. (When the workers accepted
    for themselves, one of them could get them all.)"""
    srv = fresh_server(extra_args=("--threads", "2"))
    names = [f'gpugate_http_worker_requests_total{{worker="{i}"}}' for i in (0, 1)]
    with srv.client() as c:
        before = metrics(c)
    conns = []
    for _ in range(8):
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=10 * SLOW)
        conns.append(srv.ssl_context().wrap_socket(s, server_hostname="localhost"))
    for t in conns:
        t.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    for t in conns:
        assert status_of(t.recv(4096)) == 200
        t.close()
    with srv.client() as c:
        after = metrics(c)
    served = [after[n] - before[n] for n in names]
    # 8 health checks, 4 on each worker, and the second /metrics request
    assert sorted(served) == [4, 5], served
