from django import forms
from django.contrib import admin

from .models import Delivery, ReportOutcomeCount, Webhook
from .services.webhook_config import webhook_url_refusal


class WebhookAdminForm(forms.ModelForm):
    """The admin refuses a receiver inside the network as the API and the pages do."""

    class Meta:
        model = Webhook
        fields = ["url", "events", "active", "description"]

    def clean_url(self) -> str:
        url = self.cleaned_data["url"]
        refusal = webhook_url_refusal(url)
        if refusal:
            raise forms.ValidationError(refusal)
        return url


@admin.register(Webhook)
class WebhookAdmin(admin.ModelAdmin):
    """The secret is not editable here and never displayed (set it through the API)."""

    form = WebhookAdminForm
    list_display = ["id", "url", "events", "active", "disabled_at", "created_at"]
    exclude = ["secret"]
    readonly_fields = [
        "created_by",
        "created_at",
        "disabled_at",
        "disabled_reason",
        "dropped_deliveries",
    ]


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    list_display = ["id", "webhook", "event", "finding", "status", "attempts", "last_attempt_at"]
    list_filter = ["status", "event"]
    readonly_fields = [f.name for f in Delivery._meta.fields]


@admin.register(ReportOutcomeCount)
class ReportOutcomeCountAdmin(admin.ModelAdmin):
    list_display = ["outcome", "status_code", "count"]
