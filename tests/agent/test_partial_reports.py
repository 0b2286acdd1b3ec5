"""Reports that know they describe less than the machine has: `partial: true`, never a
quietly smaller server.

`nvidia-smi -L` is always partial; a capture cut short (`-q -x` mid-GPU or before
`</nvidia_smi_log>`, `-q` mid-GPU, a `topo -m` without its NIC legend) is refused unless
`--allow-partial`, then sent partial; a whole capture listing fewer GPUs than attached is sent
partial with a warning; a saved kernel log alone names the server it came from. Fixtures of
our own in tests/fixtures/agent/, in the shapes users paste.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent import mig
from agent.sources import nvidia_smi_list
from agent.sources.saved import build_saved_report, parse_nvidia_smi
from agent.sources.smi_types import SmiParseError
from agent.sources.topo_matrix import parse_topo_matrix
from agent.transport import Spool

from .conftest import AGENT_FIXTURES, REPO
from .test_cli import one_line_failure
from .test_transport import TOKEN, agent, backend  # noqa: F401 - backend is a fixture

F = AGENT_FIXTURES
XML_8 = F / "nvsmi-q-x-8xh100.xml"
XML_CUT_MID_GPU = F / "nvsmi-q-x-8xh100-cut-mid-gpu.xml"
XML_CUT_BEFORE_CLOSE = F / "nvsmi-q-x-8xh100-cut-before-close.xml"
XML_TRIMMED = F / "nvsmi-q-x-8xh100-trimmed-to-4.xml"
TEXT_8 = F / "nvsmi-q-8xh100.txt"
TEXT_CUT_MID_GPU = F / "nvsmi-q-8xh100-cut-mid-gpu.txt"
TOPO_8 = F / "topo-8gpu-4nic.txt"
TOPO_LEGEND_LOST = F / "topo-8gpu-4nic-legend-lost.txt"
TOPO_LEGEND_SHORT = F / "topo-8gpu-4nic-legend-short.txt"
LIST_NO_MIG = F / "nvsmi-L-8xh100-no-mig.txt"
LIST_MIXED_CRLF = F / "nvsmi-L-8xa100-mig-on-2-crlf.txt"
LIST_R450 = F / "nvsmi-L-4xa100-driver450-mig.txt"
EVENTS_LOG = REPO / "tests" / "fixtures" / "health" / "dmesg-ctime.log"
CUT_SHORT = (XML_CUT_MID_GPU, XML_CUT_BEFORE_CLOSE, TEXT_CUT_MID_GPU)
LEGEND_CUT = (TOPO_LEGEND_LOST, TOPO_LEGEND_SHORT)


def collect(*args: str) -> tuple[dict | None, str, int]:
    done = agent("collect", *args)
    return (json.loads(done.stdout) if done.stdout else None), done.stderr, done.returncode


def push(url: str, token: Path, *args: str):
    return agent("push", "--url", url, "--token-file", str(token), "--retries", "0", *args)


@pytest.fixture
def token(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    return path


def source_args(path: Path) -> tuple[str, str]:
    return ("--topology" if path.name.startswith("topo-") else "--nvidia-smi-xml", str(path))


# -- nvidia-smi -L ----------------------------------------------------------------------------


def test_list_of_eight_gpus_without_mig_gives_eight_gpus_marked_partial(validate):
    report = build_saved_report(smi_log=parse_nvidia_smi(LIST_NO_MIG.read_bytes()), hostname="h")
    validate(report)
    assert report["partial"] is True
    assert report["partial_reason"].startswith("built from `nvidia-smi -L`")
    assert "no PCI bus ids" in report["partial_reason"]
    assert [g["index"] for g in report["gpus"]] == list(range(8))
    assert {g["name"] for g in report["gpus"]} == {"NVIDIA H100 80GB HBM3"}
    assert len({g["uuid"] for g in report["gpus"]}) == 8
    assert all(g["uuid"].startswith("GPU-") and "uuid_synthetic" not in g for g in report["gpus"])
    # unknown, not false: -L says nothing of MIG mode, bus ids or memory
    assert {
        (g["pci_bus_id"], g["memory_total_bytes"], g["mig_mode_current"]) for g in report["gpus"]
    } == {(None, None, None)}
    assert report["driver"] is None and report["links"] == [] and report["warnings"] == []


def test_list_with_mig_on_two_of_eight_crlf_and_trailing_blanks_is_read_whole(validate):
    data = LIST_MIXED_CRLF.read_bytes()
    assert b"\r\n" in data and b"  \r\n" in data and b" \t\r\n" in data  # the fixture's shape
    log = parse_nvidia_smi(data)
    assert log.warnings == []
    plain = parse_nvidia_smi(
        "\n".join(line.rstrip() for line in data.decode().split("\r\n")).encode()
    )
    assert log.gpus == plain.gpus
    mig_on = [g["index"] for g in log.gpus if g.get("mig_mode_current")]
    assert mig_on == [2, 5]
    assert [m["profile"] for m in log.gpus[2]["mig_devices"]] == [
        "3g.40gb",
        "2g.20gb",
        "1g.10gb",
        "1g.10gb",
    ]
    assert all(m["uuid"].startswith("MIG-") for m in log.gpus[2]["mig_devices"])
    # the current form gives no GPU/compute instance ids
    assert {m["gpu_instance_id"] for m in log.gpus[5]["mig_devices"]} == {None}

    report = build_saved_report(smi_log=log, hostname="a100-8")
    validate(report)
    assert report["partial"] is True and len(report["gpus"]) == 8
    # sent with the profiles and UUIDs -L gives, their instance ids null (unknown)
    sent = {g["index"]: g.get("mig_devices") for g in report["gpus"] if g.get("mig_devices")}
    assert sorted(sent) == [2, 5]
    assert [(m["uuid"], m["profile"]) for m in sent[2]] == [
        (m["uuid"], m["profile"]) for m in log.gpus[2]["mig_devices"]
    ]
    assert {(m["gpu_instance_id"], m["compute_instance_id"]) for m in sent[5]} == {(None, None)}
    assert report["gpus"][2]["mig_mode_current"] is True
    assert report["warnings"] == []


def test_r450_list_gives_mig_devices_with_instance_ids_from_their_uuids(validate):
    log = parse_nvidia_smi(LIST_R450.read_bytes())
    report = build_saved_report(smi_log=log, hostname="a100-r450")
    validate(report)
    assert report["partial"] is True and report["warnings"] == []
    layout = {
        g["index"]: [
            (m["profile"], m["gpu_instance_id"], m["compute_instance_id"])
            for m in g.get("mig_devices", [])
        ]
        for g in report["gpus"]
    }
    assert layout == {
        0: [("3g.20gb", 1, 0), ("2g.10gb", 5, 0), ("1g.5gb", 13, 0)],
        1: [("1c.3g.20gb", 2, 0), ("1c.3g.20gb", 2, 1), ("1c.3g.20gb", 2, 2)],
        2: [("7g.40gb", 0, 0)],
        3: [],
    }
    gpu1 = report["gpus"][1]
    assert [m["uuid"] for m in gpu1["mig_devices"]] == [
        f"MIG-{gpu1['uuid']}/2/{ci}" for ci in range(3)
    ]
    assert report["gpus"][3]["mig_mode_current"] is None  # no MIG lines: mode unknown
    assert {mig.parse_mig_profile(m["profile"])[0] for m in gpu1["mig_devices"]} == {"3g.20gb"}


def test_list_samples_read_to_the_last_byte(sample_bytes, validate):
    a100 = build_saved_report(
        smi_log=parse_nvidia_smi(sample_bytes("nvsmi-L-a100-40gb-mig-mixed-driver450-nvdocs.txt")),
        hostname="a100",
    )
    validate(a100)
    (gpu,) = a100["gpus"]
    assert gpu["uuid"] == "GPU-4200ccc0-2667-d4cb-9137-f932c716232a"
    assert [
        (m["profile"], m["gpu_instance_id"], m["compute_instance_id"]) for m in gpu["mig_devices"]
    ] == [
        ("3g.20gb", 2, 0),
        ("2g.10gb", 3, 0),
        ("1g.5gb", 9, 0),
    ]
    h100_log = parse_nvidia_smi(sample_bytes("nvsmi-L-h100-mig-mixed-nvdocs.txt"))
    assert h100_log.warnings == []  # CRLF throughout, every line read
    (h100,) = h100_log.gpus
    assert h100["name"] == "NVIDIA H100 80GB HBM3"
    assert [(m["profile"], m["uuid"]) for m in h100["mig_devices"]] == [
        ("3g.40gb", "MIG-7089d0f3-293f-58c9-8f8c-5ea666eedbde"),
        ("2g.20gb", "MIG-56c30729-347f-5dd6-8da0-c3cc59e969e0"),
        ("1g.10gb", "MIG-9d14fb21-4ae1-546f-a636-011582899c39"),
        ("1g.10gb", "MIG-0f709664-740c-52b0-ae79-3e4c9ede6d3b"),
    ]


def test_list_profiles_are_named_by_the_one_mig_rule():
    assert nvidia_smi_list.mig_profile_name is mig.mig_profile_name
    log = nvidia_smi_list.parse_nvidia_smi_list(
        "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-b4895dbf-9350-2524-a89b-98161ddd9fe4)\n"
        "  MIG 1g.10gb+me Device 0: (UUID: MIG-7089d0f3-293f-58c9-8f8c-5ea666eedbde)\n"
    )
    assert log.gpus[0]["mig_devices"][0]["profile"] == mig.mig_profile_name("MIG 1g.10gb+me")


def test_a_list_cut_inside_a_uuid_leaves_that_gpu_out_with_a_warning(validate):
    data = LIST_NO_MIG.read_text()
    cut = data[: data.rindex("GPU-") + 12]  # the last line ends inside GPU 7's UUID
    log = parse_nvidia_smi(cut)
    assert [g["index"] for g in log.gpus] == list(range(7))
    assert log.warnings == [
        "nvidia-smi -L: line 8 is not a GPU or MIG device line (cut short, or something else "
        "pasted with the output): left out"
    ]
    report = build_saved_report(smi_log=log, hostname="h")
    validate(report)
    assert report["partial"] is True and len(report["gpus"]) == 7


def test_an_r450_mig_line_under_another_gpu_is_not_trusted():
    lines = LIST_R450.read_text().splitlines()
    # GPU 0's first MIG line moved under GPU 3, whose UUID it does not name
    moved = [*lines[:1], *lines[2:], lines[1]]
    log = parse_nvidia_smi("\n".join(moved) + "\n")
    assert "mig_devices" not in log.gpus[3]
    assert [m["gpu_instance_id"] for m in log.gpus[0]["mig_devices"]] == [5, 13]
    assert "line 11 is not a GPU or MIG device line" in log.warnings[0]


def test_collect_and_push_send_a_list_marked_partial(backend, token, validate):  # noqa: F811
    report, stderr, status = collect("--nvidia-smi-xml", str(LIST_R450), "--hostname", "a100")
    assert status == 0 and stderr == ""
    validate(report)
    done = push(backend.url, token, "--nvidia-smi-xml", str(LIST_R450), "--hostname", "a100")
    assert done.returncode == 0, done.stderr
    (body,) = backend.bodies()
    validate(body)
    assert body["partial"] is True and body["partial_reason"] == report["partial_reason"]
    assert [g["uuid"] for g in body["gpus"]] == [g["uuid"] for g in report["gpus"]]


def test_help_names_allow_partial_and_list_output():
    done = agent("collect", "--help")
    text = " ".join(done.stdout.split())
    assert "--allow-partial" in text and "`nvidia-smi -L`" in text
    assert "--allow-partial" in " ".join(agent("push", "--help").stdout.split())


# -- captures cut short -----------------------------------------------------------------------


@pytest.mark.parametrize("path", [*CUT_SHORT, *LEGEND_CUT], ids=lambda p: p.name)
def test_collect_refuses_a_cut_capture_in_one_line(path):
    done = agent("collect", *source_args(path), "--hostname", "dgx-cut")
    one_line_failure(done, 2, f"bad input: {path}: ")
    assert "cut short" in done.stderr and "refused (--allow-partial sends" in done.stderr


@pytest.mark.parametrize("path", [*CUT_SHORT, *LEGEND_CUT], ids=lambda p: p.name)
def test_push_with_a_cut_capture_sends_nothing_even_from_its_spool(
    path,
    backend,  # noqa: F811
    token,
    tmp_path,
):
    spool = Spool(tmp_path / "spool")
    waiting = spool.put(b'{"spooled": "earlier report"}')
    done = push(
        backend.url,
        token,
        *source_args(path),
        "--hostname",
        "dgx-cut",
        "--spool",
        str(spool.directory),
    )
    one_line_failure(done, 2, f"bad input: {path}: ")
    assert backend.requests == []
    assert spool.pending() == [waiting]


def test_xml_cut_mid_gpu_is_sent_partial_only_when_allowed(validate):
    report, stderr, status = collect(
        "--nvidia-smi-xml", str(XML_CUT_MID_GPU), "--hostname", "dgx", "--allow-partial"
    )
    assert status == 0, stderr
    validate(report)
    assert report["partial"] is True
    assert report["partial_reason"].startswith(
        "the nvidia-smi -q -x output ends before </nvidia_smi_log>: it was cut short; GPU "
        "0000:9a:00.0 is read only in part"
    )
    whole = build_saved_report(smi_log=parse_nvidia_smi(XML_8.read_bytes()), hostname="dgx")
    assert [g["uuid"] for g in report["gpus"]] == [g["uuid"] for g in whole["gpus"][:5]]
    cut_gpu = report["gpus"][4]  # cut after its UUID: its bus id from <gpu id=...>, no more
    assert (cut_gpu["pci_bus_id"], cut_gpu["vbios_version"]) == ("0000:9a:00.0", None)
    assert whole["gpus"][4]["vbios_version"] == "96.00.74.00.0D"
    lines = stderr.strip().splitlines()
    assert len(lines) == 2 and all(
        line.startswith("cluster-atlas-agent: warning: ") for line in lines
    )
    assert "8 GPUs are attached but the file describes 5" in lines[1]


def test_xml_cut_before_the_closing_element_is_sent_whole_but_partial_when_allowed(validate):
    report, _, status = collect(
        "--nvidia-smi-xml", str(XML_CUT_BEFORE_CLOSE), "--hostname", "dgx", "--allow-partial"
    )
    assert status == 0
    validate(report)
    assert len(report["gpus"]) == 8 and report["partial"] is True
    assert report["partial_reason"] == (
        "the nvidia-smi -q -x output ends before </nvidia_smi_log>: it was cut short"
    )


def test_text_cut_mid_gpu_is_sent_partial_only_when_allowed(validate):
    report, _, status = collect(
        "--nvidia-smi-xml", str(TEXT_CUT_MID_GPU), "--hostname", "dgx", "--allow-partial"
    )
    assert status == 0
    validate(report)
    assert len(report["gpus"]) == 5 and report["partial"] is True
    assert "GPU 0000:9a:00.0 ends before `Processes`" in report["partial_reason"]
    assert "8 GPUs are attached but the capture describes 5" in report["partial_reason"]


@pytest.mark.parametrize(
    ("data", "what"),
    [
        (XML_8.read_text()[: XML_8.read_text().index("<uuid>", 4000) + 16], "xml"),
        (TEXT_8.read_text()[: TEXT_8.read_text().index("GPU UUID", 2000) + 60], "text"),
    ],
)
def test_a_gpu_cut_inside_its_uuid_is_left_out_not_renamed(data, what, validate):
    log = parse_nvidia_smi(data)
    assert log.cut and log.incomplete == [len(log.gpus) - 1], what
    report = build_saved_report(smi_log=log, hostname="dgx")
    validate(report)
    whole = parse_nvidia_smi((XML_8 if what == "xml" else TEXT_8).read_bytes())
    real = {g["uuid"] for g in whole.gpus}
    assert len(report["gpus"]) == len(log.gpus) - 1
    assert {g["uuid"] for g in report["gpus"]} <= real  # no cut UUID, no synthetic one
    assert any("cut before the end of its UUID: left out" in w for w in report["warnings"])


def test_a_whole_capture_of_fewer_gpus_than_attached_is_sent_partial_without_a_flag(
    backend,  # noqa: F811
    token,
    validate,
):
    report, stderr, status = collect("--nvidia-smi-xml", str(XML_TRIMMED), "--hostname", "dgx")
    assert status == 0
    validate(report)
    assert len(report["gpus"]) == 4 and report["partial"] is True
    assert report["partial_reason"] == (
        "nvidia-smi says 8 GPUs are attached but the capture describes 4 (a capture filtered "
        "or trimmed)"
    )
    (line,) = stderr.strip().splitlines()
    assert "warning" in line and "8 GPUs are attached but the file describes 4" in line
    done = push(backend.url, token, "--nvidia-smi-xml", str(XML_TRIMMED), "--hostname", "dgx")
    assert done.returncode == 0, done.stderr
    (body,) = backend.bodies()
    assert body["partial"] is True and len(body["gpus"]) == 4


@pytest.mark.parametrize(
    "path", [XML_8, TEXT_8, TOPO_8, F / "topo-4gpu-no-nics.txt"], ids=lambda p: p.name
)
def test_whole_captures_are_not_partial(path, validate):
    report, stderr, status = collect(*source_args(path), "--hostname", "dgx")
    assert status == 0 and stderr == ""
    validate(report)
    assert report["partial"] is False and report["partial_reason"] is None


def test_a_single_gpu_matrix_without_nics_is_fine(samples):
    report, stderr, status = collect(
        "--topology", str(samples / "topo-1xl40s-ansi-escapes-utku.txt"), "--hostname", "l40s"
    )
    assert (status, stderr, report["partial"]) == (0, "", False)


def test_a_matrix_without_its_nic_legend_keeps_gpu_links_and_names_no_nic(validate):
    report, _, status = collect(
        "--topology", str(TOPO_LEGEND_LOST), "--hostname", "dgx", "--allow-partial"
    )
    assert status == 0
    validate(report)
    assert report["partial"] is True
    assert "the NIC Legend does not name NIC0, NIC1, NIC2, NIC3" in report["partial_reason"]
    assert report["nics"] == []
    assert all(
        link["a"].startswith("gpu:") and link["b"].startswith("gpu:") for link in report["links"]
    )
    assert len(report["links"]) == 28  # every GPU pair of 8, NV18
    assert "NIC0" not in json.dumps(report["nics"]) + json.dumps(report["links"])


def test_a_short_legend_names_only_the_nics_it_lists(validate):
    report, _, _ = collect(
        "--topology", str(TOPO_LEGEND_SHORT), "--hostname", "dgx", "--allow-partial"
    )
    validate(report)
    whole, _, _ = collect("--topology", str(TOPO_8), "--hostname", "dgx")
    assert [n["name"] for n in report["nics"]] == ["mlx5_0", "mlx5_1"]
    named = [
        link
        for link in whole["links"]
        if "nic:mlx5_2" not in link.values() and "nic:mlx5_3" not in link.values()
    ]
    assert report["links"] == named
    assert "NIC2" not in json.dumps(report["nics"]) + json.dumps(report["links"])


# -- every prefix: refused, partial, or the whole ---------------------------------------------


def facts(report: dict) -> dict:
    return {k: v for k, v in report.items() if k not in ("collected_at", "warnings")}


@pytest.mark.parametrize("path", [XML_8, TEXT_8, TOPO_8], ids=lambda p: p.name)
def test_every_prefix_of_a_capture_is_refused_partial_or_the_whole(path):
    """What a cut capture cannot do: get through unmarked and describe a smaller server."""
    data = path.read_bytes()
    topo = path.name.startswith("topo-")

    def report_of(chunk: bytes) -> tuple[dict, bool]:
        if topo:
            matrix = parse_topo_matrix(chunk)
            return build_saved_report(topology=matrix, hostname="h"), bool(matrix.cut)
        log = parse_nvidia_smi(chunk)
        return build_saved_report(smi_log=log, hostname="h"), bool(log.cut)

    whole, _ = report_of(data)
    step = 3 if topo else 11
    for at in (*range(0, len(data), step), len(data) - 1):
        try:
            report, refused = report_of(data[:at])
        except SmiParseError:
            continue
        if refused:
            continue
        if report["partial"]:
            continue
        if topo and any("ends inside the NIC Legend line" in w for w in report["warnings"]):
            continue  # a whole matrix saved without its last newline: named, not refused
        assert facts(report) == facts(whole), at


# -- a saved kernel log alone -------------------------------------------------------------------


def test_a_kernel_log_alone_reports_the_server_it_names(validate):
    report, stderr, status = collect(
        "--kernel-log",
        str(EVENTS_LOG),
        "--hostname",
        "gpu-b02",
        "--system-uuid",
        "4C4C4544-0042-3510-8051-B3C04F4A4B32",
    )
    assert status == 0, stderr  # no live NVML asked (this machine has none: that exits 3)
    validate(report)
    assert report["host"] == {
        "hostname": "gpu-b02",
        "system_uuid": "4c4c4544-0042-3510-8051-b3c04f4a4b32",
    }
    assert report["agent"]["source"] == "kernel-log" and report["gpus"] == []
    assert report["partial"] is True and "kernel log alone" in report["partial_reason"]
    assert report["events"] and {e["kind"] for e in report["events"]} >= {"xid"}


def test_push_of_a_kernel_log_alone_sends_the_named_server(backend, token, validate):  # noqa: F811
    done = push(backend.url, token, "--kernel-log", str(EVENTS_LOG), "--hostname", "gpu-b02")
    assert done.returncode == 0, done.stderr
    (body,) = backend.bodies()
    validate(body)
    assert body["host"]["hostname"] == "gpu-b02" and body["partial"] is True
    assert body["gpus"] == [] and body["events"]


def test_a_system_uuid_without_a_hostname_is_refused_with_a_kernel_log():
    done = agent("collect", "--kernel-log", str(EVENTS_LOG), "--system-uuid", "1234")
    one_line_failure(done, 2, "--system-uuid needs --hostname")


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("kernel-log-empty.log", "is empty: it holds no kernel log lines"),
        ("not-a-kernel-log.txt", "none of its first 3 lines is a kernel log line"),
    ],
)
def test_a_kernel_log_without_kernel_lines_is_said_on_stderr_and_in_the_report(name, said):
    path = F / name
    report, stderr, status = collect("--kernel-log", str(path), "--hostname", "gpu-b02")
    assert status == 0 and report["events"] == []
    (line,) = stderr.strip().splitlines()
    assert line.startswith(f"cluster-atlas-agent: warning: {path}: kernel log {path}")
    assert said in line
    assert [w for w in report["warnings"] if said in w] == [line.split(f"{path}: ", 1)[1]]


def test_a_kernel_log_with_lines_and_no_gpu_events_is_quiet():
    report, stderr, status = collect(
        "--kernel-log", str(F / "dmesg-no-gpu-events.log"), "--hostname", "gpu-b02"
    )
    assert (status, stderr, report["events"]) == (0, "", [])
    assert not any("kernel log" in w for w in report["warnings"])


def test_a_system_uuid_with_live_nvml_is_refused_not_ignored():
    done = agent("collect", "--system-uuid", "4c4c4544-0042-3510-8051-b3c04f4a4b32")
    one_line_failure(done, 2, "--system-uuid names the server saved files came from")
