"""Forms of the node page: bind a node to a server by hand."""

from __future__ import annotations

from django import forms

from inventory.models import Server


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
