"""One collection cycle: NVML (through a backend) + host facts -> one report dict (schema v1).

The walk keys GPUs by UUID (indices change between boots; the report's `index` is only this
boot's order), adds MIG devices only where MIG is on, then every GPU pair's interconnect and
each GPU's NIC affinity. A GPU that fails mid-walk keeps what it answered, gets status
"error" and the reason, and the walk goes on: one bad GPU or field never loses the report.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from . import __version__
from .counters import empty_health, health_warnings, read_health
from .host import SysHost
from .nvml import GpuFabricInfo, NvmlBackend, NvmlError, NvmlUnavailableError, cpu_list
from .pcitopo import classify_pci_paths
from .processes import attach_processes
from .schema import MAX_WARNINGS, SCHEMA_VERSION, normalize_pci_bus_id, synthetic_uuid

MAX_NICS = 256  # the schema's bounds
MAX_LINKS = 8192


def utc_now() -> str:
    # timezone.utc, not datetime.UTC: the agent runs on Python 3.10 (Ubuntu 22.04, DGX OS 6)
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: UP017


def server_key(host: dict[str, Any]) -> str:
    """The server's identity as the backend sees it: system UUID, machine-id, hostname."""
    return str(host.get("system_uuid") or host.get("machine_id") or host.get("hostname") or "")


def empty_gpu(index: int) -> dict[str, Any]:
    """Every GPU field of the schema, unknown; sources fill in what they know."""
    return {
        "index": index,
        "uuid": "",
        "status": "ok",
        "error": None,
        "serial": None,
        "name": None,
        "board_part_number": None,
        "architecture": None,
        "compute_capability": None,
        "pci_bus_id": None,
        "memory_total_bytes": None,
        "power_limit_w": None,
        "vbios_version": None,
        "numa_node": None,
        "cpu_affinity": None,
        "persistence_mode": None,
        "mig_mode_current": None,
        "mig_mode_pending": None,
        "ecc_mode_current": None,
        "ecc_errors_corrected": None,
        "ecc_errors_uncorrected": None,
        "retired_pages": None,
        "retired_pages_pending": None,
        "remapped_rows_correctable": None,
        "remapped_rows_uncorrectable": None,
        "remapped_rows_pending": None,
        "remapped_rows_failure": None,
        "health": empty_health(),
    }


# -- the NVML walk --------------------------------------------------------------------------


def _gpu_fields(backend: NvmlBackend, h: Any) -> list[tuple[str, Callable[[], Any]]]:
    """(report field, reader) in walk order; each reader answers None when unsupported."""

    def power() -> float | None:
        milliwatts = backend.power_limit_mw(h)
        return round(milliwatts / 1000, 2) if milliwatts is not None else None

    def capability() -> str | None:
        value = backend.compute_capability(h)
        return f"{value[0]}.{value[1]}" if value else None

    return [
        ("pci_bus_id", lambda: normalize_pci_bus_id(backend.pci_bus_id(h))),
        ("serial", lambda: backend.serial(h)),
        ("name", lambda: backend.name(h)),
        ("board_part_number", lambda: backend.board_part_number(h)),
        ("architecture", lambda: backend.architecture(h)),
        ("compute_capability", capability),
        ("memory_total_bytes", lambda: backend.memory_total_bytes(h)),
        ("power_limit_w", power),
        ("vbios_version", lambda: backend.vbios_version(h)),
        ("numa_node", lambda: backend.numa_node(h)),
        ("cpu_affinity", lambda: cpu_list(backend.cpu_affinity(h))),
        ("persistence_mode", lambda: backend.persistence_mode(h)),
        ("ecc_mode_current", lambda: backend.ecc_mode(h)),
        ("ecc_errors_corrected", lambda: backend.ecc_errors(h, uncorrected=False)),
        ("ecc_errors_uncorrected", lambda: backend.ecc_errors(h, uncorrected=True)),
        ("retired_pages", lambda: backend.retired_pages(h)),
        ("retired_pages_pending", lambda: backend.retired_pages_pending(h)),
    ]


def _walk_gpu(
    backend: NvmlBackend, index: int, identity: str
) -> tuple[dict[str, Any], Any, list[Any]]:
    """One GPU's entry, its handle (None if unusable) and its NVLinks."""
    gpu = empty_gpu(index)
    step = "handle"
    handle = None
    links: list[Any] = []
    try:
        handle = backend.handle(index)
        step = "uuid"
        gpu["uuid"] = backend.uuid(handle) or ""
        for field, read in _gpu_fields(backend, handle):
            step = field
            gpu[field] = read()
        step = "remapped_rows"
        rows = backend.remapped_rows(handle)
        if rows is not None:
            (
                gpu["remapped_rows_correctable"],
                gpu["remapped_rows_uncorrectable"],
                gpu["remapped_rows_pending"],
                gpu["remapped_rows_failure"],
            ) = rows
        step = "mig_mode"
        mig = backend.mig_mode(handle)
        if mig is not None:
            gpu["mig_mode_current"], gpu["mig_mode_pending"] = mig
        step = "nvlinks"
        links = backend.nvlinks(handle)
        gpu["nvlinks"] = [
            {
                "link": link.link,
                "active": link.active,
                "remote_pci_bus_id": normalize_pci_bus_id(link.remote_pci_bus_id),
            }
            for link in links
        ]
        step = "fabric"
        gpu.update(fabric_fields(backend.gpu_fabric(handle)))
        step = "health"
        gpu["health"] = read_health(backend, handle, gpu, has_nvlinks=bool(links))
        if gpu["mig_mode_current"]:
            step = "mig_devices"
            gpu["mig_devices"] = [
                {
                    "uuid": mig_device.uuid,
                    "gpu_instance_id": mig_device.gpu_instance_id,
                    "compute_instance_id": mig_device.compute_instance_id,
                    "profile": mig_device.profile,
                    "memory_bytes": mig_device.memory_bytes,
                    "sm_count": mig_device.sm_count,
                    "placement_start": mig_device.placement_start,
                    "placement_size": mig_device.placement_size,
                }
                for mig_device in backend.mig_devices(handle)
            ]
    except NvmlError as exc:
        gpu["status"] = "error"
        gpu["error"] = f"{exc.reason} (while reading {step})"[:500]
        forget = getattr(backend, "forget_handle", None)
        if forget is not None:
            forget(index)  # a stale handle is fetched afresh next cycle
        if step in ("handle", "uuid"):
            handle = None
    if not gpu["uuid"]:
        gpu["uuid"] = synthetic_uuid("GPU", identity, gpu["pci_bus_id"] or f"index-{index}")
        gpu["uuid_synthetic"] = True
    return gpu, handle, links


def fabric_fields(info: GpuFabricInfo | None) -> dict[str, Any]:
    """The report's NVLink fabric fields of one GPU; all null outside such a fabric."""
    return {
        "fabric_cluster_uuid": info.cluster_uuid if info else None,
        "fabric_clique_id": info.clique_id if info else None,
        "fabric_state": info.state if info else None,
        "fabric_status": info.status[:64] if info and info.status else None,
    }


def nvlink_classes(
    gpus: list[dict[str, Any]], links_by_index: dict[int, list[Any]]
) -> tuple[dict[tuple[int, int], int], int]:
    """NVLink widths per GPU pair and the number of NVSwitches the GPUs reach.

    Direct links count per peer; links into NVSwitches count for every pair of GPUs that
    both reach the switch fabric: a pair gets min(a's switch links, b's switch links), which
    is how `nvidia-smi topo -m` shows NV18 between every pair of an HGX H100 board.
    """
    by_bus = {g["pci_bus_id"]: g["index"] for g in gpus if g.get("pci_bus_id")}
    direct: Counter[tuple[int, int]] = Counter()
    to_switch: Counter[int] = Counter()
    switches: set[str] = set()
    for index, links in links_by_index.items():
        for link in links:
            if not link.active:
                continue
            remote = normalize_pci_bus_id(link.remote_pci_bus_id)
            kind = link.remote_type or ("gpu" if remote in by_bus else "switch" if remote else None)
            if kind == "gpu" and remote in by_bus:
                direct[(index, by_bus[remote])] += 1
            elif kind == "switch":
                to_switch[index] += 1
                if remote:
                    switches.add(remote)
    widths: dict[tuple[int, int], int] = {}
    indexes = sorted(links_by_index)
    for pos, a in enumerate(indexes):
        for b in indexes[pos + 1 :]:
            width = max(direct[(a, b)], direct[(b, a)])
            if to_switch[a] and to_switch[b]:
                width += min(to_switch[a], to_switch[b])
            if width:
                widths[(a, b)] = width
    return widths, len(switches)


def device_links(
    host: SysHost | None,
    gpus: list[dict[str, Any]],
    nics: list[dict[str, Any]],
    gpu_pair_class: Callable[[int, int], str | None],
) -> list[dict[str, str]]:
    """GPU-GPU, GPU-NIC and NIC-NIC links. GPU pairs ask `gpu_pair_class` first (NVML), then
    fall back to the PCI paths in sysfs, as NIC pairs always do."""
    links: list[dict[str, str]] = []
    paths: dict[str, list[str]] = {}
    numa: dict[str, int | None] = {}
    if host is not None:
        for gpu in gpus:
            key = f"gpu:{gpu['index']}"
            paths[key] = host.pci_path(gpu.get("pci_bus_id"))
            numa[key] = host.pci_numa_node(gpu.get("pci_bus_id"))
        for nic in nics:
            key = f"nic:{nic['name']}"
            paths[key] = host.pci_path(nic.get("pci_bus_id"))
            numa[key] = nic.get("numa_node")

    def by_path(a: str, b: str) -> str | None:
        if not paths.get(a) or not paths.get(b):
            return None
        return classify_pci_paths(paths[a], paths[b], numa.get(a), numa.get(b))

    ordered = sorted(gpus, key=lambda g: g["index"])
    for pos, gpu_a in enumerate(ordered):
        for gpu_b in ordered[pos + 1 :]:
            a, b = f"gpu:{gpu_a['index']}", f"gpu:{gpu_b['index']}"
            found = gpu_pair_class(gpu_a["index"], gpu_b["index"]) or by_path(a, b)
            if found:
                links.append({"a": a, "b": b, "link_class": found})
    for gpu in ordered:
        for nic in nics:
            a, b = f"gpu:{gpu['index']}", f"nic:{nic['name']}"
            found = by_path(a, b)
            if found:
                links.append({"a": a, "b": b, "link_class": found})
    for pos, nic_a in enumerate(nics):
        for nic_b in nics[pos + 1 :]:
            a, b = f"nic:{nic_a['name']}", f"nic:{nic_b['name']}"
            found = by_path(a, b)
            if found:
                links.append({"a": a, "b": b, "link_class": found})
    return links


def gpu_warnings(gpus: Iterable[dict[str, Any]]) -> list[str]:
    """Plain-language health facts that matter for inventory, one line each."""
    out: list[str] = []
    for gpu in gpus:
        label = f"GPU {gpu['index']} ({gpu['uuid']})"
        if gpu.get("status") == "error":
            out.append(f"{label}: {gpu.get('error') or 'failed during collection'}")
        if gpu.get("persistence_mode") is False:
            out.append(
                f"{label}: persistence mode is off, so every NVML client re-initialises the GPU "
                "(slow queries, lost settings); enable nvidia-persistenced"
            )
        links = gpu.get("nvlinks") or []
        inactive = [link["link"] for link in links if not link["active"]]
        if inactive:
            out.append(
                f"{label}: NVLink {', '.join(map(str, inactive))} inactive "
                f"({len(links) - len(inactive)} of {len(links)} active)"
            )
        if gpu.get("retired_pages_pending"):
            out.append(f"{label}: retired pages pending; reset the GPU or reboot to retire them")
        if gpu.get("remapped_rows_pending"):
            out.append(f"{label}: row remapping pending; reset the GPU to apply it")
        if gpu.get("remapped_rows_failure"):
            out.append(f"{label}: row remapping failed; the GPU needs service")
        current, pending = gpu.get("mig_mode_current"), gpu.get("mig_mode_pending")
        if current is not None and pending is not None and current != pending:
            state = "on" if pending else "off"
            out.append(f"{label}: MIG mode turns {state} at the next GPU reset or reboot")
    return out


def nic_warnings(nics: Iterable[dict[str, Any]]) -> list[str]:
    """InfiniBand ports that cannot carry traffic, or carry a fraction of it, one line each."""
    out: list[str] = []
    for nic in nics:
        if nic.get("link_layer") != "infiniband":
            continue
        label = f"{nic['name']} ({nic['netdev']})" if nic.get("netdev") else nic["name"]
        port = f"InfiniBand port {nic.get('port_number') or 1}"
        phys, state = nic.get("phys_state"), nic.get("state")
        if phys == "polling":
            out.append(f"{label}: {port} is polling: no cable, or nothing up at the far end")
        elif phys == "linkup" and state == "init":
            out.append(
                f"{label}: {port} is up but not active: no subnet manager has configured it "
                "(is opensm or UFM running?)"
            )
        if phys == "linkup" and " (1X " in f" {nic.get('rate') or ''}":
            out.append(f"{label}: {port} trained at 1X width ({nic['rate']}): a bad cable or port")
    return out


def pci_gpu_entries(
    functions: Iterable[Any], nvml_buses: set[str] | None
) -> tuple[list[dict[str, Any]], list[str]]:
    """The report's pci_gpus and the warnings for NVIDIA functions NVML does not show.

    A function bound to vfio-pci is passed through to a VM and expected to be missing from
    the host's NVML; one bound to nvidia (or to nothing) that NVML lacks has fallen off the
    bus or failed to initialise: the server looks healthy by every other signal.
    """
    entries: list[dict[str, Any]] = []
    warnings: list[str] = []
    for fn in sorted(functions, key=lambda f: f.pci_bus_id):
        in_nvml = None if nvml_buses is None else fn.pci_bus_id in nvml_buses
        entries.append(
            {
                "pci_bus_id": fn.pci_bus_id,
                "device_id": fn.device_id,
                "driver": fn.driver,
                "in_nvml": in_nvml,
            }
        )
        if in_nvml is False and fn.driver not in ("vfio-pci", "pci-stub"):
            if fn.driver == "nvidia":
                warnings.append(
                    f"NVIDIA GPU at {fn.pci_bus_id} is on the PCI bus (driver nvidia) but NVML "
                    "does not show it: fallen off the bus or failed to initialise (check dmesg "
                    "for Xid 79)"
                )
            else:
                bound = f"bound to {fn.driver}" if fn.driver else "with no driver bound"
                warnings.append(
                    f"NVIDIA GPU at {fn.pci_bus_id} is on the PCI bus {bound}; NVML does not "
                    "show it"
                )
    return entries, warnings


def sort_links(links: list[dict[str, str]]) -> list[dict[str, str]]:
    def end_key(end: str) -> tuple[int, int, str]:
        kind, _, name = end.partition(":")
        return (0, int(name), "") if kind == "gpu" else (1, 0, name)

    return sorted(links, key=lambda link: (end_key(link["a"]), end_key(link["b"])))


def finish(report: dict[str, Any]) -> dict[str, Any]:
    """Deterministic order and schema bounds: equal facts give an equal report (the backend
    answers an unchanged report with a cheap heartbeat), and a huge server is trimmed (NIC
    pairs first) rather than refused."""
    extra: list[str] = []
    if len(report.get("nics", [])) > MAX_NICS:
        extra.append(f"{len(report['nics'])} NICs; the report lists the first {MAX_NICS}")
        report["nics"] = report["nics"][:MAX_NICS]
        kept = {f"nic:{nic['name']}" for nic in report["nics"]}
        report["links"] = [
            link
            for link in report.get("links", [])
            if all(end.startswith("gpu:") or end in kept for end in (link["a"], link["b"]))
        ]
    if len(report.get("links", [])) > MAX_LINKS:
        extra.append(f"{len(report['links'])} links; NIC-to-NIC links left out")
        report["links"] = [link for link in report["links"] if link["a"].startswith("gpu:")][
            :MAX_LINKS
        ]
    warnings = [w[:500] for w in dict.fromkeys([*report.get("warnings", []), *extra])]
    if len(warnings) > MAX_WARNINGS:
        warnings = [*warnings[: MAX_WARNINGS - 1], f"... {len(warnings) - MAX_WARNINGS + 1} more"]
    report["warnings"] = warnings
    if "links" in report:
        report["links"] = sort_links(report["links"])
    return report


# -- the entry point ------------------------------------------------------------------------


def collect(
    backend: NvmlBackend,
    host: SysHost,
    *,
    collected_at: str | None = None,
    proc_root: str | Path | None = None,
) -> dict[str, Any]:
    """Collect one report. Never raises for NVML or host trouble: it lands in the report.

    NVML missing (no driver, no library) gives `gpus: []` with `nvml_error` saying why;
    callers decide what exit status that deserves. Each GPU's compute processes are named
    from `proc_root` (default: the host root's `proc`, i.e. `/proc` live).
    """
    facts = host.facts()
    identity = server_key(facts)
    nics = host.nics()
    warnings: list[str] = list(host.warnings)
    gpus: list[dict[str, Any]] = []
    handles: dict[int, Any] = {}
    links_by_index: dict[int, list[Any]] = {}
    driver: dict[str, Any] | None = None
    nvml_error: str | None = None

    try:
        backend.init()
        driver = {
            "driver_version": backend.driver_version(),
            "cuda_version": backend.cuda_driver_version(),
            "nvml_version": backend.nvml_version(),
        }
        count = backend.device_count()
    except NvmlUnavailableError as exc:
        nvml_error = str(exc)[:500]
        count = 0
    except NvmlError as exc:
        nvml_error = f"NVML failed: {exc}"[:500]
        count = 0

    for index in range(count):
        gpu, handle, links = _walk_gpu(backend, index, identity)
        # On x86 NVML knows no NUMA node for a GPU (only coherent Grace systems do): the
        # kernel's view of the PCI function answers the same question.
        if gpu["numa_node"] is None and gpu["pci_bus_id"]:
            gpu["numa_node"] = host.pci_numa_node(gpu["pci_bus_id"])
        if gpu["cpu_affinity"] is None and gpu["pci_bus_id"]:
            gpu["cpu_affinity"] = host.pci_local_cpus(gpu["pci_bus_id"])
        gpus.append(gpu)
        if handle is not None:
            handles[index] = handle
        links_by_index[index] = links

    procs = Path(proc_root) if proc_root is not None else host.root / "proc"
    warnings.extend(attach_processes(backend, gpus, handles, procs))
    widths, switch_count = nvlink_classes(gpus, links_by_index)

    def gpu_pair_class(a: int, b: int) -> str | None:
        if (a, b) in widths:
            return f"NV{widths[(a, b)]}"
        if a not in handles or b not in handles:
            return None
        try:
            return backend.common_ancestor(handles[a], handles[b])
        except NvmlError:
            return None

    links = device_links(host, gpus, nics, gpu_pair_class)
    nvml_buses = None if nvml_error else {g["pci_bus_id"] for g in gpus if g.get("pci_bus_id")}
    pci_gpus, pci_warnings = pci_gpu_entries(host.nvidia_pci_functions(), nvml_buses)
    if nvml_error and any(fn["driver"] == "nvidia" for fn in pci_gpus):
        warnings.append(f"NVIDIA GPUs are bound to the nvidia driver but NVML failed: {nvml_error}")
    warnings.extend(gpu_warnings(gpus))
    warnings.extend(nic_warnings(nics))
    warnings.extend(health_warnings(gpus))
    warnings.extend(pci_warnings)

    report: dict[str, Any] = {
        "schema": SCHEMA_VERSION,
        "agent": {"version": __version__, "source": backend.source},
        "collected_at": collected_at or utc_now(),
        "host": facts,
        "driver": driver,
        "nvml_error": nvml_error,
        "gpus": gpus,
        "nics": nics,
        "disks": host.disks(),
        "links": links,
        "nvswitch_count": switch_count if gpus else None,
        "pci_gpus": pci_gpus,
        "warnings": warnings,
    }
    return finish(report)
