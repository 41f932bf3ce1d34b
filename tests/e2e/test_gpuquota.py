"""A team reads its quota inside the cluster (issue #27 item 4).

`kubectl get gpuquota -n research`, as a tenant with nothing but the
built-in `edit` in its namespace, shows what its tenant uses of its quota
(manifests/crd-gpuquotas.yaml, kept by controllers/quota-sync.h): used/nominal
per flavor with what is borrowed and lent, the pods waiting for a node.
The tenant can read it and cannot write it, nor its status.  gpugate writes
only when the numbers change, and deletes the object of a namespace the
policy no longer gives a tenant.  `gpugate pool` and `gpugate explain
--kubeconfig` as that tenant stop at once on the 403 (before: a minute of
retries), say which permission is missing, and fall back to the GPUQuota
objects.

The session's gates run with --no-gpuquotas (three policies would take
turns rewriting the objects); this test starts its own gpugate on a copy
of the example policy, with the CRD and the readers' ClusterRole of the
base installed, and removes them afterwards.  The session's example gate
admits the pods; this one only watches.

    flock /tmp/gpugate-e2e.lock make e2e E2E_ARGS='tests/e2e/test_gpuquota.py -x'
"""

from __future__ import annotations

import json
import re
import subprocess
import time

import pytest

from gpugate_e2e import EXAMPLE_POLICY, ROOT, Gate, bind_pod, ensure_crd, pod, to_yaml, wait_until

CRD = ROOT / "manifests" / "crd-gpuquotas.yaml"
RBAC = ROOT / "manifests" / "rbac.yaml"
AGGREGATED = "rbac.authorization.k8s.io/aggregate-to-view=true"
READER = "gpugate-gpuquotas-reader"
NS = "research"
FORBIDDEN = ("forbidden: cannot list nodes at the cluster scope ({cmd} needs list on nodes, "
             "pods, jobs.batch and resourceclaims.resource.k8s.io in all namespaces); as a "
             "tenant, read your quota with: kubectl get gpuquota -n {ns}\n")
SYNCED = re.compile(r'msg="gpuquotas synced" created=(\d+) updated=(\d+) deleted=(\d+)')


@pytest.fixture
def crd(stack):
    """The CRD, and the base's ClusterRoles aggregated to view (the readers
    of GPUClasses and GPUQuotas), as manifests/ has them."""
    k = stack.kubectl
    ensure_crd(k, CRD, "gpuquotas.gpugate.io")
    r = k("apply", "-f", str(RBAC), "-l", AGGREGATED).check()
    assert f"clusterrole.rbac.authorization.k8s.io/{READER}" in r.out, r.out
    assert k.get("clusterrole", READER)["rules"] == [
        {"apiGroups": ["gpugate.io"], "resources": ["gpuquotas"],
         "verbs": ["get", "list", "watch"]}]
    for name in ("view", "edit", "admin"):
        wait_until(f"{name} aggregating the gpuquotas rule", lambda: any(
            "gpuquotas" in r.get("resources", [])
            for r in k.get("clusterrole", name).get("rules") or []), 30)
    yield
    k("delete", "-f", str(RBAC), "-l", AGGREGATED, "--ignore-not-found")
    k("delete", "-f", str(CRD), "--ignore-not-found", "--wait=true", timeout=120)


def rows(out: str) -> list[list[str]]:
    """kubectl's table split on two or more spaces, AGE left out."""
    lines = out.splitlines()
    assert lines and lines[0].split()[-1] == "AGE", out
    return [re.split(r"\s{2,}", line.strip())[:-1] for line in lines]


def syncs(gate: Gate) -> list[tuple[int, int, int]]:
    return [tuple(map(int, m)) for m in SYNCED.findall(gate.stderr_text())]


def run_as(stack, *args: str) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.monotonic()
    r = subprocess.run([str(stack.binary), *args], capture_output=True, text=True,
                       timeout=60)
    return r, time.monotonic() - t0


def test_a_tenant_reads_its_quota_and_only_reads(stack, crd, clean, tmp_path):
    k = stack.kubectl
    clean(NS, "product-inference")
    tenant = stack.tenant_kubectl(NS)
    policy = tmp_path / "policy.yaml"
    policy.write_text(EXAMPLE_POLICY.read_text())
    gate = Gate(stack.binary, stack.certs, policy, tmp_path / "gpugate",
                stack.cluster.env["KUBECONFIG"], name="quotas",
                args=["--no-gpuclasses"]).start()
    try:
        # One object per namespace of a tenant that exists: research and
        # research-jobs (the glob research-*), product-inference, sandbox-1
        # (the glob sandbox-*); product-staging does not exist.
        wait_until("gpugate's GPUQuota objects", lambda: (4, 0, 0) in syncs(gate), 30)
        names = k("get", "gpuquota", "-A", "-o", "jsonpath={range .items[*]}"
                  "{.metadata.namespace}/{.metadata.name} {end}").check().out.split()
        assert sorted(names) == ["product-inference/product", "research-jobs/research",
                                 "research/research", "sandbox-1/sandbox"], names

        # What the tenant may do with it: read, nothing else.
        for verb, want in (("get", "yes"), ("list", "yes"), ("watch", "yes"),
                           ("create", "no"), ("update", "no"), ("patch", "no"),
                           ("delete", "no")):
            r = tenant("auth", "can-i", verb, "gpuquotas.gpugate.io", "-n", NS)
            assert r.out.strip() == want, (verb, r)
        r = tenant("get", "gpuquota", "-n", NS)
        assert (r.rc, r.err) == (0, ""), r
        assert rows(r.out) == [["NAME", "USED", "WAITING"],
                               ["research", "h100-80gb 0/32, l4-shared 0/8", "0"]], r.out

        # 5 x 8 H100: 40 of a nominal 32, 8 borrowed from product's
        # lendable 8; one bound to a node, four waiting for one.
        for i in range(5):
            tenant.create(pod(f"big-{i}", NS, "train-large")).check()
        bind_pod(k, NS, "big-0")
        want = [["NAME", "USED", "WAITING"],
                ["research", "h100-80gb 40/32 (+8 borrowed), l4-shared 0/8", "4"]]
        wait_until("the tenant's numbers", lambda: rows(
            tenant("get", "gpuquota", "-n", NS).out) == want, 30)
        r = tenant("get", "gpuquota", "-n", NS, "-o", "wide")
        assert r.out.splitlines()[0].split() == ["NAME", "USED", "WAITING", "AGE", "COHORT",
                                                 "UPDATED"], r.out
        assert r.out.splitlines()[1].split()[-2] == "lab", r.out
        status = tenant("get", "gpuquota", "research", "-n", NS, "-o", "json").json()["status"]
        assert status["tenant"] == "research" and status["cohort"] == "lab"
        assert status["flavors"] == [
            {"flavor": "h100-80gb", "nominal": 32, "used": 40, "borrowed": 8, "lent": 0,
             "waitingPods": 4, "waitingGPUs": 32},
            {"flavor": "l4-shared", "nominal": 8, "used": 0, "borrowed": 0, "lent": 0,
             "waitingPods": 0, "waitingGPUs": 0}], status
        product = k.get("gpuquota", "product", "product-inference")["status"]
        assert product["used"] == "a100-1g.10gb 0/112, a100-3g.40gb 0/32, h100-80gb 0/16 " \
                                  "(8 lent)", product

        # The tenant cannot write it, nor its status.
        for extra in ((), ("--subresource=status",)):
            r = tenant("patch", "gpuquota", "research", "-n", NS, "--type=merge", *extra,
                       "-p", '{"status": {"used": "nothing"}}')
            assert r.rc == 1 and "Forbidden" in r.err, r
        r = tenant("delete", "gpuquota", "research", "-n", NS)
        assert r.rc == 1 and "Forbidden" in r.err, r

        # Writes only on a change: nothing changes for 5 s, nothing is written.
        before = syncs(gate)
        time.sleep(5)
        assert syncs(gate) == before, gate.stderr_text()

        # As that tenant, `gpugate pool` and `explain --kubeconfig` stop at
        # once on the 403 and show what the tenant may read.
        cfg = str(stack.dir / f"tenant-{NS}.kubeconfig")
        r, took = run_as(stack, "pool", "--policy", str(policy), "--kubeconfig", cfg, "-n", NS)
        assert took < 5, (took, r)
        assert r.returncode == 3, r
        assert r.stderr == "gpugate pool: " + FORBIDDEN.format(cmd="pool", ns=NS), r.stderr
        lines = r.stdout.splitlines()
        assert lines[0] == ("from the GPUQuota objects of namespace research (the pool "
                            "itself is not readable with these credentials)"), r.stdout
        assert lines[1].split() == ["TENANT", "FLAVOR", "USED", "NOMINAL", "BORROWED", "LENT",
                                    "WAITING", "UPDATED"], r.stdout
        assert [line.split()[:7] for line in lines[2:]] == [
            ["research", "h100-80gb", "40", "32", "8", "0", "4"],
            ["research", "l4-shared", "0", "8", "0", "0", "0"]], r.stdout
        r, took = run_as(stack, "pool", "--policy", str(policy), "--kubeconfig", cfg)
        assert took < 5 and r.returncode == 1, (took, r)
        assert r.stderr == "gpugate pool: " + FORBIDDEN.format(cmd="pool",
                                                               ns="YOUR-NAMESPACE"), r.stderr

        manifest = tmp_path / "big.yaml"
        manifest.write_text(to_yaml(pod("big-5", NS, "train-large")))
        r, took = run_as(stack, "explain", "--policy", str(policy), "-n", NS,
                         "--kubeconfig", cfg, str(manifest))
        assert took < 5, (took, r)
        assert r.stderr == "gpugate explain: " + FORBIDDEN.format(cmd="explain", ns=NS), \
            r.stderr
        assert r.stdout.startswith(
            "usage      from the GPUQuota objects of namespace research: its tenant's own "
            "use; the cohort's other members and the GPU pool are not readable with "
            "these credentials\n"), r.stdout
        # 40 used: 8 more is over the borrowing the cohort allows.
        assert r.returncode == 1, r
        assert re.search(r"denied \(rule quota", r.stdout), r.stdout
        assert "judged against the GPUQuota status of namespace research)" in r.stdout, \
            r.stdout
        r, took = run_as(stack, "explain", "--policy", str(policy), "-n", NS,
                         "--kubeconfig", cfg, "-o", "json", str(manifest))
        assert took < 5 and r.returncode == 1, (took, r)
        assert json.loads(r.stdout)["usage"] == {"source": "gpuquota", "namespace": NS}

        # A tenant the policy drops: its object goes; the others stay.
        text = re.sub(r"\n  - name: sandbox\n(    .*\n)+", "\n", policy.read_text())
        policy.write_text(text)
        wait_until("the reload", lambda: 'msg="policy reloaded"' in gate.stderr_text(), 30)
        wait_until("sandbox-1's object deleted", lambda: k(
            "get", "gpuquota", "-n", "sandbox-1", "-o", "name").out.strip() == "", 30)
        assert any(d == 1 for _, _, d in syncs(gate)), gate.stderr_text()
        assert k("get", "gpuquota", "research", "-n", NS).rc == 0
        assert gate.stop_and_check() == []
    finally:
        gate.kill()
