"""Writes and side effects of the integrations, one module per integration."""

from .outcomes import report_outcome_count

__all__ = ["report_outcome_count"]
