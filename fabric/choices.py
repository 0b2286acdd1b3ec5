"""Enumerations of the fabric layer."""

from django.db import models

from . import binding
from .parsers import FORMATS


class FabricKind(models.TextChoices):
    INFINIBAND = "infiniband", "InfiniBand"
    ETHERNET = "ethernet", "Ethernet (from LLDP)"


class SnapshotFormat(models.TextChoices):
    IBNETDISCOVER = FORMATS[0], "ibnetdiscover"
    IBNETDISCOVER_PORTS = FORMATS[1], "ibnetdiscover -p (ports report)"


class SnapshotStatus(models.TextChoices):
    APPLIED = "applied", "Applied"
    REJECTED = "rejected", "Rejected"


class NodeKind(models.TextChoices):
    CA = "ca", "Channel adapter"
    ROUTER = "router", "Router"


class AdapterRole(models.TextChoices):
    HOST = binding.HOST, "Server NIC"
    AGGREGATION = binding.AGGREGATION, "Switch aggregation node (SHARP)"
    ROUTER = binding.ROUTER_ROLE, "Router"


class BindingMethod(models.TextChoices):
    NONE = binding.UNBOUND, "Unbound"
    GUID = binding.BY_GUID, "GUID reported by the agent"
    NODE_NAME_MAP = binding.BY_NAME_MAP, "node-name map"
    DESCRIPTION = binding.BY_DESCRIPTION, "node description"
    LLDP = binding.BY_LLDP, "LLDP heard by the server's agent"


class LinkState(models.TextChoices):
    UP = "up", "Up"
    DOWN = "down", "Down (nothing at the far end)"
