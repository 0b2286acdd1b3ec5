"""Links to pages by URL name, for a page another part may not have mounted yet."""

from __future__ import annotations

from django.urls import NoReverseMatch, reverse


def workload_path(workload_id: int) -> str:
    """The workload page (`workload-detail`, the workloads app's), else its plain path: a
    lower layer names it by URL, never by import, as findings name clusters' models."""
    try:
        return reverse("workload-detail", args=[workload_id])
    except NoReverseMatch:
        return f"/workloads/{workload_id}/"
