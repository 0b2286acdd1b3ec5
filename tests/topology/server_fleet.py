"""A server whose GPU 5 fell off the bus after NVML had listed it, as NVML then reports it:
the GPUs after it move up one index (GPU 6 is now "5"), and the PCI bus still shows the lost
one. Shared by the server page's tests and its browser test."""

from __future__ import annotations

import copy
import json
from typing import Any

from clusters.reconcile import reconcile_all
from clusters.services import snapshot_ingest
from inventory.models import Server
from inventory.services import agent_token_create, report_apply, report_receive
from tests.nodes import scontrol_node, scontrol_text
from tests.reports import make_report

SLOT = 5


def fell_off_the_bus(full: dict[str, Any], slot: int = SLOT) -> dict[str, Any]:
    """`full`'s server after its GPU `slot` fell off the bus: NVML renumbers the rest."""
    report = copy.deepcopy(full)
    moved = {g["index"]: g["index"] - (g["index"] > slot) for g in full["gpus"]}
    report["gpus"] = [g for g in report["gpus"] if g["index"] != slot]
    for gpu in report["gpus"]:
        gpu["index"] = moved[gpu["index"]]

    def end(name: str) -> str | None:
        kind, _, value = name.partition(":")
        if kind != "gpu":
            return name
        index = int(value)
        return None if index == slot else f"gpu:{moved[index]}"

    links = []
    for link in report["links"]:
        a, b = end(link["a"]), end(link["b"])
        if a and b:
            links.append({**link, "a": a, "b": b})
    report["links"] = links
    report["pci_gpus"][slot]["in_nvml"] = False
    return report


def push(token, report: dict[str, Any]) -> None:
    result = report_receive(token=token, body=json.dumps(report).encode())
    if result.status == "pending":
        report_apply(report_id=result.report_id)


def server_with_a_lost_gpu(hostname: str = "dgx-h100-10", *, healthy: int = 2) -> Server:
    """`hostname` (its GPU 5 lost, a Slurm node of cluster `hpc`) beside `healthy` servers
    whose GPUs are all there (Kubernetes nodes of no cluster: agents only), reconciled."""
    token = agent_token_create(name=hostname)[0]
    full = make_report(hostname)
    push(token, full)
    token.refresh_from_db()
    push(token, fell_off_the_bus(full))
    for i in range(1, healthy + 1):
        push(agent_token_create(name=f"ok-{i}")[0], make_report(f"dgx-h100-{i:02d}"))
    snapshot_ingest(cluster_name="hpc", raw=scontrol_text(scontrol_node(hostname)))
    reconcile_all()
    return Server.objects.get(hostname=hostname)
