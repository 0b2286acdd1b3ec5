"""Health rules: small pure functions from plain facts to the findings that should be open now.

Each rule reads `EventFact`s (stored event episodes) and/or `GpuState`s (a GPU's current
counters) and returns `FindingFact`s: type, severity, a subject key that names what the finding
is about (stable across runs, so a writer can raise, keep and resolve it), a message and the
action to take. A finding resolves when its rule no longer returns it: the window has passed
without a new failure, the counter went back to zero after a reset, the link trained at full
width again. No queries here; `health.selectors.health_findings` gathers the facts.

Persisting them (beside the scheduler layer's findings) is the caller's business: health does
not import the layer's models; `FindingFact` is the one finding shape every rule family returns
(`clusters.rules.types`, a plain module).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from findings.choices import FindingType
from findings.facts import FindingFact

from .choices import EventKind, Severity

RESET_ACTIONS = frozenset({"gpu_reset", "drain_and_reset", "bus_reset"})
REBOOT_ACTIONS = frozenset({"node_reboot", "system_reboot"})


@dataclass(frozen=True)
class EventFact:
    """One stored event episode, as the rules see it."""

    server_id: int
    hostname: str
    gpu_id: int | None
    gpu_serial: str
    gpu_uuid: str
    pci_bus_id: str
    kind: str
    code: int | None
    severity: str
    action: str
    count: int
    first_seen: datetime
    last_seen: datetime

    @property
    def fatal(self) -> bool:
        return self.severity == Severity.CRITICAL

    @property
    def label(self) -> str:
        if self.kind == EventKind.XID:
            return f"Xid {self.code}"
        if self.kind == EventKind.SXID:
            return f"SXid {self.code}"
        return "fallen off the bus" if self.kind == EventKind.FALLEN_OFF_BUS else "probe failure"

    @property
    def gpu_key(self) -> str:
        """The GPU as an asset: its serial, else its UUID, else its row, else its slot."""
        if self.gpu_serial:
            return f"serial:{self.gpu_serial}"
        if self.gpu_uuid:
            return f"uuid:{self.gpu_uuid}"
        if self.gpu_id:
            return f"gpu:{self.gpu_id}"
        return f"slot:{self.server_id}:{self.pci_bus_id}"


@dataclass(frozen=True)
class GpuState:
    """A GPU's current counters (its current counter sample) and where it sits."""

    gpu_id: int
    server_id: int
    hostname: str
    index: int
    uuid: str
    serial: str
    pci_bus_id: str
    ecc_volatile_uncorrected: int | None = None
    ecc_aggregate_uncorrected: int | None = None
    retired_pages_pending: bool | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    pcie_link_gen_current: int | None = None
    pcie_link_gen_max: int | None = None
    pcie_link_width_current: int | None = None
    pcie_link_width_max: int | None = None
    performance_state: int | None = None
    recovery_action: str = ""

    @property
    def label(self) -> str:
        return f"{self.hostname} GPU {self.index} ({self.serial or self.uuid})"


@dataclass(frozen=True)
class Policy:
    """Windows and thresholds of the rules (the defaults are a starting point, not NVIDIA's)."""

    fatal_window: timedelta = timedelta(hours=24)
    repeat_window: timedelta = timedelta(hours=24)
    repeat_fatal: int = 5  # a fatal Xid this many times in the window
    repeat_codes: dict[int, int] = field(default_factory=lambda: {31: 2, 13: 10})
    slot_window: timedelta = timedelta(days=90)
    slot_gpus: int = 2  # distinct GPUs failing in one slot
    server_window: timedelta = timedelta(days=30)
    server_gpus: int = 3  # distinct GPUs failing in one server


# -- event rules -----------------------------------------------------------------------------


def _recent(events: Iterable[EventFact], now: datetime, window: timedelta) -> list[EventFact]:
    return [e for e in events if e.last_seen >= now - window]


def _by_gpu(events: Iterable[EventFact]) -> dict[tuple[int, str], list[EventFact]]:
    grouped: dict[tuple[int, str], list[EventFact]] = defaultdict(list)
    for event in events:
        grouped[(event.server_id, event.gpu_key)].append(event)
    return grouped


def _where(event: EventFact) -> str:
    gpu = event.gpu_serial or event.gpu_uuid or "unknown GPU"
    bus = f" at {event.pci_bus_id}" if event.pci_bus_id else ""
    return f"{event.hostname}: GPU {gpu}{bus}"


def fatal_xid(events: Iterable[EventFact], now: datetime, policy: Policy) -> list[FindingFact]:
    """A GPU with a fatal event (Xid the catalog says needs a reset or reboot, a fatal SXid,
    fallen off the bus, a failed probe) in the last `fatal_window`."""
    out = []
    recent = [e for e in _recent(events, now, policy.fatal_window) if e.fatal]
    for (server_id, gpu_key), group in sorted(_by_gpu(recent).items()):
        group.sort(key=lambda e: e.last_seen)
        worst = group[-1]
        labels = sorted({e.label for e in group})
        out.append(
            FindingFact(
                type=FindingType.GPU_FATAL_XID,
                severity=Severity.CRITICAL,
                subject=f"{FindingType.GPU_FATAL_XID}:{server_id}:{gpu_key}",
                message=(
                    f"{_where(worst)}: {', '.join(labels)} "
                    f"(last {worst.last_seen:%Y-%m-%d %H:%M} UTC)"
                ),
                action=worst.action,
                server_id=server_id,
                gpu_id=worst.gpu_id,
                details={"codes": labels, "count": sum(e.count for e in group)},
            )
        )
    return out


def repeated_failure(
    events: Iterable[EventFact], now: datetime, policy: Policy
) -> list[FindingFact]:
    """The same GPU failing again: one code `repeat_fatal` times (a fatal one) or as often as
    `repeat_codes` says (Xid 31 twice, Xid 13 ten times) within `repeat_window`."""
    out = []
    counts: dict[tuple[int, str, str], list[EventFact]] = defaultdict(list)
    for event in _recent(events, now, policy.repeat_window):
        counts[(event.server_id, event.gpu_key, event.label)].append(event)
    for (server_id, gpu_key, label), group in sorted(counts.items()):
        code = group[0].code if group[0].kind == EventKind.XID else None
        threshold = policy.repeat_codes.get(code) if code is not None else None
        if threshold is None:
            if not group[0].fatal:
                continue
            threshold = policy.repeat_fatal
        total = sum(e.count for e in group)
        if total < threshold:
            continue
        last = max(group, key=lambda e: e.last_seen)
        hours = int(policy.repeat_window.total_seconds() // 3600)
        out.append(
            FindingFact(
                type=FindingType.GPU_REPEATED_FAILURE,
                severity=Severity.CRITICAL,
                subject=f"{FindingType.GPU_REPEATED_FAILURE}:{server_id}:{gpu_key}:{label}",
                message=f"{_where(last)}: {label} {total} times in {hours} h",
                action=(
                    "Drain the GPU and run diagnostics (dcgmi diag -r 3); if it fails again "
                    "after a reset, replace (RMA) the GPU."
                ),
                server_id=server_id,
                gpu_id=last.gpu_id,
                details={"count": total, "threshold": threshold, "window_hours": hours},
            )
        )
    return out


@dataclass(frozen=True, slots=True)
class RepeatOffender:
    """Where different GPUs keep failing: one slot (server + PCI bus) or one whole server.

    `window` and `gpus` name the Policy fields that say how long to look back and how many
    distinct GPUs make the place the suspect."""

    type: FindingType
    per_slot: bool
    window: str
    gpus: str
    action: str


SLOT_OFFENDER = RepeatOffender(
    type=FindingType.SLOT_REPEATED_FAILURE,
    per_slot=True,
    window="slot_window",
    gpus="slot_gpus",
    action=(
        "Do not install another GPU yet: inspect the slot, riser, cables and "
        "baseboard (and the PCIe switch) first."
    ),
)
SERVER_OFFENDER = RepeatOffender(
    type=FindingType.SERVER_REPEATED_FAILURE,
    per_slot=False,
    window="server_window",
    gpus="server_gpus",
    action=(
        "Drain the server and check what its GPUs share: baseboard, power supplies, "
        "PCIe switches and retimers, cooling, firmware."
    ),
)


def place_repeated_failure(
    events: Iterable[EventFact], now: datetime, policy: Policy, offender: RepeatOffender
) -> list[FindingFact]:
    """Each place (`offender`: a slot or a server) where the policy's number of different GPUs
    failed fatally (an SXid is the switch's, not the GPU's) within its window."""
    window: timedelta = getattr(policy, offender.window)
    needed: int = getattr(policy, offender.gpus)
    out = []
    places: dict[tuple[int, str], list[EventFact]] = defaultdict(list)
    for event in _recent(events, now, window):
        if not event.fatal or event.kind == EventKind.SXID:
            continue
        if not offender.per_slot:
            places[(event.server_id, "")].append(event)
        elif event.pci_bus_id:
            places[(event.server_id, event.pci_bus_id)].append(event)
    for (server_id, bus), group in sorted(places.items()):
        gpus = sorted({e.gpu_key for e in group})
        if len(gpus) < needed:
            continue
        if offender.per_slot:
            subject = f"{offender.type}:{server_id}:{bus}"
            what = f"slot {bus}: {len(gpus)} different GPUs failed there"
            details: dict[str, object] = {"gpus": gpus, "pci_bus_id": bus}
        else:
            subject = f"{offender.type}:{server_id}"
            what = f"{len(gpus)} different GPUs failed"
            details = {"gpus": gpus}
        out.append(
            FindingFact(
                type=offender.type,
                severity=Severity.CRITICAL,
                subject=subject,
                message=f"{group[0].hostname}: {what} in {window.days} days",
                action=offender.action,
                server_id=server_id,
                details=details,
            )
        )
    return out


def slot_repeated_failure(
    events: Iterable[EventFact], now: datetime, policy: Policy
) -> list[FindingFact]:
    """A slot (server + PCI bus) where `slot_gpus` different GPUs failed within `slot_window`:
    the replacements did not help, so the slot, riser or baseboard is the suspect."""
    return place_repeated_failure(events, now, policy, SLOT_OFFENDER)


def server_repeated_failure(
    events: Iterable[EventFact], now: datetime, policy: Policy
) -> list[FindingFact]:
    """A server where `server_gpus` different GPUs failed within `server_window`."""
    return place_repeated_failure(events, now, policy, SERVER_OFFENDER)


# -- counter rules ---------------------------------------------------------------------------


def _gpu_finding(state: GpuState, kind: str, severity: str, message: str, action: str, **details):
    return FindingFact(
        type=kind,
        severity=severity,
        subject=f"{kind}:{state.gpu_id}",
        message=f"{state.label}: {message}",
        action=action,
        server_id=state.server_id,
        gpu_id=state.gpu_id,
        details=details,
    )


def row_remap(states: Iterable[GpuState]) -> list[FindingFact]:
    """Row remapping failed (replace the GPU), or a remap or page retirement waits for a reset."""
    out = []
    for state in states:
        if state.remapped_rows_failure:
            out.append(
                _gpu_finding(
                    state,
                    FindingType.GPU_ROW_REMAP_FAILURE,
                    Severity.CRITICAL,
                    "row remapping failed: the GPU has no spare rows left for a bad one",
                    "Drain the GPU and replace it (RMA).",
                )
            )
        elif state.remapped_rows_pending or state.retired_pages_pending:
            what = "row remap" if state.remapped_rows_pending else "page retirement"
            out.append(
                _gpu_finding(
                    state,
                    FindingType.GPU_MEMORY_REPAIR_PENDING,
                    Severity.WARNING,
                    f"a {what} is pending",
                    "Drain the GPU and reset it (or reboot) to apply the repair.",
                )
            )
    return out


def uncorrected_ecc(states: Iterable[GpuState]) -> list[FindingFact]:
    """Uncorrected ECC errors since the driver loaded (critical); where only lifetime counts
    are known, lifetime uncorrected errors (a warning)."""
    out = []
    for state in states:
        if state.ecc_volatile_uncorrected:
            out.append(
                _gpu_finding(
                    state,
                    FindingType.GPU_UNCORRECTED_ECC,
                    Severity.CRITICAL,
                    f"{state.ecc_volatile_uncorrected} uncorrected ECC errors since the driver "
                    "loaded",
                    "Drain the GPU and reset it; replace it if the errors come back.",
                    volatile=state.ecc_volatile_uncorrected,
                )
            )
        elif state.ecc_volatile_uncorrected is None and state.ecc_aggregate_uncorrected:
            out.append(
                _gpu_finding(
                    state,
                    FindingType.GPU_UNCORRECTED_ECC,
                    Severity.WARNING,
                    f"{state.ecc_aggregate_uncorrected} uncorrected ECC errors in its lifetime",
                    "Watch it: replace the GPU if the count grows.",
                    aggregate=state.ecc_aggregate_uncorrected,
                )
            )
    return out


def pcie_degraded(states: Iterable[GpuState]) -> list[FindingFact]:
    """A PCIe link narrower than its best, or slower while the GPU runs at full performance
    (P0): in lower P-states the link generation drops by design."""
    out = []
    for state in states:
        problems = []
        width, width_max = state.pcie_link_width_current, state.pcie_link_width_max
        if width and width_max and width < width_max:
            problems.append(f"x{width} of x{width_max}")
        gen, gen_max = state.pcie_link_gen_current, state.pcie_link_gen_max
        if gen and gen_max and gen < gen_max and state.performance_state == 0:
            problems.append(f"gen {gen} of gen {gen_max} at full load")
        if problems:
            out.append(
                _gpu_finding(
                    state,
                    FindingType.GPU_PCIE_DEGRADED,
                    Severity.WARNING,
                    f"PCIe link runs {' and '.join(problems)}",
                    "Reseat the GPU; check the slot, riser and retimers, and the BIOS PCIe "
                    "settings.",
                    width=width,
                    width_max=width_max,
                    gen=gen,
                    gen_max=gen_max,
                )
            )
    return out


def recovery_action(states: Iterable[GpuState]) -> list[FindingFact]:
    """The driver asks for a reset or a reboot (NVML's recommended recovery action)."""
    out = []
    for state in states:
        action = state.recovery_action
        if action in RESET_ACTIONS:
            severity, what = Severity.CRITICAL, "Drain the GPU and reset it."
        elif action in REBOOT_ACTIONS:
            severity, what = Severity.CRITICAL, "Drain the node and reboot it."
        elif action in ("drain_p2p", "recover_imex_domain"):
            severity, what = Severity.WARNING, f"Follow the driver: {action.replace('_', ' ')}."
        else:
            continue
        out.append(
            _gpu_finding(
                state,
                FindingType.GPU_RECOVERY_ACTION,
                severity,
                f"the driver recommends {action.replace('_', ' ')}",
                what,
                recovery_action=action,
            )
        )
    return out


def evaluate(
    states: Iterable[GpuState],
    events: Iterable[EventFact],
    now: datetime,
    policy: Policy | None = None,
) -> list[FindingFact]:
    """Every rule over the facts: the health findings that should be open at `now`."""
    policy = policy or Policy()
    states, events = list(states), list(events)
    return [
        *fatal_xid(events, now, policy),
        *repeated_failure(events, now, policy),
        *slot_repeated_failure(events, now, policy),
        *server_repeated_failure(events, now, policy),
        *row_remap(states),
        *uncorrected_ecc(states),
        *pcie_degraded(states),
        *recovery_action(states),
    ]
