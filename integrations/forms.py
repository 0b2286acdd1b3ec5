"""The webhook form of the pages: the API's rules (http or https, a secret of 16 to 200
characters, at least one event, no receiver inside the network) in a Django form."""

from __future__ import annotations

from django import forms
from django.core.validators import URLValidator

from .choices import WebhookEvent
from .services.webhook_config import webhook_url_refusal

SECRET_MIN, SECRET_MAX = 16, 200


class WebhookForm(forms.Form):
    url = forms.CharField(
        label="URL",
        max_length=1000,
        validators=[URLValidator(schemes=["http", "https"])],
        help_text="http or https; receives signed JSON POSTs",
        widget=forms.URLInput(attrs={"placeholder": "https://receiver.example/atlas"}),
    )
    secret = forms.CharField(
        label="Secret",
        min_length=SECRET_MIN,
        max_length=SECRET_MAX,
        strip=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="signs each body (HMAC-SHA256); at least 16 characters; never shown again",
    )
    events = forms.MultipleChoiceField(
        label="Events", choices=WebhookEvent.choices, widget=forms.CheckboxSelectMultiple
    )
    active = forms.BooleanField(label="Active", required=False, initial=True)
    description = forms.CharField(label="Description", max_length=200, required=False)

    def clean_url(self) -> str:
        url = self.cleaned_data["url"]
        refusal = webhook_url_refusal(url)
        if refusal:
            raise forms.ValidationError(refusal)
        return url

    def __init__(self, *args, editing: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if editing:  # changing a webhook keeps its secret unless a new one is given
            self.fields["secret"].required = False
            self.fields["secret"].help_text = "leave empty to keep the current secret"
