"""The fake Kubernetes API itself (fakekube.py, population.py): it stands in
for the kube-apiserver in test_watch.py, tests/unit/kube and
bench/feed-memory.sh, so these cases hold it to what the apiserver does with
pages, continue tokens and label selectors on lists and watches.
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl

import pytest

from fakekube import SELECTOR_KEY, TOKEN, FakeKube, api_pod


@pytest.fixture
def kube(certs, tmp_path):
    k = FakeKube(certs.ca, certs.cert, certs.key, tmp_path / "kube").start()
    yield k
    k.stop()


def get(kube, path: str) -> tuple[int, list[dict] | dict]:
    """GET path; a watch's events (it must end: timeoutSeconds, which the
    fake takes in fractions too), or the JSON answer."""
    ctx = ssl.create_default_context(cafile=str(kube.ca))
    c = http.client.HTTPSConnection("127.0.0.1", kube.port, context=ctx, timeout=10)
    try:
        c.request("GET", path, headers={"Authorization": f"Bearer {TOKEN}"})
        r = c.getresponse()
        body = r.read()
    finally:
        c.close()
    if "watch=1" in path and r.status == 200:
        return r.status, [json.loads(line) for line in body.splitlines() if line]
    return r.status, json.loads(body)


def list_all(kube, kind: str, limit: int, selector: bool = False) -> list[dict]:
    """Every page; checks what each says of the rest."""
    path = "/api/v1/pods" if kind == "pods" else "/apis/batch/v1/jobs"
    query = f"labelSelector={SELECTOR_KEY}&" if selector else ""
    items, cont, rvs = [], None, set()
    while True:
        status, page = get(kube, f"{path}?{query}limit={limit}" +
                           (f"&continue={cont}" if cont else ""))
        assert status == 200, page
        items += page["items"]
        rvs.add(page["metadata"]["resourceVersion"])
        cont = page["metadata"].get("continue")
        if not cont:
            assert "remainingItemCount" not in page["metadata"]
            break
        assert len(page["items"]) == limit
        assert page["metadata"]["remainingItemCount"] > 0
    assert len(rvs) == 1, "every page is of the first page's version"
    return items


def key(o: dict) -> str:
    return f"{o['metadata']['namespace']}/{o['metadata']['name']}"


@pytest.mark.parametrize("selector", [False, True])
def test_pages_are_in_key_order_with_population_and_placed_objects(kube, selector):
    kube.populate("pods", 120, 30)
    kube.put("pods", api_pod("a", "research", 1),
             {"metadata": {"name": "zz", "namespace": "apps-00", "uid": "u-zz"}})
    items = list_all(kube, "pods", 7, selector)
    keys = [key(o) for o in items]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    assert len(items) == (31 if selector else 122)
    assert ("apps-00/zz" in keys) != selector
    assert "research/a" in keys
    gpu = [o for o in items if SELECTOR_KEY in o["metadata"].get("labels", {})]
    assert len(gpu) == 31
    assert all(o["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]
               for o in gpu)
    # Pages of exactly the rest: the last one ends without a token.
    assert len(list_all(kube, "pods", 61)) == 122


def test_a_continue_token_from_before_a_compaction_is_410(kube):
    kube.populate("jobs", 10, 2)
    status, page = get(kube, "/apis/batch/v1/jobs?limit=4")
    tok = page["metadata"]["continue"]
    assert json.loads(base64.urlsafe_b64decode(tok + "=" * (-len(tok) % 4)))["rv"] == \
        int(page["metadata"]["resourceVersion"])
    kube.compact("jobs")
    status, answer = get(kube, f"/apis/batch/v1/jobs?limit=4&continue={tok}")
    assert status == 410 and answer["reason"] == "Expired", answer


def test_a_selector_watch_sees_the_label_come_and_go(kube):
    rv = kube.resource_version
    p = api_pod("a", "research", 1)
    kube.event("pods", "ADDED", p)
    del p["metadata"]["labels"][SELECTOR_KEY]
    kube.event("pods", "MODIFIED", p)          # loses the label
    kube.event("pods", "MODIFIED", p)          # still without it
    p["metadata"]["labels"][SELECTOR_KEY] = "research"
    kube.event("pods", "MODIFIED", p)          # gains it back
    kube.event("pods", "DELETED", p)
    kube.bookmark("pods")
    base = f"/api/v1/pods?watch=1&timeoutSeconds=0.2&resourceVersion={rv}"
    _, seen = get(kube, base + f"&labelSelector={SELECTOR_KEY}")
    assert [e["type"] for e in seen] == ["ADDED", "DELETED", "ADDED", "DELETED", "BOOKMARK"]
    gone = seen[1]["object"]
    assert SELECTOR_KEY in gone["metadata"]["labels"], "the object as the selector last saw it"
    assert int(gone["metadata"]["resourceVersion"]) == rv + 2, "at the event's version"
    _, seen = get(kube, base)
    assert [e["type"] for e in seen] == ["ADDED", "MODIFIED", "MODIFIED", "MODIFIED",
                                         "DELETED", "BOOKMARK"]


def test_a_burst_modifies_the_population_and_ends_a_gpu_pod(kube):
    kube.populate("pods", 100, 10)
    rv = kube.resource_version
    last = kube.burst("pods", 20)
    base = f"/api/v1/pods?watch=1&timeoutSeconds=0.2&resourceVersion={rv}"
    _, seen = get(kube, base)
    assert len(seen) == 21 and all(e["type"] == "MODIFIED" for e in seen)
    assert int(seen[-1]["object"]["metadata"]["resourceVersion"]) == last
    assert seen[-1]["object"]["status"]["phase"] == "Succeeded"
    _, seen = get(kube, base + f"&labelSelector={SELECTOR_KEY}")
    assert len(seen) == 3, [key(e["object"]) for e in seen]
    # A list after it shows what the events said.
    items = {key(o): o for o in list_all(kube, "pods", 500)}
    assert items[key(seen[-1]["object"])]["status"]["phase"] == "Succeeded"
    assert items[key(seen[1]["object"])]["metadata"]["resourceVersion"] == \
        seen[1]["object"]["metadata"]["resourceVersion"]


def test_error_watches_answer_200_then_an_error_event(kube):
    kube.error_watches("pods", 500)
    status, seen = get(kube, "/api/v1/pods?watch=1&resourceVersion=0")
    assert status == 200
    assert [(e["type"], e["object"]["code"]) for e in seen] == [("ERROR", 500)]
    assert kube.stats()["WATCH pods"] == 1
