"""The checkpoint claim ("{tenant}-checkpoints", checkpoint.claimName of the
example policy) and what an admitted workload is told.

Issue #18 item 5 made gpugate watch the PersistentVolumeClaims; issue #27
items 3 and 6:
  - a pod that mounts a claim that does not exist never starts, so gpugate
    never mounts one it knows is missing: the hooks without the volume, and
    a warning that says so (product-staging belongs to tenant product and
    has no claim until the test makes one, ReadWriteOnce);
  - borrowing alone adds no checkpoint hook and no volume: a borrowing Job
    of a class that is not preemptible runs on the fake fleet in a
    namespace where nobody created a claim;
  - with checkpoint.claim.create, gpugate (the Lease holder; here the only
    replica of a gpugate of its own) creates the missing claims, labelled as
    its own, and leaves a claim it did not create alone;
  - settings.admissionWarnings defaults to problems: with the shipped
    example policy as it is (a gpugate of its own, registered for the
    namespaces labelled "defaults"), `kubectl apply --warnings-as-errors`
    of a plain class pod that fits exits 0, and of one with a problem 1.

The stack's gpugates run with admissionWarnings: all (gpugate_e2e.
with_success_lines), so there the success line comes first."""

from __future__ import annotations

import json
import time

from gpugate_e2e import (EXAMPLE_POLICY, POLICY_LABEL, PREEMPTIBLE, Gate, job, namespace_obj,
                         pod, register, wait_until)

NS = "product-staging"
MISSING = ("Warning: gpugate: checkpoint volume not mounted: PersistentVolumeClaim "
           "\"product-checkpoints\" does not exist in namespace product-staging; what is "
           "written to /checkpoint is lost with the pod; create it or set "
           "checkpoint.claim.create\n")
ONE_NODE = ("Warning: gpugate: checkpoint volume: PersistentVolumeClaim "
            "\"product-checkpoints\" is not ReadWriteMany; pods on different nodes cannot all "
            "mount it\n")
OWNER = "app.kubernetes.io/managed-by"


def new_namespace(kubectl, name: str, policy: str = "example") -> None:
    kubectl.apply(namespace_obj(name, policy)).check()
    wait_until(f"ServiceAccount {name}/default", lambda: kubectl(
        "-n", name, "get", "serviceaccount", "default").rc == 0, 60)


def volumes(obj: dict) -> list[str]:
    spec = obj["spec"]["template"]["spec"] if obj["kind"] == "Job" else obj["spec"]
    return [v["name"] for v in spec.get("volumes", [])]


def env_names(obj: dict) -> list[str]:
    spec = obj["spec"]["template"]["spec"] if obj["kind"] == "Job" else obj["spec"]
    return [e["name"] for e in spec["containers"][0].get("env", [])]


def test_a_missing_claim_is_not_mounted_and_said_at_apply(stack, kubectl, files):
    new_namespace(kubectl, NS)
    try:
        r = kubectl.apply_file(files / "pod.yaml", pod("p", NS, "train-small", 1))
        assert r.rc == 0, r
        assert MISSING in r.err, r
        got = kubectl.get("pod", "p", NS)
        # Every hook but the volume: the pod can start.
        assert "gpugate-checkpoint" not in volumes(got), got["spec"]
        assert "gpugate-signal" in volumes(got)
        assert "GPUGATE_PREEMPTIBLE" in env_names(got)
        assert got["spec"]["containers"][0]["lifecycle"]["preStop"]
        kubectl("delete", "pod", "p", "-n", NS, "--wait=false").check()
        kubectl.apply({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                       "metadata": {"name": "product-checkpoints", "namespace": NS},
                       "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "",
                                "resources": {"requests": {"storage": "1Gi"}}}}).check()

        def said_one_node() -> bool:
            r = kubectl.apply_file(files / "job.yaml",
                                   job("two", NS, "train-small", 1, parallelism=2),
                                   "--dry-run=server", verb="create")
            return r.rc == 0 and ONE_NODE in r.err and MISSING not in r.err
        # The watch shows the claim within a moment; from then on it is mounted.
        wait_until("the claim to be known", said_one_node, 30)
        r = kubectl.apply_file(files / "pod.yaml", pod("q", NS, "train-small", 1),
                               "--dry-run=server", "-o", "json", verb="create")
        assert r.rc == 0 and "checkpoint volume" not in r.err, r
        assert "gpugate-checkpoint" in volumes(json.loads(r.out)), r.out
    finally:
        kubectl("delete", "namespace", NS, "--wait=false")


def test_a_borrowing_job_runs_without_a_claim(stack, kubectl, example, fleet, clean, files):
    """research-borrow (tenant research by its glob) has no claim.  Four
    bare train-large pods fill research's nominal 32; a Job of one more
    borrows 8 of cohort lab: labelled preemptible, told so, no hook, and it
    runs."""
    ns = "research-borrow"
    new_namespace(kubectl, ns)
    clean(ns)
    try:
        for i in range(4):
            r = kubectl.apply_file(files / f"fill{i}.yaml", pod(f"fill{i}", ns, "train-large"))
            assert r.rc == 0, r
        example.wait_used("research", 32)
        r = kubectl.apply_file(files / "job.yaml", job("borrower", ns, "train-large"))
        assert r.rc == 0, r
        assert ("Warning: gpugate: borrowed 8 h100-80gb from cohort lab: gpugate takes them "
                "back when a lender needs them (no checkpoint hooks)\n") in r.err, r
        got = kubectl.get("job", "borrower", ns)
        assert got["metadata"]["annotations"]["gpugate.io/borrowed"] == "8"
        assert got["spec"]["template"]["metadata"]["labels"][PREEMPTIBLE] == "true"
        assert not [v for v in volumes(got) if v.startswith("gpugate-")], got
        assert not [n for n in env_names(got) if n.startswith("GPUGATE_")], got

        def running() -> bool:
            pods = kubectl("get", "pods", "-n", ns, "-l", "job-name=borrower",
                           "-o", "json").json()["items"]
            return len(pods) == 1 and pods[0]["status"].get("phase") == "Running"
        wait_until("the borrowing Job's pod to run", running, 90)
        assert kubectl("get", "pvc", "-n", ns, "-o", "name").check().out == ""
    finally:
        kubectl("delete", "namespace", ns, "--wait=false")


def test_gpugate_creates_the_missing_claims_and_no_other(stack, kubectl, tmp_path):
    k = kubectl
    ns = "research-claims"
    mine = k.get("pvc", "research-checkpoints", "research")  # made by hand (the stack)
    policy = tmp_path / "policy.yaml"
    text = EXAMPLE_POLICY.read_text()
    assert '\n  claimName: "{tenant}-checkpoints"\n' in text
    policy.write_text(text.replace(
        '\n  claimName: "{tenant}-checkpoints"\n',
        '\n  claimName: "{tenant}-checkpoints"\n'
        '  claim: {create: true, storageClassName: "", size: 1Gi}\n'))
    new_namespace(k, ns)
    gate = Gate(stack.binary, stack.certs, policy, tmp_path / "gpugate",
                stack.cluster.env["KUBECONFIG"], name="claims").start()
    try:
        wait_until("gpugate to create the claim", lambda: k(
            "get", "pvc", "research-checkpoints", "-n", ns).rc == 0, 30)
        got = k.get("pvc", "research-checkpoints", ns)
        assert got["metadata"]["labels"] == {OWNER: "gpugate"}, got["metadata"]
        assert got["spec"]["accessModes"] == ["ReadWriteMany"]
        assert got["spec"]["storageClassName"] == ""
        assert got["spec"]["resources"]["requests"] == {"storage": "1Gi"}
        wait_until("the creation logged", lambda: (
            'msg="checkpoint claim created" claim=research-claims/research-checkpoints '
            'size=1Gi access_modes=ReadWriteMany storage_class=(none)') in gate.stderr_text(),
            10)
        # A claim someone else made is never touched, and one gpugate made
        # is not made again, nor changed, however many rounds pass.
        k("label", "pvc", "research-checkpoints", "-n", ns, "team=vision").check()
        before = k.get("pvc", "research-checkpoints", ns)["metadata"]["resourceVersion"]
        time.sleep(21)  # two more rounds (one every 10 s)
        after = k.get("pvc", "research-checkpoints", ns)
        assert after["metadata"]["resourceVersion"] == before
        assert after["metadata"]["labels"]["team"] == "vision"
        now = k.get("pvc", "research-checkpoints", "research")
        assert now["metadata"]["resourceVersion"] == mine["metadata"]["resourceVersion"]
        assert OWNER not in (now["metadata"].get("labels") or {})
        assert gate.stderr_text().count('msg="checkpoint claim created" claim=research-claims/') \
            == 1
        assert 'checkpoint claims not created' not in gate.stderr_text(), gate.stderr_tail()
        assert gate.stop_and_check() == []
    finally:
        gate.kill()
        k("delete", "namespace", ns, "--wait=false")
        k("delete", "pvc", "-A", "-l", f"{OWNER}=gpugate", "--wait=false")


def test_a_pod_that_fits_passes_warnings_as_errors_by_default(stack, kubectl, tmp_path, files,
                                                              clean):
    """The shipped example policy as it is: no success line."""
    k = kubectl
    ns = "research-plain"
    gate = Gate(stack.binary, stack.certs, EXAMPLE_POLICY, tmp_path / "gpugate",
                stack.cluster.env["KUBECONFIG"], name="defaults").start()
    try:
        gate.wait_ready()
        register(k, "gpugate-defaults", gate, "defaults")
        new_namespace(k, ns, "defaults")
        clean(ns)  # its pods are research's (the glob research-*): emptied at the end
        probe = json.dumps(pod("probe", ns, "train-large"))

        def mutated() -> bool:
            r = k("create", "--dry-run=server", "-o", "json", "-f", "-", input=probe)
            return r.rc == 0 and "gpugate.io/tenant" in json.loads(r.out)["metadata"].get(
                "labels", {})
        wait_until("the defaults webhooks to be called", mutated, 30, 0.3)
        wait_until("the claims listed", lambda: 'msg="claims synced" kind=persistentvolumeclaims'
                   in gate.stderr_text(), 30)
        r = k.apply_file(files / "plain.yaml", pod("plain", ns, "train-large"),
                         "--warnings-as-errors")
        assert (r.rc, r.out, r.err) == (0, "pod/plain created\n", ""), r
        assert k.get("pod", "plain", ns)["metadata"]["labels"]["gpugate.io/tenant"] == "research"
        # A problem still warns: here the checkpoint claim is missing.
        r = k.apply_file(files / "small.yaml", pod("small", ns, "train-small"),
                         "--warnings-as-errors")
        assert r.rc == 1 and "checkpoint volume not mounted" in r.err, r
    finally:
        k("delete", "mutatingwebhookconfiguration,validatingwebhookconfiguration",
          "gpugate-defaults", "--ignore-not-found")
        k("delete", "namespace", ns, "--wait=false")
        assert gate.stop_and_check() == []
        gate.kill()
