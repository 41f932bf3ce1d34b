"""The command line as a user types it: exit codes, and what is printed where.

`gpugate check` (SPEC section 7): exit 0 when every file is valid, 1 when
some file is invalid, 2 on a usage error; a summary per valid file on
stdout, every error located FILE:LINE on stderr.  `gpugate version`, and the
help of gpugate and of every command.
"""

from __future__ import annotations

import re
import time
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT, SLOW
from test_watch import kube  # noqa: F401  (the fixture)

COMMANDS = ("serve", "check", "classes", "explain", "pool", "certs", "completion", "version")

EXAMPLE_SUMMARY = """\
{file}: valid
  4 flavors, 5 classes, 3 tenants, 1 cohort; mode enforce; raw GPU requests rejected
  classes: train-large (8 x h100-80gb), train-small (1 x h100-80gb, up to 4), \
inference-mig (1 x a100-1g.10gb, up to 2), inference-mig-large (1 x a100-3g.40gb), \
dev-shared (1 x l4-shared)
  tenant research (cohort lab)
    namespaces: research, research-*
    classes: train-large, train-small, dev-shared
    quota: h100-80gb 32 (borrow 16, lend 8), l4-shared 8
  tenant product (cohort lab)
    namespaces: product-inference, product-staging
    classes: train-small, inference-mig, inference-mig-large
    quota: a100-1g.10gb 112 (lend 56), a100-3g.40gb 32, h100-80gb 16 (lend 8)
  tenant sandbox [mode warn]
    namespaces: sandbox-*
    classes: dev-shared
    quota: l4-shared 24
"""

# The examples keep a borrowingLimit above what the cohort can lend, on
# purpose (docs/quota.md walks through it): a warning, not an error.
EXAMPLE_WARNING = """\
{file}:{line}: warning: tenant "research": quota h100-80gb: borrowingLimit 16 is more \
than cohort "lab" can ever lend: at most 8 (the other members' lendingLimit, else their \
nominal quota)
"""

# One of each: a single flavor, class and tenant (no plural), no cohort,
# raw requests allowed, a tenant without quota, a tenant mode equal to the
# global one (not shown) and one that differs.
SMALL_POLICY = """\
version: 1
settings: {rawGpuRequests: allow, mode: warn}
flavors:
  - {name: l4, resource: nvidia.com/gpu, sharing: time-slicing, gpusPerNode: 4}
classes:
  - {name: dev, flavor: l4, gpus: 1}
tenants:
  - name: team
    namespaces: [team, "team-?"]
    mode: warn
    quota: [{flavor: l4, nominal: 2}]
  - name: guests
    namespaces: [guests]
    mode: enforce
"""

SMALL_SUMMARY = """\
{file}: valid
  1 flavor, 1 class, 2 tenants, 0 cohorts; mode warn; raw GPU requests allowed
  classes: dev (1 x l4)
  tenant team
    namespaces: team, team-?
    classes: dev
    quota: l4 2
  tenant guests [mode enforce]
    namespaces: guests
    classes: none
    quota: none
"""

# Two mistakes: every error is reported, each at its own line.
BAD_POLICY = """\
version: 1
flavors:
  - {name: h100, resource: nvidia.com/gpu, sharing: exclusive, gpusPerNode: 8}
classes:
  - name: train-large
    flavor: h100-80
    gpus: 8
tenants:
  - {name: research, namespaces: [research], quota: [{flavor: h200, nominal: 4}]}
"""

BAD_ERRORS = """\
{file}:6: class "train-large": unknown flavor "h100-80"
{file}:9: tenant "research": quota for unknown flavor "h200" (did you mean "h100"?)
{file}: 2 errors
"""


def gpugate(binary: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(binary), *args], capture_output=True, text=True,
                          timeout=60 * SLOW, cwd=ROOT)


def outcome(binary: Path, *args: str) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of one run."""
    p = gpugate(binary, *args)
    return p.returncode, p.stdout, p.stderr


def write(tmp_path: Path, name: str, text: str) -> str:
    (tmp_path / name).write_text(text)
    return str(tmp_path / name)


# ---------------------------------------------------------------------------
# gpugate check


@pytest.mark.parametrize("policy, line", [("policy/examples/gpu-cluster.yaml", 113),
                                          ("manifests/policy.yaml", 113)])
def test_check_summarises_the_example_policies(gpugate_bin, policy, line):
    assert outcome(gpugate_bin, "check", policy) == \
        (0, EXAMPLE_SUMMARY.format(file=policy),
         EXAMPLE_WARNING.format(file=policy, line=line))


def test_check_summary_counts_and_tenants(gpugate_bin, tmp_path):
    f = write(tmp_path, "small.yaml", SMALL_POLICY)
    assert outcome(gpugate_bin, "check", f) == (0, SMALL_SUMMARY.format(file=f), "")


def test_check_summary_of_a_policy_without_classes(gpugate_bin, tmp_path):
    f = write(tmp_path, "empty.yaml", "version: 1\nflavors: []\nclasses: []\n"
              "tenants: [{name: t, namespaces: [t]}]\n")
    assert outcome(gpugate_bin, "check", f) == (0, f"""\
{f}: valid
  0 flavors, 0 classes, 1 tenant, 0 cohorts; mode enforce; raw GPU requests rejected
  classes: none
  tenant t
    namespaces: t
    classes: none
    quota: none
""", "")


def test_check_quiet_prints_errors_only(gpugate_bin, tmp_path):
    good = "policy/examples/gpu-cluster.yaml"
    bad = write(tmp_path, "bad.yaml", BAD_POLICY)
    warning = EXAMPLE_WARNING.format(file=good, line=113)
    for opt in ("-q", "--quiet"):
        assert outcome(gpugate_bin, "check", opt, good) == (0, "", warning)
        assert outcome(gpugate_bin, "check", opt, good, bad) == \
            (1, "", warning + BAD_ERRORS.format(file=bad))


def test_check_invalid_file_prints_located_errors(gpugate_bin, tmp_path):
    bad = write(tmp_path, "bad.yaml", BAD_POLICY)
    assert outcome(gpugate_bin, "check", bad) == (1, "", BAD_ERRORS.format(file=bad))


def test_check_one_error_is_singular(gpugate_bin, tmp_path):
    bad = write(tmp_path, "v2.yaml", "version: 2\nflavors: []\nclasses: []\ntenants: []\n")
    assert outcome(gpugate_bin, "check", bad) == \
        (1, "", f"{bad}:1: unsupported version 2 (this gpugate reads version 1)\n"
                f"{bad}: 1 error\n")


def test_check_missing_file(gpugate_bin, tmp_path):
    missing = str(tmp_path / "nope.yaml")
    assert outcome(gpugate_bin, "check", missing) == \
        (1, "", f"{missing}: cannot open: No such file or directory\n"
                f"{missing}: 1 error\n")


def test_check_directory_checks_its_policy_files(gpugate_bin, tmp_path):
    # A directory stands for its *.yaml and *.yml files, in name order;
    # each error names its file; other files, hidden files and
    # subdirectories are left alone; one invalid file fails the run.
    d = tmp_path / "policies"
    d.mkdir()
    small = write(d, "a-small.yaml", SMALL_POLICY)
    bad = write(d, "b-bad.yml", BAD_POLICY)
    write(d, "notes.txt", "not a policy")
    write(d, ".hidden.yaml", "not: a policy")
    (d / "sub.yaml").mkdir()
    write(d / "sub.yaml", "deeper.yaml", "not: a policy")
    assert outcome(gpugate_bin, "check", str(d)) == \
        (1, SMALL_SUMMARY.format(file=small), BAD_ERRORS.format(file=bad))
    (d / "b-bad.yml").unlink()
    assert outcome(gpugate_bin, "check", "-q", str(d) + "/") == (0, "", "")
    example = "policy/examples"
    assert outcome(gpugate_bin, "check", example) == \
        (0, EXAMPLE_SUMMARY.format(file=example + "/gpu-cluster.yaml"),
         EXAMPLE_WARNING.format(file=example + "/gpu-cluster.yaml", line=113))


def test_check_directory_without_policy_files_fails(gpugate_bin, tmp_path):
    d = str(tmp_path)
    write(tmp_path, "README.md", "# policies go here\n")
    assert outcome(gpugate_bin, "check", d) == \
        (1, "", f"{d}: no policy file (*.yaml, *.yml) in this directory\n")


def test_check_too_many_errors_are_counted(gpugate_bin, tmp_path):
    # 400 flavors with a bad resource: more lines than the 16 KiB of text
    # gpugate keeps; the rest are counted.
    flavors = "".join(f"  - {{name: f{i}, resource: x, sharing: mig, gpusPerNode: 1}}\n"
                      for i in range(400))
    f = write(tmp_path, "many.yaml",
              f"version: 1\nflavors:\n{flavors}classes: []\ntenants: []\n")
    rc, out, err = outcome(gpugate_bin, "check", f)
    lines = err.splitlines()
    assert (rc, out) == (1, "")
    assert lines[0] == (f'{f}:3: flavor "f0": resource "x" is not an extended resource '
                        'name (expected domain/name, e.g. nvidia.com/gpu)')
    shown = len(lines) - 2
    assert 10 < shown < 400
    assert lines[-2:] == [f"... and {400 - shown} more", f"{f}: 400 errors"]


def test_check_several_files(gpugate_bin, tmp_path):
    example = "policy/examples/gpu-cluster.yaml"
    small = write(tmp_path, "small.yaml", SMALL_POLICY)
    bad = write(tmp_path, "bad.yaml", BAD_POLICY)
    both = EXAMPLE_SUMMARY.format(file=example) + SMALL_SUMMARY.format(file=small)
    warning = EXAMPLE_WARNING.format(file=example, line=113)

    assert outcome(gpugate_bin, "check", example, small) == (0, both, warning)
    # An invalid file among valid ones: every file is still checked, in
    # order, and the exit status says that one failed.
    assert outcome(gpugate_bin, "check", example, bad, small) == \
        (1, both, warning + BAD_ERRORS.format(file=bad))
    assert outcome(gpugate_bin, "check", bad, bad) == \
        (1, "", 2 * BAD_ERRORS.format(file=bad))


CHECK_USAGE = "usage: gpugate check [--quiet] [--kubeconfig FILE] FILE|DIR...\n"


# A usage error is one line: what is wrong (with the nearest known name
# where one is close), then where the help is; not the help itself.
@pytest.mark.parametrize("args, error", [
    ((), "no policy file given"),
    (("-q",), "no policy file given"),
    (("--bogus", "policy/examples/gpu-cluster.yaml"), "unknown option '--bogus'"),
    (("--quite", "policy/examples/gpu-cluster.yaml"),
     "unknown option '--quite' (did you mean \"--quiet\"?)"),
    (("--kubeconfi", "k", "policy/examples/gpu-cluster.yaml"), None),
    (("--quiet=yes", "policy/examples/gpu-cluster.yaml"), "option '--quiet' takes no value"),
    (("--kubeconfig",), "option '--kubeconfig' needs a value"),
    (("-x", "policy/examples/gpu-cluster.yaml"), "unknown option '-x'"),
    (("-qx", "policy/examples/gpu-cluster.yaml"), "unknown option '-x'"),
])
def test_check_usage_errors(gpugate_bin, args, error):
    p = gpugate(gpugate_bin, "check", *args)
    if error is None:  # a unique prefix of an option is that option
        assert "usage error" not in p.stderr and p.returncode == 1, p
        return
    assert (p.returncode, p.stdout, p.stderr) == \
        (2, "", f"gpugate check: {error}; run 'gpugate check --help'\n")


# ---------------------------------------------------------------------------
# gpugate version


def test_version(gpugate_bin):
    version = (ROOT / "VERSION").read_text().strip()
    for args in (("version",), ("--version",)):
        p = gpugate(gpugate_bin, *args)
        assert (p.returncode, p.stderr) == (0, "")
        assert re.fullmatch(rf"gpugate {re.escape(version)} \([0-9a-z.-]+\)\n", p.stdout), p.stdout


def test_version_takes_no_argument(gpugate_bin):
    assert outcome(gpugate_bin, "version", "extra") == \
        (2, "", "gpugate version: unexpected argument 'extra'; "
                "run 'gpugate version --help'\n")


# ---------------------------------------------------------------------------
# help


@pytest.mark.parametrize("args", [("--help",), ("-h",), ("help",)])
def test_help_lists_every_command(gpugate_bin, args):
    p = gpugate(gpugate_bin, *args)
    assert (p.returncode, p.stderr) == (0, "")
    assert p.stdout.startswith("usage: gpugate COMMAND [OPTIONS]\n")
    listed = re.findall(r"^  (\S+) +\S", p.stdout, re.M)
    assert listed == list(COMMANDS)
    assert "Run 'gpugate COMMAND --help' for the options of a command." in p.stdout


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("form", ["CMD --help", "CMD -h", "help CMD"])
def test_command_help(gpugate_bin, command, form):
    p = gpugate(gpugate_bin, *form.replace("CMD", command).split())
    assert (p.returncode, p.stderr) == (0, "")
    assert p.stdout.startswith(f"usage: gpugate {command}")


def test_check_help_after_other_options(gpugate_bin):
    p = gpugate(gpugate_bin, "check", "-q", "--help")
    assert (p.returncode, p.stderr) == (0, "")
    assert p.stdout.startswith(CHECK_USAGE)


def test_no_command_prints_the_help(gpugate_bin):
    p = gpugate(gpugate_bin)
    assert (p.returncode, p.stdout) == (2, "")
    assert p.stderr.startswith("usage: gpugate COMMAND [OPTIONS]\n")


@pytest.mark.parametrize("args, error", [
    (("bogus",), "unknown command 'bogus'"),
    (("--bogus",), "unknown command '--bogus'"),
    (("help", "bogus"), "unknown command 'bogus'"),
    (("--help", "bogus"), "unknown command 'bogus'"),
    (("chek", "policy/examples/gpu-cluster.yaml"),
     "unknown command 'chek' (did you mean \"check\"?)"),
    (("Explain",), "unknown command 'Explain' (did you mean \"explain\"?)"),
    (("help", "clases"), "unknown command 'clases' (did you mean \"classes\"?)"),
])
def test_usage_errors(gpugate_bin, args, error):
    assert outcome(gpugate_bin, *args) == \
        (2, "", f"gpugate: {error}; run 'gpugate --help'\n")


# The values of an option that takes one of a few: the nearest is offered.
@pytest.mark.parametrize("args, error", [
    (("serve", "--usage-store", "memroy"),
     "--usage-store wants memory, shared or leader, not 'memroy' (did you mean \"memory\"?)"),
    (("serve", "--usage-store", "etcd"),
     "--usage-store wants memory, shared or leader, not 'etcd'"),
    (("serve", "--log-level", "warning"),
     "--log-level wants debug, info, warn or error, not 'warning'"),
    (("serve", "--log-level", "eror"),
     "--log-level wants debug, info, warn or error, not 'eror' (did you mean \"error\"?)"),
    (("serve", "--usage-stroe", "memory"),
     "unknown option '--usage-stroe' (did you mean \"--usage-store\"?)"),
    (("serve", "--max-con", "3"), "option '--max-con' is ambiguous: --max-conns, "
     "--max-conns-per-ip"),
    (("explain", "-o", "jsn"),
     "-o wants text, json or yaml, not 'jsn' (did you mean \"json\"?)"),
    (("explain", "--output=YAML"),
     "-o wants text, json or yaml, not 'YAML' (did you mean \"yaml\"?)"),
    (("classes", "-o", "jsno"),
     "-o wants text, json or yaml, not 'jsno' (did you mean \"json\"?)"),
    (("pool", "-o", "yaml"), "-o wants text or json, not 'yaml'"),
    (("completion", "bsh"), "the shell wants bash or zsh, not 'bsh' (did you mean \"bash\"?)"),
    (("certs", "--day", "3"), None),
])
def test_choices_offer_the_nearest(gpugate_bin, args, error):
    rc, out, err = outcome(gpugate_bin, *args)
    if error is None:  # --day is a prefix of --days: accepted
        assert "unknown option" not in err, err
        return
    cmd = args[0]
    if cmd == "serve":  # a start-up error is a log line (test_logging.py)
        quoted = error.replace('"', '\\"')
        assert (rc, out) == (2, "") and err.splitlines()[-1].endswith(
            f' level=error msg="not starting" error="gpugate serve: {quoted}" '
            'hint="gpugate serve --help lists the flags"'), err
        return
    assert (rc, out, err) == (2, "", f"gpugate {cmd}: {error}; run 'gpugate {cmd} --help'\n")


@pytest.mark.parametrize("value", ["0", "86401", "-1", "1.5", "", "60s"])
def test_serve_reservation_ttl_must_be_seconds(gpugate_bin, value):
    p = gpugate(gpugate_bin, "serve", "--reservation-ttl", value)
    assert (p.returncode, p.stdout) == (2, "")
    # a start-up error is a log line (test_logging.py: the formats)
    assert p.stderr.splitlines()[-1].endswith(
        ' level=error msg="not starting" error="gpugate serve: --reservation-ttl must be '
        '1..86400 seconds" hint="gpugate serve --help lists the flags"'), p.stderr


# ---------------------------------------------------------------------------
# gpugate completion


def complete(script: str, *words: str, cwd: Path = ROOT) -> list[str]:
    """COMPREPLY of _gpugate for the command line `words` (the last one is
    the word being completed), in a bash that sourced the script."""
    quoted = " ".join("'" + w.replace("'", "'\\''") + "'" for w in words)
    prog = (f"source /dev/stdin <<'EOF'\n{script}EOF\n"
            f"COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}\n"
            "_gpugate gpugate; printf '%s\\n' \"${COMPREPLY[@]}\"\n")
    p = subprocess.run(["bash", "--norc", "--noprofile", "-c", prog], capture_output=True,
                       text=True, timeout=30 * SLOW, cwd=cwd)
    assert (p.returncode, p.stderr) == (0, ""), p
    return [w for w in p.stdout.split("\n") if w]


@pytest.fixture(scope="module")
def bash_script(gpugate_bin) -> str:
    rc, out, err = outcome(gpugate_bin, "completion", "bash")
    assert (rc, err) == (0, "")
    p = subprocess.run(["bash", "-n"], input=out, capture_output=True, text=True)
    assert (p.returncode, p.stderr) == (0, ""), p
    return out


def test_bash_completion_commands_options_values(bash_script, tmp_path):
    s = bash_script
    assert complete(s, "gpugate", "") == list(COMMANDS) + ["help", "--help", "--version"]
    assert complete(s, "gpugate", "c") == ["check", "classes", "certs", "completion"]
    assert complete(s, "gpugate", "help", "ex") == ["explain"]
    assert complete(s, "gpugate", "explain", "-o", "") == ["text", "json", "yaml"]
    assert complete(s, "gpugate", "explain", "--output", "j") == ["json"]
    assert complete(s, "gpugate", "pool", "-o", "") == ["text", "json"]
    assert complete(s, "gpugate", "serve", "--usage-store", "") == ["memory", "shared", "leader"]
    assert complete(s, "gpugate", "serve", "--log-level", "w") == ["warn"]
    assert complete(s, "gpugate", "completion", "") == ["bash", "zsh"]
    assert complete(s, "gpugate", "explain", "--b") == ["--brief"]
    assert complete(s, "gpugate", "serve", "--max") == ["--max-conns", "--max-conns-per-ip"]
    assert complete(s, "gpugate", "serve", "--threads", "") == []
    # Files where a file goes: a policy, an operand of check; --out of
    # certs takes directories only.
    (tmp_path / "policy.yaml").write_text("")
    (tmp_path / "pki").mkdir()
    assert complete(s, "gpugate", "explain", "--policy", "po", cwd=tmp_path) == \
        ["policy.yaml"]
    assert sorted(complete(s, "gpugate", "check", "", cwd=tmp_path)) == \
        ["pki", "policy.yaml"]
    assert complete(s, "gpugate", "certs", "--out", "", cwd=tmp_path) == ["pki"]


@pytest.mark.parametrize("command", [c for c in COMMANDS])
def test_bash_completion_offers_only_what_gpugate_accepts(gpugate_bin, bash_script, command,
                                                          tmp_path):
    # Every option completion offers is one the command's parser knows
    # (the same table): none is an unknown option.  (In tmp_path: certs
    # --out x writes there.)
    offered = complete(bash_script, "gpugate", command, "-")
    assert "--help" in offered and offered == sorted(set(offered), key=offered.index)
    for opt in offered:
        args = [opt, "x"] if opt not in ("--help", "-h") else [opt]
        p = subprocess.run([str(gpugate_bin), command, *args], capture_output=True,
                           text=True, timeout=60 * SLOW, cwd=tmp_path)
        assert "unknown option" not in p.stderr, (opt, p.stderr)
        assert "needs a value" not in p.stderr, (opt, p.stderr)


def test_zsh_completion_is_generated_from_the_same_tables(gpugate_bin):
    rc, out, err = outcome(gpugate_bin, "completion", "zsh")
    assert (rc, err) == (0, "")
    assert out.startswith("#compdef gpugate\n")
    for cmd in COMMANDS:
        assert f"\t{cmd})\n" in out, cmd
    assert "'--usage-store:value:(memory shared leader)'" in out
    assert "'-o:value:(text json yaml)'" in out
    assert "'1:value:(bash zsh)'" in out


@pytest.mark.parametrize("args, error", [
    (("completion",), "which shell? bash or zsh"),
    (("completion", "bash", "zsh"), "one shell only"),
    (("completion", "powershell"), "the shell wants bash or zsh, not 'powershell'"),
])
def test_completion_usage_errors(gpugate_bin, args, error):
    assert outcome(gpugate_bin, *args) == \
        (2, "", f"gpugate completion: {error}; run 'gpugate completion --help'\n")


# ---------------------------------------------------------------------------
# gpugate check --kubeconfig: the PriorityClasses the classes name


def priority_class(name: str, value: int) -> dict:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name, "uid": f"uid-pc-{name}"}, "value": value}


MISSING_TRAINING = (
    '{file}: warning: class "train-large": PriorityClass "training" does not exist in the '
    'cluster, and the apiserver refuses pods that name it; create it (docs/operations.md, '
    '"PriorityClasses") or remove priorityClassName from the class\n')


def test_check_kubeconfig_warns_about_a_missing_priority_class(gpugate_bin, kube):
    # The example policy's train-large names PriorityClass "training": a
    # cluster without it refuses every train-large pod.  A warning, not an
    # error (the policy is valid); read with one list, nothing written.
    policy = "policy/examples/gpu-cluster.yaml"
    kube.serve("priorityclasses", True)
    kube.put("priorityclasses", priority_class("system-cluster-critical", 2000000000))
    rc, out, err = outcome(gpugate_bin, "check", "-q", "--kubeconfig", str(kube.kubeconfig),
                           policy)
    assert (rc, out) == (0, ""), err
    assert MISSING_TRAINING.format(file=policy) in err, err
    lists = [q for q in kube.requests("priorityclasses")]
    assert [q.watch for q in lists] == [False], lists

    kube.put("priorityclasses", priority_class("training", 1000))
    rc, out, err = outcome(gpugate_bin, "check", "-q", "--kubeconfig", str(kube.kubeconfig),
                           policy)
    assert (rc, out) == (0, ""), err
    assert "PriorityClass" not in err, err


def test_check_kubeconfig_says_when_priority_classes_cannot_be_read(gpugate_bin, kube):
    policy = "policy/examples/gpu-cluster.yaml"
    rc, out, err = outcome(gpugate_bin, "check", "-q", "--kubeconfig", str(kube.kubeconfig),
                           policy)
    assert (rc, out) == (0, ""), err
    assert (f"{policy}: warning: the cluster's PriorityClasses could not be listed "
            "(HTTP 404): whether the ones the classes name exist is not known\n") in err, err


# ---------------------------------------------------------------------------
# gpugate check --kubeconfig: the DRA DeviceClasses (docs/quota.md, "What
# each door costs")


def device_class(name: str, extended: str | None = None) -> dict:
    spec: dict = {"selectors": [{"cel": {"expression": "device.driver == 'x'"}}]}
    if extended:
        spec["extendedResourceName"] = extended
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": name, "uid": f"uid-dc-{name}"}, "spec": spec}


def test_check_kubeconfig_warns_about_device_classes_the_policy_does_not_map(gpugate_bin,
                                                                            kube):
    policy = "policy/examples/gpu-cluster.yaml"
    # No DRA served (404): nothing about DeviceClasses.
    rc, out, err = outcome(gpugate_bin, "check", "-q", "--kubeconfig", str(kube.kubeconfig),
                           policy)
    assert (rc, out) == (0, ""), err
    assert "DeviceClass" not in err, err
    kube.serve("deviceclasses", True)
    kube.put("deviceclasses", device_class("gpu.nvidia.com"),
             device_class("h100.example.com", "nvidia.com/gpu"))
    rc, out, err = outcome(gpugate_bin, "check", "-q", "--kubeconfig", str(kube.kubeconfig),
                           policy)
    assert (rc, out) == (0, ""), err
    assert (f'{policy}: warning: DeviceClass "h100.example.com" serves nvidia.com/gpu '
            "through DRA (extendedResourceName), which flavor h100-80gb uses, but no "
            'flavor lists "h100.example.com" in deviceClassNames: the claim the '
            "kube-scheduler makes for such a pod asks for that class, which gpugate "
            "does not count; add it to flavor h100-80gb's deviceClassNames "
            '(docs/quota.md, "What each door costs")\n') in err, err
    assert "the cluster has no DeviceClass" not in err, err
    assert [q.watch for q in kube.requests("deviceclasses")] == [False, False], \
        "one list a check, no watch"


def test_check_kubeconfig_weighs_a_dra_flavors_devices(gpugate_bin, kube, tmp_path):
    # The pool of test_dra_pool.py's cluster(): 8 H100 devices on two
    # nodes, 2 tainted, 1 allocated: 6 allocatable against a nominal quota
    # of 16; research holds none of them (the allocated claim is of no
    # flavor's class), so 5 free back its 16: short by 11.  Then the DRA
    # kinds not served: said, at once (a 404 is an
    # answer: no wait for the check's timeout).
    from test_dra_pool import DRA_KINDS, POLICY, cluster
    policy = tmp_path / "dra.yaml"
    policy.write_text(POLICY)
    for k in DRA_KINDS:
        kube.serve(k, True)
    cluster(kube)
    rc, out, err = outcome(gpugate_bin, "check", "--kubeconfig", str(kube.kubeconfig),
                           str(policy))
    assert rc == 0, err
    assert ("  cluster: flavor h100-dra: 2 nodes, 2 usable, 6 gpu.nvidia.com devices "
            "allocatable, 1 allocated; nominal quota 16\n") in out, out
    assert (f"{policy}: warning: flavor h100-dra: the tenants' nominal quota sums to 16, "
            "the usable nodes offer 6 gpu.nvidia.com devices: over-committed by 10 "
            "(166 %); not backed now: tenant research 11 of its nominal 16 "
            '(docs/quota.md, "Effective capacity")\n') in err, err

    for k in DRA_KINDS:
        kube.serve(k, False)
    t0 = time.monotonic()
    rc, out, err = outcome(gpugate_bin, "check", "--kubeconfig", str(kube.kubeconfig),
                           str(policy))
    assert rc == 0, err
    assert time.monotonic() - t0 < 20 * SLOW, "waited for kinds the API does not serve"
    assert ("  cluster: flavor h100-dra: gpu.nvidia.com devices not known (the DRA kinds "
            "were not listed); nominal quota 16\n") in out, out
    assert (f"{policy}: warning: flavor h100-dra: the cluster's ResourceSlices, "
            "DeviceTaintRules, ResourceClaims or DeviceClasses could not be listed: its "
            "devices are not weighed\n") in err, err
