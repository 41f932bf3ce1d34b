#!/usr/bin/env python3
"""check.py - helm lint and helm template of charts/gpugate (make chart-check).

No cluster: the e2e test (tests/e2e/test_chart.py) applies what the chart
renders to a real kube-apiserver. Here, with helm (HELM, else
$HELM_BIN_DIR/helm, else what tests/e2e/build-tools.sh built):

- helm lint --strict passes in both certificate modes;
- helm template renders, in secret mode, the caBundle on all three webhooks
  and no cert-manager object; in certManager mode, an Issuer chain, the
  serving Certificate for the Service's DNS names into the Secret the
  Deployment mounts, and cert-manager.io/inject-ca-from on both webhook
  configurations naming that Certificate, and no caBundle;
- the values the chart documents change what they say (replicas,
  resources, failurePolicy, excluded namespaces, an extra namespace
  selector, existingConfigMap, inline policy, ServiceMonitor, PDB off,
  PrometheusRule and Grafana dashboard with their labels and thresholds,
  the Prometheus flags of idle GPUs and their mounts, only when set);
- wrong values are refused with the chart's message;
- the chart's version and appVersion are VERSION, and its default policy
  (files/policy.yaml) is manifests/policy.yaml.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "gpugate"
KUBE_VERSION = "1.37.2"
CA = "Q0EgQlVORExF"  # any base64: helm does not look inside
failures: list[str] = []


def helm_bin() -> str:
    if os.environ.get("HELM"):
        return os.environ["HELM"]
    d = os.environ.get("HELM_BIN_DIR")
    if not d:
        out = subprocess.run([str(ROOT / "tests/e2e/build-tools.sh"), "--quiet"],
                             capture_output=True, text=True, check=True).stdout
        d = dict(line.split("=", 1) for line in out.splitlines())["HELM_BIN_DIR"]
    return str(Path(d) / "helm")


HELM = helm_bin()


def helm(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([HELM, *args], capture_output=True, text=True, timeout=120)


def render(*sets: str, ns: str = "gpugate", release: str = "gpugate") -> list[dict]:
    p = helm("template", release, str(CHART), "-n", ns, "--kube-version", KUBE_VERSION, *sets)
    if p.returncode != 0:
        raise AssertionError(f"helm template {' '.join(sets)}: {p.stderr}")
    return [d for d in yaml.safe_load_all(p.stdout) if d]


def objs(docs: list[dict], kind: str) -> list[dict]:
    return [d for d in docs if d["kind"] == kind]


def one(docs: list[dict], kind: str, name: str | None = None) -> dict:
    found = [d for d in objs(docs, kind) if name is None or d["metadata"]["name"] == name]
    assert len(found) == 1, f"{len(found)} {kind} {name or ''}"
    return found[0]


def webhooks(docs: list[dict]) -> list[dict]:
    return (one(docs, "MutatingWebhookConfiguration")["webhooks"] +
            one(docs, "ValidatingWebhookConfiguration")["webhooks"])


def container(docs: list[dict]) -> dict:
    return one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]


def check(name: str):
    def wrap(fn):
        t0 = time.monotonic()
        try:
            fn()
            print(f"chart check: ok: {name} ({time.monotonic() - t0:.1f}s)")
        except Exception as e:  # noqa: BLE001 - report every failing check
            failures.append(name)
            print(f"chart check: FAIL: {name}: {type(e).__name__}: {e}")
        return fn
    return wrap


@check("helm lint --strict, both certificate modes")
def _lint():
    for sets in (["--set", f"certificates.caBundle={CA}"],
                 ["--set", "certificates.mode=certManager",
                  "--set", "metrics.prometheusRule.enabled=true",
                  "--set", "metrics.grafanaDashboard.enabled=true"]):
        p = helm("lint", "--strict", str(CHART), "--kube-version", KUBE_VERSION, *sets)
        assert p.returncode == 0, p.stdout + p.stderr


@check("secret mode: the caBundle on every webhook, no cert-manager object")
def _secret():
    docs = render("--set", f"certificates.caBundle={CA}")
    hooks = webhooks(docs)
    assert [w["name"] for w in hooks] == ["mutate.gpugate.io", "mutate-templates.gpugate.io",
                                          "validate.gpugate.io",
                                          "validate-templates.gpugate.io",
                                          "policy.gpugate.io", "release.gpugate.io"], hooks
    for w in hooks:
        assert w["clientConfig"] == {"caBundle": CA, "service": {
            "namespace": "gpugate", "name": "gpugate", "path": w["clientConfig"]["service"]
            ["path"], "port": 443}}, w
    assert not [d for d in docs if d["apiVersion"].startswith("cert-manager.io/")]
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        assert "annotations" not in one(docs, kind)["metadata"], kind
    vols = one(docs, "Deployment")["spec"]["template"]["spec"]["volumes"]
    sources = vols[0]["projected"]["sources"]
    assert sources[1]["secret"]["name"] == "gpugate-tls", sources
    assert sources[0]["configMap"]["name"] == "gpugate-policy", sources


@check("certManager mode: Issuer chain, Certificate, inject-ca-from on both configurations")
def _cert_manager():
    docs = render("--set", "certificates.mode=certManager", ns="gpu-system", release="gg")
    cert = one(docs, "Certificate", "gg")
    assert cert["spec"]["secretName"] == "gg-tls", cert
    assert cert["spec"]["dnsNames"] == ["gg.gpu-system.svc", "gg.gpu-system.svc.cluster.local"]
    assert cert["spec"]["issuerRef"] == {"kind": "Issuer", "name": "gg-ca"}, cert
    ca = one(docs, "Certificate", "gg-ca")
    assert ca["spec"]["isCA"] is True and ca["spec"]["secretName"] == "gg-ca", ca
    assert ca["spec"]["issuerRef"] == {"kind": "Issuer", "name": "gg-selfsigned"}, ca
    assert one(docs, "Issuer", "gg-selfsigned")["spec"] == {"selfSigned": {}}
    assert one(docs, "Issuer", "gg-ca")["spec"] == {"ca": {"secretName": "gg-ca"}}
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        assert one(docs, kind)["metadata"]["annotations"] == {
            "cert-manager.io/inject-ca-from": "gpu-system/gg"}, kind
    for w in webhooks(docs):
        assert "caBundle" not in w["clientConfig"], w
        assert w["clientConfig"]["service"]["name"] == "gg", w
        assert w["clientConfig"]["service"]["namespace"] == "gpu-system", w
    sources = one(docs, "Deployment")["spec"]["template"]["spec"]["volumes"][0]["projected"][
        "sources"]
    assert sources[1]["secret"]["name"] == "gg-tls", sources
    # An existing issuer instead of the chart's own CA.
    docs = render("--set", "certificates.mode=certManager", "--set",
                  "certificates.certManager.issuerRef.kind=ClusterIssuer", "--set",
                  "certificates.certManager.issuerRef.name=corp-ca")
    assert objs(docs, "Issuer") == [], objs(docs, "Issuer")
    assert [c["metadata"]["name"] for c in objs(docs, "Certificate")] == ["gpugate"]
    assert one(docs, "Certificate")["spec"]["issuerRef"] == {"kind": "ClusterIssuer",
                                                            "name": "corp-ca"}


@check("values: replicas, resources, failurePolicy, namespaces, policy, ServiceMonitor, PDB")
def _values():
    base = ["--set", f"certificates.caBundle={CA}"]
    docs = render(*base)
    # Three replicas, one deciding quota, the others forwarding (#32).
    assert one(docs, "Deployment")["spec"]["replicas"] == 3
    args = container(docs)["args"]
    assert args[args.index("--usage-store") + 1] == "leader", args
    assert {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}} in \
        container(docs)["env"], container(docs)["env"]
    assert [w["failurePolicy"] for w in webhooks(docs)] == ["Fail", "Ignore", "Fail", "Ignore",
                                                            "Ignore", "Ignore"]
    # The GPU stack's namespaces are excluded by default (#27).
    assert webhooks(docs)[0]["namespaceSelector"]["matchExpressions"] == [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn",
         "values": ["kube-system", "gpugate", "gpu-operator", "gpu-operator-resources",
                    "nvidia-gpu-operator", "nvsentinel", "nvidia-dra-driver-gpu",
                    "dcgm-exporter"]}]
    # The policy ConfigMap's webhook: its namespace, its name.
    pol = webhooks(docs)[4]
    assert pol["namespaceSelector"]["matchExpressions"] == [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["gpugate"]}], pol
    assert pol["matchConditions"] == [{"name": "the-policy-configmap", "expression":
                                       "object.metadata.name == 'gpugate-policy'"}], pol
    assert pol["clientConfig"]["service"]["path"] == "/validate-policy", pol
    pol = webhooks(render(*base, "--set", "policy.existingConfigMap=mine"))[4]
    assert pol["matchConditions"][0]["expression"] == "object.metadata.name == 'mine'", pol
    # webhook.extraLabelKeys: a renamed class label is sent too.
    docs2 = render(*base, "--set-json", 'webhook.extraLabelKeys=["example.com/class"]')
    for w in webhooks(docs2):
        if w["name"] in ("policy.gpugate.io", "release.gpugate.io"):
            continue
        gpu_work = [c for c in w["matchConditions"] if c["name"] == "gpu-work"]
        assert gpu_work and "k in ['example.com/class']" in gpu_work[0]["expression"], w
    # ...and an update that changes it is sent, like one of the stamps.
    v = [w for w in webhooks(docs2) if w["name"] == "validate.gpugate.io"][0]
    stamps = v["matchConditions"][0]
    assert stamps["name"] == "create-stamp-change-job-update-or-pod-placement", v
    assert ("'gpugate.io/class', 'gpugate.io/gpus'] + ['example.com/class']).exists(k,"
            in stamps["expression"]), stamps
    docs = render(*base, "--set", "webhook.templates=false", "--set", "webhook.release=false")
    assert [w["name"] for w in webhooks(docs)] == ["mutate.gpugate.io", "validate.gpugate.io",
                                                   "policy.gpugate.io"]
    assert one(docs, "PodDisruptionBudget")["spec"]["minAvailable"] == 1
    assert objs(docs, "ServiceMonitor") == []
    assert container(docs)["image"] == "gpugate:" + (ROOT / "VERSION").read_text().strip()
    docs = render(*base, "--set", "replicas=5", "--set", "resources.limits.memory=512Mi",
                  "--set", "webhook.failurePolicy=Ignore", "--set",
                  "webhook.excludeNamespaces={gpu-operator,monitoring}", "--set-json",
                  'webhook.namespaceSelectorExpressions=[{"key":"gpugate.io/enabled",'
                  '"operator":"In","values":["true"]}]',
                  "--set", "podDisruptionBudget.enabled=false",
                  "--set", "metrics.serviceMonitor.enabled=true",
                  "--set", "image.repository=registry.example/gpugate",
                  "--set", "image.tag=9.9.9")
    assert one(docs, "Deployment")["spec"]["replicas"] == 5
    assert container(docs)["resources"]["limits"]["memory"] == "512Mi"
    assert container(docs)["image"] == "registry.example/gpugate:9.9.9"
    assert objs(docs, "PodDisruptionBudget") == []
    for w in webhooks(docs):
        if w["name"] == "policy.gpugate.io":
            continue
        assert w["namespaceSelector"]["matchExpressions"] == [
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn",
             "values": ["kube-system", "gpugate", "gpu-operator", "monitoring"]},
            {"key": "gpugate.io/enabled", "operator": "In", "values": ["true"]}], w
        assert w["failurePolicy"] == "Ignore", w
    sm = one(docs, "ServiceMonitor")
    ep, = sm["spec"]["endpoints"]
    assert (ep["port"], ep["scheme"], ep["path"]) == ("https", "https", "/metrics"), ep
    assert ep["tlsConfig"]["ca"]["secret"] == {"name": "gpugate-tls", "key": "ca.crt"}, ep
    svc = one(docs, "Service")
    assert all(svc["metadata"]["labels"].get(k) == v
               for k, v in sm["spec"]["selector"]["matchLabels"].items()), (sm, svc)
    # The policy: the default, inline, or an existing ConfigMap.
    default = one(render(*base), "ConfigMap")["data"]["policy.yaml"]
    assert default == (ROOT / "manifests" / "policy.yaml").read_text()
    docs = render(*base, "--set", "policy.inline=tenants: []\n")
    assert one(docs, "ConfigMap")["data"]["policy.yaml"] == "tenants: []\n"
    docs = render(*base, "--set", "policy.existingConfigMap=my-policy")
    assert objs(docs, "ConfigMap") == []
    sources = one(docs, "Deployment")["spec"]["template"]["spec"]["volumes"][0]["projected"][
        "sources"]
    assert sources[0]["configMap"]["name"] == "my-policy", sources


@check("metrics: the PrometheusRule and the Grafana dashboard ConfigMap, opt-in")
def _monitoring():
    base = ["--set", f"certificates.caBundle={CA}"]
    docs = render(*base)
    assert objs(docs, "PrometheusRule") == []
    assert [d["metadata"]["name"] for d in objs(docs, "ConfigMap")] == ["gpugate-policy"]
    docs = render(*base, "--set", "metrics.prometheusRule.enabled=true",
                  "--set", "metrics.prometheusRule.labels.release=prometheus",
                  "--set", "metrics.grafanaDashboard.enabled=true",
                  "--set", "metrics.grafanaDashboard.namespace=monitoring",
                  release="gpu")
    rule = one(docs, "PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "prometheus", rule["metadata"]
    rules = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}
    # every selector is this release's job (its ServiceMonitor's)
    assert rules["GpugateDown"]["expr"] == 'absent(up{job="gpu"} == 1)', rules["GpugateDown"]
    for name, r in rules.items():
        assert 'job="gpu"' in r["expr"] and r["labels"]["severity"] in (
            "critical", "warning"), (name, r)
        assert r["annotations"]["summary"] and r["annotations"]["description"], name
    assert "< 14 * 86400" in rules["GpugateCertificateExpiresSoon"]["expr"]
    assert "gpugate_certificate_expiry_timestamp_seconds" in \
        rules["GpugateCertificateExpiresSoon"]["expr"]
    cm = one(docs, "ConfigMap", "gpu-dashboard")
    assert cm["metadata"]["namespace"] == "monitoring"
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1", cm["metadata"]
    dash = json.loads(cm["data"]["gpugate.json"])
    assert dash == json.loads((CHART / "files" / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    assert exprs and all('job=~"$job"' in e for e in exprs), exprs
    # the thresholds and the selector are values
    docs = render(*base, "--set", "metrics.prometheusRule.enabled=true",
                  "--set", "metrics.prometheusRule.certificateExpiryDays=30",
                  "--set", "metrics.prometheusRule.latencyP99Seconds=1",
                  "--set-string", 'metrics.prometheusRule.selector=namespace="gpu"\\,job="x"')
    rules = {r["alert"]: r for g in one(docs, "PrometheusRule")["spec"]["groups"]
             for r in g["rules"]}
    assert rules["GpugateCertificateExpiresSoon"]["expr"].endswith("< 30 * 86400")
    assert rules["GpugateSlowAdmission"]["expr"].endswith("> 1")
    assert rules["GpugateDown"]["expr"] == 'absent(up{namespace="gpu",job="x"} == 1)', \
        rules["GpugateDown"]


@check("idle GPUs: the Prometheus flags and mounts only when set")
def _prometheus():
    base = ["--set", f"certificates.caBundle={CA}"]
    flags = ("--prometheus-url", "--prometheus-bearer-token-file", "--prometheus-ca",
             "--idle-interval")

    def sources(docs):
        return one(docs, "Deployment")["spec"]["template"]["spec"]["volumes"][0][
            "projected"]["sources"]

    docs = render(*base)
    assert not [a for a in container(docs)["args"] if a in flags], container(docs)["args"]
    assert len(sources(docs)) == 2, sources(docs)
    # A URL alone; the ServiceAccount token by its path; the interval.
    docs = render(*base, "--set", "prometheus.url=http://prometheus-operated.monitoring:9090",
                  "--set", "prometheus.bearerTokenFile="
                  "/var/run/secrets/kubernetes.io/serviceaccount/token",
                  "--set", "idleInterval=120")
    args = container(docs)["args"]
    assert args[args.index("--prometheus-url") + 1] == \
        "http://prometheus-operated.monitoring:9090", args
    assert args[args.index("--prometheus-bearer-token-file") + 1] == \
        "/var/run/secrets/kubernetes.io/serviceaccount/token", args
    assert args[args.index("--idle-interval") + 1] == "120", args
    assert "--prometheus-ca" not in args and len(sources(docs)) == 2, args
    # A token from a Secret, the CA from a ConfigMap, then from a Secret.
    docs = render(*base, "--set", "prometheus.url=https://prometheus-k8s.monitoring:9091",
                  "--set", "prometheus.bearerTokenSecret.name=prom-token",
                  "--set", "prometheus.ca.configMap=prom-ca",
                  "--set", "prometheus.ca.key=service-ca.crt")
    args = container(docs)["args"]
    assert args[args.index("--prometheus-bearer-token-file") + 1] == \
        "/etc/gpugate/prometheus/token", args
    assert args[args.index("--prometheus-ca") + 1] == "/etc/gpugate/prometheus/ca.crt", args
    assert "--idle-interval" not in args, args
    assert sources(docs)[2:] == [
        {"secret": {"name": "prom-token", "items": [{"key": "token",
                                                     "path": "prometheus/token"}]}},
        {"configMap": {"name": "prom-ca", "items": [{"key": "service-ca.crt",
                                                     "path": "prometheus/ca.crt"}]}}], \
        sources(docs)
    docs = render(*base, "--set", "prometheus.url=https://p:9091",
                  "--set", "prometheus.ca.secret=prom-tls")
    assert sources(docs)[2:] == [
        {"secret": {"name": "prom-tls", "items": [{"key": "ca.crt",
                                                   "path": "prometheus/ca.crt"}]}}], \
        sources(docs)


@check("wrong values are refused with the chart's message")
def _refused():
    for sets, msg in (
            ([], "certificates.mode secret needs certificates.caBundle"),
            # values.schema.json, before any template runs:
            (["--set", "certificates.mode=vault"],
             "at '/certificates/mode': value must be one of 'secret', 'certManager'"),
            (["--set", f"certificates.caBundle={CA}", "--set", "webhook.failurePolicy=Deny"],
             "at '/webhook/failurePolicy': value must be one of 'Fail', 'Ignore'"),
            (["--set", f"certificates.caBundle={CA}", "--set", "webhook.failurePolcy=Fail"],
             "at '/webhook': additional properties 'failurePolcy' not allowed"),
            (["--set", f"certificates.caBundle={CA}", "--set", "usageStore=memroy"],
             "at '/usageStore': value must be one of 'leader', 'shared', 'memory'"),
            (["--set", "certificates.caBundle=not base64!"],
             "at '/certificates/caBundle'"),
            (["--set", f"certificates.caBundle={CA}", "--set", "replicas=0"],
             "at '/replicas'"),
            (["--set", f"certificates.caBundle={CA}", "--set-json",
              'priorityClasses=[{"name": "training", "valeu": 1000}]'],
             "at '/priorityClasses/0'"),
            (["--set", f"certificates.caBundle={CA}", "--set-json",
              'webhook.excludeNamespaces=["GPU_Operator"]'],
             "at '/webhook/excludeNamespaces/0'"),
            (["--set", f"certificates.caBundle={CA}", "--set", "policy.inline=x",
              "--set", "policy.existingConfigMap=y"],
             "policy: set existingConfigMap or inline, not both"),
            (["--set", f"certificates.caBundle={CA}", "--set", "prometheus.url=prom:9090"],
             "at '/prometheus/url'"),
            (["--set", f"certificates.caBundle={CA}", "--set", "idleInterval=5"],
             "at '/idleInterval'"),
            (["--set", f"certificates.caBundle={CA}", "--set", "prometheus.url=http://p",
              "--set", "prometheus.bearerTokenFile=/t", "--set",
              "prometheus.bearerTokenSecret.name=t"],
             "prometheus: set bearerTokenFile or bearerTokenSecret.name, not both"),
            (["--set", f"certificates.caBundle={CA}", "--set", "prometheus.url=http://p",
              "--set", "prometheus.ca.secret=a", "--set", "prometheus.ca.configMap=b"],
             "prometheus.ca: set configMap or secret, not both"),
            (["--set", f"certificates.caBundle={CA}", "--set", "prometheus.ca.secret=a"],
             "prometheus: a token or a CA needs prometheus.url")):
        p = helm("template", "gpugate", str(CHART), "--kube-version", KUBE_VERSION, *sets)
        assert p.returncode == 1 and msg in p.stderr, (sets, p.stderr)


@check("Chart.yaml version and appVersion are VERSION")
def _version():
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    version = (ROOT / "VERSION").read_text().strip()
    assert (chart["version"], chart["appVersion"]) == (version, version), chart


if __name__ == "__main__":
    if failures:
        print(f"chart check: {len(failures)} failed: {', '.join(failures)}")
        sys.exit(1)
    print("chart check: passed")
