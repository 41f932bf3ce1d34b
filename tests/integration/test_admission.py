"""gpugate as the kube-apiserver uses it: AdmissionReview v1 over HTTPS.

Every /mutate patch is applied with the strict RFC 6902 applier
(jsonpatch_strict) to the object that was sent, as the apiserver does, and
the result goes to /validate the way the apiserver chains the webhooks.
Every user-facing message is asserted verbatim (texts: policy/decide*.c).

Tests that look at quota positions ("2/32 in use") or reserve quota use a
server of their own (fresh_server), so that they do not depend on what other
tests admitted; the shared servers are only sent /validate requests with
dryRun, which reserve nothing.
"""

from __future__ import annotations

import copy

import pytest

from conftest import make_review, new_uid
from jsonpatch_strict import apply
from objects import (BORROWED, CLASS, CONTAINER, DECISION, FLAVOR, GANG, GPU_TOLERATION,
                     GPUS, H100_SELECTOR, PRE_STOP, PREEMPTIBLE, RESEARCH_CLASSES, TENANT,
                     container, env_of, gpu_container, job, pod, pod_meta, pod_of_job,
                     pod_spec)

NOT_REGISTERED = ("it was changed after gpugate's mutation, or the mutating webhook "
                  "is not registered")


def mutate_then_validate(client, obj, *, dry_run=True, **kw):
    """The apiserver's chain: /mutate, apply the patch, /validate the
    result.  Returns (mutate admission, patched object, validate admission)."""
    m = client.admit("mutate", obj, dry_run=dry_run, **kw)
    assert m.allowed, m
    patched = m.patched()
    v = client.admit("validate", patched, dry_run=dry_run, **kw)
    return m, patched, v


def denied(a, message, code=403):
    assert not a.allowed, a
    assert a.code == code, a
    assert a.message == message, f"\n got: {a.message}\nwant: {message}"
    assert a.patch is None


# ---------------------------------------------------------------------------
# the envelope


@pytest.mark.parametrize("endpoint", ["mutate", "validate"])
def test_envelope_echoes_uid_and_types(client, endpoint):
    obj = pod(cls="train-small")
    rv = make_review(obj, dry_run=True, uid="0f6a1c1e-8d7b-4a44-b6a1-3e1d2c9b5f00")
    out = client.review(endpoint, rv)  # check_envelope: apiVersion, kind, uid
    assert out["response"]["uid"] == "0f6a1c1e-8d7b-4a44-b6a1-3e1d2c9b5f00"
    assert set(out) == {"apiVersion", "kind", "response"}


def test_patch_only_when_there_is_something_to_change(client):
    plain = pod(cls=None, labels={"app": "web"})
    a = client.admit("mutate", plain)
    assert a.allowed and "patch" not in a.resp and "patchType" not in a.resp
    assert a.warnings == []


def test_denial_has_status_code_and_message(client):
    a = client.admit("mutate", pod(cls="no-such-class"))
    assert a.allowed is False
    assert a.resp["status"]["code"] == 403
    assert a.resp["status"]["message"].startswith("gpugate: ")
    assert "patch" not in a.resp and "patchType" not in a.resp


def test_validate_never_returns_a_patch(client):
    # An object /mutate would change (forged stamps): /validate must not
    # answer with a patch (the apiserver refuses one from a validating hook).
    obj = pod(cls=None, labels={TENANT: "other"})
    assert client.admit("mutate", obj).patch is not None
    v = client.admit("validate", obj, dry_run=True)
    assert v.allowed and "patch" not in v.resp


# ---------------------------------------------------------------------------
# a class Pod, end to end


def test_class_pod_mutated_then_validated(fresh_server):
    srv = fresh_server()
    with srv.client() as c:
        obj = pod("train-small-1", "research", cls="train-small", gpus="2")
        m = c.admit("mutate", obj)
        assert m.allowed and m.patch, m
        assert m.warnings == []  # the success line comes once, from /validate
        p = apply(obj, m.patch)

        ct = gpu_container(p)
        assert ct["resources"]["limits"] == {"nvidia.com/gpu": "2"}
        assert ct["resources"]["requests"] == {"cpu": "12", "memory": "120Gi"}
        assert p["spec"]["nodeSelector"] == H100_SELECTOR
        assert p["spec"]["tolerations"] == [GPU_TOLERATION]
        labels = p["metadata"]["labels"]
        assert labels[TENANT] == "research"
        assert labels[FLAVOR] == "h100-80gb"
        assert labels[PREEMPTIBLE] == "true"
        assert labels[CLASS] == "train-small" and labels[GPUS] == "2"
        assert GANG not in labels  # a bare pod is no gang
        ann = p["metadata"]["annotations"]
        assert ann[DECISION] == "train-small: 2 x h100-80gb for tenant research; 2/32 in use"
        assert BORROWED not in ann
        # checkpoint hooks (train-small is preemptible)
        env = env_of(ct)
        assert env["GPUGATE_PREEMPTIBLE"] == "1"
        assert env["GPUGATE_CHECKPOINT_DIR"] == "/checkpoint"
        assert {"name": "gpugate-checkpoint", "mountPath": "/checkpoint"} in ct["volumeMounts"]
        assert {"name": "gpugate-checkpoint",
                "persistentVolumeClaim": {"claimName": "research-checkpoints"}} in p["spec"]["volumes"]
        assert ct["lifecycle"]["preStop"] == {"exec": {"command": PRE_STOP}}
        assert p["spec"]["terminationGracePeriodSeconds"] == 600
        assert "priorityClassName" not in p["spec"]  # train-small names none
        # the rest is untouched
        assert p["metadata"]["name"] == "train-small-1"
        assert ct["image"] == obj["spec"]["containers"][0]["image"]

        v = c.admit("validate", p)
        assert v.allowed, v
        assert v.warnings == [
            "gpugate: train-small -> 2 x h100-80gb for tenant research (2/32 in use)"]
        assert len(v.warnings[0]) < 120

        again = c.admit("mutate", p)
        assert again.allowed and again.patch is None, again


@pytest.mark.parametrize("cls, ns, resource, count, selector, preemptible, extra", [
    ("train-large", "research", "nvidia.com/gpu", "8", H100_SELECTOR, False,
     {"priorityClassName": "training"}),
    ("train-small", "research", "nvidia.com/gpu", "1", H100_SELECTOR, True, {}),
    ("dev-shared", "research", "nvidia.com/gpu.shared", "1",
     {"nvidia.com/gpu.product": "NVIDIA-L4"}, True, {}),
    ("inference-mig", "product-inference", "nvidia.com/mig-1g.10gb", "1",
     {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/mig.strategy": "mixed"},
     False, {}),
    ("inference-mig-large", "product-staging", "nvidia.com/mig-3g.40gb", "1",
     {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/mig.strategy": "mixed"},
     False, {}),
    ("dev-shared", "sandbox-alice", "nvidia.com/gpu.shared", "1",
     {"nvidia.com/gpu.product": "NVIDIA-L4"}, True, {}),
])
def test_every_class_of_the_example(client, cls, ns, resource, count, selector,
                                    preemptible, extra):
    m, p, v = mutate_then_validate(client, pod("p", ns, cls=cls))
    ct = gpu_container(p)
    assert ct["resources"]["limits"] == {resource: count}
    assert p["spec"]["nodeSelector"] == selector
    assert p["spec"]["tolerations"] == [GPU_TOLERATION]
    for k, val in extra.items():
        assert p["spec"][k] == val
    assert (p["metadata"]["labels"].get(PREEMPTIBLE) == "true") == preemptible
    assert ("GPUGATE_PREEMPTIBLE" in env_of(ct)) == preemptible
    assert v.allowed, v
    assert len(v.warnings) == 1 and v.warnings[0].startswith(f"gpugate: {cls} -> {count} x ")
    assert client.admit("mutate", p).patch is None


def test_priority_class_replaces_resolved_priority(client):
    # The apiserver resolved spec.priority (0) before the webhook ran; a new
    # priorityClassName must not leave a priority that disagrees with it.
    obj = pod(cls="train-large", priority=0, preemptionPolicy="PreemptLowerPriority")
    m = client.admit("mutate", obj)
    p = m.patched()
    assert p["spec"]["priorityClassName"] == "training"
    assert "priority" not in p["spec"]
    # A pod that names its own priority class keeps it.
    own = pod(cls="train-large", priorityClassName="urgent", priority=1000)
    p2 = client.admit("mutate", own).patched()
    assert p2["spec"]["priorityClassName"] == "urgent" and p2["spec"]["priority"] == 1000


# ---------------------------------------------------------------------------
# parents created first, nothing clobbered


def test_mutation_creates_every_missing_parent(client):
    # no labels map, no annotations, no resources, no env, no nodeSelector,
    # no tolerations, no volumes, no volumeMounts, no lifecycle
    obj = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "bare", "namespace": "research",
                        "labels": {CLASS: "train-small"}},
           "spec": {"containers": [{"name": "main", "image": "busybox"}]}}
    # ...and with the class on a Pod that has not even a labels map other
    # than the class (checked above); now remove every optional map:
    p = client.admit("mutate", obj).patched()  # strict applier raises on a bad parent
    ct = gpu_container(p)
    assert ct["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert p["metadata"]["annotations"][DECISION].startswith("train-small: 1 x h100-80gb")
    assert p["spec"]["nodeSelector"] == H100_SELECTOR
    assert p["spec"]["tolerations"] == [GPU_TOLERATION]
    assert [v["name"] for v in p["spec"]["volumes"]] == ["gpugate-checkpoint", "gpugate-signal"]
    assert p["spec"]["volumes"][1]["downwardAPI"] == {"items": [{
        "path": "checkpoint-requested",
        "fieldRef": {"fieldPath": "metadata.annotations['gpugate.io/checkpoint-requested']"}}]}
    assert ct["volumeMounts"] == [
        {"name": "gpugate-checkpoint", "mountPath": "/checkpoint"},
        {"name": "gpugate-signal", "mountPath": "/etc/gpugate/signal", "readOnly": True}]
    assert env_of(ct) == {"GPUGATE_CHECKPOINT_DIR": "/checkpoint", "GPUGATE_PREEMPTIBLE": "1",
                          "GPUGATE_CHECKPOINT_SIGNAL": "/etc/gpugate/signal/checkpoint-requested"}


def test_mutation_with_explicit_nulls_and_empty_maps(client):
    obj = pod(cls="train-small", annotations={},
              containers=[container(env=[], volumeMounts=[], resources={})],
              nodeSelector={}, tolerations=[], volumes=[])
    p = client.admit("mutate", obj).patched()
    assert gpu_container(p)["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert p["spec"]["tolerations"] == [GPU_TOLERATION]


def test_mutation_preserves_what_the_user_wrote(client):
    user_tol = {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}
    obj = pod("keep", "research-team-a", labels={"app": "trainer", "a/b~c": "x"},
              annotations={"team": "vision", "a/b~c": "y"}, cls="train-small",
              containers=[
                  container("main",
                            env=[{"name": "USER_VAR", "value": "1"},
                                 {"name": "FROM_SECRET", "valueFrom": {
                                     "secretKeyRef": {"name": "s", "key": "k"}}}],
                            resources={"requests": {"cpu": "4"},
                                       "limits": {"memory": "64Gi"}},
                            volumeMounts=[{"name": "data", "mountPath": "/data"}]),
                  container("sidecar", image="busybox",
                            env=[{"name": "GPUGATE_PREEMPTIBLE", "value": "mine"}]),
              ],
              nodeSelector={"topology.kubernetes.io/zone": "eu-1a"},
              tolerations=[user_tol, dict(GPU_TOLERATION)],
              volumes=[{"name": "data", "emptyDir": {}}],
              terminationGracePeriodSeconds=900)
    p = client.admit("mutate", obj).patched()
    meta, spec = p["metadata"], p["spec"]
    main, side = spec["containers"]
    assert meta["labels"]["app"] == "trainer" and meta["labels"]["a/b~c"] == "x"
    assert meta["annotations"]["team"] == "vision" and meta["annotations"]["a/b~c"] == "y"
    assert spec["nodeSelector"] == {"topology.kubernetes.io/zone": "eu-1a", **H100_SELECTOR}
    assert spec["tolerations"] == [user_tol, GPU_TOLERATION]  # no duplicate
    assert spec["volumes"][0] == {"name": "data", "emptyDir": {}}
    assert [v["name"] for v in spec["volumes"]] == ["data", "gpugate-checkpoint",
                                                    "gpugate-signal"]
    assert spec["terminationGracePeriodSeconds"] == 600  # the policy's, a longer one cut (#26)
    # the user's cpu request and memory limit win over the class's
    assert main["resources"]["requests"] == {"cpu": "4"}
    assert main["resources"]["limits"] == {"memory": "64Gi", "nvidia.com/gpu": "1"}
    assert main["env"][:2] == obj["spec"]["containers"][0]["env"]
    assert env_of(main)["GPUGATE_PREEMPTIBLE"] == "1"
    assert main["volumeMounts"][0] == {"name": "data", "mountPath": "/data"}
    # every app container gets the env and the mount; the user's value stays
    assert env_of(side)["GPUGATE_PREEMPTIBLE"] == "mine"
    assert env_of(side)["GPUGATE_CHECKPOINT_DIR"] == "/checkpoint"
    assert {"name": "gpugate-checkpoint", "mountPath": "/checkpoint"} in side["volumeMounts"]
    assert {"name": "gpugate-signal", "mountPath": "/etc/gpugate/signal",
            "readOnly": True} in side["volumeMounts"]
    assert env_of(side)["GPUGATE_CHECKPOINT_SIGNAL"] == "/etc/gpugate/signal/checkpoint-requested"
    assert "resources" not in side
    assert "lifecycle" not in side  # preStop only on the GPU container
    v = client.admit("validate", p, dry_run=True)
    assert v.allowed, v


def test_own_prestop_is_kept_with_a_warning(client):
    own = {"exec": {"command": ["/save.sh"]}}
    obj = pod(cls="train-small", containers=[container(lifecycle={"preStop": own})])
    m = client.admit("mutate", obj)
    assert m.patched()["spec"]["containers"][0]["lifecycle"]["preStop"] == own
    assert m.warnings == ['gpugate: container "main" keeps its own preStop hook; '
                          'make sure it checkpoints within 600s']


def test_gpu_container_named_by_annotation(client):
    obj = pod(cls="train-small", annotations={CONTAINER: "trainer"},
              containers=[container("proxy", image="envoy"), container("trainer")])
    p = client.admit("mutate", obj).patched()
    proxy, trainer = p["spec"]["containers"]
    assert trainer["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert "nvidia.com/gpu" not in (proxy.get("resources") or {}).get("limits", {})
    assert trainer["lifecycle"]["preStop"] == {"exec": {"command": PRE_STOP}}
    assert "lifecycle" not in proxy
    assert client.admit("validate", p, dry_run=True).allowed


def test_request_equal_to_limit_is_kept_in_step(client):
    # An extended resource's request must equal its limit; what the user
    # wrote, when it is the class's count, stays as it is.
    obj = pod(cls="train-small", gpus="3",
              containers=[container(resources={"requests": {"nvidia.com/gpu": "3"},
                                               "limits": {"nvidia.com/gpu": "3"}})])
    p = client.admit("mutate", obj).patched()
    res = gpu_container(p)["resources"]
    assert res["limits"]["nvidia.com/gpu"] == "3" and res["requests"]["nvidia.com/gpu"] == "3"
    assert client.admit("validate", p, dry_run=True).allowed


def test_a_user_count_other_than_the_class_is_denied_with_both_numbers(client):
    # gpugate never replaces what the user wrote without a word (#13).
    obj = pod(cls="train-small", gpus="3",
              containers=[container(resources={"requests": {"nvidia.com/gpu": "1"},
                                               "limits": {"nvidia.com/gpu": "1"}})])
    r = client.admit("mutate", obj)
    assert not r.allowed
    assert r.message == ('gpugate: container "main" asks for 1 nvidia.com/gpu but class '
                         'train-small gives 3: remove that request, or set label '
                         'gpugate.io/gpus: "1"'), r.message
    obj = pod(cls="train-small",
              containers=[container(resources={"limits": {"nvidia.com/gpu": "64"}})])
    r = client.admit("mutate", obj)
    assert not r.allowed and "64 nvidia.com/gpu" in r.message and "at most" in r.message, r.message


# ---------------------------------------------------------------------------
# Jobs


def test_gang_job_with_topology_and_its_pods(fresh_server):
    srv = fresh_server()
    with srv.client() as c:
        obj = job("llm-pretrain", "research", labels={CLASS: "train-large"}, parallelism=4)
        m = c.admit("mutate", obj)
        assert m.allowed and m.patch, m
        j = apply(obj, m.patch)
        tm, ts = pod_meta(j), pod_spec(j)
        gang = tm["labels"][GANG]
        assert gang.startswith("g-") and len(gang) == 18
        assert ts["affinity"] == {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {GANG: gang}},
             "topologyKey": "nvidia.com/gpu.clique"}]}}
        assert tm["labels"][CLASS] == "train-large"  # copied to the template
        assert tm["labels"][TENANT] == "research" and tm["labels"][FLAVOR] == "h100-80gb"
        assert j["metadata"]["labels"][TENANT] == "research"
        assert j["metadata"]["labels"][FLAVOR] == "h100-80gb"
        assert j["metadata"]["labels"][CLASS] == "train-large"
        assert ts["containers"][0]["resources"] == {
            "limits": {"nvidia.com/gpu": "8"}, "requests": {"cpu": "96", "memory": "1000Gi"}}
        assert ts["priorityClassName"] == "training"
        assert ts["nodeSelector"] == H100_SELECTOR and ts["tolerations"] == [GPU_TOLERATION]
        assert PREEMPTIBLE not in tm["labels"] and "podFailurePolicy" not in j["spec"]
        assert tm["annotations"][DECISION] == (
            "train-large: 4 pods x 8 x h100-80gb for tenant research; 32/32 in use")

        # At /validate the apiserver has given the Job its uid; its pods
        # point at it, and are admitted against the Job's reservation.
        j["metadata"]["uid"] = new_uid()
        v = c.admit("validate", j)
        assert v.allowed, v
        assert v.warnings == [
            "gpugate: train-large -> 4 pods x 8 x h100-80gb for tenant research (32/32 in use)"]
        assert c.admit("mutate", j).patch is None  # idempotent

        # The Job controller now creates the pods from the mutated template.
        for i in range(2):
            p = pod_of_job(j, i)
            pm = c.admit("mutate", p, name="")
            assert pm.allowed, pm
            pv = c.admit("validate", pm.patched(), name="")
            assert pv.allowed, pv


def test_pods_of_a_mutated_job_are_not_patched_again(fresh_server):
    srv = fresh_server()
    with srv.client() as c:
        obj = job("llm-pretrain", "research", labels={CLASS: "train-large"}, parallelism=4)
        j = c.admit("mutate", obj).patched()
        j["metadata"]["uid"] = new_uid()  # given by the apiserver before /validate
        assert c.admit("validate", j).allowed
        p = pod_of_job(j, 0)
        pm = c.admit("mutate", p, name="")
        assert pm.allowed, pm
        assert pm.patch is None, f"a pod of a mutated Job was patched again: {pm.patch}"


def test_pod_of_a_job_keeps_the_gang_id(client):
    j = client.admit("mutate", job("gang", labels={CLASS: "train-large"}, parallelism=2)).patched()
    p = pod_of_job(j)
    got = apply(p, client.admit("mutate", p, name="").patch or [])
    assert got["metadata"]["labels"][GANG] == pod_meta(j)["labels"][GANG]
    assert got["spec"]["affinity"] == pod_spec(j)["affinity"]


def test_job_with_class_on_the_template_only(client):
    obj = job("tmpl", template_labels={CLASS: "train-small", GPUS: "2"})
    j = client.admit("mutate", obj).patched()
    assert gpu_container(j)["resources"]["limits"] == {"nvidia.com/gpu": "2"}
    assert j["metadata"]["labels"][TENANT] == "research"
    assert "affinity" not in pod_spec(j)  # parallelism 1: no topology rule
    assert client.admit("validate", j, dry_run=True).allowed


def test_class_conflict_between_job_and_template(client):
    obj = job("x", labels={CLASS: "train-large"}, template_labels={CLASS: "train-small"})
    denied(client.admit("mutate", obj),
           'gpugate: the Job asks for class "train-large" but its pod template asks for '
           'class "train-small"; use one')


DISRUPTION_RULE = {"action": "Ignore",
                   "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}


def test_preemptible_job_gets_a_pod_failure_policy(client):
    obj = job("ft", labels={CLASS: "train-small"}, restart_policy="Never")
    m = client.admit("mutate", obj)
    j = m.patched()
    assert j["spec"]["podFailurePolicy"] == {"rules": [DISRUPTION_RULE]}
    assert pod_meta(j)["labels"][PREEMPTIBLE] == "true"
    assert pod_spec(j)["terminationGracePeriodSeconds"] == 600
    assert m.warnings == []
    assert client.admit("mutate", j).patch is None
    assert client.admit("validate", j, dry_run=True).allowed


def test_preemptible_job_rule_appended_to_existing_policy(client):
    own = {"action": "FailJob",
           "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}}
    obj = job("ft2", labels={CLASS: "train-small"}, pod_failure_policy={"rules": [own]})
    j = client.admit("mutate", obj).patched()
    assert j["spec"]["podFailurePolicy"] == {"rules": [own, DISRUPTION_RULE]}
    assert client.admit("mutate", j).patch is None


def test_preemptible_job_with_restart_on_failure_is_warned(client):
    obj = job("ft3", labels={CLASS: "train-small"}, restart_policy="OnFailure")
    m = client.admit("mutate", obj)
    j = m.patched()
    assert "podFailurePolicy" not in j["spec"]
    assert m.warnings == [
        "gpugate: restartPolicy OnFailure lets preemptions count against backoffLimit; "
        "use restartPolicy Never so that gpugate can add a podFailurePolicy"]
    assert all(len(w) < 256 for w in m.warnings)


def test_job_that_can_never_fit(client):
    # 8 x 8 = 64 > nominal 32 + min(borrowing limit 16, product lends 8)
    obj = job("huge", labels={CLASS: "train-large"}, parallelism=8)
    denied(client.admit("mutate", obj),
           'gpugate: job can never be admitted: needs 64 h100-80gb (parallelism 8 x 8), '
           'tenant "research" may hold at most 40 (nominal 32 + 8 that cohort "lab" can lend)')


def test_pod_that_can_never_fit(custom_client):
    # tenant strict: 8 in no cohort; a pod of 5 fits, a Job of 3 x 4 never does
    denied(custom_client.admit("mutate", job("j", "strict", labels={CLASS: "train-small", GPUS: "4"},
                                              parallelism=3)),
           'gpugate: job can never be admitted: needs 12 h100-80gb (parallelism 3 x 4), '
           'tenant "strict" may hold at most 8 (nominal 8)')


# ---------------------------------------------------------------------------
# denials, verbatim


def test_unknown_class(client):
    denied(client.admit("mutate", pod(cls="train-huge")),
           f'gpugate: unknown GPU class "train-huge"; tenant "research" may use: '
           f'{RESEARCH_CLASSES}')


def test_class_not_allowed_for_tenant(client):
    denied(client.admit("mutate", pod(cls="inference-mig")),
           f'gpugate: class "inference-mig" is not allowed for tenant "research"; '
           f'allowed: {RESEARCH_CLASSES}')


def test_namespace_without_tenant(client):
    denied(client.admit("mutate", pod(namespace="default", cls="train-small")),
           'gpugate: namespace "default" belongs to no tenant, so it cannot use GPU class '
           '"train-small"; ask the platform team to add it to a tenant in the gpugate policy')


def test_namespace_without_tenant_raw_request(client):
    obj = pod(namespace="kube-system",
              containers=[container(resources={"limits": {"nvidia.com/gpu": "1"}})])
    denied(client.admit("mutate", obj),
           'gpugate: namespace "kube-system" belongs to no tenant, so it cannot use '
           'nvidia.com/gpu; ask the platform team to add it to a tenant in the gpugate policy')


@pytest.mark.parametrize("value", ["9", "abc", "0", "-1", "02", "1.5", ""])
def test_gpus_label_out_of_range(client, value):
    denied(client.admit("mutate", pod(cls="train-small", gpus=value)),
           f'gpugate: label gpugate.io/gpus="{value}" must be a whole number from 1 to 4 '
           f'for class train-small')


def test_gpus_label_without_max_gpus(client):
    # train-large has no maxGpus: it defaults to gpus (docs/policy.md), 1..8
    denied(client.admit("mutate", pod(cls="train-large", gpus="9")),
           'gpugate: label gpugate.io/gpus="9" must be a whole number from 1 to 8 '
           'for class train-large')
    p = client.admit("mutate", pod(cls="train-large", gpus="4")).patched()
    assert gpu_container(p)["resources"]["limits"] == {"nvidia.com/gpu": "4"}


def test_sharing_mode_not_allowed(custom_client):
    denied(custom_client.admit("mutate", pod(namespace="noshare", cls="dev-shared")),
           'gpugate: class "dev-shared" uses time-slicing GPUs, which tenant "noshare" may '
           'not use (allowed sharing: exclusive)')


def test_raw_sharing_mode_not_allowed(custom_client):
    obj = pod(namespace="noshare",
              containers=[container(resources={"limits": {"nvidia.com/gpu.shared": "1"}})])
    denied(custom_client.admit("mutate", obj),
           'gpugate: nvidia.com/gpu.shared is a time-slicing GPU resource, which tenant '
           '"noshare" may not use (allowed sharing: exclusive)')


@pytest.mark.parametrize("where", ["limits", "requests"])
def test_raw_gpu_request_without_class(client, where):
    obj = pod(containers=[container(resources={where: {"nvidia.com/gpu": "2"}})])
    denied(client.admit("mutate", obj),
           'gpugate: this workload asks for nvidia.com/gpu directly; request GPUs with a '
           f'class instead: set label gpugate.io/class to one of: {RESEARCH_CLASSES}')


def test_raw_gpu_request_in_init_container(client):
    obj = pod(initContainers=[container("init", resources={"limits": {"nvidia.com/mig-1g.10gb": "1"}})],
              namespace="product-inference")
    denied(client.admit("mutate", obj),
           'gpugate: this workload asks for nvidia.com/mig-1g.10gb directly; request GPUs '
           'with a class instead: set label gpugate.io/class to one of: train-small, '
           'inference-mig, inference-mig-large')  # in the policy's class order


def test_raw_gpu_request_allowed_by_policy(custom_client):
    obj = pod(namespace="strict",
              containers=[container(resources={"limits": {"nvidia.com/gpu": "2"}})])
    m = custom_client.admit("mutate", obj)
    assert m.allowed, m
    # Charged to quota, so stamped like a class workload (decide.c plan_raw).
    p = m.patched()
    assert gpu_container(p)["resources"] == {"limits": {"nvidia.com/gpu": "2"}}
    assert p["metadata"]["labels"][TENANT] == "strict"
    assert p["metadata"]["labels"][FLAVOR] == "h100-80gb"
    assert p["metadata"]["annotations"][DECISION].startswith(
        "no class: 2 x h100-80gb (nvidia.com/gpu) for tenant strict; ")
    assert "nodeSelector" not in p["spec"]  # no class: nothing is mapped
    assert custom_client.admit("mutate", p).patch is None
    assert custom_client.admit("validate", p, dry_run=True).allowed


def test_two_flavors_in_one_pod(client):
    obj = pod(cls="train-small", containers=[
        container("main"),
        container("side", resources={"limits": {"nvidia.com/gpu.shared": "1"}})])
    denied(client.admit("mutate", obj),
           'gpugate: container "side" asks for nvidia.com/gpu.shared, but class train-small '
           'gives this pod h100-80gb (nvidia.com/gpu) only: remove that request')


def test_second_container_asking_for_the_class_resource(client):
    obj = pod(cls="train-small", containers=[
        container("main"),
        container("side", resources={"limits": {"nvidia.com/gpu": "1"}})])
    denied(client.admit("mutate", obj),
           'gpugate: container "side" also asks for nvidia.com/gpu; with class train-small '
           'only container "main" gets accelerators: remove that request or name it in '
           'annotation gpugate.io/container')


def test_two_raw_flavors(custom_client):
    obj = pod(namespace="strict", containers=[
        container("a", resources={"limits": {"nvidia.com/gpu": "1"}}),
        container("b", resources={"limits": {"nvidia.com/gpu.shared": "1"}})])
    denied(custom_client.admit("mutate", obj),
           'gpugate: this workload asks for resources of two flavors (nvidia.com/gpu and '
           'nvidia.com/gpu.shared); a pod may use one flavor only')


def test_privileged_gpu_container(client):
    obj = pod(cls="train-small", containers=[container(securityContext={"privileged": True})])
    denied(client.admit("mutate", obj),
           'gpugate: container "main" is privileged; a privileged GPU container bypasses '
           "the device plugin's isolation: remove securityContext.privileged")


def reaches(why: str) -> str:
    return f"and the pod can reach GPU nodes ({why})"


PRIVILEGED_FIX = ("a privileged container sees every GPU on the node: remove "
                  "securityContext.privileged")


def test_privileged_sidecar_of_a_class_pod(client):
    # The sidecar gets no GPUs, but privileged on a GPU node it sees them all.
    obj = pod(cls="train-small", containers=[
        container("main"), container("net", securityContext={"privileged": True})])
    msg = (f'gpugate: container "net" is privileged {reaches("it asks for class train-small")}; '
           + PRIVILEGED_FIX)
    denied(client.admit("mutate", obj), msg)
    native = pod(cls="train-small", containers=[container("main")], initContainers=[
        container("proxy", restartPolicy="Always", securityContext={"privileged": True})])
    denied(client.admit("mutate", native),
           f'gpugate: init container "proxy" is privileged '
           f'{reaches("it asks for class train-small")}; ' + PRIVILEGED_FIX)


@pytest.mark.parametrize("ns", ["research", "default"])
def test_privileged_pod_that_tolerates_the_gpu_taint(client, ns):
    # No class, no GPU request, and in "default" no tenant: the toleration
    # lets it onto GPU nodes.
    obj = pod("agent", ns, containers=[container("agent", securityContext={"privileged": True})],
              tolerations=[dict(GPU_TOLERATION)])
    msg = (f'gpugate: container "agent" is privileged '
           f'{reaches("it tolerates the nvidia.com/gpu taint of flavor h100-80gb")}; '
           + PRIVILEGED_FIX)
    if ns == "default":  # no tenant's: it may be a cluster component (#27)
        msg += exempt_hint("default")
    denied(client.admit("mutate", obj), msg)
    denied(client.admit("validate", obj, dry_run=True), msg)
    # Another taint: it cannot reach GPU nodes, privileged is its business.
    obj["spec"]["tolerations"] = [{"key": "node-role.kubernetes.io/infra",
                                   "operator": "Exists", "effect": "NoSchedule"}]
    assert client.admit("mutate", obj).allowed
    assert client.admit("validate", obj, dry_run=True).allowed


def test_privileged_pod_that_selects_gpu_nodes_outside_tenants(client):
    obj = pod("agent", "default",
              containers=[container("agent", securityContext={"privileged": True})],
              nodeSelector={"nvidia.com/gpu.product": "NVIDIA-L4"})
    denied(client.admit("mutate", obj),
           f'gpugate: container "agent" is privileged '
           f'{reaches("its nodeSelector nvidia.com/gpu.product=NVIDIA-L4 selects flavor l4-shared")}'
           '; ' + PRIVILEGED_FIX + exempt_hint("default"))
    obj["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": "none"}
    assert client.admit("mutate", obj).allowed


def exempt_hint(ns: str, sa: str = "default") -> str:
    """What a security denial adds in a namespace of no tenant."""
    return ("; if this is a cluster component (the GPU Operator's, NVSentinel's, a DCGM "
            f'exporter), exempt it: settings.exemptions.namespaces ["{ns}"] or '
            f'serviceAccounts ["{ns}/{sa}"] (docs/policy.md, "exemptions")')


def env_from_message(who: str, source: str, prefix: str | None, why: str) -> str:
    pre = f'with prefix "{prefix}"' if prefix else "without a prefix"
    return (f'gpugate: {who} takes env from {source} {pre} '
            f'{reaches(why)}; its keys could make variables that start with NVIDIA_, such as '
            "NVIDIA_VISIBLE_DEVICES, which bypasses the device plugin's GPU isolation: set a "
            "prefix that does not start with NVIDIA_ (e.g. prefix: APP_)")


def test_env_from_that_could_set_nvidia_variables(client):
    for prefix in (None, "NV", "NVIDIA_", "NVIDIA_X"):
        src = {"configMapRef": {"name": "trainer-env"}}
        if prefix is not None:
            src["prefix"] = prefix
        obj = pod(cls="train-small", containers=[container(envFrom=[src])])
        denied(client.admit("mutate", obj),
               env_from_message('container "main"', 'configMap "trainer-env"', prefix,
                                "it asks for class train-small"))
    obj = pod(cls="train-small", containers=[container(envFrom=[
        {"secretRef": {"name": "creds"}, "prefix": "APP_"},
        {"configMapRef": {"name": "trainer-env"}, "prefix": "TRAINER_"}])])
    m, p, v = mutate_then_validate(client, obj)
    assert v.allowed, v
    # A pod that cannot reach GPU nodes keeps what it had before.
    plain = pod(containers=[container(envFrom=[{"secretRef": {"name": "creds"}}])])
    assert client.admit("mutate", plain).allowed


def test_nvidia_mig_monitor_devices(client):
    obj = pod(cls="inference-mig", namespace="product-inference",
              containers=[container(env=[{"name": "NVIDIA_MIG_MONITOR_DEVICES", "value": "all"}])])
    denied(client.admit("mutate", obj),
           'gpugate: container "main" sets NVIDIA_MIG_MONITOR_DEVICES, which bypasses the device '
           "plugin's GPU isolation: remove it and ask for GPUs with a class")


@pytest.mark.parametrize("var", ["NVIDIA_VISIBLE_DEVICES", "NVIDIA_MIG_CONFIG_DEVICES"])
def test_nvidia_env_in_gpu_container(client, var):
    obj = pod(cls="train-small", containers=[container(env=[{"name": var, "value": "all"}])])
    denied(client.admit("mutate", obj),
           f'gpugate: container "main" sets {var}, which bypasses the device plugin\'s GPU '
           f'isolation: remove it and ask for GPUs with a class')


def test_nvidia_env_in_plain_pod_of_a_tenant(client):
    # no class, no GPU request: NVIDIA_VISIBLE_DEVICES=all still reaches GPUs
    obj = pod(containers=[container("sneaky", env=[{"name": "NVIDIA_VISIBLE_DEVICES",
                                                    "value": "all"}])])
    denied(client.admit("mutate", obj),
           'gpugate: container "sneaky" sets NVIDIA_VISIBLE_DEVICES, which bypasses the '
           "device plugin's GPU isolation: remove it and ask for GPUs with a class")
    hidden = pod(containers=[container(env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}])])
    assert client.admit("mutate", hidden).allowed


def test_host_path_nvidia_device(client):
    obj = pod(cls="train-small",
              containers=[container(volumeMounts=[{"name": "dev", "mountPath": "/dev/nvidia0"}])],
              volumes=[{"name": "dev", "hostPath": {"path": "/dev/nvidia0"}}])
    denied(client.admit("mutate", obj),
           'gpugate: container "main" mounts host path /dev/nvidia0 (volume "dev"), which '
           "bypasses the device plugin's GPU isolation: remove the hostPath volume")


@pytest.mark.parametrize("path", [
    "/dev/nvidia0",
    "/dev/nvidiactl",
    "/dev",
    "//dev/nvidia0",
    "/dev/./nvidia0",
    "/dev/.",
])
def test_host_path_device_spellings(client, path):
    # The apiserver only refuses ".." in a hostPath: "//dev/nvidia0" and
    # "/dev/./nvidia0" pass its validation and the kubelet mounts the device.
    obj = pod(cls="train-small",
              containers=[container(volumeMounts=[{"name": "dev", "mountPath": "/mnt/dev"}])],
              volumes=[{"name": "dev", "hostPath": {"path": path}}])
    denied(client.admit("mutate", obj),
           f'gpugate: container "main" mounts host path {path} (volume "dev"), which '
           "bypasses the device plugin's GPU isolation: remove the hostPath volume")


def test_conflicting_node_selector(client):
    obj = pod(cls="train-small", nodeSelector={"nvidia.com/gpu.product": "NVIDIA-L4"})
    denied(client.admit("mutate", obj),
           'gpugate: nodeSelector nvidia.com/gpu.product=NVIDIA-L4 conflicts with flavor '
           'h100-80gb, which needs nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3: remove it, '
           'the class chooses the nodes')


def test_unknown_container_named_by_annotation(client):
    obj = pod(cls="train-small", annotations={CONTAINER: "gpu"},
              containers=[container("main"), container("sidecar")])
    denied(client.admit("mutate", obj),
           'gpugate: annotation gpugate.io/container names container "gpu", but the pod has '
           'no such container (containers: main, sidecar)')


def test_denials_are_the_same_at_validate(client):
    obj = pod(cls="inference-mig")
    a = client.admit("validate", obj, dry_run=True)
    denied(a, f'gpugate: class "inference-mig" is not allowed for tenant "research"; '
              f'allowed: {RESEARCH_CLASSES}')


# ---------------------------------------------------------------------------
# forged stamps


def test_forged_stamps_removed_from_plain_pod(client):
    obj = pod(labels={"app": "web", TENANT: "other", FLAVOR: "h100-80gb", GANG: "g-0000000000000000",
                      PREEMPTIBLE: "false"},
              annotations={BORROWED: "5", DECISION: "approved by me", "keep": "me"})
    m = client.admit("mutate", obj)
    assert m.allowed and m.patch, m
    p = m.patched()
    assert p["metadata"]["labels"] == {"app": "web"}
    assert p["metadata"]["annotations"] == {"keep": "me"}
    assert client.admit("mutate", p).patch is None


def test_forged_stamps_removed_outside_tenants(client):
    obj = pod(namespace="default", labels={TENANT: "research"}, annotations={BORROWED: "8"})
    p = client.admit("mutate", obj).patched()
    assert TENANT not in p["metadata"]["labels"] and BORROWED not in p["metadata"]["annotations"]


def test_forged_stamps_overwritten_on_class_pod(client):
    obj = pod(cls="train-large", labels={TENANT: "product", FLAVOR: "l4-shared",
                                         GANG: "g-0123456789abcdef"},
              annotations={BORROWED: "7", DECISION: "train-large: free"})
    p = client.admit("mutate", obj).patched()
    labels, ann = p["metadata"]["labels"], p["metadata"]["annotations"]
    assert labels[TENANT] == "research" and labels[FLAVOR] == "h100-80gb"
    assert GANG not in labels  # a bare pod is no gang
    assert BORROWED not in ann
    assert ann[DECISION].startswith("train-large: 8 x h100-80gb for tenant research; ")


def test_forged_stamps_removed_in_warn_mode_when_class_is_not_mapped(client):
    # sandbox-* is a warn-mode tenant of the example policy
    obj = pod("x", "sandbox-bob", cls="train-large",
              labels={TENANT: "research", FLAVOR: "h100-80gb", GANG: "g-0123456789abcdef"},
              annotations={BORROWED: "8", DECISION: "train-large: ok"})
    m = client.admit("mutate", obj)
    assert m.allowed, m
    p = m.patched()
    labels, ann = p["metadata"]["labels"], p["metadata"].get("annotations", {})
    assert labels.get(TENANT) in (None, "sandbox"), labels
    assert BORROWED not in ann, ann
    assert ann.get(DECISION, "").startswith("warn: "), ann


def test_forged_stamps_on_a_job(client):
    obj = job("forge", labels={CLASS: "train-small", TENANT: "product"},
              template_labels={TENANT: "product"})
    j = client.admit("mutate", obj).patched()
    assert j["metadata"]["labels"][TENANT] == "research"
    assert pod_meta(j)["labels"][TENANT] == "research"


# ---------------------------------------------------------------------------
# /validate on objects that did not go through /mutate


def test_validate_unmutated_pod_without_node_selector(client):
    denied(client.admit("validate", pod(cls="train-small"), dry_run=True),
           'gpugate: the pod lacks nodeSelector nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3 '
           f'of flavor h100-80gb: {NOT_REGISTERED}')


def test_validate_unmutated_pod_without_resources(client):
    obj = pod(cls="train-small", nodeSelector=dict(H100_SELECTOR))
    denied(client.admit("validate", obj, dry_run=True),
           'gpugate: container "main" has nvidia.com/gpu none but class train-small gives 1: '
           f'{NOT_REGISTERED}')


def test_validate_pod_changed_after_mutation(client):
    p = client.admit("mutate", pod(cls="train-small", gpus="2")).patched()
    p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "4"
    denied(client.admit("validate", p, dry_run=True),
           'gpugate: container "main" has nvidia.com/gpu 4 but class train-small gives 2: '
           f'{NOT_REGISTERED}')


# ---------------------------------------------------------------------------
# what gpugate leaves alone


def test_other_kinds_are_allowed_untouched(client):
    cm = {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": "cfg", "namespace": "research", "labels": {TENANT: "x"}},
          "data": {"a": "b"}}
    # A ControllerRevision holds a pod template too, but runs nothing.
    rev = {"apiVersion": "apps/v1", "kind": "ControllerRevision",
           "metadata": {"name": "d-1", "namespace": "research"}, "revision": 1,
           "data": {"spec": {"template": {"metadata": {"labels": {CLASS: "inference-mig"}},
                                          "spec": {"containers": [container()]}}}}}
    for obj in (cm, rev):
        for ep in ("mutate", "validate"):
            a = client.admit(ep, obj, dry_run=ep == "validate")
            assert a.allowed and a.patch is None and a.warnings == [], a


def test_a_deployments_pod_template_is_judged(client):
    """Since #18 a Deployment is judged at the door like a Job (its pods
    still are, one by one): here its class is not the tenant's."""
    dep = {"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "d", "namespace": "research"},
           "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "d"}},
                    "template": {"metadata": {"labels": {"app": "d", CLASS: "inference-mig"}},
                                 "spec": {"containers": [container()]}}}}
    for ep in ("mutate", "validate"):
        a = client.admit(ep, dep, dry_run=ep == "validate")
        assert not a.allowed and a.message == (
            'gpugate: class "inference-mig" is not allowed for tenant "research"; allowed: '
            "train-large, train-small, dev-shared"), a


@pytest.mark.parametrize("op", ["UPDATE", "DELETE"])
def test_update_and_delete_are_allowed_untouched(client, op):
    old = pod(cls="inference-mig", labels={TENANT: "forged"})  # would be denied on CREATE
    new = copy.deepcopy(old)
    new["metadata"]["labels"]["extra"] = "1"
    for ep in ("mutate", "validate"):
        if op == "UPDATE":
            a = client.admit(ep, new, operation="UPDATE", old=old, dry_run=True)
        else:
            a = client.admit(ep, None, operation="DELETE", old=old, kind="Pod",
                             namespace="research", name="train-1", dry_run=True)
        assert a.allowed and a.patch is None and a.warnings == [], a


def test_delete_of_a_job(client):
    old = client.admit("mutate", job("gone", labels={CLASS: "train-small"})).patched()
    a = client.admit("validate", None, operation="DELETE", old=old, kind="Job",
                     namespace="research", name="gone", dry_run=True)
    assert a.allowed and a.patch is None


def test_status_subresource_update_is_not_a_creation(client):
    obj = pod(cls="inference-mig")
    a = client.admit("mutate", obj, operation="UPDATE", old=obj, sub_resource="status")
    assert a.allowed and a.patch is None


def test_a_pods_class_and_gpus_labels_cannot_change(client):
    """The class and GPU count a pod was admitted and charged for, and is
    judged by while it runs (idle GPUs), stay: changed, removed or added by
    an update of the pod or of its status, it is refused at /validate."""
    admitted = client.admit("mutate", pod(cls="train-small", gpus="2")).patched()
    changed = "of a pod cannot be changed or removed by an update (it is \"{}\"): the " \
              "pod was admitted and charged for it, and is judged by it while it runs; " \
              "create a new pod instead"
    cases = [({CLASS: "train-large"}, f"gpugate: label {CLASS} " + changed.format("train-small")),
             ({CLASS: None}, f"gpugate: label {CLASS} " + changed.format("train-small")),
             ({GPUS: "1"}, f"gpugate: label {GPUS} " + changed.format("2"))]
    for sub in (None, "status"):
        for change, msg in cases:
            obj = copy.deepcopy(admitted)
            for k, v in change.items():
                if v is None:
                    del obj["metadata"]["labels"][k]
                else:
                    obj["metadata"]["labels"][k] = v
            a = client.admit("validate", obj, operation="UPDATE", old=admitted,
                             sub_resource=sub, dry_run=True)
            denied(a, msg)
        # Added to a pod admitted without one.
        plain = client.admit("mutate", pod(cls="train-small")).patched()
        obj = copy.deepcopy(plain)
        obj["metadata"]["labels"][GPUS] = "4"
        denied(client.admit("validate", obj, operation="UPDATE", old=plain,
                            sub_resource=sub, dry_run=True),
               f"gpugate: label {GPUS} cannot be added to a pod by an update: the pod was "
               "admitted and charged without it; create a new pod instead")
        # Any other label is the user's.
        obj = copy.deepcopy(admitted)
        obj["metadata"]["labels"]["team"] = "vision"
        a = client.admit("validate", obj, operation="UPDATE", old=admitted,
                         sub_resource=sub, dry_run=True)
        assert a.allowed and a.patch is None, a


def debugged(admitted: dict, **ephemeral) -> dict:
    """The Pod `kubectl debug` sends to the ephemeralcontainers subresource."""
    obj = copy.deepcopy(admitted)
    c = {"name": "debugger-7xk2q", "image": "busybox", "targetContainerName": "main",
         "stdin": True, "tty": True, "terminationMessagePolicy": "File",
         "imagePullPolicy": "Always"}
    c.update(ephemeral)
    obj["spec"]["ephemeralContainers"] = [c]
    return obj


def test_kubectl_debug_is_judged_at_validate(client):
    admitted = client.admit("mutate", pod(cls="train-small")).patched()
    obj = debugged(admitted, securityContext={"privileged": True})
    msg = ('gpugate: ephemeral container "debugger-7xk2q" is privileged and the pod can reach '
           'GPU nodes (it asks for class train-small); a privileged container sees every GPU '
           'on the node: remove securityContext.privileged (kubectl debug --profile=sysadmin '
           'sets it)')
    a = client.admit("validate", obj, operation="UPDATE", old=admitted,
                     sub_resource="ephemeralcontainers", dry_run=True)
    denied(a, msg)
    # Through envFrom, in a pod that only tolerates the GPU taint.
    plain = pod(tolerations=[dict(GPU_TOLERATION)])
    obj = debugged(plain, envFrom=[{"configMapRef": {"name": "debug-env"}}])
    denied(client.admit("validate", obj, operation="UPDATE", old=plain,
                        sub_resource="ephemeralcontainers", dry_run=True),
           env_from_message('ephemeral container "debugger-7xk2q"', 'configMap "debug-env"',
                            None, "it tolerates the nvidia.com/gpu taint of flavor h100-80gb"))
    # An unprivileged debugger is admitted without a word; /mutate, which
    # is not registered for the subresource, leaves every one alone.
    obj = debugged(admitted)
    a = client.admit("validate", obj, operation="UPDATE", old=admitted,
                     sub_resource="ephemeralcontainers", dry_run=True)
    assert a.allowed and a.patch is None and a.warnings == [], a
    obj = debugged(admitted, securityContext={"privileged": True})
    a = client.admit("mutate", obj, operation="UPDATE", old=admitted,
                     sub_resource="ephemeralcontainers")
    assert a.allowed and a.patch is None and a.warnings == [], a


def test_create_with_generate_name(client):
    obj = pod(name=None, cls="train-small")
    obj["metadata"]["generateName"] = "train-small-"
    m, p, v = mutate_then_validate(client, obj, name="")
    assert p["metadata"]["generateName"] == "train-small-" and "name" not in p["metadata"]
    assert v.allowed and len(v.warnings) == 1

    j = job(name=None, labels={CLASS: "train-large"}, parallelism=2)
    j["metadata"]["generateName"] = "pretrain-"
    m, pj, v = mutate_then_validate(client, j, name="")
    assert pod_meta(pj)["labels"][GANG].startswith("g-")
    assert v.allowed


def test_dry_run_answers_like_a_real_run(fresh_server):
    srv = fresh_server()
    with srv.client() as c:
        obj = pod(cls="train-small", gpus="2")
        dry = c.admit("mutate", obj, dry_run=True)
        real = c.admit("mutate", obj)
        assert dry.patch == real.patch
        p = real.patched()
        line = "gpugate: train-small -> 2 x h100-80gb for tenant research (2/32 in use)"
        for _ in range(3):  # dry runs reserve nothing
            v = c.admit("validate", p, dry_run=True)
            assert v.allowed and v.warnings == [line], v


# ---------------------------------------------------------------------------
# quota through the server (usage is what the server admitted itself)


def test_validate_reserves_quota_and_delete_releases_it(fresh_server, custom_policy):
    srv = fresh_server(custom_policy)
    with srv.client() as c:
        def admitted(name):
            p = c.admit("mutate", pod(name, "strict", cls="train-small", gpus="4")).patched()
            return p, c.admit("validate", p)

        p1, v1 = admitted("a")
        assert v1.warnings == ["gpugate: train-small -> 4 x h100-80gb for tenant strict (4/8 in use)"]
        p2, v2 = admitted("b")
        assert v2.warnings == ["gpugate: train-small -> 4 x h100-80gb for tenant strict (8/8 in use)"]
        # Over quota is known at /mutate already: denied there, before any
        # other webhook runs.
        denied(c.admit("mutate", pod("c", "strict", cls="train-small", gpus="4")),
               'gpugate: tenant "strict" is over its h100-80gb quota: requested 4 (class '
               'train-small), in use 8 of nominal 8, no cohort to borrow from')
        d = c.admit("validate", None, operation="DELETE", old=p1, kind="Pod",
                    namespace="strict", name="a")
        assert d.allowed
        p3, v3 = admitted("c")
        assert v3.allowed, v3
        assert v3.warnings == ["gpugate: train-small -> 4 x h100-80gb for tenant strict (8/8 in use)"]
        # Full again: the next one is refused.
        p4 = c.admit("mutate", pod("d", "strict", cls="train-small", gpus="4"))
        assert not p4.allowed


# ---------------------------------------------------------------------------
# warn and audit modes (custom policy)


PRIV_MSG = ('container "main" is privileged; a privileged GPU container bypasses the device '
            "plugin's isolation: remove securityContext.privileged")


def test_warn_mode_violation_is_a_warning_from_validate_only(custom_client):
    obj = pod(namespace="warned", cls="train-small",
              containers=[container(securityContext={"privileged": True})])
    m = custom_client.admit("mutate", obj)
    assert m.allowed, m
    assert not any("privileged" in w for w in m.warnings), m.warnings
    p = m.patched()
    assert p["metadata"]["annotations"][DECISION] == "warn: " + PRIV_MSG
    assert gpu_container(p)["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    v = custom_client.admit("validate", p, dry_run=True)
    assert v.allowed, v
    assert v.warnings[0] == "gpugate: " + PRIV_MSG
    assert v.warnings[1:] == [
        "gpugate: train-small -> 1 x h100-80gb for tenant warned (1/8 in use)"]


def test_warn_mode_unknown_class(custom_client):
    obj = pod(namespace="warned", cls="nope")
    m = custom_client.admit("mutate", obj)
    # No warning from /mutate (kubectl prints it once, from /validate), but the
    # violation is recorded on the object.
    assert m.allowed and m.warnings == [], m
    assert m.patched()["metadata"]["annotations"][DECISION] == (
        'warn: unknown GPU class "nope"; tenant "warned" may use: train-small')
    v = custom_client.admit("validate", obj, dry_run=True)
    assert v.allowed
    assert v.warnings == ['gpugate: unknown GPU class "nope"; tenant "warned" may use: train-small']


def test_warn_mode_warning_with_control_characters_is_one_line(custom_client):
    obj = pod(namespace="warned", cls="bad\nclass\r\tname")
    v = custom_client.admit("validate", obj, dry_run=True)  # check_envelope: no \n
    assert v.allowed
    assert v.warnings == ['gpugate: unknown GPU class "bad class  name"; tenant "warned" '
                          'may use: train-small']


def test_audit_mode_admits_silently(custom_client):
    obj = pod(namespace="audited", cls="train-small",
              containers=[container(securityContext={"privileged": True})])
    m = custom_client.admit("mutate", obj)
    assert m.allowed and m.warnings == [], m
    p = m.patched()
    dec = p["metadata"]["annotations"][DECISION]
    assert dec.startswith("audit: would deny:"), dec
    assert dec == "audit: would deny: " + PRIV_MSG
    v = custom_client.admit("validate", p, dry_run=True)
    assert v.allowed and v.warnings == [], v


def test_audit_mode_unmappable_violation_is_recorded_on_the_object(custom_client):
    obj = pod(namespace="audited", cls="nope")
    m = custom_client.admit("mutate", obj)
    assert m.allowed and m.warnings == [], m
    dec = (m.patched()["metadata"].get("annotations") or {}).get(DECISION, "")
    assert dec == ('audit: would deny: unknown GPU class "nope"; tenant "audited" may use: '
                   'train-small'), dec


def test_enforce_tenant_of_the_custom_policy_denies(custom_client):
    obj = pod(namespace="strict", cls="train-small",
              containers=[container(securityContext={"privileged": True})])
    denied(custom_client.admit("mutate", obj), "gpugate: " + PRIV_MSG)


def test_custom_checkpoint_without_claim_uses_empty_dir(custom_client):
    # The custom policy's checkpoint has no claimName and mountPath /ckpt.
    # Its train-small is not preemptible; a user may opt in with the label
    # (to their own disadvantage: preemptible workloads may be preempted).
    obj = pod(namespace="strict", cls="train-small", labels={PREEMPTIBLE: "true"})
    p = custom_client.admit("mutate", obj).patched()
    assert {"name": "gpugate-checkpoint", "emptyDir": {}} in p["spec"]["volumes"]
    assert {"name": "gpugate-checkpoint", "mountPath": "/ckpt"} in gpu_container(p)["volumeMounts"]
    assert p["spec"]["terminationGracePeriodSeconds"] == 300


# ---------------------------------------------------------------------------
# the success line


def test_success_line_under_120_characters_with_long_names(fresh_server, custom_policy):
    srv = fresh_server(custom_policy)
    with srv.client() as c:
        cls = "inference-with-a-really-quite-long-class-name-for-line-limits"
        m, p, v = mutate_then_validate(c, pod(namespace="longnames", cls=cls), dry_run=False)
        assert v.allowed and len(v.warnings) == 1, v
        assert len(v.warnings[0]) < 120, (len(v.warnings[0]), v.warnings[0])


def test_success_line_keeps_the_numbers_with_long_names(fresh_server, custom_policy):
    srv = fresh_server(custom_policy)
    with srv.client() as c:
        cls = "inference-with-a-really-quite-long-class-name-for-line-limits"
        m, p, v = mutate_then_validate(c, pod(namespace="longnames", cls=cls), dry_run=False)
        assert "1/8 in use" in v.warnings[0], v.warnings[0]
        assert "1 x h100-80gb" in v.warnings[0], v.warnings[0]


def test_reinvocation_changes_nothing_but_a_decision_usage_has_moved(fresh_server):
    """SPEC: mutation is idempotent.  The apiserver calls /mutate again
    after another webhook changed the object (reinvocationPolicy IfNeeded):
    the object gpugate mutated comes back unchanged, unless usage moved in
    between; then only the decision annotation, which says it, is rewritten."""
    srv = fresh_server()
    with srv.client() as c:
        first = c.admit("mutate", pod("p1", cls="train-small", gpus="1"))
        assert first.allowed, first
        once = apply(first.review["request"]["object"], first.patch)
        assert once["metadata"]["annotations"][DECISION] == (
            "train-small: 1 x h100-80gb for tenant research; 1/32 in use")
        assert c.admit("mutate", once).patch is None
        # Another pod of the tenant is admitted (reserved at /validate).
        other = pod("p2", cls="train-small", gpus="2")
        other["metadata"]["uid"] = new_uid()
        om = c.admit("mutate", other)
        v = c.admit("validate", apply(om.review["request"]["object"], om.patch))
        assert v.allowed, v
        again = c.admit("mutate", once)
        assert again.patch == [{"op": "replace",
                                "path": "/metadata/annotations/gpugate.io~1decision",
                                "value": "train-small: 1 x h100-80gb for tenant research; "
                                         "3/32 in use"}], again.patch
