"""Hand-built agent reports for backend tests (the agent's own profiles are tested in agent/)."""

from __future__ import annotations

import copy
import uuid as uuidlib
from typing import Any

NV = "NV18"


def address_of(name: str) -> str:
    """A stable private address per name, so tests never bind by accident."""
    digest = uuidlib.uuid5(uuidlib.NAMESPACE_DNS, name).int
    return f"10.{digest % 200}.{(digest >> 8) % 250}.{(digest >> 16) % 250 + 1}"


def gpu_uuid(host: str, index: int) -> str:
    return "GPU-" + str(uuidlib.uuid5(uuidlib.NAMESPACE_DNS, f"{host}/gpu{index}"))


def make_report(
    hostname: str = "dgx-01",
    *,
    gpus: int = 8,
    system_uuid: str | None = None,
    model: str = "NVIDIA H100 80GB HBM3",
    mig_gpus: dict[int, list[str]] | None = None,
    link_class: str = NV,
    nics: int = 2,
    driver: str = "550.54.15",
    skip_gpus: tuple[int, ...] = (),
    **host: Any,
) -> dict[str, Any]:
    """An 8-GPU NVLink server by default; mig_gpus maps a GPU index to its MIG profiles."""
    system_uuid = system_uuid or str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, hostname))
    gpu_rows = []
    for i in range(gpus):
        if i in skip_gpus:
            continue
        profiles = (mig_gpus or {}).get(i)
        gpu = {
            "index": i,
            "uuid": gpu_uuid(hostname, i),
            "serial": f"165{abs(hash((hostname, i))) % 10**10:010d}",
            "name": model,
            "pci_bus_id": f"0000:{0x18 + i * 0x10:02x}:00.0",
            "memory_total_bytes": 80 * 2**30,
            "power_limit_w": 700.0,
            "numa_node": 0 if i < gpus // 2 else 1,
            "mig_mode_current": profiles is not None,
            "mig_mode_pending": profiles is not None,
            "status": "ok",
            "mig_devices": [
                {
                    "uuid": "MIG-"
                    + str(uuidlib.uuid5(uuidlib.NAMESPACE_DNS, f"{hostname}/{i}/{n}")),
                    "gpu_instance_id": n + 1,
                    "compute_instance_id": 0,
                    "profile": p,
                    "memory_bytes": int(p.split(".")[1].rstrip("gb")) * 2**30,
                    "placement_start": n,
                    "placement_size": int(p[0]),
                }
                for n, p in enumerate(profiles or [])
            ],
        }
        gpu_rows.append(gpu)
    nic_rows = [
        {
            "name": f"mlx5_{n}",
            "kind": "infiniband",
            "pci_bus_id": f"0000:{0x19 + n * 0x10:02x}:00.0",
            "numa_node": 0,
            "speed_mbps": 400000,
        }
        for n in range(nics)
    ]
    indexes = [g["index"] for g in gpu_rows]
    links = [
        {"a": f"gpu:{a}", "b": f"gpu:{b}", "link_class": link_class}
        for a in indexes
        for b in indexes
        if a < b
    ]
    links += [
        {"a": f"gpu:{a}", "b": f"nic:{nic['name']}", "link_class": "PIX" if a == n else "SYS"}
        for a in indexes
        for n, nic in enumerate(nic_rows)
    ]
    return {
        "schema": "cluster-atlas/report/v1",
        "agent": {"version": "0.1.0", "source": "simulator"},
        "collected_at": "2026-11-30T08:00:00Z",
        "host": {
            "system_uuid": system_uuid,
            "machine_id": uuidlib.uuid5(uuidlib.NAMESPACE_OID, hostname).hex,
            "hostname": hostname,
            "fqdn": f"{hostname}.cluster.example",
            "vendor": "NVIDIA",
            "product": "DGXH100",
            "cpu_model": "Intel(R) Xeon(R) Platinum 8480C",
            "cpu_sockets": 2,
            "cpu_cores": 112,
            "cpu_threads": 224,
            "memory_total_bytes": 2 * 2**40,
            "numa_nodes": 2,
            "addresses": [address_of(hostname)],
            **host,
        },
        "driver": {"driver_version": driver, "cuda_version": "12.4", "nvml_version": "12.550"},
        "nvml_error": None,
        "gpus": gpu_rows,
        "nics": nic_rows,
        "links": links,
        "pci_gpus": [
            {"pci_bus_id": g["pci_bus_id"], "driver": "nvidia", "in_nvml": True} for g in gpu_rows
        ],
    }


def variant(report: dict[str, Any], **changes: Any) -> dict[str, Any]:
    new = copy.deepcopy(report)
    new.update(changes)
    return new


def apply_reports(*reports: dict[str, Any]) -> dict:
    """Receive and apply reports through the ingest services, one token per server.

    Returns the servers by hostname.
    """
    import json

    from inventory.models import Server
    from inventory.services import agent_token_create, report_apply, report_receive

    for report in reports:
        token = agent_token_create(name=report["host"]["hostname"])[0]
        result = report_receive(token=token, body=json.dumps(report).encode())
        if result.status == "pending":
            report_apply(report_id=result.report_id)
    return {s.hostname: s for s in Server.objects.all()}


def lost_gpu_report(hostname: str = "dgx-lost", *, slot: int = 5, **host: Any) -> dict[str, Any]:
    """An 8-GPU server whose GPU in `slot` is on the PCI bus but absent from NVML (fallen off
    the bus before NVML listed it: the demo's dgx-h100-10)."""
    full = make_report(hostname, **host)
    report = make_report(hostname, skip_gpus=(slot,), **host)
    report["pci_gpus"] = copy.deepcopy(full["pci_gpus"])
    report["pci_gpus"][slot]["in_nvml"] = False
    return report
