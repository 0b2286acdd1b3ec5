from django.apps import AppConfig


class FindingsConfig(AppConfig):
    """Findings of every family (reconciliation, GPU health, network fabric): the vocabulary,
    the table, its one writer, a person's acknowledgement and silence, the pages and the API."""

    name = "findings"
    verbose_name = "Findings"
