/*
 * Every policy error message, asserted verbatim with its line (SPEC section
 * 3).  Each case is a small complete policy file with one or more mistakes
 * and the exact text `gpugate check` prints for it.
 */
#include "base/diag.h"
#include "policy/k8s.h"
#include "policy/policy.h"

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A valid head: one flavor, one class, used by most cases below. */
#define HEAD                                   \
	"version: 1\n"                         \
	"flavors:\n"                           \
	"  - name: h100\n"                     \
	"    resource: nvidia.com/gpu\n"       \
	"    sharing: exclusive\n"             \
	"    gpusPerNode: 8\n"                 \
	"classes:\n"                           \
	"  - name: big\n"                      \
	"    flavor: h100\n"                   \
	"    gpus: 8\n"
/* HEAD ends at line 10. */

/* 318 characters: one more than the longest label key. */
#define LONG_KEY_60 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define LONG_KEY                                                        \
	LONG_KEY_60 LONG_KEY_60 LONG_KEY_60 LONG_KEY_60 LONG_KEY_60         \
	"aaaaaaaaaaaaaaaaaa"

/* 257 and 256 bytes: one over the longest description, and the longest. */
#define LONG_DESC LONG_KEY_60 LONG_KEY_60 LONG_KEY_60 LONG_KEY_60 "aaaaaaaaaaaaaaaaa"
#define FINE_DESC LONG_KEY_60 LONG_KEY_60 LONG_KEY_60 LONG_KEY_60 "aaaaaaaaaaaaaaaa"

/*
 * Inline arrays, not pointers: Criterion runs each parameter in a fresh
 * process of a position-independent binary, where the parent's pointers to
 * string literals mean nothing.
 */
struct bad_case {
	char name[64];
	char yaml[1024];
	char errors[2048]; /* exactly what diag_text() holds */
};

static struct bad_case bad_cases[] = {
	{"unsupported version",
	 "version: 2\nflavors: []\nclasses: []\ntenants: []\n",
	 "t.yaml:1: unsupported version 2 (this gpugate reads version 1)\n"},
	{"missing version",
	 "flavors: []\nclasses: []\ntenants: []\n",
	 "t.yaml:1: missing required key \"version\"\n"},
	{"empty file", "", "t.yaml:1: the file is empty\n"},
	{"yaml syntax",
	 "version: 1\nflavors: [\n",
	 "t.yaml:3: YAML syntax error: did not find expected node content while "
	 "parsing a flow node\n"},
	{"two documents",
	 "version: 1\nflavors: []\nclasses: []\ntenants: []\n---\nversion: 1\n",
	 "t.yaml:6: only one YAML document is allowed\n"},
	{"unknown top key",
	 "version: 1\nflavors: []\nclasses: []\ntenants: []\nflavours: []\n",
	 "t.yaml:5: unknown key \"flavours\" (expected one of: version, settings, "
	 "flavors, classes, tenants, checkpoint, health)\n"},
	{"duplicate key",
	 "version: 1\nversion: 1\nflavors: []\nclasses: []\ntenants: []\n",
	 "t.yaml:2: duplicate key \"version\"\n"},
	{"bad enum value",
	 "version: 1\nflavors:\n  - name: a\n    resource: x.io/g\n"
	 "    sharing: shared\n    gpusPerNode: 1\nclasses: []\ntenants: []\n",
	 "t.yaml:5: flavors[0].sharing: \"shared\" is not one of: exclusive, mig, "
	 "time-slicing, mps\n"},
	{"bad settings enums",
	 "version: 1\nsettings:\n  mode: strict\n  rawGpuRequests: deny\n"
	 "flavors: []\nclasses: []\ntenants: []\n",
	 "t.yaml:3: settings.mode: \"strict\" is not one of: enforce, warn, audit\n"
	 "t.yaml:4: settings.rawGpuRequests: \"deny\" is not one of: reject, "
	 "allow\n"},
	{"not a number",
	 HEAD "    maxGpus: four\ntenants: []\n",
	 "t.yaml:11: classes[0].maxGpus: \"four\" is not a whole number\n"},
	{"octal-looking number",
	 HEAD "    maxGpus: 010\ntenants: []\n",
	 "t.yaml:11: classes[0].maxGpus: \"010\" is not a whole number\n"},
	{"not a boolean",
	 HEAD "    preemptible: yes\ntenants: []\n",
	 "t.yaml:11: classes[0].preemptible: \"yes\" is not true or false\n"},
	{"missing required fields",
	 "version: 1\nflavors:\n  - name: a\nclasses: []\ntenants: []\n",
	 "t.yaml:3: flavors[0]: missing required key \"sharing\"\n"
	 "t.yaml:3: flavors[0]: missing required key \"gpusPerNode\"\n"},
	{"wrong node kinds",
	 "version: 1\nflavors: {}\nclasses: x\ntenants:\n  - [a]\n",
	 "t.yaml:2: flavors: expected a list, found a mapping\n"
	 "t.yaml:3: classes: expected a list, found a scalar\n"
	 "t.yaml:5: tenants[0]: expected a mapping, found a list\n"},
	{"all shape errors at once",
	 "version: 1\nflavors:\n  - name: a\n    resource: x.io/g\n    sharing: s\n"
	 "    gpusPerNode: many\n    color: red\nclasses: []\ntenants: []\n",
	 "t.yaml:5: flavors[0].sharing: \"s\" is not one of: exclusive, mig, "
	 "time-slicing, mps\n"
	 "t.yaml:6: flavors[0].gpusPerNode: \"many\" is not a whole number\n"
	 "t.yaml:7: flavors[0]: unknown key \"color\" (expected one of: name, "
	 "resource, dra, sharing, nodeSelector, tolerations, gpusPerNode, "
	 "deviceClassNames)\n"},
	{"duplicate names",
	 "version: 1\nflavors:\n"
	 "  - {name: h100, resource: nvidia.com/gpu, sharing: exclusive, gpusPerNode: 8}\n"
	 "  - {name: h100, resource: nvidia.com/gpu, sharing: exclusive, gpusPerNode: 8}\n"
	 "classes:\n"
	 "  - {name: big, flavor: h100, gpus: 8}\n"
	 "  - {name: big, flavor: h100, gpus: 8}\n"
	 "tenants:\n"
	 "  - {name: t, namespaces: [a]}\n"
	 "  - {name: t, namespaces: [b]}\n",
	 "t.yaml:4: duplicate flavor \"h100\" (first defined at line 3)\n"
	 "t.yaml:7: duplicate class \"big\" (first defined at line 6)\n"
	 "t.yaml:10: duplicate tenant \"t\" (first defined at line 9)\n"},
	{"invalid names",
	 "version: 1\nflavors:\n"
	 "  - {name: H100 80GB, resource: nvidia.com/gpu, sharing: exclusive, gpusPerNode: 8}\n"
	 "classes: []\ntenants: []\n",
	 "t.yaml:3: flavor name \"H100 80GB\" is not valid (at most 63 letters, "
	 "digits, '-', '_' or '.', starting and ending with a letter or digit)\n"},
	{"unknown flavor in class",
	 "version: 1\nflavors: []\nclasses:\n  - name: train-large\n"
	 "    flavor: h100-80\n    gpus: 8\ntenants: []\n",
	 "t.yaml:5: class \"train-large\": unknown flavor \"h100-80\"\n"},
	{"unknown names close to known ones",
	 "version: 1\nflavors:\n"
	 "  - {name: h100-80gb, resource: nvidia.com/gpu, sharing: exclusive, gpusPerNode: 8}\n"
	 "  - {name: h100-40gb, resource: nvidia.com/gpu, sharing: exclusive, gpusPerNode: 8}\n"
	 "classes:\n"
	 "  - {name: train-large, flavor: h100-80, gpus: 8}\n"
	 "  - {name: train-small, flavor: H100-40GB, gpus: 1}\n"
	 "  - {name: dev, flavor: a1, gpus: 1}\n"
	 "tenants:\n"
	 "  - name: t\n    namespaces: [a]\n"
	 "    classes: [train-larg, Train-Small, trian-large, dve, inference]\n"
	 "    quota: [{flavor: h100-80gbx, nominal: 4}]\n",
	 /* two edits away, a case only, a swap (two edits); "a1" and
	  * "inference" are close to no known name */
	 "t.yaml:6: class \"train-large\": unknown flavor \"h100-80\" (did you "
	 "mean \"h100-80gb\"?)\n"
	 "t.yaml:7: class \"train-small\": unknown flavor \"H100-40GB\" (did "
	 "you mean \"h100-40gb\"?)\n"
	 "t.yaml:8: class \"dev\": unknown flavor \"a1\"\n"
	 "t.yaml:13: tenant \"t\": quota for unknown flavor \"h100-80gbx\" (did "
	 "you mean \"h100-80gb\"?)\n"
	 "t.yaml:12: tenant \"t\": unknown class \"train-larg\" (did you mean "
	 "\"train-large\"?)\n"
	 "t.yaml:12: tenant \"t\": unknown class \"Train-Small\" (did you mean "
	 "\"train-small\"?)\n"
	 "t.yaml:12: tenant \"t\": unknown class \"trian-large\" (did you mean "
	 "\"train-large\"?)\n"
	 "t.yaml:12: tenant \"t\": unknown class \"dve\" (did you mean "
	 "\"dev\"?)\n"
	 "t.yaml:12: tenant \"t\": unknown class \"inference\"\n"},
	{"descriptions",
	 HEAD "    description: \"two\\nlines\"\n"
	      "  - name: tabbed\n    flavor: h100\n    gpus: 1\n"
	      "    description: \"a\\tb\"\n"
	      "  - name: long\n    flavor: h100\n    gpus: 1\n"
	      "    description: " LONG_DESC "\n"
	      "  - name: fine\n    flavor: h100\n    gpus: 1\n"
	      "    description: " FINE_DESC "\n"
	      "tenants: []\n",
	 "t.yaml:11: class \"big\": description must be one line of text (no "
	 "newline, tab or other control character)\n"
	 "t.yaml:15: class \"tabbed\": description must be one line of text (no "
	 "newline, tab or other control character)\n"
	 "t.yaml:19: class \"long\": description is 257 bytes long (at most "
	 "256)\n"},
	{"gpus over gpusPerNode",
	 HEAD "  - name: huge\n    flavor: h100\n    gpus: 16\ntenants: []\n",
	 "t.yaml:13: class \"huge\": gpus 16 exceeds gpusPerNode 8 of flavor "
	 "\"h100\"\n"},
	{"maxGpus over gpusPerNode",
	 HEAD "    maxGpus: 9\ntenants: []\n",
	 "t.yaml:11: class \"big\": maxGpus 9 exceeds gpusPerNode 8 of flavor "
	 "\"h100\"\n"},
	{"gpus over maxGpus",
	 HEAD "    maxGpus: 4\ntenants: []\n",
	 "t.yaml:11: class \"big\": gpus 8 is greater than maxGpus 4\n"},
	{"zero gpus",
	 HEAD "  - name: none\n    flavor: h100\n    gpus: 0\ntenants: []\n",
	 "t.yaml:13: class \"none\": gpus 0 must be at least 1\n"},
	{"negative and absurd gpusPerNode",
	 "version: 1\nflavors:\n"
	 "  - {name: a, resource: x.io/a, sharing: mig, gpusPerNode: -1}\n"
	 "  - {name: b, resource: x.io/b, sharing: mps, gpusPerNode: 100000}\n"
	 "classes: []\ntenants: []\n",
	 "t.yaml:3: flavor \"a\": gpusPerNode -1 must be between 1 and 1024\n"
	 "t.yaml:4: flavor \"b\": gpusPerNode 100000 must be between 1 and 1024\n"},
	{"resource not extended",
	 "version: 1\nflavors:\n"
	 "  - {name: a, resource: gpu, sharing: exclusive, gpusPerNode: 1}\n"
	 "classes: []\ntenants: []\n",
	 "t.yaml:3: flavor \"a\": resource \"gpu\" is not an extended resource "
	 "name (expected domain/name, e.g. nvidia.com/gpu)\n"},
	{"malformed key=value",
	 "version: 1\nflavors:\n  - name: a\n    resource: x.io/a\n"
	 "    sharing: exclusive\n    gpusPerNode: 1\n    nodeSelector:\n"
	 "      - nvidia.com/gpu.product\n      - =x\n      - bad key=v\n"
	 "      - k=bad value\n      - k=1\n      - k=2\n"
	 "classes: []\ntenants: []\n",
	 "t.yaml:8: flavor \"a\": nodeSelector \"nvidia.com/gpu.product\" is not "
	 "of the form key=value\n"
	 "t.yaml:9: flavor \"a\": nodeSelector \"=x\" is not of the form "
	 "key=value\n"
	 "t.yaml:10: flavor \"a\": nodeSelector key \"bad key\" is not a valid "
	 "label key\n"
	 "t.yaml:11: flavor \"a\": nodeSelector value \"bad value\" is not a "
	 "valid label value\n"
	 "t.yaml:12: flavor \"a\": nodeSelector key \"k\" is set twice\n"
	 "t.yaml:13: flavor \"a\": nodeSelector key \"k\" is set twice\n"},
	{"what every pod has: the webhooks are not sent it",
	 "version: 1\nflavors:\n  - name: a\n    resource: x.io/a\n"
	 "    sharing: exclusive\n    gpusPerNode: 1\n    nodeSelector:\n"
	 "      - kubernetes.io/arch=amd64\n      - kubernetes.io/os=linux\n"
	 "      - kubernetes.io/osx=1\n"
	 "    tolerations:\n      - {key: node.kubernetes.io/unschedulable, "
	 "operator: Exists}\n      - {key: node.kubernetes.io.example/x, "
	 "operator: Exists}\n"
	 "classes: []\ntenants: []\n",
	 "t.yaml:8: flavor \"a\": nodeSelector key \"kubernetes.io/arch\" is on "
	 "every node and does not tell GPU nodes apart (a pod selecting it would "
	 "count as reaching them, and the webhooks are not sent pods for it): "
	 "select on a label of the GPU nodes, e.g. nvidia.com/gpu.product\n"
	 "t.yaml:9: flavor \"a\": nodeSelector key \"kubernetes.io/os\" is on "
	 "every node and does not tell GPU nodes apart (a pod selecting it would "
	 "count as reaching them, and the webhooks are not sent pods for it): "
	 "select on a label of the GPU nodes, e.g. nvidia.com/gpu.product\n"
	 "t.yaml:12: flavor \"a\": toleration key "
	 "\"node.kubernetes.io/unschedulable\" is a taint Kubernetes sets itself "
	 "(node.kubernetes.io/...), which every DaemonSet pod tolerates and the "
	 "webhooks are not sent pods for: taint the GPU nodes with a key of your "
	 "own (e.g. nvidia.com/gpu) and tolerate that\n"},
	{"tolerations",
	 "version: 1\nflavors:\n  - name: a\n    resource: x.io/a\n"
	 "    sharing: exclusive\n    gpusPerNode: 1\n    tolerations:\n"
	 "      - {key: k, operator: Exists, value: v}\n"
	 "      - {operator: Equal, value: v}\n"
	 "      - {key: k, operator: Exists, effect: NoSchedule, tolerationSeconds: 5}\n"
	 "      - {key: k, operator: Exists, effect: NoExecute,\n"
	 "         tolerationSeconds: -5}\n"
	 "      - {key: k, operator: Maybe}\n"
	 "classes: []\ntenants: []\n",
	 "t.yaml:13: flavors[0].tolerations[4].operator: \"Maybe\" is not one of: "
	 "Exists, Equal\n"},
	{"toleration semantics",
	 "version: 1\nflavors:\n  - name: a\n    resource: x.io/a\n"
	 "    sharing: exclusive\n    gpusPerNode: 1\n    tolerations:\n"
	 "      - {key: k, operator: Exists, value: v}\n"
	 "      - {operator: Equal, value: v}\n"
	 "      - {key: k, operator: Exists, effect: NoSchedule, tolerationSeconds: 5}\n"
	 "      - {key: k, operator: Exists, effect: NoExecute,\n"
	 "         tolerationSeconds: -5}\n"
	 "classes: []\ntenants: []\n",
	 "t.yaml:8: flavor \"a\": toleration with operator Exists must not have a "
	 "value\n"
	 "t.yaml:9: flavor \"a\": toleration with operator Equal needs a key (use "
	 "operator Exists to tolerate every taint)\n"
	 "t.yaml:10: flavor \"a\": tolerationSeconds is only allowed with effect "
	 "NoExecute\n"
	 "t.yaml:12: flavor \"a\": tolerationSeconds -5 must be between 0 and "
	 "31536000\n"},
	{"class fields",
	 HEAD "    cpu: lots\n    memory: 1TB\n    topology: {key: \"not a key\"}\n"
	      "    priorityClassName: Training_Jobs\ntenants: []\n",
	 "t.yaml:11: class \"big\": cpu \"lots\" is not a Kubernetes quantity (e.g. "
	 "\"8\" or \"500m\")\n"
	 "t.yaml:12: class \"big\": memory \"1TB\" is not a Kubernetes quantity "
	 "(e.g. \"64Gi\")\n"
	 "t.yaml:13: class \"big\": topology key \"not a key\" is not a valid "
	 "label key\n"
	 "t.yaml:14: class \"big\": priorityClassName \"Training_Jobs\" is not a "
	 "valid object name\n"},
	{"namespace listed in two tenants",
	 HEAD "tenants:\n  - name: research\n    namespaces: [research]\n"
	      "  - name: product\n    namespaces:\n      - product\n      - research\n",
	 "t.yaml:17: tenant \"product\": namespace \"research\" is already listed "
	 "by tenant \"research\" (line 13)\n"},
	{"namespace twice in one tenant",
	 HEAD "tenants:\n  - name: research\n    namespaces: [a, b, a]\n",
	 "t.yaml:13: tenant \"research\": namespace \"a\" is listed twice\n"},
	{"namespace hidden by earlier glob",
	 HEAD "tenants:\n  - name: research\n    namespaces: [\"research-*\"]\n"
	      "  - name: special\n    namespaces: [research-special]\n",
	 "t.yaml:15: tenant \"special\": namespace \"research-special\" is already "
	 "matched by pattern \"research-*\" of tenant \"research\" (line 13), which "
	 "comes first\n"},
	{"bad namespace names",
	 HEAD "tenants:\n  - name: t\n    namespaces: [Research, \"re[search\", "
	      "\"a_*\"]\n",
	 "t.yaml:13: tenant \"t\": namespace \"Research\" is not a valid namespace "
	 "name\n"
	 "t.yaml:13: tenant \"t\": namespace pattern \"re[search\" is not a valid "
	 "glob (letters, digits, '-', '*', '?', '[...]')\n"
	 "t.yaml:13: tenant \"t\": namespace pattern \"a_*\" is not a valid glob "
	 "(letters, digits, '-', '*', '?', '[...]')\n"},
	{"tenant references",
	 HEAD "tenants:\n  - name: t\n    namespaces: [a]\n    classes: [big, small, big]\n"
	      "    quota:\n      - {flavor: h200, nominal: 4}\n",
	 "t.yaml:16: tenant \"t\": quota for unknown flavor \"h200\" (did you "
	 "mean \"h100\"?)\n"
	 "t.yaml:14: tenant \"t\": class \"big\" uses flavor \"h100\" but the "
	 "tenant has no quota for it\n"
	 "t.yaml:14: tenant \"t\": unknown class \"small\"\n"
	 "t.yaml:14: tenant \"t\": class \"big\" is listed twice\n"},
	{"quota numbers",
	 HEAD "tenants:\n  - name: t\n    namespaces: [a]\n    cohort: lab\n"
	      "    quota:\n"
	      "      - flavor: h100\n        nominal: -1\n"
	      "        borrowingLimit: 2000000\n        lendingLimit: 5\n",
	 "t.yaml:17: tenant \"t\": quota h100: nominal -1 must be between 0 and "
	 "1000000\n"
	 "t.yaml:18: tenant \"t\": quota h100: borrowingLimit 2000000 must be "
	 "between 0 and 1000000\n"},
	{"lending more than nominal",
	 HEAD "tenants:\n  - name: t\n    namespaces: [a]\n    cohort: lab\n"
	      "    quota:\n      - {flavor: h100, nominal: 4, lendingLimit: 8}\n",
	 "t.yaml:16: tenant \"t\": quota h100: lendingLimit 8 exceeds nominal 4\n"},
	{"limits without a cohort",
	 HEAD "tenants:\n  - name: t\n    namespaces: [a]\n"
	      "    quota:\n      - {flavor: h100, nominal: 4, borrowingLimit: 8}\n",
	 "t.yaml:15: tenant \"t\": quota h100: borrowingLimit and lendingLimit "
	 "need a cohort (the tenant is in none)\n"},
	{"reclaim without a cohort",
	 HEAD "tenants:\n  - name: t\n    namespaces: [a]\n"
	      "    reclaimWithinCohort: Never\n"
	      "    quota:\n      - {flavor: h100, nominal: 4}\n",
	 "t.yaml:14: tenant \"t\": reclaimWithinCohort needs a cohort (the tenant "
	 "is in none)\n"},
	{"reclaim: not Kueue's word",
	 HEAD "tenants:\n  - name: t\n    namespaces: [a]\n    cohort: lab\n"
	      "    reclaimWithinCohort: never\n",
	 "t.yaml:15: tenants[0].reclaimWithinCohort: \"never\" is not one of: Any, "
	 "LowerPriority, Never\n"},
	{"kueue: a LocalQueue name is a label value",
	 HEAD "tenants:\n  - name: t\n    namespaces: [a]\n"
	      "    kueue: {localQueue: Team_A}\n",
	 "t.yaml:14: tenant \"t\": localQueue \"Team_A\" is not a LocalQueue name (a "
	 "DNS subdomain of at most 63 characters: it is stamped as the label "
	 "kueue.x-k8s.io/queue-name)\n"},
	{"kueue: who owns quota",
	 HEAD "tenants:\n  - name: t\n    namespaces: [a]\n"
	      "    kueue:\n      quotaOwner: Kueue\n",
	 "t.yaml:15: tenants[0].kueue.quotaOwner: \"Kueue\" is not one of: gpugate, "
	 "kueue\n"},
	{"admission warnings: not a word it knows",
	 "version: 1\nsettings:\n  admissionWarnings: none\nflavors: []\n"
	 "classes: []\ntenants: []\n",
	 "t.yaml:3: settings.admissionWarnings: \"none\" is not one of: problems, "
	 "all\n"},
	{"checkpoint claim without a name to create",
	 "version: 1\nflavors: []\nclasses: []\ntenants: []\ncheckpoint:\n"
	 "  claim:\n    create: true\n",
	 "t.yaml:6: checkpoint: claim needs claimName, the name of the claims to "
	 "mount (e.g. \"{tenant}-checkpoints\")\n"},
	{"checkpoint claim fields",
	 "version: 1\nflavors: []\nclasses: []\ntenants: []\ncheckpoint:\n"
	 "  claimName: ckpt\n  claim:\n    create: true\n"
	 "    storageClassName: Fast_SSD\n    size: 0Gi\n"
	 "    accessModes: [ReadWriteMany, ReadWriteOnce, ReadWriteMany]\n",
	 "t.yaml:9: checkpoint: claim.storageClassName \"Fast_SSD\" is not a valid "
	 "StorageClass name (lower-case letters, digits, '-' and '.')\n"
	 "t.yaml:10: checkpoint: claim.size \"0Gi\" is not a storage size (a "
	 "quantity above 0, e.g. 10Gi)\n"
	 "t.yaml:11: checkpoint: claim.accessModes lists an access mode twice\n"},
	{"checkpoint claim: read-only is no checkpoint",
	 "version: 1\nflavors: []\nclasses: []\ntenants: []\ncheckpoint:\n"
	 "  claimName: ckpt\n  claim:\n    accessModes: [ReadOnlyMany]\n",
	 "t.yaml:8: checkpoint.claim.accessModes[0]: \"ReadOnlyMany\" is not one "
	 "of: ReadWriteOnce, ReadWriteMany, ReadWriteOncePod\n"},
	{"checkpoint timeout",
	 "version: 1\nflavors: []\nclasses: []\ntenants: []\ncheckpoint:\n"
	 "  timeoutSeconds: 0\n",
	 "t.yaml:6: checkpoint: timeoutSeconds 0 must be between 1 and 86400\n"},
	{"gang settings",
	 "version: 1\nsettings:\n  gangStart: later\n  gangTimeoutSeconds: 5\n"
	 "flavors: []\nclasses: []\ntenants: []\n",
	 "t.yaml:3: settings.gangStart: \"later\" is not one of: auto, workload, "
	 "podgroup, gates, off\n"},
	{"gang timeout",
	 "version: 1\nsettings:\n  gangTimeoutSeconds: 5\n"
	 "flavors: []\nclasses: []\ntenants: []\n",
	 "t.yaml:3: settings: gangTimeoutSeconds 5 must be between 10 and 86400\n"},
	{"second quota entry",
	 HEAD "tenants:\n  - name: t\n    namespaces: [a]\n"
	      "    quota:\n      - {flavor: h100, nominal: 4}\n"
	      "      - {flavor: h100, nominal: 8}\n",
	 "t.yaml:16: tenant \"t\": second quota entry for flavor \"h100\" (first "
	 "at line 15)\n"},
	{"class sharing not allowed",
	 HEAD "tenants:\n  - name: t\n    namespaces: [a]\n    classes: [big]\n"
	      "    sharing: [mig, mig]\n    quota:\n      - {flavor: h100, nominal: 8}\n",
	 "t.yaml:15: tenant \"t\": sharing mode mig is listed twice\n"
	 "t.yaml:14: tenant \"t\": class \"big\" uses sharing mode exclusive, which "
	 "the tenant's sharing list does not allow\n"},
	{"class without quota",
	 HEAD "tenants:\n  - name: t\n    namespaces: [a]\n    classes: [big]\n",
	 "t.yaml:14: tenant \"t\": class \"big\" uses flavor \"h100\" but the "
	 "tenant has no quota for it\n"},
	{"settings labels",
	 "version: 1\nsettings:\n  classLabel: gpugate.io/tenant\n"
	 "  gpusLabel: \"not/a/key\"\nflavors: []\nclasses: []\ntenants: []\n",
	 "t.yaml:3: settings: classLabel \"gpugate.io/tenant\" is a label gpugate "
	 "stamps itself; choose another key\n"
	 "t.yaml:4: settings: gpusLabel \"not/a/key\" is not a valid label key\n"},
	{"exemptions",
	 "version: 1\nsettings:\n  exemptions:\n"
	 "    namespaces: [gpu-operator, Bad_NS, team-a, gpu-operator]\n"
	 "    serviceAccounts: [monitoring/dcgm, nons, team-a/sa, x/Bad_SA]\n"
	 "flavors: []\nclasses: []\n"
	 "tenants:\n  - {name: a, namespaces: [\"team-*\"], quota: []}\n",
	 "t.yaml:4: settings: exemptions: namespace \"Bad_NS\" is not a valid "
	 "namespace name (lowercase letters, digits and '-', at most 63)\n"
	 "t.yaml:4: settings: exemptions: namespace \"team-a\" is in tenant "
	 "\"a\"'s namespaces (\"team-*\"): a tenant's pods are always judged and "
	 "counted; exempt only namespaces of cluster components\n"
	 "t.yaml:4: settings: exemptions: namespace \"gpu-operator\" is listed "
	 "twice\n"
	 "t.yaml:5: settings: exemptions: serviceAccount \"nons\" is not of the "
	 "form namespace/name\n"
	 "t.yaml:5: settings: exemptions: serviceAccount's namespace \"team-a\" "
	 "is in tenant \"a\"'s namespaces (\"team-*\"): a tenant's pods are "
	 "always judged and counted; exempt only namespaces of cluster "
	 "components\n"
	 "t.yaml:5: settings: exemptions: serviceAccount \"x/Bad_SA\" is not of "
	 "the form namespace/name (a namespace name and a ServiceAccount name)\n"},
	{"same label twice",
	 "version: 1\nsettings:\n  classLabel: x.io/c\n  gpusLabel: x.io/c\n"
	 "flavors: []\nclasses: []\ntenants: []\n",
	 "t.yaml:4: settings: classLabel and gpusLabel must be different keys\n"},
	{"checkpoint",
	 "version: 1\nflavors: []\nclasses: []\ntenants: []\ncheckpoint:\n"
	 "  gracePeriodSeconds: 999999\n  mountPath: relative/dir\n"
	 "  claimName: \"{team}-ckpt\"\n"
	 "  env: [\"NOEQUALS\", \"1BAD=x\", \"GPUGATE_PREEMPTIBLE=0\", "
	 "\"NVIDIA_MIG_MONITOR_DEVICES=all\", \"A=1\", \"A=2\", "
	 "\"GPUGATE_CHECKPOINT_SIGNAL=/x\"]\n",
	 "t.yaml:6: checkpoint: gracePeriodSeconds 999999 must be between 0 and "
	 "86400\n"
	 "t.yaml:7: checkpoint: mountPath \"relative/dir\" must be an absolute "
	 "path other than / and without ':'\n"
	 "t.yaml:8: checkpoint: claimName \"{team}-ckpt\": unknown placeholder "
	 "\"{team}\" (use {tenant} or {namespace})\n"
	 "t.yaml:9: checkpoint: env \"NOEQUALS\" is not of the form NAME=value\n"
	 "t.yaml:9: checkpoint: env name \"1BAD\" is not a valid variable name\n"
	 "t.yaml:9: checkpoint: env \"GPUGATE_PREEMPTIBLE\" is reserved\n"
	 "t.yaml:9: checkpoint: env \"NVIDIA_MIG_MONITOR_DEVICES\" is reserved\n"
	 "t.yaml:9: checkpoint: env \"A\" is set twice\n"
	 "t.yaml:9: checkpoint: env \"GPUGATE_CHECKPOINT_SIGNAL\" is reserved\n"},
	{"claim name not a name",
	 "version: 1\nflavors: []\nclasses: []\ntenants: []\ncheckpoint:\n"
	 "  claimName: \"{tenant}_Checkpoints\"\n",
	 "t.yaml:6: checkpoint: claimName \"{tenant}_Checkpoints\" does not make a "
	 "valid claim name (lower-case letters, digits, '-' and '.')\n"},
	{"claim name not a name for some tenant",
	 "version: 1\nflavors: []\nclasses: []\ntenants:\n"
	 "  - {name: research, namespaces: [research]}\n"
	 "  - {name: ML_Team, namespaces: [ml]}\n"
	 "  - {name: ops.infra, namespaces: [ops]}\n"
	 "checkpoint:\n  claimName: \"{tenant}-{namespace}-ckpt\"\n",
	 "t.yaml:6: tenant \"ML_Team\": checkpoint claimName "
	 "\"{tenant}-{namespace}-ckpt\" makes \"ML_Team-{namespace}-ckpt\", "
	 "which is not a valid PersistentVolumeClaim name (lower-case letters, "
	 "digits, '-' and '.')\n"},
	{"claim name too long for some tenant",
	 "version: 1\nflavors: []\nclasses: []\ntenants:\n"
	 "  - {name: research, namespaces: [research]}\n"
	 "  - name: " LONG_KEY_60 "abc\n    namespaces: [long]\n"
	 "checkpoint:\n"
	 "  claimName: \"{tenant}.{tenant}.{tenant}.{tenant}\"\n",
	 "t.yaml:6: tenant \"" LONG_KEY_60 "abc\": checkpoint claimName "
	 "\"{tenant}.{tenant}.{tenant}.{tenant}\" makes a name longer than the "
	 "253 characters of a PersistentVolumeClaim name\n"},
	{"string too long",
	 "version: 1\nflavors:\n  - name: "
	 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n"
	 "    resource: x.io/a\n    sharing: mig\n    gpusPerNode: 1\n"
	 "classes: []\ntenants: []\n",
	 "t.yaml:3: flavors[0].name: is 261 characters long, at most 253 "
	 "allowed\n"},
	{"nodeSelector key longer than any label key",
	 "version: 1\nflavors:\n  - name: a\n    resource: x.io/a\n"
	 "    sharing: exclusive\n    gpusPerNode: 1\n    nodeSelector:\n"
	 "      - " LONG_KEY "=v\n"
	 "classes: []\ntenants: []\n",
	 "t.yaml:8: flavor \"a\": nodeSelector key in \"" LONG_KEY_60 "...\" is too "
	 "long (a label key has at most 317 characters)\n"},
	{"toleration key and value",
	 "version: 1\nflavors:\n  - name: a\n    resource: x.io/a\n"
	 "    sharing: exclusive\n    gpusPerNode: 1\n    tolerations:\n"
	 "      - {key: \"bad key\", operator: Exists}\n"
	 "      - {key: k, operator: Equal, value: \"bad value\"}\n"
	 "classes: []\ntenants: []\n",
	 "t.yaml:8: flavor \"a\": toleration key \"bad key\" is not a valid "
	 "label key\n"
	 "t.yaml:9: flavor \"a\": toleration value \"bad value\" is not a valid "
	 "label value\n"},
	{"cohort name",
	 "version: 1\nflavors: []\nclasses: []\ntenants:\n"
	 "  - name: t\n    namespaces: [a]\n    cohort: Lab Team\n",
	 "t.yaml:7: tenant \"t\": cohort name \"Lab Team\" is not valid (at most "
	 "63 letters, digits, '-', '_' or '.', starting and ending with a "
	 "letter or digit)\n"},
	{"keys that are not words",
	 "version: 1\nflavors: []\nclasses: []\ntenants: []\n"
	 "? [a, b]\n: 1\nsettings:\n  ? {mode: warn}\n  : 1\n",
	 "t.yaml:5: keys must be plain words, found a list\n"
	 "t.yaml:8: settings: keys must be plain words, found a mapping\n"},
	{"NUL character",
	 "version: 1\nflavors: []\nclasses: []\ntenants: []\ncheckpoint:\n"
	 "  mountPath: \"/check\\0point\"\n",
	 "t.yaml:6: checkpoint.mountPath: contains a NUL character\n"},
	{"empty strings",
	 "version: 1\nflavors: []\nclasses: []\ntenants: []\ncheckpoint:\n"
	 "  claimName: \"\"\n  mountPath:\n",
	 "t.yaml:6: checkpoint.claimName: must not be empty\n"
	 "t.yaml:7: checkpoint.mountPath: must not be empty\n"},
	{"list over its cap",
	 "version: 1\nflavors: []\nclasses: []\ntenants:\n"
	 "  - name: t\n    namespaces: [a]\n"
	 "    sharing: [mig, mps, mig, mps, mig]\n",
	 "t.yaml:7: tenants[0].sharing: has 5 entries, at most 4 allowed\n"},
	{"list or mapping where a single value belongs",
	 "version: [1]\nflavors: []\nclasses: []\ntenants: []\n"
	 "settings: {mode: {enforce: true}}\n",
	 "t.yaml:1: version: expected a single value, found a list\n"
	 "t.yaml:5: settings.mode: expected a single value, found a mapping\n"},
	{"empty list where one entry is required",
	 HEAD "tenants:\n  - name: t\n    namespaces: []\n",
	 "t.yaml:13: tenants[0].namespaces: must have at least 1 entry\n"},
	/* DRA device classes (flavors[].deviceClassNames,
	 * settings.gpuDeviceClassNames). */
	{"device class names that are no DeviceClass names",
	 "version: 1\nsettings:\n  gpuDeviceClassNames:\n    - Gpu_Nvidia\n"
	 "flavors:\n  - name: a\n    resource: x.io/a\n    sharing: exclusive\n"
	 "    gpusPerNode: 8\n    deviceClassNames:\n      - gpu.nvidia.com\n"
	 "      - \"gpu nvidia\"\nclasses: []\ntenants: []\n",
	 "t.yaml:4: settings: gpuDeviceClassNames: \"Gpu_Nvidia\" is not a valid "
	 "DeviceClass name (a DNS subdomain: lower-case letters, digits, '-' and "
	 "'.')\n"
	 "t.yaml:12: flavor \"a\": deviceClassNames: \"gpu nvidia\" is not a "
	 "valid DeviceClass name (a DNS subdomain: lower-case letters, digits, '-' "
	 "and '.')\n"},
	{"a device class mapped twice",
	 "version: 1\nflavors:\n"
	 "  - name: a\n    resource: x.io/a\n    sharing: exclusive\n"
	 "    gpusPerNode: 8\n    deviceClassNames:\n      - gpu.nvidia.com\n"
	 "      - gpu.nvidia.com\n"
	 "  - name: b\n    resource: x.io/b\n    sharing: mig\n"
	 "    gpusPerNode: 8\n    deviceClassNames:\n      - mig.nvidia.com\n"
	 "      - gpu.nvidia.com\n"
	 "classes: []\ntenants: []\n",
	 "t.yaml:9: flavor \"a\": device class \"gpu.nvidia.com\" is listed "
	 "twice\n"
	 "t.yaml:16: flavor \"b\": device class \"gpu.nvidia.com\" already maps "
	 "to flavor \"a\" (line 8); a device class maps to one flavor at most\n"},
	{"a GPU device class listed twice",
	 "version: 1\nsettings:\n  gpuDeviceClassNames:\n    - gpu.example.com\n"
	 "    - gpu.example.com\nflavors: []\nclasses: []\ntenants: []\n",
	 "t.yaml:5: settings: gpuDeviceClassNames lists \"gpu.example.com\" "
	 "twice\n"},
	{"an empty gpuDeviceClassNames",
	 "version: 1\nsettings:\n  gpuDeviceClassNames: []\n"
	 "flavors: []\nclasses: []\ntenants: []\n",
	 "t.yaml:3: settings.gpuDeviceClassNames: must have at least 1 entry\n"},
	{"health signals that are not well formed",
	 "version: 1\nflavors: []\nclasses: []\ntenants: []\nhealth:\n"
	 "  taints:\n    - \"gpu-error=fatal:Sometimes\"\n    - \"=x\"\n"
	 "    - \"a b\"\n    - \"gpu-error=bad value:NoExecute\"\n"
	 "    - gpu-error\n    - gpu-error\n"
	 "  conditions:\n    - \"GpuXidError=Yes\"\n    - \"Gpu Xid\"\n"
	 "  labels:\n    - \"repair=in progress\"\n    - \"/x\"\n",
	 "t.yaml:7: health: taint \"gpu-error=fatal:Sometimes\": "
	 "\"fatal:Sometimes\" is not a valid taint value\n"
	 "t.yaml:8: health: taint \"=x\" is not of the form "
	 "key[=value][:NoSchedule|PreferNoSchedule|NoExecute]\n"
	 "t.yaml:9: health: taint \"a b\": \"a b\" is not a valid taint key\n"
	 "t.yaml:10: health: taint \"gpu-error=bad value:NoExecute\": "
	 "\"bad value\" is not a valid taint value\n"
	 "t.yaml:12: health: taint \"gpu-error\" is listed twice\n"
	 "t.yaml:14: health: condition \"GpuXidError=Yes\": the status must be "
	 "True, False or Unknown\n"
	 "t.yaml:15: health: condition \"Gpu Xid\": \"Gpu Xid\" is not a valid "
	 "condition type\n"
	 "t.yaml:17: health: label \"repair=in progress\": \"in progress\" is "
	 "not a valid label value\n"
	 "t.yaml:18: health: label \"/x\": \"/x\" is not a valid label key\n"},
	{"an empty returnAfter",
	 "version: 1\nflavors: []\nclasses: []\ntenants: []\nhealth:\n"
	 "  returnAfter: {}\n",
	 "t.yaml:6: health: returnAfter needs validationLabel, settleSeconds or both "
	 "(without it a node whose signal clears is back at once: omit returnAfter "
	 "for that)\n"},
	{"a settle time over a week, a bad validation label",
	 "version: 1\nflavors: []\nclasses: []\ntenants: []\nhealth:\n"
	 "  returnAfter:\n    validationLabel: \"a b=c\"\n    settleSeconds: 604801\n",
	 "t.yaml:7: health: label \"a b=c\": \"a b\" is not a valid label key\n"
	 "t.yaml:8: health: returnAfter.settleSeconds 604801 is out of range "
	 "(0..604800: at most a week)\n"},
	{"a drainedBy label twice",
	 "version: 1\nflavors: []\nclasses: []\ntenants: []\nhealth:\n"
	 "  drainedBy: [x, x]\n",
	 "t.yaml:6: health: label \"x\" is listed twice\n"},
	{"idle rules that are not well formed",
	 "version: 1\nflavors:\n  - name: f\n    resource: x.io/f\n    sharing: exclusive\n"
	 "    gpusPerNode: 8\n"
	 "classes:\n  - name: c\n    flavor: f\n    gpus: 1\n"
	 "    idle: {below: \"0%\", for: 30m}\n"
	 "  - name: d\n    flavor: f\n    gpus: 1\n    idle:\n      below: \"5.123%\"\n"
	 "      for: 30s\n"
	 "tenants:\n  - name: t\n    namespaces: [t]\n    idle:\n      below: 5\n"
	 "      for: 1h30\n      action: reclaim\n"
	 "  - name: u\n    namespaces: [u]\n    idle: {below: \"101%\", for: 8d}\n",
	 "t.yaml:11: class \"c\": idle.below \"0%\" is not a percent above 0 and at "
	 "most 100 (e.g. \"5%\" or \"2.5%\")\n"
	 "t.yaml:16: class \"d\": idle.below \"5.123%\" is not a percent above 0 and at "
	 "most 100 (e.g. \"5%\" or \"2.5%\")\n"
	 "t.yaml:17: class \"d\": idle.for \"30s\" is out of range (1m..7d: below a "
	 "minute the exporter's samples are too few to judge)\n"
	 "t.yaml:22: tenant \"t\": idle.below \"5\" is not a percent above 0 and at "
	 "most 100 (e.g. \"5%\" or \"2.5%\")\n"
	 "t.yaml:23: tenant \"t\": idle.for \"1h30\" is not a duration (whole s, m, h "
	 "or d, e.g. \"30m\" or \"1h30m\")\n"
	 "t.yaml:27: tenant \"u\": idle.below \"101%\" is not a percent above 0 and at "
	 "most 100 (e.g. \"5%\" or \"2.5%\")\n"
	 "t.yaml:27: tenant \"u\": idle.for \"8d\" is out of range (1m..7d: below a "
	 "minute the exporter's samples are too few to judge)\n"},
	{"an idle action that is not one",
	 "version: 1\nflavors: []\nclasses: []\ntenants:\n  - name: t\n"
	 "    namespaces: [t]\n    idle: {below: \"5%\", for: 30m, action: kill}\n",
	 "t.yaml:7: tenants[0].idle.action: \"kill\" is not one of: warn, reclaim\n"},
	{"a flavor with neither resource nor dra, and one with both",
	 "version: 1\nflavors:\n  - {name: a, sharing: exclusive, gpusPerNode: 8}\n"
	 "  - name: b\n    resource: nvidia.com/gpu\n    sharing: exclusive\n"
	 "    gpusPerNode: 8\n    dra: {deviceClassName: gpu.nvidia.com, driver: gpu.nvidia.com}\n"
	 "classes: []\ntenants: []\n",
	 "t.yaml:3: flavor \"a\": needs resource (the extended resource its GPUs are, "
	 "e.g. nvidia.com/gpu) or dra (a DeviceClass)\n"
	 "t.yaml:5: flavor \"b\": a flavor served through DRA (dra) has no resource: its "
	 "pods get their devices through a claim template; remove resource, or make a "
	 "second flavor for the device plugin's\n"},
	{"a dra block with bad names and values",
	 "version: 1\nflavors:\n  - name: m\n    sharing: mig\n    gpusPerNode: 56\n"
	 "    dra:\n      deviceClassName: Mig_Class\n      driver: \"gpu nvidia\"\n"
	 "      attributes: [\"9lives=x\", \"productName=it's\", \"a=1\", \"a=2\"]\n"
	 "      minCapacity: [memory=lots]\n      selectors: [\"true\"]\n"
	 "      tolerations: [{key: k, operator: Exists, effect: PreferNoSchedule}]\n"
	 "classes: [{name: c, flavor: m, gpus: 1, maxGpus: 40}]\ntenants: []\n",
	 "t.yaml:7: flavor \"m\": dra.deviceClassName: \"Mig_Class\" is not a valid "
	 "DeviceClass name (a DNS subdomain: lower-case letters, digits, '-' and '.')\n"
	 "t.yaml:8: flavor \"m\": dra.driver: \"gpu nvidia\" is not a driver name (a DNS "
	 "subdomain, e.g. gpu.nvidia.com)\n"
	 "t.yaml:9: flavor \"m\": dra.attributes: \"9lives=x\" is not name=value with a "
	 "device attribute name (a letter or _, then letters, digits or _, at most 32; "
	 "optionally domain/name)\n"
	 "t.yaml:9: flavor \"m\": dra.attributes: \"it's\" must be 1 to 64 printable "
	 "characters without ' or \\\n"
	 "t.yaml:9: flavor \"m\": dra.attributes: \"a\" is set twice\n"
	 "t.yaml:10: flavor \"m\": dra.minCapacity: \"lots\" is not a quantity (e.g. 80Gi)\n"
	 "t.yaml:12: flavor \"m\": dra.tolerations: a device taint has no effect "
	 "PreferNoSchedule (NoSchedule or NoExecute)\n"
	 "t.yaml:6: flavor \"m\": a mig flavor served through DRA names its partition's "
	 "profile (attributes: [\"profile=1g.10gb\"]): one flavor per profile, its units "
	 "are partitions\n"
	 "t.yaml:13: class \"c\": 40 devices a pod, but one DRA claim is allocated at most "
	 "32 (flavor \"m\" is served through DRA)\n"},
	{"sharing by DRA without sharedCapacity, and the reverse",
	 "version: 1\nflavors:\n  - name: ts\n    sharing: time-slicing\n    gpusPerNode: 8\n"
	 "    dra: {deviceClassName: gpu.nvidia.com, driver: gpu.nvidia.com}\n"
	 "  - name: ex\n    sharing: exclusive\n    gpusPerNode: 8\n"
	 "    dra:\n      deviceClassName: gpu.nvidia.com\n      driver: gpu.nvidia.com\n"
	 "      sharedCapacity: {name: memory, perUnit: 10Gi, unitsPerDevice: 8}\n"
	 "classes: []\ntenants: []\n",
	 "t.yaml:4: flavor \"ts\": sharing time-slicing through DRA shares a device by its "
	 "capacity: add dra.sharedCapacity {name, perUnit, unitsPerDevice} (e.g. {name: "
	 "memory, perUnit: 10Gi, unitsPerDevice: 8})\n"
	 "t.yaml:13: flavor \"ex\": dra.sharedCapacity shares a device, but sharing is "
	 "exclusive: use time-slicing or mps\n"},
	{"bad sharedCapacity values, a class above a device",
	 "version: 1\nflavors:\n  - name: s\n    sharing: mps\n    gpusPerNode: 64\n"
	 "    dra:\n      deviceClassName: gpu.nvidia.com\n      driver: gpu.nvidia.com\n"
	 "      sharedCapacity: {name: \"9mem\", perUnit: 100m, unitsPerDevice: 0}\n"
	 "  - name: t\n    sharing: mps\n    gpusPerNode: 64\n"
	 "    dra:\n      deviceClassName: gpu.nvidia.com\n      driver: gpu.nvidia.com\n"
	 "      sharedCapacity: {name: memory, perUnit: 10Gi, unitsPerDevice: 8}\n"
	 "classes:\n  - {name: big, flavor: t, gpus: 4, maxGpus: 16}\n"
	 "  - {name: ok, flavor: t, gpus: 1, maxGpus: 8}\ntenants: []\n",
	 "t.yaml:9: flavor \"s\": dra.sharedCapacity.name: \"9mem\" is not a device "
	 "capacity name (a letter or _, then letters, digits or _, at most 32; optionally "
	 "domain/name)\n"
	 "t.yaml:9: flavor \"s\": dra.sharedCapacity.perUnit: \"100m\" is not a whole "
	 "quantity above 0 (e.g. 10Gi)\n"
	 "t.yaml:9: flavor \"s\": dra.sharedCapacity.unitsPerDevice: 0 is not 1 to 1000\n"
	 "t.yaml:18: class \"big\": 16 units a pod, but a pod's share of flavor \"t\" is "
	 "on one device, which holds 8 (dra.sharedCapacity.unitsPerDevice)\n"},
	{"an unknown health key",
	 "version: 1\nflavors: []\nclasses: []\ntenants: []\nhealth:\n"
	 "  taint: [x]\n",
	 "t.yaml:6: health: unknown key \"taint\" (expected one of: defaults, "
	 "taints, conditions, labels, onUnhealthy, returnAfter, drainedBy)\n"},
};

ParameterizedTestParameters(validate, rejects)
{
	return cr_make_param_array(struct bad_case, bad_cases,
				   sizeof(bad_cases) / sizeof(bad_cases[0]));
}

ParameterizedTest(struct bad_case *c, validate, rejects)
{
	struct policy *p = NULL;
	struct diag d;
	int rc;

	diag_init(&d);
	rc = policy_parse("t.yaml", c->yaml, strlen(c->yaml), &p, &d);
	cr_assert_eq(rc, -1, "case \"%s\": accepted", c->name);
	cr_assert_null(p);
	cr_assert_str_eq(diag_text(&d), c->errors, "case \"%s\"", c->name);
}

Test(validate, accepts_minimal_policy)
{
	static const char yaml[] = "version: 1\nflavors: []\nclasses: []\ntenants: []\n";
	struct policy *p = NULL;
	struct diag d;

	diag_init(&d);
	cr_assert_eq(policy_parse("t.yaml", yaml, strlen(yaml), &p, &d), 0, "%s",
		     diag_text(&d));
	cr_assert_eq(policy_flavor_count(p), 0);
	policy_free(p);
}

Test(validate, accepts_the_longest_label_key)
{
	/* A 253-character prefix, '/', a 63-character name: 317 in all. */
	char yaml[1024], key[K8S_QUALIFIED_NAME_MAX + 1];
	struct policy *p = NULL;
	struct diag d;

	memset(key, 'p', 253);
	key[253] = '/';
	memset(key + 254, 'n', 63);
	key[317] = '\0';
	snprintf(yaml, sizeof(yaml),
		 "version: 1\nflavors:\n  - name: a\n    resource: x.io/a\n"
		 "    sharing: exclusive\n    gpusPerNode: 1\n"
		 "    nodeSelector: [\"%s=v\"]\n"
		 "    tolerations: [{key: \"%s\", operator: Exists}]\n"
		 "classes: []\ntenants: []\n",
		 key, key);
	diag_init(&d);
	cr_assert_eq(policy_parse("t.yaml", yaml, strlen(yaml), &p, &d), 0, "%s",
		     diag_text(&d));
	cr_assert_str_eq(policy_flavor_at(p, 0)->node_selector[0].key, key);
	policy_free(p);
}

Test(validate, accepts_claim_names_of_every_tenant)
{
	/* 63 + 12 characters: no DNS label, but a valid claim name. */
	static const char yaml[] =
		"version: 1\nflavors: []\nclasses: []\ntenants:\n"
		"  - {name: research, namespaces: [research]}\n"
		"  - name: " LONG_KEY_60 "abc\n    namespaces: [long]\n"
		"checkpoint:\n  claimName: \"{tenant}-checkpoints\"\n";
	struct policy *p = NULL;
	struct diag d;

	diag_init(&d);
	cr_assert_eq(policy_parse("t.yaml", yaml, strlen(yaml), &p, &d), 0, "%s",
		     diag_text(&d));
	policy_free(p);
}

Test(validate, refuses_alias_expansion_bombs)
{
	/* One flavor with 64 tolerations, aliased 10000 times: a 60 KB file
	 * that expands to millions of values. */
	size_t cap = 1 << 20, o = 0;
	char *yaml = malloc(cap);
	struct policy *p = NULL;
	struct diag d;

	cr_assert_not_null(yaml);
	o += (size_t)snprintf(yaml + o, cap - o,
			      "version: 1\nclasses: []\ntenants: []\nflavors:\n"
			      "  - &f\n    name: a\n    resource: x.io/a\n"
			      "    sharing: mig\n    gpusPerNode: 1\n"
			      "    tolerations:\n");
	for (int i = 0; i < 64; i++)
		o += (size_t)snprintf(yaml + o, cap - o,
				      "      - {key: k%d, operator: Exists, effect: NoExecute, "
				      "tolerationSeconds: 1}\n", i);
	for (int i = 0; i < 9999; i++)
		o += (size_t)snprintf(yaml + o, cap - o, "  - *f\n");
	diag_init(&d);
	cr_assert_eq(policy_parse("t.yaml", yaml, o, &p, &d), -1);
	cr_assert(strstr(diag_text(&d), "the document is too large (more than "
					"2000000 values after expanding aliases)"),
		  "%s", diag_text(&d));
	free(yaml);
}

Test(validate, reports_every_error_not_only_the_first)
{
	static const char yaml[] =
		"version: 1\nflavors: []\nclasses:\n"
		"  - {name: a, flavor: x, gpus: 1}\n"
		"  - {name: b, flavor: y, gpus: 1}\n"
		"  - {name: c, flavor: z, gpus: 1}\n"
		"tenants: []\n";
	struct policy *p = NULL;
	struct diag d;

	diag_init(&d);
	cr_assert_eq(policy_parse("t.yaml", yaml, strlen(yaml), &p, &d), -1);
	cr_assert_eq(diag_count(&d), 3);
}

Test(validate, refuses_files_over_the_size_cap)
{
	struct policy *p = NULL;
	struct diag d;

	diag_init(&d);
	cr_assert_eq(policy_parse("t.yaml", "", POLICY_MAX_FILE_BYTES + 1u, &p, &d),
		     -1);
	cr_assert_str_eq(diag_text(&d),
			 "t.yaml: the file is larger than 16 MiB (16777216 bytes)\n");
}
