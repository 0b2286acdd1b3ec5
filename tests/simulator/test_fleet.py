"""The fleet simulator: profile mixes, the demo fleet, and pushing with one token per server."""

from __future__ import annotations

import json

import pytest

from simulator.demo import demo_fleet, demo_servers
from simulator.fleet import fleet, parse_mix, push_reports
from tests.agent.http_backend import ScriptedBackend, free_port
from tests.agent.test_transport import simulator_cli


@pytest.mark.parametrize(
    ("text", "servers", "expected"),
    [
        ("h100=10,a100-mig=1", None, {"h100": 10, "a100-mig": 1}),
        ("h100=10,a100-mig=1", 22, {"h100": 20, "a100-mig": 2}),
        ("h100=10,a100-mig=1", 5, {"h100": 5}),
        ("h100=1,l40s=1,cpu-only=1", 4, {"h100": 2, "l40s": 1, "cpu-only": 1}),
        ("l40s", None, {"l40s": 1}),
    ],
)
def test_profile_mix(text, servers, expected):
    counts = parse_mix(text, servers)
    assert counts == expected
    assert sum(counts.values()) == (servers if servers is not None else sum(expected.values()))


@pytest.mark.parametrize("bad", ["h200=1", "h100=x", "h100=-1", "h100=0", ","])
def test_bad_profile_mix(bad):
    with pytest.raises(ValueError):
        parse_mix(bad)


def test_fleet_identities_are_unique_and_vms_sit_on_their_hosts():
    servers = fleet({"h100": 3, "kvm-host": 2, "kvm-vm": 4, "l40s": 1}, seed=5)
    reports = [server.report() for server in servers]
    hostnames = [r["host"]["hostname"] for r in reports]
    assert len(set(hostnames)) == len(hostnames) == 10
    assert len({r["host"]["system_uuid"] for r in reports}) == 10
    gpu_uuids = [g["uuid"] for r in reports for g in r["gpus"]]
    assert len(set(gpu_uuids)) == len(gpu_uuids)
    by_name = {r["host"]["hostname"]: r for r in reports}
    for host, vms in (
        ("kvm-01", ("gpu-vm-01", "gpu-vm-02")),
        ("kvm-02", ("gpu-vm-03", "gpu-vm-04")),
    ):
        guests = {g["uuid"] for g in by_name[host]["host"]["guests"]}
        assert guests == {by_name[vm]["host"]["system_uuid"] for vm in vms}
    assert [s.rack for s in servers[:5]] == ["rack-01"] * 4 + ["rack-02"]


def test_demo_fleet(validate):
    servers = demo_servers(seed=0)
    reports = [s.report() for s in servers]
    for report in reports:
        validate(report)
    profiles = [s.profile for s in servers]
    h100 = [r for r, p in zip(reports, profiles, strict=True) if p.startswith("h100")]
    assert len(h100) == 10 and all(len(r["pci_gpus"]) == 8 for r in h100)
    lost = [r for r in h100 if any(p["in_nvml"] is False for p in r["pci_gpus"])]
    assert len(lost) == 1 and len(lost[0]["gpus"]) == 7
    (a100,) = [r for r, p in zip(reports, profiles, strict=True) if p == "a100-mig"]
    assert sum(len(g.get("mig_devices", [])) for g in a100["gpus"]) == 17
    (host,) = [r for r, p in zip(reports, profiles, strict=True) if p == "kvm-host"]
    vms = [r for r, p in zip(reports, profiles, strict=True) if p == "kvm-vm"]
    assert {g["uuid"] for g in host["host"]["guests"]} == {r["host"]["system_uuid"] for r in vms}
    assert profiles.count("l40s") == 3 and profiles.count("cpu-only") == 1
    assert len(reports) == 18


def test_demo_fleet_is_reproducible_from_its_seed():
    def identities(seed):
        return [
            (s.hostname, s.machine.system_uuid, [g.uuid for g in s.machine.gpus])
            for s in demo_servers(seed)
        ]

    assert identities(1) == identities(1)
    assert identities(1) != identities(2)
    reports = demo_fleet(seed=1)
    assert [r["host"]["system_uuid"] for r in reports] == [u for _, u, _ in identities(1)]


def test_push_reports_uses_token_i_for_report_i():
    reports = [s.report() for s in fleet({"l40s": 2, "cpu-only": 1}, seed=3)]
    tokens = [f"caa_token_{i}" for i in range(3)]
    backend = ScriptedBackend()
    try:
        results = push_reports(backend.url, tokens, reports, concurrency=3)
        assert [r.outcome for r in results] == ["sent"] * 3
        sent = {
            request["headers"]["Authorization"]: json.loads(request["body"])
            for request in backend.requests
        }
        for i, report in enumerate(reports):
            assert sent[f"Token caa_token_{i}"]["host"]["hostname"] == report["host"]["hostname"]
    finally:
        backend.close()


def test_push_reports_needs_a_token_per_server():
    reports = [{"host": {"hostname": "a"}}, {"host": {"hostname": "b"}}]
    with pytest.raises(ValueError, match="2 servers need 2 tokens"):
        push_reports("http://127.0.0.1:9", ["only-one"], reports)


def test_push_reports_to_an_unreachable_backend():
    results = push_reports(
        f"http://127.0.0.1:{free_port()}", ["t"], [{"host": {"hostname": "a"}}], attempts=1
    )
    assert results[0].outcome == "unreachable" and "unreachable" in results[0].error


def test_fleet_command(tmp_path):
    backend = ScriptedBackend()
    tokens = tmp_path / "tokens"
    tokens.write_text("".join(f"caa_t{i}\n" for i in range(4)))
    try:
        done = simulator_cli(
            "fleet",
            "--url",
            backend.url,
            "--token-file",
            str(tokens),
            "--servers",
            "4",
            "--profile-mix",
            "h100=3,a100-mig=1",
            "--concurrency",
            "2",
            "--seed",
            "9",
        )
        assert done.returncode == 0, done.stderr
        assert "4 of 4 reports sent" in done.stdout and "dgx-a100-01" in done.stdout
        assert len(backend.requests) == 4
        assert "caa_t" not in done.stdout + done.stderr
    finally:
        backend.close()


def test_fleet_with_too_few_tokens_fails_in_one_line(tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text("caa_t0\n")
    done = simulator_cli(
        "fleet", "--url", "http://127.0.0.1:9", "--token-file", str(tokens), "--servers", "3"
    )
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1
    assert "3 servers need 3 tokens" in done.stderr
