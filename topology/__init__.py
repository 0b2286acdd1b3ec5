"""Topology keeps what spans the layers: the fleet and server figures, the pages across
them (overview, server, node, search), one server's interconnect, and the clusters–fabric
join (a Slurm `topology.conf` naming Slurm nodes under fabric switches)."""
