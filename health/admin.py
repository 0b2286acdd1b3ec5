from django.contrib import admin

from .models import GpuCounterSample, HealthEvent


@admin.register(HealthEvent)
class HealthEventAdmin(admin.ModelAdmin):
    list_display = [
        "kind",
        "code",
        "server",
        "gpu_serial",
        "pci_bus_id",
        "count",
        "severity",
        "last_seen",
    ]
    list_filter = ["kind", "severity"]
    search_fields = ["gpu_serial", "gpu_uuid", "server__hostname", "message"]
    raw_id_fields = ["server", "gpu"]


@admin.register(GpuCounterSample)
class GpuCounterSampleAdmin(admin.ModelAdmin):
    list_display = ["gpu", "server", "taken_at", "current", "recovery_action"]
    list_filter = ["current"]
    raw_id_fields = ["gpu", "server"]
