"""Which nvidia-smi output a text is, so a file given in the wrong place is named as what it is.

People save `nvidia-smi -L` (the GPU list) or a `topo -m` matrix where `-q -x` belongs; the
parser of the expected format would only say "not well-formed XML". Pure text checks, no
parsing: the first lines of each output are distinctive.
"""

from __future__ import annotations

import re

LIST = "nvidia-smi -L"
TOPOLOGY = "nvidia-smi topo -m"
QUERY = "nvidia-smi -q"
QUERY_XML = "nvidia-smi -q -x"

# `GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)`; drivers before 418 printed no "UUID: ".
_LIST_LINE = re.compile(r"^GPU \d+: .*\((?:UUID: )?GPU-[0-9a-fA-F-]+\)\s*$")
_QUERY_TEXT = re.compile(r"^(=+NVSMI LOG=+|Driver Version\s+:)", re.MULTILINE)
_TOPOLOGY_HEADER = re.compile(r"^\s*GPU0\s+(?!X\b)\S", re.MULTILINE)


def output_kind(text: str) -> str | None:
    """LIST, TOPOLOGY, QUERY or QUERY_XML, judged by the first lines of decoded text
    (`text.decode_text`: no BOM or ANSI escapes); None when none fits."""
    head = text[:4096]
    first = next((line for line in head.split("\n") if line.strip()), "")
    if _LIST_LINE.match(first.strip()):
        return LIST
    if "<nvidia_smi_log" in head:
        return QUERY_XML
    if _QUERY_TEXT.search(head):
        return QUERY
    if _TOPOLOGY_HEADER.search(head):
        return TOPOLOGY
    return None


def wrong_output(text: str, expected: tuple[str, ...]) -> str | None:
    """A one-line reason when `text` is another nvidia-smi output than `expected`, else None."""
    kind = output_kind(text)
    if kind is None or kind in expected:
        return None
    wanted = " or ".join(f"`{name}`" for name in expected)
    return f"this is `{kind}` output; give {wanted}"
