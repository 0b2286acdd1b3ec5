"""Simulated GPU servers for tests, benchmarks and the demo: never part of the agent's wheel.

`fake_nvml` answers the agent's `NvmlBackend` protocol and writes a fake /sys tree;
`profiles` builds believable machines (DGX H100, A100 in MIG mode, L40S, KVM, ...);
`reports` runs the agent's real collector on them; `fleet` makes fleets and pushes them;
`schedulers` prints what kubectl and scontrol would say of them; `demo` declares the demo
fleet and its clusters; `keepalive` keeps a pushed fleet reporting.
This package imports the agent (its collector, schema, transport), never the reverse.
"""
