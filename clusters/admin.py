"""Admin of the scheduler layer; cluster secrets are write-only here too."""

from django import forms
from django.contrib import admin

from .models import Cluster, Node
from .services import node_bind


class ClusterForm(forms.ModelForm):
    slurmrestd_token = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="JWT from `scontrol token`; leave empty to keep the stored one",
    )

    class Meta:
        model = Cluster
        fields = [
            "name",
            "kind",
            "source",
            "kubeconfig_path",
            "kube_context",
            "slurmrestd_url",
            "slurmrestd_user",
            "slurmrestd_token",
            "slurmrestd_api_version",
            "sync_interval_s",
        ]

    def clean_slurmrestd_token(self):
        return self.cleaned_data["slurmrestd_token"] or (
            self.instance.slurmrestd_token if self.instance.pk else ""
        )


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    form = ClusterForm
    list_display = ["name", "kind", "source", "last_success_at", "last_error"]


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "cluster",
        "state",
        "server",
        "binding_method",
        "gpu_capacity",
        "gone_at",
    ]
    list_filter = ["cluster", "kind", "binding_method", "state"]
    search_fields = ["name", "hostname", "system_uuid"]
    raw_id_fields = ["server"]
    list_select_related = ["cluster", "server"]

    def save_model(self, request, obj, form, change):
        """Choosing a server here is a manual binding: it wins over reconciliation."""
        if change and "server" in form.changed_data:
            node_bind(node=obj, server=obj.server)
        super().save_model(request, obj, form, change)
