"""The deployment manifests (manifests/, a kustomize base) against the real
kube-apiserver: they render, a server-side dry run of the whole base is
accepted, the policy ConfigMap is a valid policy, the Deployment's flags
exist, the RBAC is enough for gpugate's list+watch (and no more), and the
webhook configurations behave as registered by the base (matchConditions,
selectors) when pointed at a local gpugate.

manifests/ is written by another engineer: when kustomization.yaml is not
there yet, the first test waits for it up to GPUGATE_E2E_MANIFESTS_WAIT
seconds (default 0: skip at once; `run.sh` does not wait either), then the
tests are skipped with the reason.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import time

import pytest

from gpugate_e2e import (LABELLED_POLICIES, POLICY_LABEL, MATCH_CONDITIONS, Gate, ROOT, gpugate_bin, job, pod,
                         register, wait_until, wait_webhooks)
from test_kubectl_admission import denied_by, warning

MANIFESTS = ROOT / "manifests"
KUSTOMIZATION = MANIFESTS / "kustomization.yaml"
EXPECTED_KINDS = {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding",
                  "ConfigMap", "Service", "Deployment", "PodDisruptionBudget",
                  "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
                  "CustomResourceDefinition", "PriorityClass"}
SA = "system:serviceaccount:gpugate:gpugate"


@pytest.fixture(scope="module")
def base():
    wait = float(os.environ.get("GPUGATE_E2E_MANIFESTS_WAIT", "0"))
    deadline = time.monotonic() + wait
    while not KUSTOMIZATION.is_file() and time.monotonic() < deadline:
        time.sleep(10)
    if not KUSTOMIZATION.is_file():
        pytest.skip(f"{KUSTOMIZATION.relative_to(ROOT)} does not exist (yet): the "
                    "deployment manifests are not written")
    return MANIFESTS


@pytest.fixture(scope="module")
def rendered(base, stack) -> list[dict]:
    r = stack.kubectl("kustomize", str(base.relative_to(ROOT)))
    assert r.rc == 0, r
    assert r.err == "", r.err
    # kubectl itself turns the YAML stream into JSON (no PyYAML needed): one
    # JSON document per object, one after the other
    text = stack.kubectl("create", "--dry-run=client", "-o", "json", "-f", "-",
                         input=r.out).check().out
    docs, i, dec = [], 0, json.JSONDecoder()
    while text[i:].strip():
        while text[i].isspace():
            i += 1
        obj, i = dec.raw_decode(text, i)
        docs.extend(obj["items"] if obj.get("kind") == "List" else [obj])
    return docs


def one(docs: list[dict], kind: str, name: str | None = None) -> dict:
    found = [d for d in docs if d["kind"] == kind and
             (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"{len(found)} {kind} {name or ''} in the base"
    return found[0]


def test_kustomize_renders_the_base(rendered):
    kinds = {d["kind"] for d in rendered}
    assert EXPECTED_KINDS <= kinds, EXPECTED_KINDS - kinds
    for d in rendered:
        if d["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding",
                             "CustomResourceDefinition", "MutatingWebhookConfiguration",
                             "ValidatingWebhookConfiguration", "PriorityClass"):
            assert d["metadata"].get("namespace") == "gpugate", d["metadata"]
    mwc = one(rendered, "MutatingWebhookConfiguration")
    vwc = one(rendered, "ValidatingWebhookConfiguration")
    assert [w["name"] for w in mwc["webhooks"]] == ["mutate.gpugate.io",
                                                    "mutate-templates.gpugate.io"]
    assert "validate.gpugate.io" in [w["name"] for w in vwc["webhooks"]]
    # Pod-template controllers (#18): fail open, the same conditions as the
    # registration the e2e tests run under.
    for w in mwc["webhooks"] + vwc["webhooks"]:
        if w["name"].endswith("-templates.gpugate.io"):
            assert w["failurePolicy"] == "Ignore", w["name"]
            assert w["matchConditions"] == MATCH_CONDITIONS[w["name"]], w["name"]
            assert [c["name"] for c in w["matchConditions"]] == [
                "spec-changed-and-not-a-deployments-replicaset", "gpu-work"], w["name"]
    # validate.gpugate.io: the e2e registration runs under the same
    # conditions, and is sent status writes (that touch the stamps).
    v, = [w for w in vwc["webhooks"] if w["name"] == "validate.gpugate.io"]
    assert [c["name"] for c in v["matchConditions"]] == [
        "create-stamp-change-job-update-or-pod-placement", "gpu-work"]
    resources = {r for rule in v["rules"] for r in rule["resources"]}
    assert {"pods/status", "jobs/status", "pods/ephemeralcontainers"} <= resources
    vt = [w for w in vwc["webhooks"] if w["name"] == "validate-templates.gpugate.io"]
    assert len(vt) == 1
    # kubectl scale (#18): the Scale, validated only (nothing to map).
    assert {"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["UPDATE"],
            "resources": ["deployments/scale", "statefulsets/scale", "replicasets/scale"],
            "scope": "Namespaced"} in vt[0]["rules"], vt[0]["rules"]
    assert not any("/scale" in r for w in mwc["webhooks"] for rule in w["rules"]
                   for r in rule["resources"])
    for w in mwc["webhooks"] + vwc["webhooks"]:
        exprs = w["namespaceSelector"]["matchExpressions"]
        assert w["sideEffects"] in ("None", "NoneOnDryRun")
        if w["name"] == "policy.gpugate.io":  # gpugate's own namespace only
            assert exprs == [{"key": "kubernetes.io/metadata.name", "operator": "In",
                              "values": ["gpugate"]}], exprs
            continue
        assert {"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                "values": ["kube-system", "gpugate", "gpu-operator", "gpu-operator-resources",
                           "nvidia-gpu-operator", "nvsentinel", "nvidia-dra-driver-gpu",
                           "dcgm-exporter"]} in exprs, w["name"]
        assert w["sideEffects"] == "NoneOnDryRun" and w["admissionReviewVersions"] == ["v1"]


def test_server_side_dry_run_of_the_whole_base(stack, base):
    r = stack.kubectl("apply", "-k", str(base.relative_to(ROOT)), "--dry-run=server",
                      timeout=120)
    assert r.rc == 0, r
    lines = r.out.splitlines()
    assert lines and all(line.endswith(" (server dry run)") for line in lines), r.out
    assert len(lines) >= len(EXPECTED_KINDS), r.out
    assert "error" not in r.err.lower(), r.err


def test_policy_configmap_is_a_valid_policy(rendered, tmp_path):
    cm = one(rendered, "ConfigMap")
    (key, text), = [(k, v) for k, v in cm["data"].items() if k.endswith(".yaml")]
    f = tmp_path / key
    f.write_text(text)
    p = subprocess.run([str(gpugate_bin()), "check", str(f)], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr


def test_deployment_runs_gpugate_serve_with_known_flags(rendered):
    dep = one(rendered, "Deployment")
    c = dep["spec"]["template"]["spec"]["containers"][0]
    args = c.get("command", [])[1:] + c.get("args", [])
    assert "serve" in args, args
    help_text = subprocess.run([str(gpugate_bin()), "serve", "--help"], capture_output=True,
                               text=True, timeout=30).stdout
    known = set(re.findall(r"--[a-z][a-z-]*", help_text))
    flags = {a.split("=")[0] for a in args if a.startswith("--")}
    assert flags <= known, f"flags gpugate serve does not know: {flags - known}"
    for must in ("--policy", "--tls-cert", "--tls-key"):
        assert must in flags
    probes = {c["readinessProbe"]["httpGet"]["path"], c["livenessProbe"]["httpGet"]["path"]}
    assert probes == {"/readyz", "/healthz"}


@pytest.fixture
def service_account(stack, rendered):
    """The base's ServiceAccount, ClusterRole, Roles and bindings, applied for
    real, and its GPUClass CRD (kubectl auth can-i knows no rule of a
    resource the server does not have)."""
    rbac = [d for d in rendered
            if d["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
                             "RoleBinding", "CustomResourceDefinition")]
    lst = {"apiVersion": "v1", "kind": "List", "items": rbac}
    stack.kubectl.apply(lst).check()
    stack.kubectl("wait", "--for=condition=Established", "crd/gpuclasses.gpugate.io",
                  "crd/gpuquotas.gpugate.io", "--timeout=60s").check()
    yield
    stack.kubectl("delete", "-f", "-", "--ignore-not-found", input=json.dumps(lst),
                  timeout=120)


def test_rbac_is_enough_for_the_watch_and_no_more(stack, service_account, tmp_path):
    k = stack.kubectl
    for verb, res, want in (("list", "pods", "yes"), ("watch", "pods", "yes"),
                            ("list", "jobs.batch", "yes"), ("watch", "jobs.batch", "yes"),
                            ("list", "resourceclaims.resource.k8s.io", "yes"),
                            ("watch", "resourceclaims.resource.k8s.io", "yes"),
                            # The DRA pool (#33): read only.
                            ("list", "resourceslices.resource.k8s.io", "yes"),
                            ("watch", "resourceslices.resource.k8s.io", "yes"),
                            ("list", "devicetaintrules.resource.k8s.io", "yes"),
                            ("watch", "devicetaintrules.resource.k8s.io", "yes"),
                            ("list", "deviceclasses.resource.k8s.io", "yes"),
                            ("watch", "deviceclasses.resource.k8s.io", "yes"),
                            ("update", "resourceslices.resource.k8s.io", "no"),
                            ("delete", "devicetaintrules.resource.k8s.io", "no"),
                            # The pool (#16): every Node, and an Event on a
                            # GPU pod that waits; nothing more of either.
                            # The health loop (#30): gpugate's taint and
                            # record on a Node, by patch only.
                            ("list", "nodes", "yes"), ("watch", "nodes", "yes"),
                            ("patch", "nodes", "yes"), ("update", "nodes", "no"),
                            ("delete", "nodes", "no"), ("create", "events", "yes"),
                            ("delete", "events", "no"),
                            # Reclaim (#17): annotate and suspend borrowers,
                            # evict pods; delete a released pod past the
                            # grace (#26); never a Job, never a collection.
                            ("patch", "pods", "yes"), ("patch", "jobs.batch", "yes"),
                            ("delete", "pods", "yes"), ("deletecollection", "pods", "no"),
                            ("delete", "jobs.batch", "no"),
                            ("update", "jobs.batch", "no"),
                            # A Job's priority (its template's class) for
                            # LowerPriority; read only.
                            ("list", "priorityclasses.scheduling.k8s.io", "yes"),
                            ("watch", "priorityclasses.scheduling.k8s.io", "yes"),
                            ("create", "priorityclasses.scheduling.k8s.io", "no"),
                            # Does the checkpoint claim exist (#18); create
                            # the missing ones (#27), never change or delete.
                            ("watch", "persistentvolumeclaims", "yes"),
                            ("create", "persistentvolumeclaims", "yes"),
                            ("update", "persistentvolumeclaims", "no"),
                            ("patch", "persistentvolumeclaims", "no"),
                            ("delete", "persistentvolumeclaims", "no"),
                            ("list", "namespaces", "yes"), ("watch", "namespaces", "no"),
                            ("create", "namespaces", "no"),
                            # What a kubectl scale is of (#18): get, only.
                            ("get", "deployments.apps", "yes"),
                            ("get", "statefulsets.apps", "yes"),
                            ("get", "replicasets.apps", "yes"),
                            ("list", "deployments.apps", "no"),
                            ("watch", "statefulsets.apps", "no"),
                            ("get", "daemonsets.apps", "no"),
                            ("update", "deployments.apps", "no"),
                            # The claim templates of DRA classes (#33):
                            # created and deleted, never updated.
                            ("list", "resourceclaimtemplates.resource.k8s.io", "yes"),
                            ("create", "resourceclaimtemplates.resource.k8s.io", "yes"),
                            ("delete", "resourceclaimtemplates.resource.k8s.io", "yes"),
                            ("update", "resourceclaimtemplates.resource.k8s.io", "no"),
                            ("patch", "resourceclaimtemplates.resource.k8s.io", "no"),
                            ("list", "secrets", "no"), ("create", "pods", "no"),
                            ("update", "mutatingwebhookconfigurations", "no"),
                            # The GPUClass objects (#18): kept in step with
                            # the policy; no patch, no deletecollection.
                            ("list", "gpuclasses.gpugate.io", "yes"),
                            ("create", "gpuclasses.gpugate.io", "yes"),
                            ("update", "gpuclasses.gpugate.io", "yes"),
                            ("delete", "gpuclasses.gpugate.io", "yes"),
                            ("patch", "gpuclasses.gpugate.io", "no"),
                            ("deletecollection", "gpuclasses.gpugate.io", "no"),
                            # The GPUQuota objects (#27): created, their
                            # status written, deleted; the object itself
                            # never updated or patched. Namespaces: listed.
                            ("list", "gpuquotas.gpugate.io", "yes"),
                            ("create", "gpuquotas.gpugate.io", "yes"),
                            ("delete", "gpuquotas.gpugate.io", "yes"),
                            ("update", "gpuquotas.gpugate.io", "no"),
                            ("patch", "gpuquotas.gpugate.io", "no"),
                            ("deletecollection", "gpuquotas.gpugate.io", "no"),
                            ("list", "namespaces", "yes"), ("get", "namespaces", "no"),
                            ("update", "namespaces", "no"),
                            ("create", "customresourcedefinitions.apiextensions.k8s.io",
                             "no")):
        r = k("auth", "can-i", verb, res, "--all-namespaces", f"--as={SA}")
        assert r.out.strip() == want, (verb, res, r)
    # Evictions (the Eviction API keeps PodDisruptionBudgets), no status writes.
    for verb, sub, want in (("create", "eviction", "yes"), ("patch", "status", "no")):
        r = k("auth", "can-i", verb, "pods", f"--subresource={sub}", "--all-namespaces",
              f"--as={SA}")
        assert r.out.strip() == want, (verb, sub, r)
    for verb, want in (("update", "yes"), ("patch", "no")):
        r = k("auth", "can-i", verb, "gpuquotas.gpugate.io", "--subresource=status",
              "--all-namespaces", f"--as={SA}")
        assert r.out.strip() == want, (verb, r)
    # The shared usage store and its Lease, in gpugate's namespace only.
    for verb, res, ns, want in (("get", "configmaps", "gpugate", "yes"),
                                ("create", "configmaps", "gpugate", "yes"),
                                ("update", "configmaps", "gpugate", "yes"),
                                ("delete", "configmaps", "gpugate", "no"),
                                ("update", "configmaps", "research", "no"),
                                ("update", "leases.coordination.k8s.io", "gpugate", "yes"),
                                ("delete", "leases.coordination.k8s.io", "gpugate", "no")):
        r = k("auth", "can-i", verb, res, "-n", ns, f"--as={SA}")
        assert r.out.strip() == want, (verb, res, ns, r)
    token = k("create", "token", "gpugate", "-n", "gpugate", "--duration=10m").check().out.strip()
    ca = base64.b64encode((stack.cluster.dir / "pki" / "ca.crt").read_bytes()).decode()
    kubeconfig = tmp_path / "sa.kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "sa",
        "clusters": [{"name": "e2e", "cluster": {
            "server": stack.cluster.env["APISERVER_URL"],
            "certificate-authority-data": ca}}],
        "users": [{"name": "gpugate", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "e2e", "user": "gpugate"}}]}))
    gate = Gate(stack.binary, stack.certs, stack.quota_policy, tmp_path, str(kubeconfig),
                name="as-service-account",
                args=["--usage-store", "shared", "--namespace", "gpugate",
                      "--identity", "as-service-account"]).start()
    try:
        gate.wait_ready(30)  # listed Pods, Jobs and ResourceClaims with the base's RBAC
        assert "gpugate_kube_watch_connected 1" in gate.metrics()
        # ...and the Nodes (the pool) with the ClusterRole's nodes rule.
        wait_until("the pool known", lambda: "gpugate_pool_synced 1" in gate.metrics(), 20)
        # ...and took the Lease of the shared store with its Role.
        wait_until("the leader elected", lambda: 'msg="leader elected"' in gate.stderr_text(),
                   20, 0.2)
        # ...and, as the Lease holder, wrote the GPUClass objects with the
        # ClusterRole's gpuclasses rule.
        wait_until("the GPUClass objects written", lambda: re.search(
            r'msg="gpuclasses synced" created=[1-9]', gate.stderr_text()), 20, 0.2)
        # (a CRD just created may answer 429 for a moment: retried; a 403
        # would be the RBAC's fault)
        assert not re.search(r'msg="gpuclasses not synced" error="[^"]*: 403 ',
                             gate.stderr_text()), gate.stderr_text()
        assert gate.stop_and_check() == []
    finally:
        gate.kill()
    # The shipped store (--usage-store leader) reads Lease gpugate-memory and
    # watches gpugate-leader with the same Role: ready (both read), no Lease
    # error.  (The stack's own gpugate holds gpugate-memory here, so this one
    # follows; the holder's writes are the Role's create and update, above.)
    gate = Gate(stack.binary, stack.certs, stack.quota_policy, tmp_path, str(kubeconfig),
                name="as-service-account-leader",
                args=["--usage-store", "leader", "--namespace", "gpugate",
                      "--identity", "as-service-account-leader"]).start()
    try:
        gate.wait_ready(30)
        assert 'msg="lease unavailable"' not in gate.stderr_text(), gate.stderr_text()
        assert 'msg="quota leader" lease=gpugate/gpugate-memory' in gate.stderr_text()
        assert "gpugate_quota_leader 0" in gate.metrics()
        assert gate.stop_and_check() == []
    finally:
        gate.kill()


def test_every_user_may_read_gpuclasses_and_only_read(stack, service_account):
    """The readers' ClusterRole: bound to every authenticated user (a
    tenant's edit is a RoleBinding, which grants no cluster-scoped
    resource), and aggregated to view, so to edit and admin."""
    k = stack.kubectl
    role = k.get("clusterrole", "gpugate-gpuclasses-reader")
    assert role["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
    assert role["rules"] == [{"apiGroups": ["gpugate.io"], "resources": ["gpuclasses"],
                              "verbs": ["get", "list", "watch"]}]
    binding = k.get("clusterrolebinding", "gpugate-gpuclasses-reader")
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io",
                                    "kind": "Group", "name": "system:authenticated"}]
    for name in ("view", "edit"):
        wait_until(f"{name} aggregating the gpuclasses rule", lambda: any(
            "gpuclasses" in r.get("resources", [])
            for r in k.get("clusterrole", name).get("rules") or []), 30)
    someone = "system:serviceaccount:research:nobody"
    for verb, want in (("get", "yes"), ("list", "yes"), ("watch", "yes"),
                       ("create", "no"), ("update", "no"), ("patch", "no"),
                       ("delete", "no")):
        r = k("auth", "can-i", verb, "gpuclasses.gpugate.io", f"--as={someone}")
        assert r.out.strip() == want, (verb, r)


def validate_pod_requests(gate) -> int:
    return sum(int(v) for v in re.findall(
        r'^gpugate_admission_requests_total\{endpoint="validate",kind="Pod",result="\w+"\} '
        r'(\d+)$', gate.metrics(), re.M))


def test_registrations_of_the_base_work_with_gpugate(stack, rendered, clean, files):
    """The base's two webhook configurations, with clientConfig pointed at
    the local gpugate (instead of the in-cluster Service) and the e2e split
    of namespaces added, replace the test registration for a moment."""
    k, gate = stack.kubectl, stack.gates["example"]
    clean("research")
    configs = []
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        cfg = one(rendered, kind)
        cfg = {"apiVersion": cfg["apiVersion"], "kind": kind,
               "metadata": {"name": "gpugate-from-manifests"}, "webhooks": cfg["webhooks"]}
        for w in cfg["webhooks"]:
            path = w["clientConfig"]["service"].get("path", "")
            w["clientConfig"] = {"url": gate.url + path, "caBundle": gate.certs.ca_bundle}
            w["namespaceSelector"]["matchExpressions"].append(
                {"key": POLICY_LABEL, "operator": "NotIn", "values": list(LABELLED_POLICIES)})
        configs.append(cfg)
    try:
        k.apply({"apiVersion": "v1", "kind": "List", "items": configs}).check()
        k("delete", "mutatingwebhookconfiguration,validatingwebhookconfiguration",
          "gpugate-example").check()
        # the apiserver loads webhook configurations asynchronously
        time.sleep(2)
        wait_webhooks(k, "example")
        r = k.apply_file(files / "pod.yaml", pod("via-base", "research", "train-small"))
        assert (r.out, r.err) == ("pod/via-base created\n", warning(
            "gpugate: train-small -> 1 x h100-80gb for tenant research (1/32 in use)")), r
        before = validate_pod_requests(gate)
        r = k("label", "pod", "via-base", "-n", "research", "team=vision")
        assert (r.rc, r.out, r.err) == (0, "pod/via-base labeled\n", ""), r
        # matchConditions: an update that leaves the stamps alone is not sent
        assert validate_pod_requests(gate) == before
        r = k("label", "pod", "via-base", "-n", "research", "gpugate.io/tenant-")
        assert r.rc == 1 and r.err == denied_by(
            "validate.gpugate.io",
            'gpugate: label gpugate.io/tenant is set by gpugate and cannot be changed or '
            'removed (it is "research")', file=None), r
        assert validate_pod_requests(gate) == before + 1
        # A toleration added (any pod may gain one): sent and judged.
        r = k("patch", "pod", "via-base", "-n", "research", "--type=json", "-p",
              json.dumps([{"op": "add", "path": "/spec/tolerations/-", "value": {
                  "key": "example.com/other", "operator": "Exists"}}]))
        assert (r.rc, r.err) == (0, ""), r
        assert validate_pod_requests(gate) == before + 2
        # A status write: sent only when it touches the stamps (#26).
        r = k("patch", "pod", "via-base", "-n", "research", "--subresource=status",
              "--type=merge", "-p", '{"metadata":{"labels":{"team":"audio"}}}')
        assert r.rc == 0, r
        assert validate_pod_requests(gate) == before + 2
        r = k("patch", "pod", "via-base", "-n", "research", "--subresource=status",
              "--type=merge", "-p", '{"metadata":{"labels":{"gpugate.io/tenant":null}}}')
        assert r.rc == 1 and r.err == denied_by(
            "validate.gpugate.io",
            'gpugate: label gpugate.io/tenant is set by gpugate and cannot be changed or '
            'removed (it is "research")', file=None), r
        assert validate_pod_requests(gate) == before + 3
        r = k("delete", "pod", "via-base", "-n", "research")
        assert r.rc == 0, r
        gate.wait_used("research", 0)
        # Every Job update is sent: resuming a suspended Job is judged and
        # charged (#13), through the base's matchConditions too.
        r = k.apply_file(files / "job.yaml", job("via-base", "research", "train-small",
                                                 suspend=True))
        assert r.rc == 0, r
        r = k("patch", "job", "via-base", "-n", "research", "--type=merge",
              "-p", '{"spec":{"suspend":false}}')
        assert (r.rc, r.err) == (0, warning(
            "gpugate: train-small -> 1 pod x 1 x h100-80gb for tenant research "
            "(1/32 in use)")), r
        gate.wait_used("research", 1)
        r = k("delete", "job", "via-base", "-n", "research", "--cascade=foreground")
        assert r.rc == 0, r
        gate.wait_used("research", 0)
    finally:
        register(k, "gpugate-example", gate, "example")
        k("delete", "mutatingwebhookconfiguration,validatingwebhookconfiguration",
          "gpugate-from-manifests", "--ignore-not-found")
        time.sleep(2)
        wait_webhooks(k, "example")
