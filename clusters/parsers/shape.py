"""Typed reads from a decoded JSON or YAML document, each naming the path it reads.

A value of the wrong type (a string where an object belongs, a list where a string does)
is a SnapshotFormatError that names its path, ``items[3].spec.containers[0].resources:
expected an object, got a string``, never an AttributeError or TypeError further on. A
missing key and an explicit ``null`` both read as absent.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

from clusters.parsers.records import SnapshotFormatError

T = TypeVar("T")

_EXPECTED = {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}


def child(path: str, key: str | int) -> str:
    """The path of ``key`` (a field name or a list index) under ``path``."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def type_words(value: object) -> str:
    """What a decoded value is, in the words of JSON: an object, a list, a string, ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    for kind, words in _EXPECTED.items():
        if isinstance(value, kind):
            return words
    return f"a {type(value).__name__}"


def wrong_type(path: str, expected: str, value: object) -> SnapshotFormatError:
    return SnapshotFormatError(
        f"{path or 'the document'}: expected {expected}, got {type_words(value)}"
    )


def checked(value: Any, path: str, kind: type[T]) -> T:
    """``value`` when it is a ``kind`` (dict, list, str or bool; a bool is not a number)."""
    if isinstance(value, kind) and not (isinstance(value, bool) and kind is not bool):
        return value
    raise wrong_type(path, _EXPECTED.get(kind, f"a {kind.__name__}"), value)


def field(parent: Mapping[str, Any], key: str, path: str, kind: type[T]) -> T | None:
    """``parent[key]`` when it is a ``kind``; None when missing or null; else the error."""
    value = parent.get(key)
    return None if value is None else checked(value, child(path, key), kind)


def mapping(parent: Mapping[str, Any], key: str, path: str) -> dict[str, Any]:
    """The object at ``parent[key]``, ``{}`` when missing or null."""
    return field(parent, key, path, dict) or {}


def objects(parent: Mapping[str, Any], key: str, path: str) -> Iterator[tuple[dict[str, Any], str]]:
    """Each object in the list at ``parent[key]``, with its path (nothing when missing)."""
    where = child(path, key)
    for index, item in enumerate(field(parent, key, path, list) or []):
        item_path = child(where, index)
        yield checked(item, item_path, dict), item_path


def scalar(parent: Mapping[str, Any], key: str, path: str) -> str | None:
    """A string (or a number or boolean YAML decoded from one, as text) at ``parent[key]``."""
    value = parent.get(key)
    if value is None:
        return None
    if isinstance(value, dict | list):
        raise wrong_type(child(path, key), "a string", value)
    return str(value)


def scalars(parent: Mapping[str, Any], key: str, path: str) -> dict[str, str]:
    """The object of strings at ``parent[key]`` (labels), each value read by ``scalar``."""
    values = mapping(parent, key, path)
    where = child(path, key)
    out: dict[str, str] = {}
    for name in values:
        out[str(name)] = scalar(values, name, where) or ""
    return out
