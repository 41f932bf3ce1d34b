"""gpugate's process life against a real API server: usage is rebuilt from the
API after a restart, a dead API server keeps it unready (never admitting
against an empty ledger), and SIGTERM always ends it cleanly."""

from __future__ import annotations

import socket
import time

from gpugate_e2e import Gate, job, pod
from test_kubectl_admission import warning
from test_kubectl_jobs import set_phase, steady_used, wait_job_pods


def test_restart_rebuilds_usage_from_the_api(stack, kubectl, clean, files):
    """Tenant durable (nominal 16): a Job of 3 x 2, a pod of 3, a Succeeded
    pod of 4 (holds nothing) = 9 in use.  A new gpugate process knows it
    as soon as it is ready, before any admission."""
    clean("durable")
    old = stack.gates["quota"]
    r = kubectl.apply_file(files / "job.yaml", job("keep", "durable", "gpu", 2, parallelism=3))
    assert r.rc == 0, r
    for name, gpus in (("solo-3", 3), ("done-4", 4)):
        r = kubectl.apply_file(files / f"{name}.yaml", pod(name, "durable", "gpu", gpus))
        assert r.rc == 0, r
    wait_job_pods(kubectl, "keep", "durable", 3)
    set_phase(kubectl, "durable", "done-4", "Succeeded")
    steady_used(old, "durable", 9, 1.0)

    new, problems = stack.restart_gate("quota")
    assert problems == [], "\n".join(problems)  # the old one: SIGTERM -> exit 0, clean
    assert old.exit_code == 0
    assert new.port != 0
    # /readyz was 200 (restart_gate waited for it): usage is already true
    assert new.quota_used("durable") == 9
    assert "gpugate_kube_synced 1" in new.metrics()

    # and the webhooks now go to the new process, which counts from 9
    r = kubectl.apply_file(files / "after.yaml", pod("after", "durable", "gpu", 1))
    assert (r.rc, r.out) == (0, "pod/after created\n"), r
    assert r.err == warning("gpugate: gpu -> 1 x h100-80gb for tenant durable (10/16 in use)")
    steady_used(new, "durable", 10, 1.0)
    # the Job's pods are still covered by the Job, not charged on their own
    r = kubectl("delete", "job", "keep", "-n", "durable", "--cascade=foreground")
    assert r.rc == 0, r
    new.wait_used("durable", 4)


def test_gpugate_down_means_fail_closed(stack, kubectl, clean, files):
    """failurePolicy Fail: while no gpugate answers, Pods in tenant
    namespaces cannot be created (no unchecked GPU work), kube-system is
    unaffected; a new gpugate on the same port brings admission back."""
    clean("solo")
    gate = stack.gates["quota"]
    port = gate.port
    problems = gate.stop_and_check()
    stack.retired.append(gate)
    assert problems == [], "\n".join(problems)
    try:
        r = kubectl.apply_file(files / "p.yaml", pod("p", "solo", "gpu"))
        assert r.rc == 1, r
        assert ('Internal error occurred: failed calling webhook "mutate.gpugate.io": '
                'failed to call webhook: Post "https://127.0.0.1:%d/mutate?timeout=10s"'
                % port) in r.err, r.err
        r = kubectl.apply_file(files / "sys.yaml", pod("unchecked", "kube-system",
                                                      containers=[{"name": "c",
                                                                   "image": "busybox"}]))
        assert (r.rc, r.out) == (0, "pod/unchecked created\n"), r
    finally:
        kubectl("delete", "pod", "unchecked", "-n", "kube-system", "--ignore-not-found")
        # same port, so the registration needs no change
        new = Gate(gate.binary, gate.certs, gate.policy, gate.workdir, gate.kubeconfig,
                   name="quota-same-port", listen=f"127.0.0.1:{port}", args=gate.args)
        for _ in range(50):  # the port may linger a moment
            try:
                new.start()
                break
            except AssertionError:
                if "ddress already in use" not in new.stderr_text():
                    raise
                time.sleep(0.2)
        stack.gates["quota"] = new
        new.wait_ready()
    assert new.port == port
    r = kubectl.apply_file(files / "p.yaml", pod("p", "solo", "gpu"))
    assert (r.rc, r.out) == (0, "pod/p created\n"), r
    assert r.err == warning("gpugate: gpu -> 1 x h100-80gb for tenant solo (1/4 in use)")


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_dead_api_server_keeps_gpugate_unready(stack, tmp_path):
    kubeconfig = tmp_path / "dead.kubeconfig"
    live = (stack.cluster.dir / "admin.kubeconfig").read_text()
    api = stack.cluster.env["APISERVER_URL"]
    port = closed_port()
    kubeconfig.write_text(live.replace(api, f"https://127.0.0.1:{port}"))
    assert f"127.0.0.1:{port}" in kubeconfig.read_text()

    gate = Gate(stack.binary, stack.certs, stack.quota_policy, tmp_path, str(kubeconfig),
                name="dead-api").start()
    try:
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            status, body = gate.get("/readyz")
            assert status == 503, (status, body)
            assert "quota usage not synced" in body, body
            assert gate.get("/healthz")[0] == 200
            time.sleep(0.5)
        assert "gpugate_kube_synced 0" in gate.metrics()
        assert "cannot list" in gate.stderr_text()
        t0 = time.monotonic()
        problems = gate.stop_and_check()
        assert problems == [], "\n".join(problems)
        assert gate.exit_code == 0
        assert time.monotonic() - t0 < 15, "slow shutdown while the API is unreachable"
    finally:
        gate.kill()


def test_sigterm_while_watching_exits_zero(stack, tmp_path):
    """A third gpugate on the live API: synced, then stopped mid-watch."""
    gate = Gate(stack.binary, stack.certs, stack.quota_policy, tmp_path,
                stack.cluster.env["KUBECONFIG"], name="extra").start()
    try:
        gate.wait_ready()
        assert "gpugate_kube_watch_connected 1" in gate.metrics()
        problems = gate.stop_and_check()
        assert problems == [], "\n".join(problems)
    finally:
        gate.kill()
