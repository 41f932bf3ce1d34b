"""The command line as a user types it: exit codes, and what is printed where.

`gpugate check` (SPEC section 7): exit 0 when every file is valid, 1 when
some file is invalid, 2 on a usage error; a summary per valid file on
stdout, every error located FILE:LINE on stderr.  `gpugate version`, and the
help of gpugate and of every command.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT, SLOW

COMMANDS = ("serve", "check", "classes", "explain", "pool", "certs", "version")

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


def test_check_directory_is_a_read_error(gpugate_bin, tmp_path):
    d = str(tmp_path)
    assert outcome(gpugate_bin, "check", d) == \
        (1, "", f"{d}: cannot read: Is a directory\n{d}: 1 error\n")


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


CHECK_USAGE = "usage: gpugate check [--quiet] [--kubeconfig FILE] FILE...\n"


@pytest.mark.parametrize("args, first_line", [
    ((), "gpugate check: no policy file given"),
    (("-q",), "gpugate check: no policy file given"),
    (("--bogus", "policy/examples/gpu-cluster.yaml"),
     "gpugate check: unrecognized option '--bogus'"),
    (("-x", "policy/examples/gpu-cluster.yaml"), "gpugate check: invalid option -- 'x'"),
])
def test_check_usage_errors(gpugate_bin, args, first_line):
    p = gpugate(gpugate_bin, "check", *args)
    assert (p.returncode, p.stdout) == (2, "")
    lines = p.stderr.splitlines(keepends=True)
    assert lines[0] == first_line + "\n"
    assert lines[1] == CHECK_USAGE
    assert "Exit status: 0 all files valid, 1 some file invalid, 2 usage error." in p.stderr


# ---------------------------------------------------------------------------
# gpugate version


def test_version(gpugate_bin):
    version = (ROOT / "VERSION").read_text().strip()
    for args in (("version",), ("--version",)):
        p = gpugate(gpugate_bin, *args)
        assert (p.returncode, p.stderr) == (0, "")
        assert re.fullmatch(rf"gpugate {re.escape(version)} \([0-9a-z.-]+\)\n", p.stdout), p.stdout


def test_version_takes_no_argument(gpugate_bin):
    p = gpugate(gpugate_bin, "version", "extra")
    assert (p.returncode, p.stdout) == (2, "")
    assert p.stderr.startswith("gpugate version: unexpected argument 'extra'\n"
                               "usage: gpugate version\n")


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


@pytest.mark.parametrize("args, first_line", [
    ((), None),
    (("bogus",), "gpugate: unknown command 'bogus'"),
    (("--bogus",), "gpugate: unknown command '--bogus'"),
    (("help", "bogus"), "gpugate: unknown command 'bogus'"),
    (("--help", "bogus"), "gpugate: unknown command 'bogus'"),
])
def test_usage_errors(gpugate_bin, args, first_line):
    p = gpugate(gpugate_bin, *args)
    assert (p.returncode, p.stdout) == (2, "")
    usage = "usage: gpugate COMMAND [OPTIONS]\n"
    assert p.stderr.startswith((f"{first_line}\n" if first_line else "") + usage)


@pytest.mark.parametrize("value", ["0", "86401", "-1", "1.5", "", "60s"])
def test_serve_reservation_ttl_must_be_seconds(gpugate_bin, value):
    p = gpugate(gpugate_bin, "serve", "--reservation-ttl", value)
    assert (p.returncode, p.stdout) == (2, "")
    # a start-up error is a log line (test_logging.py: the formats)
    assert p.stderr.splitlines()[-1].endswith(
        ' level=error msg="not starting" error="gpugate serve: --reservation-ttl must be '
        '1..86400 seconds" hint="gpugate serve --help lists the flags"'), p.stderr
