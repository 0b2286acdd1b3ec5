from django.contrib import admin

from .models import Delivery, ReportOutcomeCount, Webhook


@admin.register(Webhook)
class WebhookAdmin(admin.ModelAdmin):
    """The secret is not editable here and never displayed (set it through the API)."""

    list_display = ["id", "url", "events", "active", "created_at"]
    exclude = ["secret"]
    readonly_fields = ["created_by", "created_at"]


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    list_display = ["id", "webhook", "event", "finding", "status", "attempts", "last_attempt_at"]
    list_filter = ["status", "event"]
    readonly_fields = [f.name for f in Delivery._meta.fields]


@admin.register(ReportOutcomeCount)
class ReportOutcomeCountAdmin(admin.ModelAdmin):
    list_display = ["outcome", "status_code", "count"]
