"""The fleet simulator: believable servers from the fake profiles, pushed through the real API.

Each simulated server is a `FakeMachine` run through the agent's real collector
(`simulator.reports`), so its report is exactly what the agent would send from such a
machine. Used by `python -m simulator fleet`, the benchmarks and the backend's demo:

    from simulator.fleet import fleet, push_reports
    reports = [s.report() for s in fleet({"h100": 8, "l40s": 2}, seed=0)]
    results = push_reports(url, tokens, reports, concurrency=8)

Identities (hostnames, UUIDs, serials, MACs) are random but reproducible from the seed, so
pushing the same fleet twice updates the same servers.
"""

from __future__ import annotations

import ipaddress
import random
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from agent.transport import DeliveryError, PermanentError, Sender, Transport

from .fake_nvml import FakeMachine
from .profiles import PROFILES, build, kvm_host, rand_uuid
from .reports import simulate_report

_HOSTNAMES = {
    "h100": "dgx-h100",
    "h100-lost": "dgx-h100",
    "h100-gpu-error": "dgx-h100",
    "a100-mig": "dgx-a100",
    "l40s": "gpu-l40s",
    "cpu-only": "login",
    "kvm-host": "kvm",
    "kvm-vm": "gpu-vm",
    "gb200": "gb200",
}
SERVERS_PER_RACK = 4
GUESTS_PER_HOST = 2


@dataclass
class SimulatedServer:
    """One server of a simulated fleet and the rack it stands in (reports carry no rack)."""

    machine: FakeMachine
    rack: str

    @property
    def hostname(self) -> str:
        return self.machine.hostname

    @property
    def profile(self) -> str:
        return self.machine.profile

    def report(self) -> dict[str, Any]:
        return simulate_report(self.machine)


def parse_mix(text: str | None, servers: int | None = None) -> dict[str, int]:
    """`h100=10,a100-mig=1` -> counts per profile. With `servers`, the numbers are weights
    and the fleet of that size is split in proportion (largest remainders first)."""
    weights: dict[str, int] = {}
    for part in (text or "h100=1").split(","):
        if not part.strip():
            continue
        name, sep, value = part.partition("=")
        name = name.strip()
        if name not in PROFILES:
            raise ValueError(f"unknown profile {name!r} (known: {', '.join(PROFILES)})")
        try:
            weight = int(value) if sep else 1
        except ValueError:
            raise ValueError(f"profile weight for {name} is not a number: {value!r}") from None
        if weight < 0:
            raise ValueError(f"profile weight for {name} is negative")
        weights[name] = weights.get(name, 0) + weight
    total = sum(weights.values())
    if total == 0:
        raise ValueError("the profile mix is empty")
    if servers is None or servers == total:
        return {k: v for k, v in weights.items() if v}
    if servers < 0:
        raise ValueError("the number of servers is negative")
    shares = {k: servers * v / total for k, v in weights.items()}
    counts = {k: int(share) for k, share in shares.items()}
    left = servers - sum(counts.values())
    for name in sorted(shares, key=lambda k: shares[k] - counts[k], reverse=True)[:left]:
        counts[name] += 1
    return {k: v for k, v in counts.items() if v}


def fleet(counts: dict[str, int], *, seed: int | str = 0) -> list[SimulatedServer]:
    """Servers for the given profile counts. VMs are assigned to KVM hosts two by two, so a
    host's libvirt guests carry exactly its VMs' system UUIDs."""
    numbers: dict[str, int] = {}
    machines: list[FakeMachine] = []

    def next_name(profile: str) -> tuple[str, int]:
        prefix = _HOSTNAMES.get(profile, profile)
        numbers[prefix] = numbers.get(prefix, 0) + 1
        return f"{prefix}-{numbers[prefix]:02d}", numbers[prefix]

    vms = []
    for _ in range(counts.get("kvm-vm", 0)):
        name, number = next_name("kvm-vm")
        vms.append(build("kvm-vm", seed=seed, hostname=name, number=number))
    for profile, count in counts.items():
        if profile == "kvm-vm":
            continue
        for _ in range(count):
            name, number = next_name(profile)
            if profile == "kvm-host":
                rng = random.Random(f"{seed}:{profile}:{number}")
                mine = vms[(number - 1) * GUESTS_PER_HOST : number * GUESTS_PER_HOST]
                guests = [(vm.system_uuid or rand_uuid(rng), vm.hostname) for vm in mine]
                while len(guests) < GUESTS_PER_HOST:
                    guests.append((rand_uuid(rng), f"{name}-guest-{len(guests) + 1}"))
                machines.append(kvm_host(rng, name, number, guests=guests))
            else:
                machines.append(build(profile, seed=seed, hostname=name, number=number))
    machines.extend(vms)
    for position, machine in enumerate(machines):
        _number_addresses(machine, position)
    return [
        SimulatedServer(machine, f"rack-{position // SERVERS_PER_RACK + 1:02d}")
        for position, machine in enumerate(machines)
    ]


def _number_addresses(machine: FakeMachine, position: int) -> None:
    """Each IPv4 address on its network again, its host part from the server's place in the
    fleet: the profiles number hosts per profile (dgx-h100-01 and dgx-a100-01 are both
    "number 1"), and one address on two servers is a finding (`ip_address_duplicate`). An
    address whose network has no room for the fleet keeps the profile's host part."""
    for nic in machine.nics:
        numbered = []
        for address in nic.addresses:
            interface = ipaddress.ip_interface(address)
            network = interface.network
            if interface.version == 4 and position + 21 < network.num_addresses - 1:
                host = network.network_address + position + 21
                numbered.append(f"{host}/{network.prefixlen}")
            else:
                numbered.append(address)
        nic.addresses = numbered


@dataclass
class PushResult:
    hostname: str
    outcome: str  # "sent", "refused" or "unreachable"
    answer: dict[str, Any] | None = None
    error: str | None = None


def push_reports(
    url: str,
    tokens: Sequence[str],
    reports: Sequence[dict[str, Any]],
    concurrency: int = 8,
    *,
    ca_bundle: str | None = None,
    insecure: bool = False,
    attempts: int = 3,
) -> list[PushResult]:
    """POST report i with token i, `concurrency` at a time; results in report order.

    A token is bound to the first server that reports with it, so each report needs its own;
    raises ValueError when there are fewer tokens than reports.
    """
    if len(tokens) < len(reports):
        raise ValueError(
            f"{len(reports)} servers need {len(reports)} tokens (one each: a token is bound "
            f"to the first server it reports); got {len(tokens)}"
        )

    def push(position: int) -> PushResult:
        report = reports[position]
        hostname = str(report.get("host", {}).get("hostname", f"server-{position}"))
        transport = Transport(url, tokens[position], ca_bundle=ca_bundle, insecure=insecure)
        try:
            delivery = Sender(transport, None, attempts=attempts).deliver(report)
        except PermanentError as exc:
            return PushResult(hostname, "refused", error=str(exc))
        except DeliveryError as exc:
            return PushResult(hostname, "unreachable", error=str(exc))
        return PushResult(hostname, "sent", answer=delivery.answer)

    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        return list(pool.map(push, range(len(reports))))
