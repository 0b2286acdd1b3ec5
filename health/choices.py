"""Enumerations of the health layer."""

from django.db import models

from findings.choices import Severity

__all__ = ["EventKind", "Severity"]


class EventKind(models.TextChoices):
    """The report's event kinds (agent/report.schema.json `event.kind`)."""

    XID = "xid", "Xid"
    SXID = "sxid", "NVSwitch SXid"
    FALLEN_OFF_BUS = "fallen_off_bus", "Fallen off the bus"
    PROBE_FAILURE = "probe_failure", "Probe failure"
