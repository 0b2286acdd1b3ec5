"""ibnetdiscover's `--node-name-map` file -> {GUID: name}. Pure.

One node a line, `0x<guid> "name"`, as the infiniband-diags tools read it: blank lines and
`#` comments skipped; the GUID in C's base-0 notation (`0x` hex, else decimal); the name in
double quotes, or bare up to a `#`. A GUID named twice with two names is refused rather
than guessed (the C tools keep the first silently).
"""

from __future__ import annotations

import re

from .records import FabricFormatError, normalize_guid

ENTRY = re.compile(r"^\s*(0[xX][0-9a-fA-F]+|\d+)\s+(.*)$")
QUOTED = re.compile(r'^"([^"#]*)"?')
MAX_NAME = 253


def parse_node_name_map(text: str) -> dict[str, str]:
    """The map's names by node GUID; FabricFormatError names the first bad line."""
    names: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = ENTRY.match(line)
        if m is None:
            raise FabricFormatError(f'line {number}: expected 0x<guid> "name", got {line[:80]!r}')
        try:
            guid = normalize_guid(m[1]) if m[1][:2].lower() == "0x" else _decimal(m[1])
        except ValueError:
            raise FabricFormatError(f"line {number}: {m[1]!r} is not a 64-bit GUID") from None
        rest = m[2].strip()
        quoted = QUOTED.match(rest)
        name = (quoted[1] if quoted else rest.split("#", 1)[0]).strip()
        if not name:
            raise FabricFormatError(f"line {number}: GUID {m[1]} has no name")
        if len(name) > MAX_NAME:
            raise FabricFormatError(f"line {number}: a name is at most {MAX_NAME} characters")
        if guid in names and names[guid] != name:
            raise FabricFormatError(
                f"line {number}: GUID 0x{guid} is already named {names[guid]!r} "
                f"on line {first_line[guid]}"
            )
        names[guid] = name
        first_line.setdefault(guid, number)
    return names


def _decimal(text: str) -> str:
    number = int(text, 10)
    if number >= 1 << 64:
        raise ValueError(text)
    return f"{number:016x}"
