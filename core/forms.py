"""Filter forms built from the FilterSets the lists and the API already use.

A page names which of its FilterSet's filters it shows, in what order and with what words;
`FilterForm.build` takes the bound FilterSet's own form (so the page shows exactly what the
filters parsed, and keeps what the user typed) and renders choices as dropdowns: choice
filters, yes/no filters, and text filters whose values are known (clusters, racks, models).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django import forms
from django.forms.utils import pretty_name

ANY = ("", "any")
Choices = Sequence[tuple[Any, Any]]


@dataclass(frozen=True)
class FilterForm:
    """The filters a page shows: `fields` in order, `hidden` carried along unseen.

    `labels` and `placeholders` give page words (a label defaults to the filter's name, not
    django-filter's guess from the model field); `choices` fixed dropdown entries (the words
    of a yes/no filter: `(("true", "MIG enabled"), ("false", "no MIG"))`).
    """

    fields: Sequence[str]
    hidden: Sequence[str] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    placeholders: Mapping[str, str] = field(default_factory=dict)
    choices: Mapping[str, Choices] = field(default_factory=dict)

    def build(self, filterset: Any, *, known: Mapping[str, Sequence[Any]] | None = None):
        """The FilterSet's bound form, cut to this page's filters; `known` lists the values
        of text filters to offer as a dropdown (read by the caller, only for the page)."""
        form = filterset.form
        known = known or {}
        chosen: dict[str, forms.Field] = {}
        for name in self.hidden:
            chosen[name] = form.fields[name]
            chosen[name].widget = forms.HiddenInput()
        for name in self.fields:
            chosen[name] = _page_field(
                form.fields[name],
                label=self.labels.get(name) or pretty_name(name),
                placeholder=self.placeholders.get(name),
                choices=self.choices.get(name),
                known=known.get(name),
            )
        form.fields = chosen
        form._bound_fields_cache = {}  # bound while filtering, before the page's labels
        return form


def _page_field(
    field: forms.Field,
    *,
    label: str,
    placeholder: str | None,
    choices: Choices | None,
    known: Sequence[Any] | None,
) -> forms.Field:
    field.label = label
    if known is not None:
        choices = [(value, value) for value in known]
    if choices is not None:
        field.widget = forms.Select(choices=[ANY, *choices])
    elif isinstance(field, forms.NullBooleanField):
        field.widget = forms.Select(choices=[ANY, ("true", "yes"), ("false", "no")])
    elif isinstance(field, forms.ChoiceField):
        # django-stubs types the getter as whatever the setter takes (a callable, a Choices
        # class); Django normalises on set, so what it returns is an iterable of pairs.
        pairs = field.choices
        field.widget = forms.Select(
            choices=[ANY, *((v, t) for v, t in pairs if v != "")]  # type: ignore[misc, union-attr]
        )
    elif isinstance(field.widget, forms.TextInput):
        field.widget = forms.TextInput(attrs={"type": "search", "placeholder": placeholder or ""})
    return field


def filter_form(
    filterset: Any, spec: FilterForm | None, known: Mapping[str, Sequence[Any]] | None = None
):
    """The page's filter form, or None for a list without one."""
    return spec.build(filterset, known=known) if spec is not None else None
