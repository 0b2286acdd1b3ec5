from django.apps import AppConfig


class WorkloadsConfig(AppConfig):
    """What runs on the GPUs: Slurm jobs and pod groups, the GPUs they hold, the processes."""

    name = "workloads"
    verbose_name = "Workloads"
