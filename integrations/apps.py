from django.apps import AppConfig


class IntegrationsConfig(AppConfig):
    """What Cluster Atlas tells other tools: Prometheus metrics, Alertmanager alerts, webhooks."""

    name = "integrations"
    verbose_name = "Integrations"
