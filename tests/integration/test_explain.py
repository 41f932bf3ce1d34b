"""`gpugate explain` (SPEC section 7): the real binary on manifests, offline
or against the fake API's usage.

    gpugate explain --policy FILE [-n NS] [-o text|json|yaml]
                    [--kubeconfig FILE [--timeout SECONDS]] PATH...
    exit 0 admitted, 1 denied, 2 bad input (and 3 when gpugate itself fails,
    docs/users.md); 2 beats 1, 3 beats both

Several documents, files, directories and standard input; Lists unwrapped;
objects of kinds gpugate does not judge listed as such; a summary line.

Admitted manifests: the decision, the success line kubectl would print, the
JSON Patch (each printed operation re-read and applied with the strict
applier to the manifest must give the printed result) and the mutations in
the result.  Denied: the gpugate denial text, verbatim.  Bad input: the
error on stderr, nothing on stdout.
"""

from __future__ import annotations

import json
import resource
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import EXAMPLE_POLICY, ROOT, SLOW
from jsonpatch_strict import apply
from test_watch import kube  # noqa: F401  (the fixture)
from objects import (CLASS, DECISION, FLAVOR, GANG, GPU_TOLERATION, H100_SELECTOR,
                     PREEMPTIBLE, PRE_STOP, RESEARCH_CLASSES, TENANT, container, job,
                     pod)

POD_YAML = ROOT / "examples" / "pod-train-small.yaml"
# POD_YAML as JSON (the tests have no YAML reader; test_yaml_pod_... checks
# that explain reads both the same).
POD = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": "experiment-42", "namespace": "research",
                    "labels": {CLASS: "train-small", "gpugate.io/gpus": "2"}},
       "spec": {"containers": [{
           "name": "trainer", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
           "command": ["python", "train.py", "--resume-from", "/checkpoint"]}]}}
JOB_TOO_BIG = ROOT / "examples" / "job-too-big.yaml"

ADMITTED, DENIED, BAD_INPUT, INTERNAL = 0, 1, 2, 3
PAD = " " * 11  # explain indents continuation lines under the phase column


def summary(admitted=0, denied=0, warned=0, not_judged=0, errors=0) -> str:
    return (f"summary: {admitted} admitted, {denied} denied, {warned} warned, "
            f"{not_judged} not judged, {errors} error{'' if errors == 1 else 's'}")


class Explained:
    def __init__(self, p: subprocess.CompletedProcess):
        self.rc = p.returncode
        self.out = p.stdout
        self.err = p.stderr
        self.lines = p.stdout.splitlines()

    def patch(self) -> list[dict]:
        """The operations explain printed ("  add     /path VALUE")."""
        ops, inside = [], False
        for line in self.lines:
            if line.startswith("patch ("):
                inside = True
                continue
            if inside and not line:
                break
            if inside:
                op, rest = line.split(None, 1)
                path, _, value = rest.partition(" ")
                d = {"op": op, "path": path}
                if value:
                    d["value"] = json.loads(value)
                ops.append(d)
        return ops

    def result(self) -> dict:
        text = self.out.split("\nresult:\n", 1)
        assert len(text) == 2, self.out
        return json.JSONDecoder().raw_decode(text[1])[0]

    def __repr__(self) -> str:
        return f"<explain rc={self.rc}\nstdout:\n{self.out}\nstderr:\n{self.err}>"


def explain(binary: Path, *args: str, stdin: str | None = None,
            limit_data: int | None = None) -> Explained:
    def preexec() -> None:
        if limit_data is not None:
            resource.setrlimit(resource.RLIMIT_DATA, (limit_data, limit_data))

    p = subprocess.run([str(binary), "explain", *args], capture_output=True, text=True,
                       input=stdin, timeout=60 * SLOW, cwd=ROOT,
                       preexec_fn=preexec if limit_data is not None else None)
    return Explained(p)


def admitted(e: Explained) -> None:
    assert e.rc == ADMITTED, e
    assert e.err == "", e
    assert "mutate     admitted" in e.lines, e
    assert "validate   admitted" in e.lines, e


# ---------------------------------------------------------------------------
# admitted


def test_yaml_pod_is_admitted_with_the_mutations(gpugate_bin, tmp_path):
    e = explain(gpugate_bin, "--policy", str(EXAMPLE_POLICY), str(POD_YAML.relative_to(ROOT)))
    admitted(e)
    assert e.lines[-2:] == ["", summary(admitted=1)], e
    head = e.lines[:8]
    assert head == [
        f"== {POD_YAML.relative_to(ROOT)}:4 Pod research/experiment-42",  # after the comments
        "namespace  research -> tenant research",
        "class      train-small (1 to 4 H100 for experiments; preemptible, "
        "checkpoints on SIGTERM)",
        "flavor     h100-80gb: nvidia.com/gpu, exclusive sharing, nodeSelector "
        "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3",
        "count      2 per pod x 1 pod = 2 nvidia.com/gpu",
        "quota      nominal (nominal 32, at most 40 with borrowing; judged against "
        "empty usage)",
        "preempt    yes: checkpoint hooks injected",
        "mutate     admitted",
    ], e
    # The success line kubectl prints (SPEC section 4), from /validate.
    i = e.lines.index("validate   admitted")
    assert e.lines[i + 1] == (PAD + "gpugate: train-small -> 2 x h100-80gb for "
                              "tenant research (2/32 in use)"), e
    assert "patch (12 operations, RFC 6902):" in e.lines, e

    # The printed patch, applied strictly to the manifest, is the printed
    # result: what explain shows is one consistent story.
    ops = e.patch()
    assert len(ops) == 12, ops
    result = e.result()
    assert apply(POD, ops) == result
    # (and POD is what the YAML says: the same manifest as JSON, same output)
    f = tmp_path / "pod.json"
    f.write_text(json.dumps(POD))
    assert explain(gpugate_bin, "--policy", str(EXAMPLE_POLICY), str(f)).lines[1:] == e.lines[1:]

    labels = result["metadata"]["labels"]
    assert labels[TENANT] == "research" and labels[FLAVOR] == "h100-80gb"
    assert labels[PREEMPTIBLE] == "true" and labels[CLASS] == "train-small"
    assert result["metadata"]["annotations"][DECISION] == (
        "train-small: 2 x h100-80gb for tenant research; 2/32 in use")
    ct = result["spec"]["containers"][0]
    assert ct["resources"] == {"limits": {"nvidia.com/gpu": "2"},
                               "requests": {"cpu": "12", "memory": "120Gi"}}
    assert ct["lifecycle"]["preStop"] == {"exec": {"command": PRE_STOP}}
    assert {"name": "GPUGATE_PREEMPTIBLE", "value": "1"} in ct["env"]
    assert result["spec"]["nodeSelector"] == H100_SELECTOR
    assert result["spec"]["tolerations"] == [GPU_TOLERATION]
    assert result["spec"]["terminationGracePeriodSeconds"] == 600


def _train_job() -> dict:
    return job("llm", "research", labels={CLASS: "train-large"}, parallelism=2,
               containers=[container("trainer")])


@pytest.mark.parametrize("via_stdin", [False, True], ids=["file", "stdin"])
def test_json_job_is_admitted_with_the_mutations(gpugate_bin, tmp_path, via_stdin):
    obj = _train_job()
    if via_stdin:
        e = explain(gpugate_bin, "--policy", str(EXAMPLE_POLICY), "-", stdin=json.dumps(obj))
        assert e.lines[0] == "== -:1 Job research/llm", e
    else:
        f = tmp_path / "job.json"
        f.write_text(json.dumps(obj, indent=1))
        e = explain(gpugate_bin, "--policy", str(EXAMPLE_POLICY), str(f))
    admitted(e)
    assert "count      8 per pod x 2 pods = 16 nvidia.com/gpu" in e.lines, e
    assert "preempt    no" in e.lines, e
    i = e.lines.index("validate   admitted")
    assert e.lines[i + 1] == (PAD + "gpugate: train-large -> 2 pods x 8 x h100-80gb "
                              "for tenant research (16/32 in use)"), e

    result = e.result()
    assert apply(obj, e.patch()) == result
    meta, tmpl = result["metadata"], result["spec"]["template"]
    gang = meta["labels"][GANG]
    assert meta["labels"][TENANT] == "research"
    assert meta["annotations"][DECISION] == (
        "train-large: 2 pods x 8 x h100-80gb for tenant research; 16/32 in use")
    assert tmpl["metadata"]["labels"] == {TENANT: "research", FLAVOR: "h100-80gb",
                                          GANG: gang, CLASS: "train-large"}
    tspec = tmpl["spec"]
    assert tspec["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "8"}
    assert tspec["priorityClassName"] == "training"
    assert tspec["affinity"] == {"podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {GANG: gang}},
            "topologyKey": "nvidia.com/gpu.clique"}]}}


@pytest.mark.parametrize("flag", [(), ("--namespace", "research-nlp"), ("-n", "research-nlp")])
def test_namespace_of_an_object_that_names_none(gpugate_bin, tmp_path, flag):
    # As kubectl: -n, else "default".
    obj = _train_job()
    del obj["metadata"]["namespace"]
    f = tmp_path / "job.json"
    f.write_text(json.dumps(obj))
    e = explain(gpugate_bin, "--policy", str(EXAMPLE_POLICY), *flag, str(f))
    ns = flag[1] if flag else "default"
    assert e.lines[0] == f"== {f}:1 Job {ns}/llm", e
    if flag:
        admitted(e)
        assert e.lines[1] == "namespace  research-nlp -> tenant research", e
    else:
        assert e.rc == DENIED, e
        assert e.lines[1] == "namespace  default -> tenant (none)", e


def test_namespace_option_against_the_manifests(gpugate_bin, tmp_path):
    # kubectl refuses an object of another namespace than -n, in its words.
    f = tmp_path / "job.json"
    f.write_text(json.dumps(_train_job()))
    e = explain(gpugate_bin, "--policy", str(EXAMPLE_POLICY), "--namespace",
                "research-nlp", str(f))
    assert e.rc == BAD_INPUT, e
    assert e.out == summary(errors=1) + "\n", e
    assert e.err == (f'{f}:1: the namespace from the provided object "research" does not '
                     f'match the namespace "research-nlp". You must pass '
                     f"'--namespace=research' to perform this operation.\n"), e
    admitted(explain(gpugate_bin, "--policy", str(EXAMPLE_POLICY), "-n", "research", str(f)))


def test_plain_pod_needs_no_patch(gpugate_bin, tmp_path):
    f = tmp_path / "web.yaml"
    f.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: web}\n"
                 "spec:\n  containers: [{name: nginx, image: nginx}]\n")
    e = explain(gpugate_bin, "--policy", str(EXAMPLE_POLICY), str(f))
    admitted(e)
    assert e.lines[:2] == [f"== {f}:1 Pod web/web", "namespace  web -> tenant (none)"], e
    assert "patch: none (nothing to change)" in e.lines, e


def test_explain_patch_is_the_servers(gpugate_bin, client):
    """explain and the server run the same pipeline (docs/internals.md)."""
    e = explain(gpugate_bin, "--policy", str(EXAMPLE_POLICY), str(POD_YAML))
    admitted(e)
    a = client.admit("mutate", POD)
    assert a.allowed and a.patch == e.patch(), (a, e)


# ---------------------------------------------------------------------------
# denied


def test_denied_job_prints_the_denial(gpugate_bin):
    e = explain(gpugate_bin, "--policy", str(EXAMPLE_POLICY), str(JOB_TOO_BIG))
    assert e.rc == DENIED, e
    assert e.err == "", e
    i = e.lines.index("mutate     denied (rule quota)")
    assert e.lines[i + 1] == (
        PAD + 'gpugate: job can never be admitted: needs 64 h100-80gb (parallelism 8 x 8), '
        'tenant "research" may hold at most 40 (nominal 32 + 8 that cohort "lab" can lend)'), e
    assert e.lines[i + 2:] == ["", summary(denied=1)], "nothing after a denial: no patch, no result"


def test_denied_unknown_class(gpugate_bin, tmp_path):
    f = tmp_path / "pod.json"
    f.write_text(json.dumps({"apiVersion": "v1", "kind": "Pod",
                             "metadata": {"name": "p", "namespace": "research",
                                          "labels": {CLASS: "train-huge"}},
                             "spec": {"containers": [container()]}}))
    e = explain(gpugate_bin, "--policy", str(EXAMPLE_POLICY), str(f))
    assert e.rc == DENIED, e
    assert e.lines[-4:-2] == [
        "mutate     denied (rule class-unknown)",
        PAD + f'gpugate: unknown GPU class "train-huge"; tenant "research" may use: '
              f'{RESEARCH_CLASSES}',
    ], e


PRIVILEGED = ('gpugate: container "main" is privileged; a privileged GPU container '
              "bypasses the device plugin's isolation: remove securityContext.privileged")


def _privileged(namespace: str, cls: str) -> dict:
    return pod("priv", namespace, cls=cls, gpus="1",
               containers=[container(securityContext={"privileged": True})])


def test_security_denial_claims_no_count_nor_preemption(gpugate_bin, tmp_path):
    # Issue 18: a security denial printed "x 0 pods = 0" and "preempt no"
    # for a preemptible class: the rule denies before the quota claim and
    # the checkpoint plan are made, so explain says nothing of them.
    f = tmp_path / "priv.json"
    f.write_text(json.dumps(_privileged("research", "train-small")))
    e = explain(gpugate_bin, "--policy", str(EXAMPLE_POLICY), str(f))
    assert e.rc == DENIED, e
    i = e.lines.index("mutate     denied (rule security)")
    assert e.lines[i - 4:i + 2] == [
        "namespace  research -> tenant research",
        "class      train-small (1 to 4 H100 for experiments; preemptible, "
        "checkpoints on SIGTERM)",
        "flavor     h100-80gb: nvidia.com/gpu, exclusive sharing, nodeSelector "
        "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3",
        "count      1 per pod",
        "mutate     denied (rule security)",
        PAD + PRIVILEGED,
    ], e


def test_warn_mode_says_the_violation_once(gpugate_bin, tmp_path):
    # Issue 18: in warn mode the violation was printed under the phase and
    # again as the warning kubectl prints (and once more at /mutate).
    f = tmp_path / "priv.json"
    f.write_text(json.dumps(_privileged("sandbox-1", "dev-shared")))
    e = explain(gpugate_bin, "--policy", str(EXAMPLE_POLICY), str(f))
    assert e.rc == ADMITTED, e
    shown = e.out.split("\nresult:\n")[0]
    assert shown.count("is privileged") == 2, e  # the warning and the annotation
    assert "mutate     admitted in warn mode despite rule security" in e.lines, e
    i = e.lines.index("validate   admitted in warn mode despite rule security")
    assert e.lines[i + 1:i + 3] == [
        PAD + "warning: " + PRIVILEGED,
        PAD + "gpugate: dev-shared -> 1 x l4-shared for tenant sandbox (1/24 in use)",
    ], e
    assert json.dumps(PRIVILEGED[len("gpugate: "):])[1:-1] in e.out  # the patch's annotation


# ---------------------------------------------------------------------------
# bad input: exit 2, the error on stderr, the summary alone on stdout


def bad_input(e: Explained, stderr: str, out: str = summary(errors=1) + "\n") -> None:
    assert e.rc == BAD_INPUT, e
    assert e.out == out, e
    assert e.err == stderr, f"\n got: {e.err!r}\nwant: {stderr!r}"


def test_missing_file(gpugate_bin, tmp_path):
    f = tmp_path / "nope.yaml"
    bad_input(explain(gpugate_bin, "--policy", str(EXAMPLE_POLICY), str(f)),
              f"{f}: cannot open: No such file or directory\n")


def test_unreadable_file(gpugate_bin, tmp_path):
    # A FIFO with nobody writing would block; a directory under a manifest
    # name is read as a file (its name says so) and cannot be read.
    d = tmp_path / "d.yaml"
    d.mkdir()
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "x.yaml").symlink_to(d)
    bad_input(explain(gpugate_bin, "--policy", str(EXAMPLE_POLICY), str(tmp_path / "dir")),
              f"{tmp_path}/dir: no *.yaml, *.yml or *.json file\n")


@pytest.mark.parametrize("text, error", [
    ("kind: Pod\nspec: [\n",
     ":2: did not find expected node content (while parsing a flow node)"),
    ('{"kind": "Pod",, }', ":1: did not find expected node content (while parsing a flow node)"),
    ("\x00\x01binary", ":1: NUL byte in input"),
    ("", ": no document"),
])
def test_not_yaml_or_json(gpugate_bin, tmp_path, text, error):
    f = tmp_path / "m.yaml"
    f.write_text(text)
    bad_input(explain(gpugate_bin, "--policy", str(EXAMPLE_POLICY), str(f)), f"{f}{error}\n")


@pytest.mark.parametrize("text, shown", [
    ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n", "ConfigMap c"),
    ("apiVersion: v1\nkind: Service\nmetadata: {name: s, namespace: web}\n", "Service web/s"),
    ("apiVersion: apps/v1\nkind: ControllerRevision\nmetadata: {name: d}\n",
     "ControllerRevision d"),
    ("apiVersion: v2\nkind: Pod\n", "Pod (no name)"),
    ("apiVersion: v1\nkind: Job\n", "Job (no name)"),
    ("apiVersion: v1\nkind: Secret\nmetadata: {generateName: s-}\n", "Secret s-*"),
])
def test_kinds_gpugate_does_not_judge(gpugate_bin, tmp_path, text, shown):
    # What the review decoder does not take (webhook/review.c) is listed and
    # does not fail the run.
    f = tmp_path / "m.yaml"
    f.write_text(text)
    e = explain(gpugate_bin, "--policy", str(EXAMPLE_POLICY), str(f))
    assert e.rc == ADMITTED and e.err == "", e
    assert e.lines == [f"== {f}:1 {shown}: not judged", "", summary(not_judged=1)], e


@pytest.mark.parametrize("text, line", [
    ("kind: Pod\n", 1),
    ("apiVersion: v1\n", 1),
    ("apiVersion: v1\nkind: ''\n", 1),
    ("apiVersion: 1\nkind: Pod\n", 1),
    ("# a list, not a mapping\n- 1\n- 2\n", 2),
    ("hello\n", 1),
    ("42\n", 1),
    ("null\n", 1),
])
def test_not_an_object(gpugate_bin, tmp_path, text, line):
    f = tmp_path / "m.yaml"
    f.write_text(text)
    bad_input(explain(gpugate_bin, "--policy", str(EXAMPLE_POLICY), str(f)),
              f"{f}:{line}: not an object (a mapping with apiVersion and kind)\n")


@pytest.mark.parametrize("text, error", [
    ("apiVersion: v1\nkind: Pod\nmetadata: {name: x, namespace: research, labels: "
     "{gpugate.io/class: train-small}}\nspec:\n  containers: {a: 1}\n",
     "malformed Pod: spec.containers is not a list"),
    ("apiVersion: v1\nkind: Pod\nmetadata: []\nspec: {containers: [{name: a}]}\n",
     "malformed Pod: metadata is not an object"),
    ("apiVersion: v1\nkind: Pod\nmetadata: {name: x, labels: {n: 5}}\n"
     "spec: {containers: [{name: a}]}\n",
     'malformed Pod: metadata.labels["n"] is not a string'),
    ('{"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, '
     '"spec": {"template": {"spec": 3}}}',
     "malformed Job: spec.template.spec is not an object"),
    ('{"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": '
     '"research", "labels": {"gpugate.io/class": "train-large"}}, "spec": {"parallelism": 2, '
     '"template": {"spec": {"affinity": 5, "containers": [{"name": "m"}]}}}}',
     "cannot mutate the Job: affinity is not an object"),
])
def test_malformed_manifest(gpugate_bin, tmp_path, text, error):
    # The server answers these with HTTP 400 in the review (allowed: false);
    # explain must not report them as a denial (exit 1).
    f = tmp_path / "m.yaml"
    f.write_text(text)
    bad_input(explain(gpugate_bin, "--policy", str(EXAMPLE_POLICY), str(f)),
              f"{f}:1: {error}\n")


@pytest.mark.parametrize("args, error", [
    ([str(POD_YAML)], "--policy and a manifest are required"),
    (["--policy", str(EXAMPLE_POLICY)], "--policy and a manifest are required"),
    (["--policy", str(EXAMPLE_POLICY), "-o", "table", str(POD_YAML)],
     "-o wants text, json or yaml, not 'table'"),
    (["--policy", str(EXAMPLE_POLICY), "-n", "", str(POD_YAML)], "--namespace wants a name"),
    (["--policy", str(EXAMPLE_POLICY), "--timeout", "5", str(POD_YAML)],
     "--timeout goes with --kubeconfig"),
    (["--policy", str(EXAMPLE_POLICY), "--kubeconfig", "k", "--timeout", "0", str(POD_YAML)],
     "--timeout wants 1 to 3600 seconds"),
    (["--policy", str(EXAMPLE_POLICY), "--brief", "-o", "json", str(POD_YAML)],
     "--brief is a text form: it does not go with -o json"),
    (["--policy", str(EXAMPLE_POLICY), "--bogus", str(POD_YAML)], "unknown option '--bogus'"),
    (["--polcy", str(EXAMPLE_POLICY), str(POD_YAML)],
     "unknown option '--polcy' (did you mean \"--policy\"?)"),
])
def test_usage_errors(gpugate_bin, args, error):
    # One line and where the help is, not the help: exit 2 as bad input.
    e = explain(gpugate_bin, *args)
    assert e.rc == BAD_INPUT and e.out == "", e
    assert e.err == f"gpugate explain: {error}; run 'gpugate explain --help'\n", e


def test_broken_policy(gpugate_bin, tmp_path):
    pol = tmp_path / "policy.yaml"
    text = EXAMPLE_POLICY.read_text() + "bogus: 1\n"
    pol.write_text(text)
    line = text.count("\n")
    bad_input(explain(gpugate_bin, "--policy", str(pol), str(POD_YAML)),
              f'{pol}:{line}: unknown key "bogus" (expected one of: version, settings, '
              f'flavors, classes, tenants, checkpoint, health)\n', out="")


def test_missing_policy_file(gpugate_bin, tmp_path):
    pol = tmp_path / "none.yaml"
    e = explain(gpugate_bin, "--policy", str(pol), str(POD_YAML))
    assert e.rc == BAD_INPUT and e.out == "", e
    assert e.err.startswith(f"{pol}: "), e


# ---------------------------------------------------------------------------
# gpugate's own failures: exit 3, never 1 (a denial) or 2 (the user's fault)


def _sanitized(binary: Path) -> bool:
    return b"__asan_init" in binary.read_bytes() or b"__ubsan_handle" in binary.read_bytes()


def test_out_of_memory_is_not_a_denial(gpugate_bin, tmp_path):
    if _sanitized(gpugate_bin):
        pytest.skip("the sanitizers' shadow memory does not fit under RLIMIT_DATA")
    # 4 MiB of data: the policy loads, a 7 MiB manifest (under the 8 MiB
    # cap, read in one block of its size) does not.
    big = tmp_path / "big.yaml"
    big.write_text(POD_YAML.read_text() + ("#" + "x" * 1023 + "\n") * (7 << 10))
    e = explain(gpugate_bin, "--policy", str(EXAMPLE_POLICY), str(big),
                limit_data=4 << 20)
    assert e.rc == INTERNAL, e
    assert e.out == summary(errors=1) + "\n", e
    assert e.err == f"{big}: out of memory\n", e


def test_help_documents_the_exit_statuses(gpugate_bin):
    p = subprocess.run([str(gpugate_bin), "explain", "--help"], capture_output=True,
                       text=True, timeout=30 * SLOW)
    assert p.returncode == 0
    text = " ".join(p.stdout.split())
    assert ("Exit status: 0 every object judged is admitted (warnings allowed); 1 some "
            "object is denied; 2 bad input (an unreadable file, not YAML or JSON, not an "
            "object, a malformed manifest, a cluster that cannot be read, bad options, a "
            "missing or invalid policy), even when some other object is denied; 3 internal "
            "error (out of memory, or a gpugate bug: please report it), over all "
            "others.") in text, p.stdout


# ---------------------------------------------------------------------------
# CI: several documents, files, directories, stdin, Lists, -o json|yaml

CM = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {a: b}\n"
SMALL = ("apiVersion: v1\nkind: Pod\nmetadata:\n  name: small\n"
         "  labels: {gpugate.io/class: train-small, gpugate.io/gpus: \"1\"}\n"
         "spec:\n  containers: [{name: t, image: x}]\n")
TOO_BIG = JOB_TOO_BIG.read_text()
TOO_BIG_DENIAL = ('gpugate: job can never be admitted: needs 64 h100-80gb (parallelism 8 x 8), '
                  'tenant "research" may hold at most 40 (nominal 32 + 8 that cohort "lab" can lend)')


def headers(e: Explained) -> list[str]:
    return [line for line in e.lines if line.startswith("== ")]


def test_a_deployment_that_can_never_run_fails_the_pipeline(gpugate_bin):
    """#18: a Deployment's template is judged like a Job's; one whose
    replicas could never all run is denied, with the numbers, in CI."""
    text = ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: serve}\nspec:\n"
            "  replicas: 6\n  selector: {matchLabels: {app: serve}}\n  template:\n"
            "    metadata: {labels: {app: serve, gpugate.io/class: train-large}}\n"
            "    spec: {containers: [{name: main, image: vllm}]}\n")
    e = explain(gpugate_bin, "--policy", str(EXAMPLE_POLICY), "-n", "research", "-", stdin=text)
    assert e.rc == DENIED and e.err == "", e
    assert headers(e) == ["== -:1 Deployment research/serve"], e
    i = e.lines.index("mutate     denied (rule quota)")
    assert e.lines[i + 1] == PAD + (
        'gpugate: Deployment "serve" can never run all its replicas: needs 48 h100-80gb '
        '(6 replicas x 8), tenant "research" may hold at most 40 (nominal 32 + 8 that '
        'cohort "lab" can lend)'), e
    assert e.lines[-1] == summary(denied=1), e


def test_a_kustomize_build_on_stdin(gpugate_bin):
    # kustomize build | gpugate explain --policy P -n research -
    text = "---\n" + CM + "---\n" + TOO_BIG + "---\n" + SMALL + "---\n"
    e = explain(gpugate_bin, "--policy", str(EXAMPLE_POLICY), "-n", "research", "-", stdin=text)
    assert e.rc == DENIED and e.err == "", e
    small_at = 7 + TOO_BIG.count("\n") + 1
    assert headers(e) == ["== -:2 ConfigMap cfg: not judged",
                          "== -:9 Job research/too-big",  # after its comments
                          f"== -:{small_at} Pod research/small"], e
    assert e.lines[-1] == summary(admitted=1, denied=1, not_judged=1), e
    i = e.lines.index("mutate     denied (rule quota)")
    assert e.lines[i + 1:i + 3] == [PAD + TOO_BIG_DENIAL, ""], e
    assert "preempt    yes: checkpoint hooks injected" in e.lines, e


def test_a_generated_name(gpugate_bin, tmp_path):
    obj = _train_job()
    del obj["metadata"]["name"]
    obj["metadata"]["generateName"] = "llm-"
    f = tmp_path / "job.json"
    f.write_text(json.dumps(obj))
    e = explain(gpugate_bin, "--policy", str(EXAMPLE_POLICY), str(f))
    admitted(e)
    assert e.lines[0] == f"== {f}:1 Job research/llm-*", e
    (r,) = json.loads(explain(gpugate_bin, "--policy", str(EXAMPLE_POLICY), "-o", "json",
                              str(f)).out)["results"]
    assert (r["name"], r["generateName"], r["result"]) == (None, "llm-", "admitted"), r


def test_the_line_of_each_document(gpugate_bin, tmp_path):
    f = tmp_path / "all.yaml"
    f.write_text(CM + "---\n# the next one\n\n" + SMALL.replace("name: small", "name: a")
                 + "---\n" + SMALL.replace("name: small", "name: b"))
    e = explain(gpugate_bin, "--policy", str(EXAMPLE_POLICY), "-n", "research", str(f))
    assert e.rc == ADMITTED, e
    assert headers(e) == [f"== {f}:1 ConfigMap cfg: not judged",
                          f"== {f}:8 Pod research/a", f"== {f}:16 Pod research/b"], e
    assert e.lines[-1] == summary(admitted=2, not_judged=1), e


def test_files_and_a_directory_sorted_not_recursive(gpugate_bin, tmp_path):
    d = tmp_path / "k8s"
    (d / "sub").mkdir(parents=True)
    (d / "b.yml").write_text(SMALL.replace("name: small", "name: from-yml"))
    (d / "a.json").write_text(json.dumps(_train_job()))
    (d / "c.yaml").write_text(CM)
    (d / "notes.txt").write_text("not a manifest")
    (d / ".hidden.yaml").write_text("{")
    (d / "sub" / "deeper.yaml").write_text("{")
    one = tmp_path / "one.yaml"
    one.write_text(SMALL)
    e = explain(gpugate_bin, "--policy", str(EXAMPLE_POLICY), "-n", "research", str(one),
                str(d) + "/")
    assert e.rc == ADMITTED and e.err == "", e
    assert headers(e) == [f"== {one}:1 Pod research/small",
                          f"== {d}/a.json:1 Job research/llm",
                          f"== {d}/b.yml:1 Pod research/from-yml",
                          f"== {d}/c.yaml:1 ConfigMap cfg: not judged"], e
    assert e.lines[-1] == summary(admitted=3, not_judged=1), e


def test_an_empty_directory_is_bad_input(gpugate_bin, tmp_path):
    (tmp_path / "empty").mkdir()
    bad_input(explain(gpugate_bin, "--policy", str(EXAMPLE_POLICY), str(tmp_path / "empty")),
              f"{tmp_path}/empty: no *.yaml, *.yml or *.json file\n")


def test_a_list_is_read_item_by_item(gpugate_bin, tmp_path):
    # kubectl get pods,cm -o yaml
    pod_obj = pod("listed", "research", cls="train-small", gpus="1")
    lst = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
           "items": [pod_obj, {"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {"name": "c", "namespace": "research"}},
                     "junk"]}
    f = tmp_path / "list.json"
    f.write_text(json.dumps(lst))
    e = explain(gpugate_bin, "--policy", str(EXAMPLE_POLICY), str(f))
    assert e.rc == BAD_INPUT, e
    assert headers(e) == [f"== {f}:1 item 1 Pod research/listed",
                          f"== {f}:1 item 2 ConfigMap research/c: not judged"], e
    assert e.err == f"{f}:1: List item: not an object (a mapping with apiVersion and kind)\n"
    assert e.lines[-1] == summary(admitted=1, not_judged=1, errors=1), e
    # An empty List judges nothing and fails nothing.
    f.write_text(json.dumps({"apiVersion": "v1", "kind": "PodList", "items": []}))
    e = explain(gpugate_bin, "--policy", str(EXAMPLE_POLICY), str(f))
    assert e.rc == ADMITTED and e.lines == [summary()], e


def test_bad_input_wins_over_a_denial(gpugate_bin, tmp_path):
    missing = tmp_path / "missing.yaml"
    e = explain(gpugate_bin, "--policy", str(EXAMPLE_POLICY), str(JOB_TOO_BIG), str(missing))
    assert e.rc == BAD_INPUT, e
    assert e.err == f"{missing}: cannot open: No such file or directory\n", e
    assert "mutate     denied (rule quota)" in e.lines, e
    assert e.lines[-1] == summary(denied=1, errors=1), e


def test_a_syntax_error_names_the_file_and_line_and_the_others_are_judged(gpugate_bin,
                                                                          tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(SMALL + "---\nkind: Pod\nspec: [\n")
    e = explain(gpugate_bin, "--policy", str(EXAMPLE_POLICY), "-n", "research", str(bad),
                str(POD_YAML))
    assert e.rc == BAD_INPUT, e
    assert e.err == (f"{bad}:10: did not find expected node content (while parsing a flow "
                     "node)\n"), e
    assert len(headers(e)) == 1 and e.lines[-1] == summary(admitted=1, errors=1), e


def _json_doc(gpugate_bin, tmp_path, fmt: str) -> tuple[Explained, dict]:
    f = tmp_path / "all.yaml"
    f.write_text(CM + "---\n" + TOO_BIG + "---\n" + SMALL)
    e = explain(gpugate_bin, "--policy", str(EXAMPLE_POLICY), "-n", "research", "-o", fmt,
                str(f), str(tmp_path / "missing.yaml"))
    assert e.rc == BAD_INPUT, e
    assert e.err == f"{tmp_path}/missing.yaml: cannot open: No such file or directory\n", e
    return e, (json.loads(e.out) if fmt == "json" else yaml.safe_load(e.out))


def test_json_output(gpugate_bin, tmp_path):
    e, doc = _json_doc(gpugate_bin, tmp_path, "json")
    f = str(tmp_path / "all.yaml")
    assert doc["summary"] == {"admitted": 1, "denied": 1, "warned": 0, "notJudged": 1,
                              "errors": 1}
    cm, big, small, missing = doc["results"]
    assert cm == {"source": f, "document": 1, "line": 1, "apiVersion": "v1",
                  "kind": "ConfigMap", "namespace": None, "name": "cfg",
                  "result": "not-judged", "rule": None, "messages": [], "warnings": [],
                  "patch": []}
    assert big["result"] == "denied" and big["rule"] == "quota", big
    assert big["messages"] == [TOO_BIG_DENIAL] and big["patch"] == [], big
    assert (big["document"], big["kind"], big["namespace"]) == (2, "Job", "research"), big
    assert small["result"] == "admitted" and small["rule"] is None, small
    assert small["warnings"] == [], small  # what kubectl prints: no problem
    # The patch as JSON Patch operations: the one the text shows.
    text = explain(gpugate_bin, "--policy", str(EXAMPLE_POLICY), "-n", "research",
                   str(tmp_path / "all.yaml"))
    assert small["patch"] == text.patch() and len(small["patch"]) == 12, small
    assert missing == {"source": f"{tmp_path}/missing.yaml", "document": None, "line": None,
                       "apiVersion": None, "kind": None, "namespace": None, "name": None,
                       "result": "error", "rule": None,
                       "messages": [f"{tmp_path}/missing.yaml: cannot open: No such file "
                                    "or directory"],
                       "warnings": [], "patch": []}


def test_yaml_output_is_the_json_document(gpugate_bin, tmp_path):
    _, as_json = _json_doc(gpugate_bin, tmp_path, "json")
    e, as_yaml = _json_doc(gpugate_bin, tmp_path, "yaml")
    assert as_yaml == as_json
    assert e.out.startswith(f"results:\n- source: {tmp_path}/all.yaml\n  document: 1\n"), e


def test_warned_in_json(gpugate_bin, tmp_path):
    f = tmp_path / "priv.json"
    f.write_text(json.dumps(_privileged("sandbox-1", "dev-shared")))
    e = explain(gpugate_bin, "--policy", str(EXAMPLE_POLICY), "-o", "json", str(f))
    assert e.rc == ADMITTED, e
    (r,) = json.loads(e.out)["results"]
    assert r["result"] == "warned" and r["rule"] == "security", r
    assert r["messages"] == [PRIVILEGED], r
    assert r["warnings"][0] == PRIVILEGED, r
    e = explain(gpugate_bin, "--policy", str(EXAMPLE_POLICY), str(f))
    assert e.lines[-1] == summary(warned=1), e


# ---------------------------------------------------------------------------
# hostile input: exit 2 and a message, never a crash (run under ASan too)


@pytest.mark.parametrize("data, error", [
    (b"", ": no document"),
    (b"---\n---\n", ": no document"),
    (b"apiVersion: v1\nkind: Pod\nmetadata: {name: \xff\xfe}\n", ":3: invalid UTF-8 (byte 0xFF)"),
    (bytes(range(256)) * 4, ":1: NUL byte in input"),
    (b"\x7fELF\x02\x01\x01" + b"\xde\xad\xbe\xef" * 64, ":1: invalid UTF-8 (byte 0xBE)"),
    (b"[" * 300, ":1: nesting deeper than 256 levels"),
])
def test_hostile_input(gpugate_bin, tmp_path, data, error):
    f = tmp_path / "m.yaml"
    f.write_bytes(data)
    bad_input(explain(gpugate_bin, "--policy", str(EXAMPLE_POLICY), str(f)), f"{f}{error}\n")


def test_a_10_mb_document_is_refused_unread(gpugate_bin, tmp_path):
    f = tmp_path / "big.yaml"
    f.write_text(SMALL + "data: \"" + "x" * (10 << 20) + "\"\n")
    bad_input(explain(gpugate_bin, "--policy", str(EXAMPLE_POLICY), str(f)),
              f"{f}: larger than 8388608 bytes\n")
    e = explain(gpugate_bin, "--policy", str(EXAMPLE_POLICY), "-", stdin=f.read_text())
    bad_input(e, "-: larger than 8388608 bytes\n")


# ---------------------------------------------------------------------------
# --kubeconfig: against the cluster's usage (the snapshot gpugate pool takes)


def test_against_the_clusters_usage(gpugate_bin, tmp_path, kube):
    from test_pool import api_node, bound_pod
    kube.put("nodes", *(api_node(f"h100-{i}") for i in range(5)))
    kube.put("pods", *(bound_pod(f"busy-{i}", f"h100-{i}", 8) for i in range(4)))
    f = tmp_path / "small.yaml"
    f.write_text(SMALL)
    e = explain(gpugate_bin, "--policy", str(EXAMPLE_POLICY), "-n", "research",
                "--kubeconfig", str(kube.kubeconfig), "--timeout", "30", str(f))
    assert e.rc == ADMITTED and e.err == "", e
    assert ("quota      borrowed (nominal 32, at most 40 with borrowing; judged against "
            "the cluster's usage)") in e.lines, e
    i = e.lines.index("validate   admitted")
    # Borrowing is a problem kubectl prints; the mapping follows as a line.
    assert e.lines[i + 1:i + 3] == [
        PAD + "warning: gpugate: borrowed 1 h100-80gb from cohort lab: gpugate takes them "
              "back when a lender needs them, after a checkpoint",
        PAD + "gpugate: train-small -> 1 x h100-80gb for tenant research (33/32 in use, 1 "
              "borrowed from lab)"], e
    assert e.lines[-1] == summary(warned=1), e
    # The same manifest offline: nothing in use.
    e = explain(gpugate_bin, "--policy", str(EXAMPLE_POLICY), "-n", "research", str(f))
    assert ("quota      nominal (nominal 32, at most 40 with borrowing; judged against "
            "empty usage)") in e.lines, e


def test_a_cluster_that_cannot_be_read(gpugate_bin, tmp_path):
    k = tmp_path / "kubeconfig"
    e = explain(gpugate_bin, "--policy", str(EXAMPLE_POLICY), "--kubeconfig", str(k),
                str(POD_YAML))
    assert e.rc == BAD_INPUT and e.out == "", e
    assert e.err == f"gpugate explain: {k}: cannot open: No such file or directory\n", e


def test_the_example_run_in_the_docs(gpugate_bin):
    """docs/users.md shows a real run on examples/ci-bundle.yaml; its lines
    (but where it says "...") are explain's, in order."""
    doc = (ROOT / "docs" / "users.md").read_text()
    cmd = ("$ build/gpugate explain --policy policy/examples/gpu-cluster.yaml -n research "
           "examples/ci-bundle.yaml\n")
    shown = doc.split(cmd, 1)[1].split("$ echo $?\n", 1)
    assert shown[1].startswith("1\n")
    e = explain(gpugate_bin, *cmd.split()[3:])
    assert e.rc == DENIED, e
    it = iter(e.lines)
    for line in shown[0].splitlines():
        if "..." not in line:
            assert line in it, (line, e)
    readme = (ROOT / "README.md").read_text()
    assert (cmd.rstrip("\n") + " | tail -1\n" + e.lines[-1] + "\n") in readme
    brief_cmd = cmd.replace("-n research", "-n research --brief")
    shown = doc.split(brief_cmd, 1)[1].split("```", 1)[0]
    e = explain(gpugate_bin, *brief_cmd.split()[3:])
    assert e.rc == DENIED and shown == e.out, (shown, e)
    yaml_cmd = cmd.replace("-n research", "-n research -o yaml")
    shown = doc.split(yaml_cmd, 1)[1].split("```", 1)[0]
    e = explain(gpugate_bin, *yaml_cmd.split()[3:])
    it = iter(e.lines)
    for line in shown.splitlines():
        if "..." not in line:
            assert line in it, (line, e)


HELP = """\
usage: gpugate explain --policy FILE [-n NS] [-o text|json|yaml | --brief]
                       [--kubeconfig FILE [--timeout SECONDS]] PATH...

Shows what gpugate does with the objects of manifests (YAML or JSON):
for each Pod, Job, ResourceClaim, Deployment, StatefulSet, ReplicaSet,
DaemonSet and CronJob the decision and its reasons, the warnings kubectl
would print, the JSON Patch and the resulting object; a summary line
at the end.  A PATH is a file (several documents separated by ---), a
directory (its *.yaml, *.yml and *.json files, sorted; not its
subdirectories), or - for standard input (kustomize build | gpugate
explain --policy P -).  A List (kubectl get -o yaml) is read item by
item.  Objects of other kinds (ConfigMap, Service, ...) are listed as
not judged.  An object without metadata.namespace is in NS (default
"default"); one in another namespace than an explicit -n is an
error, as with kubectl.

  -n, --namespace NS   the namespace of objects that name none
  -o, --output FORMAT  text (default), or json or yaml: one document
                       with a result per object and the summary
  --brief              text, one line per object: the verdict, the
                       object (and where it is), the reason
  --kubeconfig FILE    judge quota and the GPU pool against the
                       cluster's usage, listed once (as gpugate pool);
                       without it, against empty usage
  --timeout SECONDS    wait at most this long for the cluster's lists
                       (default 60)

With --kubeconfig credentials that may not list Pods, Jobs, Nodes or
ResourceClaims cluster-wide (a tenant's edit or view), a 403 is said at
once and quota is judged against the GPUQuota objects of NS instead:
what the tenant uses, not the cohort's other members, and no pool;
the output says so (text: a "usage" line; json/yaml: "usage").

Each object is judged alone: nothing is reserved, so the objects of one
run do not add up against quota.

Exit status: 0 every object judged is admitted (warnings allowed); 1
some object is denied; 2 bad input (an unreadable file, not YAML or
JSON, not an object, a malformed manifest, a cluster that cannot be
read, bad options, a missing or invalid policy), even when some other
object is denied; 3 internal error (out of memory, or a gpugate bug:
please report it), over all others.  Errors go to standard error.
"""


def test_help_verbatim(gpugate_bin):
    p = subprocess.run([str(gpugate_bin), "explain", "--help"], capture_output=True,
                       text=True, timeout=30 * SLOW)
    assert p.returncode == 0 and p.stdout == HELP, p.stdout
    p = subprocess.run([str(gpugate_bin), "--help"], capture_output=True, text=True,
                       timeout=30 * SLOW)
    assert "  explain    show what gpugate does with manifests (for CI too)\n" in p.stdout


def test_brief_is_one_line_per_object(gpugate_bin, tmp_path):
    # --brief: the verdict, the object and where it is, the reason; then
    # the summary line; exit status as without it.
    typo = tmp_path / "typo.yaml"
    typo.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
                    "spec: {containers: [{name: c, image: x}]}\n"
                    "---\napiVersion: v1\nkind: Pod\nmetadata: {name: q, labels: "
                    "{gpugate.io/class: trian-large}}\n"
                    "spec: {containers: [{name: c, image: x}]}\n")
    e = explain(gpugate_bin, "--policy", str(EXAMPLE_POLICY), "-n", "research", "--brief",
                "examples/ci-bundle.yaml", "examples/job-train-large.yaml", str(typo))
    assert (e.rc, e.err) == (DENIED, ""), e
    assert e.out == f"""\
not-judged ConfigMap trainer-config (examples/ci-bundle.yaml:3)
denied     Job research/pretrain (examples/ci-bundle.yaml:11): gpugate: job can never be \
admitted: needs 64 h100-80gb (parallelism 8 x 8), tenant "research" may hold at most 40 \
(nominal 32 + 8 that cohort "lab" can lend)
admitted   Pod research/notebook (examples/ci-bundle.yaml:26): dev-shared: 1 x l4-shared \
for tenant research; 1/8 in use
admitted   Job research/llm-pretrain (examples/job-train-large.yaml:7): train-large: \
3 pods x 8 x h100-80gb for tenant research; 24/32 in use
admitted   Pod research/p ({typo}:1): no GPU class: nothing to map
denied     Pod research/q ({typo}:6): gpugate: unknown GPU class "trian-large" \
(did you mean "train-large"?); tenant "research" may use: train-large, train-small, dev-shared
summary: 3 admitted, 2 denied, 0 warned, 1 not judged, 0 errors
""", e.out
