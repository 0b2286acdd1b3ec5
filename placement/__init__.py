"""Placement: where a job fits now, and why; what a failure takes; dense or sparse servers.

A reader over the domains (it imports clusters/, fabric/, health/, inventory/ and core/, never
topology/ or integrations/). The placement engine keeps one read boundary and a pure core:

- `types`: the request, its shape per scheduler, its filters, rankings, the answer's rows;
- `facts`: the fleet as read (nodes, their servers' GPUs and links), plain objects;
- `selectors`: every query (the only module that touches the ORM);
- `gpu_sets`: the GPUs chosen inside one node;
- `planner`: a request placed on a fleet, in memory;
- `alternatives`: nearby requests that fit when this one does not;
- `service`: `placement_find`, which reads, plans and answers, and `capacity_plan`;
- `summaries`: the per-server summaries (`models.ServerPlacement`) the selectors prefer.

Beside it: `failure_domains` (its pure arithmetic and its queries) and `capacity` (the
capacity planner's arithmetic). This module imports nothing: it is the Django app's package,
loaded before the models are.
"""
