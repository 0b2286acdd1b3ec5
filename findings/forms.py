"""Forms of the finding page: acknowledge and silence (the service holds the rules)."""

from __future__ import annotations

from django import forms

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
