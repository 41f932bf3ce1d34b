"""manifests/make-certs.sh, the documented way to install gpugate and to put
the caBundle in, run for real: the real kubectl (through a wrapper that logs
each call) against the e2e kube-apiserver, build/gpugate for the
certificates, a --pki directory in a temporary directory, and --no-wait (no
nodes: the Deployment never becomes ready).  Certificates are read with the
openssl command line.

Every command of the script: install (the Secret's pair, its SANs and chain,
the caBundle of every webhook equal to `bundle` and to ca.crt, the safe
order), rotate (a new serving certificate, the same caBundle), ca-rotate
(caBundle old + new CA, a certificate from the new CA), ca-finish (new CA
only) and uninstall (the webhook configurations first).

The configurations make-certs.sh registers are named gpugate, not
gpugate-example/gpugate-quota like the harness's, with failurePolicy Fail
towards a Service without endpoints: while they exist, Pods and Jobs cannot
be created in any tenant namespace.  The `restore` fixture therefore always
deletes them and what the base created, and gives the harness back its
namespace gpugate (which `uninstall` deletes) exactly as the stack made it,
then waits until the harness's webhooks answer again.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
from pathlib import Path

import pytest

from gpugate_e2e import (ROOT, gpugate_bin, namespace_obj, pod, wait_service_accounts,
                         wait_until, wait_webhooks)

MAKE_CERTS = ROOT / "manifests" / "make-certs.sh"
NS = "gpugate"
SECRET = "gpugate-tls"
CONFIGS = ("mutatingwebhookconfiguration", "validatingwebhookconfiguration")
SANS = {"DNS:gpugate.gpugate.svc", "DNS:gpugate.gpugate.svc.cluster.local"}
# every webhook the base declares gets the caBundle
WEBHOOKS = {"mutatingwebhookconfiguration": ["mutate.gpugate.io",
                                             "mutate-templates.gpugate.io"],
            "validatingwebhookconfiguration": ["validate.gpugate.io",
                                               "validate-templates.gpugate.io",
                                               "policy.gpugate.io", "release.gpugate.io"]}


# ---------------------------------------------------------------------------
# certificates, through the openssl command line


def openssl(*args: str, input: str) -> subprocess.CompletedProcess:
    return subprocess.run(["openssl", *args], input=input, capture_output=True, text=True,
                          timeout=30)


def x509(pem: str, *args: str) -> str:
    p = openssl("x509", "-noout", *args, input=pem)
    assert p.returncode == 0, p.stderr
    return p.stdout


def serial(pem: str) -> str:
    return x509(pem, "-serial").strip()


def sans(pem: str) -> set[str]:
    out = x509(pem, "-ext", "subjectAltName")
    return {s.strip() for s in out.splitlines()[1].split(",")}


def chains_to(cert: str, ca_file: Path) -> bool:
    """openssl verify with ca_file as the only trust anchor."""
    p = openssl("verify", "-CAfile", str(ca_file), input=cert)
    return p.returncode == 0 and p.stdout.strip() == "stdin: OK"


def public_key(pem: str, of_private_key: bool = False) -> str:
    if of_private_key:
        p = openssl("pkey", "-pubout", input=pem)
        assert p.returncode == 0, p.stderr
        return p.stdout
    return x509(pem, "-pubkey")


def pem_blocks(text: str) -> list[str]:
    return re.findall(r"-----BEGIN CERTIFICATE-----\n.*?-----END CERTIFICATE-----\n",
                      text, re.S)


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


# ---------------------------------------------------------------------------
# the script


class MakeCerts:
    """make-certs.sh COMMAND --pki DIR with the e2e cluster's kubectl behind a
    wrapper that appends each call's arguments to a log (one line each)."""

    def __init__(self, stack, dir: Path):
        self.k = stack.kubectl
        self.pki = dir / "pki"
        self.calls_log = dir / "kubectl-calls.log"
        self.kubectl = dir / "kubectl"
        self.kubectl.write_text("#!/bin/sh\nprintf '%%s\\n' \"$*\" >> '%s'\nexec '%s' \"$@\"\n"
                                % (self.calls_log, self.k.binary))
        self.kubectl.chmod(0o755)
        self.env = dict(self.k.env, KUBECONFIG=self.k.kubeconfig)

    def __call__(self, command: str, *extra: str) -> subprocess.CompletedProcess:
        self.calls_log.write_text("")
        p = subprocess.run([str(MAKE_CERTS), command, "--pki", str(self.pki), "--kubectl",
                            str(self.kubectl), "--gpugate", str(gpugate_bin()), *extra],
                           capture_output=True, text=True, env=self.env, cwd=ROOT,
                           timeout=300)
        assert p.returncode == 0, (f"make-certs.sh {command} exited {p.returncode}\n"
                                   f"stderr:\n{p.stderr}")
        return p

    def calls(self) -> list[str]:
        """The kubectl calls of the last command, in order."""
        return self.calls_log.read_text().splitlines()

    def file(self, name: str) -> str:
        return (self.pki / name).read_text()

    def bundle(self) -> str:
        return self("bundle").stdout.rstrip("\n")

    def secret(self) -> dict[str, str]:
        s = self.k.get("secret", SECRET, NS)
        assert s["type"] == "kubernetes.io/tls", s["type"]
        return {k: base64.b64decode(v).decode() for k, v in s["data"].items()}

    def ca_bundles(self) -> dict[str, str]:
        """{webhook name: caBundle} over both configurations."""
        out = {}
        for kind in CONFIGS:
            cfg = self.k.get(kind, "gpugate")
            assert [w["name"] for w in cfg["webhooks"]] == WEBHOOKS[kind], cfg["webhooks"]
            for w in cfg["webhooks"]:
                out[w["name"]] = w["clientConfig"].get("caBundle")
        return out


def first(calls: list[str], pattern: str) -> int:
    """Index of the first kubectl call matching pattern."""
    for i, c in enumerate(calls):
        if re.search(pattern, c):
            return i
    raise AssertionError(f"no kubectl call matches {pattern!r} in:\n" + "\n".join(calls))


def configs_exist(k) -> list[bool]:
    return [k("get", kind, "gpugate").rc == 0 for kind in CONFIGS]


@pytest.fixture
def restore(stack):
    """Whatever happens in the test: no configuration named gpugate, nothing
    of the base left, the harness's namespace gpugate as the stack created
    it, and the harness's webhooks called again."""
    k = stack.kubectl
    assert configs_exist(k) == [False, False], "webhook configurations gpugate already exist"
    yield
    k("delete", ",".join(CONFIGS), "gpugate", "--ignore-not-found").check()
    k("delete", "-k", "manifests", "--ignore-not-found", "--wait=true", timeout=180).check()
    wait_until("namespace gpugate deleted", lambda: k("get", "namespace", NS).rc != 0, 120)
    k.apply(namespace_obj(NS, "example")).check()
    wait_service_accounts(k, [NS])
    for name in stack.gates:
        wait_webhooks(k, name)


def test_make_certs_install_rotate_ca_rotate_finish_uninstall(stack, restore, tmp_path):
    k = stack.kubectl
    mc = MakeCerts(stack, tmp_path)

    # -- install: Secret, the rest, then the webhooks with caBundle ---------
    p = mc("install", "--no-wait")
    calls = mc.calls()
    secret_at = first(calls, r"^(create|replace) -f \S+/secret\.yaml$")
    rest_at = first(calls, r"^apply -k \S+ -l app\.kubernetes\.io/component!=admission-webhook$")
    hooks_at = first(calls, r"^create --raw /apis/admissionregistration\.k8s\.io/v1/"
                            r"mutatingwebhookconfigurations ")
    assert secret_at < rest_at < hooks_at, calls
    assert "--no-wait: no smoke test" in p.stderr, p.stderr

    ca = mc.file("ca.crt")
    assert len(pem_blocks(ca)) == 1, ca
    sec = mc.secret()
    assert set(sec) == {"tls.crt", "tls.key", "ca.crt"}, set(sec)
    cert = sec["tls.crt"]
    assert sans(cert) == SANS
    assert chains_to(cert, mc.pki / "ca.crt")
    assert public_key(cert) == public_key(sec["tls.key"], of_private_key=True)
    assert sec["ca.crt"] == ca
    bundle = mc.bundle()
    assert bundle == b64(ca)
    # the base's final `kubectl apply -k` inside install kept the caBundle
    assert mc.ca_bundles() == {w: bundle for ws in WEBHOOKS.values() for w in ws}

    # registered for real: tenant namespaces now go through the Service,
    # which has no endpoints (the reason for the `restore` fixture)
    probe = json.dumps(pod("make-certs-probe", "research", "train-small"))

    def refused():
        r = k("create", "--dry-run=server", "-f", "-", input=probe)
        return r.rc != 0 and ('failed calling webhook "mutate.gpugate.io"' in r.err and
                              "https://gpugate.gpugate.svc:443/mutate" in r.err)
    wait_until("the apiserver to call the Service gpugate", refused, 30, 0.5)

    # -- rotate: a new serving certificate from the same CA ------------------
    mc("rotate")
    sec2 = mc.secret()
    assert serial(sec2["tls.crt"]) != serial(cert)
    assert sans(sec2["tls.crt"]) == SANS
    assert chains_to(sec2["tls.crt"], mc.pki / "ca.crt")
    assert public_key(sec2["tls.crt"]) == public_key(sec2["tls.key"], of_private_key=True)
    assert mc.file("ca.crt") == ca and sec2["ca.crt"] == ca
    assert mc.bundle() == bundle
    assert set(mc.ca_bundles().values()) == {bundle}

    # -- ca-rotate: trust old + new, then serve from the new CA --------------
    old_ca_file = tmp_path / "old-ca.crt"
    old_ca_file.write_text(ca)
    mc("ca-rotate")
    new_ca = mc.file("ca.crt")
    assert new_ca != ca and mc.file("ca-previous.crt") == ca
    both = mc.bundle()
    assert pem_blocks(base64.b64decode(both).decode()) == [ca, new_ca]
    assert set(mc.ca_bundles().values()) == {both}
    sec3 = mc.secret()
    assert sec3["ca.crt"] == ca + new_ca
    assert chains_to(sec3["tls.crt"], mc.pki / "ca.crt")
    assert not chains_to(sec3["tls.crt"], old_ca_file)
    assert sans(sec3["tls.crt"]) == SANS
    assert public_key(sec3["tls.crt"]) == public_key(sec3["tls.key"], of_private_key=True)

    # -- ca-finish: the new CA alone -----------------------------------------
    mc("ca-finish")
    assert mc.bundle() == b64(new_ca)
    assert set(mc.ca_bundles().values()) == {b64(new_ca)}
    sec4 = mc.secret()
    assert sec4["ca.crt"] == new_ca
    assert sec4["tls.crt"] == sec3["tls.crt"]
    assert not (mc.pki / "ca-previous.crt").exists()
    retired = sorted(mc.pki.glob("ca-retired-*.crt"))
    assert [f.read_text() for f in retired] == [ca], retired

    # -- uninstall: the webhook configurations first --------------------------
    mc("uninstall")
    calls = mc.calls()
    mutating_at = first(calls, r"^delete mutatingwebhookconfiguration gpugate\b")
    validating_at = first(calls, r"^delete validatingwebhookconfiguration gpugate\b")
    rest_at = first(calls, r"^delete -k ")
    assert max(mutating_at, validating_at) < rest_at, calls
    assert configs_exist(k) == [False, False]
    assert k("get", "clusterrole", "gpugate").rc != 0
    assert k("get", "namespace", NS).rc != 0
    assert (mc.pki / "ca.key").exists()  # the PKI directory is kept

    # -- ca-finish after an uninstall mid-rotation registers nothing --------
    (mc.pki / "ca-previous.crt").write_text(ca)
    p = mc("ca-finish")
    assert "no webhook configurations (uninstalled?)" in p.stderr, p.stderr
    assert configs_exist(k) == [False, False]
    assert not (mc.pki / "ca-previous.crt").exists()
