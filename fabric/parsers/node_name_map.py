"""ibnetdiscover's `--node-name-map` file -> {GUID: name}. Pure.

One node a line, a GUID then its name, as the infiniband-diags tools read it and as sites
keep it: `0x<guid> "name"`, `0x<guid> name`, `<guid> name` (16 bare hex digits, as
ibnetdiscover prints a GUID) and `H-<guid> name` / `S-<guid> name` / `R-<guid> name`
(ibnetdiscover's own node ids); GUID spellings are `records.guid_of`'s, the one rule the
topology.conf compare reads too. A bare run of decimal digits other than 16 is read in
decimal, as the C tools read it; one with a leading zero (octal to them) is refused.

The name is in double quotes, or bare up to a `#` (spaces kept, as the C tools keep them);
blank lines, `#` comments, tabs and CRLF line ends are fine. A GUID named twice with two
names is refused rather than guessed (the C tools keep the first silently). A line not
understood is refused with its number, its text (escaped, shortened) and why.
"""

from __future__ import annotations

import re

from .records import FabricFormatError, guid_of

ENTRY = re.compile(r"^(\S+?)(?=[\s#\"]|$)(.*)$")
QUOTED = re.compile(r'^"([^"#]*)"?')
DECIMAL = re.compile(r"^[1-9][0-9]*$")
LONG_HEX = re.compile(r"^(?:0x|[hsr]-)?[0-9a-f]{17,}$", re.IGNORECASE)
MAX_NAME = 253
SHOWN = 60  # characters of a refused line quoted back


def parse_node_name_map(text: str) -> dict[str, str]:
    """The map's names by node GUID; FabricFormatError names the first bad line."""
    names: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = ENTRY.match(line)
        if m is None:  # pragma: no cover - a stripped, non-empty line always has a word
            raise _bad(number, raw, "no GUID")
        guid = _guid(number, raw, m[1])
        rest = m[2].strip()
        quoted = QUOTED.match(rest)
        name = (quoted[1] if quoted else rest.split("#", 1)[0]).strip()
        if not name:
            raise _bad(number, raw, f"GUID {m[1]} has no name")
        if len(name) > MAX_NAME:
            raise _bad(number, raw, f"a name is at most {MAX_NAME} characters")
        if guid in names and names[guid] != name:
            raise _bad(
                number,
                raw,
                f"GUID 0x{guid} is already named {names[guid]!r} on line {first_line[guid]}",
            )
        names[guid] = name
        first_line.setdefault(guid, number)
    return names


def _guid(number: int, raw: str, word: str) -> str:
    guid = guid_of(word)
    if guid is not None:
        return guid
    if DECIMAL.match(word) and len(word) <= 21:
        value = int(word, 10)
        if value < 1 << 64:
            return f"{value:016x}"
    if DECIMAL.match(word) or LONG_HEX.match(word):
        raise _bad(number, raw, f"{_short(word)} is past 64 bits: not a 64-bit GUID")
    if word.isdigit():
        raise _bad(
            number,
            raw,
            f"{_short(word)} is ambiguous (octal to the C tools, decimal or hex to people): "
            "write it as 0x<hex>",
        )
    raise _bad(
        number,
        raw,
        f"{_short(word)} is not a GUID (0x<hex>, H-<hex>, S-<hex> or 16 hex digits) "
        'followed by a name; expected 0x<guid> "name"',
    )


def _short(text: str) -> str:
    """`text` quoted for a message: escaped (tabs, control characters), shortened."""
    return repr(text if len(text) <= SHOWN else text[: SHOWN - 1] + "…")


def _bad(number: int, raw: str, why: str) -> FabricFormatError:
    return FabricFormatError(f"line {number} {_short(raw.strip())}: {why}")
