"""Strict decoding of untrusted bodies: one home for what every JSON or YAML input refuses.

Reports, scheduler snapshots and every JSON body the API parses come through here, so no
endpoint decodes unbounded input:

- JSON is RFC 8259: `NaN`, `Infinity` and numbers that overflow a float are refused, and so
  is nesting deeper than MAX_DEPTH, counted on the raw text before the recursive decoder runs
  (deep input would otherwise raise RecursionError wherever the stack happens to be).
- No string, key or value, may hold a NUL character or an unpaired UTF-16 surrogate: neither
  can be stored in PostgreSQL (text or jsonb) or encoded as UTF-8.
- YAML is loaded safely, without aliases (a few hundred bytes of nested aliases expand to
  gigabytes), and with the same depth and string rules.

Errors are InputRejected, which names the path of the field at fault (`items.3.metadata.name`)
so the API can answer a field-level 400. No Django here: parsers and the agent side may use it.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import yaml

from agent.sources.text import TextDecodeError
from agent.sources.text import decode_text as agent_decode_text

MAX_DEPTH = 64  # a report nests 6 levels, a Kubernetes NodeList with managedFields about 20
MAX_ERRORS = 20
YAML_MAX_BYTES = 32 * 1024 * 1024  # the pure-Python YAML loader reads about 5 MB/s

# A JSON string literal (unrolled loop: fast on long strings), and the escapes that decode to
# a NUL or a surrogate; the tree is walked only when the raw text holds such an escape.
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_SUSPECT_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F][0-9a-fA-F]{2})")
_BRACKETS = str.maketrans({"[": "(", "{": "(", "]": ")", "}": ")"})
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")


class InputRejected(ValueError):
    """Input refused before anything was stored; `path` names the field at fault."""

    def __init__(self, message: str, path: str = "body") -> None:
        super().__init__(message)
        self.path = path

    @property
    def errors(self) -> dict[str, list[str]]:
        return {self.path: [str(self)]}


class InputErrors(InputRejected):
    """Several fields at fault; `errors` maps each path to its messages."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        first = next(iter(errors))
        super().__init__(errors[first][0], first)
        self._errors = errors

    @property
    def errors(self) -> dict[str, list[str]]:
        return self._errors


def decode_text(data: bytes | bytearray | memoryview | str) -> str:
    """UTF-8 text as every text input is read (the agent's decoder: a BOM, ANSI escapes and
    CRLF dropped; other encodings and NUL refused), with InputRejected for a 400."""
    try:
        return agent_decode_text(bytes(data) if isinstance(data, memoryview) else data)
    except TextDecodeError as exc:
        raise InputRejected(str(exc)) from None


def nesting_exceeds(text: str, limit: int = MAX_DEPTH) -> bool:
    """Whether JSON text nests arrays and objects deeper than `limit`, without decoding it.

    String literals are dropped, brackets kept; each pass removes the innermost pairs, so a
    text still holding a pair after `limit` passes nests deeper. Unbalanced text (cut short)
    counts its unclosed brackets too, so the decoder never recurses past twice the limit.
    """
    skeleton = _NOT_BRACKETS.sub("", _JSON_STRING.sub("", text)).translate(_BRACKETS)
    for _ in range(limit):
        shorter = skeleton.replace("()", "")
        if len(shorter) == len(skeleton):
            break
        skeleton = shorter
    return "()" in skeleton or skeleton.count("(") > limit


def _refuse_constant(name: str) -> Any:
    raise InputRejected(f"{name} is not a JSON number (RFC 8259)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise InputRejected(f"the number {text[:40]} is out of range")
    return value


def json_loads(data: bytes | bytearray | memoryview | str, *, max_depth: int = MAX_DEPTH) -> Any:
    """Decode JSON under the rules above; raises InputRejected naming what and where."""
    text = decode_text(data)
    if nesting_exceeds(text, max_depth):
        raise InputRejected(f"the JSON nests deeper than {max_depth} levels")
    try:
        document = json.loads(
            text, parse_constant=_refuse_constant, parse_float=_finite_float, strict=True
        )
    except json.JSONDecodeError as exc:
        raise InputRejected(
            f"the JSON is broken at line {exc.lineno} column {exc.colno} ({exc.msg})"
        ) from None
    except InputRejected:  # NaN, Infinity, a number beyond a double
        raise
    except RecursionError:  # belt and braces: the count above should make this unreachable
        raise InputRejected(f"the JSON nests deeper than {max_depth} levels") from None
    except ValueError as exc:  # an integer with more digits than Python converts
        raise InputRejected(f"the JSON is broken ({exc})") from None
    if _SUSPECT_ESCAPE.search(text):
        check_strings(document)
    return document


def _bad_string(value: str) -> str | None:
    if value.isascii():
        return "a NUL character" if "\x00" in value else None
    if "\x00" in value:
        return "a NUL character"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "an unpaired UTF-16 surrogate"
    return None


def check_strings(document: Any) -> None:
    """Refuse NUL characters and unpaired surrogates in any key or string value.

    Iterative, so it never recurses whatever the depth; raises InputErrors with every path
    at fault (up to MAX_ERRORS).
    """
    errors: dict[str, list[str]] = {}
    stack: list[tuple[tuple[Any, ...], Any]] = [((), document)]
    while stack and len(errors) < MAX_ERRORS:
        path, value = stack.pop()
        if isinstance(value, str):
            problem = _bad_string(value)
            if problem:
                errors[_dotted(path)] = [f"{problem} is not allowed in a string"]
        elif isinstance(value, dict):
            for key, item in value.items():
                if isinstance(key, str) and _bad_string(key):
                    errors[_dotted(path)] = [f"a key holds {_bad_string(key)}"]
                stack.append(((*path, key), item))
        elif isinstance(value, list):
            stack.extend(((*path, i), item) for i, item in enumerate(value))
    if errors:
        raise InputErrors(dict(sorted(errors.items())))


def _dotted(path: tuple[Any, ...]) -> str:
    return ".".join(_printable(p) for p in path) or "body"


def _printable(part: Any) -> str:
    text = str(part)
    if _bad_string(text):
        text = text.encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")
        text = text.replace("\x00", "\\x00")
    return text[:100]


class _StrictYamlLoader(yaml.SafeLoader):
    """SafeLoader that refuses aliases and deep nesting while composing, before any object
    is built (so a billion-laughs document costs its own few hundred bytes, nothing more)."""

    max_depth = MAX_DEPTH

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise InputRejected(
                f"YAML aliases are not accepted (*{event.anchor} at line "
                f"{event.start_mark.line + 1}); post the document kubectl printed, or JSON"
            )
        self._depth += 1
        try:
            if self._depth > self.max_depth:
                raise InputRejected(f"the YAML nests deeper than {self.max_depth} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def yaml_load(
    data: bytes | bytearray | memoryview | str, *, max_bytes: int = YAML_MAX_BYTES
) -> Any:
    """One YAML document, safely: no aliases, no tags beyond the safe ones, bounded size."""
    text = decode_text(data)
    size = len(text.encode("utf-8")) if not text.isascii() else len(text)
    if size > max_bytes:
        raise InputRejected(
            f"the YAML document is {size} bytes; the limit for YAML is {max_bytes} "
            "(post larger snapshots as JSON: kubectl get nodes -o json)"
        )
    loader = _StrictYamlLoader(text)
    try:
        document = loader.get_single_data()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "malformed"
        raise InputRejected(f"the YAML is broken{where} ({problem})") from None
    finally:
        loader.dispose()
    check_strings(document)
    return document
