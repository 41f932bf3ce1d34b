"""Issue #17: lent GPUs come back, checkpoint first, on the fake GPU fleet.

QUOTA_POLICY's cohort rc: owner (nominal 8, lends all of it; its
reclaimWithinCohort is Any, the default) and taker (nominal 0: it lives on
borrowed quota, so everything it runs is preemptible).  taker borrows
owner's 8; owner asks for its 8; gpugate's reclaimer (controllers/reclaimer.h)
signals taker's Job (gpugate.io/checkpoint-requested on the Job and its
pods), waits for the report (gpugate.io/checkpoint-done, written here the
way a trainer would) or for checkpoint.timeoutSeconds (12 s in
QUOTA_POLICY), suspends the Job (KWOK stops its pods at SIGTERM), and
resumes it once owner's work is done.  Cohort rn: keeper (Never) is denied
its nominal quota while holder borrows it, with the numbers.  Cohort rl:
modest (LowerPriority) takes back only what eager's workloads of lower
priority hold, their priorities coming from their Job templates'
PriorityClasses (which gpugate watches).

Every test ends with the invariant: what each tenant's pods hold is what
gpugate counts, and the cohort never holds more than its quota once the
reclaim is done.
"""

from __future__ import annotations

import json
import time

from gpugate_e2e import assert_invariant, job, wait_until
from test_kubectl_admission import denied_by, warning

REQUESTED = "gpugate.io/checkpoint-requested"
DONE = "gpugate.io/checkpoint-done"
RECLAIMED = "gpugate.io/reclaimed"
EXIT = "fleet.gpugate.io/exit"
JOB_NAME = "batch.kubernetes.io/job-name"


def pods_of(kubectl, ns: str, job_name: str) -> list[dict]:
    return kubectl("get", "pods", "-n", ns, "-l", f"{JOB_NAME}={job_name}",
                   "-o", "json").json()["items"]


def running(kubectl, ns: str, job_name: str, n: int) -> bool:
    pods = [p for p in pods_of(kubectl, ns, job_name)
            if (p.get("status") or {}).get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")]
    return len(pods) == n


def apply_job(kubectl, files, name: str, ns: str, gpus: int, pods: int) -> str:
    r = kubectl.apply_file(files / f"{ns}-{name}.yaml",
                           job(name, ns, "gpu", gpus, parallelism=pods, completions=pods))
    assert (r.rc, r.out) == (0, f"job.batch/{name} created\n"), r
    return r.err


def events(kubectl, ns: str, name: str) -> list[str]:
    items = kubectl("get", "events", "-n", ns, "--field-selector",
                    f"involvedObject.name={name},reason=GPUReclaim", "-o", "json").json()
    return [e["message"] for e in items["items"]]


def borrow_and_ask_back(kubectl, quota, files, clean) -> None:
    """taker runs a Job of 2 x 4 borrowed; owner asks for its 8."""
    clean("owner", "taker")
    assert apply_job(kubectl, files, "borrower", "taker", 4, 2) == warning(
        "gpugate: gpu -> 2 pods x 4 x h100-80gb for tenant taker "
        "(8/0 in use, 8 borrowed from rc)") + warning(
        "gpugate: borrowed 8 h100-80gb from cohort rc: gpugate takes them back when a "
        "lender needs them (no checkpoint hooks)")
    wait_until("taker's Job to run", lambda: running(kubectl, "taker", "borrower", 2), 60)
    quota.wait_used("taker", 8)
    assert apply_job(kubectl, files, "lender", "owner", 4, 2) == warning(
        "gpugate: gpu -> 2 pods x 4 x h100-80gb for tenant owner "
        "(8/8 in use, reclaims 8 lent in rc)")


def wait_signalled(kubectl) -> str:
    def signalled():
        j = kubectl.get("job", "borrower", "taker")
        pods = pods_of(kubectl, "taker", "borrower")
        ok = REQUESTED in (j["metadata"].get("annotations") or {}) and pods and all(
            REQUESTED in (p["metadata"].get("annotations") or {}) for p in pods)
        return j["metadata"]["annotations"][REQUESTED] if ok else None
    return wait_until("the checkpoint request on taker's Job and pods", signalled, 30)


def wait_suspended(kubectl) -> dict:
    def suspended():
        j = kubectl.get("job", "borrower", "taker")
        return j if j["spec"].get("suspend") and (
            j["metadata"].get("labels") or {}).get(RECLAIMED) == "true" else None
    return wait_until("taker's Job to be suspended", suspended, 60)


def cohort_invariant(stack):
    # the cohort rc holds 8: owner's nominal, lent or not
    assert_invariant(stack.kubectl, stack.gates["quota"], "owner", ["owner"], "h100-80gb",
                     "nvidia.com/gpu", 8)
    assert_invariant(stack.kubectl, stack.gates["quota"], "taker", ["taker"], "h100-80gb",
                     "nvidia.com/gpu", 8)


def test_a_borrower_checkpoints_is_suspended_and_comes_back(stack, kubectl, quota, fleet,
                                                            clean, files):
    borrow_and_ask_back(kubectl, quota, files, clean)
    asked = wait_signalled(kubectl)
    assert any("checkpoint requested: gpugate takes back 8 h100-80gb for tenant owner" in m
               for m in events(kubectl, "taker", "borrower")), events(kubectl, "taker",
                                                                       "borrower")
    # Not released before the report (the timeout is 12 s; we report at once).
    assert not kubectl.get("job", "borrower", "taker")["spec"].get("suspend")
    # The trainer reports, on each of its pods, the one line docs/users.md gives.
    for p in pods_of(kubectl, "taker", "borrower"):
        kubectl("annotate", "pod", p["metadata"]["name"], "-n", "taker",
                f"{DONE}={time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}",
                "--overwrite").check()
    j = wait_suspended(kubectl)
    assert j["metadata"]["annotations"][REQUESTED] == asked
    wait_until("taker's pods to be gone", lambda: not pods_of(kubectl, "taker", "borrower"),
               60)
    quota.wait_used("taker", 0)
    assert any(m.startswith("checkpointed and suspended to return 8 h100-80gb for tenant "
                            "owner") for m in events(kubectl, "taker", "borrower"))
    wait_until("owner's Job to run", lambda: running(kubectl, "owner", "lender", 2), 60)
    assert sorted(events(kubectl, "owner", "lender")) == [
        "taking back 8 h100-80gb lent in cohort rc: checkpoint requested of job "
        "taker/borrower",
        "taking back 8 h100-80gb lent in cohort rc: suspended job taker/borrower"], events(
        kubectl, "owner", "lender")
    cohort_invariant(stack)
    # owner's work ends: taker's Job is resumed by gpugate, through admission.
    for p in pods_of(kubectl, "owner", "lender"):
        kubectl("annotate", "pod", p["metadata"]["name"], "-n", "owner",
                f"{EXIT}=Succeeded").check()
    quota.wait_used("owner", 0, timeout=60)

    def resumed():
        j = kubectl.get("job", "borrower", "taker")
        return not j["spec"].get("suspend") and RECLAIMED not in (
            j["metadata"].get("labels") or {})
    wait_until("taker's Job to be resumed", resumed, 60)
    wait_until("taker's Job to run again", lambda: running(kubectl, "taker", "borrower", 2),
               60)
    quota.wait_used("taker", 8)
    assert "gpugate_reclaims_total{result=\"checkpointed\"}" in quota.metrics()
    cohort_invariant(stack)


def test_a_borrower_that_does_not_report_is_suspended_after_the_timeout(
        stack, kubectl, quota, fleet, clean, files):
    borrow_and_ask_back(kubectl, quota, files, clean)
    asked = time.time()
    wait_signalled(kubectl)
    wait_suspended(kubectl)
    waited = time.time() - asked
    assert waited >= 10, f"released after {waited:.1f} s, before the 12 s timeout"
    assert any(m.startswith("checkpoint not reported within 12 s: suspended to return 8 "
                            "h100-80gb for tenant owner")
               for m in events(kubectl, "taker", "borrower"))
    wait_until("taker's pods to be gone", lambda: not pods_of(kubectl, "taker", "borrower"),
               60)
    quota.wait_used("taker", 0)
    cohort_invariant(stack)


def test_reclaim_never_denies_with_the_numbers(stack, kubectl, quota, fleet, clean, files):
    clean("keeper", "holder")
    apply_job(kubectl, files, "borrows", "holder", 4, 1)
    quota.wait_used("holder", 4)
    r = kubectl.apply_file(files / "keeper.yaml", job("wants", "keeper", "gpu", 8))
    assert (r.rc, r.out) == (1, ""), r
    assert r.err == denied_by("mutate.gpugate.io", "gpugate: tenant \"keeper\" cannot have its lent h100-80gb quota "
                        "back now: requested 8 (parallelism 1 x 8, class gpu), in use 0 of "
                        "nominal 8, and 4 of those units are lent out in cohort \"rn\" "
                        "(tenant \"holder\" borrows 4); with reclaimWithinCohort Never it "
                        "waits until they are returned", file="keeper.yaml"), r
    # Within what is not lent out, it is admitted; nothing is taken from holder.
    assert apply_job(kubectl, files, "fits", "keeper", 4, 1) == warning(
        "gpugate: gpu -> 1 pod x 4 x h100-80gb for tenant keeper (4/8 in use)")
    time.sleep(3)  # a reclaimer round or more
    j = kubectl.get("job", "borrows", "holder")
    assert REQUESTED not in (j["metadata"].get("annotations") or {})
    assert_invariant(kubectl, quota, "keeper", ["keeper"], "h100-80gb", "nvidia.com/gpu", 8)
    assert_invariant(kubectl, quota, "holder", ["holder"], "h100-80gb", "nvidia.com/gpu", 8)


def test_a_restart_mid_reclaim_carries_on_from_the_objects(stack, kubectl, quota, fleet,
                                                           clean, files):
    """The request is on the objects: a new gpugate, started after the
    signal, releases the victim on its report and asks nothing twice."""
    borrow_and_ask_back(kubectl, quota, files, clean)
    asked = wait_signalled(kubectl)
    gate, problems = stack.restart_gate("quota")
    assert problems == [], "\n".join(problems)
    for p in pods_of(kubectl, "taker", "borrower"):
        kubectl("annotate", "pod", p["metadata"]["name"], "-n", "taker",
                f"{DONE}={time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}",
                "--overwrite").check()
    j = wait_suspended(kubectl)
    assert j["metadata"]["annotations"][REQUESTED] == asked, "asked again after the restart"
    assert 'gpugate_reclaims_total{result="signalled"} 0' in gate.metrics()
    # Counted once the suspend's write has returned: a moment after the
    # Job shows it.
    wait_until("the release counted", lambda: 'gpugate_reclaims_total{result="checkpointed"} 1'
               in gate.metrics(), 10)
    wait_until("taker's pods to be gone", lambda: not pods_of(kubectl, "taker", "borrower"),
               60)
    gate.wait_used("taker", 0)
    cohort_invariant(stack)


def test_a_reclaim_no_longer_needed_is_abandoned(stack, kubectl, quota, fleet, clean, files):
    """owner's Job is deleted before taker reports: the request is taken
    back and taker runs on."""
    borrow_and_ask_back(kubectl, quota, files, clean)
    wait_signalled(kubectl)
    kubectl("delete", "job", "lender", "-n", "owner", "--cascade=foreground",
            "--wait=false").check()
    quota.wait_used("owner", 0, timeout=60)

    def abandoned():
        j = kubectl.get("job", "borrower", "taker")
        pods = pods_of(kubectl, "taker", "borrower")
        return REQUESTED not in (j["metadata"].get("annotations") or {}) and all(
            REQUESTED not in (p["metadata"].get("annotations") or {}) for p in pods)
    wait_until("the checkpoint request to be taken back", abandoned, 30)
    assert not kubectl.get("job", "borrower", "taker")["spec"].get("suspend")
    assert running(kubectl, "taker", "borrower", 2)
    cohort_invariant(stack)


PRIORITY_CLASSES = {"gg-e2e-low": 100, "gg-e2e-mid": 1000}


def prioritised_job(name: str, ns: str, gpus: int, priority_class: str) -> dict:
    j = job(name, ns, "gpu", gpus)
    j["spec"]["template"]["spec"]["priorityClassName"] = priority_class
    return j


def test_lower_priority_takes_back_only_from_lower_priorities(stack, kubectl, quota, fleet,
                                                             clean, files):
    clean("modest", "eager")
    for name, value in PRIORITY_CLASSES.items():
        kubectl.apply_file(files / f"{name}.yaml", {
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value}).check()
    for name, pc in (("hi", "gg-e2e-mid"), ("lo", "gg-e2e-low")):
        r = kubectl.apply_file(files / f"eager-{name}.yaml", prioritised_job(name, "eager", 4, pc))
        assert r.rc == 0, r
    wait_until("eager's Jobs to run", lambda: running(kubectl, "eager", "hi", 1) and running(
        kubectl, "eager", "lo", 1), 60)
    quota.wait_used("eager", 8)
    # All 8 back at priority 1000: only "lo" (100) ranks below, and it holds 4.
    r = kubectl.apply_file(files / "wants.yaml", prioritised_job("wants", "modest", 8,
                                                                 "gg-e2e-mid"))
    assert (r.rc, r.out) == (1, ""), r
    assert r.err == denied_by(
        "mutate.gpugate.io", "gpugate: tenant \"modest\" cannot have its lent h100-80gb "
        "quota back now: requested 8 (parallelism 1 x 8, class gpu), in use 0 of nominal 8, "
        "and 8 of those units are lent out in cohort \"rl\" (tenant \"eager\" borrows 8); "
        "with reclaimWithinCohort LowerPriority only workloads of priority below 1000 are "
        "taken back, and they hold 4; it waits until the units are returned",
        file="wants.yaml"), r
    quota.wait_used("modest", 0)
    # Half of it: "lo" covers that; the reclaimer asks "lo", never "hi".
    r = kubectl.apply_file(files / "half.yaml", prioritised_job("half", "modest", 4,
                                                                "gg-e2e-mid"))
    assert (r.rc, r.out, r.err) == (0, "job.batch/half created\n", warning(
        "gpugate: gpu -> 1 pod x 4 x h100-80gb for tenant modest (4/8 in use, reclaims 4 "
        "lent in rl)")), r

    def asked(name: str) -> bool:
        return REQUESTED in (kubectl.get("job", name, "eager")["metadata"].get(
            "annotations") or {})
    wait_until("the checkpoint request on eager's lower-priority Job", lambda: asked("lo"),
               30)
    for p in pods_of(kubectl, "eager", "lo"):
        kubectl("annotate", "pod", p["metadata"]["name"], "-n", "eager",
                f"{DONE}={time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}",
                "--overwrite").check()
    wait_until("eager's lower-priority Job to be suspended",
               lambda: kubectl.get("job", "lo", "eager")["spec"].get("suspend"), 60)
    wait_until("modest's Job to run", lambda: running(kubectl, "modest", "half", 1), 60)
    quota.wait_used("eager", 4, timeout=60)
    assert not asked("hi"), "the Job of priority 1000 was asked"
    assert running(kubectl, "eager", "hi", 1)
    assert_invariant(kubectl, quota, "modest", ["modest"], "h100-80gb", "nvidia.com/gpu", 8)
    assert_invariant(kubectl, quota, "eager", ["eager"], "h100-80gb", "nvidia.com/gpu", 8)
