"""Issue #26: reclaim that cannot be dodged, on the fake GPU fleet.

Cohort rc of QUOTA_POLICY (test_reclaim.py): owner lends its 8 and asks
for them back (reclaimWithinCohort Any); taker lives on borrowed quota.
Each test is one dodge an attack found, performed by taker as a tenant
bound only to the built-in `edit` role in its namespace (tenant_kubectl):

  - pods forged onto a Job no controller manages (spec.managedBy names
    none): an ownerReference and the controller-uid label, beyond any
    gang, were never victims;
  - a managedBy-nobody Job, suspended by the reclaim: no controller
    deletes its pods, which ran on;
  - removing gpugate.io/checkpoint-requested every second restarted the
    timeout forever;
  - a PodDisruptionBudget with maxUnavailable 0: every eviction 429,
    retried forever;
  - terminationGracePeriodSeconds 3600 and SIGTERM ignored: the GPUs
    held for the hour.

The policy's checkpoint.timeoutSeconds is 12 and gracePeriodSeconds 15.
Every test ends with the invariant: what each tenant's pods hold is what
gpugate counts, and the cohort holds no more than its quota once the
reclaim is done.
"""

from __future__ import annotations

import json
import threading
import time

from gpugate_e2e import job, pod, wait_until
from test_reclaim import REQUESTED, apply_job, cohort_invariant, events, pods_of, running

NOBODY = "example.com/nobody"
JOB_NAME = "batch.kubernetes.io/job-name"
CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
ON_SIGTERM = "fleet.gpugate.io/on-sigterm"
TIMEOUT = 12  # checkpoint.timeoutSeconds of QUOTA_POLICY
GRACE = 15    # checkpoint.gracePeriodSeconds of QUOTA_POLICY
ASKER = "asker"  # owner's Job


def lender_asks_back(kubectl, files) -> None:
    """owner asks for its 8, which taker holds: admitted, reclaims 8.  Its
    Job is not test_reclaim.py's "lender": the Events gpugate writes on
    that one are counted there."""
    assert apply_job(kubectl, files, ASKER, "owner", 4, 2).endswith(
        "(8/8 in use, reclaims 8 lent in rc)\n")


def asked(obj: dict) -> bool:
    return REQUESTED in (obj["metadata"].get("annotations") or {})


def live(pods: list[dict]) -> list[dict]:
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def forge_pods(tk, files, job_obj: dict, n: int, gpus: int,
               from_template: bool = False) -> None:
    """The tenant makes the pods of a Job itself: controller ownerReference
    and controller-uid label, as the job controller would; from_template:
    from the Job's pod template as gpugate mutated it (GPU limits and
    all), as the job controller would, so that they ride on its gang."""
    meta = job_obj["metadata"]
    tmpl = job_obj["spec"]["template"]
    for i in range(n):
        if from_template:
            p = {"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": f"{meta['name']}-{i}", "namespace": "taker",
                              "labels": dict((tmpl.get("metadata") or {}).get("labels")
                                             or {}),
                              "annotations": dict((tmpl.get("metadata") or {}).get(
                                  "annotations") or {})},
                 "spec": json.loads(json.dumps(tmpl["spec"]))}
            p["metadata"]["labels"].update({JOB_NAME: meta["name"],
                                            CONTROLLER_UID: meta["uid"]})
        else:
            p = pod(f"{meta['name']}-{i}", "taker", "gpu", gpus,
                    labels={JOB_NAME: meta["name"], CONTROLLER_UID: meta["uid"]})
            p["spec"]["restartPolicy"] = "Never"
        p["metadata"]["ownerReferences"] = [{
            "apiVersion": "batch/v1", "kind": "Job", "name": meta["name"],
            "uid": meta["uid"], "controller": True}]
        path = files / f"forged-{meta['name']}-{i}.yaml"
        path.write_text(json.dumps(p))
        # Riding on a gang needs the Job in gpugate's ledger, which its
        # watch fills a moment after the Job's admission.
        last = [None]

        def admitted():
            last[0] = tk.apply_file(path)
            return last[0].rc == 0
        try:
            wait_until(f"forged pod {i} to be admitted", admitted, 20, 1)
        except AssertionError:
            raise AssertionError(f"forged pod {i} not admitted: {last[0]}") from None


def after(what: str, since: float) -> float:
    took = time.time() - since
    print(f"{what}: {took:.1f} s")
    return took


def test_pods_forged_onto_a_job_nobody_manages_are_taken_back(
        stack, kubectl, tenant_kubectl, quota, fleet, clean, files):
    clean("owner", "taker")
    tk = tenant_kubectl("taker")
    # Created suspended, managed by no controller that runs: it holds
    # nothing, and nothing ever makes or deletes its pods.
    r = tk.apply_file(files / "ghost.yaml", job("ghost", "taker", "gpu", 4, parallelism=2,
                                                  completions=2, suspend=True,
                                                  managedBy=NOBODY))
    assert r.rc == 0, r
    forge_pods(tk, files, kubectl.get("job", "ghost", "taker"), 2, 4)
    wait_until("the forged pods to run", lambda: running(kubectl, "taker", "ghost", 2), 60)
    quota.wait_used("taker", 8)
    lender_asks_back(kubectl, files)
    start = time.time()
    # Each forged pod is a victim of its own: asked, then evicted.
    wait_until("the checkpoint request on the forged pods", lambda: all(
        asked(p) for p in pods_of(kubectl, "taker", "ghost")), 30)
    wait_until("the forged pods to be gone", lambda: not pods_of(kubectl, "taker", "ghost"),
               90)
    assert after("forged pods taken back", start) >= TIMEOUT - 2
    quota.wait_used("taker", 0)
    wait_until("owner's Job to run", lambda: running(kubectl, "owner", ASKER, 2), 60)
    cohort_invariant(stack)


def test_a_suspended_job_nobody_manages_loses_its_pods_after_the_grace(
        stack, kubectl, tenant_kubectl, quota, fleet, clean, files):
    clean("owner", "taker")
    tk = tenant_kubectl("taker")
    # Admitted running, 2 x 4 borrowed; no controller makes its pods: the
    # tenant does, and they ride on its gang.
    r = tk.apply_file(files / "ghost.yaml", job("ghost", "taker", "gpu", 4, parallelism=2,
                                                  completions=2, managedBy=NOBODY))
    assert r.rc == 0, r
    quota.wait_used("taker", 8)  # the gang
    forge_pods(tk, files, kubectl.get("job", "ghost", "taker"), 2, 4, from_template=True)
    wait_until("the Job's pods to run", lambda: running(kubectl, "taker", "ghost", 2), 60)
    quota.wait_used("taker", 8)
    lender_asks_back(kubectl, files)
    wait_until("the checkpoint request on the Job",
               lambda: asked(kubectl.get("job", "ghost", "taker")), 30)
    wait_until("the Job to be suspended",
               lambda: kubectl.get("job", "ghost", "taker")["spec"].get("suspend"), 60)
    suspended = time.time()
    # No controller deletes them: gpugate does, once the grace has passed.
    time.sleep(GRACE / 2)
    assert len(live(pods_of(kubectl, "taker", "ghost"))) == 2, "deleted before the grace"
    wait_until("the Job's pods to be gone", lambda: not pods_of(kubectl, "taker", "ghost"),
               GRACE + 45)
    assert after("pods of the suspended Job gone", suspended) >= GRACE - 3
    assert any(m.startswith("deleted with a grace period of 15 s to return 4 h100-80gb "
                            "for tenant owner")
               for p in ("ghost-0", "ghost-1") for m in events(kubectl, "taker", p))
    quota.wait_used("taker", 0)
    wait_until("owner's Job to run", lambda: running(kubectl, "owner", ASKER, 2), 60)
    cohort_invariant(stack)


def test_removing_the_request_does_not_restart_the_timeout(
        stack, kubectl, tenant_kubectl, quota, fleet, clean, files):
    clean("owner", "taker")
    tk = tenant_kubectl("taker")
    r = tk.apply_file(files / "borrower.yaml", job("borrower", "taker", "gpu", 4,
                                                     parallelism=2, completions=2))
    assert r.rc == 0, r
    wait_until("taker's Job to run", lambda: running(kubectl, "taker", "borrower", 2), 60)
    quota.wait_used("taker", 8)
    lender_asks_back(kubectl, files)
    wait_until("the checkpoint request on taker's Job",
               lambda: asked(kubectl.get("job", "borrower", "taker")), 30)
    signalled = time.time()
    stop = threading.Event()
    stripped = [0]

    def strip():
        while not stop.is_set():
            tk("annotate", "job", "borrower", f"{REQUESTED}-")
            for p in live(pods_of(tk, "taker", "borrower")):
                tk("annotate", "pod", p["metadata"]["name"], f"{REQUESTED}-")
            stripped[0] += 1
            stop.wait(1)
    th = threading.Thread(target=strip)
    th.start()
    try:
        wait_until("taker's Job to be suspended all the same", lambda: kubectl.get(
            "job", "borrower", "taker")["spec"].get("suspend"), TIMEOUT + 20)
    finally:
        stop.set()
        th.join()
    took = after("suspended while the request was removed every second", signalled)
    assert stripped[0] >= 3, stripped
    assert took <= TIMEOUT + 8, f"suspended {took:.1f} s after the request"
    wait_until("taker's pods to be gone", lambda: not pods_of(kubectl, "taker", "borrower"),
               60)
    quota.wait_used("taker", 0)
    wait_until("owner's Job to run", lambda: running(kubectl, "owner", ASKER, 2), 60)
    cohort_invariant(stack)


def test_a_budget_that_allows_no_disruption_holds_the_gpus_only_for_the_grace(
        stack, kubectl, tenant_kubectl, quota, fleet, clean, files):
    clean("owner", "taker")
    tk = tenant_kubectl("taker")
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
           "metadata": {"name": "pinned", "namespace": "taker"},
           "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "pinned"}}}}
    r = tk.apply_file(files / "pdb.yaml", pdb)
    assert r.rc == 0, r
    try:
        for i in range(2):
            r = tk.apply_file(files / f"pinned-{i}.yaml", pod(
                f"pinned-{i}", "taker", "gpu", 4, labels={"app": "pinned"}))
            assert r.rc == 0, r

        def pinned() -> list[dict]:
            return kubectl("get", "pods", "-n", "taker", "-l", "app=pinned", "-o",
                           "json").json()["items"]
        wait_until("the pinned pods to run", lambda: len([
            p for p in pinned() if (p.get("status") or {}).get("phase") == "Running"]) == 2,
            60)
        quota.wait_used("taker", 8)
        lender_asks_back(kubectl, files)
        start = time.time()
        wait_until("the checkpoint request on the pinned pods",
                   lambda: all(asked(p) for p in pinned()), 30)
        # Evictions are refused (429) for the grace, then the pods are deleted.
        wait_until("the pinned pods to be gone", lambda: not pinned(), TIMEOUT + GRACE + 45)
        assert after("pinned pods taken back", start) >= TIMEOUT + GRACE - 4
        msgs = events(kubectl, "taker", "pinned-0") + events(kubectl, "taker", "pinned-1")
        assert any("a PodDisruptionBudget allows no disruption" in m for m in msgs), msgs
        assert any(m.startswith("deleted with a grace period of 15 s") for m in msgs), msgs
    finally:
        kubectl("delete", "pdb", "pinned", "-n", "taker", "--ignore-not-found").check()
    quota.wait_used("taker", 0)
    wait_until("owner's Job to run", lambda: running(kubectl, "owner", ASKER, 2), 60)
    cohort_invariant(stack)


def test_an_hour_of_grace_and_sigterm_ignored_hold_the_gpus_only_for_the_policys(
        stack, kubectl, tenant_kubectl, quota, fleet, clean, files):
    clean("owner", "taker")
    tk = tenant_kubectl("taker")
    j = job("stubborn", "taker", "gpu", 4, parallelism=2, completions=2)
    j["spec"]["template"]["metadata"] = {"annotations": {ON_SIGTERM: "ignore"}}
    j["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 3600
    r = tk.apply_file(files / "stubborn.yaml", j)
    assert r.rc == 0, r
    # The door already cuts it to the policy's: borrowing adds no checkpoint
    # hook (#27), but a borrower's grace is never longer than the policy's.
    assert kubectl.get("job", "stubborn", "taker")["spec"]["template"]["spec"][
        "terminationGracePeriodSeconds"] == GRACE
    wait_until("taker's Job to run", lambda: running(kubectl, "taker", "stubborn", 2), 60)
    assert all(p["spec"]["terminationGracePeriodSeconds"] == GRACE
               for p in pods_of(kubectl, "taker", "stubborn"))
    quota.wait_used("taker", 8)
    lender_asks_back(kubectl, files)
    wait_until("taker's Job to be suspended", lambda: kubectl.get(
        "job", "stubborn", "taker")["spec"].get("suspend"), TIMEOUT + 30)
    suspended = time.time()
    wait_until("taker's pods to be gone", lambda: not pods_of(kubectl, "taker", "stubborn"),
               GRACE + 45)
    after("pods that ignore SIGTERM gone", suspended)
    quota.wait_used("taker", 0)
    wait_until("owner's Job to run", lambda: running(kubectl, "owner", ASKER, 2), 60)
    cohort_invariant(stack)


def test_the_reclaim_keeps_its_times_where_the_tenant_cannot_reach(
        stack, kubectl, tenant_kubectl, quota, fleet, clean, files):
    """gpugate's own record (docs/design/reclaim.md "State"): the
    ConfigMap gpugate-reclaim in gpugate's namespace, which taker's edit
    role cannot read or write."""
    clean("owner", "taker")
    tk = tenant_kubectl("taker")
    r = tk.apply_file(files / "borrower.yaml", job("borrower", "taker", "gpu", 4,
                                                     parallelism=2, completions=2))
    assert r.rc == 0, r
    wait_until("taker's Job to run", lambda: running(kubectl, "taker", "borrower", 2), 60)
    quota.wait_used("taker", 8)
    lender_asks_back(kubectl, files)
    uid = kubectl.get("job", "borrower", "taker")["metadata"]["uid"]

    def recorded():
        data = kubectl.get("configmap", "gpugate-reclaim", "gpugate").get("data") or {}
        return data.get(uid)
    rec = wait_until("the record of taker's Job", recorded, 30)
    assert rec.startswith("s=") and rec.endswith(" j=0 t=taker"), rec
    r = tk("get", "configmap", "gpugate-reclaim", "-n", "gpugate")
    assert r.rc != 0 and "forbidden" in r.err, r
    r = tk("delete", "configmap", "gpugate-reclaim", "-n", "gpugate")
    assert r.rc != 0 and "forbidden" in r.err, r
    wait_until("taker's Job to be suspended", lambda: kubectl.get(
        "job", "borrower", "taker")["spec"].get("suspend"), TIMEOUT + 30)
    wait_until("taker's pods to be gone", lambda: not pods_of(kubectl, "taker", "borrower"),
               60)
    quota.wait_used("taker", 0)
    cohort_invariant(stack)
