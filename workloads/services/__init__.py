"""Writes of the workloads layer, one module per concern."""
