"""Writes of the workloads layer: one module per concern (`holders`: health events named by
the workload that held their GPU)."""
