"""A strict RFC 6902 JSON Patch applier, independent of the C one.

The integration tests apply the webhook's patches with it the way the
kube-apiserver would (evanphx/json-patch, strictly), so a patch that would be
refused there is refused here too.  Pure Python 3.11, no third-party modules.

    from jsonpatch_strict import apply
    new = apply(doc, patch)      # doc and patch are untouched

apply() raises PatchError (a ValueError) on the first violation, with one line
in the same words as webhook/patch.c:

    op 3 (add /metadata/labels/x): parent /metadata/labels does not exist

Rules (RFC 6902 and RFC 6901):
  - the patch is a list of objects; "op" is one of add, remove, replace,
    move, copy, test; "path" is a string; "value" is required by add,
    replace and test (null is a value); "from" (a string) by move and copy;
    other members are ignored;
  - a pointer is "" (the whole document) or starts with "/"; "~" must be
    followed by "0" (for "~") or "1" (for "/");
  - an array index is "0" or digits without a leading zero: no sign, no
    spaces, no other characters; add accepts 0..len and "-" (append);
    remove, replace, test and a move/copy "from" need 0..len-1;
  - every parent must exist and be an object or array; remove, replace and
    test need the member to exist; add over an existing member replaces it;
  - move may not move a value into its own child, and a move whose "from"
    equals its "path" changes nothing; removing the whole document is an
    error;
  - test compares as RFC 6902 section 4.6 says: numbers by value (1 equals
    1.0), booleans are not numbers, objects regardless of key order.  (The C
    applier compares with jansson's json_equal, where 1 and 1.0 differ.)

Run as a script, it applies PATCH.json to DOC.json and prints the result:

    python3 jsonpatch_strict.py DOC.json PATCH.json
"""

from __future__ import annotations

import copy
import json
import re
import sys
from typing import Any

__all__ = ["PatchError", "apply", "equal"]

_OPS = ("add", "remove", "replace", "move", "copy", "test")
_INDEX = re.compile(r"0|[1-9][0-9]*")
_SHOWN_MAX = 200  # bytes of a pointer or op name quoted in a message


class PatchError(ValueError):
    """The patch cannot be applied; str(err) says which op and why."""


def _shown(s: str) -> str:
    """s for a one-line message, exactly as patch.c shows it."""
    if s == "":
        return '""'
    raw = s.encode("utf-8", "surrogatepass")
    if len(raw) > _SHOWN_MAX:
        raw = raw[:_SHOWN_MAX] + b"..."
    raw = bytes(b"?"[0] if c < 0x20 or c == 0x7F else c for c in raw)
    return raw.decode("utf-8", "replace")


class _Op:
    """What is known about the operation being applied, for its messages."""

    def __init__(self, index: int):
        self.index = index
        self.name: str | None = None
        self.path: str | None = None

    def fail(self, msg: str) -> PatchError:
        if self.name is not None and self.path is not None:
            head = f"op {self.index} ({self.name} {_shown(self.path)})"
        elif self.name is not None:
            head = f"op {self.index} ({self.name})"
        else:
            head = f"op {self.index}"
        return PatchError(f"{head}: {msg}")


class _Pointer:
    """A parsed RFC 6901 pointer; no tokens is the whole document."""

    def __init__(self, op: _Op, raw: str, role: str):
        self.raw = raw
        self.tokens: list[str] = []
        self.at: list[int] = []  # offset in raw of the "/" before tokens[i]
        if "\0" in raw:
            raise op.fail(f"{role} contains a NUL byte")
        if raw == "":
            return
        if raw[0] != "/":
            raise op.fail(f'{role} does not start with "/"')
        tok: list[str] = []
        i = 0
        while i < len(raw):
            ch = raw[i]
            if ch == "/":
                if self.at:
                    self.tokens.append("".join(tok))
                    tok = []
                self.at.append(i)
            elif ch != "~":
                tok.append(ch)
            elif raw[i + 1 : i + 2] in ("0", "1"):
                tok.append("~" if raw[i + 1] == "0" else "/")
                i += 1
            else:
                raise op.fail(
                    f'bad escape in {role}: "~" must be followed by "0" or "1"'
                )
            i += 1
        self.tokens.append("".join(tok))

    def token_shown(self, i: int) -> str:
        end = self.at[i + 1] if i + 1 < len(self.at) else len(self.raw)
        text = self.raw[self.at[i] + 1 : end]
        return _shown(text) if text else ""

    def parent_shown(self) -> str:
        return _shown(self.raw[: self.at[-1]])


_BAD, _DASH = "bad", "dash"


def _index(tok: str) -> int | str:
    """An array index, _DASH for "-", or _BAD."""
    if tok == "-":
        return _DASH
    if not _INDEX.fullmatch(tok):
        return _BAD
    if len(tok) > 20:  # beyond any array, and beyond int()'s digit limit
        return sys.maxsize
    return int(tok)


class _Loc:
    """Where a value is or goes; parent None is the whole document."""

    def __init__(self) -> None:
        self.parent: dict | list | None = None
        self.key: str | int | None = None
        self.append = False
        self.exists = False
        self.value: Any = None


def _locate(op: _Op, root: Any, p: _Pointer, role: str, must_exist: bool) -> _Loc:
    loc = _Loc()
    is_from = role == "from"
    if not p.tokens:
        loc.exists, loc.value = True, root
        return loc

    def bad_index(i: int) -> PatchError:
        return op.fail(f'bad array index "{p.token_shown(i)}" in {role}')

    def from_missing() -> PatchError:
        return op.fail(f"from {_shown(p.raw)} does not exist")

    cur: Any = root
    found = True
    for i, tok in enumerate(p.tokens[:-1]):
        if isinstance(cur, dict):
            if tok not in cur:
                found = False
                break
            cur = cur[tok]
        elif isinstance(cur, list):
            k = _index(tok)
            if k == _BAD:
                raise bad_index(i)
            if k == _DASH or k >= len(cur):
                found = False
                break
            cur = cur[k]
        else:
            found = False
            break
    if not found or not isinstance(cur, (dict, list)):
        if is_from:
            raise from_missing()
        if not found:
            raise op.fail(f"parent {p.parent_shown()} does not exist")
        raise op.fail(f"parent {p.parent_shown()} is not an object or array")

    loc.parent = cur
    last = p.tokens[-1]
    if isinstance(cur, dict):
        loc.key = last
        loc.exists = last in cur
        if loc.exists:
            loc.value = cur[last]
        elif must_exist:
            raise from_missing() if is_from else op.fail("path does not exist")
        return loc

    k = _index(last)
    if k == _BAD:
        raise bad_index(len(p.tokens) - 1)
    if k == _DASH:
        if is_from:
            raise from_missing()
        if must_exist:
            raise op.fail('"-" is only valid for add')
        loc.append, loc.key = True, len(cur)
        return loc
    if k > len(cur) or (must_exist and k == len(cur)):
        if is_from:
            raise from_missing()
        raise op.fail(
            f"array index {p.token_shown(len(p.tokens) - 1)} out of range "
            f"(length {len(cur)})"
        )
    loc.key = k
    loc.exists = k < len(cur)
    loc.value = cur[k] if loc.exists else None
    return loc


def _put(root: Any, loc: _Loc, value: Any, insert: bool) -> Any:
    """Puts value at loc and returns the (possibly new) whole document."""
    parent = loc.parent
    if parent is None:
        return value
    if isinstance(parent, dict):
        parent[loc.key] = value
    elif loc.append:
        parent.append(value)
    elif insert:
        parent.insert(loc.key, value)
    else:
        parent[loc.key] = value
    return root


def _take_out(loc: _Loc) -> None:
    del loc.parent[loc.key]


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def equal(a: Any, b: Any) -> bool:
    """JSON equality as RFC 6902 section 4.6 defines it for "test"."""
    if _is_number(a) and _is_number(b):
        return a == b
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b))
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, str) and isinstance(b, str):
        return a == b
    return False


def _member(op: _Op, obj: dict, name: str, want_string: bool) -> Any:
    if name not in obj:
        raise op.fail(f'missing "{name}"')
    v = obj[name]
    if want_string and not isinstance(v, str):
        raise op.fail(f'"{name}" is not a string')
    return v


def _apply_op(root: Any, index: int, obj: Any) -> Any:
    op = _Op(index)
    if not isinstance(obj, dict):
        raise op.fail("operation is not an object")
    name = _member(op, obj, "op", True)
    if name not in _OPS:
        raise op.fail(f'unknown op "{_shown(name)}"')
    op.name = name
    op.path = _member(op, obj, "path", True)
    path = _Pointer(op, op.path, "path")
    value = None
    if name in ("add", "replace", "test"):
        value = _member(op, obj, "value", False)
    if name in ("move", "copy"):
        frm = _Pointer(op, _member(op, obj, "from", True), "from")
        src = _locate(op, root, frm, "from", True)

    if name in ("add", "copy"):
        at = _locate(op, root, path, "path", False)
        new = copy.deepcopy(value if name == "add" else src.value)
        return _put(root, at, new, True)
    if name == "remove":
        at = _locate(op, root, path, "path", True)
        if at.parent is None:
            raise op.fail("cannot remove the whole document")
        _take_out(at)
        return root
    if name == "replace":
        at = _locate(op, root, path, "path", True)
        return _put(root, at, copy.deepcopy(value), False)
    if name == "test":
        at = _locate(op, root, path, "path", True)
        if not equal(at.value, value):
            raise op.fail("test failed: value differs")
        return root
    # move
    if len(frm.raw) < len(path.raw) and path.raw.startswith(frm.raw + "/"):
        raise op.fail(f"cannot move {_shown(frm.raw)} into its own child")
    if frm.raw == path.raw:
        return root
    moved = src.value
    _take_out(src)  # src is not the whole document: "" prefixes every path
    at = _locate(op, root, path, "path", False)
    return _put(root, at, moved, True)


def apply(doc: Any, patch: Any) -> Any:
    """Returns patch applied to a deep copy of doc; raises PatchError."""
    if not isinstance(patch, list):
        raise PatchError("patch is not an array")
    root = copy.deepcopy(doc)
    for i, obj in enumerate(patch):
        root = _apply_op(root, i, obj)
    return root


def _main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: jsonpatch_strict.py DOC.json PATCH.json", file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        doc = json.load(f)
    with open(argv[2], encoding="utf-8") as f:
        patch = json.load(f)
    try:
        print(json.dumps(apply(doc, patch), separators=(",", ":")))
    except PatchError as err:
        print(f"jsonpatch_strict: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv))
