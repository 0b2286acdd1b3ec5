"""Parse plain `nvidia-smi -q` (the human-readable form) into the same GPU fields as the XML.

The text is an indented tree of `Key : value` lines and bare section headers (`PCI`, `MIG
Device`); labels differ from the XML tags and between driver generations, so lookups take
alternatives. Many sites only keep this form (support bundles, tickets), hence the parser.
"""

from __future__ import annotations

import re
from typing import Any

from ..schema import normalize_pci_bus_id
from .identify import QUERY, wrong_output
from .nvidia_smi_xml import name_mig_devices
from .smi_health import health_from_text
from .smi_types import Section, SmiLog, SmiParseError
from .text import TextDecodeError, decode_text
from .values import (
    real_serial,
    real_uuid,
    sum_counts,
    to_bool,
    to_bytes,
    to_float,
    to_int,
)

_KEY_VALUE = re.compile(r"^(?P<key>\S.*?)\s+:(?:\s(?P<value>.*))?$")
_GPU_HEADER = re.compile(
    r"^GPU\s+(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$"
)


def parse_tree(text: str) -> Section:
    """Indentation -> nesting. Lines without ` : ` open a section; others are values."""
    root = Section("")
    stack: list[tuple[int, Section]] = [(-1, root)]
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line.strip() or line.strip().startswith("="):
            continue
        indent = len(line) - len(line.lstrip(" \t"))
        content = line.strip()
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        match = _KEY_VALUE.match(content)
        if match:
            value = match["value"]
            parent.items.append((match["key"].strip(), (value or "").strip()))
            if value is None or not value.strip():
                # 'Key :' with nothing after it can still head a section (older drivers)
                section = Section(match["key"].strip())
                parent.items[-1] = (section.label, section)
                stack.append((indent, section))
        else:
            section = Section(content)
            parent.items.append((content, section))
            stack.append((indent, section))
    return root


def _counts(node: Any) -> tuple[int | None, int | None]:
    if not isinstance(node, Section):
        return None, None
    corrected: list[int | None] = []
    uncorrected: list[int | None] = []
    for key, value in node.items:
        label = key.lower()
        if label in ("single bit", "double bit") and isinstance(value, Section):
            (corrected if label == "single bit" else uncorrected).append(
                to_int(value.text("Total"))
            )
        elif isinstance(value, str) and "uncorrectable" in label:
            uncorrected.append(to_int(value))
        elif isinstance(value, str) and "correctable" in label:
            corrected.append(to_int(value))
    return sum_counts(corrected), sum_counts(uncorrected)


def _mig_devices(node: Section, name: str | None, arch: str | None) -> list[dict[str, Any]]:
    raw = []
    for mig in node.all("MIG Device"):
        gi = to_int(mig.text("GPU Instance ID"))
        ci = to_int(mig.text("Compute Instance ID"))
        if gi is None or ci is None:
            continue
        raw.append(
            {
                "uuid": real_uuid(mig.text("UUID", "MIG UUID")),
                "gpu_instance_id": gi,
                "compute_instance_id": ci,
                "profile": mig.text("Profile", "MIG Profile"),
                "memory_bytes": to_bytes(
                    mig.text(("Shared FB Memory Usage", "Total"), ("FB Memory Usage", "Total"))
                ),
                "sm_count": to_int(
                    mig.text(
                        ("Device Attributes", "Shared", "Multiprocessor count"),
                        ("Device Attributes", "Shared", "SM count"),
                    )
                ),
                "placement_start": None,
                "placement_size": None,
            }
        )
    return name_mig_devices(raw, name, arch)


def _gpu(node: Section, bus: str) -> dict[str, Any]:
    name = node.text("Product Name")
    arch = node.text("Product Architecture")
    corrected, uncorrected = _counts(node.get("ECC Errors", "Aggregate"))
    board = node.text("Board Part Number")
    if board is None and node.get("Board Part Number") is None:
        board = node.text("GPU Part Number")
    retired = node.get("Retired Pages")
    remapped = node.get("Remapped Rows")
    remapped = remapped if isinstance(remapped, Section) else Section("")
    retired = retired if isinstance(retired, Section) else Section("")
    mig_current = to_bool(node.text(("MIG Mode", "Current")))
    gpu: dict[str, Any] = {
        "uuid": real_uuid(node.text("GPU UUID", "UUID")),
        "serial": real_serial(node.text("Serial Number")),
        "name": name,
        "board_part_number": board,
        "architecture": arch,
        "compute_capability": node.text("CUDA Compute Capability", "Compute Capability"),
        "pci_bus_id": normalize_pci_bus_id(node.text(("PCI", "Bus Id")) or bus),
        "memory_total_bytes": to_bytes(node.text(("FB Memory Usage", "Total"))),
        "power_limit_w": to_float(
            node.text(
                ("GPU Power Readings", "Current Power Limit"),
                ("GPU Power Readings", "Enforced Power Limit"),
                ("Power Readings", "Enforced Power Limit"),
                ("Power Readings", "Power Limit"),
            )
        ),
        "vbios_version": node.text("VBIOS Version"),
        "numa_node": to_int(node.text("GPU NUMA ID", "NUMA Node")),
        "cpu_affinity": None,
        "persistence_mode": to_bool(node.text("Persistence Mode")),
        "mig_mode_current": mig_current,
        "mig_mode_pending": to_bool(node.text(("MIG Mode", "Pending"))),
        "ecc_mode_current": to_bool(node.text(("ECC Mode", "Current"))),
        "ecc_errors_corrected": corrected,
        "ecc_errors_uncorrected": uncorrected,
        "retired_pages": sum_counts(
            [to_int(retired.text("Single Bit ECC")), to_int(retired.text("Double Bit ECC"))]
        ),
        "retired_pages_pending": to_bool(
            retired.text("Pending Page Retirement", "Pending Page Blacklist", "Pending")
        ),
        "remapped_rows_correctable": to_int(remapped.text("Correctable Error")),
        "remapped_rows_uncorrectable": to_int(remapped.text("Uncorrectable Error")),
        "remapped_rows_pending": to_bool(remapped.text("Pending")),
        "remapped_rows_failure": to_bool(remapped.text("Remapping Failure Occurred")),
        "health": health_from_text(node, any_errors=bool(corrected or uncorrected)),
    }
    if mig_current:
        gpu["mig_devices"] = _mig_devices(node, name, arch)
    return gpu


def looks_like_text(data: str | bytes) -> bool:
    head = data[:4096] if isinstance(data, str) else data[:4096].decode("utf-8", "replace")
    return "NVSMI LOG" in head or bool(re.search(r"^Driver Version\s+:", head, re.MULTILINE))


def parse_nvidia_smi_text(data: str | bytes) -> SmiLog:
    """Parse a saved plain `nvidia-smi -q`. Raises SmiParseError for anything else.

    Output cut short is read as far as it goes, with a warning: nvidia-smi ends every
    GPU's block with `Processes` (then, in newer drivers, `Capabilities`), so a block
    without it stops early and its GPU is read only in part, never dropped.
    """
    try:
        text = decode_text(data)
    except TextDecodeError as exc:
        raise SmiParseError(str(exc)) from None
    reason = wrong_output(text, (QUERY,))
    if reason:
        raise SmiParseError(reason)
    tree = parse_tree(text)
    log = SmiLog(
        driver_version=tree.text("Driver Version"),
        cuda_version=tree.text("CUDA Version"),
        attached_gpus=to_int(tree.text("Attached GPUs")),
    )
    cut: list[str] = []
    for key, value in tree.items:
        match = _GPU_HEADER.match(key)
        if match and isinstance(value, Section):
            gpu = _gpu(value, match["bus"])
            log.gpus.append(gpu)
            if value.get("Processes") is None:
                cut.append(gpu["pci_bus_id"] or match["bus"])
                log.incomplete.append(len(log.gpus) - 1)
    if not log.gpus and log.driver_version is None:
        raise SmiParseError("no nvidia-smi -q sections found")
    if cut:
        log.cut = (
            f"the nvidia-smi -q block of GPU {', '.join(cut)} ends before `Processes`, which "
            "nvidia-smi prints for every GPU: the file was cut short (or filtered with -d), "
            "so that GPU is read only in part"
        )
        log.warnings.append(log.cut)
    elif not log.gpus and log.attached_gpus is None:
        log.cut = (
            "the nvidia-smi -q output ends before `Attached GPUs`, which nvidia-smi prints "
            "before the GPUs: it was cut short"
        )
        log.warnings.append(log.cut)
    if log.attached_gpus is not None and log.attached_gpus != len(log.gpus):
        log.warnings.append(
            f"nvidia-smi says {log.attached_gpus} GPUs are attached but the file describes "
            f"{len(log.gpus)}; the report lists the {len(log.gpus)} described"
        )
    return log
