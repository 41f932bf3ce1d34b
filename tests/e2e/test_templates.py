"""Issue #18 item 1: Deployments, StatefulSets, ReplicaSets, DaemonSets and
CronJobs are judged and mapped at `kubectl apply`.

What can never run (one pod beyond what the tenant may ever hold, or all
its replicas at once; a CronJob: one whole Job) is denied at the door with
the numbers, on create and on every change of the spec, so that users do
not learn it from FailedCreate events.  What is admitted is mapped: `kubectl
get deploy -o yaml` shows the concrete GPUs, node selector and tolerations.
Nothing is reserved: the pods are charged one by one as they are created
(tenant solo: nominal 4, no cohort, in QUOTA_POLICY).  The registrations
(mutate-templates / validate-templates) fail open and skip a Deployment's
ReplicaSets; the invariant holds after every scenario.
"""

from __future__ import annotations

from gpugate_e2e import assert_invariant, container, wait_until
from test_kubectl_admission import denied_by

MUTATE = "mutate-templates.gpugate.io"


def deployment(name: str, ns: str, replicas: int, gpus: int, kind: str = "Deployment") -> dict:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": kind,
            "metadata": {"name": name, "namespace": ns},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": dict(
                         labels, **{"gpugate.io/class": "gpu", "gpugate.io/gpus": str(gpus)})},
                                  "spec": {"containers": [container()]}}}}


def cronjob(name: str, ns: str, parallelism: int, gpus: int) -> dict:
    return {"apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": name, "namespace": ns,
                         "labels": {"gpugate.io/class": "gpu", "gpugate.io/gpus": str(gpus)}},
            "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {
                "parallelism": parallelism, "template": {"spec": {
                    "restartPolicy": "Never", "containers": [container()]}}}}}}


def solo_invariant(kubectl, quota):
    assert_invariant(kubectl, quota, "solo", ["solo"], "h100-80gb", "nvidia.com/gpu", 4)


def test_a_deployment_that_can_never_run_is_denied_at_apply(kubectl, quota, clean, files):
    clean("solo")
    r = kubectl.apply_file(files / "deploy.yaml", deployment("too-many", "solo", 3, 2))
    assert (r.rc, r.out) == (1, ""), r
    assert r.err == denied_by(MUTATE, "gpugate: Deployment \"too-many\" can never run all "
                              "its replicas: needs 6 h100-80gb (3 replicas x 2), tenant "
                              "\"solo\" may hold at most 4 (nominal 4)", file="deploy.yaml"), r
    r = kubectl.apply_file(files / "sts.yaml", deployment("one-too-big", "solo", 1, 5,
                                                         kind="StatefulSet"))
    assert (r.rc, r.out) == (1, ""), r
    assert r.err == denied_by(MUTATE, "gpugate: StatefulSet \"one-too-big\" can never run a "
                              "pod: each needs 5 h100-80gb, tenant \"solo\" may hold at most 4 "
                              "(nominal 4)", file="sts.yaml"), r
    solo_invariant(kubectl, quota)


def test_an_admitted_deployment_is_mapped_and_its_pods_are_charged(kubectl, quota, clean,
                                                                  files):
    clean("solo")
    r = kubectl.apply_file(files / "deploy.yaml", deployment("serve", "solo", 2, 2))
    assert (r.rc, r.out) == (0, "deployment.apps/serve created\n"), r
    d = kubectl.get("deployment", "serve", "solo")
    tmpl = d["spec"]["template"]
    assert tmpl["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "2"}
    assert tmpl["metadata"]["labels"]["gpugate.io/tenant"] == "solo"
    assert "gpugate.io/decision" not in (tmpl["metadata"].get("annotations") or {}), \
        "a usage-dependent annotation on the template would roll the pods"
    assert d["metadata"]["annotations"]["gpugate.io/decision"] == (
        "gpu: 2 pods x 2 x h100-80gb for tenant solo; each pod is charged when it is created")
    quota.wait_used("solo", 4, timeout=60)
    solo_invariant(kubectl, quota)
    # Scaling beyond what solo may ever hold is denied with the numbers;
    # the Deployment keeps its 2 replicas.
    r = kubectl.apply_file(files / "deploy.yaml", deployment("serve", "solo", 3, 2))
    assert r.rc == 1, r
    assert (f'admission webhook "{MUTATE}" denied the request: gpugate: Deployment "serve" '
            "can never run all its replicas: needs 6 h100-80gb (3 replicas x 2), tenant "
            '"solo" may hold at most 4 (nominal 4)') in r.err, r
    assert kubectl.get("deployment", "serve", "solo")["spec"]["replicas"] == 2
    # An update that changes nothing of the spec (an annotation) is not
    # even sent to gpugate; the template is not mapped again: no rollout.
    kubectl("annotate", "deployment", "serve", "-n", "solo", "team=ml").check()
    assert kubectl.get("deployment", "serve", "solo")["spec"] == d["spec"]
    # Its one ReplicaSet is the Deployment's template, unchanged.
    rs = kubectl("get", "replicasets", "-n", "solo", "-l", "app=serve", "-o", "json").json()
    assert len(rs["items"]) == 1, rs
    solo_invariant(kubectl, quota)


def test_a_cronjob_whose_job_can_never_run_is_denied_and_one_that_can_is_mapped(
        kubectl, quota, clean, files):
    clean("solo")
    r = kubectl.apply_file(files / "cron.yaml", cronjob("nightly", "solo", 3, 2))
    assert (r.rc, r.out) == (1, ""), r
    assert r.err == denied_by(MUTATE, "gpugate: CronJob \"nightly\" can never run a whole "
                              "Job: needs 6 h100-80gb (3 pods x 2), tenant \"solo\" may hold "
                              "at most 4 (nominal 4)", file="cron.yaml"), r
    r = kubectl.apply_file(files / "cron.yaml", cronjob("nightly", "solo", 2, 2))
    assert (r.rc, r.out) == (0, "cronjob.batch/nightly created\n"), r
    cj = kubectl.get("cronjob", "nightly", "solo")
    pod_spec = cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod_spec["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "2"}
    assert pod_spec["nodeSelector"], pod_spec
    assert cj["metadata"]["annotations"]["gpugate.io/decision"] == (
        "gpu: Jobs of 2 pods x 2 x h100-80gb for tenant solo; each Job is charged when it "
        "is created")
    # Nothing is held until a Job runs.
    quota.wait_used("solo", 0)
    solo_invariant(kubectl, quota)


def test_kubectl_scale_beyond_the_ceiling_is_denied_for_a_tenant(kubectl, quota, clean, files,
                                                                 tenant_kubectl):
    """kubectl scale goes through the scale subresource, whose Scale has no
    pod template: gpugate reads the Deployment (or StatefulSet) and judges
    its template with the new replicas.  As the tenant, with edit only."""
    clean("solo")
    t = tenant_kubectl("solo")
    r = t.apply_file(files / "deploy.yaml", deployment("serve", "solo", 1, 2))
    assert (r.rc, r.out) == (0, "deployment.apps/serve created\n"), r
    quota.wait_used("solo", 2, timeout=60)
    denial = ('admission webhook "validate-templates.gpugate.io" denied the request: '
              'gpugate: Deployment "serve" can never run all its replicas: needs 6 h100-80gb '
              '(3 replicas x 2), tenant "solo" may hold at most 4 (nominal 4)')
    r = t("scale", "deployment", "serve", "-n", "solo", "--replicas=3")
    assert r.rc == 1 and r.err == f"Error from server (Forbidden): {denial}\n", r
    # The same through a patch of the subresource, as an autoscaler writes it.
    r = t("patch", "deployment", "serve", "-n", "solo", "--subresource=scale",
          "--type=merge", "-p", '{"spec":{"replicas":3}}')
    assert r.rc == 1 and denial in r.err, r
    assert kubectl.get("deployment", "serve", "solo")["spec"]["replicas"] == 1
    # Within the ceiling: scaled, with the line that says what the pods ask.
    r = t("scale", "deployment", "serve", "-n", "solo", "--replicas=2")
    assert (r.rc, r.out) == (0, "deployment.apps/serve scaled\n"), r
    assert "Warning: gpugate: gpu -> 2 pods x 2 x h100-80gb for tenant solo" in r.err, r
    quota.wait_used("solo", 4, timeout=60)
    solo_invariant(kubectl, quota)
    # Attack: scale the Deployment's own ReplicaSet instead (its template
    # is the Deployment's, so gpugate leaves it alone). The extra pods meet
    # the quota one by one and are refused; the Deployment controller takes
    # the ReplicaSet back to 2; nothing ever holds more than solo may.
    rs = t("get", "replicasets", "-n", "solo", "-l", "app=serve", "-o", "json").json()
    [rs_name] = [i["metadata"]["name"] for i in rs["items"]]
    r = t("scale", "replicaset", rs_name, "-n", "solo", "--replicas=4")
    assert r.rc == 0, r
    solo_invariant(kubectl, quota)
    wait_until("the Deployment to take its ReplicaSet back to 2", lambda: kubectl.get(
        "replicaset", rs_name, "solo")["spec"]["replicas"] == 2, 60)
    quota.wait_used("solo", 4, timeout=60)
    solo_invariant(kubectl, quota)
    # Down is never refused, nor judged.
    r = t("scale", "deployment", "serve", "-n", "solo", "--replicas=0")
    assert (r.rc, r.err) == (0, ""), r
    quota.wait_used("solo", 0, timeout=60)
    # A StatefulSet's scale reads the StatefulSet.
    r = t.apply_file(files / "sts.yaml", deployment("db", "solo", 1, 2, kind="StatefulSet"))
    assert r.rc == 0, r
    r = t("scale", "statefulset", "db", "-n", "solo", "--replicas=3")
    assert r.rc == 1 and ('gpugate: StatefulSet "db" can never run all its replicas: needs 6 '
                          'h100-80gb') in r.err, r
    assert kubectl.get("statefulset", "db", "solo")["spec"]["replicas"] == 1
    solo_invariant(kubectl, quota)
