"""The node side of the health loop (controllers/health.h) over the fake API:
gpugate serve --kubeconfig watches the Nodes; its health controller puts
its taint gpugate.io/unhealthy and its record gpugate.io/health on a node of
a flavor that gets a health signal, turns it to validating when the signal
clears, and takes both off when the policy's validation label appears,
with a Node Event at each step, in one merge patch per step that carries
the Node's resourceVersion and keeps every other taint.

Changes are waited for on the fake's record of what gpugate wrote, never by
sleeping (the controller's interval is 2 s).
"""

from __future__ import annotations

from pathlib import Path

import time

import pytest

from conftest import EXAMPLE_POLICY, metrics, poll
from test_pool import GPU_TAINT, api_node, condition, get_pool
from test_watch import kube  # noqa: F401  (the fixture)

TAINT = "gpugate.io/unhealthy"
RECORD = "gpugate.io/health"
VALIDATED = "dcgm.example.com/diag"
OTHER = {"key": "example.com/maintenance", "value": "soon", "effect": "PreferNoSchedule"}
XID = "condition GpuXidError=True (reason Xid79)"
FLAVOR = "h100-80gb"


@pytest.fixture
def health_policy(tmp_path) -> Path:
    """The example policy, back after the validation label."""
    text = EXAMPLE_POLICY.read_text()
    assert "\nhealth:" not in text
    text += f'\nhealth:\n  returnAfter:\n    validationLabel: "{VALIDATED}=pass"\n'
    p = tmp_path / "health-policy.yaml"
    p.write_text(text)
    return p


@pytest.fixture
def health_gate(kube, fresh_server, health_policy):
    """gpugate serve on the fake, once its pool is synced."""
    def start(*extra: str):
        srv = fresh_server(health_policy, extra_args=("--kubeconfig", str(kube.kubeconfig),
                                                      *extra))
        with srv.client() as c:
            poll(lambda: c.get("/readyz").status == 200, "/readyz 200")
            poll(lambda: metrics(c).get("gpugate_pool_synced") == 1, "gpugate_pool_synced 1")
        poll(lambda: kube.open_watches("nodes"), "the node watch open")
        return srv
    return start


def node(kube, name: str) -> dict:
    n = kube.watched("nodes", name)
    assert n is not None, name
    return n


def change(kube, name: str, fn) -> None:
    """The node as it is now (gpugate's marks included), changed by fn, as
    a watch event: what another writer (a kubelet, NPD, an admin) does."""
    n = node(kube, name)
    fn(n)
    kube.event("nodes", "MODIFIED", n)


def marks(kube, name: str) -> tuple[str | None, str | None]:
    """(gpugate's taint value or None, its record or None) on the node."""
    n = node(kube, name)
    taint = next((t.get("value", "") for t in n["spec"].get("taints") or []
                  if t["key"] == TAINT), None)
    return taint, (n["metadata"].get("annotations") or {}).get(RECORD)


def record(text: str) -> dict:
    """"o=.. c=.. n=.. t=..": the fields, t the rest."""
    head, _, why = text.partition(" t=")
    out = {k: int(v) for k, v in (f.split("=", 1) for f in head.split())}
    out["t"] = why
    return out


def others(kube, name: str) -> list[dict]:
    """The node's taints that are not gpugate's."""
    return [t for t in node(kube, name)["spec"].get("taints") or [] if t["key"] != TAINT]


def node_events(kube, reason: str, name: str) -> list[dict]:
    return [e for e in kube.k8s_events
            if e.get("reason") == reason and e["involvedObject"].get("kind") == "Node"
            and e["involvedObject"].get("name") == name]


def pool_node(srv, name: str) -> dict:
    f = next(f for f in get_pool(srv)["flavors"] if f["name"] == FLAVOR)
    return next(n for n in f["nodeList"] if n["name"] == name)


def test_out_validating_back(kube, health_gate):
    """A health condition: taint =health and a record, Event
    GPUNodeUnhealthy.  The condition gone: taint =validating, the record's
    c set, still out (validating) in /pool, Event GPUNodeValidating naming
    the label it waits for.  The label: both marks gone, Event
    GPUNodeReturned, the node usable.  The other taints survive every step;
    a 409 on the way back is retried."""
    kube.put("nodes", api_node("h0", taints=[OTHER]), api_node("h1"))
    srv = health_gate()
    want_others = [GPU_TAINT, OTHER]
    assert marks(kube, "h0") == (None, None)

    change(kube, "h0", lambda n: n["status"]["conditions"].append(
        condition("GpuXidError", reason="Xid79")))
    poll(lambda: marks(kube, "h0")[0] == "health", "taint gpugate.io/unhealthy=health")
    taint, rec = marks(kube, "h0")
    r = record(rec)
    assert (r["c"], r["n"], r["t"]) == (0, 1, XID), rec
    assert others(kube, "h0") == want_others
    ev = poll(lambda: node_events(kube, "GPUNodeUnhealthy", "h0"), "GPUNodeUnhealthy")
    assert len(ev) == 1, ev
    assert ev[0]["type"] == "Warning"
    assert ev[0]["metadata"]["namespace"] == "default"
    assert ev[0]["involvedObject"]["uid"] == "uid-node-h0"
    assert ev[0]["message"] == (
        f"out of the GPU pool for flavor {FLAVOR}: {XID}; taint "
        f"{TAINT}=health:NoSchedule keeps new work off until it is validated")
    # Every write is one merge patch of the Node at the version read.
    node_patches = [p for p in kube.patches if p[0] == "nodes"]
    assert node_patches and all(p[3] == "application/merge-patch+json" and
                                p[4]["metadata"]["resourceVersion"] for p in node_patches)
    with srv.client() as c:
        m = metrics(c)
    since = f'gpugate_node_out_since_seconds{{flavor="{FLAVOR}",node="h0",state="health"}}'
    assert m[since] == r["o"] // 1000, m
    assert m[f'gpugate_nodes_out_seconds{{flavor="{FLAVOR}"}}'] >= 0
    assert m['gpugate_health_steps_total{step="mark_out"}'] == 1
    p = pool_node(srv, "h0")
    assert p["state"] == "health" and p["outSince"] and "waitsFor" not in p, p
    assert pool_node(srv, "h1")["state"] == "usable"

    # The signal clears: validating, still out.
    change(kube, "h0", lambda n: n["status"]["conditions"].__setitem__(
        -1, condition("GpuXidError", "False")))
    poll(lambda: marks(kube, "h0")[0] == "validating", "taint =validating")
    r2 = record(marks(kube, "h0")[1])
    assert r2["o"] == r["o"] and r2["c"] >= r["o"] and r2["n"] == 1, r2
    assert others(kube, "h0") == want_others
    ev = poll(lambda: node_events(kube, "GPUNodeValidating", "h0"), "GPUNodeValidating")
    assert ev[0]["type"] == "Normal"
    assert ev[0]["message"] == (f"health signal gone (was {XID}); validating: waits for "
                                f"label {VALIDATED}=pass")
    poll(lambda: pool_node(srv, "h0")["state"] == "validating", "h0 validating in /pool")
    p = pool_node(srv, "h0")
    assert p["waitsFor"] == f"label {VALIDATED}=pass" and p["outSince"], p
    with srv.client() as c:
        poll(lambda: metrics(c).get(
            f'gpugate_node_out_since_seconds{{flavor="{FLAVOR}",node="h0",'
            f'state="validating"}}'), "the gauge says validating")

    # The validation label: back, the first write answered 409 and tried
    # again.
    kube.fault(method="PATCH", path="/api/v1/nodes/h0", status=409, times=1)
    change(kube, "h0", lambda n: n["metadata"]["labels"].__setitem__(VALIDATED, "pass"))
    poll(lambda: marks(kube, "h0") == (None, None), "both marks gone")
    assert kube.stats().get("PATCH 409", 0) >= 1
    assert others(kube, "h0") == want_others
    ev = poll(lambda: node_events(kube, "GPUNodeReturned", "h0"), "GPUNodeReturned")
    assert len(ev) == 1 and ev[0]["message"].startswith(
        f"back in the GPU pool for flavor {FLAVOR} after "), ev
    assert ev[0]["message"].endswith(f" out ({XID})"), ev
    poll(lambda: pool_node(srv, "h0")["state"] == "usable", "h0 usable")
    with srv.client() as c:
        m = poll(lambda: (lambda m: m if not any(k.startswith("gpugate_node_out_since")
                                                 for k in m) else None)(metrics(c)),
                 "no node out")
    assert m[f'gpugate_nodes_out_seconds{{flavor="{FLAVOR}"}}'] == 0
    assert m['gpugate_health_steps_total{step="return"}'] == 1
    assert not node_events(kube, "GPUNodeUnhealthy", "h1")


def test_taint_put_back_signal_again_and_by_hand(kube, health_gate):
    """gpugate's taint removed while the node is out: put back.  The
    signal back while validating: out again, o kept, n=2.  The record
    removed by hand: the taint goes too (taken back by hand)."""
    kube.put("nodes", api_node("h0", taints=[OTHER],
                               conditions=[condition("GpuXidError", reason="Xid79")]))
    health_gate()
    poll(lambda: marks(kube, "h0")[0] == "health", "marked out")
    rec = marks(kube, "h0")[1]

    change(kube, "h0", lambda n: n["spec"].__setitem__(
        "taints", [t for t in n["spec"]["taints"] if t["key"] != TAINT]))
    poll(lambda: marks(kube, "h0") == ("health", rec), "the taint put back, the record kept")
    assert others(kube, "h0") == [GPU_TAINT, OTHER]

    change(kube, "h0", lambda n: n["status"]["conditions"].__setitem__(
        -1, condition("GpuXidError", "False")))
    poll(lambda: marks(kube, "h0")[0] == "validating", "validating")
    change(kube, "h0", lambda n: n["status"]["conditions"].__setitem__(
        -1, condition("GpuXidError", reason="Xid48")))
    poll(lambda: marks(kube, "h0")[0] == "health", "out again")
    r = record(marks(kube, "h0")[1])
    assert (r["o"], r["c"], r["n"]) == (record(rec)["o"], 0, 2), r
    assert r["t"] == "condition GpuXidError=True (reason Xid48)"
    ev = poll(lambda: (lambda e: e if len(e) == 2 else None)(
        node_events(kube, "GPUNodeUnhealthy", "h0")), "a second GPUNodeUnhealthy")
    assert ev[1]["message"].startswith(
        f"out of the GPU pool for flavor {FLAVOR}: condition GpuXidError=True (reason Xid48)")

    change(kube, "h0", lambda n: n["status"]["conditions"].__setitem__(
        -1, condition("GpuXidError", "False")))
    poll(lambda: marks(kube, "h0")[0] == "validating", "validating again")
    change(kube, "h0", lambda n: n["metadata"]["annotations"].pop(RECORD))
    poll(lambda: marks(kube, "h0") == (None, None), "the taint follows the record")
    assert others(kube, "h0") == [GPU_TAINT, OTHER]
    ev = poll(lambda: node_events(kube, "GPUNodeReturned", "h0"), "GPUNodeReturned")
    assert "taken as validated" in ev[0]["message"], ev


def test_refused_is_said_once_counted_and_the_pool_still_excludes(kube, health_gate):
    """Without nodes patch (403), nothing is written, the refusal is logged
    once for the node and counted each time; the node is out of gpugate's
    pool all the same."""
    kube.fault(method="PATCH", path="/api/v1/nodes/h0", status=403, reason="Forbidden",
               message='nodes "h0" is forbidden: User "system:serviceaccount:gpugate:'
                       'gpugate" cannot patch resource "nodes" in API group "" at the '
                       'cluster scope')
    kube.put("nodes", api_node("h0", conditions=[condition("GpuXidError", reason="Xid79")]))
    srv = health_gate()
    with srv.client() as c:
        poll(lambda: metrics(c).get('gpugate_health_steps_total{step="failed"}', 0) >= 2,
             "two refusals counted")
        m = metrics(c)
    assert m['gpugate_health_steps_total{step="mark_out"}'] == 0
    assert marks(kube, "h0") == (None, None)
    assert not node_events(kube, "GPUNodeUnhealthy", "h0")
    assert pool_node(srv, "h0")["state"] == "health"
    log = srv.stderr_path.read_text()
    said = [ln for ln in log.splitlines() if "node health marks not written" in ln]
    assert len(said) == 1, said
    assert "node=h0" in said[0] and "status=403" in said[0] and "nodes patch" in said[0]
    kube.clear_faults()
    poll(lambda: marks(kube, "h0")[0] == "health", "written once allowed")


def test_no_node_health_writes_nothing(kube, health_gate):
    """--no-node-health (another gpugate of the cluster marks the nodes):
    no write to any Node for a few rounds, and the node is out of the pool
    all the same."""
    kube.put("nodes", api_node("h0", conditions=[condition("GpuXidError", reason="Xid79")]))
    srv = health_gate("--no-node-health")
    time.sleep(5)  # two rounds of 2 s: that nothing happens is the test
    assert not [p for p in kube.patches if p[0] == "nodes"]
    assert marks(kube, "h0") == (None, None)
    assert pool_node(srv, "h0")["state"] == "health"
    with srv.client() as c:
        assert "gpugate_health_steps_total" not in c.get("/metrics").text
