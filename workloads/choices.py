"""Enumerations of the workloads layer (DESIGN.md, "Workloads")."""

from django.db import models

from workloads.records import TERMINAL


class WorkloadKind(models.TextChoices):
    SLURM_JOB = "slurm_job", "Slurm job"
    PODS = "pods", "Pod group"


class WorkloadState(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"
    TIMEOUT = "timeout", "Timeout"
    NODE_FAIL = "node_fail", "Node failure"
    PREEMPTED = "preempted", "Preempted"
    OUT_OF_MEMORY = "out_of_memory", "Out of memory"
    UNKNOWN = "unknown", "Unknown"


class Verdict(models.TextChoices):
    GOOD = "good", "Good"
    SPREAD = "spread", "Spread"
    POORLY_PLACED = "poorly_placed", "Poorly placed"
    UNKNOWN = "unknown", "Unknown"


TERMINAL_STATES = TERMINAL  # the one list, in the pure records module
