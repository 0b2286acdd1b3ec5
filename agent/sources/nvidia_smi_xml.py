"""Parse `nvidia-smi -q -x` (XML, DTD versions 10 to 13 at least) into report GPU fields.

Fields come and go between driver generations, so every lookup tolerates absence, tries the
newer element first and then the older one, and every value goes through `values.clean`.
The GPU list is the `<gpu>` elements the file holds, whatever `<attached_gpus>` says (a
capture filtered with `-i`, or one that lost a GPU mid-write, disagrees with it).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from ..mig import derive_mig_profile, mig_profile_name
from ..schema import normalize_pci_bus_id
from .identify import QUERY_XML, wrong_output
from .smi_health import health_from_xml
from .smi_types import SmiLog, SmiParseError
from .text import TextDecodeError, decode_text
from .values import (
    clean,
    real_serial,
    real_uuid,
    sum_counts,
    to_bool,
    to_bytes,
    to_float,
    to_int,
)

MIB = 1024 * 1024


def _text(node: ET.Element | None, *paths: str) -> str | None:
    """The first present, meaningful text among `paths` below `node`."""
    if node is None:
        return None
    for path in paths:
        found = node.find(path)
        if found is not None:
            value = clean(found.text)
            if value is not None:
                return value
    return None


def _counts(node: ET.Element | None) -> tuple[int | None, int | None]:
    """Aggregate ECC error counts (corrected, uncorrected) from an <aggregate> element.

    Newer drivers split SRAM/DRAM (and parity/SEC-DED); older ones had single_bit/double_bit
    with a <total>. The sums count what the file knows.
    """
    if node is None:
        return None, None
    corrected: list[int | None] = []
    uncorrected: list[int | None] = []
    for child in node:
        tag = child.tag.lower()
        if tag in ("single_bit", "double_bit"):
            total = to_int(child.findtext("total"))
            (corrected if tag == "single_bit" else uncorrected).append(total)
        elif "uncorrectable" in tag:
            uncorrected.append(to_int(child.text))
        elif "correctable" in tag:
            corrected.append(to_int(child.text))
    return sum_counts(corrected), sum_counts(uncorrected)


def _mig_devices(gpu: ET.Element, name: str | None, arch: str | None) -> list[dict[str, Any]]:
    raw = []
    for mig in gpu.findall("mig_devices/mig_device"):
        gi = to_int(mig.findtext("gpu_instance_id"))
        ci = to_int(mig.findtext("compute_instance_id"))
        if gi is None or ci is None:
            continue
        memory = to_bytes(_text(mig, "fb_memory_usage/total", "shared_fb_memory_usage/total"))
        raw.append(
            {
                "uuid": real_uuid(_text(mig, "uuid", "mig_uuid")),
                "gpu_instance_id": gi,
                "compute_instance_id": ci,
                "profile": clean(_text(mig, "profile", "mig_profile")),
                "memory_bytes": memory,
                "sm_count": to_int(
                    _text(
                        mig, "device_attributes/shared/multiprocessor_count", "multiprocessor_count"
                    )
                ),
                "placement_start": None,
                "placement_size": None,
            }
        )
    return name_mig_devices(raw, name, arch)


def name_mig_devices(
    devices: list[dict[str, Any]], gpu_name: str | None, arch: str | None
) -> list[dict[str, Any]]:
    """Fill in missing profile names from the GPU model, memory and SM counts."""
    gi_sms: dict[int, int] = {}
    for device in devices:
        gi_sms[device["gpu_instance_id"]] = gi_sms.get(device["gpu_instance_id"], 0) + (
            device["sm_count"] or 0
        )
    for device in devices:
        if device.get("profile"):
            device["profile"] = mig_profile_name(str(device["profile"]))
            continue
        memory = device["memory_bytes"]
        device["profile"] = derive_mig_profile(
            gpu_name,
            arch,
            memory // MIB if memory else None,
            device["sm_count"],
            gi_sms.get(device["gpu_instance_id"]) or None,
        )
    devices.sort(key=lambda d: (d["gpu_instance_id"], d["compute_instance_id"]))
    return devices


def _gpu(node: ET.Element) -> dict[str, Any]:
    name = _text(node, "product_name")
    arch = _text(node, "product_architecture")
    corrected, uncorrected = _counts(node.find("ecc_errors/aggregate"))
    board = _text(node, "board_part_number")
    if board is None and node.find("board_part_number") is None:
        # before the board/chip split (DTD v11 and older) the board number was gpu_part_number
        board = _text(node, "gpu_part_number")
    retired = [
        to_int(node.findtext("retired_pages/multiple_single_bit_retirement/retired_count")),
        to_int(node.findtext("retired_pages/double_bit_retirement/retired_count")),
    ]
    remapped = node.find("remapped_rows")
    mig_current = to_bool(_text(node, "mig_mode/current_mig"))
    gpu: dict[str, Any] = {
        "uuid": real_uuid(_text(node, "uuid")),
        "serial": real_serial(_text(node, "serial")),
        "name": name,
        "board_part_number": board,
        "architecture": arch,
        "compute_capability": _text(node, "cuda_compute_capability", "compute_capability"),
        "pci_bus_id": normalize_pci_bus_id(_text(node, "pci/pci_bus_id") or node.get("id")),
        "memory_total_bytes": to_bytes(_text(node, "fb_memory_usage/total")),
        "power_limit_w": to_float(
            _text(
                node,
                "gpu_power_readings/current_power_limit",
                "gpu_power_readings/enforced_power_limit",
                "power_readings/enforced_power_limit",
                "power_readings/power_limit",
            )
        ),
        "vbios_version": _text(node, "vbios_version"),
        "numa_node": to_int(_text(node, "numa_node", "gpu_numa_id")),
        "cpu_affinity": None,
        "persistence_mode": to_bool(_text(node, "persistence_mode")),
        "mig_mode_current": mig_current,
        "mig_mode_pending": to_bool(_text(node, "mig_mode/pending_mig")),
        "ecc_mode_current": to_bool(_text(node, "ecc_mode/current_ecc")),
        "ecc_errors_corrected": corrected,
        "ecc_errors_uncorrected": uncorrected,
        "retired_pages": sum_counts(retired),
        "retired_pages_pending": to_bool(
            _text(node, "retired_pages/pending_retirement", "retired_pages/pending_blacklist")
        ),
        "remapped_rows_correctable": to_int(_text(remapped, "remapped_row_corr")),
        "remapped_rows_uncorrectable": to_int(_text(remapped, "remapped_row_unc")),
        "remapped_rows_pending": to_bool(_text(remapped, "remapped_row_pending")),
        "remapped_rows_failure": to_bool(_text(remapped, "remapped_row_failure")),
        "health": health_from_xml(node, any_errors=bool(corrected or uncorrected)),
    }
    if mig_current:
        gpu["mig_devices"] = _mig_devices(node, name, arch)
    return gpu


def _read_tree(text: str) -> tuple[ET.Element, bool]:
    """The document's root and whether the text ends before the root closes.

    A capture cut short (a full disk, a killed redirect) ends inside an element: expat
    then fails only when told the input is over, and every element begun so far is in the
    tree, the cut one with the children it had. Errors in the middle stay errors.
    """
    parser: ET.XMLPullParser[ET.Element] = ET.XMLPullParser(events=("start",))
    root: ET.Element | None = None
    try:
        parser.feed(text)
        for event in parser.read_events():  # raises the errors feed() queued
            element = event[-1]  # a "start" event is (name, element)
            if root is None and isinstance(element, ET.Element):
                root = element
    except ET.ParseError as exc:
        raise SmiParseError(f"not well-formed XML: {exc}") from None
    try:
        parser.close()
    except ET.ParseError as exc:
        if root is None:
            raise SmiParseError(f"not well-formed XML: {exc}") from None
        return root, True
    if root is None:  # pragma: no cover - close() raises on a document without elements
        raise SmiParseError("not well-formed XML: no element found")
    return root, False


def _closed(text: str, count: int) -> bool:
    """True when the text holds `count` closing </gpu> tags: the last GPU begun has ended."""
    return text.count("</gpu>") >= count


def parse_nvidia_smi_xml(data: str | bytes) -> SmiLog:
    """Parse a saved `nvidia-smi -q -x`. Raises SmiParseError for anything else.

    Output cut short is read as far as it goes, with a warning: the GPUs it begins are
    listed (the last one in part), so the server never looks quietly smaller.
    """
    try:
        text = decode_text(data)
    except TextDecodeError as exc:
        raise SmiParseError(str(exc)) from None
    reason = wrong_output(text, (QUERY_XML,))
    if reason:
        raise SmiParseError(reason)
    if "<!ENTITY" in text:
        raise SmiParseError("XML entity declarations are not accepted in nvidia-smi output")
    root, cut = _read_tree(text)  # no entities (checked above), no network
    if root.tag != "nvidia_smi_log":
        raise SmiParseError(f"root element is <{root.tag}>, not <nvidia_smi_log>")
    log = SmiLog(
        driver_version=_text(root, "driver_version"),
        cuda_version=_text(root, "cuda_version"),
        attached_gpus=to_int(root.findtext("attached_gpus")),
    )
    nodes = root.findall("gpu")
    log.gpus = [_gpu(node) for node in nodes]
    if cut:
        # the last <gpu> begun is cut unless the cut fell after its </gpu>
        if nodes and not _closed(text, len(nodes)):
            log.incomplete.append(len(nodes) - 1)
        last = log.gpus[-1]["pci_bus_id"] if log.incomplete else None
        log.cut = "the nvidia-smi -q -x output ends before </nvidia_smi_log>: it was cut short" + (
            f"; GPU {last} is read only in part" if last else ""
        )
        log.warnings.append(log.cut)
    if log.attached_gpus is not None and log.attached_gpus != len(log.gpus):
        log.warnings.append(
            f"nvidia-smi says {log.attached_gpus} GPUs are attached but the file describes "
            f"{len(log.gpus)}; the report lists the {len(log.gpus)} described"
        )
    return log
