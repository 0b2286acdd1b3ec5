"""A report from saved nvidia-smi output instead of live NVML.

`nvidia-smi -q -x` (or plain `-q`) gives the GPUs; `nvidia-smi topo -m` gives the links and
each GPU's CPU/NUMA affinity; either alone or both. When the files came from another server,
`hostname`/`system_uuid` name it and the local machine's facts stay out of the report; when
they describe this machine, its host facts and NICs join them.

A topology-only report has no GPU UUIDs: they are synthesised from the server identity and
the GPU index (`uuid_synthetic: true`), as are MIG device ids the file does not give, so the
same capture always yields the same ids.
"""

from __future__ import annotations

from typing import Any

from .. import __version__
from ..collector import empty_gpu, finish, gpu_warnings, server_key, synthetic_uuid, utc_now
from ..host import SysHost
from ..schema import SCHEMA_VERSION
from .identify import QUERY, QUERY_XML, wrong_output
from .nvidia_smi_text import looks_like_text, parse_nvidia_smi_text
from .nvidia_smi_xml import SmiLog, SmiParseError, parse_nvidia_smi_xml
from .text import TextDecodeError, decode_text
from .topo_matrix import TopoMatrix


def parse_nvidia_smi(data: str | bytes) -> SmiLog:
    """`nvidia-smi -q -x` or plain `-q`, told apart by their first lines.

    Another nvidia-smi output given instead (`-L`, `topo -m`) is named in the error.
    """
    try:
        text = decode_text(data)
    except TextDecodeError as exc:
        raise SmiParseError(str(exc)) from None
    reason = wrong_output(text, (QUERY_XML, QUERY))
    if reason:
        raise SmiParseError(reason)
    if looks_like_text(text):
        return parse_nvidia_smi_text(text)
    return parse_nvidia_smi_xml(text)


def _gpus_from_log(log: SmiLog, identity: str) -> list[dict[str, Any]]:
    gpus = []
    for index, parsed in enumerate(log.gpus):
        gpu = empty_gpu(index)
        gpu.update({k: v for k, v in parsed.items() if k != "mig_devices"})
        if not gpu["uuid"]:
            gpu["uuid"] = synthetic_uuid("GPU", identity, gpu["pci_bus_id"] or f"index-{index}")
            gpu["uuid_synthetic"] = True
        if "mig_devices" in parsed:
            migs = []
            for mig in parsed["mig_devices"]:
                mig = dict(mig)
                if not mig["uuid"]:
                    mig["uuid"] = synthetic_uuid(
                        "MIG",
                        identity,
                        gpu["uuid"],
                        mig["gpu_instance_id"],
                        mig["compute_instance_id"],
                    )
                    mig["uuid_synthetic"] = True
                migs.append(mig)
            gpu["mig_devices"] = migs
        gpus.append(gpu)
    return gpus


def _gpus_from_topology(topo: TopoMatrix, identity: str) -> list[dict[str, Any]]:
    gpus = []
    for row in sorted(topo.gpus, key=lambda g: g.index):
        gpu = empty_gpu(row.index)
        gpu["uuid"] = synthetic_uuid("GPU", identity, f"index-{row.index}")
        gpu["uuid_synthetic"] = True
        gpus.append(gpu)
    return gpus


def build_saved_report(
    *,
    smi_log: SmiLog | None = None,
    topology: TopoMatrix | None = None,
    hostname: str | None = None,
    system_uuid: str | None = None,
    host: SysHost | None = None,
    collected_at: str | None = None,
) -> dict[str, Any]:
    """The report for saved outputs. `host` (the local machine) is used only when no
    `hostname`/`system_uuid` says the files came from elsewhere. The inputs are parsed
    already (`parse_nvidia_smi`, `parse_topo_matrix`), so their errors name their file."""
    if smi_log is None and topology is None:
        raise ValueError("give nvidia-smi -q/-q -x output, topo -m output, or both")
    log, topo = smi_log, topology

    warnings: list[str] = []
    nics: list[dict[str, Any]] = []
    if hostname or system_uuid or host is None:
        facts: dict[str, Any] = {
            "hostname": hostname or "unknown",
            "system_uuid": system_uuid.lower() if system_uuid else None,
        }
    else:
        facts = host.facts()
        warnings.extend(host.warnings)
        nics = host.nics()
    identity = server_key(facts)

    if log is not None:
        gpus = _gpus_from_log(log, identity)
        warnings.extend(log.warnings)
    else:
        gpus = _gpus_from_topology(topo, identity) if topo is not None else []

    links: list[dict[str, str]] = []
    if topo is not None:
        warnings.extend(topo.warnings)
        by_index = {g["index"]: g for g in gpus}
        for row in topo.gpus:
            gpu = by_index.get(row.index)
            if gpu is None:
                continue
            gpu["cpu_affinity"] = gpu["cpu_affinity"] or row.cpu_affinity
            if gpu["numa_node"] is None:
                gpu["numa_node"] = row.numa_node
        if log is not None and len(topo.gpus) != len(gpus):
            warnings.append(
                f"topo -m shows {len(topo.gpus)} GPUs, nvidia-smi -q shows {len(gpus)}: the "
                "files may come from different moments or servers"
            )
        known_nics = {nic["name"] for nic in nics}
        for name in topo.nics:
            if name not in known_nics:
                nics.append({"name": name})
                known_nics.add(name)
        for a, b, link_class in topo.links:
            ends_known = all(
                (end.startswith("gpu:") and int(end[4:]) in by_index) or end.startswith("nic:")
                for end in (a, b)
            )
            if ends_known:
                links.append({"a": a, "b": b, "link_class": link_class})
        nics.sort(key=lambda nic: nic["name"])

    warnings.extend(gpu_warnings(gpus))
    report: dict[str, Any] = {
        "schema": SCHEMA_VERSION,
        "agent": {"version": __version__, "source": "nvidia-smi"},
        "collected_at": collected_at or utc_now(),
        "host": facts,
        "driver": {
            "driver_version": log.driver_version,
            "cuda_version": log.cuda_version,
            "nvml_version": None,
        }
        if log is not None
        else None,
        "nvml_error": None,
        "gpus": gpus,
        "nics": nics,
        "links": links,
        "nvswitch_count": None,
        "warnings": warnings,
    }
    return finish(report)
