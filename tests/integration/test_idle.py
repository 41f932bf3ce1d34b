"""Idle GPUs (SPEC section 10; controllers/idle.c) over the fake API and a
fake Prometheus (fakeprom.py): gpugate serve --prometheus-url reads each
pod's utilization every round, warns on an idle pod or Job (the Event
GPUIdle, the annotation gpugate.io/idle-since, the gauge
gpugate_idle_gpus), takes the annotation off when it is busy again, hands
the reclaimer what a reclaim rule says to take back, meters busy GPU time,
and judges nothing when Prometheus is down or answers garbage.

The rounds are GPUGATE_TEST_ROUND_MS short; changes are waited for on what
the fakes recorded, never by sleeping a fixed time.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

import fakeprom
from conftest import EXAMPLE_POLICY, SLOW, metrics, poll
from fakekube import api_job, api_pod
from test_watch import kube  # noqa: F401  (the fixture)

ROUND = 0.3
ROUND_ENV = {"GPUGATE_TEST_ROUND_MS": str(int(ROUND * 1000))}
ANN = "gpugate.io/idle-since"
H100 = "h100-80gb"


@pytest.fixture
def idle_policy(tmp_path) -> Path:
    """The example policy: research warns after 30m below 5 %; its class
    train-small is taken back; product has no rule."""
    text = EXAMPLE_POLICY.read_text()
    text = text.replace(
        "    classes: [train-large, train-small, dev-shared]\n",
        "    classes: [train-large, train-small, dev-shared]\n"
        '    idle: {below: "5%", for: 30m, action: warn}\n', 1)
    text = text.replace(
        "    memory: 120Gi\n    preemptible: true\n",
        "    memory: 120Gi\n    preemptible: true\n"
        '    idle: {below: "5%", for: 30m, action: reclaim}\n', 1)
    assert text.count("idle: {") == 2
    p = tmp_path / "idle-policy.yaml"
    p.write_text(text)
    return p


@pytest.fixture
def prom():
    fp = fakeprom.start()
    yield fp
    fakeprom.stop(fp)


@pytest.fixture
def idle_gate(kube, fresh_server, idle_policy, prom):  # noqa: F811
    """gpugate serve on the fakes, once usage is synced."""
    def start(*extra: str, url: str | None = None):
        srv = fresh_server(idle_policy, extra_args=(
            "--kubeconfig", str(kube.kubeconfig), "--prometheus-url", url or prom.url,
            *extra), env=ROUND_ENV)
        with srv.client() as c:
            poll(lambda: c.get("/readyz").status == 200, "/readyz 200")
        return srv
    return start


def running(pod: dict, *, node: str = "h0", started: float = 7200,
            cls: str | None = None) -> dict:
    """pod bound to node, Running for `started` seconds."""
    pod["spec"]["nodeName"] = node
    pod["status"]["startTime"] = time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                               time.gmtime(time.time() - started))
    if cls:
        pod["metadata"]["labels"]["gpugate.io/class"] = cls
    return pod


def events(kube, name: str, reason: str = "GPUIdle") -> list[dict]:
    return [e for e in list(kube.k8s_events)
            if e.get("reason") == reason and e["involvedObject"]["name"] == name]


def annotation(kube, kind: str, name: str, ns: str) -> str | None:
    o = kube.watched(kind, name, ns)
    assert o is not None, name
    return ((o.get("metadata") or {}).get("annotations") or {}).get(ANN)


def idle_patches(kube, name: str) -> list:
    return [p[4] for p in list(kube.patches)
            if p[2] == name and ANN in json.dumps(p[4])]


def get_json(c, path: str) -> dict:
    r = c.get(path)
    assert r.status == 200, r
    return json.loads(r.body)


def test_an_idle_pod_is_warned_and_busy_again_taken_off(kube, idle_gate, prom):
    """Only the pod idle for `for` with data for `for` is warned: not the
    busy one, not one without data, not one younger than `for`, not one
    of a tenant without a rule; busy again, its annotation goes."""
    kube.put("pods",
             running(api_pod("notebook", "research", 2)),
             running(api_pod("busy", "research", 1)),
             running(api_pod("nodata", "research", 1)),
             running(api_pod("young", "research", 1), started=300),
             running(api_pod("short", "research", 1)),
             running(api_pod("serving", "product-inference", 1)))
    prom.idle("research", "notebook", level=0.021)
    prom.idle("research", "busy", level=0.01)
    prom.pod("research", "busy", peak=0.4)           # one busy step in the window
    prom.idle("research", "young")
    prom.idle("research", "short", since=600)        # data for 10 minutes only
    prom.idle("product-inference", "serving", level=0.0)
    srv = idle_gate()
    with srv.client() as c:
        ev = poll(lambda: events(kube, "notebook"), "GPUIdle on the idle pod")
        poll(lambda: annotation(kube, "pods", "notebook", "research"), "the annotation")
        m = poll(lambda: (lambda m: m if m.get(
            f'gpugate_idle_gpus{{tenant="research",flavor="{H100}"}}') == 2 else None)(
            metrics(c)), "gpugate_idle_gpus 2")
        assert m["gpugate_prometheus_up"] == 1
        # A few more rounds: still one Event, nobody else touched.
        n = len(prom.asked(fakeprom.PROF, "peak"))
        poll(lambda: len(prom.asked(fakeprom.PROF, "peak")) >= n + 3, "three more rounds")
        assert len(events(kube, "notebook")) == 1, "once per idle spell"
        for other in ("busy", "nodata", "young", "short", "serving"):
            assert not events(kube, other), other
            assert not idle_patches(kube, other), other
        e = ev[0]
        since = annotation(kube, "pods", "notebook", "research")
        assert e["type"] == "Warning" and e["involvedObject"]["kind"] == "Pod"
        assert e["message"] == (
            f"its GPUs were below 5% for 30m (highest 2.1%) since {since}: use them, "
            "or release them (delete the pod) so that others can"), e["message"]
        # Asked as policy/idle.c words it, at gpugate's time; the UTIL pair
        # only because a pod (nodata) had no PROF series.
        q = prom.asked(fakeprom.PROF, "peak")[0]
        assert q.text == ('max_over_time((avg by (namespace, pod) '
                          '(DCGM_FI_PROF_GR_ENGINE_ACTIVE{pod!=""}))[1800s:60s])'), q.text
        assert q.time and abs(q.time - time.time()) < 60
        assert prom.asked(fakeprom.UTIL, "peak")
        # GET /pool: the idle pod, from the annotation the watch shows.
        pool = poll(lambda: (lambda p: p if p["idle"] else None)(get_json(c, "/pool")),
                    "/pool lists the idle pod")
        assert [(x["namespace"], x["pod"], x["tenant"], x["flavor"], x["units"], x["since"])
                for x in pool["idle"]] == [("research", "notebook", "research", H100, 2,
                                            since)]
        shares = {t["name"]: t["busyShare"] for t in pool["tenants"]}
        # research: notebook 2 at 2.1 %, busy 1 at 1 %, young 1 at 1 %,
        # short 1 at 1 % (nodata: none): (0.042 + 0.03) / 5.
        assert shares["research"] == pytest.approx(0.072 / 5)
        assert shares["product"] == pytest.approx(0.0)
        assert shares["sandbox"] is None
        # Busy again: the annotation is taken off, the gauge drops.
        prom.pod("research", "notebook", peak=0.5)
        poll(lambda: annotation(kube, "pods", "notebook", "research") is None,
             "the annotation taken off")
        poll(lambda: f'gpugate_idle_gpus{{tenant="research",flavor="{H100}"}}'
             not in metrics(c), "no idle GPUs")
        assert len(events(kube, "notebook")) == 1


def test_a_job_is_idle_only_when_all_its_pods_are(kube, idle_gate, prom):
    job = api_job("train", "research", 2, 4)
    uid = job["metadata"]["uid"]
    kube.put("jobs", job)
    kube.put("pods",
             running(api_pod("train-0", "research", 4, owner_job_uid=uid)),
             running(api_pod("train-1", "research", 4, owner_job_uid=uid)))
    prom.idle("research", "train-0")
    prom.idle("research", "train-1", level=0.3)
    srv = idle_gate()
    with srv.client() as c:
        n = len(prom.asked(fakeprom.PROF, "peak"))
        poll(lambda: len(prom.asked(fakeprom.PROF, "peak")) >= n + 3, "three rounds")
        assert not events(kube, "train") and not events(kube, "train-0")
        assert not idle_patches(kube, "train-0")
        prom.idle("research", "train-1", level=0.02)
        ev = poll(lambda: events(kube, "train"), "GPUIdle on the Job")
        assert ev[0]["involvedObject"]["kind"] == "Job"
        assert ev[0]["message"].startswith("its pods' GPUs were below 5% for 30m "
                                           "(highest 2.0%) since ")
        assert "(delete or suspend the Job)" in ev[0]["message"]
        poll(lambda: events(kube, "train-0") and events(kube, "train-1"), "on each pod")
        since = poll(lambda: annotation(kube, "jobs", "train", "research"),
                     "the Job's annotation")
        for p in ("train-0", "train-1"):
            assert poll(lambda: annotation(kube, "pods", p, "research"), p) == since
        poll(lambda: metrics(c).get(
            f'gpugate_idle_gpus{{tenant="research",flavor="{H100}"}}') == 8,
            "the Job's 8 units idle")
        # One pod busy again: the Job is not idle; every mark comes off.
        prom.pod("research", "train-0", peak=0.9)
        poll(lambda: annotation(kube, "jobs", "train", "research") is None, "Job's off")
        for p in ("train-0", "train-1"):
            poll(lambda: annotation(kube, "pods", p, "research") is None, p)


def test_prometheus_down_or_garbage_judges_nothing(kube, idle_gate, prom):
    kube.put("pods", running(api_pod("notebook", "research", 2)))
    prom.idle("research", "notebook")
    prom.fail(503)
    srv = idle_gate()
    with srv.client() as c:
        poll(lambda: metrics(c).get('gpugate_prometheus_errors_total{reason="http"}', 0) >= 3,
             "three failed rounds")
        m = metrics(c)
        assert m["gpugate_prometheus_up"] == 0
        assert m['gpugate_prometheus_errors_total{reason="timeout"}'] == 0
        assert not events(kube, "notebook") and not idle_patches(kube, "notebook")
        prom.fail(200, "this is not JSON")
        poll(lambda: metrics(c).get('gpugate_prometheus_errors_total{reason="garbage"}', 0)
             >= 2, "garbage rounds")
        prom.fail(200, json.dumps({"status": "success", "data": {
            "resultType": "matrix", "result": []}}))
        n = metrics(c)['gpugate_prometheus_errors_total{reason="garbage"}']
        poll(lambda: metrics(c)['gpugate_prometheus_errors_total{reason="garbage"}'] >= n + 2,
             "a matrix is garbage too")
        assert not events(kube, "notebook")
        # Said once per change, not every round.
        log = srv.stderr_path.read_text()
        said = [ln for ln in log.splitlines() if "prometheus not read" in ln]
        assert [("reason=http" in s, "reason=garbage" in s) for s in said] == \
            [(True, False), (False, True)], said
        prom.heal()
        poll(lambda: events(kube, "notebook"), "judged once Prometheus answers")
        assert metrics(c)["gpugate_prometheus_up"] == 1
        assert 'msg="prometheus read again"' in srv.stderr_path.read_text()


def test_busy_gpu_time_is_metered(kube, idle_gate, prom):
    """gpugate_gpu_busy_seconds_total grows by units x seconds x the pod's
    mean: 2 units at 50 % are one busy GPU-second a second."""
    kube.put("pods", running(api_pod("train", "research", 2)),
             running(api_pod("nodata", "research", 4)))
    prom.pod("research", "train", peak=0.5, first=time.time() - 7200, recent=0.5, hour=0.5)
    srv = idle_gate()
    key = f'gpugate_gpu_busy_seconds_total{{tenant="research",flavor="{H100}"}}'
    with srv.client() as c:
        poll(lambda: metrics(c).get(key, 0) > 0, "busy seconds counted")
        a, t0 = metrics(c)[key], time.monotonic()
        time.sleep(3)
        b, t1 = metrics(c)[key], time.monotonic()
        # Within two rounds of the wall time either side (a round's gap is
        # capped at two intervals; a scrape lands between rounds).
        assert (t1 - t0) - 2 * ROUND - 0.5 <= b - a <= (t1 - t0) + 2 * ROUND + 0.5, (a, b)
        # The RECENT query spans the round's gap, at least a second.
        q = prom.asked(fakeprom.PROF, "recent")[-1]
        assert q.text == ('avg by (namespace, pod) (avg_over_time('
                          'DCGM_FI_PROF_GR_ENGINE_ACTIVE{pod!=""}[1s]))'), q.text


def test_a_reclaim_rule_hands_the_workload_to_the_reclaimer(kube, idle_gate, prom):
    """train-small's rule says reclaim: the idle pod is warned with what
    gpugate will do, and the reclaimer asks it to checkpoint."""
    kube.put("pods", running(api_pod("exp", "research", 1), cls="train-small"))
    prom.idle("research", "exp")
    idle_gate()
    ev = poll(lambda: events(kube, "exp"), "GPUIdle")
    assert "otherwise gpugate takes them back: it asks for a checkpoint (annotation " \
        "gpugate.io/checkpoint-requested), then evicts the pod" in ev[0]["message"]
    poll(lambda: ((kube.watched("pods", "exp", "research") or {}).get("metadata", {})
                  .get("annotations") or {}).get("gpugate.io/checkpoint-requested"),
         "the reclaimer's checkpoint request")


def test_without_prometheus_url_nothing_is_idle(kube, fresh_server, idle_policy):  # noqa: F811
    kube.put("pods", running(api_pod("notebook", "research", 2)))
    srv = fresh_server(idle_policy, extra_args=("--kubeconfig", str(kube.kubeconfig)),
                       env=ROUND_ENV)
    with srv.client() as c:
        poll(lambda: c.get("/readyz").status == 200, "/readyz 200")
        m = poll(lambda: (lambda m: m if "gpugate_prometheus_errors_total"
                          "{reason=\"http\"}" in m else None)(metrics(c)), "the idle row")
        assert "gpugate_prometheus_up" not in m
        poll(lambda: "has no --prometheus-url" in srv.stderr_path.read_text(), "said")
        time.sleep(3 * ROUND)
        log = srv.stderr_path.read_text()
        assert log.count("has no --prometheus-url") == 1
        assert not events(kube, "notebook")


def test_gpugate_pool_reads_the_busy_share_from_prometheus(kube, idle_policy, prom,
                                                           gpugate_bin):
    """gpugate pool --prometheus-url: each tenant's busy share over the last
    hour, PROF first and UTIL for the pods PROF has no series for, as GET
    /pool of gpugate serve shows it; a Prometheus that cannot be read ends
    the command (asked for, the share is never left out silently)."""
    kube.put("pods",
             running(api_pod("a", "research", 2)),
             running(api_pod("b", "research", 2)),
             running(api_pod("c", "research", 4)),
             running(api_pod("serving", "product-inference", 1)))
    prom.pod("research", "a", hour=0.5)
    prom.pod("research", "b", metric=fakeprom.UTIL, hour=0.25)  # no PROF series
    prom.pod("product-inference", "serving", hour=1.0)
    prom.pod("research", "gone", hour=0.9)                        # not a pod any more
    args = ("--policy", str(idle_policy), "--kubeconfig", str(kube.kubeconfig))

    r = subprocess.run([str(gpugate_bin), "pool", *args, "-o", "json", "--prometheus-url",
                        prom.url], capture_output=True, text=True, timeout=60 * SLOW)
    assert r.returncode == 0, r
    assert r.stderr == "", r.stderr
    shares = {t["name"]: t["busyShare"] for t in json.loads(r.stdout)["tenants"]}
    # research: (2 x 0.5 + 2 x 0.25) of the 4 units with data (c has none).
    assert shares["research"] == pytest.approx(1.5 / 4)
    assert shares["product"] == pytest.approx(1.0)
    assert shares["sandbox"] is None
    hours = [q for q in prom.queries if q.kind == "hour"]
    assert [q.metric for q in hours] == [fakeprom.PROF, fakeprom.UTIL], hours
    assert hours[0].text == ('avg by (namespace, pod) (avg_over_time('
                             'DCGM_FI_PROF_GR_ENGINE_ACTIVE{pod!=""}[3600s]))')
    # The text shows it too.
    r = subprocess.run([str(gpugate_bin), "pool", *args, "--prometheus-url", prom.url],
                       capture_output=True, text=True, timeout=60 * SLOW)
    assert r.returncode == 0, r
    assert "BUSY" in r.stdout and "37.5" in r.stdout, r.stdout
    # Without the flag: no share, and no query.
    n = len(prom.queries)
    r = subprocess.run([str(gpugate_bin), "pool", *args, "-o", "json"],
                       capture_output=True, text=True, timeout=60 * SLOW)
    assert r.returncode == 0, r
    assert all(t["busyShare"] is None for t in json.loads(r.stdout)["tenants"])
    assert len(prom.queries) == n
    # Prometheus down: the command says so and fails.
    prom.fail(503, b'{"status":"error","errorType":"unavailable","error":"no"}')
    r = subprocess.run([str(gpugate_bin), "pool", *args, "--prometheus-url", prom.url],
                       capture_output=True, text=True, timeout=60 * SLOW)
    assert r.returncode == 1, r
    assert r.stdout == ""
    assert r.stderr.startswith("gpugate pool: prometheus: "), r.stderr
    assert "503" in r.stderr, r.stderr
    # A token file without the URL is a usage error.
    r = subprocess.run([str(gpugate_bin), "pool", *args, "--prometheus-ca", str(idle_policy)],
                       capture_output=True, text=True, timeout=60 * SLOW)
    assert r.returncode == 2, r
    assert "--prometheus-bearer-token-file and --prometheus-ca need --prometheus-url" in \
        r.stderr, r.stderr
