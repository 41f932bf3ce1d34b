"""Issue #32, deliverable 4: the `leader` usage store attacked on 3 replicas.

Three `gpugate serve --usage-store leader` replicas (LEADER_ARGS) behind the
harness's round-robin balancer (test_replicas.py), each reaching the
apiserver through an ApiProxy of its own (Replicas(proxied=True)), so that
one of them can be cut off.  The holder of Lease gpugate-e2e/gpugate-memory
decides quota in its ledger; the others forward /validate's reservation to
it (docs/design/replicas-speed.md, way A).

The attackers are the tenants of one cohort (REPLICAS_POLICY: pair-a and
pair-b, 8 + 8 H100 each free to borrow the other's unused 8, reclaim
Never, so the cohort holds at most 16), each bound to the built-in
ClusterRole `edit` in its namespace and nothing more (Stack.tenant_kubectl).
A burst is BURST concurrent creates of class-gpu pods (1 or 2 GPUs), half
from each tenant, as direct HTTPS requests with the tenant's token,
released together.  After every burst: what the tenants' pods hold,
computed from the API, is at most 16 (never over-admitted, checked at once,
not after settling); after every round: each running replica's
gpugate_quota_used of each tenant equals that (assert_invariant).

Scenarios:
  bursts   plain rounds
  kill     kill -9 of the leader mid-burst; bursts go on: denied as
           unavailable while nobody leads, admitted again once another
           replica took the Lease and passed its start gate (~15 s lease
           + 5 s); then the killed one is restarted (a follower)
  stop     SIGSTOP of the leader for longer than its lease (>= 17 s) with
           bursts meanwhile, until the new leader has filled the cohort;
           reviews sent straight to the stopped one's /validate wait in
           its socket; SIGCONT: it must not decide on its stale ledger
           (every one of them denied), nor may a burst then get in
  cut      the apiserver blackholed (ApiProxy.cut) for a follower (it
           forwards: decided right), then for the leader (it stops deciding
           at its renew deadline, 10 s; another takes over); restored

What each checks, against replicas that do not share a decider
(GPUGATE_E2E_LEADER_ARGS='--reservation-ttl 10 --identity replica-{index}':
a memory ledger each; the scenarios that need a Lease holder then take
replica 0): see docs/benchmarks.md "Several replicas at the speed of one".

    make e2e E2E_PASSES=plain E2E_ARGS='tests/e2e/test_leader_attacks.py -x -s'
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import uuid

import pytest

from gpugate_e2e import (REPLICA_STORE_NAMESPACE, Api, Replicas, assert_invariant,
                         holdings, log, pod, wait_until)
from test_shared_attacks import denied_by_gpugate, message, tenant_api

TENANTS = ("pair-a", "pair-b")  # tenant = namespace
FLAVOR, RESOURCE = "h100-80gb", "nvidia.com/gpu"
NOMINAL = 8
COHORT = 16          # the most the cohort may hold, and so either tenant
K = 3
BURST = 40           # creates a round, half from each tenant
PROBE = 10           # creates a probe burst, while waiting for a leader
LEASE = "gpugate-memory"
LEASE_S = 15.0       # lease_duration: another replica takes it after this
RENEW_S = 10.0       # renew_deadline: a leader stops deciding after this
GATE_S = 5.0         # G: a new leader's wait before its first decision
LEADER_ARGS = ("--usage-store leader --namespace gpugate-e2e --reservation-ttl 10 "
               "--identity replica-{index}")
ARGS = os.environ.get("GPUGATE_E2E_LEADER_ARGS", LEADER_ARGS)


@pytest.fixture(scope="module")
def replicas(stack) -> Replicas:
    r = stack.start_replicas(K, ARGS, proxied=True)
    yield r
    for g in r.gates:  # a test that failed while one was stopped
        cont(g)
    for px in r.proxies:
        px.restore()
    problems = stack.stop_replicas()
    assert not problems, "\n\n".join(problems)


@pytest.fixture(scope="module")
def tenants(stack, replicas) -> dict[str, Api]:
    return {ns: tenant_api(stack, ns) for ns in TENANTS}


@pytest.fixture
def pair(stack, replicas, tenants):
    """The cohort's tenants as Apis; their namespaces start and end empty
    (counted 0 by every replica)."""
    empty(stack, replicas)
    yield tenants
    # whatever a failed scenario left: stopped, cut off, killed
    for g in replicas.gates:
        cont(g)
    for px in replicas.proxies:
        px.restore()
    for i, g in enumerate(replicas.gates):
        if not g.alive:
            replicas.restart(i)
    empty(stack, replicas)


# ---------------------------------------------------------------------------
# helpers


def cont(g) -> None:
    try:
        os.kill(g.pid, signal.SIGCONT)
    except OSError:
        pass


def empty(stack, replicas: Replicas, gates=None) -> None:
    """No pod left in the cohort's namespaces; every replica of GATES (all
    by default: leave out one cut off the apiserver, whose watch cannot
    see the deletes) counts 0."""
    api = stack.api
    for ns in TENANTS:
        api.delete_pods(ns)
    wait_until("the cohort's namespaces to be empty",
               lambda: not any(api.pod_names(ns) for ns in TENANTS), 30, 0.1)
    for g in (replicas.gates if gates is None else gates):
        if not g.alive:
            continue
        for t in TENANTS:
            g.wait_used(t, 0, FLAVOR, 30)


def lease_holder(stack) -> str:
    status, body = stack.api.request(
        "GET", f"/apis/coordination.k8s.io/v1/namespaces/{REPLICA_STORE_NAMESPACE}"
               f"/leases/{LEASE}")
    if status != 200:
        return ""
    return (body.get("spec") or {}).get("holderIdentity") or ""


def leader(stack, replicas: Replicas, timeout: float = 40.0) -> int:
    """The index of the replica that holds the Lease (replica-N), once
    one does.  Replicas that keep a ledger each hold none: replica 0 then
    stands for the leader (the scenarios still run, to show what they
    catch)."""
    if "--usage-store" in ARGS:
        names = {f"replica-{i}": i for i in range(K)}
        wait_until(f"a replica to hold Lease {LEASE}",
                   lambda: lease_holder(stack) in names, timeout, 0.2)
    # and it decides: past its start gate.  A real create (a dry run does
    # not wait for the gate: it reserves nothing), deleted again.
    api, ns = stack.api, TENANTS[0]
    wait_until("quota to be decided", lambda: api.request(
        "POST", f"/api/v1/namespaces/{ns}/pods",
        cohort_pod(ns, "decided", 1))[0] in (201, 409), timeout, 0.2)
    assert api.request("DELETE", f"/api/v1/namespaces/{ns}/pods/decided")[0] == 200
    wait_until("pod decided to be gone", lambda: "decided" not in api.pod_names(ns), 30, 0.1)
    for g in replicas.gates:
        if g.alive:
            g.wait_used(ns, 0, FLAVOR, 30)
    return names[lease_holder(stack)] if "--usage-store" in ARGS else 0


def unavailable(msg: str) -> bool:
    """gpugate's denial when nobody may decide (fail closed), as against a
    quota denial: it says so, and that nothing was admitted."""
    return "cannot reserve quota" in msg and "retry" in msg


def cohort_pod(ns: str, name: str, i: int) -> dict:
    """1 GPU, or 2 for every fifth: 24 units of each tenant's 20 a round."""
    return pod(name, ns, "gpu", 2 if i % 5 == 0 else None)


class Burst:
    """N concurrent creates into the cohort, half from each tenant, each on
    its own connection (up first), released together; run() waits for the
    answers, start() does not (join() then).  during(): run in one more
    thread once the first answer is in."""

    def __init__(self, tenants: dict[str, Api], prefix: str, n: int = BURST, during=None):
        self.tenants = tenants
        self.prefix = prefix
        self.n = n
        self.during = during
        self.results: list = [None] * n
        self.threads: list[threading.Thread] = []
        self.wall = 0.0
        self._t0 = 0.0

    def start(self) -> "Burst":
        gate = threading.Barrier(self.n + 1)
        first = threading.Event()

        def one(i: int) -> None:
            ns = TENANTS[i % 2]
            api = self.tenants[ns]
            conn = api.connection(timeout=30)
            try:
                conn.connect()
                gate.wait(30)
                self.results[i] = api.request("POST", f"/api/v1/namespaces/{ns}/pods",
                                              cohort_pod(ns, f"{self.prefix}-{i}", i // 2),
                                              conn=conn)
            except Exception as e:  # noqa: BLE001 - counted as a failed create
                self.results[i] = (0, repr(e))
            finally:
                conn.close()
                first.set()
        self.threads = [threading.Thread(target=one, args=(i,), daemon=True)
                        for i in range(self.n)]
        if self.during is not None:
            self.threads.append(threading.Thread(
                target=lambda: (first.wait(30), self.during()), daemon=True))
        for t in self.threads:
            t.start()
        gate.wait(30)
        self._t0 = time.monotonic()
        return self

    def join(self) -> "Burst":
        for t in self.threads:
            t.join(60)
        self.wall = time.monotonic() - self._t0
        return self

    def run(self) -> "Burst":
        return self.start().join()

    @property
    def admitted(self) -> int:
        return sum(1 for s, _ in self.results if s == 201)

    @property
    def unavailable(self) -> list[str]:
        return [message(b) for s, b in self.results
                if denied_by_gpugate(s, b) and unavailable(message(b))]

    @property
    def denied(self) -> list[str]:
        """gpugate's quota denials (over quota, borrowing changed, ...)."""
        return [message(b) for s, b in self.results
                if denied_by_gpugate(s, b) and not unavailable(message(b))]

    @property
    def failed(self) -> list:
        """Neither admitted nor denied by gpugate: the webhook call failed
        (a replica killed or stopped) or the client's did."""
        return [(s, message(b)[:160]) for s, b in self.results
                if s != 201 and not denied_by_gpugate(s, b)]

    def line(self) -> str:
        return (f"{self.prefix}: {self.admitted} of {self.n} admitted, {len(self.denied)} "
                f"denied over quota, {len(self.unavailable)} unavailable, "
                f"{len(self.failed)} failed, in {self.wall:.2f}s")


def held(stack) -> dict[str, int]:
    """What each tenant's pods hold now, from the API."""
    return {t: holdings(stack.kubectl, [t], RESOURCE).total for t in TENANTS}


def never_over(stack, what: str) -> int:
    """The cohort holds at most COHORT now (no settling: a pod that exists
    holds its units whatever gpugate counts).  What it holds."""
    h = held(stack)
    total = sum(h.values())
    assert total <= COHORT, (f"{what}: the cohort holds {total} {RESOURCE} "
                             f"({h}), more than its {COHORT}")
    return total


def settled(stack, gates, timeout: float = 20.0) -> int:
    """assert_invariant of each tenant on every gate of GATES: its count is
    what the pods hold, within the cohort; the cohort's total."""
    total = 0
    for g in gates:
        total = 0
        for t in TENANTS:
            total += assert_invariant(stack.kubectl, g, t, [t], FLAVOR, RESOURCE, COHORT,
                                      timeout=timeout).total
        assert total <= COHORT, f"{g.name}: the cohort holds {total} of {COHORT}"
    return total


def say(line: str) -> None:
    print(line, flush=True)
    log(line)


def round_(stack, replicas, tenants, name: str, gates=None, during=None) -> Burst:
    """One burst, never over the cohort, settled on GATES (every running
    replica by default)."""
    b = Burst(tenants, name, during=during).run()
    say(b.line())
    never_over(stack, name)
    settled(stack, [g for g in (gates or replicas.gates) if g.alive])
    return b


def until_admitted(stack, tenants, what: str, t0: float, timeout: float) -> tuple:
    """Probe bursts of PROBE, one a second (each in its threads, not
    waited for: a call to a stopped replica takes the webhook timeout),
    until one admits.  Checks never_over after each.  (seconds from t0 to
    the first admission, every probe Burst)."""
    probes: list[Burst] = []
    first = None
    deadline = time.monotonic() + timeout
    n = 0
    while first is None and time.monotonic() < deadline:
        n += 1
        probes.append(Burst(tenants, f"{what}-probe-{n}", PROBE).start())
        t = time.monotonic()
        while time.monotonic() - t < 1.0:
            for b in probes:
                if first is None and any(r is not None and r[0] == 201 for r in b.results):
                    first = time.monotonic() - t0
            time.sleep(0.1)
        never_over(stack, f"{what} probe {n}")
    for b in probes:
        b.join()
        if first is None and b.admitted:
            first = time.monotonic() - t0
    never_over(stack, f"{what} probes")
    return first, probes


def probe_summary(probes: list[Burst]) -> str:
    adm = sum(b.admitted for b in probes)
    una = sum(len(b.unavailable) for b in probes)
    den = sum(len(b.denied) for b in probes)
    fail = sum(len(b.failed) for b in probes)
    return (f"{len(probes)} probe bursts of {PROBE}: {adm} admitted, {una} unavailable, "
            f"{den} denied over quota, {fail} failed")


def mutated(t: Api, ns: str) -> dict:
    """A 1-GPU class pod of NS as gpugate's /mutate makes it (a server-side
    dry run as the tenant: nothing is reserved), for review()."""
    status, o = t.request("POST", f"/api/v1/namespaces/{ns}/pods?dryRun=All",
                          cohort_pod(ns, "mutated", 1))
    assert status == 201, (status, message(o))
    return o


def review(gate, obj: dict, name: str, timeout: float = 40.0) -> dict:
    """A CREATE AdmissionReview of OBJ (a mutated pod) named NAME, straight
    to GATE's /validate (no balancer, no apiserver; not a dry run:
    admitted, it reserves): gpugate's response."""
    import copy
    import http.client
    o = copy.deepcopy(obj)
    ns = o["metadata"]["namespace"]
    o["metadata"]["name"] = name
    o["metadata"]["uid"] = str(uuid.uuid4())
    req = {"uid": str(uuid.uuid4()),
           "kind": {"group": "", "version": "v1", "kind": "Pod"},
           "resource": {"group": "", "version": "v1", "resource": "pods"},
           "namespace": ns, "name": name, "operation": "CREATE",
           "userInfo": {"username": f"system:serviceaccount:{ns}:tenant"},
           "object": o, "dryRun": False}
    body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                       "request": req})
    conn = http.client.HTTPSConnection("127.0.0.1", gate.port, timeout=timeout,
                                       context=gate.ssl_context())
    try:
        conn.request("POST", "/validate", body, {"Content-Type": "application/json"})
        r = conn.getresponse()
        data = r.read()
        assert r.status == 200, (r.status, data[:300])
        return json.loads(data)["response"]
    finally:
        conn.close()


# ---------------------------------------------------------------------------
# the scenarios


def test_the_tenants_are_only_tenants(pair):
    for ns, t in pair.items():
        assert t.request("GET", f"/api/v1/namespaces/{ns}/pods")[0] == 200
        other = TENANTS[1 - TENANTS.index(ns)]
        assert t.request("GET", f"/api/v1/namespaces/{other}/pods")[0] == 403


def test_bursts_into_one_cohort_never_over_admit(stack, replicas, pair):
    leader(stack, replicas)
    rounds = []
    for i in range(3):
        rounds.append(round_(stack, replicas, pair, f"burst-{i + 1}"))
        empty(stack, replicas)
    for b in rounds:
        assert not b.failed, f"{b.prefix}: creates failed other than by gpugate: {b.failed}"
        assert not b.unavailable, f"{b.prefix}: unavailable with a leader: {b.unavailable[:2]}"
        assert b.admitted >= 1, f"{b.prefix}: nothing admitted into an empty cohort"


def test_the_leader_killed_mid_burst(stack, replicas, pair):
    """kill -9 of the Lease holder once the first answer of a burst is in;
    bursts go on; the killed one is restarted once another leads."""
    lead = leader(stack, replicas)
    t_kill: list = []

    def kill():
        t_kill.append(time.monotonic())
        replicas.kill(lead)
    live = [g for i, g in enumerate(replicas.gates) if i != lead]
    b = round_(stack, replicas, pair, "kill-9", gates=live, during=kill)
    assert t_kill, "the kill did not run"
    empty(stack, replicas, live)
    first, probes = until_admitted(stack, pair, "kill", t_kill[0], LEASE_S + GATE_S + 25)
    say(f"kill: replica-{lead} killed mid-burst; {probe_summary(probes)}; first admission "
        + ("never" if first is None else f"{first:.1f}s after the kill")
        + f"; Lease holder now {lease_holder(stack)!r}")
    assert first is not None, "no create admitted after the leader's death"
    unavail = [m for p in probes for m in p.unavailable]
    for m in unavail[:1]:
        say(f"kill: unavailable says: {m}")
    # nobody decides until the Lease runs out and the new leader passed
    # its gate (the last renew may precede the kill by a retry period, 2 s;
    # 1 s more of slack): creates are refused as unavailable, saying so
    assert unavail, f"no create refused as unavailable while nobody led: {probe_summary(probes)}"
    assert first >= LEASE_S + GATE_S - 3, (
        f"admitted {first:.1f}s after the leader's death: before its Lease ran out "
        f"({LEASE_S:.0f}s) and a new leader's gate ({GATE_S:.0f}s)")
    t = time.monotonic()
    g = replicas.restart(lead)
    say(f"kill: {g.name} restarted, ready in {time.monotonic() - t:.1f}s; holder "
        f"{lease_holder(stack)!r}")
    empty(stack, replicas)
    after = round_(stack, replicas, pair, "after-kill")
    assert after.admitted >= 1 and not after.unavailable, after.line()


def test_the_leader_stopped_past_its_lease(stack, replicas, pair):
    """SIGSTOP of the Lease holder until another replica leads and has
    filled the cohort (>= 17 s); reviews sent straight to the stopped one
    meanwhile; SIGCONT: none of them admitted, nor any create after."""
    lead = leader(stack, replicas)
    old = replicas.gates[lead]
    objs = [mutated(pair[ns], ns) for ns in TENANTS]  # fit: nominal quota now
    os.kill(old.pid, signal.SIGSTOP)
    t0 = time.monotonic()
    answers: list = [None] * 4

    def ask(i: int) -> None:
        try:
            answers[i] = review(old, objs[i % 2], f"straight-{i}")
        except Exception as e:  # noqa: BLE001 - reported below
            answers[i] = {"error": repr(e)}
    asking = [threading.Thread(target=ask, args=(i,), daemon=True) for i in range(4)]
    try:
        for t in asking:
            t.start()
        first, probes = until_admitted(stack, pair, "stop", t0, LEASE_S + GATE_S + 25)
        assert first is not None, (f"nothing admitted while replica-{lead} was stopped: "
                                   f"{probe_summary(probes)}")
        # the new leader fills the cohort, so that the stopped one's ledger
        # (what it counted at SIGSTOP: nothing) is as wrong as it can be
        fills = []
        for n in range(6):
            if never_over(stack, "stop fill") >= COHORT:
                break
            fills.append(Burst(pair, f"stop-fill-{n + 1}").run())
        full = never_over(stack, "stop filled")
        time.sleep(max(0.0, LEASE_S + 2 - (time.monotonic() - t0)))
    finally:
        stopped = time.monotonic() - t0
        os.kill(old.pid, signal.SIGCONT)
    after = Burst(pair, "stop-after-cont").run()
    for t in asking:
        t.join(45)
    say(f"stop: replica-{lead} stopped {stopped:.1f}s; {probe_summary(probes)}; first "
        f"admission {first:.1f}s after the stop; fills "
        f"{[b.admitted for b in fills]}, cohort holds {full}; holder {lease_holder(stack)!r}")
    say(after.line())
    decided = [a for a in answers if a and a.get("allowed")]
    say("stop: the stopped replica's answers: " + "; ".join(
        str(a.get("error") or (a.get("status") or {}).get("message", "allowed"))[:200]
        for a in answers))
    never_over(stack, "after SIGCONT")
    assert full == COHORT, f"the new leader filled the cohort to {full} only"
    assert not decided, (f"replica-{lead}, stopped past its lease, admitted "
                         f"{len(decided)} of {len(answers)} reviews on its stale ledger")
    assert all(a and "allowed" in a for a in answers), answers
    assert after.admitted == 0, f"a full cohort admitted after SIGCONT: {after.line()}"
    # every replica, the old leader included, counts the truth again
    settled(stack, replicas.gates)
    if "--usage-store" in ARGS:
        assert lease_holder(stack) != f"replica-{lead}", "the stopped leader leads again"


def test_the_apiserver_cut_from_a_follower_then_from_the_leader(stack, replicas, pair):
    lead = leader(stack, replicas)
    f = (lead + 1) % K
    px = replicas.proxies[f]
    others = [g for i, g in enumerate(replicas.gates) if i != f]
    # a follower off the apiserver: it still forwards, and the leader decides
    px.cut()
    rounds = []
    try:
        for n in range(2):
            if n:
                empty(stack, replicas, others)
            rounds.append(round_(stack, replicas, pair, f"cut-follower-{n + 1}", gates=others))
    finally:
        px.restore()
    settled(stack, replicas.gates, timeout=30)
    for b in rounds:
        assert b.admitted >= 1 and not b.failed and not b.unavailable, b.line()
    empty(stack, replicas)

    # the leader off the apiserver: it decides until its renew deadline,
    # then refuses; another replica leads LEASE_S after its last renew
    lead = leader(stack, replicas)
    px = replicas.proxies[lead]
    others = [g for i, g in enumerate(replicas.gates) if i != lead]
    px.cut()
    t0 = time.monotonic()
    try:
        early = Burst(pair, "cut-leader-early").run()
        say(early.line())
        never_over(stack, "cut leader, early")
        # within its renew deadline a leader cut off the apiserver decides
        assert early.admitted >= 1, early.line()
        # room for the next leader, so that it can show it decides (the cut
        # leader's watch does not see these deletes: its ledger is stale)
        empty(stack, replicas, others)
        time.sleep(max(0.0, RENEW_S + 0.5 - (time.monotonic() - t0)))
        first, probes = until_admitted(stack, pair, "cut-leader", t0, LEASE_S + GATE_S + 25)
        say(f"cut leader: replica-{lead} cut off; {probe_summary(probes)}; first admission "
            + ("never" if first is None else f"{first:.1f}s after the cut")
            + f"; holder {lease_holder(stack)!r}")
        assert first is not None, "nobody decided after the leader was cut off"
        # from RENEW_S on the cut leader refuses (the fence), and nobody
        # else decides before its Lease ran out and the gate passed
        assert first >= LEASE_S + GATE_S - 3, (
            f"admitted {first:.1f}s after the leader was cut off: it decided past its "
            f"renew deadline ({RENEW_S:.0f}s), or another before the Lease ran out and "
            f"its gate passed")
        fill = Burst(pair, "cut-leader-fill").run()
        say(fill.line())
        never_over(stack, "cut leader, fill")
    finally:
        px.restore()
    settled(stack, replicas.gates, timeout=30)
    if "--usage-store" in ARGS:
        assert lease_holder(stack) != f"replica-{lead}", "the cut leader still leads"
