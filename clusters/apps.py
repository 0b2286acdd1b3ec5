from django.apps import AppConfig


class ClustersConfig(AppConfig):
    """Schedulers: Kubernetes and Slurm clusters, their nodes, bindings to servers, findings."""

    name = "clusters"
    verbose_name = "Clusters"

    def ready(self) -> None:
        from inventory.signals import report_applied

        from .receivers import reconcile_after_report

        report_applied.connect(
            reconcile_after_report, dispatch_uid="clusters.reconcile_after_report"
        )
