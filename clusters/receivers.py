"""What the scheduler layer does when inventory changes: findings follow a report at once."""

from __future__ import annotations

from typing import Any

from inventory.services.apply import ApplyResult

from .reconcile import reconcile_servers
from .tasks import reconcile_soon


def reconcile_after_report(sender: Any, *, result: ApplyResult, **_: Any) -> None:
    """One changed server is reconciled on its own, in milliseconds at any fleet size.

    A new server or a changed identity can bind or unbind nodes, which only the full pass
    does: that one is requested (coalesced) instead.
    """
    if result.server_id is None:
        return
    if result.created or result.identity_changed:
        reconcile_soon()
    else:
        reconcile_servers(server_ids=[result.server_id])
