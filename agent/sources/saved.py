"""A report from saved nvidia-smi output instead of live NVML.

`nvidia-smi -q -x` (or plain `-q`) gives the GPUs; `nvidia-smi topo -m` gives the links and
each GPU's CPU/NUMA affinity; either alone or both. When the files came from another server,
`hostname`/`system_uuid` name it and the local machine's facts stay out of the report; when
they describe this machine, its host facts and NICs join them.

A report that knows it describes less than the machine has is marked `partial` with a
`partial_reason` (the backend then never takes what it lacks as gone): one from `nvidia-smi
-L`, from a capture cut short (sent only when the user allows it), from a capture listing
fewer GPUs than nvidia-smi says are attached (trimmed by a person), or from a saved kernel log
alone. What such a report cannot name truly is left out rather than guessed: a GPU read only
in part before its UUID, a NIC column the matrix's legend does not name.

A topology-only report has no GPU UUIDs: they are synthesised from the server identity and
the GPU index (`uuid_synthetic: true`), as are MIG device ids the file does not give, so the
same capture always yields the same ids.
"""

from __future__ import annotations

import re
from typing import Any

from .. import __version__
from ..collector import empty_gpu, finish, gpu_warnings, server_key, utc_now
from ..host import SysHost
from ..schema import SCHEMA_VERSION, synthetic_uuid
from .identify import LIST, QUERY, QUERY_XML, output_kind, wrong_output
from .nvidia_smi_list import parse_nvidia_smi_list
from .nvidia_smi_text import looks_like_text, parse_nvidia_smi_text
from .nvidia_smi_xml import parse_nvidia_smi_xml
from .smi_types import SmiLog, SmiParseError
from .text import TextDecodeError, decode_text
from .topo_matrix import TopoMatrix

MAX_REASON = 500  # the schema's bound on partial_reason
KERNEL_LOG_ONLY = (
    "built from a saved kernel log alone: it names the server and its GPU events, not its GPUs"
)


def parse_nvidia_smi(data: str | bytes) -> SmiLog:
    """`nvidia-smi -q -x`, plain `-q` or `-L`, told apart by their first lines.

    Another nvidia-smi output given instead (`topo -m`) is named in the error.
    """
    try:
        text = decode_text(data)
    except TextDecodeError as exc:
        raise SmiParseError(str(exc)) from None
    reason = wrong_output(text, (QUERY_XML, QUERY, LIST))
    if reason:
        raise SmiParseError(reason)
    if output_kind(text) == LIST:
        return parse_nvidia_smi_list(text)
    if looks_like_text(text):
        return parse_nvidia_smi_text(text)
    return parse_nvidia_smi_xml(text)


def _gpus_from_log(log: SmiLog, identity: str, warnings: list[str]) -> list[dict[str, Any]]:
    gpus = []
    for position, parsed in enumerate(log.gpus):
        if position in log.incomplete:
            parsed = _whole_ids(parsed)
            if not parsed.get("uuid"):
                # a synthetic (or cut) id here would make a second GPU of the one it lost
                warnings.append(
                    f"GPU {parsed.get('pci_bus_id') or position} is cut before the end of its "
                    "UUID: left out"
                )
                continue
        index = parsed.get("index", position)
        gpu = empty_gpu(index)
        gpu.update({k: v for k, v in parsed.items() if k != "mig_devices"})
        if not gpu["uuid"]:
            gpu["uuid"] = synthetic_uuid("GPU", identity, gpu["pci_bus_id"] or f"index-{index}")
            gpu["uuid_synthetic"] = True
        if "mig_devices" in parsed:
            migs = []
            for mig in parsed["mig_devices"]:
                mig = dict(mig)
                unplaced = mig["gpu_instance_id"] is None or mig["compute_instance_id"] is None
                if unplaced and not mig["uuid"]:
                    continue  # nothing to know it by: no UUID, and no instance to derive one
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
            if migs or not parsed["mig_devices"]:
                gpu["mig_devices"] = migs
        gpus.append(gpu)
    return gpus


_WHOLE_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_WHOLE_GPU_UUID = re.compile(rf"GPU-{_WHOLE_UUID}")
_WHOLE_MIG_UUID = re.compile(rf"MIG-(?:GPU-{_WHOLE_UUID}/\d+/\d+|{_WHOLE_UUID})")


def _whole_ids(parsed: dict[str, Any]) -> dict[str, Any]:
    """A GPU read only in part, without ids the cut may have shortened: the file's last line
    can end inside a UUID (`GPU-ee7954ec-da95-fd7a-ddfd-c6`). A MIG device without a whole
    UUID is left out (the report needs one), a GPU's is None (the caller leaves it out)."""
    uuid = parsed.get("uuid")
    whole = dict(parsed, uuid=uuid if uuid and _WHOLE_GPU_UUID.fullmatch(uuid) else None)
    migs = [m for m in parsed.get("mig_devices", ()) if _WHOLE_MIG_UUID.fullmatch(m["uuid"] or "")]
    if migs:
        whole["mig_devices"] = migs
    else:
        whole.pop("mig_devices", None)
    return whole


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
    already (`parse_nvidia_smi`, `parse_topo_matrix`), so their errors name their file.

    With neither input the report names the server and no GPUs, marked partial (a saved
    kernel log alone: its events join the report afterwards). Refusing a capture cut short
    is the caller's choice; given one, this marks the report partial.
    """
    log, topo = smi_log, topology

    warnings: list[str] = []
    partial: list[str] = []
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
        warnings.extend(log.warnings)
        partial.extend(r for r in (log.partial_reason, log.cut) if r)
        if log.trimmed:  # the parser's warning says so already
            partial.append(f"{log.trimmed} (a capture filtered or trimmed)")
        gpus = _gpus_from_log(log, identity, warnings)
    else:
        gpus = _gpus_from_topology(topo, identity) if topo is not None else []
    if log is None and topo is None:
        partial.append(KERNEL_LOG_ONLY)

    links: list[dict[str, str]] = []
    if topo is not None:
        warnings.extend(topo.warnings)
        if topo.cut:
            partial.append(topo.cut)
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
        # a column the legend does not name (`NIC3`) would rename the server's real NIC
        unnamed = set(topo.unnamed_nics)
        known_nics = {nic["name"] for nic in nics}
        for name in topo.nics:
            if name not in known_nics and name not in unnamed:
                nics.append({"name": name})
                known_nics.add(name)
        for a, b, link_class in topo.links:
            ends_known = all(
                (end.startswith("gpu:") and int(end[4:]) in by_index)
                or (end.startswith("nic:") and end[4:] not in unnamed)
                for end in (a, b)
            )
            if ends_known:
                links.append({"a": a, "b": b, "link_class": link_class})
        nics.sort(key=lambda nic: nic["name"])

    warnings.extend(gpu_warnings(gpus))
    source = "nvidia-smi" if log is not None or topo is not None else "kernel-log"
    driver = None
    if log is not None and (log.driver_version or log.cuda_version):
        driver = {
            "driver_version": log.driver_version,
            "cuda_version": log.cuda_version,
            "nvml_version": None,
        }
    report: dict[str, Any] = {
        "schema": SCHEMA_VERSION,
        "agent": {"version": __version__, "source": source},
        "collected_at": collected_at or utc_now(),
        "host": facts,
        "driver": driver,
        "partial": bool(partial),
        "partial_reason": partial_reason(partial),
        "nvml_error": None,
        "gpus": gpus,
        "nics": nics,
        "links": links,
        "nvswitch_count": None,
        "warnings": warnings,
    }
    return finish(report)


def partial_reason(reasons: list[str]) -> str | None:
    """The reasons in one line, within the schema's bound; None for none."""
    if not reasons:
        return None
    text = "; ".join(dict.fromkeys(reasons))
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 3] + "..."
