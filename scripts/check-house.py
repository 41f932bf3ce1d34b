#!/usr/bin/env python3
"""scripts/check-house.py [OBJDIR] - the house's rules that the include table cannot
hold (make test; docs/internals.md, "The house").

  1. No circle between files.  File A depends on file B when A's object
     uses a symbol that B's object defines (read from the objects with nm,
     so a function declared in one header and defined elsewhere counts where
     it is defined).  A circle among files is a tangle no folder table sees:
     charge.c -> decide.c (wl_get) -> charge.c.
  2. No product .c file over MAX_LINES lines: a file that large holds several
     things and is cut along its seams instead.
  3. webhook/ is admission alone: at most WEBHOOK_MAX .c files; a background
     loop is a controller (controllers/), a report a report (report/).
  4. A pod-template kind is its row (issue #28): no product file but
     policy/kinds.c has a string literal that is the kind or the resource of
     a WL_TEMPLATE row of policy/kinds.c ("CronJob", "deployments"), read
     from the rows themselves, so a new row extends the rule.  Code that
     needs to know such a kind reads its row (how its pods are counted,
     where its template sits, its template_owner); prose that names one
     ("for each Pod, Job, Deployment, ...") is no such literal.

Prints one line per violation and exits 1; silent and 0 when the house holds.
"""
import os
import re
import subprocess
import sys

PRODUCT_DIRS = ["base", "policy", "codec", "http", "certs", "usage", "kube",
                "metrics", "webhook", "report", "controllers", "daemon", "cli"]
MAX_LINES = 1500
WEBHOOK_MAX = 12
KINDS = "policy/kinds.c"
# A row of the table: {"group", "version", "Kind", "resource", "api/version", WL_...
ROW = re.compile(r'\{\s*"([^"]*)"\s*,\s*"([^"]*)"\s*,\s*"([^"]*)"\s*,\s*"([^"]*)"\s*,'
                 r'\s*"([^"]*)"\s*,\s*(WL_[A-Z_]+)\b')
# C string and character literals and comments, in the order they start.
TOKEN = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|/\*.*?\*/|//[^\n]*', re.S)


def modules(root):
    """module name -> list of files (its .c and .h)"""
    mods = {}
    for d in PRODUCT_DIRS:
        path = os.path.join(root, d)
        if not os.path.isdir(path):
            continue
        for f in sorted(os.listdir(path)):
            if f.endswith((".c", ".h")):
                mods.setdefault(d + "/" + f[:-2], []).append(d + "/" + f)
    return mods


def edges(root, objdir, mods):
    """module -> {module whose symbols it uses: the first such symbol}"""
    defined, used = {}, {}
    for m, files in mods.items():
        if m + ".c" not in files:
            continue
        obj = os.path.join(objdir, m + ".o")
        if not os.path.exists(obj):
            sys.exit(f"check-house: {obj} is missing: build first (make)")
        out = subprocess.run(["nm", "-P", obj], check=True, capture_output=True,
                             text=True).stdout
        used[m] = []
        for line in out.splitlines():
            parts = line.split()
            if len(parts) < 2:
                continue
            name, kind = parts[0], parts[1]
            if kind == "U":
                used[m].append(name)
            elif kind in "TDRBGSC":
                defined.setdefault(name, m)
    graph = {m: {} for m in mods}
    for m, names in used.items():
        for name in names:
            to = defined.get(name)
            if to and to != m:
                graph[m].setdefault(to, name)
    return graph


def circles(graph):
    """the strongly connected components of more than one module (Tarjan)"""
    index, low, stack, on, found = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def template_names(root):
    """the kind and resource names of the WL_TEMPLATE rows of policy/kinds.c"""
    with open(os.path.join(root, KINDS), encoding="utf-8") as fh:
        rows = ROW.findall(fh.read())
    names = set()
    for group, version, kind, resource, api, wl in rows:
        if wl == "WL_TEMPLATE":
            names.update((kind, resource))
    return len(rows), names


def named_templates(root, mods, names):
    """violations of rule 4: (file, line, literal)"""
    found = []
    for m, files in sorted(mods.items()):
        for f in files:
            if f == KINDS:
                continue
            with open(os.path.join(root, f), encoding="utf-8") as fh:
                text = fh.read()
            for t in TOKEN.finditer(text):
                lit = t.group(0)
                if lit.startswith('"') and lit[1:-1] in names:
                    found.append((f, text.count("\n", 0, t.start()) + 1, lit))
    return found


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    objdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "build", "obj")
    mods = modules(root)
    graph = edges(root, objdir, mods)
    bad = []
    for comp in circles(graph):
        ties = [f"{a} -> {b} ({graph[a][b]})"
                for a in comp for b in sorted(graph[a]) if b in comp]
        bad.append("circle among " + ", ".join(m + ".c" for m in comp) + ": " + "; ".join(ties))
    for m, files in sorted(mods.items()):
        for f in files:
            if not f.endswith(".c"):
                continue
            with open(os.path.join(root, f), encoding="utf-8") as fh:
                n = sum(1 for _ in fh)
            if n > MAX_LINES:
                bad.append(f"{f}: {n} lines, over {MAX_LINES}: cut it along its seams")
    n_rows, names = template_names(root)
    if n_rows == 0 or not names:
        bad.append(f"{KINDS}: no rows read (the check's ROW no longer matches the table)")
    for f, line, lit in named_templates(root, mods, names):
        bad.append(f"{f}:{line}: {lit} names a pod-template kind: read its row of "
                   f"{KINDS} (policy/kinds.h) instead")
    hooks = [f for f in os.listdir(os.path.join(root, "webhook")) if f.endswith(".c")]
    if len(hooks) > WEBHOOK_MAX:
        bad.append(f"webhook/: {len(hooks)} .c files, over {WEBHOOK_MAX}: webhook/ is "
                   "admission alone (controllers/, report/, metrics/, daemon/ hold the rest)")
    for line in bad:
        print(line)
    if bad:
        return 1
    print(f"house rules: no circle among {len(mods)} modules, "
          f"no .c over {MAX_LINES} lines, webhook/ {len(hooks)} files, "
          f"no pod-template kind named outside {KINDS} ({len(names) // 2} kinds)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
