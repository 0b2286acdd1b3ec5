"""The GPU `health` object from saved `nvidia-smi -q -x` and `-q`: the same fields NVML gives.

Spellings change between driver generations and both are read: v11's `clocks_throttle_reasons`
and v12+'s `clocks_event_reasons`; `gpu_reset_status` (reset required / drain and reset
recommended) before the R560 `gpu_recovery_action`; ECC by location as `sram_*`/`dram_*`
counts (Ampere and later) or `single_bit`/`double_bit` per memory unit (Volta and older).
nvidia-smi -q does not show NVLink error counters: those stay null.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable
from typing import Any

from ..counters import MAX_LOCATIONS, empty_health
from .smi_types import Section
from .values import sum_counts, to_bool, to_int

# XML tag / text label (lower case, words joined by "_") -> the report's reason name
_REASONS = {
    "gpu_idle": "gpu_idle",
    "idle": "gpu_idle",
    "sw_power_cap": "sw_power_cap",
    "hw_slowdown": "hw_slowdown",
    "sw_thermal_slowdown": "sw_thermal_slowdown",
    "hw_thermal_slowdown": "hw_thermal_slowdown",
    "hw_power_brake_slowdown": "hw_power_brake_slowdown",
}
_REASON_ORDER = (
    "gpu_idle",
    "sw_power_cap",
    "hw_slowdown",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
)
_RECOVERY = {
    "none": "none",
    "reset": "gpu_reset",
    "gpu_reset": "gpu_reset",
    "reboot": "node_reboot",
    "node_reboot": "node_reboot",
    "drain_p2p": "drain_p2p",
    "drain_and_reset": "drain_and_reset",
    "recover_imex_domain": "recover_imex_domain",
    "bus_reset": "bus_reset",
    "system_reboot": "system_reboot",
}
_UNITS = {"device_memory": "dram"}  # Volta and older name DRAM "device memory"


def _word(label: str) -> str:
    return "_".join(label.lower().replace("-", "").split())


def recovery_action(text: str | None) -> str | None:
    """`None`, `Reset`, `Drain and Reset` ... -> none, gpu_reset, drain_and_reset."""
    if text is None:
        return None
    return _RECOVERY.get(_word(text.strip("[] ")))  # N/A and the like: None


def _reset_status(required: str | None, drain: str | None) -> str | None:
    """Before R560 the driver said only whether a reset (or a drain and reset) is due."""
    if to_bool(drain):
        return "drain_and_reset"
    if to_bool(required):
        return "gpu_reset"
    if to_bool(required) is False or to_bool(drain) is False:
        return "none"
    return None


def _locations(counters: Iterable[tuple[str, Iterable[tuple[str, Any]]]]) -> list[dict[str, Any]]:
    """(counter, [(label, value or children)]) -> per-location corrected/uncorrected counts.

    `sram_correctable`, `dram_uncorrectable`, `sram_uncorrectable_parity` name their location;
    `single_bit`/`double_bit` hold one count per memory unit.
    """
    out: list[dict[str, Any]] = []
    for counter, items in counters:
        by_location: dict[str, dict[str, list[int | None]]] = {}

        def add(location: str, kind: str, value: int | None, into=by_location) -> None:
            into.setdefault(location, {"corrected": [], "uncorrected": []})[kind].append(value)

        for label, value in items:
            word = _word(label)
            if word in ("single_bit", "double_bit") and not isinstance(value, str):
                kind = "corrected" if word == "single_bit" else "uncorrected"
                for unit, count in value:
                    unit_word = _word(unit)
                    if unit_word != "total" and isinstance(count, str):
                        add(_UNITS.get(unit_word, unit_word), kind, to_int(count))
            elif isinstance(value, str) and word[:4] in ("sram", "dram"):
                if "uncorrectable" in word:
                    add(word[:4], "uncorrected", to_int(value))
                elif "correctable" in word:
                    add(word[:4], "corrected", to_int(value))
        for location, counts in by_location.items():
            corrected = sum_counts(counts["corrected"])
            uncorrected = sum_counts(counts["uncorrected"])
            if corrected is not None or uncorrected is not None:
                out.append(
                    {
                        "location": location,
                        "counter": counter,
                        "corrected": corrected,
                        "uncorrected": uncorrected,
                    }
                )
    return out[:MAX_LOCATIONS]


def pstate(text: str | None) -> int | None:
    """`P0` .. `P15` -> 0 .. 15."""
    value = to_int(text.strip().lstrip("Pp")) if text else None
    return value if value is not None and 0 <= value <= 15 else None


def _finish(health: dict[str, Any], locations: list[dict[str, Any]], any_errors: bool) -> None:
    volatile = [loc for loc in locations if loc["counter"] == "volatile"]
    if volatile:
        health["ecc_volatile_corrected"] = sum_counts([loc["corrected"] for loc in volatile])
        health["ecc_volatile_uncorrected"] = sum_counts([loc["uncorrected"] for loc in volatile])
    # as with NVML: the breakdown only for a GPU that counts errors at all
    if any_errors or health["ecc_volatile_corrected"] or health["ecc_volatile_uncorrected"]:
        health["ecc_locations"] = locations


# -- nvidia-smi -q -x ------------------------------------------------------------------------


def _xml_items(node: ET.Element | None) -> list[tuple[str, Any]]:
    if node is None:
        return []
    return [
        (child.tag, [(c.tag, c.text or "") for c in child] if len(child) else (child.text or ""))
        for child in node
    ]


def health_from_xml(gpu: ET.Element, *, any_errors: bool = False) -> dict[str, Any]:
    """The health object of one `<gpu>` element; `any_errors`: its lifetime ECC counts > 0."""
    health = empty_health()
    locations = _locations(
        (counter, _xml_items(gpu.find(f"ecc_errors/{counter}")))
        for counter in ("volatile", "aggregate")
    )
    _finish(health, locations, any_errors)
    retired = gpu.find("retired_pages")
    if retired is not None:
        health["retired_pages_single_bit"] = to_int(
            retired.findtext("multiple_single_bit_retirement/retired_count")
        )
        health["retired_pages_double_bit"] = to_int(
            retired.findtext("double_bit_retirement/retired_count")
        )
    link = gpu.find("pci/pci_gpu_link_info")
    if link is not None:
        health["pcie_link_gen_current"] = to_int(link.findtext("pcie_gen/current_link_gen"))
        health["pcie_link_gen_max"] = to_int(link.findtext("pcie_gen/max_link_gen"))
        health["pcie_link_width_current"] = to_int(link.findtext("link_widths/current_link_width"))
        health["pcie_link_width_max"] = to_int(link.findtext("link_widths/max_link_width"))
    health["pcie_replay_count"] = to_int(gpu.findtext("pci/replay_counter"))
    health["performance_state"] = pstate(gpu.findtext("performance_state"))
    reasons = gpu.find("clocks_event_reasons")
    if reasons is None:
        reasons = gpu.find("clocks_throttle_reasons")  # v11 and older
    if reasons is not None:
        active: set[str] = set()
        for child in reasons:
            word = child.tag.split("_reason_", 1)[-1]
            name = _REASONS.get(word)
            if name and to_bool(child.text):
                active.add(name)
        health["clock_event_reasons"] = [name for name in _REASON_ORDER if name in active]
    action = recovery_action(gpu.findtext("gpu_recovery_action"))
    if action is None:
        action = _reset_status(
            gpu.findtext("gpu_reset_status/reset_required"),
            gpu.findtext("gpu_reset_status/drain_and_reset_recommended"),
        )
    health["recovery_action"] = action
    return health


# -- nvidia-smi -q ---------------------------------------------------------------------------


def _text_items(section: Any) -> list[tuple[str, Any]]:
    if not isinstance(section, Section):
        return []
    return [
        (label, value if isinstance(value, str) else _text_items(value))
        for label, value in section.items
    ]


def health_from_text(gpu: Section, *, any_errors: bool = False) -> dict[str, Any]:
    """The health object of one `GPU 0000:...` section of plain `nvidia-smi -q`."""
    health = empty_health()
    locations = _locations(
        (counter.lower(), _text_items(gpu.get("ECC Errors", counter)))
        for counter in ("Volatile", "Aggregate")
    )
    _finish(health, locations, any_errors)
    health["retired_pages_single_bit"] = to_int(gpu.text(("Retired Pages", "Single Bit ECC")))
    health["retired_pages_double_bit"] = to_int(gpu.text(("Retired Pages", "Double Bit ECC")))
    info = ("PCI", "GPU Link Info")
    health["pcie_link_gen_current"] = to_int(gpu.text((*info, "PCIe Generation", "Current")))
    health["pcie_link_gen_max"] = to_int(gpu.text((*info, "PCIe Generation", "Max")))
    health["pcie_link_width_current"] = to_int(gpu.text((*info, "Link Width", "Current")))
    health["pcie_link_width_max"] = to_int(gpu.text((*info, "Link Width", "Max")))
    health["pcie_replay_count"] = to_int(
        gpu.text(("PCI", "Replays Since Reset"), ("PCI", "Replays"))
    )
    health["performance_state"] = pstate(gpu.text("Performance State"))
    reasons = gpu.get("Clocks Event Reasons") or gpu.get("Clocks Throttle Reasons")
    items = _text_items(reasons)
    if items:
        active = {
            _REASONS[_word(label)]
            for label, value in items
            if isinstance(value, str) and _word(label) in _REASONS and to_bool(value)
        }
        health["clock_event_reasons"] = [name for name in _REASON_ORDER if name in active]
    raw_action = gpu.get("GPU Recovery Action")  # raw: "None" is a value here, not a blank
    action = recovery_action(raw_action if isinstance(raw_action, str) else None)
    if action is None:
        action = _reset_status(
            gpu.text(("GPU Reset Status", "Reset Required")),
            gpu.text(("GPU Reset Status", "Drain and Reset Recommended")),
        )
    health["recovery_action"] = action
    return health
