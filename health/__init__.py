"""GPU health: kernel-log events, counters over time, the XID catalog, lifecycle, rules."""
