"""Why a pod waits, and what running pods cost (issue #16 items 3 and 6), on
the fake GPU fleet: the real scheduler, KWOK, gpugate's waiter and meter.

- A GPU pod that waits longer than --waiting-reason-after (the session's
  gates run with 2 s; the waiter looks every 10 s) gets one Event, reason
  GPUWaiting, from gpugate, that `kubectl describe pod` shows: here no node
  of its flavor has room (the others are cordoned), with who holds the
  flavor's quota and the excluded nodes by name.  Once a node is back, the
  pod runs.
- gpugate_gpu_seconds_total{tenant, flavor} grows while a GPU pod runs, by
  its units per second, and not for a pod that only waits.
"""

from __future__ import annotations

import re
import time

from gpugate_e2e import pod, wait_until
from test_fleet import H100, created, node_of, phase, wait_phase

EXCLUDED = ["h100-80gb-1", "h100-80gb-2", "h100-80gb-3", "h100-80gb-4", "h100-80gb-5"]


def gpu_seconds(gate, tenant: str, flavor: str = H100) -> float:
    m = re.search(rf'^gpugate_gpu_seconds_total{{tenant="{tenant}",flavor="{flavor}"}} '
                  r'(\d+)$', gate.metrics(), re.M)
    return float(m.group(1)) if m else 0.0


def gpugate_events(kubectl, ns: str, name: str) -> list[dict]:
    items = kubectl("get", "events", "-n", ns, "--field-selector",
                    f"involvedObject.name={name}", "-o", "json").json()["items"]
    return [e for e in items if e.get("reason") == "GPUWaiting"]


def test_a_waiting_pod_is_told_why_in_kubectl_describe(stack, kubectl, quota, fleet,
                                                       clean, files):
    # One tenant, no priority class: the scheduler preempts nothing to make
    # room (train-large's priority would evict the smaller pod).
    clean("batch")
    try:
        for n in EXCLUDED:
            kubectl("cordon", n).check()
        # 6 of h100-80gb-0's 8 GPUs taken; an 8-GPU pod fits nowhere.
        r = kubectl.apply_file(files / "small.yaml", pod("small", "batch", "gpu", 6))
        created(r, "small")
        assert node_of(wait_phase(kubectl, "batch", "small", "Running")) == "h100-80gb-0"
        r = kubectl.apply_file(files / "big.yaml", pod("big", "batch", "gpu8"))
        created(r, "big")
        # gpugate said so at the door ...
        assert "Warning: gpugate: admitted, but no node of flavor h100-80gb has 8 " \
               "nvidia.com/gpu free now: 2 free on 1 node, at most 2 on one; the pod " \
               "waits; 5 nodes excluded: h100-80gb-1 (cordoned)" in r.err, r.err
        # ... and says it again on the pod once it has waited.
        events = wait_until("gpugate's GPUWaiting event on batch/big",
                            lambda: gpugate_events(kubectl, "batch", "big"), 40)
        assert len(events) == 1, events
        ev = events[0]
        assert ev["type"] == "Warning"
        assert ev["source"]["component"] == "gpugate"
        assert ev["involvedObject"]["kind"] == "Pod"
        assert ev["message"] == (
            "no node of flavor h100-80gb has 8 nvidia.com/gpu free: 2 free on 1 usable "
            "node, at most 2 on one; quota held by batch 14; 5 nodes excluded: "
            "h100-80gb-1 (cordoned), h100-80gb-2 (cordoned), h100-80gb-3 (cordoned), "
            "h100-80gb-4 (cordoned), ...")
        d = kubectl("describe", "pod", "big", "-n", "batch").check().out
        assert re.search(r"Warning\s+GPUWaiting\s+\S+\s+gpugate\s+no node of flavor "
                         r"h100-80gb has 8 nvidia.com/gpu free", d), d
        # The same reason is not written again every round.
        time.sleep(12)
        assert len(gpugate_events(kubectl, "batch", "big")) == 1
        # A node back: the pod runs.
        kubectl("uncordon", "h100-80gb-3").check()
        assert node_of(wait_phase(kubectl, "batch", "big", "Running")) == "h100-80gb-3"
    finally:
        for n in EXCLUDED:
            kubectl("uncordon", n)


def test_gpu_seconds_grow_for_running_pods_only(stack, kubectl, example, fleet, clean,
                                                files):
    clean("research")
    try:
        for n in ["h100-80gb-0"] + EXCLUDED[1:]:
            kubectl("cordon", n).check()
        # One pod runs on h100-80gb-1 (8 GPUs); another 8-GPU pod waits.
        created(kubectl.apply_file(files / "run.yaml", pod("run", "research", "train-large")),
                "run")
        assert node_of(wait_phase(kubectl, "research", "run", "Running")) == "h100-80gb-1"
        created(kubectl.apply_file(files / "wait.yaml", pod("wait", "research",
                                                            "train-large")), "wait")
        t0, s0 = time.monotonic(), gpu_seconds(example, "research")
        time.sleep(6)
        t1, s1 = time.monotonic(), gpu_seconds(example, "research")
        # 8 units x the seconds between the scrapes (whole seconds on both
        # sides: +-1 s of each, 8 units), not 16.
        grew = s1 - s0
        assert 8 * (t1 - t0 - 2) <= grew <= 8 * (t1 - t0 + 2), (grew, t1 - t0)
        assert phase(kubectl.get("pod", "wait", "research")) == "Pending"
        # Gone: it is not charged again.
        kubectl("delete", "pod", "run", "-n", "research", "--wait=true").check()
        wait_until("research's usage to be 8 (the waiting pod)",
                   lambda: example.quota_used("research") == 8, 30)
        s2 = gpu_seconds(example, "research")
        time.sleep(3)
        # The waiting pod may have started on the freed node meanwhile:
        # then it is charged from its own start, never the deleted one.
        w = kubectl.get("pod", "wait", "research")
        s3 = gpu_seconds(example, "research")
        if phase(w) != "Running":
            assert s3 == s2, (s2, s3)
        else:
            assert s3 - s2 <= 8 * 4, (s2, s3)
    finally:
        for n in ["h100-80gb-0"] + EXCLUDED[1:]:
            kubectl("uncordon", n)
