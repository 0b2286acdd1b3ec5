"""Strict JSON and YAML decoding: what every body the backend takes is refused for, and where."""

from __future__ import annotations

import json
import sys

import pytest

from core.safe_input import (
    MAX_DEPTH,
    InputRejected,
    json_loads,
    nesting_exceeds,
    yaml_load,
)


def rejected(call, *args, **kwargs) -> InputRejected:
    with pytest.raises(InputRejected) as info:
        call(*args, **kwargs)
    return info.value


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_not_json(literal):
    error = rejected(json_loads, f'{{"power_limit_w": {literal}}}')
    assert "RFC 8259" in str(error) and error.path == "body"


def test_a_number_beyond_a_double_is_refused_not_made_infinite():
    assert "out of range" in str(rejected(json_loads, '{"memory": 1e400}'))
    assert json_loads('{"memory": 1e300}') == {"memory": 1e300}


def test_nesting_is_counted_before_the_decoder_recurses():
    deep = "[" * 200_000 + "]" * 200_000
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(200)  # the decoder would overflow long before the data ends
    try:
        error = rejected(json_loads, deep)
        unclosed = rejected(json_loads, '{"a":' * 100_000)
    finally:
        sys.setrecursionlimit(limit)
    assert f"deeper than {MAX_DEPTH}" in str(error) and f"deeper than {MAX_DEPTH}" in str(unclosed)


def test_nesting_at_the_limit_decodes_and_brackets_in_strings_do_not_count():
    at_limit = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert not nesting_exceeds(at_limit) and nesting_exceeds("[" + at_limit + "]")
    assert json_loads(at_limit)
    assert json_loads(json.dumps({"label": "[" * 500, "escaped": '\\"[[[[' * 100}))


def test_truncated_json_still_says_where_it_breaks():
    error = rejected(json_loads, '{"items": [{"metadata": {"name": "a"}}')
    assert "the JSON is broken at line 1" in str(error)


def test_nul_in_a_value_names_the_field():
    body = json.dumps({"host": {"hostname": "dgx\u0000-01"}, "gpus": [{"serial": "ok"}]})
    error = rejected(json_loads, body)
    assert error.errors == {"host.hostname": ["a NUL character is not allowed in a string"]}


def test_lone_surrogates_are_refused_in_values_and_keys_pairs_are_fine():
    error = rejected(json_loads, '{"gpus": [{"name": "H100 \\ud800"}], "x\\udfff": 1}')
    assert set(error.errors) == {"gpus.0.name", "body"}
    assert "surrogate" in error.errors["gpus.0.name"][0]
    assert json_loads('{"name": "\\ud83d\\ude00"}') == {"name": "\U0001f600"}
    assert json_loads('{"name": "\\\\u0000 is text, not NUL"}')["name"].startswith("\\u0000")


def test_bytes_must_be_utf8_without_nul_a_bom_is_dropped():
    assert "not UTF-8" in str(rejected(json_loads, b'{"a": "\xff"}'))
    assert "NUL character at line 2" in str(rejected(json_loads, b'{\n"a": 1\x00}'))
    assert json_loads("\ufeff" + '{"a": 1}') == {"a": 1}


def test_an_integer_with_too_many_digits_is_a_400_not_a_crash():
    assert "the JSON is broken" in str(rejected(json_loads, "[" + "9" * 5000 + "]"))


LAUGHS = """apiVersion: v1
kind: List
a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
items: [*g, *g, *g, *g, *g, *g, *g, *g, *g]
"""


def test_yaml_aliases_are_refused_before_anything_expands():
    error = rejected(yaml_load, LAUGHS, max_bytes=10_000)
    assert "aliases are not accepted" in str(error) and "*a at line 4" in str(error)


def test_yaml_merge_keys_use_aliases_and_are_refused_too():
    text = "base: &base {cpu: '8'}\nnode:\n  <<: *base\n  name: a\n"
    assert "aliases" in str(rejected(yaml_load, text, max_bytes=10_000))


def test_yaml_size_depth_tags_and_strings_are_bounded():
    assert "limit for YAML is 10" in str(rejected(yaml_load, "kind: NodeList\n", max_bytes=10))
    deep = "a: " + "[" * 200 + "]" * 200
    assert f"deeper than {MAX_DEPTH}" in str(rejected(yaml_load, deep, max_bytes=10_000))
    tagged = "!!python/object/apply:os.system ['true']"
    assert "YAML is broken" in str(rejected(yaml_load, tagged, max_bytes=10_000))
    escaped = 'metadata:\n  labels:\n    x: "a\\0b"\n'
    assert rejected(yaml_load, escaped, max_bytes=10_000).errors == {
        "metadata.labels.x": ["a NUL character is not allowed in a string"]
    }


def test_plain_kubectl_yaml_loads():
    text = "apiVersion: v1\nkind: Node\nmetadata:\n  name: dgx-01\n  labels: {a: b}\n"
    assert yaml_load(text, max_bytes=10_000)["metadata"] == {"name": "dgx-01", "labels": {"a": "b"}}
