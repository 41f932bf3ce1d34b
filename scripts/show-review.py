#!/usr/bin/env python3
"""Prints an AdmissionReview response as a person reads it: the answer,
its warnings, and the JSON Patch decoded from base64, one operation a line.

    curl ... https://127.0.0.1:8443/mutate | python3 scripts/show-review.py

Reads stdin; exit status 0 when it was a response, 1 otherwise."""

import base64
import json
import sys


def main() -> int:
    text = sys.stdin.read()
    try:
        resp = json.loads(text)["response"]
    except (ValueError, KeyError, TypeError):
        sys.stdout.write(text)
        print("show-review: not an AdmissionReview response", file=sys.stderr)
        return 1
    print(f"allowed: {str(resp.get('allowed')).lower()}")
    status = resp.get("status") or {}
    if status.get("message"):
        print(f"message: {status['message']}")
    for w in resp.get("warnings") or []:
        print(f"warning: {w}")
    if "patch" in resp:
        ops = json.loads(base64.b64decode(resp["patch"]))
        print(f"patch ({resp.get('patchType', '?')}, {len(ops)} operations):")
        for op in ops:
            print("  " + json.dumps(op, separators=(", ", ": ")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
