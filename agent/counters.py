"""Per-GPU health counters: one NVML reading per report -> the GPU's `health` object.

The object holds what the GPU's other fields do not: volatile ECC counts and the counts by
memory location, retired pages by cause, the PCIe link (now and at best) and its replays, the
active clock-event reasons, NVLink CRC/replay/recovery error totals, the driver's recommended
recovery action, and the performance state (0 is P0: in a low P-state the GPU runs its PCIe
link at a lower generation to save power, which is no fault). Lifetime ECC totals, retired
pages in all and remapped rows stay where they were (`ecc_errors_*`, `retired_pages*`,
`remapped_rows_*`). Unknown is null, as everywhere.

Values that do not change leave the report unchanged, so a healthy idle fleet still answers
with heartbeats; the P-state, link generation and idle reason move when work starts and stops.
"""

from __future__ import annotations

from typing import Any

from .nvml import NvmlBackend, clock_reason_names

HEALTH_FIELDS = (
    "ecc_volatile_corrected",
    "ecc_volatile_uncorrected",
    "retired_pages_single_bit",
    "retired_pages_double_bit",
    "pcie_link_gen_current",
    "pcie_link_gen_max",
    "pcie_link_width_current",
    "pcie_link_width_max",
    "pcie_replay_count",
    "performance_state",
    "clock_event_reasons",
    "nvlink_crc_errors",
    "nvlink_replay_errors",
    "nvlink_recovery_errors",
    "recovery_action",
)
MAX_LOCATIONS = 32  # 8 locations x 2 counters, twice over: the schema's bound
RESET_ACTIONS = {"gpu_reset", "drain_and_reset", "bus_reset"}
REBOOT_ACTIONS = {"node_reboot", "system_reboot"}


def empty_health() -> dict[str, Any]:
    """Every health field, unknown."""
    health: dict[str, Any] = dict.fromkeys(HEALTH_FIELDS)
    health["ecc_locations"] = []
    return health


def read_health(
    backend: NvmlBackend, handle: Any, gpu: dict[str, Any], *, has_nvlinks: bool
) -> dict[str, Any]:
    """The health object of one GPU whose other fields are read already (`gpu`).

    ECC by location costs 32 NVML calls, so it is read only for a GPU that counts ECC errors
    at all; NVLink errors only for a GPU with NVLinks.
    """
    health = empty_health()
    volatile = backend.ecc_volatile(handle)
    if volatile is not None:
        health["ecc_volatile_corrected"], health["ecc_volatile_uncorrected"] = volatile
    counts = [
        gpu.get("ecc_errors_corrected"),
        gpu.get("ecc_errors_uncorrected"),
        *(volatile or ()),
    ]
    if any(counts):
        health["ecc_locations"] = [
            {
                "location": loc.location,
                "counter": loc.counter,
                "corrected": loc.corrected,
                "uncorrected": loc.uncorrected,
            }
            for loc in backend.ecc_locations(handle)
        ][:MAX_LOCATIONS]
    retired = backend.retired_pages_by_cause(handle)
    if retired is not None:
        health["retired_pages_single_bit"], health["retired_pages_double_bit"] = retired
    link = backend.pcie_link(handle)
    if link is not None:
        health["pcie_link_gen_current"] = link.gen_current
        health["pcie_link_gen_max"] = link.gen_max
        health["pcie_link_width_current"] = link.width_current
        health["pcie_link_width_max"] = link.width_max
    health["pcie_replay_count"] = backend.pcie_replay_count(handle)
    health["performance_state"] = backend.performance_state(handle)
    health["clock_event_reasons"] = clock_reason_names(backend.clock_event_reasons(handle))
    if has_nvlinks:
        errors = backend.nvlink_error_totals(handle)
        if errors is not None:
            (
                health["nvlink_crc_errors"],
                health["nvlink_replay_errors"],
                health["nvlink_recovery_errors"],
            ) = errors
    health["recovery_action"] = backend.recovery_action(handle)
    return health


def health_warnings(gpus: list[dict[str, Any]]) -> list[str]:
    """Plain-language lines for the health facts a person must act on."""
    out: list[str] = []
    for gpu in gpus:
        health = gpu.get("health") or {}
        label = f"GPU {gpu['index']} ({gpu['uuid']})"
        action = health.get("recovery_action")
        if action in RESET_ACTIONS:
            out.append(f"{label}: the driver asks for a GPU reset ({action}); drain it first")
        elif action in REBOOT_ACTIONS:
            out.append(f"{label}: the driver asks for a reboot of the node ({action})")
        elif action == "drain_p2p":
            out.append(f"{label}: the driver asks to drain peer-to-peer work (drain_p2p)")
        width, width_max = health.get("pcie_link_width_current"), health.get("pcie_link_width_max")
        if width and width_max and width < width_max:
            out.append(
                f"{label}: PCIe link runs x{width} of x{width_max}: reseat the GPU or check "
                "the slot and riser"
            )
    return out
