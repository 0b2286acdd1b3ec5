"""Writes of the workloads layer, one module per concern: `apply` (a listing's workloads and
their GPUs), `intake` and `sync` (how listings arrive), `pods` (the kubelet's devices),
`facts` (what the GPUs say), `findings` (the workloads findings), `holders` (health events
named by the workload that held their GPU), `retention` (ended workloads summarised)."""
