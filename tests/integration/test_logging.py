"""--log-format json: every line gpugate serve writes on stderr is one JSON
object with ts, level and msg, from the first (which names the version) to
the last, start-up errors included; and the same start-up errors in logfmt
by default.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
from pathlib import Path

from conftest import EXAMPLE_POLICY, ROOT, SLOW, VALGRIND, _start, metrics
from objects import pod

VERSION = (ROOT / "VERSION").read_text().strip()
HINT = "gpugate serve --help lists the flags"


def gpugate_lines(stderr: str) -> list[str]:
    """stderr without valgrind's own lines (GPUGATE_VALGRIND=1)."""
    return [ln for ln in stderr.splitlines()
            if not (VALGRIND and re.match(r"==\d+==", ln))]


def json_lines(stderr: str) -> list[dict]:
    """Every line parsed as one JSON object with ts, level and msg strings."""
    lines = gpugate_lines(stderr)
    assert lines, "nothing on stderr"
    out = []
    for ln in lines:
        try:
            obj = json.loads(ln)
        except ValueError as e:
            raise AssertionError(f"not JSON: {ln!r}: {e}") from None
        assert isinstance(obj, dict), ln
        for key in ("ts", "level", "msg"):
            assert isinstance(obj.get(key), str), (key, ln)
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", obj["ts"]), ln
        assert list(obj)[:3] == ["ts", "level", "msg"], ln
        out.append(obj)
    return out


def assert_starts_with_version(events: list[dict]) -> None:
    first = events[0]
    assert (first["level"], first["msg"], first["version"]) == \
        ("info", "gpugate starting", VERSION), first
    assert first["revision"], first


def serve(binary: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(binary), "serve", *args], capture_output=True, text=True,
                          timeout=60 * SLOW, cwd=ROOT, stdin=subprocess.DEVNULL)


def serve_args(certs, policy: Path | str = EXAMPLE_POLICY) -> list[str]:
    return ["--policy", str(policy), "--tls-cert", str(certs.cert), "--tls-key",
            str(certs.key), "--listen", "127.0.0.1:0", "--embedded"]


def errors(events: list[dict]) -> list[str]:
    return [e["error"] for e in events if e["level"] == "error"]


def test_bad_flags_in_json(gpugate_bin):
    cases = [
        (["--bogus"], "gpugate serve: unknown option '--bogus'"),
        (["-x"], "gpugate serve: unknown option '-x'"),
        (["--policy"], "gpugate serve: option '--policy' needs a value"),
        (["--threads", "0"], "gpugate serve: --threads must be 1..256"),
        (["--usage-store", "disk"],
         "gpugate serve: --usage-store wants memory, shared or leader, not 'disk'"),
        (["--usage-store", "memroy"], "gpugate serve: --usage-store wants memory, shared or leader, "
         "not 'memroy' (did you mean \"memory\"?)"),
        (["extra"], "gpugate serve: unexpected argument 'extra'"),
        ([], "gpugate serve: --policy, --tls-cert and --tls-key are required"),
    ]
    for args, want in cases:
        # --log-format before or after the bad flag: the same
        for argv in (["--log-format", "json", *args], [*args, "--log-format=json"]):
            if args == ["--policy"] and argv[0] == "--policy":
                argv = ["--log-format=json", "--policy"]
            p = serve(gpugate_bin, *argv)
            assert (p.returncode, p.stdout) == (2, ""), (argv, p)
            events = json_lines(p.stderr)
            assert_starts_with_version(events)
            assert [(e["level"], e["msg"], e["error"], e["hint"]) for e in events[1:]] == \
                [("error", "not starting", want, HINT)], (argv, p.stderr)


def test_bad_log_format_is_said_in_logfmt(gpugate_bin):
    p = serve(gpugate_bin, "--log-format", "yaml")
    assert (p.returncode, p.stdout) == (2, "")
    lines = gpugate_lines(p.stderr)
    assert len(lines) == 2, p.stderr
    assert re.fullmatch(r'ts=\S+ level=info msg="gpugate starting" version=' +
                        re.escape(VERSION) + r" revision=\S+", lines[0]), lines
    assert lines[1].endswith(
        ' level=error msg="not starting" error="gpugate serve: --log-format must be '
        'logfmt or json (got \\"yaml\\")" hint="' + HINT + '"'), lines


def test_an_abbreviated_log_format_counts_from_where_getopt_reads_it(gpugate_bin):
    p = serve(gpugate_bin, "--log-f", "json", "--threads", "0")
    lines = gpugate_lines(p.stderr)
    assert p.returncode == 2 and ' msg="gpugate starting" ' in lines[0], p.stderr
    assert json_lines("\n".join(lines[1:]))[0]["error"] == \
        "gpugate serve: --threads must be 1..256", p.stderr
    p = serve(gpugate_bin, "--log-f", 'x"y')
    assert p.returncode == 2 and gpugate_lines(p.stderr)[-1].endswith(
        'error="gpugate serve: --log-format must be logfmt or json (got \\"x\\"y\\")" '
        f'hint="{HINT}"'), p.stderr


def test_bad_policy_certificate_key_kubeconfig_and_port_in_json(gpugate_bin, certs, tmp_path):
    bad_policy = tmp_path / "policy.yaml"
    bad_policy.write_text('version: 1\nflavors: []\nclasses:\n  - {name: "a b", flavor: x}\n'
                          "tenants: []\n")
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a \"certificate\"\n\tat all\n")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: []\n")
    base = serve_args(certs)
    cases = {
        "policy": ([*serve_args(certs, bad_policy), "--log-format", "json"],
                   "gpugate serve: the policy is invalid; not starting"),
        "missing policy": ([*serve_args(certs, tmp_path / "none.yaml"), "--log-format",
                            "json"], f"{tmp_path / 'none.yaml'}: cannot open: No such file "
                                     "or directory"),
        "certificate": ([*base[:2], "--tls-cert", str(garbage), *base[4:], "--log-format",
                         "json"], str(garbage)),
        "kubeconfig": ([*base[:-1], "--kubeconfig", str(kubeconfig), "--log-format", "json"],
                       str(kubeconfig)),
        "key": ([*base[:4], "--tls-key", str(garbage), *base[6:], "--log-format", "json"],
                f"{garbage}: no PEM private key found"),
    }
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    cases["port"] = ([*base[:6], "--listen", f"127.0.0.1:{port}", "--embedded",
                      "--log-format", "json"],
                     f"cannot listen on 127.0.0.1:{port}: Address already in use")
    with taken:
        results = {what: serve(gpugate_bin, *args) for what, (args, _) in cases.items()}
    for what, (args, want) in cases.items():
        p = results[what]
        assert (p.returncode, p.stdout) == (1, ""), (what, p)
        events = json_lines(p.stderr)
        assert_starts_with_version(events)
        errs = errors(events)
        assert errs and all(e["msg"] == "not starting" for e in events
                            if e["level"] == "error"), (what, p.stderr)
        assert any(want in e for e in errs), (what, want, errs)
    # The policy's own errors are there too, one event per line, located.
    p = serve(gpugate_bin, *cases["policy"][0])
    errs = errors(json_lines(p.stderr))
    assert any(e.startswith(f"{bad_policy}:4:") for e in errs), errs


def test_bad_policy_in_logfmt_by_default(gpugate_bin, certs, tmp_path):
    p = serve(gpugate_bin, *serve_args(certs, tmp_path / "none.yaml"))
    assert p.returncode == 1
    lines = gpugate_lines(p.stderr)
    assert ' msg="gpugate starting" version=' in lines[0], lines
    assert lines[1:] == [
        lines[1][:lines[1].index(" level=")] +
        f' level=error msg="not starting" error="{tmp_path / "none.yaml"}: cannot open: '
        'No such file or directory"',
        lines[2][:lines[2].index(" level=")] +
        ' level=error msg="not starting" error="gpugate serve: the policy is invalid; '
        'not starting"'], lines


def test_a_whole_run_in_json(gpugate_bin, certs, tmp_path):
    """Start, admissions (one denied: its message has quotes), stop: every
    line JSON, the admission's fields as the logfmt line has them."""
    s = _start(gpugate_bin, certs, EXAMPLE_POLICY, tmp_path / "srv",
               ("--embedded", "--log-format", "json"))
    try:
        c = s.client()
        assert c.admit("mutate", pod(cls="train-small"), dry_run=True).allowed
        assert not c.admit("mutate", pod(cls="no-such-class"), dry_run=True).allowed
        assert metrics(c)["gpugate_ready"] == 1
    finally:
        s.stop_and_check()
    events = json_lines(s.stderr_text())
    assert_starts_with_version(events)
    msgs = [e["msg"] for e in events]
    assert msgs[1:3] == ["embedded usage", "serving"] and msgs[-2:] == ["stopping", "stopped"], \
        msgs
    denied = [e for e in events if e["msg"] == "admission" and e.get("result") == "denied"]
    assert len(denied) == 1, events
    assert denied[0]["rule"] == "class-unknown" and '"no-such-class"' in \
        denied[0]["message"], denied
