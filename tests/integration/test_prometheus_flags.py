"""The flags of gpugate serve that wire the idle controller to Prometheus
(--prometheus-url, --prometheus-bearer-token-file, --prometheus-ca,
--idle-interval): refused on the command line when malformed, a start
error naming the flag when a file cannot be read, and said at start in API
mode.  What the idle controller does with them is tested over the fake
Prometheus elsewhere.
"""

from __future__ import annotations

import subprocess

import pytest

from conftest import EXAMPLE_POLICY, ROOT, SLOW, metrics, poll
from test_watch import kube  # noqa: F401  (the fixture)

HINT = "gpugate serve --help lists the flags"


def serve(binary, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(binary), "serve", *args], capture_output=True, text=True,
                          timeout=60 * SLOW, cwd=ROOT, stdin=subprocess.DEVNULL,
                          env={"PATH": "/usr/bin:/bin"})


def base(certs) -> list[str]:
    return ["--policy", str(EXAMPLE_POLICY), "--tls-cert", str(certs.cert),
            "--tls-key", str(certs.key), "--listen", "127.0.0.1:0"]


@pytest.mark.parametrize("args, error", [
    (["--prometheus-url", "prometheus:9090"],
     "--prometheus-url must be http://HOST:PORT or https://HOST:PORT "
     "(got 'prometheus:9090')"),
    (["--prometheus-url", "ftp://prometheus"],
     "--prometheus-url must be http://HOST:PORT or https://HOST:PORT "
     "(got 'ftp://prometheus')"),
    (["--idle-interval", "9"], "--idle-interval must be 10..3600 seconds"),
    (["--idle-interval", "3601"], "--idle-interval must be 10..3600 seconds"),
    (["--idle-interval", "1m"], "--idle-interval must be 10..3600 seconds"),
    (["--prometheus-ca", "/etc/ssl/certs/ca-certificates.crt"],
     "--prometheus-bearer-token-file and --prometheus-ca need --prometheus-url"),
    (["--prometheus-bearer-token-file", "/dev/null"],
     "--prometheus-bearer-token-file and --prometheus-ca need --prometheus-url"),
    (["--prometheus-url", "http://prometheus:9090", "--embedded"],
     "--prometheus-url needs the API, not --embedded"),
])
def test_usage_errors(gpugate_bin, certs, args, error):
    p = serve(gpugate_bin, *base(certs), *args)
    assert (p.returncode, p.stdout) == (2, ""), p
    last = p.stderr.strip().splitlines()[-1]
    assert last.endswith(f'level=error msg="not starting" error="gpugate serve: {error}" '
                         f'hint="{HINT}"'), p.stderr


def test_unreadable_files_are_start_errors_naming_the_flag(gpugate_bin, certs, tmp_path):
    missing = tmp_path / "token"
    not_pem = tmp_path / "ca.crt"
    not_pem.write_text("hello\n")
    empty = tmp_path / "empty"
    empty.write_text("\n")
    url = ["--prometheus-url", "https://prometheus.monitoring:9090"]
    cases = [
        (["--prometheus-bearer-token-file", str(missing)],
         f"gpugate serve: --prometheus-bearer-token-file: {missing}: cannot open: "
         "No such file or directory"),
        (["--prometheus-bearer-token-file", str(empty)],
         f"gpugate serve: --prometheus-bearer-token-file: {empty}: empty"),
        (["--prometheus-ca", str(tmp_path / "none.crt")],
         f"gpugate serve: --prometheus-ca: {tmp_path / 'none.crt'}: cannot open: "
         "No such file or directory"),
        (["--prometheus-ca", str(not_pem)],
         f"gpugate serve: --prometheus-ca: {not_pem}: no PEM certificate in it"),
    ]
    for args, want in cases:
        p = serve(gpugate_bin, *base(certs), *url, *args)
        assert (p.returncode, p.stdout) == (1, ""), (args, p)
        assert f'error="{want}"' in p.stderr, (args, p.stderr)


def test_said_at_start_with_the_api(kube, fresh_server, certs, tmp_path):  # noqa: F811
    token = tmp_path / "token"
    token.write_text("a-token\n")
    srv = fresh_server(extra_args=(
        "--kubeconfig", str(kube.kubeconfig),
        "--prometheus-url", "http://127.0.0.1:1",
        "--prometheus-bearer-token-file", str(token),
        "--prometheus-ca", str(certs.ca),
        "--idle-interval", "30"))
    with srv.client() as c:
        poll(lambda: c.get("/readyz").status == 200, "/readyz 200")
        assert metrics(c) is not None
    log = srv.stderr_path.read_text()
    said = [ln for ln in log.splitlines() if 'msg="idle GPUs from Prometheus"' in ln]
    assert len(said) == 1, log
    assert (f"url=http://127.0.0.1:1 token={token} ca={certs.ca} idle_interval_s=30"
            in said[0]), said
    assert "a-token" not in log
