"""Issue #26 item 12: two replicas left on the default `--usage-store memory`
(a hand-written Deployment of 2) used to hand out the same last GPUs,
silently (10-24 of 8 in bursts of 30).  Now only the holder of Lease
gpugate-memory decides quota; the other refuses it, saying why, and serves
everything else.  The bursts of test_replicas.py through the same balancer.
"""

from __future__ import annotations

import re

import pytest

from gpugate_e2e import Replicas
from test_replicas import BURST, NOMINAL, NS, TENANT, burst, check_usage, empty, message

ARGS = "--usage-store memory --namespace gpugate-e2e --identity memory-{index}"


@pytest.fixture(scope="module")
def memory_replicas(stack) -> Replicas:
    r = stack.start_replicas(2, ARGS)
    yield r
    problems = stack.stop_replicas()
    assert not problems, "\n\n".join(problems)


def test_two_memory_replicas_never_over_admit_and_say_why(stack, memory_replicas):
    if any(memory_replicas.used(TENANT)) or stack.api.pod_names(NS):
        empty(stack, memory_replicas, NS, TENANT)
    refusals: list[str] = []
    for i in range(3):
        results, _ = burst(stack.api, f"memory-{i + 1}", BURST)
        admitted = sum(1 for status, _ in results if status == 201)
        denials = [message(b) for status, b in results if status != 201]
        assert admitted <= NOMINAL, (admitted, denials)
        assert check_usage(stack, memory_replicas) == admitted
        for m in denials:
            if "one replica decides quota" in m:
                refusals.append(m)
            else:
                assert f'tenant "{TENANT}" is over its h100-80gb quota' in m, m
        empty(stack, memory_replicas, NS, TENANT)
    # The balancer spreads a burst's connections: the replica that does
    # not hold the Lease was asked, and said why it refused.
    assert refusals, "no create reached the replica that does not hold the Lease"
    assert re.search(r'cannot reserve quota for tenant "race" now \(replica memory-[01] '
                     r"holds Lease gpugate-e2e/gpugate-memory: with --usage-store memory "
                     r"one replica decides quota\); nothing was admitted: retry in a "
                     r"moment", refusals[0]), refusals[0]
