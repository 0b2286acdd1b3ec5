"""Dashboard pages of the scheduler layer: nodes and findings."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


@login_required
def node_list(request: HttpRequest) -> HttpResponse:
    return render(request, "clusters/node_list.html", {})


@login_required
def finding_list(request: HttpRequest) -> HttpResponse:
    return render(request, "clusters/finding_list.html", {})
