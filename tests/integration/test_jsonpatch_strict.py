"""The strict RFC 6902 applier the integration tests use (jsonpatch_strict.py).

It stands in for the kube-apiserver, so these cases prove it refuses what a
strict server refuses, with the same messages as webhook/patch.c.
"""

import copy

import pytest

from jsonpatch_strict import PatchError, apply, equal

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "train", "namespace": "ml"},
    "spec": {"containers": [{"name": "main", "env": [{"name": "A", "value": "1"}]}]},
}


@pytest.mark.parametrize(
    "doc, patch, want",
    [
        # RFC 6902 appendix A.1, A.2, A.4, A.6, A.7, A.10, A.11, A.14, A.16
        ({"foo": "bar"}, [{"op": "add", "path": "/baz", "value": "qux"}],
         {"baz": "qux", "foo": "bar"}),
        ({"foo": ["bar", "baz"]}, [{"op": "add", "path": "/foo/1", "value": "qux"}],
         {"foo": ["bar", "qux", "baz"]}),
        ({"foo": ["bar", "qux", "baz"]}, [{"op": "remove", "path": "/foo/1"}],
         {"foo": ["bar", "baz"]}),
        ({"foo": {"bar": "baz", "waldo": "fred"}, "qux": {"corge": "grault"}},
         [{"op": "move", "from": "/foo/waldo", "path": "/qux/thud"}],
         {"foo": {"bar": "baz"}, "qux": {"corge": "grault", "thud": "fred"}}),
        ({"foo": ["all", "grass", "cows", "eat"]},
         [{"op": "move", "from": "/foo/1", "path": "/foo/3"}],
         {"foo": ["all", "cows", "eat", "grass"]}),
        ({"foo": "bar"}, [{"op": "add", "path": "/child", "value": {"grandchild": {}}}],
         {"foo": "bar", "child": {"grandchild": {}}}),
        ({"foo": "bar"}, [{"op": "add", "path": "/baz", "value": "qux", "xyz": 123}],
         {"foo": "bar", "baz": "qux"}),
        ({"/": 9, "~1": 10}, [{"op": "test", "path": "/~01", "value": 10}],
         {"/": 9, "~1": 10}),
        ({"foo": ["bar"]}, [{"op": "add", "path": "/foo/-", "value": ["abc", "def"]}],
         {"foo": ["bar", ["abc", "def"]]}),
        # what the webhook's patches do
        (POD, [{"op": "add", "path": "/metadata/labels",
                "value": {"gpugate.io/class": "a100"}},
               {"op": "add", "path": "/spec/containers/0/env/1",
                "value": {"name": "CKPT", "value": "/ckpt"}},
               {"op": "add", "path": "/spec/containers/0/resources",
                "value": {"limits": {"nvidia.com/gpu": "8"}}},
               {"op": "replace", "path": "/metadata/labels/gpugate.io~1class",
                "value": "h100"}],
         {**POD,
          "metadata": {"name": "train", "namespace": "ml",
                       "labels": {"gpugate.io/class": "h100"}},
          "spec": {"containers": [{"name": "main",
                                   "env": [{"name": "A", "value": "1"},
                                           {"name": "CKPT", "value": "/ckpt"}],
                                   "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}),
        # add over an existing member replaces it; move onto itself is a no-op
        ({"a": 1}, [{"op": "add", "path": "/a", "value": 2},
                    {"op": "move", "from": "/a", "path": "/a"}], {"a": 2}),
        # the whole document
        ({"a": 1}, [{"op": "replace", "path": "", "value": [1]},
                    {"op": "add", "path": "/-", "value": 2}], [1, 2]),
        # copy into its own child is fine (only move is refused)
        ({"a": {"b": 1}}, [{"op": "copy", "from": "/a", "path": "/a/c"}],
         {"a": {"b": 1, "c": {"b": 1}}}),
    ],
)
def test_applies(doc, patch, want):
    before = copy.deepcopy(doc)
    assert apply(doc, patch) == want
    assert doc == before


@pytest.mark.parametrize(
    "doc, patch, message",
    [
        ({}, {"op": "add", "path": "/a", "value": 1}, "patch is not an array"),
        ({}, [[]], "op 0: operation is not an object"),
        ({}, [{"path": "/a"}], 'op 0: missing "op"'),
        ({}, [{"op": "ADD", "path": "/a", "value": 1}], 'op 0: unknown op "ADD"'),
        ({}, [{"op": "add", "value": 1}], 'op 0 (add): missing "path"'),
        ({"a": 1}, [{"op": "remove", "path": 5}], 'op 0 (remove): "path" is not a string'),
        ({}, [{"op": "add", "path": "/a"}], 'op 0 (add /a): missing "value"'),
        ({"a": 1}, [{"op": "test", "path": "/a"}], 'op 0 (test /a): missing "value"'),
        ({"a": 1}, [{"op": "move", "path": "/b"}], 'op 0 (move /b): missing "from"'),
        ({"a": {"b": 1}}, [{"op": "add", "path": "a/b", "value": 1}],
         'op 0 (add a/b): path does not start with "/"'),
        ({"a~2b": 1}, [{"op": "remove", "path": "/a~2b"}],
         'op 0 (remove /a~2b): bad escape in path: "~" must be followed by "0" or "1"'),
        ({"a~": 1}, [{"op": "remove", "path": "/a~"}],
         'op 0 (remove /a~): bad escape in path: "~" must be followed by "0" or "1"'),
        ({"a": [1, 2]}, [{"op": "add", "path": "/a/01", "value": 0}],
         'op 0 (add /a/01): bad array index "01" in path'),
        ({"a": [1, 2]}, [{"op": "remove", "path": "/a/+1"}],
         'op 0 (remove /a/+1): bad array index "+1" in path'),
        ({"a": [1, 2]}, [{"op": "remove", "path": "/a/-1"}],
         'op 0 (remove /a/-1): bad array index "-1" in path'),
        ({"a": [1, 2]}, [{"op": "remove", "path": "/a/\u0661"}],  # Arabic-Indic one
         'op 0 (remove /a/\u0661): bad array index "\u0661" in path'),
        ({"a": [1, 2]}, [{"op": "add", "path": "/a/3", "value": 0}],
         "op 0 (add /a/3): array index 3 out of range (length 2)"),
        ({"a": [1, 2]}, [{"op": "replace", "path": "/a/2", "value": 0}],
         "op 0 (replace /a/2): array index 2 out of range (length 2)"),
        ({"a": [1, 2]}, [{"op": "remove", "path": "/a/" + "9" * 5000}],
         "op 0 (remove /a/" + "9" * 197 + "...): array index " + "9" * 200
         + "... out of range (length 2)"),
        ({"a": [1, 2]}, [{"op": "remove", "path": "/a/-"}],
         'op 0 (remove /a/-): "-" is only valid for add'),
        ({"a": [1]}, [{"op": "move", "from": "/a/-", "path": "/b"}],
         "op 0 (move /b): from /a/- does not exist"),
        ({"metadata": {"name": "p"}},
         [{"op": "test", "path": "/metadata/name", "value": "p"},
          {"op": "add", "path": "/spec", "value": {}},
          {"op": "add", "path": "/metadata/annotations", "value": {}},
          {"op": "add", "path": "/metadata/labels/x", "value": "y"}],
         "op 3 (add /metadata/labels/x): parent /metadata/labels does not exist"),
        ({"a": 1}, [{"op": "add", "path": "/a/b", "value": 1}],
         "op 0 (add /a/b): parent /a is not an object or array"),
        ({"a": 1}, [{"op": "remove", "path": "/b"}], "op 0 (remove /b): path does not exist"),
        ({"a": 1}, [{"op": "remove", "path": ""}],
         'op 0 (remove ""): cannot remove the whole document'),
        ({"a": 1}, [{"op": "copy", "from": "/b", "path": "/c"}],
         "op 0 (copy /c): from /b does not exist"),
        ({"a": {"b": {}}}, [{"op": "move", "from": "/a", "path": "/a/b/c"}],
         "op 0 (move /a/b/c): cannot move /a into its own child"),
        ({"a": [1, 2]}, [{"op": "move", "from": "/a/0", "path": "/a/2"}],
         "op 0 (move /a/2): array index 2 out of range (length 1)"),
        ({"/": 9, "~1": 10}, [{"op": "test", "path": "/~01", "value": "10"}],
         "op 0 (test /~01): test failed: value differs"),
        ({"a": 1}, [{"op": "test", "path": "/a", "value": True}],
         "op 0 (test /a): test failed: value differs"),
        ({"a": 1}, [{"op": "remove", "path": "/a\nb"}],
         "op 0 (remove /a?b): path does not exist"),
        ({"a": 1}, [{"op": "remove", "path": "/a\0b"}],
         "op 0 (remove /a?b): path contains a NUL byte"),
    ],
)
def test_refuses(doc, patch, message):
    before = copy.deepcopy(doc)
    with pytest.raises(PatchError) as err:
        apply(doc, patch)
    assert str(err.value) == message
    assert isinstance(err.value, ValueError)
    assert doc == before


def test_result_shares_nothing_with_doc_or_patch():
    doc = {"a": {"b": [1]}}
    patch = [{"op": "add", "path": "/c", "value": {"d": [2]}}]
    got = apply(doc, patch)
    got["a"]["b"].append(9)
    got["c"]["d"].append(9)
    assert doc == {"a": {"b": [1]}}
    assert patch == [{"op": "add", "path": "/c", "value": {"d": [2]}}]


def test_test_compares_numbers_by_value_and_keeps_booleans_apart():
    assert equal(1, 1.0)
    assert equal({"a": [1, {"b": None}]}, {"a": [1.0, {"b": None}]})
    assert not equal(True, 1)
    assert not equal(False, 0)
    assert not equal(None, False)
    assert not equal("1", 1)
    assert not equal([1], [1, 1])
    assert not equal({"a": 1}, {"b": 1})
    assert apply({"a": 1}, [{"op": "test", "path": "/a", "value": 1.0}]) == {"a": 1}
