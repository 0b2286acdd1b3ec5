"""The agent's view of the fabric and of local storage: InfiniBand port facts, LLDP
neighbours, NVLink fabric info per GPU, and disks, from fake sysfs trees and fake NVML."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pynvml
import pytest

from agent.collector import collect, nic_warnings
from agent.host import SysHost, parse_guid, parse_lid
from agent.nvml import GpuFabricInfo, PynvmlBackend
from agent.sources.lldp import parse_lldp_neighbors
from simulator.fake_nvml import FakeMachine, FakeNvmlBackend, fake_runner, materialize
from simulator.profiles import build

from .conftest import AGENT_FIXTURES
from .test_host import link, make_pci, no_commands, write

LLDP_JSON0 = (AGENT_FIXTURES / "lldpcli-json0-two-interfaces.json").read_text()


def ib_device(root: Path, name: str, pci: str, netdev: str, **port: str) -> None:
    """An RDMA device with one port; `port` holds the port's files (state, rate, ...)."""
    nic = make_pci(root, pci, "0x15b3", "0x020700", "mlx5_core", 1)
    (root / nic / "net" / netdev).mkdir(parents=True)
    link(root, f"sys/class/infiniband/{name}/device", nic)
    link(root, f"sys/class/net/{netdev}/device", nic)
    write(root, f"sys/class/infiniband/{name}/node_guid", "b83f:d203:0093:c7a2")
    for rel, text in port.items():
        write(root, f"sys/class/infiniband/{name}/ports/1/{rel.replace('__', '/')}", text)


# -- InfiniBand -----------------------------------------------------------------------------


def test_an_infiniband_nic_reports_its_guids_lid_rate_and_states(tmp_path):
    ib_device(
        tmp_path,
        "mlx5_3",
        "pci0000:9a/0000:9a:01.0/0000:9b:00.0",
        "ibp155s0",
        state="4: ACTIVE",
        phys_state="5: LinkUp",
        rate="400 Gb/sec (4X NDR)",
        link_layer="InfiniBand",
        lid="0x1a2",
        gids__0="fe80:0000:0000:0000:b83f:d203:0093:c7a2",
    )
    (nic,) = SysHost(tmp_path, run=no_commands).nics()
    assert {k: nic[k] for k in ("name", "netdev", "kind", "state", "speed_mbps", "numa_node")} == {
        "name": "mlx5_3",
        "netdev": "ibp155s0",
        "kind": "infiniband",
        "state": "up",
        "speed_mbps": 400000,
        "numa_node": 1,
    }
    assert nic["node_guid"] == "b83fd2030093c7a2"
    assert nic["port_guid"] == "b83fd2030093c7a2" and nic["port_guids"] == ["b83fd2030093c7a2"]
    assert (nic["port_number"], nic["lid"]) == (1, 0x1A2)
    assert nic["rate"] == "400 Gb/sec (4X NDR)"
    assert (nic["phys_state"], nic["link_layer"]) == ("linkup", "infiniband")


def test_a_roce_port_has_no_port_guid_and_a_down_port_no_lid(tmp_path):
    ib_device(
        tmp_path,
        "mlx5_0",
        "pci0000:40/0000:40:01.0/0000:45:00.0",
        "ens1f0np0",
        state="1: DOWN",
        phys_state="3: Disabled",
        rate="100 Gb/sec (4X EDR)",
        link_layer="Ethernet",
        lid="0x0",
        gids__0="fe80:0000:0000:0000:966d:aeff:febc:4ef2",  # from the MAC: no fabric port
    )
    (nic,) = SysHost(tmp_path, run=no_commands).nics()
    assert nic["kind"] == "ethernet" and nic["state"] == "down"
    assert nic["node_guid"] == "b83fd2030093c7a2"  # the device still has one
    assert (nic["port_guid"], nic["port_guids"], nic["lid"]) == (None, [], None)
    assert (nic["phys_state"], nic["link_layer"]) == ("disabled", "ethernet")


def test_plain_netdevs_gain_no_infiniband_fields(tmp_path):
    eth = make_pci(tmp_path, "pci0000:00/0000:00:1c.0/0000:01:00.0", "0x8086", "0x020000", "igb", 0)
    link(tmp_path, "sys/class/net/eno1/device", eth)
    (nic,) = SysHost(tmp_path, run=no_commands).nics()
    assert "node_guid" not in nic and "lldp_neighbors" not in nic


def test_infiniband_ports_that_cannot_carry_traffic_are_warned_about():
    def nic(name, phys, state, rate="400 Gb/sec (4X NDR)", layer="infiniband"):
        return {
            "name": name,
            "netdev": f"ib{name[-1]}",
            "link_layer": layer,
            "port_number": 1,
            "phys_state": phys,
            "state": state,
            "rate": rate,
        }

    warnings = nic_warnings(
        [
            nic("mlx5_0", "linkup", "up"),
            nic("mlx5_1", "polling", "down"),
            nic("mlx5_2", "linkup", "init"),
            nic("mlx5_3", "linkup", "up", rate="100 Gb/sec (1X NDR)"),
            nic("mlx5_4", "polling", "down", layer="ethernet"),  # RoCE: not this rule's
            nic("mlx5_5", "disabled", "down"),  # switched off on purpose
        ]
    )
    assert [w.split(":")[0] for w in warnings] == ["mlx5_1 (ib1)", "mlx5_2 (ib2)", "mlx5_3 (ib3)"]
    assert "no cable" in warnings[0] and "subnet manager" in warnings[1] and "1X" in warnings[2]


@pytest.mark.parametrize(
    ("text", "guid"),
    [
        ("b83f:d203:0093:c7a2", "b83fd2030093c7a2"),
        ("0xB83FD2030093C7A2", "b83fd2030093c7a2"),
        ("0000:0000:0000:0000", None),  # never set
        ("not a guid", None),
        (None, None),
    ],
)
def test_guids_are_16_lower_case_hex_digits_as_ibnetdiscover_prints_them(text, guid):
    assert parse_guid(text) == guid


def test_lids_are_hex_and_zero_is_none():
    assert (parse_lid("0x1a2"), parse_lid("0x0"), parse_lid("junk"), parse_lid(None)) == (
        418,
        None,
        None,
        None,
    )


# -- LLDP -----------------------------------------------------------------------------------


def test_lldp_json0_gives_switch_chassis_port_and_management_address_per_interface():
    found = parse_lldp_neighbors(LLDP_JSON0)
    assert sorted(found) == ["eno1", "ens1f0np0"]
    assert found["ens1f0np0"] == [
        {
            "system_name": "roce-leaf-r1-01",
            "chassis_id": "1c:34:da:5e:60:00",
            "port_id": "swp17s0",
            "port_description": "gpu-l40s-01 rail 1",
            "management_address": "10.10.0.11",
        }
    ]
    assert found["eno1"][0]["system_name"] == "oob-mgmt-01"
    assert found["eno1"][0]["port_id"] == "Ethernet12"


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "lldpd not running",
        "[]",
        '{"lldp": [{"interface": [{"name": 3}]}]}',
        '{"lldp": []}',
    ],
)
def test_anything_but_json0_neighbours_gives_none_and_no_error(text):
    assert parse_lldp_neighbors(text) == {}


def test_nics_carry_the_neighbours_lldpd_hears_on_their_netdev(tmp_path):
    ib_device(
        tmp_path,
        "mlx5_0",
        "pci0000:40/0000:40:01.0/0000:45:00.0",
        "ens1f0np0",
        state="4: ACTIVE",
        link_layer="Ethernet",
    )
    asked = []

    def run(argv):
        asked.append(list(argv))
        return LLDP_JSON0 if argv[0] == "lldpcli" else None

    (nic,) = SysHost(tmp_path, run=run).nics()
    assert ["lldpcli", "-f", "json0", "show", "neighbors", "details"] in asked
    assert [n["system_name"] for n in nic["lldp_neighbors"]] == ["roce-leaf-r1-01"]


def test_the_simulator_answers_lldpcli_like_lldpd(tmp_path, validate):
    machine = build("l40s")
    machine.lldp = {
        "ens1f0np0": ("roce-leaf-01", "1c:34:da:00:00:01", "swp3", "port 3", "10.1.1.1")
    }
    materialize(machine, tmp_path)
    report = collect(FakeNvmlBackend(machine), SysHost(tmp_path, run=fake_runner(machine)))
    validate(report)
    by_name = {n["name"]: n for n in report["nics"]}
    assert by_name["mlx5_0"]["lldp_neighbors"][0]["port_id"] == "swp3"
    assert "lldp_neighbors" not in by_name["mlx5_1"]


# -- disks ----------------------------------------------------------------------------------


def disk_tree(root: Path) -> None:
    """An NVMe drive (namespace below its controller on a PCI function), a SATA disk below
    an AHCI controller, and the software devices that must be left out."""
    nvme_pci = make_pci(
        root, "pci0000:60/0000:60:01.0/0000:61:00.0", "0x144d", "0x010802", "nvme", 1
    )
    controller = f"{nvme_pci}/nvme/nvme0"
    write(root, f"{controller}/model", "SAMSUNG MZWLR3T8HCLS-00A07              ")
    write(root, f"{controller}/serial", "S6EUNA0T123456      ")
    link(root, f"{controller}/device", nvme_pci)
    write(root, f"{nvme_pci}/current_link_speed", "16.0 GT/s PCIe")
    write(root, f"{nvme_pci}/current_link_width", "4")
    block = f"{controller}/nvme0n1"
    write(root, f"{block}/size", str(3840755982336 // 512))
    write(root, f"{block}/queue/rotational", "0")
    link(root, f"{block}/device", controller)
    link(root, "sys/block/nvme0n1", block)

    ahci = make_pci(root, "pci0000:00/0000:00:17.0", "0x8086", "0x010601", "ahci", 0)
    scsi = f"{ahci}/ata1/host0/target0:0:0/0:0:0:0"
    write(root, f"{scsi}/model", "ST4000NM000A-2HZ")
    write(root, f"{scsi}/block/sda/size", str(4000787030016 // 512))
    write(root, f"{scsi}/block/sda/queue/rotational", "1")
    link(root, f"{scsi}/block/sda/device", scsi)
    link(root, "sys/block/sda", f"{scsi}/block/sda")

    for name in ("loop0", "ram0", "dm-0", "md127", "zram0"):
        write(root, f"sys/devices/virtual/block/{name}/size", "2048")
        link(root, f"sys/block/{name}", f"sys/devices/virtual/block/{name}")
    write(root, "sys/devices/virtual/block/sdb/size", "0")  # a card reader, no card
    link(root, "sys/block/sdb", "sys/devices/virtual/block/sdb")


def test_disks_nvme_with_its_pcie_link_and_sata_spinning(tmp_path):
    disk_tree(tmp_path)
    nvme, sata = SysHost(tmp_path, run=no_commands).disks()
    assert nvme == {
        "name": "nvme0n1",
        "model": "SAMSUNG MZWLR3T8HCLS-00A07",
        "serial": "S6EUNA0T123456",
        "size_bytes": 3840755982336,
        "rotational": False,
        "transport": "nvme",
        "pci_bus_id": "0000:61:00.0",
        "pcie_link_speed": "16.0 GT/s",
        "pcie_link_width": 4,
        "numa_node": 1,
    }
    assert sata["name"] == "sda" and sata["transport"] == "sata"
    assert (sata["rotational"], sata["size_bytes"]) == (True, 4000787030016)
    assert (sata["serial"], sata["pcie_link_speed"], sata["pci_bus_id"]) == (
        None,
        None,
        "0000:00:17.0",
    )


def test_no_block_devices_no_disks(tmp_path):
    assert SysHost(tmp_path, run=no_commands).disks() == []


def test_dgx_profiles_report_their_nvme_drives(validate):
    from simulator.reports import simulate_report

    report = simulate_report(build("h100"))
    validate(report)
    assert len(report["disks"]) == 10
    assert {d["transport"] for d in report["disks"]} == {"nvme"}
    assert {d["numa_node"] for d in report["disks"]} == {0, 1}


# -- NVLink fabric ----------------------------------------------------------------------------


def report_of(machine: FakeMachine, root: Path) -> dict:
    materialize(machine, root)
    return collect(FakeNvmlBackend(machine), SysHost(root, run=fake_runner(machine)))


def test_gb200_trays_of_one_rack_share_an_nvlink_fabric(tmp_path, validate):
    first = report_of(build("gb200", number=1), tmp_path / "a")
    last = report_of(build("gb200", number=18), tmp_path / "b")
    next_rack = report_of(build("gb200", number=19), tmp_path / "c")
    for report in (first, last, next_rack):
        validate(report)
    domains = {
        name: {
            (g["fabric_cluster_uuid"], g["fabric_clique_id"], g["fabric_state"]) for g in r["gpus"]
        }
        for name, r in (("first", first), ("last", last), ("next", next_rack))
    }
    assert len(domains["first"]) == 1 and domains["first"] == domains["last"]
    assert domains["next"] != domains["first"]
    ((cluster, clique, state),) = domains["first"]
    assert cluster and clique == 1 and state == "completed"
    assert {link["link_class"] for link in first["links"] if link["a"].startswith("gpu")} >= {
        "NV18"
    }


def test_a_gpu_outside_an_nvlink_fabric_reports_nulls(tmp_path):
    report = report_of(build("l40s"), tmp_path)
    assert {
        (g["fabric_cluster_uuid"], g["fabric_clique_id"], g["fabric_state"]) for g in report["gpus"]
    } == {(None, None, None)}


class FabricStub:
    """Enough of pynvml for gpu_fabric: the real structures and error classes."""

    def __init__(self, state: int, error: type[pynvml.NVMLError] | None = None) -> None:
        self.NVMLError = pynvml.NVMLError
        for name in (
            "NVMLError_NotSupported",
            "NVMLError_NoPermission",
            "NVMLError_FunctionNotFound",
        ):
            setattr(self, name, getattr(pynvml, name))
        self.c_nvmlGpuFabricInfoV_t = pynvml.c_nvmlGpuFabricInfoV_t
        self.c_nvmlGpuFabricInfo_t = pynvml.c_nvmlGpuFabricInfo_t
        self.state, self.error = state, error

    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        pass

    def nvmlErrorString(self, code: int) -> bytes:
        return b"Success" if code == 0 else b"Unknown Error"

    def nvmlDeviceGetGpuFabricInfoV(self, handle, ref) -> int:
        if self.error is not None:
            raise self.error()
        info = ref._obj
        ctypes.memmove(info.clusterUuid, bytes(range(1, 17)), 16)
        info.cliqueId, info.state, info.status = 7, self.state, 0
        return 0


def test_pynvml_fabric_info_becomes_uuid_clique_and_state():
    backend = PynvmlBackend(FabricStub(pynvml.NVML_GPU_FABRIC_STATE_COMPLETED))
    backend.init()
    assert backend.gpu_fabric(object()) == GpuFabricInfo(
        "01020304-0506-0708-090a-0b0c0d0e0f10", 7, "completed", "Success"
    )


@pytest.mark.parametrize(
    ("state", "error"),
    [
        (pynvml.NVML_GPU_FABRIC_STATE_NOT_SUPPORTED, None),
        (pynvml.NVML_GPU_FABRIC_STATE_COMPLETED, pynvml.NVMLError_NotSupported),
    ],
)
def test_pynvml_fabric_info_not_supported_is_none(state, error):
    backend = PynvmlBackend(FabricStub(state, error))
    backend.init()
    assert backend.gpu_fabric(object()) is None
