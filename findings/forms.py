"""Forms of the finding page: acknowledge and silence (the service holds the rules)."""

from __future__ import annotations

from django import forms

from .services import REASON_MAX, BulkAction


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


SILENCE_DURATIONS = (
    (1, "1 hour"),
    (4, "4 hours"),
    (24, "1 day"),
    (72, "3 days"),
    (168, "7 days"),
    (720, "30 days"),
)
"""How long a bulk silence may last, in hours (the single silence takes any end time)."""


class FindingIdsField(forms.Field):
    """Finding ids, from checkboxes that share one name: any positive integers (the service
    says which name no finding)."""

    widget = forms.MultipleHiddenInput

    def to_python(self, value) -> list[int]:
        values = value if isinstance(value, list | tuple) else ([value] if value else [])
        if not all(str(v).isdigit() for v in values):
            raise forms.ValidationError("Finding ids are whole numbers.")
        return [int(v) for v in values]


class BulkActionForm(forms.Form):
    """The findings page's bulk bar: the ticked findings (`ids`), what to do, and why.

    A silence lasts one of SILENCE_DURATIONS from now; the service judges the rest (a reason
    for acknowledge and silence, at least one finding and at most BULK_MAX)."""

    ids = FindingIdsField(required=False)
    action = forms.ChoiceField(label="Action", choices=BulkAction.choices)
    reason = forms.CharField(
        label="Why",
        max_length=REASON_MAX,
        required=False,
        widget=forms.TextInput(attrs={"placeholder": "on it: ticket, cause …"}),
    )
    hours = forms.TypedChoiceField(
        label="Silence for",
        coerce=int,
        choices=SILENCE_DURATIONS,
        initial=24,
        required=False,
        empty_value=None,
    )
