"""Reports with health events and counters for the backend tests, sent through real ingest."""

from __future__ import annotations

import copy
import json
from typing import Any

from inventory.models import AgentToken
from inventory.services import agent_token_create, report_apply, report_receive
from inventory.services.ingest import ReceiveResult
from tests.reports import make_report


def xid(
    code: int,
    bus: str,
    time: str,
    *,
    count: int = 1,
    last: str | None = None,
    uuid: str | None = None,
    key: str | None = None,
    message: str = "pid=1, name=train",
    kind: str = "xid",
) -> dict[str, Any]:
    return {
        "kind": kind,
        "code": code,
        "pci_bus_id": bus,
        "gpu_uuid": uuid,
        "time": time,
        "last_time": last,
        "message": message,
        "count": count,
        "key": key,
    }


def healthy(**changes: Any) -> dict[str, Any]:
    """A GPU health object of an idle, healthy H100; `changes` override fields."""
    return {
        "ecc_volatile_corrected": 0,
        "ecc_volatile_uncorrected": 0,
        "ecc_locations": [],
        "retired_pages_single_bit": None,
        "retired_pages_double_bit": None,
        "pcie_link_gen_current": 5,
        "pcie_link_gen_max": 5,
        "pcie_link_width_current": 16,
        "pcie_link_width_max": 16,
        "pcie_replay_count": 0,
        "performance_state": 8,
        "clock_event_reasons": ["gpu_idle"],
        "nvlink_crc_errors": 0,
        "nvlink_replay_errors": 0,
        "nvlink_recovery_errors": 0,
        "recovery_action": "none",
        **changes,
    }


def server_report(hostname: str = "dgx-01", **kwargs: Any) -> dict[str, Any]:
    """make_report's 8-GPU server with health counters on every GPU and no events."""
    report = make_report(hostname, **kwargs)
    for gpu in report["gpus"]:
        gpu["ecc_errors_corrected"] = 0
        gpu["ecc_errors_uncorrected"] = 0
        gpu["remapped_rows_pending"] = False
        gpu["remapped_rows_failure"] = False
        gpu["health"] = healthy()
    report["events"] = []
    return report


def with_events(report: dict[str, Any], *events: dict[str, Any]) -> dict[str, Any]:
    new = copy.deepcopy(report)
    new["events"] = list(events)
    return new


class Agent:
    """One server's agent: its token, its reports received and applied as the backend does."""

    def __init__(self, hostname: str) -> None:
        self.token: AgentToken = agent_token_create(name=hostname)[0]

    def send(self, report: dict[str, Any], *, apply: bool = True) -> ReceiveResult:
        result = report_receive(token=self.token, body=json.dumps(report).encode())
        if apply and result.status == "pending":
            report_apply(report_id=result.report_id)
        self.token.refresh_from_db()
        return result
