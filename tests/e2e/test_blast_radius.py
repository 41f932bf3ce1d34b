"""Issue #27 items 1 and 2: the smallest blast radius the apiserver allows.

The webhooks are sent only what gpugate has an opinion on: their
matchConditions ("gpu-work", manifests/webhooks.yaml) are written not to
depend on the policy.  Two things must hold, and both are checked here
against the real apiserver, which evaluates the CEL:

- nothing gpugate would deny, change or warn about slips past them: every
  pod, Job and update of a corpus of every door (each isolation rule, each
  way to reach GPU nodes, each way to ask for GPUs) that gpugate has an
  opinion on when asked directly is also sent by the apiserver;
- with gpugate down, a plain pod anywhere is created, a GPU pod refused.

"gpugate down" is a copy of the shipped registrations (rules and
conditions, failurePolicy Fail) pointed at a port nobody listens on, for
a namespace of its own and "default": its mutating configuration sorts before the e2e's, so the
apiserver calls it first, and a request it is sent fails with "failed
calling webhook".  Whether gpugate has an opinion is asked of the example
gpugate itself, with an AdmissionReview for a tenant's namespace and for a
namespace of no tenant.

Item 2: the GPU Operator's DaemonSets as they ship (privileged, tolerating
the GPU taint, hostPath mounts of /dev and the driver root) are admitted by
a default install; outside the GPU stack's namespaces the same DaemonSet is
refused, with the exemption named.
"""

from __future__ import annotations

import copy
import http.client
import json
import uuid
from typing import Any

import pytest
import yaml

from gpugate_e2e import (CLASS, EXCLUDED_NAMESPACES, GPU_TOLERATION, ROOT, job, pod,
                         wait_until)

DOWN_NS = "blast-probe"        # no tenant of the example policy
TENANT_NS = "research"         # a tenant of the example policy
DOWN_CONFIG = "0-gpugate-down"  # sorts before gpugate-example: called first
DOWN_URL = "https://127.0.0.1:9/down"
PRODUCT = "nvidia.com/gpu.product"
H100 = "NVIDIA-H100-80GB-HBM3"
GPU_NODE = "blast-h100-0"
CPU_NODE = "blast-cpu-0"


def shipped_webhooks() -> list[dict]:
    docs = yaml.safe_load_all((ROOT / "manifests" / "webhooks.yaml").read_text())
    return [w for d in docs if d for w in d["webhooks"]]


def down_config() -> dict:
    """The shipped registrations of pods, Jobs and templates, as mutating
    webhooks (run first, before anything changes the object) that cannot
    be reached."""
    hooks = []
    for w in shipped_webhooks():
        if w["name"] == "release.gpugate.io":
            continue
        hooks.append({
            "name": "down-" + w["name"],
            "admissionReviewVersions": ["v1"],
            "clientConfig": {"url": DOWN_URL},
            "rules": w["rules"],
            "matchPolicy": w.get("matchPolicy", "Equivalent"),
            "matchConditions": w.get("matchConditions", []),
            "namespaceSelector": {"matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In",
                 "values": [DOWN_NS, "default"]}]},
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "timeoutSeconds": 2,
        })
    return {"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": DOWN_CONFIG}, "webhooks": hooks}


@pytest.fixture(scope="module")
def down(stack):
    k = stack.kubectl
    k.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": DOWN_NS}}).check()
    # Nodes for spec.nodeName: one of flavor h100-80gb, one of no flavor.
    nodes = [{"apiVersion": "v1", "kind": "Node",
              "metadata": {"name": GPU_NODE, "labels": {PRODUCT: H100,
                                                        "kubernetes.io/hostname": GPU_NODE}},
              "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present",
                                   "effect": "NoSchedule"}]}},
             {"apiVersion": "v1", "kind": "Node",
              "metadata": {"name": CPU_NODE, "labels": {"kubernetes.io/hostname": CPU_NODE}}}]
    k.apply({"apiVersion": "v1", "kind": "List", "items": nodes}).check()
    k("patch", "node", GPU_NODE, "--subresource=status", "--type=merge", "-p", json.dumps(
        {"status": {"capacity": {"nvidia.com/gpu": "8"},
                    "allocatable": {"nvidia.com/gpu": "8"}}})).check()
    k.apply(down_config()).check()
    wait_until("the apiserver calls the unreachable registration",
               lambda: "down-mutate.gpugate.io" in sent_error(
                   k, pod("probe", DOWN_NS, "train-small", 1)), 30)
    yield k
    k("delete", "mutatingwebhookconfiguration", DOWN_CONFIG, "--ignore-not-found")
    k("delete", "namespace", DOWN_NS, "--wait=false", "--ignore-not-found")
    k("delete", "node", GPU_NODE, CPU_NODE, "--ignore-not-found")


def sent_error(k, obj: dict, verb: str = "create") -> str:
    """The apiserver's refusal of a dry run of obj in DOWN_NS, "" when it
    was admitted."""
    o = copy.deepcopy(obj)
    o["metadata"]["namespace"] = DOWN_NS
    r = k(verb, "--dry-run=server", "-f", "-", "-o", "name", input=json.dumps(o))
    return "" if r.rc == 0 else r.err


def was_sent(k, obj: dict) -> bool:
    err = sent_error(k, obj)
    assert not err or "failed calling webhook" in err, err
    return bool(err)


def review(gate, endpoint: str, obj: dict, ns: str, old: dict | None = None,
           sub: str | None = None) -> dict:
    """gpugate's own answer to an AdmissionReview of obj in ns (a dry run:
    nothing is reserved)."""
    kind = obj["kind"]
    group, _, version = obj["apiVersion"].rpartition("/")
    o = copy.deepcopy(obj)
    o["metadata"]["namespace"] = ns
    resource = {"Pod": "pods", "Job": "jobs", "Deployment": "deployments",
                "DaemonSet": "daemonsets"}[kind]
    req: dict[str, Any] = {
        "uid": str(uuid.uuid4()),
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": resource},
        "namespace": ns, "name": o["metadata"]["name"],
        "operation": "UPDATE" if old else "CREATE",
        "userInfo": {"username": "blast-radius"}, "object": o, "dryRun": True}
    if old:
        oo = copy.deepcopy(old)
        oo["metadata"]["namespace"] = ns
        req["oldObject"] = oo
    if sub:
        req["subResource"] = sub
    body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                       "request": req})
    conn = http.client.HTTPSConnection("127.0.0.1", gate.port, timeout=10,
                                       context=gate.ssl_context())
    try:
        conn.request("POST", "/" + endpoint, body, {"Content-Type": "application/json"})
        r = conn.getresponse()
        assert r.status == 200, (r.status, r.read())
        return json.loads(r.read())["response"]
    finally:
        conn.close()


def opinion(gate, obj: dict, old: dict | None = None) -> list[str]:
    """What gpugate would do to obj (denials, patches, warnings), asked at
    /mutate and /validate, in a tenant's namespace and in one of no
    tenant; [] when it has nothing to say."""
    said = []
    for ns in (TENANT_NS, DOWN_NS):
        for endpoint in (("validate",) if old else ("mutate", "validate")):
            r = review(gate, endpoint, obj, ns, old)
            if not r.get("allowed", False):
                said.append(f"{endpoint} {ns}: denied: {r.get('status', {}).get('message')}")
            if r.get("patch"):
                said.append(f"{endpoint} {ns}: changed it")
            if r.get("warnings"):
                said.append(f"{endpoint} {ns}: warned: {r['warnings'][0]}")
    return said


def c(name: str = "main", **extra: Any) -> dict:
    d: dict[str, Any] = {"name": name, "image": "busybox"}
    d.update(extra)
    return d


PRIV = {"securityContext": {"privileged": True}}
HOST_DEV = [{"name": "h", "hostPath": {"path": "/dev"}}]


def variant(name: str, labels: dict | None = None, annotations: dict | None = None,
            containers: list | None = None, **spec: Any) -> dict:
    return pod(name, DOWN_NS, labels=labels, annotations=annotations,
               containers=containers or [c()], **spec)


# Every door, one at a time, and the pods every cluster runs.  NOT_SENT:
# the blast radius -- these are created while gpugate is down.
CORPUS: dict[str, dict] = {
    "plain": variant("plain"),
    "class-label": variant("class-label", labels={CLASS: "train-small"}),
    "gpus-label": variant("gpus-label", labels={"gpugate.io/gpus": "2"}),
    "stamp-label": variant("stamp-label", labels={"gpugate.io/tenant": "research"}),
    "unknown-class": variant("unknown-class", labels={CLASS: "nope"}),
    "gpu-limit": variant("gpu-limit", containers=[c(resources={"limits": {"nvidia.com/gpu": "1"}})]),
    "mig-request-init": variant("mig-request-init", initContainers=[
        c("init", resources={"requests": {"nvidia.com/mig-1g.10gb": "1"},
                             "limits": {"nvidia.com/mig-1g.10gb": "1"}})]),
    "shared-gpu": variant("shared-gpu", containers=[
        c(resources={"limits": {"nvidia.com/gpu.shared": "1"}})]),
    "other-extended": variant("other-extended", containers=[
        c(resources={"limits": {"example.com/fpga": "1"}})]),
    "dra-claim": variant("dra-claim", resourceClaims=[{"name": "g",
                                                       "resourceClaimName": "gpu"}],
                         containers=[c(resources={"claims": [{"name": "g"}]})]),
    "tolerate-all": variant("tolerate-all", tolerations=[{"operator": "Exists"}],
                            containers=[c(**PRIV)]),
    "tolerate-gpu": variant("tolerate-gpu", tolerations=[GPU_TOLERATION], containers=[c(**PRIV)]),
    "tolerate-gpu-equal": variant("tolerate-gpu-equal", tolerations=[
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present"}],
        containers=[c(**PRIV)]),
    "tolerate-gpu-envfrom": variant("tolerate-gpu-envfrom", tolerations=[GPU_TOLERATION],
                                    containers=[c(envFrom=[{"configMapRef": {"name": "x"}}])]),
    "select-h100": variant("select-h100", nodeSelector={PRODUCT: H100}, containers=[c(**PRIV)]),
    "node-name-gpu": variant("node-name-gpu", nodeName=GPU_NODE, containers=[c(**PRIV)]),
    "node-name-cpu": variant("node-name-cpu", nodeName=CPU_NODE, containers=[c(**PRIV)]),
    "nvidia-env": variant("nvidia-env", containers=[c(env=[
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}])]),
    "nvidia-env-init": variant("nvidia-env-init", initContainers=[c("init", env=[
        {"name": "NVIDIA_MIG_CONFIG_DEVICES", "value": "all"}])]),
    "nvidia-env-void": variant("nvidia-env-void", containers=[c(env=[
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}])]),
    "host-dev": variant("host-dev", volumes=HOST_DEV,
                        containers=[c(volumeMounts=[{"name": "h", "mountPath": "/d"}])]),
    "host-root-subpath-dev": variant("host-root-subpath-dev", volumes=[
        {"name": "h", "hostPath": {"path": "/"}}], containers=[c(volumeMounts=[
            {"name": "h", "mountPath": "/d", "subPath": "dev"}])]),
    "host-dev-dotted": variant("host-dev-dotted", volumes=[
        {"name": "h", "hostPath": {"path": "//dev/./nvidia0"}}],
        containers=[c(volumeMounts=[{"name": "h", "mountPath": "/d"}])]),
    "host-var-log": variant("host-var-log", volumes=[
        {"name": "h", "hostPath": {"path": "/var/log"}}],
        containers=[c(volumeMounts=[{"name": "h", "mountPath": "/logs"}])]),
    "device-list-mount": variant("device-list-mount", volumes=[{"name": "e", "emptyDir": {}}],
                                 containers=[c(volumeMounts=[
                                     {"name": "e",
                                      "mountPath": "/var/run/nvidia-container-devices/all"}])]),
    "device-list-mount-dotted": variant("device-list-mount-dotted",
                                        volumes=[{"name": "e", "emptyDir": {}}],
                                        containers=[c(volumeMounts=[
                                            {"name": "e",
                                             "mountPath": "//run/./nvidia-container-devices"}])]),
    "cdi-nvidia": variant("cdi-nvidia", annotations={"cdi.k8s.io/x": "nvidia.com/gpu=all"}),
    "cdi-other": variant("cdi-other", annotations={"cdi.k8s.io/x": "vendor.com/net=eth0"}),
    # What ordinary pods carry, alone and together: none of it is sent.
    "privileged": variant("privileged", containers=[c(**PRIV)]),
    "envfrom": variant("envfrom", containers=[c(envFrom=[{"secretRef": {"name": "s"}}])]),
    "os-arch-selector": variant("os-arch-selector", nodeSelector={
        "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}),
    "kubernetes-tolerations": variant("kubernetes-tolerations", tolerations=[
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
        {"key": "node.kubernetes.io/unschedulable", "operator": "Exists",
         "effect": "NoSchedule"}]),
    "ordinary-everything": variant(
        "ordinary-everything", labels={"app": "web"}, annotations={"team": "x"},
        nodeSelector={"kubernetes.io/os": "linux"},
        tolerations=[{"key": "node.kubernetes.io/memory-pressure", "operator": "Exists"}],
        volumes=[{"name": "e", "emptyDir": {}}, {"name": "cm", "configMap": {"name": "c"}}],
        initContainers=[c("init", **PRIV)],
        containers=[c(envFrom=[{"configMapRef": {"name": "c"}}],
                      env=[{"name": "APP_NVIDIA", "value": "1"}],
                      resources={"limits": {"cpu": "1", "memory": "1Gi",
                                            "hugepages-2Mi": "2Mi"}},
                      volumeMounts=[{"name": "e", "mountPath": "/var/run/app"}], **PRIV)]),
}
NOT_SENT = {"plain", "privileged", "envfrom", "os-arch-selector", "kubernetes-tolerations",
            "ordinary-everything"}


def test_with_gpugate_down_a_plain_pod_is_created_and_a_gpu_pod_refused(down, files):
    k = down
    for ns in (DOWN_NS, "default"):
        r = k("run", "hello", "-n", ns, "--image=busybox", "--restart=Never")
        assert r.rc == 0, r
        assert "pod/hello" in k("get", "pods", "-n", ns, "-o", "name").check().out
    k("delete", "pod", "hello", "-n", "default", "--wait=false")
    r = k.create(pod("gpu", "default", "train-small", 1))
    assert r.rc != 0 and 'failed calling webhook "down-mutate.gpugate.io"' in r.err, r
    # A plain Job: its controller creates its pod, through the same doors.
    r = k.create(job("plain-job", DOWN_NS, containers=[c()]))
    assert r.rc == 0, r
    wait_until("the plain Job's pod", lambda: k(
        "get", "pods", "-n", DOWN_NS, "-l", "job-name=plain-job", "-o", "name").check().out, 30)
    r = k.create(pod("gpu", DOWN_NS, "train-small", 1))
    assert r.rc != 0 and 'failed calling webhook "down-mutate.gpugate.io"' in r.err, r
    r = k.create(job("gpu-job", DOWN_NS, "train-small", 1))
    assert r.rc != 0 and 'failed calling webhook "down-mutate.gpugate.io"' in r.err, r


def test_nothing_gpugate_has_an_opinion_on_slips_past_the_conditions(stack, down):
    k, gate = down, stack.gates["example"]
    # gpugate knows the GPU node (its Node watch) before the corpus runs.
    wait_until("gpugate sees node " + GPU_NODE,
               lambda: opinion(gate, CORPUS["node-name-gpu"]), 30)
    slips, table = [], []
    for name, obj in CORPUS.items():
        sent = was_sent(k, obj)
        said = opinion(gate, obj)
        table.append(f"{name:26} sent={sent!s:5} gpugate: {said[0] if said else '-'}")
        if said and not sent:
            slips.append(f"{name}: not sent, yet gpugate: {said}")
        if name in NOT_SENT and sent:
            slips.append(f"{name}: sent, but an ordinary pod must not depend on gpugate")
        # ...and as a Job's pod template.
        if name not in NOT_SENT or name == "plain":
            spec = copy.deepcopy(obj["spec"])
            spec["restartPolicy"] = "Never"
            j = {"apiVersion": "batch/v1", "kind": "Job",
                 "metadata": {"name": "j-" + name, "namespace": DOWN_NS},
                 "spec": {"template": {"metadata": copy.deepcopy(
                     {kk: v for kk, v in obj["metadata"].items()
                      if kk in ("labels", "annotations")}), "spec": spec}}}
            jsent, jsaid = was_sent(k, j), opinion(gate, j)
            if jsaid and not jsent:
                slips.append(f"Job {name}: not sent, yet gpugate: {jsaid}")
            if name == "plain" and jsent:
                slips.append("Job plain: sent")
    print("\n".join(table))
    assert not slips, "\n".join(slips)
    # The corpus is not vacuous: most doors are denied, and all are sent.
    assert sum(1 for n in CORPUS if n not in NOT_SENT and opinion(gate, CORPUS[n])) >= 20


UPDATES = {
    # (base pod, change) -- the base is created while gpugate is down.
    "add-gpu-toleration": ({"tolerations": [GPU_TOLERATION]}, True),
    "add-h100-selector": ({"nodeSelector": {PRODUCT: H100}}, True),
    "add-os-selector": ({"nodeSelector": {"kubernetes.io/os": "linux"}}, False),
    "add-kubernetes-toleration": ({"tolerations": [
        {"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]}, False),
    "add-label": ({"metadata": {"labels": {"app": "x"}}}, False),
    "add-stamp": ({"metadata": {"labels": {"gpugate.io/tenant": "research"}}}, True),
    # A class cannot be given to a running pod (#31).
    "add-class": ({"metadata": {"labels": {CLASS: "train-small"}}}, True),
}


@pytest.mark.parametrize("name", sorted(UPDATES))
def test_an_update_that_lets_a_pod_reach_gpus_is_sent(stack, down, name):
    """A gated, privileged pod, admitted with gpugate down (nothing to
    judge), then changed: the changes gpugate judges are sent."""
    k, gate = down, stack.gates["example"]
    base = variant("u-" + name, containers=[c(**PRIV)],
                   schedulingGates=[{"name": "example.com/wait"}])
    k("delete", "pod", base["metadata"]["name"], "-n", DOWN_NS, "--ignore-not-found",
      "--wait=false", "--grace-period=0", "--force")
    assert k.create(base).rc == 0
    live = k.get("pod", base["metadata"]["name"], DOWN_NS)
    change, expect_sent = UPDATES[name]
    new = copy.deepcopy(live)
    if "metadata" in change:
        new["metadata"].setdefault("labels", {}).update(change["metadata"]["labels"])
    else:
        new["spec"].update(copy.deepcopy(change))
    r = k("patch", "pod", live["metadata"]["name"], "-n", DOWN_NS, "--dry-run=server",
          "--type=merge", "-p", json.dumps(change if "metadata" in change
                                           else {"spec": change}))
    sent = r.rc != 0
    assert not sent or "failed calling webhook" in r.err, r
    said = opinion(gate, new, old=live)
    assert sent == expect_sent, (r, said)
    assert not said or sent, said


# The GPU Operator's DaemonSets as they ship (v25 manifests, trimmed to what
# the rules read): privileged, tolerating the GPU taint, hostPath mounts.
def operator_daemonset(name: str, ns: str, sa: str, **container: Any) -> dict:
    ctr = {"name": name, "image": f"nvcr.io/nvidia/{name}:v25.3.0", **PRIV, **container}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"serviceAccountName": sa,
                                           "tolerations": [GPU_TOLERATION],
                                           "nodeSelector": {"nvidia.com/gpu.present": "true"},
                                           "priorityClassName": "system-node-critical",
                                           "volumes": [
                                               {"name": "dev", "hostPath": {"path": "/dev"}},
                                               {"name": "run-nvidia",
                                                "hostPath": {"path": "/run/nvidia"}},
                                               {"name": "device-plugin", "hostPath": {
                                                   "path": "/var/lib/kubelet/device-plugins"}}],
                                           "containers": [ctr]}}}}


def daemonset_pod(ds: dict, node: str) -> dict:
    """The pod the DaemonSet controller creates for ds on node: its
    template, owned by it, pinned by node affinity, with the tolerations
    the controller adds."""
    t = copy.deepcopy(ds["spec"]["template"])
    meta = t["metadata"]
    meta.update({"generateName": ds["metadata"]["name"] + "-",
                 "namespace": ds["metadata"]["namespace"],
                 "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet",
                                      "name": ds["metadata"]["name"],
                                      "uid": ds["metadata"]["uid"], "controller": True,
                                      "blockOwnerDeletion": True}]})
    spec = t["spec"]
    spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                                "values": [node]}]}]}}}
    spec["tolerations"] = spec.get("tolerations", []) + [
        {"key": f"node.kubernetes.io/{t}", "operator": "Exists", "effect": e}
        for t, e in (("not-ready", "NoExecute"), ("unreachable", "NoExecute"),
                     ("disk-pressure", "NoSchedule"), ("memory-pressure", "NoSchedule"),
                     ("pid-pressure", "NoSchedule"), ("unschedulable", "NoSchedule"))]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


OPERATOR = [
    ("nvidia-device-plugin-daemonset", "nvidia-device-plugin",
     {"env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
              {"name": "NVIDIA_MIG_MONITOR_DEVICES", "value": "all"}],
      "volumeMounts": [{"name": "device-plugin", "mountPath": "/var/lib/kubelet/device-plugins"},
                       {"name": "dev", "mountPath": "/dev"}]}),
    ("nvidia-dcgm-exporter", "nvidia-dcgm-exporter",
     {"env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}],
      "volumeMounts": [{"name": "run-nvidia", "mountPath": "/run/nvidia"}]}),
    ("nvidia-container-toolkit-daemonset", "nvidia-container-toolkit",
     {"volumeMounts": [{"name": "run-nvidia", "mountPath": "/run/nvidia"},
                       {"name": "dev", "mountPath": "/dev"}]}),
]


def test_the_gpu_operators_daemonsets_are_admitted_by_a_default_install(stack, down):
    k, gate = stack.kubectl, stack.gates["example"]
    ns = "gpu-operator"
    assert ns in EXCLUDED_NAMESPACES
    k.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}).check()
    k("label", "node", GPU_NODE, "nvidia.com/gpu.present=true", "--overwrite").check()
    try:
        # The operator's quota for its system-node-critical pods (the
        # Priority admission plugin allows them outside kube-system only
        # under one).
        k.apply({"apiVersion": "v1", "kind": "ResourceQuota",
                 "metadata": {"name": "gpu-operator-quota", "namespace": ns},
                 "spec": {"hard": {"pods": "100"}, "scopeSelector": {"matchExpressions": [
                     {"operator": "In", "scopeName": "PriorityClass",
                      "values": ["system-node-critical", "system-cluster-critical"]}]}}}
                ).check()
        for name, sa, ctr in OPERATOR:
            k.apply({"apiVersion": "v1", "kind": "ServiceAccount",
                     "metadata": {"name": sa, "namespace": ns}}).check()
            ds = operator_daemonset(name, ns, sa, **ctr)
            r = k.apply(ds)
            assert r.rc == 0, r
            # Its pod on the GPU node, as the DaemonSet controller makes it
            # (the e2e control plane does not run that controller).
            r = k.create(daemonset_pod(k.get("daemonset", name, ns), GPU_NODE))
            assert r.rc == 0, r
        # An install whose registration sends them anyway (a kustomized
        # namespaceSelector): gpugate's own default exemptions admit them.
        for exempt_ns in [n for n in EXCLUDED_NAMESPACES if n not in ("kube-system", "gpugate")]:
            for name, sa, ctr in OPERATOR:
                ds = operator_daemonset(name, exempt_ns, sa, **ctr)
                for endpoint in ("mutate", "validate"):
                    r = review(gate, endpoint, ds, exempt_ns)
                    assert r["allowed"] and not r.get("patch") and not r.get("warnings"), \
                        (exempt_ns, name, r)
        # Elsewhere the same DaemonSet is refused at kubectl apply, and the
        # denial names the exemption.
        other = "gpu-monitoring"
        k.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": other}}).check()
        name, sa, ctr = OPERATOR[0]
        r = k.apply(operator_daemonset(name, other, sa, **ctr))
        assert r.rc != 0, r
        assert ('settings.exemptions.namespaces ["gpu-monitoring"] or serviceAccounts '
                '["gpu-monitoring/nvidia-device-plugin"]') in r.err, r.err
    finally:
        k("delete", "namespace", ns, "gpu-monitoring", "--wait=false", "--ignore-not-found")
