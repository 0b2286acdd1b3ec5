"""Writes of the workloads layer, one module per concern (`facts`: what the GPUs say;
`findings`: the workloads findings; `retention`: ended workloads summarised)."""
