"""Which ibnetdiscover output a text is, and reading it whole. Pure.

Both layouts are accepted wherever a fabric snapshot is (the API, `import_fabric`): the
plain topology file and the `-p` ports report. A discovery with no switch is refused: it is
what ibnetdiscover prints on a host whose own port is down (it sees only its adapter), and
taking it would wipe the fabric.
"""

from __future__ import annotations

import re

from core.safe_input import InputRejected, decode_text

from .ibnetdiscover import FORMAT as PLAIN
from .ibnetdiscover import parse_ibnetdiscover
from .ibnetdiscover_ports import FORMAT as PORTS
from .ibnetdiscover_ports import parse_ibnetdiscover_ports
from .records import SWITCH, Discovery, FabricFormatError

FORMATS = (PLAIN, PORTS)
# What the columns keep (a smallint port, an integer LID): far past any real output, where
# ports are 8 bits and LIDs 16, but bench/'s generated fabrics go past InfiniBand's own bounds.
MAX_PORT = 32767
MAX_LID = 2**31 - 1
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
    """UTF-8 text as every text input is read (`core.safe_input.decode_text`: no BOM, no
    ANSI escapes; other encodings and NUL characters refused); FabricFormatError says why."""
    try:
        return decode_text(raw)
    except InputRejected as exc:
        raise FabricFormatError(str(exc)) from None


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
    _check_numbers(discovery)
    return discovery


def _check_numbers(discovery: Discovery) -> None:
    """Port numbers and LIDs the columns can keep: past them a 400 says which, not a
    database error."""
    for node in discovery.nodes.values():
        if node.port_count is not None and node.port_count > MAX_PORT:
            raise FabricFormatError(
                f"node {node.guid}: {node.port_count} ports (at most {MAX_PORT})"
            )
        lids = [node.lid, *node.port_lids.values()]
        if any(lid is not None and lid > MAX_LID for lid in lids):
            raise FabricFormatError(f"node {node.guid}: a LID over {MAX_LID}")
        if any(port > MAX_PORT for port in node.port_lids):
            raise FabricFormatError(f"node {node.guid}: a port number over {MAX_PORT}")
    for link in discovery.links:
        if link.a_port > MAX_PORT or (link.b_port or 0) > MAX_PORT:
            raise FabricFormatError(f"cable {link.key}: a port number over {MAX_PORT}")
        if (link.a_lid or 0) > MAX_LID or (link.b_lid or 0) > MAX_LID:
            raise FabricFormatError(f"cable {link.key}: a LID over {MAX_LID}")
