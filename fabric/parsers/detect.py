"""Which ibnetdiscover output a text is, and reading it whole. Pure.

Both layouts are accepted wherever a fabric snapshot is (the API, `import_fabric`): the
plain topology file and the `-p` ports report. A discovery with no switch is refused: it is
what ibnetdiscover prints on a host whose own port is down (it sees only its adapter), and
taking it would wipe the fabric.
"""

from __future__ import annotations

import re

from .ibnetdiscover import FORMAT as PLAIN
from .ibnetdiscover import parse_ibnetdiscover
from .ibnetdiscover_ports import FORMAT as PORTS
from .ibnetdiscover_ports import parse_ibnetdiscover_ports
from .records import SWITCH, Discovery, FabricFormatError

FORMATS = (PLAIN, PORTS)
PLAIN_MARK = re.compile(r'^(?:(?:Switch|Ca|Rt)\s+\d+\s+"[SHR]-|# Topology file|vendid=0x)', re.M)
PORTS_MARK = re.compile(r"^\s*(?:SW|CA|RT)\s+\d+\s+\d+\s+0x[0-9a-fA-F]+\s", re.M)


def detect_format(text: str) -> str:
    """`ibnetdiscover` or `ibnetdiscover-ports`; FabricFormatError for anything else."""
    head = text[:65536]
    if PLAIN_MARK.search(head):
        return PLAIN
    if PORTS_MARK.search(head):
        return PORTS
    raise FabricFormatError(
        "not ibnetdiscover output: expected the topology file (`ibnetdiscover`) "
        "or the ports report (`ibnetdiscover -p`)"
    )


def decode(raw: bytes | str) -> str:
    """UTF-8 text without a byte-order mark; FabricFormatError when it is not text."""
    if isinstance(raw, str):
        return raw.removeprefix("\ufeff")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FabricFormatError(f"not UTF-8 text (byte {exc.start})") from None


def parse_fabric(raw: bytes | str) -> Discovery:
    """Detect, parse and check a whole ibnetdiscover output."""
    text = decode(raw)
    if not text.strip():
        raise FabricFormatError("empty: no ibnetdiscover output")
    fmt = detect_format(text)
    discovery = parse_ibnetdiscover(text) if fmt == PLAIN else parse_ibnetdiscover_ports(text)
    if not any(node.kind == SWITCH for node in discovery.nodes.values()):
        adapters = len(discovery.nodes)
        raise FabricFormatError(
            f"no switch: the output names {adapters} adapter{'s' if adapters != 1 else ''} "
            "and no switch (ibnetdiscover run on a host whose port is down sees only itself)"
        )
    return discovery
