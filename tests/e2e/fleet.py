#!/usr/bin/env python3
"""A fake GPU fleet for KWOK, generated from a gpugate policy.

For each flavor of the policy it writes Node objects that look like what
NVIDIA's GPU Feature Discovery and device plugin make of real GPU nodes:

- the flavor's nodeSelector labels, plus the GFD labels `nvidia.com/gpu.product`,
  `gpu.count`, `gpu.memory` (MiB), `gpu.family`, `gpu.present`, `gpu.machine`,
  `gpu.replicas`, `gpu.sharing-strategy`, `mig.capable`, `mig.strategy` (and
  `mig-<profile>.count` under the mixed strategy);
- `nvidia.com/gpu.clique` (an NVLink domain: `<cluster uuid>.<clique id>`,
  `--clique-size` nodes each) on the nodes of a flavor that a class places by
  that topology key; any other topology key gets `<key-name>-<n>` domains;
- capacity and allocatable of the flavor's resource: `gpusPerNode` units
  (`nvidia.com/gpu`, `nvidia.com/mig-<profile>` under the mixed strategy,
  `nvidia.com/gpu.shared` for time-slicing, `--replicas` per GPU), CPU and
  memory of a machine of that kind;
- a taint for each of the flavor's tolerations (key, value, effect), so only
  pods that gpugate mapped land there;

plus `--cpu-nodes` CPU-only nodes, and `--dra-nodes FLAVOR=N` nodes served
through Dynamic Resource Allocation instead of a device plugin (see
make_dra_nodes): the flavor's labels and taints, but none of its resource in
capacity or allocatable, and one ResourceSlice each that publishes the
node's GPUs as NVIDIA's DRA driver would. Every node carries the annotation
`kwok.x-k8s.io/node: fake` (KWOK manages it, tests/e2e/cluster.sh) and the
label `fleet.gpugate.io/fleet: <name>` (delete with `-l`; the slices carry
it too).

Usage:
  fleet.py POLICY [--nodes N] [--nodes FLAVOR=N ...] [--cpu-nodes N]
           [--dra-nodes FLAVOR=N ...] [--clique-size K] [--replicas R]
           [--name NAME] > fleet.json
  kubectl create -f fleet.json

Writes one `v1 List` as JSON on stdout. Needs PyYAML (python3-yaml).
"""

import argparse
import json
import re
import sys
import uuid

import yaml

DOMAIN = "fleet.gpugate.io"
CLIQUE_KEY = "nvidia.com/gpu.clique"

# What GFD reports for the products it knows (memory in MiB), and a machine of
# that kind: (family, memory MiB, machine, cpu, memory, physical GPUs/node).
PRODUCTS = {
    "H100": ("hopper", 81559, "DGX-H100", "224", "2Ti", 8),
    "H200": ("hopper", 143771, "DGX-H200", "224", "2Ti", 8),
    "B200": ("blackwell", 183359, "DGX-B200", "224", "4Ti", 8),
    "A100": ("ampere", 81920, "DGX-A100", "256", "2Ti", 8),
    "L40S": ("ada-lovelace", 46068, "PowerEdge-R760xa", "128", "1Ti", 4),
    "L4": ("ada-lovelace", 23034, "PowerEdge-R760", "64", "512Gi", 4),
    "T4": ("turing", 15360, "PowerEdge-R740", "48", "384Gi", 4),
}
GENERIC = ("ampere", 40960, "generic-gpu-server", "64", "512Gi", 8)
CPU_NODE = ("32", "128Gi")
PODS_PER_NODE = "110"

# A MIG profile "<g>g.<mem>gb": how many fit one GPU (A100/H100: 7 slices).
MIG_PER_GPU = {1: 7, 2: 3, 3: 2, 4: 1, 7: 1}


def product_of(labels):
    product = labels.get("nvidia.com/gpu.product", "")
    for key in sorted(PRODUCTS, key=len, reverse=True):
        if key in product.upper():
            return PRODUCTS[key]
    return GENERIC


def mig_profile(resource):
    """'nvidia.com/mig-1g.10gb' -> ('1g.10gb', 1); anything else -> None."""
    m = re.fullmatch(r"nvidia\.com/mig-((\d+)g\.\d+gb)", resource)
    return (m.group(1), int(m.group(2))) if m else None


def taints_for(tolerations):
    """The taints a flavor's tolerations let its pods through."""
    taints = []
    for t in tolerations or []:
        key = t.get("key")
        if not key:  # an empty key with Exists tolerates everything
            continue
        taint = {"key": key, "effect": t.get("effect") or "NoSchedule"}
        if t.get("operator", "Equal") == "Equal":
            taint["value"] = t.get("value", "")
        else:
            taint["value"] = "present"
        if taint not in taints:
            taints.append(taint)
    return taints


def topology_keys(policy, flavor_name):
    keys = []
    for c in policy.get("classes") or []:
        topo = c.get("topology")
        if c.get("flavor") == flavor_name and topo and topo.get("key") not in keys:
            keys.append(topo["key"])
    return keys


def gpu_labels(flavor, replicas):
    """The GFD labels and the allocatable of one node of this flavor."""
    labels = {}
    for sel in flavor.get("nodeSelector") or []:
        k, _, v = sel.partition("=")
        labels[k] = v
    family, mem_mib, machine, cpu, memory, physical = product_of(labels)
    resource = flavor["resource"]
    units = int(flavor.get("gpusPerNode", 8))
    sharing = flavor.get("sharing", "exclusive")
    gpus = physical
    labels.setdefault("nvidia.com/gpu.sharing-strategy", "none")
    labels.setdefault("nvidia.com/gpu.replicas", "1")
    profile = mig_profile(resource)
    if sharing == "mig" and profile:
        name, g = profile
        per_gpu = MIG_PER_GPU.get(g, 1)
        gpus = max(1, -(-units // per_gpu))
        labels.setdefault("nvidia.com/mig.strategy", "mixed")
        labels[f"nvidia.com/mig-{name}.count"] = str(units)
        labels[f"nvidia.com/mig-{name}.slices.gi"] = str(g)
    elif sharing == "mig":  # the single strategy: every GPU cut alike
        labels.setdefault("nvidia.com/mig.strategy", "single")
        gpus = units
    elif sharing == "time-slicing":
        labels["nvidia.com/gpu.sharing-strategy"] = "time-slicing"
        labels["nvidia.com/gpu.replicas"] = str(replicas)
        gpus = max(1, units // replicas)
    else:
        gpus = units
    labels.setdefault("nvidia.com/mig.strategy", "none")
    labels.setdefault("nvidia.com/mig.capable", "true" if family in ("ampere", "hopper", "blackwell") else "false")
    labels.update({
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.count": str(gpus),
        "nvidia.com/gpu.memory": str(mem_mib),
        "nvidia.com/gpu.family": family,
        "nvidia.com/gpu.machine": machine,
        "nvidia.com/cuda.driver.major": "570",
    })
    labels.setdefault("nvidia.com/gpu.product", "NVIDIA-GPU")
    return labels, {resource: str(units), "cpu": cpu, "memory": memory}


def node(name, fleet, labels, resources, taints):
    labels = dict(labels)
    labels.update({
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "type": "kwok",
        f"{DOMAIN}/fleet": fleet,
    })
    res = dict(resources)
    res["pods"] = PODS_PER_NODE
    obj = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {"kwok.x-k8s.io/node": "fake"},
        },
        "spec": {},
        "status": {"capacity": res, "allocatable": dict(res)},
    }
    if taints:
        obj["spec"]["taints"] = taints
    return obj


def dns_label(s):
    return re.sub(r"[^a-z0-9-]+", "-", s.lower()).strip("-")[:40] or "node"


def make_fleet(policy, nodes=2, per_flavor=None, cpu_nodes=2, clique_size=2,
               replicas=4, name="e2e"):
    """Node objects (dicts) for POLICY (a parsed policy document)."""
    per_flavor = per_flavor or {}
    items = []
    # One cluster UUID per fleet, fixed by its name: the same input gives
    # the same fleet.
    cluster_uuid = uuid.uuid5(uuid.NAMESPACE_DNS, f"{name}.{DOMAIN}")
    for flavor in policy.get("flavors") or []:
        if "resource" not in flavor:
            continue  # a DRA flavor: no device-plugin nodes (make_dra_nodes)
        count = per_flavor.get(flavor["name"], nodes)
        labels, resources = gpu_labels(flavor, replicas)
        taints = taints_for(flavor.get("tolerations"))
        keys = topology_keys(policy, flavor["name"])
        for i in range(count):
            node_labels = dict(labels)
            domain = i // max(1, clique_size)
            for key in keys:
                if key == CLIQUE_KEY:
                    node_labels[key] = f"{cluster_uuid}.{domain}"
                else:
                    node_labels[key] = f"{dns_label(key.rsplit('/', 1)[-1])}-{domain}"
            items.append(node(f"{dns_label(flavor['name'])}-{i}", name, node_labels,
                              resources, taints))
    cpu, memory = CPU_NODE
    for i in range(cpu_nodes):
        items.append(node(f"cpu-{i}", name, {}, {"cpu": cpu, "memory": memory}, []))
    unknown = set(per_flavor) - {f["name"] for f in policy.get("flavors") or []}
    if unknown:
        raise ValueError(f"no flavor {', '.join(sorted(unknown))} in the policy")
    return items


# ---------------------------------------------------------------------------
# Nodes served through DRA (resource.k8s.io/v1, issue #33)
#
# What NVIDIA's DRA driver (k8s-dra-driver-gpu, cmd/gpu-kubelet-plugin,
# docs/design/dra.md F5) publishes for a node of whole GPUs: one
# ResourceSlice, driver gpu.nvidia.com, pool = the node's name, a device
# gpu-<minor> per GPU with the attributes type, uuid, productName, brand,
# architecture and the capacity memory.  On such a node no device plugin
# runs, so the node advertises no nvidia.com/gpu: the kube-scheduler serves
# a pod's nvidia.com/gpu through DRA there when a DeviceClass names it as its
# extendedResourceName (device_class below), by a claim it makes for the
# pod (docs/design/dra.md F3).

DRA_DRIVER = "gpu.nvidia.com"


def dra_product_name(labels):
    """GFD's product label as the driver's productName attribute:
    'NVIDIA-H100-80GB-HBM3' -> 'NVIDIA H100 80GB HBM3'."""
    return labels.get("nvidia.com/gpu.product", "NVIDIA-GPU").replace("-", " ")


def dra_device(node_name, index, labels, fleet):
    family, mem_mib = product_of(labels)[:2]
    uid = uuid.uuid5(uuid.NAMESPACE_DNS, f"{node_name}.{index}.{fleet}.{DOMAIN}")
    return {
        "name": f"gpu-{index}",
        "attributes": {
            "type": {"string": "gpu"},
            "uuid": {"string": f"GPU-{uid}"},
            "productName": {"string": dra_product_name(labels)},
            "brand": {"string": "Nvidia"},
            "architecture": {"string": family.replace("-", " ").title()},
        },
        "capacity": {"memory": {"value": f"{round(mem_mib / 1024)}Gi"}},
    }


def resource_slice(node_name, fleet, devices, driver=DRA_DRIVER):
    """The one ResourceSlice of a node's pool (generation 1, one slice)."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node_name}-{driver}",
                     "labels": {f"{DOMAIN}/fleet": fleet}},
        "spec": {"driver": driver, "nodeName": node_name,
                 "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
                 "devices": devices},
    }


def device_class(name=DRA_DRIVER, driver=DRA_DRIVER, extended_resource_name=None):
    """A DeviceClass selecting every device of DRIVER (as NVIDIA's chart
    installs gpu.nvidia.com), optionally serving an extended resource."""
    obj = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
           "metadata": {"name": name},
           "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{driver}'"}}]}}
    if extended_resource_name:
        obj["spec"]["extendedResourceName"] = extended_resource_name
    return obj


def make_dra_nodes(policy, per_flavor, name="e2e", driver=DRA_DRIVER, replicas=4):
    """(nodes, slices) for N nodes of each flavor in PER_FLAVOR, served
    through DRA: `<flavor>-dra-<i>`, with the flavor's nodeSelector and GFD
    labels (nvidia.com/gpu.count: its physical GPUs), the label
    fleet.gpugate.io/dra: DRIVER, a taint for each of its tolerations, the
    machine's CPU and memory and NO capacity of the flavor's resource; and
    one ResourceSlice per node with a device per physical GPU."""
    flavors = {f["name"]: f for f in policy.get("flavors") or []}
    unknown = set(per_flavor) - set(flavors)
    if unknown:
        raise ValueError(f"no flavor {', '.join(sorted(unknown))} in the policy")
    nodes, slices = [], []
    for fname, count in per_flavor.items():
        flavor = flavors[fname]
        labels, resources = gpu_labels(flavor, replicas)
        resources.pop(flavor["resource"], None)
        labels[f"{DOMAIN}/dra"] = driver
        gpus = int(labels["nvidia.com/gpu.count"])
        taints = taints_for(flavor.get("tolerations"))
        for i in range(count):
            node_name = f"{dns_label(fname)}-dra-{i}"
            nodes.append(node(node_name, name, labels, resources, taints))
            slices.append(resource_slice(
                node_name, name, [dra_device(node_name, g, labels, name) for g in range(gpus)],
                driver))
    return nodes, slices


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("policy", help="a gpugate policy file")
    ap.add_argument("--nodes", action="append", default=[], metavar="[FLAVOR=]N",
                    help="nodes per flavor (default 2); FLAVOR=N for one flavor")
    ap.add_argument("--cpu-nodes", type=int, default=2, metavar="N")
    ap.add_argument("--dra-nodes", action="append", default=[], metavar="FLAVOR=N",
                    help="N more nodes of FLAVOR served through DRA (driver %s), "
                         "with their ResourceSlices" % DRA_DRIVER)
    ap.add_argument("--clique-size", type=int, default=2, metavar="K",
                    help="nodes per NVLink domain (default 2)")
    ap.add_argument("--replicas", type=int, default=4, metavar="R",
                    help="time-slicing replicas per GPU (default 4)")
    ap.add_argument("--name", default="e2e", help="the fleet's name (label %s/fleet)" % DOMAIN)
    args = ap.parse_args(argv)
    default, per_flavor = 2, {}
    for n in args.nodes:
        flavor, eq, count = n.rpartition("=")
        if not count.isdigit():
            ap.error(f"--nodes {n}: want N or FLAVOR=N")
        if eq:
            per_flavor[flavor] = int(count)
        else:
            default = int(count)
    dra = {}
    for n in args.dra_nodes:
        flavor, eq, count = n.rpartition("=")
        if not eq or not flavor or not count.isdigit():
            ap.error(f"--dra-nodes {n}: want FLAVOR=N")
        dra[flavor] = int(count)
    with open(args.policy, encoding="utf-8") as f:
        policy = yaml.safe_load(f)
    try:
        items = make_fleet(policy, default, per_flavor, args.cpu_nodes,
                           args.clique_size, args.replicas, args.name)
        dra_nodes, slices = make_dra_nodes(policy, dra, args.name, replicas=args.replicas)
    except ValueError as e:
        ap.error(str(e))
    items += dra_nodes + slices
    json.dump({"apiVersion": "v1", "kind": "List", "items": items}, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
