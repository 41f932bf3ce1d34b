"""The chart's Grafana dashboard and PrometheusRule against a real
Prometheus scraping the e2e gpugate (the example policy's, in API mode,
with the fake GPU fleet), after admissions allowed and denied and a GPU pod
that runs:

- every panel query of the dashboard, and its job variable's metric, returns
  at least one series;
- every alert's signal (its expression without the threshold, and without
  absent()) returns at least one series, evaluated by Prometheus itself;
  and Prometheus loads the rule file and evaluates every rule without error;
- promtool check rules accepts the rule file (when promtool is installed),
  and prometheus-operator's PrometheusRule CRD (from the Go module
  tests/e2e/tools/prometheus-operator pins) accepts the PrometheusRule with
  strict validation.

What is tested is what the chart ships: the queries come from `helm
template` of charts/gpugate (metrics.grafanaDashboard.enabled,
metrics.prometheusRule.enabled), not from a copy.  Prometheus is Debian's
package (scripts/deps.sh installs it).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

from gpugate_e2e import HERE, ROOT, pod, wait_until
from test_fleet import created, wait_phase

CHART = ROOT / "charts" / "gpugate"
RELEASE = "gpugate"  # the rules select job="<release>", the ServiceMonitor's job
# What Grafana puts in for the variables: the job chosen, and a rate
# window of a few scrapes (Prometheus scrapes every second here).
GRAFANA_VARS = {"$__rate_interval": "1m", "${job}": RELEASE, "$job": RELEASE}
COMPARISONS = ("==", "!=", ">=", "<=", ">", "<")


# ---------------------------------------------------------------------------
# what the chart ships


def rendered(helm_bin: str) -> list[dict]:
    p = subprocess.run([helm_bin, "template", RELEASE, str(CHART), "-n", "gpugate",
                        "--kube-version", "1.37.2", "--set", "certificates.caBundle=Q0E=",
                        "--set", "metrics.grafanaDashboard.enabled=true",
                        "--set", "metrics.prometheusRule.enabled=true"],
                       capture_output=True, text=True, timeout=120, check=True)
    return [d for d in yaml.safe_load_all(p.stdout) if d]


def dashboard_queries(dashboard: dict) -> list[tuple[str, str]]:
    """(where, query) of every panel target, rows' panels included, and of
    the query variables (label_values(METRIC, label) -> METRIC)."""
    out = []

    def walk(panels):
        for p in panels:
            for t in p.get("targets", []):
                out.append((f'panel "{p["title"]}" {t["refId"]}', t["expr"]))
            walk(p.get("panels", []))
    walk(dashboard["panels"])
    for v in dashboard["templating"]["list"]:
        if v["type"] == "query":
            q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            assert q.startswith("label_values(") and q.endswith(")"), q
            out.append((f'variable "{v["name"]}"', q[len("label_values("):-1].rsplit(",", 1)[0]))
    return out


def grafana(expr: str) -> str:
    for k, v in GRAFANA_VARS.items():
        expr = expr.replace(k, v)
    assert "$" not in expr, f"a Grafana variable the test does not know: {expr}"
    return expr


def signal(expr: str) -> str:
    """An alert's expression without what makes it fire: absent(X) -> X,
    then the side of the last comparison at the top level that is not the
    threshold (the left one, as the chart writes them)."""
    e = " ".join(expr.split())
    if e.startswith("absent(") and e.endswith(")"):
        e = e[len("absent("):-1]
    depth, quote, cut, i = 0, None, None, 0
    while i < len(e):
        c = e[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = None
        elif c in "\"'":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0:
            op = next((o for o in COMPARISONS if e.startswith(o, i)), None)
            if op:
                cut = i
                i += len(op)
                continue
        i += 1
    assert cut is not None, f"no threshold in {expr!r}"
    return e[:cut].strip()


def test_signal_strips_thresholds_only():
    assert signal('absent(up{job="g"} == 1)') == 'up{job="g"}'
    assert signal('min(x{a=~"b|c"}) - time() < 14 * 86400') == 'min(x{a=~"b|c"}) - time()'
    assert signal('sum(rate(a{r="e"}[5m])) / sum(rate(a[5m]))\n> 0.05') == \
        'sum(rate(a{r="e"}[5m])) / sum(rate(a[5m]))'
    assert signal('max(x{l="a>b"} / y) > 0.8') == 'max(x{l="a>b"} / y)'


# ---------------------------------------------------------------------------
# Prometheus


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prometheus:
    def __init__(self, binary: str, workdir: Path, gate, rules: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(rules)],
            "scrape_configs": [{
                "job_name": RELEASE, "scheme": "https", "metrics_path": "/metrics",
                "tls_config": {"ca_file": str(gate.certs.ca)},
                "static_configs": [{"targets": [f"127.0.0.1:{gate.port}"]}],
            }],
        }
        (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.log = workdir / "prometheus.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [binary, f"--config.file={workdir / 'prometheus.yml'}",
                 f"--storage.tsdb.path={workdir / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def api(self, path: str, **params) -> dict:
        url = f"{self.url}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=30) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> tuple[list, str | None]:
        """The result vector, or the error Prometheus gave."""
        try:
            return self.api("query", query=expr)["result"], None
        except urllib.error.HTTPError as e:
            return [], e.read().decode(errors="replace")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def log_tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])


@pytest.fixture(scope="module")
def helm_bin() -> str:
    out = subprocess.run([str(ROOT / "tests/e2e/build-tools.sh"), "--quiet"],
                         capture_output=True, text=True, check=True, timeout=3600).stdout
    return str(Path(dict(line.split("=", 1) for line in out.splitlines())["HELM_BIN_DIR"])
               / "helm")


@pytest.fixture(scope="module")
def shipped(helm_bin) -> tuple[dict, dict]:
    """(the dashboard, the PrometheusRule spec) as `helm template` renders them."""
    docs = rendered(helm_bin)
    cms = [d for d in docs if d["kind"] == "ConfigMap" and
           d["metadata"]["labels"].get("grafana_dashboard") == "1"]
    rules = [d for d in docs if d["kind"] == "PrometheusRule"]
    assert len(cms) == 1 and len(rules) == 1, [d["kind"] for d in docs]
    return json.loads(cms[0]["data"]["gpugate.json"]), rules[0]["spec"]


def test_promtool_accepts_the_rules(shipped, tmp_path):
    promtool = shutil.which("promtool")
    if not promtool:
        pytest.skip("promtool is not installed (Debian package prometheus)")
    f = tmp_path / "rules.yaml"
    f.write_text(yaml.safe_dump(shipped[1]))
    p = subprocess.run([promtool, "check", "rules", str(f)], capture_output=True, text=True,
                       timeout=60)
    n = sum(len(g["rules"]) for g in shipped[1]["groups"])
    assert p.returncode == 0 and f"SUCCESS: {n} rules found" in p.stdout, p.stdout + p.stderr


def prometheus_rule_crd() -> Path:
    """prometheus-operator's PrometheusRule CRD, from the Go module
    tests/e2e/tools/prometheus-operator pins (build-tools.sh downloads it
    for the ServiceMonitor CRD; this reads the module where it is)."""
    env = {**os.environ, "GOWORK": "off", "GOFLAGS": "-mod=readonly"}
    p = subprocess.run([os.environ.get("GO", "go"), "mod", "download", "-json",
                        "github.com/prometheus-operator/prometheus-operator"],
                       cwd=HERE / "tools" / "prometheus-operator", env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    crd = (Path(json.loads(p.stdout)["Dir"]) / "example" / "prometheus-operator-crd" /
           "monitoring.coreos.com_prometheusrules.yaml")
    assert crd.is_file(), crd
    return crd


def test_prometheus_rule_is_accepted_by_its_crd(stack, shipped, helm_bin):
    """The rendered PrometheusRule against prometheus-operator's CRD,
    strict validation (an unknown field is refused)."""
    k = stack.kubectl
    crd = prometheus_rule_crd()
    docs = [d for d in rendered(helm_bin) if d["kind"] == "PrometheusRule"]
    k("apply", "--server-side", "-f", str(crd)).check()
    try:
        k("wait", "--for=condition=Established", "--timeout=60s",
          "crd/prometheusrules.monitoring.coreos.com").check()
        rule = dict(docs[0], metadata=dict(docs[0]["metadata"], namespace="default"))
        r = k("apply", "--dry-run=server", "--validate=strict", "-f", "-",
              input=json.dumps(rule))
        assert (r.rc, r.out, r.err) == (
            0, "prometheusrule.monitoring.coreos.com/gpugate created (server dry run)\n",
            ""), r
        rule["spec"]["groups"][0]["rules"][0]["expresion"] = "up"
        r = k("apply", "--dry-run=server", "--validate=strict", "-f", "-",
              input=json.dumps(rule))
        assert r.rc == 1 and 'unknown field "spec.groups[0].rules[0].expresion"' in r.err, r
    finally:
        k("delete", "-f", str(crd), "--ignore-not-found", "--wait=false")


def test_every_panel_and_alert_returns_series(stack, kubectl, example, fleet, clean, files,
                                              shipped, tmp_path):
    binary = shutil.which("prometheus")
    assert binary, "prometheus is not installed: scripts/deps.sh installs it (Debian package)"
    dashboard, spec = shipped
    rules_file = tmp_path / "rules.yaml"
    rules_file.write_text(yaml.safe_dump(spec))
    clean("research")
    prom = Prometheus(binary, tmp_path, example, rules_file)
    try:
        def scraped():
            if prom.proc.poll() is not None:
                raise AssertionError(f"prometheus exited:\n{prom.log_tail()}")
            try:
                r, _ = prom.query(f'up{{job="{RELEASE}"}} == 1')
            except OSError:
                return False
            return bool(r)
        wait_until("prometheus scraping gpugate", scraped, 60)
        # Admissions between scrapes, so that rates are not all 0: one pod
        # allowed that runs on the fleet (quota used, the pool, GPU
        # seconds), one denied (gpugate_denials_total).
        created(kubectl.apply_file(files / "run.yaml", pod("observed", "research",
                                                           "train-large")), "observed")
        wait_phase(kubectl, "research", "observed", "Running")
        r = kubectl.apply_file(files / "bad.yaml", pod("refused", "research", "no-such-class"))
        assert r.rc == 1 and "denied the request" in r.err, r
        wait_until("the denial and a running pod's GPU-seconds in Prometheus",
                   lambda: prom.query("gpugate_denials_total")[0] and
                   prom.query("rate(gpugate_gpu_seconds_total[1m]) > 0")[0], 60)

        empty = []
        queries = [(w, grafana(q)) for w, q in dashboard_queries(dashboard)]
        queries += [(f'alert {r["alert"]}', signal(r["expr"]))
                    for g in spec["groups"] for r in g["rules"] if "alert" in r]
        queries += [(f'record {r["record"]}', r["expr"])
                    for g in spec["groups"] for r in g["rules"] if "record" in r]
        assert len(queries) > 40, queries
        for where, q in queries:
            result, error = prom.query(q)
            if not result:
                empty.append(f"{where}: {q}" + (f" (error: {error})" if error else ""))
        assert not empty, "queries that returned no series:\n" + "\n".join(empty)

        # Prometheus evaluates every rule of the file, without an error.
        def evaluated():
            groups = prom.api("rules")["groups"]
            rules = [r for g in groups for r in g["rules"]]
            return rules if rules and all(r.get("lastEvaluation", "").startswith("2")
                                          and r["health"] != "unknown" for r in rules) \
                else None
        rules = wait_until("every rule evaluated", evaluated, 30)
        assert len(rules) == sum(len(g["rules"]) for g in spec["groups"])
        bad = [(r["name"], r["health"], r.get("lastError")) for r in rules if r["health"] != "ok"]
        assert not bad, bad
        # A gpugate that answers and is ready is neither down nor unready.
        firing = {a["labels"]["alertname"] for a in prom.api("alerts")["alerts"]
                  if a["state"] == "firing"}
        assert not firing & {"GpugateDown", "GpugateNoReplicaReady"}, firing
    finally:
        prom.stop()
        kubectl("delete", "pod", "observed", "-n", "research", "--wait=false")
