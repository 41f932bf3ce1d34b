"""The template keeper (controllers/claim-templates.c) against the scripted
fake API: a gpugate serve with a DRA flavor creates, in every active
namespace of a tenant that may use a class of it, one ResourceClaimTemplate
per count, with exactly the object of docs/design/dra.md ("The template");
leaves a stranger's template of its name alone (taken) and says so; deletes
its own that the policy no longer wants once old and unused; and says once
that a cluster without resource.k8s.io/v1 serves no templates.
"""

from __future__ import annotations

import datetime
import re

import pytest

from conftest import poll
from fakekube import api_pod
from test_watch import WAIT, kube, srv_metrics  # noqa: F401 (kube: a fixture)

ROUND_ENV = {"GPUGATE_TEST_ROUND_MS": "1000"}

DRA = """\
    dra:
      deviceClassName: gpu.nvidia.com
      driver: gpu.nvidia.com
      attributes: ["productName=NVIDIA H100 80GB HBM3"]
      minCapacity: [memory=80Gi]
      selectors: ["device.attributes['gpu.nvidia.com'].brand == 'Nvidia'"]
      tolerations: [{key: example.com/flaky, operator: Exists, effect: NoSchedule}]
"""
POLICY = """\
version: 1
flavors:
  - name: h100-dra
    sharing: exclusive
    gpusPerNode: 8
""" + DRA + """\
classes:
  - {name: train, flavor: h100-dra, gpus: 2, maxGpus: 3}
tenants:
  - {name: research, namespaces: ["research*"], quota: [{flavor: h100-dra, nominal: 16}]}
"""

CEL = ("device.driver == 'gpu.nvidia.com' && "
       "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3' && "
       "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0")
NAME = re.compile(r"^gpugate\.train\.([23])\.([a-z0-9]{6})$")
OWNER = "app.kubernetes.io/managed-by"


@pytest.fixture
def gate(kube, fresh_server, tmp_path):
    def start(policy: str = POLICY):
        path = tmp_path / "policy.yaml"
        path.write_text(policy)
        return fresh_server(path, extra_args=("--kubeconfig", str(kube.kubeconfig)),
                            env=ROUND_ENV)
    return start


def templates(kube) -> dict[tuple[str, str], dict]:
    """(namespace, name) -> the template, as the fake holds it."""
    with kube._cond:
        return {(ns, name): o for (r, ns, name), o in kube._objects.items()
                if r == "resourceclaimtemplates"}


def template(ns: str, name: str, *, labelled: bool) -> dict:
    """A template as somebody put it there (backdate() ages it)."""
    meta = {"name": name, "namespace": ns}
    if labelled:
        meta["labels"] = {OWNER: "gpugate"}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": meta, "spec": {"spec": {"devices": {"requests": []}}}}


def backdate(kube, ns: str, name: str, age_s: int) -> None:
    when = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=age_s)
    with kube._cond:
        kube._objects[("resourceclaimtemplates", ns, name)]["metadata"][
            "creationTimestamp"] = when.strftime("%Y-%m-%dT%H:%M:%SZ")


def want(ns: str, name: str, count: int) -> dict:
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": ns, "labels": {
            OWNER: "gpugate", "gpugate.io/class": "train",
            "gpugate.io/flavor": "h100-dra"}},
        "spec": {
            "metadata": {"labels": {OWNER: "gpugate", "gpugate.io/class": "train"},
                         "annotations": {"gpugate.io/flavor": "h100-dra"}},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount",
                "count": count,
                "selectors": [
                    {"cel": {"expression": CEL}},
                    {"cel": {"expression":
                             "device.attributes['gpu.nvidia.com'].brand == 'Nvidia'"}}],
                "tolerations": [{"key": "example.com/flaky", "operator": "Exists",
                                 "effect": "NoSchedule"}]}}]}}}}


def test_every_count_in_every_namespace_of_the_tenant(gate, kube):
    kube.set_namespaces({"research": "Active", "research-b": "Active", "web": "Active",
                         "research-old": "Terminating"})
    kube.serve_templates(True)
    srv = gate()
    poll(lambda: len(templates(kube)) == 4, f"4 templates (have {list(templates(kube))})",
         WAIT)
    got = templates(kube)
    assert sorted({ns for ns, _ in got}) == ["research", "research-b"], got
    hashes = set()
    for (ns, name), obj in got.items():
        m = NAME.match(name)
        assert m, name
        hashes.add(m.group(2))
        meta = obj["metadata"]
        for k in ("uid", "resourceVersion", "creationTimestamp"):
            meta.pop(k)
        assert obj == want(ns, name, int(m.group(1))), obj
    assert len(hashes) == 1, "one dra block, one hash"
    log = srv.stderr_text()
    assert log.count('msg="claim template created"') == 4, log
    assert (f'msg="claim template created" template=research/gpugate.train.2.'
            f'{hashes.pop()} class=train count=2') in log
    poll(lambda: srv_metrics(srv).get('gpugate_dra_templates{state="kept"}') == 4,
         "4 kept", WAIT)
    m = srv_metrics(srv)
    assert m["gpugate_dra_templates_served"] == 1
    assert m['gpugate_dra_templates{state="taken"}'] == 0
    assert m['gpugate_dra_templates{state="garbage"}'] == 0
    # Deleted by hand: made again.
    name = next(n for ns, n in got if ns == "research")
    with kube._cond:
        del kube._objects[("resourceclaimtemplates", "research", name)]
    poll(lambda: ("research", name) in templates(kube), "made again", WAIT)


def test_a_strangers_template_of_its_name_is_taken(gate, kube):
    kube.set_namespaces({"research": "Active"})
    kube.serve_templates(True)
    srv = gate()
    poll(lambda: len(templates(kube)) == 2, "2 templates", WAIT)
    name3 = next(n for _, n in templates(kube) if ".3." in n)
    # A user's template of that name (made while gpugate's was gone).
    with kube._cond:
        del kube._objects[("resourceclaimtemplates", "research", name3)]
    kube.create("resourceclaimtemplates", "research",
                template("research", name3, labelled=False))
    poll(lambda: srv_metrics(srv).get('gpugate_dra_templates{state="taken"}') == 1,
         "1 taken", WAIT)
    stranger = kube.object("resourceclaimtemplates", "research", name3)
    assert OWNER not in stranger["metadata"].get("labels", {}), "never touched"
    assert stranger["spec"] == {"spec": {"devices": {"requests": []}}}
    log = srv.stderr_text()
    line = (f'msg="claim template taken" template=research/{name3} detail="not '
            f'labelled app.kubernetes.io/managed-by=gpugate: left alone, the '
            f'namespace\'s pods of its class are denied"')
    assert line in log, log
    # Once, not every round.
    poll(lambda: kube.stats().get("GET /apis/resource.k8s.io/v1/resourceclaimtemplates",
                                  0) >= 4, "more rounds", WAIT)
    assert srv.stderr_text().count('msg="claim template taken"') == 1


def test_its_own_garbage_goes_when_old_and_unused(gate, kube):
    kube.set_namespaces({"research": "Active", "web": "Active"})
    kube.serve_templates(True)
    # gpugate's, from an earlier dra block (another hash): one in use by a
    # running pod, one named by a finished pod only, one too young; one in
    # a namespace that is no tenant's; a stranger's of an old name.
    for ns, name, age in (("research", "gpugate.train.2.aaaaaa", 3600),
                          ("research", "gpugate.train.3.aaaaaa", 3600),
                          ("research", "gpugate.train.2.bbbbbb", 10),
                          ("web", "gpugate.train.2.aaaaaa", 3600)):
        kube.create("resourceclaimtemplates", ns, template(ns, name, labelled=True))
        backdate(kube, ns, name, age)
    kube.create("resourceclaimtemplates", "research",
                template("research", "gpugate.train.3.cccccc", labelled=False))
    backdate(kube, "research", "gpugate.train.3.cccccc", 3600)
    running = api_pod("p", "research", 0)
    running["spec"]["resourceClaims"] = [{"name": "gpugate-gpu",
                                          "resourceClaimTemplateName":
                                          "gpugate.train.2.aaaaaa"}]
    done = api_pod("q", "research", 0, phase="Succeeded")
    done["spec"]["resourceClaims"] = [{"name": "gpugate-gpu",
                                       "resourceClaimTemplateName":
                                       "gpugate.train.3.aaaaaa"}]
    kube.put("pods", running, done)
    srv = gate()
    poll(lambda: ("research", "gpugate.train.3.aaaaaa") not in templates(kube)
         and ("web", "gpugate.train.2.aaaaaa") not in templates(kube),
         "the unused old ones deleted", WAIT)
    left = templates(kube)
    assert ("research", "gpugate.train.2.aaaaaa") in left, "a running pod names it"
    assert ("research", "gpugate.train.2.bbbbbb") in left, "too young"
    assert ("research", "gpugate.train.3.cccccc") in left, "a stranger's"
    # Each line is written once its DELETE was answered: the fake may
    # show the template gone a moment before.
    lines = ('msg="claim template deleted" template=research/gpugate.train.3.aaaaaa',
             'msg="claim template deleted" template=web/gpugate.train.2.aaaaaa')
    poll(lambda: all(x in srv.stderr_text() for x in lines), "both deletions logged", WAIT)
    # Pods were listed only where there was old garbage.
    st = kube.stats()
    assert st.get("GET /api/v1/namespaces/research/pods", 0) >= 1
    assert st.get("GET /api/v1/namespaces/web/pods", 0) >= 1
    poll(lambda: srv_metrics(srv).get('gpugate_dra_templates{state="garbage"}') == 2,
         "2 garbage left (in use, young)", WAIT)


def test_not_served_is_said_once(gate, kube):
    kube.set_namespaces({"research": "Active"})
    srv = gate()
    poll(lambda: kube.stats().get("GET /apis/resource.k8s.io/v1/resourceclaimtemplates",
                                  0) >= 3, "three rounds", WAIT)
    log = srv.stderr_text()
    assert log.count('msg="claim templates not served"') == 1, log
    assert 'msg="claim templates not kept"' not in log, "a 404 is not a failure"
    assert srv_metrics(srv)["gpugate_dra_templates_served"] == 0
    assert 'gpugate_dra_templates{state="kept"}' not in srv_metrics(srv)
    assert templates(kube) == {}
    kube.serve_templates(True)
    poll(lambda: len(templates(kube)) == 2, "made once served", WAIT)
    assert 'msg="claim templates served"' in srv.stderr_text()


def test_without_a_dra_class_only_its_own_are_listed_and_collected(gate, kube):
    kube.set_namespaces({"research": "Active"})
    kube.serve_templates(True)
    kube.create("resourceclaimtemplates", "research",
                template("research", "gpugate.train.2.aaaaaa", labelled=True))
    backdate(kube, "research", "gpugate.train.2.aaaaaa", 3600)
    srv = gate(POLICY.replace(DRA, "    resource: nvidia.com/gpu\n"))
    poll(lambda: templates(kube) == {}, "the DRA flavor's old template deleted", WAIT)
    with kube._cond:
        lists = [r for r in kube._requests
                 if r.path == "/apis/resource.k8s.io/v1/resourceclaimtemplates"]
    assert lists and all(r.query.get("labelSelector") ==
                         "app.kubernetes.io/managed-by=gpugate" for r in lists), lists
    assert 'msg="claim template deleted" template=research/gpugate.train.2.aaaaaa' \
        in srv.stderr_text()


def test_only_gpugate_writes_its_templates(gate, kube):
    """Through /validate of the binary: a user's CREATE of a gpugate.* name
    and a user's UPDATE that removes gpugate's label are refused (rule
    claim-template); the same UPDATE that leaves the label passes."""
    srv = gate()
    ours = template("research", "gpugate.train.2.aaaaaa", labelled=True)
    bare = template("research", "gpugate.train.2.aaaaaa", labelled=False)
    with srv.client() as c:
        v = c.admit("validate", bare)
        assert not v.allowed, v
        assert v.message == ("gpugate: claim template names starting with gpugate. "
                             "are gpugate's; choose another name"), v.message
        v = c.admit("validate", bare, operation="UPDATE", old=ours)
        assert not v.allowed, v
        assert v.message == (
            'gpugate: the label app.kubernetes.io/managed-by=gpugate of claim '
            'template "gpugate.train.2.aaaaaa" is gpugate\'s to set; leave it as it '
            'was'), v.message
        v = c.admit("validate", ours, operation="UPDATE", old=ours)
        assert v.allowed, v


SHARED_POLICY = """\
version: 1
flavors:
  - name: l40s-share
    sharing: time-slicing
    gpusPerNode: 32
    dra:
      deviceClassName: gpu.nvidia.com
      driver: gpu.nvidia.com
      attributes: ["productName=NVIDIA L40S"]
      sharedCapacity: {name: memory, perUnit: 12Gi, unitsPerDevice: 4}
classes:
  - {name: notebook, flavor: l40s-share, gpus: 1, maxGpus: 3}
tenants:
  - {name: research, namespaces: [research], quota: [{flavor: l40s-share, nominal: 8}]}
"""


def test_a_shared_flavors_templates_ask_one_devices_share(gate, kube):
    # One template per count (1 to 3 units), each for ONE device that
    # allows multiple allocations and count x 12Gi of its memory.
    kube.set_namespaces({"research": "Active"})
    kube.serve_templates(True)
    gate(SHARED_POLICY)
    poll(lambda: len(templates(kube)) == 3, f"3 templates (have {list(templates(kube))})",
         WAIT)
    shares = {}
    for (_, name), obj in templates(kube).items():
        m = re.match(r"^gpugate\.notebook\.([123])\.[a-z0-9]{6}$", name)
        assert m, name
        (req,) = obj["spec"]["spec"]["devices"]["requests"]
        ex = req["exactly"]
        assert (ex["deviceClassName"], ex["count"]) == ("gpu.nvidia.com", 1), ex
        assert ex["selectors"] == [{"cel": {"expression":
            "device.driver == 'gpu.nvidia.com' && "
            "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA L40S' && "
            "device.allowMultipleAllocations"}}], ex
        shares[int(m.group(1))] = ex["capacity"]
    assert shares == {1: {"requests": {"memory": "12Gi"}},
                      2: {"requests": {"memory": "24Gi"}},
                      3: {"requests": {"memory": "36Gi"}}}, shares
