"""Forms of the finding page: acknowledge and silence (the service holds the rules)."""

from __future__ import annotations

from django import forms

from inventory.models import Server

from .services import REASON_MAX


class AcknowledgeForm(forms.Form):
    reason = forms.CharField(
        label="Why",
        max_length=REASON_MAX,
        widget=forms.TextInput(attrs={"placeholder": "on it: …"}),
    )


class SilenceForm(forms.Form):
    reason = forms.CharField(label="Why", max_length=REASON_MAX)
    until = forms.DateTimeField(
        label="Until",
        input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M:%S"],
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
        help_text="UTC",
    )


class NodeBindForm(forms.Form):
    """Bind a node to a server named by hostname (the page's picker offers every hostname)."""

    server = forms.CharField(
        label="Server",
        max_length=253,
        widget=forms.TextInput(attrs={"list": "server-choices", "autocomplete": "off"}),
    )

    def clean_server(self) -> Server:
        hostname = self.cleaned_data["server"].strip()
        server = Server.objects.filter(hostname__iexact=hostname).order_by("id").first()
        if server is None:
            raise forms.ValidationError(f"No server is named “{hostname}”.")
        return server
