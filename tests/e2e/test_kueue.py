"""Issue #18 item 2: gpugate and Kueue side by side.

No Kueue runs here: the tests do to the objects what Kueue does.  Kueue's
mutating webhook suspends a Job that names a LocalQueue
(kueue.x-k8s.io/queue-name) at creation; its controller unsuspends it when
its ClusterQueue admits it.  gpugate charges such a Job when it is
unsuspended, not while it waits, and then:

- tenant kq (kueue.quotaOwner: kueue): never refuses it for quota (Kueue
  decided); counts it, and says where gpugate's own numbers stand;
- tenant gq (gpugate, the default): judges the resume like any resume.

kq's class Jobs get kq's LocalQueue stamped (kueue.localQueue).  The
invariant holds after each test: what the pods hold is what gpugate counts
(kq's beyond its nominal, on purpose: Kueue owns that quota).
"""

from __future__ import annotations

import json

from gpugate_e2e import assert_invariant, job, wait_until

QUEUE = "kueue.x-k8s.io/queue-name"


def suspended_job(name: str, ns: str, queue: str) -> dict:
    j = job(name, ns, "gpu", 4, suspend=True)
    j["metadata"]["labels"][QUEUE] = queue
    return j


def resume(kubectl, name: str, ns: str):
    """What Kueue's job reconciler does when the workload is admitted."""
    return kubectl("patch", "job", name, "-n", ns, "--type=merge",
                   "-p", json.dumps({"spec": {"suspend": False}}))


def test_kueue_owns_the_quota_gpugate_counts_and_never_refuses(kubectl, quota, clean, files):
    clean("kq")
    r = kubectl.apply_file(files / "first.yaml", job("first", "kq", "gpu", 4))
    assert r.rc == 0, r
    assert kubectl.get("job", "first", "kq")["metadata"]["labels"][QUEUE] == "kq-queue"
    quota.wait_used("kq", 4)
    # Queued (Kueue suspended it): admitted, nothing held.
    r = kubectl.apply_file(files / "queued.yaml", suspended_job("queued", "kq", "kq-queue"))
    assert (r.rc, r.out) == (0, "job.batch/queued created\n"), r
    assert kubectl.get("job", "queued", "kq")["metadata"]["annotations"][
        "gpugate.io/decision"].endswith("suspended: quota is checked when it is resumed")
    quota.wait_used("kq", 4)
    # Kueue admits it: beyond gpugate's nominal, admitted and counted.
    r = resume(kubectl, "queued", "kq")
    assert (r.rc, r.out) == (0, "job.batch/queued patched\n"), r
    assert ('gpugate: tenant "kq" is over its h100-80gb quota: requested 4 (parallelism 1 x '
            '4, class gpu), in use 4 of nominal 4, no cohort to borrow from') in r.err, r
    quota.wait_used("kq", 8, timeout=60)
    assert_invariant(kubectl, quota, "kq", ["kq"], "h100-80gb", "nvidia.com/gpu", None)


def test_gpugate_owns_the_quota_kueues_resume_is_judged(kubectl, quota, clean, files):
    clean("gq")
    assert kubectl.apply_file(files / "first.yaml", job("first", "gq", "gpu", 4)).rc == 0
    quota.wait_used("gq", 4)
    r = kubectl.apply_file(files / "queued.yaml", suspended_job("queued", "gq", "gq-queue"))
    assert (r.rc, r.out) == (0, "job.batch/queued created\n"), r
    assert QUEUE in kubectl.get("job", "queued", "gq")["metadata"]["labels"]
    quota.wait_used("gq", 4)
    r = resume(kubectl, "queued", "gq")
    assert r.rc == 1, r
    assert ('admission webhook "validate.gpugate.io" denied the request: gpugate: tenant "gq" '
            'is over its h100-80gb quota: requested 4 (parallelism 1 x 4, class gpu), in use '
            '4 of nominal 4, no cohort to borrow from') in r.err, r
    assert kubectl.get("job", "queued", "gq")["spec"]["suspend"] is True
    # Room again: Kueue's next try goes through.
    kubectl("delete", "job", "first", "-n", "gq", "--cascade=foreground").check()
    quota.wait_used("gq", 0, timeout=60)
    wait_until("the resume to be admitted", lambda: resume(kubectl, "queued", "gq").rc == 0, 30)
    quota.wait_used("gq", 4, timeout=60)
    assert_invariant(kubectl, quota, "gq", ["gq"], "h100-80gb", "nvidia.com/gpu", 4)
