"""The Helm chart (charts/gpugate) against the real kube-apiserver:

- it renders the same objects as the kustomize base in manifests/ (labels
  that only Helm sets, the caBundle and the Namespace aside): the two stay
  consistent because this test fails otherwise;
- `helm install` in certManager mode, with cert-manager's CRDs (from its Go
  module, tests/e2e/tools/cert-manager) in the apiserver, is accepted,
  Certificate and Issuers included; then upgrade, rollback and the
  documented uninstall (webhook configurations first) work. No cert-manager
  controller or cainjector runs here, so no certificate is issued and no
  caBundle injected: the test checks the annotation that asks for it;
- its ServiceMonitor passes prometheus-operator's CRD (from its Go module,
  tests/e2e/tools/prometheus-operator), strict validation;
- the chart's webhook configurations (rendered with the e2e gpugate's CA as
  caBundle and the e2e namespace split through the chart's own
  webhook.namespaceSelectorExpressions value; only clientConfig.service is
  swapped for the local URL) admit and deny real objects through kubectl.

helm and the CRDs come from tests/e2e/build-tools.sh (cached). A secret-mode
install follows docs/operations.md step by step.
"""

from __future__ import annotations

import copy
import json
import subprocess
import time
from pathlib import Path

import pytest

from gpugate_e2e import (EXAMPLE_POLICY, LABELLED_POLICIES, POLICY_LABEL, HERE, ROOT, pod, register,
                         wait_until, wait_webhooks)
from test_kubectl_admission import denied_by, warning

CHART = ROOT / "charts" / "gpugate"
KUBE_VERSION = "1.37.2"
# Set by Helm only (the kustomize base has no release, chart or version).
HELM_ONLY_LABELS = {"app.kubernetes.io/instance", "app.kubernetes.io/version",
                    "app.kubernetes.io/managed-by", "helm.sh/chart"}
# The stack made PriorityClass training (gpugate_e2e.Stack): an install
# next to it leaves it out (values.yaml, priorityClasses).
NO_PRIORITY_CLASSES = ("--set-json", "priorityClasses=[]")


@pytest.fixture(scope="module")
def tools() -> dict[str, str]:
    out = subprocess.run([str(HERE / "build-tools.sh"), "--quiet"], capture_output=True,
                         text=True, check=True, timeout=3600).stdout
    return dict(line.split("=", 1) for line in out.splitlines())


@pytest.fixture(scope="module")
def helm(tools, stack):
    binary = str(Path(tools["HELM_BIN_DIR"]) / "helm")
    env = {"HOME": str(stack.cluster.dir), "PATH": "/usr/bin:/bin",
           "HELM_CACHE_HOME": str(stack.cluster.dir / "helm-cache"),
           "HELM_CONFIG_HOME": str(stack.cluster.dir / "helm-config"),
           "HELM_DATA_HOME": str(stack.cluster.dir / "helm-data")}

    def run(*args: str, check: bool = True) -> subprocess.CompletedProcess:
        p = subprocess.run([binary, "--kubeconfig", stack.kubectl.kubeconfig, *args],
                           capture_output=True, text=True, timeout=180, env=env, cwd=ROOT)
        if check:
            assert p.returncode == 0, (args, p.stdout, p.stderr)
        return p
    return run


def template(helm, release: str, ns: str, *sets: str) -> str:
    return helm("template", release, str(CHART), "-n", ns, "--kube-version", KUBE_VERSION,
                *sets).stdout


def as_objects(stack, text: str) -> list[dict]:
    """kubectl itself turns a YAML stream into JSON objects (client side)."""
    out = stack.kubectl("create", "--dry-run=client", "-o", "json", "-f", "-",
                        input=text).check().out
    docs, i, dec = [], 0, json.JSONDecoder()
    while out[i:].strip():
        while out[i].isspace():
            i += 1
        obj, i = dec.raw_decode(out, i)
        docs.extend(obj["items"] if obj.get("kind") == "List" else [obj])
    return docs


def without(obj, keys: set[str]):
    """obj with every mapping key in keys removed, at any depth."""
    if isinstance(obj, dict):
        return {k: without(v, keys) for k, v in obj.items() if k not in keys}
    if isinstance(obj, list):
        return [without(v, keys) for v in obj]
    return obj


def by_kind_and_name(docs: list[dict]) -> dict[tuple[str, str], dict]:
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def test_chart_renders_what_the_kustomize_base_renders(stack, helm):
    kustomized = as_objects(stack, stack.kubectl("kustomize", "manifests").check().out)
    charted = as_objects(stack, template(helm, "gpugate", "gpugate",
                                         "--set", "certificates.caBundle=Q0E="))
    # The chart leaves the namespace to `kubectl create namespace` (or
    # --create-namespace); docs/operations.md says which labels to give it.
    kustomized = [d for d in kustomized if d["kind"] != "Namespace"]
    for d in charted:
        for w in d.get("webhooks", []):
            assert w["clientConfig"].pop("caBundle") == "Q0E=", w["name"]
    a = by_kind_and_name(without(kustomized, HELM_ONLY_LABELS))
    b = by_kind_and_name(without(charted, HELM_ONLY_LABELS))
    assert sorted(a) == sorted(b)
    for key in sorted(a):
        assert a[key] == b[key], (f"{key}: kustomize base and chart differ\nkustomize: "
                                  f"{json.dumps(a[key], sort_keys=True)}\nchart:     "
                                  f"{json.dumps(b[key], sort_keys=True)}")
    # ...and the labels Helm adds are there, on every object.
    for d in charted:
        assert HELM_ONLY_LABELS <= set(d["metadata"]["labels"]), d["metadata"]


CHART_NS = "gpugate-chart"
# No namespace carries this label: the installed webhooks select nothing,
# so the release (whose Deployment never gets ready here) blocks no one.
OPT_IN = json.dumps([{"key": "e2e.gpugate.io/chart-opt-in", "operator": "In",
                      "values": ["true"]}])


@pytest.fixture(scope="module")
def cert_manager_crds(stack, tools):
    k = stack.kubectl
    crds = sorted(Path(tools["CERT_MANAGER_CRDS_DIR"]).glob("*.yaml"))
    assert len(crds) == 6, crds
    # Server-side: the Certificate CRD is too big for the last-applied
    # annotation of a client-side apply.
    for f in crds:
        k("apply", "--server-side", "-f", str(f)).check()
    k("wait", "--for=condition=Established", "--timeout=60s",
      "crd/certificates.cert-manager.io", "crd/issuers.cert-manager.io",
      "crd/clusterissuers.cert-manager.io").check()
    yield
    k("delete", "-f", str(crds[0].parent), "--ignore-not-found", "--wait=false")


def test_helm_install_upgrade_rollback_uninstall_with_cert_manager(stack, helm,
                                                                  cert_manager_crds):
    k = stack.kubectl
    k("create", "namespace", CHART_NS).check()
    k("label", "namespace", CHART_NS, "pod-security.kubernetes.io/enforce=restricted").check()
    try:
        rendered = template(helm, CHART_NS, CHART_NS, "--set", "certificates.mode=certManager",
                            "--set-json", f"webhook.namespaceSelectorExpressions={OPT_IN}")
        # Every object, Certificate and Issuers included, against the
        # apiserver's schemas with strict field validation (unknown fields
        # are errors).
        r = k("apply", "--dry-run=server", "--validate=strict", "-f", "-",
              input=rendered)
        assert r.rc == 0 and "Warning" not in r.err, r
        assert "certificate.cert-manager.io/gpugate-chart created (server dry run)" in r.out, r
        # The stack has PriorityClass training already (from
        # manifests/priorityclass.yaml): Helm cannot adopt it, so, as
        # values.yaml says, priorityClasses=[].  The dry run above applied
        # the chart's own.
        p = helm("install", CHART_NS, str(CHART), "-n", CHART_NS,
                 "--set", "certificates.mode=certManager", *NO_PRIORITY_CLASSES,
                 "--set-json", f"webhook.namespaceSelectorExpressions={OPT_IN}")
        assert "STATUS: deployed" in p.stdout, p.stdout
        certs = k("get", "certificates.cert-manager.io", "-n", CHART_NS, "-o", "json").json()
        assert {c["metadata"]["name"]: (c["spec"]["secretName"], c["spec"]["issuerRef"]["name"])
                for c in certs["items"]} == {
            CHART_NS: (f"{CHART_NS}-tls", f"{CHART_NS}-ca"),
            f"{CHART_NS}-ca": (f"{CHART_NS}-ca", f"{CHART_NS}-selfsigned")}
        issuers = k("get", "issuers.cert-manager.io", "-n", CHART_NS, "-o", "name").check().out
        assert sorted(issuers.split()) == [f"issuer.cert-manager.io/{CHART_NS}-ca",
                                           f"issuer.cert-manager.io/{CHART_NS}-selfsigned"]
        for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
            cfg = k.get(kind, CHART_NS)
            assert cfg["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == \
                f"{CHART_NS}/{CHART_NS}", cfg["metadata"]
            for w in cfg["webhooks"]:
                # nothing injects it here (no cainjector runs)
                assert "caBundle" not in w["clientConfig"], w
                assert w["clientConfig"]["service"] == {
                    "namespace": CHART_NS, "name": CHART_NS, "path": w["clientConfig"][
                        "service"]["path"], "port": 443}, w
        dep = k.get("deployment", CHART_NS, CHART_NS)
        assert dep["spec"]["replicas"] == 3
        args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
        assert args[args.index("--usage-store") + 1] == "leader", args

        helm("upgrade", CHART_NS, str(CHART), "-n", CHART_NS, "--reuse-values",
             "--set", "replicas=4")
        assert k.get("deployment", CHART_NS, CHART_NS)["spec"]["replicas"] == 4
        helm("rollback", CHART_NS, "1", "-n", CHART_NS)
        assert k.get("deployment", CHART_NS, CHART_NS)["spec"]["replicas"] == 3
        history = json.loads(helm("history", CHART_NS, "-n", CHART_NS, "-o", "json").stdout)
        assert [h["revision"] for h in history] == [1, 2, 3], history

        # Uninstall as docs/operations.md says: the webhook configurations
        # first, then the release.
        k("delete", "mutatingwebhookconfiguration,validatingwebhookconfiguration",
          CHART_NS).check()
        p = helm("uninstall", CHART_NS, "-n", CHART_NS)
        assert f'release "{CHART_NS}" uninstalled' in p.stdout, p.stdout
        for kind in ("deployment", "certificates.cert-manager.io", "issuers.cert-manager.io",
                     "configmap", "service", "serviceaccount"):
            left = k("get", kind, "-n", CHART_NS, "-l", f"app.kubernetes.io/instance={CHART_NS}",
                     "-o", "name").check().out
            assert left == "", (kind, left)
        assert k("get", "clusterrole", CHART_NS).rc == 1
    finally:
        helm("uninstall", CHART_NS, "-n", CHART_NS, "--ignore-not-found", check=False)
        k("delete", "namespace", CHART_NS, "--wait=false", "--ignore-not-found")


def test_service_monitor_is_accepted_by_its_crd(stack, helm, tools):
    """metrics.serviceMonitor.enabled: the ServiceMonitor against
    prometheus-operator's CRD (from its Go module), strict validation."""
    k = stack.kubectl
    crd = Path(tools["PROMETHEUS_CRDS_DIR"]) / "monitoring.coreos.com_servicemonitors.yaml"
    k("apply", "--server-side", "-f", str(crd)).check()
    try:
        k("wait", "--for=condition=Established", "--timeout=60s",
          "crd/servicemonitors.monitoring.coreos.com").check()
        monitors = [d for d in as_objects(stack, template(
            helm, "gpugate", "default", "--set", "certificates.mode=certManager",
            "--set", "metrics.serviceMonitor.enabled=true",
            "--set", "metrics.serviceMonitor.labels.release=prometheus"))
            if d["kind"] == "ServiceMonitor"]
        assert len(monitors) == 1, monitors
        r = k("apply", "--dry-run=server", "--validate=strict", "-f", "-",
              input=json.dumps(monitors[0]))
        assert (r.rc, r.out, r.err) == (
            0, "servicemonitor.monitoring.coreos.com/gpugate created (server dry run)\n", ""), r
        # ...and a field the CRD does not know is refused, so the check is real
        monitors[0]["spec"]["endpoints"][0]["schema"] = "https"
        r = k("apply", "--dry-run=server", "--validate=strict", "-f", "-",
              input=json.dumps(monitors[0]))
        assert r.rc == 1 and 'unknown field "spec.endpoints[0].schema"' in r.err, r
    finally:
        k("delete", "-f", str(crd), "--ignore-not-found", "--wait=false")


def test_helm_install_in_secret_mode_as_documented(stack, helm, tmp_path):
    """docs/operations.md, "Certificates from gpugate certs": gpugate certs,
    the Secret, helm install with the caBundle and failurePolicy Ignore,
    then helm upgrade to Fail."""
    k, ns = stack.kubectl, "gpugate-secret"
    k("create", "namespace", ns).check()
    try:
        pki = tmp_path / "pki"
        p = subprocess.run([str(stack.binary), "certs", "--out", str(pki),
                            "--dns", f"{ns}.{ns}.svc", "--dns", f"{ns}.{ns}.svc.cluster.local"],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        ca_bundle = p.stdout.strip()
        k("-n", ns, "create", "secret", "generic", f"{ns}-tls", "--type=kubernetes.io/tls",
          f"--from-file=tls.crt={pki / 'tls.crt'}", f"--from-file=tls.key={pki / 'tls.key'}",
          f"--from-file=ca.crt={pki / 'ca.crt'}").check()
        helm("install", ns, str(CHART), "-n", ns, "--set", f"certificates.caBundle={ca_bundle}",
             "--set", "webhook.failurePolicy=Ignore", *NO_PRIORITY_CLASSES,
             "--set-json", f"webhook.namespaceSelectorExpressions={OPT_IN}")
        cfg = k.get("validatingwebhookconfiguration", ns)
        assert [(w["clientConfig"]["caBundle"], w["failurePolicy"]) for w in cfg["webhooks"]] == \
            [(ca_bundle, "Ignore")] * 4, cfg["webhooks"]
        assert "annotations" not in cfg["metadata"] or \
            "cert-manager.io/inject-ca-from" not in cfg["metadata"]["annotations"]
        vol = k.get("deployment", ns, ns)["spec"]["template"]["spec"]["volumes"][0]
        assert vol["projected"]["sources"][1]["secret"]["name"] == f"{ns}-tls", vol
        helm("upgrade", ns, str(CHART), "-n", ns, "--reuse-values",
             "--set", "webhook.failurePolicy=Fail")
        for kind, want in (("mutatingwebhookconfiguration", ["Fail", "Ignore"]),
                           ("validatingwebhookconfiguration",
                            ["Fail", "Ignore", "Ignore", "Ignore"])):
            hooks = k.get(kind, ns)["webhooks"]
            # the templates', the policy's and the DELETE webhooks stay Ignore
            assert [w["failurePolicy"] for w in hooks] == want, (kind, hooks)
            assert all(w["clientConfig"]["caBundle"] == ca_bundle for w in hooks)
        k("delete", "mutatingwebhookconfiguration,validatingwebhookconfiguration", ns).check()
        helm("uninstall", ns, "-n", ns)
        # the Secret was not the chart's: it stays until the namespace goes
        assert k("get", "secret", f"{ns}-tls", "-n", ns).rc == 0
    finally:
        helm("uninstall", ns, "-n", ns, "--ignore-not-found", check=False)
        k("delete", "namespace", ns, "--wait=false", "--ignore-not-found")


def test_webhooks_from_the_chart_admit_and_deny(stack, helm, clean, files):
    """The chart's two webhook configurations replace the e2e registration
    of the example gpugate for a moment."""
    k, gate = stack.kubectl, stack.gates["example"]
    clean("research")
    split = json.dumps([{"key": POLICY_LABEL, "operator": "NotIn",
                         "values": list(LABELLED_POLICIES)}])
    rendered = as_objects(stack, template(
        helm, "gpugate-from-chart", "gpugate", "--set",
        f"certificates.caBundle={gate.certs.ca_bundle}",
        "--set-json", f"webhook.namespaceSelectorExpressions={split}"))
    configs = [d for d in rendered if d["kind"].endswith("WebhookConfiguration")]
    assert len(configs) == 2
    for cfg in configs:
        for w in cfg["webhooks"]:
            service = w["clientConfig"].pop("service")
            assert service["name"] == "gpugate-from-chart", service
            w["clientConfig"]["url"] = gate.url + service["path"]
    try:
        k.apply({"apiVersion": "v1", "kind": "List", "items": configs}).check()
        k("delete", "mutatingwebhookconfiguration,validatingwebhookconfiguration",
          "gpugate-example").check()
        time.sleep(2)  # the apiserver loads webhook configurations asynchronously
        wait_webhooks(k, "example")
        r = k.apply_file(files / "pod.yaml", pod("via-chart", "research", "train-small"))
        assert (r.out, r.err) == ("pod/via-chart created\n", warning(
            "gpugate: train-small -> 1 x h100-80gb for tenant research (1/32 in use)")), r
        got = k.get("pod", "via-chart", "research")
        assert got["metadata"]["labels"]["gpugate.io/tenant"] == "research"
        r = k("label", "pod", "via-chart", "-n", "research", "gpugate.io/tenant-")
        assert r.rc == 1 and r.err == denied_by(
            "validate.gpugate.io",
            'gpugate: label gpugate.io/tenant is set by gpugate and cannot be changed or '
            'removed (it is "research")', file=None), r
        r = k.apply_file(files / "pod-big.yaml", pod("too-big", "research", "train-small",
                                                     gpus=5))
        assert r.rc == 1 and "denied the request" in r.err and \
            'admission webhook "mutate.gpugate.io"' in r.err, r
        k("delete", "pod", "via-chart", "-n", "research").check()
        gate.wait_used("research", 0)
        # #27 item 5: the policy ConfigMap is checked at kubectl apply.
        cm = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": "gpugate-from-chart-policy", "namespace": "gpugate"},
              "data": {"policy.yaml": EXAMPLE_POLICY.read_text()}}
        assert k.apply(cm).rc == 0
        bad = copy.deepcopy(cm)
        bad["data"]["policy.yaml"] = cm["data"]["policy.yaml"].replace(
            "gpusPerNode: 8\n", "gpusPerNode: 0\n", 1)
        line = bad["data"]["policy.yaml"][:bad["data"]["policy.yaml"].index(
            "gpusPerNode: 0")].count("\n") + 1
        r = k.apply(bad)
        assert r.rc == 1 and (
            'admission webhook "policy.gpugate.io" denied the request: gpugate: the policy '
            "in ConfigMap gpugate/gpugate-from-chart-policy is invalid (1 error; the running "
            "gpugate keeps its current policy; check it with `gpugate check FILE`): "
            f'policy.yaml:{line}: flavor "h100-80gb": gpusPerNode 0 must be between 1 and '
            "1024\n") in r.err, r
        got = k.get("configmap", "gpugate-from-chart-policy", "gpugate")
        assert got["data"] == cm["data"]  # the good one stays
        k("delete", "configmap", "gpugate-from-chart-policy", "-n", "gpugate").check()
    finally:
        register(k, "gpugate-example", gate, "example")
        k("delete", "mutatingwebhookconfiguration,validatingwebhookconfiguration",
          "gpugate-from-chart", "--ignore-not-found")
        time.sleep(2)
        wait_until("the example registration back", lambda: wait_webhooks(k, "example") or True,
                   60)
