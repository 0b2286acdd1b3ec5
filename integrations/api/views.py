"""Webhooks API (staff only): register receivers, read what was delivered to them."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import permissions, viewsets
from rest_framework.decorators import action

from ..models import Delivery, Webhook
from .serializers import DeliverySerializer, WebhookSerializer


class IsStaff(permissions.BasePermission):
    def has_permission(self, request, view) -> bool:
        return bool(request.user and request.user.is_authenticated and request.user.is_staff)


class WebhookViewSet(viewsets.ModelViewSet):
    """Signed webhooks: `POST` a `url`, a `secret` and the `events` wanted."""

    serializer_class = WebhookSerializer
    permission_classes = [permissions.IsAuthenticated, IsStaff]
    queryset = Webhook.objects.order_by("id")
    filter_backends: list = []
    lookup_value_regex = "[0-9]+"

    def perform_create(self, serializer) -> None:
        serializer.save(created_by=self.request.user)

    @extend_schema(responses=DeliverySerializer(many=True), summary="A webhook's deliveries")
    @action(detail=True, methods=["get"], serializer_class=DeliverySerializer)
    def deliveries(self, request, pk=None):
        webhook = self.get_object()
        page = self.paginate_queryset(
            Delivery.objects.filter(webhook=webhook).order_by("-id").defer("payload")
        )
        return self.get_paginated_response(DeliverySerializer(page, many=True).data)
