"""`GET /metrics`: the Prometheus text format, behind a bearer token; and the webhook pages
(staff): the list, one webhook with its deliveries, create, edit, delete.

Off (404, as if absent) while ATLAS_METRICS_TOKEN is unset. A missing or wrong token gets
401 with `WWW-Authenticate: Bearer` (the same answer for both, so it tells nothing), never
403: the caller is unauthenticated, not a known caller without the right.
"""

from __future__ import annotations

import hmac
from functools import wraps

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET
from prometheus_client import generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from core.tables import paginate, query_without

from . import selectors
from .choices import WebhookEvent
from .forms import WebhookForm
from .metrics import registry
from .models import Webhook
from .services.webhook_config import webhook_create, webhook_delete, webhook_update


def bearer_token_matches(header: str, token: str) -> bool:
    """Whether an Authorization header carries `Bearer <token>` (constant-time compare)."""
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer" or not given:
        return False
    return hmac.compare_digest(given.strip().encode(), token.encode())


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    token = settings.ATLAS_METRICS_TOKEN
    if not token:
        raise Http404("metrics are off")
    if not bearer_token_matches(request.headers.get("Authorization", ""), token):
        response = HttpResponse("401 unauthorized: a bearer token is required\n", status=401)
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        response["Content-Type"] = "text/plain; charset=utf-8"
        return response
    # The classic text format: every Prometheus 2.x reads it (names here are all legacy-valid).
    response = HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_PLAIN_0_0_4)
    response["Cache-Control"] = "no-store"
    return response


# Webhooks managed from pages (staff) ------------------------------------------------------


def staff_only(view):
    """Signed in (else the login page) and staff (else 403)."""

    @login_required
    @wraps(view)
    def wrapped(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if not request.user.is_staff:
            raise PermissionDenied
        return view(request, *args, **kwargs)

    return wrapped


@staff_only
def webhook_list(request: HttpRequest) -> HttpResponse:
    """Every webhook: where it posts, its events, whether it is on, its last delivery."""
    return render(
        request,
        "integrations/webhook_list.html",
        {"webhooks": selectors.webhook_list(), "events": dict(WebhookEvent.choices)},
    )


@staff_only
def webhook_create_page(request: HttpRequest) -> HttpResponse:
    form = WebhookForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        webhook = webhook_create(user=request.user, **form.cleaned_data)
        messages.success(request, f"Webhook {webhook.pk} created. Its secret is not shown again.")
        return redirect("webhook-detail", pk=webhook.pk)
    return render(request, "integrations/webhook_form.html", {"form": form, "webhook": None})


@staff_only
def webhook_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """One webhook and its deliveries, newest first (status, attempts, answer, next retry)."""
    webhook = get_object_or_404(Webhook, pk=pk)
    page = paginate(request, selectors.webhook_deliveries(webhook=webhook))
    return render(
        request,
        "integrations/webhook_detail.html",
        {
            "webhook": webhook,
            "page": page,
            "query": query_without(request, "page"),
            "events": dict(WebhookEvent.choices),
        },
    )


@staff_only
def webhook_edit(request: HttpRequest, pk: int) -> HttpResponse:
    webhook = get_object_or_404(Webhook, pk=pk)
    initial = {
        "url": webhook.url,
        "events": webhook.events,
        "active": webhook.active,
        "description": webhook.description,
    }
    form = WebhookForm(request.POST or None, initial=initial, editing=True)
    if request.method == "POST" and form.is_valid():
        webhook_update(webhook=webhook, user=request.user, **form.cleaned_data)
        messages.success(request, f"Webhook {webhook.pk} saved.")
        return redirect("webhook-detail", pk=webhook.pk)
    return render(request, "integrations/webhook_form.html", {"form": form, "webhook": webhook})


@staff_only
def webhook_delete_page(request: HttpRequest, pk: int) -> HttpResponse:
    webhook = get_object_or_404(Webhook, pk=pk)
    if request.method == "POST":
        webhook_delete(webhook=webhook, user=request.user)
        messages.success(request, f"Webhook {pk} deleted.")
        return redirect("webhook-list")
    return render(request, "integrations/webhook_delete.html", {"webhook": webhook})
