"""Quota (SPEC section 5) as users meet it, with QUOTA_POLICY's small numbers
(gpugate_e2e.QUOTA_POLICY, class "gpu": 1..8 H100 per pod):

  alpha  nominal 8, borrowingLimit 4, cohort lab
  beta   nominal 8, lendingLimit 4,   cohort lab
  solo   nominal 4, no cohort
  dry    nominal 4, no cohort
  lenient nominal 2, warn mode

Usage comes from the API (list + watch): a pod marked Succeeded or Failed,
or deleted, gives its GPUs back; `gpugate_quota_used` shows it.
"""

from __future__ import annotations

import time

from gpugate_e2e import BORROWED, DECISION, PREEMPTIBLE, pod, wait_until
from test_kubectl_admission import denied_by, env_of, gpu_container_of, warning
from test_kubectl_jobs import set_phase


def over(tenant: str, requested: int, used: int, nominal: int, tail: str) -> str:
    return (f'gpugate: tenant "{tenant}" is over its h100-80gb quota: requested {requested} '
            f"(class gpu), in use {used} of nominal {nominal}, {tail}")


def admitted(tenant: str, gpus: int, position: str) -> str:
    return warning(f"gpugate: gpu -> {gpus} x h100-80gb for tenant {tenant} ({position})")


def borrowed(n: int, cohort: str = "lab", hooks: bool = False) -> str:
    """The problem a borrower is told (#27): it may be taken back."""
    return warning(f"gpugate: borrowed {n} h100-80gb from cohort {cohort}: gpugate takes "
                   "them back when a lender needs them"
                   + (", after a checkpoint" if hooks else " (no checkpoint hooks)"))


def test_fill_deny_and_capacity_comes_back(kubectl, quota, clean, files):
    clean("solo")
    for i, gpus in enumerate((2, 1, 1)):
        r = kubectl.apply_file(files / f"w{i}.yaml", pod(f"w{i}", "solo", "gpu", gpus))
        assert (r.rc, r.out) == (0, f"pod/w{i} created\n"), r
    assert r.err == admitted("solo", 1, "4/4 in use")
    quota.wait_used("solo", 4)

    late = pod("late", "solo", "gpu", 2)
    r = kubectl.apply_file(files / "late.yaml", late)
    assert (r.rc, r.out) == (1, ""), r
    assert r.err == denied_by("mutate.gpugate.io", over("solo", 2, 4, 4,
                                                        "no cohort to borrow from"),
                              file="late.yaml")

    # w1 finished: its GPU comes back, but one is not enough for "late"
    set_phase(kubectl, "solo", "w1", "Succeeded")
    quota.wait_used("solo", 3)
    r = kubectl.apply_file(files / "late.yaml")
    assert r.rc == 1 and r.err == denied_by(
        "mutate.gpugate.io", over("solo", 2, 3, 4, "no cohort to borrow from"),
        file="late.yaml"), r

    # w2 failed: now it fits
    set_phase(kubectl, "solo", "w2", "Failed")
    quota.wait_used("solo", 2)
    r = kubectl.apply_file(files / "late.yaml")
    assert (r.rc, r.out) == (0, "pod/late created\n"), r
    assert r.err == admitted("solo", 2, "4/4 in use")
    quota.wait_used("solo", 4)

    # deleting a pod gives its GPUs back as well
    r = kubectl("delete", "pod", "w0", "-n", "solo")
    assert r.rc == 0, r
    quota.wait_used("solo", 2)


def test_borrowing_across_the_cohort(kubectl, quota, clean, files):
    clean("alpha", "beta")
    r = kubectl.apply_file(files / "a1.yaml", pod("a1", "alpha", "gpu", 8))
    assert r.rc == 0 and r.err == admitted("alpha", 8, "8/8 in use"), r
    r = kubectl.apply_file(files / "b1.yaml", pod("b1", "beta", "gpu", 6))
    assert r.rc == 0 and r.err == admitted("beta", 6, "6/8 in use"), r
    quota.wait_used("beta", 6)

    # beta has 2 unused: it can lend 2 (its lendingLimit is 4)
    r = kubectl.apply_file(files / "a2.yaml", pod("a2", "alpha", "gpu", 3))
    assert r.rc == 1 and r.err == denied_by(
        "mutate.gpugate.io", over("alpha", 3, 8, 8, 'cohort "lab" can lend 2'),
        file="a2.yaml"), r

    r = kubectl.apply_file(files / "a3.yaml", pod("a3", "alpha", "gpu", 2))
    assert (r.rc, r.out) == (0, "pod/a3 created\n"), r
    assert r.err == admitted("alpha", 2, "10/8 in use, 2 borrowed from lab") + borrowed(2)
    live = kubectl.get("pod", "a3", "alpha")
    meta, spec = live["metadata"], live["spec"]
    assert meta["annotations"][BORROWED] == "2"
    assert meta["annotations"][DECISION] == \
        "gpu: 2 x h100-80gb for tenant alpha; 10/8 in use, 2 borrowed from lab"
    # borrowed work is preemptible (the reclaim may take it back), but gets
    # no checkpoint hook it did not ask for: class gpu is not preemptible (#27)
    assert meta["labels"][PREEMPTIBLE] == "true"
    c = gpu_container_of(live)
    assert not [n for n in env_of(c) if n.startswith("GPUGATE_")], c
    assert "lifecycle" not in c, c
    assert not [m for m in c.get("volumeMounts", []) if m["name"].startswith("gpugate-")], c
    assert not [v for v in spec.get("volumes", []) if v["name"].startswith("gpugate-")], spec
    # only its grace is held to the policy's 15 (from the default 30), so
    # that a reclaim is not held longer
    assert spec["terminationGracePeriodSeconds"] == 15
    # a1 was admitted on nominal quota: not preemptible
    a1 = kubectl.get("pod", "a1", "alpha")["metadata"]
    assert PREEMPTIBLE not in a1["labels"] and BORROWED not in a1["annotations"]
    quota.wait_used("alpha", 10)

    # the cohort is drained: beta's 2 unused are lent to alpha
    r = kubectl.apply_file(files / "a4.yaml", pod("a4", "alpha", "gpu", 1))
    assert r.rc == 1 and r.err == denied_by(
        "mutate.gpugate.io", over("alpha", 1, 10, 8, 'cohort "lab" can lend 0'),
        file="a4.yaml"), r

    # beta frees its 6: it could lend 4, but alpha may borrow only 4 in all
    r = kubectl("delete", "pod", "b1", "-n", "beta")
    assert r.rc == 0, r
    quota.wait_used("beta", 0)
    r = kubectl.apply_file(files / "a5.yaml", pod("a5", "alpha", "gpu", 3))
    assert r.rc == 1 and r.err == denied_by(
        "mutate.gpugate.io", over("alpha", 3, 10, 8, "borrowing limit 4 leaves 2"),
        file="a5.yaml"), r
    r = kubectl.apply_file(files / "a6.yaml", pod("a6", "alpha", "gpu", 2))
    assert r.rc == 0 and r.err == admitted("alpha", 2, "12/8 in use, 2 borrowed from lab") + \
        borrowed(2), r
    assert kubectl.get("pod", "a6", "alpha")["metadata"]["annotations"][BORROWED] == "2"
    quota.wait_used("alpha", 12)

    # the lender gets its own nominal quota back whatever it lent
    # (reclaimWithinCohort Any, the default): 4 of its 8 are lent to alpha
    r = kubectl.apply_file(files / "b2.yaml", pod("b2", "beta", "gpu", 8))
    assert r.rc == 0 and r.err == admitted("beta", 8, "8/8 in use, reclaims 4 lent in lab"), r
    quota.wait_used("beta", 8)


def test_dry_run_reserves_nothing(kubectl, quota, clean, files):
    clean("dry")
    obj = pod("probe", "dry", "gpu", 4)
    for _ in range(3):
        r = kubectl.apply_file(files / "probe.yaml", obj, "--dry-run=server")
        assert (r.rc, r.out) == (0, "pod/probe created (server dry run)\n"), r
        assert r.err == admitted("dry", 4, "4/4 in use")
    assert quota.quota_used("dry") == 0
    r = kubectl.apply_file(files / "probe.yaml", obj)
    assert (r.rc, r.out) == (0, "pod/probe created\n"), r
    assert r.err == admitted("dry", 4, "4/4 in use")
    quota.wait_used("dry", 4)
    r = kubectl.apply_file(files / "more.yaml", pod("more", "dry", "gpu", 1), "--dry-run=server")
    assert (r.rc, r.out) == (1, ""), r
    assert r.err == denied_by("mutate.gpugate.io", over("dry", 1, 4, 4,
                                                        "no cohort to borrow from"),
                              file="more.yaml")
    time.sleep(0.5)
    assert quota.quota_used("dry") == 4


def test_warn_mode_admits_over_quota_with_the_reason(kubectl, quota, clean, files):
    clean("lenient")
    r = kubectl.apply_file(files / "p.yaml", pod("p", "lenient", "gpu", 2))
    assert r.rc == 0 and r.err == admitted("lenient", 2, "2/2 in use"), r
    quota.wait_used("lenient", 2)
    r = kubectl.apply_file(files / "q.yaml", pod("q", "lenient", "gpu", 1))
    assert (r.rc, r.out) == (0, "pod/q created\n"), r
    assert r.err == warning(
        over("lenient", 1, 2, 2, "no cohort to borrow from"),
        "gpugate: gpu -> 1 x h100-80gb for tenant lenient (3/2 in use)")
    assert kubectl.get("pod", "q", "lenient")["metadata"]["annotations"][DECISION] == (
        'warn: tenant "lenient" is over its h100-80gb quota: requested 1 (class gpu), '
        "in use 2 of nominal 2, no cohort to borrow from")
    quota.wait_used("lenient", 3)  # admitted, so counted


def test_failed_create_releases_its_reservation(kubectl, quota, clean, files):
    """`kubectl create` of a name that exists: the webhooks ran and /validate
    reserved before etcd refused it.  The reservation never shows up in the
    watch and is dropped after 60 s (docs/quota.md)."""
    clean("solo")
    obj = pod("twice", "solo", "gpu", 1)
    r = kubectl.apply_file(files / "twice.yaml", obj, verb="create")
    assert (r.rc, r.out) == (0, "pod/twice created\n"), r
    assert r.err == admitted("solo", 1, "1/4 in use")
    quota.wait_used("solo", 1)
    r = kubectl.apply_file(files / "twice.yaml", verb="create")
    assert r.rc == 1, r
    assert r.err.endswith('Error from server (AlreadyExists): error when creating '
                          '"twice.yaml": pods "twice" already exists\n'), r
    quota.wait_used("solo", 1, timeout=90)


def test_controller_created_pods_over_quota_show_in_events(kubectl, quota, clean, files):
    """A Deployment's pods are bare pods, each charged: the ReplicaSet
    creates what fits, and the refusal of the rest reaches the user as a
    FailedCreate event with gpugate's text.  (Since #18 a Deployment that
    could never run all its replicas is refused at the door: this one could,
    2 x 2 within solo's 4, but another pod holds 2 of them now.)"""
    clean("solo")
    r = kubectl.apply_file(files / "pod.yaml", pod("holder", "solo", "gpu", 2))
    assert r.rc == 0, r
    dep = {"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "serve", "namespace": "solo"},
           "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "serve"}},
                    "template": {"metadata": {"labels": {"app": "serve", "gpugate.io/class": "gpu",
                                                         "gpugate.io/gpus": "2"}},
                                 "spec": {"containers": [{"name": "server",
                                                          "image": "vllm/vllm-openai"}]}}}}
    try:
        r = kubectl.apply_file(files / "deploy.yaml", dep)
        assert (r.rc, r.out, r.err) == (0, "deployment.apps/serve created\n", warning(
            "gpugate: gpu -> 2 pods x 2 x h100-80gb for tenant solo (each pod is charged "
            "when it is created)")), r
        message = ('admission webhook "mutate.gpugate.io" denied the request: '
                   + over("solo", 2, 4, 4, "no cohort to borrow from"))

        def refused_event():
            events = kubectl("get", "events", "-n", "solo", "-o", "json").json()["items"]
            return [e for e in events if e["reason"] == "FailedCreate"
                    and message in e["message"]]
        wait_until("a FailedCreate event with gpugate's message", refused_event, 60)
        pods = kubectl("get", "pods", "-n", "solo", "-l", "app=serve", "-o", "json").json()
        assert len(pods["items"]) == 1
        for p in pods["items"]:
            assert p["metadata"]["labels"]["gpugate.io/tenant"] == "solo"
            assert "gpugate.io/gang" not in p["metadata"]["labels"]  # not a Job
            assert gpu_container_of(p, "server")["resources"]["limits"] == \
                {"nvidia.com/gpu": "2"}
        quota.wait_used("solo", 4)
    finally:
        kubectl("delete", "deployment", "serve", "-n", "solo", "--cascade=foreground",
                "--ignore-not-found", "--wait=true", timeout=120)
