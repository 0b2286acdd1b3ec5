from __future__ import annotations

from django.core.validators import URLValidator
from rest_framework import serializers

from ..choices import WebhookEvent
from ..models import Delivery, Webhook
from ..services.webhook_config import webhook_url_refusal


class WebhookSerializer(serializers.ModelSerializer):
    """A webhook. `secret` is write-only: stored to sign bodies, never answered back."""

    url = serializers.CharField(
        max_length=1000,
        validators=[URLValidator(schemes=["http", "https"])],
        help_text="http or https only; not inside the network (loopback, link-local, private,"
        " multicast, reserved) unless ATLAS_WEBHOOK_ALLOWED_NETWORKS allows it; its name must"
        " resolve",
    )
    secret = serializers.CharField(
        write_only=True,
        min_length=16,
        max_length=200,
        trim_whitespace=False,
        help_text="signs each body (HMAC-SHA256); at least 16 characters; never shown again",
    )
    events = serializers.ListField(
        child=serializers.ChoiceField(choices=WebhookEvent.choices),
        allow_empty=False,
        max_length=len(WebhookEvent.choices),
    )

    class Meta:
        model = Webhook
        fields = [
            "id",
            "url",
            "secret",
            "events",
            "active",
            "description",
            "created_at",
            "disabled_at",
            "disabled_reason",
            "dropped_deliveries",
        ]
        read_only_fields = ["created_at", "disabled_at", "disabled_reason", "dropped_deliveries"]

    def validate_url(self, value: str) -> str:
        refusal = webhook_url_refusal(value)
        if refusal:
            raise serializers.ValidationError(refusal)
        return value

    def update(self, instance: Webhook, validated_data: dict) -> Webhook:
        """Turning a disabled webhook on again clears why it was disabled."""
        if validated_data.get("active") and instance.disabled_at is not None:
            validated_data |= {"disabled_at": None, "disabled_reason": ""}
        return super().update(instance, validated_data)

    def validate_events(self, value: list[str]) -> list[str]:
        return sorted(set(value))

    def get_fields(self):
        fields = super().get_fields()
        if self.instance is not None:  # changing a webhook keeps its secret unless one is given
            fields["secret"].required = False
        return fields


class DeliverySerializer(serializers.ModelSerializer):
    class Meta:
        model = Delivery
        fields = [
            "id",
            "event",
            "finding",
            "occurrence",
            "status",
            "attempts",
            "response_status",
            "last_error",
            "created_at",
            "last_attempt_at",
            "next_attempt_at",
            "delivered_at",
        ]
