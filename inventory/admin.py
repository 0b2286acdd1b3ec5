"""Admin: people set racks, profiles and VM hosts; tokens are created, revoked, re-bound."""

from django.contrib import admin, messages

from .models import (
    AgentToken,
    ChangeEvent,
    Enrollment,
    EnrollmentToken,
    Gpu,
    HardwareProfile,
    MigDevice,
    Nic,
    Report,
    Server,
    UserToken,
)
from .services import (
    agent_token_create,
    agent_token_unbind,
    revision_bump,
    user_token_create,
    user_token_revoke,
)
from .services.enrollment import enrollment_token_create, enrollment_token_revoke
from .services.tokens import agent_token_revoke


def _show_key_once(request, what: str, key: str) -> None:
    """The one time a key is shown: the page after creating it. Only its digest is stored."""
    messages.warning(request, f"{what} (shown once, store it now): {key}")


GPU_INLINE_FIELDS = ("index", "name", "uuid", "serial", "pci_bus_id", "status", "mig_mode_current")


class GpuInline(admin.TabularInline):
    model = Gpu
    extra = 0
    fields = GPU_INLINE_FIELDS
    readonly_fields = GPU_INLINE_FIELDS
    can_delete = False
    show_change_link = True


@admin.register(Server)
class ServerAdmin(admin.ModelAdmin):
    list_display = [
        "hostname",
        "vendor",
        "product",
        "rack",
        "rack_position",
        "is_virtual",
        "last_seen",
    ]
    list_filter = ["is_virtual", "vendor", "rack"]
    search_fields = ["hostname", "fqdn", "system_uuid", "machine_id", "serial"]
    fields = [
        "hostname",
        "identity",
        "system_uuid",
        "machine_id",
        "fqdn",
        "vendor",
        "product",
        "serial",
        "rack",
        "rack_position",
        "hardware_profile",
        "physical_host",
        "physical_host_manual",
        "driver_version",
        "cuda_version",
        "first_seen",
        "last_seen",
    ]
    readonly_fields = [
        "hostname",
        "identity",
        "system_uuid",
        "machine_id",
        "fqdn",
        "vendor",
        "product",
        "serial",
        "driver_version",
        "cuda_version",
        "first_seen",
        "last_seen",
    ]
    autocomplete_fields = ["physical_host"]
    inlines = [GpuInline]

    def save_model(self, request, obj, form, change):
        if "physical_host" in form.changed_data:
            obj.physical_host_manual = obj.physical_host is not None
        super().save_model(request, obj, form, change)
        revision_bump(name="inventory")


@admin.register(Gpu)
class GpuAdmin(admin.ModelAdmin):
    list_display = ["uuid", "server", "index", "name", "serial", "status"]
    list_filter = ["status", "name"]
    search_fields = ["uuid", "serial", "server__hostname"]
    list_select_related = ["server"]
    raw_id_fields = ["server"]


@admin.register(HardwareProfile)
class HardwareProfileAdmin(admin.ModelAdmin):
    list_display = ["name", "vendor", "product", "expected_gpu_count", "expected_gpu_model"]


@admin.register(AgentToken)
class AgentTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "prefix", "server", "identity", "created_at", "revoked_at"]
    search_fields = ["name", "prefix", "identity"]
    fields = ["name", "prefix", "server", "identity", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = ["prefix", "server", "identity", "created_at", "last_used_at", "revoked_at"]
    actions = ["unbind", "revoke"]

    def save_model(self, request, obj, form, change):
        if change:
            return super().save_model(request, obj, form, change)
        token, key = agent_token_create(name=obj.name)
        obj.pk = token.pk
        _show_key_once(request, f"Agent token for {obj.name or 'a server'}", key)

    @admin.action(description="Re-bind: let the token claim a server again")
    def unbind(self, request, queryset):
        for token in queryset:
            agent_token_unbind(token=token)

    @admin.action(description="Revoke")
    def revoke(self, request, queryset):
        for token in queryset:
            agent_token_revoke(token=token)


class EnrollmentInline(admin.TabularInline):
    model = Enrollment
    fields = ("hostname", "server", "identity", "remote_addr", "replaced_token", "enrolled_at")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(EnrollmentToken)
class EnrollmentTokenAdmin(admin.ModelAdmin):
    """Enrollment tokens: the key is shown once, on creation; only its digest is kept (and
    never shown). Uses are counted by enrollments, never edited."""

    list_display = ["name", "prefix", "uses", "uses_allowed", "expires_at", "revoked_at"]
    list_filter = ["revoked_at", "allow_reenroll"]
    search_fields = ["name", "prefix"]
    fields = [
        "name",
        "prefix",
        "uses_allowed",
        "uses",
        "expires_at",
        "allow_reenroll",
        "created_by",
        "created_at",
        "revoked_at",
    ]
    readonly_fields = ["prefix", "uses", "created_by", "created_at", "revoked_at"]
    inlines = [EnrollmentInline]
    actions = ["revoke"]

    def get_readonly_fields(self, request, obj=None):
        if obj is None:
            return self.readonly_fields
        return [*self.readonly_fields, "name", "uses_allowed", "expires_at", "allow_reenroll"]

    def save_model(self, request, obj, form, change):
        if change:
            return super().save_model(request, obj, form, change)
        token, key = enrollment_token_create(
            name=obj.name,
            uses=obj.uses_allowed,
            expires_in=None,
            allow_reenroll=obj.allow_reenroll,
            created_by=request.user,
        )
        if obj.expires_at is not None:
            EnrollmentToken.objects.filter(pk=token.pk).update(expires_at=obj.expires_at)
        obj.pk = token.pk
        _show_key_once(request, f"Enrollment token {obj.name or token.pk}", key)

    def save_formset(self, request, form, formset, change):
        if change:  # the enrollments are read-only; a new token has none to save
            super().save_formset(request, form, formset, change)

    @admin.action(description="Revoke")
    def revoke(self, request, queryset):
        for token in queryset:
            enrollment_token_revoke(token=token)


@admin.register(UserToken)
class UserTokenAdmin(admin.ModelAdmin):
    """People's API tokens: the key is shown once, on creation; the list shows its prefix.

    Staff who are not superusers see and create tokens for themselves only: a token acts with
    its user's permissions, so minting one for another user would borrow theirs.
    """

    list_display = ["name", "user", "prefix", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["revoked_at"]
    list_select_related = ["user"]
    search_fields = ["name", "prefix", "user__username"]
    fields = ["user", "name", "prefix", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = ["prefix", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke"]

    def get_queryset(self, request):
        queryset = super().get_queryset(request)
        return queryset if request.user.is_superuser else queryset.filter(user=request.user)

    def get_readonly_fields(self, request, obj=None):
        return [*self.readonly_fields, "user"] if obj else self.readonly_fields

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "user" and not request.user.is_superuser:
            kwargs["queryset"] = db_field.related_model.objects.filter(pk=request.user.pk)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def save_model(self, request, obj, form, change):
        if change:
            return super().save_model(request, obj, form, change)
        token, key = user_token_create(user=obj.user, name=obj.name)
        obj.pk = token.pk
        _show_key_once(request, f"API token for {obj.user}", key)

    @admin.action(description="Revoke")
    def revoke(self, request, queryset):
        for token in queryset:
            user_token_revoke(token=token)


@admin.register(Report)
class ReportAdmin(admin.ModelAdmin):
    list_display = ["id", "identity", "server", "status", "received_at", "applied_at", "size_bytes"]
    list_filter = ["status"]
    readonly_fields = [f.name for f in Report._meta.fields]
    list_select_related = ["server"]


@admin.register(ChangeEvent)
class ChangeEventAdmin(admin.ModelAdmin):
    list_display = ["created_at", "server", "kind", "summary"]
    list_filter = ["kind"]
    list_select_related = ["server"]
    readonly_fields = [f.name for f in ChangeEvent._meta.fields]


admin.site.register(MigDevice)
admin.site.register(Nic)
admin.site.site_header = "Cluster Atlas administration"
