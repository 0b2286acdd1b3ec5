from django.apps import AppConfig


class ClustersConfig(AppConfig):
    """Schedulers: Kubernetes and Slurm clusters, their nodes, bindings to servers, findings."""

    name = "clusters"
    verbose_name = "Clusters"
