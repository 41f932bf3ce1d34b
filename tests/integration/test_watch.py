"""API mode: gpugate lists and watches Pods and Jobs (kube/feed.c on
kube/informer.c) from a scripted fake Kubernetes API (fakekube.py), and its
quota follows.

No test asserts a duration except as a generous bound (SIGTERM) or as a
loose ratio (backoff); everything else polls with a deadline.
"""

from __future__ import annotations

import re
import socket
import time

import pytest

from conftest import SLOW, VALGRIND, metrics, poll
from fakekube import FakeKube, api_job, api_pod
from objects import pod

WAIT = 15.0 * SLOW
# Short enough for a test, long enough that a reservation outlives the
# requests that make and check it (valgrind makes those slow).
TTL = 2 if not VALGRIND else 8
USED = 'gpugate_quota_used{tenant="strict",flavor="h100-80gb"}'


@pytest.fixture
def kube(certs, tmp_path):
    k = FakeKube(certs.ca, certs.cert, certs.key, tmp_path / "kube").start()
    yield k
    k.stop()


@pytest.fixture
def gate(kube, fresh_server, custom_policy):
    """Starts gpugate on the fake API (stopped, and checked, before the fake
    goes away)."""
    def start(*extra: str):
        return fresh_server(custom_policy, extra_args=("--kubeconfig", str(kube.kubeconfig),
                                                *extra))
    return start


def srv_metrics(srv) -> dict[str, float]:
    with srv.client() as c:
        return metrics(c)


def used(srv) -> float:
    return srv_metrics(srv)[USED]


def wait_used(srv, n: float, timeout: float = WAIT) -> None:
    poll(lambda: used(srv) == n, f"{USED} == {n} (it is {used(srv)})", timeout)


def readyz(srv):
    with srv.client() as c:
        return c.get("/readyz")


def wait_ready(srv) -> None:
    poll(lambda: readyz(srv).status == 200, "/readyz 200")


def wait_connected(srv) -> None:
    poll(lambda: srv_metrics(srv)["gpugate_kube_watch_connected"] == 1,
         "gpugate_kube_watch_connected 1")


def wait_disconnected(srv) -> None:
    poll(lambda: srv_metrics(srv)["gpugate_kube_watch_connected"] == 0,
         "gpugate_kube_watch_connected 0")


def admit(srv, name: str, gpus: int, *, validate: bool = True):
    """/mutate then (on the patched object) /validate of a train-small pod
    with a uid, as the apiserver sends a create; returns the /validate
    answer (or the /mutate one)."""
    obj = pod(name, "strict", cls="train-small", gpus=str(gpus))
    obj["metadata"]["uid"] = f"uid-admitted-{name}"
    with srv.client() as c:
        m = c.admit("mutate", obj)
        if not validate or not m.allowed:
            return m
        return c.admit("validate", m.patched())


def over_quota(requested: int, in_use: int) -> str:
    return (f'gpugate: tenant "strict" is over its h100-80gb quota: requested '
            f"{requested} (class train-small), in use {in_use} of nominal 8, no "
            f"cohort to borrow from")


def started(srv, kube) -> None:
    wait_ready(srv)
    wait_connected(srv)
    poll(lambda: kube.open_watches("pods") and kube.open_watches("jobs"),
         "both watches open on the fake")


# ---------------------------------------------------------------------------


def test_readyz_waits_for_both_lists(gate, kube):
    kube.fail_lists("jobs", 500)
    srv = gate()
    poll(lambda: len(kube.requests("jobs", watch=False)) >= 2, "two job lists")
    poll(lambda: kube.requests("pods", watch=True), "pods listed and watched meanwhile")
    # The memory store's Lease is the other thing /readyz waits for; under
    # valgrind its first read may come after the pods' watch. Wait for it,
    # so that the answer is about the lists alone.
    poll(lambda: "Lease" not in readyz(srv).text, "the Lease read")
    r = readyz(srv)
    assert r.status == 503, r
    assert r.text == "quota usage not synced from the Kubernetes API yet\n", r
    m = srv_metrics(srv)
    assert m["gpugate_kube_synced"] == 0
    assert m["gpugate_kube_watch_connected"] == 0, "the job watch is not open"
    assert 'kind=jobs status=500' in srv.stderr_text()

    kube.fail_lists("jobs", None)
    wait_ready(srv)
    assert readyz(srv).text == "ok\n"
    assert srv_metrics(srv)["gpugate_kube_synced"] == 1
    wait_connected(srv)
    # What gpugate asked for: every object (no label a status writer could
    # remove decides what is counted, #13), bookmarks, from the list.
    # The controllers beside the informer (gang start, reclaim) list their own
    # labelled objects on their own timers; those lists are theirs, not the
    # count's, and may or may not have happened by now.
    controllers = ("gpugate.io/gang", "gpugate.io/reclaimed",
                   "batch.kubernetes.io/controller-uid=")
    for kind in ("pods", "jobs"):
        lists = kube.requests(kind, watch=False)
        counted = [q for q in lists if "labelSelector" not in q.query]
        assert counted, f"the informer listed every {kind}"
        assert all(q.query.get("limit") == "500" for q in counted)
        assert all(q.query["labelSelector"].startswith(controllers)
                   for q in lists if "labelSelector" in q.query), lists
        w = kube.requests(kind, watch=True)[0]
        assert "labelSelector" not in w.query
        assert w.query["allowWatchBookmarks"] == "true"
        assert int(w.query["resourceVersion"]) > 0


def test_connected_only_once_the_watch_answered(gate, kube):
    kube.hang_watches("pods", True)
    srv = gate()
    wait_ready(srv)
    poll(lambda: kube.requests("pods", watch=True), "a pod watch request")
    # The request is out but unanswered: not connected (not for a moment,
    # not for a second).
    for _ in range(3):
        assert srv_metrics(srv)["gpugate_kube_watch_connected"] == 0
        time.sleep(0.3)
    kube.hang_watches("pods", False)
    wait_connected(srv)


def test_listed_usage_counts_at_validate(gate, kube):
    kube.put("pods", api_pod("a", "strict", 2), api_pod("b", "strict", 2),
             api_pod("c", "strict", 2),
             api_pod("done", "strict", 4, phase="Succeeded"))
    srv = gate()
    wait_ready(srv)
    assert used(srv) == 6, "3 running pods of 2; the Succeeded pod holds nothing"
    # Both fit when /mutate peeks; /validate reserves one after the other.
    with srv.client() as c:
        first = c.admit("mutate", _strict_pod("x", 2))
        second = c.admit("mutate", _strict_pod("y", 2))
        assert first.allowed and second.allowed
        v1 = c.admit("validate", first.patched())
        v2 = c.admit("validate", second.patched())
    assert v1.allowed, v1
    assert v1.warnings == ["gpugate: train-small -> 2 x h100-80gb for tenant strict "
                           "(8/8 in use)"]
    assert not v2.allowed
    assert v2.message == over_quota(2, 8)
    assert used(srv) == 8


def _strict_pod(name: str, gpus: int) -> dict:
    obj = pod(name, "strict", cls="train-small", gpus=str(gpus))
    obj["metadata"]["uid"] = f"uid-admitted-{name}"
    return obj


def test_list_pages_are_all_counted(gate, kube):
    kube.page_size("pods", 2)
    kube.put("pods", *(api_pod(f"p{i}", "strict", 1) for i in range(5)))
    kube.put("jobs", api_job("j", "strict", 1, 2))
    srv = gate()
    wait_ready(srv)
    assert used(srv) == 7
    lists = kube.requests("pods", watch=False)
    assert len(lists) == 3, lists
    assert "continue" not in lists[0].query
    assert lists[1].query["continue"] and lists[2].query["continue"]
    assert lists[1].query["continue"] != lists[2].query["continue"]
    m = admit(srv, "z", 2, validate=False)
    assert m.message == over_quota(2, 7)


def test_watch_events_add_and_release(gate, kube):
    srv = gate()
    started(srv, kube)
    assert used(srv) == 0
    p = api_pod("a", "strict", 2)
    kube.event("pods", "ADDED", p)
    wait_used(srv, 2)
    j = api_job("j", "strict", 2, 2)
    kube.event("jobs", "ADDED", j)
    wait_used(srv, 6)
    # A pod of that Job rides on its Job's reservation.
    kube.event("pods", "ADDED", api_pod("j-0", "strict", 2, owner_job_uid=j["metadata"]["uid"]))
    k = api_job("k", "strict", 1, 1)
    kube.event("jobs", "ADDED", k)
    wait_used(srv, 7)
    # Released: a pod that succeeded, a Job deleted, a Job complete.
    p["status"]["phase"] = "Succeeded"
    kube.event("pods", "MODIFIED", p)
    wait_used(srv, 5)
    kube.event("jobs", "DELETED", k)
    wait_used(srv, 4)
    kube.event("pods", "DELETED", api_pod("j-0", "strict", 2))
    kube.event("jobs", "MODIFIED", api_job("j", "strict", 2, 2, condition="Complete"))
    wait_used(srv, 0)
    m = admit(srv, "most", 4)
    assert m.allowed, m


def test_what_pods_hold_not_their_labels_decides_usage(gate, kube):
    # #13: membership no status writer can move, ownership nobody can forge.
    srv = gate()
    started(srv, kube)
    # A pod whose gpugate.io/tenant label a status writer removed still
    # holds its GPUs (the watch has no label selector).
    p = api_pod("a", "strict", 2)
    del p["metadata"]["labels"]["gpugate.io/tenant"]
    kube.event("pods", "ADDED", p)
    wait_used(srv, 2)
    # A Job of 1 pod x 1 GPU; a bare pod of 4 GPUs that forges its
    # ownerReference (without the job controller's label) is charged;
    # with the label too but another count it is charged as well.
    j = api_job("j", "strict", 1, 1)
    kube.event("jobs", "ADDED", j)
    wait_used(srv, 3)
    uid = j["metadata"]["uid"]
    kube.event("pods", "ADDED", api_pod("forged", "strict", 4, owner_job_uid=uid,
                                        controller_label=False))
    wait_used(srv, 7)
    kube.event("pods", "ADDED", api_pod("forged2", "strict", 2, owner_job_uid=uid))
    wait_used(srv, 9)
    # Its real pod rides on the gang; a second matching one (a replacement
    # while the first terminates) is beyond the gang: charged.
    kube.event("pods", "ADDED", api_pod("j-0", "strict", 1, owner_job_uid=uid))
    wait_used(srv, 9)
    j0b = api_pod("j-0b", "strict", 1, owner_job_uid=uid)
    kube.event("pods", "ADDED", j0b)
    wait_used(srv, 10)
    # Suspended, the Job holds nothing; its pods hold what they hold until
    # they are gone.
    j["spec"]["suspend"] = True
    kube.event("jobs", "MODIFIED", j)
    wait_used(srv, 10)
    kube.event("pods", "DELETED", j0b)
    wait_used(srv, 9)
    kube.event("pods", "DELETED", api_pod("j-0", "strict", 1))
    wait_used(srv, 8)
    # The forged ones go: what is left is the pod without its label.
    for name in ("forged", "forged2"):
        kube.event("pods", "DELETED", api_pod(name, "strict", 1))
    wait_used(srv, 2)


def test_bookmark_sets_where_the_next_watch_resumes(gate, kube):
    srv = gate()
    started(srv, kube)
    kube.event("pods", "ADDED", api_pod("a", "strict", 1))
    wait_used(srv, 1)
    rv = kube.bookmark("pods")
    n = len(kube.requests("pods", watch=True))
    kube.drop("pods")
    poll(lambda: len(kube.requests("pods", watch=True)) > n, "a new pod watch")
    again = kube.requests("pods", watch=True)[n]
    assert again.query["resourceVersion"] == str(rv)
    assert len(kube.requests("pods", watch=False)) == 1, "resumed, not relisted"


def test_410_relists_and_forgets_what_is_gone(gate, kube):
    kube.put("pods", api_pod("a", "strict", 2), api_pod("b", "strict", 3))
    srv = gate()
    started(srv, kube)
    assert used(srv) == 5
    # b is deleted while the history that said so is compacted away.
    kube.remove("pods", "uid-pod-strict-b")
    rv = kube.expire("pods")
    poll(lambda: len(kube.requests("pods", watch=False)) == 2, "a second pod list")
    wait_used(srv, 2)
    w = poll(lambda: [q for q in kube.requests("pods", watch=True)
                      if int(q.query["resourceVersion"]) >= rv], "a watch from the new list")
    assert w
    assert "msg=\"relisted\" kind=pods" in srv.stderr_text()

    # A watch that resumes from a compacted version is told 410 at once.
    wait_connected(srv)
    kube.remove("pods", "uid-pod-strict-a")
    kube.compact("pods")
    kube.drop("pods")
    poll(lambda: len(kube.requests("pods", watch=False)) == 3, "a third pod list")
    wait_used(srv, 0)
    # The informer's lists (a controller's own, with a labelSelector, may
    # come in a slow run: the reclaimer's every 2 s).
    assert len([q for q in kube.requests("jobs", watch=False)
                if "labelSelector" not in q.query]) == 1, "jobs were not relisted"


def test_log_lines_of_a_sync_and_a_relist(gate, kube):
    """The lines docs/operations.md shows: the first whole list of each kind
    is "usage synced" (once), a 410 is a "watch error", every later list a
    "relisted" with the version it watches from."""
    kube.put("pods", api_pod("a", "strict", 2))
    kube.put("jobs", api_job("j", "strict", 1, 1))
    srv = gate()
    started(srv, kube)
    log = srv.stderr_text()
    assert len(re.findall(r'level=info msg="usage synced" kind=pods entries=\d+\n', log)) == 1, log
    assert len(re.findall(r'level=info msg="usage synced" kind=jobs entries=\d+\n', log)) == 1, log
    assert "relisted" not in log, log
    rv = kube.expire("jobs")
    poll(lambda: "msg=\"relisted\" kind=jobs" in srv.stderr_text(), "a relist of jobs")
    log = srv.stderr_text()
    assert 'level=info msg="watch error" kind=jobs code=410\n' in log, log
    m = re.search(r'level=info msg="relisted" kind=jobs resource_version=(\d+)\n', log)
    assert m and int(m.group(1)) >= rv, log
    # pods, jobs and claims, once each
    assert log.count('msg="usage synced"') == 3, "a relist is not a first sync"
    assert "kind=pods resource_version" not in log, "pods were not relisted"
    wait_used(srv, 3)


def test_dropped_watch_reconnects_with_backoff_that_resets(gate, kube):
    # Lists fail four times: the retries back off.
    kube.fail_lists("pods", 500, times=4)
    srv = gate()
    wait_ready(srv)
    lists = [q.at for q in kube.requests("pods", watch=False)]
    assert len(lists) == 5, lists
    gaps = [b - a for a, b in zip(lists, lists[1:])]
    assert gaps[3] > 2 * gaps[0], gaps
    log = srv.stderr_text()
    assert re.search(r'msg="cannot list" kind=pods status=500 retry_ms=500\b', log), log
    assert re.search(r'msg="cannot list" kind=pods status=500 retry_ms=4000\b', log), log

    # A dropped watch is resumed, and events flow again.
    wait_connected(srv)
    n = len(kube.requests("pods", watch=True))
    kube.drop("pods")
    poll(lambda: len(kube.requests("pods", watch=True)) > n, "a new pod watch")
    wait_connected(srv)
    kube.event("pods", "ADDED", api_pod("a", "strict", 2))
    wait_used(srv, 2)
    assert re.search(r'msg="watch broke" kind=pods status=-1 error="[^"]+" '
                     r'retry_ms=500\b', srv.stderr_text())

    # The successes reset the backoff: the retries after a drop start at
    # 0.5 s again, not at the 8 s the failed lists had reached.
    kube.fail_watches("pods", 500)
    n = len(kube.requests("pods", watch=True))
    dropped = time.monotonic()
    kube.drop("pods")
    poll(lambda: len(kube.requests("pods", watch=True)) >= n + 2, "two failed watches")
    again = [q.at for q in kube.requests("pods", watch=True)[n:n + 2]]
    assert again[0] - dropped < gaps[3], (again[0] - dropped, gaps)
    assert again[1] - again[0] < gaps[3], (again, gaps)
    wait_disconnected(srv)
    kube.fail_watches("pods", None)
    wait_connected(srv)
    assert used(srv) == 2


def test_reservation_expires_when_its_object_never_shows(gate, kube):
    srv = gate("--reservation-ttl", str(TTL))
    started(srv, kube)
    assert f"reservation_ttl_s={TTL}" in srv.stderr_text()
    v = admit(srv, "never", 2)
    assert v.allowed, v
    assert used(srv) == 2
    wait_used(srv, 0, timeout=TTL + WAIT)
    assert 'msg="reservations expired" count=1' in srv.stderr_text()

    # One that shows up in the watch stays.
    v = admit(srv, "shows", 3)
    assert v.allowed, v
    kube.event("pods", "ADDED", api_pod("shows", "strict", 3, uid="uid-admitted-shows"))
    time.sleep(TTL + 2)
    assert used(srv) == 3


def test_reservation_is_kept_while_the_watch_is_down(gate, kube):
    srv = gate("--reservation-ttl", str(TTL))
    started(srv, kube)
    kube.fail_watches("pods", 500)
    kube.drop("pods")
    wait_disconnected(srv)
    v = admit(srv, "pending", 2)
    assert v.allowed, v
    time.sleep(2 * TTL + 1)
    assert used(srv) == 2, "a reservation must not expire while nobody watches"
    kube.fail_watches("pods", None)
    wait_connected(srv)
    wait_used(srv, 0, timeout=TTL + WAIT)


def test_sigterm_while_a_list_hangs(gate, kube):
    kube.hang_lists("pods", True)
    kube.hang_lists("jobs", True)
    srv = gate()
    poll(lambda: kube.requests("pods", watch=False) and kube.requests("jobs", watch=False),
         "both lists asked")
    assert readyz(srv).status == 503
    t0 = time.monotonic()
    rc = srv.terminate(timeout=5 * SLOW)
    took = time.monotonic() - t0
    assert rc == 0, f"exit {rc} after {took:.1f}s; stderr:\n{srv.stderr_tail()}"
    assert not srv.sanitizer_report(), srv.stderr_tail(80)


def test_dead_api_server(fresh_server, custom_policy, tmp_path):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    kc = tmp_path / "kubeconfig"
    kc.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        f"clusters: [{{name: c, cluster: {{server: 'https://127.0.0.1:{port}', "
        "insecure-skip-tls-verify: true}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\n")
    srv = fresh_server(custom_policy, extra_args=("--kubeconfig", str(kc)))
    poll(lambda: srv.stderr_text().count('msg="cannot list" kind=pods') >= 2,
         "two failed pod lists in the log")
    log = srv.stderr_text()
    assert re.search(r'level=warn msg="cannot list" kind=pods error="GET /api/v1/pods\?'
                     r'[^"]*: (Couldn\'t|Could not) connect to server" retry_ms=500\b',
                     log), log
    r = readyz(srv)
    assert r.status == 503, r
    with srv.client() as c:
        assert c.get("/healthz").status == 200
    m = srv_metrics(srv)
    assert m["gpugate_kube_synced"] == 0 and m["gpugate_kube_watch_connected"] == 0
    assert srv.terminate() == 0, srv.stderr_tail()
    assert not srv.sanitizer_report(), srv.stderr_tail(80)
