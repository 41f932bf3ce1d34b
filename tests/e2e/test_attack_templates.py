"""Attacks on the template and scale paths (test_templates.py), as tenant
solo (nominal 4 h100-80gb, no cohort) holding only the built-in `edit`
role in its namespace (tenant_kubectl).

What is attacked: mutate-/validate-templates judge a Deployment's,
StatefulSet's, ReplicaSet's or CronJob's template with its replicas, and
validate-templates judges `kubectl scale` by reading the parent
(webhook/handler.c judge_scale).  The goal: pods holding more than 4 GPUs,
gpugate counting other than what pods hold, or a template that can never
run admitted silently.  After every scenario the invariant holds
(solo_invariant: gpugate_quota_used equals what solo's pods hold, <= 4).

Paused Deployments create no ReplicaSet and no pod, but their template and
replicas are judged all the same: the races below run on them, so that no
pod has to come and go between rounds.
"""

from __future__ import annotations

import json
import threading


from gpugate_e2e import wait_until
from test_templates import cronjob, deployment, solo_invariant

MUTATE = "mutate-templates.gpugate.io"
VALIDATE = "validate-templates.gpugate.io"
OVER = ('tenant "solo" may hold at most 4 (nominal 4)')


def never_runs(kind: str, name: str, replicas: int, gpus: int) -> str:
    return (f'gpugate: {kind} "{name}" can never run all its replicas: needs '
            f'{replicas * gpus} h100-80gb ({replicas} replicas x {gpus}), {OVER}')


def forbidden(webhook: str, message: str) -> str:
    return (f'Error from server (Forbidden): admission webhook "{webhook}" denied the '
            f'request: {message}\n')


def paused(name: str, replicas: int, gpus: int, kind: str = "Deployment") -> dict:
    d = deployment(name, "solo", replicas, gpus, kind=kind)
    d["spec"]["paused"] = True
    return d


def set_gpus(gpus: int) -> str:
    """A JSON patch that changes a mapped template's GPUs consistently: the
    label and the container's limit."""
    return json.dumps([
        {"op": "replace", "path": "/spec/template/metadata/labels/gpugate.io~1gpus",
         "value": str(gpus)},
        {"op": "replace",
         "path": "/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu",
         "value": str(gpus)}])


def concurrently(*calls):
    out = [None] * len(calls)

    def run(i, f):
        out[i] = f()
    threads = [threading.Thread(target=run, args=(i, f)) for i, f in enumerate(calls)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return out


def failed_creates(kubectl, kind: str, name: str) -> list[str]:
    items = kubectl("get", "events", "-n", "solo", "-o", "json").json()["items"]
    return [e["message"] for e in items if e["reason"] == "FailedCreate"
            and e["involvedObject"].get("kind") == kind
            and e["involvedObject"].get("name") == name]


def pod_limits(kubectl, prefix: str) -> list[str]:
    items = kubectl("get", "pods", "-n", "solo", "-o", "json").json()["items"]
    return sorted(p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]
                  for p in items if p["metadata"]["name"].startswith(prefix)
                  and not p["metadata"].get("deletionTimestamp"))


# 1. kubectl scale racing a template edit; many concurrent scales.

def test_a_scale_racing_a_template_edit_never_lets_both_through(kubectl, quota, clean, files,
                                                                tenant_kubectl):
    """2 x 1 GPU; at once: scale to 4 (4 x 1 fits) and 1 -> 2 GPUs per pod
    (2 x 2 fits); both would make 4 x 2.  The apiserver re-runs admission
    when the other committed first, and gpugate's read of the parent is
    linearizable: exactly one wins, whatever the order."""
    clean("solo")
    t = tenant_kubectl("solo")
    for i in range(3):
        name = f"race{i}"
        r = t.apply_file(files / "race.yaml", paused(name, 2, 1))
        assert r.rc == 0, r
        scale, edit = concurrently(
            lambda: t("scale", "deployment", name, "-n", "solo", "--replicas=4"),
            lambda: t("patch", "deployment", name, "-n", "solo", "--type=json", "-p",
                      set_gpus(2)))
        spec = kubectl.get("deployment", name, "solo")["spec"]
        got = (spec["replicas"], spec["template"]["metadata"]["labels"]["gpugate.io/gpus"],
               spec["template"]["spec"]["containers"][0]["resources"]["limits"])
        # The loser may print the warning of its first attempt (judged
        # before the winner committed) above the denial of its retry.
        if scale.rc == 0:
            assert edit.rc == 1 and edit.err.endswith(forbidden(
                MUTATE, never_runs("Deployment", name, 4, 2))), (scale, edit)
            assert got == (4, "1", {"nvidia.com/gpu": "1"}), got
        else:
            assert edit.rc == 0 and scale.err.endswith(forbidden(
                VALIDATE, never_runs("Deployment", name, 4, 2))), (scale, edit)
            assert got == (2, "2", {"nvidia.com/gpu": "2"}), got
    solo_invariant(kubectl, quota)


def test_concurrent_kubectl_scales_admit_only_what_fits(kubectl, quota, clean, files,
                                                        tenant_kubectl):
    """Eight scales of one Deployment (1 GPU per pod) at once, to 1..8: a
    raise is judged against the template, a fall is never judged, so each
    is admitted exactly when it fits 4, whatever the order."""
    clean("solo")
    t = tenant_kubectl("solo")
    assert t.apply_file(files / "d.yaml", paused("many", 1, 1)).rc == 0
    results = concurrently(*[
        (lambda n=n: t("scale", "deployment", "many", "-n", "solo", f"--replicas={n}"))
        for n in range(1, 9)])
    for n, r in zip(range(1, 9), results):
        if n <= 4:
            assert (r.rc, r.out) == (0, "deployment.apps/many scaled\n"), (n, r)
        else:
            assert r.rc == 1 and r.err == forbidden(
                VALIDATE, never_runs("Deployment", "many", n, 1)), (n, r)
    final = kubectl.get("deployment", "many", "solo")["spec"]["replicas"]
    assert 1 <= final <= 4, final
    # Unpaused, its pods are created and charged: what it holds is what it asks.
    t("rollout", "resume", "deployment/many", "-n", "solo").check()
    quota.wait_used("solo", final, timeout=60)
    solo_invariant(kubectl, quota)


# 2. The template's resources and class label, without touching replicas.

def test_editing_a_templates_gpus_around_its_class_is_denied(kubectl, quota, clean, files,
                                                             tenant_kubectl):
    clean("solo")
    t = tenant_kubectl("solo")
    assert t.apply_file(files / "d.yaml", paused("serve", 2, 1)).rc == 0
    before = kubectl.get("deployment", "serve", "solo")["spec"]
    r = t("set", "resources", "deployment", "serve", "-n", "solo",
          "--limits=nvidia.com/gpu=8")
    assert (r.rc, r.out) == (1, ""), r
    assert r.err == ('error: failed to patch resources update to pod template admission '
                     f'webhook "{MUTATE}" denied the request: gpugate: container "trainer" '
                     'asks for 8 nvidia.com/gpu but class gpu gives 1: remove that request, '
                     'or set label gpugate.io/gpus: "8"\n'), r
    # The class label removed, the mapped GPUs kept: a raw request.
    raw = forbidden(MUTATE, "gpugate: this workload asks for nvidia.com/gpu directly; "
                    "request GPUs with a class instead: set label gpugate.io/class to one "
                    "of: gpu, gpu8, gpu-near")
    r = t("patch", "deployment", "serve", "-n", "solo", "--type=json", "-p", json.dumps(
        [{"op": "remove", "path": "/spec/template/metadata/labels/gpugate.io~1class"}]))
    assert (r.rc, r.err) == (1, raw), r
    r = t("patch", "deployment", "serve", "-n", "solo", "--type=json", "-p", json.dumps(
        [{"op": "remove", "path": f"/spec/template/metadata/labels/gpugate.io~1{k}"}
         for k in ("class", "gpus", "tenant", "flavor")]))
    assert (r.rc, r.err) == (1, raw), r
    # The Deployment's own labels (a metadata change: not sent to gpugate)
    # cannot lighten what its stamped template asks: another class there is
    # a conflict, and the scale is refused.
    t("label", "deployment", "serve", "-n", "solo", "gpugate.io/class=gpu8",
      "gpugate.io/gpus=1", "--overwrite").check()
    r = t("scale", "deployment", "serve", "-n", "solo", "--replicas=5")
    assert (r.rc, r.err) == (1, forbidden(
        VALIDATE, 'gpugate: the Deployment asks for class "gpu8" but its pod template asks '
        'for class "gpu"; use one')), r
    assert kubectl.get("deployment", "serve", "solo")["spec"] == before
    solo_invariant(kubectl, quota)


def test_kubectl_apply_can_change_a_deployments_gpus(kubectl, quota, clean, files,
                                                     tenant_kubectl):
    clean("solo")
    t = tenant_kubectl("solo")
    """mutate-templates wrote the class's count into the container's
    limits; a later kubectl apply that changes only gpugate.io/gpus keeps
    that limit (it is not in last-applied-configuration).  gpugate takes a
    count the update leaves as it was on a template it mapped as its own,
    and rewrites it (policy/decide-class.c count_is_gpugates)."""
    assert t.apply_file(files / "d.yaml", paused("serve", 2, 2)).rc == 0
    r = t.apply_file(files / "d.yaml", paused("serve", 2, 1))
    assert (r.rc, r.out) == (0, "deployment.apps/serve configured\n"), r
    tmpl = kubectl.get("deployment", "serve", "solo")["spec"]["template"]
    assert tmpl["metadata"]["labels"]["gpugate.io/gpus"] == "1"
    assert tmpl["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    # A count the user writes is still theirs: it must be the class's.
    d = paused("serve", 2, 1)
    d["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"nvidia.com/gpu": "3"}}
    r = t.apply_file(files / "d.yaml", d)
    assert r.rc == 1 and ('gpugate: container "trainer" asks for 3 nvidia.com/gpu but '
                          "class gpu gives 1") in r.err, r
    solo_invariant(kubectl, quota)


# 3. rollout undo to a template that no longer fits; rollout restart.

def test_rollout_undo_to_a_template_beyond_the_ceiling_is_denied(kubectl, quota, clean, files,
                                                                 tenant_kubectl):
    clean("solo")
    t = tenant_kubectl("solo")
    assert t.apply_file(files / "d.yaml", deployment("undo", "solo", 1, 2)).rc == 0
    quota.wait_used("solo", 2, timeout=60)
    r = t("patch", "deployment", "undo", "-n", "solo", "--type=json", "-p", set_gpus(1))
    assert r.rc == 0, r
    wait_until("revision 2", lambda: len(t("get", "rs", "-n", "solo", "-l", "app=undo",
                                           "-o", "name").out.split()) == 2, 30)
    r = t("scale", "deployment", "undo", "-n", "solo", "--replicas=4")
    assert r.rc == 0, r
    quota.wait_used("solo", 4, timeout=60)
    # Back to 2 GPUs per pod with 4 replicas: 8.
    r = t("rollout", "undo", "deployment/undo", "-n", "solo")
    assert r.rc == 1 and (f'admission webhook "{MUTATE}" denied the request: '
                          + never_runs("Deployment", "undo", 4, 2)) in r.err, r
    spec = kubectl.get("deployment", "undo", "solo")["spec"]
    assert spec["template"]["metadata"]["labels"]["gpugate.io/gpus"] == "1"
    # A restart is a new template of the same size: admitted; its surge pod
    # meets a full quota and waits; nothing holds more than 4.
    r = t("rollout", "restart", "deployment/undo", "-n", "solo")
    assert (r.rc, r.out) == (0, "deployment.apps/undo restarted\n"), r
    solo_invariant(kubectl, quota)
    assert pod_limits(kubectl, "undo-") == ["1"] * len(pod_limits(kubectl, "undo-"))
    solo_invariant(kubectl, quota)


# 4. ReplicaSets with a forged ownerReference to a Deployment.

def bogus_owned(name: str, replicas: int, gpus: int) -> dict:
    rs = deployment(name, "solo", replicas, gpus, kind="ReplicaSet")
    rs["metadata"]["ownerReferences"] = [{
        "apiVersion": "nope.example/v1", "kind": "Deployment", "name": "nobody",
        "uid": "11111111-2222-3333-4444-555555555555", "controller": True}]
    return rs


def test_a_replicaset_with_a_forged_deployment_owner_is_judged(kubectl, quota, clean, files,
                                                               tenant_kubectl):
    """The template webhooks skip a Deployment's own ReplicaSets (its template
    is the Deployment's).  An owner of another group is no Deployment's: the
    skip asks for apiVersion apps/v1, and such a ReplicaSet is judged at its
    creation and at every change of its spec.  (One that names an apps/v1
    Deployment that does not exist is skipped, and the garbage collector
    deletes it: test_a_replicaset_owned_by_no_deployment_is_collected.)"""
    clean("solo")
    t = tenant_kubectl("solo")
    created = t.apply_file(files / "rs.yaml", bogus_owned("bogus", 3, 2))
    # One that fits, then raised by a PATCH of the ReplicaSet itself.
    assert t.apply_file(files / "rs1.yaml", bogus_owned("small", 1, 2)).rc == 0
    raised = t("patch", "replicaset", "small", "-n", "solo", "--type=merge", "-p",
               '{"spec":{"replicas":5}}')
    assert ((created.rc, created.err), (raised.rc, raised.err)) == (
        (1, forbidden(MUTATE, never_runs("ReplicaSet", "bogus", 3, 2)).replace(
            "Error from server (Forbidden): ",
            'Error from server (Forbidden): error when creating "rs.yaml": ')),
        (1, forbidden(MUTATE, never_runs("ReplicaSet", "small", 5, 2))))
    solo_invariant(kubectl, quota)


def test_a_replicaset_owned_by_no_deployment_is_collected(kubectl, quota, clean, files,
                                                         tenant_kubectl):
    """An apps/v1 Deployment owner that does not exist: the door skips the
    ReplicaSet as a Deployment's, its pods meet the quota one by one, and
    the garbage collector deletes it (its owner is gone) with its pods."""
    clean("solo")
    t = tenant_kubectl("solo")
    rs = deployment("orphan", "solo", 3, 2, kind="ReplicaSet")
    rs["metadata"]["ownerReferences"] = [{
        "apiVersion": "apps/v1", "kind": "Deployment", "name": "nobody",
        "uid": "11111111-2222-3333-4444-555555555555", "controller": True}]
    r = t.apply_file(files / "rs.yaml", rs)
    assert r.rc == 0, r
    solo_invariant(kubectl, quota)
    wait_until("the garbage collector to delete it", lambda: kubectl(
        "get", "replicaset", "orphan", "-n", "solo").rc != 0, 60)
    solo_invariant(kubectl, quota)


def test_a_forged_owner_reference_does_not_get_pods_past_the_quota(kubectl, quota, clean,
                                                                   files, tenant_kubectl):
    """Whatever the door lets through, the pods meet the quota one by one.
    (a) A ReplicaSet claimed by a paused Deployment of 3 x 1 GPU, its own
    template 2 GPUs: the Deployment controller scales it to 3 (an update of
    a Deployment's ReplicaSet, never judged): 2 pods hold 4, the third is
    refused.  (b) A ReplicaSet owned by a Deployment of a group that does
    not exist: kubectl scale reads it and judges it all the same."""
    clean("solo")
    t = tenant_kubectl("solo")
    assert t.apply_file(files / "o.yaml", paused("owner", 3, 1)).rc == 0
    uid = kubectl.get("deployment", "owner", "solo")["metadata"]["uid"]
    rs = deployment("forged", "solo", 0, 2, kind="ReplicaSet")
    rs["metadata"]["labels"] = {"app": "owner"}
    rs["spec"]["selector"] = {"matchLabels": {"app": "owner"}}
    rs["spec"]["template"]["metadata"]["labels"]["app"] = "owner"
    rs["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "Deployment",
                                          "name": "owner", "uid": uid, "controller": True}]
    r = t.apply_file(files / "rs.yaml", rs)
    assert (r.rc, r.out, r.err) == (0, "replicaset.apps/forged created\n", ""), r
    wait_until("the Deployment controller to scale it to 3", lambda: kubectl.get(
        "replicaset", "forged", "solo")["spec"]["replicas"] == 3, 30)
    quota.wait_used("solo", 4, timeout=60)
    wait_until("a FailedCreate", lambda: any(
        'tenant "solo" is over its h100-80gb quota: requested 2 (class gpu), in use 4 of '
        'nominal 4' in m for m in failed_creates(kubectl, "ReplicaSet", "forged")), 30)
    assert pod_limits(kubectl, "forged-") == ["2", "2"]
    solo_invariant(kubectl, quota)
    kubectl("delete", "deployment,replicaset", "--all", "-n", "solo", "--wait=true").check()
    quota.wait_used("solo", 0, timeout=60)
    # (b)
    r = t.apply_file(files / "rs.yaml", bogus_owned("bogus", 0, 2))
    assert r.rc == 0, r
    r = t("scale", "replicaset", "bogus", "-n", "solo", "--replicas=3")
    assert (r.rc, r.err) == (1, forbidden(VALIDATE, never_runs("ReplicaSet", "bogus", 3,
                                                               2))), r
    solo_invariant(kubectl, quota)


# 5. StatefulSet (Parallel) scaled up; CronJob parallelism; a Job from it.
# (Neither the statefulset- nor the cronjob-controller runs in the e2e stack.)

def test_statefulset_and_cronjob_raises_are_judged(kubectl, quota, clean, files,
                                                   tenant_kubectl):
    clean("solo")
    t = tenant_kubectl("solo")
    r = t.apply_file(files / "c.yaml", cronjob("nightly", "solo", 2, 2))
    assert r.rc == 0, r
    r = t("patch", "cronjob", "nightly", "-n", "solo", "--type=merge", "-p",
          '{"spec":{"jobTemplate":{"spec":{"parallelism":3}}}}')
    assert (r.rc, r.err) == (1, forbidden(
        MUTATE, 'gpugate: CronJob "nightly" can never run a whole Job: needs 6 h100-80gb '
        f'(3 pods x 2), {OVER}')), r
    r = t("create", "job", "manual", "--from=cronjob/nightly", "-n", "solo")
    assert (r.rc, r.out) == (0, "job.batch/manual created\n"), r
    assert r.err == ("Warning: gpugate: gpu -> 2 pods x 2 x h100-80gb for tenant solo "
                     "(4/4 in use)\n"), r
    r = t("create", "job", "manual2", "--from=cronjob/nightly", "-n", "solo")
    assert r.rc == 1 and r.err == (
        'error: failed to create job: admission webhook "mutate.gpugate.io" denied the '
        'request: gpugate: tenant "solo" is over its h100-80gb quota: requested 4 '
        '(parallelism 2 x 2, class gpu), in use 4 of nominal 4, no cohort to borrow '
        'from\n'), r
    solo_invariant(kubectl, quota)
    kubectl("delete", "job", "manual", "-n", "solo", "--wait=true").check()
    t("delete", "pods", "--all", "-n", "solo", "--wait=true").check()
    quota.wait_used("solo", 0, timeout=60)
    sts = deployment("db", "solo", 1, 2, kind="StatefulSet")
    sts["spec"]["podManagementPolicy"] = "Parallel"
    assert t.apply_file(files / "s.yaml", sts).rc == 0
    # (The e2e stack runs no statefulset-controller: no pod is created, the
    # door alone is tested.)
    r = t("scale", "statefulset", "db", "-n", "solo", "--replicas=2")
    assert (r.rc, r.out) == (0, "statefulset.apps/db scaled\n"), r
    r = t("scale", "statefulset", "db", "-n", "solo", "--replicas=5")
    assert (r.rc, r.err) == (1, forbidden(VALIDATE, never_runs("StatefulSet", "db", 5, 2))), r
    r = t("patch", "statefulset", "db", "-n", "solo", "--type=merge", "-p",
          '{"spec":{"replicas":3}}')
    assert (r.rc, r.err) == (1, forbidden(MUTATE, never_runs("StatefulSet", "db", 3, 2))), r
    assert kubectl.get("statefulset", "db", "solo")["spec"]["replicas"] == 2
    solo_invariant(kubectl, quota)


# 6. Server-side dry run; another tenant's namespace.

def test_a_dry_run_scale_is_judged_and_another_namespace_is_forbidden(kubectl, quota, clean,
                                                                      files, tenant_kubectl):
    clean("solo")
    t = tenant_kubectl("solo")
    assert t.apply_file(files / "d.yaml", paused("serve", 2, 1)).rc == 0
    r = t("scale", "deployment", "serve", "-n", "solo", "--replicas=8", "--dry-run=server")
    assert (r.rc, r.err) == (1, forbidden(VALIDATE, never_runs("Deployment", "serve", 8, 1))), r
    r = t("scale", "deployment", "serve", "-n", "solo", "--replicas=3", "--dry-run=server")
    assert (r.rc, r.out) == (0, "deployment.apps/serve scaled (server dry run)\n"), r
    assert kubectl.get("deployment", "serve", "solo")["spec"]["replicas"] == 2
    who = 'User "system:serviceaccount:solo:tenant"'
    r = t("scale", "deployment", "serve", "-n", "alpha", "--replicas=3")
    assert (r.rc, r.err) == (1, 'Error from server (Forbidden): deployments.apps "serve" is '
                             f'forbidden: {who} cannot get resource "deployments" in API group '
                             '"apps" in the namespace "alpha"\n'), r
    r = t("patch", "deployment", "serve", "-n", "alpha", "--subresource=scale",
          "--type=merge", "-p", '{"spec":{"replicas":3}}')
    assert (r.rc, r.err) == (1, 'Error from server (Forbidden): deployments.apps "serve" is '
                             f'forbidden: {who} cannot get resource "deployments/scale" in API '
                             'group "apps" in the namespace "alpha"\n'), r
    solo_invariant(kubectl, quota)
