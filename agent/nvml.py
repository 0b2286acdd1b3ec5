"""The NVML boundary: the only module of the agent that imports `pynvml` (nvidia-ml-py).

The collector talks to a `NvmlBackend`, never to pynvml, so a fake backend can stand in for
a GPU server in tests and in the fleet simulator, injected by the caller. The fakes live in
the `simulator` package, outside the agent's wheel; the agent never imports them.

`PynvmlBackend` wraps the real bindings:

- NVML is initialised once per process, lazily, and shut down at interpreter exit;
- device handles are cached across collection cycles (re-fetching every handle each cycle
  is the known cause of NVML agents burning CPU) and refreshed only when the device count
  changes or a handle turns stale;
- `NotSupported`, `NoPermission` and `FunctionNotFound` (an older driver than the bindings)
  become None in one helper, `_optional`; every other NVML error is raised as `NvmlError`
  so the collector can mark that one GPU as failed and keep the rest of the report.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import threading
import uuid as uuidlib
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol

from .mig import mig_profile_name

LINK_CLASSES = ("PIX", "PXB", "PHB", "NODE", "SYS")


class NvmlError(Exception):
    """An NVML call failed for a reason other than 'not supported here'.

    `reason` is NVML's own wording ("GPU is lost", "Unknown Error"); the collector puts it in
    the report, so it must never carry secrets (NVML errors cannot).
    """

    def __init__(self, reason: str, *, call: str | None = None, kind: str | None = None) -> None:
        super().__init__(f"{reason} ({call})" if call else reason)
        self.reason = reason
        self.call = call
        self.kind = kind  # the pynvml class name, e.g. "NVMLError_GpuIsLost"


class NvmlUnavailableError(NvmlError):
    """NVML cannot be used at all: no library, no driver, no permission to the devices."""


@dataclass(frozen=True)
class NvLinkInfo:
    """One NVLink of a GPU. remote_type is "gpu", "switch" or None when NVML cannot tell."""

    link: int
    active: bool
    remote_pci_bus_id: str | None
    remote_type: str | None = None


@dataclass(frozen=True)
class MigDeviceInfo:
    """One MIG device (a compute instance inside a GPU instance) as NVML describes it."""

    uuid: str
    gpu_instance_id: int
    compute_instance_id: int
    profile: str | None
    memory_bytes: int | None
    sm_count: int | None
    placement_start: int | None
    placement_size: int | None


@dataclass(frozen=True)
class ComputeProcess:
    """One compute process on a GPU or MIG device, as NVML lists it.

    `pid` is in the host's pid namespace (NVML's view), so inside a container without
    `hostPID` its /proc entry may be missing. `used_memory_bytes` is None where NVML answers
    NVML_VALUE_NOT_AVAILABLE (no permission to the process, some MIG and vGPU setups).
    """

    pid: int
    used_memory_bytes: int | None


@dataclass(frozen=True)
class EccLocation:
    """ECC errors at one memory location (`dram`, `sram`, `l2_cache`, ...), one counter."""

    location: str
    counter: str  # "volatile" (since the last driver load) or "aggregate" (lifetime)
    corrected: int | None
    uncorrected: int | None


@dataclass(frozen=True)
class PcieLink:
    """The PCIe link now and at best (the best this GPU and this slot allow together)."""

    gen_current: int | None
    gen_max: int | None
    width_current: int | None
    width_max: int | None


@dataclass(frozen=True)
class GpuFabricInfo:
    """The GPU's place in a multi-node NVLink fabric (GB200 NVL72 and the like).

    GPUs with one `cluster_uuid` and `clique_id` reach each other over NVLink across
    servers. `state` is `not_started`, `in_progress` or `completed` (the fabric manager
    registered the GPU); `status` is NVML's word for how that went (`Success` once done).
    """

    cluster_uuid: str | None
    clique_id: int | None
    state: str | None
    status: str | None


FABRIC_STATES = {1: "not_started", 2: "in_progress", 3: "completed"}  # 0: not supported


# Clock-event ("throttle") reason bits NVML reports, and the ones a report carries: idle (to
# tell a power-saving link from a degraded one) and the reasons that cost performance.
CLOCK_EVENT_REASONS = (
    (0x1, "gpu_idle"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
)
# nvmlGpuRecoveryAction_t, as the report names it.
RECOVERY_ACTIONS = {
    0: "none",
    1: "gpu_reset",
    2: "node_reboot",
    3: "drain_p2p",
    4: "drain_and_reset",
    5: "recover_imex_domain",
    6: "bus_reset",
    7: "system_reboot",
}
_MEMORY_LOCATIONS = (
    ("l1_cache", "NVML_MEMORY_LOCATION_L1_CACHE"),
    ("l2_cache", "NVML_MEMORY_LOCATION_L2_CACHE"),
    ("dram", "NVML_MEMORY_LOCATION_DRAM"),
    ("register_file", "NVML_MEMORY_LOCATION_REGISTER_FILE"),
    ("texture_memory", "NVML_MEMORY_LOCATION_TEXTURE_MEMORY"),
    ("texture_shm", "NVML_MEMORY_LOCATION_TEXTURE_SHM"),
    ("cbu", "NVML_MEMORY_LOCATION_CBU"),
    ("sram", "NVML_MEMORY_LOCATION_SRAM"),
)
_ECC_VOLATILE_FIELDS = ("NVML_FI_DEV_ECC_SBE_VOL_TOTAL", "NVML_FI_DEV_ECC_DBE_VOL_TOTAL")
_NVLINK_ERROR_FIELDS = (
    "NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
    "NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
    "NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
    "NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
)


def clock_reason_names(mask: int | None) -> list[str] | None:
    """The active reasons of a clock-event bit mask, by the report's names."""
    if mask is None:
        return None
    return [name for bit, name in CLOCK_EVENT_REASONS if mask & bit]


class NvmlBackend(Protocol):
    """What the collector needs from NVML, one method per fact.

    Methods return None for a fact the device does not support or the caller may not read;
    they raise `NvmlError` for anything else (a lost GPU, an unknown error). `handle`
    objects are opaque to the collector.
    """

    source: str  # the report's agent.source: "nvml" or "simulator"

    def init(self) -> None:
        """Make NVML usable; idempotent. Raises NvmlUnavailableError with NVML's reason."""

    def driver_version(self) -> str | None: ...
    def cuda_driver_version(self) -> str | None: ...
    def nvml_version(self) -> str | None: ...
    def device_count(self) -> int: ...
    def handle(self, index: int) -> Any: ...
    def uuid(self, handle: Any) -> str | None: ...
    def serial(self, handle: Any) -> str | None: ...
    def name(self, handle: Any) -> str | None: ...
    def board_part_number(self, handle: Any) -> str | None: ...
    def architecture(self, handle: Any) -> str | None: ...
    def compute_capability(self, handle: Any) -> tuple[int, int] | None: ...
    def pci_bus_id(self, handle: Any) -> str | None: ...
    def memory_total_bytes(self, handle: Any) -> int | None: ...
    def power_limit_mw(self, handle: Any) -> int | None: ...
    def vbios_version(self, handle: Any) -> str | None: ...
    def numa_node(self, handle: Any) -> int | None: ...
    def cpu_affinity(self, handle: Any) -> list[int] | None: ...
    def persistence_mode(self, handle: Any) -> bool | None: ...
    def mig_mode(self, handle: Any) -> tuple[bool, bool] | None: ...
    def ecc_mode(self, handle: Any) -> bool | None: ...
    def ecc_errors(self, handle: Any, *, uncorrected: bool) -> int | None: ...
    def retired_pages(self, handle: Any) -> int | None: ...
    def retired_pages_pending(self, handle: Any) -> bool | None: ...
    def remapped_rows(self, handle: Any) -> tuple[int, int, bool, bool] | None: ...
    def nvlinks(self, handle: Any) -> list[NvLinkInfo]: ...
    def common_ancestor(self, handle_a: Any, handle_b: Any) -> str | None: ...
    def mig_devices(self, handle: Any) -> list[MigDeviceInfo]: ...
    # health counters (see health_counters() below)
    def ecc_volatile(self, handle: Any) -> tuple[int | None, int | None] | None: ...
    def ecc_locations(self, handle: Any) -> list[EccLocation]: ...
    def retired_pages_by_cause(self, handle: Any) -> tuple[int, int] | None: ...
    def pcie_link(self, handle: Any) -> PcieLink | None: ...
    def pcie_replay_count(self, handle: Any) -> int | None: ...
    def performance_state(self, handle: Any) -> int | None: ...
    def clock_event_reasons(self, handle: Any) -> int | None: ...
    def nvlink_error_totals(self, handle: Any) -> tuple[int, int, int] | None: ...
    def recovery_action(self, handle: Any) -> str | None: ...
    def gpu_fabric(self, handle: Any) -> GpuFabricInfo | None:
        """None where the GPU is in no multi-node NVLink fabric (NotSupported: H100 PCIe)."""

    # what runs now (volatile, but a fact the backend joins to workloads)
    def compute_processes(self, handle: Any) -> list[ComputeProcess]:
        """The GPU's compute processes (on a MIG-enabled GPU, those on no MIG device).

        Raises NvmlError for every failure, NotSupported and NoPermission included: the
        collector turns it into a warning and `processes: null`, never a failed GPU.
        """

    def mig_compute_processes(self, handle: Any) -> dict[str, list[ComputeProcess]]:
        """Compute processes per MIG device UUID of a MIG-enabled GPU; raises as above."""


# -- the real backend -----------------------------------------------------------------------

_UNSUPPORTED = ("NVMLError_NotSupported", "NVMLError_NoPermission", "NVMLError_FunctionNotFound")
_UNAVAILABLE_HINTS = {
    "NVMLError_LibraryNotFound": "is the NVIDIA driver installed?",
    "NVMLError_DriverNotLoaded": "is the nvidia kernel module loaded?",
    "NVMLError_NoPermission": "can this user open /dev/nvidia*?",
}
# Errors after which this NVML session is useless: start a new one next cycle.
_SESSION_LOST = {
    "NVMLError_Uninitialized",
    "NVMLError_DriverNotLoaded",
    "NVMLError_LibRmVersionMismatch",
    "NVMLError_LibraryNotFound",
}
_ARCHITECTURES = {
    "NVML_DEVICE_ARCH_KEPLER": "Kepler",
    "NVML_DEVICE_ARCH_MAXWELL": "Maxwell",
    "NVML_DEVICE_ARCH_PASCAL": "Pascal",
    "NVML_DEVICE_ARCH_VOLTA": "Volta",
    "NVML_DEVICE_ARCH_TURING": "Turing",
    "NVML_DEVICE_ARCH_AMPERE": "Ampere",
    "NVML_DEVICE_ARCH_ADA": "Ada Lovelace",
    "NVML_DEVICE_ARCH_HOPPER": "Hopper",
    "NVML_DEVICE_ARCH_BLACKWELL": "Blackwell",
    "NVML_DEVICE_ARCH_RUBIN": "Rubin",
}
_TOPOLOGY = {
    "NVML_TOPOLOGY_INTERNAL": "PIX",  # two functions of one board: closer than any bridge
    "NVML_TOPOLOGY_SINGLE": "PIX",
    "NVML_TOPOLOGY_MULTIPLE": "PXB",
    "NVML_TOPOLOGY_HOSTBRIDGE": "PHB",
    "NVML_TOPOLOGY_NODE": "NODE",
    "NVML_TOPOLOGY_SYSTEM": "SYS",
}
# newest first; the unversioned name only where the module has neither (a stand-in)
_PROCESS_CALLS = (
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetComputeRunningProcesses_v2",
    "nvmlDeviceGetComputeRunningProcesses",
)
_CPU_SET_WORDS = 64  # 64 x 64-bit words: up to 4,096 logical CPUs


def _text(value: Any) -> str | None:
    """NVML strings arrive as str or bytes depending on the call; empty means unknown."""
    if value is None:
        return None
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    value = str(value).strip().strip("\x00")
    return value or None


def format_cuda_version(value: int | None) -> str | None:
    """12020 -> "12.2" (NVML encodes CUDA versions as 1000 * major + 10 * minor)."""
    if not value:
        return None
    return f"{value // 1000}.{(value % 1000) // 10}"


def _profile_from_device_name(name: str | None) -> str | None:
    """'NVIDIA A100-SXM4-40GB MIG 3g.20gb' -> '3g.20gb' (a MIG device handle's name)."""
    if name and " MIG " in name:
        return name.rsplit(" MIG ", 1)[1].strip() or None
    return None


def _import_pynvml() -> Any:
    """NVIDIA's bindings, imported only when live NVML is asked for."""
    try:
        import pynvml
    except ImportError as exc:  # the agent installed without its dependency
        raise NvmlUnavailableError(f"nvidia-ml-py is not installed: {exc}") from exc
    return pynvml


class PynvmlBackend:
    """The live NVML backend. `module` is the pynvml module (tests may inject a stand-in)."""

    source = "nvml"

    def __init__(self, module: ModuleType | Any | None = None) -> None:
        self._nv_module = module
        self._nv: Any = None
        self._lock = threading.Lock()
        self._initialised = False
        self._handles: list[Any] | None = None
        self._link_counts: dict[int, int] = {}
        self._unsupported: tuple[type[BaseException], ...] = ()
        self._nvml_error: type[BaseException] = Exception

    # lifecycle

    def init(self) -> None:
        with self._lock:
            if self._initialised:
                return
            nv: Any = self._nv_module
            if nv is None:
                nv = _import_pynvml()
            self._nv = nv
            self._nvml_error = nv.NVMLError
            self._unsupported = tuple(getattr(nv, name) for name in _UNSUPPORTED)
            try:
                nv.nvmlInit()
            except nv.NVMLError as exc:
                hint = _UNAVAILABLE_HINTS.get(type(exc).__name__)
                reason = f"{exc} ({hint})" if hint else f"{exc} (nvmlInit)"
                raise NvmlUnavailableError(reason, kind=type(exc).__name__) from exc
            self._initialised = True
            atexit.register(self.shutdown)

    def shutdown(self) -> None:
        """Release NVML; safe to call twice, and at exit after a failed init."""
        with self._lock:
            if not self._initialised:
                return
            self._initialised = False
            self._handles = None
            self._link_counts.clear()
            with contextlib.suppress(self._nvml_error):
                self._nv.nvmlShutdown()

    # the error boundary

    def _call(self, name: str, *args: Any) -> Any:
        """Call pynvml.<name>; NVML errors other than 'unsupported' become NvmlError."""
        try:
            return getattr(self._nv, name)(*args)
        except self._unsupported:
            raise
        except self._nvml_error as exc:
            raise NvmlError(str(exc), call=name, kind=type(exc).__name__) from exc

    def _optional(self, name: str, *args: Any) -> Any:
        """Like _call, but NotSupported / NoPermission / FunctionNotFound answer None."""
        try:
            return self._call(name, *args)
        except self._unsupported:
            return None

    def _newer(self, name: str, *args: Any) -> Any:
        """Like _optional, for calls older bindings lack (a missing one answers None too)."""
        if not hasattr(self._nv, name):
            return None
        return self._optional(name, *args)

    def _field_values(self, handle: Any, names: Sequence[str]) -> list[int | None] | None:
        """nvmlDeviceGetFieldValues for the named NVML_FI_* fields; None per field it lacks."""
        ids = [getattr(self._nv, name, None) for name in names]
        if any(i is None for i in ids):
            return None
        values = self._newer("nvmlDeviceGetFieldValues", handle, ids)
        if values is None:
            return None
        return [_field_value(value) for value in values]

    # system

    def driver_version(self) -> str | None:
        return _text(self._optional("nvmlSystemGetDriverVersion"))

    def cuda_driver_version(self) -> str | None:
        return format_cuda_version(self._optional("nvmlSystemGetCudaDriverVersion"))

    def nvml_version(self) -> str | None:
        return _text(self._optional("nvmlSystemGetNVMLVersion"))

    # devices

    def device_count(self) -> int:
        """The number of GPUs. When the driver went away or changed under a long-running
        agent (a driver upgrade answers "RM has detected an NVML/RM version mismatch"), NVML
        is shut down so the next cycle initialises it afresh, and this cycle reports why."""
        try:
            count = int(self._call("nvmlDeviceGetCount"))
        except NvmlError as exc:
            if exc.kind in _SESSION_LOST:
                self.shutdown()
                raise NvmlUnavailableError(exc.reason, call=exc.call, kind=exc.kind) from exc
            raise
        if self._handles is not None and len(self._handles) != count:
            self._handles = None  # a GPU came or went: index -> handle no longer holds
            self._link_counts.clear()
        return count

    def handle(self, index: int) -> Any:
        """The cached handle of GPU `index`; handles live as long as this NVML session."""
        if self._handles is None:
            count = self.device_count()
            self._handles = [None] * count
        if index >= len(self._handles):
            raise NvmlError("no such GPU index", call="nvmlDeviceGetHandleByIndex")
        if self._handles[index] is None:
            self._handles[index] = self._call("nvmlDeviceGetHandleByIndex", index)
        return self._handles[index]

    def forget_handle(self, index: int) -> None:
        """Drop a handle that failed, so the next cycle fetches it afresh."""
        if self._handles is not None and index < len(self._handles):
            stale = self._handles[index]
            if stale is not None:
                self._link_counts.pop(id(stale), None)
            self._handles[index] = None

    def uuid(self, handle: Any) -> str | None:
        return _text(self._call("nvmlDeviceGetUUID", handle))

    def serial(self, handle: Any) -> str | None:
        return _text(self._optional("nvmlDeviceGetSerial", handle))

    def name(self, handle: Any) -> str | None:
        return _text(self._optional("nvmlDeviceGetName", handle))

    def board_part_number(self, handle: Any) -> str | None:
        return _text(self._optional("nvmlDeviceGetBoardPartNumber", handle))

    def architecture(self, handle: Any) -> str | None:
        value = self._optional("nvmlDeviceGetArchitecture", handle)
        if value is None:
            return None
        for constant, label in _ARCHITECTURES.items():
            if getattr(self._nv, constant, None) == value:
                return label
        return None

    def compute_capability(self, handle: Any) -> tuple[int, int] | None:
        value = self._optional("nvmlDeviceGetCudaComputeCapability", handle)
        return (int(value[0]), int(value[1])) if value else None

    def pci_bus_id(self, handle: Any) -> str | None:
        info = self._call("nvmlDeviceGetPciInfo", handle)
        return _text(getattr(info, "busId", None)) or _text(getattr(info, "busIdLegacy", None))

    def memory_total_bytes(self, handle: Any) -> int | None:
        info = self._optional("nvmlDeviceGetMemoryInfo", handle)
        return int(info.total) if info is not None else None

    def power_limit_mw(self, handle: Any) -> int | None:
        value = self._optional("nvmlDeviceGetPowerManagementLimit", handle)
        return int(value) if value is not None else None

    def vbios_version(self, handle: Any) -> str | None:
        return _text(self._optional("nvmlDeviceGetVbiosVersion", handle))

    def numa_node(self, handle: Any) -> int | None:
        value = self._optional("nvmlDeviceGetNumaNodeId", handle)
        return int(value) if value is not None else None

    def cpu_affinity(self, handle: Any) -> list[int] | None:
        words = self._optional("nvmlDeviceGetCpuAffinity", handle, _CPU_SET_WORDS)
        if words is None:
            return None
        width = ctypes.sizeof(ctypes.c_ulonglong) * 8
        return [
            word_index * width + bit
            for word_index, word in enumerate(words)
            for bit in range(width)
            if int(word) >> bit & 1
        ]

    def persistence_mode(self, handle: Any) -> bool | None:
        value = self._optional("nvmlDeviceGetPersistenceMode", handle)
        return bool(value) if value is not None else None

    def mig_mode(self, handle: Any) -> tuple[bool, bool] | None:
        value = self._optional("nvmlDeviceGetMigMode", handle)
        return (bool(value[0]), bool(value[1])) if value is not None else None

    def ecc_mode(self, handle: Any) -> bool | None:
        value = self._optional("nvmlDeviceGetEccMode", handle)
        return bool(value[0]) if value is not None else None

    def ecc_errors(self, handle: Any, *, uncorrected: bool) -> int | None:
        nv = self._nv
        kind = (
            nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
            if uncorrected
            else (nv.NVML_MEMORY_ERROR_TYPE_CORRECTED)
        )
        value = self._optional("nvmlDeviceGetTotalEccErrors", handle, kind, nv.NVML_AGGREGATE_ECC)
        return int(value) if value is not None else None

    def retired_pages(self, handle: Any) -> int | None:
        nv = self._nv
        total = 0
        for cause in (
            nv.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS,
            nv.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR,
        ):
            pages = self._optional("nvmlDeviceGetRetiredPages", handle, cause)
            if pages is None:
                return None  # Ampere and later remap rows instead of retiring pages
            total += len(pages)
        return total

    def retired_pages_pending(self, handle: Any) -> bool | None:
        value = self._optional("nvmlDeviceGetRetiredPagesPendingStatus", handle)
        return bool(value) if value is not None else None

    def remapped_rows(self, handle: Any) -> tuple[int, int, bool, bool] | None:
        value = self._optional("nvmlDeviceGetRemappedRows", handle)
        if value is None:
            return None
        corrected, uncorrected, pending, failure = value
        return int(corrected), int(uncorrected), bool(pending), bool(failure)

    def nvlinks(self, handle: Any) -> list[NvLinkInfo]:
        """Every NVLink the GPU has, active or not; [] for a GPU without NVLink.

        The number of links is learned once per handle (probing past the last link answers
        an error), so later cycles make exactly one state call per real link.
        """
        key = id(handle)
        known = self._link_counts.get(key)
        limit = known if known is not None else int(getattr(self._nv, "NVML_NVLINK_MAX_LINKS", 18))
        links: list[NvLinkInfo] = []
        for link in range(limit):
            try:
                active = self._call("nvmlDeviceGetNvLinkState", handle, link)
            except self._unsupported:
                break
            except NvmlError as exc:
                if known is None and exc.kind == "NVMLError_InvalidArgument":
                    break  # past the last link of this GPU
                raise
            remote = None
            remote_type = None
            if active:
                info = self._optional("nvmlDeviceGetNvLinkRemotePciInfo", handle, link)
                if info is not None:
                    remote = _text(getattr(info, "busId", None))
                remote_type = self._remote_type(handle, link)
            links.append(NvLinkInfo(link, bool(active), remote, remote_type))
        if known is None:
            self._link_counts[key] = len(links)
        return links

    def _remote_type(self, handle: Any, link: int) -> str | None:
        if not hasattr(self._nv, "nvmlDeviceGetNvLinkRemoteDeviceType"):
            return None
        try:
            value = self._optional("nvmlDeviceGetNvLinkRemoteDeviceType", handle, link)
        except NvmlError:
            return None
        nv = self._nv
        if value == getattr(nv, "NVML_NVLINK_DEVICE_TYPE_GPU", 0):
            return "gpu"
        if value == getattr(nv, "NVML_NVLINK_DEVICE_TYPE_SWITCH", 2):
            return "switch"
        return None

    # health counters

    def ecc_volatile(self, handle: Any) -> tuple[int | None, int | None] | None:
        """(corrected, uncorrected) ECC errors since the driver loaded: one field-value call."""
        values = self._field_values(handle, _ECC_VOLATILE_FIELDS)
        if not values or values == [None, None]:
            return None
        return values[0], values[1]

    def ecc_locations(self, handle: Any) -> list[EccLocation]:
        """Per location and counter; 32 calls, so the collector asks only for a GPU that has
        errors at all."""
        nv = self._nv
        out: list[EccLocation] = []
        for counter, counter_id in (
            ("volatile", nv.NVML_VOLATILE_ECC),
            ("aggregate", nv.NVML_AGGREGATE_ECC),
        ):
            for location, constant in _MEMORY_LOCATIONS:
                where = getattr(nv, constant, None)
                if where is None:
                    continue
                corrected, uncorrected = (
                    _int(
                        self._newer(
                            "nvmlDeviceGetMemoryErrorCounter", handle, kind, counter_id, where
                        )
                    )
                    for kind in (
                        nv.NVML_MEMORY_ERROR_TYPE_CORRECTED,
                        nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                    )
                )
                if corrected is not None or uncorrected is not None:
                    out.append(EccLocation(location, counter, corrected, uncorrected))
        return out

    def retired_pages_by_cause(self, handle: Any) -> tuple[int, int] | None:
        nv = self._nv
        counts = []
        for cause in (
            nv.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS,
            nv.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR,
        ):
            pages = self._optional("nvmlDeviceGetRetiredPages", handle, cause)
            if pages is None:
                return None
            counts.append(len(pages))
        return counts[0], counts[1]

    def pcie_link(self, handle: Any) -> PcieLink | None:
        link = PcieLink(
            gen_current=_int(self._newer("nvmlDeviceGetCurrPcieLinkGeneration", handle)),
            gen_max=_int(self._newer("nvmlDeviceGetMaxPcieLinkGeneration", handle)),
            width_current=_int(self._newer("nvmlDeviceGetCurrPcieLinkWidth", handle)),
            width_max=_int(self._newer("nvmlDeviceGetMaxPcieLinkWidth", handle)),
        )
        return None if link == PcieLink(None, None, None, None) else link

    def pcie_replay_count(self, handle: Any) -> int | None:
        return _int(self._newer("nvmlDeviceGetPcieReplayCounter", handle))

    def performance_state(self, handle: Any) -> int | None:
        """0 (P0, full performance) to 15; None where NVML answers 32 (unknown)."""
        value = _int(self._newer("nvmlDeviceGetPerformanceState", handle))
        return value if value is not None and 0 <= value <= 15 else None

    def clock_event_reasons(self, handle: Any) -> int | None:
        value = self._newer("nvmlDeviceGetCurrentClocksEventReasons", handle)
        if value is None:  # drivers before 535 name it "throttle reasons"
            value = self._newer("nvmlDeviceGetCurrentClocksThrottleReasons", handle)
        return _int(value)

    def nvlink_error_totals(self, handle: Any) -> tuple[int, int, int] | None:
        """(CRC, replay, recovery) errors summed over the GPU's NVLinks since the driver
        loaded; CRC counts flit and data CRC errors together."""
        values = self._field_values(handle, _NVLINK_ERROR_FIELDS)
        if values is None or all(v is None for v in values):
            return None
        flit, data, replay, recovery = (v or 0 for v in values)
        return flit + data, replay, recovery

    def recovery_action(self, handle: Any) -> str | None:
        """The driver's recommended recovery (R560+): none, gpu_reset, node_reboot, ..."""
        values = self._field_values(handle, ("NVML_FI_DEV_GET_GPU_RECOVERY_ACTION",))
        if not values or values[0] is None:
            return None
        return RECOVERY_ACTIONS.get(values[0])

    def gpu_fabric(self, handle: Any) -> GpuFabricInfo | None:
        """nvmlDeviceGetGpuFabricInfoV (R550+), else the older nvmlDeviceGetGpuFabricInfo;
        None when neither answers or the GPU's fabric state is 'not supported'."""
        nv = self._nv
        info = None
        for call, struct in (
            ("nvmlDeviceGetGpuFabricInfoV", "c_nvmlGpuFabricInfoV_t"),
            ("nvmlDeviceGetGpuFabricInfo", "c_nvmlGpuFabricInfo_t"),
        ):
            if not hasattr(nv, struct):
                continue
            candidate = getattr(nv, struct)()
            if self._newer(call, handle, ctypes.byref(candidate)) is not None:
                info = candidate
                break
        if info is None:
            return None
        state = FABRIC_STATES.get(_int(getattr(info, "state", None)) or 0)
        if state is None:
            return None
        raw = bytes(getattr(info, "clusterUuid", b"") or b"")
        status = _int(getattr(info, "status", None))
        return GpuFabricInfo(
            cluster_uuid=str(uuidlib.UUID(bytes=raw)) if len(raw) == 16 and any(raw) else None,
            clique_id=_int(getattr(info, "cliqueId", None)),
            state=state,
            status=None if status is None else self._return_text(status),
        )

    def _return_text(self, code: int) -> str:
        """An nvmlReturn_t as NVML words it (0: 'Success')."""
        try:
            return _text(self._nv.nvmlErrorString(code)) or str(code)
        except Exception:  # a wording is not worth failing a GPU for
            return str(code)

    def common_ancestor(self, handle_a: Any, handle_b: Any) -> str | None:
        value = self._optional("nvmlDeviceGetTopologyCommonAncestor", handle_a, handle_b)
        if value is None:
            return None
        for constant, label in _TOPOLOGY.items():
            if getattr(self._nv, constant, None) == value:
                return label
        return None

    def mig_devices(self, handle: Any) -> list[MigDeviceInfo]:
        """The MIG devices of a MIG-enabled GPU, with profile names and placements.

        MIG device handles give UUIDs, instance ids, SM counts and memory; the GPU and compute
        instance profile tables give the names (`3g.40gb`, `1c.3g.40gb`) and placements.
        Reading instances may need privileges the agent lacks: then the profile comes from
        the MIG device's name and the placement stays unknown.
        """
        count = self._optional("nvmlDeviceGetMaxMigDeviceCount", handle) or 0
        gi_profiles = self._gpu_instance_profiles(handle)
        devices: list[MigDeviceInfo] = []
        for index in range(int(count)):
            try:
                mig = self._call("nvmlDeviceGetMigDeviceHandleByIndex", handle, index)
            except self._unsupported:
                continue
            except NvmlError as exc:
                if exc.kind in ("NVMLError_NotFound", "NVMLError_InvalidArgument"):
                    continue  # an empty slot: fewer MIG devices than the maximum
                raise
            devices.append(self._mig_device(handle, mig, gi_profiles))
        devices.sort(key=lambda d: (d.gpu_instance_id, d.compute_instance_id))
        return devices

    def _processes(self, handle: Any) -> list[ComputeProcess]:
        """The compute processes of a GPU or MIG handle, every failure as NvmlError.

        The versioned calls first: the bindings' unversioned one raises a non-NVML
        "library mismatch" when the driver predates them, and drivers before R510 have only
        `_v2`. NotSupported and NoPermission are errors here too (see the protocol).
        """
        last: BaseException | None = None
        names = [name for name in _PROCESS_CALLS[:-1] if hasattr(self._nv, name)]
        for name in names or _PROCESS_CALLS[-1:]:
            try:
                raw = self._call(name, handle)
            except self._unsupported as exc:
                last = exc
                if type(exc).__name__ == "NVMLError_FunctionNotFound":
                    continue  # an older driver: try the previous version
                raise NvmlError(str(exc), call=name, kind=type(exc).__name__) from exc
            found = {p.pid: p for p in map(compute_process, raw or [])}
            return sorted(found.values(), key=_by_pid)
        reason = str(last) if last is not None else "Function Not Found"
        raise NvmlError(reason, call=_PROCESS_CALLS[-1], kind="NVMLError_FunctionNotFound")

    def compute_processes(self, handle: Any) -> list[ComputeProcess]:
        processes = self._processes(handle)
        mode = self._optional("nvmlDeviceGetMigMode", handle)
        if mode is None or not mode[0]:
            return processes
        # Asked on the parent, NVML lists the MIG devices' processes too: keep those on none.
        on_mig = {p.pid for found in self.mig_compute_processes(handle).values() for p in found}
        return [p for p in processes if p.pid not in on_mig]

    def mig_compute_processes(self, handle: Any) -> dict[str, list[ComputeProcess]]:
        out: dict[str, list[ComputeProcess]] = {}
        count = self._optional("nvmlDeviceGetMaxMigDeviceCount", handle) or 0
        for index in range(int(count)):
            try:
                mig = self._call("nvmlDeviceGetMigDeviceHandleByIndex", handle, index)
            except self._unsupported:
                continue
            except NvmlError as exc:
                if exc.kind in ("NVMLError_NotFound", "NVMLError_InvalidArgument"):
                    continue  # an empty slot
                raise
            uuid = _text(self._call("nvmlDeviceGetUUID", mig))
            if uuid:
                out[uuid] = self._processes(mig)
        return out

    def _gpu_instance_profiles(self, handle: Any) -> dict[int, Any]:
        """GPU instance profile id -> profile info (name, slices, memory), for this GPU."""
        profiles: dict[int, Any] = {}
        not_offered: tuple[type[BaseException], ...] = (*self._unsupported, NvmlError)
        for profile in range(int(getattr(self._nv, "NVML_GPU_INSTANCE_PROFILE_COUNT", 0))):
            try:
                info = self._call("nvmlDeviceGetGpuInstanceProfileInfo", handle, profile)
            except not_offered:
                continue  # a profile this GPU does not offer answers an error
            profiles[int(info.id)] = info
        return profiles

    def _mig_device(self, parent: Any, mig: Any, gi_profiles: dict[int, Any]) -> MigDeviceInfo:
        uuid = _text(self._call("nvmlDeviceGetUUID", mig)) or ""
        gi_id = int(self._call("nvmlDeviceGetGpuInstanceId", mig))
        ci_id = int(self._call("nvmlDeviceGetComputeInstanceId", mig))
        attrs = self._optional("nvmlDeviceGetAttributes", mig)
        memory = self._optional("nvmlDeviceGetMemoryInfo", mig)
        memory_bytes = int(memory.total) if memory is not None else None
        if memory_bytes is None and attrs is not None:
            memory_bytes = int(attrs.memorySizeMB) * 1024 * 1024
        sm_count = int(attrs.multiprocessorCount) if attrs is not None else None

        profile: str | None = None
        placement: tuple[int | None, int | None] = (None, None)
        gi = self._optional("nvmlDeviceGetGpuInstanceById", parent, gi_id)
        if gi is not None:
            gi_info = self._optional("nvmlGpuInstanceGetInfo", gi)
            if gi_info is not None:
                placement = (int(gi_info.placement.start), int(gi_info.placement.size))
                gi_profile = gi_profiles.get(int(gi_info.profileId))
                if gi_profile is not None:
                    profile = mig_profile_name(_text(getattr(gi_profile, "name", None)))
                    ci_slices = int(attrs.computeInstanceSliceCount) if attrs else None
                    gi_slices = int(gi_profile.sliceCount)
                    if profile and ci_slices and ci_slices < gi_slices:
                        profile = f"{ci_slices}c.{profile}"
        if profile is None:
            profile = _profile_from_device_name(_text(self._optional("nvmlDeviceGetName", mig)))
        return MigDeviceInfo(
            uuid=uuid,
            gpu_instance_id=gi_id,
            compute_instance_id=ci_id,
            profile=profile,
            memory_bytes=memory_bytes,
            sm_count=sm_count,
            placement_start=placement[0],
            placement_size=placement[1],
        )


def _int(value: Any) -> int | None:
    return int(value) if value is not None else None


# NVML_VALUE_NOT_AVAILABLE as an unsigned long long: newer bindings turn it into None
# themselves, older ones pass it through.
_VALUE_NOT_AVAILABLE = 0xFFFFFFFFFFFFFFFF


def compute_process(raw: Any) -> ComputeProcess:
    """One nvmlProcessInfo_t (any version) as a ComputeProcess."""
    memory = getattr(raw, "usedGpuMemory", None)
    used = None if memory is None or int(memory) == _VALUE_NOT_AVAILABLE else int(memory)
    return ComputeProcess(pid=int(raw.pid), used_memory_bytes=used)


# nvmlValueType_t -> the member of the nvmlValue_t union holding the value
_VALUE_MEMBERS = {
    0: "dVal",
    1: "uiVal",
    2: "ulVal",
    3: "ullVal",
    4: "sllVal",
    5: "siVal",
    6: "usVal",
}


def _by_pid(process: ComputeProcess) -> int:
    return process.pid


def _field_value(value: Any) -> int | None:
    """One nvmlFieldValue_t: its integer, or None when NVML answered an error for it."""
    if getattr(value, "nvmlReturn", 1) != 0:
        return None
    member = _VALUE_MEMBERS.get(int(getattr(value, "valueType", 3)), "ullVal")
    raw = getattr(value.value, member, None)
    return int(raw) if raw is not None else None


def cpu_list(cpus: Sequence[int] | None) -> str | None:
    """[0, 1, 2, 3, 8, 9] -> "0-3,8-9": the kernel's cpulist format, as `topo -m` prints it."""
    if not cpus:
        return None
    ordered = sorted(set(cpus))
    ranges: list[str] = []
    start = prev = ordered[0]
    for cpu in ordered[1:]:
        if cpu == prev + 1:
            prev = cpu
            continue
        ranges.append(f"{start}-{prev}" if prev != start else str(start))
        start = prev = cpu
    ranges.append(f"{start}-{prev}" if prev != start else str(start))
    return ",".join(ranges)


def parse_cpu_list(text: str | None) -> list[int] | None:
    """ "0-3,8-9" -> [0, 1, 2, 3, 8, 9]; None for N/A or garbage."""
    if not text:
        return None
    cpus: list[int] = []
    try:
        for part in text.strip().split(","):
            if not part:
                continue
            if "-" in part:
                low, high = part.split("-", 1)
                cpus.extend(range(int(low), int(high) + 1))
            else:
                cpus.append(int(part))
    except ValueError:
        return None
    return cpus or None
