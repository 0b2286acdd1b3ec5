"""Saved nvidia-smi outputs as real systems print them: a byte-order mark, CRLF, empty
cells, captures cut short, and the wrong nvidia-smi output given."""

from __future__ import annotations

import json

import pytest

from agent.sources.identify import LIST, QUERY, QUERY_XML, TOPOLOGY, output_kind
from agent.sources.nvidia_smi_xml import parse_nvidia_smi_xml
from agent.sources.saved import build_saved_report, parse_nvidia_smi
from agent.sources.smi_types import SmiParseError
from agent.sources.text import TextDecodeError, decode_text
from agent.sources.topo_matrix import parse_topo_matrix

from .conftest import AGENT_FIXTURES, LIST_SAMPLES, NVIDIA_SMI_SAMPLES, TOPOLOGY_SAMPLES
from .test_cli import one_line_failure
from .test_transport import agent

BOM = b"\xef\xbb\xbf"
TOPOLOGY_FILES = (*TOPOLOGY_SAMPLES, "topo-4gpu-legacy-mlx-header.txt")


def topology_bytes(name: str, sample_bytes) -> bytes:
    path = AGENT_FIXTURES / name
    return path.read_bytes() if path.exists() else sample_bytes(name)


def topo_view(topo) -> tuple:
    """Everything a report takes from a matrix, to compare two parses."""
    gpus = [(g.index, g.cpu_affinity, g.numa_node) for g in topo.gpus]
    return gpus, topo.nics, sorted(topo.links)


def smi_view(log) -> tuple:
    return log.driver_version, [json.dumps(gpu, sort_keys=True) for gpu in log.gpus]


# -- the shared decoder -----------------------------------------------------------------------


def test_decoder_drops_the_bom_crlf_and_ansi_escapes_and_nothing_else():
    assert decode_text(BOM + b"GPU0\r\n\x1b[4mX\x1b[0m\tCPU\r\n") == "GPU0\nX\tCPU\n"
    assert decode_text("\ufeffplain") == "plain"
    assert decode_text("a\rb") == "a\rb"  # a lone CR is content, not a line end


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"\xff\xfeG\x00P\x00U\x00", "UTF-16"),
        (b"GPU0 \xe9t\xe9", "not UTF-8 text (bad byte at offset 5)"),
        (b"GPU0\n\x00\x00\x00", "NUL character at line 2 (offset 5)"),
    ],
)
def test_decoder_refuses_what_is_not_utf8_text(data, why):
    with pytest.raises(TextDecodeError, match=r"UTF-16|UTF-8|NUL") as caught:
        decode_text(data)
    assert why in str(caught.value)


@pytest.mark.parametrize("name", TOPOLOGY_FILES)
def test_a_bom_or_crlf_changes_no_topology(name, sample_bytes):
    data = topology_bytes(name, sample_bytes)
    plain = parse_topo_matrix(data)
    for variant in (BOM + data, data.replace(b"\n", b"\r\n"), BOM + data.replace(b"\n", b"\r\n")):
        parsed = parse_topo_matrix(variant)
        assert topo_view(parsed) == topo_view(plain)
        assert parsed.warnings == plain.warnings == []


@pytest.mark.parametrize("name", NVIDIA_SMI_SAMPLES)
def test_a_bom_or_crlf_changes_no_nvidia_smi_capture(name, sample_bytes):
    data = sample_bytes(name)
    plain = parse_nvidia_smi(data)
    for variant in (BOM + data, BOM + data.replace(b"\n", b"\r\n")):
        parsed = parse_nvidia_smi(variant)
        assert smi_view(parsed) == smi_view(plain) and parsed.warnings == plain.warnings


# -- topo -m cells by their place -------------------------------------------------------------


def test_empty_affinity_cells_keep_the_numa_column_in_place():
    topo = parse_topo_matrix((AGENT_FIXTURES / "topo-3gpu-empty-affinity-cells.txt").read_bytes())
    # GPU0: empty CPU Affinity, NUMA 0 (whitespace splitting read CPU "0" and no NUMA);
    # GPU2: both empty, as a VM prints them.
    assert [(g.index, g.cpu_affinity, g.numa_node) for g in topo.gpus] == [
        (0, None, 0),
        (1, "0-15,32-47", 0),
        (2, None, None),
    ]
    links = {(a, b): c for a, b, c in topo.links}
    assert links[("gpu:0", "nic:mlx5_0")] == "PIX" and links[("gpu:1", "nic:mlx5_0")] == "NODE"
    assert topo.warnings == []


def test_older_drivers_double_tabs_after_every_affinity_value():
    # drivers before the GPU NUMA ID column padded CPU and NUMA Affinity with two tabs
    text = (
        "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n"
        "GPU0\t X \tPHB\t\t\t1\n"
        "GPU1\tPHB\t X \t0-31\t\t0\n"
    )
    topo = parse_topo_matrix(text)
    assert [(g.cpu_affinity, g.numa_node) for g in topo.gpus] == [(None, 1), ("0-31", 0)]


def test_a_copy_whose_tabs_became_spaces_keeps_its_empty_cells():
    data = (AGENT_FIXTURES / "topo-3gpu-empty-affinity-cells.txt").read_text()
    expanded = "\n".join(line.expandtabs(8) for line in data.split("\n"))
    assert "\t" not in expanded
    assert topo_view(parse_topo_matrix(expanded)) == topo_view(parse_topo_matrix(data))


def test_a_header_without_the_leading_tab_is_read_the_same():
    text = "GPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\tX\tNV18\t0-1\t0\t\t2\n"
    topo = parse_topo_matrix(text)
    assert (topo.gpus[0].cpu_affinity, topo.gpus[0].numa_node) == ("0-1", 0)
    assert topo.links == [("gpu:0", "gpu:1", "NV18")]


# -- captures cut short -----------------------------------------------------------------------


@pytest.mark.parametrize("name", TOPOLOGY_FILES)
def test_every_prefix_of_a_matrix_is_refused_warned_about_or_the_whole(name, sample_bytes):
    """Cut anywhere, a matrix never gives fewer GPUs, and differs from the whole only with
    a warning that says the capture may be cut short."""
    data = topology_bytes(name, sample_bytes)
    whole = parse_topo_matrix(data)
    header_end = data.index(b"\n", data.index(b"GPU0")) + 1
    for cut in range(len(data)):
        try:
            topo = parse_topo_matrix(data[:cut])
        except SmiParseError as exc:
            assert cut < header_end, (cut, exc)
            continue
        assert len(topo.gpus) == len(whole.gpus), cut
        if not topo.warnings:
            assert topo_view(topo) == topo_view(whole), cut
        else:
            assert any("cut short" in w for w in topo.warnings), (cut, topo.warnings)


def test_missing_rows_are_named_and_the_gpus_still_counted(sample_bytes):
    data = sample_bytes("topo-8xh20-nv18-ibp-nics.txt")
    topo = parse_topo_matrix(data[: data.index(b"\nGPU6 ") + 1])
    assert [g.index for g in topo.gpus] == list(range(8))
    assert topo.gpus[6].cpu_affinity is None and topo.gpus[5].cpu_affinity == "48-95,144-191"
    assert "rows of GPU6 ... NIC4 are missing" in topo.warnings[0]
    links = {(a, b): c for a, b, c in topo.links}
    assert links[("gpu:0", "gpu:7")] == "NV18"  # from GPU0's row


def test_a_row_cut_mid_way_is_named_and_its_last_cell_not_trusted(sample_bytes):
    data = sample_bytes("topo-8xh20-nv18-ibp-nics.txt")
    row = data.index(b"\nGPU3 ") + 1
    topo = parse_topo_matrix(data[: row + 70])  # inside GPU3's row, "NV1" of "NV18"
    assert any("row of GPU3 stops" in w for w in topo.warnings)
    links = {(a, b): c for a, b, c in topo.links}
    assert all(c == "NV18" for (a, b), c in links.items() if a.startswith("gpu:3"))


def test_a_topology_only_report_from_a_cut_matrix_has_every_gpu_and_the_warning(
    sample_bytes, validate
):
    data = sample_bytes("topo-8xh20-nv18-ibp-nics.txt")
    topo = parse_topo_matrix(data[: data.index(b"\nGPU2 ") + 1])
    report = build_saved_report(topology=topo, hostname="h20-cut")
    validate(report)
    assert len(report["gpus"]) == 8
    assert any("cut short" in w for w in report["warnings"])


# -- nvidia-smi -q / -q -x cut short ----------------------------------------------------------


def test_xml_cut_short_lists_the_gpus_it_begins_with_a_warning(sample_bytes, validate):
    data = sample_bytes("nvsmi-q-x-a100-sxm4-40gb-mig-netdata.xml")
    whole = parse_nvidia_smi_xml(data)
    cut = parse_nvidia_smi_xml(data[: data.index(b"<temperature>")])
    assert len(cut.gpus) == 1 and cut.gpus[0]["uuid"] == whole.gpus[0]["uuid"]
    assert "cut short; GPU 0000:00:04.0 is read only in part" in cut.warnings[0]
    validate(build_saved_report(smi_log=cut, hostname="a100-cut"))


def test_every_prefix_of_an_xml_capture_is_refused_or_warned_about(sample_bytes):
    data = sample_bytes("nvsmi-q-x-rtxpro6000-blackwell-v13-telegraf.xml")
    step = max(1, len(data) // 400)
    for cut in (*range(0, len(data), step), len(data) - 1):
        try:
            log = parse_nvidia_smi_xml(data[:cut])
        except SmiParseError:
            assert b"<nvidia_smi_log>" not in data[:cut], cut
            continue
        assert log.warnings, cut


def test_xml_broken_in_the_middle_is_still_an_error(sample_bytes):
    data = sample_bytes("nvsmi-q-x-a100-sxm4-40gb-mig-netdata.xml")
    broken = data.replace(b"</product_name>", b"</product_nam>", 1)
    with pytest.raises(SmiParseError, match="not well-formed XML: mismatched tag"):
        parse_nvidia_smi_xml(broken)


def test_text_cut_short_lists_the_gpus_it_begins_with_a_warning(sample_bytes, validate):
    data = sample_bytes("nvsmi-q-h100x8-gpud.txt")
    fifth = data.index(b"GPU 00000000:9B:00.0")
    log = parse_nvidia_smi(data[: fifth + 2000])
    assert len(log.gpus) == 5 and log.gpus[4]["pci_bus_id"] == "0000:9b:00.0"
    assert "GPU 0000:9b:00.0 ends before `Processes`" in log.warnings[0]
    assert "8 GPUs are attached but the file describes 5" in log.warnings[1]
    validate(build_saved_report(smi_log=log, hostname="h100-cut"))


@pytest.mark.parametrize("name", ["nvsmi-q-h100x8-gpud.txt", "nvsmi-q-h100-mig-enabled-utku.txt"])
def test_whole_text_captures_have_no_cut_warning(name, sample_bytes):
    assert parse_nvidia_smi(sample_bytes(name)).warnings == []


def test_collect_refuses_a_cut_file_and_sends_it_partial_only_when_allowed(
    tmp_path, samples, validate
):
    data = (samples / "nvsmi-q-x-a100-sxm4-40gb-mig-netdata.xml").read_bytes()
    cut = tmp_path / "cut.xml"
    cut.write_bytes(data[: data.index(b"<temperature>")])
    refused = agent("collect", "--nvidia-smi-xml", str(cut), "--hostname", "a100-cut")
    one_line_failure(refused, 2, f"{cut}: the nvidia-smi -q -x output ends before </nvidia_smi")
    assert "--allow-partial" in refused.stderr and refused.stdout == ""

    done = agent(
        "collect", "--nvidia-smi-xml", str(cut), "--hostname", "a100-cut", "--allow-partial"
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    validate(report)
    assert len(report["gpus"]) == 1
    assert report["partial"] is True and "cut short" in report["partial_reason"]
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"cluster-atlas-agent: warning: {cut}: ") and "cut short" in line
    assert any("cut short" in w for w in report["warnings"])


# -- the wrong output given -------------------------------------------------------------------


@pytest.mark.parametrize("name", LIST_SAMPLES)
def test_nvidia_smi_list_output_is_read_as_q_and_named_where_topo_is_expected(name, sample_bytes):
    log = parse_nvidia_smi(sample_bytes(name))
    assert log.partial_reason and "nvidia-smi -L" in log.partial_reason
    assert log.warnings == []  # every line of the sample read, to the last byte
    with pytest.raises(
        SmiParseError, match="this is `nvidia-smi -L` output; give `nvidia-smi topo"
    ):
        parse_topo_matrix(sample_bytes(name))


@pytest.mark.parametrize("name", LIST_SAMPLES)
def test_collect_with_a_list_file_sends_it_partial(name, samples, validate):
    done = agent("collect", "--nvidia-smi-xml", str(samples / name), "--hostname", "x")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    validate(report)
    assert report["partial"] is True and "nvidia-smi -L" in report["partial_reason"]
    assert [gpu["uuid"] for gpu in report["gpus"]] == [
        line.split("UUID: ")[1].rstrip(")\r")
        for line in (samples / name).read_text().splitlines()
        if line.startswith("GPU ")
    ]


@pytest.mark.parametrize("name", LIST_SAMPLES)
def test_a_bom_or_crlf_changes_no_list(name, sample_bytes):
    data = sample_bytes(name)
    plain = parse_nvidia_smi(data)
    for variant in (BOM + data, data.replace(b"\n", b"\r\n"), data.replace(b"\r\n", b"\n")):
        parsed = parse_nvidia_smi(variant)
        assert smi_view(parsed) == smi_view(plain) and parsed.warnings == plain.warnings == []


def test_every_sample_is_identified_as_what_it_is(sample_bytes):
    kinds = {
        name: output_kind(decode_text(sample_bytes(name)))
        for name in (*NVIDIA_SMI_SAMPLES, *TOPOLOGY_SAMPLES, *LIST_SAMPLES)
    }
    assert {name: kind for name, kind in kinds.items()} == {
        **{n: QUERY_XML if n.endswith(".xml") else QUERY for n in NVIDIA_SMI_SAMPLES},
        **dict.fromkeys(TOPOLOGY_SAMPLES, TOPOLOGY),
        **dict.fromkeys(LIST_SAMPLES, LIST),
    }


def test_a_matrix_given_for_q_is_named(sample_bytes):
    with pytest.raises(SmiParseError, match="this is `nvidia-smi topo -m` output"):
        parse_nvidia_smi(sample_bytes("topo-8xh20-nv18-ibp-nics.txt"))
    with pytest.raises(SmiParseError, match="this is `nvidia-smi -q` output"):
        parse_topo_matrix(sample_bytes("nvsmi-q-h100x8-gpud.txt"))
