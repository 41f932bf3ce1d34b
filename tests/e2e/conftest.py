"""Fixtures for the end-to-end tests: a real control plane, gpugate in API
mode registered as a mutating and a validating webhook, and the real kubectl.

One stack for the whole session (gpugate_e2e.Stack): cluster.sh up, gpugate
certs, two `gpugate serve --kubeconfig` processes (the example policy, and
QUOTA_POLICY with small numbers for the quota scenarios), their webhook
configurations, the namespaces and the PriorityClass "training".  Teardown
always runs: every gpugate must exit 0 on SIGTERM with no sanitizer report
on its stderr, then cluster.sh down.

The binary is $GPUGATE_BIN (absolute, as `make e2e` sets it), else
build/gpugate.  An ASan/UBSan build works the same way (ASAN_OPTIONS and
UBSAN_OPTIONS get defaults unless set).

Each test leaves the namespaces it used empty (the `clean` fixture) and
waits until gpugate's usage is back to zero, so that the quota numbers that
kubectl prints are the same whatever ran before.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import gpugate_e2e as e2e  # noqa: E402


def pytest_configure(config):
    for line in e2e.PASS_MARKERS:
        config.addinivalue_line("markers", line)


def pytest_collection_modifyitems(config, items):
    """Two passes (run.sh): the plain cluster runs every test but those
    marked was_only; a GPUGATE_WAS=1 cluster only those marked was, less
    those marked plain_only.  The others are deselected, not skipped."""
    keep, drop = [], []
    for item in items:
        (keep if e2e.selected(item.get_closest_marker) else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture(scope="session")
def was(stack) -> bool:
    """The cluster runs the workload-aware scheduling gates (GPUGATE_WAS=1:
    Job spec.scheduling, PodGroup and Workload served, the scheduler's
    GangScheduling plugin on)."""
    return stack.cluster.env.get("GPUGATE_WAS") == "1"


@pytest.fixture(scope="session")
def stack(tmp_path_factory):
    binary = e2e.gpugate_bin()
    if not binary.is_file() or not binary.stat().st_mode & 0o111:
        pytest.exit(f"{binary} is not built: run `make` first (or set GPUGATE_BIN)", 2)
    st = e2e.Stack(tmp_path_factory.mktemp("stack"), binary)

    # SIGTERM (a CI timeout, `timeout`, a killed `make`) becomes an interrupt,
    # so that the teardown below still stops gpugate and the cluster.
    def on_term(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")
    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        st.up()
    except BaseException as e:
        problems = st.down()
        if problems:
            e2e.log("\n".join(problems))
        if isinstance(e, Exception):
            # Once, with cluster.sh's own words (the component that failed
            # and its log), not again at every test of the session.
            pytest.exit(f"the e2e stack did not come up ({e2e.pass_name()} pass): {e}", 3)
        raise
    try:
        yield st
    finally:
        signal.signal(signal.SIGTERM, previous)
        problems = st.down()
        if problems:
            pytest.fail("gpugate teardown:\n" + "\n\n".join(problems), pytrace=False)


@pytest.fixture(autouse=True)
def _gpugate_healthy(request):
    """After every test: both gpugate processes still run and have printed
    no sanitizer report (so that a failure points at the test that caused
    it, not at the session teardown)."""
    yield
    if "stack" not in request.fixturenames:
        return
    st = request.getfixturevalue("stack")
    for gate in list(st.gates.values()) + st.retired:
        report = gate.sanitizer_report()
        assert report is None, f"{gate.name}: sanitizer report:\n{report}"
    for gate in st.gates.values():
        assert gate.alive, (f"{gate.name} died (exit {gate.proc.poll()}); stderr:\n"
                            f"{gate.stderr_tail()}")


@pytest.fixture
def kubectl(stack) -> e2e.Kubectl:
    """kubectl(*args, input=None, cwd=None) -> Result(rc, out, err)."""
    return stack.kubectl


@pytest.fixture
def tenant_kubectl(stack):
    """tenant_kubectl("mallory") -> a Kubectl acting as a tenant of that
    namespace: ServiceAccount mallory/tenant, bound to the built-in
    ClusterRole edit there and nowhere else (Stack.tenant_kubectl)."""
    return stack.tenant_kubectl


@pytest.fixture
def example(stack) -> e2e.Gate:
    """gpugate serving the example policy (research, product, sandbox)."""
    return stack.gates["example"]


@pytest.fixture
def quota(stack) -> e2e.Gate:
    """gpugate serving QUOTA_POLICY (alpha, beta, solo, batch, ...)."""
    return stack.gates["quota"]


# Which gpugate, tenant and flavors count a namespace's workloads.
NAMESPACE_USAGE = {
    "research": ("example", "research", ("h100-80gb", "l4-shared")),
    "research-jobs": ("example", "research", ("h100-80gb", "l4-shared")),
    "product-inference": ("example", "product", ("h100-80gb", "a100-1g.10gb", "a100-3g.40gb")),
    "sandbox-1": ("example", "sandbox", ("l4-shared",)),
    **{ns: ("quota", ns, ("h100-80gb",)) for ns in e2e.QUOTA_NAMESPACES},
    **{ns: ("raw", ns, ("h100-80gb",)) for ns in e2e.RAW_NAMESPACES},
    "dra-team": ("dra", "dra", ("h100-dra",)),
    "dra-share": ("dra", "dra-share", ("l40s-share",)),
}


def usage_of(stack, namespaces) -> dict:
    """{(gate, tenant, flavor): used} for the tenants of these namespaces."""
    out = {}
    for ns in namespaces:
        if ns in NAMESPACE_USAGE:
            gate, tenant, flavors = NAMESPACE_USAGE[ns]
            for f in flavors:
                out[(gate, tenant, f)] = stack.gates[gate].quota_used(tenant, f)
    return out


CONTROLLERS = "cronjobs,deployments,statefulsets,daemonsets,replicasets"


def empty_namespaces(stack, namespaces) -> None:
    """Deletes every pod-template controller (Deployment, ..., CronJob),
    Job (with its pods first) and Pod in the namespaces,
    then waits until gpugate counts nothing for their tenants.  A pod bound
    to a node stays Terminating (no kubelet confirms): Terminating pods are
    force-deleted, as the kubelet would once their containers stopped."""
    k = stack.kubectl
    for ns in namespaces:
        k("delete", CONTROLLERS + ",jobs,pods", "--all", "-n", ns, "--cascade=foreground",
          "--wait=false", timeout=120).check()
    for ns in namespaces:
        def empty() -> bool:
            items = k("get", CONTROLLERS + ",jobs,pods", "-n", ns, "-o",
                      "json").json()["items"]
            e2e.force_delete(k, ns, e2e.terminating(items))
            return not items
        e2e.wait_until(f"namespace {ns} to be empty", empty, 120)
    for (gate, tenant, flavor) in usage_of(stack, namespaces):
        stack.gates[gate].wait_used(tenant, 0, flavor)


@pytest.fixture
def clean(stack):
    """clean("research", ...): these namespaces start empty (their tenants'
    usage 0) and are emptied again when the test ends, pass or fail."""
    used: list[str] = []

    def start(*namespaces: str) -> None:
        used.extend(namespaces)
        if any(usage_of(stack, namespaces).values()):
            empty_namespaces(stack, namespaces)

    yield start
    if used:
        empty_namespaces(stack, used)


@pytest.fixture
def files(tmp_path) -> Path:
    """A directory for the manifests a test applies (kubectl apply -f NAME
    runs there, so messages name the file the way users see them)."""
    return tmp_path


@pytest.fixture(scope="module")
def fleet(stack):
    """The example policy's fake GPU fleet (e2e.EXAMPLE_FLEET), Ready, for
    the tests of one module; deleted after them.  Outside it there are no
    nodes, so elsewhere pods stay Pending unless a test binds them."""
    f = e2e.Fleet(stack.kubectl, **e2e.EXAMPLE_FLEET).create()
    try:
        yield f
    finally:
        f.delete()


@pytest.fixture(scope="module")
def dra_fleet(stack):
    """GPUs served through DRA, for the tests of one module
    (e2e.DraFleet): six KWOK nodes h100-80gb-dra-0..5 that look like the
    example policy's H100 nodes (labels, taint) but advertise no
    nvidia.com/gpu, a ResourceSlice of 8 devices each (driver
    gpu.nvidia.com), and DeviceClass gpu.nvidia.com with extendedResourceName
    nvidia.com/gpu (in place of any class of that name, put back after the
    module: test_dra.py makes one without).  Ready once a probe pod has run
    on them through the scheduler's claim."""
    f = e2e.DraFleet(stack.kubectl).create()
    try:
        yield f
    finally:
        f.delete()
