"""Admin of findings: every family's, with each type's words."""

from django.contrib import admin

from .models import Finding


@admin.register(Finding)
class FindingAdmin(admin.ModelAdmin):
    list_display = ["type", "severity", "subject", "first_seen", "last_seen", "resolved_at"]
    list_filter = ["type", "severity"]
    search_fields = ["subject", "message"]
