"""Parsers of fabric discovery output: pure functions from text to plain data."""

from .detect import FORMATS, decode, detect_format, parse_fabric
from .ibnetdiscover import parse_ibnetdiscover
from .ibnetdiscover_ports import parse_ibnetdiscover_ports
from .node_name_map import parse_node_name_map
from .records import (
    CA,
    ROUTER,
    SWITCH,
    DiscoveredLink,
    DiscoveredNode,
    Discovery,
    FabricFormatError,
    link_gbps,
)

__all__ = [
    "CA",
    "FORMATS",
    "ROUTER",
    "SWITCH",
    "DiscoveredLink",
    "DiscoveredNode",
    "Discovery",
    "FabricFormatError",
    "decode",
    "detect_format",
    "link_gbps",
    "parse_fabric",
    "parse_ibnetdiscover",
    "parse_ibnetdiscover_ports",
    "parse_node_name_map",
]
