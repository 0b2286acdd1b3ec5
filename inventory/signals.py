"""What inventory tells the layers above it, which it must not import (clusters, health...).

`report_applied` is sent after a report's facts are committed, with the `ApplyResult`, so a
layer can refresh what depends on one server (its findings) without waiting for the full
periodic pass.
"""

from django.dispatch import Signal

report_applied = Signal()
"""Sent with `result` (an `inventory.services.apply.ApplyResult` whose status is applied)."""
