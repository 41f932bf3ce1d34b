"""Issue #18 item 5: the checkpoint claim ("{tenant}-checkpoints",
checkpoint.claimName of the example policy) must exist in the namespace of
every preemptible workload, and be ReadWriteMany for one whose pods land on
several nodes.  gpugate watches the PersistentVolumeClaims and says so at
kubectl apply; it does not refuse (the claim may be created a moment
later).  product-staging belongs to tenant product and has no claim until
the test makes one (ReadWriteOnce)."""

from __future__ import annotations

from gpugate_e2e import job, namespace_obj, pod, wait_until

NS = "product-staging"
MISSING = ("Warning: gpugate: checkpoint volume: PersistentVolumeClaim \"product-checkpoints\" "
           "does not exist in namespace product-staging; the pods will not start until it does\n")
ONE_NODE = ("Warning: gpugate: checkpoint volume: PersistentVolumeClaim "
            "\"product-checkpoints\" is not ReadWriteMany; pods on different nodes cannot all "
            "mount it\n")


def test_a_missing_or_single_node_checkpoint_claim_is_said_at_apply(stack, kubectl, files):
    kubectl.apply(namespace_obj(NS, "example")).check()
    wait_until("ServiceAccount default", lambda: kubectl(
        "-n", NS, "get", "serviceaccount", "default").rc == 0, 60)
    try:
        r = kubectl.apply_file(files / "pod.yaml", pod("p", NS, "train-small", 1))
        assert r.rc == 0, r
        assert MISSING in r.err, r
        kubectl("delete", "pod", "p", "-n", NS, "--wait=false").check()
        kubectl.apply({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                       "metadata": {"name": "product-checkpoints", "namespace": NS},
                       "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "",
                                "resources": {"requests": {"storage": "1Gi"}}}}).check()

        def said_one_node() -> bool:
            r = kubectl.apply_file(files / "job.yaml",
                                   job("two", NS, "train-small", 1, parallelism=2),
                                   "--dry-run=server", verb="create")
            return r.rc == 0 and ONE_NODE in r.err and MISSING not in r.err
        # The watch shows the claim within a moment.
        wait_until("the claim to be known", said_one_node, 30)
        # One pod on one node can use it: nothing said.
        r = kubectl.apply_file(files / "pod.yaml", pod("q", NS, "train-small", 1),
                               "--dry-run=server", verb="create")
        assert r.rc == 0 and "checkpoint volume" not in r.err, r
    finally:
        kubectl("delete", "namespace", NS, "--wait=false")
