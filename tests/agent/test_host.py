"""Host facts from hand-made /sys, /proc and /etc trees, and PCI path classification."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.host import SysHost, parse_ib_rate_mbps, parse_ip_addr
from agent.pcitopo import classify_pci_paths, pci_path_from_sysfs


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def link(root: Path, rel: str, target: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    (root / target).mkdir(parents=True, exist_ok=True)
    os.symlink(os.path.relpath(root / target, path.parent), path)


def no_commands(argv):
    return None


def test_placeholder_system_uuid_is_dropped_with_a_warning(tmp_path):
    write(tmp_path, "sys/class/dmi/id/product_uuid", "03000200-0400-0500-0006-000700080009")
    write(tmp_path, "etc/machine-id", "0123456789abcdef0123456789abcdef")
    host = SysHost(tmp_path, run=no_commands)
    facts = host.facts()
    assert facts["system_uuid"] is None
    assert facts["machine_id"] == "0123456789abcdef0123456789abcdef"
    assert "placeholder" in host.warnings[0]


def test_system_uuid_is_lower_cased_and_dmi_placeholders_are_null(tmp_path):
    write(tmp_path, "sys/class/dmi/id/product_uuid", "4C4C4544-0042-3510-8051-B3C04F4A4B32")
    write(tmp_path, "sys/class/dmi/id/sys_vendor", "Dell Inc.")
    write(tmp_path, "sys/class/dmi/id/product_serial", "To Be Filled By O.E.M.")
    facts = SysHost(tmp_path, run=no_commands).facts()
    assert facts["system_uuid"] == "4c4c4544-0042-3510-8051-b3c04f4a4b32"
    assert facts["vendor"] == "Dell Inc." and facts["serial"] is None


def test_cpu_memory_numa_os_kernel(tmp_path):
    blocks = []
    for cpu in range(8):  # 2 sockets x 2 cores x 2 threads
        socket, core = (cpu // 2) % 2, cpu % 2
        blocks.append(
            f"processor\t: {cpu}\nmodel name\t: AMD EPYC 9354 32-Core Processor\n"
            f"physical id\t: {socket}\ncore id\t\t: {core}\nflags\t\t: fpu sse\n"
        )
    write(tmp_path, "proc/cpuinfo", "\n".join(blocks))
    write(tmp_path, "proc/meminfo", "MemTotal:       16384 kB\nMemFree:        1 kB")
    for node in (0, 1):
        (tmp_path / f"sys/devices/system/node/node{node}").mkdir(parents=True)
    (tmp_path / "sys/devices/system/node/possible").write_text("0-1\n")
    write(
        tmp_path, "etc/os-release", 'NAME="Rocky Linux"\nPRETTY_NAME="Rocky Linux 9.4 (Blue Onyx)"'
    )
    write(tmp_path, "proc/sys/kernel/osrelease", "5.14.0-427.el9.x86_64")
    write(tmp_path, "proc/sys/kernel/hostname", "gpu-a01")
    write(tmp_path, "proc/sys/kernel/domainname", "(none)")
    facts = SysHost(tmp_path, run=no_commands).facts()
    assert facts["cpu_model"] == "AMD EPYC 9354 32-Core Processor"
    assert (facts["cpu_sockets"], facts["cpu_cores"], facts["cpu_threads"]) == (2, 4, 8)
    assert facts["memory_total_bytes"] == 16384 * 1024
    assert facts["numa_nodes"] == 2
    assert facts["os_name"] == "Rocky Linux 9.4 (Blue Onyx)"
    assert facts["kernel"] == "5.14.0-427.el9.x86_64"
    assert facts["hostname"] == "gpu-a01" and facts["fqdn"] is None


def test_arm_cpu_topology_comes_from_sysfs(tmp_path):
    write(tmp_path, "proc/cpuinfo", "processor\t: 0\nBogoMIPS\t: 2000\n\nprocessor\t: 1\n")
    for cpu in (0, 1):
        write(tmp_path, f"sys/devices/system/cpu/cpu{cpu}/topology/physical_package_id", "0")
        write(tmp_path, f"sys/devices/system/cpu/cpu{cpu}/topology/core_id", str(cpu))
    facts = SysHost(tmp_path, run=no_commands).cpu()
    assert (facts["cpu_sockets"], facts["cpu_cores"], facts["cpu_threads"]) == (1, 2, 2)


@pytest.mark.parametrize(
    ("detect", "vendor", "product", "flags", "expected"),
    [
        ("kvm\n", None, None, "", {"is_virtual": True, "hypervisor": "kvm"}),
        ("none\n", "QEMU", None, "", {"is_virtual": False, "hypervisor": None}),
        (
            None,
            "QEMU",
            "Standard PC (Q35 + ICH9, 2009)",
            "",
            {"is_virtual": True, "hypervisor": "kvm"},
        ),
        (None, "VMware, Inc.", "VMware7,1", "", {"is_virtual": True, "hypervisor": "vmware"}),
        (
            None,
            "Supermicro",
            "SYS-421GE",
            "fpu hypervisor",
            {"is_virtual": True, "hypervisor": None},
        ),
        (None, "Supermicro", "SYS-421GE", "fpu sse", {"is_virtual": False, "hypervisor": None}),
    ],
)
def test_virtualization(tmp_path, detect, vendor, product, flags, expected):
    if vendor:
        write(tmp_path, "sys/class/dmi/id/sys_vendor", vendor)
    if product:
        write(tmp_path, "sys/class/dmi/id/product_name", product)
    write(tmp_path, "proc/cpuinfo", f"processor\t: 0\nflags\t\t: {flags}\n")

    def run(argv):
        return detect if argv[0] == "systemd-detect-virt" else None

    assert SysHost(tmp_path, run=run).virtualization() == expected


def test_libvirt_guests_from_domain_files(tmp_path):
    for name, uuid in (
        ("vm-a", "AAAAAAAA-0000-4000-8000-000000000001"),
        ("vm-b", "bbbbbbbb-0000-4000-8000-000000000002"),
    ):
        write(
            tmp_path,
            f"etc/libvirt/qemu/{name}.xml",
            f"<domain><name>{name}</name><uuid>{uuid}</uuid></domain>",
        )
    write(tmp_path, "etc/libvirt/qemu/broken.xml", "<domain><name>")
    write(tmp_path, "run/libvirt/qemu/vm-a.pid", "4242")
    # a transient domain: running, with no definition in /etc
    write(
        tmp_path,
        "run/libvirt/qemu/scratch.xml",
        "<domstatus state='running'><domain><name>scratch</name>"
        "<uuid>cccccccc-0000-4000-8000-000000000003</uuid></domain></domstatus>",
    )
    guests = SysHost(tmp_path, run=no_commands).guests()
    assert guests == [
        {"uuid": "aaaaaaaa-0000-4000-8000-000000000001", "name": "vm-a", "state": "running"},
        {"uuid": "bbbbbbbb-0000-4000-8000-000000000002", "name": "vm-b", "state": "shut off"},
        {"uuid": "cccccccc-0000-4000-8000-000000000003", "name": "scratch", "state": "running"},
    ]


def test_libvirt_guests_from_virsh_and_none_without_libvirt(tmp_path):
    def run(argv):
        if argv[0] == "virsh":
            return "1b4e28ba-2fa1-11d2-883f-0016d3cca427\n\nC0FFEE00-2fa1-11d2-883f-0016d3cca427\n"
        return None

    guests = SysHost(tmp_path, run=run).guests()
    assert [g["uuid"] for g in guests] == [
        "1b4e28ba-2fa1-11d2-883f-0016d3cca427",
        "c0ffee00-2fa1-11d2-883f-0016d3cca427",
    ]
    facts = SysHost(tmp_path, run=no_commands).facts()
    assert "guests" not in facts  # not a libvirt host: no claim either way


def make_pci(root: Path, path: str, vendor: str, cls: str, driver: str | None, numa: int) -> str:
    bus = path.rsplit("/", 1)[-1]
    rel = f"sys/devices/{path}"
    write(root, f"{rel}/vendor", vendor)
    write(root, f"{rel}/class", cls)
    write(root, f"{rel}/device", "0x2330")
    write(root, f"{rel}/numa_node", str(numa))
    if driver:
        link(root, f"{rel}/driver", f"sys/bus/pci/drivers/{driver}")
    link(root, f"sys/bus/pci/devices/{bus}", rel)
    return rel


def test_nvidia_pci_functions_with_their_drivers(tmp_path):
    make_pci(tmp_path, "pci0000:15/0000:15:01.0/0000:19:00.0", "0x10de", "0x030200", "nvidia", 0)
    make_pci(tmp_path, "pci0000:37/0000:37:01.0/0000:3b:00.0", "0x10de", "0x030000", "vfio-pci", 0)
    make_pci(tmp_path, "pci0000:48/0000:48:01.0/0000:4c:00.0", "0x10de", "0x030200", None, 1)
    make_pci(
        tmp_path, "pci0000:00/0000:00:02.0/0000:05:00.0", "0x10de", "0x068000", "nvidia-nvswitch", 0
    )
    make_pci(tmp_path, "pci0000:00/0000:00:03.0/0000:06:00.0", "0x15b3", "0x020700", "mlx5_core", 0)
    found = SysHost(tmp_path, run=no_commands).nvidia_pci_functions()
    assert [(f.pci_bus_id, f.driver, f.numa_node) for f in found] == [
        ("0000:19:00.0", "nvidia", 0),
        ("0000:3b:00.0", "vfio-pci", 0),
        ("0000:4c:00.0", None, 1),
    ]
    host = SysHost(tmp_path, run=no_commands)
    assert host.pci_path("00000000:19:00.0") == ["pci0000:15", "0000:15:01.0", "0000:19:00.0"]
    assert host.pci_numa_node("0000:4C:00.0") == 1
    assert host.pci_path("0000:99:00.0") == []


def test_nics_rdma_with_netdev_plain_and_virtual(tmp_path):
    nic = make_pci(
        tmp_path, "pci0000:15/0000:15:01.0/0000:18:00.0", "0x15b3", "0x020700", "mlx5_core", 0
    )
    (tmp_path / nic / "net/ibp24s0").mkdir(parents=True)
    link(tmp_path, "sys/class/infiniband/mlx5_0/device", nic)
    write(tmp_path, "sys/class/infiniband/mlx5_0/ports/1/rate", "400 Gb/sec (4X NDR)")
    write(tmp_path, "sys/class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE")
    write(tmp_path, "sys/class/infiniband/mlx5_0/ports/1/link_layer", "InfiniBand")
    link(tmp_path, "sys/class/net/ibp24s0/device", nic)
    write(tmp_path, "sys/class/net/ibp24s0/address", "00:00:10:49:fe:80")
    eth = make_pci(
        tmp_path, "pci0000:00/0000:00:1c.0/0000:01:00.0", "0x8086", "0x020000", "i40e", 0
    )
    link(tmp_path, "sys/class/net/eno1/device", eth)
    write(tmp_path, "sys/class/net/eno1/address", "3c:ec:ef:00:00:01")
    write(tmp_path, "sys/class/net/eno1/speed", "10000")
    write(tmp_path, "sys/class/net/eno1/operstate", "up")
    write(tmp_path, "sys/class/net/eno1/type", "1")
    write(tmp_path, "sys/class/net/br0/address", "3c:ec:ef:00:00:01")  # a bridge: no device
    write(tmp_path, "sys/class/net/lo/address", "00:00:00:00:00:00")

    def run(argv):
        return (
            "1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever\n"
            "2: eno1    inet 10.0.0.5/16 brd 10.0.255.255 scope global eno1\\ valid_lft forever\n"
            "2: eno1    inet6 fe80::1/64 scope link \\       valid_lft forever\n"
            "3: ibp24s0    inet 192.168.0.5/24 scope global ibp24s0\\       valid_lft forever\n"
        )

    host = SysHost(tmp_path, run=run)
    nics = host.nics()
    assert [n["name"] for n in nics] == ["eno1", "mlx5_0"]
    eno1, mlx = nics
    assert eno1 == {
        "name": "eno1",
        "netdev": "eno1",
        "kind": "ethernet",
        "mac": "3c:ec:ef:00:00:01",
        "pci_bus_id": "0000:01:00.0",
        "numa_node": 0,
        "speed_mbps": 10000,
        "state": "up",
        "addresses": ["10.0.0.5/16"],
    }
    assert mlx["netdev"] == "ibp24s0" and mlx["kind"] == "infiniband"
    assert mlx["speed_mbps"] == 400000 and mlx["state"] == "up"
    assert mlx["pci_bus_id"] == "0000:18:00.0" and mlx["addresses"] == ["192.168.0.5/24"]
    assert host.facts()["addresses"] == ["10.0.0.5/16", "192.168.0.5/24"]


def test_unreadable_speed_of_a_down_link_is_null(tmp_path):
    eth = make_pci(tmp_path, "pci0000:00/0000:00:1c.0/0000:01:00.0", "0x8086", "0x020000", "igb", 0)
    link(tmp_path, "sys/class/net/eno2/device", eth)
    write(tmp_path, "sys/class/net/eno2/speed", "-1")
    assert SysHost(tmp_path, run=no_commands).nics()[0]["speed_mbps"] is None


def test_an_empty_root_still_gives_facts(tmp_path, validate):
    facts = SysHost(tmp_path, run=no_commands).facts()
    assert facts["hostname"] == "localhost"
    assert facts["system_uuid"] is None and facts["cpu_threads"] is None


def test_small_parsers():
    assert parse_ib_rate_mbps("200 Gb/sec (4X HDR)") == 200000
    assert parse_ib_rate_mbps("2.5 Gb/sec (1X SDR)") == 2500
    assert parse_ib_rate_mbps("garbage") is None
    assert parse_ip_addr("4: eth0@if5    inet 10.1.2.3/24 scope global eth0\n") == {
        "eth0": ["10.1.2.3/24"]
    }


# -- PCI paths --------------------------------------------------------------------------------

SW = ["pci0000:15", "0000:15:01.0", "0000:16:00.0"]  # root port, then a switch's upstream port


@pytest.mark.parametrize(
    ("a", "b", "numa", "expected"),
    [
        (
            [*SW, "0000:17:00.0", "0000:18:00.0"],
            [*SW, "0000:17:01.0", "0000:19:00.0"],
            (0, 0),
            "PIX",
        ),
        (
            ["pci0000:00", "0000:00:01.0", "0000:01:00.0"],
            ["pci0000:00", "0000:00:01.0", "0000:01:00.1"],
            (0, 0),
            "PIX",
        ),
        (
            [*SW, "0000:17:00.0", "0000:18:00.0", "0000:19:00.0", "0000:1a:00.0"],
            [*SW, "0000:17:01.0", "0000:1b:00.0", "0000:1c:00.0", "0000:1d:00.0"],
            (0, 0),
            "PXB",
        ),
        (
            ["pci0000:00", "0000:00:01.0", "0000:01:00.0"],
            ["pci0000:00", "0000:00:02.0", "0000:02:00.0"],
            (0, 0),
            "PHB",
        ),
        (
            ["pci0000:15", "0000:15:01.0", "0000:19:00.0"],
            ["pci0000:37", "0000:37:01.0", "0000:3b:00.0"],
            (0, 0),
            "NODE",
        ),
        (
            ["pci0000:15", "0000:15:01.0", "0000:19:00.0"],
            ["pci0000:97", "0000:97:01.0", "0000:9b:00.0"],
            (0, 1),
            "SYS",
        ),
        (
            ["pci0000:15", "0000:15:01.0", "0000:19:00.0"],
            ["pci0000:97", "0000:97:01.0", "0000:9b:00.0"],
            (-1, None),
            "NODE",
        ),
        ([], ["pci0000:97", "0000:97:01.0"], (0, 0), None),
    ],
)
def test_pci_path_classes(a, b, numa, expected):
    assert classify_pci_paths(a, b, *numa) == expected
    assert classify_pci_paths(b, a, *reversed(numa)) == expected


def test_pci_path_from_sysfs_keeps_pci_functions_only():
    real = "/sys/devices/pci0000:00/0000:00:03.0/virtio2/net/eth0"
    assert pci_path_from_sysfs(real) == ["pci0000:00", "0000:00:03.0"]
    assert pci_path_from_sysfs("/sys/devices/platform/serial8250") == []


def test_rotating_privacy_addresses_are_left_out():
    output = (
        "2: eth0    inet6 2001:db8::1/64 scope global dynamic mngtmpaddr\\ valid_lft 1\n"
        "2: eth0    inet6 2001:db8::beef/64 scope global temporary dynamic\\ valid_lft 1\n"
    )
    assert parse_ip_addr(output) == {"eth0": ["2001:db8::1/64"]}


def test_sriov_virtual_functions_are_not_nics(tmp_path):
    pf = make_pci(
        tmp_path, "pci0000:15/0000:15:01.0/0000:18:00.0", "0x15b3", "0x020000", "mlx5_core", 0
    )
    vf = make_pci(
        tmp_path, "pci0000:15/0000:15:01.0/0000:18:00.2", "0x15b3", "0x020000", "mlx5_core", 0
    )
    link(tmp_path, f"{vf}/physfn", pf)
    for name, device in (("ens1f0np0", pf), ("ens1f0v0", vf)):
        link(tmp_path, f"sys/class/net/{name}/device", device)
    for name, device in (("mlx5_0", pf), ("mlx5_2", vf)):
        link(tmp_path, f"sys/class/infiniband/{name}/device", device)
        write(tmp_path, f"sys/class/infiniband/{name}/ports/1/link_layer", "Ethernet")
    (tmp_path / pf / "net/ens1f0np0").mkdir(parents=True)
    (tmp_path / vf / "net/ens1f0v0").mkdir(parents=True)
    nics = SysHost(tmp_path, run=no_commands).nics()
    assert [(n["name"], n["netdev"]) for n in nics] == [("mlx5_0", "ens1f0np0")]
