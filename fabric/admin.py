"""Admin of the fabric layer: people set tier overrides here too; the rest is discovered."""

from django.contrib import admin

from .models import Adapter, Fabric, FabricLink, FabricSnapshot, Switch
from .services import switch_tier_set


@admin.register(Fabric)
class FabricAdmin(admin.ModelAdmin):
    list_display = ["name", "kind", "applied_at", "node_name_map_updated_at"]
    readonly_fields = ["node_names", "last_snapshot", "applied_at", "summary", "created_at"]
    fields = ["name", "kind", *readonly_fields]


@admin.register(FabricSnapshot)
class FabricSnapshotAdmin(admin.ModelAdmin):
    list_display = ["fabric", "received_at", "format", "status", "switch_count", "adapter_count"]
    list_filter = ["status", "format"]
    exclude = ["raw"]
    readonly_fields = [f.name for f in FabricSnapshot._meta.fields if f.name != "raw"]


@admin.register(Switch)
class SwitchAdmin(admin.ModelAdmin):
    list_display = ["name", "fabric", "guid", "tier_inferred", "tier_override", "rail"]
    list_filter = ["fabric", "tier_inferred", "tier_override"]
    search_fields = ["name", "guid", "description"]
    fields = ["tier_override"]

    def save_model(self, request, obj, form, change) -> None:
        switch_tier_set(switch=obj, tier=form.cleaned_data["tier_override"])


@admin.register(Adapter)
class AdapterAdmin(admin.ModelAdmin):
    list_display = ["guid", "fabric", "host_name", "nic", "role", "server", "binding_method"]
    list_filter = ["fabric", "role", "binding_method"]
    search_fields = ["guid", "host_name", "description"]
    readonly_fields = [f.name for f in Adapter._meta.fields]


@admin.register(FabricLink)
class FabricLinkAdmin(admin.ModelAdmin):
    list_display = ["key", "fabric", "width", "lane_speed", "gbps", "state", "gone_at"]
    list_filter = ["fabric", "state", "lane_speed"]
    search_fields = ["key"]
    readonly_fields = [f.name for f in FabricLink._meta.fields]
